//! [`LocalRunner`]: each job as confined local processes, the app and (an ingress job's) the
//! agent, with their output read through pipes, and their own uid when the service is root.

use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rustix::process::Signal;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::cgroup::{Cgroups, JobCgroup, JobResources, MemoryEvents};
use super::egress::{Broker, EGRESS_ENV, EGRESS_INSIDE, Egress};
use super::netns::JobNetwork;
use super::output::{Budget, read_lines};
use super::process::{parent, signal, state};
use super::sandbox::{Limits, Placement, Sandbox, SandboxError};
use super::uids::{HOST_RESERVATIONS, UidLease, Uids};
use super::{Changed, Confined, Exit, JobRunner, JobSpec, JobUid, LaunchError, Mount, Part, RunningJob, Stopping};

/// The first job uid (and gid) when the service runs as root: far above the ranges
/// distributions give to users (1000+) and to containers' subordinate ids (100000+).
pub const DEFAULT_UID_BASE: u32 = 2_000_000_000;

/// Runs jobs as confined local processes.
#[derive(Debug, Clone)]
pub struct LocalRunner {
    sandbox: Sandbox,
    uids: Uids,
    /// Each job's cgroup is made here, bounded by its resources or these defaults; `None`:
    /// jobs have none.
    cgroups: Option<(Cgroups, JobResources)>,
    /// The runtime egress brokers run on; `None`: the caller's.
    brokers: Option<tokio::runtime::Handle>,
}

impl LocalRunner {
    /// A runner confining jobs with the host's sandbox tools (checked now) under `limits`;
    /// jobs' uids start at `uid_base` when the service runs as root, each reserved on the
    /// whole host ([`HOST_RESERVATIONS`]).
    pub async fn new(limits: Limits, uid_base: u32) -> Result<LocalRunner, SandboxError> {
        let sandbox = Sandbox::detect(limits).await?;
        sweep_egress_dirs();
        let host = sandbox.separate_uids().then_some(Path::new(HOST_RESERVATIONS));
        let uids = Uids::new(uid_base, host)
            .map_err(|source| SandboxError::Reservations { dir: HOST_RESERVATIONS.into(), source })?;
        Ok(LocalRunner { sandbox, uids, cgroups: None, brokers: None })
    }

    /// This runner, each job in a cgroup of its own made in `cgroups`, bounded by the job's
    /// resources or `defaults`.
    pub fn with_cgroups(self, cgroups: Cgroups, defaults: JobResources) -> LocalRunner {
        LocalRunner { cgroups: Some((cgroups, defaults)), ..self }
    }

    /// This runner, its jobs' egress brokers on `runtime` rather than the one that launches
    /// them: where the destinations they relay to are served, so that a relayed message and
    /// its answer need no second thread woken.
    pub fn with_brokers_on(self, runtime: tokio::runtime::Handle) -> LocalRunner {
        LocalRunner { brokers: Some(runtime), ..self }
    }

    /// Whether jobs granted network access can have it here; otherwise, why not.
    pub fn outbound_ready(&self) -> Result<(), crate::NetworkError> {
        self.sandbox.network().outbound_ready()
    }

    /// A broker for `job`'s agent, listening on a new socket in the runner's directory
    /// ([`egress_dir`]), owned by the job's uid (which must connect to it).
    fn broker(&self, job: &JobSpec, egress: &Egress, uid: JobUid) -> Result<Broker, LaunchError> {
        let dir = egress_dir();
        let prepare = |path: &Path| {
            let (job, path) = (job.id.clone(), path.to_owned());
            move |source| LaunchError::Prepare { job, path, source }
        };
        // 0700: the job reaches its socket through its mount, no one through this directory.
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(prepare(&dir))?;
        let n = NEXT_SOCKET.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let socket = dir.join(format!("{n}.sock"));
        // Left by a job of a service that had this pid before.
        let _ = std::fs::remove_file(&socket);
        let _on_brokers_runtime = self.brokers.as_ref().map(tokio::runtime::Handle::enter);
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(prepare(&socket)(std::io::Error::other("the egress broker needs a tokio runtime")));
        }
        let broker = Broker::listen(&socket, egress.0.clone()).map_err(prepare(&socket))?;
        if self.sandbox.separate_uids() {
            fs_err::os::unix::fs::lchown(&socket, Some(uid.uid), Some(uid.gid)).map_err(prepare(&socket))?;
        }
        Ok(broker)
    }

    fn spawn(
        &self,
        job: &JobSpec,
        part: Part,
        confined: &Confined,
        uid: JobUid,
        placement: Placement<'_>,
    ) -> Result<Child, LaunchError> {
        let spawn_error = |source| LaunchError::Spawn { job: job.id.clone(), part, source };
        if self.sandbox.separate_uids() {
            // The job's own mounts (its app files, its agent state, its secret files): the
            // job's uid must read them, and write the writable ones, while the host keeps them
            // private (0600/0700) to the service. Shared ones (a stored artifact) stay as they
            // are: readable by every uid, owned by none of the jobs.
            for mount in confined.mounts.iter().filter(|m| m.job_owned || m.writable) {
                chown_tree(&mount.host, uid).map_err(|source| LaunchError::Prepare {
                    job: job.id.clone(),
                    path: mount.host.clone(),
                    source,
                })?;
            }
        }
        let mut command: Command = self
            .sandbox
            .command(confined, uid, placement)
            .map_err(|source| LaunchError::Sandbox { job: job.id.clone(), source })?;
        // Its lifeline (`sandbox::LIFELINE`): a pipe nothing is written to, held in the child
        // (never taken) until the job is stopped or dropped, or this process ends however it
        // ends; at its end of file every process of the job is killed.
        command.stdin(Stdio::piped()).kill_on_drop(true);
        if job.capture_output {
            command.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        command.spawn().map_err(spawn_error)
    }
}

impl JobRunner for LocalRunner {
    fn launch(&self, job: &JobSpec) -> Result<Box<dyn RunningJob>, LaunchError> {
        let lease = self.uids.lease(&job.id)?;
        // Made before any process, removed after them (a field of the job after them).
        let cgroup = match &self.cgroups {
            Some((cgroups, defaults)) => Some(
                cgroups
                    .create(&job.id, job.resources.unwrap_or(*defaults))
                    .map_err(|source| LaunchError::Cgroup { job: job.id.clone(), source })?,
            ),
            None => None,
        };
        let procs = cgroup.as_ref().map(JobCgroup::procs_files).unwrap_or_default();
        // Its way out (slirp4netns), if it has one, runs in its cgroup: what the job's traffic
        // costs is the job's.
        let network = JobNetwork::create(self.sandbox.network(), job.network.outbound, &procs)
            .map_err(|e| LaunchError::Sandbox { job: job.id.clone(), source: e.into() })?;
        let placement = Placement { network: Some(&network), cgroup_procs: &procs };
        let mut processes = vec![(Part::App, self.spawn(job, Part::App, &job.app, lease.uid, placement)?)];
        let mut broker = None;
        if let Some(agent) = &job.agent {
            let mut agent = agent.clone();
            if let Some(egress) = &job.egress {
                let listening = self.broker(job, egress, lease.uid)?;
                agent.mounts.push(Mount {
                    host: listening.socket().to_owned(),
                    inside: EGRESS_INSIDE.into(),
                    writable: true,
                    job_owned: true,
                });
                agent.env.push((EGRESS_ENV.to_owned(), EGRESS_INSIDE.to_owned()));
                broker = Some(listening);
            }
            // If the agent cannot start, the app is killed as `processes` drops.
            processes.push((Part::Agent, self.spawn(job, Part::Agent, &agent, lease.uid, placement)?));
        }
        // Each sandbox's lifeline, apart from its process: waiting for a process to end
        // (`Child::wait`, [`RunningJob::changed`]) would close it, and so kill the job.
        let lifelines = processes.iter_mut().filter_map(|(_, child)| child.stdin.take()).collect();
        // Its memory events wake its watcher; where they cannot, they are read on a timer.
        let memory = cgroup.as_ref().and_then(|c| c.memory_events().ok()).and_then(watch_memory);
        let (lines, output) = mpsc::channel(OUTPUT_LINES);
        let mut readers = JoinSet::new();
        // One budget for every pipe of the job: its app's and its agent's output together.
        let budget = Budget::new();
        for (part, child) in &mut processes {
            if let Some(out) = child.stdout.take() {
                readers.spawn(read_lines(*part, out, lines.clone(), budget.clone()));
            }
            if let Some(err) = child.stderr.take() {
                readers.spawn(read_lines(*part, err, lines.clone(), budget.clone()));
            }
        }
        Ok(Box::new(LocalJob {
            processes,
            lifelines,
            output,
            held: Vec::new(),
            output_open: true,
            readers,
            broker,
            network: Some(network),
            cgroup,
            memory,
            memory_moved: false,
            memory_read: std::time::Instant::now(),
            out_of_memory: false,
            programs: std::sync::Mutex::default(),
            program_look: PROGRAM_LOOK,
            lease: Some(lease),
        }))
    }
}

/// `events` registered with the current runtime's reactor; `None` outside one.
#[expect(
    deprecated,
    reason = "`register_with_interest` is its unsafe successor (unsafe code is forbidden here); \
              the condition it states holds: `MemoryEvents` owns its descriptor, open and the \
              same for as long as it lives"
)]
fn watch_memory(events: MemoryEvents) -> Option<AsyncFd<MemoryEvents>> {
    tokio::runtime::Handle::try_current().ok()?;
    AsyncFd::with_interest(events, Interest::READABLE).ok()
}

/// Sockets made by this process for its jobs' brokers, numbered.
static NEXT_SOCKET: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Where this process's brokers listen: a directory of its own (by pid) in the system's
/// temporary directory, short enough for a socket's path (108 bytes at most).
fn egress_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{EGRESS_DIR_PREFIX}{}", std::process::id()))
}

const EGRESS_DIR_PREFIX: &str = "svc-egress-";

/// Removes the broker directories of services that are gone (their pid no longer runs).
fn sweep_egress_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(EGRESS_DIR_PREFIX)) else { continue };
        if pid.parse::<u32>().is_ok_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Lines of output held for the engine at most (per job); a job printing faster waits.
const OUTPUT_LINES: usize = 4096;

/// How long a stopped job's last output is waited for.
const LAST_OUTPUT: Duration = Duration::from_millis(500);

struct LocalJob {
    /// Processes still running; killed (by `Drop` or `stop`) before the uid is given back.
    processes: Vec<(Part, Child)>,
    /// Their lifelines (`sandbox::LIFELINE`), closed once they are killed and reaped.
    lifelines: Vec<ChildStdin>,
    /// Their output, line by line.
    output: mpsc::Receiver<(Part, String)>,
    /// Lines [`RunningJob::changed`] received, before the rest of `output`.
    held: Vec<(Part, String)>,
    /// Whether `output` may still bring a line (its senders are not all gone).
    output_open: bool,
    /// The tasks reading their pipes.
    readers: JoinSet<()>,
    /// The agent's egress broker: stopped with the job.
    broker: Option<Broker>,
    /// The job's network namespace: released after the processes (a field after them, or
    /// dropped by `stop` once they are reaped).
    network: Option<JobNetwork>,
    /// The job's cgroup, if it has one: removed after the processes (a field after them, or
    /// dropped by `stop` once they are reaped), killing whatever is left in it.
    cgroup: Option<JobCgroup>,
    /// Readable when the cgroup's memory events move; `None` without a cgroup or where the
    /// kernel cannot tell (they are then read every [`MEMORY_READ`]).
    memory: Option<AsyncFd<MemoryEvents>>,
    /// [`RunningJob::changed`] saw the memory events move: [`RunningJob::exited`] reads them.
    memory_moved: bool,
    /// When the memory events were last read on the timer (without `memory`).
    memory_read: std::time::Instant,
    /// The job was over its memory, and every process of it was killed.
    out_of_memory: bool,
    /// Each sandbox's program once it runs, by the sandbox's outer pid: it stays the same
    /// process for the sandbox's life, so `/proc` is walked only until it is found (issue
    /// 44: a pool of idle jobs looked at every 50 ms walked it for each, most of an idle
    /// coordinator's time).
    programs: std::sync::Mutex<std::collections::HashMap<u32, u32>>,
    /// How long [`RunningJob::changed`] waits before a sandbox's program is looked for again,
    /// while one is not found: from [`PROGRAM_LOOK`], doubling up to [`PROGRAM_LOOK_MAX`].
    program_look: Duration,
    /// Given back once the processes are gone (a field after them, or taken by `stop`).
    lease: Option<UidLease>,
}

impl Drop for LocalJob {
    /// A job dropped without [`RunningJob::stop`] (the coordinator shutting down) is killed
    /// the same way; tokio reaps what is left.
    fn drop(&mut self) {
        for (_, child) in &mut self.processes {
            kill_sandbox(child);
        }
    }
}

/// Kills a sandbox and every process in it, leaving no moment for one to escape.
///
/// bwrap's `--die-with-parent` is not enough: the init of the job's PID namespace asks for
/// its parent-death signal only once the sandbox is built, so a job stopped in its first
/// tens of milliseconds (a demo interrupted at once) lived on, orphaned. So the outer bwrap
/// is stopped first, and only once it is stopped are its children read: a stop is acted on
/// when the process next leaves the kernel, so a clone under way completes first (the
/// kernel aborts a fork only for a fatal signal) and its child is among them. Found in CI:
/// children read as soon as the stop was sent missed an init cloned that moment, which
/// waited for ever for the outer bwrap to tell it to go on. Being stopped, the outer bwrap
/// cannot reap its children, so their pids cannot be reused. Each child is a namespace's
/// init; killing it kills every process of its namespace (the kernel's rule). Then the
/// outer bwrap goes too.
fn kill_sandbox(child: &mut Child) {
    // Already reaped: it ended, and its namespace with it.
    let Some(outer) = child.id() else { return };
    signal(outer, Signal::STOP);
    until_stopped(outer);
    for init in children(outer) {
        signal(init, Signal::KILL);
    }
    // SIGKILL ends a stopped process too.
    let _ = child.start_kill();
}

/// Waits until `pid` is stopped or gone, for at most [`STOP_WAIT`]: a process in an
/// uninterruptible wait stops only when the wait ends.
fn until_stopped(pid: u32) {
    let started = std::time::Instant::now();
    while matches!(state(pid), Some(state) if !matches!(state, 'T' | 't' | 'Z' | 'X')) {
        if started.elapsed() >= STOP_WAIT {
            return;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

/// How often a job's cgroup's memory events are read where they cannot wake its watcher
/// ([`JobCgroup::memory_events`] failed); always when one of its processes has ended.
const MEMORY_READ: Duration = Duration::from_secs(1);

/// How soon a sandbox's program is looked for again while it is not found (it starts within
/// tens of milliseconds), doubling up to [`PROGRAM_LOOK_MAX`].
const PROGRAM_LOOK: Duration = Duration::from_millis(50);
const PROGRAM_LOOK_MAX: Duration = Duration::from_secs(2);

impl LocalJob {
    /// Whether the cgroup's memory events may have moved since this was last asked: the
    /// watcher saw them move, or they did (without waiting), or, where they cannot tell,
    /// [`MEMORY_READ`] has passed.
    fn memory_moved(&mut self) -> bool {
        let seen = std::mem::take(&mut self.memory_moved);
        match &self.memory {
            // An unreadable descriptor counts as a move: the events are read then.
            Some(events) => events.get_ref().take().unwrap_or(true) || seen,
            None if self.cgroup.is_some() => {
                let due = self.memory_read.elapsed() >= MEMORY_READ;
                if due {
                    self.memory_read = std::time::Instant::now();
                }
                due || seen
            }
            None => false,
        }
    }
}

/// How long [`kill_sandbox`] waits for a sandbox's outer process to stop.
const STOP_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

impl RunningJob for LocalJob {
    fn pids(&self) -> Vec<u32> {
        // Only programs that run: a sandbox still starting has none to name yet (its init's
        // pid, named for a moment after a restart, was followed by the program's: a status
        // read then listed a process that was not the app; chaos seed 1796572248858264975).
        let Ok(mut known) = self.programs.lock() else { return Vec::new() };
        let mut pids = Vec::new();
        for outer in self.processes.iter().filter_map(|(_, c)| c.id()) {
            if let Some(&program) = known.get(&outer) {
                pids.push(program);
                continue;
            }
            if let (program, true) = program_pid(outer) {
                known.insert(outer, program);
                pids.push(program);
            }
        }
        pids
    }

    fn terminate(&mut self) {
        // The program, or the deepest of its sandbox's processes if it has not started yet.
        for (pid, _) in self.processes.iter().filter_map(|(_, c)| c.id()).map(program_pid) {
            signal(pid, Signal::TERM);
        }
    }

    fn exited(&mut self) -> Option<Exit> {
        // The cgroup's memory events: at once when a process ended (was it killed for its
        // memory?), else when they moved (one of several processes killed: v1).
        let any_ended = self.processes.iter_mut().any(|(_, c)| !matches!(c.try_wait(), Ok(None)));
        let look = self.memory_moved() || any_ended;
        if look && !self.out_of_memory && self.cgroup.as_ref().is_some_and(JobCgroup::out_of_memory) {
            // The kernel killed one process of the job for its memory (v1 kills one only):
            // the job is over, every process of it goes.
            self.out_of_memory = true;
            if let Some(cgroup) = &self.cgroup {
                cgroup.kill_all();
            }
        }
        let out_of_memory = self.out_of_memory;
        for i in 0..self.processes.len() {
            let status = match self.processes[i].1.try_wait() {
                Ok(Some(status)) => Some(status),
                Ok(None) => continue,
                Err(_) => None,
            };
            let (part, _) = self.processes.remove(i);
            let exit =
                status.map_or(Exit { part, code: None, signal: None, out_of_memory }, |s| Exit::from_status(part, s));
            return Some(Exit { out_of_memory, ..exit });
        }
        None
    }

    fn output(&mut self) -> Vec<(Part, String)> {
        let mut lines = std::mem::take(&mut self.held);
        while let Ok(line) = self.output.try_recv() {
            lines.push(line);
        }
        lines
    }

    fn stop(mut self: Box<Self>) -> Stopping {
        Box::pin(async move {
            for (_, mut child) in std::mem::take(&mut self.processes) {
                kill_sandbox(&mut child);
                // Reaped here, so the job's ports are free when `stop` returns.
                let _ = child.wait().await;
            }
            self.lifelines.clear();
            self.broker.take();
            self.cgroup.take();
            self.network.take();
            self.lease.take();
            let LocalJob { output, readers, held, .. } = &mut *self;
            // The pipes end with the processes; what they held is the job's last word.
            let mut lines = std::mem::take(held);
            let drained = async {
                loop {
                    tokio::select! {
                        Some(line) = output.recv() => lines.push(line),
                        next = readers.join_next() => if next.is_none() { break },
                    }
                }
                while let Ok(line) = output.try_recv() {
                    lines.push(line);
                }
            };
            let _ = tokio::time::timeout(LAST_OUTPUT, drained).await;
            readers.abort_all();
            lines
        })
    }

    fn changed(&mut self) -> Changed<'_> {
        Box::pin(async move {
            if !self.held.is_empty() || self.memory_moved {
                return;
            }
            let unknown = self.programs.lock().map_or(true, |known| {
                self.processes.iter().filter_map(|(_, c)| c.id()).any(|outer| !known.contains_key(&outer))
            });
            let LocalJob {
                processes,
                output,
                held,
                output_open,
                cgroup,
                memory,
                memory_moved,
                memory_read,
                program_look,
                ..
            } = self;
            // A process ends: its pidfd is readable (tokio reaps it then).
            let ended = async {
                let mut waits: Vec<_> = processes.iter_mut().map(|(_, child)| Box::pin(child.wait())).collect();
                if waits.is_empty() {
                    return std::future::pending().await;
                }
                std::future::poll_fn(|cx| {
                    if waits.iter_mut().any(|wait| wait.as_mut().poll(cx).is_ready()) {
                        std::task::Poll::Ready(())
                    } else {
                        std::task::Poll::Pending
                    }
                })
                .await;
            };
            let line = async {
                if !*output_open {
                    return std::future::pending().await;
                }
                match output.recv().await {
                    Some(line) => held.push(line),
                    None => *output_open = false,
                }
            };
            // `Err(())`: the descriptor fails; the events are read on the timer from then on.
            let events = async {
                match memory {
                    Some(events) => loop {
                        let Ok(mut ready) = events.readable().await else { return Err(()) };
                        match ready.try_io(|events| match events.get_ref().take() {
                            Ok(true) => Ok(()),
                            Ok(false) => Err(std::io::ErrorKind::WouldBlock.into()),
                            Err(e) => Err(e),
                        }) {
                            Ok(Ok(())) => return Ok(()),
                            Ok(Err(_)) => return Err(()),
                            // Nothing pending (`exited` took it): readiness cleared, wait again.
                            Err(_would_block) => {}
                        }
                    },
                    None if cgroup.is_some() => {
                        tokio::time::sleep_until((*memory_read + MEMORY_READ).into()).await;
                        Ok(())
                    }
                    None => std::future::pending().await,
                }
            };
            let program = async {
                if !unknown {
                    return std::future::pending().await;
                }
                tokio::time::sleep(*program_look).await;
                *program_look = (*program_look * 2).min(PROGRAM_LOOK_MAX);
            };
            let failed = tokio::select! {
                () = ended => false,
                () = line => false,
                moved = events => {
                    *memory_moved = true;
                    moved.is_err()
                }
                () = program => false,
            };
            if failed {
                self.memory = None;
            }
        })
    }
}

/// The host pid of the program a sandbox runs, and whether it runs yet: down the chain of
/// only children from the sandbox's outer process (bwrap, its PID-namespace init, the
/// program), so a signal to it reaches the app or agent itself. The walk stops at the first
/// process that is not bwrap, so a program with one child (a shell running a command, the
/// lifeline's watcher) is the one named, not its child. A walk that ends on bwrap (the
/// sandbox has not started its program yet) names the deepest bwrap, not started; the outer
/// pid if the chain cannot be read.
fn program_pid(outer: u32) -> (u32, bool) {
    let mut pid = outer;
    for _ in 0..4 {
        if pid != outer && !is_bwrap(pid) {
            return (pid, true);
        }
        match children(pid)[..] {
            [only] => pid = only,
            _ => break,
        }
    }
    (pid, pid != outer && !is_bwrap(pid))
}

/// Whether `pid` runs bwrap (its name in `/proc/PID/comm`); a process that cannot be read is
/// taken as bwrap, so the walk goes on as it did before names were read.
fn is_bwrap(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).map_or(true, |comm| comm.trim_end() == "bwrap")
}

/// The children of `pid`, from `/proc/PID/task/PID/children`, else by scanning every
/// process's parent in `/proc/*/stat`.
fn children(pid: u32) -> Vec<u32> {
    if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
        return text.split_whitespace().filter_map(|p| p.parse().ok()).collect();
    }
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| parent(*child) == Some(pid))
        .collect()
}

/// Makes `uid` the owner of `path` and everything under it (symbolic links themselves, never
/// what they point to); iterative, so no tree is too deep for it.
fn chown_tree(path: &Path, uid: JobUid) -> std::io::Result<()> {
    let mut pending = vec![path.to_path_buf()];
    while let Some(next) = pending.pop() {
        fs_err::os::unix::fs::lchown(&next, Some(uid.uid), Some(uid.gid))?;
        if fs_err::symlink_metadata(&next)?.is_dir() {
            for entry in fs_err::read_dir(&next)? {
                pending.push(entry?.path());
            }
        }
    }
    Ok(())
}
