//! A deploy: a project's files in, a deployment out. A first deploy makes the deployment
//! (pending funding, with its first quote); a deploy of a changed project (its file, an app
//! file, a secret value) makes the deployment's next revision, which the engine starts beside
//! the serving one and switches to once validated (`engine::redeploy`); an unchanged project
//! changes nothing.
//!
//! The project file is read once, from its text as it was sent, which the store keeps.

use std::collections::BTreeMap;

use svc_execution::artifacts::bundle_digest;

use super::{Internal, OperationError};
use crate::coordinator::Engine;
use crate::coordinator::api::DeployResponse;
use crate::coordinator::files::{self, StagedBundle};
use crate::coordinator::model::{Deployment, HostnameState, Successor, SuccessorState};
use crate::coordinator::policy::{self, PublishError};
use crate::coordinator::state::DeploymentState;
use crate::coordinator::store::{
    Caller, NewDeployment, NewSuccessor, PublishedPolicy, RevisionBundle, StoreError, random_hex,
};
use crate::project::Project;

mod bundle;

pub(in crate::coordinator) use bundle::Bundle;

/// What a deploy sends.
#[derive(Debug)]
pub(in crate::coordinator) struct Deploy {
    /// The project file's text, as it was sent (the store keeps it).
    pub(in crate::coordinator) project: String,
    /// The V5 manifest's text, when the project names one.
    pub(in crate::coordinator) manifest: Option<String>,
    /// The app's files, decoded (checked here, after the project).
    pub(in crate::coordinator) bundle: Bundle,
    /// Secret values by the app's environment name.
    pub(in crate::coordinator) secrets: BTreeMap<String, String>,
}

/// What a deploy did, and the deployment as it is now.
#[derive(Debug)]
pub(in crate::coordinator) enum Deployed {
    /// A first deploy made the deployment.
    Created(DeployResponse),
    /// The project the deployment has already (nothing new).
    Unchanged(DeployResponse),
    /// A redeploy made (or repeats) the deployment's successor.
    Successor(DeployResponse),
}

/// Deploys the caller's project: the checks in the order their refusals are answered (the
/// project file, what it asks for, its manifest, its canonical hostname, its secrets, its
/// files), then a new deployment, a redeploy of the existing one, or nothing new.
pub(in crate::coordinator) fn deploy_now(
    engine: &Engine,
    caller: &Caller,
    req: Deploy,
) -> Result<Deployed, OperationError> {
    let Deploy { project: text, manifest, bundle, secrets } = req;
    let project = crate::project::read(&text).map_err(OperationError::InvalidProject)?;
    let unsupported = project.unsupported();
    if !unsupported.is_empty() {
        return Err(OperationError::IngressUnsupported(unsupported));
    }
    let manifest = project.manifest_v5(manifest.as_deref()).map_err(OperationError::InvalidManifest)?;
    let manifest_digest = manifest_core::canonical_digest(&manifest).unwrap_or_default();
    let canonical = format!("{}-{}.{}", project.name, caller.org_name, engine.config().relay_domain);
    if canonical.split('.').next().is_some_and(|label| label.len() > 63) {
        return Err(OperationError::HostnameTooLong { canonical });
    }
    if engine.store().canonical_held_elsewhere(&canonical, &caller.org_id)? {
        return Err(OperationError::CanonicalNameTaken { canonical });
    }
    for name in secrets.keys() {
        if !project.app.secrets.contains_key(name) {
            return Err(OperationError::UnknownSecret(name.clone()));
        }
    }
    let files = bundle.files()?;
    if !files.iter().any(|(path, _)| path == &project.app.entrypoint) {
        return Err(OperationError::EntrypointMissing { entrypoint: project.app.entrypoint.clone() });
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
        return redeploy(engine, existing, &shipment, files, secrets);
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
        bundle: RevisionBundle { files, secrets },
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
    Ok(Deployed::Created(DeployResponse { deployment: engine.with_url(d), quote, existing: false, successor: None }))
}

/// What a deploy sends, read and checked.
struct Shipment<'a> {
    project: &'a Project,
    /// The project file's text as sent.
    text: &'a str,
    digest: &'a str,
    manifest: &'a serde_json::Value,
    manifest_digest: &'a str,
    /// The app files' bundle digest: the artifact the revision's policy resolves.
    bundle_digest: &'a str,
}

impl Shipment<'_> {
    /// The policy revision `revision` of deployment `id` publishes (`coordinator::policy`).
    fn publish(&self, id: &str, revision: u32, files: &[(String, Vec<u8>)]) -> Result<PublishedPolicy, OperationError> {
        let has_file = |name: &str| files.iter().any(|(path, _)| path == name);
        let published = policy::publish(self.manifest, self.project, id, revision, self.bundle_digest, has_file);
        published.map_err(|e| match e {
            PublishError::PinnedElsewhere { pinned, sent } => OperationError::ArtifactNotSent { pinned, sent },
            PublishError::EntrypointMissing { entrypoint } => OperationError::EntrypointMissing { entrypoint },
            e @ PublishError::Undeclared(_) => OperationError::ManifestUndeclared(e),
            e @ PublishError::NotRunnable(_) => OperationError::ManifestNotRunnable(e),
            e @ PublishError::NotV5(_) => Internal::Policy(e).into(),
        })
    }
}

/// Writes a revision's files into this coordinator's data directory (up to 12 MiB: callers
/// run off the async runtime), where its job will run from.
fn stage(engine: &Engine, id: &str, revision: u32, bundle: &RevisionBundle) -> Result<StagedBundle, OperationError> {
    Ok(files::stage(&engine.config().deployments_dir(), id, revision, bundle).map_err(Internal::Files)?)
}

/// A deploy of a project that has a deployment (not stopped): nothing new for the same
/// project and secrets (`existing: true`); the successor in progress for the same again;
/// else a new successor.
fn redeploy(
    engine: &Engine,
    d: Deployment,
    shipment: &Shipment<'_>,
    files: Vec<(String, Vec<u8>)>,
    secrets: BTreeMap<String, String>,
) -> Result<Deployed, OperationError> {
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
        return Err(OperationError::HostnamesChanged { deployment: d.id, added, removed });
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
    // As recorded: the engine may make it the deployment's revision the moment it is
    // (a deployment serving nothing), before a later read could find it.
    let recorded = store.put_successor(&new)?.recorded;
    staged.keep();
    engine.wake();
    in_progress(engine, d, project, recorded)
}

/// The answer to a deploy of the project the deployment already has, with its newest quote:
/// a funded one as it is (the funds may still be there), else, while the deployment waits for
/// funds, its open quote (`Engine::open_quote`).
fn unchanged(engine: &Engine, d: Deployment, project: &Project) -> Result<Deployed, OperationError> {
    let periods = u64::from(project.spend.fund_periods);
    let quote = match engine.store().quotes(&d.id)?.into_iter().next() {
        Some(q) if q.funded_at.is_some() || d.state != DeploymentState::PendingFunding => q,
        Some(_) => engine.open_quote(&d, periods)?,
        None => engine.quote(&d, periods)?,
    };
    Ok(Deployed::Unchanged(DeployResponse { deployment: engine.with_url(d), quote, existing: true, successor: None }))
}

/// The answer to a deploy that made (or repeats) a successor: the deployment as it serves,
/// the successor, and its newest quote, or, when the deployment waits for funds, its open
/// quote: one for the successor's project, which takes over at once (`Engine::open_quote`;
/// the quote the deployment had binds the project it replaces, and is stale, issue 41).
fn in_progress(engine: &Engine, d: Deployment, project: &Project, s: Successor) -> Result<Deployed, OperationError> {
    let quote = match engine.store().quotes(&d.id)?.into_iter().next() {
        Some(q) if d.state != DeploymentState::PendingFunding => q,
        _ => engine.open_quote(&d, u64::from(project.spend.fund_periods))?,
    };
    Ok(Deployed::Successor(DeployResponse {
        deployment: engine.with_url(d),
        quote,
        existing: false,
        successor: Some(s),
    }))
}
