//! A deployment's `svc.execution-convergence.v1`: its jobs as executions, in the shape
//! `svc app executions` reads for a published application (`manifest_core::projection`). An
//! ingress deployment runs its Manifest V5 continuously in one slot per job (`deployment.jobs`:
//! each slot a replica of its route): the desired policy version is the serving revision's
//! published policy (`coordinator::policy`), each launch of a revision a generation of each
//! slot (its policy version the revision), a same-job restart counted on it. A job's window is the time its route's funds
//! cover; its launches are charged nothing (the route is paid by the period, in the ledger).
//! The answer is built as the publication service's is (`manifest_core::convergence`); what
//! is said here is the deployment's own.

use manifest_core::convergence::{Parts, Row, desired, reason};
use manifest_core::projection::{Convergence, Desired, State};
use svc_execution::ExecState;

use super::RelayStore;
use super::model::{Deployment, Session, SessionState, Successor, SuccessorState};
use super::state::DeploymentState;
use super::store::{ExecutionRecord, StoreError, now_ms};

/// Why a page could not be given.
pub type ProjectionError = manifest_core::convergence::ProjectionError<StoreError>;

impl From<StoreError> for ProjectionError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// A store time (Unix milliseconds, never negative) as the projection reads it.
fn unix_ms(at: i64) -> u64 {
    u64::try_from(at).unwrap_or(0)
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

/// An execution as the projection shows it: its window is the time its route's funds cover
/// (`funded_until`) until it ended; its launches are charged nothing (the route is paid by the
/// period, in the ledger).
fn row(e: &ExecutionRecord, funded_until: i64) -> Row<'_> {
    Row {
        execution_id: &e.execution_id,
        slot: e.slot,
        generation: u64::from(e.generation),
        attempt: e.attempt,
        policy_version: u64::from(e.policy_version),
        state: e.state,
        processor_id: e.processor_id.as_deref(),
        window_start: unix_ms(e.created_at),
        window_end: unix_ms(if e.state.is_live() { funded_until } else { e.changed_at }),
        changed_at: unix_ms(e.changed_at),
        restarts: e.restarts,
        charged_micros: 0,
        reason: e.reason.as_ref(),
    }
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
    let page = manifest_core::convergence::read_page(
        cursor,
        limit,
        |before, limit| store.executions(&d.id, before, limit).map_err(ProjectionError::from),
        |(key, _)| *key,
    )?;
    // Each slot's current execution (the newest of the serving revision) and a drain under
    // way: read for themselves, so every page says the same.
    let (current, older_live) = store.execution_summary(&d.id, d.revision)?;
    let funded_until = funded_until(&store.sessions(&d.id)?, now_ms());
    let rolling = successor.filter(|s| s.revision > d.revision && s.state != SuccessorState::Failed);
    let status = match d.state {
        DeploymentState::Stopped => "disabled",
        DeploymentState::PendingFunding => "paused",
        _ => "active",
    };
    // A route of several jobs serves while one does: those not ready.
    let down: Vec<String> = match current.len() {
        0 | 1 => Vec::new(),
        _ => current
            .iter()
            .filter(|e| e.state != ExecState::Ready)
            .map(|e| format!("slot {} is {}", e.slot, e.state.as_str()))
            .collect(),
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
        // The others' state is said.
        DeploymentState::Live if !down.is_empty() => State {
            state: "converging".into(),
            reason: reason("replica_down", format!("the route serves; {}", down.join(", "))),
        },
        DeploymentState::Live => State { state: "converged".into(), reason: None },
    };
    // A revision deployed before revisions published policies publishes at its next launch;
    // until then, its manifest's digest stands for its policy's.
    let desired = match store.policy(&d.id, d.revision)? {
        Some(policy) => desired(&manifest_core::plan::plan(policy.published())?),
        None => Desired {
            policy_version: u64::from(d.revision),
            policy_digest: d.manifest_digest.clone(),
            slots: 1,
            execution: "continuous".to_owned(),
        },
    };
    Ok(manifest_core::convergence::build(Parts {
        application_id: d.project.clone(),
        status: status.to_owned(),
        // Slots the policy has and no launch yet: pending.
        slots: desired.slots,
        desired: Some(desired),
        convergence,
        current: current.iter().map(|e| row(e, funded_until)).collect(),
        pending_version: u64::from(d.revision),
        page: manifest_core::convergence::Paged {
            records: page.records.iter().map(|(_, e)| row(e, funded_until)).collect(),
            next_cursor: page.next_cursor,
        },
        next_at: None,
    }))
}
