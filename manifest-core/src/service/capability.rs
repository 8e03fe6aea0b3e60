//! The capabilities-and-limits statement: which gated values an organization may publish
//! (capability grants), its entitlement tier, and the plan bounds and job slots the tier gives.
//! `docs/capabilities.md` has the table of gates; a test keeps it in step with [`Capability`].

use std::collections::BTreeSet;

use serde::Serialize;

use crate::service::SchemaPairs;

macro_rules! capabilities {
    ($($variant:ident = $name:literal: $gates:literal,)*) => {
        /// A capability an organization can be granted. Each one lets publication accept a
        /// value that layers 1-2 accept but SPEC.md calls gated, internal or release-gated.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Capability {
            $(#[doc = $gates] $variant,)*
        }

        impl Capability {
            /// Every capability.
            pub const ALL: &'static [Capability] = &[$(Capability::$variant,)*];

            /// The grant's name (`svc admin capability grant --org ORG NAME`).
            pub fn name(self) -> &'static str {
                match self { $(Capability::$variant => $name,)* }
            }

            /// What it lets through.
            pub fn gates(self) -> &'static str {
                match self { $(Capability::$variant => $gates,)* }
            }
        }
    };
}

capabilities! {
    Parallelism = "parallelism": "V4 `deployment.parallelism` above 1 (public v1 enables 1)",
    JobsAboveAdmission = "jobs_above_admission": "V5 `deployment.jobs` above 2 (the first-public admission maximum)",
    BuildRuntimeImage = "build_runtime_image": "V4 build release of a `runtime_image` artifact (internal)",
    BuildAes256Gcm = "build_aes256_gcm": "build of an `aes256_gcm` encrypted bundle (V4 build release, or V5 source evidence)",
    PinnedRuntimeImage = "pinned_runtime_image": "V4 pinned `runtime_image` artifact (internal)",
    AutomaticRenewalLead = "automatic_renewal_lead": "V4 renewal `leadTime.mode: automatic` (capability not enabled)",
    CooperativeCease = "cooperative_cease": "V4 `update.existingJobs.mode: cooperative_cease` (release-gated)",
    ReplaceAfterFailure = "replace_after_failure": "V4 `recovery.runtimeFailure.mode: replace_after_failure` (internal)",
    PlacementGroups = "placement_groups": "V4 non-empty `placement.groups` (internal)",
    TopologyConstraints = "topology_constraints": "V4 non-empty `placement.topologyConstraints` (internal)",
    InternalProcessorSelection = "internal_processor_selection": "V4 `processorSelection.mode` `manager` or `static` (internal)",
    AccountFilters = "account_filters": "V4 open-market filters that need account checks: `requireConsumerAccess: true`, `allowUnknownManager: true`",
    MachineRequirements = "machine_requirements": "V4 `placement.requirements.machine`",
    EvidenceRequirements = "evidence_requirements": "V4 non-empty `placement.requirements.evidence`",
    RequiredModules = "required_modules": "V4 non-empty `runtime.requiredModules`",
    OptionalIngress = "optional_ingress": "V4 ingress `mode: optional` on `http` or `ssh`",
    DualIngress = "dual_ingress": "V4 `http` and `ssh` ingress both enabled",
    RuntimeSsh = "runtime_ssh": "V5 `access` (managed runtime SSH; also needs the Developer tier or above)",
    DebugFixtures = "debug_fixtures": "V5 `debug.holdOnFailure: true` (diagnostic fixtures only)",
    OnceRearm = "once_rearm": "publishing to a settled `once` application, which re-arms it (release-gated)",
}

impl Capability {
    /// Reads a grant's name.
    pub fn parse(name: &str) -> Option<Capability> {
        Capability::ALL.iter().copied().find(|c| c.name() == name)
    }
}

/// An organization's entitlement tier, separate from member roles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    /// The default.
    Basic,
    /// Developer: runtime SSH, larger plans.
    Developer,
    /// Business.
    Business,
    /// Enterprise.
    Enterprise,
}

impl Tier {
    /// Every tier, lowest first.
    pub const ALL: [Tier; 4] = [Tier::Basic, Tier::Developer, Tier::Business, Tier::Enterprise];

    /// The spelling in the store, the API and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Basic => "basic",
            Tier::Developer => "developer",
            Tier::Business => "business",
            Tier::Enterprise => "enterprise",
        }
    }

    /// Reads a spelling.
    pub fn parse(text: &str) -> Option<Tier> {
        Tier::ALL.into_iter().find(|t| t.as_str() == text)
    }

    /// The plan bounds and job slots of the tier.
    pub fn limits(self) -> Limits {
        let (job_slots, memory, storage, requests) = match self {
            Tier::Basic => (4, 4_096, 20_480, 100_000),
            Tier::Developer => (16, 16_384, 102_400, 1_000_000),
            Tier::Business => (64, 65_536, 512_000, 10_000_000),
            Tier::Enterprise => (256, 262_144, 2_097_152, 100_000_000),
        };
        Limits { job_slots, max_memory_mib: memory, max_storage_mib: storage, max_network_request_quota: requests }
    }
}

/// Plan bounds of a tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Limits {
    /// Jobs the organization's published, unsettled applications may hold at once.
    pub job_slots: u64,
    /// Largest memory a job may ask for (V4 `runtime.resources.memoryMiB`, V5 `placement.minimums.memory`).
    pub max_memory_mib: u64,
    /// Largest storage (V4 `storageMiB`, V5 `minimums.storage`).
    pub max_storage_mib: u64,
    /// Largest V4 `networkRequestQuota`.
    pub max_network_request_quota: u64,
}

/// What `GET /api/capabilities` answers for the caller's organization.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Statement {
    /// The organization.
    pub organization: String,
    /// Its entitlement tier.
    pub entitlement: &'static str,
    /// The manifest versions this server publishes (`v4_and_v5` or `v4`).
    pub schema_pairs: &'static str,
    /// Every capability, granted or not.
    pub capabilities: Vec<CapabilityState>,
    /// The tier's bounds.
    pub limits: Limits,
    /// Service-credit spend authority per job, in micros (`null`: none).
    pub spend_authority_micros: Option<u64>,
}

/// One capability in the statement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CapabilityState {
    /// Grant name.
    pub name: &'static str,
    /// Whether the organization has it.
    pub granted: bool,
    /// What it lets through.
    pub gates: &'static str,
}

impl Statement {
    /// The statement of an organization with these grants.
    pub fn new(
        organization: &str,
        tier: Tier,
        grants: &BTreeSet<String>,
        pairs: SchemaPairs,
        spend_authority_micros: Option<u64>,
    ) -> Statement {
        Statement {
            organization: organization.to_owned(),
            entitlement: tier.as_str(),
            schema_pairs: pairs.as_str(),
            capabilities: Capability::ALL
                .iter()
                .map(|c| CapabilityState { name: c.name(), granted: grants.contains(c.name()), gates: c.gates() })
                .collect(),
            limits: tier.limits(),
            spend_authority_micros,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_tiers_grow() {
        for c in Capability::ALL {
            assert_eq!(Capability::parse(c.name()), Some(*c));
        }
        for pair in Tier::ALL.windows(2) {
            let (low, high) = (pair[0].limits(), pair[1].limits());
            assert!(low.job_slots < high.job_slots && low.max_memory_mib < high.max_memory_mib);
            assert_eq!(Tier::parse(pair[1].as_str()), Some(pair[1]));
        }
    }
}
