//! V4 `deployment`: parallelism, the paid schedule, placement, lifecycle and spend authority,
//! with the cross-field rules between them (layer 2).

use serde::{Deserialize, Serialize};

use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::formats::DECIMAL_STRING;
use crate::shape::{DefaultValue, ObjectShape, Shape, UINT, defaulted, int, object, optional, pattern_hint, required};
use crate::v4::lifecycle::{FIXED_LEAD_MAX_MS, FIXED_LEAD_MIN_MS, LIFECYCLE, LeadTime, Lifecycle, Renewal};
use crate::v4::placement::{Group, PLACEMENT, Placement};

/// Schema range of parallelism (public v1 enables only 1, decided at publication).
pub const MAX_PARALLELISM: u64 = 64;
/// Shortest paid schedule.
pub const MIN_DURATION_MS: u64 = 60_000;
/// Furthest a start may be delayed.
pub const MAX_START_DELAY_MS: u64 = 86_400_000;
/// Largest `maxStartDelayMs`.
pub const MAX_MAX_START_DELAY_MS: u64 = 3_600_000;

static SCHEDULE: ObjectShape = object(
    "schedule",
    &[
        required("durationMs", int(MIN_DURATION_MS, u64::MAX), "unsigned integer, at least 60000"),
        optional(
            "startDelayMs",
            int(0, MAX_START_DELAY_MS),
            "at most 86400000; not above maxStartDelayMs when present",
        ),
        optional("maxStartDelayMs", int(0, MAX_MAX_START_DELAY_MS), "unsigned integer, at most 3600000"),
    ],
);

const PLANCK_HINT: &str = "planck amounts are decimal strings, e.g. \"1500000000\"";

static SPEND: ObjectShape = object(
    "spend",
    &[
        optional("maxRewardPlanckPerJob", pattern_hint(&DECIMAL_STRING, PLANCK_HINT), "decimal string, planck"),
        optional("maxNativeFeePlanckPerJob", pattern_hint(&DECIMAL_STRING, PLANCK_HINT), "decimal string, planck"),
        optional("maxServiceCreditMicrosPerGeneration", UINT, "USD micros; 1000000 equals USD 1.00"),
    ],
);

/// `deployment`.
pub static DEPLOYMENT: ObjectShape = object(
    "deployment",
    &[
        defaulted(
            "parallelism",
            int(1, MAX_PARALLELISM),
            DefaultValue::Integer(1),
            "1-64, default 1; public v1 enables only 1",
        ),
        required("schedule", Shape::Object(&SCHEDULE), "paid schedule"),
        defaulted(
            "placement",
            Shape::Object(&PLACEMENT),
            DefaultValue::EmptyObject,
            "attested requirements plus open-market default",
        ),
        required("lifecycle", Shape::Object(&LIFECYCLE), "renewal, update, recovery"),
        defaulted("spend", Shape::Object(&SPEND), DefaultValue::EmptyObject, "maximum authority, not a quote"),
    ],
);

/// `deployment`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    /// Logical job slots.
    pub parallelism: u8,
    /// The paid schedule.
    pub schedule: Schedule,
    /// Where jobs run.
    pub placement: Placement,
    /// Renewal, update and recovery.
    pub lifecycle: Lifecycle,
    /// Spend authority.
    pub spend: Spend,
}

/// `deployment.schedule`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    /// Length of one paid job, ms.
    pub duration_ms: u64,
    /// Start delay, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_delay_ms: Option<u64>,
    /// Largest start delay, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_start_delay_ms: Option<u64>,
}

/// `deployment.spend`: maximum authority, not a quote or final price.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spend {
    /// Planck, decimal string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_reward_planck_per_job: Option<String>,
    /// Planck, decimal string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_native_fee_planck_per_job: Option<String>,
    /// USD micros.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_service_credit_micros_per_generation: Option<u64>,
}

/// Layer 2: `startDelayMs` not above `maxStartDelayMs`.
pub(crate) fn check_start_delay(s: &Schedule, out: &mut Vec<Diagnostic>) {
    if let (Some(delay), Some(max)) = (s.start_delay_ms, s.max_start_delay_ms)
        && delay > max
    {
        out.push(Diagnostic::error(
            Layer::Semantic,
            Code::StartDelayExceedsMax,
            "/deployment/schedule/startDelayMs",
            format!("startDelayMs {delay} is above maxStartDelayMs {max}; lower it or raise maxStartDelayMs"),
        ));
    }
}

/// Layer 2: a fixed renewal lead is at most half of the scheduled duration.
pub(crate) fn check_renewal_lead(s: &Schedule, renewal: &Renewal, out: &mut Vec<Diagnostic>) {
    if let Renewal::BeforeScheduledEnd { lead_time: LeadTime::Fixed { duration_ms: lead } } = *renewal
        && lead.saturating_mul(2) > s.duration_ms
    {
        let limit = (s.duration_ms / 2).min(FIXED_LEAD_MAX_MS);
        out.push(Diagnostic::error(
            Layer::Semantic,
            Code::RenewalLeadOutOfRange,
            "/deployment/lifecycle/renewal/leadTime/durationMs",
            format!(
                "a fixed renewal lead of {lead} ms is more than half of schedule.durationMs ({}); the lead must be from {FIXED_LEAD_MIN_MS} to {limit}",
                s.duration_ms
            ),
        ));
    }
}

/// Layer 2: group names are unique and group counts sum exactly to `parallelism`.
pub(crate) fn check_groups(groups: &[Group], parallelism: Option<u8>, out: &mut Vec<Diagnostic>) {
    for (i, g) in groups.iter().enumerate() {
        if groups[..i].iter().any(|earlier| earlier.name == g.name) {
            out.push(Diagnostic::error(
                Layer::Semantic,
                Code::DuplicateGroupName,
                format!("/deployment/placement/groups/{i}/name"),
                format!("group name \"{}\" is used twice; group names must be unique", g.name),
            ));
        }
    }
    let Some(parallelism) = parallelism else {
        return;
    };
    if !groups.is_empty() {
        let total = groups.iter().fold(0u64, |sum, g| sum.saturating_add(g.count));
        if total != u64::from(parallelism) {
            out.push(Diagnostic::error(
                Layer::Semantic,
                Code::GroupCountMismatch,
                "/deployment/placement/groups",
                format!("group counts sum to {total} but parallelism is {parallelism}; they must be equal"),
            ));
        }
    }
}
