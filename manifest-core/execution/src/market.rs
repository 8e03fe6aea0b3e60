//! The compute network, as the scheduler sees it: a [`Market`] of processors that take job
//! orders. The real network cannot run here; [`crate::SimulatedPool`] runs no process (tests,
//! benchmarks) and the local pool (`svc-execution`'s `local` module) runs each job as confined
//! processes. `docs/compute-network.md` maps this trait onto the real network.
//!
//! The contract that makes launches exactly-once across a crash of the service:
//! - [`Market::launch`] is idempotent by [`JobOrder::execution_id`]: launching an id the
//!   market already holds returns that job's placement and starts nothing;
//! - [`Market::stop`] and [`Market::release`] are idempotent, and an unknown id is fine;
//! - [`Market::jobs`] lists every job the market holds, ended ones included until the service
//!   [`release`](Market::release)s them, so a status change the service lost in a crash is
//!   found again.

use std::path::PathBuf;
use std::sync::Arc;

pub use svc_runner::{Exit, Part};

use crate::clock::Millis;
use crate::plan::Requirements;

/// A job order: one attempt of one generation of one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOrder {
    /// The idempotency key, unique forever: `{application uid}/{slot}/{generation}/{attempt}`.
    pub execution_id: String,
    /// When its paid window ends (the market may stop it then).
    pub window_end: Millis,
    /// What a processor must offer.
    pub requirements: Requirements,
    /// Processors not to use (a fresh replacement avoids the one that failed).
    pub avoid: Vec<String>,
    /// What to run.
    pub workload: Workload,
}

/// What a job runs, resolved from its policy version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Workload {
    /// The artifact's digest (`sha256:...`): a processor refuses a bundle that does not match.
    pub artifact_digest: String,
    /// How to start it.
    pub runtime: WorkloadRuntime,
    /// The job's whole environment: the policy's variables and environment secrets.
    pub env: Vec<(String, String)>,
    /// Secret files: absolute path inside the job, contents.
    pub files: Vec<(PathBuf, Vec<u8>)>,
    /// A process that runs beside the program, in its own sandbox (an ingress job's agent).
    pub sidecar: Option<Sidecar>,
    /// Whether the policy grants network access (V4 `requiredModules` names `network`): the
    /// job then gets a way out to public addresses. Every job has a network namespace of its
    /// own; without this, nothing but its own loopback is in it.
    pub outbound: bool,
}

/// A process beside a job's program: its own sandbox, its own private state directory, the
/// same network (it reaches the program on loopback). If it ends, the job ends.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Sidecar {
    /// The program (an absolute host path, or a name on the service's `PATH`) and its
    /// arguments.
    pub argv: Vec<String>,
    /// Its whole environment.
    pub env: Vec<(String, String)>,
    /// Where its state directory appears inside (absolute): it may write there.
    pub state_dir: PathBuf,
    /// Files written into its state directory before it starts (0600): name, contents.
    pub files: Vec<(String, Vec<u8>)>,
    /// A directory of the processor's that holds the state directory across the job's runs
    /// (a restart, a relaunch of the same revision), instead of the run's own scratch: what
    /// it keeps (an ingress agent's key, certificate and ACME account) is not made again at
    /// each run. On the network: the runtime's sealed storage of the job. `None`: the state
    /// goes with the run.
    pub kept_state: Option<PathBuf>,
    /// Where it may connect, through the runner's egress broker: the job's network namespace
    /// has nothing else of the host. `None`: nowhere.
    pub egress: Option<svc_runner::Egress>,
}

/// How a job starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadRuntime {
    /// V5 `runtime.kind: javascript` (V4: an engine and optional command).
    Javascript {
        /// `nodejs`, `deno` or `bun`.
        engine: String,
        /// The entry file, relative to the artifact root.
        entry_file: String,
        /// Arguments after the entry file (V4 `runtime.command` may carry some; V5 none).
        args: Vec<String>,
    },
    /// V5 `runtime.kind: native_image`.
    NativeImage {
        /// The catalog image's digest.
        image_digest: String,
        /// The executable inside the image.
        executable: String,
        /// Its arguments.
        args: Vec<String>,
    },
}

impl Default for WorkloadRuntime {
    fn default() -> WorkloadRuntime {
        WorkloadRuntime::Javascript { engine: "nodejs".into(), entry_file: "index.js".into(), args: Vec::new() }
    }
}

/// A processor's price for a job. A launch is charged its quote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quote {
    /// Service-credit micros.
    pub service_credit_micros: u128,
    /// The processor's reward, planck (V4 `maxRewardPlanckPerJob`).
    pub reward_planck: u128,
    /// The network's fee, planck (V4 `maxNativeFeePlanckPerJob`).
    pub native_fee_planck: u128,
}

impl Quote {
    /// This quote less `other`, each amount at least zero.
    pub fn less(&self, other: &Quote) -> Quote {
        Quote {
            service_credit_micros: self.service_credit_micros.saturating_sub(other.service_credit_micros),
            reward_planck: self.reward_planck.saturating_sub(other.reward_planck),
            native_fee_planck: self.native_fee_planck.saturating_sub(other.native_fee_planck),
        }
    }
}

/// Where a job was placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The processor.
    pub processor_id: String,
    /// What the launch costs.
    pub quote: Quote,
}

/// How a job is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// Stop it now.
    Stop,
    /// Ask it to cease (SIGTERM and a grace period, then stop): V4 `cooperative_cease`.
    Cease,
}

/// What a job is doing, as its processor reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Placed and starting.
    Starting,
    /// Its runtime reported ready.
    Ready,
    /// Its processor stopped reporting at this time.
    Silent(Millis),
    /// It ended: its exit code (`None`: killed or stopped).
    Exited(Option<i32>),
    /// Its processor no longer knows it (lost).
    Lost,
}

/// One job the market holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobStatus {
    /// Its order's execution ID.
    pub execution_id: String,
    /// Where it runs.
    pub processor_id: String,
    /// What it is doing.
    pub state: JobState,
}

/// Why the market would not take an order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// No processor offers what the order needs, or every one is busy.
    #[error("no processor can take the job: {0}")]
    NoProcessor(String),
    /// The artifact is missing or its digest does not match.
    #[error("the artifact cannot be used: {0}")]
    Artifact(String),
    /// The processor failed to start it.
    #[error("the job did not start: {0}")]
    Start(String),
}

impl Refusal {
    /// This refusal, once `detail` went to the service's own log (issue 39, point 6: a
    /// tenant's view names no path of the service's host). What the refusal itself says is
    /// what the tenant reads (the execution's reason in its projection, the deployment's
    /// log): it names the artifact's digest and paths inside the job only. `detail` is the
    /// whole story for the operator: host paths, programs, uids, the OS error.
    #[must_use]
    pub fn on_host(self, detail: impl std::fmt::Display) -> Refusal {
        tracing::warn!("a job was refused ({}): {self}: {detail}", self.code());
        self
    }

    /// A stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::NoProcessor(_) => "no_processor",
            Refusal::Artifact(_) => "artifact_refused",
            Refusal::Start(_) => "launch_failed",
        }
    }
}

/// What a market that wakes ([`Market::wakes`]) has news of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A job's state changed: [`Market::changes`] reports it.
    Changed,
    /// A job printed: [`Market::take_output`] has lines.
    Output,
}

/// Called by a market that wakes, on its own threads, whenever it has news: it must be quick
/// and never call back into the market.
pub type Waker = Arc<dyn Fn(Wake) + Send + Sync>;

/// The compute network.
pub trait Market: Send + Sync {
    /// What a job of `window_ms` meeting `requirements` would cost on the processor the
    /// market would choose now, avoiding `avoid`.
    fn quote(&self, requirements: &Requirements, avoid: &[String], window_ms: Millis) -> Result<Quote, Refusal>;
    /// Places and starts a job; idempotent by execution ID.
    fn launch(&self, order: &JobOrder) -> Result<Placement, Refusal>;
    /// Starts a job again on `processor_id`, where it ran and failed (a same-job restart);
    /// a job of that ID still running there is left alone.
    fn restart(&self, order: &JobOrder, processor_id: &str) -> Result<(), Refusal>;
    /// Stops a job; idempotent.
    fn stop(&self, execution_id: &str, mode: StopMode);
    /// Jobs whose state changed since the last call.
    fn changes(&self) -> Vec<JobStatus>;
    /// Every job held, ended ones included until released.
    fn jobs(&self) -> Vec<JobStatus>;
    /// Forgets an ended job (the service has recorded its end); idempotent.
    fn release(&self, execution_id: &str);
    /// Whether this market's processors start empty with the service (the local pool, whose
    /// jobs are the service's own processes): a job it no longer has at the service's start
    /// was lost with the service, not by a failure of its own.
    fn starts_empty(&self) -> bool {
        false
    }
    /// The lines a job printed since the last call, each with the part that printed it (the
    /// program, or its sidecar), oldest first. A market that keeps no output has none.
    fn take_output(&self, execution_id: &str) -> Vec<(Part, String)> {
        let _ = execution_id;
        Vec::new()
    }
    /// As [`Market::take_output`], with how many lines the job printed since the last call
    /// that the market no longer held (a market keeps a job's last lines only: a burst between
    /// two calls pushes the oldest out). The default loses none.
    fn take_output_counted(&self, execution_id: &str) -> (Vec<(Part, String)>, u64) {
        (self.take_output(execution_id), 0)
    }
    /// How an ended job ended, in the words a person reads (which part, its status or
    /// signal), where the market knows more than [`JobState::Exited`] says.
    fn ending(&self, execution_id: &str) -> Option<Exit> {
        let _ = execution_id;
        None
    }
    /// The host's process IDs of a running job (the program, then its sidecar), where the
    /// market's processors are this host; none elsewhere.
    fn processes(&self, execution_id: &str) -> Vec<u32> {
        let _ = execution_id;
        Vec::new()
    }
    /// Whether this market calls its waker ([`Market::set_waker`]) for every change
    /// [`Market::changes`] will report and for every job's output, so that its scheduler may
    /// sleep until something is due instead of polling (issue 44). The default: it does not,
    /// and is polled.
    fn wakes(&self) -> bool {
        false
    }
    /// Installs the waker, replacing any earlier one. The default ignores it.
    fn set_waker(&self, waker: Waker) {
        let _ = waker;
    }
}

/// A market with no processor: every launch is refused, with the reason it has none (the
/// local pool could not start, or the service was started with `--processors 0`).
#[derive(Debug, Clone)]
pub struct Unavailable(pub String);

impl Market for Unavailable {
    fn quote(&self, _: &Requirements, _: &[String], _: Millis) -> Result<Quote, Refusal> {
        Err(Refusal::NoProcessor(self.0.clone()))
    }
    fn launch(&self, _: &JobOrder) -> Result<Placement, Refusal> {
        Err(Refusal::NoProcessor(self.0.clone()))
    }
    fn restart(&self, _: &JobOrder, _: &str) -> Result<(), Refusal> {
        Err(Refusal::NoProcessor(self.0.clone()))
    }
    fn stop(&self, _: &str, _: StopMode) {}
    fn changes(&self) -> Vec<JobStatus> {
        Vec::new()
    }
    fn jobs(&self) -> Vec<JobStatus> {
        Vec::new()
    }
    fn release(&self, _: &str) {}
}
