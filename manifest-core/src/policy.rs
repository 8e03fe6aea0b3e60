//! Effective Policy V4: a valid V4 manifest with release and server-owned facts resolved and
//! every default written out. Immutable once published; its digest (`sha256:` over RFC 8785
//! canonical JSON) names it. It holds no metadata, builder authority, source provenance,
//! upload session or publication fields; deprecated log fields keep their authored values.

use serde::{Deserialize, Serialize};

use crate::formats::{APPLICATION_ID_V4, IPFS_CID, SHA256_DIGEST};
use crate::shape::{NON_EMPTY, ObjectShape, Shape, constant, int, pattern_len, required};
use crate::v4::ManifestV4;
use crate::v4::configuration::{CONFIGURATION, Configuration};
use crate::v4::deployment::{DEPLOYMENT, Deployment};
use crate::v4::ingress::{INGRESS, Ingress};
use crate::v4::observability::{OBSERVABILITY, Observability};
use crate::v4::release::{BuildArtifact, PINNED_ARTIFACT, PinnedArtifact, Release};
use crate::v4::runtime::{RUNTIME, Runtime};

/// The effective schema name.
pub const POLICY_SCHEMA_NAME: &str = "svc.application-policy";

/// Policy V4, the root object. The sections are the manifest's own tables; in the policy
/// every defaulted field is written out (the generated schema marks them required).
pub static POLICY: ObjectShape = ObjectShape {
    name: "Policy V4",
    fields: &[
        required("schema", constant(POLICY_SCHEMA_NAME), "exactly `svc.application-policy`"),
        required("schemaVersion", int(4, 4), "4"),
        required("applicationId", pattern_len(&APPLICATION_ID_V4, 1, 64), "the application's ID"),
        required("applicationUid", NON_EMPTY, "server-resolved immutable identity"),
        required("artifact", Shape::Union(&PINNED_ARTIFACT), "the resolved immutable artifact"),
        required("runtime", Shape::Object(&RUNTIME), "normalized runtime"),
        required("deployment", Shape::Object(&DEPLOYMENT), "normalized deployment"),
        required("ingress", Shape::Object(&INGRESS), "normalized ingress"),
        required("observability", Shape::Object(&OBSERVABILITY), "normalized observability"),
        required("configuration", Shape::Object(&CONFIGURATION), "normalized configuration"),
    ],
    min_fields: 0,
    refused: &[],
};

/// An effective Policy V4.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyV4 {
    /// `svc.application-policy`.
    pub schema: String,
    /// 4.
    pub schema_version: u8,
    /// The application's ID.
    pub application_id: String,
    /// The server-issued immutable identity.
    pub application_uid: String,
    /// The resolved immutable artifact (a runtime image binds the image and the bootstrap).
    pub artifact: PinnedArtifact,
    /// Runtime requirements with bootstrap defaults.
    pub runtime: Runtime,
    /// Deployment with every default.
    pub deployment: Deployment,
    /// Ingress requests.
    pub ingress: Ingress,
    /// Logs and signed diagnostics.
    pub observability: Observability,
    /// Variables and secrets.
    pub configuration: Configuration,
}

/// Facts the server owns, resolved before a policy is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFacts {
    /// The target application's immutable identity.
    pub application_uid: String,
    /// For a build release: the accepted artifact version.
    pub artifact: Option<ArtifactVersion>,
}

/// An accepted artifact version of a build release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactVersion {
    /// Canonical `ipfs://<cid>`.
    pub cid: String,
    /// `sha256:<hex>`.
    pub digest: String,
    /// For a runtime image build: the image's digest (`cid` and `digest` are then the
    /// bootstrap's). `None` for a bundle.
    pub image_digest: Option<String>,
}

/// Why a policy cannot be made from a manifest and facts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// The application UID is empty.
    #[error("the application UID is missing")]
    MissingApplicationUid,
    /// The manifest names another application.
    #[error("the manifest's applicationUid \"{authored}\" does not match the target application \"{target}\"")]
    ApplicationUidMismatch {
        /// In the manifest.
        authored: String,
        /// Of the target.
        target: String,
    },
    /// A build release needs the accepted artifact version.
    #[error(
        "the release is a build release: its CID and digest come from an accepted artifact version, which is missing"
    )]
    MissingArtifactVersion,
    /// The accepted artifact version is malformed.
    #[error("the artifact {field} \"{value}\" is not {expected}")]
    InvalidArtifactVersion {
        /// `cid` or `digest`.
        field: &'static str,
        /// What was given.
        value: String,
        /// The format.
        expected: &'static str,
    },
    /// An artifact version was given for a pinned release that names another artifact (a
    /// pinned runtime image takes none).
    #[error("the release is pinned to {pinned}; the given artifact version {given} differs")]
    PinnedArtifactMismatch {
        /// In the manifest.
        pinned: String,
        /// Given.
        given: String,
    },
    /// Build releases of runtime images have no public recipe.
    #[error(
        "a build release of a runtime image has no public recipe: its policy needs the accepted image's digest, which only the service holds; pin the image instead (`release.mode: pinned` with `artifact.kind: runtime_image`)"
    )]
    RuntimeImageBuild,
}

impl PolicyV4 {
    /// Materializes the policy of a valid manifest.
    pub fn materialize(manifest: &ManifestV4, facts: &ServerFacts) -> Result<PolicyV4, PolicyError> {
        if facts.application_uid.is_empty() {
            return Err(PolicyError::MissingApplicationUid);
        }
        if let Some(authored) = &manifest.application_uid
            && *authored != facts.application_uid
        {
            return Err(PolicyError::ApplicationUidMismatch {
                authored: authored.clone(),
                target: facts.application_uid.clone(),
            });
        }
        let artifact = resolve_artifact(&manifest.release, facts.artifact.as_ref())?;
        Ok(PolicyV4 {
            schema: POLICY_SCHEMA_NAME.to_owned(),
            schema_version: 4,
            application_id: manifest.application_id.clone(),
            application_uid: facts.application_uid.clone(),
            artifact,
            runtime: manifest.runtime.clone(),
            deployment: manifest.deployment.clone(),
            ingress: manifest.ingress.clone(),
            observability: manifest.observability.clone(),
            configuration: manifest.configuration.clone(),
        })
    }

    /// `sha256:` over the RFC 8785 canonical JSON of the policy.
    pub fn digest(&self) -> String {
        // A policy holds only strings, booleans and integers: it always has a JSON form.
        crate::digest::canonical_digest(self).unwrap_or_default()
    }
}

fn resolve_artifact(release: &Release, version: Option<&ArtifactVersion>) -> Result<PinnedArtifact, PolicyError> {
    if let Some(v) = version {
        check_format("cid", &v.cid, &IPFS_CID)?;
        check_format("digest", &v.digest, &SHA256_DIGEST)?;
    }
    match release {
        Release::Pinned { artifact } => {
            let given = version.map(|v| format!("{} ({})", v.cid, v.digest));
            match (artifact, given) {
                (PinnedArtifact::IpfsBundle { cid, digest, .. }, Some(given))
                    if given != format!("{cid} ({digest})") =>
                {
                    Err(PolicyError::PinnedArtifactMismatch { pinned: format!("{cid} ({digest})"), given })
                }
                (PinnedArtifact::RuntimeImage { image_digest, .. }, Some(given)) => {
                    Err(PolicyError::PinnedArtifactMismatch {
                        pinned: format!("the runtime image {image_digest}"),
                        given,
                    })
                }
                _ => Ok(artifact.clone()),
            }
        }
        Release::Build { artifact: BuildArtifact::IpfsBundle { encryption }, .. } => {
            let v = version.ok_or(PolicyError::MissingArtifactVersion)?;
            Ok(PinnedArtifact::IpfsBundle {
                cid: v.cid.clone(),
                digest: v.digest.clone(),
                encryption: encryption.clone(),
            })
        }
        Release::Build { artifact: BuildArtifact::RuntimeImage {}, .. } => {
            let v = version.ok_or(PolicyError::MissingArtifactVersion)?;
            let image_digest = v.image_digest.clone().ok_or(PolicyError::RuntimeImageBuild)?;
            check_format("image digest", &image_digest, &SHA256_DIGEST)?;
            Ok(PinnedArtifact::RuntimeImage {
                image_digest,
                bootstrap_cid: v.cid.clone(),
                bootstrap_digest: v.digest.clone(),
            })
        }
    }
}

fn check_format(field: &'static str, value: &str, p: &'static crate::shape::Pattern) -> Result<(), PolicyError> {
    if (p.check)(value) {
        Ok(())
    } else {
        Err(PolicyError::InvalidArtifactVersion { field, value: value.to_owned(), expected: p.describe })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A materialized policy passes layer 1 against the policy table, and layer 1 adds nothing
    /// to it: every default is already written out.
    #[test]
    fn a_policy_is_complete_against_its_own_table() {
        let manifest = br#"{"schema": "svc.application-manifest", "schemaVersion": 4, "applicationId": "app",
            "release": {"mode": "build", "artifact": {"kind": "ipfs_bundle", "encryption": {"mode": "none"}},
              "builder": {"kind": "codehost", "repository": "acme/app", "allowedRefs": ["refs/heads/main"],
                "workflowRef": "acme/app/.github/workflows/b.yml@refs/heads/main", "manifestPath": "svc.json"}},
            "deployment": {"schedule": {"durationMs": 600000},
              "lifecycle": {"renewal": {"mode": "after_scheduled_end"},
                "update": {"timing": "immediate", "existingJobs": {"mode": "run_until_scheduled_end"}},
                "recovery": {"runtimeFailure": {"mode": "replace_after_failure"}}}},
            "ingress": {"ssh": {"mode": "optional"}},
            "configuration": {"secrets": [{"secretId": "s", "destination": {"kind": "env", "name": "S"}}]}}"#;
        let report = crate::validate(manifest);
        let Ok(crate::Manifest::V4(m)) = report.manifest() else { panic!("{:?}", report.diagnostics) };
        let facts = ServerFacts {
            application_uid: "app_1".to_owned(),
            artifact: Some(ArtifactVersion {
                cid: "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi".to_owned(),
                digest: format!("sha256:{}", "0".repeat(64)),
                image_digest: None,
            }),
        };
        let policy = PolicyV4::materialize(&m, &facts).expect("policy");
        let text = serde_json::to_string(&policy).expect("json");
        let (root, problems) = crate::parse::json(&text);
        assert!(problems.is_empty());
        let mut root = root.expect("tree");
        let before = root.clone();
        let mut diagnostics = crate::bounded::Bounded::default();
        crate::check::check_document(&mut root, &POLICY, &mut diagnostics);
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        assert_eq!(root, before, "layer 1 filled a default the policy did not write out");
    }
}
