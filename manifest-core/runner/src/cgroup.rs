//! A cgroup per job: memory (every process of the job together, page cache, `/tmp`, memfd
//! and shared mappings included, since the kernel charges them to the group that touched
//! them), the number of processes and CPU time are bounded for the job as a whole, not per
//! process (issue 39, point 2).
//!
//! Where the host mounts the unified cgroup v2 hierarchy with the `memory`, `pids` and `cpu`
//! controllers, a job's group is one directory there; otherwise each of the v1 `memory`,
//! `pids` and `cpu` hierarchies holds one (this project's machines and CI mount v1). Groups
//! live under `svc-jobs` in the service's own cgroup, so a bound on the service bounds its
//! jobs too, and are named `<service pid>-<n>`: a service starting sweeps the groups of
//! services that are gone.
//!
//! A process joins its job's group by writing its own pid into [`JobCgroup::procs_files`]
//! before it runs the job's program (the sandbox's first step), so everything it starts is
//! inside from the first instruction. A job over its memory has a process killed by the
//! kernel; [`JobCgroup::out_of_memory`] says so, and the runner then kills the rest
//! ([`JobCgroup::kill_all`]): the job ends alone, no other job loses anything.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::process::signal;

/// The chain's first step when the job has a cgroup: `sh -c JOIN_CGROUP sh FILE... -- PROGRAM
/// ARGS...` writes its own pid into each file, then becomes the program. A file it cannot
/// write ends it (status 125) before anything of the job runs outside its cgroup.
pub(crate) const JOIN_CGROUP: &str =
    r#"while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@""#;

/// What a job may use, all its processes together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobResources {
    /// Memory, bytes: anonymous memory, page cache, tmpfs, memfd and shared mappings the job
    /// touched; no swap.
    pub memory_bytes: u64,
    /// Processes and threads at once.
    pub processes: u64,
    /// CPU time, in thousandths of a core (1000: one core's worth per period).
    pub cpu_millicores: u64,
}

impl JobResources {
    /// What a job gets when its policy says nothing: 512 MiB, 256 processes, one core.
    pub const DEFAULT: JobResources =
        JobResources { memory_bytes: 512 * 1024 * 1024, processes: 256, cpu_millicores: 1000 };
}

impl Default for JobResources {
    fn default() -> JobResources {
        JobResources::DEFAULT
    }
}

/// Why jobs cannot have cgroups here, or one could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// The host has no cgroup hierarchy the service can bound jobs with.
    #[error(
        "jobs cannot be bounded by cgroups on this host: {detail}. Mount cgroup2 with the memory, pids and cpu controllers delegated to the service's cgroup (systemd: `Delegate=yes`), or the v1 memory, pids and cpu controllers (`mount -t cgroup -o memory cgroup /sys/fs/cgroup/memory`, likewise pids and cpu), and run the service as root; or pass --without-job-cgroups to run jobs bounded per process only (not for hosts shared by tenants)"
    )]
    Unavailable {
        /// What is missing or failed.
        #[source]
        detail: Unbounded,
    },
    /// A cgroup file or directory could not be made, read or written.
    #[error("cannot {action} {path}: {source}")]
    Io {
        /// What was being done (`create`, `write`, `read`).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// What is missing or failed when jobs cannot have cgroups ([`CgroupError::Unavailable`]).
#[derive(Debug, thiserror::Error)]
pub enum Unbounded {
    /// This process's mounts or groups cannot be read from `/proc/self`.
    #[error(transparent)]
    Proc(io::Error),
    /// Neither a v2 nor a v1 layout can be made: why not, each.
    #[error("{v2}; {v1}")]
    Neither {
        /// Why not v2.
        v2: LayoutError,
        /// Why not v1.
        v1: LayoutError,
    },
    /// A layout was made, but a probe group could not be made, bounded or joined in it.
    #[error("a probe group failed: {0}")]
    Probe(#[source] Box<CgroupError>),
}

/// Why a layout of job groups cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    /// No unified hierarchy.
    #[error("no cgroup2 hierarchy is mounted")]
    NoCgroup2,
    /// `/proc/self/cgroup` names no v2 group.
    #[error("this process is in no v2 group")]
    NoV2Group,
    /// The v2 group's controllers cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Controllers {
        /// `cgroup.controllers`.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The v2 hierarchy does not give the service's group every controller.
    #[error(
        "the cgroup2 hierarchy at {} does not give the service's group the {} controller(s)",
        mount.display(),
        missing.join(", ")
    )]
    Undelegated {
        /// Where cgroup2 is mounted.
        mount: PathBuf,
        /// The controllers missing.
        missing: Vec<&'static str>,
    },
    /// The service cannot move itself into a leaf of its group.
    #[error("cannot move the service into {}: {source}", leaf.display())]
    MoveService {
        /// The leaf.
        leaf: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The service's group cannot hand the controllers to its children.
    #[error("cannot enable the memory, pids and cpu controllers in {}: {source}", path.display())]
    EnableInOwn {
        /// Its `cgroup.subtree_control`.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// `svc-jobs` cannot hand the controllers to its children.
    #[error("cannot enable the controllers in {}: {source}", dir.display())]
    EnableInParent {
        /// `svc-jobs`.
        dir: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A v1 controller is not mounted.
    #[error("the v1 {controller} controller is not mounted")]
    V1NotMounted {
        /// The controller.
        controller: &'static str,
    },
    /// A `svc-jobs` directory cannot be made.
    #[error("cannot create {}: {source}", dir.display())]
    Create {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// The name of the group holding a service's job groups, in the service's own cgroup.
const PARENT: &str = "svc-jobs";

/// The CPU period, microseconds (the kernel's default).
const PERIOD_US: u64 = 100_000;

/// The smallest CPU quota the kernel takes, microseconds.
const MIN_QUOTA_US: u64 = 1_000;

/// Job groups made by this process so far (every [`Cgroups`] of it shares the count, so two
/// runners in one process never name the same group).
static MADE: AtomicU64 = AtomicU64::new(0);

/// The host's cgroup hierarchies for jobs, found once ([`Cgroups::detect`]).
#[derive(Debug, Clone)]
pub struct Cgroups {
    layout: Arc<Layout>,
}

/// Where job groups are made.
#[derive(Debug, PartialEq, Eq)]
enum Layout {
    /// One unified directory (`.../svc-jobs`).
    V2 { parent: PathBuf },
    /// One `.../svc-jobs` per v1 hierarchy.
    V1 { memory: PathBuf, pids: PathBuf, cpu: PathBuf },
}

impl Layout {
    /// Makes the `svc-jobs` directories (again), the controllers enabled for their
    /// children in v2.
    fn make_parents(&self) -> Result<(), LayoutError> {
        match self {
            Layout::V2 { parent } => {
                make_dir(parent)?;
                std::fs::write(parent.join("cgroup.subtree_control"), ENABLE)
                    .map_err(|source| LayoutError::EnableInParent { dir: parent.clone(), source })
            }
            Layout::V1 { memory, pids, cpu } => [memory, pids, cpu].into_iter().try_for_each(|p| make_dir(p)),
        }
    }
}

impl Drop for Layout {
    /// The last of a service's runners gone, its `svc-jobs` directories are removed if no
    /// other service uses them (the kernel refuses to remove a group with groups in it).
    fn drop(&mut self) {
        let parents: Vec<&PathBuf> = match self {
            Layout::V2 { parent } => vec![parent],
            Layout::V1 { memory, pids, cpu } => vec![memory, pids, cpu],
        };
        for parent in parents {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

impl Cgroups {
    /// Finds the unified v2 hierarchy with the memory, pids and cpu controllers, else the v1
    /// ones, makes `svc-jobs` in the service's own cgroup(s), checks with a probe group that
    /// a group can be made, bounded and joined, and removes the groups of services that are
    /// gone.
    pub fn detect() -> Result<Cgroups, CgroupError> {
        let unavailable = |detail: Unbounded| CgroupError::Unavailable { detail };
        let mountinfo = read("/proc/self/mountinfo").map_err(|e| unavailable(Unbounded::Proc(e)))?;
        let membership = read("/proc/self/cgroup").map_err(|e| unavailable(Unbounded::Proc(e)))?;
        let mounts = parse_mountinfo(&mountinfo);
        let own = parse_membership(&membership);
        let layout = match v2_layout(&mounts, &own) {
            Ok(layout) => layout,
            Err(v2) => v1_layout(&mounts, &own).map_err(|v1| unavailable(Unbounded::Neither { v2, v1 }))?,
        };
        let cgroups = Cgroups { layout: Arc::new(layout) };
        cgroups.sweep();
        cgroups.probe().map_err(|e| unavailable(Unbounded::Probe(Box::new(e))))?;
        Ok(cgroups)
    }

    /// `v2` or `v1`, for the service's log.
    pub fn version(&self) -> &'static str {
        match *self.layout {
            Layout::V2 { .. } => "v2",
            Layout::V1 { .. } => "v1",
        }
    }

    /// The `svc-jobs` directories, one per hierarchy.
    fn parents(&self) -> Vec<&Path> {
        match &*self.layout {
            Layout::V2 { parent } => vec![parent],
            Layout::V1 { memory, pids, cpu } => dedup(vec![memory, pids, cpu]),
        }
    }

    /// Makes job `job`'s group, bounded by `resources`.
    pub fn create(&self, job: &str, resources: JobResources) -> Result<JobCgroup, CgroupError> {
        let name = format!("{}-{}", std::process::id(), MADE.fetch_add(1, Ordering::Relaxed));
        self.create_named(&name, job, resources)
    }

    fn create_named(&self, name: &str, job: &str, resources: JobResources) -> Result<JobCgroup, CgroupError> {
        let dirs: Vec<PathBuf> = self.parents().into_iter().map(|p| p.join(name)).collect();
        for dir in &dirs {
            let made = match std::fs::create_dir(dir) {
                // Another service removed the shared `svc-jobs` as it ended: made again.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    self.layout.make_parents().map_err(|e| io_error("create", dir, io::Error::other(e)))?;
                    std::fs::create_dir(dir)
                }
                made => made,
            };
            made.map_err(|source| io_error("create", dir, source))?;
        }
        // From here on the group is removed if it cannot be set up.
        let group = JobCgroup { layout: self.layout.clone(), dirs, job: job.to_owned(), removed: false };
        group.bound(resources)?;
        Ok(group)
    }

    /// Makes, bounds, joins (a short-lived `sh`) and removes a group.
    fn probe(&self) -> Result<(), CgroupError> {
        let name = format!("{}-probe-{}", std::process::id(), MADE.fetch_add(1, Ordering::Relaxed));
        let group = self.create_named(&name, "probe", JobResources::DEFAULT)?;
        let status = std::process::Command::new("sh")
            .args(["-c", r#"for f; do echo $$ > "$f" || exit 1; done"#, "sh"])
            .args(group.procs_files())
            .stdin(std::process::Stdio::null())
            .status()
            .map_err(|source| io_error("run a shell to join", &group.dirs[0], source))?;
        if !status.success() {
            let source = io::Error::other(format!("a process could not join it ({status})"));
            return Err(io_error("join", &group.dirs[0], source));
        }
        group.remove()
    }

    /// Kills and removes the groups of services that are no longer running (named after a
    /// pid that is gone); how many.
    pub fn sweep(&self) -> usize {
        let mut swept = std::collections::BTreeSet::new();
        for parent in self.parents() {
            let Ok(entries) = std::fs::read_dir(parent) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(pid) = name.to_str().and_then(|n| n.split('-').next()).and_then(|p| p.parse::<u32>().ok())
                else {
                    continue;
                };
                if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
                    continue;
                }
                let dir = entry.path();
                kill_in(&dir);
                if remove_dir(&dir).is_ok() {
                    swept.insert(name);
                }
            }
        }
        swept.len()
    }
}

/// A job's cgroup: its processes join it ([`JobCgroup::procs_files`]); dropped (or
/// [`JobCgroup::remove`]d), every process still in it is killed and it is removed.
#[derive(Debug)]
pub struct JobCgroup {
    layout: Arc<Layout>,
    /// Its directories: one in v2; memory, pids and cpu (some may be one) in v1.
    dirs: Vec<PathBuf>,
    job: String,
    removed: bool,
}

impl JobCgroup {
    /// The job it bounds.
    pub fn job(&self) -> &str {
        &self.job
    }

    /// Its directory in each hierarchy.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    fn bound(&self, resources: JobResources) -> Result<(), CgroupError> {
        let quota = (resources.cpu_millicores * PERIOD_US / 1000).max(MIN_QUOTA_US);
        let memory = resources.memory_bytes.to_string();
        match &*self.layout {
            Layout::V2 { .. } => {
                let dir = &self.dirs[0];
                write(&dir.join("memory.max"), &memory)?;
                write_if_present(&dir.join("memory.swap.max"), "0")?;
                // The kernel's OOM killer then ends every process of the job at once.
                write_if_present(&dir.join("memory.oom.group"), "1")?;
                write(&dir.join("pids.max"), &resources.processes.to_string())?;
                write(&dir.join("cpu.max"), &format!("{quota} {PERIOD_US}"))?;
            }
            Layout::V1 { memory: memory_parent, pids, cpu } => {
                let [memory_dir, pids_dir, cpu_dir] = [memory_parent, pids, cpu].map(|p| self.dir_under(p));
                write(&memory_dir.join("memory.limit_in_bytes"), &memory)?;
                // Memory plus swap: no more than memory, so no swap.
                write_if_present(&memory_dir.join("memory.memsw.limit_in_bytes"), &memory)?;
                // Socket buffers are not charged in v1 unless this is set.
                write_if_present(&memory_dir.join("memory.kmem.tcp.limit_in_bytes"), &memory)?;
                write(&pids_dir.join("pids.max"), &resources.processes.to_string())?;
                write(&cpu_dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
                write(&cpu_dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
            }
        }
        Ok(())
    }

    /// This group's directory under `parent` (a v1 hierarchy's `svc-jobs`).
    fn dir_under(&self, parent: &Path) -> PathBuf {
        self.dirs.iter().find(|d| d.parent() == Some(parent)).cloned().unwrap_or_else(|| self.dirs[0].clone())
    }

    /// The files a process writes its own pid into to join the group, one per hierarchy
    /// (`cgroup.procs`).
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs.iter().map(|d| d.join("cgroup.procs")).collect()
    }

    /// The memory directory (v1) or the group (v2).
    fn memory_dir(&self) -> PathBuf {
        match &*self.layout {
            Layout::V2 { .. } => self.dirs[0].clone(),
            Layout::V1 { memory, .. } => self.dir_under(memory),
        }
    }

    /// Whether the kernel has killed a process of the job because the job was over its
    /// memory (`oom_kill` in `memory.events` in v2, in `memory.oom_control` in v1; a kernel
    /// older than 4.13 tells only `under_oom`).
    pub fn out_of_memory(&self) -> bool {
        let dir = self.memory_dir();
        let file = match *self.layout {
            Layout::V2 { .. } => "memory.events",
            Layout::V1 { .. } => "memory.oom_control",
        };
        let Ok(text) = std::fs::read_to_string(dir.join(file)) else { return false };
        let field =
            |name: &str| text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse::<u64>().ok());
        match field("oom_kill") {
            Some(kills) => kills > 0,
            None => field("under_oom").is_some_and(|u| u > 0),
        }
    }

    /// A descriptor readable whenever the job's memory events move, so a job over its memory
    /// is seen without looking at it (issue 44: an idle job costs no look): in v2 an inotify
    /// watch on `memory.events`, in v1 an eventfd registered for `memory.oom_control` through
    /// `cgroup.event_control`. [`JobCgroup::out_of_memory`] then tells what moved.
    pub fn memory_events(&self) -> io::Result<MemoryEvents> {
        use rustix::fs::inotify;
        let dir = self.memory_dir();
        match *self.layout {
            Layout::V2 { .. } => {
                let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
                inotify::add_watch(&fd, dir.join("memory.events"), inotify::WatchFlags::MODIFY)?;
                Ok(MemoryEvents { fd, _watched: None })
            }
            Layout::V1 { .. } => {
                use rustix::event::{EventfdFlags, eventfd};
                use std::os::fd::AsRawFd;
                let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
                let watched = fs_err::File::open(dir.join("memory.oom_control"))?.into_parts().0;
                let control = dir.join("cgroup.event_control");
                fs_err::write(control, format!("{} {}", fd.as_raw_fd(), watched.as_raw_fd()))?;
                Ok(MemoryEvents { fd, _watched: Some(watched) })
            }
        }
    }

    /// The memory the job uses now, bytes (for tests and logs).
    pub fn memory_used(&self) -> Option<u64> {
        let file = match *self.layout {
            Layout::V2 { .. } => "memory.current",
            Layout::V1 { .. } => "memory.usage_in_bytes",
        };
        std::fs::read_to_string(self.memory_dir().join(file)).ok()?.trim().parse().ok()
    }

    /// The processes in the group now.
    pub fn pids(&self) -> Vec<u32> {
        procs(&self.dirs[0])
    }

    /// Kills every process in the group: `cgroup.kill` where the kernel has it (v2, 5.14+),
    /// else SIGKILL to every pid listed, again until none is left (a process forking in
    /// between is caught the next round); waits at most 2 s for the group to empty.
    pub fn kill_all(&self) {
        kill_in(&self.dirs[0]);
    }

    /// Kills what is left and removes the group (as `Drop` does, but telling why it could
    /// not).
    pub fn remove(mut self) -> Result<(), CgroupError> {
        self.removed = true;
        self.kill_all();
        let mut result = Ok(());
        for dir in &self.dirs {
            if let Err(source) = remove_dir(dir) {
                result = Err(io_error("remove", dir, source));
            }
        }
        result
    }
}

/// What [`JobCgroup::memory_events`] gives: readable (for an async reactor too) once the
/// job's memory events have moved since the last [`MemoryEvents::take`].
#[derive(Debug)]
pub struct MemoryEvents {
    /// An inotify instance (v2) or an eventfd (v1), non-blocking.
    fd: std::os::fd::OwnedFd,
    /// The file the eventfd is registered for (v1): open as long as the registration.
    _watched: Option<std::fs::File>,
}

impl MemoryEvents {
    /// Whether the events moved since the last call, without waiting (what was pending is
    /// consumed).
    pub fn take(&self) -> io::Result<bool> {
        let mut moved = false;
        let mut buf = [0u8; 512];
        loop {
            match rustix::io::read(&self.fd, &mut buf) {
                Ok(0) => return Ok(moved),
                Ok(_) => moved = true,
                Err(rustix::io::Errno::AGAIN) => return Ok(moved),
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl std::os::fd::AsRawFd for MemoryEvents {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

impl std::os::fd::AsFd for MemoryEvents {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for JobCgroup {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        self.kill_all();
        let failed: Vec<PathBuf> = self.dirs.iter().filter(|d| remove_dir(d).is_err()).cloned().collect();
        if !failed.is_empty() {
            // A process of it not reaped yet (a sandbox's outer process the runtime reaps
            // later) keeps a group busy: try again for a while, off this thread.
            std::thread::spawn(move || {
                let started = Instant::now();
                let mut left = failed;
                while !left.is_empty() && started.elapsed() < Duration::from_secs(30) {
                    std::thread::sleep(Duration::from_millis(100));
                    left.retain(|d| {
                        kill_in(d);
                        remove_dir(d).is_err()
                    });
                }
            });
        }
    }
}

/// Kills every process in the group at `dir` (see [`JobCgroup::kill_all`]).
fn kill_in(dir: &Path) {
    let kill_file = dir.join("cgroup.kill");
    let started = Instant::now();
    if kill_file.exists() {
        let _ = std::fs::write(&kill_file, "1");
    }
    loop {
        let pids = procs(dir);
        if pids.is_empty() || started.elapsed() > Duration::from_secs(2) {
            return;
        }
        for pid in pids {
            signal(pid, Signal::KILL);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The pids in the group at `dir`.
fn procs(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| t.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

/// Removes a group's directory, again for a moment if it is busy (processes leaving it);
/// one already gone is removed.
fn remove_dir(dir: &Path) -> io::Result<()> {
    let started = Instant::now();
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if started.elapsed() > Duration::from_millis(200) => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

fn read(path: &str) -> io::Result<String> {
    fs_err::read_to_string(path)
}

fn write(path: &Path, value: &str) -> Result<(), CgroupError> {
    std::fs::write(path, value).map_err(|source| io_error("write", path, source))
}

fn write_if_present(path: &Path, value: &str) -> Result<(), CgroupError> {
    if path.exists() { write(path, value) } else { Ok(()) }
}

fn io_error(action: &'static str, path: &Path, source: io::Error) -> CgroupError {
    CgroupError::Io { action, path: path.to_owned(), source }
}

fn dedup(mut paths: Vec<&PathBuf>) -> Vec<&Path> {
    let mut seen: Vec<&Path> = Vec::new();
    for path in paths.drain(..) {
        if !seen.contains(&path.as_path()) {
            seen.push(path);
        }
    }
    seen
}

/// A cgroup filesystem mounted on this host, from `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    /// The cgroup path shown at the mount point (`/` unless a bind mount or a namespace).
    root: String,
    /// Where it is mounted.
    point: PathBuf,
    /// `cgroup2`, or `cgroup` (v1).
    fstype: String,
    /// Its super options: for v1, the controllers it holds (`memory`, `cpu,cpuacct`...).
    options: Vec<String>,
}

/// The cgroup mounts in `mountinfo`'s text. A line: `id parent dev root point options
/// [optional...] - fstype source superoptions`; paths escape spaces as `\040`.
fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (head, tail) = line.split_once(" - ")?;
            let head: Vec<&str> = head.split(' ').collect();
            let mut tail = tail.split(' ');
            let fstype = tail.next()?;
            if fstype != "cgroup" && fstype != "cgroup2" {
                return None;
            }
            let options = tail.nth(1).unwrap_or("").split(',').map(str::to_owned).collect();
            Some(Mount {
                root: unescape(head.get(3)?),
                point: PathBuf::from(unescape(head.get(4)?)),
                fstype: fstype.to_owned(),
                options,
            })
        })
        .collect()
}

fn unescape(field: &str) -> String {
    field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

/// The service's own cgroup in each hierarchy, from `/proc/self/cgroup`'s `id:controllers:path`
/// lines: (controllers, path); the v2 one has no controllers.
fn parse_membership(text: &str) -> Vec<(Vec<String>, String)> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _id = parts.next()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            let controllers = controllers.split(',').filter(|c| !c.is_empty()).map(str::to_owned).collect();
            Some((controllers, path.to_owned()))
        })
        .collect()
}

/// Where `path` (a cgroup path as `/proc/self/cgroup` gives it) is under `mount`.
fn own_dir(mount: &Mount, path: &str) -> PathBuf {
    let relative = path.strip_prefix(mount.root.trim_end_matches('/')).unwrap_or(path);
    mount.point.join(relative.trim_start_matches('/'))
}

/// The controllers a job group needs.
const CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];

/// What a v2 group's `cgroup.subtree_control` is given for its children.
const ENABLE: &str = "+memory +pids +cpu";

/// The v2 layout: `svc-jobs` in the service's own group, with the controllers enabled for
/// it and for its children. The kernel lets a group hand controllers to its children only if
/// it has no process of its own (the root excepted): if the service's group has processes,
/// the service moves itself into a leaf beside `svc-jobs` (`svc-service`) first.
fn v2_layout(mounts: &[Mount], own: &[(Vec<String>, String)]) -> Result<Layout, LayoutError> {
    let mount = mounts.iter().find(|m| m.fstype == "cgroup2").ok_or(LayoutError::NoCgroup2)?;
    let path = own.iter().find(|(c, _)| c.is_empty()).map(|(_, p)| p).ok_or(LayoutError::NoV2Group)?;
    let own_dir = own_dir(mount, path);
    let controllers = own_dir.join("cgroup.controllers");
    let available = match std::fs::read_to_string(&controllers) {
        Ok(available) => available,
        Err(source) => return Err(LayoutError::Controllers { path: controllers, source }),
    };
    let available: Vec<&str> = available.split_whitespace().collect();
    let missing: Vec<&'static str> = CONTROLLERS.into_iter().filter(|c| !available.contains(c)).collect();
    if !missing.is_empty() {
        return Err(LayoutError::Undelegated { mount: mount.point.clone(), missing });
    }
    let subtree = own_dir.join("cgroup.subtree_control");
    if std::fs::write(&subtree, ENABLE).is_err() {
        // Processes in the group: the service moves itself into a leaf of its own.
        let leaf = own_dir.join("svc-service");
        let _ = std::fs::create_dir(&leaf);
        if let Err(source) = std::fs::write(leaf.join("cgroup.procs"), std::process::id().to_string()) {
            return Err(LayoutError::MoveService { leaf, source });
        }
        if let Err(source) = std::fs::write(&subtree, ENABLE) {
            return Err(LayoutError::EnableInOwn { path: subtree, source });
        }
    }
    let layout = Layout::V2 { parent: own_dir.join(PARENT) };
    layout.make_parents()?;
    Ok(layout)
}

/// The v1 layout: `svc-jobs` in the service's own group of each of the memory, pids and cpu
/// hierarchies.
fn v1_layout(mounts: &[Mount], own: &[(Vec<String>, String)]) -> Result<Layout, LayoutError> {
    let parent = |controller: &'static str| {
        let mount = mounts
            .iter()
            .find(|m| m.fstype == "cgroup" && m.options.iter().any(|o| o == controller))
            .ok_or(LayoutError::V1NotMounted { controller })?;
        let path = own.iter().find(|(c, _)| c.iter().any(|c| c == controller)).map(|(_, p)| p.as_str()).unwrap_or("/");
        Ok(own_dir(mount, path).join(PARENT))
    };
    // In the order of `CONTROLLERS`: the first missing is the one said.
    let [memory, pids, cpu] = CONTROLLERS;
    let layout = Layout::V1 { memory: parent(memory)?, pids: parent(pids)?, cpu: parent(cpu)? };
    layout.make_parents()?;
    Ok(layout)
}

fn make_dir(dir: &Path) -> Result<(), LayoutError> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(LayoutError::Create { dir: dir.to_owned(), source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO_V1: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 23 0:40 / /proc rw - proc proc rw
";

    #[test]
    fn mountinfo_gives_each_hierarchy_and_its_controllers() {
        let mounts = parse_mountinfo(MOUNTINFO_V1);
        assert_eq!(mounts.len(), 4, "{mounts:?}");
        let cpu = &mounts[0];
        assert_eq!(cpu.point, Path::new("/sys/fs/cgroup/cpu,cpuacct"));
        assert!(cpu.options.iter().any(|o| o == "cpu") && cpu.options.iter().any(|o| o == "cpuacct"));
        assert_eq!(mounts[3].fstype, "cgroup2");
        let spaced = parse_mountinfo("1 2 0:1 /a\\040b /mnt/c\\040d rw - cgroup2 cgroup2 rw\n");
        assert_eq!((spaced[0].root.as_str(), spaced[0].point.as_path()), ("/a b", Path::new("/mnt/c d")));
    }

    #[test]
    fn membership_names_each_hierarchys_own_group() {
        let own = parse_membership("4:memory:/process_api/de67\n1:cpu,cpuacct:/\n0::/user.slice/x.scope\n");
        assert_eq!(own[0], (vec!["memory".to_owned()], "/process_api/de67".to_owned()));
        assert_eq!(own[1].0, vec!["cpu".to_owned(), "cpuacct".to_owned()]);
        assert_eq!(own[2], (Vec::new(), "/user.slice/x.scope".to_owned()));
    }

    #[test]
    fn the_own_group_is_found_below_the_mount_root() {
        let mount = Mount {
            root: "/".into(),
            point: "/sys/fs/cgroup/memory".into(),
            fstype: "cgroup".into(),
            options: vec!["memory".into()],
        };
        assert_eq!(own_dir(&mount, "/process_api/x"), Path::new("/sys/fs/cgroup/memory/process_api/x"));
        assert_eq!(own_dir(&mount, "/"), Path::new("/sys/fs/cgroup/memory"));
        // A container's view: the mount shows the group it runs in.
        let nested = Mount { root: "/docker/abc".into(), ..mount };
        assert_eq!(own_dir(&nested, "/docker/abc/svc"), Path::new("/sys/fs/cgroup/memory/svc"));
    }

    #[test]
    fn v1_needs_every_controller_and_says_which_is_missing() {
        let mounts: Vec<Mount> =
            parse_mountinfo(MOUNTINFO_V1).into_iter().filter(|m| !m.options.iter().any(|o| o == "pids")).collect();
        let err = v1_layout(&mounts, &[]).expect_err("no pids").to_string();
        assert!(err.contains("v1 pids controller is not mounted"), "{err}");
        let err = v2_layout(&[], &[]).expect_err("no cgroup2").to_string();
        assert!(err.contains("no cgroup2"), "{err}");
    }

    #[test]
    fn a_group_whose_controllers_cannot_be_read_is_named_with_the_cause_kept() {
        let mount = Mount {
            root: "/".into(),
            point: "/nonexistent-cgroup".into(),
            fstype: "cgroup2".into(),
            options: Vec::new(),
        };
        let err = v2_layout(&[mount], &[(Vec::new(), "/svc".into())]).expect_err("nothing there");
        let text = err.to_string();
        assert!(text.starts_with("cannot read /nonexistent-cgroup/svc/cgroup.controllers: "), "{text}");
        let cause = std::error::Error::source(&err).and_then(|e| e.downcast_ref::<io::Error>());
        assert_eq!(cause.map(io::Error::kind), Some(io::ErrorKind::NotFound), "{err:?}");
        // Said whole where it is shown: in the service's refusal to start.
        let shown = CgroupError::Unavailable {
            detail: Unbounded::Neither { v2: err, v1: LayoutError::V1NotMounted { controller: "memory" } },
        }
        .to_string();
        assert!(shown.contains(&format!("{text}; the v1 memory controller is not mounted")), "{shown}");
    }

    #[test]
    fn the_unavailable_message_says_what_to_enable_and_how_to_run_without() {
        let detail =
            Unbounded::Neither { v2: LayoutError::NoCgroup2, v1: LayoutError::V1NotMounted { controller: "pids" } };
        let message = CgroupError::Unavailable { detail }.to_string();
        for needed in ["cgroup2", "memory, pids and cpu", "--without-job-cgroups", "pids controller is not mounted"] {
            assert!(message.contains(needed), "{needed}: {message}");
        }
    }
}
