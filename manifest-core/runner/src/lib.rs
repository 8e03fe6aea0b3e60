//! Where jobs run. The compute network cannot run on this machine, so it sits behind
//! [`JobRunner`]; [`LocalRunner`] really runs the job as local processes (the relay's app and
//! the agent beside it, or the publication service's one process), each confined as untrusted
//! code ([`sandbox`]): its own mounts, PIDs and environment, resource limits, and its own uid
//! when the service runs as root.
//!
//! The relay (`relay_api::runner`, which adds how an ingress job is laid out) and the
//! publication service's local pool (`svc_execution::local`) run their jobs through it.

mod cgroup;
pub mod egress;
mod local;
pub mod netns;
mod output;
mod process;
pub mod sandbox;
mod sweep;
mod uids;

use std::ffi::OsString;
use std::path::PathBuf;
use std::pin::Pin;

pub use cgroup::{CgroupError, Cgroups, JobCgroup, JobResources, LayoutError, MemoryEvents, Unbounded};
pub use egress::{Destinations, Egress, EgressPolicy};
pub use local::{DEFAULT_UID_BASE, LocalRunner};
pub use netns::{JobNetwork, NetworkError, NetworkTools};
pub use output::{LINE_COST, OUTPUT_BURST, OUTPUT_BYTES_PER_SEC};
pub use sandbox::{Limits, Placement, Sandbox, SandboxError, which};
pub use sweep::sweep_orphans;
pub use uids::HOST_RESERVATIONS;

/// A host path shown inside a job's sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Where it is on the host (absolute).
    pub host: PathBuf,
    /// Where the job sees it (absolute).
    pub inside: PathBuf,
    /// Whether the job may write to it (the runner then makes the job's uid its owner).
    pub writable: bool,
    /// Whether its files are the job's own: when jobs get their own uid, the runner makes that
    /// uid their owner, so they may be private to the service (0600/0700) on the host. Files
    /// several jobs share (an artifact from a store) are not: they stay as they are and must
    /// be readable by any uid. A writable mount is always the job's own.
    pub job_owned: bool,
}

/// One process of a job, as the job sees the world.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confined {
    /// The program (a host path, a name on the runner's `PATH`, or an absolute path inside one
    /// of [`Confined::mounts`], run by that path) and its arguments.
    pub argv: Vec<OsString>,
    /// Its whole environment: nothing of the runner's is added.
    pub env: Vec<(String, String)>,
    /// What it sees of the host besides the system's read-only files.
    pub mounts: Vec<Mount>,
    /// Its working directory (inside).
    pub cwd: PathBuf,
}

/// A job to launch: the app, and the agent beside it if it has one.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// The job's name (the deployment ID, the execution ID): it appears in the runner's
    /// messages.
    pub id: String,
    /// The customer's app.
    pub app: Confined,
    /// The agent beside it (an ingress job's); `None`: the app is the job's only process.
    pub agent: Option<Confined>,
    /// Whether the runner collects each process's output (stdout and stderr, line by line,
    /// through pipes: [`RunningJob::output`]); otherwise the processes write to the runner's
    /// own output.
    pub capture_output: bool,
    /// The job's network. Every job gets a namespace of its own; this says whether it also
    /// gets a way out to public addresses (its policy grants network access).
    pub network: Network,
    /// Where the agent may connect through the egress broker ([`egress`]): the runner shows
    /// the broker's socket to the agent at [`egress::EGRESS_INSIDE`] and names it in
    /// [`egress::EGRESS_ENV`]. `None`: no broker (a job without an agent).
    pub egress: Option<Egress>,
    /// What the job may use, every process of it together (its cgroup); `None`: the runner's
    /// defaults ([`LocalRunner::with_cgroups`]).
    pub resources: Option<JobResources>,
}

impl JobSpec {
    /// Job `id` of `app` alone: its output collected, a network of its own with no way out, no
    /// broker, the runner's default resources.
    pub fn new(id: impl Into<String>, app: Confined) -> JobSpec {
        JobSpec {
            id: id.into(),
            app,
            agent: None,
            capture_output: true,
            network: Network::default(),
            egress: None,
            resources: None,
        }
    }
}

/// A job's network: always a namespace of its own, its loopback shared by its app and agent
/// only ([`netns`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Network {
    /// With a way out to public addresses (slirp4netns; private ranges and the host's own
    /// addresses prohibited): the job's policy grants network access.
    pub outbound: bool,
}

/// Which process of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The customer's app.
    App,
    /// The agent.
    Agent,
}

impl Part {
    /// `app` or `agent`.
    pub fn as_str(self) -> &'static str {
        match self {
            Part::App => "app",
            Part::Agent => "agent",
        }
    }
}

/// The longest line of output kept whole; longer ones are cut into pieces of this size.
pub const MAX_LINE: usize = 16 * 1024;

/// A process of a job that ended on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Which one.
    pub part: Part,
    /// Its exit code, if it exited.
    pub code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// The job was over its memory: the kernel killed a process of it, and the runner the
    /// rest (its cgroup's `oom_kill`).
    pub out_of_memory: bool,
}

impl Exit {
    /// From a sandbox's status: bwrap passes its program's exit code on, and reports a
    /// program killed by signal N as code 128 + N.
    pub fn from_status(part: Part, status: std::process::ExitStatus) -> Exit {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) if code > 128 && code < 128 + 65 => {
                Exit { part, code: None, signal: Some(code - 128), out_of_memory: false }
            }
            (code, signal) => Exit { part, code, signal, out_of_memory: false },
        }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (_, Some(signal)) => write!(f, "the {} was killed by signal {signal}", self.part.as_str())?,
            (Some(code), None) => write!(f, "the {} exited with status {code}", self.part.as_str())?,
            (None, None) => write!(f, "the {} ended", self.part.as_str())?,
        }
        if self.out_of_memory {
            f.write_str(": the job was over its memory (out_of_memory)")?;
        }
        Ok(())
    }
}

/// Why a job could not be launched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A process would not start.
    #[error("cannot start the {part} of job {job}: {source}", part = part.as_str())]
    Spawn {
        /// The job.
        job: String,
        /// Which process.
        part: Part,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Its files could not be prepared.
    #[error("cannot prepare {path} for job {job}: {source}")]
    Prepare {
        /// The job.
        job: String,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The sandbox refused the command.
    #[error("cannot confine job {job}: {source}")]
    Sandbox {
        /// The job.
        job: String,
        /// Why.
        #[source]
        source: SandboxError,
    },
    /// Its cgroup could not be made.
    #[error("cannot make the cgroup of job {job}: {source}")]
    Cgroup {
        /// The job.
        job: String,
        /// Why.
        #[source]
        source: CgroupError,
    },
    /// Every job uid is taken.
    #[error("no free job uid for job {job}: {running} jobs run already")]
    NoUid {
        /// The job.
        job: String,
        /// How many run.
        running: usize,
    },
}

/// The uid and gid a job's processes run as (when the service runs as root).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobUid {
    /// The uid.
    pub uid: u32,
    /// The gid.
    pub gid: u32,
}

/// A job being stopped: resolves to the output not yet taken.
pub type Stopping = Pin<Box<dyn std::future::Future<Output = Vec<(Part, String)>> + Send>>;

/// Launches jobs.
pub trait JobRunner: Send + Sync {
    /// Starts the job's processes.
    fn launch(&self, job: &JobSpec) -> Result<Box<dyn RunningJob>, LaunchError>;
}

/// A launched job.
pub trait RunningJob: Send {
    /// Process IDs (app, agent) as the host sees them: the programs themselves, inside their
    /// sandboxes.
    fn pids(&self) -> Vec<u32>;
    /// Asks every process of the job still running to end (SIGTERM to the programs), without
    /// waiting; [`RunningJob::exited`] tells when they have. The default does nothing: such a
    /// job ends only by [`RunningJob::stop`].
    fn terminate(&mut self) {}
    /// A process of the job that has ended since the last call, if any (it is reaped: no
    /// zombie is left behind).
    fn exited(&mut self) -> Option<Exit>;
    /// Complete lines the job printed since the last call, in order per process (with
    /// `capture_output`). A job that prints faster than this is called waits: its output is
    /// bounded in memory.
    fn output(&mut self) -> Vec<(Part, String)>;
    /// Stops every process of the job, waits for them, and returns the output not yet taken
    /// (its last lines: why it ended, often).
    fn stop(self: Box<Self>) -> Stopping;
    /// Resolves once [`RunningJob::exited`] or [`RunningJob::output`] may tell something new:
    /// a process of the job ended, a line of output waits, the job's memory events moved (or
    /// a sandbox's program is still being looked for). So a caller follows a quiet job without
    /// looking at it on a timer (issue 44: an idle job costs nothing). It may resolve with
    /// nothing new; dropping it loses nothing. The default cannot tell, and resolves after
    /// 50 ms: the caller then looks as it used to.
    fn changed(&mut self) -> Changed<'_> {
        Box::pin(tokio::time::sleep(std::time::Duration::from_millis(50)))
    }
}

/// What [`RunningJob::changed`] returns.
pub type Changed<'a> = Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>>;

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    use super::*;

    #[test]
    fn exits_read_the_sandbox_status() {
        let exited = Exit::from_status(Part::App, ExitStatus::from_raw(3 << 8));
        assert_eq!(exited.to_string(), "the app exited with status 3");
        // bwrap reports a program killed by SIGKILL as 128 + 9.
        let killed_inside = Exit::from_status(Part::Agent, ExitStatus::from_raw(137 << 8));
        assert_eq!(killed_inside.to_string(), "the agent was killed by signal 9");
        // The sandbox itself killed.
        let killed = Exit::from_status(Part::App, ExitStatus::from_raw(15));
        assert_eq!(killed.to_string(), "the app was killed by signal 15");
        let over = Exit { out_of_memory: true, ..Exit::from_status(Part::App, ExitStatus::from_raw(137 << 8)) };
        assert_eq!(over.to_string(), "the app was killed by signal 9: the job was over its memory (out_of_memory)");
    }
}
