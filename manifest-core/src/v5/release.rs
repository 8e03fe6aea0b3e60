//! V5 `release`, tagged by `mode`: `source` (build from exact server-bound code-host evidence;
//! builder repository, ref, workflow and manifest path are server-side authority) or `pinned`
//! (one artifact by digest; CID, encryption mode and kind are resolved evidence).

use serde::{Deserialize, Serialize};

use crate::formats::SHA256_DIGEST;
use crate::shape::{ObjectShape, Shape, UnionShape, arm, object, pattern, required};

static ARTIFACT: ObjectShape =
    object("artifact", &[required("digest", pattern(&SHA256_DIGEST), "`sha256:<64 lowercase hex>`")]);

/// `release`.
pub static RELEASE: UnionShape = UnionShape {
    name: "release",
    tag: "mode",
    arms: &[
        arm("source", &[]),
        arm("pinned", &[required("artifact", Shape::Object(&ARTIFACT), "the artifact digest")]),
    ],
};

/// `release`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Release {
    /// Build from server-bound source evidence.
    Source {},
    /// One artifact.
    Pinned {
        /// The artifact.
        artifact: Artifact,
    },
}

/// A pinned artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Artifact {
    /// `sha256:<hex>`.
    pub digest: String,
}
