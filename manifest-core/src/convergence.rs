//! The one builder of `svc.execution-convergence.v1` ([`crate::projection`]) for both
//! services that run executions: the publication service's applications
//! (`service::executions::projection`) and the ingress coordinator's deployments
//! (`relay_api::coordinator::executions`).
//!
//! Each service reads its own store and says what only it knows: its status, what it should
//! run ([`desired`]), its convergence state and reason, each slot's current execution, and its
//! executions as [`Row`]s. The builder does the rest the same way for both: one page of
//! executions with its cursor ([`read_page`]), the slots (a current execution's, or `pending`),
//! the `recent` list, and the answer.
//!
//! It lives here, under the projection's types and beside [`crate::plan`] (feature
//! `executions`), because both services depend on manifest-core with that feature; in
//! svc-execution it would need the projection's types, which are manifest-core's.

use std::collections::BTreeSet;

use svc_execution::plan::Plan;
use svc_execution::{ExecState, Reason};

use crate::plan::PlanError;
use crate::projection::{
    Convergence, Desired, EXECUTION_CONVERGENCE, Next, PageError, ReasonBody, Recent, Slot, State, page, rfc3339_ms,
};

/// Why a projection could not be built; `S`, the service's store error.
#[derive(Debug, thiserror::Error)]
pub enum ProjectionError<S> {
    /// The store failed.
    #[error(transparent)]
    Store(S),
    /// The policy it should run does not read as a plan (a bug or a damaged store).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The page asked for cannot be given.
    #[error(transparent)]
    Page(#[from] PageError),
}

/// One execution as the projection shows it, from what a service recorded. Times are Unix
/// milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Row<'r> {
    /// The market's order ID.
    pub execution_id: &'r str,
    /// Its slot.
    pub slot: u16,
    /// The slot's generation.
    pub generation: u64,
    /// Which attempt of that generation.
    pub attempt: u32,
    /// The policy version it runs.
    pub policy_version: u64,
    /// Its state.
    pub state: ExecState,
    /// Where it was placed.
    pub processor_id: Option<&'r str>,
    /// When its window began.
    pub window_start: u64,
    /// When its window ends (or ended).
    pub window_end: u64,
    /// When its state last changed.
    pub changed_at: u64,
    /// Its same-job restarts.
    pub restarts: u32,
    /// What its launch was charged, service credit micros.
    pub charged_micros: u128,
    /// Why it is in its state.
    pub reason: Option<&'r Reason>,
}

/// One page of a service's executions, newest first, and the cursor of the next (older) one.
#[derive(Debug)]
pub struct Paged<R> {
    /// At most the limit asked for.
    pub records: Vec<R>,
    /// Where the next page starts, if there is one.
    pub next_cursor: Option<String>,
}

/// The page `cursor` and `limit` ask for (as a query gives them): `read` reads at most `n`
/// executions older than a row (all, without), newest first; `key` is a record's row, the
/// cursor of the page after it.
pub fn read_page<R, E: From<PageError>>(
    cursor: Option<&str>,
    limit: Option<&str>,
    read: impl FnOnce(Option<i64>, usize) -> Result<Vec<R>, E>,
    key: impl Fn(&R) -> i64,
) -> Result<Paged<R>, E> {
    let (before, limit) = page(cursor, limit)?;
    // One more than asked, to know whether an older page exists.
    let mut records = read(before, limit + 1)?;
    let next_cursor = (records.len() > limit).then(|| key(&records[limit - 1]).to_string());
    records.truncate(limit);
    Ok(Paged { records, next_cursor })
}

/// A reason as the projection writes it.
pub fn reason(code: &str, message: impl Into<String>) -> Option<ReasonBody> {
    Some(ReasonBody { code: code.to_owned(), message: message.into() })
}

/// What `plan` asks for, as the projection's `desired`.
pub fn desired(plan: &Plan) -> Desired {
    Desired {
        policy_version: plan.policy_version,
        policy_digest: plan.policy_digest.clone(),
        slots: plan.slots,
        execution: plan.mode.as_str().to_owned(),
    }
}

/// What a service says of one application (or deployment), and what it read, for [`build`].
#[derive(Debug)]
pub struct Parts<'r> {
    /// Its `applicationId`.
    pub application_id: String,
    /// Its publication status (`active`, `paused`, `disabled`).
    pub status: String,
    /// What it should run.
    pub desired: Option<Desired>,
    /// Where it is, and why.
    pub convergence: State,
    /// Each slot's current execution (one a slot): listed whatever its slot.
    pub current: Vec<Row<'r>>,
    /// Slots from 0 below this are listed, `pending` where none is current.
    pub slots: u16,
    /// The policy version a pending slot waits for.
    pub pending_version: u64,
    /// One page of executions.
    pub page: Paged<Row<'r>>,
    /// When it is stepped next, if it will be.
    pub next_at: Option<u64>,
}

/// The projection.
pub fn build(parts: Parts<'_>) -> Convergence {
    let mut slots: Vec<Slot> = parts
        .current
        .iter()
        .map(|e| Slot {
            slot: e.slot,
            generation: e.generation,
            policy_version: e.policy_version,
            state: e.state.as_str().to_owned(),
            processor_id: e.processor_id.map(str::to_owned),
            window_start: Some(rfc3339_ms(e.window_start)),
            window_end: Some(rfc3339_ms(e.window_end)),
            restarts: e.restarts,
        })
        .collect();
    let current: BTreeSet<u16> = parts.current.iter().map(|e| e.slot).collect();
    for slot in 0..parts.slots {
        if !current.contains(&slot) {
            slots.push(Slot {
                slot,
                generation: 0,
                policy_version: parts.pending_version,
                state: "pending".to_owned(),
                processor_id: None,
                window_start: None,
                window_end: None,
                restarts: 0,
            });
        }
    }
    slots.sort_by_key(|s| s.slot);
    let recent = parts
        .page
        .records
        .iter()
        .map(|e| Recent {
            execution_id: e.execution_id.to_owned(),
            slot: e.slot,
            generation: e.generation,
            attempt: e.attempt,
            policy_version: e.policy_version,
            state: e.state.as_str().to_owned(),
            processor_id: e.processor_id.map(str::to_owned),
            window_start: rfc3339_ms(e.window_start),
            window_end: rfc3339_ms(e.window_end),
            changed_at: rfc3339_ms(e.changed_at),
            restarts: e.restarts,
            charged_micros: e.charged_micros.to_string(),
            reason: e.reason.map(|r| ReasonBody { code: r.code.clone(), message: r.message.clone() }),
        })
        .collect();
    Convergence {
        schema: EXECUTION_CONVERGENCE.to_owned(),
        application_id: parts.application_id,
        status: parts.status,
        desired: parts.desired,
        convergence: parts.convergence,
        slots,
        recent,
        next_cursor: parts.page.next_cursor,
        next: parts.next_at.map(|t| Next { at: rfc3339_ms(t) }),
    }
}
