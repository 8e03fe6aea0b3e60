//! V4 `configuration`: variables and secrets. An environment name may be claimed only once
//! across variables and `env` secret destinations (INTERPRETATION.md applies the V5 rule to V4).

use serde::{Deserialize, Serialize};

use crate::formats::{SECRET_ID, VARIABLE_NAME_V4};
use crate::notes::Note;
use crate::shape::pattern_len;
use crate::shape::{
    ArrayShape, DefaultValue, NON_EMPTY, ObjectShape, STRING, Shape, UnionShape, arm, defaulted, object, optional,
    pattern, required,
};

static VARIABLE: ObjectShape = object(
    "variable",
    &[
        required("name", pattern(&VARIABLE_NAME_V4), "runtime variable name"),
        defaulted("required", Shape::Bool, DefaultValue::Bool(false), "default false"),
        optional("default", STRING, "non-secret string; never secret plaintext"),
        defaulted("managed", Shape::Bool, DefaultValue::Bool(false), "true selects an application-managed value"),
    ],
);

static DESTINATION: UnionShape = UnionShape {
    name: "secret destination",
    tag: "kind",
    arms: &[
        arm("env", &[required("name", pattern(&VARIABLE_NAME_V4), "environment variable name")]),
        arm("file", &[required("path", NON_EMPTY, "file path")]),
    ],
};

static SECRET: ObjectShape = object(
    "secret",
    &[
        required("secretId", pattern_len(&SECRET_ID, 1, 127), "stable ID, not secret material"),
        defaulted("required", Shape::Bool, DefaultValue::Bool(true), "default true"),
        required("destination", Shape::Union(&DESTINATION), "`env` with `name`, or `file` with `path`"),
        optional("bundleId", NON_EMPTY, "groups related secret material"),
    ],
);

static VARIABLES: ArrayShape =
    ArrayShape { items: Shape::Object(&VARIABLE), min_items: 0, max_items: None, unique: false };
static SECRETS: ArrayShape = ArrayShape { items: Shape::Object(&SECRET), min_items: 0, max_items: None, unique: false };

/// `configuration`.
pub static CONFIGURATION: ObjectShape = object(
    "configuration",
    &[
        defaulted("variables", Shape::Array(&VARIABLES), DefaultValue::EmptyArray, "default `[]`")
            .noted(Note::Variables),
        defaulted("secrets", Shape::Array(&SECRETS), DefaultValue::EmptyArray, "default `[]`").noted(Note::Secrets),
    ],
);

/// `configuration`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Configuration {
    /// Runtime variables.
    pub variables: Vec<Variable>,
    /// Secrets.
    pub secrets: Vec<Secret>,
}

/// One runtime variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variable {
    /// Variable name.
    pub name: String,
    /// Whether a value is required.
    pub required: bool,
    /// Non-secret default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Application-managed value.
    pub managed: bool,
}

/// One secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Secret {
    /// Stable ID.
    pub secret_id: String,
    /// Whether the secret is required.
    pub required: bool,
    /// Where it is delivered.
    pub destination: SecretDestination,
    /// Bundle of related material.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bundle_id: Option<String>,
}

/// Where a secret is delivered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SecretDestination {
    /// An environment variable.
    Env {
        /// Its name.
        name: String,
    },
    /// A file.
    File {
        /// Its path.
        path: String,
    },
}
