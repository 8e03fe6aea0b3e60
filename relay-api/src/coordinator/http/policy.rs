//! `GET /api/ingress/deployments/{project}/policy[?revision=N]`: the policy a revision
//! published (`coordinator::policy`), the serving revision's by default.

use std::sync::Arc;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::HeaderMap;
use serde::Deserialize;

use super::rejection::{BadRequest, Rejection};
use super::{ApiError, ApiResult, blocking, caller, ok};
use crate::coordinator::Engine;
use crate::coordinator::api::PolicyResponse;
use crate::coordinator::operations::{Missing, OperationError, deployment_of};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PolicyQuery {
    #[serde(default)]
    revision: Option<u32>,
}

pub(super) async fn policy(
    State(engine): State<Arc<Engine>>,
    headers: HeaderMap,
    UrlPath(project): UrlPath<String>,
    query: Result<Query<PolicyQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<PolicyResponse> {
    blocking(move || {
        let Query(q) =
            query.map_err(|e| ApiError::from(Rejection::InvalidRequest(BadRequest::Query(e.body_text()))))?;
        let caller = caller(&engine, &headers)?;
        let d = deployment_of(&engine, &caller, &project)?;
        let revision = q.revision.unwrap_or(d.revision);
        let missing = || OperationError::NotFound(Missing::Revision { deployment: d.id.clone(), revision });
        let published = engine.store().policy(&d.id, revision)?.ok_or_else(missing)?;
        let policy = serde_json::from_str(&published.policy_json).map_err(|e| ApiError::internal(&e))?;
        ok(PolicyResponse {
            deployment_id: d.id.clone(),
            project: d.project.clone(),
            policy_version: published.revision,
            schema_version: published.schema_version,
            authored_digest: published.authored_digest,
            policy_digest: published.policy_digest,
            published_at: manifest_core::projection::rfc3339_ms(u64::try_from(published.published_at).unwrap_or(0)),
            active: revision == d.revision,
            policy,
        })
    })
    .await
}
