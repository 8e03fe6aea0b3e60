//! `svc manifest migrate`: the V5 equivalent of a V4 manifest, its notes, and the flags that
//! supply the V5 decisions V4 cannot (each blocking note names its flag).

use std::path::Path;
use std::process::ExitCode;

use manifest_core::migrate::{ExistingJobs, Migration, Note, NoteKind, Options, migrate_v4};
use manifest_core::{Manifest, render_text, validate as validate_document};

use crate::args::MigrateFormat;
use crate::manifest::{ManifestCommandError, read_input, valid_manifest};

/// The V5 decisions a V4 manifest cannot supply, one flag each.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MigrateDecisions {
    /// The JavaScript file the job runs, when the V4 `runtime.command` does not name it as
    /// `<engine> <file>`.
    #[arg(long, value_name = "FILE")]
    entrypoint: Option<String>,
    /// The service credits (micros) one job may spend: needed when the V4 manifest states none
    /// or spends native tokens (`maxRewardPlanckPerJob`, `maxNativeFeePlanckPerJob`); replaces
    /// its `maxServiceCreditMicrosPerGeneration` when given.
    #[arg(long, value_name = "MICROS")]
    per_job: Option<u64>,
    /// The V5 spend ceiling (micros) over `--rate-window`, instead of the one derived (what V4
    /// allowed: every job of every window spending its whole per-job amount for 30 days).
    #[arg(long, value_name = "MICROS")]
    rate: Option<u64>,
    /// The window of `--rate`, a V5 duration (default `30d`).
    #[arg(long, value_name = "DURATION", requires = "rate")]
    rate_window: Option<String>,
    /// Pin this artifact (`sha256:<64 hex>`) instead of the V4 release: the way on for an
    /// `aes256_gcm` bundle (give the bundle's digest unencrypted) or a runtime image.
    #[arg(long, value_name = "SHA256")]
    pin_artifact: Option<String>,
    /// What the running jobs do when a version replaces theirs: needed for a V4
    /// `cooperative_cease`; replaces the V4 mode when given.
    #[arg(long, value_enum, value_name = "MODE")]
    existing_jobs: Option<ExistingJobsArg>,
    /// A V5 placement minimum as NAME=VALUE (`memory=2GiB`, `storage=10GiB`,
    /// `cpuSingleCoreScore=N`, `cpuMultiCoreScore=N`; repeatable): the way on for V4 machine
    /// classes and evidence profiles.
    #[arg(long, value_name = "NAME=VALUE", value_parser = minimum)]
    minimum: Vec<(String, String)>,
    /// Leave out the V4 field at this pointer although V5 cannot say the same (repeatable):
    /// the pointer of a blocking note, or one above it (`/ingress`).
    #[arg(long, value_name = "POINTER")]
    drop: Vec<String>,
}

/// `--existing-jobs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ExistingJobsArg {
    /// The old job stops once its successor is ready (the nearest to a cooperative cease).
    #[value(name = "stop_when_successor_ready")]
    StopWhenSuccessorReady,
    /// The old job runs until its window ends.
    #[value(name = "run_until_scheduled_end")]
    RunUntilScheduledEnd,
}

fn minimum(flag: &str) -> Result<(String, String), String> {
    match flag.split_once('=') {
        Some((name, value)) if !name.is_empty() && !value.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("{flag:?} is not NAME=VALUE (`memory=2GiB`, `cpuMultiCoreScore=1200`)")),
    }
}

impl MigrateDecisions {
    /// Refuses what no V4 manifest could make sense of (exit 2): a `--drop` that is not a
    /// JSON pointer, or that names the whole document (it would leave out every blocking
    /// field unseen), and a minimum given twice (one value would be lost).
    fn check(&self) -> Result<(), ManifestCommandError> {
        let bad = |flag: String, why: &str| Err(ManifestCommandError::BadFlag { flag, why: why.to_owned() });
        for pointer in &self.drop {
            if pointer.is_empty() {
                return bad(
                    "--drop \"\"".into(),
                    "the empty pointer is the whole document: name the field to leave out, as its blocking note \
                     does (`--drop /ingress`)",
                );
            }
            if !pointer.starts_with('/') {
                return bad(
                    format!("--drop {pointer}"),
                    &format!(
                        "not a JSON pointer: write it as the blocking note names it, from the root (`--drop /{pointer}`)"
                    ),
                );
            }
        }
        for (i, (name, value)) in self.minimum.iter().enumerate() {
            if let Some((_, again)) = self.minimum[..i].iter().find(|(n, _)| n == name) {
                return bad(
                    format!("--minimum {name}={value}"),
                    &format!("{name} is given twice ({again} and {value}): give each minimum once"),
                );
            }
        }
        Ok(())
    }

    /// When every error of the migrated V5 document is at a field a flag filled: the first
    /// with its flag (a usage error, exit 2), since the V4 manifest is not at fault and the
    /// V5 document's lines are nowhere the user can see.
    fn blamed(&self, checked: &manifest_core::Report<'_>) -> Option<ManifestCommandError> {
        let mut filled: Vec<(String, String)> = Vec::new();
        let mut fill = |pointer: &str, flag: &str, value: Option<&String>| {
            if let Some(value) = value {
                let value = if value.is_empty() { "\"\"" } else { value };
                filled.push((pointer.to_owned(), format!("{flag} {value}")));
            }
        };
        fill("/runtime/entrypoint/file", "--entrypoint", self.entrypoint.as_ref());
        fill("/release/artifact/digest", "--pin-artifact", self.pin_artifact.as_ref());
        fill("/deployment/spend/rate/window", "--rate-window", self.rate_window.as_ref());
        for (name, value) in &self.minimum {
            filled.push((format!("/deployment/placement/minimums/{name}"), format!("--minimum {name}={value}")));
        }
        let flag_of = |pointer: &str| {
            filled.iter().find(|(p, _)| pointer == p || pointer.starts_with(&format!("{p}/"))).map(|(_, f)| f)
        };
        let errors: Vec<_> = checked.diagnostics.iter().filter(|d| d.is_error()).collect();
        let blamed: Vec<_> = errors.iter().map_while(|d| flag_of(&d.pointer).map(|f| (f, &d.message))).collect();
        let (flag, why) = blamed.first().filter(|_| blamed.len() == errors.len())?;
        Some(ManifestCommandError::BadFlag { flag: (*flag).clone(), why: (*why).clone() })
    }

    fn options(&self) -> Options {
        Options {
            entrypoint: self.entrypoint.clone(),
            per_job: self.per_job,
            rate: self.rate,
            rate_window: self.rate_window.clone(),
            pin_artifact: self.pin_artifact.clone(),
            existing_jobs: self.existing_jobs.map(|e| match e {
                ExistingJobsArg::StopWhenSuccessorReady => ExistingJobs::StopWhenSuccessorReady,
                ExistingJobsArg::RunUntilScheduledEnd => ExistingJobs::RunUntilScheduledEnd,
            }),
            minimums: self.minimum.clone(),
            drop: self.drop.clone(),
        }
    }
}

/// What `--format json` prints: the outcome, the V5 document when there is one, and every
/// note with its pointer (on a failure, inside the error answer: see
/// [`ManifestCommandError::json_notes`]).
#[derive(serde::Serialize)]
struct Answer<'a> {
    migrated: bool,
    manifest: &'a serde_json::Value,
    notes: &'a [Note],
}

/// Writes the V5 equivalent of the V4 manifest at `path` to standard output (checked by the
/// validator first) with its notes: on standard error as text, or in the one JSON object
/// with `--format json`.
pub(crate) fn migrate(
    path: &Path,
    decisions: &MigrateDecisions,
    format: MigrateFormat,
) -> Result<ExitCode, ManifestCommandError> {
    decisions.check()?;
    let (name, bytes) = read_input(path).map_err(ManifestCommandError::Input)?;
    let report = validate_document(&bytes);
    let manifest = match valid_manifest(&report, &name, &bytes) {
        Ok(manifest) => manifest,
        Err(diagnosed) => return Err(ManifestCommandError::NotMigratable { name, diagnosed }),
    };
    if matches!(manifest, Manifest::V5(_)) {
        return Err(ManifestCommandError::V5Already { name });
    }
    // A valid V4 manifest is strict JSON (no duplicate keys): serde reads it the same.
    let authored: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(source) => return Err(ManifestCommandError::NotJson { name, source }),
    };
    let Migration { manifest, notes, unused_drops } = migrate_v4(&authored, &decisions.options());
    if let Some(pointer) = unused_drops.into_iter().next() {
        // What `--drop` could name: the fields still blocking with the other flags given,
        // and whose note offers `--drop` (not those a flag such as `--per-job` unblocks).
        let undropped = Options { drop: Vec::new(), ..decisions.options() };
        let blocking: Vec<String> = migrate_v4(&authored, &undropped)
            .notes
            .into_iter()
            .filter(|n| n.kind == NoteKind::Blocking && n.fix.contains("--drop "))
            .map(|n| n.pointer)
            .collect();
        let blocking = if blocking.is_empty() { "none: nothing needs --drop".to_owned() } else { blocking.join(", ") };
        return Err(ManifestCommandError::UnusedDrop { name, pointer, blocking });
    }
    if format == MigrateFormat::Yaml {
        eprint!("{}", notes_text(&notes));
    }
    let Some(document) = manifest else {
        let blocking = notes.iter().filter(|n| n.kind == NoteKind::Blocking).count();
        return Err(ManifestCommandError::Blocked { name, blocking, notes });
    };
    let text = match format {
        MigrateFormat::Yaml => manifest_core::emit::to_yaml(&document, manifest_core::emit::V5_KEY_ORDER),
        MigrateFormat::Json => serde_json::to_string_pretty(&document).unwrap_or_default() + "\n",
    };
    // What is written must validate as V5 (a V4 value beyond a V5 bound, or a flag's value,
    // shows here).
    let checked = validate_document(text.as_bytes());
    if !checked.is_valid() {
        if let Some(bad) = decisions.blamed(&checked) {
            return Err(bad);
        }
        let rendered = render_text(&checked, "the V5 document", text.as_bytes());
        return Err(ManifestCommandError::MigratedInvalid { name, rendered, notes });
    }
    match format {
        MigrateFormat::Yaml => {
            print!("{text}");
            eprintln!(
                "{name}: migrated to Manifest V5 ({} note{}); check it with `svc manifest validate`",
                notes.len(),
                if notes.len() == 1 { "" } else { "s" }
            );
        }
        MigrateFormat::Json => {
            crate::output::print_json(&Answer { migrated: true, manifest: &document, notes: &notes })
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The notes for people: kind, pointer and why, then what to do.
fn notes_text(notes: &[Note]) -> String {
    let mut text = String::new();
    for note in notes {
        let kind = match note.kind {
            NoteKind::Changed => "changed",
            NoteKind::Dropped => "dropped",
            NoteKind::Blocking => "blocking",
        };
        text.push_str(&format!("{kind:<8} {}: {}\n         = {}\n", note.pointer, note.why, note.fix));
    }
    text
}
