//! V4 `deployment.placement`: attested requirements plus open-market selection by default.
//! Machine, evidence, groups, topology constraints and the manager/static selectors are typed
//! but internal or capability-gated: layers 1-2 accept them, publication decides.

use serde::{Deserialize, Serialize};

use crate::formats::{COUNTRY, VERSIONED_CATALOG};
use crate::notes::Note;
use crate::shape::{
    ArrayShape, DefaultValue, MapShape, NON_EMPTY, ObjectShape, Shape, StrFormat, StrShape, UINT, UnionShape, arm,
    constant, defaulted, int, object, one_of, optional, pattern, required,
};
use crate::v4::runtime::TRUST_PROFILE;

static MINIMUMS: MapShape = MapShape {
    keys: StrShape { format: StrFormat::Any, min_chars: 1, max_chars: None, hint: None },
    values: UINT,
    max_entries: None,
};

static MACHINE: ObjectShape = object(
    "machine",
    &[
        required("class", NON_EMPTY, "machine class"),
        required("profileVersion", NON_EMPTY, "machine profile version"),
        defaulted("minimums", Shape::Map(&MINIMUMS), DefaultValue::EmptyObject, "metric name to unsigned integer"),
    ],
);

static EVIDENCE_ITEM: ObjectShape = object(
    "evidence requirement",
    &[
        required("profile", NON_EMPTY, "evidence profile"),
        required("metric", NON_EMPTY, "metric name"),
        required("minimum", UINT, "unsigned"),
        required("maxAgeMs", UINT, "unsigned, milliseconds"),
        required("minimumSamples", UINT, "unsigned"),
        required("minimumConfidenceBps", int(0, 10_000), "basis points, 0-10000"),
        required("strength", one_of(&["required", "preferred"]), "`required` or `preferred`"),
    ],
);

static EVIDENCE: ArrayShape =
    ArrayShape { items: Shape::Object(&EVIDENCE_ITEM), min_items: 0, max_items: None, unique: false };

static REQUIREMENTS: ObjectShape = object(
    "requirements",
    &[
        defaulted(
            "trustProfile",
            constant(TRUST_PROFILE),
            DefaultValue::Str(TRUST_PROFILE),
            "only `svc.attested-runtime.v1`",
        ),
        optional("machine", Shape::Object(&MACHINE), "immutable, capability-gated machine requirement"),
        optional("evidence", Shape::Array(&EVIDENCE), "capability-gated evidence requirements"),
    ],
);

static COUNTRY_CODES: ArrayShape = ArrayShape { items: pattern(&COUNTRY), min_items: 1, max_items: None, unique: true };
static REGION_NAMES: ArrayShape = ArrayShape { items: NON_EMPTY, min_items: 1, max_items: None, unique: true };

static GEOGRAPHY: UnionShape = UnionShape {
    name: "geography",
    tag: "kind",
    arms: &[
        arm(
            "country",
            &[
                required("standard", constant("ISO-3166-1-alpha-2"), "`ISO-3166-1-alpha-2`"),
                required("values", Shape::Array(&COUNTRY_CODES), "non-empty uppercase two-character codes"),
            ],
        ),
        arm(
            "region",
            &[
                required("catalog", pattern(&VERSIONED_CATALOG), "non-empty versioned catalog"),
                required("values", Shape::Array(&REGION_NAMES), "non-empty region names"),
            ],
        ),
    ],
};

static GROUP: ObjectShape = object(
    "placement group",
    &[
        required("name", NON_EMPTY, "unique non-empty name"),
        required("count", int(1, crate::shape::MAX_SAFE_INTEGER), "positive; counts sum exactly to parallelism"),
        required("geography", Shape::Union(&GEOGRAPHY), "country or region"),
    ],
);

static GROUPS: ArrayShape = ArrayShape { items: Shape::Object(&GROUP), min_items: 0, max_items: None, unique: false };

static TOPOLOGY_CONSTRAINT: ObjectShape = object(
    "topology constraint",
    &[
        required("kind", one_of(&["affinity", "anti_affinity"]), "`affinity` or `anti_affinity`"),
        required("scope", constant("this_deployment"), "`this_deployment`"),
        required(
            "topologyKey",
            one_of(&["processor", "operator", "manager", "country", "region"]),
            "`processor`, `operator`, `manager`, `country` or `region`",
        ),
        required("strength", one_of(&["required", "preferred"]), "`required` or `preferred`"),
    ],
);

static TOPOLOGY: ArrayShape =
    ArrayShape { items: Shape::Object(&TOPOLOGY_CONSTRAINT), min_items: 0, max_items: None, unique: false };

static NAMES: ArrayShape = ArrayShape { items: NON_EMPTY, min_items: 0, max_items: None, unique: true };
static PROCESSOR_IDS: ArrayShape = ArrayShape { items: NON_EMPTY, min_items: 0, max_items: None, unique: true };

/// `processorSelection`, tagged by `mode`.
static PROCESSOR_SELECTION: UnionShape = UnionShape {
    name: "processor selection",
    tag: "mode",
    arms: &[
        arm(
            "open_market",
            &[
                optional("excludeManagers", Shape::Array(&NAMES), "managers to exclude"),
                defaulted("allowUnknownManager", Shape::Bool, DefaultValue::Bool(false), "default false: fail closed"),
                defaulted("requireScheduleClear", Shape::Bool, DefaultValue::Bool(false), "default false"),
                defaulted("requireConsumerAccess", Shape::Bool, DefaultValue::Bool(false), "default false"),
                optional("maxHeartbeatAgeSeconds", UINT, "seconds"),
                optional("candidateLimit", UINT, "candidates considered"),
                optional("scanLimit", UINT, "processors scanned"),
            ],
        ),
        arm("manager", &[required("managerId", NON_EMPTY, "the manager")]),
        arm(
            "static",
            &[
                required("processorIds", Shape::Array(&PROCESSOR_IDS), "the processors"),
                optional("managerId", NON_EMPTY, "the manager"),
            ],
        ),
    ],
};

/// `deployment.placement`.
pub static PLACEMENT: ObjectShape = object(
    "placement",
    &[
        defaulted(
            "requirements",
            Shape::Object(&REQUIREMENTS),
            DefaultValue::EmptyObject,
            "mandatory attested trust profile",
        ),
        defaulted("groups", Shape::Array(&GROUPS), DefaultValue::EmptyArray, "internal placement groups")
            .noted(Note::Groups),
        defaulted("topologyConstraints", Shape::Array(&TOPOLOGY), DefaultValue::EmptyArray, "internal"),
        defaulted(
            "processorSelection",
            Shape::Union(&PROCESSOR_SELECTION),
            DefaultValue::Arm("open_market"),
            "open market, fail-closed on unknown manager",
        ),
    ],
);

/// `deployment.placement`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Attested requirements.
    pub requirements: Requirements,
    /// Internal placement groups.
    pub groups: Vec<Group>,
    /// Internal topology constraints.
    pub topology_constraints: Vec<TopologyConstraint>,
    /// How processors are chosen.
    pub processor_selection: ProcessorSelection,
}

/// `placement.requirements`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirements {
    /// Always `svc.attested-runtime.v1`.
    pub trust_profile: String,
    /// Machine requirement.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    /// Evidence requirements.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Vec<Evidence>>,
}

/// `requirements.machine`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Machine {
    /// Machine class.
    pub class: String,
    /// Profile version.
    pub profile_version: String,
    /// Metric minimums.
    pub minimums: std::collections::BTreeMap<String, u64>,
}

/// One evidence requirement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    /// Evidence profile.
    pub profile: String,
    /// Metric.
    pub metric: String,
    /// Minimum value.
    pub minimum: u64,
    /// Maximum age in milliseconds.
    pub max_age_ms: u64,
    /// Minimum samples.
    pub minimum_samples: u64,
    /// Minimum confidence in basis points.
    pub minimum_confidence_bps: u16,
    /// `required` or `preferred`.
    pub strength: Strength,
}

/// Whether a constraint is hard or soft.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strength {
    /// Must hold.
    Required,
    /// Should hold.
    Preferred,
}

/// One placement group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// Unique name.
    pub name: String,
    /// Job slots in the group.
    pub count: u64,
    /// Where the group runs.
    pub geography: Geography,
}

/// A group's geography.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Geography {
    /// ISO 3166-1 alpha-2 countries.
    Country {
        /// `ISO-3166-1-alpha-2`.
        standard: String,
        /// Country codes.
        values: Vec<String>,
    },
    /// Regions of a versioned catalog.
    Region {
        /// The catalog.
        catalog: String,
        /// Region names.
        values: Vec<String>,
    },
}

/// One topology constraint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyConstraint {
    /// Together or apart.
    pub kind: TopologyKind,
    /// `this_deployment`.
    pub scope: String,
    /// What is kept together or apart.
    pub topology_key: TopologyKey,
    /// `required` or `preferred`.
    pub strength: Strength,
}

/// Whether a topology constraint keeps jobs together or apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TopologyKind {
    /// Together.
    Affinity,
    /// Apart.
    AntiAffinity,
}

/// What a topology constraint is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TopologyKey {
    /// The processor.
    Processor,
    /// Its operator.
    Operator,
    /// Its manager.
    Manager,
    /// Its country.
    Country,
    /// Its region.
    Region,
}

/// `processorSelection`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum ProcessorSelection {
    /// The open market, with optional filters.
    #[serde(rename_all = "camelCase")]
    OpenMarket {
        /// Managers to exclude.
        #[serde(skip_serializing_if = "Option::is_none")]
        exclude_managers: Option<Vec<String>>,
        /// Whether processors of unknown managers may be used.
        allow_unknown_manager: bool,
        /// Whether the processor's schedule must be clear.
        require_schedule_clear: bool,
        /// Whether consumer access is required.
        require_consumer_access: bool,
        /// Heartbeat age limit in seconds.
        #[serde(skip_serializing_if = "Option::is_none")]
        max_heartbeat_age_seconds: Option<u64>,
        /// Candidates considered.
        #[serde(skip_serializing_if = "Option::is_none")]
        candidate_limit: Option<u64>,
        /// Processors scanned.
        #[serde(skip_serializing_if = "Option::is_none")]
        scan_limit: Option<u64>,
    },
    /// One manager (internal).
    #[serde(rename_all = "camelCase")]
    Manager {
        /// The manager.
        manager_id: String,
    },
    /// Fixed processors (internal).
    #[serde(rename_all = "camelCase")]
    Static {
        /// The processors.
        processor_ids: Vec<String>,
        /// Their manager.
        #[serde(skip_serializing_if = "Option::is_none")]
        manager_id: Option<String>,
    },
}
