//! The engine moves deployments through their states: it launches funded jobs, keeps the
//! gateway's routes equal to the running deployments, validates routes through the public
//! path on an interval, charges periods while live, re-checks pending customer hostnames,
//! and copies the jobs' output into the deployment logs. One loop, one deployment at a time:
//! the decisions are simple to follow, and each is a store transaction.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::sync::Notify;

mod launch;
mod redeploy;

use launch::JobOf;

use super::jobs::{Jobs, Verdict};
use super::model::{Deployment, HostnameState, Quote, SuccessorState};
use super::probe::Probe;
use super::state::DeploymentState;
use super::store::{RelayStore, RouteKeys, StoreError, now_ms, random_hex};
use super::{AgentCertificates, CoordinatorConfig};
use crate::gateway::{Gateway, RouteConfig};
use crate::hint::{self, Hint, Stage};
use crate::local::LocalCoordinator;
use svc_execution::Reason;
use svc_execution::artifacts::ArtifactStore;
use svc_execution::executor::PROCESSOR_RESTARTED;
use svc_execution::market::Market;

/// How often the loop looks at every deployment.
const TICK: Duration = Duration::from_millis(250);

/// How often a job just launched is validated until it first passes.
const FIRST_VALIDATION_RETRY: Duration = Duration::from_millis(250);
/// When a deployment's route is next validated, and whether that time is the grace given
/// to a launched job's agent to connect (validated as soon as it does).
#[derive(Debug, Clone, Copy)]
struct Due {
    at: Instant,
    awaiting_agent: bool,
}

/// Every this many ticks (10 s), the files of stopped deployments are removed.
const SWEEP_EVERY: u32 = 40;

/// The failure code (and hint) of a deployment whose job kept ending.
pub const JOB_EXITED: &str = "job_exited";

/// In a deployment's directory: the app's files.
pub(super) const APP_DIR: &str = "app";

/// In a deployment's directory: the app's secret values (JSON, 0600).
pub(super) const SECRETS_FILE: &str = "secrets.json";

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
}

/// Deployments stepped at once in one tick: one whose probe is slow holds one of these, not
/// the others.
pub const STEP_CONCURRENCY: usize = 16;

/// The coordinator's engine.
pub struct Engine {
    parts: EngineParts,
    jobs: Jobs,
    /// When each route is next validated, by route ID (a redeploy's successor has its own).
    validate_at: std::sync::Mutex<HashMap<String, Due>>,
    /// Predecessors whose route was taken over: their jobs run until their connections end.
    draining: std::sync::Mutex<Vec<redeploy::Draining>>,
    /// Held while the routes are read and set, so that concurrent steps set them in order.
    syncing: tokio::sync::Mutex<()>,
    wake: Notify,
}

/// The key of revision `revision` of deployment `id` among the running jobs (and the job's
/// name in the runner's messages).
fn job_key(id: &str, revision: u32) -> String {
    format!("{id}.r{revision}")
}

/// The deployment and revision of a job key.
fn parse_job_key(key: &str) -> Option<(&str, u32)> {
    let (id, revision) = key.rsplit_once(".r")?;
    Some((id, revision.parse().ok()?))
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine over `parts`; [`Engine::run`] is its loop.
    pub fn new(parts: EngineParts) -> Arc<Engine> {
        let jobs = Jobs::new(parts.market.clone(), parts.store.clone(), parts.config.restarts);
        Arc::new(Engine {
            parts,
            jobs,
            validate_at: std::sync::Mutex::new(HashMap::new()),
            draining: std::sync::Mutex::default(),
            syncing: tokio::sync::Mutex::new(()),
            wake: Notify::new(),
        })
    }

    /// The store.
    pub fn store(&self) -> &RelayStore {
        &self.parts.store
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

    /// Looks at the deployments now instead of at the next tick.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// The public URL of a hostname.
    pub fn url(&self, hostname: &str) -> String {
        match self.parts.public_port {
            443 => format!("https://{hostname}/"),
            port => format!("https://{hostname}:{port}/"),
        }
    }

    /// A revision's directory in the data directory: its app files (`app/`), its secrets
    /// (`secrets.json`). Its jobs' output goes to the store's logs.
    fn revision_dir(&self, deployment_id: &str, revision: u32) -> PathBuf {
        super::files::revision_dir(&self.parts.config.deployments_dir(), deployment_id, revision)
    }

    /// A revision's job directory (outside the data directory): its agent's state.
    fn job_dir(&self, deployment_id: &str, revision: u32) -> PathBuf {
        super::files::revision_dir(&self.parts.config.jobs_dir, deployment_id, revision)
    }

    /// Removes a revision's files and its job's state (its job has stopped for good).
    fn remove_revision(&self, deployment_id: &str, revision: u32) {
        let config = &self.parts.config;
        super::files::remove_revision(&config.deployments_dir(), &config.jobs_dir, deployment_id, revision);
    }

    /// A deployment with its URL filled in.
    pub fn with_url(&self, mut d: Deployment) -> Deployment {
        d.url = self.url(&d.canonical_hostname);
        d
    }

    /// The hostnames a quote binds: canonical first, then the customer's not removed.
    pub fn quoted_hostnames(&self, d: &Deployment) -> Result<Vec<String>, StoreError> {
        let mut names = vec![d.canonical_hostname.clone()];
        names.extend(self.db(|store| store.hostnames(&d.id))?.into_iter().map(|h| h.hostname));
        Ok(names)
    }

    /// Prices `periods` periods of the deployment and records the quote.
    pub fn quote(&self, d: &Deployment, periods: u64) -> Result<Quote, StoreError> {
        let quote = self.price(&d.id, &d.project_digest, self.quoted_hostnames(d)?, periods)?;
        self.db(|store| store.add_quote(&quote))?;
        Ok(quote)
    }

    /// Prices `periods` periods of a deployment serving `hostnames` (not recorded).
    pub fn price(
        &self,
        deployment_id: &str,
        project_digest: &str,
        hostnames: Vec<String>,
        periods: u64,
    ) -> Result<Quote, StoreError> {
        let config = &self.parts.config;
        let total = config.price_micros.checked_mul(periods).ok_or_else(|| StoreError::Refused {
            code: "amount_too_large",
            message: format!("{periods} periods are beyond what can be quoted"),
        })?;
        let now = now_ms();
        Ok(Quote {
            id: format!("quo_{}", random_hex(8)?),
            deployment_id: deployment_id.to_owned(),
            project_digest: project_digest.to_owned(),
            hostnames,
            price_micros: config.price_micros,
            period_secs: config.period.as_secs().max(1),
            periods,
            total_micros: total,
            created_at: now,
            expires_at: now.saturating_add(i64::try_from(config.quote_ttl.as_millis()).unwrap_or(i64::MAX)),
            funded_at: None,
        })
    }

    /// Whether customer hostnames can get certificates here.
    pub fn issues_customer_certificates(&self) -> bool {
        matches!(self.parts.config.certificates, AgentCertificates::Acme { .. })
    }

    /// Checks a customer hostname's DNS now and records what it found.
    pub async fn check_hostname(&self, d: &Deployment, hostname: &str) -> Result<(), StoreError> {
        let Some(h) = self.db(|store| store.hostname(&d.id, hostname))? else {
            return Err(StoreError::NotFound(format!("hostname {hostname}")));
        };
        if h.state == HostnameState::Removed {
            return Err(StoreError::NotFound(format!("hostname {hostname}")));
        }
        let hints = self.parts.probe.check_dns(hostname, &d.canonical_hostname, &h.token).await;
        let state = match (h.state, hints.is_empty()) {
            (HostnameState::PendingDns, true) => HostnameState::Verified,
            (HostnameState::PendingDns, false) => HostnameState::PendingDns,
            // A verified or live name whose records broke goes back to waiting for DNS.
            (_, false) => HostnameState::PendingDns,
            (state, true) => state,
        };
        self.db(|store| store.set_hostname(&d.id, hostname, state, &hints))?;
        if state != h.state {
            self.sync_routes().await;
            self.due_now(d);
        }
        Ok(())
    }

    /// Validate the deployment at the next tick.
    pub fn due_now(&self, d: &Deployment) {
        self.route_due_now(&d.route_id);
    }

    /// Validate the route at the next tick.
    fn route_due_now(&self, route_id: &str) {
        if let Ok(mut v) = self.validate_at.lock() {
            v.remove(route_id);
        }
        self.wake();
    }

    /// What to fix, ranked.
    pub fn hints(&self, d: &Deployment) -> Result<Vec<Hint>, StoreError> {
        let mut hints = Vec::new();
        let balance = self.db(|store| store.balance(&d.id))?;
        let price = self.parts.config.price_micros;
        match d.state {
            DeploymentState::PendingFunding => hints.push(Hint::new(
                "quote_unfunded",
                Stage::Funding,
                format!(
                    "the deployment has {} micros available, less than one period ({price} micros)",
                    balance.available_micros
                ),
                "fund a quote: `svc ingress fund` (within the project's spend.ceilingMicros)",
            )),
            DeploymentState::Failed if d.failure_code.as_deref() == Some(JOB_EXITED) => hints.push(Hint::new(
                JOB_EXITED,
                Stage::Job,
                d.state_reason.clone(),
                "read why in `svc ingress logs` (the app's last lines and its exit status), fix the app, then \
                 `svc ingress deploy` again (the deployment relaunches with the fixed revision)",
            )),
            DeploymentState::Failed => hints.push(Hint::new(
                "job_failed",
                Stage::Job,
                d.state_reason.clone(),
                "fix the app, then `svc ingress deploy` again (the deployment relaunches with the fixed revision)",
            )),
            DeploymentState::Live | DeploymentState::Degraded if balance.available_micros < price => {
                hints.push(Hint::new(
                    "funds_low",
                    Stage::Funding,
                    "the funds cover no period after the current one",
                    "fund a new quote before the period ends: `svc ingress fund`",
                ))
            }
            _ => {}
        }
        if d.state.runs_job() {
            for v in self.db(|store| store.latest_validations(&d.id))? {
                if !v.passed
                    && let Ok(h) = serde_json::from_value::<Hint>(v.detail.clone())
                {
                    hints.push(h);
                }
            }
        }
        for h in self.db(|store| store.hostnames(&d.id))? {
            hints.extend(h.hints);
        }
        if let Some(s) = self.db(|store| store.successor(&d.id))?.filter(|s| s.state == SuccessorState::Failed) {
            hints.push(redeploy::failed_hint(d, &s));
        }
        hint::rank(&mut hints);
        hints.dedup();
        Ok(hints)
    }

    /// Removes the stored app files no running job was launched from (each launch stores its
    /// revision's files again, so a job restarted later finds them).
    fn sweep_artifacts(&self) {
        let keep = self.jobs.artifacts();
        let removed = super::blocking(|| self.parts.artifacts.retain(&keep));
        if removed > 0 {
            tracing::debug!("svc relay: removed {removed} job artifacts no job runs");
        }
    }

    /// The engine's loop (runs until the task is aborted).
    pub async fn run(self: Arc<Self>) {
        // The jobs were this coordinator's processes: any recorded live ended with it.
        let ended = Reason::new(PROCESSOR_RESTARTED, "the coordinator restarted; its jobs ended with it");
        if let Err(e) = self.db(|store| store.end_live_executions(&ended)) {
            tracing::error!("svc relay: recording the executions that ended with the coordinator: {e}");
        }
        // Jobs do not outlive a coordinator: relaunch the ones that should run.
        if let Ok(active) = self.db(|store| store.active_deployments()) {
            for d in active.into_iter().filter(|d| d.state.runs_job()) {
                let _ = self.db(|store| {
                    store.transition(
                        &d.id,
                        DeploymentState::Provisioning,
                        "the coordinator restarted; relaunching the job",
                    )
                });
            }
        }
        self.restart_successors();
        let mut ticks: u32 = 0;
        loop {
            self.tick().await;
            ticks = ticks.wrapping_add(1);
            if ticks.is_multiple_of(SWEEP_EVERY) {
                let config = &self.parts.config;
                // Directory walks and store reads: off the runtime's workers too.
                self.db(|store| super::files::sweep(store, &config.deployments_dir(), &config.jobs_dir, false));
                self.sweep_artifacts();
            }
            tokio::select! {
                () = tokio::time::sleep(TICK) => {}
                () = self.wake.notified() => {}
            }
        }
    }

    /// One look at every deployment: reap ended jobs, step each deployment (and its
    /// successor), drain predecessors, stop jobs nothing needs, set the gateway's routes, copy
    /// the jobs' output. [`Engine::run`] calls it every 250 ms or when woken; a test calls it
    /// directly, one step at a time.
    pub async fn tick(&self) {
        self.reap().await;
        let active = match self.db(|store| store.active_deployments()) {
            Ok(a) => a,
            Err(e) => {
                tracing::error!("svc relay: reading deployments: {e}");
                return;
            }
        };
        let successors: HashMap<String, super::model::Successor> = match self.db(|store| store.successors()) {
            Ok(s) => s.into_iter().map(|s| (s.deployment_id.clone(), s)).collect(),
            Err(e) => {
                tracing::error!("svc relay: reading successors: {e}");
                HashMap::new()
            }
        };
        // Each deployment is stepped on its own; a slow probe holds one of these slots.
        futures_util::stream::iter(&active)
            .for_each_concurrent(STEP_CONCURRENCY, |d| self.step_deployment(d, successors.get(&d.id)))
            .await;
        self.drain().await;
        // Jobs of deployments that no longer run (stopped, failed, unfunded) end here, and
        // those of successors replaced or failed.
        let mut keep: Vec<String> = active
            .iter()
            .filter(|d| d.state.runs_job() || d.state == DeploymentState::Provisioning)
            .map(|d| job_key(&d.id, d.revision))
            .collect();
        keep.extend(
            successors
                .values()
                .filter(|s| s.state != SuccessorState::Failed)
                .map(|s| job_key(&s.deployment_id, s.revision)),
        );
        keep.extend(self.draining_keys());
        let serving: HashMap<&str, u32> = active.iter().map(|d| (d.id.as_str(), d.revision)).collect();
        for key in self.jobs.ids().into_iter().filter(|key| !keep.contains(key)) {
            let Some((id, revision)) = parse_job_key(&key) else { continue };
            // A revision that is not the deployment's any more goes with its job (a stopped
            // deployment's files are swept).
            let current = serving.get(id).copied();
            let gone =
                current.is_some_and(|c| c != revision) && successors.get(id).is_none_or(|s| s.revision != revision);
            let reason = match active.iter().find(|d| d.id == id) {
                None => Reason::new("deployment_stopped", "the deployment was stopped"),
                Some(d) if revision > d.revision => {
                    Reason::new("replaced", format!("a newer deploy replaced revision {revision} before it served"))
                }
                Some(d) if d.revision != revision => {
                    Reason::new("superseded", format!("revision {} replaced revision {revision}", d.revision))
                }
                Some(d) if d.state == DeploymentState::PendingFunding => {
                    Reason::new("unfunded", "the deployment's funds ran out; fund a new quote")
                }
                Some(d) => Reason::new("deployment_not_running", format!("the deployment is {}", d.state)),
            };
            self.retire(id, revision, current.unwrap_or(revision), gone, reason).await;
        }
        self.sync_routes().await;
        self.tail_logs(&serving).await;
    }

    /// Steps one deployment: a successor takes over at once if nothing serves, then the
    /// deployment's state moves, then its successor's.
    async fn step_deployment(&self, d: &Deployment, successor: Option<&super::model::Successor>) {
        let successor = successor.filter(|s| s.state != SuccessorState::Failed);
        let taken;
        let d = match successor {
            Some(s) if !d.state.spends() => match self.take_over_at_once(d, s).await {
                Ok(promoted) => {
                    taken = promoted;
                    &taken
                }
                Err(e) => {
                    let _ = self.db(|store| store.append_logs(&d.id, "route", &[format!("engine: {e}")]));
                    return;
                }
            },
            _ => d,
        };
        if let Err(e) = self.step(d).await {
            let _ = self.db(|store| store.append_logs(&d.id, "route", &[format!("engine: {e}")]));
        }
        if let Some(s) = successor.filter(|s| s.revision > d.revision)
            && let Err(e) = self.step_successor(d, s).await
        {
            let _ =
                self.db(|store| store.append_logs(&d.id, "route", &[format!("engine: revision {}: {e}", s.revision)]));
        }
    }

    /// Notices jobs whose app or agent ended: logs how, with the job's last output, and
    /// restarts them after a backoff or, past the limit, fails the deployment. The time
    /// until a restarted job is live again counts as downtime (it is not `live`).
    async fn reap(&self) {
        for (key, output, verdict) in self.jobs.reap() {
            let Some((id, revision)) = parse_job_key(&key) else { continue };
            let Ok(d) = self.db(|store| store.deployment(id)) else { continue };
            self.record_output(id, revision, d.revision, output);
            // A successor's or a draining predecessor's job is not restarted.
            if d.revision != revision {
                self.reap_other_revision(&d, revision, &verdict).await;
                continue;
            }
            let outcome = match verdict {
                Verdict::Restart { exit, delay, n, of } => self.db(|store| {
                    store.transition(
                        id,
                        DeploymentState::Provisioning,
                        &format!("{exit}; restarting the job in {} s (restart {n} of {of})", delay.as_secs_f32()),
                    )
                }),
                Verdict::GiveUp { exit, restarts } => self.db(|store| {
                    store.fail(
                        id,
                        JOB_EXITED,
                        &format!("{exit}; it ended again after {restarts} restarts, so it is not restarted any more"),
                    )
                }),
            };
            if let Err(e) = outcome {
                let _ = self.db(|store| store.append_logs(id, "route", &[format!("engine: {e}")]));
            }
            self.wake();
        }
    }

    async fn step(&self, d: &Deployment) -> Result<(), StoreError> {
        let price = self.parts.config.price_micros;
        match d.state {
            DeploymentState::PendingFunding => {
                let available = self.db(|store| store.balance(&d.id))?.available_micros;
                if available >= price {
                    self.db(|store| {
                        store.transition(
                            &d.id,
                            DeploymentState::Provisioning,
                            &format!("funded: {available} micros available"),
                        )
                    })?;
                    self.wake();
                }
            }
            DeploymentState::Provisioning => {
                let key = job_key(&d.id, d.revision);
                if self.jobs.restart_pending(&key) {
                    return Ok(());
                }
                let relaunched = Reason::new("relaunched", "a new launch of the revision replaces it");
                self.record_output(&d.id, d.revision, d.revision, self.jobs.stop(&key, false, relaunched));
                match self.launch(d).await {
                    Ok(pids) => {
                        self.db(|store| {
                            store.transition(
                                &d.id,
                                DeploymentState::Validating,
                                &format!("job started ({pids}); validating the route"),
                            )
                        })?;
                        self.due_now(d);
                    }
                    Err(reason) => {
                        self.db(|store| store.fail(&d.id, "job_failed", &reason.to_string()))?;
                    }
                }
            }
            DeploymentState::Validating | DeploymentState::Live | DeploymentState::Degraded => {
                if !self.jobs.contains(&job_key(&d.id, d.revision)) {
                    self.db(|store| {
                        store.transition(&d.id, DeploymentState::Provisioning, "the job is not running; relaunching")
                    })?;
                    return Ok(());
                }
                if d.state.spends()
                    && !self.db(|store| store.advance_periods(&d.id, true, &self.parts.config.terms, now_ms()))?
                {
                    self.db(|store| {
                        store.transition(&d.id, DeploymentState::PendingFunding, "the funds ran out; fund a new quote")
                    })?;
                    return Ok(());
                }
                if self.validation_due(&d.route_id, d.state == DeploymentState::Validating) {
                    self.validate(d).await?;
                }
            }
            DeploymentState::Failed | DeploymentState::Stopped => {}
        }
        Ok(())
    }

    /// Whether the deployment's route is due for validation. A job just launched is
    /// validated once its agent's tunnel is up (before, a validation could only record "tls
    /// handshake eof"), then every 250 ms until it first passes, so a first launch or a
    /// restart is live within a second or two of its agent, not a revalidation interval
    /// later. An agent that never connects is validated anyway after `agent_grace`.
    fn validation_due(&self, route_id: &str, validating: bool) -> bool {
        let Ok(mut at) = self.validate_at.lock() else { return true };
        let now = Instant::now();
        let revalidate = self.parts.config.revalidate;
        if validating && self.parts.gateway.agents(route_id) == 0 {
            return match at.get(route_id) {
                Some(due) if due.awaiting_agent && due.at > now => false,
                Some(due) if due.awaiting_agent => {
                    at.insert(
                        route_id.to_owned(),
                        Due { at: now + revalidate.min(self.parts.config.agent_grace), awaiting_agent: true },
                    );
                    true
                }
                _ => {
                    at.insert(
                        route_id.to_owned(),
                        Due { at: now + self.parts.config.agent_grace, awaiting_agent: true },
                    );
                    false
                }
            };
        }
        let interval = if validating { revalidate.min(FIRST_VALIDATION_RETRY) } else { revalidate };
        match at.get(route_id) {
            Some(due) if !due.awaiting_agent && due.at > now => false,
            _ => {
                at.insert(route_id.to_owned(), Due { at: now + interval, awaiting_agent: false });
                true
            }
        }
    }

    /// Validates the canonical hostname and each customer hostname, and moves the states.
    async fn validate(&self, d: &Deployment) -> Result<(), StoreError> {
        let Some(keys) = self.db(|store| store.route_keys(&d.id))? else { return Ok(()) };
        let probe = &self.parts.probe;
        let pins = self.db(|store| store.pins_of_deployment(&d.id))?;
        let mut probed = probe.validate(&d.route_id, &d.canonical_hostname, &keys.route_public_key, false).await;
        self.check_pins(d, &pins, &mut probed.outcome);
        self.record(d, &d.canonical_hostname, &probed.outcome)?;
        if probed.outcome.is_ok() {
            self.jobs.ready(&job_key(&d.id, d.revision));
        }
        match (&probed.outcome, d.state) {
            (Ok(_), DeploymentState::Validating) => {
                if self.db(|store| store.advance_periods(&d.id, true, &self.parts.config.terms, now_ms()))? {
                    self.db(|store| {
                        store.transition(
                            &d.id,
                            DeploymentState::Live,
                            "validated through the public path; the route is live",
                        )
                    })?;
                } else {
                    self.db(|store| {
                        store.transition(
                            &d.id,
                            DeploymentState::PendingFunding,
                            "validated, but the funds do not cover a period",
                        )
                    })?;
                }
            }
            (Ok(_), DeploymentState::Degraded) => {
                self.db(|store| {
                    store.transition(&d.id, DeploymentState::Live, "validated again through the public path")
                })?;
            }
            (Err(h), DeploymentState::Live) => {
                self.db(|store| {
                    store.transition(&d.id, DeploymentState::Degraded, &format!("validation failed: {}", h.problem))
                })?;
            }
            (Err(h), _) => self.db(|store| store.set_reason(&d.id, &format!("validation failed: {}", h.problem)))?,
            (Ok(_), _) => {}
        }
        for h in self.db(|store| store.hostnames(&d.id))? {
            match h.state {
                HostnameState::PendingDns => self.check_hostname(d, &h.hostname).await?,
                HostnameState::Verified | HostnameState::Live => {
                    let mut probed = probe.validate(&d.route_id, &h.hostname, &keys.route_public_key, false).await;
                    self.check_pins(d, &pins, &mut probed.outcome);
                    self.record(d, &h.hostname, &probed.outcome)?;
                    let (state, hints) = match probed.outcome {
                        Ok(_) => (HostnameState::Live, Vec::new()),
                        Err(hint) => (HostnameState::Verified, vec![hint]),
                    };
                    self.db(|store| store.set_hostname(&d.id, &h.hostname, state, &hints))?;
                }
                HostnameState::Removed => {}
            }
        }
        Ok(())
    }

    /// A pass by a validator version the project does not pin does not count.
    fn check_pins(&self, d: &Deployment, pins: &[String], outcome: &mut Result<serde_json::Value, Hint>) {
        let (version, digest) = (self.parts.probe.version(), self.parts.probe.digest());
        if outcome.is_ok() && !pins.is_empty() && !pins.iter().any(|p| p == digest) {
            *outcome = Err(Hint::new(
                "validator_unpinned",
                Stage::Project,
                format!(
                    "the route was judged by {version} ({digest}), a validator version project \"{}\" does not pin",
                    d.project
                ),
                format!("if you accept that version: `svc ingress pins add {digest}`"),
            ));
        }
    }

    fn record(
        &self,
        d: &Deployment,
        hostname: &str,
        outcome: &Result<serde_json::Value, Hint>,
    ) -> Result<(), StoreError> {
        let judge = (self.parts.probe.version(), self.parts.probe.digest());
        match outcome {
            Ok(seen) => self.db(|store| store.add_validation(&d.id, hostname, true, judge, seen)),
            Err(hint) => {
                let detail = serde_json::to_value(hint).unwrap_or_default();
                self.db(|store| store.add_validation(&d.id, hostname, false, judge, &detail))
            }
        }
    }

    /// Stops every job (the coordinator is shutting down).
    pub async fn stop_all_jobs(&self) {
        self.jobs.stop_all();
    }

    /// Process IDs of a deployment's job (app, agent), if it runs.
    pub async fn job_pids(&self, d: &Deployment) -> Option<Vec<u32>> {
        self.jobs.pids(&job_key(&d.id, d.revision))
    }

    /// Makes the gateway's (and the certificate signer's) routes those of the deployments
    /// whose job runs: the canonical hostname and the customer hostnames whose DNS checks out.
    async fn sync_routes(&self) {
        let _in_order = self.syncing.lock().await;
        let Ok(active) = self.db(|store| store.active_deployments()) else { return };
        let mut routes = self.standby_routes(&active);
        for d in active.iter().filter(|d| d.state.runs_job()) {
            if let (Ok(Some(keys)), Ok(project_json)) =
                (self.db(|store| store.route_keys(&d.id)), self.db(|store| store.project_json(&d.id)))
            {
                routes.extend(self.route_config(d, &d.route_id, keys, &project_json, false));
            }
        }
        // Validation schedules of routes no longer in use (a revision replaced, a deployment
        // stopped) go with them.
        if let Ok(mut due) = self.validate_at.lock() {
            due.retain(|route_id, _| routes.iter().any(|r| &r.route_id == route_id));
        }
        self.parts.gateway.set_routes(routes.clone());
        self.parts.signer.set_routes(routes);
    }

    /// The gateway route of a revision of `d` (`route_id`, with its job's `keys`): the
    /// canonical hostname and the customer hostnames whose DNS checks out.
    fn route_config(
        &self,
        d: &Deployment,
        route_id: &str,
        keys: RouteKeys,
        project_json: &str,
        standby: bool,
    ) -> Option<RouteConfig> {
        let names = self.db(|store| store.hostnames(&d.id)).ok()?;
        let mut hostnames = vec![d.canonical_hostname.clone()];
        hostnames.extend(
            names
                .into_iter()
                .filter(|h| matches!(h.state, HostnameState::Verified | HostnameState::Live))
                .map(|h| h.hostname),
        );
        Some(RouteConfig {
            route_id: route_id.to_owned(),
            hostnames,
            credential_sha256: keys.credential_sha256,
            proxy_protocol: crate::project::read(project_json).is_ok_and(|p| p.proxy_protocol),
            max_connections: ROUTE_MAX_CONNECTIONS,
            standby,
        })
    }

    /// Records output lines of revision `revision`'s job in its deployment's logs; lines of a
    /// revision other than the `serving` one (a successor, a predecessor draining) say which.
    fn record_output(&self, id: &str, revision: u32, serving: u32, output: super::jobs::Output) {
        for (source, lines) in output {
            if revision == serving {
                let _ = self.db(|store| store.append_logs(id, source, &lines));
            } else {
                let tagged: Vec<String> = lines.iter().map(|l| format!("[revision {revision}] {l}")).collect();
                let _ = self.db(|store| store.append_logs(id, source, &tagged));
            }
        }
    }

    /// Stops revision `revision`'s job for good, for `reason`, and records its last output;
    /// its files and agent state go too when `remove`.
    async fn retire(&self, id: &str, revision: u32, serving: u32, remove: bool, reason: Reason) {
        let output = self.jobs.stop(&job_key(id, revision), true, reason);
        self.record_output(id, revision, serving, output);
        if remove {
            self.remove_revision(id, revision);
        }
    }

    /// Copies new lines of each job's output into the deployment's logs (`serving`: each
    /// active deployment's serving revision, read once per tick).
    async fn tail_logs(&self, serving: &HashMap<&str, u32>) {
        for (key, output) in self.jobs.new_output() {
            if let Some((id, revision)) = parse_job_key(&key) {
                self.record_output(id, revision, serving.get(id).copied().unwrap_or(revision), output);
            }
        }
    }
}

/// Open public connections a route allows at once.
const ROUTE_MAX_CONNECTIONS: usize = 1024;
