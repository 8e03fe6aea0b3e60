//! The engine moves deployments through their states. Their jobs are the scheduler's
//! (`svc_execution`, the same `decide` and executor as a published application's, over the
//! relay's store: [`super::scheduling`]) on the ingress market ([`super::ingress_market`]):
//! launches, same-job restarts with backoff, a redeploy's rollout
//! (`stop_when_successor_ready`), and stopping what is not funded. The engine keeps what is
//! the relay's: it funds periods while live, validates routes through the public path on an
//! interval (a pass makes a job ready), follows each deployment's serving job into its state,
//! keeps the gateway's routes equal to the running deployments, re-checks pending customer
//! hostnames, and copies the jobs' output into the deployment logs. One loop; each decision
//! is a store transaction.
//!
//! This file is the loop (lead, tick, step each deployment); each concern has its module,
//! each adding to `impl Engine`:
//!
//! - [`agenda`]: which deployments a tick steps (a settled live one only when due);
//! - [`lease`]: which coordinator runs the jobs, and standing by;
//! - [`launch`], [`keys`]: equipping a revision's jobs, their route keys;
//! - [`replicas`], [`redeploy`], [`switch`]: several jobs per route, successors, the switch;
//! - [`routes`]: the gateway's route table;
//! - [`pricing`]: quotes and funding;
//! - [`hostnames`]: public URLs, customer hostnames' DNS;
//! - [`validation`]: when and how routes are validated through the public path;
//! - [`hints`]: what to fix, ranked;
//! - [`logs`]: the jobs' output in the deployment logs;
//! - [`policies`]: publishing the policies of revisions deployed before policies were.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;

mod agenda;
mod hints;
mod hostnames;
mod keys;
mod launch;
mod lease;
mod logs;
mod policies;
mod pricing;
mod redeploy;
mod replicas;
mod routes;
pub mod switch;
mod validation;

use agenda::{Agenda, Pace, Plan};
use logs::by_part;
use switch::{HostAck, SWITCH_BOUND, Switch, Want, may_switch};
use validation::{Due, FIRST_VALIDATION_WINDOW_MS};

use super::ingress_market::IngressMarket;
use super::model::{Deployment, SuccessorState};
use super::probe::Probe;
use super::state::DeploymentState;
use super::store::{RelayStore, StoreError, now_ms};
use super::{AgentCertificates, CoordinatorConfig};
use crate::gateway::Gateway;
use crate::local::LocalCoordinator;
use svc_execution::artifacts::ArtifactStore;
use svc_execution::executor::Executor;
use svc_execution::market::Market;
use svc_execution::money::usd;
use svc_execution::{ExecState, Execution};

/// How often the loop looks at every deployment.
const TICK: Duration = Duration::from_millis(250);

/// Every this many ticks (10 s), the files of stopped deployments are removed.
const SWEEP_EVERY: u32 = 40;

/// Why a deployment's job is launched again when a coordinator starts to run the jobs.
pub(super) const COORDINATOR_CHANGED: &str =
    "the coordinator restarted (or another took its jobs over); relaunching the job";

/// The failure code (and hint) of a deployment whose job kept ending.
pub const JOB_EXITED: &str = "job_exited";

/// What the engine is built from: its configuration and store, the gateway whose routes it
/// keeps, the signer that certifies its jobs' names, where jobs run ([`Market`]) and how
/// routes are looked at ([`Probe`]), and the addresses its jobs' agents are given. A test
/// builds one with a simulated market and a fake probe and drives it with [`Engine::tick`].
pub struct EngineParts {
    /// The coordinator's configuration.
    pub config: CoordinatorConfig,
    /// The store.
    pub store: Arc<RelayStore>,
    /// The gateway whose routes are the running deployments'.
    pub gateway: Arc<Gateway>,
    /// The development CA's signer (it learns the routes' names and credentials too).
    pub signer: Arc<LocalCoordinator>,
    /// Where jobs run: the processor market (locally, a pool of confined processes).
    pub market: Arc<dyn Market>,
    /// Where a revision's app files are stored, by digest, for its jobs to be launched from
    /// (the market's artifact store).
    pub artifacts: ArtifactStore,
    /// How routes and hostnames are looked at from outside.
    pub probe: Arc<dyn Probe>,
    /// The gateway's tunnel address, for the agents.
    pub tunnel: SocketAddr,
    /// The CA file that signed the tunnel's certificate, for the agents.
    pub gateway_ca: PathBuf,
    /// The agent-facing API (certificates, route hostnames), for the agents.
    pub agent_api: SocketAddr,
    /// The gateway's public port (in URLs).
    pub public_port: u16,
    /// The scheduler's time (restart backoffs, windows): [`svc_execution::SystemClock`], or a
    /// test's clock.
    pub clock: Arc<dyn svc_execution::Clock>,
    /// The signed service catalog's publisher: customers read the catalog, and agents check
    /// the gateway hosts they are told of against it.
    pub catalog: Arc<crate::catalog::Publisher>,
}

/// Deployments stepped at once in one tick: one whose probe is slow holds one of these, not
/// the others.
pub const STEP_CONCURRENCY: usize = 16;

/// The coordinator's engine.
pub struct Engine {
    parts: EngineParts,
    /// The scheduler's decisions for every deployment, carried out on `market`.
    executor: Executor,
    /// The last error getting the signed catalog for the agents (said once).
    catalog_failing: std::sync::Mutex<Option<String>>,
    /// The jobs' market: the parts' market, equipped by `launcher`.
    market: Arc<IngressMarket>,
    /// Equips each job with its agent, and knows what each job it equipped is.
    launcher: Arc<launch::Launcher>,
    /// How each job that ended ended (`the app was killed by signal 9`), by execution ID,
    /// until its deployment's step has said so.
    endings: std::sync::Mutex<HashMap<String, String>>,
    /// Revisions (deployment, revision) whose policy could not be published: said once.
    unpublishable: std::sync::Mutex<std::collections::HashSet<(String, u32)>>,
    /// Whether every revision an older store left without a policy has one now
    /// ([`policies`]): the fix-up is not run again.
    policies_published: std::sync::atomic::AtomicBool,
    /// What each replica's own validation found, for routes of several jobs.
    replica_verdicts: std::sync::Mutex<replicas::ReplicaVerdicts>,
    /// When each route is next validated, by route ID (a redeploy's successor has its own).
    validate_at: std::sync::Mutex<HashMap<String, Due>>,
    /// Held while the routes are read and set, so that concurrent steps set them in order.
    syncing: tokio::sync::Mutex<()>,
    wake: Notify,
    /// Which deployments the leader's next tick steps ([`agenda`]).
    agenda: std::sync::Mutex<Agenda>,
    /// Whether the store's engine sequence is to be moved on (an operation woke the engine):
    /// the lease holder, here or on another coordinator, steps every deployment again.
    tell_leader: std::sync::atomic::AtomicBool,
    /// Wakes the task that moves the engine sequence on.
    told: Notify,
    /// Whether the engine's last look at the store found it out of reach: an outage is
    /// logged once when it starts and once when it ends, not at every tick of it (issue 41).
    store_out: std::sync::atomic::AtomicBool,
    /// The health route's latest check of the store, shared by its probes.
    health: svc_http::StoreCheck,
    /// This coordinator's claim on the engine lease.
    lease: lease::Lease,
    /// Set once the coordinator stops: requests held for a change (the route feed) are
    /// answered at once, not left to the listener's drain.
    stopping: tokio::sync::watch::Sender<bool>,
    /// The route feed's sequence as this coordinator last knew it: held feed requests wait
    /// for it to move (issue 41). Moved by this engine's own changes at once, and by others'
    /// through the store ([`super::feed`] looks at it while requests are held).
    feed_seq: tokio::sync::watch::Sender<u64>,
    /// The digest of what the hosts' tables were made of when this engine last set its
    /// routes: the sequence moves on when it changes.
    feed_digest: std::sync::Mutex<Option<String>>,
    /// Whether the look at the store's feed sequence runs (one per engine).
    pub(super) feed_watched: std::sync::atomic::AtomicBool,
}

/// The name of slot `slot`'s job of a revision among the running jobs (and in the runner's
/// messages): `<id>.r<revision>` for the first slot, `<id>.r<revision>.<slot>` for the others.
fn job_key(id: &str, revision: u32, slot: u16) -> String {
    match slot {
        0 => format!("{id}.r{revision}"),
        n => format!("{id}.r{revision}.{n}"),
    }
}

/// The replica name of slot `slot`'s agent, as the gateway counts it: `job-<slot>`.
pub(crate) fn replica_name(slot: u16) -> String {
    format!("job-{slot}")
}

/// Whether an execution's job has been placed and runs (or is being restarted).
fn placed(e: &Execution) -> bool {
    matches!(e.state, ExecState::Running | ExecState::Ready | ExecState::Restarting)
}

/// Whether an execution's job ended by itself (an exit, a kill, lost).
fn ended(e: &Execution) -> bool {
    matches!(e.state, ExecState::Failed | ExecState::Completed)
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over `parts`; [`Engine::run`] is its loop.
    pub fn new(parts: EngineParts) -> Arc<Engine> {
        let launcher = Arc::new(launch::Launcher {
            config: parts.config.clone(),
            store: parts.store.clone(),
            artifacts: parts.artifacts.clone(),
            tunnel: parts.tunnel,
            gateway_ca: parts.gateway_ca.clone(),
            agent_api: parts.agent_api,
            jobs: std::sync::Mutex::default(),
            keys: std::sync::Mutex::default(),
            gateway: parts.gateway.clone(),
            catalog: parts.catalog.clone(),
        });
        let market = Arc::new(IngressMarket::new(parts.market.clone(), launcher.clone()));
        let max_restarts = u8::try_from(parts.config.restarts.max_restarts).unwrap_or(u8::MAX);
        let lease = lease::Lease::new(parts.public_port);
        let scheduling = super::scheduling::Scheduling::new(
            parts.store.clone(),
            parts.config.deployments_dir(),
            max_restarts,
            lease.holder.clone(),
        );
        let executor =
            Executor::new(Arc::new(scheduling), market.clone(), parts.clock.clone(), super::scheduling::BATCH);
        Arc::new(Engine {
            parts,
            catalog_failing: std::sync::Mutex::default(),
            executor,
            market,
            launcher,
            endings: std::sync::Mutex::default(),
            unpublishable: std::sync::Mutex::default(),
            policies_published: std::sync::atomic::AtomicBool::new(false),
            replica_verdicts: std::sync::Mutex::default(),
            validate_at: std::sync::Mutex::new(HashMap::new()),
            syncing: tokio::sync::Mutex::new(()),
            wake: Notify::new(),
            agenda: std::sync::Mutex::default(),
            tell_leader: std::sync::atomic::AtomicBool::new(false),
            told: Notify::new(),
            store_out: std::sync::atomic::AtomicBool::new(false),
            health: svc_http::StoreCheck::default(),
            lease,
            stopping: tokio::sync::watch::Sender::new(false),
            feed_seq: tokio::sync::watch::Sender::new(0),
            feed_digest: std::sync::Mutex::new(None),
            feed_watched: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The route feed's sequence as this coordinator knows it, to wait for it to move.
    pub(super) fn feed_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.feed_seq.subscribe()
    }

    /// The route feed's sequence is `seq` (or later): held feed requests look again.
    pub(super) fn feed_changed(&self, seq: u64) {
        self.feed_seq.send_if_modified(|known| {
            let newer = seq > *known;
            if newer {
                *known = seq;
            }
            newer
        });
    }

    /// Marks the coordinator as stopping (its listener drains now).
    pub fn begin_stopping(&self) {
        self.stopping.send_replace(true);
    }

    /// Completes once the coordinator is stopping.
    pub async fn stopping(&self) {
        let mut stopping = self.stopping.subscribe();
        let _ = stopping.wait_for(|s| *s).await;
    }

    /// The store.
    pub fn store(&self) -> &RelayStore {
        &self.parts.store
    }

    /// The health route's latest check of the store.
    pub fn health(&self) -> &svc_http::StoreCheck {
        &self.health
    }

    /// Runs a store operation off the async runtime ([`super::blocking`]).
    fn db<T>(&self, operation: impl FnOnce(&RelayStore) -> T) -> T {
        let store = self.store();
        super::blocking(|| operation(store))
    }

    /// The configuration.
    pub fn config(&self) -> &CoordinatorConfig {
        &self.parts.config
    }

    /// The signed service catalog's publisher.
    pub(crate) fn catalog(&self) -> &crate::catalog::Publisher {
        &self.parts.catalog
    }

    /// Looks at every deployment now instead of at the next tick: what an operation that
    /// changed one calls. The lease holder learns of it too when it is another coordinator
    /// (through the store's engine sequence, moved on by [`Engine::run`]).
    pub fn wake(&self) {
        self.wake_here();
        self.tell_leader.store(true, std::sync::atomic::Ordering::Relaxed);
        self.told.notify_one();
    }

    /// Steps every deployment at the next tick, which comes now: the engine's own wake (its
    /// changes are its own to know).
    fn wake_here(&self) {
        if let Ok(mut agenda) = self.agenda.lock() {
            agenda.wake_all();
        }
        self.wake.notify_one();
    }

    /// Steps deployment `id` at the next tick, which comes now (its job changed).
    fn wake_for(&self, id: &str) {
        if let Ok(mut agenda) = self.agenda.lock() {
            agenda.wake_for(id);
        }
        self.wake.notify_one();
    }

    /// Moves the store's engine sequence on after each [`Engine::wake`], for the lease holder
    /// to step every deployment again (on this coordinator or another on the database). A
    /// store out of reach is tried again each second.
    async fn tell_the_leader(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        loop {
            self.told.notified().await;
            while self.tell_leader.swap(false, Relaxed) {
                if let Err(e) = self.db(|store| store.bump_engine_seq()) {
                    tracing::debug!("svc relay: moving the engine sequence on (again in 1 s): {e}");
                    self.tell_leader.store(true, Relaxed);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// A revision's directory in the data directory: its app files (`app/`), its secrets
    /// (`secrets.json`). Its jobs' output goes to the store's logs.
    fn revision_dir(&self, deployment_id: &str, revision: u32) -> PathBuf {
        super::files::revision_dir(&self.parts.config.deployments_dir(), deployment_id, revision)
    }

    /// Removes a revision's files and its job's state (its job has stopped for good).
    fn remove_revision(&self, deployment_id: &str, revision: u32) {
        let config = &self.parts.config;
        super::files::remove_revision(&config.deployments_dir(), &config.jobs_dir, deployment_id, revision);
    }

    /// Removes the stored app files no running job was launched from (each launch stores its
    /// revision's files again, so a job restarted later finds them).
    fn sweep_artifacts(&self) {
        let keep = self.launcher.artifacts();
        let removed = super::blocking(|| self.parts.artifacts.retain(&keep));
        if removed > 0 {
            tracing::debug!("svc relay: removed {removed} job artifacts no job runs");
        }
    }

    /// The engine's loop (runs until the task is aborted): it stands by until this
    /// coordinator holds the engine lease, takes the jobs over, runs them while it keeps the
    /// lease, and stands by again if it loses it ([`lease`]).
    pub async fn run(self: Arc<Self>) {
        let engine = async {
            loop {
                self.wait_for_lease().await;
                if self.take_the_jobs_over().await {
                    self.lead().await;
                }
                self.step_down().await;
            }
        };
        tokio::join!(engine, self.tell_the_leader());
    }

    /// What a coordinator does first when its engine starts to lead: the jobs of the last
    /// leader (this coordinator's last run, or another coordinator) ended with it, so each
    /// deployment that should run is launched again. `false` if the lease was lost meanwhile.
    async fn take_the_jobs_over(&self) -> bool {
        if !self.lease_valid_within(Duration::ZERO).await {
            return false;
        }
        if let Ok(active) = self.db(|store| store.active_deployments()) {
            self.publish_missing_policies(&active);
        }
        // The scheduler's recovery records the jobs the last leader ran as ended with it
        // (`processor_restarted`), and their slots get a new attempt. Before any step: a step
        // over unrecovered records would wait for jobs the empty pool does not have (review
        // finding).
        loop {
            if !self.lease_valid_within(Duration::from_secs(60)).await {
                if self.lease.lost() {
                    return false;
                }
                continue;
            }
            match super::blocking(|| self.executor.recover()) {
                Ok(report) => {
                    if report != Default::default() {
                        tracing::info!(
                            relaunched = report.relaunched,
                            lost = report.lost,
                            "svc relay: the scheduler recovered the jobs of the last leader"
                        );
                    }
                    break;
                }
                Err(e) => {
                    tracing::error!("svc relay: recovering the jobs of the last leader (again in 1 s): {e}");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
        // Every active deployment is decided again now (one stopped with the last leader
        // while provisioning has nothing else to wake it: review finding).
        if let Ok(active) = self.db(|store| store.active_deployments()) {
            for d in &active {
                let _ = self.db(|store| store.wake_scheduler(&d.id));
            }
            for d in active.into_iter().filter(|d| d.state.runs_job()) {
                let _ = self.db(|store| store.transition(&d.id, DeploymentState::Provisioning, COORDINATOR_CHANGED));
            }
        }
        self.restart_successors();
        true
    }

    /// Ticks while this coordinator keeps the engine lease; returns once it has lost it.
    /// While the lease cannot be renewed (the database out of reach), the jobs go on serving
    /// and nothing is stepped.
    async fn lead(&self) {
        let mut ticks: u32 = 0;
        loop {
            if self.lease.lost() {
                return;
            }
            if !self.lease.valid() {
                self.pause(TICK).await;
                continue;
            }
            self.tick_due().await;
            ticks = ticks.wrapping_add(1);
            if ticks.is_multiple_of(SWEEP_EVERY) {
                let config = &self.parts.config;
                // Directory walks and store reads: off the runtime's workers too.
                self.db(|store| super::files::sweep(store, &config.deployments_dir(), &config.jobs_dir, false));
                self.sweep_artifacts();
            }
            self.pause(TICK).await;
        }
    }

    /// One look at every deployment: reap ended jobs, step each deployment (and its
    /// successor), drain predecessors, stop jobs nothing needs, set the gateway's routes, copy
    /// the jobs' output. [`Engine::tick_due`] does it when woken and at least every 30 s; a
    /// test calls it directly, one step at a time.
    pub async fn tick(&self) {
        self.schedule();
        self.drain();
        self.record_ended();
        self.step_all().await;
    }

    /// What [`Engine::run`] does every 250 ms, or at once when woken: reap ended jobs, drain
    /// predecessors, then step what the agenda says ([`agenda`]): every deployment after an
    /// event, else those in motion and the settled ones whose time came. The routes are set
    /// again only when a step may have changed them (else every 30 s at most).
    pub async fn tick_due(&self) {
        self.schedule();
        self.drain();
        self.record_ended();
        match self.db(|store| store.engine_seq()) {
            Ok(seq) => {
                // After an outage every deployment is stepped (said once, by that full tick).
                let back = self.store_out.load(std::sync::atomic::Ordering::Relaxed);
                if let Ok(mut agenda) = self.agenda.lock() {
                    agenda.seq_seen(seq);
                    if back {
                        agenda.wake_all();
                    }
                }
            }
            Err(e) => {
                self.store_failed("reading the engine sequence", &e);
                return;
            }
        }
        let plan = match self.agenda.lock() {
            Ok(mut agenda) => agenda.take(std::time::Instant::now()),
            Err(_) => Plan::All,
        };
        let these = match plan {
            Plan::All => return self.step_all().await,
            Plan::These(these) => these,
        };
        let changed = std::sync::atomic::AtomicBool::new(false);
        futures_util::stream::iter(&these)
            .for_each_concurrent(STEP_CONCURRENCY, |id| async {
                if self.step_one(id).await {
                    changed.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            })
            .await;
        let now = std::time::Instant::now();
        let sync =
            self.agenda.lock().map_or(true, |mut agenda| agenda.sync_due(now, changed.into_inner(), self.sync_every()));
        if sync {
            self.sync_routes().await;
        }
        let serving = self.agenda.lock().map(|agenda| agenda.serving()).unwrap_or_default();
        self.tail_logs(&serving.iter().map(|(id, revision)| (id.as_str(), *revision)).collect()).await;
    }

    /// When deployment `id` is next stepped, if it is settled (not in motion, nor waiting for
    /// an event): what its last step left on the agenda.
    pub fn settled_until(&self, id: &str) -> Option<std::time::Instant> {
        match self.agenda.lock().ok()?.pace_of(id)? {
            Pace::At(at) => Some(at),
            Pace::Hot | Pace::OnEvent => None,
        }
    }

    /// How often the routes are set again while nothing changed: often enough for the agents'
    /// catalog to be signed again in time ([`routes`]' `with_catalog`).
    fn sync_every(&self) -> Duration {
        agenda::SYNC_EVERY.min(self.parts.config.catalog_validity / 4)
    }

    /// Steps deployment `id` alone (read again first) and places it on the agenda: whether the
    /// routes may have changed (anything but a settled deployment's step that left it settled).
    async fn step_one(&self, id: &str) -> bool {
        let was_settled = self.agenda.lock().is_ok_and(|agenda| agenda.settled(id));
        let read = self.db(|store| Ok::<_, StoreError>((store.deployment(id)?, store.successor(id)?)));
        let (d, successor) = match read {
            Ok(read) => read,
            Err(StoreError::NotFound(_)) => {
                if let Ok(mut agenda) = self.agenda.lock() {
                    agenda.forget(id);
                }
                return true;
            }
            Err(e) => {
                self.store_failed("reading a deployment", &e);
                return false;
            }
        };
        if d.state.is_terminal() {
            if let Ok(mut agenda) = self.agenda.lock() {
                agenda.forget(id);
            }
            return true;
        }
        let pace = self.step_deployment(&d, successor.as_ref()).await;
        if let Ok(mut agenda) = self.agenda.lock() {
            agenda.place(id, d.revision, pace);
        }
        !(was_settled && matches!(pace, Pace::At(_)))
    }

    /// Steps every active deployment, places each on the agenda, and sets the routes.
    async fn step_all(&self) {
        let active = match self.db(|store| store.active_deployments()) {
            Ok(a) => a,
            Err(e) => {
                self.store_failed("reading deployments", &e);
                return;
            }
        };
        let successors: HashMap<String, super::model::Successor> = match self.db(|store| store.successors()) {
            Ok(s) => s.into_iter().map(|s| (s.deployment_id.clone(), s)).collect(),
            Err(e) => {
                self.store_failed("reading successors", &e);
                return;
            }
        };
        if self.store_out.swap(false, std::sync::atomic::Ordering::Relaxed) {
            tracing::info!("svc relay: the database answers again; the deployments are stepped again");
        }
        self.publish_missing_policies(&active);
        // Each deployment is stepped on its own; a slow probe holds one of these slots.
        let successors = &successors;
        futures_util::stream::iter(&active)
            .for_each_concurrent(STEP_CONCURRENCY, |d| async move {
                let pace = self.step_deployment(d, successors.get(&d.id)).await;
                if let Ok(mut agenda) = self.agenda.lock() {
                    agenda.place(&d.id, d.revision, pace);
                }
            })
            .await;
        if let Ok(mut agenda) = self.agenda.lock() {
            agenda.keep_only(&active.iter().map(|d| d.id.as_str()).collect::<HashSet<&str>>());
            agenda.sync_due(std::time::Instant::now(), true, self.sync_every());
        }
        self.sync_routes().await;
        let serving: HashMap<&str, u32> = active.iter().map(|d| (d.id.as_str(), d.revision)).collect();
        self.tail_logs(&serving).await;
    }

    /// A look at the store that failed: a database out of reach is said once per outage (a
    /// warning: the jobs go on serving), any other failure every time.
    fn store_failed(&self, what: &str, e: &(dyn std::error::Error + 'static)) {
        let unavailable = e.downcast_ref::<StoreError>().is_some_and(|e| matches!(e, StoreError::Unavailable(_)));
        if !unavailable {
            tracing::error!("svc relay: {what}: {e}");
        } else if !self.store_out.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(
                "svc relay: the database is out of reach ({what}: {e}); the jobs go on serving, and the deployments \
                 are stepped once it answers (said again then)"
            );
        }
    }

    /// Steps the scheduler until nothing more is due now (a few batches at most per tick):
    /// what [`Engine::tick`] does first, on its own (the deployments are not stepped).
    pub fn schedule(&self) {
        for _ in 0..8 {
            let stepped = super::blocking(|| self.executor.step());
            if let Ok(report) = &stepped
                && report.decided + report.launched + report.stopped + report.recorded > 0
                && let Ok(mut agenda) = self.agenda.lock()
            {
                // A job moved (started, ready, ended, restarted, stopped): every deployment is
                // stepped at the next tick.
                agenda.wake_all();
            }
            match stepped {
                Ok(report) if report.more => {}
                Ok(_) => return,
                Err(e) => {
                    self.store_failed("the scheduler", e.0.as_ref());
                    return;
                }
            }
        }
    }

    /// Stops the jobs whose drain is over (their route's connections ended, or their time is
    /// up), and says so in their deployments' logs.
    fn drain(&self) {
        let drained = super::blocking(|| self.market.drain());
        if !drained.is_empty() {
            // Recorded stopped at once, so the deployment reads as converged when it is.
            self.schedule();
        }
        for drained in drained {
            let Some(meta) = self.launcher.meta(&drained.execution_id) else { continue };
            let line = match drained.cut {
                0 => format!("revision {} stopped: its connections had ended", meta.revision),
                n => format!(
                    "revision {} stopped after {} s; {n} connections were cut",
                    meta.revision,
                    super::ingress_market::DRAIN_LIMIT.as_secs()
                ),
            };
            let _ = self.db(|store| store.append_logs(&meta.deployment, "route", &[line]));
            // Its processes are gone: the files of a revision replaced go with them.
            self.remove_if_replaced(&meta.deployment, meta.revision, Some(&drained.execution_id));
        }
    }

    /// Removes revision `revision`'s files if it is neither what the deployment serves nor a
    /// successor still deployed, and no job of it runs (`gone`: a job whose processes are
    /// gone, whatever its record says yet).
    pub(super) fn remove_if_replaced(&self, deployment_id: &str, revision: u32, gone: Option<&str>) {
        let Ok(d) = self.db(|store| store.deployment(deployment_id)) else { return };
        // A read that fails removes nothing: the files may be a successor's.
        let Ok(successor) = self.db(|store| store.successor(&d.id)) else { return };
        let deployed = successor.is_some_and(|s| s.revision == revision && s.state != SuccessorState::Failed);
        let running = self.db(|store| store.current_executions(&d.id, d.revision)).map_or(true, |executions| {
            executions.iter().any(|e| {
                e.policy_version == u64::from(revision) && e.state.is_live() && Some(e.execution_id.as_str()) != gone
            })
        });
        if revision != d.revision && !deployed && !running {
            self.remove_revision(&d.id, revision);
        }
    }

    /// Logs how each job that ended ended, with its last output; removes the files of a
    /// revision whose last job this was (neither served nor deployed any more).
    fn record_ended(&self) {
        for ended in self.market.take_ended() {
            // A same-job restart equipped since it ended keeps its record (review finding).
            let restarted = self.market.jobs().iter().any(|j| {
                j.execution_id == ended.execution_id
                    && matches!(j.state, svc_execution::JobState::Starting | svc_execution::JobState::Ready)
            });
            let meta = if restarted {
                self.launcher.meta(&ended.execution_id)
            } else {
                self.launcher.forget(&ended.execution_id)
            };
            let Some(meta) = meta else { continue };
            self.wake_for(&meta.deployment);
            let Ok(d) = self.db(|store| store.deployment(&meta.deployment)) else { continue };
            let output = by_part(ended.output);
            self.record_output(&meta, d.revision, output);
            if let Some(exit) = ended.ending
                && let Ok(mut endings) = self.endings.lock()
            {
                // Read by the deployment's next step, if it cares (a serving job's ending);
                // the others must not pile up.
                if endings.len() >= 1024 {
                    endings.clear();
                }
                endings.insert(ended.execution_id.clone(), exit.to_string());
            }
            self.remove_if_replaced(&d.id, meta.revision, Some(&ended.execution_id));
        }
    }

    /// How execution `e` ended, in words (from the market, else from its record).
    fn ending_of(&self, e: &Execution) -> String {
        let told = self.endings.lock().ok().and_then(|mut endings| endings.remove(&e.execution_id));
        told.unwrap_or_else(|| match &e.reason {
            Some(r) => r.message.clone(),
            None => "the job ended".to_owned(),
        })
    }

    /// Steps one deployment: a successor takes over at once if nothing serves, then the
    /// deployment's state moves, then its successor's. Its pace on the agenda: hot while it
    /// has a successor or its step failed.
    async fn step_deployment(&self, d: &Deployment, successor: Option<&super::model::Successor>) -> Pace {
        let successor = successor.filter(|s| s.state != SuccessorState::Failed);
        let taken;
        let d = match successor {
            Some(s) if !d.state.spends() => match self.take_over_at_once(d, s).await {
                Ok(promoted) => {
                    taken = promoted;
                    &taken
                }
                Err(e) => {
                    let _ = self.db(|store| store.append_logs(&d.id, "route", &[format!("engine: {}", told(&e))]));
                    return Pace::Hot;
                }
            },
            _ => d,
        };
        let stepped = self.step(d).await;
        if let Err(e) = &stepped {
            // Stopped while its step ran: the change the step meant no longer applies, and is
            // no news to the customer.
            let stopped = matches!(e, StoreError::Transition(_))
                && self.db(|store| store.deployment(&d.id)).is_ok_and(|now| now.state.is_terminal());
            if !stopped {
                let _ = self.db(|store| store.append_logs(&d.id, "route", &[format!("engine: {}", told(e))]));
            }
        }
        // Read again, after the step (its probe may have waited), and only with a successor to
        // step: most deployments have none, and this read was one per deployment per tick.
        let Some(s) = successor.filter(|s| s.revision > d.revision) else {
            return match (successor, stepped) {
                (None, Ok(pace)) => pace,
                _ => Pace::Hot,
            };
        };
        // Not stepped on a failed read: no jobs read is not no jobs running.
        let Ok(executions) = self.db(|store| store.current_executions(&d.id, d.revision)) else { return Pace::Hot };
        if let Err(e) = self.step_successor(d, s, &executions).await {
            let _ = self.db(|store| {
                store.append_logs(&d.id, "route", &[format!("engine: revision {}: {}", s.revision, told(&e))])
            });
        }
        Pace::Hot
    }

    /// When a settled live deployment is next due: its route's next validation, or the end of
    /// its period under way, whichever comes first.
    fn due_at(&self, d: &Deployment) -> Pace {
        let now = std::time::Instant::now();
        let validation = self.validate_at.lock().ok().and_then(|at| at.get(&d.route_id).map(validation::Due::at));
        let period = d.next_period_at.map(|end| {
            let left = u64::try_from(end.saturating_sub(now_ms())).unwrap_or(0);
            now + Duration::from_millis(left)
        });
        match validation.into_iter().chain(period).min() {
            Some(at) => Pace::At(at),
            None => Pace::Hot,
        }
    }

    /// Moves deployment `d` along; its pace on the agenda afterwards: settled only when it is
    /// live with every replica validated and nothing changed in this step.
    async fn step(&self, d: &Deployment) -> Result<Pace, StoreError> {
        let price = self.parts.config.price_micros;
        match d.state {
            DeploymentState::PendingFunding => {
                let available = self.db(|store| store.balance(&d.id))?.available_micros;
                if available >= price {
                    self.db(|store| {
                        store.transition(
                            &d.id,
                            DeploymentState::Provisioning,
                            &format!("funded: {} available", usd(available)),
                        )
                    })?;
                    self.wake_here();
                    return Ok(Pace::Hot);
                }
                // Funding is an operation, which wakes the engine.
                Ok(Pace::OnEvent)
            }
            DeploymentState::Provisioning => {
                // The scheduler launches it (or restarts it after its backoff).
                let executions = self.db(|store| store.current_executions(&d.id, d.revision))?;
                let jobs = replicas::newest_per_slot(&executions, d.revision);
                // The first replica placed starts the validation. With none placed, none on its
                // way and one refused, the deployment fails; with every slot ended and none
                // with restarts left, too (one with restarts left is restarted: review
                // finding, a replica out of restarts failed its sibling's deployment).
                let pending = jobs.iter().any(|e| e.state.is_live());
                let job = jobs
                    .iter()
                    .find(|e| placed(e))
                    .copied()
                    .or_else(|| jobs.iter().find(|e| e.state == ExecState::Refused && !pending).copied())
                    .or_else(|| {
                        let all_ended = !jobs.is_empty() && jobs.iter().all(|e| ended(e));
                        replicas::ended_job(&jobs).filter(|e| all_ended && e.restarts >= self.max_restarts())
                    });
                match job {
                    Some(e) if placed(e) => {
                        let processor = e.processor_id.as_deref().unwrap_or("unknown");
                        self.db(|store| {
                            store.transition(
                                &d.id,
                                DeploymentState::Validating,
                                &format!("job started (on processor {processor}); validating the route"),
                            )
                        })?;
                        self.due_now(d);
                    }
                    Some(e) if e.state == ExecState::Refused => {
                        let why = e.reason.as_ref().map_or("the launch was refused", |r| r.message.as_str());
                        self.db(|store| store.fail(&d.id, "job_failed", why))?;
                    }
                    // Ended again, past the limit (its restarts refused, or it ended before it
                    // was ever seen placed): the scheduler tries no more, so the deployment
                    // fails rather than waiting for good (review finding).
                    Some(e) if ended(e) && e.restarts >= self.max_restarts() => self.job_ended(d, e)?,
                    _ => {}
                }
                Ok(Pace::Hot)
            }
            DeploymentState::Validating | DeploymentState::Live | DeploymentState::Degraded => {
                let executions = self.db(|store| store.current_executions(&d.id, d.revision))?;
                let jobs = replicas::newest_per_slot(&executions, d.revision);
                let running: Vec<&Execution> = jobs.iter().copied().filter(|e| placed(e)).collect();
                let Some(&first) = running.first() else {
                    match replicas::ended_job(&jobs) {
                        Some(e) => self.job_ended(d, e)?,
                        None => {
                            self.db(|store| {
                                store.transition(
                                    &d.id,
                                    DeploymentState::Provisioning,
                                    "the job is not running; relaunching",
                                )
                            })?;
                        }
                    }
                    return Ok(Pace::Hot);
                };
                let validated = |e: &&Execution| self.market.is_validated(&e.execution_id);
                if d.state.spends() && !running.iter().any(validated) {
                    let job = running.iter().copied().find(|e| e.state == ExecState::Restarting).unwrap_or(first);
                    // Its job restarted since the route last validated, between two ticks (so
                    // its ending was never seen here), or the replica that served ended while
                    // its restarted sibling awaits its own validation: the route is not live
                    // until the new processes validate (found by the demo's restart test,
                    // which got a 502 from a deployment still saying live). It is validating,
                    // which keeps the route in every gateway's table: `provisioning` took it
                    // out for the ~30 ms until the next step, and a sibling serving again at
                    // every gateway was out of reach (chaos seed 1796621234229135589).
                    let ending = self.ending_of(job);
                    let why = match job.state {
                        ExecState::Restarting => format!(
                            "{ending}; the job restarted (restart {} of {}); validating it again",
                            job.restarts,
                            self.max_restarts()
                        ),
                        _ => format!("{ending}; validating it again"),
                    };
                    self.db(|store| store.transition(&d.id, DeploymentState::Validating, &why))?;
                    self.due_now(d);
                    return Ok(Pace::Hot);
                }
                // While the period under way runs (`next_period_at` is its end), there is nothing
                // to advance: no write transaction per deployment per tick (issue 44). At its end
                // the write re-reads the state inside its transaction, as before.
                let now_at = now_ms();
                if d.state.spends()
                    && d.next_period_at.is_none_or(|end| end <= now_at)
                    && !self.db(|store| store.advance_periods(&d.id, true, &self.parts.config.terms, now_at))?
                {
                    self.db(|store| {
                        store.transition(&d.id, DeploymentState::PendingFunding, "the funds ran out; fund a new quote")
                    })?;
                    return Ok(Pace::Hot);
                }
                if jobs.len() > 1 {
                    for e in jobs.iter().filter(|e| ended(e) || e.state == ExecState::Restarting) {
                        self.replica_down(d, e);
                    }
                }
                // A replica (re)started within the last minute and not yet validated is
                // validated as a new job is, every 250 ms until it passes.
                let now = self.parts.clock.now();
                let starting = running
                    .iter()
                    .any(|e| !validated(e) && now.saturating_sub(e.changed_at) < FIRST_VALIDATION_WINDOW_MS);
                let mut moved = false;
                if self.validation_due(&d.route_id, d.state == DeploymentState::Validating || starting) {
                    moved = self.validate(d, &running).await?;
                }
                // Settled: live, every replica placed, validated and not restarting, and this
                // step moved nothing. It is next stepped when due, or on an event.
                let settled = d.state == DeploymentState::Live
                    && !moved
                    && !starting
                    && running.len() == jobs.len()
                    && running.iter().all(|e| e.state != ExecState::Restarting && validated(e));
                Ok(if settled { self.due_at(d) } else { Pace::Hot })
            }
            DeploymentState::Failed | DeploymentState::Stopped => Ok(Pace::OnEvent),
        }
    }

    /// The deployment's serving job ended by itself: it is restarted (by the scheduler, after
    /// its backoff) up to the limit, and the deployment says so; past it, it fails
    /// (`job_exited`). The time until a restarted job is live again counts as downtime.
    fn job_ended(&self, d: &Deployment, e: &Execution) -> Result<(), StoreError> {
        let exit = self.ending_of(e);
        let most = self.max_restarts();
        if e.restarts < most {
            let n = e.restarts + 1;
            let delay = svc_execution::scheduler::retry_backoff(n) as f32 / 1000.0;
            self.db(|store| {
                store.transition(
                    &d.id,
                    DeploymentState::Provisioning,
                    &format!("{exit}; restarting the job in {delay} s (restart {n} of {most})"),
                )
            })?;
        } else {
            let restarts = e.restarts;
            self.db(|store| {
                store.fail(
                    &d.id,
                    JOB_EXITED,
                    &format!("{exit}; it ended again after {restarts} restarts, so it is not restarted any more"),
                )
            })?;
        }
        self.wake_here();
        Ok(())
    }

    /// Restarts a job gets (as the scheduler counts them: at most 255).
    fn max_restarts(&self) -> u32 {
        self.parts.config.restarts.max_restarts.min(u32::from(u8::MAX))
    }

    /// Process IDs of a deployment's jobs (app, agent; for several jobs, each in slot order),
    /// if one runs.
    pub async fn job_pids(&self, d: &Deployment) -> Option<Vec<u32>> {
        let executions = self.db(|store| store.current_executions(&d.id, d.revision)).ok()?;
        let jobs = replicas::newest_per_slot(&executions, d.revision);
        let pids: Vec<u32> =
            jobs.iter().filter(|e| placed(e)).flat_map(|e| self.market.processes(&e.execution_id)).collect();
        (!pids.is_empty()).then_some(pids)
    }
}

/// A failed step as the deployment's log tells the customer (issue 39, point 6): a refusal of
/// the ledger or the state machine as it is; a failure of the database itself (its messages,
/// where it is) as a failure that is tried again, the detail in the coordinator's log.
fn told(e: &StoreError) -> String {
    match e {
        StoreError::Backend(_) | StoreError::Unavailable(_) | StoreError::NotLeader(_) => {
            tracing::warn!("svc relay: a deployment's step failed: {e}");
            "the relay's database failed this step; it is tried again (the coordinator's log has why)".to_owned()
        }
        _ => e.to_string(),
    }
}
