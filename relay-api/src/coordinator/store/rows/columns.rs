//! Rows read back into the store's types.

use crate::coordinator::model::{Deployment, Successor, SuccessorState};
use crate::coordinator::state::DeploymentState;
use crate::coordinator::store::sql::SqlRow;
use crate::coordinator::store::{RouteKeys, StoreError};

/// A job's keys as stored (`credential_sha256`, `route_public_key`): none before its launch.
pub(super) fn route_keys_row(row: &SqlRow) -> Result<Option<RouteKeys>, StoreError> {
    let (credential_sha256, route_public_key) = (row.text(0)?, row.text(1)?);
    Ok((!credential_sha256.is_empty()).then_some(RouteKeys { credential_sha256, route_public_key }))
}

pub(in crate::coordinator::store) const DEPLOYMENT_COLUMNS: &str = "id, project, project_digest, manifest_digest, \
     canonical_hostname, route_id, ceiling_micros, state, state_reason, periods_spent, next_period_at, created_at, \
     updated_at, failure_code, revision";

pub(in crate::coordinator::store) fn deployment_row(row: &SqlRow) -> Result<Deployment, StoreError> {
    Ok(Deployment {
        id: row.text(0)?,
        project: row.text(1)?,
        project_digest: row.text(2)?,
        manifest_digest: row.text(3)?,
        url: String::new(),
        urls: Vec::new(),
        canonical_hostname: row.text(4)?,
        route_id: row.text(5)?,
        ceiling_micros: row.u64(6)?,
        state: row.spelled(7, DeploymentState::parse)?,
        state_reason: row.text(8)?,
        periods_spent: row.u64(9)?,
        next_period_at: row.opt_i64(10)?,
        created_at: row.i64(11)?,
        updated_at: row.i64(12)?,
        failure_code: row.opt_text(13)?,
        revision: row.u32(14)?,
    })
}

pub(super) const SUCCESSOR_COLUMNS: &str =
    "deployment_id, revision, project_digest, route_id, state, reason, created_at, updated_at, ceiling_micros";

pub(super) fn successor_row(row: &SqlRow) -> Result<Successor, StoreError> {
    Ok(Successor {
        deployment_id: row.text(0)?,
        revision: row.u32(1)?,
        project_digest: row.text(2)?,
        route_id: row.text(3)?,
        state: row.spelled(4, SuccessorState::parse)?,
        reason: row.text(5)?,
        created_at: row.i64(6)?,
        updated_at: row.i64(7)?,
        ceiling_micros: row.u64(8)?,
    })
}
