//! Connections driven on the caller's async runtime, for statements that each stand alone
//! (one round trip, their own transaction): the publication's hot path. A statement sent
//! from an async task through [`threads`](crate::threads) crosses to the blocking pool, then
//! to its connection's thread, and back twice; here the task writes to the connection's
//! socket through `tokio-postgres` on the runtime it already runs on (docs/performance.md,
//! "Publication under load").
//!
//! A `tokio-postgres` client pipelines: statements from many tasks share one connection, each
//! sent as soon as it is asked and answered in order. So there is no checkout: a statement
//! goes to the connection with the fewest in flight (one waiting on the writers' lock holds
//! up only those behind it). Connections are made when first needed and again after the
//! database dropped them (a restart); the number is bounded by the pool's size.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Row, Statement};

use crate::{Database, DbError};

/// Statements kept prepared per connection, at most, as [`threads`](crate::threads) keeps.
const PREPARED_MAX: usize = 512;

/// A bounded set of connections on the async runtime; see the module's documentation.
pub struct RuntimePool {
    db: Database,
    config: tokio_postgres::Config,
    slots: Vec<Slot>,
    /// How long a statement may take, connecting included, before it fails (a database that
    /// stopped answering answers 503, as a checkout that waited too long does).
    wait: Duration,
}

impl std::fmt::Debug for RuntimePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimePool")
            .field("location", &self.db.location())
            .field("connections", &self.slots.len())
            .finish_non_exhaustive()
    }
}

/// One connection's place: the connection, once made; and the statements in flight on it.
#[derive(Default)]
struct Slot {
    connection: tokio::sync::Mutex<Option<Arc<Connected>>>,
    in_flight: AtomicUsize,
}

/// A connection and the statements prepared on it.
struct Connected {
    client: Client,
    prepared: Mutex<HashMap<String, Statement>>,
}

/// Counts a statement in flight on a slot while it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl RuntimePool {
    /// At most `size` connections (at least one) to `db`; a statement fails after `wait`.
    pub(crate) fn new(db: &Database, config: tokio_postgres::Config, size: u32, wait: Duration) -> RuntimePool {
        let slots = (0..size.max(1)).map(|_| Slot::default()).collect();
        RuntimePool { db: db.clone(), config, slots, wait }
    }

    /// Runs `sql` with `params` alone and returns its rows. Must be called on a tokio
    /// runtime (a new connection's driver is spawned on it). `retry`: a statement whose
    /// connection the database dropped runs once more on a new one (only for a read; a
    /// write whose answer was lost may have committed).
    pub async fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)], retry: bool) -> Result<Vec<Row>, DbError> {
        match self.query_once(sql, params).await {
            Err(e) if retry && e.is_transient() => self.query_once(sql, params).await,
            done => done,
        }
    }

    async fn query_once(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<Vec<Row>, DbError> {
        let slot = self.least_busy();
        slot.in_flight.fetch_add(1, Ordering::Relaxed);
        let _counted = InFlight(&slot.in_flight);
        let ran = tokio::time::timeout(self.wait, async {
            let connected = self.connected(slot).await?;
            let answer = match prepared(&connected, sql).await {
                Ok(statement) => connected.client.query(&statement, params).await,
                Err(e) => Err(e),
            };
            answer.map_err(|e| {
                if connected.client.is_closed() {
                    // The database went away: the slot's next statement connects again.
                    DbError::Unreachable { location: self.db.location().to_owned(), reason: crate::causes(&e) }
                } else {
                    self.db.error(e)
                }
            })
        })
        .await;
        ran.unwrap_or_else(|_| {
            Err(DbError::Busy {
                location: self.db.location().to_owned(),
                reason: format!("no answer within {} ms", self.wait.as_millis()),
            })
        })
    }

    /// Host, port and database, for messages.
    pub fn location(&self) -> &str {
        self.db.location()
    }

    /// The slot with the fewest statements in flight (the first of equals).
    fn least_busy(&self) -> &Slot {
        let mut best = &self.slots[0];
        for slot in &self.slots[1..] {
            if slot.in_flight.load(Ordering::Relaxed) < best.in_flight.load(Ordering::Relaxed) {
                best = slot;
            }
        }
        best
    }

    /// The slot's connection, made first if it has none (or lost it).
    async fn connected(&self, slot: &Slot) -> Result<Arc<Connected>, DbError> {
        let mut held = slot.connection.lock().await;
        if let Some(c) = held.as_ref()
            && !c.client.is_closed()
        {
            return Ok(c.clone());
        }
        let (client, connection) = self
            .config
            .connect(self.db.tls.clone())
            .await
            .map_err(|e| DbError::Unreachable { location: self.db.location().to_owned(), reason: crate::causes(&e) })?;
        // The connection's driver: ends when the client is dropped or the socket closes.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let made = Arc::new(Connected { client, prepared: Mutex::new(HashMap::new()) });
        *held = Some(made.clone());
        Ok(made)
    }
}

/// `sql` prepared on `connected`, once (two tasks preparing it at once both keep one).
async fn prepared(connected: &Connected, sql: &str) -> Result<Statement, tokio_postgres::Error> {
    let known = connected.prepared.lock().ok().and_then(|p| p.get(sql).cloned());
    if let Some(statement) = known {
        return Ok(statement);
    }
    let statement = connected.client.prepare(sql).await?;
    if let Ok(mut p) = connected.prepared.lock() {
        if p.len() >= PREPARED_MAX {
            p.clear();
        }
        p.insert(sql.to_owned(), statement.clone());
    }
    Ok(statement)
}
