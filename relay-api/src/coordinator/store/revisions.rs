//! Redeploys: a deployment's successor (the next revision of its project) and the moment it
//! takes over. The successor has its own route and keys while it is validated beside the
//! serving revision; [`RelayStore::promote`] makes them the deployment's in one transaction.

use rusqlite::{OptionalExtension, Row, TransactionBehavior, params};

use super::{RelayStore, RouteKeys, StoreError, get_deployment, i64_of, now_ms, refused};
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
}

const SUCCESSOR_COLUMNS: &str =
    "deployment_id, revision, project_digest, route_id, state, reason, created_at, updated_at";

fn successor_row(row: &Row<'_>) -> rusqlite::Result<Successor> {
    Ok(Successor {
        deployment_id: row.get(0)?,
        revision: row.get(1)?,
        project_digest: row.get(2)?,
        route_id: row.get(3)?,
        state: super::spelled(row, 4, SuccessorState::parse)?,
        reason: row.get(5)?,
        created_at: row.get(6)?,
        updated_at: row.get(7)?,
    })
}

impl RelayStore {
    /// The revision number a new successor of the deployment gets: one more than the
    /// deployment's and than the successor it would replace.
    pub fn next_revision(&self, deployment_id: &str) -> Result<u32, StoreError> {
        let conn = self.conn()?;
        let highest: u32 = conn.query_row(
            "SELECT MAX(d.revision, COALESCE(s.revision, 0)) FROM deployments d \
             LEFT JOIN successors s ON s.deployment_id = d.id WHERE d.id = ?1",
            [deployment_id],
            |r| r.get(0),
        )?;
        Ok(highest.saturating_add(1))
    }

    /// Records the deployment's successor, replacing one not serving yet; returns the one
    /// replaced (its job is to stop). Refused for a stopped deployment, and when another
    /// deploy recorded this revision first (`deploy_in_progress`).
    pub fn put_successor(&self, new: &NewSuccessor) -> Result<Option<Successor>, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let d = get_deployment(&tx, &new.deployment_id)?;
        if d.state == DeploymentState::Stopped {
            return Err(refused("deployment_stopped", format!("deployment {} is stopped", d.id)));
        }
        let sql = format!("SELECT {SUCCESSOR_COLUMNS} FROM successors WHERE deployment_id = ?1");
        let replaced = tx.query_row(&sql, [&new.deployment_id], successor_row).optional()?;
        let expected = d.revision.max(replaced.as_ref().map_or(0, |s| s.revision)).saturating_add(1);
        if new.revision != expected {
            return Err(refused(
                "deploy_in_progress",
                format!("another deploy of project \"{}\" was recorded meanwhile; deploy again", d.project),
            ));
        }
        let now = now_ms();
        tx.execute("DELETE FROM successors WHERE deployment_id = ?1", [&new.deployment_id])?;
        tx.execute(
            "INSERT INTO successors (deployment_id, revision, project_json, project_digest, manifest_digest, \
             ceiling_micros, route_id, state, reason, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'starting', ?8, ?9, ?9)",
            params![
                new.deployment_id,
                new.revision,
                new.project_json,
                new.project_digest,
                new.manifest_digest,
                i64_of(new.ceiling_micros)?,
                new.route_id,
                format!("deployed; revision {} serves until this one is validated", d.revision),
                now
            ],
        )?;
        tx.execute(
            "INSERT INTO logs (deployment_id, source, line, at) VALUES (?1, 'route', ?2, ?3)",
            params![
                new.deployment_id,
                format!(
                    "revision {} deployed (project {}); revision {} serves meanwhile",
                    new.revision, new.project_digest, d.revision
                ),
                now
            ],
        )?;
        tx.commit()?;
        Ok(replaced)
    }

    /// The deployment's successor, if it has one.
    pub fn successor(&self, deployment_id: &str) -> Result<Option<Successor>, StoreError> {
        let conn = self.conn()?;
        let sql = format!("SELECT {SUCCESSOR_COLUMNS} FROM successors WHERE deployment_id = ?1");
        Ok(conn.query_row(&sql, [deployment_id], successor_row).optional()?)
    }

    /// Every successor (the engine's work list).
    pub fn successors(&self) -> Result<Vec<Successor>, StoreError> {
        let conn = self.conn()?;
        let sql = format!("SELECT {SUCCESSOR_COLUMNS} FROM successors ORDER BY created_at");
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map([], successor_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The project file of the deployment's successor, as JSON text.
    pub fn successor_project_json(&self, deployment_id: &str) -> Result<String, StoreError> {
        let conn = self.conn()?;
        conn.query_row("SELECT project_json FROM successors WHERE deployment_id = ?1", [deployment_id], |r| r.get(0))
            .optional()?
            .ok_or_else(|| StoreError::NotFound(format!("a successor of deployment {deployment_id}")))
    }

    /// The keys of the successor's job; `None` before it is launched.
    pub fn successor_keys(&self, deployment_id: &str) -> Result<Option<RouteKeys>, StoreError> {
        let conn = self.conn()?;
        let keys = conn
            .query_row(
                "SELECT credential_sha256, route_public_key FROM successors WHERE deployment_id = ?1",
                [deployment_id],
                super::route_keys_row,
            )
            .optional()?;
        Ok(keys.flatten())
    }

    /// Records the keys of the successor's job about to be launched.
    pub fn set_successor_keys(&self, deployment_id: &str, revision: u32, keys: &RouteKeys) -> Result<(), StoreError> {
        let changed = self.conn()?.execute(
            "UPDATE successors SET credential_sha256 = ?1, route_public_key = ?2 \
             WHERE deployment_id = ?3 AND revision = ?4",
            params![keys.credential_sha256, keys.route_public_key, deployment_id, revision],
        )?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!("revision {revision} of deployment {deployment_id}")));
        }
        Ok(())
    }

    /// Moves the successor (if it is still revision `revision`) to `state`, and logs why.
    pub fn set_successor_state(
        &self,
        deployment_id: &str,
        revision: u32,
        state: SuccessorState,
        reason: &str,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        let now = now_ms();
        let before: Option<String> = tx
            .query_row(
                "SELECT state FROM successors WHERE deployment_id = ?1 AND revision = ?2",
                params![deployment_id, revision],
                |r| r.get(0),
            )
            .optional()?;
        let Some(before) = before else { return Ok(()) };
        tx.execute(
            "UPDATE successors SET state = ?1, reason = ?2, updated_at = ?3 WHERE deployment_id = ?4 AND revision = ?5",
            params![state.as_str(), reason, now, deployment_id, revision],
        )?;
        // State changes are logged; a reason that changes within a state (the latest failed
        // validation) is only shown.
        if before != state.as_str() {
            tx.execute(
                "INSERT INTO logs (deployment_id, source, line, at) VALUES (?1, 'route', ?2, ?3)",
                params![deployment_id, format!("revision {revision} is {}: {reason}", state.as_str()), now],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Makes revision `revision` the one the deployment serves: its project, route and keys
    /// become the deployment's, in one transaction, and the successor row goes. Returns the
    /// deployment as it is now.
    pub fn promote(&self, deployment_id: &str, revision: u32, reason: &str) -> Result<Deployment, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let now = now_ms();
        let changed = tx.execute(
            "UPDATE deployments SET (project_json, project_digest, manifest_digest, ceiling_micros, route_id, \
             credential_sha256, route_public_key, revision, updated_at) = \
             (SELECT project_json, project_digest, manifest_digest, ceiling_micros, route_id, credential_sha256, \
              route_public_key, revision, ?3 FROM successors WHERE deployment_id = ?1 AND revision = ?2) \
             WHERE id = ?1 AND state <> 'stopped' \
             AND EXISTS (SELECT 1 FROM successors WHERE deployment_id = ?1 AND revision = ?2)",
            params![deployment_id, revision, now],
        )?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!("revision {revision} of deployment {deployment_id}")));
        }
        tx.execute("DELETE FROM successors WHERE deployment_id = ?1", [deployment_id])?;
        tx.execute(
            "INSERT INTO logs (deployment_id, source, line, at) VALUES (?1, 'route', ?2, ?3)",
            params![deployment_id, format!("revision {revision} serves: {reason}"), now],
        )?;
        let d = get_deployment(&tx, deployment_id)?;
        tx.commit()?;
        Ok(d)
    }

    /// Withdraws the deployment's successor (if it is still revision `revision`), logging why;
    /// the engine stops its job and removes its files.
    pub fn drop_successor(&self, deployment_id: &str, revision: u32, reason: &str) -> Result<(), StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        let dropped = tx.execute(
            "DELETE FROM successors WHERE deployment_id = ?1 AND revision = ?2",
            params![deployment_id, revision],
        )?;
        if dropped > 0 {
            tx.execute(
                "INSERT INTO logs (deployment_id, source, line, at) VALUES (?1, 'route', ?2, ?3)",
                params![deployment_id, format!("revision {revision} {reason}"), now_ms()],
            )?;
        }
        tx.commit()?;
        Ok(())
    }
}
