//! Group commit, for both backends: concurrent units of write work (publications) share one
//! transaction and one commit. A thread takes every unit queued by the time the previous
//! commit finished (at most [`MAX_GROUP`]), runs each in its own savepoint, after the units
//! before it and seeing their writes, and commits them together.

use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender};

use svc_sql::Sql;

use super::rows::Tx;
use super::{GroupedDone, GroupedWork, StoreError};

/// The most units of grouped work one commit takes.
const MAX_GROUP: usize = 64;

/// A unit of grouped work and where its commit's outcome goes.
pub(crate) struct Grouped {
    work: GroupedWork,
    done: GroupedDone,
}

/// Runs a group of units in one transaction of the backend, and commits it.
pub(crate) type RunGroup = Box<dyn FnMut(&mut [Grouped]) -> Result<(), StoreError> + Send>;

/// The group-commit thread's queue, started on first use.
#[derive(Debug, Default)]
pub(crate) struct Group {
    queue: Mutex<Option<Sender<Grouped>>>,
}

impl Group {
    /// Queues a unit; `start` gives the backend's way to run a group when the thread starts.
    pub(crate) fn submit(&self, work: GroupedWork, done: GroupedDone, start: impl FnOnce() -> RunGroup) {
        let gone = || StoreError::Backend("the group-commit thread is gone".into());
        let Ok(mut queue) = self.queue.lock() else { return done(Err(gone())) };
        let sender = queue.get_or_insert_with(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            let run = start();
            // If the thread cannot start, the queue's receiver is dropped and sends fail.
            let _ = std::thread::Builder::new().name("svc-group-commit".into()).spawn(move || group_loop(run, &rx));
            tx
        });
        if let Err(std::sync::mpsc::SendError(unit)) = sender.send(Grouped { work, done }) {
            (unit.done)(Err(gone()));
        }
    }
}

fn group_loop(mut run: RunGroup, queue: &Receiver<Grouped>) {
    while let Ok(first) = queue.recv() {
        let mut units = vec![first];
        while units.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(unit) => units.push(unit),
                Err(_) => break,
            }
        }
        let result = run(&mut units);
        for unit in units {
            (unit.done)(match &result {
                Ok(()) => Ok(()),
                Err(StoreError::Unavailable(e)) => Err(StoreError::Unavailable(e.to_string().into())),
                Err(e) => Err(StoreError::Backend(e.to_string().into())),
            });
        }
    }
}

/// Runs each unit in its own savepoint of `tx` (kept or rolled back alone; a unit that
/// panics is rolled back), then commits. The end of one unit's savepoint and the start of
/// the next go together (one round trip on PostgreSQL); `open` says whether a kept unit's
/// savepoint is still to be released.
pub(crate) fn run_units<S: Sql>(tx: &mut S, units: &mut [Grouped]) -> Result<(), StoreError> {
    let mut open = false;
    for unit in units.iter_mut() {
        let work = std::mem::replace(&mut unit.work, Box::new(|_| false));
        if open {
            tx.run_plains(&["RELEASE unit", "SAVEPOINT unit"])?;
        } else {
            tx.run_plain("SAVEPOINT unit")?;
        }
        let keep = {
            let mut lent = Tx(&mut *tx);
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&mut lent))).unwrap_or(false)
        };
        if keep {
            open = true;
        } else {
            tx.run_plains(&["ROLLBACK TO unit", "RELEASE unit"])?;
            open = false;
        }
    }
    if open {
        tx.run_plain("RELEASE unit")?;
    }
    Ok(tx.commit_tx()?)
}
