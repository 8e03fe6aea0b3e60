//! `svc manifest validate | migrate | schema | policy | digest`.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use manifest_core::{
    ArtifactVersion, MAX_INPUT_BYTES, Manifest, PolicyError, PolicyV4, Report, SchemaKind, ServerFacts, render_json,
    render_text, validate as validate_document,
};

use crate::args::{FactArgs, MigrateFormat, OutputFormat, SchemaVersion};

/// Usage errors and unreadable inputs.
const EXIT_USAGE: u8 = 2;
/// An invalid manifest.
const EXIT_INVALID: u8 = 1;

/// Validates the manifest at `path` (`-` for standard input) and prints the result.
pub(crate) fn validate(path: &Path, format: OutputFormat) -> ExitCode {
    let (name, bytes) = match read_input(path) {
        Ok(input) => input,
        Err(message) => {
            // With --format json, the shared envelope (exactly one JSON value on stdout).
            return crate::output::fail("svc", EXIT_USAGE, "unreadable_file", &message.to_string());
        }
    };
    let report = validate_document(&bytes);
    let output = match format {
        OutputFormat::Json => render_json(&report) + "\n",
        OutputFormat::Text => render_text(&report, &name, &bytes),
    };
    print!("{output}");
    if report.is_valid() { ExitCode::SUCCESS } else { ExitCode::from(EXIT_INVALID) }
}

/// Writes the V5 equivalent of the V4 manifest at `path` to standard output (checked by the
/// validator first), and its notes to standard error.
pub(crate) fn migrate(path: &Path, options: manifest_core::migrate::Options, format: MigrateFormat) -> ExitCode {
    use manifest_core::migrate::{NoteKind, migrate_v4};
    let (name, bytes) = match read_input(path) {
        Ok(input) => input,
        Err(e) => return fail(EXIT_USAGE, &e.to_string()),
    };
    let report = validate_document(&bytes);
    let Some(manifest) = valid_manifest(&report, &name, &bytes) else {
        return fail(EXIT_INVALID, &format!("{name} is not a valid manifest (its diagnostics are above)"));
    };
    if matches!(manifest, Manifest::V5(_)) {
        return fail(EXIT_USAGE, &format!("{name} is a Manifest V5 already: nothing to migrate"));
    }
    // A valid V4 manifest is strict JSON (no duplicate keys): serde reads it the same.
    let authored: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return fail(EXIT_USAGE, &format!("{name}: {e}")),
    };
    let migration = migrate_v4(&authored, &options);
    for note in &migration.notes {
        let kind = match note.kind {
            NoteKind::Changed => "changed",
            NoteKind::Dropped => "dropped",
            NoteKind::Blocking => "blocking",
        };
        eprintln!("{kind:<8} {}: {}\n         = {}", note.pointer, note.why, note.fix);
    }
    let Some(document) = migration.manifest else {
        let blocking = migration.notes.iter().filter(|n| n.kind == NoteKind::Blocking).count();
        let message = format!(
            "{name}: not migrated: {blocking} field{} of the V4 manifest {} no V5 form; change {} and run again",
            if blocking == 1 { "" } else { "s" },
            if blocking == 1 { "has" } else { "have" },
            if blocking == 1 { "it" } else { "them" },
        );
        return crate::output::fail("svc", EXIT_INVALID, "migration_blocked", &message);
    };
    let text = match format {
        MigrateFormat::Yaml => manifest_core::emit::to_yaml(&document, manifest_core::emit::V5_KEY_ORDER),
        MigrateFormat::Json => serde_json::to_string_pretty(&document).unwrap_or_default() + "\n",
    };
    // What is written must validate as V5 (a V4 value beyond a V5 bound shows here).
    let checked = validate_document(text.as_bytes());
    if !checked.is_valid() {
        eprint!("{}", render_text(&checked, "the V5 document", text.as_bytes()));
        let message = format!(
            "{name}: not migrated: the V5 document does not validate; change the V4 fields, or the values given \
             with --entrypoint and --per-job, that the errors above point at, and run again"
        );
        return crate::output::fail("svc", EXIT_INVALID, "migration_blocked", &message);
    }
    print!("{text}");
    eprintln!(
        "{name}: migrated to Manifest V5 ({} note{}); check it with `svc manifest validate`",
        migration.notes.len(),
        if migration.notes.len() == 1 { "" } else { "s" }
    );
    ExitCode::SUCCESS
}

/// The schema a `--version` names.
pub(crate) fn schema_kind(version: SchemaVersion) -> SchemaKind {
    match version {
        SchemaVersion::V4 => SchemaKind::ManifestV4,
        SchemaVersion::V5 => SchemaKind::ManifestV5,
        SchemaVersion::Policy => SchemaKind::PolicyV4,
        SchemaVersion::Executions => SchemaKind::Executions,
    }
}

/// Prints a schema exactly as served.
pub(crate) fn schema(version: SchemaVersion) -> ExitCode {
    print!("{}", schema_kind(version).bytes());
    ExitCode::SUCCESS
}

/// Prints the effective policy of a V4 manifest; diagnostics and errors go to standard error.
pub(crate) fn policy(path: &Path, facts: &FactArgs) -> ExitCode {
    let (manifest, _) = match read_valid_manifest(path) {
        Ok(valid) => valid,
        Err(code) => return code,
    };
    let Manifest::V4(manifest) = manifest else {
        return fail(EXIT_USAGE, "the effective policy is materialized from a V4 manifest; this one is V5");
    };
    let Some(application_uid) = facts.application_uid.clone() else {
        return fail(EXIT_USAGE, "missing server fact: pass the target application's identity with --application-uid");
    };
    match PolicyV4::materialize(&manifest, &server_facts(application_uid, facts)) {
        Ok(policy) => {
            // Serializing plain data cannot fail.
            println!("{}", serde_json::to_string_pretty(&policy).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Err(e) => policy_failure(&e),
    }
}

/// Prints the authored digest, and the policy digest for V4 when the facts are given.
pub(crate) fn digest(path: &Path, facts: &FactArgs) -> ExitCode {
    let (manifest, authored) = match read_valid_manifest(path) {
        Ok(valid) => valid,
        Err(code) => return code,
    };
    // Work out everything before printing anything: no half answer on a failure.
    let policy = match (manifest, facts.application_uid.clone()) {
        (Manifest::V4(manifest), Some(uid)) => match PolicyV4::materialize(&manifest, &server_facts(uid, facts)) {
            Ok(policy) => Some(policy.digest()),
            Err(e) => return policy_failure(&e),
        },
        (Manifest::V5(_), Some(_)) => {
            return fail(EXIT_USAGE, "server facts give a policy digest for V4 manifests only; this one is V5");
        }
        (_, None) if facts.artifact_cid.is_some() => {
            return fail(EXIT_USAGE, "the policy digest needs the application's identity too: pass --application-uid");
        }
        (_, None) => None,
    };
    println!("authored {authored}");
    if let Some(policy) = policy {
        println!("policy {policy}");
    }
    ExitCode::SUCCESS
}

/// Reads and validates the manifest at `path`: its model and authored digest when it is
/// valid; otherwise the problem goes to standard error and the exit code comes back.
fn read_valid_manifest(path: &Path) -> Result<(Manifest, String), ExitCode> {
    let (name, bytes) = read_input(path).map_err(|e| fail(EXIT_USAGE, &e.to_string()))?;
    let report = validate_document(&bytes);
    let manifest = valid_manifest(&report, &name, &bytes).ok_or(ExitCode::from(EXIT_INVALID))?;
    Ok((manifest, report.authored_digest().unwrap_or_default()))
}

/// The model of a valid manifest; otherwise the diagnostics go to standard error.
fn valid_manifest(report: &Report<'_>, name: &str, bytes: &[u8]) -> Option<Manifest> {
    match report.manifest() {
        Ok(manifest) => Some(manifest),
        Err(e) => {
            eprint!("{}", render_text(report, name, bytes));
            if !matches!(e, manifest_core::ManifestError::Invalid) {
                eprintln!("svc: {e}");
            }
            None
        }
    }
}

fn server_facts(application_uid: String, facts: &FactArgs) -> ServerFacts {
    let artifact = match (&facts.artifact_cid, &facts.artifact_digest) {
        (Some(cid), Some(digest)) => {
            Some(ArtifactVersion { cid: cid.clone(), digest: digest.clone(), image_digest: None })
        }
        _ => None,
    };
    ServerFacts { application_uid, artifact }
}

/// Reports why no policy could be made: a missing or wrong fact is a usage error naming the
/// flag that supplies it; a release no policy can be made from is the manifest's problem.
fn policy_failure(e: &PolicyError) -> ExitCode {
    let flag = match e {
        PolicyError::MissingApplicationUid | PolicyError::ApplicationUidMismatch { .. } => "--application-uid",
        PolicyError::InvalidArtifactVersion { field: "cid", .. } => "--artifact-cid",
        PolicyError::InvalidArtifactVersion { .. } => "--artifact-digest",
        PolicyError::MissingArtifactVersion | PolicyError::PinnedArtifactMismatch { .. } => {
            "--artifact-cid and --artifact-digest"
        }
        PolicyError::RuntimeImageBuild => return fail(EXIT_INVALID, &e.to_string()),
    };
    fail(EXIT_USAGE, &format!("{e} (see {flag})"))
}

fn fail(code: u8, message: &str) -> ExitCode {
    crate::output::fail("svc", code, if code == EXIT_USAGE { "usage" } else { "invalid_manifest" }, message)
}

/// Reads at most one byte past the input limit, so an oversized input is reported as
/// `input_too_large` without being read whole. A FIFO or device named on the command line is
/// read like a file (`--file <(generate)` is a pipe); a directory walk keeps regular files
/// only.
pub(crate) fn read_input(path: &Path) -> Result<(String, Vec<u8>), InputError> {
    let limit = (MAX_INPUT_BYTES + 1) as u64;
    let mut bytes = Vec::new();
    if path == Path::new("-") {
        std::io::stdin().lock().take(limit).read_to_end(&mut bytes).map_err(InputError::Stdin)?;
        return Ok(("<stdin>".to_owned(), bytes));
    }
    let opened = fs_err::File::open(path).map_err(InputError::File)?;
    if opened.metadata().is_ok_and(|m| m.is_dir()) {
        return Err(InputError::Directory(path.to_owned()));
    }
    opened.take(limit).read_to_end(&mut bytes).map_err(InputError::File)?;
    Ok((path.display().to_string(), bytes))
}

/// Why a manifest could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    /// Standard input failed.
    #[error("cannot read standard input: {0}")]
    Stdin(#[source] std::io::Error),
    /// The file could not be read.
    #[error("{0}")]
    File(
        /// Why, naming the file (`fs-err`).
        #[source]
        std::io::Error,
    ),
    /// The path is a directory.
    #[error("cannot read {}: it is a directory", .0.display())]
    Directory(std::path::PathBuf),
}
