//! The organization's applications as a list, and lifting a pause: `GET /api/applications`
//! and `POST /api/applications/{id}/resume` (`{"reason": "..."}`), recorded in activity
//! like the pause it lifts.

use axum::body::Body;
use axum::extract::{Path, State as Extract};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::json;

use super::rejection::{BodyProblem, Rejection};
use super::{ApplicationView, Shared, as_caller, authenticate, blocking, json_response, read_body, respond};
use crate::service::operations::applications;

pub(super) async fn list(Extract(state): Extract<Shared>, headers: HeaderMap) -> Response {
    respond(
        async {
            let apps = as_caller(&state, &headers, applications::list).await?;
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
            let app = blocking(move || Ok(applications::resume(&state, &caller, &id, &request.reason)?)).await?;
            Ok(json_response(200, &ApplicationView::from(app)))
        }
        .await,
    )
}
