//! The organization's applications as a list, and lifting a pause: `GET /api/applications`
//! and `POST /api/applications/{id}/resume` (`{"reason": "..."}`), recorded in activity
//! like the pause it lifts.

use axum::body::Body;
use axum::extract::{Path, State as Extract};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::json;

use super::rejection::{ApiError, BodyProblem, Denied, Rejection};
use super::{ApplicationView, Shared, authenticate, blocking, json_response, read_body, respond};
use crate::service::clock::now;
use crate::service::publish::MAX_REASON_CHARS;
use crate::service::store::{Activity, Status};

pub(super) async fn list(Extract(state): Extract<Shared>, headers: HeaderMap) -> Response {
    respond(
        async {
            let caller = authenticate(&state, &headers).await?;
            let state = state.clone();
            let apps = blocking(move || Ok(state.store.read()?.applications(caller.organization.id)?)).await?;
            let views: Vec<ApplicationView> = apps.into_iter().map(ApplicationView::from).collect();
            Ok(json_response(200, &json!({ "applications": views })))
        }
        .await,
    )
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ResumeRequest {
    reason: String,
}

pub(super) async fn resume(
    Extract(state): Extract<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Body,
) -> Response {
    respond(
        async {
            let caller = authenticate(&state, &headers).await?;
            let body = read_body(&state, &caller, &headers, body).await?.bytes;
            let request: ResumeRequest =
                serde_json::from_slice(&body).map_err(|e| Rejection::InvalidRequestBody(BodyProblem::ResumeBody(e)))?;
            let state = state.clone();
            let app = blocking(move || resume_application(&state, &caller, &id, &request.reason)).await?;
            Ok(json_response(200, &ApplicationView::from(app)))
        }
        .await,
    )
}

/// Lifts an application's pause with a reason (trimmed, 1-500 characters), recorded in
/// activity; a developer or more. The API's `resume` and the console's share it. Blocking:
/// one write transaction.
pub(crate) fn resume_application(
    state: &crate::service::State,
    caller: &crate::service::store::Caller,
    id: &str,
    reason: &str,
) -> Result<crate::service::store::Application, ApiError> {
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
