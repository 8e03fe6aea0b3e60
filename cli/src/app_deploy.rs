//! `svc app deploy [DIR]`: from an application directory to a running job in one command.
//!
//! 1. Reads the manifest (`DIR/manifest.yaml`, `.yml` or `.json`, or `--manifest FILE`) and
//!    validates it here first: an invalid one is printed as `svc manifest validate` prints it,
//!    and nothing is sent.
//! 2. Bundles DIR ([`crate::bundle`]: `.svcignore`, hidden entries, `.git`, the manifest and
//!    its secrets' files left out) and lists the files with their sizes.
//! 3. Creates the application if the organization has none of that ID.
//! 4. Uploads the files (`POST /api/applications/{id}/artifacts`): the service stores them
//!    by digest and records them as the application's newest accepted version, which a
//!    `release: {mode: source}` resolves to.
//! 5. Publishes: a dry run, then the publication fenced with the active version the dry run
//!    saw (`expectedActivePointerVersion`, as `svc policy publish --expect-version`).
//! 6. Follows the executions (`/api/applications/{id}/executions`) until the job runs (a
//!    `once` job: until the application settles), or is refused or held, printing each
//!    launch's outcome, and for a refusal its reason and the fix.
//!
//! Exit codes: 0 running (or settled after a clean run); 1 refused, held, failed or still not
//! running at `--timeout`; 2 usage, an unreadable directory or the service unreachable; 130
//! on Ctrl-C, saying what was left (the published application runs on).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use base64::Engine as _;
use hyper::Method;
use manifest_core::Manifest;
use serde_json::{Value, json};

use crate::args::{OutputFormat, Remote};
use crate::bundle::{self, Exclude};
use crate::client::Client;
use crate::failure::Failure;
use crate::remote::{RemoteError, client, send};

const EXIT_REFUSED: u8 = 1;
const EXIT_USAGE: u8 = 2;

/// The manifest names looked for in DIR, in order.
const MANIFEST_NAMES: [&str; 3] = ["manifest.yaml", "manifest.yml", "manifest.json"];

/// How often the executions are read while following.
const POLL: Duration = Duration::from_millis(500);

/// How long a hold or a failure must stay before it is the answer: what the projection says
/// just after a publication may still be the scheduler's decision on the version before (a
/// publication wakes it, and it decides within milliseconds).
const SETTLE: Duration = Duration::from_secs(3);

/// Arguments of `svc app deploy`.
pub(crate) struct AppDeploy<'a> {
    /// The application directory.
    pub(crate) dir: &'a Path,
    /// The application's ID, if not the manifest's `applicationId`.
    pub(crate) app: Option<&'a str>,
    /// The manifest, if not found in DIR.
    pub(crate) manifest: Option<&'a Path>,
    /// Return once published.
    pub(crate) no_wait: bool,
    /// How long to follow, seconds.
    pub(crate) timeout: u64,
    /// The service.
    pub(crate) remote: &'a Remote,
}

/// Why `svc app deploy` stopped before it followed anything: said once, by
/// [`crate::failure::report`], as `svc: ...`.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AppDeployError {
    /// The service, the manifest's reading or validation (as `svc policy publish` says them).
    #[error(transparent)]
    Remote(#[from] RemoteError),
    /// DIR is not a directory.
    #[error("{} is not a directory: {hint}", dir.display())]
    NotADirectory {
        /// DIR.
        dir: PathBuf,
        /// What was meant, most likely.
        hint: String,
    },
    /// No manifest in DIR, nor `--manifest`.
    #[error(
        "no manifest in {}: write {} (Manifest V5 with `release: {{mode: source}}`), or pass --manifest FILE",
        dir.display(),
        dir.join("manifest.yaml").display()
    )]
    NoManifest {
        /// DIR.
        dir: PathBuf,
    },
    /// A Manifest V4.
    #[error(
        "{} is a Manifest V4: `svc app deploy` publishes a Manifest V5 whose `release: {{mode: source}}` runs the directory's files (V4: `svc policy publish`)",
        manifest.display()
    )]
    V4 {
        /// The manifest.
        manifest: PathBuf,
    },
    /// A pinned release.
    #[error(
        "{} pins the artifact {digest}: `svc app deploy` runs the directory's files, with `release: {{mode: source}}`; publish a pinned release with `svc policy publish`",
        manifest.display()
    )]
    Pinned {
        /// The manifest.
        manifest: PathBuf,
        /// The artifact it pins.
        digest: String,
    },
    /// `--app` names another application than the manifest.
    #[error(
        "{} is the manifest of application \"{app}\", not \"{asked}\": change its `applicationId` (or drop --app); nothing was sent",
        manifest.display()
    )]
    AppMismatch {
        /// The manifest.
        manifest: PathBuf,
        /// Its `applicationId`.
        app: String,
        /// `--app`.
        asked: String,
    },
    /// The directory's files cannot be sent.
    #[error(transparent)]
    Bundle(bundle::BundleError),
    /// Nothing left to send.
    #[error("{} has no file to send (after {} and the defaults)", dir.display(), bundle::IGNORE_FILE)]
    EmptyBundle {
        /// DIR.
        dir: PathBuf,
    },
    /// Another deploy of the application published meanwhile, so this one published nothing.
    #[error(
        "another deploy of {app} published {version} meanwhile, so this one published nothing (it was fenced \
         on version {seen}): that version's job is the one that runs (`svc app executions {app}`); to publish \
         these files over it, run `svc app deploy {}` again",
        dir.display()
    )]
    DeployedMeanwhile {
        /// The application.
        app: String,
        /// What is active now (`policy version N`, or `a newer policy version`).
        version: String,
        /// The active version this deploy was fenced on.
        seen: u64,
        /// DIR.
        dir: PathBuf,
    },
}

impl Failure for AppDeployError {
    fn exit_code(&self) -> u8 {
        match self {
            AppDeployError::Remote(e) => e.exit_code(),
            AppDeployError::Bundle(bundle::BundleError::TooManyFiles { .. } | bundle::BundleError::TooLarge { .. })
            | AppDeployError::DeployedMeanwhile { .. } => EXIT_REFUSED,
            _ => EXIT_USAGE,
        }
    }

    fn envelope(&self) -> svc_http::ErrorBody {
        let code = match self {
            AppDeployError::Remote(e) => return e.envelope(),
            AppDeployError::NotADirectory { .. } => "not_a_directory",
            AppDeployError::NoManifest { .. } => "no_manifest",
            AppDeployError::V4 { .. } | AppDeployError::Pinned { .. } => "not_a_source_release",
            AppDeployError::AppMismatch { .. } => "application_id_mismatch",
            AppDeployError::Bundle(_) => "bundle_refused",
            AppDeployError::EmptyBundle { .. } => "empty_bundle",
            AppDeployError::DeployedMeanwhile { .. } => "deployed_meanwhile",
        };
        svc_http::ErrorBody::new(code, self.to_string())
    }

    fn text(&self) -> String {
        match self {
            AppDeployError::Remote(e) => e.text(),
            _ => crate::failure::line("svc", self),
        }
    }
}

/// What people read as it happens: standard output, or standard error under `--format json`
/// (whose standard output is the one JSON answer).
struct Say {
    json: bool,
}

impl Say {
    fn line(&self, text: &str) {
        if self.json {
            eprintln!("{text}");
        } else {
            crate::output::say(text);
        }
    }
}

/// The first of DIR's manifest names that exists.
pub(crate) fn find_manifest(dir: &Path) -> Option<PathBuf> {
    MANIFEST_NAMES.iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

/// `svc app deploy`
pub(crate) fn deploy(args: &AppDeploy<'_>) -> Result<ExitCode, AppDeployError> {
    let say = Say { json: args.remote.format == OutputFormat::Json };
    let dir = args.dir;
    if !dir.is_dir() {
        let manifest = dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| MANIFEST_NAMES.contains(&n));
        let parent = dir.parent().map(Path::display).map(|p| p.to_string()).filter(|p| !p.is_empty());
        let hint = match parent {
            Some(parent) if manifest => format!("it is the manifest: give its directory, `svc app deploy {parent}`"),
            _ if dir.exists() => "give the application's directory, the one that holds manifest.yaml".to_owned(),
            _ => "it does not exist; give the application's directory, the one that holds manifest.yaml".to_owned(),
        };
        return Err(AppDeployError::NotADirectory { dir: dir.to_owned(), hint });
    }
    let Some(manifest_path) = args.manifest.map(Path::to_path_buf).or_else(|| find_manifest(dir)) else {
        return Err(AppDeployError::NoManifest { dir: dir.to_owned() });
    };
    let bytes = fs_err::read(&manifest_path).map_err(RemoteError::Unreadable)?;
    let report = crate::remote::valid_here(&bytes, &manifest_path.display().to_string())?;
    let Ok(Manifest::V5(manifest)) = report.manifest() else {
        return Err(AppDeployError::V4 { manifest: manifest_path });
    };
    if let manifest_core::v5::release::Release::Pinned { artifact } = &manifest.release {
        return Err(AppDeployError::Pinned { manifest: manifest_path, digest: artifact.digest.to_string() });
    }
    // The manifest names its application (the publication refuses another): `--app` says
    // which one is meant, and a different one is refused here, before anything is sent.
    let app = manifest.application_id.clone();
    if let Some(asked) = args.app.filter(|a| *a != app) {
        return Err(AppDeployError::AppMismatch { manifest: manifest_path, app, asked: asked.to_owned() });
    }
    let once = matches!(manifest.execution, manifest_core::v5::execution::Execution::Once {});
    let secret_files: Vec<String> = manifest
        .configuration
        .secrets
        .iter()
        .filter_map(|s| match &s.destination {
            manifest_core::v5::configuration::SecretDestination::File { path } => Some(path.clone()),
            manifest_core::v5::configuration::SecretDestination::Environment { .. } => None,
        })
        .collect();

    // The files, listed before anything is sent.
    let files =
        bundle::read(dir, &Exclude::of(dir, Some(&manifest_path), &secret_files)).map_err(AppDeployError::Bundle)?;
    if files.files.is_empty() {
        return Err(AppDeployError::EmptyBundle { dir: dir.to_owned() });
    }
    let ignore = if dir.join(bundle::IGNORE_FILE).is_file() { bundle::IGNORE_FILE } else { "no .svcignore" };
    say.line(&format!("files of {} ({ignore}):", dir.display()));
    for line in files.listing().lines() {
        say.line(line);
    }

    let client = client(args.remote.server.as_deref(), &args.remote.trust, true)?;
    let seen = ensure_application(&client, &app, &say)?;
    let upload = upload(&client, &app, &files)?;
    let digest = upload["digest"].as_str().unwrap_or_default().to_owned();
    say.line(&format!("uploaded {digest}: the source release of {app}"));

    // A dry run, then the publication fenced with the active version it saw.
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let path = format!("/api/applications/{app}/policy-versions");
    let response = send(&client, Method::POST, &path, Some(json!({ "manifest": text, "dryRun": true })))?;
    let dry = refused_unless_ok(&response).map_err(|mut e| {
        let diagnostics = response.json()["error"]["diagnostics"].clone();
        if let RemoteError::Refused { fix, .. } = &mut e
            && diagnostics.as_array().into_iter().flatten().any(|d| d["code"] == "once_application_settled")
        {
            *fix = Some(format!(
                "fix: {app} is a `once` application that ran, and it does not run again; to run these files once \
                 more, give {} a new `applicationId` (such as `{app}-2`), then `svc app deploy {}` again",
                manifest_path.display(),
                dir.display()
            ));
        }
        e
    })?;
    say.line(&format!("dry run: would publish policy version {} (active version {seen})", dry["policyVersion"]));
    let body = json!({ "manifest": text, "expectedActivePointerVersion": seen });
    let response = send(&client, Method::POST, &path, Some(body))?;
    if response.status == 409 && response.json()["error"]["code"] == "active_pointer_version_conflict" {
        // The same deploy run twice at once (or a publication meanwhile): the other one won.
        return Err(lost_the_race(&client, &app, dir, seen));
    }
    let published = refused_unless_ok(&response)?;
    let version = published["policyVersion"].as_u64().unwrap_or(0);
    say.line(&format!("published policy version {version} of {app}"));

    let mut result = json!({
        "applicationId": app,
        "digest": digest,
        "cid": upload["cid"],
        "files": files.files.iter().map(|(p, b)| json!({"path": p, "bytes": b.len()})).collect::<Vec<_>>(),
        "policyVersion": version,
    });
    let outcome = if args.no_wait {
        say.line(&format!("not waiting: follow it with `svc app executions {app} --watch`"));
        Outcome { state: "published", exit: 0, reason: None, fix: None }
    } else {
        let follow =
            Follow { client: &client, app: &app, version, once, dir, per_job: &manifest.deployment.spend.per_job };
        follow.run(Duration::from_secs(args.timeout), &say)
    };
    result["outcome"] = json!(outcome.state);
    if let Some(reason) = &outcome.reason {
        result["reason"] = reason.clone();
    }
    if let Some(fix) = &outcome.fix {
        result["fix"] = json!(fix);
    }
    if say.json {
        crate::output::print_json(&result);
    }
    Ok(ExitCode::from(outcome.exit))
}

/// Creates `app` unless the organization has it; its active version as seen now (the
/// publication's fence).
fn ensure_application(client: &Client, app: &str, say: &Say) -> Result<u64, RemoteError> {
    let path = format!("/api/applications/{app}");
    let response = send(client, Method::GET, &path, None)?;
    let view = if response.status == 404 && response.json()["error"]["code"] == "application_not_found" {
        let body = Some(json!({ "applicationId": app }));
        let created = send(client, Method::POST, "/api/applications", body)?;
        if created.status == 409 && created.json()["error"]["code"] == "application_exists" {
            // Created meanwhile (the same deploy run twice at once): it is there to use.
            answer(client, Method::GET, &path, None)?
        } else {
            let created = refused_unless_ok(&created)?;
            say.line(&format!("created application {app}"));
            created
        }
    } else {
        refused_unless_ok(&response)?
    };
    Ok(view["activePointerVersion"].as_u64().unwrap_or(0))
}

/// The publication's fence refused it: another publication of `app` came after the active
/// version `seen` (another `svc app deploy` of it, run at the same time). Says so, what is
/// active now and what to do; exit 1 (with `--format json`, the refusal's envelope).
fn lost_the_race(client: &Client, app: &str, dir: &Path, seen: u64) -> AppDeployError {
    let active = send(client, Method::GET, &format!("/api/applications/{app}"), None)
        .ok()
        .filter(|r| r.status == 200)
        .and_then(|r| r.json()["activePointerVersion"].as_u64());
    let version = active.map_or_else(|| "a newer policy version".to_owned(), |v| format!("policy version {v}"));
    AppDeployError::DeployedMeanwhile { app: app.to_owned(), version, seen, dir: dir.to_owned() }
}

/// Uploads the files; the service's answer.
fn upload(client: &Client, app: &str, files: &bundle::Bundle) -> Result<Value, RemoteError> {
    let encoded: BTreeMap<&str, String> =
        files.files.iter().map(|(p, b)| (p.as_str(), base64::engine::general_purpose::STANDARD.encode(b))).collect();
    let executable: BTreeSet<&str> = files.executable.iter().map(String::as_str).collect();
    let mut body = json!({ "files": encoded });
    if !executable.is_empty() {
        body["executable"] = json!(executable);
    }
    answer(client, Method::POST, &format!("/api/applications/{app}/artifacts"), Some(body))
}

/// Sends a request; its JSON answer, or the refusal (exit 1).
fn answer(client: &Client, method: Method, path: &str, body: Option<Value>) -> Result<Value, RemoteError> {
    let response = send(client, method, path, body)?;
    refused_unless_ok(&response)
}

fn refused_unless_ok(response: &crate::client::Response) -> Result<Value, RemoteError> {
    if (200..300).contains(&response.status) {
        return Ok(response.json());
    }
    Err(RemoteError::refused(response, EXIT_REFUSED))
}

/// How following ended.
struct Outcome {
    /// `running`, `settled`, `refused`, `failed`, `timeout`, `interrupted`, `published`.
    state: &'static str,
    exit: u8,
    /// The projection's reason (`{code, message}`).
    reason: Option<Value>,
    /// What to do about it.
    fix: Option<String>,
}

/// Following one published version's executions.
struct Follow<'a> {
    client: &'a Client,
    app: &'a str,
    version: u64,
    once: bool,
    dir: &'a Path,
    per_job: &'a str,
}

impl Follow<'_> {
    fn run(&self, timeout: Duration, say: &Say) -> Outcome {
        // Ctrl-C ends the wait, not the process: say what is left. Registering is enough
        // (the loop reads `interrupted()`); the future itself is not needed.
        drop(crate::output::graceful_shutdown());
        let app = self.app;
        say.line(&format!(
            "waiting for {app} to {} (at most {} s; Ctrl-C stops waiting, not the application)",
            if self.once { "run and settle" } else { "run" },
            timeout.as_secs()
        ));
        let deadline = Instant::now() + timeout;
        let path = format!("/api/applications/{app}/executions?limit=20");
        let mut told: BTreeSet<(String, String)> = BTreeSet::new();
        let mut last = Value::Null;
        // Since when the projection has said the same hold or failure.
        let mut stuck: Option<(String, Instant)> = None;
        loop {
            if crate::output::interrupted() {
                say.line(&format!(
                    "stopped waiting: {app} stays published (policy version {}) and the service runs it on; follow it with `svc app executions {app} --watch`",
                    self.version
                ));
                return Outcome {
                    state: "interrupted",
                    exit: crate::output::EXIT_INTERRUPTED,
                    reason: None,
                    fix: None,
                };
            }
            let view = match send(self.client, Method::GET, &path, None) {
                Ok(r) if (200..300).contains(&r.status) => r.json(),
                // A moment without the service (a restart): try again until the deadline.
                _ => Value::Null,
            };
            if !view.is_null() {
                self.tell_new(&view, &mut told, say);
                last = view;
            }
            let state = last["convergence"]["state"].as_str().unwrap_or("");
            let reason = last["convergence"]["reason"].clone();
            let code = reason["code"].as_str().unwrap_or("");
            let ours = |e: &&Value| e["policyVersion"].as_u64() == Some(self.version);
            let recent: Vec<&Value> = last["recent"].as_array().into_iter().flatten().filter(ours).collect();
            if state == "settled" {
                if let Some(failed) = recent.iter().find(|e| e["state"] == "failed") {
                    return self.failed(failed["reason"].clone(), say);
                }
                // Published while an earlier version's job ran (the same deploy run twice at
                // once): that job is the application's one run; this version has none.
                let earlier = last["recent"].as_array().into_iter().flatten().find_map(|e| e["policyVersion"].as_u64());
                match earlier.filter(|_| recent.is_empty()) {
                    Some(v) => say.line(&format!(
                        "{app} settled: its once job ran and exited, with policy version {v}, published just before \
                         this one; a `once` application runs once, so version {} does not run",
                        self.version
                    )),
                    None => say.line(&format!("{app} settled: its once job ran and exited")),
                }
                return Outcome { state: "settled", exit: 0, reason: None, fix: None };
            }
            let held = state == "blocked" || (state == "idle" && code == "waiting_after_failure");
            let key = format!("{state} {code}");
            stuck = match stuck.take() {
                Some((k, since)) if held && k == key => Some((k, since)),
                _ if held => Some((key, Instant::now())),
                _ => None,
            };
            if stuck.as_ref().is_some_and(|(_, since)| since.elapsed() >= SETTLE) {
                return if state == "blocked" { self.refused(reason, &recent, say) } else { self.failed(reason, say) };
            }
            let running = last["slots"].as_array().into_iter().flatten().any(|s| {
                matches!(s["state"].as_str(), Some("running" | "ready"))
                    && s["policyVersion"].as_u64() == Some(self.version)
            });
            if running && !self.once {
                say.line(&format!("{app} runs: `svc app executions {app}` shows its jobs"));
                return Outcome { state: "running", exit: 0, reason: None, fix: None };
            }
            if Instant::now() >= deadline {
                let why = reason["message"].as_str().map(|m| format!(" ({m})")).unwrap_or_default();
                let state = if state.is_empty() { "not yet known" } else { state };
                let fix = format!("it stays published; follow it with `svc app executions {app} --watch`");
                say.line(&format!("{app} is {state}{why} after {} s; {fix}", timeout.as_secs()));
                return Outcome { state: "timeout", exit: EXIT_REFUSED, reason: Some(reason), fix: Some(fix) };
            }
            std::thread::sleep(POLL);
        }
    }

    /// Prints each of this version's executions as its state changes, oldest first.
    fn tell_new(&self, view: &Value, told: &mut BTreeSet<(String, String)>, say: &Say) {
        let recent = view["recent"].as_array().map_or(&[][..], Vec::as_slice);
        for e in recent.iter().rev().filter(|e| e["policyVersion"].as_u64() == Some(self.version)) {
            let (Some(id), Some(state)) = (e["executionId"].as_str(), e["state"].as_str()) else { continue };
            if !told.insert((id.to_owned(), state.to_owned())) {
                continue;
            }
            let mut line =
                format!("slot {} generation {} attempt {}: {state}", e["slot"], e["generation"], e["attempt"]);
            if let Some(p) = e["processorId"].as_str().filter(|_| state == "running") {
                line += &format!(" on {p}");
            }
            if let Some(m) = e["reason"]["message"].as_str() {
                line += &format!(" ({m})");
            }
            say.line(&line);
        }
    }

    /// The job ran and failed.
    fn failed(&self, reason: Value, say: &Say) -> Outcome {
        let app = self.app;
        let why = reason["message"].as_str().unwrap_or("no reason recorded");
        let fix = format!(
            "read its output with `svc app logs {app}`, fix the program in {}, then `svc app deploy {}` again",
            self.dir.display(),
            self.dir.display()
        );
        say.line(&format!("{app}'s job failed: {why}"));
        say.line(&format!("fix: {fix}"));
        Outcome { state: "failed", exit: EXIT_REFUSED, reason: Some(reason), fix: Some(fix) }
    }

    /// The application is held or its launches refused: the reason and the fix.
    fn refused(&self, reason: Value, recent: &[&Value], say: &Say) -> Outcome {
        let app = self.app;
        let code = reason["code"].as_str().unwrap_or("");
        let message = reason["message"].as_str().unwrap_or("no reason given");
        let dir = self.dir.display();
        let org = self.organization();
        let fix = match code {
            "spend_authority_missing" => format!(
                "a service administrator gives {org} a spend authority on the service's host: `svc admin spend-authority set --data-dir DATA_DIR --org {org} --micros {}` ({}, what one job of {app} may spend; DATA_DIR: its `svc serve --data-dir`); the service launches within 10 s, and `svc app executions {app} --watch` shows it",
                self.per_job,
                self.per_job_usd()
            ),
            // The organization's guard: an authority of `perJob` lets every launch the
            // manifest allows through. Any other limit is the manifest's own.
            "spend_authority_exceeded" if message.contains("the organization's spend authority") => format!(
                "a service administrator raises {org}'s spend authority to what one job of {app} may spend, {} (its `deployment.spend.perJob`): `svc admin spend-authority set --data-dir DATA_DIR --org {org} --micros {}`; then `svc app deploy {dir}` again",
                self.per_job_usd(),
                self.per_job
            ),
            "spend_authority_exceeded" => format!(
                "raise the limit it names in the manifest's `deployment.spend`, or make a job cheaper (a shorter `deployment.schedule.duration`), then `svc app deploy {dir}` again"
            ),
            "secret_missing" => format!(
                "a service administrator provisions it: `svc admin secret provision --data-dir DATA_DIR --org {org} --app {app} --secret-id ID --value-file FILE`; the service launches within 10 s"
            ),
            _ => {
                // Launches refused until the retries ran out: the last refusal says why.
                let last = recent.iter().find(|e| e["state"] == "refused");
                match last.and_then(|e| e["reason"]["code"].as_str()) {
                    Some("artifact_refused") => format!("upload the files again: `svc app deploy {dir}`"),
                    Some("no_processor") => {
                        "the service has no processor to run it: start `svc serve` with `--processors N` (N at least 1)"
                            .to_owned()
                    }
                    _ => format!("see `svc app executions {app}`; after the fix, `svc app deploy {dir}` again"),
                }
            }
        };
        say.line(&format!("{app} is refused: {message}"));
        say.line(&format!("fix: {fix}"));
        Outcome { state: "refused", exit: EXIT_REFUSED, reason: Some(reason), fix: Some(fix) }
    }

    /// The manifest's `spend.perJob` in dollars (`USD 0.10`), or as written if it is not a
    /// number of micros.
    fn per_job_usd(&self) -> String {
        self.per_job.parse::<u128>().map_or_else(|_| self.per_job.to_owned(), svc_execution::money::usd)
    }

    /// The caller's organization (its capabilities statement), or `ORG`.
    fn organization(&self) -> String {
        send(self.client, Method::GET, "/api/capabilities", None)
            .ok()
            .filter(|r| (200..300).contains(&r.status))
            .and_then(|r| r.json()["organization"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "ORG".to_owned())
    }
}
