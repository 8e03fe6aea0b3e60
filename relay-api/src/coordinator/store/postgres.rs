//! The PostgreSQL backend (issue 19): the relay store on a database several coordinators
//! may share. Its statements are the backends' shared ones ([`super::rows`]); here are its
//! connections and transactions, and its migrations (`migrations/postgres/`, versioned apart
//! from SQLite's, applied through `svc-postgres` under the store name `relay`; a test holds
//! the two schemas to the same tables, columns and indexes).
//!
//! **The contract of [`Backend`] across instances.** A write transaction takes a
//! transaction-scoped advisory lock on one relay-wide key before anything else, so writers
//! are serialized across every coordinator on the database, as SQLite's `BEGIN IMMEDIATE`
//! serializes them on one machine: what a write transaction read still holds when it
//! commits, with no retry loop (it runs at `READ COMMITTED`, and under the lock nothing else
//! commits). A read transaction is one `REPEATABLE READ` snapshot and takes no lock.

use std::time::Duration;

use svc_postgres::{Database, DbError, Pool, Session};

use super::StoreError;
use super::backend::{Backend, Transaction};
use svc_sql::postgres::PgTx;

/// The migrations, in order; `svc_migrations` records those applied.
pub const MIGRATIONS: &[&str] = &[
    include_str!("../../../migrations/postgres/0001_relay.sql"),
    include_str!("../../../migrations/postgres/0002_revision_files.sql"),
];

/// The relay store's name in `svc_migrations`.
pub const STORE: &str = "relay";

/// How a write transaction begins: the advisory lock every write transaction holds (the
/// relay store's writers, on every instance, one at a time; the key spells `svc_rela`).
const WRITE_BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock(8319396543592965217)";

pub use svc_postgres::PoolSettings;

/// The session-level advisory lock a coordinator holds on its database while it runs (the
/// key spells `svc_coor`).
const COORDINATOR_LOCK: i64 = 8319396543559528306;

/// Holds the database's coordinator lock until the returned session is dropped (or the
/// process ends: the database releases a session's locks with it, `kill -9` included).
pub fn hold_coordinator_lock(db: &Database) -> Result<Session, StoreError> {
    let pool = db.pool(1, Duration::from_secs(10));
    let session = pool.session().map_err(backend)?;
    let taken = session
        .run(|c| {
            c.client().query_one("SELECT pg_try_advisory_lock($1)", &[&COORDINATOR_LOCK]).map(|r| r.get::<_, bool>(0))
        })
        .map_err(backend)?;
    if !taken {
        return Err(StoreError::Refused {
            code: "database_in_use",
            message: format!(
                "database {}: another coordinator runs on it (one at a time, until coordinators share the work): stop \
                 it first, or choose another --database",
                db.location()
            ),
        });
    }
    Ok(session)
}

/// The relay store on a PostgreSQL database.
#[derive(Debug)]
pub struct PostgresBackend {
    pool: Pool,
}

impl PostgresBackend {
    /// Opens a pool of connections to `db` and migrates it.
    pub fn open(db: &Database, pool: PoolSettings) -> Result<PostgresBackend, StoreError> {
        let pool = db.pool(pool.size, pool.wait);
        let session = pool.session().map_err(backend)?;
        session.with(|conn, db| svc_postgres::migrate(db, conn.client(), STORE, MIGRATIONS)).map_err(backend)?;
        Ok(PostgresBackend { pool })
    }

    fn begin(&self, statements: &'static str) -> Result<Box<dyn Transaction + '_>, StoreError> {
        Ok(Box::new(PgTx::begin(&self.pool, statements)?))
    }
}

/// A database failure as the store says it: one that may pass (the database down, restarting,
/// busy) is `Unavailable` (503 at the API), any other a failure of the store.
fn backend(e: DbError) -> StoreError {
    if e.is_transient() { StoreError::Unavailable(Box::new(e)) } else { StoreError::Backend(Box::new(e)) }
}

impl Backend for PostgresBackend {
    fn read(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        self.begin("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    }

    fn write(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        self.begin(WRITE_BEGIN)
    }

    fn location(&self) -> String {
        format!("postgres {}", self.pool.location())
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }
}
