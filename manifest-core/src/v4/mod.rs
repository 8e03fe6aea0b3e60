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
use crate::notes::{Note, Notes};
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
        required("deployment", Shape::Object(&deployment::DEPLOYMENT), "schedule and lifecycle required")
            .noted(Note::Deployment),
        defaulted("ingress", Shape::Object(&ingress::INGRESS), DefaultValue::EmptyObject, "default `{}`")
            .noted(Note::Ingress),
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
        )
        .noted(Note::Configuration),
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
pub(crate) fn semantic(root: &Node<'_>, notes: Notes, out: &mut Vec<Diagnostic>) {
    let sections = Sections::new(root, notes, out);
    // Each node is found where layer 1 noted it, the values read relative to it.
    let deployment = sections.under(Note::Deployment);
    let schedule = sections.under(Note::Schedule);
    if let (Some(delay), Some(max)) = (schedule.read("/startDelayMs", out), schedule.read("/maxStartDelayMs", out)) {
        deployment::check_start_delay(delay, max, out);
    }
    // Only a renewal before the scheduled end has a lead to check: the others are not read into
    // the model at all (an internally tagged enum buffers the whole object first).
    let renewal = sections.under(Note::Renewal);
    if renewal.tag("/mode") == Some("before_scheduled_end")
        && let (Some(duration), Some(renewal)) = (schedule.read("/durationMs", out), renewal.read("", out))
    {
        deployment::check_renewal_lead(duration, &renewal, out);
    }

    let placement = sections.under(Note::Groups);
    let groups = placement.items();
    if !groups.is_empty() {
        let group = |i: usize, field: &str| format!("/deployment/placement/groups/{i}/{field}");
        let names: Vec<(usize, String)> = (groups.iter().enumerate())
            .filter_map(|(i, g)| placement.read_node(g.get("name"), || group(i, "name"), out).map(|n| (i, n)))
            .collect();
        let counts: Option<Vec<u64>> = (groups.iter().enumerate())
            .map(|(i, g)| placement.read_node(g.get("count"), || group(i, "count"), out))
            .collect();
        let total = counts.map(|c| c.iter().fold(0u64, |sum, n| sum.saturating_add(*n)));
        deployment::check_groups(&names, total, deployment.read("/parallelism", out), out);
    }

    let ingress = sections.under(Note::Ingress);
    for (rel, pointer) in [("/http/port", "/ingress/http/port"), ("/ssh/port", "/ingress/ssh/port")] {
        if let Some(port) = ingress.read(rel, out) {
            ingress::check_port(pointer, port, out);
        }
    }
    crate::rules::environment_names(&sections, "env", out);
}
