//! `svc policy diff A B`: what changed between two policies, field by field
//! ([`manifest_core::diff`]), read from files or from the service (`APP@N`), printed grouped
//! by whom each change reaches. Each side is compared as what takes effect: a policy as it
//! is (`APP@N` or a saved version), a manifest as its effective policy
//! ([`manifest_core::effective`]), durations and sizes by value; `--as-written` compares the
//! documents as they are.

use std::path::Path;
use std::process::ExitCode;

use manifest_core::diff::{Change, Effect, Kind};
use manifest_core::plural;
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

/// A side read: the document compared, and what it is (its `schema` and `schemaVersion`).
struct Read {
    document: Value,
    schema: Option<String>,
    version: Option<u64>,
}

impl Read {
    /// What it is, as people call it (`Manifest V4`, `Policy V5`).
    fn kind(&self) -> String {
        let version = self.version.map(|v| format!(" V{v}")).unwrap_or_default();
        match self.schema.as_deref() {
            Some(manifest_core::v4::SCHEMA_NAME) => format!("Manifest{version}"),
            Some(manifest_core::POLICY_SCHEMA_NAME) => format!("Policy{version}"),
            Some(other) => format!("{other}{version}"),
            None => "a document without `schema`".to_owned(),
        }
    }

    fn is_manifest(&self) -> bool {
        self.schema.as_deref() == Some(manifest_core::v4::SCHEMA_NAME)
    }
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
    #[error("{a} is {a_kind} and {b} is {b_kind}: {hint}")]
    Unlike {
        /// The first side.
        a: String,
        /// What it is.
        a_kind: String,
        /// The second side.
        b: String,
        /// What it is.
        b_kind: String,
        /// How to compare like with like.
        hint: String,
    },
    /// A manifest that does not validate has no effective policy.
    #[error(
        "{name} is not a valid manifest, so it has no effective policy ({errors}; `svc manifest validate --file \
         {name}` lists them); compare the text with --as-written"
    )]
    Invalid {
        /// The file.
        name: String,
        /// How many errors.
        errors: String,
    },
    /// A document that is neither a manifest nor a policy.
    #[error("{name} is {kind}, not a manifest or a policy: compare the text with --as-written")]
    Unknown {
        /// The file.
        name: String,
        /// What it is.
        kind: String,
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
    let version = document.get("schemaVersion").and_then(Value::as_u64);
    Ok(Read { document, schema, version })
}

/// How to compare like with like, for two kinds of document.
fn like_with_like(a: (&str, &Read), b: (&str, &Read)) -> String {
    match (a.1.is_manifest(), b.1.is_manifest(), a.1.version, b.1.version) {
        // The migration asks for decisions V4 cannot make (the entrypoint, the spend): a diff
        // through it would list them as changes nobody authored.
        (true, true, Some(4), Some(5)) | (true, true, Some(5), Some(4)) => {
            let (v4, v5) = if a.1.version == Some(4) { (a.0, b.0) } else { (b.0, a.0) };
            format!(
                "compare like with like: migrate the V4 manifest first (`svc manifest migrate --file {v4} > \
                 v5.yaml`, whose notes say what V5 changes) and compare v5.yaml with {v5}"
            )
        }
        (false, false, Some(_), Some(_)) if a.1.schema == b.1.schema => {
            "their fields differ by version: compare each with a policy of its own version".to_owned()
        }
        _ => "compare like with like (two effective policies: `svc app versions APP --version N --format json`, or \
              APP@N; or two manifests)"
            .to_owned(),
    }
}

/// The document that takes effect: a manifest's effective policy, a policy as it is.
fn effective(label: &str, side: Read) -> Result<Value, DiffError> {
    match side.schema.as_deref() {
        Some(manifest_core::POLICY_SCHEMA_NAME) => Ok(side.document),
        Some(manifest_core::v4::SCHEMA_NAME) => {
            // Validated as a manifest is; its text was read strictly already.
            let bytes = serde_json::to_vec(&side.document)
                .map_err(|source| DiffError::NotJson { name: label.to_owned(), source })?;
            let report = manifest_core::validate(&bytes);
            match report.manifest() {
                Ok(manifest) => Ok(manifest_core::effective::of_manifest(&manifest)),
                Err(_) => {
                    let errors = report.diagnostics.iter().filter(|d| d.is_error()).count();
                    Err(DiffError::Invalid { name: label.to_owned(), errors: plural(errors as u64, "error") })
                }
            }
        }
        _ => Err(DiffError::Unknown { name: label.to_owned(), kind: side.kind() }),
    }
}

/// `svc policy diff A B` (`--as-written`: the documents as they are).
pub(crate) fn run(from: &str, to: &str, as_written: bool, remote: &Remote) -> Result<ExitCode, DiffError> {
    let (a, b) = (Side::parse(from), Side::parse(to));
    // One side at a time: the first that cannot be read is the one error said.
    let before = read(&a, remote)?;
    let after = read(&b, remote)?;
    let (a, b) = (a.label(), b.label());
    if (&before.schema, before.version) != (&after.schema, after.version) {
        return Err(DiffError::Unlike {
            hint: like_with_like((&a, &before), (&b, &after)),
            a_kind: before.kind(),
            b_kind: after.kind(),
            a,
            b,
        });
    }
    let changes = if as_written {
        manifest_core::diff::diff(&before.document, &after.document)
    } else {
        let before = effective(&a, before)?;
        let mut after = effective(&b, after)?;
        manifest_core::effective::align_quantities(&before, &mut after);
        manifest_core::diff::diff(&before, &after)
    };
    let count = |effect: fn(&Effect) -> bool| changes.iter().filter(|c| effect(&c.effect)).count();
    let (running, none) = (count(|e| matches!(e, Effect::RunningJobs(_))), count(|e| *e == Effect::Nothing));
    match remote.format {
        OutputFormat::Json => {
            let report = json!({
                "from": a,
                "to": b,
                "compared": if as_written { "as_written" } else { "effective" },
                "changes": changes,
                "summary": {"changes": changes.len(), "runningJobs": running, "noEffect": none},
            });
            println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
        }
        OutputFormat::Text => {
            let b = if as_written { format!("{b} (as written)") } else { b };
            print!("{}", text(&a, &b, &changes));
        }
    }
    // What takes effect is the same when only metadata changed; as written, every change counts.
    let changed = if as_written { changes.len() } else { changes.len() - none };
    Ok(ExitCode::from(if changed == 0 { EXIT_SAME } else { EXIT_CHANGED }))
}

/// The text report: a heading, the changes reaching running jobs, those reaching the jobs
/// launched next, then those reaching none.
fn text(a: &str, b: &str, changes: &[Change]) -> String {
    let of = |effect: fn(&Effect) -> bool| changes.iter().filter(|c| effect(&c.effect)).collect::<Vec<_>>();
    let running = of(|e| matches!(e, Effect::RunningJobs(_)));
    let next = of(|e| *e == Effect::NextJobs);
    let none = of(|e| *e == Effect::Nothing);
    let effective = running.len() + next.len();
    let mut out = match (effective, none.len()) {
        (0, 0) => return format!("{a} -> {b}: no changes\n"),
        (0, none) => {
            format!("{a} -> {b}: no changes that take effect, {} with no effect\n", plural(none as u64, "change"))
        }
        (n, 0) => format!("{a} -> {b}: {}, {} reaching the running jobs\n", plural(n as u64, "change"), running.len()),
        (n, none) => format!(
            "{a} -> {b}: {}, {} reaching the running jobs, and {none} with no effect\n",
            plural(n as u64, "change"),
            running.len()
        ),
    };
    if !running.is_empty() {
        out += "for the running jobs:\n";
        for c in &running {
            let area = match c.effect {
                Effect::RunningJobs(area) => area.as_str(),
                Effect::NextJobs | Effect::Nothing => "",
            };
            out += &format!("  {area:<9} {}\n", line(c));
        }
    }
    for (heading, group) in [
        ("for the jobs launched next (as the update rule rolls them out):", &next),
        ("with no effect (metadata: not in the effective policy):", &none),
    ] {
        if !group.is_empty() {
            out += heading;
            out += "\n";
            for c in group {
                out += &format!("  {:<9} {}\n", "", line(c));
            }
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
