//! Redeploys without downtime. A deploy of a changed project records a successor (the next
//! revision) and publishes its policy: a newer policy version, which the scheduler rolls out
//! as the policy's `lifecycle.update` says (`immediate`, `stop_when_successor_ready`). While
//! the deployment serves (`live` or `degraded`):
//!
//! 1. the scheduler launches the successor's job beside the serving one, on its own standby
//!    route: the gateway sends it no client, only the coordinator's validation (which names
//!    the route by ALPN) and an ACME server's tls-alpn-01 check;
//! 2. the engine validates it through the gateway's public port, every step as for a serving
//!    route, until it passes or its deadline is up (`CoordinatorConfig::successor_deadline`,
//!    60 s unless set); its app ending fails it at once;
//! 3. on a pass, it waits for every gateway host serving the deployment to have the
//!    successor's agents, then flips the hosts' tables to it and waits for each to have
//!    applied that ([`super::switch`]: each wait bounded, a host lagging past it leaves the
//!    route's hosts; issue 41);
//! 4. the engine then makes it the deployment's revision in one store transaction, and
//!    the gateway's route for the hostnames (new connections go to it), and tells the market
//!    it is ready;
//! 5. the scheduler then stops the predecessor (`superseded`), which the ingress market drains:
//!    it stops once its open connections have ended, or after its drain limit.
//!
//! A successor that fails leaves the serving revision as it was, with a hint. A deployment
//! that serves nothing (unfunded, launching, failed) has nothing to keep up: its successor
//! takes over at once and is launched like any job.

use std::time::Duration;

use svc_execution::{ExecState, Execution};

use super::replicas::newest_per_slot;
use super::{Engine, HostAck, SWITCH_BOUND, Switch, Want, ended, may_switch, placed};
use crate::coordinator::model::{Deployment, Successor, SuccessorState};
use crate::coordinator::state::DeploymentState;
use crate::coordinator::store::{RouteSwitch, StoreError, now_ms};
use crate::hint::{Hint, Stage};

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
    /// Successors whose jobs a coordinator restart took start again (a switch under way
    /// begins again once they are validated again).
    pub(super) fn restart_successors(&self) {
        for s in self.db(|store| store.successors()).unwrap_or_default() {
            // The revision that kept serving serves on: hosts lagging behind the switch rejoin
            // on its route, with a table read after this (as when a successor fails).
            let _ = self.db(|store| {
                let serving = store.deployment(&s.deployment_id)?.route_id;
                store.end_route_switch_serving(&s.deployment_id, &serving)
            });
            if s.state == SuccessorState::Validating {
                let _ = self.db(|store| {
                    store.set_successor_state(
                        &s.deployment_id,
                        s.revision,
                        SuccessorState::Starting,
                        "the coordinator restarted (or another took its jobs over); relaunching it",
                    )
                });
            }
        }
    }

    /// Moves a deployment's successor one step (`executions`: the deployment's current ones).
    pub(super) async fn step_successor(
        &self,
        d: &Deployment,
        s: &Successor,
        executions: &[Execution],
    ) -> Result<(), StoreError> {
        if s.state == SuccessorState::Failed || !d.state.spends() {
            return Ok(());
        }
        let jobs = newest_per_slot(executions, s.revision);
        if let Some(e) = jobs.iter().find(|e| ended(e)) {
            let why = format!("{} before it was validated", self.ending_of(e));
            return self.fail_successor(d, s, &why).await;
        }
        if let Some(e) = jobs.iter().find(|e| e.state == ExecState::Refused) {
            let why = e.reason.as_ref().map_or("its launch was refused", |r| r.message.as_str()).to_owned();
            return self.fail_successor(d, s, &why).await;
        }
        let running: Vec<&Execution> = jobs.iter().copied().filter(|e| placed(e)).collect();
        match s.state {
            SuccessorState::Starting => {
                if let Some(e) = running.first() {
                    let processor = e.processor_id.as_deref().unwrap_or("unknown");
                    let reason = format!("job started (on processor {processor}); validating it through the gateway");
                    self.db(|store| store.set_successor_state(&d.id, s.revision, SuccessorState::Validating, &reason))?;
                    self.route_due_now(&s.route_id);
                }
            }
            SuccessorState::Validating => {
                if running.is_empty() {
                    return self.fail_successor(d, s, "its job is not running").await;
                }
                let Some(keys) = self.db(|store| store.successor_keys(&d.id))? else {
                    return self.fail_successor(d, s, "its job has no keys").await;
                };
                // Validated already, its switch under way: the hosts are waited for (within
                // their bound), not the successor validated again.
                let switch = self.db(|store| store.route_switch(&d.id))?.filter(|w| w.revision == s.revision);
                if let Some(switch) = switch {
                    return self.switch(d, s, &running, switch).await;
                }
                let age = Duration::from_millis(u64::try_from(now_ms().saturating_sub(s.created_at)).unwrap_or(0));
                let deadline = self.parts.config.successor_deadline;
                if age > deadline {
                    let why =
                        format!("it did not pass validation within {} s (last: {})", deadline.as_secs(), s.reason);
                    return self.fail_successor(d, s, &why).await;
                }
                if !self.validation_due(&s.route_id, true) {
                    return Ok(());
                }
                let slots = self.slots_of(&d.id, s.revision);
                if slots > 1 || running.len() > 1 {
                    return self.validate_successor_replicas(d, s, &keys, &running, slots).await;
                }
                let mut probed = self.parts.probe.validate(&s.route_id, &d.canonical_hostname, &keys, true, None).await;
                let pins = self.db(|store| store.pins_of_deployment(&d.id))?;
                self.check_pins(d, &pins, &mut probed.outcome);
                match probed.outcome {
                    Ok(_) => self.begin_switch(d, s, &running).await?,
                    Err(hint) => {
                        // The fix with the problem: a deploy waiting on it says both at
                        // once (issue 42), as it does a serving revision's hint.
                        let reason = format!("validation failed: {} ({}); fix: {}", hint.problem, hint.code, hint.fix);
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

    /// Validates each of a successor's replicas alone on its standby route: it takes over once
    /// all its `slots` run and have passed (none is ready before, so no predecessor is
    /// stopped while part of the successor has yet to serve).
    async fn validate_successor_replicas(
        &self,
        d: &Deployment,
        s: &Successor,
        keys: &crate::coordinator::store::RouteKeys,
        running: &[&Execution],
        slots: usize,
    ) -> Result<(), StoreError> {
        let pins = self.db(|store| store.pins_of_deployment(&d.id))?;
        let round = self.validate_replicas(d, &s.route_id, keys, true, running, &pins).await;
        // Every slot running and passing in this same round (a pass from an earlier round may
        // be stale, and a restarting job has not passed since: review finding).
        let all_passed = round.iter().all(|(_, outcome)| outcome.is_ok())
            && running.iter().all(|e| e.state != ExecState::Restarting);
        if all_passed && running.len() >= slots {
            return self.begin_switch(d, s, running).await;
        }
        let waiting = self.replica_hints_of(running);
        let reason = match waiting.first() {
            Some(h) => format!("validation failed: {} ({}); fix: {}", h.problem, h.code, h.fix),
            None => format!("{} of {slots} jobs running; validating each through the gateway", running.len()),
        };
        self.db(|store| store.set_successor_state(&d.id, s.revision, SuccessorState::Validating, &reason))?;
        Ok(())
    }

    /// The successor passed validation: its switch begins ([`Engine::switch`]).
    async fn begin_switch(&self, d: &Deployment, s: &Successor, jobs: &[&Execution]) -> Result<(), StoreError> {
        let switch = RouteSwitch {
            deployment_id: d.id.clone(),
            revision: s.revision,
            route_id: s.route_id.clone(),
            began_at: now_ms(),
            flipped: None,
        };
        self.db(|store| store.begin_route_switch(&switch))?;
        self.switch(d, s, jobs, switch).await
    }

    /// One step of a validated successor's switch (`engine::switch`): waits for every gateway
    /// host serving the deployment to have the successor's agents, flips the hosts' tables,
    /// waits for each to have applied it, then takes over. A host that does not within
    /// [`super::SWITCH_BOUND`] at either wait is marked lagging (no longer offered for the
    /// deployment) and not waited for.
    async fn switch(
        &self,
        d: &Deployment,
        s: &Successor,
        jobs: &[&Execution],
        switch: RouteSwitch,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let per_route = self.parts.config.gateway_hosts_per_route;
        let (serving, lagging, reports) = self.db(|store| {
            Ok::<_, StoreError>((
                store.gateway_hosts(&d.id, now, per_route)?,
                store.lagging_for(&d.id)?,
                store.gateway_reports()?,
            ))
        })?;
        let hosts: Vec<HostAck> = serving
            .iter()
            .filter(|(o, _)| !lagging.contains(&o.id))
            .map(|(o, _)| HostAck {
                operator_id: o.id.clone(),
                report: reports.iter().find(|(id, _, _)| id == &o.id).map(|(_, r, _)| r.clone()),
            })
            .collect();
        let replicas = u32::try_from(self.slots_of(&d.id, s.revision)).unwrap_or(u32::MAX).max(1);
        let want = match switch.flipped {
            None => Want { route_id: s.route_id.clone(), agents: replicas, seq: 0, since_ms: switch.began_at },
            Some((seq, at)) => Want { route_id: s.route_id.clone(), agents: 1, seq, since_ms: at },
        };
        let left_out = match may_switch(&hosts, &want, now) {
            Switch::Wait { waiting } => {
                let step = match switch.flipped {
                    None => format!("to have its agents ({replicas} each)"),
                    Some(_) => "to serve it".to_owned(),
                };
                let reason = format!(
                    "validated; waiting for gateway hosts {} {step} (at most {} s)",
                    waiting.join(", "),
                    SWITCH_BOUND.as_secs()
                );
                if reason != s.reason {
                    self.db(|store| store.set_successor_state(&d.id, s.revision, SuccessorState::Validating, &reason))?;
                }
                return Ok(());
            }
            Switch::Go { lagging } => lagging,
        };
        if !left_out.is_empty() {
            let line = format!(
                "gateway hosts {} did not have revision {} within {} s: they are no longer offered for this \
                 deployment until they do",
                left_out.join(", "),
                s.revision,
                SWITCH_BOUND.as_secs()
            );
            tracing::warn!(deployment = %d.id, "svc relay: {line}");
            self.db(|store| store.append_logs(&d.id, "route", &[line]))?;
            self.db(|store| store.mark_lagging(&d.id, &left_out, &s.route_id, now))?;
        }
        let remaining = hosts.len() - left_out.len();
        if switch.flipped.is_none() && remaining > 0 {
            // Every host has its agents: the hosts' tables make it serve, at a new sequence.
            if let Some(seq) = self.db(|store| store.flip_route_switch(&d.id, now))? {
                self.feed_changed(seq);
            }
            return Ok(());
        }
        self.take_over(d, s, jobs).await
    }

    /// The successor passed, and every gateway host serves it: it becomes the deployment's
    /// revision and route, and its jobs are ready, so the scheduler stops the predecessor's,
    /// which drain. Its switch ends: a host left out rejoins once it has the successor's
    /// agents and a table from after the promotion, where the successor serves.
    async fn take_over(&self, d: &Deployment, s: &Successor, jobs: &[&Execution]) -> Result<(), StoreError> {
        let reason = format!(
            "serves: validated through the gateway; revision {} stops once its open connections end (at most {} s)",
            d.revision,
            crate::coordinator::ingress_market::DRAIN_LIMIT.as_secs()
        );
        let promoted = self.db(|store| store.promote(&d.id, s.revision, &reason))?;
        let seq = self.db(|store| store.end_route_switch_serving(&d.id, &s.route_id))?;
        self.feed_changed(seq);
        // The rollout of V5's `stop_when_successor_ready`: the successor is ready (validated
        // through the gateway), so the scheduler stops its predecessor, once its connections
        // end.
        for job in jobs {
            self.market.validated(&job.execution_id);
        }
        self.schedule();
        // New connections go to the successor from here; the predecessor's open ones go on.
        self.sync_routes().await;
        // Its public path (the hostnames, not the route's ID) is validated at the next tick.
        self.due_now(&promoted);
        self.wake_here();
        Ok(())
    }

    /// A deployment that serves nothing: the successor takes over now (its job, if it was
    /// launched, becomes the deployment's, validated through the public path). Returns the
    /// deployment as it is then.
    pub(super) async fn take_over_at_once(&self, d: &Deployment, s: &Successor) -> Result<Deployment, StoreError> {
        // Not "serves": nothing does until the deployment is live again (issue 41).
        let reason = format!("takes over: the deployment was {}, so nothing had to stay up", d.state);
        let mut promoted = self.db(|store| store.promote(&d.id, s.revision, &reason))?;
        // The revision replaced goes, files and all, once no job of it runs (one that does is
        // stopped by the scheduler, and its files go when it has drained).
        self.remove_if_replaced(&d.id, d.revision, None);
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

    /// The successor failed: its policy version is withdrawn (the scheduler stops its job,
    /// and its files go once it has ended); the serving revision stays, and a host left out
    /// of its switch rejoins once it has that revision's agents and a table from after the
    /// failure (not one where the failed successor had flipped to serve).
    async fn fail_successor(&self, d: &Deployment, s: &Successor, why: &str) -> Result<(), StoreError> {
        self.db(|store| store.set_successor_state(&d.id, s.revision, SuccessorState::Failed, why))?;
        let seq = self.db(|store| store.end_route_switch_serving(&d.id, &d.route_id))?;
        self.feed_changed(seq);
        self.sync_routes().await;
        self.wake_here();
        Ok(())
    }
}
