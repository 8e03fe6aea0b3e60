//! Builds `svc.execution-convergence.v1` from what the store recorded, in one read
//! transaction: the active version's plan, each slot's current execution, one page of
//! executions, and the convergence state with its reason. The answer itself is built as the
//! relay's is ([`crate::convergence`]); what is said here is the publication service's own.

use std::collections::BTreeMap;

use svc_execution::plan::UpdateTiming;
use svc_execution::{ExecState, Execution};

use crate::convergence::{Parts, Row, reason};
use crate::plan;
use crate::projection::{Convergence, State, rfc3339_ms};
use crate::service::store::{Application, Status, StoreError, Transaction};

/// Why a projection could not be built.
pub type ProjectionError = crate::convergence::ProjectionError<StoreError>;

impl From<StoreError> for ProjectionError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// A page request: `?cursor=` and `?limit=`.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The cursor from a previous answer's `nextCursor`.
    pub cursor: Option<String>,
    /// How many executions (1-100, default 20).
    pub limit: Option<String>,
}

/// An execution as the projection shows it.
fn row(e: &Execution) -> Row<'_> {
    Row {
        execution_id: &e.execution_id,
        slot: e.slot,
        generation: e.generation,
        attempt: e.attempt,
        policy_version: e.policy_version,
        state: e.state,
        processor_id: e.processor_id.as_deref(),
        window_start: e.window_start,
        window_end: e.window_end,
        changed_at: e.changed_at,
        restarts: e.restarts,
        charged_micros: e.charged.service_credit_micros,
        reason: e.reason.as_ref(),
    }
}

/// The projection of `app`.
pub fn build(tx: &mut dyn Transaction, app: &Application, page: &Page) -> Result<Convergence, ProjectionError> {
    let older = crate::convergence::read_page(
        page.cursor.as_deref(),
        page.limit.as_deref(),
        |before, limit| tx.executions_page(app.key, before, limit).map_err(ProjectionError::from),
        |e| e.key,
    )?;
    let version = match app.active_pointer_version {
        0 => None,
        v => tx.policy_version(app.key, v)?,
    };
    let plan = version.as_ref().map(|v| plan::plan(v.published())).transpose()?;
    let summary = tx.execution_summary(app.key)?;

    // Each slot's current execution: its newest live generation's newest attempt, or its
    // newest execution.
    let mut current: BTreeMap<u16, &Execution> = BTreeMap::new();
    for e in &summary.current {
        let better = current.get(&e.slot).is_none_or(|c| {
            let rank = |x: &Execution| (x.state.is_live() && x.state != ExecState::Stopping, x.generation, x.attempt);
            rank(e) > rank(c)
        });
        if better {
            current.insert(e.slot, e);
        }
    }
    // Every slot up to the highest recorded is listed, beyond the policy's too.
    let desired_slots = plan.as_ref().map_or(0, |p| p.slots);
    let slot_count = current.keys().next_back().map_or(0, |s| s + 1).max(desired_slots);

    let live: Vec<&Execution> = summary.current.iter().filter(|e| e.state.is_live()).collect();
    let convergence = if app.settled {
        State {
            state: "settled".into(),
            reason: reason("settled", "the `once` application ran its occurrence; it does not run again"),
        }
    } else if app.status != Status::Active {
        // Before what was recorded blocked: the scheduler holds no paused application (a pause
        // launches nothing), and until it has decided after the pause its record is the
        // active application's.
        let why = match app.status {
            Status::Paused => reason(
                "paused",
                format!(
                    "paused: {}; no new launches, running jobs run to their scheduled end",
                    app.pause_reason.as_deref().unwrap_or("no reason given")
                ),
            ),
            _ => reason("unpublished", "no policy version is published"),
        };
        State { state: if live.is_empty() { "idle" } else { "converging" }.into(), reason: why }
    } else if let Some((code, message)) = &summary.blocked {
        State { state: "blocked".into(), reason: reason(code, message.clone()) }
    } else if let Some(p) = &plan {
        let stale =
            live.iter().any(|e| e.policy_version < p.policy_version && p.update.timing == UpdateTiming::Immediate);
        let settling = live.iter().any(|e| {
            matches!(e.state, ExecState::Launching | ExecState::Running | ExecState::Restarting | ExecState::Stopping)
        });
        let due = summary.next_at.is_some_and(|t| t <= crate::service::clock::now_ms());
        if stale {
            State {
                state: "converging".into(),
                reason: reason(
                    "rolling_out",
                    format!("jobs of an older version run; policy version {} replaces them", p.policy_version),
                ),
            }
        } else if settling || due {
            State { state: "converging".into(), reason: reason("starting", "jobs are launching, starting or stopping") }
        } else if live.is_empty() {
            let now = crate::service::clock::now_ms();
            // A slot whose job failed waits for its window's end (`wait_until_scheduled_end`,
            // or recovery used up): say so, not that nothing has begun.
            let failed = current.values().find(|e| e.state == ExecState::Failed && e.window_end > now);
            let why = match failed {
                Some(e) => reason(
                    "waiting_after_failure",
                    format!(
                        "slot {}'s job failed ({}); the slot waits for its window's end at {}",
                        e.slot,
                        e.reason.as_ref().map_or("no reason recorded", |r| r.message.as_str()),
                        rfc3339_ms(e.window_end)
                    ),
                ),
                None => reason("waiting", "no job runs now; the next window or occurrence has not begun"),
            };
            State { state: "idle".into(), reason: why }
        } else {
            State { state: "converged".into(), reason: None }
        }
    } else {
        State { state: "idle".into(), reason: reason("unpublished", "no policy version is published") }
    };

    Ok(crate::convergence::build(Parts {
        application_id: app.application_id.clone(),
        status: app.status.as_str().to_owned(),
        desired: plan.as_ref().map(crate::convergence::desired),
        convergence,
        current: current.values().map(|e| row(e)).collect(),
        slots: slot_count,
        pending_version: app.active_pointer_version,
        page: crate::convergence::Paged {
            records: older.records.iter().map(row).collect(),
            next_cursor: older.next_cursor,
        },
        next_at: summary.next_at.filter(|_| !app.settled),
    }))
}

#[cfg(test)]
#[path = "projection_tests.rs"]
mod tests;
