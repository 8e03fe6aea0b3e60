//! V4 `observability`: managed logs (off by default) and signed runtime diagnostics (always on).
//! The deprecated logs fields `profileId`, `sinkName` and `context` are accepted with a warning
//! and keep their authored values.

use serde::{Deserialize, Serialize};

use crate::shape::{DefaultValue, ObjectShape, STRING, Shape, defaulted, deprecated, object};

static LOGS: ObjectShape = object(
    "logs",
    &[
        defaulted(
            "enabled",
            Shape::Bool,
            DefaultValue::Bool(false),
            "true requests automatically provisioned managed logging",
        ),
        deprecated("profileId", STRING, "deprecated compatibility field"),
        deprecated("sinkName", STRING, "deprecated compatibility field"),
        deprecated("context", STRING, "deprecated compatibility field"),
    ],
);

static RUNTIME_DIAGNOSTICS: ObjectShape = object(
    "runtimeDiagnostics",
    &[defaulted(
        "signed",
        Shape::AlwaysTrue("runtime diagnostics are always signed"),
        DefaultValue::Bool(true),
        "false is invalid",
    )],
);

/// `observability`.
pub static OBSERVABILITY: ObjectShape = object(
    "observability",
    &[
        defaulted("logs", Shape::Object(&LOGS), DefaultValue::EmptyObject, "`{enabled: false}`"),
        defaulted(
            "runtimeDiagnostics",
            Shape::Object(&RUNTIME_DIAGNOSTICS),
            DefaultValue::EmptyObject,
            "`{signed: true}`",
        ),
    ],
);

/// `observability`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observability {
    /// Managed logs.
    pub logs: Logs,
    /// Runtime diagnostics.
    pub runtime_diagnostics: RuntimeDiagnostics,
}

/// `observability.logs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Logs {
    /// Managed logging on or off.
    pub enabled: bool,
    /// Deprecated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile_id: Option<String>,
    /// Deprecated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sink_name: Option<String>,
    /// Deprecated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// `observability.runtimeDiagnostics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeDiagnostics {
    /// Always true.
    pub signed: bool,
}
