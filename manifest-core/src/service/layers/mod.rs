//! Publication layers 3-7 over a manifest that passed layers 1-2, read inside the publication's
//! write transaction, or on a snapshot whose reads the write checks still hold
//! (`store::DecidedOn`), so that what they decide holds when it commits: (3) identity,
//! (4) provenance, (5) capabilities and entitlement, then the effective policy, then (7)
//! deployment-time facts as warnings. Layer 6 (the fence and the immutable write) is the
//! publication itself (`service::operations::publish`).

mod deployment;
mod gates;
mod identity;
mod provenance;

use std::collections::BTreeSet;

use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::policy::{PolicyV4, ServerFacts};
use crate::policy_v5::{PolicyV5, V5Facts};
use crate::service::SchemaPairs;
use crate::service::store::{
    AcceptedArtifact, Application, ArtifactEvidence, LayerReads, Organization, RuntimeImage, StoreError,
};
use crate::validate::Manifest;
use provenance::Resolved;

/// An effective policy ready to be stored.
#[derive(Debug, Clone)]
pub(crate) struct Compiled {
    /// RFC 8785 canonical JSON of the effective policy (V4) or document (V5).
    pub(crate) policy: String,
    /// `sha256:` of those bytes.
    pub(crate) policy_digest: String,
    /// Job slots the version needs.
    pub(crate) jobs: u64,
    /// `once`, `continuous`, `interval`, or `scheduled` (V4).
    pub(crate) execution: &'static str,
}

/// The outcome of layers 3-7: every diagnostic, and the policy when there is no error.
#[derive(Debug)]
pub(crate) struct Outcome {
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) compiled: Option<Compiled>,
    /// The job slots the organization's other applications held, as the quota gate read
    /// them (a publication decided on a snapshot is written only while they still are).
    pub(crate) jobs_in_use: u64,
}

/// Why layers 3-7 could not read a fact they need.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Unread {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The reads at hand do not hold it: a publication decided on the async runtime reads
    /// only what was read ahead ([`crate::service::store::PublicationInputs`]). Not a
    /// failure: the publication is decided again where the fact is read.
    #[error("a fact that was not read ahead")]
    NotReadAhead,
}

/// What layers 3-7 read: a store's [`LayerReads`] (a transaction's reads), or the facts of a
/// publication read ahead, which may not hold every fact ([`Unread::NotReadAhead`]).
pub(crate) trait Reads {
    /// As [`LayerReads::grants`].
    fn grants(&mut self, organization: i64) -> Result<BTreeSet<String>, Unread>;
    /// As [`LayerReads::ssh_keys`].
    fn ssh_keys(&mut self, organization: i64) -> Result<Vec<String>, Unread>;
    /// As [`LayerReads::jobs_in_use`].
    fn jobs_in_use(&mut self, organization: i64, except: i64) -> Result<u64, Unread>;
    /// As [`LayerReads::curated`].
    fn curated(&mut self, digest: &str) -> Result<Vec<ArtifactEvidence>, Unread>;
    /// As [`LayerReads::accepted`].
    fn accepted(&mut self, organization: i64, application_id: &str) -> Result<Vec<AcceptedArtifact>, Unread>;
    /// As [`LayerReads::runtime_images`].
    fn runtime_images(&mut self, catalog: &str, name: &str) -> Result<Vec<RuntimeImage>, Unread>;
    /// As [`LayerReads::provisioned_secrets`].
    fn provisioned_secrets(&mut self, organization: i64, application_id: &str) -> Result<BTreeSet<String>, Unread>;
}

/// A store's reads (a transaction's), which hold every fact.
pub(crate) struct InStore<'a>(pub(crate) &'a mut dyn LayerReads);

impl Reads for InStore<'_> {
    fn grants(&mut self, organization: i64) -> Result<BTreeSet<String>, Unread> {
        Ok(self.0.grants(organization)?)
    }
    fn ssh_keys(&mut self, organization: i64) -> Result<Vec<String>, Unread> {
        Ok(self.0.ssh_keys(organization)?)
    }
    fn jobs_in_use(&mut self, organization: i64, except: i64) -> Result<u64, Unread> {
        Ok(self.0.jobs_in_use(organization, except)?)
    }
    fn curated(&mut self, digest: &str) -> Result<Vec<ArtifactEvidence>, Unread> {
        Ok(self.0.curated(digest)?)
    }
    fn accepted(&mut self, organization: i64, application_id: &str) -> Result<Vec<AcceptedArtifact>, Unread> {
        Ok(self.0.accepted(organization, application_id)?)
    }
    fn runtime_images(&mut self, catalog: &str, name: &str) -> Result<Vec<RuntimeImage>, Unread> {
        Ok(self.0.runtime_images(catalog, name)?)
    }
    fn provisioned_secrets(&mut self, organization: i64, application_id: &str) -> Result<BTreeSet<String>, Unread> {
        Ok(self.0.provisioned_secrets(organization, application_id)?)
    }
}

/// Runs layers 3, 4, 5 and 7 and materializes the effective policy.
pub(crate) fn compile(
    manifest: &Manifest,
    tx: &mut dyn Reads,
    organization: &Organization,
    target: &Application,
    pairs: SchemaPairs,
) -> Result<Outcome, Unread> {
    let mut out = Vec::new();
    identity::check(manifest, target, &mut out);
    let resolved = provenance::resolve(manifest, tx, organization.id, &target.application_id, &mut out)?;
    let grants: BTreeSet<String> = tx.grants(organization.id)?;
    let jobs_in_use = tx.jobs_in_use(organization.id, target.key)?;
    let has = gates::Entitlements { grants: &grants, tier: organization.tier, pairs, jobs_in_use };
    gates::check(manifest, resolved.as_ref(), target, &has, &mut out);
    if out.iter().any(Diagnostic::is_error) {
        return Ok(Outcome { diagnostics: out, compiled: None, jobs_in_use });
    }
    let compiled = match materialize(manifest, resolved, tx, organization, target)? {
        Ok(compiled) => compiled,
        Err(why) => {
            // Layers 3-4 resolve every fact a policy needs; reaching this is a bug.
            out.push(Diagnostic::error(Layer::Publication, Code::InternalError, "", why.to_string()));
            return Ok(Outcome { diagnostics: out, compiled: None, jobs_in_use });
        }
    };
    let provisioned = tx.provisioned_secrets(organization.id, &target.application_id)?;
    deployment::check(manifest, &provisioned, organization.spend_authority_micros, &mut out);
    Ok(Outcome { diagnostics: out, compiled: Some(compiled), jobs_in_use })
}

/// Why a policy could not be materialized once layers 3-5 passed (a bug: they resolve every
/// fact a policy needs).
#[derive(Debug, thiserror::Error)]
enum Uncompiled {
    /// The V4 policy refused the facts.
    #[error(transparent)]
    V4(#[from] crate::policy::PolicyError),
    /// The V5 policy refused the facts.
    #[error(transparent)]
    V5(#[from] crate::policy_v5::PolicyV5Error),
    /// The release resolved to nothing of its schema version.
    #[error("the release did not resolve")]
    Unresolved,
    /// The policy has no canonical JSON form.
    #[error("the policy has no canonical JSON form: {0}")]
    Canonical(#[source] serde_json::Error),
}

fn materialize(
    manifest: &Manifest,
    resolved: Option<Resolved>,
    tx: &mut dyn Reads,
    organization: &Organization,
    target: &Application,
) -> Result<Result<Compiled, Uncompiled>, Unread> {
    let (policy, jobs, execution) = match (manifest, resolved) {
        (Manifest::V4(m), Some(Resolved::V4(artifact))) => {
            let facts = ServerFacts { application_uid: target.application_uid.clone(), artifact };
            match PolicyV4::materialize(m, &facts) {
                Ok(p) => (canonical_json(&p), u64::from(m.deployment.parallelism), "scheduled"),
                Err(e) => return Ok(Err(e.into())),
            }
        }
        (Manifest::V5(m), Some(Resolved::V5 { artifact, image })) => {
            let ssh_keys = if m.access.is_some() { tx.ssh_keys(organization.id)? } else { Vec::new() };
            let facts = V5Facts { application_uid: target.application_uid.clone(), artifact, image, ssh_keys };
            let execution = match m.execution {
                crate::v5::execution::Execution::Once {} => "once",
                crate::v5::execution::Execution::Continuous { .. } => "continuous",
                crate::v5::execution::Execution::Interval { .. } => "interval",
            };
            match PolicyV5::materialize(m, &facts) {
                Ok(p) => (canonical_json(&p), u64::from(m.deployment.jobs), execution),
                Err(e) => return Ok(Err(e.into())),
            }
        }
        _ => return Ok(Err(Uncompiled::Unresolved)),
    };
    Ok(match policy {
        Ok(policy) => {
            let policy_digest = crate::digest::sha256(policy.as_bytes());
            Ok(Compiled { policy, policy_digest, jobs, execution })
        }
        Err(e) => Err(Uncompiled::Canonical(e)),
    })
}

/// RFC 8785 canonical JSON of a policy: serde_json's fast writer, then our reader and our
/// canonical writer (a policy holds no float, so the fast path always applies); the
/// reference implementation otherwise. A test checks both give the same bytes.
fn canonical_json<T: serde::Serialize>(policy: &T) -> Result<String, serde_json::Error> {
    let plain = serde_json::to_string(policy)?;
    let (root, problems) = crate::parse::json(&plain);
    let fast = root
        .filter(|_| problems.is_empty())
        .and_then(|root| crate::digest::canonical_bytes(&root, plain.len()))
        .and_then(|bytes| String::from_utf8(bytes).ok());
    match fast {
        Some(text) => Ok(text),
        None => serde_json_canonicalizer::to_string(policy),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fast_canonical_form_is_rfc_8785() {
        let value = serde_json::json!({"b": [1, {"z": "é\u{1}", "a": true}], "a": null, "é": "\"q\"", "A": 9007199254740991_u64});
        assert_eq!(
            super::canonical_json(&value).expect("canonical"),
            serde_json_canonicalizer::to_string(&value).expect("the reference")
        );
    }
}
