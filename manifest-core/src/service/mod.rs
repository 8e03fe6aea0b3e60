//! The publication service (cargo feature `service`): where a manifest becomes an immutable
//! effective policy. HTTP routes (axum on hyper, tokio) over a [`Store`](store::Store) (SQLite
//! by default), publication layers 3-7, bearer-token authentication with member roles, the
//! capabilities-and-limits statement, and the offline administration commands.
//!
//! `svc serve --listen ADDR --data-dir DIR` runs [`serve`] (on the `svc-http` listener: its
//! timeouts, connection cap, request ids and TLS); `svc admin ...` calls [`admin`].

pub mod admin;
pub mod auth;
pub mod capability;
mod clock;
mod console;
pub mod executions;
mod http;
mod layers;
mod operations;
pub mod store;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

pub use http::MAX_BODY_BYTES;

/// The ids the routes take in their paths (`{id}` of `/api/applications/{id}`) and the field
/// a refused one is named by, as the API names them: the API's routes and the console's
/// pages check their ids by the same names.
const PATH_ID_FIELDS: &[(&str, &str)] = &[("id", "applicationId"), ("n", "policyVersion"), ("name", "asset")];

/// Which manifest versions the server publishes: server configuration, which a dry run does
/// not bypass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaPairs {
    /// V4 and V5 (the production registration).
    #[default]
    V4AndV5,
    /// V4 only.
    V4Only,
}

impl SchemaPairs {
    /// The spelling in configuration and in the capabilities statement.
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaPairs::V4AndV5 => "v4_and_v5",
            SchemaPairs::V4Only => "v4",
        }
    }

    /// Reads a spelling.
    pub fn parse(text: &str) -> Option<SchemaPairs> {
        [SchemaPairs::V4AndV5, SchemaPairs::V4Only].into_iter().find(|p| p.as_str() == text)
    }
}

/// A place where a test can make the server crash, to prove a crash there loses nothing
/// committed and commits nothing half-done. The point is on whichever path the publication
/// takes in production: a fault never changes the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// After the new policy version is inserted, before the commit. In grouped work (SQLite,
    /// and PostgreSQL's publications that run under the writers' lock) the process aborts
    /// there; in PostgreSQL's decided write, one call of `svc_publish_decided`, the database
    /// session running the call ends there ([`FaultPoint::session_setting`]).
    AfterVersionInsert,
}

impl FaultPoint {
    /// The session setting that takes the fault into PostgreSQL's decided write (migration
    /// 0004 reads it), set on every connection of a service started with the fault.
    pub fn session_setting(self) -> (&'static str, &'static str) {
        match self {
            FaultPoint::AfterVersionInsert => ("svc.inject_fault", "after-version-insert"),
        }
    }
}

/// How the service runs.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// Where to listen (tests use loopback with port 0).
    pub listen: SocketAddr,
    /// The data directory (holds the SQLite database, unless `database` is given).
    pub data_dir: PathBuf,
    /// The key file that unwraps the store's secrets (`--key-file`; by default
    /// [`store::KEY_FILE`] in the data directory): instances on one database share it.
    pub key_file: PathBuf,
    /// A PostgreSQL database for the store, and its pool (`--database`): several instances
    /// may share it.
    pub database: Option<(svc_postgres::Database, svc_postgres::PoolSettings)>,
    /// Registered schema pairs.
    pub schema_pairs: SchemaPairs,
    /// The listener's timeouts, connection cap and drain time (after SIGINT or SIGTERM).
    pub http: svc_http::Settings,
    /// Serve HTTPS with this certificate; plain HTTP (loopback only) without.
    pub tls: Option<svc_http::Tls>,
    /// A crash to inject, for tests.
    pub fault: Option<FaultPoint>,
    /// Where published applications run.
    pub pool: Pool,
}

/// The processors the scheduler launches jobs on.
#[derive(Clone)]
pub enum Pool {
    /// A market given by the caller (the local pool, or a simulated one in tests).
    Market(Arc<dyn svc_execution::Market>),
    /// No processors, and why: the scheduler records every launch as refused
    /// (`no_processor`, with this reason).
    None(String),
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pool::Market(_) => "Pool::Market",
            Pool::None(_) => "Pool::None",
        })
    }
}

impl ServiceConfig {
    /// Defaults: V4 and V5, the listener's defaults (a 9-second drain: the process is gone
    /// within 10 s), plain HTTP, no fault.
    pub fn new(listen: SocketAddr, data_dir: PathBuf) -> ServiceConfig {
        ServiceConfig {
            listen,
            key_file: data_dir.join(store::KEY_FILE),
            data_dir,
            database: None,
            schema_pairs: SchemaPairs::default(),
            http: svc_http::Settings::default(),
            tls: None,
            fault: None,
            pool: Pool::None("the service was started without processors".to_owned()),
        }
    }
}

/// Why the service could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// The listener could not start (address, settings, plain HTTP off loopback, open-file
    /// limit).
    #[error(transparent)]
    Listen(#[from] svc_http::ServeError),
    /// The scheduler could not recover or start.
    #[error("the scheduler could not start: {0}")]
    Scheduler(#[source] svc_execution::executor::StoreFailure),
}

/// Shared by every request.
pub(crate) struct State {
    pub(crate) store: Arc<dyn store::Store>,
    pub(crate) schema_pairs: SchemaPairs,
    pub(crate) fault: Option<FaultPoint>,
    /// Publications reading and validating their manifest at once: one per core (see
    /// `operations::publish`).
    pub(crate) validations: Arc<tokio::sync::Semaphore>,
    /// The scheduler, told of every committed publication, pause and resume.
    pub(crate) scheduler: executions::runner::Scheduler,
    /// The health route's latest check of the store, shared by its probes.
    pub(crate) health: svc_http::StoreCheck,
    /// Large request bodies being read, bounded per organization and in all.
    pub(crate) intake: svc_http::Intake,
    /// Where uploaded application bundles go: the data directory's content-addressed artifact
    /// store (`artifacts/`), the one the local pool launches from; `None` (uploads refused)
    /// when it cannot open, or for a router without a data directory.
    pub(crate) artifacts: Option<svc_execution::artifacts::ArtifactStore>,
}

/// Runs the service until SIGINT or SIGTERM, then drains in-flight requests (at most the
/// settings' drain timeout) and returns. `on_listening` is told the bound listener (its
/// address, URL and connection cap; port 0 picks one).
pub async fn serve(config: ServiceConfig, on_listening: impl FnOnce(&svc_http::Server)) -> Result<(), ServeError> {
    serve_until(config, on_listening, shutdown_signal()).await
}

/// [`serve`] until `shutdown` completes instead of the signals: `svc` passes its own, which
/// knows whether the stop was Ctrl-C (exit 130) or SIGTERM (exit 0). A stop asked for while
/// the service starts (opening a database that does not answer, say) ends it at once, before
/// it listens.
pub async fn serve_until(
    config: ServiceConfig,
    on_listening: impl FnOnce(&svc_http::Server),
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), ServeError> {
    let mut shutdown = std::pin::pin!(shutdown);
    let (server, state) = tokio::select! {
        started = start(config) => started?,
        () = shutdown.as_mut() => return Ok(()),
    };
    on_listening(&server);
    server.serve(http::router(state), shutdown).await;
    Ok(())
}

/// Opens the store, binds the listener, starts the scheduler and warms the hot path.
async fn start(mut config: ServiceConfig) -> Result<(svc_http::Server, Arc<State>), ServeError> {
    if let (Some(fault), Some((db, _))) = (config.fault, config.database.as_mut()) {
        let (name, value) = fault.session_setting();
        db.add_session_setting(name, value);
    }
    let at = svc_sql::StoreAt::of(&config.data_dir, config.database.as_ref());
    let key_file = config.key_file.clone();
    let store::Opened { store, keys } = tokio::task::spawn_blocking(move || store::open(&at, &key_file))
        .await
        .map_err(|e| ServeError::Store(store::StoreError::Backend(Box::new(e))))??;
    for notice in keys.notices() {
        tracing::info!("svc serve: {notice}");
    }
    let intake = svc_http::Intake::new(config.http.intake);
    let server = svc_http::Server::bind("svc serve", config.listen, config.tls, config.http).await?;
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let market: Arc<dyn svc_execution::Market> = match config.pool {
        Pool::Market(m) => m,
        Pool::None(why) => Arc::new(svc_execution::market::Unavailable(why)),
    };
    let scheduler = {
        let store: Arc<dyn svc_execution::executor::ExecutionStore> = Arc::clone(&store) as _;
        tokio::task::spawn_blocking(move || {
            executions::runner::Scheduler::start(store, market, Arc::new(svc_execution::SystemClock))
        })
        .await
        .map_err(|e| ServeError::Scheduler(svc_execution::executor::StoreFailure(Box::new(e))))?
        .map_err(ServeError::Scheduler)?
    };
    if let Some(statements) = store.on_runtime() {
        // The hot path's connections made and its statements prepared before the first
        // request, which would otherwise wait for them.
        statements.warm().await;
    }
    let artifacts = match svc_execution::artifacts::ArtifactStore::open(config.data_dir.join("artifacts")) {
        Ok(artifacts) => Some(artifacts),
        Err(e) => {
            tracing::warn!("svc serve: uploads are refused: the artifact store cannot open: {e}");
            None
        }
    };
    let state = Arc::new(State {
        store: store as Arc<dyn store::Store>,
        schema_pairs: config.schema_pairs,
        fault: config.fault,
        validations: Arc::new(tokio::sync::Semaphore::new(cores)),
        scheduler,
        health: svc_http::StoreCheck::default(),
        intake,
        artifacts,
    });
    Ok((server, state))
}

/// The service's routes (the API and the console) over `store` and a running `scheduler`,
/// with no listener: what [`serve`] serves, for a caller that drives the router itself (the
/// console's view benchmark, `manifest-core/benches/console.rs`).
pub fn router_over(store: Arc<dyn store::ServiceStore>, scheduler: executions::runner::Scheduler) -> axum::Router {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    http::router(Arc::new(State {
        store: store as Arc<dyn store::Store>,
        schema_pairs: SchemaPairs::default(),
        fault: None,
        validations: Arc::new(tokio::sync::Semaphore::new(cores)),
        scheduler,
        health: svc_http::StoreCheck::default(),
        intake: svc_http::Intake::new(svc_http::IntakeLimits::DEFAULT),
        artifacts: None,
    }))
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = interrupt.await;
                return;
            }
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}
