//! The ingress add-on's project config file, `<name>.json` (`ingress.json` by convention):
//! SPEC.md "Ingress add-on project" names the file and nothing more; `docs/ingress-project.md`
//! documents every field.
//!
//! It is read as strictly as a manifest, by the manifests' own machinery
//! ([`manifest_core::document`]): duplicate keys, unknown fields (with near-miss
//! suggestions), types, closed sets, bounds and formats against [`PROJECT`], then the
//! cross-field rules on environment names, every problem in one pass with its JSON pointer,
//! line and column. [`schema`] is generated from the same table.
//!
//! ```
//! let project = relay_api::project::read(r#"{
//!   "version": 1, "name": "shop", "runtime": "node",
//!   "app": {"entrypoint": "server.js"}, "spend": {"ceilingMicros": 5000000}
//! }"#).expect("valid");
//! assert_eq!(project.app.port, 8080);
//! assert!(project.unsupported().is_empty());
//!
//! let errors = relay_api::project::read(r#"{"version": 1, "nmae": "shop"}"#).unwrap_err();
//! let found: Vec<_> = errors.diagnostics.iter().map(|d| (d.pointer.as_str(), d.code.as_str())).collect();
//! assert_eq!(found, [
//!     // A missing field is placed at the start of the object it belongs in.
//!     ("/name", "missing_required_field"),
//!     ("/runtime", "missing_required_field"),
//!     ("/app", "missing_required_field"),
//!     ("/spend", "missing_required_field"),
//!     ("/nmae", "unknown_field"),
//! ]);
//! assert!(errors.diagnostics[4].message.ends_with("did you mean \"name\"?"));
//! ```

mod formats;
mod manifest;
mod model;
mod rules;
mod table;

use std::fmt;
use std::sync::OnceLock;

use manifest_core::{Code, Diagnostic, Layer};

pub use manifest::{DERIVED_RATE_WINDOW, DERIVED_WINDOW, ManifestV5Error};
pub use model::{Access, AccessRate, App, Dns, Kind, Project, Runtime, SecretSource, Spend, Tls, Unsupported};
pub use rules::{PORT, RESERVED_PREFIX};
pub use table::{
    DEFAULT_HEALTH_PATH, DEFAULT_PORT, KINDS, MAX_ALLOW_CLIENTS, MAX_ENV, MAX_FUND_PERIODS, MAX_HOSTNAMES,
    MAX_RATE_BURST, MAX_RATE_PER_SECOND, MAX_SECRETS, PROJECT, RUNTIMES, TLS_MODES,
};

/// The project file's conventional name.
pub const FILE_NAME: &str = "ingress.json";

/// The schema's `$id`.
pub const SCHEMA_ID: &str = "urn:svc:schema:ingress-project:1";

/// Every problem of a project file that is not valid, in document order.
#[derive(Debug, Clone, thiserror::Error)]
pub struct ProjectErrors {
    /// The problems: pointer, code, message, line and column.
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for ProjectErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The truncation entry (past 1,000 problems) is listed, not counted as a problem.
        let truncated = self.diagnostics.iter().any(|d| d.code == Code::DiagnosticsTruncated);
        let errors = self.diagnostics.iter().filter(|d| d.is_error() && d.code != Code::DiagnosticsTruncated).count();
        let more = if truncated { " shown, more not" } else { "" };
        write!(f, "the project file is invalid ({errors} {}{more}):", if errors == 1 { "error" } else { "errors" })?;
        for d in &self.diagnostics {
            let at = match (d.line, d.column) {
                (Some(line), Some(column)) => format!("{line}:{column} "),
                _ => String::new(),
            };
            let pointer = if d.pointer.is_empty() { "(document)" } else { &d.pointer };
            write!(f, "\n  {at}{pointer}: {} [{}]", d.message, d.code.as_str())?;
        }
        Ok(())
    }
}

/// Checks a project file's text (layers 1 and 2) without reading the model: every problem,
/// and the checked tree. What an editor shows as the author types (`svc lsp`).
pub fn check(text: &str) -> manifest_core::document::DocumentReport<'_> {
    manifest_core::document::check_json(text, &PROJECT, rules::check)
}

/// Reads a project file: the whole text, checked strictly, every problem reported at once.
/// Unsupported values (other runtimes, kinds, ...) are well formed and read; ask
/// [`Project::unsupported`].
pub fn read(text: &str) -> Result<Project, ProjectErrors> {
    let report = check(text);
    if !report.is_valid() {
        return Err(ProjectErrors { diagnostics: report.diagnostics });
    }
    report.model().map_err(|e| ProjectErrors {
        diagnostics: vec![Diagnostic::error(
            Layer::Schema,
            Code::InternalError,
            "",
            format!("internal error: the checked project does not fit the model ({e}); please report this"),
        )],
    })
}

/// The project file's JSON Schema (draft 2020-12), generated from [`PROJECT`]: fixed bytes
/// for a build. `svc ingress schema` prints it. Cross-field rules on environment names and
/// the `.localhost` refusal of hostnames are the validator's alone.
pub fn schema() -> &'static str {
    &generated().0
}

/// `sha256:` of [`schema`]'s bytes, to cache it by.
pub fn schema_digest() -> &'static str {
    &generated().1
}

fn generated() -> &'static (String, String) {
    static CELL: OnceLock<(String, String)> = OnceLock::new();
    CELL.get_or_init(|| {
        let bytes = manifest_core::document::schema_for(&PROJECT, SCHEMA_ID);
        let digest = manifest_core::sha256(bytes.as_bytes());
        (bytes, digest)
    })
}

#[cfg(test)]
mod tests;
