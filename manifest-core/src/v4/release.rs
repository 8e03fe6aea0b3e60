//! V4 `release`, tagged by `mode`: a build release (release-gated in v1; the CID and digest are
//! resolved from an accepted artifact version, so none is authored) or a pinned release of one
//! immutable artifact (curated first-party versions; no builder authority or provenance).

use serde::{Deserialize, Serialize};

use crate::diagnostic::Code;
use crate::formats::{GIT_REF, IPFS_CID, REPOSITORY, SAFE_RELATIVE_PATH, SHA256_DIGEST, WORKFLOW_REF};
use crate::shape::{
    Arm, ArrayShape, ObjectShape, Refused, Shape, UnionShape, arm, constant, object, one_of, pattern, required,
};

const NO_CID_IN_BUILD: &str = "a build release must not carry a CID or digest: they are resolved from an accepted artifact version; use `mode: pinned` to name an artifact";

/// `encryption` of an `ipfs_bundle`.
static ENCRYPTION: ObjectShape = object(
    "encryption",
    &[required(
        "mode",
        one_of(&["none", "aes256_gcm"]),
        "`none` or `aes256_gcm`; the reviewed reusable build action supports only `none`",
    )],
);

static ALLOWED_REFS: ArrayShape = ArrayShape { items: pattern(&GIT_REF), min_items: 1, max_items: None, unique: true };

/// `builder` of a build release.
static BUILDER: ObjectShape = object(
    "builder",
    &[
        required("kind", constant("codehost"), "the single code-hosting provider value"),
        required("repository", pattern(&REPOSITORY), "form `owner/repository`"),
        required("allowedRefs", Shape::Array(&ALLOWED_REFS), "non-empty, no duplicates (`refs/heads/<branch>`)"),
        required(
            "workflowRef",
            pattern(&WORKFLOW_REF),
            "exact workflow reference `owner/repository/<workflow_path>@<ref>`",
        ),
        required("manifestPath", pattern(&SAFE_RELATIVE_PATH), "safe repository-relative path"),
    ],
);

/// `artifact` of a build release, tagged by `kind`.
static BUILD_ARTIFACT: UnionShape = UnionShape {
    name: "build artifact",
    tag: "kind",
    arms: &[
        Arm {
            value: "ipfs_bundle",
            object: ObjectShape {
                name: "ipfs_bundle",
                fields: &[required("encryption", Shape::Object(&ENCRYPTION), "explicit `none` or `aes256_gcm`")],
                min_fields: 0,
                refused: &[&[
                    Refused { name: "cid", code: Code::ForeignArmField, message: NO_CID_IN_BUILD },
                    Refused { name: "digest", code: Code::ForeignArmField, message: NO_CID_IN_BUILD },
                ]],
            },
        },
        Arm {
            value: "runtime_image",
            object: ObjectShape {
                name: "runtime_image",
                fields: &[],
                min_fields: 0,
                refused: &[&[
                    Refused { name: "imageDigest", code: Code::ForeignArmField, message: NO_CID_IN_BUILD },
                    Refused { name: "bootstrapCid", code: Code::ForeignArmField, message: NO_CID_IN_BUILD },
                    Refused { name: "bootstrapDigest", code: Code::ForeignArmField, message: NO_CID_IN_BUILD },
                ]],
            },
        },
    ],
};

/// `artifact` of a pinned release, tagged by `kind`.
pub(crate) static PINNED_ARTIFACT: UnionShape = UnionShape {
    name: "pinned artifact",
    tag: "kind",
    arms: &[
        arm(
            "ipfs_bundle",
            &[
                required("cid", pattern(&IPFS_CID), "canonical `ipfs://<cid>`"),
                required("digest", pattern(&SHA256_DIGEST), "`sha256:<hex>`"),
                required("encryption", Shape::Object(&ENCRYPTION), "`none` or `aes256_gcm`"),
            ],
        ),
        arm(
            "runtime_image",
            &[
                required("imageDigest", pattern(&SHA256_DIGEST), "immutable image digest"),
                required("bootstrapCid", pattern(&IPFS_CID), "canonical `ipfs://<cid>`"),
                required("bootstrapDigest", pattern(&SHA256_DIGEST), "`sha256:<hex>`"),
            ],
        ),
    ],
};

/// `release`.
pub static RELEASE: UnionShape = UnionShape {
    name: "release",
    tag: "mode",
    arms: &[
        Arm {
            value: "build",
            object: ObjectShape {
                name: "build",
                fields: &[
                    required(
                        "artifact",
                        Shape::Union(&BUILD_ARTIFACT),
                        "`ipfs_bundle` or `runtime_image`, without CID",
                    ),
                    required("builder", Shape::Object(&BUILDER), "builder authority"),
                ],
                min_fields: 0,
                refused: &[&[
                    Refused { name: "cid", code: Code::ForeignArmField, message: NO_CID_IN_BUILD },
                    Refused { name: "digest", code: Code::ForeignArmField, message: NO_CID_IN_BUILD },
                ]],
            },
        },
        arm("pinned", &[required("artifact", Shape::Union(&PINNED_ARTIFACT), "one immutable artifact")]),
    ],
};

/// `release`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Release {
    /// Build from source under builder authority.
    Build {
        /// What the build produces.
        artifact: BuildArtifact,
        /// Who may build it, and from what.
        builder: Builder,
    },
    /// One immutable artifact.
    Pinned {
        /// The artifact.
        artifact: PinnedArtifact,
    },
}

/// Encryption of an IPFS bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Encryption {
    /// The mode.
    pub mode: EncryptionMode,
}

/// Encryption modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EncryptionMode {
    /// Not encrypted.
    None,
    /// AES-256-GCM.
    Aes256Gcm,
}

/// `artifact` of a build release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BuildArtifact {
    /// An IPFS bundle.
    IpfsBundle {
        /// Its encryption.
        encryption: Encryption,
    },
    /// A runtime image (internal).
    RuntimeImage {},
}

/// `builder` of a build release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Builder {
    /// The code-hosting provider (`codehost`).
    pub kind: String,
    /// `owner/repository`.
    pub repository: String,
    /// Refs builds may come from.
    pub allowed_refs: Vec<String>,
    /// The exact workflow reference.
    pub workflow_ref: String,
    /// Where the manifest lives in the repository.
    pub manifest_path: String,
}

/// `artifact` of a pinned release.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PinnedArtifact {
    /// An IPFS bundle.
    IpfsBundle {
        /// `ipfs://<cid>`.
        cid: String,
        /// `sha256:<hex>`.
        digest: String,
        /// Its encryption.
        encryption: Encryption,
    },
    /// A runtime image (internal): binds the image and the bootstrap identity.
    #[serde(rename_all = "camelCase")]
    RuntimeImage {
        /// The immutable image digest.
        image_digest: String,
        /// The bootstrap bundle.
        bootstrap_cid: String,
        /// The bootstrap bundle's digest.
        bootstrap_digest: String,
    },
}
