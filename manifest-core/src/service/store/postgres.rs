//! The publication store on PostgreSQL (issue 19): a database several `svc serve` instances
//! share. Its statements are the backends' shared ones ([`super::rows`]); here are its
//! connections and transactions, and its migrations (`migrations/postgres/`, versioned apart
//! from SQLite's, applied through `svc-postgres` under the store name `publication`; a test
//! holds the two schemas to the same tables, columns and indexes).
//!
//! **Writers across instances.** A write transaction (a publication, an admin command, a
//! scheduler's step) takes a transaction-scoped advisory lock on one store-wide key before
//! anything else, so writers are serialized across every instance, as SQLite's `BEGIN
//! IMMEDIATE` serializes them on one machine: what a write transaction read (the active
//! pointer a publication is fenced on, the job slots in use, a slot's newest generation)
//! still holds when it commits, with no retry loop. It runs at `READ COMMITTED`: under the
//! lock nothing else commits. Concurrent publications of one instance still share a commit
//! (group commit, [`super::group`]). A read transaction is one `REPEATABLE READ` snapshot and
//! takes no lock. `docs/decisions.md` says why a lock and not `SERIALIZABLE`.

use svc_execution::executor::{ExecutionStore, ExecutionTx, StoreFailure};
use svc_postgres::{Database, Pool, PoolSettings};
use svc_sql::postgres::PgTx;

use super::group::{Group, run_units};
use super::rows::Tx;
use super::{GroupedDone, GroupedWork, Store, StoreError, Transaction};

/// The migrations, in order; `svc_migrations` records those applied.
pub const MIGRATIONS: &[&str] = &[include_str!("../../../migrations/postgres/0001_publication.sql")];

/// The publication store's name in `svc_migrations`.
pub const STORE: &str = "publication";

/// How a write transaction begins: the advisory lock every write transaction holds (the
/// key spells `svc_publ`; the relay's is another).
const WRITE_BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock(8319396543593100652)";

/// How a read transaction begins.
const READ_BEGIN: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// The publication store on a PostgreSQL database.
#[derive(Debug)]
pub struct PostgresStore {
    pool: Pool,
    group: Group,
}

impl PostgresStore {
    /// Opens a pool of connections to `db` and migrates it.
    pub fn open(db: &Database, settings: PoolSettings) -> Result<PostgresStore, StoreError> {
        let pool = db.pool(settings.size, settings.wait);
        let session = pool.session().map_err(svc_sql::SqlError::from)?;
        session
            .with(|conn, db| svc_postgres::migrate(db, conn.client(), STORE, MIGRATIONS))
            .map_err(svc_sql::SqlError::from)?;
        Ok(PostgresStore { pool, group: Group::default() })
    }

    /// Host, port and database (never a password).
    pub fn location(&self) -> &str {
        self.pool.location()
    }

    fn begin_write(&self) -> Result<Tx<PgTx>, StoreError> {
        Ok(Tx(PgTx::begin(&self.pool, WRITE_BEGIN)?))
    }
}

impl Store for PostgresStore {
    fn read(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        Ok(Box::new(Tx(PgTx::begin(&self.pool, READ_BEGIN)?)))
    }

    fn write(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        Ok(Box::new(self.begin_write()?))
    }

    fn write_grouped(&self, work: GroupedWork, done: GroupedDone) {
        self.group.submit(work, done, || {
            let pool = self.pool.clone();
            Box::new(move |units| {
                let mut tx = PgTx::begin(&pool, WRITE_BEGIN)?;
                run_units(&mut tx, units)
            })
        });
    }
}

impl ExecutionStore for PostgresStore {
    fn begin(&self) -> Result<Box<dyn ExecutionTx + '_>, StoreFailure> {
        Ok(Box::new(self.begin_write().map_err(|e| StoreFailure(Box::new(e)))?))
    }
}
