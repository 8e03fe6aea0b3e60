//! V5 `metadata`: description and labels, authored only. Outside the effective policy digest;
//! changing it cannot re-run a one-shot application.

use serde::{Deserialize, Serialize};

use crate::formats::LABEL;
use crate::shape::{ArrayShape, DefaultValue, ObjectShape, Shape, defaulted, object, optional, pattern, string_max};

/// Longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 500;
/// Most labels.
pub const MAX_LABELS: usize = 32;

static LABELS: ArrayShape =
    ArrayShape { items: pattern(&LABEL), min_items: 0, max_items: Some(MAX_LABELS), unique: false };

/// `metadata`.
pub static METADATA: ObjectShape = object(
    "metadata",
    &[
        optional("description", string_max(MAX_DESCRIPTION_CHARS), "at most 500 characters"),
        defaulted(
            "labels",
            Shape::Array(&LABELS),
            DefaultValue::EmptyArray,
            "at most 32, each `[a-z0-9][a-z0-9._-]{0,62}`",
        ),
    ],
);

/// `metadata`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    /// Description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Labels.
    pub labels: Vec<String>,
}
