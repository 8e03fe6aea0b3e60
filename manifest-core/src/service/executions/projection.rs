//! Builds `svc.execution-convergence.v1` from what the store recorded, in one read
//! transaction: the active version's plan, each slot's current execution, one page of
//! executions, and the convergence state with its reason.

use std::collections::BTreeMap;

use svc_execution::plan::UpdateTiming;
use svc_execution::{ExecState, Execution};

use crate::plan;
use crate::projection::rfc3339_ms;
use crate::projection::{
    Convergence, Desired, EXECUTION_CONVERGENCE, Next, PageError, ReasonBody, Recent, Slot, State,
};
use crate::service::store::{Application, Status, StoreError, Transaction};

/// Why a projection could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ProjectionError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The active version cannot be read as a plan.
    #[error(transparent)]
    Plan(#[from] plan::PlanError),
    /// The page asked for cannot be given.
    #[error(transparent)]
    Page(#[from] PageError),
}

/// A page request: `?cursor=` and `?limit=`.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The cursor from a previous answer's `nextCursor`.
    pub cursor: Option<String>,
    /// How many executions (1-100, default 20).
    pub limit: Option<String>,
}

fn reason(code: &str, message: impl Into<String>) -> Option<ReasonBody> {
    Some(ReasonBody { code: code.to_owned(), message: message.into() })
}

/// The projection of `app`.
pub fn build(tx: &mut dyn Transaction, app: &Application, page: &Page) -> Result<Convergence, ProjectionError> {
    let (before, limit) = crate::projection::page(page.cursor.as_deref(), page.limit.as_deref())?;
    let version = match app.active_pointer_version {
        0 => None,
        v => tx.policy_version(app.key, v)?,
    };
    let plan = version.as_ref().map(|v| plan::plan(v.published())).transpose()?;
    let summary = tx.execution_summary(app.key)?;
    // One more than asked, to know whether an older page exists.
    let mut older = tx.executions_page(app.key, before, limit + 1)?;
    let next_cursor = (older.len() > limit).then(|| older[limit - 1].key.to_string());
    older.truncate(limit);

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
    let desired_slots = plan.as_ref().map_or(0, |p| p.slots);
    let slot_count = current.keys().next_back().map_or(0, |s| s + 1).max(desired_slots);
    let slots: Vec<Slot> = (0..slot_count)
        .map(|slot| match current.get(&slot) {
            Some(e) => Slot {
                slot,
                generation: e.generation,
                policy_version: e.policy_version,
                state: e.state.as_str().to_owned(),
                processor_id: e.processor_id.clone(),
                window_start: Some(rfc3339_ms(e.window_start)),
                window_end: Some(rfc3339_ms(e.window_end)),
                restarts: e.restarts,
            },
            None => Slot {
                slot,
                generation: 0,
                policy_version: app.active_pointer_version,
                state: "pending".to_owned(),
                processor_id: None,
                window_start: None,
                window_end: None,
                restarts: 0,
            },
        })
        .collect();

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
        let due = summary.next_at.is_some_and(|t| t <= crate::service::publish::now_ms());
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
            let now = crate::service::publish::now_ms();
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

    let recent = older
        .iter()
        .map(|e| Recent {
            execution_id: e.execution_id.clone(),
            slot: e.slot,
            generation: e.generation,
            attempt: e.attempt,
            policy_version: e.policy_version,
            state: e.state.as_str().to_owned(),
            processor_id: e.processor_id.clone(),
            window_start: rfc3339_ms(e.window_start),
            window_end: rfc3339_ms(e.window_end),
            changed_at: rfc3339_ms(e.changed_at),
            restarts: e.restarts,
            charged_micros: e.charged.service_credit_micros.to_string(),
            reason: e.reason.as_ref().map(|r| ReasonBody { code: r.code.clone(), message: r.message.clone() }),
        })
        .collect();
    Ok(Convergence {
        schema: EXECUTION_CONVERGENCE.to_owned(),
        application_id: app.application_id.clone(),
        status: app.status.as_str().to_owned(),
        desired: plan.as_ref().zip(version.as_ref()).map(|(p, v)| Desired {
            policy_version: v.version,
            policy_digest: v.policy_digest.clone(),
            slots: p.slots,
            execution: p.mode.as_str().to_owned(),
        }),
        convergence,
        slots,
        recent,
        next_cursor,
        next: summary.next_at.filter(|_| !app.settled).map(|t| Next { at: rfc3339_ms(t) }),
    })
}

#[cfg(test)]
#[path = "projection_tests.rs"]
mod tests;
