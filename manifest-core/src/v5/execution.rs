//! V5 `execution`, tagged by `mode`: `once` (one occurrence, then terminal; a settled once
//! application never runs again by itself and is never re-run as a recovery retry),
//! `continuous` (successive paid windows until the bound or indefinitely) or `interval` (a new
//! occurrence on a cadence). Layers 1-2 never read the clock: an `until` in the past is a
//! publication-time concern.

use serde::{Deserialize, Serialize};

use crate::formats::{POSITIVE_DURATION, UTC_BOUND};
use crate::shape::{UnionShape, arm, optional, pattern, required};

/// `execution`.
pub static EXECUTION: UnionShape = UnionShape {
    name: "execution",
    tag: "mode",
    arms: &[
        arm("once", &[]),
        arm("continuous", &[optional("until", pattern(&UTC_BOUND), "UTC bound `YYYY-MM-DDTHH:MM:SSZ`")]),
        arm(
            "interval",
            &[
                required("every", pattern(&POSITIVE_DURATION), "positive duration between occurrences"),
                optional("until", pattern(&UTC_BOUND), "UTC bound `YYYY-MM-DDTHH:MM:SSZ`"),
            ],
        ),
    ],
};

/// `execution`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Execution {
    /// One occurrence.
    Once {},
    /// Successive paid windows.
    Continuous {
        /// Last moment, if bounded.
        #[serde(skip_serializing_if = "Option::is_none")]
        until: Option<String>,
    },
    /// An occurrence on a cadence.
    Interval {
        /// Cadence.
        every: String,
        /// Last moment, if bounded.
        #[serde(skip_serializing_if = "Option::is_none")]
        until: Option<String>,
    },
}

impl Execution {
    /// Whether the application recurs (and so needs a spend rate).
    pub fn is_recurring(&self) -> bool {
        !matches!(self, Execution::Once {})
    }
}
