//! `svc gateway run`, `svc agent run`: the ingress data plane, and what the long-running
//! commands share.

use std::path::Path;
use std::process::ExitCode;

use relay_api::gateway::file::{GatewayFile, GatewayFileError};
use relay_api::gateway::{Gateway, GatewayError};
use relay_gateway_host::follow::{Feed, FollowError};

pub(crate) fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build()
}

/// The agent's runtime: as [`runtime`], and when `collect` is given (the binary's allocator
/// collection) a worker calls it as it parks, at most every 100 ms (`collect.rs`): an agent
/// that goes quiet gives back what its connections freed.
pub(crate) fn agent_runtime(collect: Option<fn()>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(collect) = collect {
        crate::collect::on_park(&mut builder, collect);
    }
    builder.build()
}

/// SIGTERM, or Ctrl-C (then the process exits 130 once what it started has stopped).
pub(crate) fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    crate::output::graceful_shutdown()
}

/// Why `svc gateway run` stopped (exit 2), said once as `svc gateway: ...`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GatewayRunError {
    /// The gateway file cannot be read or is not valid.
    #[error(transparent)]
    File(GatewayFileError),
    /// The coordinator's route feed cannot be opened.
    #[error(transparent)]
    Feed(FollowError),
    /// No runtime.
    #[error("cannot start the runtime")]
    Runtime(#[source] std::io::Error),
    /// The gateway failed, starting or running.
    #[error(transparent)]
    Gateway(GatewayError),
    /// The tunnel certificate file announced to the coordinator holds no certificate.
    #[error("the tunnel certificate file holds no certificate")]
    NoTunnelCertificate,
    /// The gateway's task panicked or was cancelled.
    #[error(transparent)]
    Task(tokio::task::JoinError),
}

crate::failure::one_line_failure!(GatewayRunError, exit 2, "gateway_failed", "svc gateway");

/// Why `svc agent run` stopped (exit 2), said once as `svc agent: ...`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AgentRunError {
    /// The agent's configuration cannot be read or is not valid.
    #[error(transparent)]
    Config(agent::config::ConfigError),
    /// No runtime.
    #[error("cannot start the runtime")]
    Runtime(#[source] std::io::Error),
    /// The agent failed.
    #[error(transparent)]
    Run(agent::AgentError),
    /// The agent's task panicked.
    #[error(transparent)]
    Task(tokio::task::JoinError),
}

crate::failure::one_line_failure!(AgentRunError, exit 2, "agent_failed", "svc agent");

/// `svc gateway run --config FILE`: the routes are the file's (read again on SIGHUP), or
/// its coordinator's route feed's.
pub(crate) fn gateway(config_path: &Path) -> Result<ExitCode, GatewayRunError> {
    let file = GatewayFile::read(config_path).map_err(GatewayRunError::File)?;
    let config = file.config().map_err(GatewayRunError::File)?;
    let feed = file.coordinator.as_ref().map(Feed::open).transpose().map_err(GatewayRunError::Feed)?;
    let rt = runtime().map_err(GatewayRunError::Runtime)?;
    let tunnel_cert_pem = config.tunnel_cert_pem.clone();
    let gateway = Gateway::new(config);
    gateway.set_routes(file.routes.clone());
    let path = config_path.to_owned();
    let result = rt.block_on(async move {
        let (run, bound) = gateway.clone().start().await.map_err(GatewayRunError::Gateway)?;
        // The addresses on standard output, as `svc relay serve` prints its own: standard
        // error is the log (JSON with SVC_LOG_FORMAT=json).
        crate::output::say(&format!(
            "svc gateway: public {} tunnel {} admin http://{}/metrics",
            bound.public, bound.tunnel, bound.admin
        ));
        let following = feed.is_some();
        if let Some(feed) = feed {
            let url = feed.url().to_owned();
            let Some(feed) = feed.announcing(&bound, &tunnel_cert_pem) else {
                return Err(GatewayRunError::NoTunnelCertificate);
            };
            crate::output::say(&format!("svc gateway: routes from {url}"));
            tokio::spawn(relay_gateway_host::follow::follow(gateway.clone(), feed));
        }
        #[cfg(unix)]
        {
            let gw = gateway.clone();
            if let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
                tokio::spawn(async move {
                    while hup.recv().await.is_some() {
                        if following {
                            tracing::info!("svc gateway: the routes come from the coordinator; SIGHUP changes none");
                            continue;
                        }
                        match GatewayFile::read(&path) {
                            Ok(f) => {
                                tracing::info!("svc gateway: routes reloaded ({})", f.routes.len());
                                gw.set_routes(f.routes);
                            }
                            Err(e) => tracing::warn!("svc gateway: reload refused, keeping the old routes: {e}"),
                        }
                    }
                });
            }
        }
        tokio::select! {
            r = run => match r {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(GatewayRunError::Gateway(e)),
                Err(e) => Err(GatewayRunError::Task(e)),
            },
            () = shutdown_signal() => Ok(()),
        }
    });
    result.map(|()| ExitCode::SUCCESS)
}

/// `svc agent run --config FILE`
pub(crate) fn agent(config_path: &Path) -> Result<ExitCode, AgentRunError> {
    let config = agent::AgentConfig::read(config_path).map_err(AgentRunError::Config)?;
    let state_dir = config_path.parent().map_or_else(|| Path::new(".").to_path_buf(), Path::to_path_buf);
    let rt = agent_runtime(crate::collect::allocator_collect()).map_err(AgentRunError::Runtime)?;
    let result = rt.block_on(async {
        // The agent runs on a worker, not on this thread: only workers park through the hook
        // that collects, and what this thread allocated would be freed by them and never
        // collected (this thread's heap is collected only by this thread).
        let run = tokio::spawn(async move { agent::run(config, &state_dir).await });
        tokio::select! {
            r = run => r.map_err(AgentRunError::Task)?.map_err(AgentRunError::Run),
            () = shutdown_signal() => Ok(()),
        }
    });
    result.map(|()| ExitCode::SUCCESS)
}
