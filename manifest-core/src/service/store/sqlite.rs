//! The embedded store: one SQLite file in the data directory, in WAL mode with
//! `synchronous = FULL` (a committed publication survives a power cut). One writer connection,
//! serialized by a mutex (SQLite has one writer anyway; `BEGIN IMMEDIATE` also excludes other
//! processes, such as `svc admin`), and a small pool of read-only connections, which WAL lets
//! read while the writer writes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, Row, params};

use super::{
    AcceptedArtifact, Activity, Application, ArtifactEvidence, Caller, GroupedDone, GroupedWork, NewToken,
    Organization, PolicyVersion, RuntimeImage, Status, Store, StoreError, Transaction,
};
use crate::service::auth::Role;
use crate::service::capability::Tier;

mod executions;

/// The migrations, in order; `PRAGMA user_version` is the number applied.
const MIGRATIONS: &[&str] =
    &[include_str!("../../../migrations/0001_initial.sql"), include_str!("../../../migrations/0002_executions.sql")];

/// The database file's name inside the data directory.
pub const DATABASE_FILE: &str = "svc.sqlite3";

/// How long a connection waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The most units of grouped work one commit takes.
const MAX_GROUP: usize = 64;

/// The SQLite store of one data directory.
#[derive(Debug)]
pub struct SqliteStore {
    path: PathBuf,
    writer: Arc<Mutex<Connection>>,
    readers: Mutex<Vec<Connection>>,
    /// The group-commit thread's queue, started on first use.
    group: Mutex<Option<std::sync::mpsc::Sender<Grouped>>>,
}

/// A unit of grouped work and where its commit's outcome goes.
struct Grouped {
    work: GroupedWork,
    done: GroupedDone,
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
            group: Mutex::new(None),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
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

fn db(e: rusqlite::Error) -> StoreError {
    StoreError::Backend(Box::new(e))
}

impl Store for SqliteStore {
    fn read(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        let conn = self.reader()?;
        run_cached(&conn, "BEGIN DEFERRED").map_err(db)?;
        Ok(Box::new(SqliteTransaction { conn: Held::Reader(Some(conn), &self.readers), open: true }))
    }

    fn write(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        let conn = self.writer.lock().map_err(poisoned)?;
        conn.execute_batch("BEGIN IMMEDIATE").map_err(db)?;
        Ok(Box::new(SqliteTransaction { conn: Held::Writer(conn), open: true }))
    }

    fn write_grouped(&self, work: GroupedWork, done: GroupedDone) {
        let gone = || StoreError::Backend("the group-commit thread is gone".into());
        let Ok(mut group) = self.group.lock() else { return done(Err(gone())) };
        let queue = group.get_or_insert_with(|| {
            let (tx, rx) = std::sync::mpsc::channel();
            let writer = self.writer.clone();
            // If the thread cannot start, the queue's receiver is dropped and sends fail.
            let _ =
                std::thread::Builder::new().name("svc-group-commit".into()).spawn(move || group_commit(&writer, &rx));
            tx
        });
        if let Err(std::sync::mpsc::SendError(unit)) = queue.send(Grouped { work, done }) {
            (unit.done)(Err(gone()));
        }
    }
}

/// The group-commit loop: takes every unit queued by the time the previous commit finished
/// (at most `MAX_GROUP`), runs each in its own savepoint, and commits them together.
fn group_commit(writer: &Mutex<Connection>, queue: &std::sync::mpsc::Receiver<Grouped>) {
    while let Ok(first) = queue.recv() {
        let mut units = vec![first];
        while units.len() < MAX_GROUP {
            match queue.try_recv() {
                Ok(unit) => units.push(unit),
                Err(_) => break,
            }
        }
        let result = match writer.lock() {
            Ok(conn) => run_group(&conn, &mut units),
            Err(_) => Err(StoreError::Backend("a previous store operation panicked".into())),
        };
        for unit in units {
            (unit.done)(result.as_ref().map(|_| ()).map_err(|e| StoreError::Backend(e.to_string().into())));
        }
    }
}

fn run_group(conn: &Connection, units: &mut [Grouped]) -> Result<(), StoreError> {
    conn.execute_batch("BEGIN IMMEDIATE").map_err(db)?;
    for unit in units.iter_mut() {
        let work = std::mem::replace(&mut unit.work, Box::new(|_| false));
        let kept = run_cached(conn, "SAVEPOINT unit").map_err(db).and_then(|()| {
            let mut tx = SqliteTransaction { conn: Held::Borrowed(conn), open: false };
            let keep = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(&mut tx))).unwrap_or(false);
            drop(tx);
            if !keep {
                run_cached(conn, "ROLLBACK TO unit").map_err(db)?;
            }
            run_cached(conn, "RELEASE unit").map_err(db)
        });
        if let Err(e) = kept {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e);
        }
    }
    conn.execute_batch("COMMIT").map_err(|e| {
        let _ = conn.execute_batch("ROLLBACK");
        db(e)
    })
}

/// A connection held for one transaction: the writer (under its lock) or a pooled reader
/// (returned to the pool when done).
enum Held<'s> {
    Writer(MutexGuard<'s, Connection>),
    Reader(Option<Connection>, &'s Mutex<Vec<Connection>>),
    /// Inside a group commit: the savepoint around it is managed by `run_group`.
    Borrowed(&'s Connection),
}

struct SqliteTransaction<'s> {
    conn: Held<'s>,
    open: bool,
}

impl SqliteTransaction<'_> {
    fn conn(&self) -> &Connection {
        match &self.conn {
            Held::Writer(guard) => guard,
            Held::Borrowed(conn) => conn,
            // Only `Drop` takes the reader out.
            Held::Reader(conn, _) => conn.as_ref().unwrap_or_else(|| unreachable!("reader taken before drop")),
        }
    }
}

/// Runs a statement without parameters through the connection's statement cache (every
/// request begins and ends a transaction: parsing `BEGIN` each time showed in profiles).
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

impl Drop for SqliteTransaction<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = run_cached(self.conn(), "ROLLBACK");
        }
        if let Held::Reader(conn, pool) = &mut self.conn
            && let (Some(conn), Ok(mut pool)) = (conn.take(), pool.lock())
        {
            pool.push(conn);
        }
    }
}

fn organization_row(r: &Row<'_>) -> rusqlite::Result<Organization> {
    let tier: String = r.get(2)?;
    Ok(Organization {
        id: r.get(0)?,
        name: r.get(1)?,
        tier: Tier::parse(&tier).unwrap_or(Tier::Basic),
        spend_authority_micros: r.get::<_, Option<i64>>(3)?.map(|m| m as u64),
    })
}

const APPLICATION_COLUMNS: &str = "id, organization_id, application_id, application_uid, status, pause_reason, \
     active_pointer_version, settled, rearmed_version";

fn application_row(r: &Row<'_>) -> rusqlite::Result<Application> {
    let status: String = r.get(4)?;
    Ok(Application {
        key: r.get(0)?,
        organization: r.get(1)?,
        application_id: r.get(2)?,
        application_uid: r.get(3)?,
        status: Status::parse(&status).unwrap_or(Status::Disabled),
        pause_reason: r.get(5)?,
        active_pointer_version: r.get::<_, i64>(6)? as u64,
        settled: r.get(7)?,
        rearmed_version: r.get::<_, i64>(8)? as u64,
    })
}

const VERSION_COLUMNS: &str =
    "version, schema_version, authored_digest, policy_digest, policy, authored, jobs, execution, published_by";

fn version_row(r: &Row<'_>) -> rusqlite::Result<PolicyVersion> {
    Ok(PolicyVersion {
        version: r.get::<_, i64>(0)? as u64,
        schema_version: r.get(1)?,
        authored_digest: r.get(2)?,
        policy_digest: r.get(3)?,
        policy: r.get(4)?,
        authored: r.get(5)?,
        jobs: r.get::<_, i64>(6)? as u64,
        execution: r.get(7)?,
        published_by: r.get(8)?,
    })
}

fn evidence_row(r: &Row<'_>, at: usize) -> rusqlite::Result<ArtifactEvidence> {
    Ok(ArtifactEvidence {
        cid: r.get(at)?,
        digest: r.get(at + 1)?,
        kind: r.get(at + 2)?,
        encryption: r.get(at + 3)?,
        image_digest: r.get(at + 4)?,
    })
}

/// SQLite integers are signed; every count and version here is far below 2^63.
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Transaction for SqliteTransaction<'_> {
    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        self.conn().execute_batch("COMMIT").map_err(db)?;
        self.open = false;
        Ok(())
    }

    fn caller(&mut self, token_hash: &str) -> Result<Option<Caller>, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT o.id, o.name, o.entitlement, o.spend_authority_micros, t.id, t.name, t.role
                 FROM tokens t JOIN organizations o ON o.id = t.organization_id WHERE t.token_hash = ?1",
            )
            .map_err(db)?
            .query_row([token_hash], |r| {
                let role: String = r.get(6)?;
                Ok(Caller {
                    organization: organization_row(r)?,
                    token_id: r.get(4)?,
                    name: r.get(5)?,
                    role: Role::parse(&role).unwrap_or(Role::Viewer),
                })
            })
            .optional()
            .map_err(db)
    }

    fn organization(&mut self, name: &str) -> Result<Option<Organization>, StoreError> {
        self.conn()
            .query_row(
                "SELECT id, name, entitlement, spend_authority_micros FROM organizations WHERE name = ?1",
                [name],
                organization_row,
            )
            .optional()
            .map_err(db)
    }

    fn ensure_organization(&mut self, name: &str) -> Result<Organization, StoreError> {
        self.conn().execute("INSERT OR IGNORE INTO organizations (name) VALUES (?1)", [name]).map_err(db)?;
        self.organization(name)?.ok_or_else(|| StoreError::NotFound(format!("organization {name}")))
    }

    fn insert_token(&mut self, organization: i64, token: &NewToken) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO tokens (id, organization_id, role, name, token_hash) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![token.id, organization, token.role.as_str(), token.name, token.hash],
            )
            .map_err(db)?;
        Ok(())
    }

    fn grants(&mut self, organization: i64) -> Result<BTreeSet<String>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT capability FROM capability_grants WHERE organization_id = ?1")
            .map_err(db)?;
        let rows = stmt.query_map([organization], |r| r.get(0)).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn set_grant(&mut self, organization: i64, capability: &str, granted: bool) -> Result<(), StoreError> {
        let sql = if granted {
            "INSERT OR IGNORE INTO capability_grants (organization_id, capability) VALUES (?1, ?2)"
        } else {
            "DELETE FROM capability_grants WHERE organization_id = ?1 AND capability = ?2"
        };
        self.conn().execute(sql, params![organization, capability]).map_err(db)?;
        Ok(())
    }

    fn set_tier(&mut self, organization: i64, tier: Tier) -> Result<(), StoreError> {
        self.conn()
            .execute("UPDATE organizations SET entitlement = ?2 WHERE id = ?1", params![organization, tier.as_str()])
            .map_err(db)?;
        Ok(())
    }

    fn set_spend_authority(&mut self, organization: i64, micros: Option<u64>) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "UPDATE organizations SET spend_authority_micros = ?2 WHERE id = ?1",
                params![organization, micros.map(int)],
            )
            .map_err(db)?;
        Ok(())
    }

    fn ssh_keys(&mut self, organization: i64) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached("SELECT public_key FROM ssh_keys WHERE organization_id = ?1 ORDER BY public_key")
            .map_err(db)?;
        let rows = stmt.query_map([organization], |r| r.get(0)).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn add_ssh_key(&mut self, organization: i64, public_key: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT OR IGNORE INTO ssh_keys (organization_id, public_key) VALUES (?1, ?2)",
                params![organization, public_key],
            )
            .map_err(db)?;
        Ok(())
    }

    fn application(&mut self, organization: i64, application_id: &str) -> Result<Option<Application>, StoreError> {
        let sql = format!(
            "SELECT {APPLICATION_COLUMNS} FROM applications WHERE organization_id = ?1 AND application_id = ?2"
        );
        self.conn()
            .prepare_cached(&sql)
            .and_then(|mut s| s.query_row(params![organization, application_id], application_row).optional())
            .map_err(db)
    }

    fn applications(&mut self, organization: i64) -> Result<Vec<Application>, StoreError> {
        let sql = format!(
            "SELECT {APPLICATION_COLUMNS} FROM applications WHERE organization_id = ?1 ORDER BY application_id"
        );
        let mut stmt = self.conn().prepare_cached(&sql).map_err(db)?;
        let rows = stmt.query_map(params![organization], application_row).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn insert_application(
        &mut self,
        organization: i64,
        application_id: &str,
        application_uid: &str,
    ) -> Result<Application, StoreError> {
        let inserted = self
            .conn()
            .execute(
                "INSERT OR IGNORE INTO applications (organization_id, application_id, application_uid)
                 VALUES (?1, ?2, ?3)",
                params![organization, application_id, application_uid],
            )
            .map_err(db)?;
        if inserted == 0 {
            return Err(StoreError::Conflict(format!("the application \"{application_id}\" already exists")));
        }
        self.application(organization, application_id)?
            .ok_or_else(|| StoreError::NotFound(format!("application {application_id}")))
    }

    fn update_application(&mut self, a: &Application) -> Result<(), StoreError> {
        self.conn()
            // The scheduler looks at the application at once: a pause, a resume or a new
            // pointer changes what it must do.
            .prepare_cached(
                "UPDATE applications SET status = ?2, pause_reason = ?3, active_pointer_version = ?4, settled = ?5,
                     exec_next_at = ?6, rearmed_version = ?7
                 WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.execute(params![
                    a.key,
                    a.status.as_str(),
                    a.pause_reason,
                    int(a.active_pointer_version),
                    a.settled,
                    int(crate::service::publish::now_ms()),
                    int(a.rearmed_version)
                ])
            })
            .map_err(db)?;
        Ok(())
    }

    fn jobs_in_use(&mut self, organization: i64, except: i64) -> Result<u64, StoreError> {
        self.conn()
            .prepare_cached(
                "SELECT COALESCE(SUM(v.jobs), 0) FROM applications a
                 JOIN policy_versions v ON v.application_id = a.id AND v.version = a.active_pointer_version
                 WHERE a.organization_id = ?1 AND a.id <> ?2 AND a.status <> 'disabled' AND a.settled = 0",
            )
            .and_then(|mut s| s.query_row(params![organization, except], |r| r.get::<_, i64>(0)))
            .map(|n| n as u64)
            .map_err(db)
    }

    fn policy_versions(&mut self, application: i64) -> Result<Vec<PolicyVersion>, StoreError> {
        let sql = format!("SELECT {VERSION_COLUMNS} FROM policy_versions WHERE application_id = ?1 ORDER BY version");
        let mut stmt = self.conn().prepare_cached(&sql).map_err(db)?;
        let rows = stmt.query_map([application], version_row).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn policy_version(&mut self, application: i64, version: u64) -> Result<Option<PolicyVersion>, StoreError> {
        let sql = format!("SELECT {VERSION_COLUMNS} FROM policy_versions WHERE application_id = ?1 AND version = ?2");
        self.conn()
            .prepare_cached(&sql)
            .and_then(|mut s| s.query_row(params![application, int(version)], version_row).optional())
            .map_err(db)
    }

    fn insert_policy_version(&mut self, application: i64, v: &PolicyVersion) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached(
                "INSERT INTO policy_versions (application_id, version, schema_version, authored_digest, policy_digest,
                 policy, authored, jobs, execution, published_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    application,
                    int(v.version),
                    v.schema_version,
                    v.authored_digest,
                    v.policy_digest,
                    v.policy,
                    v.authored,
                    int(v.jobs),
                    v.execution,
                    v.published_by
                ])
            })
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::ConstraintViolation => {
                    StoreError::Conflict(format!("policy version {} already exists", v.version))
                }
                e => db(e),
            })?;
        Ok(())
    }

    fn record_activity(&mut self, application: i64, e: &Activity) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached(
                "INSERT INTO activity (application_id, at, actor, action, policy_version, status, reason)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .and_then(|mut s| {
                s.execute(params![application, e.at, e.actor, e.action, e.policy_version.map(int), e.status, e.reason])
            })
            .map_err(db)?;
        Ok(())
    }

    fn activity(&mut self, application: i64) -> Result<Vec<Activity>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT at, actor, action, policy_version, status, reason FROM activity
                 WHERE application_id = ?1 ORDER BY id",
            )
            .map_err(db)?;
        let rows = stmt.query_map([application], activity_row).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn recent_activity(&mut self, application: i64, limit: u32) -> Result<Vec<Activity>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT at, actor, action, policy_version, status, reason FROM activity
                 WHERE application_id = ?1 ORDER BY id DESC LIMIT ?2",
            )
            .map_err(db)?;
        let rows = stmt.query_map(params![application, limit], activity_row).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn record_wakeup(&mut self, application: i64, version: u64) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached("INSERT INTO wakeups (application_id, policy_version) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![application, int(version)]))
            .map_err(db)?;
        // Committed with the publication: the scheduler decides for it at its next step.
        self.conn()
            .prepare_cached("UPDATE applications SET exec_next_at = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![application, int(crate::service::publish::now_ms())]))
            .map_err(db)?;
        Ok(())
    }

    fn wakeups(&mut self, application: i64) -> Result<u64, StoreError> {
        self.conn()
            .query_row("SELECT COUNT(*) FROM wakeups WHERE application_id = ?1", [application], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(db)
    }

    fn execution_summary(&mut self, application: i64) -> Result<super::ExecutionSummary, StoreError> {
        executions::summary(self.conn(), application).map_err(db)
    }

    fn executions_page(
        &mut self,
        application: i64,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<svc_execution::Execution>, StoreError> {
        executions::page(self.conn(), application, before, limit).map_err(db)
    }

    fn set_secret_value(
        &mut self,
        organization: i64,
        application_id: &str,
        secret_id: &str,
        value: &[u8],
    ) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached(
                "INSERT INTO provisioned_secrets (organization_id, application_id, secret_id, value)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (organization_id, application_id, secret_id) DO UPDATE SET value = excluded.value",
            )
            .and_then(|mut s| s.execute(params![organization, application_id, secret_id, value]))
            .map_err(db)?;
        Ok(())
    }

    fn curated(&mut self, digest: &str) -> Result<Vec<ArtifactEvidence>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT cid, digest, kind, encryption, image_digest FROM curated_artifacts WHERE digest = ?1 ORDER BY cid",
            )
            .map_err(db)?;
        let rows = stmt.query_map([digest], |r| evidence_row(r, 0)).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn curate(&mut self, a: &ArtifactEvidence) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT OR REPLACE INTO curated_artifacts (cid, digest, kind, encryption, image_digest)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![a.cid, a.digest, a.kind, a.encryption, a.image_digest],
            )
            .map_err(db)?;
        Ok(())
    }

    fn accepted(&mut self, organization: i64, application_id: &str) -> Result<Vec<AcceptedArtifact>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT repository, ref, workflow_ref, manifest_path, cid, digest, kind, encryption, image_digest
                 FROM accepted_artifacts WHERE organization_id = ?1 AND application_id = ?2 ORDER BY id DESC",
            )
            .map_err(db)?;
        let rows = stmt
            .query_map(params![organization, application_id], |r| {
                Ok(AcceptedArtifact {
                    repository: r.get(0)?,
                    git_ref: r.get(1)?,
                    workflow_ref: r.get(2)?,
                    manifest_path: r.get(3)?,
                    evidence: evidence_row(r, 4)?,
                })
            })
            .map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn accept(&mut self, organization: i64, application_id: &str, a: &AcceptedArtifact) -> Result<(), StoreError> {
        let e = &a.evidence;
        self.conn()
            .execute(
                "INSERT INTO accepted_artifacts (organization_id, application_id, repository, ref, workflow_ref,
                 manifest_path, cid, digest, kind, encryption, image_digest)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                params![
                    organization,
                    application_id,
                    a.repository,
                    a.git_ref,
                    a.workflow_ref,
                    a.manifest_path,
                    e.cid,
                    e.digest,
                    e.kind,
                    e.encryption,
                    e.image_digest
                ],
            )
            .map_err(db)?;
        Ok(())
    }

    fn runtime_images(&mut self, catalog: &str, name: &str) -> Result<Vec<RuntimeImage>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT catalog, name, version, digest FROM runtime_images WHERE catalog = ?1 AND name = ?2",
            )
            .map_err(db)?;
        let rows = stmt
            .query_map(params![catalog, name], |r| {
                Ok(RuntimeImage { catalog: r.get(0)?, name: r.get(1)?, version: r.get(2)?, digest: r.get(3)? })
            })
            .map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn add_runtime_image(&mut self, i: &RuntimeImage) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT OR REPLACE INTO runtime_images (catalog, name, version, digest) VALUES (?1, ?2, ?3, ?4)",
                params![i.catalog, i.name, i.version, i.digest],
            )
            .map_err(db)?;
        Ok(())
    }

    fn provisioned_secrets(&mut self, organization: i64, application_id: &str) -> Result<BTreeSet<String>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare_cached(
                "SELECT secret_id FROM provisioned_secrets WHERE organization_id = ?1 AND application_id = ?2",
            )
            .map_err(db)?;
        let rows = stmt.query_map(params![organization, application_id], |r| r.get(0)).map_err(db)?;
        rows.collect::<Result<_, _>>().map_err(db)
    }

    fn provision_secret(&mut self, organization: i64, application_id: &str, secret_id: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT OR IGNORE INTO provisioned_secrets (organization_id, application_id, secret_id)
                 VALUES (?1, ?2, ?3)",
                params![organization, application_id, secret_id],
            )
            .map_err(db)?;
        Ok(())
    }
}

/// One activity row (`at, actor, action, policy_version, status, reason`).
fn activity_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Activity> {
    Ok(Activity {
        at: r.get(0)?,
        actor: r.get(1)?,
        action: r.get(2)?,
        policy_version: r.get::<_, Option<i64>>(3)?.map(|v| v as u64),
        status: r.get(4)?,
        reason: r.get(5)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new().prefix(&format!("svc-store-{name}-")).tempdir().expect("a scratch directory")
    }

    #[test]
    fn migrations_apply_once_and_reopen_finds_the_data() {
        let scratch = temp_dir("reopen");
        let dir = scratch.path();
        {
            let store = SqliteStore::open(dir).expect("open");
            let mut tx = store.write().expect("tx");
            let org = tx.ensure_organization("acme").expect("org");
            tx.insert_application(org.id, "web", "app_1").expect("app");
            tx.commit().expect("commit");
        }
        let store = SqliteStore::open(dir).expect("reopen");
        let mut tx = store.read().expect("tx");
        let org = tx.organization("acme").expect("read").expect("org");
        assert_eq!(tx.application(org.id, "web").expect("read").expect("app").application_uid, "app_1");
    }

    #[test]
    fn an_uncommitted_transaction_leaves_nothing() {
        let scratch = temp_dir("rollback");
        let dir = scratch.path();
        let store = SqliteStore::open(dir).expect("open");
        {
            let mut tx = store.write().expect("tx");
            tx.ensure_organization("acme").expect("org");
        }
        assert!(store.read().expect("tx").organization("acme").expect("read").is_none());
    }

    #[test]
    fn policy_versions_are_immutable() {
        let scratch = temp_dir("immutable");
        let dir = scratch.path();
        let store = SqliteStore::open(dir).expect("open");
        let mut tx = store.write().expect("tx");
        let org = tx.ensure_organization("acme").expect("org");
        let app = tx.insert_application(org.id, "web", "app_1").expect("app");
        let v = PolicyVersion {
            version: 1,
            schema_version: 5,
            authored_digest: "sha256:a".into(),
            policy_digest: "sha256:p".into(),
            policy: "{}".into(),
            authored: "{}".into(),
            jobs: 1,
            execution: "once".into(),
            published_by: "me".into(),
        };
        tx.insert_policy_version(app.key, &v).expect("insert");
        assert!(matches!(tx.insert_policy_version(app.key, &v), Err(StoreError::Conflict(_))));
        tx.commit().expect("commit");
        let conn = store.writer.lock().expect("lock");
        let update = conn.execute("UPDATE policy_versions SET policy = 'x'", []);
        assert!(update.is_err_and(|e| e.to_string().contains("immutable")));
        assert!(conn.execute("DELETE FROM policy_versions", []).is_err());
        drop(conn);
    }
}
