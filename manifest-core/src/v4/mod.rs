//! Manifest V4 (JSON only): the authored document, its field tables and its rules.
//!
//! All durations are milliseconds unless a field says otherwise.

pub mod configuration;
pub mod deployment;
pub mod ingress;
pub mod lifecycle;
pub mod metadata;
pub mod observability;
pub mod placement;
pub mod release;
pub mod runtime;

use serde::{Deserialize, Serialize};

use crate::diagnostic::Diagnostic;
use crate::formats::APPLICATION_ID_V4;
use crate::sections::Sections;
use crate::shape::SCHEMA_HINT;
use crate::shape::pattern_len;
use crate::shape::{
    DefaultValue, NON_EMPTY, ObjectShape, SERVER_OWNED, Shape, constant, defaulted, int, optional, required,
};
use crate::tree::Node;

/// The authored schema name (both versions).
pub const SCHEMA_NAME: &str = "svc.application-manifest";

/// Manifest V4, the root object.
pub static MANIFEST: ObjectShape = ObjectShape {
    name: "Manifest V4",
    fields: &[
        SCHEMA_HINT,
        required("schema", constant(SCHEMA_NAME), "exactly `svc.application-manifest`"),
        required("schemaVersion", int(4, 4), "unsigned integer 4"),
        required(
            "applicationId",
            pattern_len(&APPLICATION_ID_V4, 1, 64),
            "1-64 chars of lowercase letters, digits, `.`, `_`, `-`; begins with a letter or digit",
        ),
        optional("applicationUid", NON_EMPTY, "non-empty server-issued immutable identity; must match the target"),
        defaulted("metadata", Shape::Object(&metadata::METADATA), DefaultValue::EmptyObject, "default `{}`"),
        required("release", Shape::Union(&release::RELEASE), "exactly one build arm or pinned arm"),
        defaulted(
            "runtime",
            Shape::Object(&runtime::RUNTIME),
            DefaultValue::EmptyObject,
            "runtime requirements and bootstrap defaults",
        ),
        required("deployment", Shape::Object(&deployment::DEPLOYMENT), "schedule and lifecycle required"),
        defaulted("ingress", Shape::Object(&ingress::INGRESS), DefaultValue::EmptyObject, "default `{}`"),
        defaulted(
            "observability",
            Shape::Object(&observability::OBSERVABILITY),
            DefaultValue::EmptyObject,
            "logs off, signed diagnostics on",
        ),
        defaulted(
            "configuration",
            Shape::Object(&configuration::CONFIGURATION),
            DefaultValue::EmptyObject,
            "variables and secrets",
        ),
    ],
    min_fields: 0,
    refused: &[SERVER_OWNED],
};

/// A valid Manifest V4 with every default filled in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestV4 {
    /// Editor hint: where the schema is.
    #[serde(rename = "$schema", skip_serializing_if = "Option::is_none")]
    pub schema_hint: Option<String>,
    /// `svc.application-manifest`.
    pub schema: String,
    /// 4.
    pub schema_version: u8,
    /// The application's ID.
    pub application_id: String,
    /// The server-issued identity, if given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub application_uid: Option<String>,
    /// Authored metadata.
    pub metadata: metadata::Metadata,
    /// What runs.
    pub release: release::Release,
    /// Runtime requirements.
    pub runtime: runtime::Runtime,
    /// How it is deployed.
    pub deployment: deployment::Deployment,
    /// Ingress requests.
    pub ingress: ingress::Ingress,
    /// Logs and diagnostics.
    pub observability: observability::Observability,
    /// Variables and secrets.
    pub configuration: configuration::Configuration,
}

/// Layer 2 over a document that went through layer 1: each rule reads only the parts it needs,
/// and runs when those passed layer 1, so all independent errors are reported together.
pub(crate) fn semantic(root: &Node<'_>, out: &mut Vec<Diagnostic>) {
    let sections = Sections::new(root, out);
    if let (Some(delay), Some(max)) = (
        sections.read("/deployment/schedule/startDelayMs", out),
        sections.read("/deployment/schedule/maxStartDelayMs", out),
    ) {
        deployment::check_start_delay(delay, max, out);
    }
    // Only a renewal before the scheduled end has a lead to check: the others are not read into
    // the model at all (an internally tagged enum buffers the whole object first).
    const RENEWAL: &str = "/deployment/lifecycle/renewal";
    if sections.tag("/deployment/lifecycle/renewal/mode") == Some("before_scheduled_end")
        && let (Some(duration), Some(renewal)) =
            (sections.read("/deployment/schedule/durationMs", out), sections.read(RENEWAL, out))
    {
        deployment::check_renewal_lead(duration, &renewal, out);
    }

    let groups = sections.len("/deployment/placement/groups");
    if groups > 0 {
        let group = |i: usize, field: &str| format!("/deployment/placement/groups/{i}/{field}");
        let names: Vec<(usize, String)> =
            (0..groups).filter_map(|i| sections.read(&group(i, "name"), out).map(|n| (i, n))).collect();
        let counts: Option<Vec<u64>> = (0..groups).map(|i| sections.read(&group(i, "count"), out)).collect();
        let total = counts.map(|c| c.iter().fold(0u64, |sum, n| sum.saturating_add(*n)));
        deployment::check_groups(&names, total, sections.read("/deployment/parallelism", out), out);
    }

    for pointer in ["/ingress/http/port", "/ingress/ssh/port"] {
        if let Some(port) = sections.read(pointer, out) {
            ingress::check_port(pointer, port, out);
        }
    }
    crate::rules::environment_names(&sections, "env", out);
}
