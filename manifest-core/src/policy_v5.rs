//! The effective document of a V5 publication: the manifest with its release evidence and
//! native image resolved, the organization's SSH keys snapshotted for `access`, and every
//! default written out. SPEC.md leaves its fields to us; `docs/policy-v5.md` documents them.
//! Like Policy V4 it holds no metadata, and its digest (`sha256:` over RFC 8785 canonical
//! JSON) is the version's `policyDigest`.

use serde::{Deserialize, Serialize};

use crate::policy::POLICY_SCHEMA_NAME;
use crate::v4::runtime::Engine;
use crate::v5::ManifestV5;
use crate::v5::configuration::Configuration;
use crate::v5::deployment::{Deployment, LeadTime, Minimums, Renewal, Schedule, Spend, Update};
use crate::v5::execution::Execution;
use crate::v5::observability::{Debug, Observability, State};
use crate::v5::runtime::{JsEntrypoint, NativeEntrypoint, Runtime};

/// An effective V5 document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyV5 {
    /// `svc.application-policy`.
    pub schema: String,
    /// 5.
    pub schema_version: u8,
    /// The application's slug.
    pub application_id: String,
    /// The server-issued immutable identity.
    pub application_uid: String,
    /// The artifact, as resolved from evidence.
    pub artifact: ResolvedArtifact,
    /// The runtime, with a native image resolved to an exact version and digest.
    pub runtime: EffectiveRuntime,
    /// When it runs.
    pub execution: Execution,
    /// Deployment with every default, open-market selection and renewal written out.
    pub deployment: EffectiveDeployment,
    /// Managed runtime SSH with the keys snapshotted at publication; `null` without access.
    pub access: Option<EffectiveAccess>,
    /// Variables and secrets with their defaults.
    pub configuration: Configuration,
    /// Managed logging.
    pub observability: Observability,
    /// Durable state (always off).
    pub state: State,
    /// Diagnostic hold.
    pub debug: Debug,
}

/// The artifact a release resolved to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedArtifact {
    /// `ipfs_bundle` or `runtime_image`.
    pub kind: String,
    /// `ipfs://...`
    pub cid: String,
    /// `sha256:...`
    pub digest: String,
    /// `{ "mode": "none" | "aes256_gcm" }`
    pub encryption: EncryptionMode,
}

/// An encryption mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncryptionMode {
    /// `none` or `aes256_gcm`.
    pub mode: String,
}

/// The runtime with resolved evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EffectiveRuntime {
    /// A JavaScript program.
    Javascript {
        /// The engine.
        engine: Engine,
        /// The entry file.
        entrypoint: JsEntrypoint,
    },
    /// A catalog image at an exact version.
    NativeImage {
        /// The image.
        image: ResolvedImage,
        /// The executable.
        entrypoint: NativeEntrypoint,
    },
}

/// A catalog image resolved from its version floor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedImage {
    /// Catalog.
    pub catalog: String,
    /// Image name.
    pub name: String,
    /// The floor as authored (`20`, `20.1`, `20.1.3`).
    pub version_floor: String,
    /// The exact catalog version chosen.
    pub version: String,
    /// Its digest.
    pub digest: String,
}

/// `deployment` with every default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectiveDeployment {
    /// Jobs.
    pub jobs: u16,
    /// The paid window.
    pub schedule: Schedule,
    /// Placement.
    pub placement: EffectivePlacement,
    /// Lifecycle.
    pub lifecycle: EffectiveLifecycle,
    /// Spend authority.
    pub spend: Spend,
}

/// `placement` with the selection written out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectivePlacement {
    /// Capability minimums (`null`: none).
    pub minimums: Option<Minimums>,
    /// `open_market` when the manifest names no processors.
    pub processor_selection: EffectiveSelection,
}

/// Processor selection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum EffectiveSelection {
    /// Any processor of the market.
    OpenMarket {},
    /// These processors.
    #[serde(rename_all = "camelCase")]
    Exact {
        /// Processor IDs.
        processor_ids: Vec<String>,
    },
}

/// `lifecycle` with renewal written out for continuous execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EffectiveLifecycle {
    /// Renewal: for continuous execution, the authored one or `{leadTime: {mode: automatic}}`;
    /// `null` otherwise (renewal applies only to continuous execution).
    pub renewal: Option<Renewal>,
    /// Update policy.
    pub update: Update,
}

/// Managed runtime SSH, with the organization's keys as they were at publication.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectiveAccess {
    /// `managed`.
    pub provider: String,
    /// The organization's operator keys, sorted.
    pub authorized_keys: Vec<String>,
}

/// What the service resolved for a V5 publication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V5Facts {
    /// The application's immutable identity.
    pub application_uid: String,
    /// The artifact evidence.
    pub artifact: ResolvedArtifact,
    /// For a native image runtime: the catalog version chosen.
    pub image: Option<ResolvedImage>,
    /// The organization's operator keys.
    pub ssh_keys: Vec<String>,
}

/// Why a V5 document cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyV5Error {
    /// A native image runtime needs its resolved image.
    #[error("the runtime is a native image, and no catalog version was resolved for it")]
    MissingImage,
}

impl PolicyV5 {
    /// Makes the effective document of a valid manifest.
    pub fn materialize(manifest: &ManifestV5, facts: &V5Facts) -> Result<PolicyV5, PolicyV5Error> {
        let runtime = match &manifest.runtime {
            Runtime::Javascript { engine, entrypoint } => {
                EffectiveRuntime::Javascript { engine: *engine, entrypoint: entrypoint.clone() }
            }
            Runtime::NativeImage { entrypoint, .. } => EffectiveRuntime::NativeImage {
                image: facts.image.clone().ok_or(PolicyV5Error::MissingImage)?,
                entrypoint: entrypoint.clone(),
            },
        };
        let Deployment { jobs, schedule, placement, lifecycle, spend } = &manifest.deployment;
        let renewal = match manifest.execution {
            Execution::Continuous { .. } => {
                Some(lifecycle.renewal.clone().unwrap_or(Renewal { lead_time: LeadTime::Automatic {} }))
            }
            _ => None,
        };
        let processor_selection = match &placement.processor_selection {
            Some(crate::v5::deployment::ProcessorSelection::Exact { processor_ids }) => {
                EffectiveSelection::Exact { processor_ids: processor_ids.clone() }
            }
            None => EffectiveSelection::OpenMarket {},
        };
        let mut keys = facts.ssh_keys.clone();
        keys.sort();
        Ok(PolicyV5 {
            schema: POLICY_SCHEMA_NAME.to_owned(),
            schema_version: 5,
            application_id: manifest.application_id.clone(),
            application_uid: facts.application_uid.clone(),
            artifact: facts.artifact.clone(),
            runtime,
            execution: manifest.execution.clone(),
            deployment: EffectiveDeployment {
                jobs: *jobs,
                schedule: schedule.clone(),
                placement: EffectivePlacement { minimums: placement.minimums.clone(), processor_selection },
                lifecycle: EffectiveLifecycle { renewal, update: lifecycle.update.clone() },
                spend: spend.clone(),
            },
            access: manifest
                .access
                .as_ref()
                .map(|_| EffectiveAccess { provider: "managed".to_owned(), authorized_keys: keys }),
            configuration: manifest.configuration.clone(),
            observability: manifest.observability.clone(),
            state: manifest.state.clone(),
            debug: manifest.debug.clone(),
        })
    }

    /// `sha256:` over the RFC 8785 canonical JSON of the document.
    pub fn digest(&self) -> String {
        // Strings, booleans, integers and nulls only: it always has a JSON form.
        crate::digest::canonical_digest(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(text: &str) -> ManifestV5 {
        match crate::validate(text.as_bytes()).manifest() {
            Ok(crate::Manifest::V5(m)) => *m,
            other => panic!("{other:?}"),
        }
    }

    fn facts() -> V5Facts {
        V5Facts {
            application_uid: "app_1".into(),
            artifact: ResolvedArtifact {
                kind: "ipfs_bundle".into(),
                cid: "ipfs://bafy".into(),
                digest: format!("sha256:{}", "a".repeat(64)),
                encryption: EncryptionMode { mode: "none".into() },
            },
            image: None,
            ssh_keys: vec![],
        }
    }

    const CONTINUOUS: &str = "schema: svc.application-manifest\nschemaVersion: 5\napplicationId: web\n\
        metadata: {description: one}\nrelease: {mode: source}\n\
        runtime: {kind: javascript, entrypoint: {file: server.js}}\nexecution: {mode: continuous}\n\
        deployment: {schedule: {duration: 1h}, spend: {unit: service_credit_micros, perJob: '5', rate: {amount: '9'}}}\n\
        state: {mode: 'off'}\n";

    #[test]
    fn defaults_are_written_out_and_metadata_is_left_out() {
        let policy = PolicyV5::materialize(&manifest(CONTINUOUS), &facts()).expect("policy");
        let json = serde_json::to_value(&policy).expect("json");
        assert!(json.get("metadata").is_none());
        assert_eq!(json["deployment"]["placement"]["processorSelection"]["mode"], "open_market");
        assert_eq!(json["deployment"]["lifecycle"]["renewal"]["leadTime"]["mode"], "automatic");
        assert_eq!(json["deployment"]["spend"]["rate"]["window"], "30d");
        assert_eq!(json["runtime"]["engine"], "nodejs");
        assert_eq!(json["access"], serde_json::Value::Null);
    }

    #[test]
    fn metadata_changes_the_authored_digest_and_never_the_policy_digest() {
        let other = CONTINUOUS.replace("description: one", "description: two");
        let (a, b) = (crate::validate(CONTINUOUS.as_bytes()), crate::validate(other.as_bytes()));
        assert_ne!(a.authored_digest(), b.authored_digest());
        let pa = PolicyV5::materialize(&manifest(CONTINUOUS), &facts()).expect("policy");
        let pb = PolicyV5::materialize(&manifest(&other), &facts()).expect("policy");
        assert_eq!(pa.digest(), pb.digest());
    }

    #[test]
    fn a_native_image_needs_its_resolution() {
        let text = CONTINUOUS.replace(
            "{kind: javascript, entrypoint: {file: server.js}}",
            "{kind: native_image, image: {name: node, version: '20'}, entrypoint: {executable: /bin/app}}",
        );
        assert_eq!(PolicyV5::materialize(&manifest(&text), &facts()), Err(PolicyV5Error::MissingImage));
    }
}
