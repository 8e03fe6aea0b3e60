//! The store's rows, written once over [`Sql`] for both backends: [`Tx`] is a transaction of
//! either, seen as the publication's [`Transaction`](super::Transaction)
//! ([`publication`]) and the scheduler's [`ExecutionTx`](svc_execution::executor::ExecutionTx)
//! ([`executions`]). Only SQL that SQLite and PostgreSQL read alike (see [`svc_sql`]).

mod decided;
mod executions;
mod keys;
mod output;
mod publication;
mod sessions;

// The hot path's statements, for the backend that runs them on the async runtime.
pub(super) use decided::{DECIDED_CALL, INPUTS, decided_call_params, inputs_from_rows};
pub(super) use publication::{CALLER, caller_row};
// The row a secret's value is sealed for, for the store's start and rotation.
pub(super) use keys::context as secret_context;

use svc_sql::{Sql, SqlError, SqlRow};

use super::{AcceptedArtifact, ArtifactEvidence, Organization, PolicyVersion, StoreError};
use crate::service::capability::Tier;

/// A transaction of either backend, and the keys that seal and open secret values (`None`
/// before the store's keys are started, or for work that touches no secret).
pub(crate) struct Tx<S>(pub(crate) S, pub(crate) Option<std::sync::Arc<svc_keys::Keyring>>);

impl<S: Sql> Tx<S> {
    fn sql(&mut self) -> &mut S {
        &mut self.0
    }
}

impl From<SqlError> for StoreError {
    fn from(e: SqlError) -> StoreError {
        if e.is_transient() { StoreError::Unavailable(Box::new(e)) } else { StoreError::Backend(Box::new(e)) }
    }
}

/// Counts and versions as the schemas keep them (signed 64 bits); each is far below 2^63.
pub(crate) fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

const ORGANIZATION_COLUMNS: &str = "id, name, entitlement, spend_authority_micros";

/// An organization from [`ORGANIZATION_COLUMNS`] at `at`.
fn organization_row(r: &SqlRow, at: usize) -> Result<Organization, SqlError> {
    Ok(Organization {
        id: r.i64(at)?,
        name: r.text(at + 1)?,
        tier: r.spelled(at + 2, Tier::parse)?,
        spend_authority_micros: r.opt_u64(at + 3)?,
    })
}

const VERSION_COLUMNS: &str =
    "version, schema_version, authored_digest, policy_digest, policy, authored, jobs, execution, published_by";

/// A policy version from [`VERSION_COLUMNS`].
fn version_row(r: &SqlRow) -> Result<PolicyVersion, SqlError> {
    Ok(PolicyVersion {
        version: r.u64(0)?,
        schema_version: r.u8(1)?,
        authored_digest: r.text(2)?,
        policy_digest: r.text(3)?,
        policy: r.text(4)?,
        authored: r.text(5)?,
        jobs: r.u64(6)?,
        execution: r.text(7)?,
        published_by: r.text(8)?,
    })
}

/// An artifact's evidence from `cid, digest, kind, encryption, image_digest` at `at`.
fn evidence_row(r: &SqlRow, at: usize) -> Result<ArtifactEvidence, SqlError> {
    Ok(ArtifactEvidence {
        cid: r.text(at)?,
        digest: r.text(at + 1)?,
        kind: r.text(at + 2)?,
        encryption: r.text(at + 3)?,
        image_digest: r.opt_text(at + 4)?,
    })
}

/// An accepted artifact from `repository, ref, workflow_ref, manifest_path` and the
/// evidence's columns at `at`.
fn accepted_row(r: &SqlRow, at: usize) -> Result<AcceptedArtifact, SqlError> {
    Ok(AcceptedArtifact {
        repository: r.text(at)?,
        git_ref: r.text(at + 1)?,
        workflow_ref: r.text(at + 2)?,
        manifest_path: r.text(at + 3)?,
        evidence: evidence_row(r, at + 4)?,
    })
}
