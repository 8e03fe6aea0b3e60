//! Publishing a manifest (which may pause the application): the API's
//! `POST /api/applications/{id}/policy-versions` and the console's publish form, one
//! operation, [`publish`]. Top to bottom:
//! 1. [`prepare`]: the request read strictly ([`request`]) and layers 1-2, without the store
//!    (a large body off the async runtime);
//! 2. [`decide_and_write`]: layers 3-7 and the fence, decided by [`Prepared::decide`], the one
//!    way into the decision, then the write: the immutable version, the pointer and status,
//!    activity and the scheduler's wakeup in one transaction. A dry run decides all of it and
//!    writes nothing. Where it is decided is a [`Place`], tried in turn;
//! 3. the scheduler woken for a committed version.

use std::borrow::Cow;
use std::sync::Arc;

use axum::body::Bytes;
use serde::Serialize;

use super::refusal::{Denied, Rejection};
use super::{OperationError, blocking, task_failed};
use crate::diagnostic::Diagnostic;
use crate::service::clock::{now, now_ms};
use crate::service::layers::{self, InStore, Unread};
use crate::service::store::{
    Activity, Application, Caller, DecidedOn, DecidedWrite, LayerReads, PolicyVersion, PublicationInputs, Status,
    Store, Transaction,
};
use crate::service::{FaultPoint, State};
use crate::validate::validate;
use read_ahead::ReadAhead;

mod read_ahead;
mod request;

pub(crate) use request::{MAX_REASON_CHARS, PublishRequest, parse_request};

/// What is asked to be published.
pub(crate) enum Asked {
    /// The API's request body, read here (a large one off the async runtime).
    Body(Bytes),
    /// A request already read (the console's form).
    Request(PublishRequest<'static>),
}

impl Asked {
    /// The bytes to read and check.
    fn len(&self) -> usize {
        match self {
            Asked::Body(body) => body.len(),
            Asked::Request(request) => request.manifest.len(),
        }
    }

    /// The request, read.
    fn read(&self) -> Result<PublishRequest<'_>, Rejection> {
        match self {
            Asked::Body(body) => parse_request(body),
            Asked::Request(r) => Ok(PublishRequest {
                manifest: Cow::Borrowed(&r.manifest),
                dry_run: r.dry_run,
                pause_reason: r.pause_reason.clone(),
                expected_active_pointer_version: r.expected_active_pointer_version,
                reviewed_digest: r.reviewed_digest.clone(),
            }),
        }
    }
}

/// A publication's answer.
#[derive(Debug)]
pub(crate) struct Published {
    /// Whether a version was committed (a dry run commits none).
    pub(crate) committed: bool,
    /// What the caller is told.
    pub(crate) response: PublishResponse,
}

/// What the caller is told of a publication (the API's body: 201 committed, 200 dry run).
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

/// Publishes (or previews) what `caller` asks for the application `application_id`, and
/// answers once the commit is durable.
pub(crate) async fn publish(
    state: &Arc<State>,
    caller: Caller,
    application_id: String,
    asked: Asked,
) -> Result<Published, OperationError> {
    let prepared = prepare(state, caller, application_id, asked).await?;
    let published = decide_and_write(state, prepared).await?;
    if published.committed {
        // Committed: the scheduler launches what the new version asks for now.
        state.scheduler.wake();
    }
    Ok(published)
}

/// Bodies up to this size are read and validated on the async runtime: a manifest of a few
/// KiB takes well under a millisecond, and the hop to the blocking pool would cost the
/// publication path more than the work itself (docs/performance.md, "Publication under load").
/// Past it, layers 3-7 are decided on the blocking pool too.
const INLINE_BODY_BYTES: usize = 16 * 1024;

/// What failed when a publication could not be checked.
const NOT_CHECKED: &str = "the publication could not be checked; try again";

/// Reads the request and runs layers 1-2 ([`check`]). A body over [`INLINE_BODY_BYTES`] is
/// checked off the async runtime, at most one per core at once (`State::validations`): a
/// 1 MiB manifest keeps a core busy for a while, on the runtime it would stall every other
/// request, and more at once than there are cores would only add memory (each holds its
/// document, tree and diagnostics). The permit goes with the work, so a client that hangs up
/// does not free it early.
async fn prepare(
    state: &Arc<State>,
    caller: Caller,
    application_id: String,
    asked: Asked,
) -> Result<Arc<Prepared>, OperationError> {
    if asked.len() <= INLINE_BODY_BYTES {
        return match check(state, &caller, &application_id, &asked.read()?)? {
            Checked::Valid(prepared) => Ok(prepared),
            // An invalid manifest reads the store (the 404 goes first): on a database across
            // a network that is a round trip, which stays off the async workers.
            Checked::Invalid(diagnostics) if state.store.is_local() => {
                Err(not_found_or(state, &caller, &application_id, diagnostics))
            }
            Checked::Invalid(diagnostics) => {
                let state = state.clone();
                blocking(move || Err(not_found_or(&state, &caller, &application_id, diagnostics))).await
            }
        };
    }
    let permit = state
        .validations
        .clone()
        .acquire_owned()
        .await
        .map_err(|e| OperationError::internal_because(NOT_CHECKED, e))?;
    let state = state.clone();
    tokio::task::spawn_blocking(move || {
        let prepared = match check(&state, &caller, &application_id, &asked.read()?)? {
            Checked::Valid(prepared) => Ok(prepared),
            Checked::Invalid(diagnostics) => Err(not_found_or(&state, &caller, &application_id, diagnostics)),
        };
        drop(permit);
        prepared
    })
    .await
    .unwrap_or_else(|e| Err(task_failed(NOT_CHECKED)(e)))
}

/// What layers 1-2 made of a request.
enum Checked {
    /// A publication to decide.
    Valid(Arc<Prepared>),
    /// An invalid manifest: its diagnostics ([`not_found_or`] answers it).
    Invalid(Vec<Diagnostic>),
}

/// The answer to an invalid manifest: a 404 goes before the manifest's problems if the URL
/// names no application of the caller's organization (for a valid manifest the write looks
/// the application up anyway). Reads the store.
fn not_found_or(state: &State, caller: &Caller, application_id: &str, diagnostics: Vec<Diagnostic>) -> OperationError {
    match state.store.read().and_then(|mut tx| tx.application(caller.organization.id, application_id)) {
        Ok(None) => Rejection::application_not_found(application_id).into(),
        Ok(Some(_)) => Rejection::ManifestInvalid(diagnostics).into(),
        Err(e) => e.into(),
    }
}

/// Layers 1-2, without the store: the role, the manifest, and (for a confirmation) that it is
/// the one previewed.
fn check(
    state: &State,
    caller: &Caller,
    application_id: &str,
    request: &PublishRequest<'_>,
) -> Result<Checked, OperationError> {
    if !caller.role.can_publish() {
        return Err(Rejection::Forbidden(Denied::Publish { role: caller.role.as_str() }).into());
    }
    let report = validate(request.manifest.as_bytes());
    let manifest = match report.manifest() {
        Ok(m) => m,
        Err(_) => return Ok(Checked::Invalid(report.diagnostics)),
    };
    let authored_digest = report.authored_digest().unwrap_or_default();
    if request.reviewed_digest.as_ref().is_some_and(|reviewed| *reviewed != authored_digest) {
        return Err(Rejection::ManifestChanged.into());
    }
    let authored = match &report.document {
        Some(root) => crate::digest::canonical_bytes(root, request.manifest.len())
            .and_then(|b| String::from_utf8(b).ok())
            .or_else(|| serde_json_canonicalizer::to_string(&crate::tree::Authored(root)).ok())
            .unwrap_or_default(),
        None => String::new(),
    };
    Ok(Checked::Valid(Arc::new(Prepared {
        manifest,
        schema_version: report.schema_version.unwrap_or(0),
        authored_digest,
        authored,
        diagnostics: report.diagnostics,
        caller: caller.clone(),
        application_id: application_id.to_owned(),
        dry_run: request.dry_run,
        pause_reason: request.pause_reason.clone(),
        expected: request.expected_active_pointer_version,
        schema_pairs: state.schema_pairs,
        fault: state.fault,
    })))
}

/// Where a publication is decided and written.
#[derive(Debug, Clone, Copy)]
enum Place {
    /// On the async runtime, each statement alone (a database across a network, a small
    /// manifest): on the facts read ahead in one statement, off the writers' lock; the
    /// write is one call that checks they still hold ([`DecidedOn`]).
    OnRuntime,
    /// On the blocking pool, on a read snapshot (a database across a network): as on the
    /// runtime, and what the facts read ahead do not hold is read from the snapshot.
    OffTheLock,
    /// In grouped write work, under the writers' lock, so that concurrent publications share
    /// one commit: always on a local store (SQLite); elsewhere when what a decision off the
    /// lock was made on changed before its write, or the store writes only in grouped work.
    UnderTheLock,
}

impl Place {
    /// Where a publication is decided first.
    fn first(state: &State, prepared: &Prepared) -> Place {
        if state.store.is_local() {
            Place::UnderTheLock
        } else if state.store.on_runtime().is_some() && prepared.authored.len() <= INLINE_BODY_BYTES {
            Place::OnRuntime
        } else {
            // A large manifest (layers 3-7 take a while), or no statements on the runtime.
            Place::OffTheLock
        }
    }
}

/// What deciding at a place came to.
enum Tried {
    /// The publication's answer (a dry run's, or a write's).
    Published(Published),
    /// It is decided again, at another place.
    Again(Place),
}

/// Layers 3-7, the fence and the write, at each place in turn until one answers.
async fn decide_and_write(state: &Arc<State>, prepared: Arc<Prepared>) -> Result<Published, OperationError> {
    let mut place = Place::first(state, &prepared);
    loop {
        let tried = match place {
            Place::OnRuntime => prepared.on_runtime(state).await?,
            Place::OffTheLock => {
                let (store, prepared) = (state.store.clone(), prepared.clone());
                blocking(move || prepared.off_the_lock(&*store)).await?
            }
            Place::UnderTheLock => Tried::Published(under_the_lock(state, prepared.clone()).await?),
        };
        match tried {
            Tried::Published(published) => return Ok(published),
            Tried::Again(next) => place = next,
        }
    }
}

/// [`Place::UnderTheLock`]: the publication as a unit of grouped write work; a committed one
/// keeps its writes, a dry run or a refusal writes nothing.
async fn under_the_lock(state: &State, prepared: Arc<Prepared>) -> Result<Published, OperationError> {
    let (result_tx, result_rx) = tokio::sync::oneshot::channel();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    state.store.write_grouped(
        Box::new(move |tx| {
            let result = prepared.commit(tx);
            let keep = matches!(&result, Ok(published) if published.committed);
            let _ = result_tx.send(result);
            keep
        }),
        Box::new(move |outcome| {
            let _ = done_tx.send(outcome);
        }),
    );
    let gone = || OperationError::internal("the publication's grouped write was dropped before it ran");
    done_rx.await.map_err(|_| gone())??;
    result_rx.await.map_err(|_| gone())?
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

/// The facts layers 3-7 and the fence decide on.
enum Facts<'a> {
    /// The organization's and application's, read ahead in one statement off the writers'
    /// lock; what they do not hold is read from `rest`, or with none (on the async runtime)
    /// not read ([`Decision::NeedsReads`]).
    ReadAhead { inputs: &'a PublicationInputs, rest: Option<&'a mut dyn LayerReads> },
    /// The write transaction's, under the writers' lock.
    Locked(&'a mut dyn Transaction),
}

/// What layers 3-7 and the fence came to, when they did not refuse.
enum Decision {
    /// They need a fact the facts at hand do not hold: decide again where it is read.
    NeedsReads,
    /// The publication to answer, or to write.
    Made(Box<Decided>),
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
    /// Layers 3-7 and the fence on `facts`: the publication to answer or write, or why not (a
    /// 404, a refused manifest, a fence conflict).
    fn decide(&self, facts: Facts<'_>) -> Result<Decision, OperationError> {
        let compiled = match facts {
            Facts::ReadAhead { inputs, rest } => {
                let read = inputs.application.clone().ok_or_else(|| self.not_found())?;
                let mut reads = ReadAhead { inputs, rest };
                layers::compile(&self.manifest, &mut reads, &inputs.organization, &read, self.schema_pairs)
                    .map(|outcome| (outcome, read))
            }
            Facts::Locked(tx) => {
                let (org, _) = tx.organization_inputs(self.caller.organization.id)?.ok_or_else(organization_gone)?;
                let read = tx.application(org.id, &self.application_id)?.ok_or_else(|| self.not_found())?;
                layers::compile(&self.manifest, &mut InStore(tx), &org, &read, self.schema_pairs)
                    .map(|outcome| (outcome, read))
            }
        };
        let (outcome, read) = match compiled {
            Ok(compiled) => compiled,
            Err(Unread::NotReadAhead) => return Ok(Decision::NeedsReads),
            Err(Unread::Store(e)) => return Err(e.into()),
        };
        let mut diagnostics = self.diagnostics.clone();
        diagnostics.extend(outcome.diagnostics);
        let Some(compiled) = outcome.compiled else { return Err(Rejection::ManifestInvalid(diagnostics).into()) };

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
        Ok(Decision::Made(Box::new(Decided {
            read,
            after,
            rearm,
            compiled,
            diagnostics,
            jobs_in_use: outcome.jobs_in_use,
        })))
    }

    fn not_found(&self) -> OperationError {
        Rejection::application_not_found(&self.application_id).into()
    }

    /// [`Place::OnRuntime`]. Layers 3-7 are short for a small manifest; one that names what
    /// the facts read ahead do not hold (curated artifacts, catalog images) is decided off
    /// the lock instead, where those are read.
    async fn on_runtime(&self, state: &State) -> Result<Tried, OperationError> {
        let Some(statements) = state.store.on_runtime() else { return Ok(Tried::Again(Place::OffTheLock)) };
        let inputs = statements
            .publication_inputs(self.caller.organization.id, &self.application_id)
            .await?
            .ok_or_else(organization_gone)?;
        let decided = match self.decide(Facts::ReadAhead { inputs: &inputs, rest: None })? {
            Decision::NeedsReads => return Ok(Tried::Again(Place::OffTheLock)),
            Decision::Made(decided) => decided,
        };
        let answer = self.answer(&decided);
        if self.dry_run {
            return Ok(Tried::Published(Published { committed: false, response: answer }));
        }
        let (on, write) = self.checked_write(&inputs, *decided);
        Ok(written(answer, statements.publish_decided(&on, &write).await?))
    }

    /// [`Place::OffTheLock`]: blocking (round trips).
    fn off_the_lock(&self, store: &dyn Store) -> Result<Tried, OperationError> {
        let mut tx = store.read_each()?;
        let inputs =
            tx.publication_inputs(self.caller.organization.id, &self.application_id)?.ok_or_else(organization_gone)?;
        let decision = self.decide(Facts::ReadAhead { inputs: &inputs, rest: Some(tx.as_mut()) })?;
        drop(tx);
        let decided = match decision {
            // The snapshot reads every fact; were one not read, the lock's transaction would.
            Decision::NeedsReads => return Ok(Tried::Again(Place::UnderTheLock)),
            Decision::Made(decided) => decided,
        };
        let answer = self.answer(&decided);
        if self.dry_run {
            return Ok(Tried::Published(Published { committed: false, response: answer }));
        }
        let (on, write) = self.checked_write(&inputs, *decided);
        match store.publish_decided_alone(&on, &write) {
            Some(version) => Ok(written(answer, version?)),
            // The store writes only in grouped work.
            None => Ok(Tried::Again(Place::UnderTheLock)),
        }
    }

    /// [`Place::UnderTheLock`], inside the (grouped) write transaction. A committed
    /// publication writes; a dry run or a refusal writes nothing.
    fn commit(&self, tx: &mut dyn Transaction) -> Result<Published, OperationError> {
        let decided = match self.decide(Facts::Locked(&mut *tx))? {
            Decision::Made(decided) => decided,
            Decision::NeedsReads => {
                return Err(OperationError::internal("the write transaction did not read what layers 3-7 need"));
            }
        };
        let answer = self.answer(&decided);
        if self.dry_run {
            return Ok(Published { committed: false, response: answer });
        }
        let app = decided.after.clone();
        let (version, activity) = self.rows(*decided);
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
        Ok(Published { committed: true, response: answer })
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

    /// The checked write of a publication decided on `inputs`: what it was decided on, and
    /// its rows (their times taken here, as it is written).
    fn checked_write(&self, inputs: &PublicationInputs, d: Decided) -> (DecidedOn, DecidedWrite) {
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
        let (version, activity) = self.rows(d);
        (on, DecidedWrite { version, status, pause_reason, rearm, activity, due_at_ms: now_ms() })
    }
}

/// A checked write's outcome: committed as the version written, or, if what it was decided
/// on changed (`None`), decided again under the writers' lock.
fn written(answer: PublishResponse, version: Option<u64>) -> Tried {
    match version {
        Some(v) => Tried::Published(Published {
            committed: true,
            response: PublishResponse { policy_version: v, active_pointer_version: v, ..answer },
        }),
        None => Tried::Again(Place::UnderTheLock),
    }
}

fn organization_gone() -> OperationError {
    OperationError::internal("the caller's organization is gone")
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
