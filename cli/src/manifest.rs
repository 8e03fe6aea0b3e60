//! `svc manifest validate | migrate | schema | policy | digest`.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use manifest_core::{
    ArtifactVersion, MAX_INPUT_BYTES, Manifest, ManifestError, PolicyError, PolicyV4, Report, SchemaKind, ServerFacts,
    render_json, render_text, validate as validate_document,
};

use crate::args::{FactArgs, OutputFormat, SchemaVersion};

/// Usage errors and unreadable inputs.
const EXIT_USAGE: u8 = 2;
/// An invalid manifest.
const EXIT_INVALID: u8 = 1;

/// Why an `svc manifest` command printed no result: said once, by
/// [`crate::failure::report`], as `svc: ...` (after the manifest's diagnostics when it is
/// invalid).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ManifestCommandError {
    /// `validate`'s input cannot be read (envelope code `unreadable_file`).
    #[error(transparent)]
    Unreadable(InputError),
    /// Another command's input cannot be read (envelope code `usage`, as its other refusals).
    #[error(transparent)]
    Input(InputError),
    /// The manifest is invalid: its diagnostics, nothing more (`policy`, `digest`).
    #[error(transparent)]
    Invalid(Diagnosed),
    /// The manifest to migrate is invalid: its diagnostics, then this.
    #[error("{name} is not a valid manifest (its diagnostics are above)")]
    NotMigratable {
        /// The input's name.
        name: String,
        /// Its diagnostics.
        #[source]
        diagnosed: Diagnosed,
    },
    /// `migrate` given a V5 manifest.
    #[error("{name} is a Manifest V5 already: nothing to migrate")]
    V5Already {
        /// The input's name.
        name: String,
    },
    /// A valid V4 manifest serde does not read.
    #[error("{name}: {source}")]
    NotJson {
        /// The input's name.
        name: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// Fields of the V4 manifest have no V5 form (the notes above say which).
    #[error(
        "{name}: not migrated: {blocking} field{} of the V4 manifest {} no V5 form; pass the flag{} {} note{} \
         name{} and run again",
        if *blocking == 1 { "" } else { "s" },
        if *blocking == 1 { "has" } else { "have" },
        if *blocking == 1 { "" } else { "s" },
        if *blocking == 1 { "its" } else { "their" },
        if *blocking == 1 { "" } else { "s" },
        if *blocking == 1 { "s" } else { "" }
    )]
    Blocked {
        /// The input's name.
        name: String,
        /// How many fields.
        blocking: usize,
        /// Every note (in the JSON answer).
        notes: Vec<manifest_core::migrate::Note>,
    },
    /// The V5 document migrated does not validate: its diagnostics, then this.
    #[error(
        "{name}: not migrated: the V5 document does not validate; change the V4 fields, or the values given \
         with the flags (--entrypoint, --per-job, --rate, --rate-window, --pin-artifact, --minimum), that the \
         errors above point at, and run again"
    )]
    MigratedInvalid {
        /// The input's name.
        name: String,
        /// The V5 document's diagnostics.
        rendered: String,
        /// Every note (in the JSON answer).
        notes: Vec<manifest_core::migrate::Note>,
    },
    /// A `migrate` flag's value that cannot be used (checked before the V4 manifest is read,
    /// or by the V5 validator at the field the flag fills): the flag and why.
    #[error("{flag}: {why}")]
    BadFlag {
        /// The flag as given (`--pin-artifact sha256:abc`).
        flag: String,
        /// Why it cannot be used, and what to give.
        why: String,
    },
    /// A `--drop` pointer that names no blocking field (a typo would otherwise pass unseen).
    #[error(
        "--drop {pointer}: no blocking field of {name} is there or below it; the fields --drop can leave out are: \
         {blocking}"
    )]
    UnusedDrop {
        /// The input's name.
        name: String,
        /// The pointer given.
        pointer: String,
        /// The blocking fields `--drop` could name (with the other flags given), comma-separated.
        blocking: String,
    },
    /// `policy` of a V5 manifest.
    #[error("the effective policy is materialized from a V4 manifest; this one is V5")]
    PolicyOfV5,
    /// `policy` without `--application-uid`.
    #[error("missing server fact: pass the target application's identity with --application-uid")]
    NoApplicationUid,
    /// `digest` with server facts of a V5 manifest.
    #[error("server facts give a policy digest for V4 manifests only; this one is V5")]
    FactsOfV5,
    /// `digest` with an artifact but no application.
    #[error("the policy digest needs the application's identity too: pass --application-uid")]
    ArtifactWithoutApplication,
    /// No policy can be made with the facts given: the flag that supplies the one missing.
    #[error("{source} (see {flag})")]
    Facts {
        /// Why.
        #[source]
        source: PolicyError,
        /// The flag.
        flag: &'static str,
    },
    /// No policy can be made from the manifest's release.
    #[error(transparent)]
    Release(PolicyError),
}

impl crate::failure::Failure for ManifestCommandError {
    fn exit_code(&self) -> u8 {
        match self {
            ManifestCommandError::Invalid(_)
            | ManifestCommandError::NotMigratable { .. }
            | ManifestCommandError::Blocked { .. }
            | ManifestCommandError::MigratedInvalid { .. }
            | ManifestCommandError::Release(_) => EXIT_INVALID,
            _ => EXIT_USAGE,
        }
    }

    fn envelope(&self) -> svc_http::ErrorBody {
        let code = match self {
            ManifestCommandError::Unreadable(_) => "unreadable_file",
            ManifestCommandError::Blocked { .. } | ManifestCommandError::MigratedInvalid { .. } => "migration_blocked",
            e if e.exit_code() == EXIT_USAGE => "usage",
            _ => "invalid_manifest",
        };
        svc_http::ErrorBody::new(code, self.to_string())
    }

    fn json_answer(&self) -> Option<serde_json::Value> {
        let notes = self.json_notes()?;
        let mut answer = serde_json::to_value(self.envelope()).ok()?;
        let object = answer.as_object_mut()?;
        object.insert("migrated".into(), false.into());
        object.insert("notes".into(), serde_json::to_value(notes).ok()?);
        Some(answer)
    }

    fn text(&self) -> String {
        let line = crate::failure::line("svc", self);
        match self {
            ManifestCommandError::Invalid(diagnosed) => diagnosed.text(),
            ManifestCommandError::NotMigratable { diagnosed, .. } => format!("{}{line}", diagnosed.text()),
            ManifestCommandError::MigratedInvalid { rendered, .. } => format!("{rendered}{line}"),
            _ => line,
        }
    }
}

impl ManifestCommandError {
    /// A migration that failed after its notes were made: `--format json` answers them with
    /// the error (`{"error": {...}, "migrated": false, "notes": [...]}`).
    pub(crate) fn json_notes(&self) -> Option<&[manifest_core::migrate::Note]> {
        match self {
            ManifestCommandError::Blocked { notes, .. } | ManifestCommandError::MigratedInvalid { notes, .. } => {
                Some(notes)
            }
            _ => None,
        }
    }
}

/// A manifest that does not validate, with its diagnostics as `svc manifest validate` prints
/// them.
#[derive(Debug, thiserror::Error)]
#[error("{source}")]
pub(crate) struct Diagnosed {
    /// The diagnostics, for people.
    rendered: String,
    /// Why there is no model.
    #[source]
    source: ManifestError,
}

impl Diagnosed {
    /// What standard error shows: the diagnostics, and the reason when it is not just that
    /// they hold an error.
    fn text(&self) -> String {
        match self.source {
            ManifestError::Invalid => self.rendered.clone(),
            _ => format!("{}svc: {}\n", self.rendered, self.source),
        }
    }
}

/// Validates the manifest at `path` (`-` for standard input) and prints the result.
pub(crate) fn validate(path: &Path, format: OutputFormat) -> Result<ExitCode, ManifestCommandError> {
    // With --format json, an unreadable input is the shared envelope (exactly one JSON value
    // on stdout).
    let (name, bytes) = read_input(path).map_err(ManifestCommandError::Unreadable)?;
    let report = validate_document(&bytes);
    let output = match format {
        OutputFormat::Json => render_json(&report) + "\n",
        OutputFormat::Text => render_text(&report, &name, &bytes),
    };
    print!("{output}");
    Ok(if report.is_valid() { ExitCode::SUCCESS } else { ExitCode::from(EXIT_INVALID) })
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
pub(crate) fn policy(path: &Path, facts: &FactArgs) -> Result<ExitCode, ManifestCommandError> {
    let (manifest, _) = read_valid_manifest(path)?;
    let Manifest::V4(manifest) = manifest else {
        return Err(ManifestCommandError::PolicyOfV5);
    };
    let Some(application_uid) = facts.application_uid.clone() else {
        return Err(ManifestCommandError::NoApplicationUid);
    };
    let policy = PolicyV4::materialize(&manifest, &server_facts(application_uid, facts)).map_err(policy_failure)?;
    // Serializing plain data cannot fail.
    println!("{}", serde_json::to_string_pretty(&policy).unwrap_or_default());
    Ok(ExitCode::SUCCESS)
}

/// Prints the authored digest, and the policy digest for V4 when the facts are given.
pub(crate) fn digest(path: &Path, facts: &FactArgs) -> Result<ExitCode, ManifestCommandError> {
    let (manifest, authored) = read_valid_manifest(path)?;
    // Work out everything before printing anything: no half answer on a failure.
    let policy = match (manifest, facts.application_uid.clone()) {
        (Manifest::V4(manifest), Some(uid)) => {
            Some(PolicyV4::materialize(&manifest, &server_facts(uid, facts)).map_err(policy_failure)?.digest())
        }
        (Manifest::V5(_), Some(_)) => return Err(ManifestCommandError::FactsOfV5),
        (_, None) if facts.artifact_cid.is_some() => return Err(ManifestCommandError::ArtifactWithoutApplication),
        (_, None) => None,
    };
    println!("authored {authored}");
    if let Some(policy) = policy {
        println!("policy {policy}");
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads and validates the manifest at `path`: its model and authored digest when it is
/// valid; otherwise why not (its diagnostics).
fn read_valid_manifest(path: &Path) -> Result<(Manifest, String), ManifestCommandError> {
    let (name, bytes) = read_input(path).map_err(ManifestCommandError::Input)?;
    let report = validate_document(&bytes);
    let manifest = valid_manifest(&report, &name, &bytes).map_err(ManifestCommandError::Invalid)?;
    Ok((manifest, report.authored_digest().unwrap_or_default()))
}

/// The model of a valid manifest; otherwise its diagnostics.
pub(crate) fn valid_manifest(report: &Report<'_>, name: &str, bytes: &[u8]) -> Result<Manifest, Diagnosed> {
    report.manifest().map_err(|source| Diagnosed { rendered: render_text(report, name, bytes), source })
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
fn policy_failure(e: PolicyError) -> ManifestCommandError {
    let flag = match e {
        PolicyError::MissingApplicationUid | PolicyError::ApplicationUidMismatch { .. } => "--application-uid",
        PolicyError::InvalidArtifactVersion { field: "cid", .. } => "--artifact-cid",
        PolicyError::InvalidArtifactVersion { .. } => "--artifact-digest",
        PolicyError::MissingArtifactVersion | PolicyError::PinnedArtifactMismatch { .. } => {
            "--artifact-cid and --artifact-digest"
        }
        PolicyError::RuntimeImageBuild => return ManifestCommandError::Release(e),
    };
    ManifestCommandError::Facts { source: e, flag }
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
