//! Layer 5: capability and organization entitlement. Layers 1-2 accept every typed value;
//! here each gated one needs the organization's grant ([`Capability`]), runtime SSH also a
//! Developer tier, resources stay within the tier's plan bounds, the organization's job slots
//! hold the new version, a settled `once` application is not re-armed, and the server must
//! register the manifest's schema pair.

use std::collections::BTreeSet;

use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::formats::byte_size;
use crate::service::SchemaPairs;
use crate::service::capability::{Capability, Limits, Tier};
use crate::service::layers::provenance::Resolved;
use crate::service::store::Application;
use crate::v4::ingress::IngressMode;
use crate::v4::lifecycle::{ExistingJobs, LeadTime, Renewal, RuntimeFailure};
use crate::v4::placement::ProcessorSelection;
use crate::v4::release::{BuildArtifact, EncryptionMode, PinnedArtifact, Release};
use crate::validate::Manifest;

/// What the organization has, for the checks.
pub(crate) struct Entitlements<'a> {
    pub(crate) grants: &'a BTreeSet<String>,
    pub(crate) tier: Tier,
    pub(crate) pairs: SchemaPairs,
    /// Job slots held by the organization's other applications.
    pub(crate) jobs_in_use: u64,
}

/// Each gated value the manifest uses: the capability and the pointer to the value.
pub(crate) fn gated_uses(manifest: &Manifest, resolved: Option<&Resolved>) -> Vec<(Capability, &'static str)> {
    let mut uses = Vec::new();
    let mut gate = |used: bool, c: Capability, pointer: &'static str| {
        if used {
            uses.push((c, pointer));
        }
    };
    match manifest {
        Manifest::V4(m) => {
            gate(!m.runtime.required_modules.is_empty(), Capability::RequiredModules, "/runtime/requiredModules");
            match &m.release {
                Release::Build { artifact: BuildArtifact::RuntimeImage {}, .. } => {
                    gate(true, Capability::BuildRuntimeImage, "/release/artifact/kind");
                }
                Release::Build { artifact: BuildArtifact::IpfsBundle { encryption }, .. } => gate(
                    encryption.mode == EncryptionMode::Aes256Gcm,
                    Capability::BuildAes256Gcm,
                    "/release/artifact/encryption/mode",
                ),
                Release::Pinned { artifact } => gate(
                    matches!(artifact, PinnedArtifact::RuntimeImage { .. }),
                    Capability::PinnedRuntimeImage,
                    "/release/artifact/kind",
                ),
            }
            let d = &m.deployment;
            gate(d.parallelism > 1, Capability::Parallelism, "/deployment/parallelism");
            let requirements = &d.placement.requirements;
            gate(
                requirements.machine.is_some(),
                Capability::MachineRequirements,
                "/deployment/placement/requirements/machine",
            );
            gate(
                requirements.evidence.as_ref().is_some_and(|e| !e.is_empty()),
                Capability::EvidenceRequirements,
                "/deployment/placement/requirements/evidence",
            );
            gate(!d.placement.groups.is_empty(), Capability::PlacementGroups, "/deployment/placement/groups");
            gate(
                !d.placement.topology_constraints.is_empty(),
                Capability::TopologyConstraints,
                "/deployment/placement/topologyConstraints",
            );
            match &d.placement.processor_selection {
                ProcessorSelection::OpenMarket { require_consumer_access, allow_unknown_manager, .. } => {
                    gate(
                        *require_consumer_access,
                        Capability::AccountFilters,
                        "/deployment/placement/processorSelection/requireConsumerAccess",
                    );
                    gate(
                        *allow_unknown_manager,
                        Capability::AccountFilters,
                        "/deployment/placement/processorSelection/allowUnknownManager",
                    );
                }
                ProcessorSelection::Manager { .. } | ProcessorSelection::Static { .. } => {
                    gate(true, Capability::InternalProcessorSelection, "/deployment/placement/processorSelection/mode");
                }
            }
            let lifecycle = &d.lifecycle;
            gate(
                matches!(lifecycle.renewal, Renewal::BeforeScheduledEnd { lead_time: LeadTime::Automatic { .. } }),
                Capability::AutomaticRenewalLead,
                "/deployment/lifecycle/renewal/leadTime/mode",
            );
            gate(
                matches!(lifecycle.update.existing_jobs, ExistingJobs::CooperativeCease { .. }),
                Capability::CooperativeCease,
                "/deployment/lifecycle/update/existingJobs/mode",
            );
            gate(
                matches!(lifecycle.recovery.runtime_failure, RuntimeFailure::ReplaceAfterFailure { .. }),
                Capability::ReplaceAfterFailure,
                "/deployment/lifecycle/recovery/runtimeFailure/mode",
            );
            let http = m.ingress.http.as_ref().map(|h| h.mode);
            let ssh = m.ingress.ssh.as_ref().map(|s| s.mode);
            gate(http == Some(IngressMode::Optional), Capability::OptionalIngress, "/ingress/http/mode");
            gate(ssh == Some(IngressMode::Optional), Capability::OptionalIngress, "/ingress/ssh/mode");
            let enabled = |mode: Option<IngressMode>| mode.is_some_and(|m| m != IngressMode::Disabled);
            gate(enabled(http) && enabled(ssh), Capability::DualIngress, "/ingress/ssh");
        }
        Manifest::V5(m) => {
            gate(m.deployment.jobs > 2, Capability::JobsAboveAdmission, "/deployment/jobs");
            let aes =
                matches!(resolved, Some(Resolved::V5 { artifact, .. }) if artifact.encryption.mode == "aes256_gcm");
            gate(
                aes && matches!(m.release, crate::v5::release::Release::Source {}),
                Capability::BuildAes256Gcm,
                "/release/mode",
            );
            gate(m.access.is_some(), Capability::RuntimeSsh, "/access");
            gate(m.debug.hold_on_failure, Capability::DebugFixtures, "/debug/holdOnFailure");
        }
    }
    uses
}

/// The checks of layer 5.
pub(crate) fn check(
    manifest: &Manifest,
    resolved: Option<&Resolved>,
    target: &Application,
    has: &Entitlements<'_>,
    out: &mut Vec<Diagnostic>,
) {
    if matches!(manifest, Manifest::V5(_)) && has.pairs == SchemaPairs::V4Only {
        out.push(error(
            Code::SchemaPairNotRegistered,
            "/schemaVersion",
            "this server registers Manifest V4 only (schema pair `v4`); publish a V4 manifest".to_owned(),
        ));
    }
    for (capability, pointer) in gated_uses(manifest, resolved) {
        if !has.grants.contains(capability.name()) {
            out.push(error(
                Code::CapabilityNotGranted,
                pointer,
                format!(
                    "{} needs the capability `{}`, which the organization has not been granted; see `GET /api/capabilities`",
                    capability.gates(),
                    capability.name()
                ),
            ));
        }
    }
    if let Manifest::V5(m) = manifest
        && m.access.is_some()
        && has.tier < Tier::Developer
    {
        out.push(error(
            Code::EntitlementRequired,
            "/access",
            format!(
                "managed runtime SSH needs the developer tier or above; the organization is on {}",
                has.tier.as_str()
            ),
        ));
    }
    resources(manifest, has.tier.limits(), has.tier, out);
    let (jobs, jobs_pointer) = match manifest {
        Manifest::V4(m) => (u64::from(m.deployment.parallelism), "/deployment/parallelism"),
        Manifest::V5(m) => (u64::from(m.deployment.jobs), "/deployment/jobs"),
    };
    let slots = has.tier.limits().job_slots;
    if has.jobs_in_use + jobs > slots {
        out.push(error(
            Code::JobSlotsExceeded,
            jobs_pointer,
            format!(
                "the organization has {slots} job slots and its other applications hold {}; this version needs {jobs}. Stop or settle another application, or move to a higher tier",
                has.jobs_in_use
            ),
        ));
    }
    if target.settled && !has.grants.contains(Capability::OnceRearm.name()) {
        let pointer = if matches!(manifest, Manifest::V5(_)) { "/execution" } else { "" };
        out.push(error(
            Code::OnceApplicationSettled,
            pointer,
            format!(
                "\"{}\" ran once and settled; publishing to it would re-arm it, which is release-gated (capability `once_rearm`). Create a new application to run this document again",
                target.application_id
            ),
        ));
    }
}

fn error(code: Code, pointer: &str, message: String) -> Diagnostic {
    Diagnostic::error(Layer::Entitlement, code, pointer, message)
}

const MIB: u128 = 1024 * 1024;

fn resources(manifest: &Manifest, limits: Limits, tier: Tier, out: &mut Vec<Diagnostic>) {
    let mut over = |pointer: &str, what: &str, bound: String| {
        out.push(error(
            Code::ResourcePlanExceeded,
            pointer,
            format!("{what} is above the {} tier's bound of {bound}; lower it or move to a higher tier", tier.as_str()),
        ));
    };
    match manifest {
        Manifest::V4(m) => {
            let r = &m.runtime.resources;
            for (value, bound, pointer, unit) in [
                (r.memory_mib, limits.max_memory_mib, "/runtime/resources/memoryMiB", " MiB"),
                (r.storage_mib, limits.max_storage_mib, "/runtime/resources/storageMiB", " MiB"),
                (
                    r.network_request_quota,
                    limits.max_network_request_quota,
                    "/runtime/resources/networkRequestQuota",
                    " requests",
                ),
            ] {
                if let Some(v) = value
                    && v > bound
                {
                    over(pointer, &format!("{v}{unit}"), format!("{bound}{unit}"));
                }
            }
        }
        Manifest::V5(m) => {
            let Some(minimums) = &m.deployment.placement.minimums else { return };
            for (value, bound, pointer) in [
                (&minimums.memory, limits.max_memory_mib, "/deployment/placement/minimums/memory"),
                (&minimums.storage, limits.max_storage_mib, "/deployment/placement/minimums/storage"),
            ] {
                if let Some(v) = value
                    && byte_size(v).is_none_or(|bytes| bytes > u128::from(bound) * MIB)
                {
                    over(pointer, v, format!("{bound}MiB"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_use_binary_and_decimal_units() {
        assert_eq!(byte_size("512MiB"), Some(512 * MIB));
        assert_eq!(byte_size("2GB"), Some(2_000_000_000));
        assert_eq!(byte_size("7"), None);
        assert_eq!(byte_size("99999999999999999999999999999999999999TB"), None);
    }
}
