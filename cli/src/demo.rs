//! `svc ingress demo`: the whole ingress path on one machine, in one command, the way a
//! customer gets it. It starts a relay coordinator (what `svc relay serve` runs: API,
//! console, gateway, engine, jobs confined) in its data directory, invites an organization,
//! issues it a token, and deploys the bundled Node.js project through the relay API as
//! `svc ingress deploy` does: quoted, funded, launched, validated through the gateway. It
//! prints the console's URL, the job's processes, then `ready <url>` once the URL answers: a
//! GET through the demo's gateway, its certificate verified against the data directory's
//! development CA for the route's hostname, answered 200 by the app.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agent::files::{create_private_dir, write_private};
use relay_api::coordinator::api::Status;
use relay_api::coordinator::store::TokenRole;
use relay_api::coordinator::{self, CoordinatorConfig, Started};

use crate::client::{Client, ClientError};
use crate::deploy::{DeployOptions, DeployProgress, Deployed, IngressError};
use crate::failure::Failure;

/// The bundled project, carried inside the binary so the command works anywhere.
const PROJECT_FILES: [(&str, &str); 2] = [
    ("ingress.json", include_str!("../../examples/node-demo/ingress.json")),
    ("server.js", include_str!("../../examples/node-demo/server.js")),
];

/// The organization the demo deploys as (the README's running example).
pub(crate) const ORG: &str = "acme";

/// How long the deploy may take to go live.
const LIVE_TIMEOUT_SECS: u64 = 120;

/// How long the URL may take to answer once the deployment is live.
const SERVE_TIMEOUT: Duration = Duration::from_secs(60);

/// How often the URL is tried until it answers.
const SERVE_RETRY: Duration = Duration::from_millis(200);

/// A development period: the demo's one funded period lasts a day.
const DEMO_PERIOD: Duration = Duration::from_secs(24 * 3600);

/// How the demo runs: `svc ingress demo`'s flags, validated.
#[derive(Debug, Clone)]
pub(crate) struct DemoSettings {
    /// The data directory (the coordinator's; `DIR-jobs` beside it holds the jobs' state).
    pub(crate) data_dir: PathBuf,
    /// The gateway's public TLS address.
    pub(crate) public: SocketAddr,
    /// The relay API and console.
    pub(crate) api: SocketAddr,
    /// The agent's development certificate lifetime.
    pub(crate) certificate_validity: Duration,
    /// Between route validations (and the agent's route refreshes, up to 30 s).
    pub(crate) revalidate: Duration,
    /// How the demo's job is bounded.
    pub(crate) jobs: crate::settings::JobSettings,
}

/// The default data directory: `svc/ingress-demo` in the user's data directory.
pub(crate) fn default_data_dir(user_data: Option<&Path>) -> PathBuf {
    user_data.map_or_else(|| PathBuf::from(".svc-ingress-demo"), |d| d.join("svc").join("ingress-demo"))
}

/// Why the demo stopped: said once, as `svc ingress demo: ...` (exit 2), or as the deploy's
/// own failure (`svc ingress: ...`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum DemoError {
    /// The job flags do not make the jobs' bounds.
    #[error(transparent)]
    Jobs(crate::settings::SettingsError),
    /// The data and job directories cannot be made.
    #[error(transparent)]
    Dirs(coordinator::CoordinatorError),
    /// The bundled project cannot be written.
    #[error(transparent)]
    Project(ProjectError),
    /// The organization or its token cannot be made.
    #[error("inviting organization \"{ORG}\": {0}")]
    Invite(#[source] coordinator::store::StoreError),
    /// The token file cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    TokenFile {
        /// The token file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The running binary cannot be found (the jobs' agent is `svc agent run`).
    #[error("cannot find the svc binary")]
    NoBinary(#[source] std::io::Error),
    /// No runtime for the coordinator.
    #[error("cannot start the runtime")]
    Runtime(#[source] std::io::Error),
    /// The coordinator ended with an error.
    #[error(transparent)]
    Coordinator(coordinator::CoordinatorError),
    /// The coordinator's thread panicked.
    #[error("the relay coordinator panicked")]
    Panicked,
    /// The demo's client cannot be made.
    #[error(transparent)]
    Client(ClientError),
    /// The deploy failed (said as `svc ingress deploy` says it).
    #[error(transparent)]
    Deploy(IngressError),
    /// The deploy came back before the project was live.
    #[error("the deploy returned before the project was live")]
    NotLive,
    /// Stopped (Ctrl-C) before the project answered.
    #[error("stopped before the project answered")]
    Stopped,
    /// The project did not answer through the gateway in time.
    #[error("{url} did not answer through the gateway {gateway} within {} s: {why}", SERVE_TIMEOUT.as_secs())]
    NoAnswer {
        /// The project's URL.
        url: String,
        /// The gateway asked.
        gateway: SocketAddr,
        /// The last try's answer or error.
        why: String,
    },
    /// The project did not go live, and then the coordinator, stopped, ended badly too: both
    /// said, in that order.
    #[error("{first}")]
    Then {
        /// Why the project did not go live.
        #[source]
        first: Box<DemoError>,
        /// The coordinator's ending.
        then: Box<DemoError>,
    },
}

impl Failure for DemoError {
    fn exit_code(&self) -> u8 {
        match self {
            DemoError::Deploy(e) => e.exit_code(),
            DemoError::Then { first, .. } => first.exit_code(),
            _ => 2,
        }
    }

    fn envelope(&self) -> svc_http::ErrorBody {
        match self {
            DemoError::Deploy(e) => e.envelope(),
            DemoError::Then { first, .. } => first.envelope(),
            _ => svc_http::ErrorBody::new("demo_failed", self.to_string()),
        }
    }

    fn text(&self) -> String {
        match self {
            DemoError::Deploy(e) => e.text(),
            DemoError::Then { first, then } => format!("{}{}", first.text(), then.text()),
            _ => crate::failure::line("svc ingress demo", self),
        }
    }
}

fn say(line: &str) {
    crate::output::say(&format!("svc ingress demo: {line}"));
}

/// The deploy's progress as demo lines; the job's processes whenever they change.
struct Progress {
    processes: Vec<u32>,
}

impl DeployProgress for Progress {
    fn say(&mut self, line: &str) {
        say(line);
    }

    fn status(&mut self, status: &Status) {
        if let [app, agent] = status.processes[..]
            && status.processes != self.processes
        {
            say(&format!("job processes: app pid {app}, agent pid {agent}"));
            self.processes.clone_from(&status.processes);
        }
    }
}

/// `svc ingress demo`
pub(crate) fn run(settings: DemoSettings) -> Result<ExitCode, DemoError> {
    let dir = &settings.data_dir;
    coordinator::prepare_dirs(dir).map_err(DemoError::Dirs)?;
    say(&format!("data directory {}", dir.display()));
    let project = write_project(&dir.join("project")).map_err(DemoError::Project)?;
    let token = coordinator::invite(dir, ORG)
        .and_then(|()| coordinator::issue_token(dir, ORG, TokenRole::Customer, None))
        .map_err(DemoError::Invite)?
        .plaintext;
    let token_file = dir.join("token");
    write_private(&token_file, format!("{token}\n").as_bytes())
        .map_err(|source| DemoError::TokenFile { path: token_file.clone(), source })?;

    let exe = std::env::current_exe().map_err(DemoError::NoBinary)?;
    let mut config = CoordinatorConfig::new(
        dir.clone(),
        settings.api,
        settings.public,
        vec![exe.into_os_string(), "agent".into(), "run".into()],
    );
    config.node = std::env::var_os("SVC_NODE").unwrap_or_else(|| "node".into());
    config.dev_certificate_validity = settings.certificate_validity;
    config.revalidate = settings.revalidate;
    config.period = DEMO_PERIOD;
    config.job_limits.memory_bytes = settings.jobs.resources.memory_bytes;
    config.job_limits.processes = settings.jobs.resources.processes;
    config.job_resources = settings.jobs.resources;
    config.job_cgroups = settings.jobs.cgroups;

    // The coordinator runs on a runtime of its own thread; the deploy is the CLI's blocking
    // client on this one, as `svc ingress deploy` in another terminal would be.
    let (started_tx, started_rx) = mpsc::channel::<Started>();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let signal = crate::ingress::shutdown_signal();
    let shutdown = async move {
        tokio::select! {
            () = signal => {}
            _ = stop_rx => {}
        }
    };
    let rt = crate::ingress::runtime().map_err(DemoError::Runtime)?;
    let relay = std::thread::spawn(move || {
        rt.block_on(coordinator::run(
            config,
            move |started| {
                let _ = started_tx.send(started.clone());
            },
            shutdown,
        ))
    });
    let ended = |relay: std::thread::JoinHandle<Result<(), coordinator::CoordinatorError>>| match relay.join() {
        Ok(Ok(())) => Ok(ExitCode::SUCCESS),
        Ok(Err(e)) => Err(DemoError::Coordinator(e)),
        Err(_) => Err(DemoError::Panicked),
    };
    let Ok(started) = started_rx.recv() else { return ended(relay) };

    say(&format!(
        "gateway: public TLS {}, metrics http://{}/metrics; development CA {}",
        started.gateway.public,
        started.gateway.admin,
        dir.join("ca.pem").display()
    ));
    let api = format!("http://{}", started.api);
    say(&format!("console {api}/console/ (sign in with the token {token}, kept in {})", token_file.display()));
    say(&format!(
        "the CLI: export SVC_RELAY={api} SVC_RELAY_TOKEN=$(cat {}); svc ingress status --config {}",
        token_file.display(),
        project.display()
    ));

    let live = Client::new(&api, Some(token), None)
        .map_err(DemoError::Client)
        .and_then(|client| deploy(&client, &project))
        .and_then(|url| {
            let ca = dir.join("ca.pem");
            serving(&url, &ca, loopback(started.gateway.public), || relay.is_finished()).map(|()| url)
        });
    match live {
        Ok(url) => {
            // A closed stdout must not end the demo with its jobs running: `say` ignores it.
            crate::output::say(&format!("ready {url}"));
            // A browser does not know the development CA: how to trust it, next to the URL
            // (issue 42). After this line the demo says only what goes wrong.
            let ca = dir.join("ca.pem");
            say(&format!(
                "for a browser, trust the development CA once: svc ingress trust --data-dir {}; for curl: curl \
                 --cacert {} {url}",
                dir.display(),
                ca.display()
            ));
            ended(relay)
        }
        Err(first) => {
            if !relay.is_finished() {
                say("stopping: the project did not go live");
                let _ = stop_tx.send(());
            }
            // Why the project did not go live, then how the coordinator ended if that went
            // wrong too (after Ctrl-C the exit is 130 whatever this says).
            match ended(relay) {
                Err(then) => Err(DemoError::Then { first: Box::new(first), then: Box::new(then) }),
                Ok(_) => Err(first),
            }
        }
    }
}

/// Deploys the bundled project and waits for it to go live; its URL.
fn deploy(client: &Client, project: &Path) -> Result<String, DemoError> {
    let loaded = crate::deploy::load(project).map_err(DemoError::Deploy)?;
    let options = DeployOptions { no_fund: false, no_wait: false, timeout: LIVE_TIMEOUT_SECS };
    match crate::deploy::deploy_project(client, &loaded, options, &mut Progress { processes: Vec::new() })
        .map_err(DemoError::Deploy)?
    {
        Deployed::Live(status) => Ok(status.deployment.url),
        Deployed::Sent(_) => Err(DemoError::NotLive),
    }
}

/// Where a client of this machine reaches a listener bound to `addr` (0.0.0.0: loopback).
fn loopback(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, addr.port())),
        ip if ip.is_unspecified() => SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, addr.port())),
        _ => addr,
    }
}

/// Waits until `url` answers 200 to a GET through the gateway at `gateway`, its certificate
/// verified against `ca` for the URL's hostname (the SNI): what `ready` promises. A live
/// deployment is not enough: run again on its data directory, the demo finds its deployment
/// live from the last run while the job is still starting, and the gateway has no agent to
/// hand the handshake to (issue 41). Gives up when the coordinator has `stopped` (Ctrl-C).
fn serving(url: &str, ca: &Path, gateway: SocketAddr, stopped: impl Fn() -> bool) -> Result<(), DemoError> {
    let client = Client::new(url, None, Some(ca)).map_err(DemoError::Client)?.connecting_to(gateway);
    let deadline = Instant::now() + SERVE_TIMEOUT;
    let mut waiting = false;
    loop {
        let why = match client.send(hyper::Method::GET, "/", None, &[]) {
            Ok(response) if response.status == 200 => return Ok(()),
            Ok(response) => format!("HTTP {}", response.status),
            Err(e) => e.to_string(),
        };
        if stopped() {
            return Err(DemoError::Stopped);
        }
        if Instant::now() > deadline {
            return Err(DemoError::NoAnswer { url: url.to_owned(), gateway, why });
        }
        if !waiting {
            say(&format!("live; waiting for {url} to answer through the gateway"));
            waiting = true;
        }
        std::thread::sleep(SERVE_RETRY);
    }
}

/// Why the demo's project cannot be written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProjectError {
    /// Its directory cannot be made.
    #[error("cannot create {}: {source}", dir.display())]
    CreateDir {
        /// The project directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// One of its files cannot be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Writes the bundled project into `dir` where a file is missing (an edited `server.js` is
/// kept, so running the demo again ships the change as the deployment's next revision); the
/// project file's path.
fn write_project(dir: &Path) -> Result<PathBuf, ProjectError> {
    create_private_dir(dir).map_err(|source| ProjectError::CreateDir { dir: dir.to_path_buf(), source })?;
    for (name, text) in PROJECT_FILES {
        let path = dir.join(name);
        if !path.exists() {
            write_private(&path, text.as_bytes()).map_err(|source| ProjectError::Write { path, source })?;
        }
    }
    say(&format!("project {} (edit its server.js and run the demo again to ship a change)", dir.display()));
    Ok(dir.join("ingress.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_that_cannot_be_written_names_the_path_and_why() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let file = scratch.path().join("file");
        std::fs::write(&file, b"not a directory").expect("a file");
        let dir = file.join("project");
        let e = write_project(&dir).expect_err("a directory under a file");
        let text = e.to_string();
        assert!(text.starts_with(&format!("cannot create {}: ", dir.display())), "{text}");
        assert!(std::error::Error::source(&e).is_some(), "the io error is its cause: {e:?}");
    }
}
