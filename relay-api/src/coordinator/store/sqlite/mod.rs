//! The embedded backend: `relay.sqlite3` in the data directory, WAL mode with
//! `synchronous = FULL`, versioned migrations, deleted content overwritten
//! (`secure_delete`). Two connections, each behind a mutex: writers begin `IMMEDIATE` on one
//! (which also excludes other processes, such as `svc relay admin`); readers begin `DEFERRED`
//! on the other, opened read-only, so a read (a status, a page of logs, the engine's look at
//! the deployments) never waits for a write to commit: WAL gives it the last committed state.
//!
//! Only the connections live here: the statements are the backends' shared ones
//! ([`super::rows`], over [`svc_sql::Sql`]), and every rule is above, in the store's operations.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::Connection;

use super::StoreError;
use super::backend::{Backend, Transaction};
use svc_sql::sqlite::{Held, SqliteTx};

/// The migrations, in order; `PRAGMA user_version` is the number applied.
pub(super) const MIGRATIONS: &[&str] = &[
    include_str!("../../../../migrations/0001_coordinator.sql"),
    include_str!("../../../../migrations/0002_admission.sql"),
    include_str!("../../../../migrations/0003_economics.sql"),
    include_str!("../../../../migrations/0004_route_keys.sql"),
    include_str!("../../../../migrations/0005_revisions.sql"),
    include_str!("../../../../migrations/0006_executions.sql"),
    include_str!("../../../../migrations/0007_policies.sql"),
    include_str!("../../../../migrations/0008_scheduling.sql"),
    include_str!("../../../../migrations/0009_revision_files.sql"),
    include_str!("../../../../migrations/0010_gateway_presence.sql"),
    include_str!("../../../../migrations/0011_execution_slots.sql"),
    include_str!("../../../../migrations/0012_log_sizes.sql"),
    include_str!("../../../../migrations/0013_gateway_acks.sql"),
    include_str!("../../../../migrations/0014_feed_order.sql"),
    include_str!("../../../../migrations/0015_token_names.sql"),
    include_str!("../../../../migrations/0016_gateway_keys.sql"),
    include_str!("../../../../migrations/0017_console_sessions.sql"),
    include_str!("../../../../migrations/0018_data_keys.sql"),
    include_str!("../../../../migrations/0019_engine_sequence.sql"),
];

/// The database file's name inside the data directory.
pub const DATABASE_FILE: &str = "relay.sqlite3";

/// How long a connection waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The SQLite backend of one data directory.
#[derive(Debug)]
pub struct SqliteBackend {
    path: PathBuf,
    conn: Mutex<Connection>,
    reader: Mutex<Connection>,
}

impl SqliteBackend {
    /// Opens (creating and migrating) the database in `dir`. The directory is made 0700 and
    /// the database files 0600.
    pub fn open(dir: &Path) -> Result<SqliteBackend, StoreError> {
        // These errors name their path (relay-wire's helpers, on fs-err): kept typed.
        let io = |e: std::io::Error| StoreError::Backend(Box::new(e));
        relay_wire::files::create_private_dir(dir).map_err(io)?;
        let path = dir.join(DATABASE_FILE);
        // SQLite creates its WAL and shared-memory files with the database file's mode.
        relay_wire::files::make_private(&path).map_err(io)?;
        for suffix in ["-wal", "-shm"] {
            let side = dir.join(format!("{DATABASE_FILE}{suffix}"));
            if side.exists() {
                relay_wire::files::make_private(&side).map_err(io)?;
            }
        }
        let wrap = |e: rusqlite::Error| StoreError::Backend(format!("{}: {e}", path.display()).into());
        let mut conn = Connection::open(&path).map_err(wrap)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(wrap)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(wrap)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(wrap)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(wrap)?;
        conn.pragma_update(None, "secure_delete", "ON").map_err(wrap)?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate).map_err(wrap)?;
        let applied: usize = tx.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(wrap)?;
        let migrated = applied < MIGRATIONS.len();
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
            tx.execute_batch(sql).map_err(wrap)?;
            tx.pragma_update(None, "user_version", i + 1).map_err(wrap)?;
        }
        tx.commit().map_err(wrap)?;
        if migrated {
            // Old pages (credentials in clear, before 0004) may linger in the log: empty it.
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(wrap)?;
        }
        let reader = rusqlite::Connection::open_with_flags(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(wrap)?;
        reader.busy_timeout(BUSY_TIMEOUT).map_err(wrap)?;
        reader.pragma_update(None, "query_only", "ON").map_err(wrap)?;
        Ok(SqliteBackend { path, conn: Mutex::new(conn), reader: Mutex::new(reader) })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn begin<'s>(&'s self, conn: &'s Mutex<Connection>, sql: &str) -> Result<Box<dyn Transaction + 's>, StoreError> {
        let conn = conn.lock().map_err(|_| StoreError::Backend("a previous store operation panicked".into()))?;
        Ok(Box::new(SqliteTx::begin(Held::Locked(conn), sql)?))
    }
}

impl Backend for SqliteBackend {
    fn read(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        self.begin(&self.reader, "BEGIN DEFERRED")
    }

    fn write(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        self.begin(&self.conn, "BEGIN IMMEDIATE")
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }

    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn forget_old_pages(&self) {
        let Ok(conn) = self.conn.lock() else { return };
        // Busy while a reader holds an older snapshot: a later checkpoint empties it then.
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
            tracing::warn!("{}: could not empty the write-ahead log: {e}", self.path.display());
        }
    }
}
