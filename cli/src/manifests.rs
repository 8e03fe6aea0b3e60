//! `svc manifest validate PATH...` over many files and directories (issue 21, point 3):
//! directories are walked (hidden entries skipped, symbolic links followed, a loop reported
//! as unreadable), their files kept when a `--include` glob matches the path below the
//! directory (`*` stays within one path segment; by default `**/*.json`, `**/*.yaml`,
//! `**/*.yml`); files named on the command line are always validated. A file reached twice
//! (by two spellings, or through a link) is validated once, under its first spelling.
//!
//! Files are validated in parallel, one worker per core, and reported in path order as soon
//! as each is ready (text and GitHub annotations stream; JSON, JUnit and SARIF are one
//! document each, printed at the end), then one summary. Exit 0: every file valid; 1: some
//! file invalid; 2: some file unreadable, no file found, or a bad glob.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use manifest_core::{render_json, render_text, validate as validate_document};
use serde_json::{Value, json};

use crate::args::ValidateFormat;
use crate::manifest_outcome::{Outcome, Summary};

/// Usage errors and unreadable inputs.
const EXIT_USAGE: u8 = 2;
/// An invalid manifest.
const EXIT_INVALID: u8 = 1;

/// The globs a directory's files are kept by when no `--include` is given.
pub(crate) const DEFAULT_INCLUDE: &[&str] = &["**/*.json", "**/*.yaml", "**/*.yml"];

/// One thing to report: a file to validate, or a path the walk could not read.
enum Input {
    File(PathBuf),
    WalkError(PathBuf, String),
}

impl Input {
    fn path(&self) -> &Path {
        match self {
            Input::File(p) | Input::WalkError(p, _) => p,
        }
    }
}

/// Why `svc manifest validate` of several files checked none: said once, by
/// [`crate::failure::report`], as `svc: ...` (exit 2).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ValidateManyError {
    /// `--include` without a directory.
    #[error("--include chooses the files of a directory, and no directory was given")]
    IncludeWithoutDirectory,
    /// An `--include` pattern is not a glob.
    #[error(transparent)]
    Globs(GlobsError),
    /// Nothing to check.
    #[error("no manifest files under {paths} (kept: {kept})")]
    NoFiles {
        /// The paths given, joined.
        paths: String,
        /// The patterns kept.
        kept: String,
    },
}

impl crate::failure::Failure for ValidateManyError {
    fn exit_code(&self) -> u8 {
        EXIT_USAGE
    }

    fn envelope(&self) -> svc_http::ErrorBody {
        let code = if matches!(self, ValidateManyError::NoFiles { .. }) { "no_files" } else { "usage" };
        svc_http::ErrorBody::new(code, self.to_string())
    }

    fn text(&self) -> String {
        crate::failure::line("svc", self)
    }
}

/// Validates the manifest `file` (`--file`: one file, never walked) and every manifest
/// under `paths`, and prints each report, then a summary.
pub(crate) fn validate(
    file: Option<&Path>,
    paths: &[PathBuf],
    include: &[String],
    format: ValidateFormat,
) -> Result<ExitCode, ValidateManyError> {
    if !include.is_empty() && !paths.iter().any(|p| p.is_dir()) {
        return Err(ValidateManyError::IncludeWithoutDirectory);
    }
    let globs = globs(include).map_err(ValidateManyError::Globs)?;
    let mut inputs = collect(paths, &globs);
    inputs.extend(file.map(|f| Input::File(f.to_path_buf())));
    inputs.sort_by(|a, b| a.path().cmp(b.path()));
    let inputs = once_each(inputs);
    if inputs.is_empty() {
        let paths = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
        let kept = if include.is_empty() { DEFAULT_INCLUDE.join(" ") } else { include.join(" ") };
        // A CI reader gets an empty report it can read, beside the message.
        let empty = Summary { files: 0, valid: 0, invalid: 0, unreadable: 0, elapsed: Duration::ZERO };
        match format {
            ValidateFormat::Junit => print!("{}", crate::ci_formats::junit(&[], &empty)),
            ValidateFormat::Sarif => println!("{}", crate::ci_formats::sarif(&[])),
            _ => {}
        }
        return Err(ValidateManyError::NoFiles { paths, kept });
    }
    let started = Instant::now();
    let mut summary = Summary { files: 0, valid: 0, invalid: 0, unreadable: 0, elapsed: Duration::ZERO };
    let mut kept: Vec<(PathBuf, Outcome)> = Vec::new();
    let mut stdout = std::io::stdout().lock();
    check_in_order(&inputs, format, |path, outcome| {
        summary.count(&outcome);
        match format {
            ValidateFormat::Text => {
                let _ = match &outcome {
                    Outcome::Checked { text, .. } => write!(stdout, "{text}"),
                    Outcome::Unreadable(why) => writeln!(stdout, "{}: unreadable: {why}", path.display()),
                };
            }
            ValidateFormat::Github => {
                let _ = write!(stdout, "{}", crate::ci_formats::github(path, &outcome));
            }
            ValidateFormat::Json | ValidateFormat::Junit | ValidateFormat::Sarif => {
                kept.push((path.to_owned(), outcome))
            }
        }
    });
    summary.elapsed = started.elapsed();
    let _ = match format {
        ValidateFormat::Text | ValidateFormat::Github => writeln!(stdout, "{}", summary.line()),
        ValidateFormat::Json => writeln!(stdout, "{}", json_report(&kept, &summary)),
        ValidateFormat::Junit => write!(stdout, "{}", crate::ci_formats::junit(&kept, &summary)),
        ValidateFormat::Sarif => writeln!(stdout, "{}", crate::ci_formats::sarif(&kept)),
    };
    let _ = stdout.flush();
    Ok(if summary.unreadable > 0 {
        ExitCode::from(EXIT_USAGE)
    } else if summary.invalid > 0 {
        ExitCode::from(EXIT_INVALID)
    } else {
        ExitCode::SUCCESS
    })
}

/// Why the `--include` globs cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GlobsError {
    /// One is not a glob.
    #[error("--include {pattern:?} is not a glob: {source}")]
    Pattern {
        /// As given.
        pattern: String,
        /// Why.
        #[source]
        source: globset::Error,
    },
    /// Together they do not build.
    #[error("the --include globs do not build: {0}")]
    Set(#[source] globset::Error),
}

fn globs(include: &[String]) -> Result<GlobSet, GlobsError> {
    let mut set = GlobSetBuilder::new();
    let patterns: Vec<&str> =
        if include.is_empty() { DEFAULT_INCLUDE.to_vec() } else { include.iter().map(String::as_str).collect() };
    for pattern in patterns {
        // `*` within one segment, as in a shell: `sub/*.json` is not `sub/deeper/x.json`.
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|source| GlobsError::Pattern { pattern: pattern.to_owned(), source })?;
        set.add(glob);
    }
    set.build().map_err(GlobsError::Set)
}

/// The files under `paths` (a path that is not a directory is itself a file to validate),
/// and the paths the walk could not read.
fn collect(paths: &[PathBuf], globs: &GlobSet) -> Vec<Input> {
    let mut inputs = Vec::new();
    for root in paths {
        if !root.is_dir() {
            // Named on the command line: validated whatever its name (or why it cannot be).
            inputs.push(Input::File(root.clone()));
            continue;
        }
        let walk = walkdir::WalkDir::new(root)
            .follow_links(true)
            .into_iter()
            .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
        for entry in walk {
            match entry {
                Ok(entry) if entry.file_type().is_file() => {
                    let below = entry.path().strip_prefix(root).unwrap_or(entry.path());
                    if globs.is_match(below) {
                        inputs.push(Input::File(entry.into_path()));
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let path = e.path().map_or_else(|| root.clone(), Path::to_path_buf);
                    inputs.push(Input::WalkError(path, format!("cannot read: {e}")));
                }
            }
        }
    }
    inputs
}

/// `inputs` (sorted) without a second spelling of a file already listed.
fn once_each(inputs: Vec<Input>) -> Vec<Input> {
    let mut seen = HashSet::new();
    inputs
        .into_iter()
        .filter(|input| match input {
            // A path that does not resolve is kept: reading it will say why.
            Input::File(path) => seen.insert(std::fs::canonicalize(path).unwrap_or_else(|_| path.clone())),
            Input::WalkError(..) => true,
        })
        .collect()
}

/// Validates `inputs` on one worker per core (at most one per input) and hands each
/// outcome to `each` in the inputs' order, as soon as it and those before it are ready.
fn check_in_order(inputs: &[Input], format: ValidateFormat, mut each: impl FnMut(&Path, Outcome)) {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(inputs.len()).max(1);
    let next = AtomicUsize::new(0);
    let (done, results) = mpsc::channel::<(usize, Outcome)>();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let done = done.clone();
            let next = &next;
            scope.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(input) = inputs.get(i) else { break };
                    let outcome = match input {
                        Input::File(path) => check(path, format),
                        Input::WalkError(_, why) => Outcome::Unreadable(why.clone()),
                    };
                    if done.send((i, outcome)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(done);
        // Out-of-order outcomes wait here until those before them are in; at most about one
        // per worker waits at a time.
        let mut waiting = BTreeMap::new();
        let mut due = 0;
        for (i, outcome) in results {
            waiting.insert(i, outcome);
            while let Some(outcome) = waiting.remove(&due) {
                each(inputs[due].path(), outcome);
                due += 1;
            }
        }
    });
}

fn check(path: &Path, format: ValidateFormat) -> Outcome {
    let (name, bytes) = match crate::manifest::read_input(path) {
        Ok(input) => input,
        Err(e) => return Outcome::Unreadable(e.to_string()),
    };
    let report = validate_document(&bytes);
    let valid = report.is_valid();
    match format {
        ValidateFormat::Text => Outcome::Checked {
            valid,
            diagnostics: Vec::new(),
            text: render_text(&report, &name, &bytes),
            json: Value::Null,
        },
        ValidateFormat::Json => {
            let mut json: Value = serde_json::from_str(&render_json(&report)).unwrap_or(Value::Null);
            if let Value::Object(map) = &mut json {
                map.insert("path".to_owned(), Value::String(name));
            }
            Outcome::Checked { valid, diagnostics: Vec::new(), text: String::new(), json }
        }
        ValidateFormat::Junit | ValidateFormat::Github | ValidateFormat::Sarif => {
            Outcome::Checked { valid, diagnostics: report.diagnostics.clone(), text: String::new(), json: Value::Null }
        }
    }
}

/// `--format json` of several files: `{"files": [...], "summary": {...}}`.
fn json_report(outcomes: &[(PathBuf, Outcome)], summary: &Summary) -> String {
    let files: Vec<Value> = outcomes
        .iter()
        .map(|(path, outcome)| match outcome {
            Outcome::Checked { json, .. } => json.clone(),
            Outcome::Unreadable(why) => json!({
                "path": path.display().to_string(),
                "error": {"code": "unreadable_file", "message": why},
            }),
        })
        .collect();
    let counts = json!({
        "files": summary.files, "valid": summary.valid, "invalid": summary.invalid, "unreadable": summary.unreadable,
    });
    serde_json::to_string_pretty(&json!({"files": files, "summary": counts})).unwrap_or_default()
}
