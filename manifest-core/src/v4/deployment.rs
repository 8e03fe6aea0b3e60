//! V4 `deployment`: parallelism, the paid schedule, placement, lifecycle and spend authority,
//! with the cross-field rules between them (layer 2).

use serde::{Deserialize, Serialize};

use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::formats::DECIMAL_STRING;
use crate::notes::Note;
use crate::shape::{DefaultValue, ObjectShape, Shape, UINT, defaulted, int, object, optional, pattern_hint, required};
use crate::v4::lifecycle::{FIXED_LEAD_MAX_MS, FIXED_LEAD_MIN_MS, LIFECYCLE, LeadTime, Lifecycle, Renewal};
use crate::v4::placement::{PLACEMENT, Placement};

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
        required(
            "durationMs",
            int(MIN_DURATION_MS, crate::shape::MAX_SAFE_INTEGER),
            "unsigned integer, at least 60000",
        ),
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
        required("schedule", Shape::Object(&SCHEDULE), "paid schedule").noted(Note::Schedule),
        defaulted(
            "placement",
            Shape::Object(&PLACEMENT),
            DefaultValue::EmptyObject,
            "attested requirements plus open-market default",
        )
        .noted(Note::Placement),
        required("lifecycle", Shape::Object(&LIFECYCLE), "renewal, update, recovery").noted(Note::Lifecycle),
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
pub(crate) fn check_start_delay(delay: u64, max: u64, out: &mut Vec<Diagnostic>) {
    if delay > max {
        out.push(Diagnostic::error(
            Layer::Semantic,
            Code::StartDelayExceedsMax,
            "/deployment/schedule/startDelayMs",
            format!("startDelayMs {delay} is above maxStartDelayMs {max}; lower it or raise maxStartDelayMs"),
        ));
    }
}

/// Layer 2: a fixed renewal lead is at most half of the scheduled duration.
pub(crate) fn check_renewal_lead(duration_ms: u64, renewal: &Renewal, out: &mut Vec<Diagnostic>) {
    let Renewal::BeforeScheduledEnd { lead_time: LeadTime::Fixed { duration_ms: lead } } = *renewal else { return };
    if lead.saturating_mul(2) <= duration_ms {
        return;
    }
    let limit = (duration_ms / 2).min(FIXED_LEAD_MAX_MS);
    let fix = if limit < FIXED_LEAD_MIN_MS {
        format!(
            "no fixed lead fits a {duration_ms} ms schedule (the lead is at least {FIXED_LEAD_MIN_MS}); make schedule.durationMs at least {} or renew `after_scheduled_end`",
            2 * FIXED_LEAD_MIN_MS
        )
    } else {
        format!("the lead must be from {FIXED_LEAD_MIN_MS} to {limit}")
    };
    out.push(Diagnostic::error(
        Layer::Semantic,
        Code::RenewalLeadOutOfRange,
        "/deployment/lifecycle/renewal/leadTime/durationMs",
        format!("a fixed renewal lead of {lead} ms is more than half of schedule.durationMs ({duration_ms}); {fix}"),
    ));
}

/// Layer 2: group names are unique, and group counts sum exactly to `parallelism`. `names`
/// holds each group's index and name where it passed layer 1; `total` is the sum of the
/// counts when every count passed layer 1.
pub(crate) fn check_groups(
    names: &[(usize, String)],
    total: Option<u64>,
    parallelism: Option<u8>,
    out: &mut Vec<Diagnostic>,
) {
    for (k, (i, name)) in names.iter().enumerate() {
        if names[..k].iter().any(|(_, earlier)| earlier == name) {
            out.push(Diagnostic::error(
                Layer::Semantic,
                Code::DuplicateGroupName,
                format!("/deployment/placement/groups/{i}/name"),
                format!("group name \"{name}\" is used twice; group names must be unique"),
            ));
        }
    }
    if let (Some(total), Some(parallelism)) = (total, parallelism)
        && total != u64::from(parallelism)
    {
        out.push(Diagnostic::error(
            Layer::Semantic,
            Code::GroupCountMismatch,
            "/deployment/placement/groups",
            format!("group counts sum to {total} but parallelism is {parallelism}; they must be equal"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lead(duration_ms: u64) -> Renewal {
        Renewal::BeforeScheduledEnd { lead_time: LeadTime::Fixed { duration_ms } }
    }

    #[test]
    fn lead_at_half_the_duration_is_fine_above_is_not() {
        let mut out = Vec::new();
        check_renewal_lead(200_000, &lead(100_000), &mut out);
        assert!(out.is_empty());
        check_renewal_lead(200_000, &lead(100_001), &mut out);
        assert_eq!(out.len(), 1);
        assert!(out[0].message.contains("from 60000 to 100000"), "{}", out[0].message);
    }

    #[test]
    fn a_schedule_too_short_for_any_lead_says_so() {
        let mut out = Vec::new();
        check_renewal_lead(100_000, &lead(60_000), &mut out);
        assert_eq!(out.len(), 1);
        let message = &out[0].message;
        assert!(message.contains("no fixed lead fits a 100000 ms schedule"), "{message}");
        assert!(message.contains("at least 120000"), "{message}");
        assert!(!message.contains("to 50000"), "{message}");
    }
}
