//! Where jobs run. The compute network cannot run on this machine, so it sits behind
//! [`JobRunner`]; [`LocalRunner`] really runs the job as child processes: the Node app and
//! the agent beside it, as a processor would.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;

use tokio::process::{Child, Command};

/// A job to launch: the app and its agent.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// The job's state directory (the agent keeps its key here).
    pub dir: PathBuf,
    /// The app's program and arguments (`node server.js`).
    pub app: Vec<OsString>,
    /// The app's port, given as `PORT`.
    pub app_port: u16,
    /// The agent's program and arguments (`svc agent run --config ...`).
    pub agent: Vec<OsString>,
    /// The app's environment (besides `PORT`).
    pub env: Vec<(String, String)>,
    /// A directory for `app.log` and `agent.log` (each process's stdout and stderr);
    /// none: the processes inherit the runner's.
    pub logs: Option<PathBuf>,
}

/// Why a job could not be launched.
#[derive(Debug, thiserror::Error)]
#[error("cannot start {what}: {source}")]
pub struct LaunchError {
    what: String,
    source: std::io::Error,
}

/// Launches jobs and stops them.
pub trait JobRunner: Send + Sync {
    /// Starts the job's processes.
    fn launch(&self, job: &JobSpec) -> Result<Box<dyn RunningJob>, LaunchError>;
}

/// A launched job.
pub trait RunningJob: Send {
    /// Process IDs (app, agent), for tests and status.
    fn pids(&self) -> Vec<u32>;
    /// Stops every process of the job and waits for them.
    fn stop(self: Box<Self>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
}

/// Runs jobs as local child processes.
#[derive(Debug, Default)]
pub struct LocalRunner;

struct LocalJob {
    children: Vec<Child>,
}

fn spawn(
    argv: &[OsString],
    job: &JobSpec,
    what: &str,
    log: &str,
    env: &[(String, String)],
) -> Result<Child, LaunchError> {
    let err = |source| LaunchError { what: what.to_owned(), source };
    let (program, args) = argv.split_first().ok_or_else(|| err(std::io::Error::other("empty command")))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(&job.dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("PORT", job.app_port.to_string())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    if let Some(dir) = &job.logs {
        std::fs::create_dir_all(dir).map_err(err)?;
        let file = std::fs::OpenOptions::new().create(true).append(true).open(dir.join(log)).map_err(err)?;
        command.stdout(file.try_clone().map_err(err)?).stderr(file);
    }
    command.spawn().map_err(err)
}

impl JobRunner for LocalRunner {
    fn launch(&self, job: &JobSpec) -> Result<Box<dyn RunningJob>, LaunchError> {
        let app = spawn(&job.app, job, "the app", "app.log", &job.env)?;
        // The agent gets no app environment: the app's secrets are not the agent's business.
        let agent = spawn(&job.agent, job, "the agent", "agent.log", &[])?;
        Ok(Box::new(LocalJob { children: vec![app, agent] }))
    }
}

impl RunningJob for LocalJob {
    fn pids(&self) -> Vec<u32> {
        self.children.iter().filter_map(Child::id).collect()
    }

    fn stop(self: Box<Self>) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
        Box::pin(async move {
            for mut child in self.children {
                // SIGKILL: the demo's processes hold nothing that needs a graceful stop, and
                // the ports must be free at once.
                let _ = child.kill().await;
            }
        })
    }
}
