//! A throwaway PostgreSQL cluster for tests (Debian's `postgresql` package): a copy of a
//! template data directory in a temporary directory, `pg_ctl start` on a free loopback port
//! and a Unix socket in that directory, trust authentication for loopback only (a role made by
//! [`Cluster::create_password_database`] is asked for its password), and a stop (`-m immediate`)
//! and removal when the [`Cluster`] is dropped, so a failed test leaves no server behind.
//!
//! The template is made by `initdb` once per machine, PostgreSQL major version and `initdb`
//! arguments (`$TMPDIR/svc-pg-template-…`, see [`template`]): copying its files costs about
//! half of what `initdb` costs, and a CI run starts about two hundred clusters.
//!
//! The server refuses to run as root, and CI runs as root: then `initdb`, the copy and `pg_ctl`
//! run as the `postgres` user the package creates (`runuser`). Clients connect as anyone.

#![forbid(unsafe_code)]

pub mod schema;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `initdb`'s arguments besides the data directory; part of the template's name.
const INITDB_ARGS: [&str; 7] = ["-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"];

/// Why no cluster could be started.
#[derive(Debug)]
pub enum ClusterError {
    /// PostgreSQL's server programs are not installed (`apt-get install postgresql`).
    NotInstalled,
    /// A step failed: which, and what it printed.
    Failed(String),
}

impl std::fmt::Display for ClusterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClusterError::NotInstalled => f.write_str(
                "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): apt-get install postgresql",
            ),
            ClusterError::Failed(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for ClusterError {}

/// A cluster for a test, or `None` when PostgreSQL is not installed (the test skipped,
/// saying so; under `SVC_REQUIRE_ALL` it fails instead: [`svc_test_require::skip`]); panics
/// on any other failure.
pub fn for_test(test: &str) -> Option<Cluster> {
    match Cluster::start() {
        Ok(cluster) => Some(cluster),
        Err(ClusterError::NotInstalled) => {
            svc_test_require::skip(&ClusterError::NotInstalled.to_string());
            None
        }
        Err(e) => panic!("{test}: a PostgreSQL cluster: {e}"),
    }
}

/// A running cluster; stopped and removed when dropped.
#[derive(Debug)]
pub struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    as_postgres: bool,
    durable: bool,
}

/// The newest installed server's major version and program directory.
fn server_bin() -> Option<(u32, PathBuf)> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop()
}

/// A command running `program` as the `postgres` user when `as_postgres` (we are root).
fn command_as(program: &Path, as_postgres: bool) -> Command {
    if as_postgres {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// Makes `dir` the `postgres` user's when `as_postgres`.
fn chown_postgres(dir: &Path, as_postgres: bool) -> Result<(), ClusterError> {
    if as_postgres {
        check("chown postgres", Command::new("chown").arg("postgres").arg(dir).output())?;
    }
    Ok(())
}

/// FNV-1a: a name for `initdb`'s arguments that is the same in every process and build.
fn fnv1a(parts: &[&str]) -> u64 {
    parts
        .iter()
        .flat_map(|p| p.bytes().chain([0]))
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// One test thread of this process makes a missing template at a time (the others wait for it
/// rather than run `initdb` too); other processes are kept apart by the rename in [`template`].
static TEMPLATE: Mutex<()> = Mutex::new(());

/// The template data directory for major version `major` (made by `initdb` in `bin`, never
/// started): `$TMPDIR/svc-pg-template-<major>-<owner>-<hash of INITDB_ARGS>/data`, where owner
/// is `postgres` when we are root and our uid otherwise (the directory is its owner's alone).
fn template(major: u32, bin: &Path, as_postgres: bool) -> Result<PathBuf, ClusterError> {
    let _one = TEMPLATE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    template_in(&std::env::temp_dir(), major, bin, as_postgres)
}

/// [`template`] in directory `root`. A missing template is made in a sibling directory, which
/// is then renamed into place: a rename onto a directory that is not empty fails, so of
/// processes racing to make it the first one's stays and the others delete theirs, and no
/// process ever sees half a template.
fn template_in(root: &Path, major: u32, bin: &Path, as_postgres: bool) -> Result<PathBuf, ClusterError> {
    let owner = match (as_postgres, uid()) {
        (true, _) => "postgres".to_owned(),
        (false, Some(uid)) => uid.to_string(),
        (false, None) => return Err(ClusterError::Failed("our uid: /proc/self is unreadable".to_owned())),
    };
    let name = format!("svc-pg-template-{major}-{owner}-{:016x}", fnv1a(&INITDB_ARGS));
    let path = root.join(&name);
    let data = path.join("data");
    if data.join("PG_VERSION").exists() {
        return Ok(data);
    }
    let sibling = tempfile::Builder::new()
        .prefix(&format!("{name}.new-"))
        .tempdir_in(root)
        .map_err(|e| ClusterError::Failed(format!("a temporary directory: {e}")))?;
    chown_postgres(sibling.path(), as_postgres)?;
    let initdb = command_as(&bin.join("initdb"), as_postgres)
        .arg("-D")
        .arg(sibling.path().join("data"))
        .args(INITDB_ARGS)
        .output();
    check("initdb", initdb)?;
    match std::fs::rename(sibling.path(), &path) {
        // Renamed: nothing is left for the TempDir to remove.
        Ok(()) => drop(sibling.keep()),
        // Another process's template won the race (the sibling is removed when dropped).
        Err(_) if data.join("PG_VERSION").exists() => {}
        Err(e) => {
            return Err(ClusterError::Failed(format!(
                "renaming {} to {}: {e}",
                sibling.path().display(),
                path.display()
            )));
        }
    }
    Ok(data)
}

/// The process's effective user: the owner of /proc/self.
fn uid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| std::os::unix::fs::MetadataExt::uid(&m))
}

fn is_root() -> bool {
    uid() == Some(0)
}

fn free_port() -> Result<u16, ClusterError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| ClusterError::Failed(format!("no free port: {e}")))
}

impl Cluster {
    /// Starts a new cluster (about a second), with a database `svc`; durability off.
    pub fn start() -> Result<Cluster, ClusterError> {
        Cluster::start_with(false)
    }

    /// The same with PostgreSQL's default durability (`fsync`, full-page writes): for a
    /// benchmark, whose floor and service must both wait for the disk.
    pub fn start_durable() -> Result<Cluster, ClusterError> {
        Cluster::start_with(true)
    }

    fn start_with(durable: bool) -> Result<Cluster, ClusterError> {
        let (major, bin) = server_bin().ok_or(ClusterError::NotInstalled)?;
        let as_postgres = is_root();
        let template = template(major, &bin, as_postgres)?;
        let dir = tempfile::Builder::new()
            .prefix("svc-pg-")
            .tempdir()
            .map_err(|e| ClusterError::Failed(format!("a temporary directory: {e}")))?;
        chown_postgres(dir.path(), as_postgres)?;
        // The port is chosen once the data directory is there, just before the server binds it.
        let mut cluster = Cluster { bin, dir, port: 0, as_postgres, durable };
        let copy =
            command_as(Path::new("cp"), as_postgres).args(["-a", "--"]).arg(&template).arg(cluster.data()).output();
        check("copying the template data directory", copy)?;
        // A port from `bind(0)` can be handed to another process (a server under test,
        // another cluster) before this one binds it: then another port, a few times.
        for attempt in 1.. {
            cluster.port = free_port()?;
            match cluster.restart() {
                Ok(()) => break,
                Err(_) if attempt < 5 && cluster.log().contains("could not bind") => continue,
                Err(e) => return Err(ClusterError::Failed(format!("{e}\n{}", cluster.log()))),
            }
        }
        cluster.sql("postgres", "CREATE DATABASE svc")?;
        Ok(cluster)
    }

    /// The loopback URL of database `db` (as `postgres`, no password: trust on loopback).
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// The URL of the `svc` database made at start.
    pub fn svc_url(&self) -> String {
        self.url("svc")
    }

    /// Creates database `name` (one per test keeps tests apart); its URL.
    pub fn create_database(&self, name: &str) -> Result<String, ClusterError> {
        self.sql("postgres", &format!("CREATE DATABASE \"{name}\""))?;
        Ok(self.url(name))
    }

    /// Creates role `user` with `password` and database `name` it owns, and makes the server
    /// ask that role for its password over TCP (`scram-sha-256`, a line of `pg_hba.conf`
    /// before the trust lines; everyone else is still trusted); the database's URL, without
    /// the password.
    pub fn create_password_database(&self, name: &str, user: &str, password: &str) -> Result<String, ClusterError> {
        let quoted = password.replace('\'', "''");
        self.sql("postgres", &format!("CREATE ROLE \"{user}\" LOGIN PASSWORD '{quoted}'"))?;
        self.sql("postgres", &format!("CREATE DATABASE \"{name}\" OWNER \"{user}\""))?;
        let hba = self.data().join("pg_hba.conf");
        let trusted = std::fs::read_to_string(&hba).map_err(|e| ClusterError::Failed(format!("pg_hba.conf: {e}")))?;
        let rule = format!("host all \"{user}\" 127.0.0.1/32 scram-sha-256\n");
        std::fs::write(&hba, rule + &trusted).map_err(|e| ClusterError::Failed(format!("pg_hba.conf: {e}")))?;
        self.sql("postgres", "SELECT pg_reload_conf()")?;
        Ok(format!("postgres://{user}@127.0.0.1:{}/{name}", self.port))
    }

    /// A client program of the server's version (`pgbench`, `psql`).
    pub fn program(&self, name: &str) -> PathBuf {
        self.bin.join(name)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory holding the Unix socket (`host=` of a socket connection).
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// Stops the server (`-m fast`), as a database restart's first half.
    pub fn stop(&self) -> Result<(), ClusterError> {
        let out = self.server_command("pg_ctl").arg("-D").arg(self.data()).args(["-m", "fast", "-w", "stop"]).output();
        check("pg_ctl stop", out)
    }

    /// Starts the server (again, after [`Cluster::stop`]) on its port; durability is off
    /// (`fsync`, full-page writes) unless made [`Cluster::start_durable`]: a test cluster never
    /// outlives a crash.
    pub fn restart(&self) -> Result<(), ClusterError> {
        let durability = if self.durable { "" } else { " -c fsync=off -c full_page_writes=off" };
        let options =
            format!("-k {} -c listen_addresses=127.0.0.1 -p {}{durability}", self.dir.path().display(), self.port);
        let out = self
            .server_command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.path().join("log"))
            .args(["-w", "-t", "30", "start", "-o", &options])
            .output();
        check("pg_ctl start", out)?;
        self.wait_accepting()
    }

    /// Runs SQL through `psql` in database `db`.
    pub fn sql(&self, db: &str, sql: &str) -> Result<String, ClusterError> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", "postgres"])
            .args(["-p", &self.port.to_string(), "-d", db, "-c", sql])
            .output();
        let out = out.map_err(|e| ClusterError::Failed(format!("psql: {e}")))?;
        if !out.status.success() {
            return Err(ClusterError::Failed(format!("psql {sql:?}: {}", String::from_utf8_lossy(&out.stderr))));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn server_command(&self, program: &str) -> Command {
        command_as(&self.bin.join(program), self.as_postgres)
    }

    fn wait_accepting(&self) -> Result<(), ClusterError> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.sql("postgres", "SELECT 1") {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => return Err(e),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

fn check(what: &str, output: std::io::Result<Output>) -> Result<(), ClusterError> {
    match output {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(ClusterError::Failed(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))),
        Err(e) => Err(ClusterError::Failed(format!("{what}: {e}"))),
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data();
        if data.join("postmaster.pid").exists() {
            let _ = self.server_command("pg_ctl").arg("-D").arg(&data).args(["-m", "immediate", "-w", "stop"]).output();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_starts_answers_restarts_and_is_gone_when_dropped() {
        let Some(cluster) = for_test("a_cluster_starts") else { return };
        assert_eq!(cluster.sql("svc", "SELECT 40 + 2").expect("a query"), "42");
        let url = cluster.create_database("other").expect("a database");
        assert!(url.ends_with("/other"), "{url}");
        cluster.stop().expect("stop");
        assert!(cluster.sql("svc", "SELECT 1").is_err(), "stopped");
        cluster.restart().expect("restart");
        assert_eq!(cluster.sql("other", "SELECT 1").expect("a query after the restart"), "1");
        // A role asked for its password: refused without it, let in with it.
        let url = cluster.create_password_database("locked", "owner", "it's s3cret").expect("a password database");
        let psql = |password: Option<&str>| {
            let mut command = Command::new(cluster.program("psql"));
            command.args(["-X", "-w", "-t", "-A", "-c", "SELECT current_user"]).arg(&url).env_remove("PGPASSWORD");
            if let Some(password) = password {
                command.env("PGPASSWORD", password);
            }
            command.output().expect("psql runs")
        };
        let refused = psql(None);
        assert!(!refused.status.success(), "no password: {}", String::from_utf8_lossy(&refused.stdout));
        assert!(String::from_utf8_lossy(&refused.stderr).contains("password"), "{refused:?}");
        let let_in = psql(Some("it's s3cret"));
        assert_eq!(String::from_utf8_lossy(&let_in.stdout).trim(), "owner", "{let_in:?}");
        let dir = cluster.socket_dir().to_owned();
        drop(cluster);
        assert!(!dir.exists(), "{} is removed", dir.display());
    }

    #[test]
    fn clusters_copied_from_one_template_are_apart_and_leave_it_unstarted() {
        let Some(first) = for_test("clusters_apart") else { return };
        first.sql("svc", "CREATE TABLE only_here (n int)").expect("a table");
        let second = for_test("clusters_apart").expect("a second cluster");
        assert_ne!(first.port(), second.port());
        assert_eq!(second.sql("svc", "SELECT to_regclass('only_here') IS NULL").expect("a query"), "t");
        let (major, bin) = server_bin().expect("installed");
        let template = template(major, &bin, is_root()).expect("the template");
        // `pg_ctl start` writes postmaster.opts, and nothing removes it.
        assert!(!template.join("postmaster.opts").exists(), "the template is never started");
        assert!(first.dir.path().join("data").join("postmaster.opts").exists(), "a copy is started");
    }

    /// Processes (here threads, past the per-process lock) racing to make a missing template
    /// all get the same complete one, and the losers' copies are gone.
    #[test]
    fn racing_to_make_the_template_yields_one_and_leaves_nothing_else() {
        let Some((major, bin)) = server_bin() else {
            svc_test_require::skip(&ClusterError::NotInstalled.to_string());
            return;
        };
        let as_postgres = is_root();
        let root = tempfile::tempdir().expect("a directory");
        chown_postgres(root.path(), as_postgres).expect("chown");
        let made: Vec<PathBuf> = std::thread::scope(|s| {
            let racers: Vec<_> =
                (0..3).map(|_| s.spawn(|| template_in(root.path(), major, &bin, as_postgres))).collect();
            racers.into_iter().map(|r| r.join().expect("no panic").expect("a template")).collect()
        });
        assert!(made.windows(2).all(|w| w[0] == w[1]), "{made:?}");
        assert!(made[0].join("PG_VERSION").exists(), "{}", made[0].display());
        let left: Vec<_> = std::fs::read_dir(root.path()).expect("readable").flatten().map(|e| e.file_name()).collect();
        assert_eq!(left.len(), 1, "only the template is left: {left:?}");
        let name = left[0].to_string_lossy().into_owned();
        let key = format!("svc-pg-template-{major}-");
        assert!(name.starts_with(&key) && name.ends_with(&format!("{:016x}", fnv1a(&INITDB_ARGS))), "{name}");
        // Made once, it is reused as it is.
        assert_eq!(template_in(root.path(), major, &bin, as_postgres).expect("again"), made[0]);
    }
}
