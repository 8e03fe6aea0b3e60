//! A route served by several jobs: its replicas. A revision's policy may ask for more than one
//! job (`deployment.jobs`, at most [`crate::coordinator::policy::MAX_JOBS`]); the scheduler
//! keeps one per slot, and each slot's agent joins the route as replica `job-<slot>`
//! ([`super::replica_name`]), holding the revision's keys.
//!
//! - **Live while one serves.** The deployment is live while at least one replica has passed
//!   validation through the public path; a replica that restarts, ends or fails its own
//!   validation leaves the others serving (the gateway takes it out of rotation by its
//!   heartbeats), and shows as a hint naming it. Only when none runs does the deployment go
//!   back to provisioning, as with one job.
//! - **Each replica validated on its own.** Besides the route's validation (whichever replica
//!   the gateway picks), each replica is validated alone: the probe names it by ALPN
//!   (`svc-replica/<name>`, beside its probe token), and a pass makes that job ready.
//! - **A redeploy takes over once every slot passed.** A successor's replicas are validated on
//!   their standby route, each alone; only when every slot of its policy runs and passed does
//!   it take over, and only then are its jobs ready (so the scheduler stops no predecessor
//!   before the whole successor serves).

use std::collections::HashSet;

use svc_execution::{ExecState, Execution};

use super::{Engine, ended, placed, replica_name};
use crate::coordinator::model::Deployment;
use crate::coordinator::store::RouteKeys;
use crate::hint::{Hint, Stage};

/// The newest execution of each slot of revision `revision` among a deployment's current
/// ones, by slot.
pub(super) fn newest_per_slot(executions: &[Execution], revision: u32) -> Vec<&Execution> {
    let mut newest: Vec<&Execution> = Vec::new();
    for e in executions.iter().filter(|e| e.policy_version == u64::from(revision)) {
        match newest.iter_mut().find(|n| n.slot == e.slot) {
            Some(n) if (e.generation, e.attempt) > (n.generation, n.attempt) => *n = e,
            Some(_) => {}
            None => newest.push(e),
        }
    }
    newest.sort_by_key(|e| e.slot);
    newest
}

/// Of the jobs of a revision none of which runs, the one whose ending the deployment follows:
/// the one with restarts left first (it is restarted; the deployment waits for it).
pub(super) fn ended_job<'a>(jobs: &[&'a Execution]) -> Option<&'a Execution> {
    jobs.iter().copied().filter(|e| ended(e)).min_by_key(|e| e.restarts)
}

/// Replicas whose last validation on their own failed, by execution ID, with why (what the
/// deployment's hints show).
#[derive(Debug, Default)]
pub(super) struct ReplicaVerdicts {
    failing: std::collections::HashMap<String, Hint>,
    /// Endings of replicas already said in their deployment's logs: (execution, which ending).
    told: HashSet<(String, u32)>,
}

/// One round of validating replicas alone: each job's outcome, in the order asked.
pub(super) type Round = Vec<(String, Result<serde_json::Value, Hint>)>;

impl Engine {
    fn verdicts(&self) -> std::sync::MutexGuard<'_, ReplicaVerdicts> {
        self.replica_verdicts.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How many jobs revision `revision`'s policy runs (1 if it cannot be read).
    pub(super) fn slots_of(&self, deployment_id: &str, revision: u32) -> usize {
        self.db(|store| store.policy(deployment_id, revision))
            .ok()
            .flatten()
            .and_then(|policy| manifest_core::plan::plan(policy.published()).ok())
            .map_or(1, |plan| usize::from(plan.slots).max(1))
    }

    /// Validates each of `jobs` (replicas of `route_id`) alone through the public path, at
    /// once, a pass by a validator `pins` does not list counting as a failure. What failed is
    /// kept for the deployment's hints.
    pub(super) async fn validate_replicas(
        &self,
        d: &Deployment,
        route_id: &str,
        keys: &RouteKeys,
        standby: bool,
        jobs: &[&Execution],
        pins: &[String],
    ) -> Round {
        let names: Vec<String> = jobs.iter().map(|e| replica_name(e.slot)).collect();
        let probe = &self.parts.probe;
        let probes = names
            .iter()
            .map(|name| probe.validate(route_id, &d.canonical_hostname, keys, standby, Some(name.as_str())));
        let outcomes = futures_util::future::join_all(probes).await;
        let mut round = Round::new();
        for ((job, name), mut probed) in jobs.iter().zip(&names).zip(outcomes) {
            self.check_pins(d, pins, &mut probed.outcome);
            if let Err(hint) = &mut probed.outcome {
                hint.problem = format!("replica {name}: {}", hint.problem);
            }
            round.push((job.execution_id.clone(), probed.outcome));
        }
        let mut kept = self.verdicts();
        if kept.failing.len() > 4096 {
            // Those of jobs long gone: the next round fills it again.
            kept.failing.clear();
        }
        for (id, outcome) in &round {
            match outcome {
                Err(hint) => kept.failing.insert(id.clone(), hint.clone()),
                Ok(_) => kept.failing.remove(id),
            };
        }
        round
    }

    /// Job `execution_id` passed validation (its route's, when it is the only replica).
    pub(super) fn replica_passed(&self, execution_id: &str) {
        self.verdicts().failing.remove(execution_id);
    }

    /// The kept hints of `jobs` whose last validation on their own failed.
    pub(super) fn replica_hints_of(&self, jobs: &[&Execution]) -> Vec<Hint> {
        let kept = self.verdicts();
        jobs.iter().filter_map(|e| kept.failing.get(&e.execution_id).cloned()).collect()
    }

    /// Says once in the deployment's logs that replica `e` stopped serving (ended, or
    /// restarting) while the others serve on.
    pub(super) fn replica_down(&self, d: &Deployment, e: &Execution) {
        // One line per ending: a job that ended with n restarts shows as Failed(n), then as
        // Restarting(n + 1) once restarted.
        let ending = if e.state == ExecState::Restarting { e.restarts.saturating_sub(1) } else { e.restarts };
        let first = {
            let mut kept = self.verdicts();
            if kept.told.len() > 4096 {
                kept.told.clear();
            }
            kept.told.insert((e.execution_id.clone(), ending))
        };
        if !first {
            return;
        }
        let name = replica_name(e.slot);
        let most = self.max_restarts();
        let line = match e.state {
            ExecState::Restarting => format!(
                "replica {name}: {}; it restarted (restart {} of {most}) while the other replicas serve",
                self.ending_of(e),
                e.restarts,
            ),
            _ if e.restarts < most => {
                let n = e.restarts + 1;
                let delay = svc_execution::scheduler::retry_backoff(n) as f32 / 1000.0;
                format!(
                    "replica {name}: {}; restarting it in {delay} s (restart {n} of {most}) while the other replicas \
                     serve",
                    self.ending_of(e)
                )
            }
            _ => format!(
                "replica {name}: {}; it is not restarted any more (after {} restarts), and the other replicas serve; \
                 deploy again to replace it",
                self.ending_of(e),
                e.restarts
            ),
        };
        let _ = self.db(|store| store.append_logs(&d.id, "route", &[line]));
    }

    /// What the deployment's replicas need: each one not running, or failing its own
    /// validation (only for a route of several jobs).
    pub(super) fn replica_hints(&self, d: &Deployment) -> Vec<Hint> {
        let Ok(executions) = self.db(|store| store.current_executions(&d.id, d.revision)) else { return Vec::new() };
        let jobs = newest_per_slot(&executions, d.revision);
        if jobs.len() < 2 {
            return Vec::new();
        }
        let kept = self.verdicts();
        let mut hints = Vec::new();
        for e in jobs {
            let name = replica_name(e.slot);
            if placed(e) && e.state != ExecState::Restarting {
                if let Some(hint) = kept.failing.get(&e.execution_id) {
                    hints.push(hint.clone());
                }
                continue;
            }
            let why = e.reason.as_ref().map_or_else(|| format!("it is {}", e.state.as_str()), |r| r.message.clone());
            hints.push(Hint::new(
                "replica_down",
                Stage::Job,
                format!("replica {name} does not serve: {why}"),
                "the other replicas serve meanwhile; read why in `svc ingress logs`, and if it does not come back, \
                 fix the app and `svc ingress deploy` again",
            ));
        }
        hints
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn execution(slot: u16, generation: u64, attempt: u32, revision: u64) -> Execution {
        Execution {
            key: 0,
            execution_id: format!("d/{slot}/{generation}/{attempt}"),
            slot,
            generation,
            attempt,
            policy_version: revision,
            state: ExecState::Running,
            processor_id: None,
            window_start: 0,
            window_end: 0,
            restarts: 0,
            charged: Default::default(),
            created_at: 0,
            changed_at: 0,
            silent_since: None,
            reason: None,
        }
    }

    #[test]
    fn each_slot_is_followed_by_its_newest_execution_of_the_revision() {
        let executions = [execution(1, 1, 1, 2), execution(0, 1, 1, 2), execution(0, 1, 2, 2), execution(1, 2, 1, 3)];
        let ids: Vec<&str> = newest_per_slot(&executions, 2).iter().map(|e| e.execution_id.as_str()).collect();
        assert_eq!(ids, ["d/0/1/2", "d/1/1/1"]);
        assert!(newest_per_slot(&executions, 4).is_empty());
    }
}
