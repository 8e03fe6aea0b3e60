//! Redeploys: a deployment's successor (the next revision of its project) and the moment it
//! takes over. The successor has its own route and keys while it is validated beside the
//! serving revision; [`RelayStore::promote`] makes them the deployment's in one transaction.

use std::collections::BTreeMap;

use svc_keys::Keyring;

use super::backend::Transaction;
use super::{
    PublishedPolicy, RelayStore, RevisionBundle, RouteKeys, StoreError, get_deployment, keys, not_found, now_ms,
    refused,
};
use crate::coordinator::model::{Deployment, Successor, SuccessorState};
use crate::coordinator::state::DeploymentState;

/// A successor to record.
#[derive(Debug, Clone)]
pub struct NewSuccessor {
    /// The deployment it would take over.
    pub deployment_id: String,
    /// Its revision: one more than the deployment's and than any successor it replaces.
    pub revision: u32,
    /// The project file, as JSON text.
    pub project_json: String,
    /// The digest of the project file and the app's files.
    pub project_digest: String,
    /// The V5 manifest's digest.
    pub manifest_digest: String,
    /// The project's spend ceiling.
    pub ceiling_micros: u64,
    /// Its own gateway route ID.
    pub route_id: String,
    /// The policy it publishes (its revision is `revision`; recorded with it).
    pub policy: PublishedPolicy,
    /// Its files and secrets.
    pub bundle: RevisionBundle,
}

/// One more than the deployment's revision, than its successor's, and than any revision that
/// published a policy (a withdrawn successor's number is not given again: a policy version is
/// published once).
fn next_revision(
    tx: &mut dyn Transaction,
    deployment: &Deployment,
    successor: Option<&Successor>,
) -> Result<u32, StoreError> {
    let published = tx.last_published(&deployment.id)?;
    Ok(deployment.revision.max(successor.map_or(0, |s| s.revision)).max(published).saturating_add(1))
}

/// Records a revision's files, and its secrets sealed ([`keys::put_secrets`]), in `tx`.
pub(super) fn put_bundle(
    keys: &Keyring,
    tx: &mut dyn Transaction,
    deployment_id: &str,
    revision: u32,
    bundle: &RevisionBundle,
) -> Result<(), StoreError> {
    tx.insert_revision_files(deployment_id, revision, &bundle.files)?;
    keys::put_secrets(keys, tx, deployment_id, revision, &bundle.secrets)
}

/// A revision's secrets, opened ([`keys::open_secrets`]), if recorded.
pub(crate) fn revision_secrets(
    keys: &Keyring,
    tx: &mut dyn Transaction,
    deployment_id: &str,
    revision: u32,
) -> Result<Option<BTreeMap<String, String>>, StoreError> {
    tx.revision_secrets(deployment_id, revision)?.map(|stored| keys::open_secrets(keys, &stored)).transpose()
}

/// What [`Store::put_successor`] recorded.
#[derive(Debug)]
pub struct RecordedSuccessor {
    /// The successor as its transaction recorded it.
    pub recorded: Successor,
    /// The successor it replaced (one not serving yet), whose job is to stop.
    pub replaced: Option<Successor>,
}

impl RelayStore {
    /// The revision number a new successor of the deployment gets: one more than the
    /// deployment's and than the successor it would replace.
    pub fn next_revision(&self, deployment_id: &str) -> Result<u32, StoreError> {
        self.read(|tx| {
            let d = get_deployment(tx, deployment_id)?;
            let successor = tx.successor(deployment_id)?;
            next_revision(tx, &d, successor.as_ref())
        })
    }

    /// Records the deployment's successor, replacing one not serving yet; returns it as
    /// recorded, and the one replaced (its job is to stop). Refused for a stopped deployment,
    /// and when another deploy recorded this revision first (`deploy_in_progress`).
    ///
    /// The successor is read in the recording transaction: once it commits, the engine may
    /// make it the deployment's revision at once (a deployment serving nothing), so a later
    /// read may find no successor at all.
    pub fn put_successor(&self, new: &NewSuccessor) -> Result<RecordedSuccessor, StoreError> {
        self.write(|tx| {
            let d = get_deployment(tx, &new.deployment_id)?;
            if d.state == DeploymentState::Stopped {
                return Err(refused("deployment_stopped", format!("deployment {} is stopped", d.id)));
            }
            let replaced = tx.successor(&new.deployment_id)?;
            if new.revision != next_revision(tx, &d, replaced.as_ref())? {
                return Err(refused(
                    "deploy_in_progress",
                    format!("another deploy of project \"{}\" was recorded meanwhile; deploy again", d.project),
                ));
            }
            let now = now_ms();
            let reason = format!("deployed; revision {} serves until this one is validated", d.revision);
            tx.put_successor(new, &reason, now)?;
            put_bundle(&self.keys, tx, &new.deployment_id, new.revision, &new.bundle)?;
            let policy = PublishedPolicy { revision: new.revision, published_at: now, ..new.policy.clone() };
            tx.insert_policy(&new.deployment_id, &policy)?;
            let line = format!(
                "revision {} deployed (project {}); revision {} serves meanwhile",
                new.revision, new.project_digest, d.revision
            );
            tx.append_logs(&new.deployment_id, "route", &[line], now)?;
            // A newer policy version: the scheduler rolls it out now.
            tx.wake(&new.deployment_id, now)?;
            let recorded = tx.successor(&new.deployment_id)?.ok_or_else(|| {
                StoreError::NotFound(format!("the successor of deployment {} just recorded", new.deployment_id))
            })?;
            Ok(RecordedSuccessor { recorded, replaced })
        })
    }

    /// A revision's files and secrets, as its deploy sent them; `None` if the store has
    /// none for it (a revision that neither serves nor comes next, swept).
    pub fn revision_bundle(&self, deployment_id: &str, revision: u32) -> Result<Option<RevisionBundle>, StoreError> {
        self.read(|tx| {
            let Some(secrets) = revision_secrets(&self.keys, tx, deployment_id, revision)? else { return Ok(None) };
            Ok(Some(RevisionBundle { files: tx.revision_files(deployment_id, revision)?, secrets }))
        })
    }

    /// A revision's secrets, as its deploy sent them (a redeploy compares them).
    pub fn revision_secrets(
        &self,
        deployment_id: &str,
        revision: u32,
    ) -> Result<Option<BTreeMap<String, String>>, StoreError> {
        self.read(|tx| revision_secrets(&self.keys, tx, deployment_id, revision))
    }

    /// Records a revision's files and secrets if the store has none for it: a data directory
    /// written before the store kept them (`files::import`). `false` if it had them.
    pub fn import_revision_bundle(
        &self,
        deployment_id: &str,
        revision: u32,
        bundle: &RevisionBundle,
    ) -> Result<bool, StoreError> {
        self.write(|tx| {
            if tx.revision_secrets(deployment_id, revision)?.is_some() {
                return Ok(false);
            }
            put_bundle(&self.keys, tx, deployment_id, revision, bundle)?;
            Ok(true)
        })
    }

    /// Removes the files and secrets of revisions that neither serve (of a deployment not
    /// stopped) nor come next; returns how many revisions' rows went.
    pub fn sweep_revision_bundles(&self) -> Result<u64, StoreError> {
        self.write(|tx| tx.delete_unused_bundles())
    }

    /// The deployment's successor, if it has one.
    pub fn successor(&self, deployment_id: &str) -> Result<Option<Successor>, StoreError> {
        self.read(|tx| tx.successor(deployment_id))
    }

    /// Every successor (the engine's work list).
    pub fn successors(&self) -> Result<Vec<Successor>, StoreError> {
        self.read(|tx| tx.successors())
    }

    /// The project file of the deployment's successor, as JSON text.
    pub fn successor_project_json(&self, deployment_id: &str) -> Result<String, StoreError> {
        self.read(|tx| tx.successor_project_json(deployment_id))?
            .ok_or_else(|| not_found(format!("a successor of deployment {deployment_id}")))
    }

    /// The keys of the successor's job; `None` before it is launched.
    pub fn successor_keys(&self, deployment_id: &str) -> Result<Option<RouteKeys>, StoreError> {
        self.read(|tx| tx.successor_keys(deployment_id))
    }

    /// Records the keys of the successor's job about to be launched.
    pub fn set_successor_keys(&self, deployment_id: &str, revision: u32, keys: &RouteKeys) -> Result<(), StoreError> {
        self.write(|tx| {
            if tx.set_successor_keys(deployment_id, revision, keys)? {
                Ok(())
            } else {
                Err(not_found(format!("revision {revision} of deployment {deployment_id}")))
            }
        })
    }

    /// Moves the successor (if it is still revision `revision`) to `state`, and logs why.
    pub fn set_successor_state(
        &self,
        deployment_id: &str,
        revision: u32,
        state: SuccessorState,
        reason: &str,
    ) -> Result<(), StoreError> {
        let changed = self.write(|tx| -> Result<bool, StoreError> {
            let Some(before) = tx.successor(deployment_id)?.filter(|s| s.revision == revision) else {
                return Ok(false);
            };
            let now = now_ms();
            tx.set_successor_state(deployment_id, revision, state, reason, now)?;
            if before.state != state {
                let line = format!("revision {revision} is {}: {reason}", state.as_str());
                tx.append_logs(deployment_id, "route", &[line], now)?;
                tx.wake(deployment_id, now)?;
            }
            Ok(before.state != state)
        })?;
        // One line per change (issue 42); a validation failing again with a new reason is not one.
        if changed {
            let state = state.as_str();
            tracing::info!(
                deployment = %deployment_id,
                "svc relay: deployment {deployment_id} revision {revision} is {state}: {reason}"
            );
        }
        Ok(())
    }

    /// Makes revision `revision` the deployment's: its project, route and keys become the
    /// deployment's, in one transaction, and the successor row goes; the route log says
    /// `revision N {what}` (`serves: ...` once validated, `takes over: ...` when nothing
    /// served). Returns the deployment as it is now.
    pub fn promote(&self, deployment_id: &str, revision: u32, what: &str) -> Result<Deployment, StoreError> {
        self.write(|tx| {
            let now = now_ms();
            if !tx.adopt_successor(deployment_id, revision, now)? {
                return Err(not_found(format!("revision {revision} of deployment {deployment_id}")));
            }
            tx.delete_successors(deployment_id)?;
            tx.append_logs(deployment_id, "route", &[format!("revision {revision} {what}")], now)?;
            tx.wake(deployment_id, now)?;
            get_deployment(tx, deployment_id)
        })
        .inspect(|_| {
            tracing::info!(
                deployment = %deployment_id,
                "svc relay: deployment {deployment_id} revision {revision} {what}"
            );
        })
    }

    /// Withdraws the deployment's successor (if it is still revision `revision`), logging why;
    /// the engine stops its job and removes its files.
    pub fn drop_successor(&self, deployment_id: &str, revision: u32, reason: &str) -> Result<(), StoreError> {
        self.write(|tx| {
            if tx.delete_successor(deployment_id, revision)? {
                let now = now_ms();
                tx.append_logs(deployment_id, "route", &[format!("revision {revision} {reason}")], now)?;
                tx.wake(deployment_id, now)?;
            }
            Ok(())
        })
    }
}
