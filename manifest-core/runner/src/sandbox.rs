//! Confinement for job processes: customer code is untrusted, so every process of a job runs
//! inside bubblewrap (`bwrap`) with its own mount, PID, IPC and UTS namespaces, under
//! resource limits set by `prlimit`, with exactly the environment it is given.
//!
//! What a confined process sees: `/usr` (and the `/bin`, `/lib*` links or directories
//! beside it) and a few files of `/etc` (name resolution, CA certificates, time zone,
//! users), read-only; its own `/proc`, a minimal `/dev`, a private size-limited `/tmp`, and
//! the mounts its [`Confined`] names. Nothing else of the host: no data directory, no other
//! job, no key, no home directory. The environment is exactly [`Confined::env`]: bwrap is
//! started with a cleared environment plus those variables (never on a command line, where
//! `ps` would show secrets), and `env -u PWD` removes the one variable bwrap adds.
//!
//! Who it runs as: when the service runs as root, each job gets its own unprivileged uid and
//! gid ([`JobUid`]): bwrap (as root, no user namespace) builds the sandbox and `setpriv` drops
//! to that uid with no capabilities, no supplementary groups and `no_new_privs` before the
//! program starts, so even the kernel sees a different user, and the per-user process limit
//! is per job. Otherwise bwrap runs unprivileged in a new user namespace (mapped to the
//! service's own uid); the process limit is then not set, since it would count every
//! process of the service's user.
//!
//! Where it runs: in its job's own network namespace ([`crate::netns`]), entered with
//! `nsenter` before the sandbox is built, and in its job's cgroup when it has one: the first
//! step of the chain writes its own pid into the cgroup's `cgroup.procs` files and only then
//! runs the rest, so every process of the job is counted from its first instruction.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

#[cfg(target_os = "linux")]
use rustix::process::Resource;
use tokio::process::Command;

use super::{Confined, JobUid};
use crate::cgroup::JOIN_CGROUP;
use crate::netns::{JobNetwork, NetworkError, NetworkTools};

/// Resource limits of each process of a job (and of its children).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Data segment and private writable mappings (`RLIMIT_DATA`), bytes: the heap. Node's
    /// reservations are not writable, so it starts under a limit of 256 MiB.
    pub memory_bytes: u64,
    /// Processes and threads of the job's uid (`RLIMIT_NPROC`); only where jobs get their own
    /// uid (the service runs as root).
    pub processes: u64,
    /// Open file descriptors (`RLIMIT_NOFILE`).
    pub open_files: u64,
    /// The largest file the job may write (`RLIMIT_FSIZE`), bytes.
    pub file_size_bytes: u64,
    /// The size of the private `/tmp` (tmpfs), bytes.
    pub tmp_bytes: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            memory_bytes: 512 * 1024 * 1024,
            processes: 256,
            open_files: 4096,
            file_size_bytes: 256 * 1024 * 1024,
            tmp_bytes: 64 * 1024 * 1024,
        }
    }
}

impl Limits {
    /// These limits, lowered to this process's own hard limits where those are lower: a job
    /// never gets more than the service has, and `prlimit` is never asked to raise one.
    pub fn within_own(self) -> Limits {
        Limits {
            memory_bytes: own_hard_limit(Resource::Data).map_or(self.memory_bytes, |h| self.memory_bytes.min(h)),
            processes: own_hard_limit(Resource::Nproc).map_or(self.processes, |h| self.processes.min(h)),
            open_files: own_hard_limit(Resource::Nofile).map_or(self.open_files, |h| self.open_files.min(h)),
            file_size_bytes: own_hard_limit(Resource::Fsize)
                .map_or(self.file_size_bytes, |h| self.file_size_bytes.min(h)),
            tmp_bytes: self.tmp_bytes,
        }
    }
}

/// This process's hard limit of `resource`, if it has a finite one.
#[cfg(target_os = "linux")]
fn own_hard_limit(resource: Resource) -> Option<u64> {
    rustix::process::getrlimit(resource).maximum
}

/// This process's hard limit of `resource` (not read off Linux, where jobs do not run).
#[cfg(not(target_os = "linux"))]
fn own_hard_limit(_: Resource) -> Option<u64> {
    None
}

#[cfg(not(target_os = "linux"))]
enum Resource {
    Data,
    Nproc,
    Nofile,
    Fsize,
}

/// Why jobs cannot be confined on this host.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A program the sandbox needs is not installed.
    #[error(
        "{program} is not installed; jobs run confined by bubblewrap and need it (Debian/Ubuntu: `apt-get install bubblewrap util-linux`)"
    )]
    Missing {
        /// The program (`bwrap`, `prlimit`, `setpriv`, `env`).
        program: &'static str,
    },
    /// bwrap is there but cannot build a sandbox.
    #[error(
        "bubblewrap cannot create a sandbox here: {detail}; it needs user namespaces (as a non-root user: `sysctl kernel.unprivileged_userns_clone=1`, and on Ubuntu an AppArmor profile for bwrap) or a root service"
    )]
    Unusable {
        /// What bwrap printed.
        detail: String,
    },
    /// The directory where job uids are reserved host-wide cannot be made.
    #[error("cannot make {dir}, where job uids are reserved on the host: {source}")]
    Reservations {
        /// The directory.
        dir: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Jobs cannot get a network namespace of their own here.
    #[error(transparent)]
    Network(#[from] NetworkError),
    /// A program of a job is not where it was said to be.
    #[error("cannot find the program {program:?}: {source}")]
    Program {
        /// The program as given.
        program: OsString,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The host's sandbox tools, found once.
#[derive(Debug, Clone)]
pub struct Sandbox {
    bwrap: PathBuf,
    prlimit: PathBuf,
    setpriv: PathBuf,
    env: PathBuf,
    /// The service runs as root: jobs get their own uid.
    privileged: bool,
    limits: Limits,
    network: NetworkTools,
    sh: PathBuf,
}

/// Where a part of a job runs: the job's network namespace and cgroup.
#[derive(Debug, Clone, Copy, Default)]
pub struct Placement<'a> {
    /// The job's network namespace (`None`: the host's, for the service's own probes).
    pub network: Option<&'a JobNetwork>,
    /// The `cgroup.procs` (or v1 `tasks`) files the part joins before anything else runs.
    pub cgroup_procs: &'a [PathBuf],
}

/// Directories whose host form (a link into `/usr` or a directory) is reproduced inside.
const ROOT_DIRS: [&str; 6] = ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// Files and directories of `/etc` a program may need, shown read-only if the host has them.
const ETC: [&str; 12] = [
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/nsswitch.conf",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/alternatives",
];

impl Sandbox {
    /// Finds bwrap, prlimit, setpriv and env on `PATH` and checks that bwrap can build a
    /// sandbox here, by running `env` confined as a job would be.
    pub async fn detect(limits: Limits) -> Result<Sandbox, SandboxError> {
        let find = |program: &'static str| which(OsStr::new(program)).map_err(|_| SandboxError::Missing { program });
        let (bwrap, setpriv, privileged) = (find("bwrap")?, find("setpriv")?, running_as_root());
        let sandbox = Sandbox {
            network: NetworkTools::detect(bwrap.clone(), setpriv.clone(), privileged)?,
            bwrap,
            prlimit: find("prlimit")?,
            setpriv,
            env: find("env")?,
            sh: find("sh")?,
            privileged,
            limits: limits.within_own(),
        };
        let probe = Confined {
            argv: vec![sandbox.env.clone().into_os_string()],
            env: Vec::new(),
            mounts: Vec::new(),
            cwd: PathBuf::from("/"),
        };
        let uid = JobUid { uid: NOBODY, gid: NOBODY };
        // As a job runs: in a network namespace of its own.
        let network = JobNetwork::create(&sandbox.network, false, &[])?;
        let placement = Placement { network: Some(&network), cgroup_procs: &[] };
        let unusable = |e: std::io::Error| SandboxError::Unusable { detail: e.to_string() };
        let mut probing = sandbox
            .command(&probe, uid, placement)?
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(unusable)?;
        // Its lifeline, held until it has ended (`wait_with_output` would close it first).
        let lifeline = probing.stdin.take();
        let output = probing.wait_with_output().await.map_err(unusable)?;
        drop(lifeline);
        if !output.status.success() {
            let detail = String::from_utf8_lossy(&output.stderr).trim().to_owned();
            return Err(SandboxError::Unusable {
                detail: if detail.is_empty() { output.status.to_string() } else { detail },
            });
        }
        Ok(sandbox)
    }

    /// Whether jobs get their own uid (the service runs as root).
    pub fn separate_uids(&self) -> bool {
        self.privileged
    }

    /// The programs jobs' network namespaces need.
    pub fn network(&self) -> &NetworkTools {
        &self.network
    }

    /// The command that runs `part` confined, as `uid` when the service is root (ignored
    /// otherwise), where `placement` says. Its environment is exactly `part.env`.
    ///
    /// Its stdin must be a pipe the caller holds open for as long as the job may run, and
    /// writes nothing to: the job's lifeline ([`LIFELINE`]). At its end of file (the caller
    /// dropped it, or its process ended, however) every process of the job is killed. The
    /// program itself gets `/dev/null` as its stdin.
    pub fn command(&self, part: &Confined, uid: JobUid, placement: Placement<'_>) -> Result<Command, SandboxError> {
        let (program, args) = match part.argv.split_first() {
            Some((program, args)) => (program, args),
            None => {
                return Err(SandboxError::Program {
                    program: OsString::new(),
                    source: std::io::Error::other("empty command"),
                });
            }
        };
        // A program inside one of the job's mounts (a native image's executable) runs by the
        // path the job sees; any other is found on the host and shown where it is.
        let (program, on_host) = match in_mount(part, Path::new(program)) {
            Some(host) if host.is_file() => (PathBuf::from(program), false),
            Some(_) => {
                return Err(SandboxError::Program {
                    program: program.to_owned(),
                    source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a file in the job's mounts"),
                });
            }
            None => (which(program)?, true),
        };
        let limits = self.limits;
        // The chain: [join the cgroup] -> [enter the namespace] -> prlimit -> bwrap -> ...
        let mut chain: Vec<OsString> = Vec::new();
        if !placement.cgroup_procs.is_empty() {
            chain.push(self.sh.clone().into_os_string());
            chain.push("-c".into());
            chain.push(JOIN_CGROUP.into());
            chain.push("sh".into());
            chain.extend(placement.cgroup_procs.iter().map(|p| p.clone().into_os_string()));
            chain.push("--".into());
        }
        if let Some(network) = placement.network {
            chain.extend(network.enter());
        }
        chain.push(self.prlimit.clone().into_os_string());
        let mut command = Command::new(&chain[0]);
        command.args(&chain[1..]);
        command.env_clear().envs(part.env.iter().map(|(k, v)| (k, v)));
        command.arg(format!("--nofile={0}:{0}", limits.open_files));
        command.arg(format!("--data={0}:{0}", limits.memory_bytes));
        command.arg(format!("--fsize={0}:{0}", limits.file_size_bytes));
        command.arg("--core=0:0");
        if self.privileged {
            command.arg(format!("--nproc={0}:{0}", limits.processes));
        }
        command.arg("--").arg(&self.bwrap);
        command.args(["--unshare-ipc", "--unshare-pid", "--unshare-uts", "--unshare-cgroup-try"]);
        // bwrap's reaper stays PID 1 of the namespace: it keeps the parent-death signal, which
        // the program loses when `setpriv` changes its uid, so the whole namespace dies with
        // the coordinator. (So the job can read bwrap's command line in `/proc/1/cmdline`:
        // host paths, but no secret.)
        command.args(["--new-session", "--die-with-parent"]);
        if !self.privileged {
            command.args(["--unshare-user", "--disable-userns"]);
        }
        command.args(["--ro-bind", "/usr", "/usr"]);
        for dir in ROOT_DIRS {
            match std::fs::read_link(dir) {
                Ok(target) => {
                    command.arg("--symlink").arg(target).arg(dir);
                }
                Err(_) if Path::new(dir).is_dir() => {
                    command.args(["--ro-bind", dir, dir]);
                }
                Err(_) => {}
            }
        }
        // bwrap (as root) makes missing parents 0700: make them 0755, so the job's uid can
        // reach what is mounted below them.
        let mut made = std::collections::BTreeSet::new();
        for path in ETC.iter().map(Path::new).filter(|p| p.exists()) {
            parents(&mut command, path, &mut made);
            command.arg("--ro-bind").arg(path).arg(path);
        }
        command.args(["--proc", "/proc", "--dev", "/dev"]);
        command.args(["--perms", "1777", "--size"]).arg(limits.tmp_bytes.to_string()).args(["--tmpfs", "/tmp"]);
        // The program itself, where it lives outside what is shown already (a `svc` binary
        // in a build directory, a Node.js outside `/usr`).
        if on_host && !program.starts_with("/usr") {
            parents(&mut command, &program, &mut made);
            command.arg("--ro-bind").arg(&program).arg(&program);
        }
        for mount in &part.mounts {
            parents(&mut command, &mount.inside, &mut made);
            command.arg(if mount.writable { "--bind" } else { "--ro-bind" });
            command.arg(&mount.host).arg(&mount.inside);
        }
        command.arg("--chdir").arg(&part.cwd);
        if self.privileged {
            // bwrap keeps only these two capabilities for setpriv, which gives them up with the
            // switch to the job's uid.
            command.args(["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--"]);
            command.arg(&self.setpriv);
            command.arg(format!("--reuid={}", uid.uid)).arg(format!("--regid={}", uid.gid));
            command.args(["--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]);
        }
        // The lifeline (issue 41): the program starts under `LIFELINE`, which ends every
        // process of the job once its stdin, a pipe the service holds, reads end of file.
        if !self.sh.starts_with("/usr") {
            parents(&mut command, &self.sh, &mut made);
            command.arg("--ro-bind").arg(&self.sh).arg(&self.sh);
        }
        command.arg("--").arg(&self.sh).args(["-c", LIFELINE]).arg(&self.sh);
        command.arg(&self.env).args(["-u", "PWD", "--"]).arg(&program).args(args);
        Ok(command)
    }
}

/// What runs the program inside the sandbox (`sh -c LIFELINE SH PROGRAM ARGS...`): a
/// watcher (`SH -c ... svc-lifeline`, a command line of its own, without the job's
/// arguments), a child of the program's process, reads the sandbox's stdin (the service's
/// lifeline pipe) until its end of file, then kills every process of the job it can signal
/// (`kill -9 -1`: in the job's PID namespace, that is every one but its init, which ends
/// with the program); the program gets `/dev/null` as its stdin and not the pipe.
///
/// Why (issue 41): bwrap's `--die-with-parent` arms the parent-death signal of the sandbox's
/// init only once the sandbox is built, so a service killed in the tens of milliseconds of a
/// launch left sandboxes running, orphaned, with the job in them (8 of 12 random kill -9s of
/// a process launching jobs, `tests/kill9.rs`). The pipe has no such moment: if the service
/// is already gone when the watcher starts, it reads end of file at once. The same remedy as
/// the network holders' (`netns.rs`).
pub(crate) const LIFELINE: &str = r#"exec 3<&0 </dev/null
"$0" -c 'while read -r line; do :; done; kill -9 -1' svc-lifeline <&3 >/dev/null 2>&1 &
exec "$@" 3<&-"#;

/// Where `program`, an absolute path inside one of `part`'s mounts (with no `..`), is on the
/// host.
fn in_mount(part: &Confined, program: &Path) -> Option<PathBuf> {
    use std::path::Component;
    if !program.is_absolute() || program.components().any(|c| matches!(c, Component::ParentDir)) {
        return None;
    }
    part.mounts.iter().find_map(|mount| Some(mount.host.join(program.strip_prefix(&mount.inside).ok()?)))
}

/// Adds `--dir` (0755) for each parent of `path` not made yet, outside `/usr`.
fn parents(command: &mut Command, path: &Path, made: &mut std::collections::BTreeSet<PathBuf>) {
    let mut chain: Vec<&Path> = path.ancestors().skip(1).take_while(|p| p.parent().is_some()).collect();
    chain.reverse();
    for dir in chain {
        if !dir.starts_with("/usr") && made.insert(dir.to_owned()) {
            command.args(["--perms", "0755", "--dir"]).arg(dir);
        }
    }
}

/// Whether the service runs as root (then jobs get their own uid).
#[cfg(target_os = "linux")]
fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Whether the service runs as root (bubblewrap, and so job confinement, is Linux only).
#[cfg(not(target_os = "linux"))]
fn running_as_root() -> bool {
    false
}

/// `nobody`, for the availability check.
const NOBODY: u32 = 65534;

/// The absolute, canonical path of `program`: as given if it has a slash, else the first
/// match on `PATH`.
pub fn which(program: &OsStr) -> Result<PathBuf, SandboxError> {
    let err = |source| SandboxError::Program { program: program.to_owned(), source };
    let path = Path::new(program);
    if path.components().count() > 1 || path.is_absolute() {
        return std::fs::canonicalize(path).map_err(err);
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&search) {
        let candidate = dir.join(path);
        if candidate.is_file()
            && let Ok(found) = std::fs::canonicalize(&candidate)
        {
            return Ok(found);
        }
    }
    Err(err(std::io::Error::new(std::io::ErrorKind::NotFound, "not on PATH")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_never_gets_more_than_the_services_own_hard_limits() {
        let asked = Limits { open_files: u64::MAX - 1, ..Limits::default() };
        let given = asked.within_own();
        if let Some(hard) = own_hard_limit(Resource::Nofile) {
            assert_eq!(given.open_files, hard.min(u64::MAX - 1), "lowered to the service's own");
        }
        assert_eq!(given.tmp_bytes, asked.tmp_bytes);
        assert!(given.memory_bytes <= asked.memory_bytes);
    }

    #[test]
    fn programs_are_found_on_path_and_made_canonical() {
        let sh = which(OsStr::new("sh")).expect("sh is on PATH");
        assert!(sh.is_absolute() && sh.is_file(), "{}", sh.display());
        assert_eq!(sh, std::fs::canonicalize(&sh).expect("canonical"));
        let missing = which(OsStr::new("no-such-program-anywhere")).expect_err("not found");
        assert!(missing.to_string().contains("no-such-program-anywhere"), "{missing}");
    }
}
