//! Connections driven on the caller's async runtime, for statements that each stand alone
//! (one round trip, their own transaction): the publication's hot path. A statement sent
//! from an async task through [`threads`](crate::threads) crosses to the blocking pool, then
//! to its connection's thread, and back twice; here the task writes to the connection's
//! socket through `tokio-postgres` on the runtime it already runs on (docs/performance.md,
//! "Publication under load").
//!
//! A `tokio-postgres` client pipelines: statements from many tasks share one connection, each
//! sent as soon as it is asked and answered in order. So there is no checkout. But a
//! connection's statements run one after another on the server, and a write may wait there
//! for the writers' lock, so reads and writes never share a connection ([`Lane`]): writes
//! have one of their own, reads the rest, each read going to the one with the fewest in
//! flight.
//!
//! Deadlines: a read has the pool's wait, connecting included, and a read that missed it
//! drops its connection (a connection that stopped answering is not kept). A write has the
//! wait to connect; once sent, its outcome is the server's: its connections carry
//! `lock_timeout` = the wait, so a write that cannot have the lock in time fails there, with
//! nothing written, rather than being abandoned by the client and committing later.
//! Connecting is a task of its own, shared by the statements that wait for it, so no
//! statement's deadline cancels it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, timeout_at};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row};

use crate::threads::PreparedCache;
use crate::{Database, DbError};

/// Which connections a statement goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// A read: on the read connections; run once more on a new connection if the database
    /// dropped its own.
    Read,
    /// A write (it may wait on a lock): on the write connection; never sent twice, since one
    /// whose answer was lost may have committed.
    Write,
}

/// A bounded set of connections on the async runtime; see the module's documentation.
pub struct RuntimePool {
    db: Database,
    config: tokio_postgres::Config,
    reads: Vec<Arc<Slot>>,
    write: Arc<Slot>,
    wait: Duration,
}

impl std::fmt::Debug for RuntimePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimePool")
            .field("location", &self.db.location())
            .field("connections", &(self.reads.len() + 1))
            .finish_non_exhaustive()
    }
}

/// One connection's place.
#[derive(Default)]
struct Slot {
    state: Mutex<SlotState>,
    /// Statements waiting for an answer on it (for the choice among read connections).
    in_flight: AtomicUsize,
}

/// What a connection being made comes to: the connection, or why not (shared by every
/// statement waiting for it, so behind an `Arc`; it becomes text where a [`DbError`] is made).
type Made = Option<Result<Arc<Connected>, Arc<tokio_postgres::Error>>>;

#[derive(Default)]
enum SlotState {
    /// No connection (none yet, or it was lost or dropped).
    #[default]
    Empty,
    /// Being made, by a task of its own; its outcome comes here.
    Connecting(watch::Receiver<Made>),
    /// Made.
    Ready(Arc<Connected>),
}

/// A connection and the statements prepared on it.
struct Connected {
    client: Client,
    prepared: Mutex<PreparedCache>,
}

/// Counts a statement in flight on a slot while it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl RuntimePool {
    /// `size` connections (at least two: one for writes, the rest for reads) to `db`; see
    /// the module's documentation for `wait`.
    pub(crate) fn new(db: &Database, mut config: tokio_postgres::Config, size: u32, wait: Duration) -> RuntimePool {
        let lock_timeout = format!("-c lock_timeout={}", wait.as_millis().max(1));
        let options = match config.get_options() {
            Some(given) if !given.is_empty() => format!("{given} {lock_timeout}"),
            _ => lock_timeout,
        };
        // A connection whose peer went silent is found out by the kernel, not only when the
        // database closes it.
        config
            .options(options)
            .connect_timeout(wait)
            .keepalives_idle(Duration::from_secs(30))
            .tcp_user_timeout(Duration::from_secs(30));
        let reads = (1..size.max(2)).map(|_| Arc::default()).collect();
        RuntimePool { db: db.clone(), config, reads, write: Arc::default(), wait }
    }

    /// Connects every connection and prepares `reads` on the read connections and `writes`
    /// on the write connection, at once: what a first request would otherwise wait for. A
    /// failure is left for the statements to meet again.
    pub async fn warm(&self, reads: &[&str], writes: &[&str]) {
        let prepare = |slot: &Arc<Slot>, sqls: &[&str]| {
            let (slot, sqls) = (slot.clone(), sqls.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
            async move {
                let deadline = Instant::now() + self.wait;
                let Ok(Ok(connected)) = timeout_at(deadline, self.connected(&slot)).await else { return };
                for sql in sqls {
                    if let Ok(Ok(statement)) = timeout_at(deadline, connected.client.prepare(&sql)).await {
                        connected.prepared.lock().unwrap_or_else(PoisonError::into_inner).keep(&sql, &statement);
                    }
                }
            }
        };
        let mut all: Vec<_> = self.reads.iter().map(|slot| prepare(slot, reads)).collect();
        all.push(prepare(&self.write, writes));
        for warming in all {
            warming.await;
        }
    }

    /// Host, port and database, for messages.
    pub fn location(&self) -> &str {
        self.db.location()
    }

    /// Runs `sql` with `params` alone on `lane` and returns its rows. Must be called on a
    /// tokio runtime (a new connection's tasks are spawned on it).
    pub async fn query(&self, lane: Lane, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        match lane {
            Lane::Read => match self.read(sql, params).await {
                // The database dropped the connection (a restart): once more, on a new one.
                Err(DbError::Unreachable { .. }) => self.read(sql, params).await,
                done => done,
            },
            Lane::Write => {
                let deadline = Instant::now() + self.wait;
                let connected = timeout_at(deadline, self.connected(&self.write)).await.map_err(|_| self.late())??;
                let answer = self.run(&connected, sql, params).await;
                dropped(&self.write, &connected, &answer);
                answer.map_err(|e| match e {
                    DbError::Postgres { source, .. } if source.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
                        DbError::Busy {
                            location: self.db.location().to_owned(),
                            reason: format!("a lock stayed held for {} ms; nothing was written", self.wait.as_millis()),
                        }
                    }
                    other => other,
                })
            }
        }
    }

    /// A read on the read connection with the fewest in flight, within the pool's wait.
    async fn read(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        let slot = self.least_busy();
        slot.in_flight.fetch_add(1, Ordering::Relaxed);
        let _counted = InFlight(&slot.in_flight);
        let deadline = Instant::now() + self.wait;
        let connected = timeout_at(deadline, self.connected(slot)).await.map_err(|_| self.late())??;
        match timeout_at(deadline, self.run(&connected, sql, params)).await {
            Ok(answer) => {
                dropped(slot, &connected, &answer);
                answer
            }
            Err(_) => {
                // A connection that did not answer in time is not kept: the statements behind
                // it would wait as long.
                forget(slot, &connected);
                Err(self.late())
            }
        }
    }

    /// `sql` on `connected` (prepared once per connection).
    async fn run(&self, connected: &Connected, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        let known = connected.prepared.lock().unwrap_or_else(PoisonError::into_inner).get(sql);
        let answer = match known {
            Some(statement) => connected.client.query(&statement, params).await,
            None => match connected.client.prepare(sql).await {
                Ok(statement) => {
                    connected.prepared.lock().unwrap_or_else(PoisonError::into_inner).keep(sql, &statement);
                    connected.client.query(&statement, params).await
                }
                Err(e) => Err(e),
            },
        };
        // The database went away: the slot's next statement connects again.
        answer.map_err(|e| {
            if connected.client.is_closed() || crate::ends_connection(&e) {
                self.db.unreachable(&e)
            } else {
                self.db.error(e)
            }
        })
    }

    fn late(&self) -> DbError {
        DbError::Busy {
            location: self.db.location().to_owned(),
            reason: format!("no answer within {} ms", self.wait.as_millis()),
        }
    }

    /// The read connection with the fewest statements in flight (the first of equals).
    fn least_busy(&self) -> &Arc<Slot> {
        let mut best = &self.reads[0];
        for slot in &self.reads[1..] {
            if slot.in_flight.load(Ordering::Relaxed) < best.in_flight.load(Ordering::Relaxed) {
                best = slot;
            }
        }
        best
    }

    /// The slot's connection: made first if it has none (or lost it), by a task of its own
    /// that every statement waiting for it shares.
    async fn connected(&self, slot: &Arc<Slot>) -> Result<Arc<Connected>, DbError> {
        let mut made = {
            let mut state = slot.state.lock().unwrap_or_else(PoisonError::into_inner);
            match &*state {
                SlotState::Ready(c) if !c.client.is_closed() => return Ok(c.clone()),
                SlotState::Connecting(made) => made.clone(),
                _ => {
                    let (tell, made) = watch::channel(None);
                    *state = SlotState::Connecting(made.clone());
                    tokio::spawn(connect(self.config.clone(), self.db.clone(), slot.clone(), tell));
                    made
                }
            }
        };
        let outcome = made.wait_for(Option::is_some).await.map(|m| m.clone());
        match outcome {
            Ok(Some(Ok(connected))) => Ok(connected),
            Ok(Some(Err(e))) => Err(self.db.unreachable(&e)),
            _ => Err(DbError::Unreachable {
                location: self.db.location().to_owned(),
                reason: "the connection was given up while being made".to_owned(),
            }),
        }
    }
}

/// Makes `slot`'s connection and says how it went.
async fn connect(config: tokio_postgres::Config, db: Database, slot: Arc<Slot>, tell: watch::Sender<Made>) {
    let made = match config.connect(db.tls.clone()).await {
        Ok((client, connection)) => {
            // The connection's driver: ends when the client is dropped or the socket closes.
            tokio::spawn(async move {
                let _ = connection.await;
            });
            Ok(Arc::new(Connected { client, prepared: Mutex::default() }))
        }
        Err(e) => Err(Arc::new(e)),
    };
    *slot.state.lock().unwrap_or_else(PoisonError::into_inner) = match &made {
        Ok(connected) => SlotState::Ready(connected.clone()),
        Err(_) => SlotState::Empty,
    };
    let _ = tell.send(Some(made));
}

/// Drops `slot`'s connection if it is still `stuck` (not one made since).
/// Forgets `connected` if `answer` says the database dropped it: the slot's next statement
/// connects again, even before the client has seen its socket close (CI: a read retried at
/// once after `pg_terminate_backend` went to the same dead connection and failed again).
fn dropped<T>(slot: &Slot, connected: &Arc<Connected>, answer: &Result<T, DbError>) {
    if matches!(answer, Err(DbError::Unreachable { .. })) {
        forget(slot, connected);
    }
}

fn forget(slot: &Slot, stuck: &Arc<Connected>) {
    let mut state = slot.state.lock().unwrap_or_else(PoisonError::into_inner);
    if matches!(&*state, SlotState::Ready(c) if Arc::ptr_eq(c, stuck)) {
        *state = SlotState::Empty;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_connection_that_cannot_be_made_is_unreachable_with_its_cause_and_no_password() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port").port();
        let db = Database::parse(&format!("postgres://svc:s3cret@127.0.0.1:{port}/svc"), None).expect("valid");
        let pool = db.runtime_pool(2, Duration::from_secs(2));
        for lane in [Lane::Read, Lane::Write] {
            let e = pool.query(lane, "SELECT 1", &[]).await.expect_err("nothing listens");
            assert!(matches!(e, DbError::Unreachable { .. }), "{e:?}");
            let text = e.to_string();
            assert!(text.contains(&format!("127.0.0.1:{port}/svc")) && !text.contains("s3cret"), "{text}");
            assert!(text.to_lowercase().contains("refused"), "why, with its cause: {text}");
        }
    }
}
