//! V5 `runtime`, tagged by `kind`: `javascript` (an entry file in the artifact) or
//! `native_image` (a catalog image resolved to an exact digest). No shell string or inline
//! program is parsed.

use serde::{Deserialize, Serialize};

use crate::formats::{ENTRYPOINT_FILE, IMAGE_VERSION};
use crate::shape::{
    ArrayShape, DefaultValue, NON_EMPTY, ObjectShape, STRING, Shape, UnionShape, arm, defaulted, object, one_of,
    pattern, required,
};
use crate::v4::runtime::{ENGINES, Engine};

/// Default image catalog.
pub const DEFAULT_CATALOG: &str = "svc-runtime-images";
/// Most native entrypoint arguments.
pub const MAX_ARGS: usize = 64;

static JS_ENTRYPOINT: ObjectShape = object(
    "javascript entrypoint",
    &[required("file", pattern(&ENTRYPOINT_FILE), "relative to the artifact root; no leading `/`, no `..` segment")],
);

static IMAGE: ObjectShape = object(
    "image",
    &[
        defaulted(
            "catalog",
            NON_EMPTY,
            DefaultValue::Str(DEFAULT_CATALOG),
            "default `svc-runtime-images`; checked server-side",
        ),
        required("name", NON_EMPTY, "1-63 lowercase letters, digits, hyphens; checked server-side"),
        required("version", pattern(&IMAGE_VERSION), "one- to three-part numeric floor, resolved to an exact digest"),
    ],
);

static ARGS: ArrayShape = ArrayShape { items: STRING, min_items: 0, max_items: Some(MAX_ARGS), unique: false };

static NATIVE_ENTRYPOINT: ObjectShape = object(
    "native entrypoint",
    &[
        required("executable", NON_EMPTY, "the executable"),
        defaulted("args", Shape::Array(&ARGS), DefaultValue::EmptyArray, "at most 64 strings"),
    ],
);

/// `runtime`.
pub static RUNTIME: UnionShape = UnionShape {
    name: "runtime",
    tag: "kind",
    arms: &[
        arm(
            "javascript",
            &[
                defaulted("engine", one_of(ENGINES), DefaultValue::Str("nodejs"), "default `nodejs`"),
                required("entrypoint", Shape::Object(&JS_ENTRYPOINT), "`entrypoint.file`"),
            ],
        ),
        arm(
            "native_image",
            &[
                required("image", Shape::Object(&IMAGE), "catalog, name and version"),
                required("entrypoint", Shape::Object(&NATIVE_ENTRYPOINT), "executable and args"),
            ],
        ),
    ],
};

/// `runtime`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Runtime {
    /// A JavaScript program.
    Javascript {
        /// The engine.
        engine: Engine,
        /// The entry file.
        entrypoint: JsEntrypoint,
    },
    /// A native catalog image.
    NativeImage {
        /// The image.
        image: Image,
        /// The executable.
        entrypoint: NativeEntrypoint,
    },
}

/// javascript `entrypoint`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsEntrypoint {
    /// Path relative to the artifact root.
    pub file: String,
}

/// native_image `image`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Image {
    /// Catalog.
    pub catalog: String,
    /// Image name.
    pub name: String,
    /// Version floor.
    pub version: String,
}

/// native_image `entrypoint`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NativeEntrypoint {
    /// The executable.
    pub executable: String,
    /// Its arguments.
    pub args: Vec<String>,
}
