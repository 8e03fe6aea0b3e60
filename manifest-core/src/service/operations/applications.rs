//! An organization's applications: creating one and lifting a pause (`resume`), each
//! recorded in activity like the publication that pauses, and what is read of them (each
//! one's versions, activity and executions, and the organization's capabilities).

use std::collections::BTreeSet;

use super::OperationError;
use super::publish::MAX_REASON_CHARS;
use super::refusal::{BodyProblem, Denied, Rejection};
use crate::projection::{Convergence, State as Verdict};
use crate::service::State;
use crate::service::auth::new_application_uid;
use crate::service::capability::Statement;
use crate::service::clock::now;
use crate::service::executions::projection;
use crate::service::store::{
    Activity, Application, Caller, OutputDrop, OutputRecord, PolicyVersion, Status, StoreError, Transaction,
};

/// Creates the application `application_id` (already checked to be an application ID) in the
/// caller's organization, a developer or more; recorded in activity. Blocking: one write
/// transaction.
pub(crate) fn create(state: &State, caller: &Caller, application_id: &str) -> Result<Application, OperationError> {
    if !caller.role.can_publish() {
        return Err(Rejection::Forbidden(Denied::CreateApplication).into());
    }
    let uid = new_application_uid().map_err(|e| OperationError::internal_because("a new application UID", e))?;
    let mut tx = state.store.write()?;
    let app = match tx.insert_application(caller.organization.id, application_id, &uid) {
        Err(StoreError::Conflict(m)) => return Err(Rejection::ApplicationExists(m).into()),
        other => other?,
    };
    tx.record_activity(
        app.key,
        &Activity {
            at: now(),
            actor: caller.actor(),
            action: "application_created".to_owned(),
            policy_version: None,
            status: Some(app.status.as_str().to_owned()),
            reason: None,
        },
    )?;
    tx.commit()?;
    Ok(app)
}

/// Lifts an application's pause with a reason (trimmed, 1-500 characters), recorded in
/// activity; a developer or more. Blocking: one write transaction.
pub(crate) fn resume(state: &State, caller: &Caller, id: &str, reason: &str) -> Result<Application, OperationError> {
    let reason = reason.trim().to_owned();
    // The longest resume reason is the longest pause reason.
    if reason.is_empty() || reason.chars().count() > MAX_REASON_CHARS {
        return Err(Rejection::InvalidRequestBody(BodyProblem::ResumeReason { max_chars: MAX_REASON_CHARS }).into());
    }
    if !caller.role.can_publish() {
        return Err(Rejection::Forbidden(Denied::Resume).into());
    }
    let mut tx = state.store.write()?;
    let mut app = tx.application(caller.organization.id, id)?.ok_or_else(|| Rejection::application_not_found(id))?;
    if app.status != Status::Paused {
        return Err(Rejection::NotPaused { application_id: id.to_owned(), status: app.status.as_str() }.into());
    }
    app.status = Status::Active;
    app.pause_reason = None;
    tx.update_application(&app)?;
    tx.record_activity(
        app.key,
        &Activity {
            at: now(),
            actor: caller.actor(),
            action: "application_resumed".to_owned(),
            policy_version: Some(app.active_pointer_version),
            status: Some(app.status.as_str().to_owned()),
            reason: Some(reason),
        },
    )?;
    tx.commit()?;
    state.scheduler.wake();
    Ok(app)
}

/// The organization's applications.
pub(crate) fn list(state: &State, caller: &Caller) -> Result<Vec<Application>, OperationError> {
    Ok(state.store.read()?.applications(caller.organization.id)?)
}

/// Reads the caller's application `id` (404 for none of the organization's) and `f` of it, in
/// one read transaction.
fn reading<T>(
    state: &State,
    caller: &Caller,
    id: &str,
    f: impl FnOnce(&mut dyn Transaction, Application) -> Result<T, OperationError>,
) -> Result<T, OperationError> {
    let mut tx = state.store.read()?;
    let app = tx.application(caller.organization.id, id)?.ok_or_else(|| Rejection::application_not_found(id))?;
    f(tx.as_mut(), app)
}

/// The application, with its executions' convergence state (the latest execution).
pub(crate) fn show(state: &State, caller: &Caller, id: &str) -> Result<(Application, Convergence), OperationError> {
    reading(state, caller, id, |tx, app| {
        let page = projection::Page { cursor: None, limit: Some("1".to_owned()) };
        let convergence = projection::build(tx, &app, &page)
            .map_err(|e| OperationError::internal_because("the projection of the application", e))?;
        Ok((app, convergence))
    })
}

/// The application's policy versions, oldest first.
pub(crate) fn versions(
    state: &State,
    caller: &Caller,
    id: &str,
) -> Result<(Application, Vec<PolicyVersion>), OperationError> {
    reading(state, caller, id, |tx, app| {
        let versions = tx.policy_versions(app.key)?;
        Ok((app, versions))
    })
}

/// One policy version of the application, by its number as given (404 for none).
pub(crate) fn version(
    state: &State,
    caller: &Caller,
    id: &str,
    n: &str,
) -> Result<(Application, PolicyVersion), OperationError> {
    reading(state, caller, id, |tx, app| {
        let not_found = || Rejection::PolicyVersionNotFound { version: n.to_owned() };
        let number: u64 = n.parse().map_err(|_| not_found())?;
        let version = tx.policy_version(app.key, number)?.ok_or_else(not_found)?;
        Ok((app, version))
    })
}

/// The application's activity.
pub(crate) fn activity(
    state: &State,
    caller: &Caller,
    id: &str,
) -> Result<(Application, Vec<Activity>), OperationError> {
    reading(state, caller, id, |tx, app| {
        let activity = tx.activity(app.key)?;
        Ok((app, activity))
    })
}

/// A page of the application's executions and their convergence (`svc.execution-convergence.v1`).
pub(crate) fn executions(
    state: &State,
    caller: &Caller,
    id: &str,
    page: &projection::Page,
) -> Result<Convergence, OperationError> {
    reading(state, caller, id, |tx, app| {
        projection::build(tx, &app, page).map_err(|e| match e {
            projection::ProjectionError::Page(_) => Rejection::InvalidQuery(e.to_string()).into(),
            projection::ProjectionError::Store(e) => e.into(),
            projection::ProjectionError::Plan(e) => {
                OperationError::internal_because("the plan of the application's active version", e)
            }
        })
    })
}

/// What the caller's organization may publish: its capabilities and limits.
pub(crate) fn capabilities(state: &State, caller: &Caller) -> Result<Statement, OperationError> {
    let org = &caller.organization;
    let grants = state.store.read()?.grants(org.id)?;
    Ok(Statement::new(&org.name, org.tier, &grants, state.schema_pairs, org.spend_authority_micros))
}

/// Which of the application's output lines a page holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct OutputPage {
    /// One execution's (its whole ID, or `SLOT/GENERATION/ATTEMPT`), or every execution's.
    pub(crate) execution: Option<String>,
    /// Lines after this `seq`.
    pub(crate) after: i64,
    /// At most this many.
    pub(crate) limit: u32,
}

/// A page of the application's output.
pub(crate) struct Output {
    /// The application.
    pub(crate) application: Application,
    /// The lines, oldest first.
    pub(crate) lines: Vec<OutputRecord>,
    /// For each execution the page shows, how many of its lines were kept and dropped.
    pub(crate) dropped: Vec<OutputDrop>,
    /// The `seq` to ask the next page after.
    pub(crate) next: i64,
    /// Whether there are more lines after this page.
    pub(crate) more: bool,
}

/// A page of the application's jobs' output; another organization's application is the same
/// 404 as a missing one, and so is an execution of another application.
pub(crate) fn output(state: &State, caller: &Caller, id: &str, page: OutputPage) -> Result<Output, OperationError> {
    reading(state, caller, id, |tx, app| {
        // An execution of this application: its ID starts with the application's UID;
        // `SLOT/GENERATION/ATTEMPT` is short for it.
        let execution = page.execution.map(|e| {
            if e.split('/').count() == 3 && e.split('/').all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            {
                format!("{}/{e}", app.application_uid)
            } else {
                e
            }
        });
        if let Some(e) = &execution
            && !e.starts_with(&format!("{}/", app.application_uid))
        {
            return Err(StoreError::NotFound(format!("application {} has no execution {e}", app.application_id)).into());
        }
        let mut lines = tx.output_after(app.key, execution.as_deref(), page.after, page.limit + 1)?;
        let more = lines.len() > page.limit as usize;
        lines.truncate(page.limit as usize);
        let mut shown: BTreeSet<&str> = lines.iter().map(|l| l.execution_id.as_str()).collect();
        if let Some(e) = &execution {
            shown.insert(e);
        }
        let shown: Vec<&str> = shown.into_iter().collect();
        let dropped = tx.output_drops(app.key, &shown)?.into_iter().filter(|d| d.dropped > 0).collect();
        let next = lines.last().map_or(page.after, |l| l.seq);
        Ok(Output { application: app, lines, dropped, next, more })
    })
}

/// The convergence verdict of an application (its projection's first page of one).
fn verdict_of(tx: &mut dyn Transaction, app: &Application) -> Result<Verdict, OperationError> {
    let page = projection::Page { cursor: None, limit: Some("1".to_owned()) };
    projection::build(tx, app, &page)
        .map(|c| c.convergence)
        .map_err(|e| OperationError::internal_because("the projection of the application", e))
}

/// One page of the organization's applications (`number` from 1, `per_page` each), each with
/// its convergence verdict, and how many there are in all: a page's reads are bounded
/// whatever the organization holds.
pub(crate) fn page_of_applications(
    state: &State,
    caller: &Caller,
    number: usize,
    per_page: usize,
) -> Result<(Vec<(Application, Verdict)>, usize), OperationError> {
    let mut tx = state.store.read()?;
    let apps = tx.applications(caller.organization.id)?;
    let total = apps.len();
    let mut rows = Vec::new();
    for app in apps.into_iter().skip(number.saturating_sub(1).saturating_mul(per_page)).take(per_page) {
        let verdict = verdict_of(tx.as_mut(), &app)?;
        rows.push((app, verdict));
    }
    Ok((rows, total))
}

/// An application at a glance: its convergence verdict, its active version, and its recent
/// activity (the newest `activity` entries).
pub(crate) struct Overview {
    /// The application.
    pub(crate) application: Application,
    /// Its convergence verdict.
    pub(crate) verdict: Verdict,
    /// Its active version, if any.
    pub(crate) active: Option<PolicyVersion>,
    /// Its newest activity, newest first.
    pub(crate) activity: Vec<Activity>,
}

/// [`Overview`] of the caller's application `id`.
pub(crate) fn overview(state: &State, caller: &Caller, id: &str, activity: u32) -> Result<Overview, OperationError> {
    reading(state, caller, id, |tx, app| {
        let verdict = verdict_of(tx, &app)?;
        // The active version alone (review finding: every version was read, each up to a few
        // MiB, on every overview).
        let active = match app.active_pointer_version {
            0 => None,
            n => tx.policy_version(app.key, n)?,
        };
        let activity = tx.recent_activity(app.key, activity)?;
        Ok(Overview { application: app, verdict, active, activity })
    })
}

/// What one of an application's recent executions printed.
pub(crate) struct RecentOutput {
    /// The execution's slot, generation and attempt.
    pub(crate) slot: u16,
    pub(crate) generation: u64,
    pub(crate) attempt: u32,
    /// Its newest lines, oldest first.
    pub(crate) lines: Vec<OutputRecord>,
    /// Lines it keeps in all.
    pub(crate) kept: u64,
    /// Lines it did not keep.
    pub(crate) dropped: u64,
}

/// The application's newest `executions` executions and their convergence, and the newest
/// `lines` lines of each of them that printed, in the projection's order.
pub(crate) fn recent_executions(
    state: &State,
    caller: &Caller,
    id: &str,
    executions: u32,
    lines: u32,
) -> Result<(Convergence, Vec<RecentOutput>), OperationError> {
    reading(state, caller, id, |tx, app| {
        let page = projection::Page { cursor: None, limit: Some(executions.to_string()) };
        let convergence = projection::build(tx, &app, &page)
            .map_err(|e| OperationError::internal_because("the projection of the application", e))?;
        let ids: Vec<&str> = convergence.recent.iter().map(|e| e.execution_id.as_str()).collect();
        let sizes = tx.output_drops(app.key, &ids)?;
        let mut shown = Vec::new();
        for e in &convergence.recent {
            let Some(size) = sizes.iter().find(|s| s.execution_id == e.execution_id) else { continue };
            shown.push(RecentOutput {
                slot: e.slot,
                generation: e.generation,
                attempt: e.attempt,
                lines: tx.output_tail(app.key, &e.execution_id, lines)?,
                kept: size.kept,
                dropped: size.dropped,
            });
        }
        Ok((convergence, shown))
    })
}

/// The caller's application `id` (404 for none of the organization's).
pub(crate) fn find(state: &State, caller: &Caller, id: &str) -> Result<Application, OperationError> {
    reading(state, caller, id, |_, app| Ok(app))
}
