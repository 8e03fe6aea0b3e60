//! `svc.execution-convergence.v1`: the bounded, read-only projection of an application's
//! executions that the console's Overview and Executions views and `svc app executions`
//! read (`GET /api/applications/{id}/executions`). The types are what the service writes
//! and the CLI reads; the shape table below is what its JSON Schema is generated from, and a
//! test checks that every answer the service gives validates against it.

use serde::{Deserialize, Serialize};

use crate::shape::{
    ArrayShape, Field, ObjectShape, Pattern, Shape, int, object, one_of, optional, pattern, required, string_max,
};

/// The projection's identifier.
pub const EXECUTION_CONVERGENCE: &str = "svc.execution-convergence.v1";

/// The most executions one page of `recent` holds.
pub const MAX_RECENT: usize = 100;

/// How many `recent` executions a page has unless asked.
pub const DEFAULT_RECENT: usize = 20;

/// A time (Unix milliseconds) as the projection writes it: RFC 3339 UTC with milliseconds.
pub fn rfc3339_ms(at: u64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(at);
    humantime::format_rfc3339_millis(time).to_string()
}

/// Why a page of `recent` executions cannot be given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageError {
    /// `cursor` is not one a page gave.
    #[error("the cursor \"{0}\" is not one this route gave; start without it")]
    Cursor(String),
    /// `limit` is out of range.
    #[error("limit must be an integer from 1 to {MAX_RECENT}, not \"{0}\"")]
    Limit(String),
}

/// A page of `recent` asked for (`?cursor=`, `?limit=`), read: the row to start below (a
/// previous page's `nextCursor`, a positive number) and how many (1-100, default 20).
pub fn page(cursor: Option<&str>, limit: Option<&str>) -> Result<(Option<i64>, usize), PageError> {
    let before = match cursor {
        None => None,
        Some(c) => Some(c.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| PageError::Cursor(c.to_owned()))?),
    };
    let limit = match limit {
        None => DEFAULT_RECENT,
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_RECENT).contains(n))
            .ok_or_else(|| PageError::Limit(l.to_owned()))?,
    };
    Ok((before, limit))
}

/// The projection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Convergence {
    /// [`EXECUTION_CONVERGENCE`].
    pub schema: String,
    /// The application.
    pub application_id: String,
    /// Its publication status.
    pub status: String,
    /// What it should run: its active policy version (absent before its first publication).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired: Option<Desired>,
    /// How far what runs is from that.
    pub convergence: State,
    /// Each slot's current execution.
    pub slots: Vec<Slot>,
    /// Executions, newest first (one page).
    pub recent: Vec<Recent>,
    /// The cursor of the next (older) page, if there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// When the scheduler decides for the application next.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<Next>,
}

/// The desired execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Desired {
    /// The active policy version.
    pub policy_version: u64,
    /// Its digest.
    pub policy_digest: String,
    /// Its job slots.
    pub slots: u16,
    /// `once`, `continuous` or `interval`.
    pub execution: String,
}

/// The convergence state and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// `converged`, `converging`, `blocked`, `settled` or `idle`.
    pub state: String,
    /// Why it is not converged (or what holds it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<ReasonBody>,
}

/// A reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    /// snake_case.
    pub code: String,
    /// For people.
    pub message: String,
}

/// One slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Slot {
    /// From 0.
    pub slot: u16,
    /// Its current generation (0: none yet).
    pub generation: u64,
    /// The policy version that generation runs.
    pub policy_version: u64,
    /// The execution's state, or `pending` before the slot's first launch.
    pub state: String,
    /// Where it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processor_id: Option<String>,
    /// Its window, RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_start: Option<String>,
    /// Its window's scheduled end, RFC 3339.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_end: Option<String>,
    /// Same-job restarts of that generation.
    pub restarts: u32,
}

/// One execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Recent {
    /// The market's ID of the execution.
    pub execution_id: String,
    /// Its slot.
    pub slot: u16,
    /// Its generation.
    pub generation: u64,
    /// Its attempt within the generation.
    pub attempt: u32,
    /// The policy version it runs.
    pub policy_version: u64,
    /// Its state.
    pub state: String,
    /// Where it runs or ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processor_id: Option<String>,
    /// Its window, RFC 3339.
    pub window_start: String,
    /// Its window's scheduled end, RFC 3339.
    pub window_end: String,
    /// When its state last changed, RFC 3339.
    pub changed_at: String,
    /// Same-job restarts.
    pub restarts: u32,
    /// What its launch was charged, service-credit micros (decimal string).
    pub charged_micros: String,
    /// Why it is in its state.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<ReasonBody>,
}

/// The next decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Next {
    /// RFC 3339.
    pub at: String,
}

/// RFC 3339 UTC with milliseconds, as the projection writes times.
pub static RFC3339_MILLIS: Pattern = Pattern {
    describe: "an RFC 3339 UTC time with milliseconds, such as `2026-01-01T00:00:00.000Z`",
    regex: "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z$",
    check: |s| {
        let b = s.as_bytes();
        b.len() == 24
            && b.iter().enumerate().all(|(i, c)| match i {
                4 | 7 => *c == b'-',
                10 => *c == b'T',
                13 | 16 => *c == b':',
                19 => *c == b'.',
                23 => *c == b'Z',
                _ => c.is_ascii_digit(),
            })
    },
    exact: true,
};

const EXECUTION_STATES: &[&str] =
    &["launching", "running", "ready", "restarting", "stopping", "completed", "failed", "stopped", "refused"];
const SLOT_STATES: &[&str] = &[
    "pending",
    "launching",
    "running",
    "ready",
    "restarting",
    "stopping",
    "completed",
    "failed",
    "stopped",
    "refused",
];
const U64: Shape = int(0, u64::MAX);
const U32_MAX: u64 = u32::MAX as u64;

static REASON: ObjectShape = object(
    "reason",
    &[
        required("code", string_max(64), "stable snake_case code"),
        required("message", string_max(1_000), "what happened and what to do"),
    ],
);

static DESIRED: ObjectShape = object(
    "desired",
    &[
        required("policyVersion", U64, "the active policy version"),
        required("policyDigest", string_max(80), "its policy digest"),
        required("slots", int(1, 256), "its job slots"),
        required("execution", one_of(&["once", "continuous", "interval"]), "its execution mode"),
    ],
);

static STATE: ObjectShape = object(
    "convergence",
    &[
        required(
            "state",
            one_of(&["converged", "converging", "blocked", "settled", "idle"]),
            "how far what runs is from the active policy",
        ),
        optional("reason", Shape::Object(&REASON), "why it is not converged"),
    ],
);

static SLOT: ObjectShape = object(
    "slot",
    &[
        required("slot", int(0, 255), "the slot, from 0"),
        required("generation", U64, "its current generation (0: none yet)"),
        required("policyVersion", U64, "the policy version that generation runs"),
        required("state", one_of(SLOT_STATES), "its execution's state; `pending` before its first launch"),
        optional("processorId", string_max(128), "where it runs"),
        optional("windowStart", pattern(&RFC3339_MILLIS), "its paid window's start"),
        optional("windowEnd", pattern(&RFC3339_MILLIS), "its paid window's scheduled end"),
        required("restarts", int(0, U32_MAX), "same-job restarts"),
    ],
);

static RECENT: ObjectShape = object(
    "execution",
    &[
        required("executionId", string_max(200), "the market's idempotency key"),
        required("slot", int(0, 255), "its slot"),
        required("generation", int(1, u64::MAX), "its generation"),
        required("attempt", int(1, U32_MAX), "its attempt within the generation"),
        required("policyVersion", U64, "the policy version it runs"),
        required("state", one_of(EXECUTION_STATES), "its state"),
        optional("processorId", string_max(128), "where it runs or ran"),
        required("windowStart", pattern(&RFC3339_MILLIS), "its paid window's start"),
        required("windowEnd", pattern(&RFC3339_MILLIS), "its paid window's scheduled end"),
        required("changedAt", pattern(&RFC3339_MILLIS), "when its state last changed"),
        required("restarts", int(0, U32_MAX), "same-job restarts"),
        required("chargedMicros", string_max(40), "what its launch was charged, service-credit micros"),
        optional("reason", Shape::Object(&REASON), "why it is in its state"),
    ],
);

static SLOTS: ArrayShape =
    ArrayShape { items: Shape::Object(&SLOT), min_items: 0, max_items: Some(256), unique: false };
static RECENTS: ArrayShape =
    ArrayShape { items: Shape::Object(&RECENT), min_items: 0, max_items: Some(MAX_RECENT), unique: false };
static NEXT: ObjectShape = object("next", &[required("at", pattern(&RFC3339_MILLIS), "when")]);

const FIELDS: &[Field] = &[
    required("schema", crate::shape::constant(EXECUTION_CONVERGENCE), "the projection's identifier"),
    required("applicationId", string_max(64), "the application"),
    required("status", one_of(&["active", "paused", "disabled"]), "its publication status"),
    optional("desired", Shape::Object(&DESIRED), "its active policy version; absent before the first publication"),
    required("convergence", Shape::Object(&STATE), "convergence state"),
    required("slots", Shape::Array(&SLOTS), "each slot's current execution"),
    required("recent", Shape::Array(&RECENTS), "executions, newest first, one page"),
    optional("nextCursor", string_max(40), "`?cursor=` for the next, older page"),
    optional("next", Shape::Object(&NEXT), "when the scheduler decides next"),
];

/// The shape table of the projection, for its JSON Schema.
pub static CONVERGENCE: ObjectShape = object("execution convergence", FIELDS);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_a_positive_cursor_and_a_limit_of_1_to_100() {
        assert_eq!(page(None, None), Ok((None, DEFAULT_RECENT)));
        assert_eq!(page(Some("42"), Some("100")), Ok((Some(42), 100)));
        for cursor in ["0", "-1", "x", "1&limit=5", ""] {
            assert_eq!(page(Some(cursor), None), Err(PageError::Cursor(cursor.to_owned())), "{cursor:?}");
        }
        for limit in ["0", "101", "-1", "ten"] {
            assert_eq!(page(None, Some(limit)), Err(PageError::Limit(limit.to_owned())), "{limit:?}");
        }
    }

    #[test]
    fn rfc3339_millis_check_and_regex_agree_on_examples() {
        let re = regex::Regex::new(RFC3339_MILLIS.regex).expect("regex");
        for (s, ok) in [("2026-01-01T00:00:00.000Z", true), ("2026-01-01T00:00:00Z", false), ("x", false)] {
            assert_eq!((RFC3339_MILLIS.check)(s), ok, "{s}");
            assert_eq!(re.is_match(s), ok, "{s}");
        }
    }
}
