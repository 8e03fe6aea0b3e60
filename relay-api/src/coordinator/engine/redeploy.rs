//! Redeploys without downtime. A deploy of a changed project records a successor (the next
//! revision). While the deployment serves (`live` or `degraded`), the engine:
//!
//! 1. launches the successor's job beside the serving one, on its own standby route: the
//!    gateway sends it no client, only the coordinator's validation (which names the route by
//!    ALPN) and an ACME server's tls-alpn-01 check;
//! 2. validates it through the gateway's public port, every step as for a serving route,
//!    until it passes or [`SUCCESSOR_DEADLINE`] is up; its app ending fails it at once;
//! 3. on a pass, makes it the deployment's revision in one store transaction, and the
//!    gateway's route for the hostnames (new connections go to it);
//! 4. stops the predecessor once its open connections have ended, or after [`DRAIN_LIMIT`].
//!
//! A successor that fails leaves the serving revision as it was, with a hint. A deployment
//! that serves nothing (unfunded, launching, failed) has nothing to keep up: its successor
//! takes over at once and is launched like any job.

use std::time::{Duration, Instant};

use svc_execution::Reason;

use super::{Engine, JobOf, job_key};
use crate::coordinator::jobs::Verdict;
use crate::coordinator::model::{Deployment, Successor, SuccessorState};
use crate::coordinator::state::DeploymentState;
use crate::coordinator::store::{StoreError, now_ms};
use crate::gateway::RouteConfig;
use crate::hint::{Hint, Stage};

/// How long a successor has, from its deploy, to pass validation.
pub(crate) const SUCCESSOR_DEADLINE: Duration = Duration::from_secs(60);

/// How long a predecessor's open connections may take to end after the route moved; then
/// its job is stopped, and what is still open is cut.
pub(crate) const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// How long a predecessor runs at least after the route moved, with no connection open: a
/// client routed to it just before the move has long been counted by then.
const DRAIN_MIN: Duration = Duration::from_secs(1);

/// A predecessor whose route was taken over, still running for its open connections.
#[derive(Debug, Clone)]
pub(super) struct Draining {
    deployment_id: String,
    revision: u32,
    /// The revision that took over.
    successor: u32,
    route_id: String,
    since: Instant,
}

/// The hint of a successor that failed.
pub(super) fn failed_hint(d: &Deployment, s: &Successor) -> Hint {
    Hint::new(
        "redeploy_failed",
        Stage::Job,
        format!("revision {} was not deployed: {}", s.revision, s.reason),
        format!(
            "revision {} keeps serving; read why in `svc ingress logs` (lines marked [revision {}]), fix the app, \
             then `svc ingress deploy` again",
            d.revision, s.revision
        ),
    )
}

impl Engine {
    /// Jobs of draining predecessors (kept running).
    pub(super) fn draining_keys(&self) -> Vec<String> {
        self.draining
            .lock()
            .map(|d| d.iter().map(|d| job_key(&d.deployment_id, d.revision)).collect())
            .unwrap_or_default()
    }

    /// Successors whose jobs a coordinator restart took start again.
    pub(super) fn restart_successors(&self) {
        for s in self.db(|store| store.successors()).unwrap_or_default() {
            if s.state == SuccessorState::Validating {
                let _ = self.db(|store| {
                    store.set_successor_state(
                        &s.deployment_id,
                        s.revision,
                        SuccessorState::Starting,
                        "the coordinator restarted; relaunching it",
                    )
                });
            }
        }
    }

    /// Moves a deployment's successor one step.
    pub(super) async fn step_successor(&self, d: &Deployment, s: &Successor) -> Result<(), StoreError> {
        if s.state == SuccessorState::Failed || !d.state.spends() {
            return Ok(());
        }
        let key = job_key(&d.id, s.revision);
        match s.state {
            SuccessorState::Starting => {
                let project_json = self.db(|store| store.successor_project_json(&d.id))?;
                let job =
                    JobOf { deployment: d, revision: s.revision, route_id: &s.route_id, project_json: &project_json };
                let launched = self
                    .launch_job(job, |keys| self.db(|store| store.set_successor_keys(&d.id, s.revision, keys)))
                    .await;
                match launched {
                    Ok(pids) => {
                        let reason = format!("job started ({pids}); validating it through the gateway");
                        self.db(|store| {
                            store.set_successor_state(&d.id, s.revision, SuccessorState::Validating, &reason)
                        })?;
                        self.route_due_now(&s.route_id);
                    }
                    Err(why) => self.db(|store| {
                        store.set_successor_state(&d.id, s.revision, SuccessorState::Failed, &why.to_string())
                    })?,
                }
            }
            SuccessorState::Validating => {
                if !self.jobs.contains(&key) {
                    return self.fail_successor(d, s, "its job is not running").await;
                }
                let Some(keys) = self.db(|store| store.successor_keys(&d.id))? else {
                    return self.fail_successor(d, s, "its job has no keys").await;
                };
                let age = Duration::from_millis(u64::try_from(now_ms().saturating_sub(s.created_at)).unwrap_or(0));
                if age > SUCCESSOR_DEADLINE {
                    let why = format!(
                        "it did not pass validation within {} s (last: {})",
                        SUCCESSOR_DEADLINE.as_secs(),
                        s.reason
                    );
                    return self.fail_successor(d, s, &why).await;
                }
                if !self.validation_due(&s.route_id, true) {
                    return Ok(());
                }
                let mut probed =
                    self.parts.probe.validate(&s.route_id, &d.canonical_hostname, &keys.route_public_key, true).await;
                let pins = self.db(|store| store.pins_of_deployment(&d.id))?;
                self.check_pins(d, &pins, &mut probed.outcome);
                match probed.outcome {
                    Ok(_) => self.take_over(d, s).await?,
                    Err(hint) => {
                        let reason = format!("validation failed: {}", hint.problem);
                        self.db(|store| {
                            store.set_successor_state(&d.id, s.revision, SuccessorState::Validating, &reason)
                        })?;
                    }
                }
            }
            SuccessorState::Failed => {}
        }
        Ok(())
    }

    /// The successor passed: it becomes the deployment's revision and route; the predecessor
    /// drains.
    async fn take_over(&self, d: &Deployment, s: &Successor) -> Result<(), StoreError> {
        let reason = format!(
            "validated through the gateway; revision {} stops once its open connections end (at most {} s)",
            d.revision,
            DRAIN_LIMIT.as_secs()
        );
        let promoted = self.db(|store| store.promote(&d.id, s.revision, &reason))?;
        // The rollout of V5's `stop_when_successor_ready`: the successor is ready (validated
        // through the gateway), so its predecessor stops, once its connections end.
        self.jobs.ready(&job_key(&d.id, s.revision));
        let superseded = Reason::new(
            "superseded",
            format!(
                "revision {} is ready (stop_when_successor_ready); this one stops once its connections end",
                s.revision
            ),
        );
        self.jobs.stopping(&job_key(&d.id, d.revision), superseded);
        if let Ok(mut draining) = self.draining.lock() {
            draining.push(Draining {
                deployment_id: d.id.clone(),
                revision: d.revision,
                successor: s.revision,
                route_id: d.route_id.clone(),
                since: Instant::now(),
            });
        }
        // New connections go to the successor from here; the predecessor's open ones go on.
        self.sync_routes().await;
        // Its public path (the hostnames, not the route's ID) is validated at the next tick.
        self.due_now(&promoted);
        Ok(())
    }

    /// A deployment that serves nothing: the successor takes over now; a job that ran is
    /// relaunched as the new revision. Returns the deployment as it is then.
    pub(super) async fn take_over_at_once(&self, d: &Deployment, s: &Successor) -> Result<Deployment, StoreError> {
        // A successor job started while the deployment served is launched again as the
        // deployment's own, with fresh keys.
        let relaunched =
            Reason::new("relaunched", format!("revision {} is launched again as the deployment's own job", s.revision));
        self.retire(&d.id, s.revision, d.revision, false, relaunched).await;
        let reason = format!("the deployment was {}, so nothing had to stay up", d.state);
        let mut promoted = self.db(|store| store.promote(&d.id, s.revision, &reason))?;
        let superseded = Reason::new("superseded", format!("revision {} replaced it; {reason}", s.revision));
        self.retire(&d.id, d.revision, s.revision, true, superseded).await;
        if promoted.state.runs_job() || promoted.state == DeploymentState::Failed {
            promoted = self.db(|store| {
                store.transition(
                    &d.id,
                    DeploymentState::Provisioning,
                    &format!("revision {} deployed; launching it", promoted.revision),
                )
            })?;
        }
        self.sync_routes().await;
        Ok(promoted)
    }

    /// The successor failed: its job stops and its files go; the serving revision stays.
    async fn fail_successor(&self, d: &Deployment, s: &Successor, why: &str) -> Result<(), StoreError> {
        self.retire(&d.id, s.revision, d.revision, true, Reason::new("successor_failed", why)).await;
        self.db(|store| store.set_successor_state(&d.id, s.revision, SuccessorState::Failed, why))?;
        self.sync_routes().await;
        Ok(())
    }

    /// A job of `d` that ended and is not its serving revision (its output is recorded): a
    /// successor fails (its app must not end before it is validated), a draining predecessor
    /// is done. Neither is restarted.
    pub(super) async fn reap_other_revision(&self, d: &Deployment, revision: u32, verdict: &Verdict) {
        let exit = match verdict {
            Verdict::Restart { exit, .. } | Verdict::GiveUp { exit, .. } => *exit,
        };
        if let Ok(Some(s)) = self.db(|store| store.successor(&d.id))
            && s.revision == revision
        {
            let why = format!("{exit} before it was validated");
            if let Err(e) = self.fail_successor(d, &s, &why).await {
                let _ = self.db(|store| store.append_logs(&d.id, "route", &[format!("engine: {e}")]));
            }
        } else {
            self.finish_draining(&d.id, revision);
        }
    }

    /// Stops the predecessors whose connections have ended, or whose time is up.
    pub(super) async fn drain(&self) {
        let done: Vec<Draining> = {
            let Ok(mut draining) = self.draining.lock() else { return };
            let gateway = &self.parts.gateway;
            let (done, still): (Vec<Draining>, Vec<Draining>) = draining.drain(..).partition(|d| {
                let elapsed = d.since.elapsed();
                elapsed >= DRAIN_LIMIT || elapsed >= DRAIN_MIN && gateway.active_connections(&d.route_id) == 0
            });
            *draining = still;
            done
        };
        for d in done {
            let open = self.parts.gateway.active_connections(&d.route_id);
            let line = match open {
                0 => format!("revision {} stopped: its connections had ended", d.revision),
                n => format!(
                    "revision {} stopped after {} s; {n} connections were cut",
                    d.revision,
                    DRAIN_LIMIT.as_secs()
                ),
            };
            let superseded = Reason::new("superseded", format!("revision {} took over; {line}", d.successor));
            self.retire(&d.deployment_id, d.revision, d.successor, true, superseded).await;
            let _ = self.db(|store| store.append_logs(&d.deployment_id, "route", &[line]));
        }
    }

    /// Forgets a draining predecessor whose job ended by itself.
    fn finish_draining(&self, id: &str, revision: u32) {
        if let Ok(mut draining) = self.draining.lock() {
            draining.retain(|d| d.deployment_id != id || d.revision != revision);
        }
        self.remove_revision(id, revision);
    }

    /// The standby routes of successors whose jobs run: the same hostnames as their
    /// deployment's route, reached only as [`RouteConfig::standby`] says.
    pub(super) fn standby_routes(&self, active: &[Deployment]) -> Vec<RouteConfig> {
        let mut routes = Vec::new();
        for s in self.db(|store| store.successors()).unwrap_or_default() {
            let Some(d) = active.iter().find(|d| d.id == s.deployment_id && d.state.spends()) else { continue };
            if s.state == SuccessorState::Failed {
                continue;
            }
            if let (Ok(Some(keys)), Ok(project_json)) =
                (self.db(|store| store.successor_keys(&d.id)), self.db(|store| store.successor_project_json(&d.id)))
            {
                routes.extend(self.route_config(d, &s.route_id, keys, &project_json, true));
            }
        }
        routes
    }
}
