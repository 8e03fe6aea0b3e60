//! V5 `deployment`: jobs, the paid window and its phasing, placement minimums and exact
//! processor selection, lifecycle, and managed service-credit spend authority, with the
//! cross-field rules between them and `execution` (layer 2).

use serde::{Deserialize, Serialize};

use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::formats::{BYTE_SIZE, DURATION, MONEY, POSITIVE_DURATION};
use crate::notes::Note;
use crate::shape::{
    ArrayShape, DefaultValue, NON_EMPTY, ObjectShape, Shape, UnionShape, arm, constant, defaulted, int, object,
    optional, pattern, pattern_hint, required,
};

/// Schema range of jobs (first-public admission allows 2, decided at publication).
pub const MAX_JOBS: u64 = 256;
/// Largest CPU score (2^53 - 1).
pub const MAX_CPU_SCORE: u64 = crate::shape::MAX_SAFE_INTEGER;
/// Most exact processor IDs.
pub const MAX_PROCESSOR_IDS: usize = 64;
/// Default rate window.
pub const DEFAULT_RATE_WINDOW: &str = "30d";

static PHASING: UnionShape = UnionShape {
    name: "phasing",
    tag: "mode",
    arms: &[
        arm("simultaneous", &[]),
        arm(
            "evenly_spaced",
            &[defaulted(
                "jobsPerPhase",
                int(1, crate::shape::MAX_SAFE_INTEGER),
                DefaultValue::Integer(1),
                "default 1; at most jobs and divides it",
            )],
        ),
    ],
};

static SCHEDULE: ObjectShape = object(
    "schedule",
    &[
        required("duration", pattern(&POSITIVE_DURATION), "duration of one paid job window"),
        defaulted(
            "phasing",
            Shape::Union(&PHASING),
            DefaultValue::Arm("simultaneous"),
            "`simultaneous` (default) or `evenly_spaced`",
        )
        .noted(Note::Phasing),
    ],
);

static MINIMUMS: ObjectShape = ObjectShape {
    name: "minimums",
    fields: &[
        optional("memory", pattern(&BYTE_SIZE), "byte size"),
        optional("storage", pattern(&BYTE_SIZE), "byte size"),
        optional("cpuSingleCoreScore", int(1, MAX_CPU_SCORE), "integer 1-9007199254740991"),
        optional("cpuMultiCoreScore", int(1, MAX_CPU_SCORE), "integer 1-9007199254740991"),
    ],
    min_fields: 1,
    refused: &[],
};

static PROCESSOR_IDS: ArrayShape =
    ArrayShape { items: NON_EMPTY, min_items: 1, max_items: Some(MAX_PROCESSOR_IDS), unique: true };

static PROCESSOR_SELECTION: UnionShape = UnionShape {
    name: "processor selection",
    tag: "mode",
    arms: &[arm("exact", &[required("processorIds", Shape::Array(&PROCESSOR_IDS), "1-64 processor IDs")])],
};

static PLACEMENT: ObjectShape = object(
    "placement",
    &[
        optional("minimums", Shape::Object(&MINIMUMS), "capability minimums, at least one"),
        optional("processorSelection", Shape::Union(&PROCESSOR_SELECTION), "omitted means open-market selection"),
    ],
);

static LEAD_TIME: UnionShape = UnionShape {
    name: "renewal lead time",
    tag: "mode",
    arms: &[arm("automatic", &[]), arm("fixed", &[required("duration", pattern(&DURATION), "lead duration")])],
};

static RENEWAL: ObjectShape = object(
    "renewal",
    &[defaulted(
        "leadTime",
        Shape::Union(&LEAD_TIME),
        DefaultValue::Arm("automatic"),
        "`automatic` (default) or `fixed`",
    )],
);

static EXISTING_JOBS: UnionShape = UnionShape {
    name: "existing jobs policy",
    tag: "mode",
    arms: &[arm("stop_when_successor_ready", &[]), arm("run_until_scheduled_end", &[])],
};

static UPDATE: ObjectShape = object(
    "update",
    &[
        defaulted(
            "timing",
            crate::shape::one_of(&["immediate", "next_renewal"]),
            DefaultValue::Str("immediate"),
            "`immediate` (default) or `next_renewal`",
        ),
        defaulted(
            "existingJobs",
            Shape::Union(&EXISTING_JOBS),
            DefaultValue::Arm("stop_when_successor_ready"),
            "`stop_when_successor_ready` (default) or `run_until_scheduled_end`; if present its mode is required",
        ),
    ],
);

static LIFECYCLE: ObjectShape = object(
    "lifecycle",
    &[
        optional("renewal", Shape::Object(&RENEWAL), "valid only for continuous execution").noted(Note::Renewal),
        defaulted("update", Shape::Object(&UPDATE), DefaultValue::EmptyObject, "update policy"),
    ],
);

const MONEY_HINT: &str = "money amounts are decimal strings, e.g. \"1000000\" (quote them in YAML)";

static RATE: ObjectShape = object(
    "rate",
    &[
        required("amount", pattern_hint(&MONEY, MONEY_HINT), "lifetime ceiling over a window (money string)"),
        defaulted("window", pattern(&DURATION), DefaultValue::Str(DEFAULT_RATE_WINDOW), "duration, default `30d`"),
    ],
);

static SPEND: ObjectShape = object(
    "spend",
    &[
        required("unit", constant("service_credit_micros"), "exactly `service_credit_micros`"),
        required("perJob", pattern_hint(&MONEY, MONEY_HINT), "total exposure for one delivered occurrence"),
        optional("rate", Shape::Object(&RATE), "required for recurring execution"),
    ],
);

/// `deployment`.
pub static DEPLOYMENT: ObjectShape = object(
    "deployment",
    &[
        defaulted("jobs", int(1, MAX_JOBS), DefaultValue::Integer(1), "integer 1-256, default 1"),
        required("schedule", Shape::Object(&SCHEDULE), "paid window").noted(Note::Schedule),
        defaulted(
            "placement",
            Shape::Object(&PLACEMENT),
            DefaultValue::EmptyObject,
            "minimums and/or exact processors",
        ),
        defaulted("lifecycle", Shape::Object(&LIFECYCLE), DefaultValue::EmptyObject, "renewal and update policy")
            .noted(Note::Lifecycle),
        required("spend", Shape::Object(&SPEND), "managed service-credit authority").noted(Note::Spend),
    ],
);

/// `deployment`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    /// Jobs, 1-256.
    pub jobs: u16,
    /// The paid window.
    pub schedule: Schedule,
    /// Placement.
    pub placement: Placement,
    /// Lifecycle.
    pub lifecycle: Lifecycle,
    /// Spend authority.
    pub spend: Spend,
}

/// `deployment.schedule`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// One paid window.
    pub duration: String,
    /// How jobs start.
    pub phasing: Phasing,
}

/// `schedule.phasing`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Phasing {
    /// All at once.
    Simultaneous {},
    /// In equal phases.
    #[serde(rename_all = "camelCase")]
    EvenlySpaced {
        /// Jobs per phase.
        jobs_per_phase: u64,
    },
}

/// `deployment.placement`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Capability minimums.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub minimums: Option<Minimums>,
    /// Exact processors; absent means the open market.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processor_selection: Option<ProcessorSelection>,
}

/// `placement.minimums`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Minimums {
    /// Memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// Storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// Single-core CPU score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_single_core_score: Option<u64>,
    /// Multi-core CPU score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_multi_core_score: Option<u64>,
}

/// `placement.processorSelection`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum ProcessorSelection {
    /// These processors.
    #[serde(rename_all = "camelCase")]
    Exact {
        /// 1-64 processor IDs.
        processor_ids: Vec<String>,
    },
}

/// `deployment.lifecycle`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lifecycle {
    /// Renewal (continuous execution only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub renewal: Option<Renewal>,
    /// Update policy.
    pub update: Update,
}

/// `lifecycle.renewal`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Renewal {
    /// Lead time.
    pub lead_time: LeadTime,
}

/// `renewal.leadTime`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum LeadTime {
    /// Chosen by the service.
    Automatic {},
    /// A fixed lead.
    Fixed {
        /// The lead.
        duration: String,
    },
}

/// `lifecycle.update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Update {
    /// When updates apply.
    pub timing: UpdateTiming,
    /// What happens to running jobs.
    pub existing_jobs: ExistingJobs,
}

/// `update.timing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpdateTiming {
    /// Now (default).
    Immediate,
    /// At the next renewal.
    NextRenewal,
}

/// `update.existingJobs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum ExistingJobs {
    /// Stop when the successor is ready.
    StopWhenSuccessorReady {},
    /// Run to the scheduled end.
    RunUntilScheduledEnd {},
}

/// `deployment.spend`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    /// `service_credit_micros`.
    pub unit: String,
    /// Exposure for one delivered occurrence.
    pub per_job: String,
    /// Lifetime ceiling over a window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
}

/// `spend.rate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// Money string.
    pub amount: String,
    /// Duration, default `30d`.
    pub window: String,
}

/// Layer 2: `jobsPerPhase` must not exceed `jobs` and must divide it exactly.
pub(crate) fn check_phasing(jobs: u16, phasing: &Phasing, out: &mut Vec<Diagnostic>) {
    let Phasing::EvenlySpaced { jobs_per_phase } = *phasing else {
        return;
    };
    let pointer = "/deployment/schedule/phasing/jobsPerPhase";
    let jobs = u64::from(jobs);
    if jobs_per_phase > jobs {
        out.push(Diagnostic::error(
            Layer::Semantic,
            Code::JobsPerPhaseExceedsJobs,
            pointer,
            format!("jobsPerPhase {jobs_per_phase} is more than jobs ({jobs}); it must not exceed jobs"),
        ));
    } else if jobs % jobs_per_phase != 0 {
        out.push(Diagnostic::error(
            Layer::Semantic,
            Code::JobsPerPhaseNotDivisor,
            pointer,
            format!("jobsPerPhase {jobs_per_phase} does not divide jobs ({jobs}) exactly; use a divisor of {jobs}"),
        ));
    }
}

/// Layer 2: renewal only with continuous execution; recurring execution needs a spend rate.
/// `renewal` and `rate` say whether those fields are written; `spend` whether `spend` is.
pub(crate) fn check_execution(execution: &str, renewal: bool, spend: bool, rate: bool, out: &mut Vec<Diagnostic>) {
    if renewal && matches!(execution, "once" | "interval") {
        out.push(Diagnostic::error(
            Layer::Semantic,
            Code::RenewalRequiresContinuous,
            "/deployment/lifecycle/renewal",
            format!("renewal is valid only for continuous execution, not \"{execution}\"; remove it or use `execution.mode: continuous`"),
        ));
    }
    if spend && !rate && matches!(execution, "continuous" | "interval") {
        out.push(Diagnostic::error(
            Layer::Semantic,
            Code::SpendRateRequired,
            "/deployment/spend/rate",
            format!(
                "{execution} execution requires spend.rate, a ceiling on what its jobs are charged over a trailing window: under `deployment.spend`, add for example `rate: {{amount: \"1000000\", window: 30d}}` (USD 1.00 per 30 days); the organization's spend authority does not stand in for it"
            ),
        ));
    }
}
