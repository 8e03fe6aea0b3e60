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

use svc_postgres::{Database, DbError, Pool};

use super::StoreError;
use super::backend::{Backend, LeaseState, Transaction};
use svc_sql::postgres::PgTx;
use svc_sql::{Sql, params};

/// The migrations, in order; `svc_migrations` records those applied.
pub const MIGRATIONS: &[&str] = &[
    include_str!("../../../migrations/postgres/0001_relay.sql"),
    include_str!("../../../migrations/postgres/0002_revision_files.sql"),
    include_str!("../../../migrations/postgres/0003_engine_lease.sql"),
    include_str!("../../../migrations/postgres/0004_gateway_presence.sql"),
    include_str!("../../../migrations/postgres/0005_execution_slots.sql"),
    include_str!("../../../migrations/postgres/0006_log_sizes.sql"),
    include_str!("../../../migrations/postgres/0007_gateway_acks.sql"),
    include_str!("../../../migrations/postgres/0008_feed_order.sql"),
    include_str!("../../../migrations/postgres/0009_token_names.sql"),
    include_str!("../../../migrations/postgres/0010_gateway_keys.sql"),
    include_str!("../../../migrations/postgres/0011_console_sessions.sql"),
    include_str!("../../../migrations/postgres/0012_data_keys.sql"),
    include_str!("../../../migrations/postgres/0013_engine_sequence.sql"),
];

/// The relay store's name in `svc_migrations`.
pub const STORE: &str = "relay";

/// How a write transaction begins: the advisory lock every write transaction holds (the
/// relay store's writers, on every instance, one at a time; the key spells `svc_rela`).
const WRITE_BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock(8319396543592965217)";

pub use svc_postgres::PoolSettings;

/// The database's clock in Unix milliseconds: the lease is timed by one clock, whatever the
/// coordinators' clocks say.
const DB_NOW_MS: &str = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";

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

    fn lead(&self, holder: &str, lease_ms: i64, public_port: u16) -> Result<LeaseState, StoreError> {
        // A lease another holds and renews is seen without the writers' lock: coordinators
        // standing by poll every second. Its holder renews it whenever it can; another takes
        // it only once it has been out for a further lease (issue 41): after a short outage of
        // the database the holder, alive all along, renews first, instead of racing the
        // standbys and handing its jobs over (every move restarted them). The rule in Rust is
        // `coordinator::lease_rule::grant`, which the simulator runs; a test below checks
        // they agree.
        let held_elsewhere = PgTx::single(&self.pool)?.query(
            &format!(
                "SELECT public_port FROM relay_leases WHERE name = 'engine' AND holder <> ?1 \
                 AND expires_at + ?2 > {DB_NOW_MS}"
            ),
            params![holder, lease_ms],
        )?;
        if let Some(row) = held_elsewhere.first() {
            return Ok(LeaseState { held: false, public_port: u16::try_from(row.i64(0)?).ok() });
        }
        let mut tx = PgTx::begin(&self.pool, WRITE_BEGIN)?;
        let held = !tx
            .query(
                &format!(
                    "INSERT INTO relay_leases (name, holder, expires_at, public_port) \
                     VALUES ('engine', ?1, {DB_NOW_MS} + ?2, ?3) \
                     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at, \
                     public_port = excluded.public_port \
                     WHERE relay_leases.holder = excluded.holder OR relay_leases.expires_at + ?2 <= {DB_NOW_MS} \
                     RETURNING holder"
                ),
                params![holder, lease_ms, i64::from(public_port)],
            )?
            .is_empty();
        let state = if held {
            LeaseState { held, public_port: Some(public_port) }
        } else {
            let rows = tx.query("SELECT public_port FROM relay_leases WHERE name = 'engine'", params![])?;
            let port = rows.first().map(|r| r.i64(0)).transpose()?.and_then(|p| u16::try_from(p).ok());
            LeaseState { held, public_port: port }
        };
        tx.commit_tx()?;
        Ok(state)
    }

    fn write_as_leader(&self, holder: &str) -> Result<Box<dyn Transaction + '_>, StoreError> {
        let mut tx = PgTx::begin(&self.pool, WRITE_BEGIN)?;
        let held = !tx
            .query(
                &format!(
                    "SELECT 1 FROM relay_leases WHERE name = 'engine' AND holder = ?1 AND expires_at > {DB_NOW_MS}"
                ),
                params![holder],
            )?
            .is_empty();
        if !held {
            return Err(StoreError::NotLeader(holder.to_owned()));
        }
        Ok(Box::new(tx))
    }

    fn resign(&self, holder: &str) {
        let resigned = PgTx::begin(&self.pool, WRITE_BEGIN).and_then(|mut tx| {
            tx.execute("DELETE FROM relay_leases WHERE name = 'engine' AND holder = ?1", params![holder])?;
            tx.commit_tx()
        });
        if let Err(e) = resigned {
            tracing::warn!("svc relay: could not give the engine lease up; it runs out by itself: {e}");
        }
    }
}

/// Issue 41: PostgreSQL's `lead()` and the pure rule the simulator runs
/// ([`crate::coordinator::lease_rule::grant`]) answer alike over a table of cases. Each case
/// sets the row with a first `lead()` (its `lease_ms` is where `expires_at` falls from the
/// database's now, negative for a lease already out), then tries; every case is at least
/// 700 ms from the rule's edge, so the few milliseconds between the two calls do not matter.
#[cfg(test)]
mod lead_agrees_with_the_rule {
    use super::{PoolSettings, PostgresBackend};
    use crate::coordinator::RelayStore;
    use crate::coordinator::lease_rule::{LEASE_MS, LeaseRow, grant};

    /// The row (its holder, and when it runs out from now), who tries, for how long.
    type Case = (Option<(&'static str, i64)>, &'static str, i64);

    #[test]
    fn postgres_lead_answers_as_the_pure_rule() {
        let Some(cluster) = svc_pg_cluster::for_test("lease-rule") else { return };
        let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("the cluster's URL");
        let backend = PostgresBackend::open(&db, PoolSettings::default()).expect("a PostgreSQL store");
        let keys = tempfile::tempdir().expect("a scratch directory");
        let store = RelayStore::on(Box::new(backend), &keys.path().join("secrets.key")).expect("its keys");
        let cases: &[Case] = &[
            (None, "a", LEASE_MS),
            (Some(("a", 3_000)), "a", LEASE_MS),
            (Some(("a", -3_000)), "a", LEASE_MS),
            (Some(("a", -20_000)), "a", LEASE_MS),
            (Some(("a", 3_000)), "b", LEASE_MS),
            (Some(("a", -1_000)), "b", LEASE_MS),
            (Some(("a", -4_000)), "b", LEASE_MS),
            (Some(("a", -6_000)), "b", LEASE_MS),
            (Some(("a", -20_000)), "b", LEASE_MS),
            (Some(("a", 1_000)), "b", 300),
            (Some(("a", -1_000)), "b", 300),
            (Some(("b", -1_000)), "b", 300),
        ];
        for &(row, holder, lease_ms) in cases {
            store.resign("a");
            store.resign("b");
            let current = row.map(|(h, expires_in)| {
                let set = store.lead(h, expires_in, 1_000).expect("the row");
                assert!(set.held, "{h} sets the row");
                LeaseRow { holder: h.to_owned(), expires_at: expires_in, public_port: 1_000 }
            });
            let got = store.lead(holder, lease_ms, 2_000).expect("a try");
            let rule = grant(current.as_ref(), holder, 2_000, 0, lease_ms);
            assert_eq!(
                (got.held, got.public_port),
                (rule.held, rule.public_port),
                "{holder} tries for {lease_ms} ms over {current:?}"
            );
        }
    }
}
