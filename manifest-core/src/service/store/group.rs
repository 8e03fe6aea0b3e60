//! Group commit, for both backends: concurrent units of write work (publications) share one
//! transaction and one commit. A thread takes every unit queued by the time the previous
//! commit finished (at most [`MAX_GROUP`]), runs each after the units before it, seeing
//! their writes, and commits them together.
//!
//! How a unit that does not keep its writes is undone differs by cost ([`Undo`]): on SQLite
//! each unit runs in its own savepoint (microseconds); on PostgreSQL a savepoint is a round
//! trip under the writers' lock, as long as the unit's own statement, so none is taken: a
//! unit that wrote and then did not keep its writes (or panicked), or a failed statement,
//! rolls the whole group back, and every unit of it is told so. Units are written not to:
//! a publication writes only once it has decided to keep (`service::operations::publish`).

use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender};

use svc_sql::{Param, Sql, SqlError, SqlRow};

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

/// How a unit of a group that does not keep its writes is undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Undo {
    /// Each unit in its own savepoint, rolled back alone.
    Savepoint,
    /// No savepoint: a unit that wrote and did not keep rolls the group back.
    Group,
}

/// Runs the units of a group in `tx`, then commits; see [`Undo`] for a unit that does not
/// keep its writes. A unit that panics keeps nothing.
/// `keys` seal and open secret values in the units' work.
pub(crate) fn run_units<S: Sql>(
    tx: &mut S,
    keys: Keyring,
    units: &mut [Grouped],
    undo: Undo,
) -> Result<(), StoreError> {
    match undo {
        Undo::Savepoint => run_in_savepoints(tx, &keys, units),
        Undo::Group => run_as_one(tx, &keys, units),
    }
}

/// The keys of a store, if started.
type Keyring = Option<std::sync::Arc<svc_keys::Keyring>>;

fn run_unit<S: Sql>(tx: &mut S, keys: &Keyring, unit: &mut Grouped) -> bool {
    let work = std::mem::replace(&mut unit.work, Box::new(|_| false));
    let mut lent = Tx(tx, keys.clone());
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&mut lent))).unwrap_or(false)
}

fn run_as_one<S: Sql>(tx: &mut S, keys: &Keyring, units: &mut [Grouped]) -> Result<(), StoreError> {
    for unit in units.iter_mut() {
        let mut watched = Watched { tx: &mut *tx, wrote: false };
        let keep = run_unit(&mut watched, keys, unit);
        if watched.wrote && !keep {
            return Err(StoreError::Backend(
                "a unit of grouped work wrote and did not keep its writes; its group is rolled back".into(),
            ));
        }
    }
    Ok(tx.commit_tx()?)
}

/// A unit's statements, noting whether any of them wrote.
struct Watched<'a, S> {
    tx: &'a mut S,
    wrote: bool,
}

impl<S: Sql> Sql for Watched<'_, S> {
    const ROW_KEY: &'static str = S::ROW_KEY;
    const BACKEND: svc_sql::Backend = S::BACKEND;

    fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, SqlError> {
        let changed = self.tx.execute(sql, params)?;
        self.wrote |= changed > 0;
        Ok(changed)
    }

    fn execute_unique(&mut self, sql: &str, params: &[Param<'_>]) -> Result<bool, SqlError> {
        let written = self.tx.execute_unique(sql, params)?;
        self.wrote |= written;
        Ok(written)
    }

    fn query(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<SqlRow>, SqlError> {
        // A query that is not a `SELECT` may write (`INSERT ... RETURNING`), and returns what
        // it wrote: one that returned nothing wrote nothing.
        let rows = self.tx.query(sql, params)?;
        self.wrote |= !rows.is_empty() && !sql.trim_start().starts_with("SELECT");
        Ok(rows)
    }

    fn run_plain(&mut self, sql: &str) -> Result<(), SqlError> {
        self.wrote = true;
        self.tx.run_plain(sql)
    }

    fn commit_tx(&mut self) -> Result<(), SqlError> {
        Err(SqlError::Database("a unit of grouped work cannot commit its group".into()))
    }
}

/// Runs each unit in its own savepoint of `tx` (kept or rolled back alone; a unit that
/// panics is rolled back), then commits. The end of one unit's savepoint and the start of
/// the next go together (one round trip on PostgreSQL); `open` says whether a kept unit's
/// savepoint is still to be released.
fn run_in_savepoints<S: Sql>(tx: &mut S, keys: &Keyring, units: &mut [Grouped]) -> Result<(), StoreError> {
    let mut open = false;
    for unit in units.iter_mut() {
        if open {
            tx.run_plains(&["RELEASE unit", "SAVEPOINT unit"])?;
        } else {
            tx.run_plain("SAVEPOINT unit")?;
        }
        let keep = run_unit(&mut *tx, keys, unit);
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
