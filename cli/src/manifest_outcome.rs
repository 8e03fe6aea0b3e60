//! What `svc manifest validate` found for each file, and how many came out how: the one
//! record the run (`manifests.rs`) fills and every report format prints, its own CI
//! formats (`ci_formats.rs`) included.

use std::time::Duration;

use manifest_core::Diagnostic;
use serde_json::Value;

/// What became of one file.
pub(crate) enum Outcome {
    /// Validated: whether it is valid, its diagnostics (kept for the CI formats only), and
    /// its text or JSON report (the one the format prints).
    Checked { valid: bool, diagnostics: Vec<Diagnostic>, text: String, json: Value },
    /// It could not be read: why.
    Unreadable(String),
}

/// How many files came out how.
pub(crate) struct Summary {
    pub(crate) files: usize,
    pub(crate) valid: usize,
    pub(crate) invalid: usize,
    pub(crate) unreadable: usize,
    pub(crate) elapsed: Duration,
}

impl Summary {
    pub(crate) fn count(&mut self, outcome: &Outcome) {
        self.files += 1;
        match outcome {
            Outcome::Checked { valid: true, .. } => self.valid += 1,
            Outcome::Checked { valid: false, .. } => self.invalid += 1,
            Outcome::Unreadable(_) => self.unreadable += 1,
        }
    }

    /// `3 files checked in 12 ms: 2 valid, 1 invalid, 0 unreadable`.
    pub(crate) fn line(&self) -> String {
        format!(
            "{} checked in {} ms: {} valid, {} invalid, {} unreadable",
            plural(self.files, "file"),
            self.elapsed.as_millis(),
            self.valid,
            self.invalid,
            self.unreadable
        )
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 { format!("1 {what}") } else { format!("{n} {what}s") }
}
