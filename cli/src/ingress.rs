//! `svc gateway run`, `svc agent run`: the ingress data plane, and what the long-running
//! commands share.

use std::path::Path;
use std::process::ExitCode;

use relay_api::gateway::Gateway;
use relay_api::gateway::file::GatewayFile;
use relay_gateway_host::follow::Feed;

pub(crate) fn runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().enable_all().build().ok()
}

/// SIGTERM, or Ctrl-C (then the process exits 130 once what it started has stopped).
pub(crate) fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    crate::output::graceful_shutdown()
}

fn fail(who: &str, message: &str) -> ExitCode {
    eprintln!("{who}: {message}");
    ExitCode::from(2)
}

/// `svc gateway run --config FILE`: the routes are the file's (read again on SIGHUP), or
/// its coordinator's route feed's.
pub(crate) fn gateway(config_path: &Path) -> ExitCode {
    let file = match GatewayFile::read(config_path) {
        Ok(f) => f,
        Err(e) => return fail("svc gateway", &e.to_string()),
    };
    let config = match file.config() {
        Ok(c) => c,
        Err(e) => return fail("svc gateway", &e.to_string()),
    };
    let feed = match file.coordinator.as_ref().map(Feed::open).transpose() {
        Ok(feed) => feed,
        Err(e) => return fail("svc gateway", &e.to_string()),
    };
    let Some(rt) = runtime() else { return fail("svc gateway", "cannot start the runtime") };
    let tunnel_cert_pem = config.tunnel_cert_pem.clone();
    let gateway = Gateway::new(config);
    gateway.set_routes(file.routes.clone());
    let path = config_path.to_owned();
    let result = rt.block_on(async move {
        let (run, bound) = gateway.clone().start().await.map_err(|e| e.to_string())?;
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
                return Err("the tunnel certificate file holds no certificate".to_owned());
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
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            () = shutdown_signal() => Ok(()),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail("svc gateway", &e),
    }
}

/// `svc agent run --config FILE`
pub(crate) fn agent(config_path: &Path) -> ExitCode {
    let config = match agent::AgentConfig::read(config_path) {
        Ok(c) => c,
        Err(e) => return fail("svc agent", &e.to_string()),
    };
    let state_dir = config_path.parent().map_or_else(|| Path::new(".").to_path_buf(), Path::to_path_buf);
    let Some(rt) = runtime() else { return fail("svc agent", "cannot start the runtime") };
    let result = rt.block_on(async {
        tokio::select! {
            r = agent::run(config, &state_dir) => r,
            () = shutdown_signal() => Ok(()),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail("svc agent", &e.to_string()),
    }
}
