//! Manifest V5 (JSON or YAML): the exact retained authoring contract, its field tables and its
//! rules. What V5 leaves out (public ingress, provider integrations, cohorts, hooks and probes,
//! volumes, placement allow/exclude and spread, other SSH providers, self-custody spend) is
//! refused as unknown fields or closed-union arms.

pub mod access;
pub mod configuration;
pub mod deployment;
pub mod execution;
pub mod metadata;
pub mod observability;
pub mod release;
pub mod runtime;

use serde::{Deserialize, Serialize};

use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::formats::APPLICATION_ID_V5;
use crate::notes::{Note, Notes};
use crate::sections::Sections;
use crate::shape::SCHEMA_HINT;
use crate::shape::pattern_len;
use crate::shape::{
    DefaultValue, ObjectShape, Refused, SERVER_OWNED, Shape, constant, defaulted, int, optional, required,
};
use crate::tree::Node;
use crate::v4::SCHEMA_NAME;

/// Manifest V5, the root object.
pub static MANIFEST: ObjectShape = ObjectShape {
    name: "Manifest V5",
    fields: &[
        SCHEMA_HINT,
        required("schema", constant(SCHEMA_NAME), "`svc.application-manifest`"),
        required("schemaVersion", int(5, 5), "integer 5"),
        required(
            "applicationId",
            pattern_len(&APPLICATION_ID_V5, 1, 63),
            "organization-local slug, 1-63 lowercase letters, digits, hyphens",
        ),
        defaulted(
            "metadata",
            Shape::Object(&metadata::METADATA),
            DefaultValue::EmptyObject,
            "description and labels, authored only",
        ),
        required("release", Shape::Union(&release::RELEASE), "source or pinned"),
        required("runtime", Shape::Union(&runtime::RUNTIME), "JavaScript or native image").noted(Note::Runtime),
        required("execution", Shape::Union(&execution::EXECUTION), "once, continuous or interval")
            .noted(Note::Execution),
        required(
            "deployment",
            Shape::Object(&deployment::DEPLOYMENT),
            "jobs, paid window, placement, lifecycle, spend",
        )
        .noted(Note::Deployment),
        optional("access", Shape::Object(&access::ACCESS), "managed runtime SSH only").noted(Note::Access),
        defaulted(
            "configuration",
            Shape::Object(&configuration::CONFIGURATION),
            DefaultValue::EmptyObject,
            "variables and secrets",
        )
        .noted(Note::Configuration),
        defaulted(
            "observability",
            Shape::Object(&observability::OBSERVABILITY),
            DefaultValue::EmptyObject,
            "managed logging",
        ),
        required("state", Shape::Union(&observability::STATE), "exactly `{mode: off}`"),
        defaulted(
            "debug",
            Shape::Object(&observability::DEBUG),
            DefaultValue::EmptyObject,
            "diagnostic hold, fixtures only",
        ),
    ],
    min_fields: 0,
    refused: &[
        SERVER_OWNED,
        &[Refused {
            name: "applicationUid",
            code: Code::UnknownField,
            message: "unknown field \"applicationUid\": V5 manifests do not carry the server-issued identity; remove it",
        }],
    ],
};

/// A valid Manifest V5 with every default filled in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestV5 {
    /// Editor hint: where the schema is.
    #[serde(rename = "$schema", skip_serializing_if = "Option::is_none")]
    pub schema_hint: Option<String>,
    /// `svc.application-manifest`.
    pub schema: String,
    /// 5.
    pub schema_version: u8,
    /// The application's slug.
    pub application_id: String,
    /// Authored metadata.
    pub metadata: metadata::Metadata,
    /// What runs.
    pub release: release::Release,
    /// How it runs.
    pub runtime: runtime::Runtime,
    /// When it runs.
    pub execution: execution::Execution,
    /// How it is deployed.
    pub deployment: deployment::Deployment,
    /// Managed runtime SSH.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub access: Option<access::Access>,
    /// Variables and secrets.
    pub configuration: configuration::Configuration,
    /// Managed logging.
    pub observability: observability::Observability,
    /// Durable state (always off).
    pub state: observability::State,
    /// Diagnostic hold.
    pub debug: observability::Debug,
}

/// Layer 2 over a document that went through layer 1: each rule reads only the parts it needs,
/// and runs when those passed layer 1 (discriminators and presence are read whatever their
/// siblings' validity), so all independent errors are reported together.
pub(crate) fn semantic(root: &Node<'_>, notes: Notes, out: &mut Vec<Diagnostic>) {
    let sections = Sections::new(root, notes, out);
    // Each node is found where layer 1 noted it, the values read relative to it.
    let deployment = sections.under(Note::Deployment);
    // Only evenly spaced phasing has a rule: the other arm is not read into the model at all
    // (an internally tagged enum buffers the whole object first).
    let phasing = sections.under(Note::Phasing);
    if phasing.tag("/mode") == Some("evenly_spaced")
        && let (Some(jobs), Some(phasing)) = (deployment.read("/jobs", out), phasing.read("", out))
    {
        deployment::check_phasing(jobs, &phasing, out);
    }
    if let Some(execution) = sections.under(Note::Execution).tag("/mode") {
        let spend = sections.under(Note::Spend);
        deployment::check_execution(
            execution,
            sections.under(Note::Renewal).present(""),
            spend.present(""),
            spend.present("/rate"),
            out,
        );
    }
    if sections.under(Note::Access).present("") && sections.under(Note::Runtime).tag("/kind") == Some("javascript") {
        out.push(Diagnostic::error(
            Layer::Semantic,
            Code::AccessRequiresNativeImage,
            "/access",
            "managed runtime SSH is valid only with `runtime.kind: native_image`; remove `access` or use a native image",
        ));
    }
    crate::rules::environment_names(&sections, "environment", out);
}
