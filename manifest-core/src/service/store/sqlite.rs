//! The embedded store: one SQLite file in the data directory, in WAL mode with
//! `synchronous = FULL` (a committed publication survives a power cut). One writer connection,
//! serialized by a mutex (SQLite has one writer anyway; `BEGIN IMMEDIATE` also excludes other
//! processes, such as `svc admin`), and a small pool of read-only connections, which WAL lets
//! read while the writer writes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use svc_execution::executor::{ExecutionStore, ExecutionTx, NotLeader, StoreFailure};
use svc_sql::sqlite::{Held, SqliteTx};

use super::group::{Group, Undo, run_units};
use super::rows::Tx;
use super::{GroupedDone, GroupedWork, Keys, Store, StoreError, Transaction};

/// The migrations, in order; `PRAGMA user_version` is the number applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../../../migrations/0001_initial.sql"),
    include_str!("../../../migrations/0002_executions.sql"),
    include_str!("../../../migrations/0003_activity_index.sql"),
    include_str!("../../../migrations/0004_inputs_revision.sql"),
    include_str!("../../../migrations/0005_unserved.sql"),
    include_str!("../../../migrations/0006_output.sql"),
    include_str!("../../../migrations/0007_console_sessions.sql"),
    include_str!("../../../migrations/0008_sealed_secrets.sql"),
];

/// The database file's name inside the data directory.
pub const DATABASE_FILE: &str = "svc.sqlite3";

/// How long a connection waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The scheduling lock's file inside the data directory.
const SCHEDULER_LOCK: &str = "scheduler.lock";

/// The SQLite store of one data directory.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    writer: Arc<Mutex<Connection>>,
    readers: Mutex<Vec<Connection>>,
    group: Group,
    /// The scheduling lock, once taken: `flock` on [`SCHEDULER_LOCK`], held while this store
    /// lives (the kernel drops it when the process dies, `kill -9` included).
    scheduling: Mutex<Option<std::fs::File>>,
    /// The keys its secret values are sealed with (`keys::start`).
    keys: Keys,
}

/// Creates `dir` (and missing parents) 0700, or makes an existing one 0700.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    // fs-err has no `DirBuilder`: the same words as its `create_dir_all`.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| std::io::Error::new(e.kind(), format!("failed to create directory `{}`: {e}", dir.display())))?;
    fs_err::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// Creates `path` empty 0600 if missing, or makes it 0600: before SQLite opens it.
fn private_file(path: &Path) -> std::io::Result<()> {
    use fs_err::os::unix::fs::OpenOptionsExt;
    use std::os::unix::fs::PermissionsExt;
    let file = fs_err::OpenOptions::new().append(true).create(true).mode(0o600).open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))
}

impl SqliteStore {
    /// Opens the store in `dir`, creating the directory (0700) and the database (0600, as
    /// SQLite then makes its log files) on first use and applying any migration not yet
    /// applied.
    pub fn open(dir: &Path) -> Result<SqliteStore, StoreError> {
        private_dir(dir).map_err(|e| StoreError::Backend(format!("cannot create the data directory: {e}").into()))?;
        let path = dir.join(DATABASE_FILE);
        for suffix in ["", "-wal", "-shm"] {
            let file = dir.join(format!("{DATABASE_FILE}{suffix}"));
            if suffix.is_empty() || file.exists() {
                private_file(&file)
                    .map_err(|e| StoreError::Backend(format!("cannot make the database private: {e}").into()))?;
            }
        }
        let writer = Connection::open(&path).map_err(|e| backend(&path, e))?;
        configure(&writer).map_err(|e| backend(&path, e))?;
        migrate(&writer).map_err(|e| backend(&path, e))?;
        Ok(SqliteStore {
            path,
            writer: Arc::new(Mutex::new(writer)),
            readers: Mutex::new(Vec::new()),
            group: Group::default(),
            scheduling: Mutex::new(None),
            keys: Keys::default(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The keys its secret values are sealed with, once started (`keys::start`).
    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    /// Rewrites the database into fresh pages (`VACUUM`) and empties its log: the pages and
    /// log frames that held rows since rewritten (values in clear, now sealed) are gone.
    pub(crate) fn compact(&self) -> Result<(), StoreError> {
        let conn = self.writer.lock().map_err(poisoned)?;
        conn.execute_batch("VACUUM").map_err(|e| backend(&self.path, e))?;
        // Busy readers leave the log as it is: it is emptied at a later checkpoint.
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(|e| backend(&self.path, e))
    }

    fn reader(&self) -> Result<Connection, StoreError> {
        if let Some(conn) = self.readers.lock().map_err(poisoned)?.pop() {
            return Ok(conn);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(&self.path, flags).map_err(|e| backend(&self.path, e))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| backend(&self.path, e))?;
        Ok(conn)
    }
}

fn configure(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // Deleted and rewritten content is overwritten, not left in free pages (a sealed value
    // under a retired data key, a session's row), as the relay's store does.
    conn.pragma_update(None, "secure_delete", "ON")?;
    Ok(())
}

fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    // IMMEDIATE: a server and an admin command starting together must not both migrate.
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let applied: usize = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
        if let Err(e) = conn.execute_batch(sql) {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e);
        }
        conn.pragma_update(None, "user_version", i + 1)?;
    }
    conn.execute_batch("COMMIT")
}

fn backend(path: &Path, e: rusqlite::Error) -> StoreError {
    StoreError::Backend(format!("{}: {e}", path.display()).into())
}

fn poisoned<T>(_: std::sync::PoisonError<T>) -> StoreError {
    StoreError::Backend("a previous store operation panicked".into())
}

impl SqliteStore {
    fn begin_write(&self) -> Result<Tx<SqliteTx<'_>>, StoreError> {
        let conn = self.writer.lock().map_err(poisoned)?;
        Ok(Tx(SqliteTx::begin(Held::Locked(conn), "BEGIN IMMEDIATE")?, self.keys.get()))
    }

    /// A read transaction on a pooled reader: the writer's lock is not taken.
    fn begin_read(&self) -> Result<Tx<SqliteTx<'_>>, StoreError> {
        let conn = self.reader()?;
        Ok(Tx(SqliteTx::begin(Held::Pooled(Some(conn), &self.readers), "BEGIN DEFERRED")?, self.keys.get()))
    }
}

impl Store for SqliteStore {
    fn read(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        Ok(Box::new(self.begin_read()?))
    }

    fn write(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        Ok(Box::new(self.begin_write()?))
    }

    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn write_grouped(&self, work: GroupedWork, done: GroupedDone) {
        self.group.submit(work, done, || {
            let writer = Arc::clone(&self.writer);
            let keys = self.keys.clone();
            Box::new(move |units| {
                let conn = writer.lock().map_err(poisoned)?;
                let mut tx = SqliteTx::begin(Held::Locked(conn), "BEGIN IMMEDIATE")?;
                run_units(&mut tx, keys.get(), units, Undo::Savepoint)
            })
        });
    }
}

impl SqliteStore {
    /// Takes the data directory's scheduling lock if this store does not hold it yet: `true`
    /// if it holds it now.
    fn hold_scheduling(&self) -> Result<bool, StoreFailure> {
        use fs_err::os::unix::fs::OpenOptionsExt;
        use std::io::{Seek, Write};
        let failure = |e: std::io::Error| StoreFailure(Box::new(e));
        let mut held = self.scheduling.lock().map_err(|_| StoreFailure("the scheduling lock was poisoned".into()))?;
        if held.is_some() {
            return Ok(true);
        }
        let path = self.path.with_file_name(SCHEDULER_LOCK);
        let mut file = fs_err::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(failure)?;
        match rustix::fs::flock(file.file(), rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(false),
            Err(e) => return Err(failure(std::io::Error::other(format!("{}: cannot lock it: {e}", path.display())))),
        }
        // Who holds it, for a person looking.
        file.set_len(0).map_err(failure)?;
        file.rewind().map_err(failure)?;
        write!(file, "{}", std::process::id()).map_err(failure)?;
        *held = Some(file.into_parts().0);
        Ok(true)
    }
}

/// One scheduler per data directory, however many `svc serve` run on it: the one holding
/// the directory's scheduling lock (taken on first use); the others stand by and take it
/// when its holder stops or dies, as instances on a PostgreSQL database take its lease.
impl ExecutionStore for SqliteStore {
    fn begin(&self) -> Result<Box<dyn ExecutionTx + '_>, StoreFailure> {
        if !self.hold_scheduling()? {
            return Err(StoreFailure(Box::new(NotLeader(format!(
                "another svc serve schedules on {} (its pid is in {SCHEDULER_LOCK})",
                self.path.parent().unwrap_or(&self.path).display()
            )))));
        }
        Ok(Box::new(self.begin_write().map_err(|e| StoreFailure(Box::new(e)))?))
    }

    fn next_due(&self) -> Result<Option<svc_execution::Millis>, StoreFailure> {
        // On a reader: the writer's lock is the publications'.
        self.begin_read().map_err(|e| StoreFailure(Box::new(e)))?.next_due()
    }

    fn lead(&self) -> Result<bool, StoreFailure> {
        self.hold_scheduling()
    }

    fn resign(&self) {
        if let Ok(mut held) = self.scheduling.lock() {
            *held = None;
        }
    }
}
