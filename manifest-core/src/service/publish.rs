//! `POST /api/applications/{id}/policy-versions`: the request body ([`request`]), and the
//! publication itself: layers 1-2, then layers 3-7 and the fence
//! (in the write transaction, or on a snapshot the write checks), then in one write
//! transaction the immutable version, the pointer and status, activity and the scheduler
//! wakeup; a dry run decides all of it and writes nothing.

use std::sync::Arc;

use axum::body::Bytes;
use serde::Serialize;

use crate::diagnostic::Diagnostic;
use crate::service::http::rejection::{ApiError, Denied, Rejection};
use crate::service::layers;

use crate::service::clock::{now, now_ms};
use crate::service::store::{
    Activity, Application, Caller, DecidedOn, DecidedWrite, LayerReads, OnRuntime, Organization, PolicyVersion,
    PublicationInputs, ReadAhead, Status, StoreError, Transaction,
};
use crate::service::{FaultPoint, State};
use crate::validate::validate;

mod request;

pub(crate) use request::{MAX_REASON_CHARS, PublishRequest, parse_request};

/// The publication result (201 committed, 200 dry run).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PublishResponse {
    pub(crate) application_id: String,
    pub(crate) policy_version: u64,
    pub(crate) active_pointer_version: u64,
    pub(crate) status: &'static str,
    pub(crate) authored_digest: String,
    pub(crate) policy_digest: String,
    pub(crate) diagnostics: Vec<Diagnostic>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) dry_run: Option<bool>,
}

fn refused(diagnostics: Vec<Diagnostic>) -> ApiError {
    Rejection::ManifestInvalid(diagnostics).into()
}

/// Bodies up to this size are read and validated on the async runtime: a manifest of a few
/// KiB takes well under a millisecond, and the hop to the blocking pool would cost the
/// publication path more than the work itself (docs/performance.md, "Publication under load").
const INLINE_BODY_BYTES: usize = 16 * 1024;

/// Reads a publication's body and runs layers 1-2 ([`prepare`]). A body over
/// [`INLINE_BODY_BYTES`] is checked off the async runtime, at most one per core at once
/// (`State::validations`): a 1 MiB manifest keeps a core busy for a while, on the runtime it
/// would stall every other request, and more at once than there are cores would only add
/// memory (each holds its document, tree and diagnostics). The permit goes with the work, so
/// a client that hangs up does not free it early.
pub(crate) async fn prepare_body(
    state: Arc<State>,
    caller: Caller,
    application_id: String,
    body: Bytes,
) -> Result<Prepared, ApiError> {
    if body.len() <= INLINE_BODY_BYTES {
        let request = parse_request(&body)?;
        return match check(&state, &caller, &application_id, &request)? {
            Ok(prepared) => Ok(prepared),
            // An invalid manifest reads the store (the 404 goes first): on a database across
            // a network that is a round trip, which stays off the async workers.
            Err(diagnostics) if state.store.is_local() => {
                Err(not_found_or(&state, &caller, &application_id, diagnostics))
            }
            Err(diagnostics) => {
                tokio::task::spawn_blocking(move || Err(not_found_or(&state, &caller, &application_id, diagnostics)))
                    .await
                    .unwrap_or_else(|_| Err(not_checked()))
            }
        };
    }
    let validations = state.validations.clone();
    let work = move || parse_request(&body).and_then(|request| prepare(&state, &caller, &application_id, &request));
    let permit = validations.acquire_owned().await.map_err(|_| not_checked())?;
    tokio::task::spawn_blocking(move || {
        let prepared = work();
        drop(permit);
        prepared
    })
    .await
    .unwrap_or_else(|_| Err(not_checked()))
}

fn not_checked() -> ApiError {
    ApiError::internal("the publication could not be checked; try again")
}

/// Checks a publication and runs layers 1-2 (no write lock held): the owned publication the
/// write needs. Short for a small body; see [`prepare_body`].
pub(crate) fn prepare(
    state: &State,
    caller: &Caller,
    application_id: &str,
    request: &PublishRequest<'_>,
) -> Result<Prepared, ApiError> {
    check(state, caller, application_id, request)?
        .map_err(|diagnostics| not_found_or(state, caller, application_id, diagnostics))
}

/// The answer to an invalid manifest: a 404 goes before the manifest's problems if the URL
/// names no application of the caller's organization (for a valid manifest the write looks
/// the application up anyway). Reads the store.
fn not_found_or(state: &State, caller: &Caller, application_id: &str, diagnostics: Vec<Diagnostic>) -> ApiError {
    match state.store.read().and_then(|mut tx| tx.application(caller.organization.id, application_id)) {
        Ok(None) => Rejection::application_not_found(application_id).into(),
        Ok(Some(_)) => refused(diagnostics),
        Err(e) => e.into(),
    }
}

/// [`prepare`] without the store: the publication, or an invalid manifest's diagnostics.
fn check(
    state: &State,
    caller: &Caller,
    application_id: &str,
    request: &PublishRequest<'_>,
) -> Result<Result<Prepared, Vec<Diagnostic>>, ApiError> {
    if !caller.role.can_publish() {
        return Err(Rejection::Forbidden(Denied::Publish { role: caller.role.as_str() }).into());
    }
    let report = validate(request.manifest.as_bytes());
    let manifest = match report.manifest() {
        Ok(m) => m,
        Err(_) => return Ok(Err(report.diagnostics)),
    };
    let authored = match &report.document {
        Some(root) => crate::digest::canonical_bytes(root, request.manifest.len())
            .and_then(|b| String::from_utf8(b).ok())
            .or_else(|| serde_json_canonicalizer::to_string(&crate::tree::Authored(root)).ok())
            .unwrap_or_default(),
        None => String::new(),
    };
    Ok(Ok(Prepared {
        manifest,
        schema_version: report.schema_version.unwrap_or(0),
        authored_digest: report.authored_digest().unwrap_or_default(),
        authored,
        diagnostics: report.diagnostics,
        caller: caller.clone(),
        application_id: application_id.to_owned(),
        dry_run: request.dry_run,
        pause_reason: request.pause_reason.clone(),
        expected: request.expected_active_pointer_version,
        schema_pairs: state.schema_pairs,
        fault: state.fault,
    }))
}

/// Publishes (or previews) a prepared publication. On a local store (SQLite) layers 3-7 and
/// the write run as one unit of grouped write work, so concurrent publications share one
/// commit. On a database across a network, layers 3-7 run first on reads, in parallel with
/// other publications and off the writers' lock; a dry run or a refusal is answered from
/// them, and the write is one call that takes the lock and checks that what they read still
/// holds ([`crate::service::store::DecidedOn`]), or else the publication runs again under
/// the lock, in grouped work. Answers once the commit is durable.
pub(crate) async fn publish(state: &State, prepared: Prepared) -> Result<(u16, PublishResponse), ApiError> {
    let prepared = if state.store.is_local() {
        prepared
    } else {
        match off_the_lock(state, prepared).await? {
            Ok(answer) => {
                if answer.0 == 201 {
                    state.scheduler.wake();
                }
                return Ok(answer);
            }
            Err(prepared) => prepared,
        }
    };
    let (result_tx, result_rx) = tokio::sync::oneshot::channel();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    state.store.write_grouped(
        Box::new(move |tx| {
            let result = prepared.commit(tx);
            let keep = matches!(result, Ok((201, _)));
            let _ = result_tx.send(result);
            keep
        }),
        Box::new(move |outcome| {
            let _ = done_tx.send(outcome);
        }),
    );
    let gone = || ApiError::internal("the publication's grouped write was dropped before it ran");
    done_rx.await.map_err(|_| gone())??;
    let result = result_rx.await.map_err(|_| gone())?;
    if matches!(result, Ok((201, _))) {
        // Committed: the scheduler launches what the new version asks for now.
        state.scheduler.wake();
    }
    result
}

/// On a database across a network: layers 3-7 off the writers' lock, and the checked write.
/// The answer, or the publication back if it is to run under the lock. A small manifest is
/// decided on the async runtime; a large one (layers 3-7 take a while) or one that needs
/// more reads, on the blocking pool.
async fn off_the_lock(state: &State, prepared: Prepared) -> Result<Result<(u16, PublishResponse), Prepared>, ApiError> {
    if let Some(statements) = state.store.on_runtime()
        && prepared.authored.len() <= INLINE_BODY_BYTES
    {
        match prepared.publish_on_runtime(statements).await? {
            OnTheRuntime::Answered(answer) => return Ok(Ok(answer)),
            OnTheRuntime::UnderTheLock => return Ok(Err(prepared)),
            OnTheRuntime::NeedsReads => {}
        }
    }
    let store = state.store.clone();
    let decided = tokio::task::spawn_blocking(move || {
        let answer = prepared.publish_off_the_lock(&*store);
        (prepared, answer)
    })
    .await;
    let Ok((prepared, answer)) = decided else { return Err(not_checked()) };
    Ok(answer?.ok_or(prepared))
}

/// What layers 3-7 decided off the writers' lock.
enum OffTheLock {
    /// A dry run's answer.
    Answered(PublishResponse),
    /// The checked write (boxed: it holds the version), and the answer before it is numbered.
    Write(Box<(DecidedOn, DecidedWrite)>, PublishResponse),
}

/// Where a publication decided on the async runtime stands.
enum OnTheRuntime {
    /// Answered (a dry run, or written).
    Answered((u16, PublishResponse)),
    /// What it was decided on changed: it runs again under the writers' lock.
    UnderTheLock,
    /// Layers 3-7 asked for what was not read ahead: it is decided on the blocking pool.
    NeedsReads,
}

/// Layer reads for what [`PublicationInputs`] does not hold, on the async runtime: none is
/// made there; each is noted, and the publication is decided again on the blocking pool.
#[derive(Default)]
struct NotReadAhead {
    asked: bool,
}

impl NotReadAhead {
    fn ask<T>(&mut self) -> Result<T, StoreError> {
        self.asked = true;
        Err(StoreError::Backend("a read that was not made ahead; decided again on the blocking pool".into()))
    }
}

impl LayerReads for NotReadAhead {
    fn grants(&mut self, _: i64) -> Result<std::collections::BTreeSet<String>, StoreError> {
        self.ask()
    }
    fn ssh_keys(&mut self, _: i64) -> Result<Vec<String>, StoreError> {
        self.ask()
    }
    fn jobs_in_use(&mut self, _: i64, _: i64) -> Result<u64, StoreError> {
        self.ask()
    }
    fn curated(&mut self, _: &str) -> Result<Vec<crate::service::store::ArtifactEvidence>, StoreError> {
        self.ask()
    }
    fn accepted(&mut self, _: i64, _: &str) -> Result<Vec<crate::service::store::AcceptedArtifact>, StoreError> {
        self.ask()
    }
    fn runtime_images(&mut self, _: &str, _: &str) -> Result<Vec<crate::service::store::RuntimeImage>, StoreError> {
        self.ask()
    }
    fn provisioned_secrets(&mut self, _: i64, _: &str) -> Result<std::collections::BTreeSet<String>, StoreError> {
        self.ask()
    }
}

/// A publication that passed layers 1-2, with everything the write needs, owned.
pub(crate) struct Prepared {
    manifest: crate::validate::Manifest,
    schema_version: u8,
    authored_digest: String,
    authored: String,
    diagnostics: Vec<Diagnostic>,
    caller: Caller,
    application_id: String,
    dry_run: bool,
    pause_reason: Option<String>,
    expected: Option<u64>,
    schema_pairs: crate::service::SchemaPairs,
    fault: Option<FaultPoint>,
}

/// What layers 3-7 and the fence decided, and on what application, as read.
struct Decided {
    /// The application as read.
    read: Application,
    /// The application after the publication (its pointer at the version it would write).
    after: Application,
    /// Whether the publication re-arms a settled application.
    rearm: bool,
    compiled: layers::Compiled,
    diagnostics: Vec<Diagnostic>,
    jobs_in_use: u64,
}

impl Prepared {
    /// The manifest's authored digest (the console's confirm checks it is the one previewed).
    pub(crate) fn authored_digest(&self) -> &str {
        &self.authored_digest
    }

    /// Layers 3-7 and the fence on what `reads` reads, for `org` and its application as
    /// read (`None`: there is none by the publication's ID): the publication to write, or
    /// why not (a 404, a refused manifest, a fence conflict).
    fn decide(
        &self,
        reads: &mut dyn LayerReads,
        org: &Organization,
        read: Option<Application>,
    ) -> Result<Decided, ApiError> {
        let Some(read) = read else {
            return Err(Rejection::application_not_found(&self.application_id).into());
        };
        let mut diagnostics = self.diagnostics.clone();
        let outcome = layers::compile(&self.manifest, reads, org, &read, self.schema_pairs)?;
        diagnostics.extend(outcome.diagnostics);
        let Some(compiled) = outcome.compiled else { return Err(refused(diagnostics)) };

        // Layer 6: the fence.
        if let Some(expected) = self.expected
            && expected != read.active_pointer_version
        {
            return Err(
                Rejection::ActivePointerVersionConflict { expected, active: read.active_pointer_version }.into()
            );
        }
        let mut after = read.clone();
        let rearm = read.settled;
        let version = read.active_pointer_version + 1;
        next_state(&mut after, self.pause_reason.as_deref(), version);
        if rearm {
            // The scheduler runs the application once more, under this version.
            after.rearmed_version = version;
        }
        Ok(Decided { read, after, rearm, compiled, diagnostics, jobs_in_use: outcome.jobs_in_use })
    }

    /// The answer to a decided publication (a dry run's, or a write's before it is numbered).
    fn answer(&self, d: &Decided) -> PublishResponse {
        PublishResponse {
            application_id: d.after.application_id.clone(),
            policy_version: d.after.active_pointer_version,
            active_pointer_version: d.after.active_pointer_version,
            status: d.after.status.as_str(),
            authored_digest: self.authored_digest.clone(),
            policy_digest: d.compiled.policy_digest.clone(),
            diagnostics: d.diagnostics.clone(),
            dry_run: self.dry_run.then_some(true),
        }
    }

    /// The rows a decided publication writes.
    fn rows(&self, d: Decided) -> (PolicyVersion, Activity) {
        let actor = self.caller.actor();
        let version = PolicyVersion {
            version: d.after.active_pointer_version,
            schema_version: self.schema_version,
            authored_digest: self.authored_digest.clone(),
            policy_digest: d.compiled.policy_digest,
            policy: d.compiled.policy,
            authored: self.authored.clone(),
            jobs: d.compiled.jobs,
            execution: d.compiled.execution.to_owned(),
            published_by: actor.clone(),
        };
        let activity = Activity {
            at: now(),
            actor,
            action: if d.rearm { "policy_published_rearmed" } else { "policy_published" }.to_owned(),
            policy_version: Some(d.after.active_pointer_version),
            status: Some(d.after.status.as_str().to_owned()),
            reason: self.pause_reason.clone(),
        };
        (version, activity)
    }

    /// Layers 3-7 on what was read ahead of the organization and application, off the
    /// writers' lock (what else they read comes from `rest`): a dry run's answer, or the
    /// checked write to make and the answer it gives once numbered. A refusal is the error.
    fn decide_off_the_lock(
        &self,
        inputs: &PublicationInputs,
        rest: &mut dyn LayerReads,
    ) -> Result<OffTheLock, ApiError> {
        let mut reads = ReadAhead { inputs, rest };
        let d = self.decide(&mut reads, &inputs.organization, inputs.application.clone())?;
        let answer = self.answer(&d);
        if self.dry_run {
            return Ok(OffTheLock::Answered(answer));
        }
        let on = DecidedOn {
            application: d.read.key,
            inputs_revision: inputs.inputs_revision,
            settled: d.read.settled,
            status: d.read.status,
            pause_reason: d.read.pause_reason.clone(),
            jobs_in_use: d.jobs_in_use,
            expected: self.expected,
        };
        let (status, pause_reason, rearm) = (d.after.status, d.after.pause_reason.clone(), d.rearm);
        // Its times are taken here, as it is written.
        let (version, activity) = self.rows(d);
        let write = DecidedWrite { version, status, pause_reason, rearm, activity, due_at_ms: now_ms() };
        Ok(OffTheLock::Write(Box::new((on, write)), answer))
    }

    /// The answer to a decided write: 201 with the version written, or `None` if what it
    /// was decided on changed (it runs again under the lock).
    fn written(answer: PublishResponse, version: Option<u64>) -> Option<(u16, PublishResponse)> {
        version.map(|v| (201, PublishResponse { policy_version: v, active_pointer_version: v, ..answer }))
    }

    /// [`Prepared::decide_off_the_lock`] and the write on the async runtime, each statement
    /// alone ([`OnRuntime`]). Layers 3-7 are short for a small manifest; a manifest that
    /// names what the inputs do not hold (curated artifacts, catalog images) is decided on
    /// the blocking path instead, where those are read.
    async fn publish_on_runtime(&self, statements: &dyn OnRuntime) -> Result<OnTheRuntime, ApiError> {
        let Some(inputs) = statements.publication_inputs(self.caller.organization.id, &self.application_id).await?
        else {
            return Err(ApiError::internal("the caller's organization is gone"));
        };
        let mut rest = NotReadAhead::default();
        let decided = self.decide_off_the_lock(&inputs, &mut rest);
        if rest.asked {
            return Ok(OnTheRuntime::NeedsReads);
        }
        Ok(match decided? {
            OffTheLock::Answered(answer) => OnTheRuntime::Answered((200, answer)),
            OffTheLock::Write(write, answer) => {
                match Prepared::written(answer, statements.publish_decided(&write.0, &write.1).await?) {
                    Some(answer) => OnTheRuntime::Answered(answer),
                    None => OnTheRuntime::UnderTheLock,
                }
            }
        })
    }

    /// [`Prepared::decide_off_the_lock`] on a snapshot read from the blocking pool, then the
    /// write as a transaction of its own: the answer, or `None` if the publication is to run
    /// under the writers' lock (what it was decided on changed, or the store writes only in
    /// grouped work). Blocking (round trips).
    fn publish_off_the_lock(
        &self,
        store: &dyn crate::service::store::Store,
    ) -> Result<Option<(u16, PublishResponse)>, ApiError> {
        let mut tx = store.read_each()?;
        let Some(inputs) = tx.publication_inputs(self.caller.organization.id, &self.application_id)? else {
            return Err(ApiError::internal("the caller's organization is gone"));
        };
        let decided = self.decide_off_the_lock(&inputs, tx.as_mut())?;
        drop(tx);
        Ok(match decided {
            OffTheLock::Answered(answer) => Some((200, answer)),
            OffTheLock::Write(write, answer) => match store.publish_decided_alone(&write.0, &write.1).transpose()? {
                Some(version) => Prepared::written(answer, version),
                None => None,
            },
        })
    }

    /// Layers 3-7 and the write, inside the (grouped) write transaction. A 201 writes; a
    /// dry run or a refusal writes nothing.
    fn commit(&self, tx: &mut dyn Transaction) -> Result<(u16, PublishResponse), ApiError> {
        let org = match tx.organization_inputs(self.caller.organization.id)? {
            Some((org, _)) => org,
            None => return Err(ApiError::internal("the caller's organization is gone")),
        };
        let read = tx.application(org.id, &self.application_id)?;
        let d = self.decide(tx, &org, read)?;
        let answer = self.answer(&d);
        if self.dry_run {
            return Ok((200, answer));
        }
        let app = d.after.clone();
        let (version, activity) = self.rows(d);
        tx.insert_policy_version(app.key, &version)?;
        if self.fault == Some(FaultPoint::AfterVersionInsert) {
            eprintln!(
                "svc serve: injected fault after the version insert, in grouped work: aborting before the commit"
            );
            std::process::abort();
        }
        tx.update_application(&app)?;
        tx.record_activity(app.key, &activity)?;
        tx.record_wakeup(app.key, app.active_pointer_version)?;
        Ok((201, answer))
    }
}

/// The application after a publication: the pointer moves to the new version; a pause given
/// with it pauses; otherwise a disabled application is activated and an existing pause kept.
fn next_state(app: &mut Application, pause_reason: Option<&str>, version: u64) {
    app.active_pointer_version = version;
    app.settled = false;
    match pause_reason {
        Some(reason) => {
            app.status = Status::Paused;
            app.pause_reason = Some(reason.to_owned());
        }
        None if app.status == Status::Disabled => app.status = Status::Active,
        None => {}
    }
}
