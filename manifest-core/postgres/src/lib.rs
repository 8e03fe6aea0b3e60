//! What the stores share on PostgreSQL (issue 19): a database URL checked once
//! ([`Database::parse`]), connections over the project's rustls ([`Database::connect`]), and
//! migrations versioned per store, applied once however many instances start together
//! ([`migrate`]).
//!
//! The client is `postgres`, the synchronous face of `tokio-postgres`: the stores' operations
//! are synchronous (SQLite's are). It drives each connection on a small tokio runtime of its
//! own, so it must not be used on a thread that is running async tasks: the pool
//! ([`threads`]) keeps every connection on a thread of its own, so a store works from any
//! thread. [`Database::connect`] is for synchronous programs (a migration at the CLI, tests).

#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_postgres_rustls::MakeRustlsConnect;

pub mod on_runtime;
pub mod threads;

pub use on_runtime::{Lane, RuntimePool};
pub use threads::{Connection, Pool, Session};

/// Why a database could not be used.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// The URL is not a PostgreSQL URL.
    #[error(
        "the database URL {shown:?} is not valid: {reason} (expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE, \
         with ?sslmode=require for TLS)"
    )]
    BadUrl {
        /// The URL with its password hidden.
        shown: String,
        /// Why.
        reason: String,
    },
    /// The CA file for the database's TLS could not be used.
    #[error("cannot use {path} to check the database's certificate: {reason}")]
    Ca {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The password file could not be used.
    #[error("cannot use {path} as the database's password file: {reason}")]
    PasswordFile {
        /// The file.
        path: PathBuf,
        /// Why (never its content).
        reason: String,
    },
    /// Connecting, or a statement, failed.
    #[error("database {location}: {}", causes(source))]
    Postgres {
        /// Where (host, port, database; never the password).
        location: String,
        /// The client's error.
        #[source]
        source: postgres::Error,
    },
    /// A migration failed; nothing of it was applied.
    #[error("database {location}: migration {version} of the {store} store failed: {}", causes(source))]
    Migration {
        /// Where.
        location: String,
        /// Which store.
        store: String,
        /// Which migration (1-based).
        version: usize,
        /// The client's error.
        #[source]
        source: postgres::Error,
    },
    /// No connection could be had in time: the database is down or unreachable, or every
    /// connection of the pool is busy.
    #[error("database {location}: no connection: {reason}")]
    Busy {
        /// Where.
        location: String,
        /// The last connection error, or the wait.
        reason: String,
    },
    /// The database could not be reached, or dropped the connection (it is down or
    /// restarting): the same work may succeed in a moment.
    #[error("database {location}: unreachable: {reason}")]
    Unreachable {
        /// Where.
        location: String,
        /// Why, with its causes.
        reason: String,
    },
    /// The database holds migrations this build does not know: a newer build wrote it.
    #[error(
        "database {location}: the {store} store is at migration {found}, newer than this build's {known}: run the \
         newer svc, or restore the database"
    )]
    TooNew {
        /// Where.
        location: String,
        /// Which store.
        store: String,
        /// The database's version.
        found: i64,
        /// This build's.
        known: usize,
    },
}

/// An error with its causes, as one line: the client's "error connecting to server" says
/// why only in its source ("Connection refused").
pub(crate) fn causes(error: &postgres::Error) -> String {
    let mut text = error.to_string();
    let mut next = std::error::Error::source(error);
    while let Some(cause) = next {
        let said = cause.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        next = cause.source();
    }
    text
}

/// How a store's connections to its database are pooled.
#[derive(Debug, Clone, Copy)]
pub struct PoolSettings {
    /// Connections at most (each instance's own).
    pub size: u32,
    /// How long an operation waits for a connection before it fails (503 at the API).
    pub wait: std::time::Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings { size: 8, wait: std::time::Duration::from_secs(5) }
    }
}

/// A PostgreSQL database to connect to: its URL checked, and the TLS to reach it.
#[derive(Clone)]
pub struct Database {
    config: postgres::Config,
    /// The same settings, for connections on an async runtime ([`on_runtime`]).
    runtime_config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    location: String,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database").field("location", &self.location).finish_non_exhaustive()
    }
}

/// Whether `url` names a PostgreSQL database (and not a SQLite file).
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The URL with any password replaced by `***`, for messages: the one in its credentials
/// (`USER:PASSWORD@`, read as the client reads it: up to the first `@`, and hidden up to the
/// last, so a password holding `@` or `/` shows no piece of itself) and a `password=` option.
/// A string that is not a URL (`host=... password=...`) is not shown at all when it names a
/// password anywhere: its quoting and spacing (`password = 'a b'`) are the client's to read,
/// and a partial reading would show a piece of the password.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        if url.to_ascii_lowercase().contains("password") {
            return "(connection settings naming a password, not shown)".to_owned();
        }
        return url.to_owned();
    };
    let rest = match (rest.find('@'), rest.rfind('@')) {
        (Some(first), Some(last)) => match rest[..first].split_once(':') {
            Some((user, _)) => format!("{user}:***@{}", &rest[last + 1..]),
            None => rest.to_owned(),
        },
        _ => rest.to_owned(),
    };
    let rest = match rest.split_once('?') {
        Some((head, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if percent_decoded(key) == b"password" => format!("{key}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{head}?{}", query.join("&"))
        }
        None => rest,
    };
    format!("{scheme}://{rest}")
}

/// `%XX` decoded, anything else (a `%` not followed by two hex digits) as it is.
fn percent_decoded(text: &str) -> Vec<u8> {
    percent_encoding::percent_decode_str(text).collect()
}

/// Whether `url` carries a password (in its credentials or as a `password=` option): on a
/// command line, every user of the machine reads it in the process list.
pub fn has_password(url: &str) -> bool {
    let parsed = url.parse::<tokio_postgres::Config>().is_ok_and(|c| c.get_password().is_some());
    parsed || redacted(url) != url
}

/// The most a password file may hold.
const MAX_PASSWORD_FILE_BYTES: u64 = 4096;

/// The password in `path`, for [`Database::set_password`]: the file is refused unless only
/// its owner may read it (0600 or 0400, as libpq refuses a `.pgpass` that others can read)
/// and unless it holds one non-empty line (a final newline is dropped).
pub fn read_password_file(path: &Path) -> Result<Vec<u8>, DbError> {
    use std::io::Read as _;
    use std::os::unix::fs::PermissionsExt as _;
    let failed = |reason: String| DbError::PasswordFile { path: path.to_owned(), reason };
    let file = fs_err::File::open(path).map_err(|e| failed(e.to_string()))?;
    let meta = file.metadata().map_err(|e| failed(e.to_string()))?;
    if !meta.is_file() {
        return Err(failed("it is not a regular file".to_owned()));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(failed(format!(
            "its mode is {mode:04o}: others may read it; make it readable by its owner alone (chmod 600 {})",
            path.display()
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_PASSWORD_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(|e| failed(e.to_string()))?;
    if bytes.len() as u64 > MAX_PASSWORD_FILE_BYTES {
        return Err(failed(format!("it is larger than {MAX_PASSWORD_FILE_BYTES} bytes: it holds the password alone")));
    }
    let password = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    let password = password.strip_suffix(b"\r").unwrap_or(password);
    if password.is_empty() {
        return Err(failed("it is empty: it holds the password alone".to_owned()));
    }
    if password.contains(&b'\n') {
        return Err(failed("it holds more than one line: it holds the password alone".to_owned()));
    }
    Ok(password.to_vec())
}

impl DbError {
    /// Whether trying again later may succeed (the database is down, restarting, or every
    /// connection is busy), as opposed to a refused statement or a bad setting.
    pub fn is_transient(&self) -> bool {
        matches!(self, DbError::Busy { .. } | DbError::Unreachable { .. })
    }
}

/// Whether `e` is the database ending the connection (`pg_terminate_backend`, a shutdown, a
/// restart, a connection failure): its message may arrive before the client sees the socket
/// close, so `is_closed` alone misses it (CI saw a terminated transaction's next statement
/// answered as a plain failure, not as the database gone).
pub fn ends_connection(e: &postgres::Error) -> bool {
    use postgres::error::SqlState;
    e.code().is_some_and(|code| {
        [SqlState::ADMIN_SHUTDOWN, SqlState::CRASH_SHUTDOWN, SqlState::CANNOT_CONNECT_NOW].contains(code)
            || code.code().starts_with("08")
    })
}

impl Database {
    /// Checks `url` (`postgres://` or `postgresql://`, `sslmode` as libpq reads it) and
    /// prepares TLS: the database's certificate is checked against `ca` (a PEM file) if given,
    /// else the system's roots.
    pub fn parse(url: &str, ca: Option<&Path>) -> Result<Database, DbError> {
        let bad = |reason: String| DbError::BadUrl { shown: redacted(url), reason };
        if !is_postgres_url(url) {
            return Err(bad("it does not start with postgres:// or postgresql://".to_owned()));
        }
        let runtime_config: tokio_postgres::Config = url.parse().map_err(|e: postgres::Error| bad(e.to_string()))?;
        let config = postgres::Config::from(runtime_config.clone());
        if config.get_dbname().is_none() {
            return Err(bad("it names no database".to_owned()));
        }
        if config.get_hosts().is_empty() {
            return Err(bad("it names no host".to_owned()));
        }
        let location = location(&config);
        Ok(Database { config, runtime_config, tls: MakeRustlsConnect::new(tls_config(ca)?), location })
    }

    /// Sets `name` to `value` in every session opened from now on (`-c name=value` among its
    /// options), as `PGOPTIONS` would: a custom setting (`svc.…`) that SQL reads with
    /// `current_setting`. `value` holds no space.
    pub fn add_session_setting(&mut self, name: &str, value: &str) {
        let setting = format!("-c {name}={value}");
        let options = match self.runtime_config.get_options() {
            Some(given) if !given.is_empty() => format!("{given} {setting}"),
            _ => setting,
        };
        self.runtime_config.options(&options);
        self.config.options(&options);
    }

    /// Connects with `password` ([`read_password_file`]) instead of one in the URL.
    pub fn set_password(&mut self, password: &[u8]) {
        self.runtime_config.password(password);
        self.config.password(password);
    }

    /// Opens a connection.
    pub fn connect(&self) -> Result<postgres::Client, DbError> {
        self.config
            .connect(self.tls.clone())
            .map_err(|source| DbError::Postgres { location: self.location.clone(), source })
    }

    /// A bounded pool of connections to it, each on a thread of its own ([`threads`]): at
    /// most `size`, a checkout waiting at most `wait` before it fails ([`DbError::Busy`]).
    pub fn pool(&self, size: u32, wait: std::time::Duration) -> Pool {
        Pool::new(self, size, wait)
    }

    /// `size` connections (at least two) driven on the caller's async runtime, for
    /// statements that each stand alone ([`on_runtime`], which says what `wait` bounds).
    pub fn runtime_pool(&self, size: u32, wait: std::time::Duration) -> RuntimePool {
        RuntimePool::new(self, self.runtime_config.clone(), size, wait)
    }

    /// Host, port and database, for messages (never a password).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The database could not be reached, or dropped the connection: `source` with its causes.
    pub fn unreachable(&self, source: &postgres::Error) -> DbError {
        DbError::Unreachable { location: self.location.clone(), reason: causes(source) }
    }

    /// Wraps a client error with where it happened.
    pub fn error(&self, source: postgres::Error) -> DbError {
        DbError::Postgres { location: self.location.clone(), source }
    }
}

fn location(config: &postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(name)) => name.clone(),
        Some(postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => String::new(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}/{}", config.get_dbname().unwrap_or_default())
}

fn tls_config(ca: Option<&Path>) -> Result<rustls::ClientConfig, DbError> {
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    match ca {
        Some(path) => {
            let failed = |reason: String| DbError::Ca { path: path.to_owned(), reason };
            let pem = fs_err::read(path).map_err(|e| failed(e.to_string()))?;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                roots.add(cert.map_err(|e| failed(e.to_string()))?).map_err(|e| failed(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(failed("it holds no PEM certificate".to_owned()));
            }
        }
        None => {
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| DbError::Ca { path: ca.map(Path::to_owned).unwrap_or_default(), reason: e.to_string() })?;
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
}

/// The table that records each store's applied migrations.
const MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS svc_migrations (
    store       TEXT NOT NULL,
    version     BIGINT NOT NULL,
    applied_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (store, version)
)";

/// Applies the `store`'s migrations the database does not have yet, in one transaction,
/// holding a transaction-scoped advisory lock on the store's name: instances that start
/// together wait for each other, and each migration is applied once. Returns how many
/// were applied.
pub fn migrate(
    db: &Database,
    client: &mut postgres::Client,
    store: &str,
    migrations: &[&str],
) -> Result<usize, DbError> {
    let mut tx = client.transaction().map_err(|e| db.error(e))?;
    tx.execute("SELECT pg_advisory_xact_lock(hashtext('svc-migrations:' || $1))", &[&store])
        .map_err(|e| db.error(e))?;
    // Made under the lock: two first starts would otherwise race on the catalog.
    tx.batch_execute(MIGRATIONS_TABLE).map_err(|e| db.error(e))?;
    let row = tx
        .query_one("SELECT COALESCE(MAX(version), 0) FROM svc_migrations WHERE store = $1", &[&store])
        .map_err(|e| db.error(e))?;
    let applied: i64 = row.get(0);
    if applied > migrations.len() as i64 {
        return Err(DbError::TooNew {
            location: db.location.clone(),
            store: store.to_owned(),
            found: applied,
            known: migrations.len(),
        });
    }
    let mut count = 0;
    for (i, sql) in migrations.iter().enumerate().skip(usize::try_from(applied).unwrap_or(usize::MAX)) {
        let version = i + 1;
        let failed =
            |source| DbError::Migration { location: db.location.clone(), store: store.to_owned(), version, source };
        tx.batch_execute(sql).map_err(failed)?;
        tx.execute("INSERT INTO svc_migrations (store, version) VALUES ($1, $2)", &[&store, &(version as i64)])
            .map_err(failed)?;
        count += 1;
    }
    tx.commit().map_err(|e| db.error(e))?;
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_once_and_passwords_never_shown() {
        assert!(is_postgres_url("postgres://u@h/db") && is_postgres_url("postgresql://u@h/db"));
        assert!(!is_postgres_url("relay.sqlite3") && !is_postgres_url("mysql://u@h/db"));
        assert_eq!(redacted("postgres://svc:s3cret@db.internal:5432/svc"), "postgres://svc:***@db.internal:5432/svc");
        assert_eq!(redacted("postgres://svc@db/svc?sslmode=require"), "postgres://svc@db/svc?sslmode=require");
        let refused = Database::parse("mysql://svc:s3cret@db/svc", None).expect_err("not PostgreSQL");
        assert!(refused.to_string().contains("postgres://") && !refused.to_string().contains("s3cret"), "{refused}");
        let no_db = Database::parse("postgres://svc:s3cret@db", None).expect_err("no database");
        assert!(no_db.to_string().contains("names no database") && !no_db.to_string().contains("s3cret"), "{no_db}");
        let db = Database::parse("postgres://svc:s3cret@db.internal:5433/relay?sslmode=require", None).expect("valid");
        assert_eq!(db.location(), "db.internal:5433/relay");
        assert!(!format!("{db:?}").contains("s3cret"));
    }

    #[test]
    fn a_password_is_hidden_wherever_the_url_holds_one() {
        for (url, shown) in [
            ("postgres://svc:s3cret@db/svc", "postgres://svc:***@db/svc"),
            ("postgres://svc:s3/cr@t@db:5432/svc", "postgres://svc:***@db:5432/svc"),
            (
                "postgresql://svc@db/svc?sslmode=require&password=s3cret",
                "postgresql://svc@db/svc?sslmode=require&password=***",
            ),
            ("postgres://svc@db/svc?pass%77ord=s3cret", "postgres://svc@db/svc?pass%77ord=***"),
            ("host=db password=s3cret dbname=svc", "(connection settings naming a password, not shown)"),
            // Spaces around `=` and a quoted value, as the client reads them.
            ("host=db password = s3cret dbname=svc", "(connection settings naming a password, not shown)"),
            ("host=db password='s3 cret' dbname=svc", "(connection settings naming a password, not shown)"),
        ] {
            assert_eq!(redacted(url), shown, "{url}");
            assert!(has_password(url), "{url}");
        }
        for url in ["postgres://svc@db/svc", "postgres://db:5432/svc?sslmode=require", "relay.sqlite3"] {
            assert_eq!(redacted(url), url);
            assert!(!has_password(url), "{url}");
        }
        // The client's own reading agrees: what it takes as a password is hidden.
        let odd = "postgres://svc:s3/cret@db/svc";
        let parsed: tokio_postgres::Config = odd.parse().expect("the client reads it");
        assert_eq!(parsed.get_password(), Some(&b"s3/cret"[..]));
        assert!(!redacted(odd).contains("s3") && !redacted(odd).contains("cret"), "{}", redacted(odd));
    }

    #[test]
    fn a_password_file_is_read_only_if_its_owner_alone_may_read_it() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("a scratch directory");
        let file = dir.path().join("password");
        std::fs::write(&file, "s3cret\n").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        assert_eq!(read_password_file(&file).expect("0600"), b"s3cret");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let open = read_password_file(&file).expect_err("group may read it").to_string();
        assert!(open.contains("0640") && open.contains("chmod 600") && !open.contains("s3cret"), "{open}");
        for (content, why) in [("", "empty"), ("\n", "empty"), ("a\nb\n", "more than one line")] {
            std::fs::write(&file, content).expect("write");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o400)).expect("chmod");
            let e = read_password_file(&file).expect_err(why).to_string();
            assert!(e.contains(why), "{e}");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        let missing = read_password_file(&dir.path().join("none")).expect_err("no file").to_string();
        assert!(missing.contains("none"), "{missing}");
    }

    #[test]
    fn a_password_from_a_file_reaches_a_database_that_asks_for_one() {
        let Some(cluster) = svc_pg_cluster::for_test("password_file") else { return };
        let url = cluster.create_password_database("locked", "svc", "s3cret").expect("a database");
        let mut db = Database::parse(&format!("{url}?connect_timeout=5"), None).expect("the URL");
        let Err(refused) = db.connect() else { panic!("connected without the password") };
        let refused = refused.to_string();
        assert!(refused.contains("password") && !refused.contains("s3cret"), "{refused}");
        db.set_password(b"s3cret");
        let mut client = db.connect().expect("connect");
        let row = client.query_one("SELECT current_user::text", &[]).expect("a query");
        assert_eq!(row.get::<_, String>(0), "svc");
        // The pool's threads and the runtime's connections use it too.
        let session = db.pool(1, std::time::Duration::from_secs(5)).session().expect("a session");
        let user = session.run(|c| c.client().query_one("SELECT current_user::text", &[])).expect("pooled");
        assert_eq!(user.get::<_, String>(0), "svc");
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        let rows = runtime
            .block_on(db.runtime_pool(2, std::time::Duration::from_secs(5)).query(Lane::Read, "SELECT 1::int4", &[]))
            .expect("on the runtime");
        assert_eq!(rows[0].get::<_, i32>(0), 1);
    }

    #[test]
    fn a_missing_ca_file_is_named() {
        let e = Database::parse("postgres://svc@db/svc", Some(Path::new("/nonexistent/ca.pem"))).expect_err("no file");
        assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
    }

    const STEPS: &[&str] =
        &["CREATE TABLE a (id BIGINT PRIMARY KEY)", "ALTER TABLE a ADD COLUMN note TEXT NOT NULL DEFAULT ''"];

    #[test]
    fn migrations_apply_once_even_from_instances_starting_together() {
        let Some(cluster) = svc_pg_cluster::for_test("migrations_apply_once") else { return };
        let db = Database::parse(&cluster.svc_url(), None).expect("the cluster's URL");
        // Eight instances start at once: each migration is applied by exactly one.
        let applied: usize = std::thread::scope(|s| {
            let runs: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        let mut client = db.connect().expect("connect");
                        migrate(&db, &mut client, "test", STEPS).expect("migrate")
                    })
                })
                .collect();
            runs.into_iter().map(|r| r.join().expect("no panic")).sum()
        });
        assert_eq!(applied, STEPS.len(), "each migration once, whoever applied it");
        let mut client = db.connect().expect("connect");
        assert_eq!(migrate(&db, &mut client, "test", STEPS).expect("again"), 0, "nothing left to apply");
        // Another store's migrations are counted apart.
        assert_eq!(migrate(&db, &mut client, "other", &["CREATE TABLE b (id BIGINT)"]).expect("other"), 1);
        // A build that knows fewer migrations than the database has refuses to run on it.
        let too_new = migrate(&db, &mut client, "test", &STEPS[..1]).expect_err("older build");
        assert!(matches!(too_new, DbError::TooNew { found: 2, known: 1, .. }), "{too_new}");
        // A failing migration leaves nothing of itself, and the version is not recorded.
        let broken = [STEPS[0], STEPS[1], "CREATE TABLE c (id BIGINT); SELECT no_such_function()"];
        let failed = migrate(&db, &mut client, "test", &broken).expect_err("broken");
        assert!(matches!(failed, DbError::Migration { version: 3, .. }), "{failed}");
        let tables = cluster.sql("svc", "SELECT count(*) FROM pg_tables WHERE tablename = 'c'").expect("query");
        assert_eq!(tables, "0", "the failed migration's table was rolled back");
    }

    #[test]
    fn a_session_setting_is_set_beside_the_urls_own_options() {
        let Some(cluster) = svc_pg_cluster::for_test("session_setting") else { return };
        let url = format!("{}?options=-c%20statement_timeout%3D7000", cluster.svc_url());
        let mut db = Database::parse(&url, None).expect("the cluster's URL");
        db.add_session_setting("svc.test_setting", "on");
        let mut client = db.connect().expect("connect");
        let row = client
            .query_one("SELECT current_setting('svc.test_setting'), current_setting('statement_timeout')", &[])
            .expect("the settings");
        assert_eq!((row.get::<_, String>(0), row.get::<_, String>(1)), ("on".to_owned(), "7s".to_owned()));
    }

    #[test]
    fn an_unreachable_database_is_a_clear_error_with_no_password() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a port").port();
        let db = Database::parse(&format!("postgres://svc:s3cret@127.0.0.1:{port}/svc?connect_timeout=2"), None)
            .expect("valid");
        let Err(e) = db.connect() else { panic!("nothing listens on {port}") };
        let text = e.to_string();
        assert!(text.contains(&format!("127.0.0.1:{port}/svc")) && !text.contains("s3cret"), "{text}");
        assert!(text.to_lowercase().contains("refused"), "why, not only that it failed: {text}");
    }
}
