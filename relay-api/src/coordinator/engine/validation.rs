//! Validation: when a deployment's route is next validated through the public path, the
//! validation itself (each replica alone when there are several, then each customer
//! hostname), the validator pins, and the states a pass or a failure moves to.

use std::time::{Duration, Instant};

use svc_execution::Execution;

use super::Engine;
use crate::coordinator::model::{Deployment, HostnameState};
use crate::coordinator::state::DeploymentState;
use crate::coordinator::store::{StoreError, now_ms};
use crate::hint::{Hint, Stage};

/// How often a job just launched is validated until it first passes.
pub(super) const FIRST_VALIDATION_RETRY: Duration = Duration::from_millis(250);

/// How long after a replica of several (re)started it is validated that often, while it has
/// not passed: a replica that keeps failing is then validated at the route's interval.
pub(super) const FIRST_VALIDATION_WINDOW_MS: u64 = 60_000;

/// When a deployment's route is next validated, and whether that time is the grace given
/// to a launched job's agent to connect (validated as soon as it does).
#[derive(Debug, Clone, Copy)]
pub(super) struct Due {
    at: Instant,
    awaiting_agent: bool,
}

impl Due {
    /// When the route is due.
    pub(super) fn at(&self) -> Instant {
        self.at
    }
}

impl Engine {
    /// Validate the deployment at the next tick.
    pub fn due_now(&self, d: &Deployment) {
        self.route_due_now(&d.route_id);
    }

    /// Validate the route at the next tick.
    pub(super) fn route_due_now(&self, route_id: &str) {
        if let Ok(mut v) = self.validate_at.lock() {
            v.remove(route_id);
        }
        self.wake_here();
    }

    /// Whether the deployment's route is due for validation. A job just launched is
    /// validated once its agent's tunnel is up (before, a validation could only record "tls
    /// handshake eof"), then every 250 ms until it first passes, so a first launch or a
    /// restart is live within a second or two of its agent, not a revalidation interval
    /// later. An agent that never connects is validated anyway after `agent_grace`.
    pub(super) fn validation_due(&self, route_id: &str, validating: bool) -> bool {
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

    /// Validates the canonical hostname and each customer hostname, and moves the states;
    /// with several `running` jobs, each replica alone first. Whether the deployment's state
    /// moved (or its route has no keys yet).
    pub(super) async fn validate(&self, d: &Deployment, running: &[&Execution]) -> Result<bool, StoreError> {
        let Some(keys) = self.db(|store| store.route_keys(&d.id))? else { return Ok(true) };
        let probe = &self.parts.probe;
        let pins = self.db(|store| store.pins_of_deployment(&d.id))?;
        let probed = if running.len() > 1 {
            // Each replica alone: the canonical name serves while one of them passed this
            // round (the route's own probe would reach one at random: review finding, a
            // deployment flapping between live and degraded).
            let mut round = self.validate_replicas(d, &d.route_id, &keys, false, running, &pins).await;
            let mut passed = false;
            for (job, outcome) in &round {
                if outcome.is_ok() {
                    self.market.validated(job);
                    passed = true;
                }
            }
            if passed {
                self.schedule();
            }
            // The first pass, else the first failure (`running` has two jobs or more).
            let outcome = match round.iter().position(|(_, o)| o.is_ok()) {
                Some(i) => round.swap_remove(i).1,
                None => round.swap_remove(0).1,
            };
            crate::coordinator::probe::Probed { outcome }
        } else {
            let mut probed = probe.validate(&d.route_id, &d.canonical_hostname, &keys, false, None).await;
            self.check_pins(d, &pins, &mut probed.outcome);
            if probed.outcome.is_ok()
                && let Some(job) = running.first()
            {
                // Serving: the scheduler records it ready now, before the deployment says live.
                self.market.validated(&job.execution_id);
                self.replica_passed(&job.execution_id);
                self.schedule();
            }
            probed
        };
        self.record(d, &d.canonical_hostname, &probed.outcome)?;
        let moved = match (&probed.outcome, d.state) {
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
                true
            }
            (Ok(_), DeploymentState::Degraded) => {
                self.db(|store| {
                    store.transition(&d.id, DeploymentState::Live, "validated again through the public path")
                })?;
                true
            }
            (Err(h), DeploymentState::Live) => {
                self.db(|store| {
                    store.transition(&d.id, DeploymentState::Degraded, &format!("validation failed: {}", h.problem))
                })?;
                true
            }
            (Err(h), _) => {
                self.db(|store| store.set_reason(&d.id, &format!("validation failed: {}", h.problem)))?;
                false
            }
            (Ok(_), _) => false,
        };
        for h in self.db(|store| store.hostnames(&d.id))? {
            match h.state {
                HostnameState::PendingDns => self.check_hostname(d, &h.hostname).await?,
                HostnameState::Verified | HostnameState::Live => {
                    let mut probed = probe.validate(&d.route_id, &h.hostname, &keys, false, None).await;
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
        Ok(moved)
    }

    /// A pass by a validator version the project does not pin does not count.
    pub(super) fn check_pins(&self, d: &Deployment, pins: &[String], outcome: &mut Result<serde_json::Value, Hint>) {
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

    pub(super) fn record(
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
}
