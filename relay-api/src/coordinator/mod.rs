//! The relay coordinator: deployments of ingress projects, their quotes and funding ledger,
//! customer hostnames, route validation through the public path, status, logs and recovery
//! hints. It runs the gateway beside it (routes follow the deployments), signs development
//! certificates, and launches jobs through a [`JobRunner`].
//!
//! A route serves the public only while its deployment is funded and validated; every state
//! change is a recorded transition and every movement of credits a ledger entry.

pub mod admission;
pub mod api;
pub mod catalog_content;
mod console;
mod egress;
mod engine;
pub mod executions;
pub mod feed;
mod files;
pub mod gateway_hosts;
mod http;
pub mod ingress_market;
pub mod lease_rule;
pub mod model;
pub mod money;
mod operations;
pub mod policy;
pub mod probe;
mod restarts;
pub mod scheduling;
pub mod state;
pub mod store;

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::ca::DevCa;
use crate::gateway::{Bound, Gateway, GatewayConfig};
use crate::local::{LocalCoordinator, ephemeral};
pub use admission::{IssuedAdmission, Operator, issue_admission_token};
pub use engine::{Engine, EngineParts, JOB_EXITED, STEP_CONCURRENCY, switch};
pub use probe::{Probe, PublicProbe};
use relay_wire::wire;
pub use restarts::RestartPolicy;
pub use store::{RelayStore, StoreError};
use svc_execution::artifacts::ArtifactStore;
use svc_execution::local::{LocalPool, LocalPoolConfig};
use svc_execution::market::Market;

/// Where the agents of deployed jobs get their certificates.
#[derive(Debug, Clone)]
pub enum AgentCertificates {
    /// The coordinator's development CA (`.localhost` names only; customer hostnames need ACME).
    DevCa,
    /// An ACME CA, by TLS-ALPN-01 through the gateway.
    Acme {
        /// The directory URL.
        directory_url: String,
        /// A PEM file to trust for the ACME server's own HTTPS (a private or test CA).
        directory_ca: Option<PathBuf>,
        /// A PEM file of the roots the CA's certificates chain to (route validation trusts
        /// them; default: the system's roots are not used, so this is required).
        roots: PathBuf,
    },
}

/// How a coordinator runs.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// Data directory (0700): the store, the development CA, the catalog key, each
    /// deployment's app files, secrets and job output.
    pub data_dir: PathBuf,
    /// Job directory (0700), outside the data directory: each job's writable state (the
    /// agent's key and certificate). Default: `<data dir>-jobs` beside it.
    pub jobs_dir: PathBuf,
    /// The relay API (customers' CLI).
    pub listen: SocketAddr,
    /// The gateway's public TLS port.
    pub public: SocketAddr,
    /// Canonical hostnames are `<project>-<org>.<relay_domain>`.
    pub relay_domain: String,
    /// Where agents get certificates.
    pub certificates: AgentCertificates,
    /// How long a development-CA certificate an agent asks for is valid (renewed after two
    /// thirds of it; default 7 days).
    pub dev_certificate_validity: Duration,
    /// Name servers for the hostname checks and route validation (empty: the system's).
    pub nameservers: Vec<SocketAddr>,
    /// CA identities (CAA issuer domains) a customer hostname's CAA records must permit.
    pub caa_identities: Vec<String>,
    /// Validate customer hostnames that resolve to loopback or private addresses (a relay
    /// inside a private network only: otherwise refused, so a customer cannot aim the
    /// coordinator at internal services). `.localhost` routes need no flag: they are
    /// dialled at the gateway's own loopback listener (see [`crate::validation`]).
    pub allow_private_targets: bool,
    /// How often a route is validated again.
    pub revalidate: Duration,
    /// A funding period.
    pub period: Duration,
    /// Price per period, service-credit micros.
    pub price_micros: u64,
    /// How long a quote can be funded.
    pub quote_ttl: Duration,
    /// Rewards, downtime tolerance and settlement delay.
    pub terms: money::Terms,
    /// The operator of the gateway this coordinator runs (rewards of the routes it carries).
    pub gateway_operator: String,
    /// How many of its gateway operator's hosts serve each route, besides this coordinator's
    /// gateway ([`gateway_hosts`]; `svc relay serve --gateway-hosts-per-route`). `None` (the
    /// default): all of them.
    pub gateway_hosts_per_route: Option<usize>,
    /// How to run the agent: program and leading arguments (`svc agent run`).
    pub agent_command: Vec<OsString>,
    /// The Node.js program.
    pub node: OsString,
    /// Resource limits of every job process.
    pub job_limits: crate::runner::Limits,
    /// What each job may use, all its processes together (its cgroup), where its policy
    /// says nothing.
    pub job_resources: crate::runner::JobResources,
    /// Whether each job runs in a cgroup of its own (the coordinator refuses to start where
    /// the host has none); `false` only by an explicit choice (`--without-job-cgroups`).
    pub job_cgroups: bool,
    /// The first job uid when the service runs as root (each job gets its own).
    pub job_uid_base: u32,
    /// When a job whose process ended is started again.
    pub restarts: RestartPolicy,
    /// How long a launched job's agent has to bring its tunnel up before its route is
    /// validated anyway (validated as soon as it does; default 10 s).
    pub agent_grace: Duration,
    /// How long a redeploy's successor (the next revision) has, from its deploy, to pass
    /// validation before it fails and the serving revision keeps serving (default 60 s).
    pub successor_deadline: Duration,
    /// How long a signed service catalog is valid (re-signed once half of it has passed).
    pub catalog_validity: Duration,
    /// The relay API's certificate (HTTPS); plain HTTP, on loopback only, without one.
    pub api_tls: Option<svc_http::Tls>,
    /// The relay API listener's timeouts, connection cap and drain time.
    pub api_http: svc_http::Settings,
    /// The store on a PostgreSQL database instead of SQLite in the data directory.
    pub database: Option<(svc_postgres::Database, store::postgres::PoolSettings)>,
    /// The key file that seals the store's secrets (issue 40; default `secrets.key` in the
    /// data directory): every coordinator on one database needs the same one.
    pub key_file: PathBuf,
}

impl CoordinatorConfig {
    /// Defaults for everything but the data directory, the addresses and the agent command.
    pub fn new(data_dir: PathBuf, listen: SocketAddr, public: SocketAddr, agent_command: Vec<OsString>) -> Self {
        CoordinatorConfig {
            jobs_dir: jobs_dir_beside(&data_dir),
            key_file: store::default_key_file(&data_dir),
            data_dir,
            listen,
            public,
            relay_domain: "localhost".to_owned(),
            certificates: AgentCertificates::DevCa,
            dev_certificate_validity: Duration::from_secs(7 * 24 * 3600),
            nameservers: Vec::new(),
            caa_identities: Vec::new(),
            allow_private_targets: false,
            revalidate: Duration::from_secs(30),
            period: Duration::from_secs(3600),
            price_micros: 250_000,
            quote_ttl: Duration::from_secs(15 * 60),
            terms: money::Terms::default(),
            gateway_operator: "local".to_owned(),
            gateway_hosts_per_route: None,
            agent_command,
            node: "node".into(),
            job_limits: crate::runner::Limits::default(),
            job_resources: crate::runner::JobResources::DEFAULT,
            job_cgroups: true,
            job_uid_base: crate::runner::DEFAULT_UID_BASE,
            restarts: RestartPolicy::default(),
            agent_grace: Duration::from_secs(10),
            successor_deadline: Duration::from_secs(60),
            catalog_validity: crate::catalog::DEFAULT_VALIDITY,
            api_tls: None,
            api_http: svc_http::Settings::default(),
            database: None,
        }
    }
}

impl CoordinatorConfig {
    /// Where the store lives (the database if one is set, else the data directory), and its
    /// key file.
    pub fn store_at(&self) -> store::OpenAt {
        store::OpenAt::new(store::StoreAt::of(&self.data_dir, self.database.as_ref()), self.key_file.clone())
    }

    /// Where each deployment's app files, secrets and job output live.
    pub fn deployments_dir(&self) -> PathBuf {
        self.data_dir.join("deployments")
    }
}

/// The default job directory: `<data dir>-jobs` beside the data directory.
pub fn jobs_dir_beside(data_dir: &Path) -> PathBuf {
    match data_dir.file_name() {
        Some(name) => {
            let mut jobs = name.to_owned();
            jobs.push("-jobs");
            data_dir.with_file_name(jobs)
        }
        None => data_dir.join("jobs"),
    }
}

/// Creates a data directory and the job directory beside it (both 0700); their absolute
/// paths.
pub fn prepare_dirs(data_dir: &Path) -> Result<(PathBuf, PathBuf), CoordinatorError> {
    files::prepare_dirs(data_dir, &jobs_dir_beside(data_dir)).map_err(setup("the data and job directories"))
}

/// The largest relay API request body (a deploy carries the app's files): a larger declared
/// `Content-Length` is answered 413 at once.
const API_BODY_LIMIT: usize = http::DEPLOY_LIMIT;

/// The relay API's routes over `engine` (deployments, funds, hostnames, pins, rewards,
/// operators), with the body limit: what `svc relay serve` serves, and what a test calls in
/// process.
pub fn api_router(engine: Arc<Engine>) -> axum::Router {
    svc_http::limit_body(http::router(engine), API_BODY_LIMIT)
}

/// Why the coordinator could not start.
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// The store.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Setting up a part.
    #[error("{0}")]
    Setup(String),
}

fn setup<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> CoordinatorError + '_ {
    move |e| CoordinatorError::Setup(format!("{what}: {e}"))
}

/// The addresses a started coordinator serves.
#[derive(Debug, Clone)]
pub struct Started {
    /// The relay API.
    pub api: SocketAddr,
    /// The gateway's ports.
    pub gateway: Bound,
    /// The agent-facing API (certificate signing, route hostnames).
    pub agent_api: SocketAddr,
}

/// A freshly issued API token: print the plaintext once; the store keeps its hash.
#[derive(Debug, Clone)]
pub struct IssuedToken {
    /// `rly_` and 64 hex digits.
    pub plaintext: String,
    /// `tok_` and 16 hex digits.
    pub id: String,
    /// What people read in timelines and the console (`--name`, else the role and the first
    /// digits of the ID).
    pub name: String,
}

/// Records an organization's invitation to the ingress add-on (creating it if needed), in
/// the store `at` (a data directory, or a database, with its key file).
pub fn invite(at: impl Into<store::OpenAt>, org: &str) -> Result<(), StoreError> {
    RelayStore::open_at(&at.into())?.invite(org).map(|_| ())
}

/// Issues an API token named `name` (default: the role and the first digits of its ID). A
/// customer token is for an invited organization only (else refused `not_invited`, and no
/// organization is created); an operator token reads and claims the rewards of the gateway
/// operator named `org`.
pub fn issue_token(
    at: impl Into<store::OpenAt>,
    org: &str,
    role: store::TokenRole,
    name: Option<&str>,
) -> Result<IssuedToken, StoreError> {
    if let Some(n) = name {
        manifest_core::names::token_name(n)
            .map_err(|e| StoreError::Refused { code: "invalid_name", message: e.to_string() })?;
    }
    let store = RelayStore::open_at(&at.into())?;
    let plaintext = format!("rly_{}", store::random_hex(32)?);
    let id = format!("tok_{}", store::random_hex(8)?);
    let name = name.map_or_else(|| manifest_core::names::default_token_name(role.as_str(), &id), str::to_owned);
    let hash = wire::sha256_hex(plaintext.as_bytes());
    store.add_token(org, &store::NewToken { hash: &hash, id: &id, role, name: &name })?;
    Ok(IssuedToken { plaintext, id, name })
}

/// Where the coordinator's jobs run: the publication service's local pool (one processor,
/// as many jobs as there are job uids), in `<jobs dir>/pool`, from the artifacts in
/// `<jobs dir>/artifacts`. Made on a thread of its own: the pool runs its own runtime.
fn local_pool(config: &CoordinatorConfig) -> Result<(Arc<dyn Market>, ArtifactStore), CoordinatorError> {
    let artifacts = ArtifactStore::open(config.jobs_dir.join("artifacts")).map_err(setup("the job artifact store"))?;
    let mut pool = LocalPoolConfig::new(config.jobs_dir.join("pool"), artifacts.clone());
    pool.jobs_per_processor = JOB_UIDS;
    pool.limits = config.job_limits;
    pool.resources = config.job_resources;
    pool.cgroups = config.job_cgroups;
    pool.uid_base = config.job_uid_base;
    pool.node = config.node.clone();
    // The jobs' egress brokers on the runtime the gateway runs on: an agent's heartbeat then
    // goes from its broker to the gateway and back without waking the pool's thread. Not a
    // single-threaded runtime (a test's), where a blocked test would hold every agent's
    // relays.
    pool.brokers = tokio::runtime::Handle::try_current()
        .ok()
        .filter(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    let made = blocking(|| std::thread::spawn(move || LocalPool::new(pool)).join());
    let pool = made.map_err(|_| CoordinatorError::Setup("job confinement: the pool's setup panicked".into()))?;
    let pool = pool.map_err(setup("job confinement"))?;
    if pool.orphans_swept() > 0 {
        tracing::warn!("killed {} job sandboxes a killed coordinator had left running", pool.orphans_swept());
    }
    Ok((Arc::new(pool), artifacts))
}

/// Jobs the coordinator runs at once, at most: one uid each when it runs as root.
const JOB_UIDS: usize = 65_536;

/// Runs a blocking operation (a store transaction, a call to the processor market) without
/// holding up the runtime's other tasks (the gateway, the API): `block_in_place` hands them to
/// another worker while this one waits. A current-thread runtime (tests) has no other worker:
/// the operation runs in place.
fn blocking<T>(operation: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(operation),
        _ => operation(),
    }
}

/// Runs the coordinator (API, gateway, agent API, engine) until `shutdown` completes.
pub async fn run(
    config: CoordinatorConfig,
    on_started: impl FnOnce(&Started),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), CoordinatorError> {
    let mut config = config;
    (config.data_dir, config.jobs_dir) =
        files::prepare_dirs(&config.data_dir, &config.jobs_dir).map_err(setup("the data and job directories"))?;
    // Held until this function returns: while the coordinator runs.
    let _lock = files::lock_data_dir(&config.data_dir).map_err(setup("the data directory"))?;
    files::migrate_old_layout(&config.data_dir).map_err(setup("moving deployment files to deployments/"))?;
    files::migrate_to_revisions(&config.deployments_dir())
        .map_err(setup("moving deployment files to their first revision"))?;
    // Off the runtime's threads and raced with the stop: a database that does not answer
    // must not hold Ctrl-C up until its connection times out.
    let mut shutdown = Box::pin(shutdown);
    let at = config.store_at();
    let store = tokio::select! {
        opened = tokio::task::spawn_blocking(move || RelayStore::open_at(&at)) => {
            opened.map_err(|e| CoordinatorError::Setup(format!("opening the store: {e}")))??
        }
        () = shutdown.as_mut() => return Ok(()),
    };
    let store = Arc::new(store);
    // Revisions deployed before the store kept their files: recorded now, before the sweep.
    let imported = files::import(&store, &config.deployments_dir());
    if imported > 0 {
        tracing::info!("recorded the files of {imported} revisions in the store");
    }
    files::sweep(&store, &config.deployments_dir(), &config.jobs_dir, true);
    let (market, artifacts) = local_pool(&config)?;
    // Sandboxes a coordinator killed in a job's first milliseconds left running (re-parented
    // to init, before bwrap armed its parent-death signal); they name these directories.
    let swept = crate::runner::sweep_orphans(&[&config.jobs_dir, &config.deployments_dir()]);
    if swept > 0 {
        tracing::warn!("killed {swept} job sandboxes a killed coordinator had left running");
    }
    let catalog = Arc::new(
        crate::catalog::Publisher::open(&config.data_dir, config.catalog_validity)
            .map_err(setup("the signed service catalog"))?,
    );
    let ca = DevCa::open(&config.data_dir).map_err(setup("the development CA"))?;
    let (tunnel_chain, tunnel_key) = ca
        .issue(&["gateway.localhost".to_owned()], Duration::from_secs(365 * 24 * 3600))
        .map_err(setup("the gateway's tunnel certificate"))?;
    let ephemeral_addr: SocketAddr = ([127, 0, 0, 1], 0).into();
    let gateway =
        Gateway::new(GatewayConfig::new(config.public, ephemeral_addr, ephemeral_addr, tunnel_chain, tunnel_key));
    let (gw_task, bound) = gateway.clone().start().await.map_err(setup("the gateway"))?;
    let ca_pem = ca.cert_pem().to_owned();
    let ca_path = ca.cert_path.clone();
    let signer = LocalCoordinator::new(ca);
    let (agent_listener, agent_api) = ephemeral().await.map_err(setup("the agent API port"))?;
    let signer_task = tokio::spawn(signer.clone().serve(agent_listener));

    let roots_pem = match &config.certificates {
        AgentCertificates::DevCa => ca_pem,
        AgentCertificates::Acme { roots, .. } => {
            std::fs::read_to_string(roots).map_err(setup("the ACME roots file"))?
        }
    };
    let probe = PublicProbe::new(&config, bound.public, roots_pem).map_err(setup("the route validator"))?;
    // Its probe key's public half, for every gateway to check its validations' tokens with:
    // its own gateway at once, gateway hosts by the route feed (issue 40).
    if let Some(key) = probe.probe_key() {
        gateway.set_probe_keys(vec![key]);
        let (keys, public) = (store.clone(), key.to_string());
        // A new key moves the engine sequence on: the lease holder's gateway learns it at once.
        let register = move || match keys.register_probe_key(&public, store::now_ms()) {
            Ok(true) => keys.bump_engine_seq(),
            Ok(false) => Ok(()),
            Err(e) => Err(e),
        };
        tokio::task::spawn_blocking(register)
            .await
            .map_err(setup("recording the probe key"))?
            .map_err(setup("recording the probe key"))?;
    }
    let listener = svc_http::Server::bind("svc relay", config.listen, config.api_tls.clone(), config.api_http.clone())
        .await
        .map_err(setup("the relay API"))?;
    let api = listener.local_addr();
    let engine = Engine::new(EngineParts {
        config: config.clone(),
        store: store.clone(),
        gateway: gateway.clone(),
        signer,
        market,
        artifacts,
        probe: Arc::new(probe),
        tunnel: bound.tunnel,
        gateway_ca: ca_path,
        agent_api,
        public_port: bound.public.port(),
        clock: Arc::new(svc_execution::SystemClock),
        catalog,
    });
    let started = Started { api, gateway: bound, agent_api };
    on_started(&started);
    let engine_task = tokio::spawn(engine.clone().run());
    let app =
        api_router(engine.clone()).merge(http::catalog_router(engine.clone())).merge(console::router(engine.clone()));
    let stopping = engine.clone();
    let shutdown = async move {
        shutdown.await;
        stopping.begin_stopping();
    };
    listener.serve(svc_http::limit_body(app, API_BODY_LIMIT), shutdown).await;
    // Wait for the engine to be gone, not only told to go: a step inside a store operation
    // (`Engine::db`, on a thread of its own) finishes it first, and must neither launch a job
    // after `shut_down` nor poll a timer once the runtime shuts down.
    engine_task.abort();
    let _ = engine_task.await;
    engine.shut_down().await;
    signer_task.abort();
    gw_task.abort();
    Ok(())
}
