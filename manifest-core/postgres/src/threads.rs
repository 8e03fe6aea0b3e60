//! Connections owned by threads of their own. The `postgres` client drives each connection
//! on a tokio runtime of its own: connecting, running a statement or dropping a connection
//! on a thread inside another runtime's context panics. The services call their stores from
//! their runtime's threads, so here each connection lives on a dedicated thread that never
//! enters a runtime, and work is sent to it: a [`Session`] holds one such thread for a
//! transaction, sends it each statement as a closure, and waits for the answer over a
//! channel (a few microseconds a statement). It works from any thread, blocking only the
//! caller, as a store operation on SQLite blocks on its disk.
//!
//! The pool is bounded: `size` threads, each with at most one connection, made when first
//! needed and made again after the database dropped it (a restart). A checkout waits at most
//! `wait` for a free thread.

use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{Database, DbError};

/// Work for a connection thread: the connection (none yet, or lost) and the database.
type Job = Box<dyn FnOnce(&mut Option<Connection>, &Database) + Send>;

/// Statements kept prepared per connection, at most (a store has a few dozen).
const PREPARED_MAX: usize = 512;

/// The statements prepared on one connection, by their text: a statement run again is sent
/// once (bind and execute), not parsed and planned again. Shared by both kinds of connection.
#[derive(Default)]
pub(crate) struct PreparedCache(std::collections::HashMap<String, postgres::Statement>);

impl PreparedCache {
    /// The statement prepared for `sql`, if it was.
    pub(crate) fn get(&self, sql: &str) -> Option<postgres::Statement> {
        self.0.get(sql).cloned()
    }

    /// Keeps `statement` for `sql` (all are forgotten past [`PREPARED_MAX`]).
    pub(crate) fn keep(&mut self, sql: &str, statement: &postgres::Statement) {
        if self.0.len() >= PREPARED_MAX {
            self.0.clear();
        }
        self.0.insert(sql.to_owned(), statement.clone());
    }
}

/// A connection and the statements prepared on it.
pub struct Connection {
    client: postgres::Client,
    prepared: PreparedCache,
}

impl Connection {
    /// The client, for what needs no statement kept (`BEGIN`, a migration).
    pub fn client(&mut self) -> &mut postgres::Client {
        &mut self.client
    }

    /// `sql` prepared on this connection, once.
    pub fn prepared(&mut self, sql: &str) -> Result<postgres::Statement, postgres::Error> {
        if let Some(statement) = self.prepared.get(sql) {
            return Ok(statement);
        }
        let statement = self.client.prepare(sql)?;
        self.prepared.keep(sql, &statement);
        Ok(statement)
    }
}

/// One connection thread: where to send its work.
struct Worker {
    jobs: Sender<Job>,
}

/// A bounded set of connection threads for one database.
#[derive(Clone)]
pub struct Pool {
    db: Database,
    idle: Arc<Mutex<Receiver<Worker>>>,
    back: SyncSender<Worker>,
    wait: Duration,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("location", &self.db.location()).field("wait", &self.wait).finish()
    }
}

impl Pool {
    /// `size` connection threads (at least one) for `db`; a checkout waits at most `wait`.
    pub(crate) fn new(db: &Database, size: u32, wait: Duration) -> Pool {
        let size = size.max(1) as usize;
        let (back, idle) = mpsc::sync_channel(size);
        for n in 0..size {
            let (jobs, inbox) = mpsc::channel::<Job>();
            let db = db.clone();
            let spawned = std::thread::Builder::new().name(format!("svc-postgres-{n}")).spawn(move || {
                let mut client: Option<Connection> = None;
                // Ends when every sender (the pool's handle, a session's) is gone; the
                // connection is dropped here, on its own thread.
                while let Ok(job) = inbox.recv() {
                    job(&mut client, &db);
                }
            });
            if spawned.is_ok() {
                let _ = back.send(Worker { jobs });
            }
        }
        Pool { db: db.clone(), idle: Arc::new(Mutex::new(idle)), back, wait }
    }

    /// A session on a free connection thread, waiting at most the pool's wait for one.
    pub fn session(&self) -> Result<Session, DbError> {
        let busy = |reason: String| DbError::Busy { location: self.db.location().to_owned(), reason };
        let idle = self.idle.lock().map_err(|_| busy("a previous checkout panicked".to_owned()))?;
        let worker = idle
            .recv_timeout(self.wait)
            .map_err(|_| busy(format!("every connection stayed busy for {} ms", self.wait.as_millis())))?;
        drop(idle);
        Ok(Session { worker: Some(worker), back: self.back.clone(), db: self.db.clone() })
    }

    /// Where, for messages.
    pub fn location(&self) -> &str {
        self.db.location()
    }
}

/// One connection thread, held until dropped (then it goes back to the pool, after what was
/// sent to it has run).
pub struct Session {
    worker: Option<Worker>,
    back: SyncSender<Worker>,
    db: Database,
}

impl Session {
    /// Runs `work` on the session's connection (connecting first if it has none, or lost
    /// it) and returns its answer.
    pub fn run<R: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection) -> Result<R, postgres::Error> + Send + 'static,
    ) -> Result<R, DbError> {
        self.with(move |client, db| work(client).map_err(|e| db.error(e)))
    }

    /// [`Session::run`] for work that words its own errors (a migration).
    pub fn with<R: Send + 'static>(
        &self,
        work: impl FnOnce(&mut Connection, &Database) -> Result<R, DbError> + Send + 'static,
    ) -> Result<R, DbError> {
        let (answer, answered) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |client, db| {
            let mut result = connected(client, db).and_then(|c| work(c, db));
            let ended = |e: &DbError| matches!(e, DbError::Postgres { source, .. } if crate::ends_connection(source));
            if let Err(e) = &result
                && (client.as_ref().is_some_and(|c| c.client.is_closed()) || ended(e))
            {
                // The database went away: connect again on the next statement.
                *client = None;
                result = Err(DbError::Unreachable { location: db.location().to_owned(), reason: e.to_string() });
            }
            let _ = answer.send(result);
        });
        let gone = || DbError::Busy { location: self.db.location().to_owned(), reason: "its thread ended".to_owned() };
        let worker = self.worker.as_ref().ok_or_else(gone)?;
        worker.jobs.send(job).map_err(|_| gone())?;
        answered.recv().map_err(|_| gone())?
    }

    /// Sends `work` without waiting for it (a rollback at the end of a transaction).
    pub fn send(&self, work: impl FnOnce(&mut Connection) + Send + 'static) {
        if let Some(worker) = &self.worker {
            let _ = worker.jobs.send(Box::new(move |client, _| {
                if let Some(c) = client.as_mut() {
                    work(c);
                }
            }));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.take() {
            let _ = self.back.send(worker);
        }
    }
}

fn connected<'c>(client: &'c mut Option<Connection>, db: &Database) -> Result<&'c mut Connection, DbError> {
    if client.as_ref().is_none_or(|c| c.client.is_closed()) {
        // A new connection prepares its statements anew.
        let made = db.connect().map_err(|e| match e {
            DbError::Postgres { source, .. } => db.unreachable(&source),
            other => DbError::Unreachable { location: db.location().to_owned(), reason: other.to_string() },
        })?;
        *client = Some(Connection { client: made, prepared: PreparedCache::default() });
    }
    client
        .as_mut()
        .ok_or_else(|| DbError::Busy { location: db.location().to_owned(), reason: "no connection".to_owned() })
}
