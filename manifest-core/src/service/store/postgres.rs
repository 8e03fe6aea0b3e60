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

use svc_execution::executor::{ExecutionStore, ExecutionTx, NotLeader, StoreFailure};
use svc_postgres::{Database, Lane, Pool, PoolSettings, RuntimePool};
use svc_sql::postgres::{PgTx, query_on_runtime, warm_on_runtime};
use svc_sql::{Sql, params};

use super::group::{Group, Undo, run_units};
use super::rows::{self, Tx};
use super::{
    Answer, Caller, DecidedOn, DecidedWrite, GroupedDone, GroupedWork, Keys, OnRuntime, PublicationInputs, Store,
    StoreError, Transaction,
};

/// The migrations, in order; `svc_migrations` records those applied.
pub const MIGRATIONS: &[&str] = &[
    include_str!("../../../migrations/postgres/0001_publication.sql"),
    include_str!("../../../migrations/postgres/0002_inputs_revision.sql"),
    include_str!("../../../migrations/postgres/0003_publish_decided.sql"),
    include_str!("../../../migrations/postgres/0004_decided_fault_point.sql"),
    include_str!("../../../migrations/postgres/0005_unserved.sql"),
    include_str!("../../../migrations/postgres/0006_output.sql"),
    include_str!("../../../migrations/postgres/0007_console_sessions.sql"),
    include_str!("../../../migrations/postgres/0008_sealed_secrets.sql"),
];

/// The publication store's name in `svc_migrations`.
pub const STORE: &str = "publication";

/// How a write transaction begins: the advisory lock every write transaction holds (the
/// key spells `svc_publ`; the relay's is another).
const WRITE_BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock(8319396543593100652)";

/// How a read transaction begins.
const READ_BEGIN: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// The database's clock in Unix milliseconds: leases are timed by one clock, whatever the
/// instances' clocks say.
const DB_NOW_MS: &str = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";

/// How long the scheduling lease lasts unless renewed. The leader renews it every
/// `runner::RENEW`; an instance standing by tries for it every `runner::STANDBY_POLL`, so the
/// work of a killed leader is taken over within about `LEASE_MS` plus that.
pub const LEASE_MS: i64 = 5_000;

/// The publication store on a PostgreSQL database.
#[derive(Debug)]
pub struct PostgresStore {
    pool: Pool,
    /// Connections on the service's runtime, for the publication's hot path ([`OnRuntime`]);
    /// none for a pool of fewer than four.
    runtime: Option<RuntimePool>,
    group: Group,
    /// This instance, as the scheduling lease names its holder.
    instance: String,
    /// The keys its secret values are sealed with (`keys::start`).
    keys: Keys,
}

impl PostgresStore {
    /// Opens a pool of connections to `db` and migrates it.
    pub fn open(db: &Database, settings: PoolSettings) -> Result<PostgresStore, StoreError> {
        // The pool's size bounds every connection: from four up, a quarter of them (at least
        // two: one for writes, the others for reads) carry the hot path's statements,
        // pipelined, and the rest the transactions; below, transactions have them all.
        let on_runtime = if settings.size >= 4 { settings.size / 4 + 1 } else { 0 };
        let pool = db.pool(settings.size - on_runtime, settings.wait);
        let session = pool.session().map_err(svc_sql::SqlError::from)?;
        session
            .with(|conn, db| svc_postgres::migrate(db, conn.client(), STORE, MIGRATIONS))
            .map_err(svc_sql::SqlError::from)?;
        let mut nonce = [0u8; 6];
        getrandom::fill(&mut nonce).map_err(|e| StoreError::Backend(format!("no random numbers: {e}").into()))?;
        let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        let instance = format!("pid{}-{nonce}", std::process::id());
        let runtime = (on_runtime > 0).then(|| db.runtime_pool(on_runtime, settings.wait));
        Ok(PostgresStore { pool, runtime, group: Group::default(), instance, keys: Keys::default() })
    }

    fn runtime(&self) -> Result<&RuntimePool, StoreError> {
        self.runtime.as_ref().ok_or_else(|| StoreError::Backend("no connections on the runtime".into()))
    }

    /// This instance's name in the scheduling lease.
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// Host, port and database (never a password).
    pub fn location(&self) -> &str {
        self.pool.location()
    }

    /// The keys its secret values are sealed with, once started (`keys::start`).
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    fn begin_write(&self) -> Result<Tx<PgTx>, StoreError> {
        Ok(Tx(PgTx::begin(&self.pool, WRITE_BEGIN)?, self.keys.get()))
    }
}

impl Store for PostgresStore {
    fn read(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        Ok(Box::new(Tx(PgTx::begin(&self.pool, READ_BEGIN)?, self.keys.get())))
    }

    fn read_each(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        Ok(Box::new(Tx(PgTx::single(&self.pool)?, self.keys.get())))
    }

    fn publish_decided_alone(&self, on: &DecidedOn, write: &DecidedWrite) -> Option<Result<Option<u64>, StoreError>> {
        // One statement, its own transaction: the function takes the writers' lock itself.
        Some(PgTx::alone(&self.pool).map_err(StoreError::from).and_then(|tx| Tx(tx, None).publish_decided(on, write)))
    }

    fn write(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        Ok(Box::new(self.begin_write()?))
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn on_runtime(&self) -> Option<&dyn OnRuntime> {
        self.runtime.as_ref().map(|_| self as &dyn OnRuntime)
    }

    fn write_grouped(&self, work: GroupedWork, done: GroupedDone) {
        self.group.submit(work, done, || {
            let pool = self.pool.clone();
            let keys = self.keys.clone();
            Box::new(move |units| {
                let mut tx = PgTx::begin(&pool, WRITE_BEGIN)?;
                run_units(&mut tx, keys.get(), units, Undo::Group)
            })
        });
    }
}

/// Reads are run once more if the database dropped their connection; the decided write is
/// not (it may have committed). Offered only with runtime connections
/// ([`Store::on_runtime`]).
impl OnRuntime for PostgresStore {
    fn caller<'a>(&'a self, token_hash: &'a str) -> Answer<'a, Option<Caller>> {
        Box::pin(async move {
            let rows = query_on_runtime(self.runtime()?, Lane::Read, rows::CALLER, params![token_hash]).await?;
            Ok(rows.first().map(rows::caller_row).transpose()?)
        })
    }

    fn publication_inputs<'a>(
        &'a self,
        organization: i64,
        application_id: &'a str,
    ) -> Answer<'a, Option<PublicationInputs>> {
        Box::pin(async move {
            let rows =
                query_on_runtime(self.runtime()?, Lane::Read, &rows::INPUTS, params![organization, application_id])
                    .await?;
            Ok(rows::inputs_from_rows(&rows, organization)?)
        })
    }

    fn warm(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            if let Some(pool) = &self.runtime {
                warm_on_runtime(pool, &[rows::CALLER, &rows::INPUTS], &[rows::DECIDED_CALL]).await;
            }
        })
    }

    fn publish_decided<'a>(&'a self, on: &'a DecidedOn, write: &'a DecidedWrite) -> Answer<'a, Option<u64>> {
        Box::pin(async move {
            let params = rows::decided_call_params(on, write);
            let rows = query_on_runtime(self.runtime()?, Lane::Write, rows::DECIDED_CALL, &params).await?;
            let row = rows.first().ok_or_else(|| svc_sql::SqlError::NoRow("svc_publish_decided".to_owned()))?;
            Ok(row.opt_u64(0)?)
        })
    }
}

fn failure(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StoreFailure {
    StoreFailure(e.into())
}

/// One scheduler for the database, whichever instances run: the scheduling lease (a row of
/// `svc_leases`, timed by the database's clock) names the instance that schedules; the leader
/// renews it every `runner::RENEW` ([`ExecutionStore::lead`]). Every scheduler transaction
/// checks it under the write lock, or is refused ([`NotLeader`]), so a scheduler that lost
/// the lease (it stalled past it, or lost the database) writes nothing more; the new leader
/// recovers first, comparing the live executions with its own market.
impl ExecutionStore for PostgresStore {
    fn begin(&self) -> Result<Box<dyn ExecutionTx + '_>, StoreFailure> {
        let mut tx = self.begin_write().map_err(failure)?;
        let held =
            tx.0.query_opt(
                &format!(
                    "SELECT 1 FROM svc_leases WHERE name = 'scheduler' AND holder = ?1 AND expires_at > {DB_NOW_MS}"
                ),
                params![self.instance.as_str()],
            )
            .map_err(failure)?
            .is_some();
        if !held {
            return Err(failure(NotLeader(format!("{} does not hold the scheduling lease", self.instance))));
        }
        Ok(Box::new(tx))
    }

    fn next_due(&self) -> Result<Option<svc_execution::Millis>, StoreFailure> {
        // One statement, no lock: the scheduler's sleep took the writers' lock for three
        // round trips after every step.
        Tx(PgTx::single(&self.pool).map_err(failure)?, None).next_due()
    }

    fn lead(&self) -> Result<bool, StoreFailure> {
        let mut tx = self.begin_write().map_err(failure)?;
        let held =
            tx.0.query_opt(
                &format!(
                    "INSERT INTO svc_leases (name, holder, expires_at) VALUES ('scheduler', ?1, {DB_NOW_MS} + ?2) \
                     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at \
                     WHERE svc_leases.holder = excluded.holder OR svc_leases.expires_at <= {DB_NOW_MS} \
                     RETURNING holder"
                ),
                params![self.instance.as_str(), LEASE_MS],
            )
            .map_err(failure)?
            .is_some();
        tx.0.commit_tx().map_err(failure)?;
        Ok(held)
    }

    fn resign(&self) {
        let resigned = self.begin_write().and_then(|mut tx| {
            tx.0.execute(
                "DELETE FROM svc_leases WHERE name = 'scheduler' AND holder = ?1",
                params![self.instance.as_str()],
            )?;
            Ok(tx.0.commit_tx()?)
        });
        if let Err(e) = resigned {
            tracing::warn!(error = %e, "could not give the scheduling lease up; it runs out by itself");
        }
    }
}
