//! `POST /api/ingress/deployments`: a project's files in, a deployment out
//! (`operations::deploy_now`): 201 for a new deployment, 200 for the project it has already,
//! 202 for a redeploy's successor.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use svc_http::{Intake, IntakeError, Received};

use super::rejection::{BadRequest, Rejection};
use super::{ApiError, ApiResult, DEPLOY_LIMIT, body_refusal};
use crate::coordinator::Engine;
use crate::coordinator::api::DeployResponse;
use crate::coordinator::operations::{Deployed, deploy_now};

mod body;

use body::DeployBody;

pub(super) async fn deploy(
    State(engine): State<Arc<Engine>>,
    axum::Extension(intake): axum::Extension<Intake>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<DeployResponse> {
    // The token before the body: a caller who may not deploy costs no reading, and a large
    // body counts against its organization's bound (503 at once beyond it, before reading).
    let (reader, asked) = (Arc::clone(&engine), headers.clone());
    let caller = super::blocking(move || super::caller(&reader, &asked)).await?;
    let incoming = intake
        .body(&caller.org_id, &headers, body, DEPLOY_LIMIT)
        .map_err(|busy| ApiError::from(Rejection::TooManyLargeBodies(busy)))?;
    // Read whole into one buffer of the declared length, then parsed in place: measured
    // against decoding as it arrives, the same peak and far less memory left with the
    // allocator afterwards (docs/decisions.md, "Bounded intake").
    let Received { bytes, permit } = incoming.bytes().await.map_err(intake_refusal)?;
    // All of it off the runtime: decoding the app's files, writing them and the store's
    // transactions. The permit goes once the decoded files are gone.
    super::blocking(move || {
        let request = read(bytes)?;
        let deployed = deploy_now(&engine, &caller, request.into());
        drop(permit);
        let (status, answer) = match deployed? {
            Deployed::Created(answer) => (StatusCode::CREATED, answer),
            Deployed::Unchanged(answer) => (StatusCode::OK, answer),
            Deployed::Successor(answer) => (StatusCode::ACCEPTED, answer),
        };
        Ok((status, axum::Json(answer)))
    })
    .await
}

/// The deploy request in `bytes`, which are let go once the app's files are decoded from them.
fn read(bytes: Bytes) -> Result<DeployBody, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(&bytes);
    let request = serde_path_to_error::deserialize(&mut de).map_err(body_refusal)?;
    de.end().map_err(|trailing| Rejection::InvalidRequest(BadRequest::Body(trailing.to_string())))?;
    Ok(request)
}

fn intake_refusal(e: IntakeError) -> ApiError {
    match e {
        IntakeError::Busy(busy) => Rejection::TooManyLargeBodies(busy).into(),
        IntakeError::TooLarge { max } => Rejection::BodyTooLarge { max }.into(),
        IntakeError::Read(why) => Rejection::InvalidRequest(BadRequest::BodyIncomplete(why.to_string())).into(),
    }
}
