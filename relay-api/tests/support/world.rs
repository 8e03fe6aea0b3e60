//! The coordinator's engine in process, for the tests that drive it (`engine.rs`, `feed.rs`):
//! a real store (SQLite in a scratch directory), a fake processor market whose jobs end when
//! the test says, a fake probe whose verdicts the test scripts, and a clock the test moves
//! (the scheduler's restart backoffs).

// Each test file uses some of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use relay_api::ca::DevCa;
use relay_api::coordinator::model::{Deployment, Quote};
use relay_api::coordinator::probe::{BoxFuture, Probe, Probed};
use relay_api::coordinator::store::{NewDeployment, NewSuccessor, PublishedPolicy, RevisionBundle, now_ms};
use relay_api::coordinator::{CoordinatorConfig, Engine, EngineParts, RelayStore};
use relay_api::gateway::{Gateway, GatewayConfig};
use relay_api::hint::{Hint, Stage};
use relay_api::local::LocalCoordinator;
use svc_execution::artifacts::ArtifactStore;
use svc_execution::market::{
    JobOrder, JobState, JobStatus, Market, Placement, Quote as MarketQuote, Refusal, StopMode,
};
use svc_execution::plan::Requirements;

/// Jobs launched on the fake market, by job name (`dep_....rN`: the deployment and the
/// revision it runs): whether each still runs, and an ending the test gave it.
#[derive(Default)]
pub(crate) struct Launched {
    /// By execution ID: its job's name and state.
    pub(crate) jobs: HashMap<String, (String, JobState)>,
    pub(crate) launches: Vec<String>,
    /// Same-job restarts, by name.
    pub(crate) restarts: Vec<String>,
    /// Each launch's workload, in order.
    pub(crate) workloads: Vec<svc_execution::Workload>,
    /// Jobs whose state changed since the scheduler last asked.
    pub(crate) changed: Vec<String>,
    /// How ended jobs ended, where the test said more than a status.
    pub(crate) endings: HashMap<String, svc_execution::market::Exit>,
    /// Where the job names come from.
    pub(crate) store: Option<Arc<RelayStore>>,
    /// Same-job restarts are refused (the processor is full).
    pub(crate) refuse_restarts: bool,
}

impl Launched {
    /// `dep_....rN` (slot 0) or `dep_....rN.S` (slot S): the deployment, revision and slot of
    /// an execution.
    pub(crate) fn name(&self, execution_id: &str) -> String {
        let found = self.store.as_ref().and_then(|s| s.execution_deployment(execution_id).ok().flatten());
        found.map_or_else(
            || execution_id.to_owned(),
            |(d, revision, slot)| match slot {
                0 => format!("{}.r{revision}", d.id),
                n => format!("{}.r{revision}.{n}", d.id),
            },
        )
    }
}

/// A market whose jobs run until the test ends them.
#[derive(Clone, Default)]
pub(crate) struct FakeMarket(pub(crate) Arc<Mutex<Launched>>);

impl FakeMarket {
    pub(crate) fn running(&self) -> Vec<String> {
        let launched = self.0.lock().expect("lock");
        let mut names: Vec<String> = launched
            .jobs
            .values()
            .filter(|(_, state)| *state == JobState::Starting)
            .map(|(name, _)| name.clone())
            .collect();
        names.sort();
        names
    }

    pub(crate) fn end(&self, job: &str, code: i32) {
        let mut launched = self.0.lock().expect("lock");
        let mut ended = Vec::new();
        for (id, (name, state)) in launched.jobs.iter_mut() {
            if name == job && *state == JobState::Starting {
                *state = JobState::Exited(Some(code));
                ended.push(id.clone());
            }
        }
        launched.changed.extend(ended);
    }

    /// Ends `job` as the local pool does one over its memory: its app killed by SIGKILL,
    /// `out_of_memory`.
    pub(crate) fn end_out_of_memory(&self, job: &str) {
        let mut launched = self.0.lock().expect("lock");
        let mut ended = Vec::new();
        for (id, (name, state)) in launched.jobs.iter_mut() {
            if name == job && *state == JobState::Starting {
                *state = JobState::Exited(None);
                ended.push(id.clone());
            }
        }
        let exit = svc_execution::market::Exit {
            part: svc_execution::market::Part::App,
            code: None,
            signal: Some(9),
            out_of_memory: true,
        };
        for id in &ended {
            launched.endings.insert(id.clone(), exit);
        }
        launched.changed.extend(ended);
    }
}

impl Market for FakeMarket {
    fn quote(&self, _: &Requirements, _: &[String], _: u64) -> Result<MarketQuote, Refusal> {
        Ok(MarketQuote::default())
    }
    fn launch(&self, order: &JobOrder) -> Result<Placement, Refusal> {
        let mut launched = self.0.lock().expect("lock");
        let name = launched.name(&order.execution_id);
        if !launched.jobs.contains_key(&order.execution_id) {
            launched.jobs.insert(order.execution_id.clone(), (name.clone(), JobState::Starting));
            launched.launches.push(name);
            launched.workloads.push(order.workload.clone());
            launched.changed.push(order.execution_id.clone());
        }
        Ok(Placement { processor_id: "fake-1".into(), quote: MarketQuote::default() })
    }
    fn restart(&self, order: &JobOrder, _: &str) -> Result<(), Refusal> {
        let mut launched = self.0.lock().expect("lock");
        if launched.refuse_restarts {
            return Err(Refusal::NoProcessor("fake-1 is full".into()));
        }
        let name = launched.name(&order.execution_id);
        launched.jobs.insert(order.execution_id.clone(), (name.clone(), JobState::Starting));
        launched.restarts.push(name);
        launched.changed.push(order.execution_id.clone());
        Ok(())
    }
    fn stop(&self, execution_id: &str, _: StopMode) {
        let mut launched = self.0.lock().expect("lock");
        if let Some((_, state)) = launched.jobs.get_mut(execution_id)
            && !matches!(state, JobState::Exited(_))
        {
            *state = JobState::Exited(None);
            launched.changed.push(execution_id.to_owned());
        }
    }
    fn changes(&self) -> Vec<JobStatus> {
        let mut launched = self.0.lock().expect("lock");
        let changed = std::mem::take(&mut launched.changed);
        changed
            .into_iter()
            .filter_map(|id| {
                let (_, state) = launched.jobs.get(&id)?;
                Some(JobStatus { execution_id: id.clone(), processor_id: "fake-1".into(), state: *state })
            })
            .collect()
    }
    fn jobs(&self) -> Vec<JobStatus> {
        let launched = self.0.lock().expect("lock");
        launched
            .jobs
            .iter()
            .map(|(id, (_, state))| JobStatus {
                execution_id: id.clone(),
                processor_id: "fake-1".into(),
                state: *state,
            })
            .collect()
    }
    fn release(&self, execution_id: &str) {
        self.0.lock().expect("lock").jobs.remove(execution_id);
    }
    fn ending(&self, execution_id: &str) -> Option<svc_execution::market::Exit> {
        self.0.lock().expect("lock").endings.get(execution_id).copied()
    }
}

/// A probe whose verdict per route the test sets (pass by default), slowed by `delay`.
#[derive(Clone, Default)]
pub(crate) struct FakeProbe {
    pub(crate) failing: Arc<Mutex<Vec<String>>>,
    pub(crate) delay: Duration,
    pub(crate) calls: Arc<Mutex<Vec<(String, bool)>>>,
    /// Validations of one replica alone: `<route>#<replica>`.
    pub(crate) replica_calls: Arc<Mutex<Vec<String>>>,
}

impl Probe for FakeProbe {
    fn version(&self) -> &str {
        "route-validation/2"
    }
    fn digest(&self) -> &str {
        "sha256:fake"
    }
    fn validate<'a>(
        &'a self,
        route_id: &'a str,
        _hostname: &'a str,
        _keys: &'a relay_api::coordinator::store::RouteKeys,
        standby: bool,
        replica: Option<&'a str>,
    ) -> BoxFuture<'a, Probed> {
        Box::pin(async move {
            tokio::time::sleep(self.delay).await;
            // `<route>` fails the route; `<route>#<replica>` fails that replica only.
            let asked = replica.map(|name| format!("{route_id}#{name}"));
            match &asked {
                Some(asked) => self.replica_calls.lock().expect("lock").push(asked.clone()),
                None => self.calls.lock().expect("lock").push((route_id.to_owned(), standby)),
            }
            let fails = self.failing.lock().expect("lock").iter().any(|r| r == route_id || Some(r) == asked.as_ref());
            let outcome = if fails {
                Err(Hint::new("health_failing", Stage::Reachability, "GET /health answered 500", "fix the app"))
            } else {
                Ok(serde_json::json!({"healthStatus": 200}))
            };
            Probed { outcome }
        })
    }
    fn check_dns<'a>(&'a self, _: &'a str, _: &'a str, _: &'a str) -> BoxFuture<'a, Vec<Hint>> {
        Box::pin(async { Vec::new() })
    }
}

/// The scheduler's time: the real time, moved ahead by the test (a restart's backoff passes
/// at once). Never behind the real time, which the store's own rules stamp changes with.
#[derive(Default)]
pub(crate) struct AheadClock(pub(crate) std::sync::atomic::AtomicU64);

impl AheadClock {
    pub(crate) fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, std::sync::atomic::Ordering::SeqCst);
    }
}

impl svc_execution::Clock for AheadClock {
    fn now(&self) -> u64 {
        svc_execution::SystemClock.now() + self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

pub(crate) struct World {
    pub(crate) engine: Arc<Engine>,
    /// The engine's gateway: the routes it serves.
    pub(crate) gateway: Arc<Gateway>,
    /// The coordinator's data directory (its SQLite store, unless on another store).
    pub(crate) data: std::path::PathBuf,
    pub(crate) store: Arc<RelayStore>,
    pub(crate) market: FakeMarket,
    pub(crate) clock: Arc<AheadClock>,
    pub(crate) probe: FakeProbe,
    pub(crate) org: String,
    pub(crate) _dir: tempfile::TempDir,
}

pub(crate) fn world(probe: FakeProbe) -> World {
    world_with(probe, |_| {})
}

/// A world whose coordinator configuration `tune` changes first.
pub(crate) fn world_with(probe: FakeProbe, tune: impl FnOnce(&mut CoordinatorConfig)) -> World {
    world_in(probe, tune, None)
}

/// A world on `store` (else on SQLite in its data directory).
pub(crate) fn world_in(
    probe: FakeProbe,
    tune: impl FnOnce(&mut CoordinatorConfig),
    store: Option<Arc<RelayStore>>,
) -> World {
    let dir = tempfile::tempdir().expect("scratch directory");
    let any: SocketAddr = ([127, 0, 0, 1], 0).into();
    let mut config = CoordinatorConfig::new(dir.path().join("relay"), any, any, vec!["svc".into()]);
    config.agent_grace = Duration::ZERO;
    tune(&mut config);
    let (data, jobs) = relay_api::coordinator::prepare_dirs(&config.data_dir).expect("the data and job directories");
    (config.data_dir, config.jobs_dir) = (data.clone(), jobs);
    let store = store.unwrap_or_else(|| Arc::new(RelayStore::open(&data).expect("store")));
    let ca = DevCa::open(&data).expect("the development CA");
    let gateway_ca = ca.cert_path.clone();
    let gateway = Gateway::new(GatewayConfig::new(any, any, any, String::new(), String::new()));
    let market = FakeMarket::default();
    market.0.lock().expect("lock").store = Some(store.clone());
    let clock = Arc::new(AheadClock::default());
    let artifacts = ArtifactStore::open(config.jobs_dir.join("artifacts")).expect("an artifact store");
    let catalog =
        Arc::new(relay_api::catalog::Publisher::open(&data, config.catalog_validity).expect("the catalog's publisher"));
    let engine = Engine::new(EngineParts {
        config,
        store: store.clone(),
        gateway: gateway.clone(),
        signer: LocalCoordinator::new(ca),
        market: Arc::new(market.clone()),
        artifacts,
        probe: Arc::new(probe.clone()),
        tunnel: any,
        gateway_ca,
        agent_api: any,
        public_port: 8443,
        clock: clock.clone(),
        catalog,
    });
    let org = store.invite("acme").expect("an organization");
    World { engine, gateway, data, store, market, clock, probe, org, _dir: dir }
}

pub(crate) const PROJECT: &str = r#"{"version": 1, "name": "shop", "runtime": "node", "app": {"entrypoint": "server.js"},
    "spend": {"ceilingMicros": 5000000}}"#;

/// The app every revision of the tests' deployments runs.
pub(crate) const APP: &str = "// the app";

/// The policy revision `revision` of deployment `id` publishes for `project` (its derived
/// manifest) over the app files [`APP`], as a deploy publishes it.
pub(crate) fn published(project: &str, id: &str, revision: u32) -> PublishedPolicy {
    published_jobs(project, id, revision, 1)
}

/// The same, its manifest asking for `jobs` jobs (the route's replicas).
pub(crate) fn published_jobs(project: &str, id: &str, revision: u32, jobs: u16) -> PublishedPolicy {
    published_edited(project, id, revision, &|manifest| {
        if jobs != 1 {
            manifest["deployment"]["jobs"] = jobs.into();
        }
    })
}

/// The same, its derived manifest changed by `edit` first.
pub(crate) fn published_edited(
    project: &str,
    id: &str,
    revision: u32,
    edit: &dyn Fn(&mut serde_json::Value),
) -> PublishedPolicy {
    let project = relay_api::project::read(project).expect("a valid project");
    let mut manifest = project.manifest_v5(None).expect("a derived manifest");
    edit(&mut manifest);
    let digest = svc_execution::artifacts::bundle_digest([("server.js", APP.as_bytes())]);
    relay_api::coordinator::policy::publish(&manifest, &project, id, revision, &digest, |f| f == "server.js")
        .expect("published")
}

/// Revision `revision` of `shop` (deployment `id`, [`PROJECT`]) deployed as a successor, on
/// route `rt_shop_r<revision>`, publishing `policy`.
pub(crate) fn shop_successor(id: &str, revision: u32, policy: PublishedPolicy) -> NewSuccessor {
    NewSuccessor {
        deployment_id: id.to_owned(),
        revision,
        project_json: PROJECT.into(),
        project_digest: format!("sha256:r{revision}"),
        manifest_digest: "sha256:m".into(),
        ceiling_micros: 5_000_000,
        route_id: format!("rt_shop_r{revision}"),
        policy,
        bundle: app_bundle(),
    }
}

/// The app's files a revision records (as written into the data directory below).
pub(crate) fn app_bundle() -> RevisionBundle {
    RevisionBundle { files: vec![("server.js".to_owned(), APP.as_bytes().to_vec())], ..RevisionBundle::default() }
}

impl World {
    /// A deployment of project `name`, funded for two periods.
    pub(crate) fn funded(&self, name: &str) -> Deployment {
        self.funded_project(name, &PROJECT.replace("shop", name))
    }

    /// A deployment of project `name` (its file `project`), funded for two periods.
    pub(crate) fn funded_project(&self, name: &str, project: &str) -> Deployment {
        self.funded_with(name, project, &[])
    }

    /// The same, with these secrets deployed.
    pub(crate) fn funded_with(&self, name: &str, project: &str, secrets: &[(&str, &str)]) -> Deployment {
        self.funded_jobs(name, project, secrets, 1)
    }

    /// The same, its policy running `jobs` jobs (the route's replicas).
    pub(crate) fn funded_jobs(&self, name: &str, project: &str, secrets: &[(&str, &str)], jobs: u16) -> Deployment {
        self.funded_policy(name, project, secrets, &|id| published_jobs(project, id, 1, jobs))
    }

    /// The same, its first revision publishing `policy(id)`.
    pub(crate) fn funded_policy(
        &self,
        name: &str,
        project: &str,
        secrets: &[(&str, &str)],
        policy: &dyn Fn(&str) -> PublishedPolicy,
    ) -> Deployment {
        self.funded_periods(name, project, secrets, policy, 3600)
    }

    /// The same, its two funded periods `period_secs` long each.
    pub(crate) fn funded_periods(
        &self,
        name: &str,
        project: &str,
        secrets: &[(&str, &str)],
        policy: &dyn Fn(&str) -> PublishedPolicy,
        period_secs: u64,
    ) -> Deployment {
        let id = format!("dep_{:0>16}", name.len() + self.store.deployments_of(&self.org).expect("list").len());
        let d = self
            .store
            .create_deployment(&NewDeployment {
                id: id.clone(),
                org_id: self.org.clone(),
                project: name.into(),
                project_json: project.to_owned(),
                project_digest: "sha256:one".into(),
                manifest_digest: "sha256:m".into(),
                canonical_hostname: format!("{name}-acme.localhost"),
                route_id: format!("rt_{name}"),
                ceiling_micros: 5_000_000,
                gateway_operator: "local".into(),
                hostnames: Vec::new(),
                quote: None,
                policy: policy(&id),
                bundle: RevisionBundle {
                    secrets: secrets.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
                    ..app_bundle()
                },
            })
            .expect("created");
        let quote = Quote {
            id: format!("quo_{name}"),
            deployment_id: d.id.clone(),
            project_digest: d.project_digest.clone(),
            hostnames: vec![d.canonical_hostname.clone()],
            price_micros: 250_000,
            period_secs,
            periods: 2,
            total_micros: 500_000,
            created_at: now_ms(),
            expires_at: now_ms() + 60_000,
            funded_at: None,
        };
        self.store.add_quote(&quote).expect("quote");
        self.store.fund(&d.id, &quote.id, std::slice::from_ref(&d.canonical_hostname), now_ms()).expect("funded");
        // The app's files of the revisions the tests make: each job is launched from them.
        for revision in 1..=3 {
            let app = self.engine.config().deployments_dir().join(&d.id).join(format!("r{revision}")).join("app");
            std::fs::create_dir_all(&app).expect("mkdir");
            std::fs::write(app.join("server.js"), APP).expect("write");
        }
        d
    }

    pub(crate) fn deployment(&self, id: &str) -> Deployment {
        self.store.deployment(id).expect("the deployment")
    }

    /// Ticks until `done` holds, at most `ticks` times; whether it did.
    pub(crate) async fn tick_until(&self, ticks: usize, done: impl Fn(&World) -> bool) -> bool {
        for _ in 0..ticks {
            if done(self) {
                return true;
            }
            self.engine.tick().await;
        }
        done(self)
    }
}

/// Sends `request` to the relay API in process: (status, JSON body).
pub(crate) async fn send(
    router: &axum::Router,
    request: axum::http::Request<axum::body::Body>,
) -> (u16, serde_json::Value) {
    use http_body_util::BodyExt as _;
    use tower_service::Service as _;
    let mut service = router.clone();
    std::future::poll_fn(|cx| {
        tower_service::Service::<axum::http::Request<axum::body::Body>>::poll_ready(&mut service, cx)
    })
    .await
    .expect("ready");
    let response = service.call(request).await.expect("an answer");
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.expect("the body").to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
}
