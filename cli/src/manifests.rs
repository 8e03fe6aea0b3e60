//! `svc manifest validate PATH...` over many files and directories (issue 21, point 3):
//! directories are walked (hidden entries skipped, symbolic links not followed), their files
//! kept when a `--include` glob matches the path below the directory (by default `*.json`,
//! `*.yaml`, `*.yml` at any depth); files named on the command line are always validated. The
//! files are validated in parallel, one worker per core, and reported in path order, then one
//! summary. Exit 0: every file valid; 1: some file invalid; 2: some file unreadable, no file
//! found, or a bad glob.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use globset::{Glob, GlobSet, GlobSetBuilder};
use manifest_core::{Diagnostic, render_json, render_text, validate as validate_document};
use serde_json::{Value, json};

use crate::args::ValidateFormat;

/// Usage errors and unreadable inputs.
const EXIT_USAGE: u8 = 2;
/// An invalid manifest.
const EXIT_INVALID: u8 = 1;

/// The globs a directory's files are kept by when no `--include` is given.
pub(crate) const DEFAULT_INCLUDE: &[&str] = &["**/*.json", "**/*.yaml", "**/*.yml"];

/// What became of one file.
pub(crate) enum Outcome {
    /// Validated: whether it is valid, its diagnostics, and its text or JSON report (the
    /// one the format prints).
    Checked { valid: bool, diagnostics: Vec<Diagnostic>, text: String, json: Value },
    /// It could not be read: why.
    Unreadable(String),
}

/// Validates the manifest `file` (`--file`: one file, never walked) and every manifest
/// under `paths`, and prints each report, then a summary.
pub(crate) fn validate(file: Option<&Path>, paths: &[PathBuf], include: &[String], format: ValidateFormat) -> ExitCode {
    let globs = match globs(include) {
        Ok(globs) => globs,
        Err(message) => return crate::output::fail("svc", EXIT_USAGE, "usage", &message),
    };
    let (mut files, mut unreadable) = collect(paths, &globs);
    files.extend(file.map(Path::to_path_buf));
    if files.is_empty() && unreadable.is_empty() {
        let message = format!(
            "no manifest files under {} (kept: {})",
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
            if include.is_empty() { DEFAULT_INCLUDE.join(" ") } else { include.join(" ") }
        );
        return crate::output::fail("svc", EXIT_USAGE, "no_files", &message);
    }
    files.sort();
    files.dedup();
    let started = Instant::now();
    let mut outcomes = check_all(&files, format);
    for (path, why) in unreadable.drain(..) {
        outcomes.push((path, Outcome::Unreadable(why)));
    }
    outcomes.sort_by(|a, b| a.0.cmp(&b.0));
    report(&outcomes, format, started)
}

fn globs(include: &[String]) -> Result<GlobSet, String> {
    let mut set = GlobSetBuilder::new();
    let patterns: Vec<&str> =
        if include.is_empty() { DEFAULT_INCLUDE.to_vec() } else { include.iter().map(String::as_str).collect() };
    for pattern in patterns {
        let glob = Glob::new(pattern).map_err(|e| format!("--include {pattern:?} is not a glob: {e}"))?;
        set.add(glob);
    }
    set.build().map_err(|e| format!("the --include globs do not build: {e}"))
}

/// The files to validate, in no particular order, and the paths that could not be walked
/// (with why).
fn collect(paths: &[PathBuf], globs: &GlobSet) -> (Vec<PathBuf>, Vec<(PathBuf, String)>) {
    let (mut files, mut unreadable) = (Vec::new(), Vec::new());
    for root in paths {
        if !root.is_dir() {
            // Named on the command line: validated whatever its name (or why it cannot be).
            files.push(root.clone());
            continue;
        }
        let walk = walkdir::WalkDir::new(root)
            .follow_links(false)
            .into_iter()
            .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
        for entry in walk {
            match entry {
                Ok(entry) if entry.file_type().is_file() => {
                    let below = entry.path().strip_prefix(root).unwrap_or(entry.path());
                    if globs.is_match(below) {
                        files.push(entry.into_path());
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    let path = e.path().map_or_else(|| root.clone(), Path::to_path_buf);
                    unreadable.push((path, format!("cannot read: {e}")));
                }
            }
        }
    }
    files.sort();
    files.dedup();
    (files, unreadable)
}

/// Validates `files` on one worker per core (at most one per file).
fn check_all(files: &[PathBuf], format: ValidateFormat) -> Vec<(PathBuf, Outcome)> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(files.len()).max(1);
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::with_capacity(files.len()));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(path) = files.get(i) else { break };
                    let outcome = check(path, format);
                    done.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((path.clone(), outcome));
                }
            });
        }
    });
    done.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn check(path: &Path, format: ValidateFormat) -> Outcome {
    let (name, bytes) = match crate::manifest::read_input(path) {
        Ok(input) => input,
        Err(e) => return Outcome::Unreadable(e.to_string()),
    };
    let report = validate_document(&bytes);
    let valid = report.is_valid();
    let diagnostics = report.diagnostics.clone();
    let (text, json) = match format {
        ValidateFormat::Text => (render_text(&report, &name, &bytes), Value::Null),
        ValidateFormat::Json => {
            let mut json: Value = serde_json::from_str(&render_json(&report)).unwrap_or(Value::Null);
            if let Value::Object(map) = &mut json {
                map.insert("path".to_owned(), Value::String(name));
            }
            (String::new(), json)
        }
        ValidateFormat::Junit | ValidateFormat::Github | ValidateFormat::Sarif => (String::new(), Value::Null),
    };
    Outcome::Checked { valid, diagnostics, text, json }
}

/// Prints every outcome, then the summary; the exit code.
fn report(outcomes: &[(PathBuf, Outcome)], format: ValidateFormat, started: Instant) -> ExitCode {
    let summary = Summary::of(outcomes, started);
    match format {
        ValidateFormat::Text => {
            for (path, outcome) in outcomes {
                match outcome {
                    Outcome::Checked { text, .. } => print!("{text}"),
                    Outcome::Unreadable(why) => println!("{}: unreadable: {why}", path.display()),
                }
            }
            println!("{}", summary.line());
        }
        ValidateFormat::Json => {
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
                "files": summary.files, "valid": summary.valid, "invalid": summary.invalid,
                "unreadable": summary.unreadable,
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&json!({"files": files, "summary": counts})).unwrap_or_default()
            );
        }
        ValidateFormat::Github => print!("{}", crate::ci_formats::github(outcomes, &summary)),
        ValidateFormat::Junit => print!("{}", crate::ci_formats::junit(outcomes, &summary)),
        ValidateFormat::Sarif => println!("{}", crate::ci_formats::sarif(outcomes)),
    }
    if summary.unreadable > 0 {
        ExitCode::from(EXIT_USAGE)
    } else if summary.invalid > 0 {
        ExitCode::from(EXIT_INVALID)
    } else {
        ExitCode::SUCCESS
    }
}

/// How many files came out how.
pub(crate) struct Summary {
    pub(crate) files: usize,
    pub(crate) valid: usize,
    pub(crate) invalid: usize,
    pub(crate) unreadable: usize,
    pub(crate) elapsed: std::time::Duration,
}

impl Summary {
    fn of(outcomes: &[(PathBuf, Outcome)], started: Instant) -> Summary {
        let count = |f: fn(&Outcome) -> bool| outcomes.iter().filter(|(_, o)| f(o)).count();
        Summary {
            files: outcomes.len(),
            valid: count(|o| matches!(o, Outcome::Checked { valid: true, .. })),
            invalid: count(|o| matches!(o, Outcome::Checked { valid: false, .. })),
            unreadable: count(|o| matches!(o, Outcome::Unreadable(_))),
            elapsed: started.elapsed(),
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
