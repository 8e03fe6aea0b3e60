//! `POST /api/ingress/deployments`: a project's files in, a deployment out. A first deploy
//! makes the deployment (pending funding, with its first quote); a deploy of a changed
//! project (its file, an app file, a secret value) makes the deployment's next revision,
//! which the engine starts beside the serving one and switches to once validated
//! (`engine::redeploy`); an unchanged project changes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use svc_execution::artifacts::bundle_digest;
use svc_http::{Intake, IntakeError, Received};

use super::rejection::{BadRequest, Rejection};
use super::{ApiError, ApiResult, DEPLOY_LIMIT, body_refusal};
use crate::coordinator::Engine;
use crate::coordinator::api::DeployResponse;
use crate::coordinator::files::{self, StagedBundle};
use crate::coordinator::model::{Deployment, HostnameState, SuccessorState};
use crate::coordinator::policy::{self, PublishError};
use crate::coordinator::state::DeploymentState;
use crate::coordinator::store::{
    Caller, NewDeployment, NewSuccessor, PublishedPolicy, RevisionBundle, StoreError, random_hex,
};
use crate::project::Project;

mod body;

use body::DeployBody;

pub(super) async fn deploy(
    State(engine): State<Arc<Engine>>,
    axum::Extension(intake): axum::Extension<Intake>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<DeployResponse> {
    // The token before the body: a caller who may not deploy costs no reading, and a large
    // body counts against its organization's bound (503 at once beyond it, before reading).
    let (reader, asked) = (Arc::clone(&engine), headers.clone());
    let caller = super::blocking(move || super::caller(&reader, &asked)).await?;
    let incoming = intake
        .body(&caller.org_id, &headers, body, DEPLOY_LIMIT)
        .map_err(|busy| ApiError::from(Rejection::TooManyLargeBodies(busy)))?;
    // Read whole into one buffer of the declared length, then parsed in place: measured
    // against decoding as it arrives, the same peak and far less memory left with the
    // allocator afterwards (docs/decisions.md, "Bounded intake").
    let Received { bytes, permit } = incoming.bytes().await.map_err(intake_refusal)?;
    // All of it off the runtime: decoding the app's files, writing them and the store's
    // transactions. The permit goes once the decoded files are gone.
    super::blocking(move || {
        let request = read(bytes)?;
        let deployed = deploy_now(&engine, &caller, request);
        drop(permit);
        deployed
    })
    .await
}

/// The deploy request in `bytes`, which are let go once the app's files are decoded from them.
fn read(bytes: Bytes) -> Result<DeployBody, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(&bytes);
    let request = serde_path_to_error::deserialize(&mut de).map_err(body_refusal)?;
    de.end().map_err(|trailing| Rejection::InvalidRequest(BadRequest::Body(trailing.to_string())))?;
    Ok(request)
}

fn intake_refusal(e: IntakeError) -> ApiError {
    match e {
        IntakeError::Busy(busy) => Rejection::TooManyLargeBodies(busy).into(),
        IntakeError::TooLarge { max } => Rejection::BodyTooLarge { max }.into(),
        IntakeError::Read(why) => Rejection::InvalidRequest(BadRequest::BodyIncomplete(why.to_string())).into(),
    }
}

fn deploy_now(engine: &Engine, caller: &Caller, req: DeployBody) -> ApiResult<DeployResponse> {
    let text = serde_json::to_string(&req.project).unwrap_or_default();
    let project = crate::project::read(&text).map_err(Rejection::InvalidProject)?;
    let unsupported = project.unsupported();
    if !unsupported.is_empty() {
        return Err(Rejection::IngressUnsupported(unsupported).into());
    }
    let manifest = project.manifest_v5(req.manifest.as_deref()).map_err(Rejection::InvalidManifest)?;
    let manifest_digest = manifest_core::canonical_digest(&manifest).unwrap_or_default();
    let canonical = format!("{}-{}.{}", project.name, caller.org_name, engine.config().relay_domain);
    if canonical.split('.').next().is_some_and(|label| label.len() > 63) {
        return Err(Rejection::HostnameTooLong { canonical }.into());
    }
    if engine.store().canonical_held_elsewhere(&canonical, &caller.org_id)? {
        return Err(Rejection::CanonicalNameTaken { canonical }.into());
    }
    for name in req.secrets.keys() {
        if !project.app.secrets.contains_key(name) {
            return Err(Rejection::InvalidRequest(BadRequest::UnknownSecret(name.clone())).into());
        }
    }
    let files = req.bundle.files()?;
    if !files.iter().any(|(path, _)| path == &project.app.entrypoint) {
        return Err(Rejection::EntrypointMissing { entrypoint: project.app.entrypoint.clone() }.into());
    }
    let digest = project.digest_with_files(files.iter().map(|(p, b)| (p.as_str(), b.as_slice())));
    let bundle_digest = bundle_digest(files.iter().map(|(p, b)| (p.as_str(), b.as_slice())));
    let shipment = Shipment {
        project: &project,
        text: &text,
        digest: &digest,
        manifest: &manifest,
        manifest_digest: &manifest_digest,
        bundle_digest: &bundle_digest,
    };
    if let Some(existing) =
        engine.store().deployment_of(&caller.org_id, &project.name)?.filter(|d| !d.state.is_terminal())
    {
        return redeploy(engine, existing, &shipment, files, req.secrets);
    }
    let store = engine.store();
    let id = format!("dep_{}", random_hex(8)?);
    let mut quoted = vec![canonical.clone()];
    quoted.extend(project.hostnames.iter().cloned());
    let quote = engine.price(&id, &digest, quoted, u64::from(project.spend.fund_periods))?;
    let policy = shipment.publish(&id, 1, &files)?;
    let mut hostnames = Vec::new();
    for host in &project.hostnames {
        hostnames.push((host.clone(), random_hex(16)?));
    }
    let new = NewDeployment {
        id: id.clone(),
        org_id: caller.org_id.clone(),
        project: project.name.clone(),
        project_json: text.clone(),
        project_digest: digest.clone(),
        manifest_digest: manifest_digest.clone(),
        canonical_hostname: canonical,
        route_id: format!("rt_{}", random_hex(8)?),
        ceiling_micros: project.spend.ceiling_micros,
        gateway_operator: engine.config().gateway_operator.clone(),
        hostnames,
        quote: Some(quote.clone()),
        policy,
        // Recorded with the deployment, in one transaction, so any coordinator on the store
        // can launch it (`files::materialize`).
        bundle: RevisionBundle { files, secrets: req.secrets },
    };
    // Files first, then the record: a refused record (a hostname taken) or a crash between
    // the two takes the files away again (at once, or at the next start).
    let staged = stage(engine, &id, 1, &new.bundle)?;
    let d = match store.create_deployment(&new) {
        Ok(d) => d,
        Err(e @ StoreError::Refused { code: "hostname_taken", .. }) => {
            // Two identical deploys at once: the other one made it; answer as it would now.
            drop(staged);
            return match store.deployment_of(&caller.org_id, &project.name)? {
                Some(existing) if existing.project_digest == digest => unchanged(engine, existing, &project),
                _ => Err(e.into()),
            };
        }
        Err(e) => return Err(e.into()),
    };
    staged.keep();
    Ok((
        StatusCode::CREATED,
        axum::Json(DeployResponse { deployment: engine.with_url(d), quote, existing: false, successor: None }),
    ))
}

/// What a deploy sends, read and checked.
struct Shipment<'a> {
    project: &'a Project,
    text: &'a str,
    digest: &'a str,
    manifest: &'a serde_json::Value,
    manifest_digest: &'a str,
    /// The app files' bundle digest: the artifact the revision's policy resolves.
    bundle_digest: &'a str,
}

impl Shipment<'_> {
    /// The policy revision `revision` of deployment `id` publishes (`coordinator::policy`).
    fn publish(&self, id: &str, revision: u32, files: &[(String, Vec<u8>)]) -> Result<PublishedPolicy, ApiError> {
        let has_file = |name: &str| files.iter().any(|(path, _)| path == name);
        let published = policy::publish(self.manifest, self.project, id, revision, self.bundle_digest, has_file);
        published.map_err(|e| match e {
            PublishError::PinnedElsewhere { pinned, sent } => Rejection::ArtifactNotSent { pinned, sent }.into(),
            PublishError::EntrypointMissing { entrypoint } => Rejection::EntrypointMissing { entrypoint }.into(),
            e @ PublishError::Undeclared(_) => Rejection::ManifestUndeclared(e).into(),
            e @ PublishError::NotRunnable(_) => Rejection::ManifestNotRunnable(e).into(),
            e @ PublishError::NotV5(_) => ApiError::internal(&e),
        })
    }
}

/// Writes a revision's files into this coordinator's data directory (up to 12 MiB: off the
/// async runtime), where its job will run from.
fn stage(engine: &Engine, id: &str, revision: u32, bundle: &RevisionBundle) -> Result<StagedBundle, ApiError> {
    files::stage(&engine.config().deployments_dir(), id, revision, bundle).map_err(|e| ApiError::internal(&e))
}

/// A deploy of a project that has a deployment (not stopped): nothing new for the same
/// project and secrets (200, `existing: true`); the successor in progress for the same
/// again (202); else a new successor (202).
fn redeploy(
    engine: &Engine,
    d: Deployment,
    shipment: &Shipment<'_>,
    files: Vec<(String, Vec<u8>)>,
    secrets: BTreeMap<String, String>,
) -> ApiResult<DeployResponse> {
    let store = engine.store();
    let project = shipment.project;
    let successor = store.successor(&d.id)?;
    // Secrets the store cannot give back (damaged) are not the same: the deploy makes a new
    // revision, which repairs the deployment; only the store being unreachable fails it.
    let same_secrets = |revision: u32| -> Result<bool, StoreError> {
        match store.revision_secrets(&d.id, revision) {
            Ok(stored) => Ok(stored.as_ref() == Some(&secrets)),
            Err(e @ StoreError::Unavailable(_)) => Err(e),
            Err(e) => {
                tracing::warn!(error = %e, "{}: the stored secrets of revision {revision} are unreadable", d.id);
                Ok(false)
            }
        }
    };
    if d.project_digest == shipment.digest && same_secrets(d.revision)? {
        // The serving revision again: a successor (failed, or on its way) is withdrawn.
        if let Some(s) = &successor {
            store.drop_successor(&d.id, s.revision, "withdrawn: the serving revision was deployed again")?;
            engine.wake();
        }
        return unchanged(engine, d, project);
    }
    if let Some(s) = &successor
        && s.state != SuccessorState::Failed
        && s.project_digest == shipment.digest
        && same_secrets(s.revision)?
    {
        return in_progress(engine, d, project, s.clone());
    }
    // Customer hostnames are managed on the deployment (`hostname add|remove`): a project
    // file that lists others than it has is not shipped, rather than half applied.
    let serving: Vec<String> =
        store.hostnames(&d.id)?.into_iter().filter(|h| h.state != HostnameState::Removed).map(|h| h.hostname).collect();
    let added: Vec<String> = project.hostnames.iter().filter(|h| !serving.contains(h)).cloned().collect();
    let removed: Vec<String> = serving.into_iter().filter(|h| !project.hostnames.contains(h)).collect();
    if !added.is_empty() || !removed.is_empty() {
        return Err(Rejection::HostnamesChanged { deployment: d.id, added, removed }.into());
    }
    let revision = store.next_revision(&d.id)?;
    let policy = shipment.publish(&d.id, revision, &files)?;
    let new = NewSuccessor {
        deployment_id: d.id.clone(),
        revision,
        project_json: shipment.text.to_owned(),
        project_digest: shipment.digest.to_owned(),
        manifest_digest: shipment.manifest_digest.to_owned(),
        ceiling_micros: project.spend.ceiling_micros,
        route_id: format!("rt_{}", random_hex(8)?),
        policy,
        bundle: RevisionBundle { files, secrets },
    };
    let staged = stage(engine, &d.id, revision, &new.bundle)?;
    store.put_successor(&new)?;
    staged.keep();
    engine.wake();
    let s = store.successor(&d.id)?.ok_or_else(|| ApiError::internal(&"the successor just recorded is gone"))?;
    in_progress(engine, d, project, s)
}

/// The answer to a deploy of the project the deployment already has, with its newest quote:
/// a funded one as it is (the funds may still be there), else, while the deployment waits for
/// funds, its open quote (`Engine::open_quote`).
fn unchanged(engine: &Engine, d: Deployment, project: &Project) -> ApiResult<DeployResponse> {
    let periods = u64::from(project.spend.fund_periods);
    let quote = match engine.store().quotes(&d.id)?.into_iter().next() {
        Some(q) if q.funded_at.is_some() || d.state != DeploymentState::PendingFunding => q,
        Some(_) => engine.open_quote(&d, periods)?,
        None => engine.quote(&d, periods)?,
    };
    Ok((
        StatusCode::OK,
        axum::Json(DeployResponse { deployment: engine.with_url(d), quote, existing: true, successor: None }),
    ))
}

/// The answer to a deploy that made (or repeats) a successor: the deployment as it serves,
/// the successor, and its newest quote, or, when the deployment waits for funds, its open
/// quote: one for the successor's project, which takes over at once (`Engine::open_quote`;
/// the quote the deployment had binds the project it replaces, and is stale, issue 41).
fn in_progress(
    engine: &Engine,
    d: Deployment,
    project: &Project,
    s: crate::coordinator::model::Successor,
) -> ApiResult<DeployResponse> {
    let quote = match engine.store().quotes(&d.id)?.into_iter().next() {
        Some(q) if d.state != DeploymentState::PendingFunding => q,
        _ => engine.open_quote(&d, u64::from(project.spend.fund_periods))?,
    };
    Ok((
        StatusCode::ACCEPTED,
        axum::Json(DeployResponse { deployment: engine.with_url(d), quote, existing: false, successor: Some(s) }),
    ))
}
