//! A deployment's `svc.execution-convergence.v1`: its jobs as executions, in the shape
//! `svc app executions` reads for a published application (`manifest_core::projection`). An
//! ingress deployment runs its Manifest V5 continuously in one slot per job (`deployment.jobs`:
//! each slot a replica of its route): the desired policy version is the serving revision's
//! published policy (`coordinator::policy`), each launch of a revision a generation of each
//! slot (its policy version the revision), a same-job restart counted on it. A job's window is the time its route's funds
//! cover; its launches are charged nothing (the route is paid by the period, in the ledger).

use manifest_core::projection::{
    Convergence, Desired, EXECUTION_CONVERGENCE, PageError, ReasonBody, Recent, Slot, State,
};

use super::RelayStore;
use super::model::{Deployment, Session, SessionState, Successor, SuccessorState};
use super::state::DeploymentState;
use super::store::{ExecutionRecord, StoreError, now_ms};

/// Why a page could not be given.
#[derive(Debug, thiserror::Error)]
pub enum ProjectionError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The page asked for cannot be given.
    #[error(transparent)]
    Page(#[from] PageError),
    /// The serving revision's policy does not read as a plan (a bug or a damaged store).
    #[error(transparent)]
    Plan(#[from] manifest_core::plan::PlanError),
}

/// A store time (Unix milliseconds, never negative) as the projection writes it.
fn rfc3339_ms(at: i64) -> String {
    manifest_core::projection::rfc3339_ms(u64::try_from(at).unwrap_or(0))
}

fn reason(code: &str, message: impl Into<String>) -> Option<ReasonBody> {
    Some(ReasonBody { code: code.to_owned(), message: message.into() })
}

/// Where a route's funds reach, from its ledger's sessions: the end of the period under way
/// (or now, between periods), and the periods funded but not started after it. Not the
/// deployment's `next_period_at`: a coordinator restart clears it while the period runs on.
fn funded_until(sessions: &[Session], now: i64) -> i64 {
    let running = sessions.iter().find(|s| s.state == SessionState::Active).and_then(|s| s.ends_at);
    let unstarted: i64 = sessions
        .iter()
        .filter(|s| s.state == SessionState::Funded)
        .map(|s| i64::try_from(s.period_ms).unwrap_or(i64::MAX))
        .fold(0, i64::saturating_add);
    running.unwrap_or(now).max(now).saturating_add(unstarted)
}

/// The projection of deployment `d` (`successor`: its redeploy in progress), with one page of
/// executions: older than `cursor`, at most `limit`.
pub fn build(
    store: &RelayStore,
    d: &Deployment,
    successor: Option<&Successor>,
    cursor: Option<&str>,
    limit: Option<&str>,
) -> Result<Convergence, ProjectionError> {
    let (before, limit) = manifest_core::projection::page(cursor, limit)?;
    // One more than asked, to know whether an older page exists.
    let mut page = store.executions(&d.id, before, limit + 1)?;
    let next_cursor = (page.len() > limit).then(|| page[limit - 1].0.to_string());
    page.truncate(limit);
    // Each slot's current execution (the newest of the serving revision) and a drain under
    // way: read for themselves, so every page says the same.
    let (current, older_live) = store.execution_summary(&d.id, d.revision)?;
    let funded_until = funded_until(&store.sessions(&d.id)?, now_ms());
    let window_end = |e: &ExecutionRecord| if e.state.is_live() { funded_until } else { e.changed_at };
    let mut slots: Vec<Slot> = current
        .iter()
        .map(|e| Slot {
            slot: e.slot,
            generation: u64::from(e.generation),
            policy_version: u64::from(e.policy_version),
            state: e.state.as_str().to_owned(),
            processor_id: e.processor_id.clone(),
            window_start: Some(rfc3339_ms(e.created_at)),
            window_end: Some(rfc3339_ms(window_end(e))),
            restarts: e.restarts,
        })
        .collect();
    let rolling = successor.filter(|s| s.revision > d.revision && s.state != SuccessorState::Failed);
    let status = match d.state {
        DeploymentState::Stopped => "disabled",
        DeploymentState::PendingFunding => "paused",
        _ => "active",
    };
    let convergence = match d.state {
        DeploymentState::Stopped => {
            State { state: "idle".into(), reason: reason("stopped", "the deployment is stopped") }
        }
        DeploymentState::PendingFunding => State {
            state: "blocked".into(),
            reason: reason("quote_unfunded", format!("{}; fund a quote: `svc ingress fund`", d.state_reason)),
        },
        DeploymentState::Failed => State {
            state: "blocked".into(),
            reason: reason(d.failure_code.as_deref().unwrap_or("job_failed"), d.state_reason.clone()),
        },
        DeploymentState::Degraded => {
            State { state: "blocked".into(), reason: reason("route_degraded", d.state_reason.clone()) }
        }
        DeploymentState::Provisioning | DeploymentState::Validating => State {
            state: "converging".into(),
            reason: reason("starting", "the job is launching, or its route is being validated through the public path"),
        },
        DeploymentState::Live if rolling.is_some() || older_live => {
            let message = match rolling {
                Some(s) => format!(
                    "revision {} runs beside revision {} until it passes validation (stop_when_successor_ready)",
                    s.revision, d.revision
                ),
                None => {
                    format!("revision {} serves; the revision it replaced stops once its connections end", d.revision)
                }
            };
            State { state: "converging".into(), reason: reason("rolling_out", message) }
        }
        // A route of several jobs serves while one does; the others' state is said.
        DeploymentState::Live if slots.len() > 1 && slots.iter().any(|s| s.state != "ready") => {
            let down: Vec<String> = slots
                .iter()
                .filter(|s| s.state != "ready")
                .map(|s| format!("slot {} is {}", s.slot, s.state))
                .collect();
            State {
                state: "converging".into(),
                reason: reason("replica_down", format!("the route serves; {}", down.join(", "))),
            }
        }
        DeploymentState::Live => State { state: "converged".into(), reason: None },
    };
    let recent = page
        .iter()
        .map(|(_, e)| Recent {
            execution_id: e.execution_id.clone(),
            slot: e.slot,
            generation: u64::from(e.generation),
            attempt: e.attempt,
            policy_version: u64::from(e.policy_version),
            state: e.state.as_str().to_owned(),
            processor_id: e.processor_id.clone(),
            window_start: rfc3339_ms(e.created_at),
            window_end: rfc3339_ms(window_end(e)),
            changed_at: rfc3339_ms(e.changed_at),
            restarts: e.restarts,
            charged_micros: "0".to_owned(),
            reason: e.reason.as_ref().map(|r| ReasonBody { code: r.code.clone(), message: r.message.clone() }),
        })
        .collect();
    // A revision deployed before revisions published policies publishes at its next launch;
    // until then, its manifest's digest stands for its policy's.
    let desired = match store.policy(&d.id, d.revision)? {
        Some(policy) => {
            let plan = manifest_core::plan::plan(policy.published())?;
            Desired {
                policy_version: plan.policy_version,
                policy_digest: plan.policy_digest,
                slots: plan.slots,
                execution: plan.mode.as_str().to_owned(),
            }
        }
        None => Desired {
            policy_version: u64::from(d.revision),
            policy_digest: d.manifest_digest.clone(),
            slots: 1,
            execution: "continuous".to_owned(),
        },
    };
    // Slots the policy has and no launch yet: pending.
    for slot in 0..desired.slots {
        if !slots.iter().any(|s| s.slot == slot) {
            slots.push(Slot {
                slot,
                generation: 0,
                policy_version: u64::from(d.revision),
                state: "pending".to_owned(),
                processor_id: None,
                window_start: None,
                window_end: None,
                restarts: 0,
            });
        }
    }
    slots.sort_by_key(|s| s.slot);
    Ok(Convergence {
        schema: EXECUTION_CONVERGENCE.to_owned(),
        application_id: d.project.clone(),
        status: status.to_owned(),
        desired: Some(desired),
        convergence,
        slots,
        recent,
        next_cursor,
        next: None,
    })
}
