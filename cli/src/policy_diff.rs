//! `svc policy diff A B`: what changed between two policies, field by field
//! ([`manifest_core::diff`]), read from files or from the service (`APP@N`), printed grouped
//! by whom each change reaches.

use std::path::Path;
use std::process::ExitCode;

use manifest_core::diff::{Change, Effect, Kind};
use serde_json::{Value, json};

use crate::args::{OutputFormat, Remote};

/// Nothing changed.
const EXIT_SAME: u8 = 0;
/// Something changed.
const EXIT_CHANGED: u8 = 1;
/// A side could not be read.
const EXIT_USAGE: u8 = 2;

/// Where a side comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Side {
    /// A file (`-`: standard input).
    File(String),
    /// Version `version` of application `app` on the service.
    Version { app: String, version: u64 },
}

impl Side {
    /// A path that exists is a file; else `APP@N` is a version on the service; else a file
    /// (whose reading then says it is missing).
    fn parse(arg: &str) -> Side {
        if arg != "-"
            && !Path::new(arg).exists()
            && let Some((app, n)) = arg.rsplit_once('@')
            && !app.is_empty()
            && !app.contains('/')
            && let Ok(version) = n.parse::<u64>()
        {
            return Side::Version { app: app.to_owned(), version };
        }
        Side::File(arg.to_owned())
    }

    fn label(&self) -> String {
        match self {
            Side::File(path) => path.clone(),
            Side::Version { app, version } => format!("{app}@{version}"),
        }
    }
}

/// A side read: the document compared, and what it is (its `schema`).
struct Read {
    document: Value,
    schema: Option<String>,
}

/// Why `svc policy diff` compared nothing (exit 2): said once, by
/// [`crate::failure::report`], as `svc: ...`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DiffError {
    /// The service's version cannot be had (as `svc app versions` says it; a refusal exits 2).
    #[error(transparent)]
    Remote(#[from] crate::remote::RemoteError),
    /// The service's version view holds no policy.
    #[error("{side}: the service sent no policy")]
    NoPolicy {
        /// `APP@N`.
        side: String,
    },
    /// A file cannot be read (the error names it).
    #[error(transparent)]
    Input(crate::manifest::InputError),
    /// A file is larger than a policy can be.
    #[error("{name} is larger than {} bytes", manifest_core::MAX_INPUT_BYTES)]
    TooLarge {
        /// The file.
        name: String,
    },
    /// A file is not UTF-8.
    #[error("{name} is not UTF-8 text")]
    NotText {
        /// The file.
        name: String,
        /// Where it is not.
        #[source]
        source: std::str::Utf8Error,
    },
    /// A file reads as neither JSON nor YAML.
    #[error("{name}{first} (it does not read as JSON or YAML)")]
    Unparsed {
        /// The file.
        name: String,
        /// `:LINE:COLUMN: message` of its first problem.
        first: String,
    },
    /// A file's document cannot be made JSON.
    #[error("{name}: {source}")]
    NotJson {
        /// The file.
        name: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// Two different kinds of document.
    #[error(
        "{a} is {a_kind} and {b} is {b_kind}: compare like with like (two effective policies: `svc app versions \
         APP --version N --format json`, or APP@N; or two manifests)"
    )]
    Unlike {
        /// The first side.
        a: String,
        /// What it is.
        a_kind: String,
        /// The second side.
        b: String,
        /// What it is.
        b_kind: String,
    },
}

impl crate::failure::Failure for DiffError {
    fn exit_code(&self) -> u8 {
        match self {
            DiffError::Remote(e) => e.exit_code(),
            _ => EXIT_USAGE,
        }
    }

    fn envelope(&self) -> svc_http::ErrorBody {
        match self {
            DiffError::Remote(e) => e.envelope(),
            _ => svc_http::ErrorBody::new("unreadable_policy", self.to_string()),
        }
    }

    fn text(&self) -> String {
        match self {
            DiffError::Remote(e) => e.text(),
            _ => crate::failure::line("svc", self),
        }
    }
}

/// Reads one side: a file's JSON or YAML (a version view's `policy` if it is one), or the
/// service's version.
fn read(side: &Side, remote: &Remote) -> Result<Read, DiffError> {
    let document = match side {
        Side::Version { app, version } => {
            let view = crate::remote::policy_version(app, *version, remote)?;
            view.get("policy").cloned().ok_or_else(|| DiffError::NoPolicy { side: side.label() })?
        }
        Side::File(path) => {
            let (name, bytes) = crate::manifest::read_input(Path::new(path)).map_err(DiffError::Input)?;
            if bytes.len() > manifest_core::MAX_INPUT_BYTES {
                return Err(DiffError::TooLarge { name });
            }
            let text = match std::str::from_utf8(&bytes) {
                Ok(text) => text,
                Err(source) => return Err(DiffError::NotText { name, source }),
            };
            let (root, diagnostics) = match manifest_core::Format::detect(text) {
                manifest_core::Format::Json => manifest_core::parse::json(text),
                manifest_core::Format::Yaml => manifest_core::parse::yaml(text),
            };
            // Read as strictly as a manifest is (a duplicate key is an error, not the last one).
            let error = diagnostics.iter().find(|d| d.severity == manifest_core::Severity::Error);
            let (Some(root), None) = (root, error) else {
                let first = error.or(diagnostics.first()).map_or_else(String::new, |d| {
                    let at = match (d.line, d.column, d.span) {
                        (Some(line), Some(column), _) => Some((line, column)),
                        (_, _, Some(span)) => Some(manifest_core::LineIndex::new(text).position(span.start as usize)),
                        _ => None,
                    };
                    match at {
                        Some((line, column)) => format!(":{line}:{column}: {}", d.message),
                        None => format!(": {}", d.message),
                    }
                });
                return Err(DiffError::Unparsed { name, first });
            };
            let value = match serde_json::to_value(&root) {
                Ok(value) => value,
                Err(source) => return Err(DiffError::NotJson { name, source }),
            };
            // The JSON of `svc app versions APP --version N`: its effective policy.
            match value.get("policy") {
                Some(policy) if value.get("policyVersion").is_some() => policy.clone(),
                _ => value,
            }
        }
    };
    let schema = document.get("schema").and_then(Value::as_str).map(str::to_owned);
    Ok(Read { document, schema })
}

/// `svc policy diff A B`.
pub(crate) fn run(from: &str, to: &str, remote: &Remote) -> Result<ExitCode, DiffError> {
    let (a, b) = (Side::parse(from), Side::parse(to));
    // One side at a time: the first that cannot be read is the one error said.
    let before = read(&a, remote)?;
    let after = read(&b, remote)?;
    if before.schema != after.schema {
        let kind = |s: &Option<String>| s.clone().unwrap_or_else(|| "a document without `schema`".to_owned());
        return Err(DiffError::Unlike {
            a: a.label(),
            a_kind: kind(&before.schema),
            b: b.label(),
            b_kind: kind(&after.schema),
        });
    }
    let changes = manifest_core::diff::diff(&before.document, &after.document);
    match remote.format {
        OutputFormat::Json => {
            let running = changes.iter().filter(|c| c.effect != Effect::NextJobs).count();
            let report = json!({
                "from": a.label(),
                "to": b.label(),
                "changes": changes,
                "summary": {"changes": changes.len(), "runningJobs": running},
            });
            println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
        }
        OutputFormat::Text => print!("{}", text(&a.label(), &b.label(), &changes)),
    }
    Ok(ExitCode::from(if changes.is_empty() { EXIT_SAME } else { EXIT_CHANGED }))
}

/// The text report: a heading, the changes reaching running jobs, then the others.
fn text(a: &str, b: &str, changes: &[Change]) -> String {
    let running: Vec<&Change> = changes.iter().filter(|c| c.effect != Effect::NextJobs).collect();
    let next: Vec<&Change> = changes.iter().filter(|c| c.effect == Effect::NextJobs).collect();
    if changes.is_empty() {
        return format!("{a} -> {b}: no changes\n");
    }
    let mut out = format!(
        "{a} -> {b}: {} change{}, {} reaching the running jobs\n",
        changes.len(),
        if changes.len() == 1 { "" } else { "s" },
        running.len(),
    );
    if !running.is_empty() {
        out += "for the running jobs:\n";
        for c in &running {
            let area = match c.effect {
                Effect::RunningJobs(area) => area.as_str(),
                Effect::NextJobs => "",
            };
            out += &format!("  {area:<9} {}\n", line(c));
        }
    }
    if !next.is_empty() {
        out += "for the jobs launched next (as the update rule rolls them out):\n";
        for c in &next {
            out += &format!("  {:<9} {}\n", "", line(c));
        }
    }
    out
}

/// One change: `~ /pointer: before -> after`, `+ /pointer: value`, `- /pointer: value`, the
/// named entry it is in after the pointer.
fn line(c: &Change) -> String {
    let key = c.key.as_ref().map(|k| format!(" ({k})")).unwrap_or_default();
    match c.kind {
        Kind::Changed => format!(
            "~ {}{key}: {} -> {}",
            c.pointer,
            c.from.as_ref().map(short).unwrap_or_default(),
            c.to.as_ref().map(short).unwrap_or_default()
        ),
        Kind::Added => format!("+ {}{key}: {}", c.pointer, c.to.as_ref().map(short).unwrap_or_default()),
        Kind::Removed => format!("- {}{key}: {}", c.pointer, c.from.as_ref().map(short).unwrap_or_default()),
    }
}

/// A value as compact JSON, at most 80 characters (then `...`).
fn short(v: &Value) -> String {
    let text = v.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_is_a_file_if_it_exists_else_an_applications_version() {
        assert_eq!(Side::parse("shop@3"), Side::Version { app: "shop".into(), version: 3 });
        assert_eq!(Side::parse("policy.json"), Side::File("policy.json".into()));
        assert_eq!(Side::parse("dir/shop@3"), Side::File("dir/shop@3".into()), "a path, not an application");
        assert_eq!(Side::parse("shop@latest"), Side::File("shop@latest".into()));
        assert_eq!(Side::parse("@3"), Side::File("@3".into()));
        let dir = tempfile::tempdir().expect("a scratch directory");
        let file = dir.path().join("shop@3");
        std::fs::write(&file, "{}").expect("write");
        let path = file.to_string_lossy().into_owned();
        assert_eq!(Side::parse(&path), Side::File(path.clone()), "an existing file wins");
    }

    #[test]
    fn long_values_are_cut_on_a_character_boundary() {
        let long = Value::from("é".repeat(100));
        let cut = short(&long);
        assert!(cut.ends_with("...") && cut.chars().count() == 83, "{cut}");
    }
}
