//! The publication service (cargo feature `service`): where a manifest becomes an immutable
//! effective policy. HTTP routes (axum on hyper, tokio) over a [`Store`](store::Store) (SQLite
//! by default), publication layers 3-7, bearer-token authentication with member roles, the
//! capabilities-and-limits statement, and the offline administration commands.
//!
//! `svc serve --listen ADDR --data-dir DIR` runs [`serve`]; `svc admin ...` calls [`admin`].

pub mod admin;
pub mod auth;
pub mod capability;
mod http;
mod layers;
mod publish;
pub mod store;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use publish::MAX_BODY_BYTES;

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
/// committed and commits nothing half-done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultPoint {
    /// Abort the process after the new policy version is inserted, before the commit.
    AfterVersionInsert,
}

/// How the service runs.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    /// Where to listen (tests use loopback with port 0).
    pub listen: SocketAddr,
    /// The data directory (holds the SQLite database).
    pub data_dir: PathBuf,
    /// Registered schema pairs.
    pub schema_pairs: SchemaPairs,
    /// How long to let in-flight requests finish after SIGINT or SIGTERM.
    pub drain_timeout: Duration,
    /// A crash to inject, for tests.
    pub fault: Option<FaultPoint>,
}

impl ServiceConfig {
    /// Defaults: V4 and V5, a 9-second drain (the process is gone within 10 s), no fault.
    pub fn new(listen: SocketAddr, data_dir: PathBuf) -> ServiceConfig {
        ServiceConfig {
            listen,
            data_dir,
            schema_pairs: SchemaPairs::default(),
            drain_timeout: Duration::from_secs(9),
            fault: None,
        }
    }
}

/// Why the service could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// The address could not be bound or the server failed.
    #[error("cannot serve on {addr}: {source}")]
    Io {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

/// Shared by every request.
pub(crate) struct State {
    pub(crate) store: Arc<dyn store::Store>,
    pub(crate) schema_pairs: SchemaPairs,
    pub(crate) fault: Option<FaultPoint>,
    /// Publications reading and validating their manifest at once: one per core (see
    /// `publish::prepare_body`).
    pub(crate) validations: Arc<tokio::sync::Semaphore>,
}

/// Runs the service until SIGINT or SIGTERM, then drains in-flight requests (at most
/// `drain_timeout`) and returns. `on_listening` is told the bound address (port 0 picks one).
pub async fn serve(config: ServiceConfig, on_listening: impl FnOnce(SocketAddr)) -> Result<(), ServeError> {
    let store = store::SqliteStore::open(&config.data_dir)?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Io { addr: config.listen, source })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Io { addr: config.listen, source })?;
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let state = Arc::new(State {
        store: Arc::new(store),
        schema_pairs: config.schema_pairs,
        fault: config.fault,
        validations: Arc::new(tokio::sync::Semaphore::new(cores)),
    });
    on_listening(addr);

    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let shutdown = async move {
        shutdown_signal().await;
        let _ = stop_tx.send(true);
    };
    let server = axum::serve(listener, http::router(state)).with_graceful_shutdown(shutdown);
    let deadline = async move {
        let _ = stop_rx.wait_for(|stopped| *stopped).await;
        tokio::time::sleep(config.drain_timeout).await;
    };
    tokio::select! {
        result = server => result.map_err(|source| ServeError::Io { addr, source }),
        // Requests still running after the drain time are cut off: the process must go.
        () = deadline => Ok(()),
    }
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
