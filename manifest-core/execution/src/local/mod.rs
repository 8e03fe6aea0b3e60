//! The local pool: a [`Market`] of processors on this machine (`local-1` to `local-N`, each
//! taking a few jobs at once), where each job is ONE process confined by `svc-runner`'s
//! sandbox, exactly as the relay confines its jobs: its own mounts, PIDs and environment,
//! resource limits, its own uid when the service runs as root.
//!
//! What a job sees ([`workload`]): its artifact from the [`ArtifactStore`], checked against
//! its digest at every launch, read-only at `/app`; a native image (also a stored artifact)
//! read-only at `/image`; its secret files (0600, in its own scratch directory) read-only at
//! their paths; exactly the workload's environment. A javascript job runs
//! `node /app/<entry file>` (or `deno`, `bun` where installed); a native image
//! `/image/<executable> args...`.
//!
//! Each job is followed by a task on the pool's own small runtime ([`watch`]): the [`Market`]
//! trait is synchronous and is called from plain threads, never inside a tokio runtime, so the
//! pool must be made, called and dropped outside one. A job is `Starting` at launch, `Ready`
//! once its process has stayed up [`LocalPoolConfig::ready_after`], and `Exited` once its
//! process is gone: with its exit code if it ended on its own, `None` if it was killed, ceased
//! or stopped. An ended job holds no place on its processor, and stays listed until released.
//! The pool does not stop a job at its window's end: the scheduler does.

mod watch;
mod workload;

use std::collections::{BTreeMap, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use svc_runner::{
    CgroupError, Cgroups, DEFAULT_UID_BASE, JobResources, JobRunner, JobSpec, LaunchError, Limits, LocalRunner,
    SandboxError,
};
use tokio::sync::mpsc;

pub use workload::{APP_INSIDE, IMAGE_INSIDE};

use self::watch::{Run, Timing};
use crate::artifacts::ArtifactStore;
use crate::clock::{Clock, Millis, SystemClock};
use crate::market::{
    Exit, JobOrder, JobState, JobStatus, Market, Part, Placement, Quote, Refusal, StopMode, Wake, Waker,
};
use crate::plan::Requirements;

/// The lines of output kept per job: its last ones.
pub const OUTPUT_LINES: usize = 200;

/// The bytes of output kept per job, its [`OUTPUT_LINES`] together (issue 39, point 4): beyond
/// it the oldest lines go, as they do beyond [`OUTPUT_LINES`], since a job's last lines say
/// why it ended. A job's whole burst and a second of its rate
/// ([`svc_runner::OUTPUT_BURST`], [`svc_runner::OUTPUT_BYTES_PER_SEC`]), so what it may print
/// between two reads of the relay's engine is kept whole.
pub const OUTPUT_BYTES: usize = (svc_runner::OUTPUT_BURST + svc_runner::OUTPUT_BYTES_PER_SEC) as usize;

/// The first uid of the pool's jobs (when the service runs as root): above the relay's range
/// (which starts at [`DEFAULT_UID_BASE`] and holds 65,536), so a relay and a publication
/// service on one host never give two jobs one uid.
pub const DEFAULT_POOL_UID_BASE: u32 = DEFAULT_UID_BASE + 100_000;

/// How long [`Market::stop`] with [`StopMode::Stop`] waits for the process to be gone.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// How long dropping the pool waits for every job's process to be gone.
const DROP_WAIT: Duration = Duration::from_secs(15);

/// What a local pool offers and how it runs jobs.
pub struct LocalPoolConfig {
    /// How many processors (`local-1` to `local-N`).
    pub processors: usize,
    /// Jobs each processor runs at once.
    pub jobs_per_processor: usize,
    /// Memory each processor offers, bytes (checked against a job's minimum).
    pub memory_bytes: u64,
    /// Storage each processor offers, bytes (checked against a job's minimum).
    pub storage_bytes: u64,
    /// The price of one hour of window; a job's quote is this times its window, rounded up.
    pub price: Quote,
    /// Where each job gets its scratch directory (made 0700 if missing).
    pub work_dir: PathBuf,
    /// Where artifacts and native images come from.
    pub artifacts: ArtifactStore,
    /// Each job's resource limits.
    pub limits: Limits,
    /// What each job may use, every process of it together (its cgroup), where its policy
    /// says nothing (memory: its `minimums.memory` where it has one).
    pub resources: JobResources,
    /// Whether each job runs in a cgroup of its own: the pool does not start where jobs
    /// cannot have one. `false` is an explicit choice (`--without-job-cgroups`), logged as a
    /// warning.
    pub cgroups: bool,
    /// The first job uid when the service runs as root.
    pub uid_base: u32,
    /// How long a job's process must stay up to be `Ready`.
    pub ready_after: Duration,
    /// How long a job asked to cease has between SIGTERM and its kill.
    pub cease_grace: Duration,
    /// The time a launch's quote counts its remaining window from.
    pub clock: Arc<dyn Clock>,
    /// The program of the `nodejs` engine: a path, or a name looked up on `PATH`.
    pub node: OsString,
    /// The runtime the jobs' egress brokers run on; `None`: the pool's own. A coordinator
    /// passes the one its gateway runs on, so that an agent's heartbeat to that gateway is
    /// relayed and answered on one thread, without waking the pool's (issue 44, point 5).
    pub brokers: Option<tokio::runtime::Handle>,
}

impl LocalPoolConfig {
    /// One processor taking four jobs, of 1 GiB memory and 10 GiB storage, free, with the
    /// default limits, ready after 500 ms, a grace of 5 s, on the system clock, running `node`
    /// from `PATH`.
    pub fn new(work_dir: impl Into<PathBuf>, artifacts: ArtifactStore) -> LocalPoolConfig {
        LocalPoolConfig {
            processors: 1,
            jobs_per_processor: 4,
            memory_bytes: 1 << 30,
            storage_bytes: 10 << 30,
            price: Quote::default(),
            work_dir: work_dir.into(),
            artifacts,
            limits: Limits::default(),
            resources: JobResources::DEFAULT,
            cgroups: true,
            uid_base: DEFAULT_POOL_UID_BASE,
            ready_after: Duration::from_millis(500),
            cease_grace: Duration::from_secs(5),
            clock: Arc::new(SystemClock),
            node: "node".into(),
            brokers: None,
        }
    }
}

/// Why a local pool cannot start.
#[derive(Debug, thiserror::Error)]
pub enum LocalPoolError {
    /// No job could ever run.
    #[error(
        "a local pool needs at least one processor and one job place on each (given {processors} processors of {jobs_per_processor} jobs)"
    )]
    NoPlaces {
        /// Processors asked for.
        processors: usize,
        /// Places on each.
        jobs_per_processor: usize,
    },
    /// Its work directory cannot be made (the error names it).
    #[error(transparent)]
    WorkDir(std::io::Error),
    /// Its runtime would not start.
    #[error("cannot start the local pool's runtime: {source}")]
    Runtime {
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Jobs cannot have cgroups here (the message says what to enable).
    #[error(transparent)]
    Cgroups(CgroupError),
    /// Jobs cannot be confined here.
    #[error("the local pool cannot confine jobs: {source}")]
    Sandbox {
        /// Why.
        #[source]
        source: SandboxError,
    },
}

/// The local pool.
pub struct LocalPool {
    shared: Arc<Shared>,
    processors: usize,
    jobs_per_processor: usize,
    memory_bytes: u64,
    storage_bytes: u64,
    price: Quote,
    work_dir: PathBuf,
    artifacts: ArtifactStore,
    timing: Timing,
    clock: Arc<dyn Clock>,
    node: OsString,
    /// What a job may use where its policy says nothing.
    resources: JobResources,
    runner: LocalRunner,
    /// One launch or restart at a time: an execution ID is never started twice.
    launching: Mutex<()>,
    next_run: AtomicU64,
    /// Runs every job's watcher; `None` once dropped.
    runtime: Option<tokio::runtime::Runtime>,
    /// Sandboxes a killed service left behind, killed at start.
    orphans_swept: usize,
}

/// The jobs, shared with their watchers.
struct Shared {
    jobs: Mutex<BTreeMap<String, Job>>,
    /// Signalled whenever a job ends.
    ended: Condvar,
    /// Told of every change [`Market::changes`] will report and of output ([`Market::wakes`]).
    waker: Mutex<Option<Waker>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Job>> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells the waker, if one is installed (never with the jobs' lock held: it may be
    /// anyone's code).
    fn wake(&self, what: Wake) {
        let waker = self.waker.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if let Some(waker) = waker {
            waker(what);
        }
    }

    /// Changes run `run` of job `id`, if it is still the one held.
    fn update(&self, id: &str, run: u64, change: impl FnOnce(&mut Job)) {
        if let Some(job) = self.lock().get_mut(id).filter(|job| job.run == run) {
            change(job);
        }
    }
}

struct Job {
    processor: usize,
    quote: Quote,
    state: JobState,
    /// The state [`Market::changes`] last reported (or the launch made known).
    reported: Option<JobState>,
    /// Its last lines of output (of every run), by the part that printed them.
    output: VecDeque<(Part, String)>,
    /// Lines ever kept, and how many of them [`Market::take_output`] has handed out.
    printed: u64,
    taken: u64,
    /// The host's process IDs of its current run (program, sidecar).
    pids: Vec<u32>,
    /// How its last run ended, once it has.
    ending: Option<Exit>,
    run: u64,
    /// Tells its watcher to cease or stop; `None` once it ended.
    control: Option<mpsc::UnboundedSender<StopMode>>,
}

impl Job {
    fn keep_output(&mut self, lines: Vec<(Part, String)>) {
        self.printed += lines.len() as u64;
        keep_last(&mut self.output, lines);
    }

    /// The lines kept that were not handed out yet (lines that scrolled out of the last
    /// [`OUTPUT_LINES`] before anyone asked are gone).
    fn take_output(&mut self) -> Vec<(Part, String)> {
        self.take_output_counted().0
    }

    /// As [`Job::take_output`], with how many lines printed since the last call had scrolled
    /// out before it.
    fn take_output_counted(&mut self) -> (Vec<(Part, String)>, u64) {
        let unread = self.printed - self.taken;
        let new = usize::try_from(unread).unwrap_or(usize::MAX).min(self.output.len());
        self.taken = self.printed;
        let lines: Vec<_> = self.output.iter().skip(self.output.len() - new).cloned().collect();
        (lines, unread - new as u64)
    }
}

/// Adds `lines` to `output`, keeping its last [`OUTPUT_LINES`] of at most [`OUTPUT_BYTES`].
fn keep_last(output: &mut VecDeque<(Part, String)>, lines: Vec<(Part, String)>) {
    output.extend(lines);
    let mut bytes: usize = output.iter().map(|(_, line)| line.len()).sum();
    while output.len() > OUTPUT_LINES || bytes > OUTPUT_BYTES {
        let Some((_, oldest)) = output.pop_front() else { break };
        bytes -= oldest.len();
    }
}

/// Whether a job still runs (holds a place on its processor).
fn running(state: JobState) -> bool {
    !matches!(state, JobState::Exited(_) | JobState::Lost)
}

/// Processor `index`'s ID.
fn processor_id(index: usize) -> String {
    format!("local-{}", index + 1)
}

impl LocalPool {
    /// A pool as `config` says, its sandbox checked now. Not inside a tokio runtime (the pool
    /// runs its own).
    pub fn new(config: LocalPoolConfig) -> Result<LocalPool, LocalPoolError> {
        if config.processors == 0 || config.jobs_per_processor == 0 {
            return Err(LocalPoolError::NoPlaces {
                processors: config.processors,
                jobs_per_processor: config.jobs_per_processor,
            });
        }
        fs_err::create_dir_all(&config.work_dir).map_err(LocalPoolError::WorkDir)?;
        {
            use std::os::unix::fs::PermissionsExt;
            fs_err::set_permissions(&config.work_dir, std::fs::Permissions::from_mode(0o700))
                .map_err(LocalPoolError::WorkDir)?;
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("svc-local-pool")
            .enable_all()
            .build()
            .map_err(|source| LocalPoolError::Runtime { source })?;
        let runner = runtime
            .block_on(LocalRunner::new(config.limits, config.uid_base))
            .map_err(|source| LocalPoolError::Sandbox { source })?;
        let runner = if config.cgroups {
            let cgroups = Cgroups::detect().map_err(LocalPoolError::Cgroups)?;
            let r = config.resources;
            tracing::info!(
                "each job runs in a cgroup of its own ({}): {} MiB, {} processes, {} millicores unless its policy says otherwise",
                cgroups.version(),
                r.memory_bytes >> 20,
                r.processes,
                r.cpu_millicores
            );
            runner.with_cgroups(cgroups, r)
        } else {
            tracing::warn!(
                "jobs run without a cgroup each (--without-job-cgroups): memory is bounded per process only, the number of processes per uid, CPU not at all; not for a host shared by tenants"
            );
            runner
        };
        let runner = match config.brokers {
            Some(brokers) => runner.with_brokers_on(brokers),
            None => runner,
        };
        // Sandboxes of this pool's directories that a killed service left behind.
        let orphans_swept = svc_runner::sweep_orphans(&[&config.work_dir, config.artifacts.dir()]);
        Ok(LocalPool {
            shared: Arc::new(Shared { jobs: Mutex::default(), ended: Condvar::new(), waker: Mutex::new(None) }),
            processors: config.processors,
            jobs_per_processor: config.jobs_per_processor,
            memory_bytes: config.memory_bytes,
            storage_bytes: config.storage_bytes,
            price: config.price,
            work_dir: config.work_dir,
            artifacts: config.artifacts,
            timing: Timing { ready_after: config.ready_after, grace: config.cease_grace },
            clock: config.clock,
            node: config.node,
            resources: config.resources,
            runner,
            launching: Mutex::new(()),
            next_run: AtomicU64::new(0),
            runtime: Some(runtime),
            orphans_swept,
        })
    }

    /// How many sandboxes a killed service had left behind that this pool killed at start.
    pub fn orphans_swept(&self) -> usize {
        self.orphans_swept
    }

    /// The last [`OUTPUT_LINES`] lines a job printed (standard output and error, at most
    /// [`OUTPUT_BYTES`] together), oldest first; none for a job the pool does not hold.
    pub fn output(&self, execution_id: &str) -> Vec<String> {
        let jobs = self.shared.lock();
        jobs.get(execution_id).map(|job| job.output.iter().map(|(_, line)| line.clone()).collect()).unwrap_or_default()
    }

    /// The pool's processors: `local-1` to `local-N`.
    pub fn processor_ids(&self) -> Vec<String> {
        (0..self.processors).map(processor_id).collect()
    }

    /// What `window_ms` of window costs: the hourly price times the window, rounded up.
    fn price_of(&self, window_ms: Millis) -> Quote {
        let scale = |per_hour: u128| per_hour.saturating_mul(u128::from(window_ms)).div_ceil(3_600_000);
        Quote {
            service_credit_micros: scale(self.price.service_credit_micros),
            reward_planck: scale(self.price.reward_planck),
            native_fee_planck: scale(self.price.native_fee_planck),
        }
    }

    /// Jobs running on processor `index`.
    fn load(jobs: &BTreeMap<String, Job>, index: usize) -> usize {
        jobs.values().filter(|job| job.processor == index && running(job.state)).count()
    }

    /// The least loaded processor that may take a job of `requirements` avoiding `avoid`, or
    /// why there is none.
    fn choose(
        &self,
        jobs: &BTreeMap<String, Job>,
        requirements: &Requirements,
        avoid: &[String],
    ) -> Result<usize, Refusal> {
        let no = |why: String| Err(Refusal::NoProcessor(why));
        let mut candidates: Vec<usize> = (0..self.processors).collect();
        if let Some(ids) = &requirements.processor_ids {
            candidates.retain(|&i| ids.contains(&processor_id(i)));
            if candidates.is_empty() {
                return no(format!(
                    "the job may run only on {}, and this pool's processors are local-1 to local-{}",
                    if ids.is_empty() { "no processor".to_owned() } else { ids.join(", ") },
                    self.processors
                ));
            }
        }
        candidates.retain(|&i| !avoid.contains(&processor_id(i)));
        if candidates.is_empty() {
            return no(format!("every processor the job may use is to be avoided ({})", avoid.join(", ")));
        }
        if let Some(memory) = requirements.memory_bytes.filter(|&m| m > self.memory_bytes) {
            return no(format!("the job needs {memory} bytes of memory; each processor offers {}", self.memory_bytes));
        }
        if let Some(storage) = requirements.storage_bytes.filter(|&s| s > self.storage_bytes) {
            return no(format!(
                "the job needs {storage} bytes of storage; each processor offers {}",
                self.storage_bytes
            ));
        }
        let loads: Vec<(usize, usize)> = candidates.iter().map(|&i| (Self::load(jobs, i), i)).collect();
        match loads.iter().filter(|(load, _)| *load < self.jobs_per_processor).min() {
            Some(&(_, index)) => Ok(index),
            None => no(format!(
                "every processor the job may use is busy ({})",
                loads
                    .iter()
                    .map(|(load, i)| format!("{} runs {load} of {} jobs", processor_id(*i), self.jobs_per_processor))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// Starts `order`'s process on processor `index` and holds it (replacing an ended run);
    /// `reported` is what [`Market::changes`] takes as known already.
    fn start(&self, order: &JobOrder, index: usize, quote: Quote, reported: Option<JobState>) -> Result<(), Refusal> {
        // The log's lines of a refused launch name the job.
        let _job = tracing::warn_span!("job", execution_id = %order.execution_id).entered();
        let runtime = self.runtime.as_ref().ok_or_else(|| Refusal::Start("the local pool is shutting down".into()))?;
        let prefix: String = order
            .execution_id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
            .take(48)
            .chain(['.'])
            .collect();
        // 0700 (made so: tempfile leaves a directory to the umask), removed if the job does
        // not start.
        let scratch = tempfile::Builder::new()
            .prefix(&prefix)
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .tempdir_in(&self.work_dir)
            .map_err(|e| {
                Refusal::Start("cannot make the job's scratch directory on its processor".to_owned())
                    .on_host(format_args!("in {}: {e}", self.work_dir.display()))
            })?;
        let app = workload::confine(&order.workload, &self.artifacts, &self.node, scratch.path())?;
        let agent =
            order.workload.sidecar.as_ref().map(|s| workload::confine_sidecar(s, scratch.path())).transpose()?;
        let network = svc_runner::Network { outbound: order.workload.outbound };
        let egress = order.workload.sidecar.as_ref().and_then(|s| s.egress.clone());
        let resources = Some(job_resources(self.resources, &order.requirements));
        let spec = JobSpec { agent, network, egress, resources, ..JobSpec::new(order.execution_id.clone(), app) };
        // Started on the pool's own worker thread, never the caller's: a sandbox dies with the
        // thread that started it (bwrap's --die-with-parent is a parent-death signal, and the
        // exit of the forking thread counts as its parent's death), and a caller may be a
        // short-lived thread (the service recovers on a tokio blocking thread, retired after
        // 10 s idle: a job relaunched at recovery was killed 10 s later). The worker lives as
        // long as the pool.
        let job = {
            let (sent, launched) = std::sync::mpsc::sync_channel(1);
            let runner = self.runner.clone();
            runtime.spawn(async move {
                let _ = sent.send(runner.launch(&spec));
            });
            launched
                .recv()
                .map_err(|_| Refusal::Start("the local pool's launch task ended without an answer".into()))?
                .map_err(|e| launch_refusal(&e))?
        };
        let run = self.next_run.fetch_add(1, Ordering::Relaxed);
        let (control, commands) = mpsc::unbounded_channel();
        {
            let mut jobs = self.shared.lock();
            let (output, printed, taken) =
                jobs.remove(&order.execution_id).map(|old| (old.output, old.printed, old.taken)).unwrap_or_default();
            let job = Job {
                processor: index,
                quote,
                state: JobState::Starting,
                reported,
                output,
                printed,
                taken,
                pids: job.pids(),
                ending: None,
                run,
                control: Some(control),
            };
            jobs.insert(order.execution_id.clone(), job);
        }
        if reported != Some(JobState::Starting) {
            // A restart: `Starting` is news to report.
            self.shared.wake(Wake::Changed);
        }
        let run = Run { id: order.execution_id.clone(), run, job, commands, scratch: scratch.keep() };
        runtime.spawn(watch::watch(self.shared.clone(), run, self.timing));
        Ok(())
    }

    /// Waits until no run of a job in `ids` (or of any job, with `None`) is running, or the
    /// deadline.
    fn wait_ended(&self, ids: Option<&[(String, u64)]>, wait: Duration) {
        let deadline = Instant::now() + wait;
        let mut jobs = self.shared.lock();
        loop {
            let still = |id: &String, job: &Job| {
                running(job.state) && ids.is_none_or(|ids| ids.iter().any(|(i, run)| i == id && *run == job.run))
            };
            if !jobs.iter().any(|(id, job)| still(id, job)) {
                return;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            jobs = self.shared.ended.wait_timeout(jobs, left).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

/// What a job of `requirements` may use: its policy's memory (`minimums.memory`, at least
/// [`MIN_JOB_MEMORY`]) where it says, else the pool's `defaults`.
fn job_resources(defaults: JobResources, requirements: &Requirements) -> JobResources {
    let memory_bytes = requirements.memory_bytes.map_or(defaults.memory_bytes, |m| m.max(MIN_JOB_MEMORY));
    JobResources { memory_bytes, ..defaults }
}

/// The least memory a job is given, whatever its policy says: a runtime starts in it.
const MIN_JOB_MEMORY: u64 = 64 << 20;

/// A launch the runner could not make, as the tenant reads it: what failed, never where on
/// the host (the paths it prepared, the programs it ran); the whole error goes to the log.
fn launch_refusal(e: &LaunchError) -> Refusal {
    let told = match e {
        LaunchError::Spawn { part, .. } => format!("the job's {} could not be started", part.as_str()),
        LaunchError::Prepare { .. } => "the job's files could not be prepared on its processor".to_owned(),
        LaunchError::NoUid { .. } => "its processor has no free job uid: it runs as many jobs as it can".to_owned(),
        _ => "the job could not be confined on its processor".to_owned(),
    };
    Refusal::Start(told).on_host(e)
}

impl Market for LocalPool {
    fn quote(&self, requirements: &Requirements, avoid: &[String], window_ms: Millis) -> Result<Quote, Refusal> {
        self.choose(&self.shared.lock(), requirements, avoid)?;
        Ok(self.price_of(window_ms))
    }

    fn launch(&self, order: &JobOrder) -> Result<Placement, Refusal> {
        let _one = self.launching.lock().unwrap_or_else(PoisonError::into_inner);
        let index = {
            let jobs = self.shared.lock();
            if let Some(job) = jobs.get(&order.execution_id) {
                return Ok(Placement { processor_id: processor_id(job.processor), quote: job.quote });
            }
            self.choose(&jobs, &order.requirements, &order.avoid)?
        };
        let quote = self.price_of(order.window_end.saturating_sub(self.clock.now()));
        // The launch itself is known to the caller: not a change to report.
        self.start(order, index, quote, Some(JobState::Starting))?;
        Ok(Placement { processor_id: processor_id(index), quote })
    }

    fn restart(&self, order: &JobOrder, processor: &str) -> Result<(), Refusal> {
        let index = (0..self.processors).find(|&i| processor_id(i) == processor).ok_or_else(|| {
            Refusal::Start(format!(
                "there is no processor {processor} in this pool (local-1 to local-{})",
                self.processors
            ))
        })?;
        let _one = self.launching.lock().unwrap_or_else(PoisonError::into_inner);
        let quote = {
            let jobs = self.shared.lock();
            let quote = match jobs.get(&order.execution_id) {
                Some(job) if running(job.state) => return Ok(()),
                Some(job) => job.quote,
                None => self.price_of(order.window_end.saturating_sub(self.clock.now())),
            };
            let load = Self::load(&jobs, index);
            if load >= self.jobs_per_processor {
                return Err(Refusal::NoProcessor(format!(
                    "{processor} is busy: it runs {load} of {} jobs",
                    self.jobs_per_processor
                )));
            }
            quote
        };
        self.start(order, index, quote, None)
    }

    fn stop(&self, execution_id: &str, mode: StopMode) {
        let run = {
            let jobs = self.shared.lock();
            let Some(job) = jobs.get(execution_id) else { return };
            let Some(control) = &job.control else { return };
            // A watcher gone already has recorded the end.
            let _ = control.send(mode);
            job.run
        };
        if mode == StopMode::Stop {
            // Gone when `stop` returns, so it is listed as ended at once.
            self.wait_ended(Some(&[(execution_id.to_owned(), run)]), STOP_WAIT);
        }
    }

    fn changes(&self) -> Vec<JobStatus> {
        let mut jobs = self.shared.lock();
        let mut changed = Vec::new();
        for (id, job) in jobs.iter_mut() {
            if job.reported != Some(job.state) {
                job.reported = Some(job.state);
                let status =
                    JobStatus { execution_id: id.clone(), processor_id: processor_id(job.processor), state: job.state };
                changed.push(status);
            }
        }
        changed
    }

    fn jobs(&self) -> Vec<JobStatus> {
        let jobs = self.shared.lock();
        jobs.iter()
            .map(|(id, job)| JobStatus {
                execution_id: id.clone(),
                processor_id: processor_id(job.processor),
                state: job.state,
            })
            .collect()
    }

    fn release(&self, execution_id: &str) {
        let mut jobs = self.shared.lock();
        if jobs.get(execution_id).is_some_and(|job| !running(job.state)) {
            jobs.remove(execution_id);
        }
    }

    /// Its jobs are the service's processes: none survives the service.
    fn starts_empty(&self) -> bool {
        true
    }

    fn take_output(&self, execution_id: &str) -> Vec<(Part, String)> {
        self.shared.lock().get_mut(execution_id).map(Job::take_output).unwrap_or_default()
    }
    fn take_output_counted(&self, execution_id: &str) -> (Vec<(Part, String)>, u64) {
        self.shared.lock().get_mut(execution_id).map(Job::take_output_counted).unwrap_or_default()
    }

    fn ending(&self, execution_id: &str) -> Option<Exit> {
        self.shared.lock().get(execution_id).and_then(|job| job.ending)
    }

    fn processes(&self, execution_id: &str) -> Vec<u32> {
        let jobs = self.shared.lock();
        jobs.get(execution_id).filter(|job| running(job.state)).map(|job| job.pids.clone()).unwrap_or_default()
    }

    /// Its watchers tell the waker when a job becomes ready, ends or prints, and a restart
    /// does.
    fn wakes(&self) -> bool {
        true
    }

    fn set_waker(&self, waker: Waker) {
        *self.shared.waker.lock().unwrap_or_else(PoisonError::into_inner) = Some(waker);
    }
}

impl Drop for LocalPool {
    /// Stops every job and waits until their processes are gone.
    fn drop(&mut self) {
        for job in self.shared.lock().values() {
            if let Some(control) = &job.control {
                let _ = control.send(StopMode::Stop);
            }
        }
        self.wait_ended(None, DROP_WAIT);
        if let Some(runtime) = self.runtime.take() {
            // Every watcher has ended (or the wait gave up: their processes die as the tasks
            // are dropped).
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job printing long lines keeps its last ones, of at most [`OUTPUT_BYTES`] together;
    /// short ones, its last [`OUTPUT_LINES`].
    #[test]
    fn a_jobs_output_is_kept_to_its_last_lines_and_bytes() {
        let mut output = VecDeque::new();
        for n in 0..100 {
            keep_last(&mut output, vec![(Part::App, format!("{n:04} {}", "x".repeat(16 * 1024 - 5)))]);
            let bytes: usize = output.iter().map(|(_, l)| l.len()).sum();
            assert!(bytes <= OUTPUT_BYTES, "{bytes} bytes after line {n}");
        }
        assert_eq!(output.len(), OUTPUT_BYTES / (16 * 1024), "as many of the last as fit");
        assert!(output.back().is_some_and(|(_, l)| l.starts_with("0099 ")), "the last line is kept");
        keep_last(&mut output, (0..300).map(|n| (Part::Agent, format!("short {n}"))).collect());
        assert_eq!(output.len(), OUTPUT_LINES);
        assert_eq!(output.front().map(|(_, l)| l.as_str()), Some("short 100"));
    }

    /// Issue 42: lines that scrolled out before they were taken are counted, not lost
    /// silently.
    #[test]
    fn lines_that_scrolled_out_before_they_were_taken_are_counted() {
        let mut job = Job {
            processor: 0,
            quote: Quote::default(),
            state: JobState::Ready,
            reported: None,
            output: VecDeque::new(),
            printed: 0,
            taken: 0,
            pids: Vec::new(),
            ending: None,
            run: 0,
            control: None,
        };
        job.keep_output((0..OUTPUT_LINES + 50).map(|n| (Part::App, n.to_string())).collect());
        let (lines, lost) = job.take_output_counted();
        assert_eq!((lines.len(), lost), (OUTPUT_LINES, 50));
        assert_eq!(lines[0].1, "50", "the newest are kept");
        job.keep_output(vec![(Part::Agent, "x".into())]);
        assert_eq!(job.take_output_counted(), (vec![(Part::Agent, "x".to_owned())], 0));
    }

    #[test]
    fn a_policys_memory_overrides_the_default_and_is_never_under_64_mib() {
        let defaults = JobResources { memory_bytes: 512 << 20, processes: 100, cpu_millicores: 500 };
        assert_eq!(job_resources(defaults, &Requirements::default()), defaults);
        let asked = Requirements { memory_bytes: Some(2 << 30), ..Requirements::default() };
        assert_eq!(job_resources(defaults, &asked), JobResources { memory_bytes: 2 << 30, ..defaults });
        let tiny = Requirements { memory_bytes: Some(1 << 20), ..Requirements::default() };
        assert_eq!(job_resources(defaults, &tiny).memory_bytes, 64 << 20);
    }
}
