//! V4 `metadata`: authored description of the application. It changes the authored digest and
//! is absent from the effective policy and its digest.

use serde::{Deserialize, Serialize};

use crate::shape::{ArrayShape, DefaultValue, ObjectShape, STRING, Shape, defaulted, object, optional};

static LABELS: ArrayShape = ArrayShape { items: STRING, min_items: 0, max_items: None, unique: false };

/// `metadata`.
pub static METADATA: ObjectShape = object(
    "metadata",
    &[
        optional("appType", STRING, "optional workload classification"),
        defaulted("labels", Shape::Array(&LABELS), DefaultValue::EmptyArray, "string[]; order is digest-significant"),
        optional("description", STRING, "optional description"),
    ],
);

/// `metadata`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    /// Workload classification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app_type: Option<String>,
    /// Labels, in authored order.
    pub labels: Vec<String>,
    /// Description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}
