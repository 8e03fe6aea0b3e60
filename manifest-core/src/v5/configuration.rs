//! V5 `configuration`: at most 64 variables (tagged by `source`) and 64 secrets. An environment
//! name may be claimed only once across variables and secret destinations.

use serde::{Deserialize, Serialize};

use crate::formats::{ABSOLUTE_PATH, ENV_NAME_V5, SECRET_ID};
use crate::notes::Note;
use crate::shape::pattern_len;
use crate::shape::{
    ArrayShape, DefaultValue, ObjectShape, STRING, Shape, UnionShape, arm, defaulted, object, optional, pattern,
    required,
};

/// Most variables, and most secrets.
pub const MAX_ENTRIES: usize = 64;

static VARIABLE: UnionShape = UnionShape {
    name: "variable",
    tag: "source",
    arms: &[
        arm(
            "literal",
            &[required("name", pattern(&ENV_NAME_V5), "environment name"), required("value", STRING, "the value")],
        ),
        arm(
            "managed",
            &[
                required("name", pattern(&ENV_NAME_V5), "environment name"),
                defaulted("required", Shape::Bool, DefaultValue::Bool(true), "default true"),
                optional("default", STRING, "default value"),
            ],
        ),
    ],
};

static DESTINATION: UnionShape = UnionShape {
    name: "secret destination",
    tag: "kind",
    arms: &[
        arm("environment", &[required("name", pattern(&ENV_NAME_V5), "environment name")]),
        arm("file", &[required("path", pattern(&ABSOLUTE_PATH), "absolute path")]),
    ],
};

static SECRET: ObjectShape = object(
    "secret",
    &[
        required("secretId", pattern_len(&SECRET_ID, 1, 127), "1-127 letters, digits, dot, underscore, hyphen"),
        defaulted("required", Shape::Bool, DefaultValue::Bool(true), "default true"),
        required(
            "destination",
            Shape::Union(&DESTINATION),
            "`environment` with `name`, or `file` with absolute `path`",
        ),
    ],
);

static VARIABLES: ArrayShape =
    ArrayShape { items: Shape::Union(&VARIABLE), min_items: 0, max_items: Some(MAX_ENTRIES), unique: false };
static SECRETS: ArrayShape =
    ArrayShape { items: Shape::Object(&SECRET), min_items: 0, max_items: Some(MAX_ENTRIES), unique: false };

/// `configuration`.
pub static CONFIGURATION: ObjectShape = object(
    "configuration",
    &[
        defaulted("variables", Shape::Array(&VARIABLES), DefaultValue::EmptyArray, "at most 64").noted(Note::Variables),
        defaulted("secrets", Shape::Array(&SECRETS), DefaultValue::EmptyArray, "at most 64").noted(Note::Secrets),
    ],
);

/// `configuration`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Configuration {
    /// Variables.
    pub variables: Vec<Variable>,
    /// Secrets.
    pub secrets: Vec<Secret>,
}

/// One variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum Variable {
    /// A literal value.
    Literal {
        /// Environment name.
        name: String,
        /// Value.
        value: String,
    },
    /// An application-managed value.
    Managed {
        /// Environment name.
        name: String,
        /// Whether a value is required.
        required: bool,
        /// Default value.
        #[serde(skip_serializing_if = "Option::is_none")]
        default: Option<String>,
    },
}

impl Variable {
    /// The environment name it claims.
    pub fn name(&self) -> &str {
        match self {
            Variable::Literal { name, .. } | Variable::Managed { name, .. } => name,
        }
    }
}

/// One secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Secret {
    /// Stable ID.
    pub secret_id: String,
    /// Whether it is required.
    pub required: bool,
    /// Where it goes.
    pub destination: SecretDestination,
}

/// Where a secret goes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SecretDestination {
    /// An environment variable.
    Environment {
        /// Its name.
        name: String,
    },
    /// A file.
    File {
        /// Its absolute path.
        path: String,
    },
}
