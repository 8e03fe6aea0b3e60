//! V5 `observability`, `state` and `debug`: managed logging (`logs.enabled` is the only
//! authored logging field), the required `state: {mode: off}`, and the diagnostic hold for
//! fixtures.

use serde::{Deserialize, Serialize};

use crate::shape::{DefaultValue, ObjectShape, Shape, UnionShape, arm, defaulted, object};

static LOGS: ObjectShape =
    object("logs", &[defaulted("enabled", Shape::Bool, DefaultValue::Bool(false), "managed logging, default false")]);

/// `observability`.
pub static OBSERVABILITY: ObjectShape =
    object("observability", &[defaulted("logs", Shape::Object(&LOGS), DefaultValue::EmptyObject, "managed logging")]);

/// `state`: only `{mode: off}`.
pub static STATE: UnionShape = UnionShape { name: "state", tag: "mode", arms: &[arm("off", &[])] };

/// `debug`.
pub static DEBUG: ObjectShape = object(
    "debug",
    &[defaulted(
        "holdOnFailure",
        Shape::Bool,
        DefaultValue::Bool(false),
        "default false; reserved for diagnostic fixtures",
    )],
);

/// `observability`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observability {
    /// Managed logging.
    pub logs: Logs,
}

/// `observability.logs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Logs {
    /// On or off.
    pub enabled: bool,
}

/// `state`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum State {
    /// No durable state.
    Off {},
}

/// `debug`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Debug {
    /// Hold a failed job for diagnosis.
    pub hold_on_failure: bool,
}
