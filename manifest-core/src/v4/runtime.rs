//! V4 `runtime`: runtime requirements and the attested bootstrap, whose secure defaults cannot
//! be weakened.

use serde::{Deserialize, Serialize};

use crate::shape::{
    ArrayShape, DefaultValue, NON_EMPTY, ObjectShape, STRING, Shape, UINT, constant, defaulted, object, one_of,
    optional,
};

/// The mandatory trust profile.
pub const TRUST_PROFILE: &str = "svc.attested-runtime.v1";

/// The JavaScript engines.
pub const ENGINES: &[&str] = &["nodejs", "deno", "bun"];

static RESOURCES: ObjectShape = object(
    "resources",
    &[
        optional("memoryMiB", UINT, "MiB; an explicit zero is preserved"),
        optional("storageMiB", UINT, "MiB; an explicit zero is preserved"),
        optional("networkRequestQuota", UINT, "requests; an explicit zero is preserved"),
    ],
);

static MODULES: ArrayShape = ArrayShape { items: NON_EMPTY, min_items: 0, max_items: None, unique: true };

/// `runtime.bootstrap`: secure, non-weakenable defaults.
pub static BOOTSTRAP: ObjectShape = object(
    "bootstrap",
    &[
        defaulted("trustProfile", constant(TRUST_PROFILE), DefaultValue::Str(TRUST_PROFILE), "no other value"),
        defaulted(
            "signedDiagnosticsRequired",
            Shape::AlwaysTrue("the attested runtime's signed diagnostics cannot be turned off"),
            DefaultValue::Bool(true),
            "false is invalid",
        ),
        defaulted(
            "identityBoundSecretsRequired",
            Shape::AlwaysTrue("secrets are always bound to the attested runtime identity"),
            DefaultValue::Bool(true),
            "false is invalid",
        ),
    ],
);

/// `runtime`.
pub static RUNTIME: ObjectShape = object(
    "runtime",
    &[
        optional("engine", one_of(ENGINES), "`nodejs`, `deno` or `bun`"),
        optional("command", STRING, "command"),
        optional("role", STRING, "author label"),
        defaulted("resources", Shape::Object(&RESOURCES), DefaultValue::EmptyObject, "resource requirements"),
        defaulted(
            "requiredModules",
            Shape::Array(&MODULES),
            DefaultValue::EmptyArray,
            "module names such as `network`, subject to capability checks",
        ),
        defaulted("bootstrap", Shape::Object(&BOOTSTRAP), DefaultValue::EmptyObject, "secure, non-weakenable defaults"),
    ],
);

/// `runtime`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Runtime {
    /// The JavaScript engine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<Engine>,
    /// The command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// An author label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Resource requirements.
    pub resources: Resources,
    /// Required runtime modules.
    pub required_modules: Vec<String>,
    /// The attested bootstrap.
    pub bootstrap: Bootstrap,
}

/// JavaScript engines (V4 `runtime.engine` and V5 javascript `engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// Node.js.
    Nodejs,
    /// Deno.
    Deno,
    /// Bun.
    Bun,
}

/// `runtime.resources`; absent means no requirement, zero is kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    /// Memory in MiB.
    #[serde(rename = "memoryMiB", skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
    /// Storage in MiB.
    #[serde(rename = "storageMiB", skip_serializing_if = "Option::is_none")]
    pub storage_mib: Option<u64>,
    /// Network request quota.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_request_quota: Option<u64>,
}

/// `runtime.bootstrap`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    /// Always `svc.attested-runtime.v1`.
    pub trust_profile: String,
    /// Always true.
    pub signed_diagnostics_required: bool,
    /// Always true.
    pub identity_bound_secrets_required: bool,
}
