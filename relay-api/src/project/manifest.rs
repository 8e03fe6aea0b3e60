//! The Manifest V5 a project publishes: the file its `manifest` names, checked (layers 1-2
//! and "a long-running Node.js job"), or one derived from the project's fields. Ingress is
//! absent from V5 (SPEC.md: public ingress is left out of V5); the relay carries it.

use serde_json::{Value, json};

use manifest_core::Diagnostic;

use super::model::{Project, Unsupported};

/// The paid window of one job of a derived manifest; continuous execution renews it.
pub const DERIVED_WINDOW: &str = "1d";
/// The window `spend.rate` of a derived manifest is expressed over (V5's default).
pub const DERIVED_RATE_WINDOW: &str = "30d";

/// Why no Manifest V5 could be given.
#[derive(Debug, thiserror::Error)]
pub enum ManifestV5Error {
    /// The project asks for what the add-on does not support; nothing is derived for it.
    #[error("the project uses what the ingress add-on does not support: {}", list(.0))]
    Unsupported(Vec<Unsupported>),
    /// `manifest` names a file, and its text was not given.
    #[error("the project names the manifest file \"{path}\"; read it and pass its text")]
    NotLoaded {
        /// The file the project names.
        path: String,
    },
    /// A text was given, and the project names no manifest.
    #[error("a manifest text was given, but the project names no `manifest` file (it derives one); pass none")]
    NotNamed,
    /// The named manifest fails validation layers 1-2.
    #[error("the manifest file \"{path}\" is invalid ({} problems; run `svc manifest validate --file {path}`)", .diagnostics.len())]
    Invalid {
        /// The file.
        path: String,
        /// Its errors.
        diagnostics: Vec<Diagnostic>,
    },
    /// The named manifest is valid but not a long-running Node.js job in Manifest V5.
    #[error(
        "the manifest file \"{path}\" is not a long-running Node.js job in Manifest V5: {pointer} is {found}; {expected}"
    )]
    NotNodeWebJob {
        /// The file.
        path: String,
        /// The field.
        pointer: &'static str,
        /// What it holds.
        found: String,
        /// What the add-on needs.
        expected: &'static str,
    },
    /// The derived manifest failed validation: a bug in the derivation, never the author's.
    #[error("internal error: the manifest derived from the project is invalid ({}); please report this", first(.0))]
    Derived(Vec<Diagnostic>),
}

fn list(unsupported: &[Unsupported]) -> String {
    unsupported.iter().map(|u| format!("{} ({})", u.as_str(), u.pointer())).collect::<Vec<_>>().join(", ")
}

fn first(diagnostics: &[Diagnostic]) -> String {
    diagnostics.first().map(|d| format!("{} {}: {}", d.pointer, d.code.as_str(), d.message)).unwrap_or_default()
}

/// What a named manifest must say, pointer by pointer, for the add-on to run it.
const NODE_WEB_JOB: &[(&str, &str, &str)] = &[
    ("/schemaVersion", "5", "the ingress add-on publishes Manifest V5 (`schemaVersion: 5`)"),
    ("/runtime/kind", "\"javascript\"", "the add-on runs Node.js only (`runtime.kind: javascript`)"),
    ("/runtime/engine", "\"nodejs\"", "the add-on runs Node.js only (`runtime.engine: nodejs`)"),
    ("/execution/mode", "\"continuous\"", "a web job runs until stopped (`execution.mode: continuous`)"),
];

impl Project {
    /// The Manifest V5 to publish, as JSON. When `manifest` names a file, `loaded` is its
    /// text (JSON or YAML): it must pass `manifest_core::validate` and be a long-running
    /// Node.js job in V5; the document is returned as authored. Otherwise `loaded` is `None`
    /// and a minimal manifest is derived: the project's name as `applicationId`, a source
    /// release, Node.js running `app.entrypoint`, continuous execution in one-day windows,
    /// `spend.ceilingMicros` as the per-job and rate ceiling, `PORT` and `app.env` as literal
    /// variables, each `app.secrets` name as a secret of the same ID and environment name,
    /// managed logs on. A project with unsupported features gets no manifest.
    pub fn manifest_v5(&self, loaded: Option<&str>) -> Result<Value, ManifestV5Error> {
        let unsupported = self.unsupported();
        if !unsupported.is_empty() {
            return Err(ManifestV5Error::Unsupported(unsupported));
        }
        match (&self.manifest, loaded) {
            (Some(path), Some(text)) => named(path, text),
            (Some(path), None) => Err(ManifestV5Error::NotLoaded { path: path.clone() }),
            (None, Some(_)) => Err(ManifestV5Error::NotNamed),
            (None, None) => self.derived(),
        }
    }

    fn derived(&self) -> Result<Value, ManifestV5Error> {
        let ceiling = self.spend.ceiling_micros.to_string();
        let variables: Vec<Value> =
            std::iter::once(json!({"source": "literal", "name": "PORT", "value": self.app.port.to_string()}))
                .chain(
                    self.app.env.iter().map(|(name, value)| json!({"source": "literal", "name": name, "value": value})),
                )
                .collect();
        let secrets: Vec<Value> = self
            .app
            .secrets
            .keys()
            .map(|name| json!({"secretId": name, "destination": {"kind": "environment", "name": name}}))
            .collect();
        let manifest = json!({
            "schema": "svc.application-manifest",
            "schemaVersion": 5,
            "applicationId": self.name,
            "metadata": {
                "description": format!("Derived from the ingress project \"{}\": a long-running Node.js web job.", self.name),
                "labels": ["ingress"],
            },
            "release": {"mode": "source"},
            "runtime": {"kind": "javascript", "engine": "nodejs", "entrypoint": {"file": self.app.entrypoint}},
            "execution": {"mode": "continuous"},
            "deployment": {
                "jobs": 1,
                "schedule": {"duration": DERIVED_WINDOW},
                "spend": {
                    "unit": "service_credit_micros",
                    "perJob": ceiling,
                    "rate": {"amount": ceiling, "window": DERIVED_RATE_WINDOW},
                },
            },
            "configuration": {"variables": variables, "secrets": secrets},
            "observability": {"logs": {"enabled": true}},
            "state": {"mode": "off"},
        });
        // Checked like any manifest, so a derivation bug can never publish an invalid one.
        let text = manifest.to_string();
        let report = manifest_core::validate(text.as_bytes());
        if !report.is_valid() {
            return Err(ManifestV5Error::Derived(report.diagnostics));
        }
        Ok(manifest)
    }
}

fn named(path: &str, text: &str) -> Result<Value, ManifestV5Error> {
    let report = manifest_core::validate(text.as_bytes());
    let Some(document) = report.document.as_ref().filter(|_| report.is_valid()) else {
        let diagnostics = report.diagnostics.into_iter().filter(Diagnostic::is_error).collect();
        return Err(ManifestV5Error::Invalid { path: path.to_owned(), diagnostics });
    };
    for &(pointer, expected, why) in NODE_WEB_JOB {
        let found = document.resolve(pointer);
        let found =
            if found.complete { serde_json::to_string(found.node).unwrap_or_default() } else { "absent".to_owned() };
        if found != expected {
            return Err(ManifestV5Error::NotNodeWebJob { path: path.to_owned(), pointer, found, expected: why });
        }
    }
    // As authored (defaults left out), so its authored digest is the file's. A tree read
    // from JSON or YAML always has a JSON form; `Null` is never reached.
    Ok(serde_json::to_value(manifest_core::Authored(document)).unwrap_or(Value::Null))
}
