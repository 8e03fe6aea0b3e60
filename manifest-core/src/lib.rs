//! Manifest V4 and V5 for the service: reading JSON and YAML strictly, validation layers 1
//! (parse and strict schema) and 2 (semantic and cross-field), the authored digest, and the
//! typed, fully defaulted model that later layers (effective policy, publication) consume.
//!
//! Every field, bound, closed union and default is described once, in the shape tables of the
//! section modules ([`v4`], [`v5`]); layer 1 walks documents against them.
//!
//! ```
//! let report = manifest_core::validate(br#"{"schema": "svc.application-manifest", "schemaVersion": 6}"#);
//! assert!(!report.is_valid());
//! assert_eq!(report.diagnostics[0].code.as_str(), "unsupported_schema_version");
//! assert_eq!(report.diagnostics[0].pointer, "/schemaVersion");
//! ```

#![forbid(unsafe_code)]

mod bounded;
mod check;
mod de;
mod diagnostic;
mod digest;

mod json;
mod notes;
/// Amounts as people read them (`svc manifest migrate`'s notes).
use svc_money as money;
mod policy;
mod policy_v5;
mod render;
mod rules;
mod schema;
mod sections;
mod source;
mod tree;
mod validate;
mod yaml;

#[cfg(feature = "executions")]
pub mod convergence;
pub mod diff;
pub mod document;
pub mod effective;
pub mod emit;
pub mod formats;
pub mod invariants;
pub mod migrate;
pub mod names;
#[cfg(feature = "executions")]
pub mod plan;
pub mod projection;
#[cfg(feature = "service")]
pub mod service;
pub mod shape;
pub mod v4;
pub mod v5;

pub use bounded::MAX_DIAGNOSTICS;
pub use de::ModelError;
pub use diagnostic::{Code, Diagnostic, Layer, Severity};
pub use digest::{authored_digest, canonical_bytes, canonical_digest, sha256};
pub use policy::{ArtifactVersion, POLICY, POLICY_SCHEMA_NAME, PolicyError, PolicyV4, ServerFacts};
pub use policy_v5::{
    EffectiveAccess, EffectiveDeployment, EffectiveLifecycle, EffectivePlacement, EffectiveRuntime, EffectiveSelection,
    EncryptionMode, PolicyV5, PolicyV5Error, ResolvedArtifact, ResolvedImage, V5Facts,
};
pub use render::{plural, render_json, render_text};
pub use schema::{DIALECT, SchemaKind};
pub use source::{Format, LineIndex, MAX_DEPTH, MAX_INPUT_BYTES};
pub use tree::{Authored, Member, Node, Number, Span, Text, Value};
pub use validate::{Manifest, ManifestError, Report, validate};

/// Parser entry points, exposed for fuzzing and benchmarks. Each never panics.
pub mod parse {
    use crate::diagnostic::Diagnostic;
    use crate::tree::Node;

    /// Reads JSON text into a tree (`None` after a fatal error) and its diagnostics (at most
    /// [`crate::MAX_DIAGNOSTICS`], then one `diagnostics_truncated` entry).
    pub fn json(text: &str) -> (Option<Node<'_>>, Vec<Diagnostic>) {
        let p = crate::json::parse(text);
        (p.root, p.diagnostics.into_vec())
    }

    /// Reads YAML text into a tree (`None` after a fatal error) and its diagnostics (at most
    /// [`crate::MAX_DIAGNOSTICS`], then one `diagnostics_truncated` entry).
    pub fn yaml(text: &str) -> (Option<Node<'_>>, Vec<Diagnostic>) {
        let p = crate::yaml::parse(text);
        (p.root, p.diagnostics.into_vec())
    }
}
