//! `svc serve`: the publication service on a tokio runtime.

use std::process::ExitCode;

use std::sync::Arc;

use manifest_core::service::{FaultPoint, Pool, SchemaPairs, ServiceConfig, serve_until};
use svc_execution::Quote;
use svc_execution::artifacts::{ArtifactError, ArtifactStore};
use svc_execution::local::{LocalPool, LocalPoolConfig, LocalPoolError};

use crate::args::ServeArgs;
use crate::settings::DatabaseFlags as _;
use crate::settings::SettingsError;

/// Why `svc serve` did not start or stopped: said once, by [`crate::failure::report`], as
/// `svc serve: ...` (exit 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ServeCommandError {
    /// The flags do not make the service's settings.
    #[error(transparent)]
    Settings(SettingsError),
    /// HTTPS cannot be set up.
    #[error(transparent)]
    Tls(crate::tls::ServerTlsError),
    /// The local pool cannot start, and that is fatal.
    #[error(transparent)]
    NoPool(NoPool),
    /// No runtime.
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The service failed, starting or serving.
    #[error(transparent)]
    Serve(manifest_core::service::ServeError),
}

crate::failure::one_line_failure!(ServeCommandError, exit 2, "serve_failed", "svc serve");

/// Runs until SIGINT or SIGTERM; exit 0 after draining, 2 if it cannot start.
pub(crate) fn serve(args: &ServeArgs) -> Result<ExitCode, ServeCommandError> {
    let mut config = ServiceConfig::new(args.listen, args.data_dir.clone());
    config.schema_pairs = SchemaPairs::parse(&args.schema_pairs).unwrap_or_default();
    config.fault = args.inject_fault.as_ref().map(|_| FaultPoint::AfterVersionInsert);
    if let Some(key_file) = &args.database.key_file {
        config.key_file.clone_from(key_file);
    }
    config.database = args.database.settings().map_err(ServeCommandError::Settings)?;
    config.http = svc_http::Settings::try_from(&args.listener).map_err(ServeCommandError::Settings)?;
    let tls = crate::tls::server_tls(&args.listener, &args.data_dir.join("dev-ca"), args.listen)
        .map_err(ServeCommandError::Tls)?;
    if let Some(ca) = tls.as_ref().and_then(|t| t.dev_ca.as_ref()) {
        tracing::info!(
            "svc serve: HTTPS with a development certificate; clients trust {} (--ca FILE or SVC_CA)",
            ca.display()
        );
    }
    config.tls = tls.map(|t| t.tls);
    // The local pool lives outside the runtime: it has its own, which must not be dropped
    // inside another (it is dropped last, below, which stops every job it runs).
    let pool = match local_pool(args) {
        Err(why) if why.is_fatal() => return Err(ServeCommandError::NoPool(why)),
        other => other,
    };
    config.pool = match &pool {
        Ok(p) => Pool::Market(Arc::clone(p) as Arc<dyn svc_execution::Market>),
        Err(why) => {
            tracing::warn!("svc serve: {why}; every launch is refused until it is fixed");
            // Every refused launch's reason says this to the tenant: what, never where on the
            // host (the store's and pool's directories are in the line above).
            Pool::None(if args.processors == 0 {
                why.to_string()
            } else {
                "the service's local pool could not start; its operator's log says why".to_owned()
            })
        }
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(ServeCommandError::Runtime)?;
    // SIGTERM or Ctrl-C drains requests in flight; after Ctrl-C the exit is 130.
    let shutdown = crate::output::graceful_shutdown();
    let data_dir = args.data_dir.display().to_string();
    let listened = std::cell::Cell::new(false);
    let result = runtime.block_on(serve_until(
        config,
        |server| {
            listened.set(true);
            tracing::info!(
                "svc serve: listening on {} (data directory {data_dir}; at most {} connections)",
                server.url(),
                server.connection_cap()
            );
            tracing::info!("svc serve: the console is at {}/console/ (sign in with an API token)", server.url());
        },
        shutdown,
    ));
    if listened.get() {
        drop(runtime);
    } else {
        // Stopped while starting: a connection to a database that does not answer may still
        // be waited for on a blocking thread, which dropping the runtime would wait for too.
        runtime.shutdown_background();
    }
    drop(pool);
    result.map_err(ServeCommandError::Serve)?;
    tracing::info!("svc serve: stopped");
    Ok(ExitCode::SUCCESS)
}

/// Why there is no local pool: the service runs and refuses every launch saying this, or,
/// when [`NoPool::is_fatal`], does not start.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NoPool {
    /// `--processors 0`.
    #[error("the service was started with --processors 0")]
    NoProcessors,
    /// The `--job-*` flags do not make job bounds (fatal).
    #[error(transparent)]
    Jobs(SettingsError),
    /// The artifact store cannot open.
    #[error("the artifact store cannot open: {0}")]
    Artifacts(#[source] ArtifactError),
    /// Jobs cannot be bounded on this host (fatal; the message says what to enable).
    #[error(transparent)]
    Cgroups(LocalPoolError),
    /// The pool cannot start for another reason.
    #[error("the local pool cannot start: {0}")]
    Pool(#[source] LocalPoolError),
}

impl NoPool {
    /// The service does not start: jobs could not be bounded as asked.
    fn is_fatal(&self) -> bool {
        matches!(self, NoPool::Jobs(_) | NoPool::Cgroups(_))
    }
}

/// The local pool of `--processors` processors, over the data directory's artifact store
/// (`artifacts/`) and job scratch space (`pool/`), each job bounded by its cgroup (the
/// `--job-*` flags); why not, if it cannot start.
fn local_pool(args: &ServeArgs) -> Result<Arc<LocalPool>, NoPool> {
    if args.processors == 0 {
        return Err(NoPool::NoProcessors);
    }
    let jobs = crate::settings::JobSettings::try_from(&args.jobs).map_err(NoPool::Jobs)?;
    let artifacts = ArtifactStore::open(args.data_dir.join("artifacts")).map_err(NoPool::Artifacts)?;
    let mut config = LocalPoolConfig::new(args.data_dir.join("pool"), artifacts);
    config.processors = usize::from(args.processors);
    config.jobs_per_processor = usize::from(args.jobs_per_processor);
    config.price = Quote { service_credit_micros: u128::from(args.price_micros_per_hour), ..Quote::default() };
    // Each process alone within the job's bounds, also where jobs have no cgroup.
    config.limits.memory_bytes = jobs.resources.memory_bytes;
    config.limits.processes = jobs.resources.processes;
    config.resources = jobs.resources;
    config.cgroups = jobs.cgroups;
    let pool = LocalPool::new(config).map_err(|e| match e {
        LocalPoolError::Cgroups(_) => NoPool::Cgroups(e),
        e => NoPool::Pool(e),
    })?;
    if pool.orphans_swept() > 0 {
        tracing::warn!("svc serve: killed {} job sandboxes a killed service had left running", pool.orphans_swept());
    }
    Ok(Arc::new(pool))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_that_cannot_start_keeps_its_words_and_only_unbounded_jobs_are_fatal() {
        assert_eq!(NoPool::NoProcessors.to_string(), "the service was started with --processors 0");
        assert!(!NoPool::NoProcessors.is_fatal());
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let file = scratch.path().join("file");
        std::fs::write(&file, b"not a directory").expect("a file");
        let Err(e) = ArtifactStore::open(file.join("artifacts")) else { panic!("a store under a file") };
        let why = NoPool::Artifacts(e);
        assert!(why.to_string().starts_with("the artifact store cannot open: "), "{why}");
        assert!(std::error::Error::source(&why).is_some(), "the store's error is its cause: {why:?}");
        assert!(!why.is_fatal());
    }
}
