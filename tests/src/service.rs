//! Driving the real service: the `svc` binary started on loopback with its own data
//! directory, a plain HTTP/1.1 client, and `svc admin` commands on the same directory.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `svc` binary of this build (`cargo test --workspace` builds it beside the tests).
pub fn svc_binary() -> PathBuf {
    built_binary(
        "svc",
        "svc-cli",
        &[
            "cli/src",
            "manifest-core/src",
            "manifest-core/migrations",
            "manifest-core/http/src",
            "manifest-core/runner/src",
            "manifest-core/execution/src",
            "manifest-core/web/src",
            "manifest-core/postgres/src",
            "manifest-core/sql/src",
            "relay-api/src",
            "relay-api/catalog/src",
            "relay-api/migrations",
            "relay-api/wire/src",
            "relay-api/gateway/src",
            "relay-api/gateway-host/src",
            "relay-api/dns/src",
            "agent/src",
        ],
    )
}

/// The `gateway-prep` binary of this build.
pub fn gateway_prep_binary() -> PathBuf {
    built_binary(
        "gateway-prep",
        "gateway-prep",
        &[
            "gateway-prep/src",
            "relay-api/wire/src",
            "relay-api/gateway/src",
            "relay-api/gateway-host/src",
            "relay-api/dns/src",
        ],
    )
}

/// Binary `name` of package `package`, beside the test binary, refused if older than any file
/// under `sources`: `cargo test -p svc-e2e` alone does not rebuild it
/// (`SVC_E2E_ALLOW_STALE=1` overrides, for a benchmark while sources change elsewhere).
fn built_binary(name: &str, package: &str, sources: &[&str]) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // A test runs as target/<profile>/deps/<test>, a bin as target/<profile>/<bin>; the
    // workspace's binaries are in target/<profile>.
    let mut dir = exe.parent().expect("target directory");
    if dir.ends_with("deps") {
        dir = dir.parent().expect("target directory");
    }
    let binary = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.exists(),
        "{} is missing: run `cargo test --workspace` (or `cargo build -p {package}`) first",
        binary.display()
    );
    let built = std::fs::metadata(&binary).and_then(|m| m.modified()).expect("binary time");
    let root = crate::workspace();
    let newest = sources.iter().flat_map(|d| newest_file(&root.join(d))).max().expect("sources");
    assert!(
        built >= newest || std::env::var_os("SVC_E2E_ALLOW_STALE").is_some(),
        "{} is older than the sources: run `cargo build -p {package}` (`cargo test --workspace` builds it)",
        binary.display()
    );
    binary
}

fn newest_file(dir: &Path) -> Option<std::time::SystemTime> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let path = e.path();
            if path.is_dir() { newest_file(&path) } else { e.metadata().and_then(|m| m.modified()).ok() }
        })
        .max()
}

/// Set to `postgres`, the publication suites run with every data directory's store on
/// PostgreSQL: a throwaway cluster per data directory, which `svc serve` and `svc admin` reach
/// through `SVC_DATABASE` (what an operator sets). The `publication_pg` test binary always
/// does ([`POSTGRES_BINARY`]).
pub const BACKEND: &str = "SVC_E2E_BACKEND";

/// The test binary that runs the publication suite on PostgreSQL whatever [`BACKEND`] says
/// (`tests/publication_pg.rs`): cargo names it `publication_pg-HASH`.
pub const POSTGRES_BINARY: &str = "publication_pg";

/// Whether the suites run on PostgreSQL: [`BACKEND`] says so, or this is [`POSTGRES_BINARY`].
pub fn on_postgres() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var(BACKEND).is_ok_and(|v| v == "postgres")
            || std::env::current_exe().ok().is_some_and(|exe| is_postgres_binary(&exe))
    })
}

/// Whether `exe` is [`POSTGRES_BINARY`]: `publication_pg-HASH` as cargo builds it, or
/// `publication_pg` itself.
fn is_postgres_binary(exe: &Path) -> bool {
    let stem = exe.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    stem == POSTGRES_BINARY
        || stem
            .strip_prefix(POSTGRES_BINARY)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|hash| !hash.is_empty() && hash.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The clusters of the data directories in use, by directory (dropped, so stopped, with their
/// [`TempDir`]).
static CLUSTERS: std::sync::Mutex<std::collections::BTreeMap<PathBuf, svc_pg_cluster::Cluster>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Data directories whose store is a database given by the test (several instances on one
/// database), by directory.
static ATTACHED: std::sync::Mutex<std::collections::BTreeMap<PathBuf, String>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The key file of each attached database: the first data directory's attached to it.
static SHARED_KEY_FILES: std::sync::Mutex<std::collections::BTreeMap<String, PathBuf>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Makes `data_dir`'s store the database at `url`, for every `svc serve` and `svc` command
/// this harness runs on it (until its [`TempDir`] goes), with the key file every instance on
/// that database reads (`SVC_KEY_FILE`, as an operator sets it): the first data directory's
/// attached to it.
pub fn attach_database(data_dir: &Path, url: &str) {
    ATTACHED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(data_dir.to_owned(), url.to_owned());
    SHARED_KEY_FILES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(url.to_owned())
        .or_insert_with(|| data_dir.join(manifest_core::service::store::KEY_FILE));
}

/// The key file of a data directory's store: the one shared by the instances on an attached
/// database ([`attach_database`]), else `secrets.key` in the directory (`svc serve`'s default).
pub fn key_file_of(data_dir: &Path) -> PathBuf {
    let attached = ATTACHED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(data_dir).cloned();
    attached
        .and_then(|url| SHARED_KEY_FILES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&url).cloned())
        .unwrap_or_else(|| data_dir.join(manifest_core::service::store::KEY_FILE))
}

/// The key file to name in `SVC_KEY_FILE` for a data directory: only an attached one's (the
/// others use the default, as an operator's single instance does).
fn shared_key_file(data_dir: &Path) -> Option<PathBuf> {
    let attached = ATTACHED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains_key(data_dir);
    attached.then(|| key_file_of(data_dir))
}

/// The database URL of a data directory's store: one attached ([`attach_database`]), or when
/// the suites run on PostgreSQL its own cluster's (started on first use); `None` on SQLite.
pub fn database_of(data_dir: &Path) -> Option<String> {
    if let Some(url) = ATTACHED.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(data_dir) {
        return Some(url.clone());
    }
    if !on_postgres() {
        return None;
    }
    let clusters = || CLUSTERS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(cluster) = clusters().get(data_dir) {
        return Some(cluster.svc_url());
    }
    // Started outside the lock: tests running together start theirs at once.
    let started = svc_pg_cluster::Cluster::start().unwrap_or_else(|e| panic!("{BACKEND}=postgres: a cluster: {e}"));
    Some(clusters().entry(data_dir.to_owned()).or_insert(started).svc_url())
}

/// Runs SQL on a data directory's own PostgreSQL cluster (`psql -A` output), when the suites
/// run on PostgreSQL.
pub fn postgres_sql(data_dir: &Path, sql: &str) -> Option<String> {
    if !on_postgres() {
        return None;
    }
    database_of(data_dir)?;
    let clusters = CLUSTERS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    Some(clusters.get(data_dir).map(|c| c.sql("svc", sql).expect("a query")).unwrap_or_default())
}

/// The server log of a data directory's own PostgreSQL cluster, when the suites run on
/// PostgreSQL.
pub fn postgres_log(data_dir: &Path) -> Option<String> {
    if !on_postgres() {
        return None;
    }
    database_of(data_dir)?;
    let clusters = CLUSTERS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    clusters.get(data_dir).map(svc_pg_cluster::Cluster::log)
}

/// A query's rows on the SQLite database `file`, as `psql -A` prints them (`|` between
/// columns, a row a line; NULL and bytes as empty), so a test reads either store alike.
pub fn sqlite_rows(file: &Path, sql: &str) -> String {
    let db = rusqlite::Connection::open(file).expect("the SQLite database");
    db.busy_timeout(Duration::from_secs(5)).expect("busy timeout");
    let mut statement = db.prepare(sql).expect("a query");
    let width = statement.column_count();
    let rows = statement
        .query_map([], |r| {
            let cells: Vec<String> = (0..width)
                .map(|i| {
                    r.get_ref(i).map(|v| match v {
                        rusqlite::types::ValueRef::Integer(n) => n.to_string(),
                        rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
                        _ => String::new(),
                    })
                })
                .collect::<Result<_, _>>()?;
            Ok(cells.join("|"))
        })
        .expect("rows")
        .collect::<Result<Vec<_>, _>>()
        .expect("rows read");
    rows.join("\n")
}

/// A data directory's store opened as `svc serve` opens it: where [`store_at`] says, its keys
/// started from [`key_file_of`].
pub fn open_store(data_dir: &Path) -> std::sync::Arc<dyn manifest_core::service::store::ServiceStore> {
    manifest_core::service::store::open(&store_at(data_dir), &key_file_of(data_dir)).expect("the store opens").store
}

/// Where a data directory's store is, as `svc serve` finds it.
pub fn store_at(data_dir: &Path) -> manifest_core::service::store::StoreAt {
    match database_of(data_dir) {
        Some(url) => manifest_core::service::store::StoreAt::Postgres {
            db: Box::new(svc_postgres::Database::parse(&url, None).expect("the cluster's URL")),
            pool: svc_postgres::PoolSettings::default(),
        },
        None => manifest_core::service::store::StoreAt::DataDir(data_dir.to_owned()),
    }
}

/// Runs `svc` with arguments and an environment, to completion. On PostgreSQL ([`BACKEND`]),
/// a `--data-dir` it names gets its database through `SVC_DATABASE`.
pub fn svc(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(svc_binary());
    command.args(args).stdin(Stdio::null());
    let data_dir = args.windows(2).find(|w| w[0] == "--data-dir").map(|w| Path::new(w[1]));
    if let Some(url) = data_dir.and_then(database_of) {
        command.env("SVC_DATABASE", url);
    }
    if let Some(key_file) = data_dir.and_then(shared_key_file) {
        command.env("SVC_KEY_FILE", key_file);
    }
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("svc runs")
}

/// A fresh, empty directory under the system temp dir (`tempfile`), removed when dropped,
/// with the job directory a coordinator or the demo made beside it (`DIR-jobs`).
#[derive(Debug)]
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// Creates one; `name` helps find it when a test fails.
    pub fn new(name: &str) -> TempDir {
        TempDir(tempfile::Builder::new().prefix(&format!("svc-e2e-{name}-")).tempdir().expect("temp dir"))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Its path as text.
    pub fn str(&self) -> &str {
        self.path().to_str().expect("UTF-8 temp path")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // The clusters of data directories inside it stop (their servers are gone by now).
        CLUSTERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|dir, _| !dir.starts_with(self.path()));
        ATTACHED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|dir, _| !dir.starts_with(self.path()));
        let mut jobs = self.path().as_os_str().to_owned();
        jobs.push("-jobs");
        let _ = std::fs::remove_dir_all(jobs);
    }
}

/// A running `svc serve`, stopped (SIGKILL) when dropped if still running.
#[derive(Debug)]
pub struct Server {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// `http://ADDR` or `https://ADDR`, as it printed.
    url: String,
    /// Its standard error so far, line by line.
    stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Server {
    /// Starts `svc serve --listen 127.0.0.1:0 --data-dir DIR` plus `extra` arguments and
    /// waits until it listens.
    pub fn start(data_dir: &Path, extra: &[&str]) -> Server {
        Server::spawn(Command::new(svc_binary()), data_dir, extra)
    }

    /// The same under an open-file limit of `nofile` (`ulimit -n` in a shell that then
    /// becomes `svc`, so the limit is the server's alone).
    pub fn start_with_file_limit(data_dir: &Path, extra: &[&str], nofile: u32) -> Server {
        let mut command = Command::new("sh");
        command.arg("-c").arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\"")).arg(svc_binary());
        Server::spawn(command, data_dir, extra)
    }

    fn spawn(mut command: Command, data_dir: &Path, extra: &[&str]) -> Server {
        if let Some(url) = database_of(data_dir) {
            command.env("SVC_DATABASE", url);
        }
        if let Some(key_file) = shared_key_file(data_dir) {
            command.env("SVC_KEY_FILE", key_file);
        }
        let mut child = command
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("svc serve starts");
        let stderr = child.stderr.take().expect("stderr");
        let mut lines = BufReader::new(stderr).lines();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let url = loop {
            let Some(Ok(line)) = lines.next() else {
                let _ = child.kill();
                panic!("svc serve exited before listening: {:?}", seen.lock().map(|l| l.clone()));
            };
            let url = line.split("listening on ").nth(1).and_then(|rest| rest.split_whitespace().next());
            let url = url.filter(|u| u.starts_with("http://") || u.starts_with("https://")).map(str::to_owned);
            if let Ok(mut l) = seen.lock() {
                l.push(line);
            }
            if let Some(url) = url {
                break url;
            }
        };
        let addr = url.split("://").nth(1).and_then(|a| a.parse().ok()).expect("address");
        // Keep draining stderr so the server never blocks on a full pipe, and keep it.
        let kept = seen.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Ok(mut l) = kept.lock() {
                    l.push(line);
                }
            }
        });
        Server { child, addr, url, stderr: seen }
    }

    /// `http://127.0.0.1:PORT` (`https://` when it serves TLS).
    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Its standard error so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().map(|l| l.join("\n")).unwrap_or_default()
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal (`TERM`, `INT`, `STOP`, `CONT`, `KILL`) with kill(1).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill").arg(format!("-{name}")).arg(self.pid().to_string()).status().expect("kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits for the process to exit, at most `limit`.
    pub fn wait(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// SIGTERM, then waits (at most 10 s) and returns the exit status.
    pub fn stop(mut self) -> ExitStatus {
        self.signal("TERM");
        self.wait(Duration::from_secs(10)).expect("the server exits within 10 s of SIGTERM")
    }

    /// A request to this server.
    pub fn request(&self, method: &str, path: &str, token: Option<&str>, body: Option<&Value>) -> Response {
        let body = body.map(|b| serde_json::to_vec(b).expect("json"));
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut headers = Vec::new();
        if let Some(a) = &auth {
            headers.push(("Authorization", a.as_str()));
        }
        http(self.addr, method, path, &headers, body.as_deref())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// An HTTP response.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers, names lowercased.
    pub headers: Vec<(String, String)>,
    /// Body bytes.
    pub body: Vec<u8>,
}

impl Response {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
}

/// One HTTP/1.1 request with `Connection: close`; reads the whole response.
pub fn http(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&[u8]>) -> Response {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    if let Some(b) = body {
        head += &format!("Content-Type: application/json\r\nContent-Length: {}\r\n", b.len());
    }
    head += "\r\n";
    stream.write_all(head.as_bytes()).expect("write head");
    if let Some(b) = body {
        // The server may answer (413) and close before reading everything.
        let _ = stream.write_all(b);
    }
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    parse_response(&raw)
}

/// Parses a complete HTTP/1.1 response (with `Content-Length`, or none for 304).
pub fn parse_response(raw: &[u8]) -> Response {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").expect("a complete response head");
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).expect("status line");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Response { status, headers, body: raw[split + 4..].to_vec() }
}

/// `svc admin ...` on a data directory; panics unless it succeeds; returns stdout.
pub fn admin(args: &[&str]) -> String {
    let out = svc(&[&["admin"], args].concat(), &[]);
    assert!(out.status.success(), "svc admin {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A token for an organization and role on a data directory.
pub fn token(data_dir: &str, org: &str, role: &str) -> String {
    admin(&["token", "create", "--data-dir", data_dir, "--org", org, "--role", role])
}

/// Accepts build evidence for `app` of `org` (repository `acme/<app>`, ref `refs/heads/main`,
/// workflow `build.yml`, manifest `svc.yaml`, artifact `fixtures::CID` with digest `a...`),
/// which a V5 source release resolves to.
pub fn accept_build(data_dir: &str, org: &str, app: &str) {
    accept_build_of(data_dir, org, app, &fixtures::digest('a'));
}

/// The same, for an artifact of this digest (one `svc admin artifact store` stored, so the
/// local pool can run it).
pub fn accept_build_of(data_dir: &str, org: &str, app: &str, digest: &str) {
    let repository = format!("acme/{app}");
    let workflow = format!("{repository}/.github/workflows/build.yml@refs/heads/main");
    admin(&[
        "artifact",
        "accept",
        "--data-dir",
        data_dir,
        "--org",
        org,
        "--app",
        app,
        "--repository",
        &repository,
        "--ref",
        "refs/heads/main",
        "--workflow-ref",
        &workflow,
        "--manifest-path",
        "svc.yaml",
        "--cid",
        fixtures::CID,
        "--digest",
        digest,
    ]);
}

/// Adds `node` at an exact version to the default runtime image catalog.
pub fn add_node_image(data_dir: &str, version: &str, digest: &str) {
    admin(&["image", "add", "--data-dir", data_dir, "--name", "node", "--version", version, "--digest", digest]);
}

/// A CID and digests that pass the formats.
pub mod fixtures {
    /// A canonical `ipfs://` CID.
    pub const CID: &str = "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi";

    /// `sha256:` and 64 copies of `c`.
    pub fn digest(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }
}
