//! Redeploys' successors.

use svc_keys::DataKeyId;

use super::columns::{SUCCESSOR_COLUMNS, route_keys_row, successor_row};
use super::keys::{SECRET_COLUMNS, SECRET_TABLES, secret_row};
use crate::coordinator::model::{Successor, SuccessorState};
use crate::coordinator::store::backend::{RevisionRows, StoredSecret};
use crate::coordinator::store::sql::{Sql, i64_of, params};
use crate::coordinator::store::{NewSuccessor, RouteKeys, StoreError};

/// App files written by one `INSERT` at most (a bounded number of statement texts, each
/// prepared once per connection).
const FILES_PER_INSERT: usize = 64;

impl<T: Sql> RevisionRows for T {
    fn successor(&mut self, deployment_id: &str) -> Result<Option<Successor>, StoreError> {
        let sql = format!("SELECT {SUCCESSOR_COLUMNS} FROM successors WHERE deployment_id = ?1");
        self.query_opt(&sql, params![deployment_id])?.as_ref().map(successor_row).transpose()
    }

    fn successors(&mut self) -> Result<Vec<Successor>, StoreError> {
        let sql = format!("SELECT {SUCCESSOR_COLUMNS} FROM successors ORDER BY created_at");
        self.query(&sql, &[])?.iter().map(successor_row).collect()
    }

    fn put_successor(&mut self, new: &NewSuccessor, reason: &str, now: i64) -> Result<(), StoreError> {
        self.execute("DELETE FROM successors WHERE deployment_id = ?1", params![&new.deployment_id])?;
        self.execute(
            "INSERT INTO successors (deployment_id, revision, project_json, project_digest, manifest_digest, \
             ceiling_micros, route_id, state, reason, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'starting', ?8, ?9, ?9)",
            params![
                &new.deployment_id,
                new.revision,
                &new.project_json,
                &new.project_digest,
                &new.manifest_digest,
                i64_of(new.ceiling_micros)?,
                &new.route_id,
                reason,
                now
            ],
        )?;
        Ok(())
    }

    fn successor_project_json(&mut self, deployment_id: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .query_opt("SELECT project_json FROM successors WHERE deployment_id = ?1", params![deployment_id])?
            .map(|r| r.text(0))
            .transpose()?)
    }

    fn successor_keys(&mut self, deployment_id: &str) -> Result<Option<RouteKeys>, StoreError> {
        let row = self.query_opt(
            "SELECT credential_sha256, route_public_key FROM successors WHERE deployment_id = ?1",
            params![deployment_id],
        )?;
        Ok(row.as_ref().map(route_keys_row).transpose()?.flatten())
    }

    fn set_successor_keys(&mut self, deployment_id: &str, revision: u32, keys: &RouteKeys) -> Result<bool, StoreError> {
        let changed = self.execute(
            "UPDATE successors SET credential_sha256 = ?1, route_public_key = ?2 \
             WHERE deployment_id = ?3 AND revision = ?4",
            params![&keys.credential_sha256, &keys.route_public_key, deployment_id, revision],
        )?;
        Ok(changed > 0)
    }

    fn set_successor_state(
        &mut self,
        deployment_id: &str,
        revision: u32,
        state: SuccessorState,
        reason: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        self.execute(
            "UPDATE successors SET state = ?1, reason = ?2, updated_at = ?3 WHERE deployment_id = ?4 AND revision = ?5",
            params![state.as_str(), reason, now, deployment_id, revision],
        )?;
        Ok(())
    }

    fn adopt_successor(&mut self, deployment_id: &str, revision: u32, now: i64) -> Result<bool, StoreError> {
        let changed = self.execute(
            "UPDATE deployments SET (project_json, project_digest, manifest_digest, ceiling_micros, route_id, \
             credential_sha256, route_public_key, revision, updated_at) = \
             (SELECT project_json, project_digest, manifest_digest, ceiling_micros, route_id, credential_sha256, \
              route_public_key, revision, CAST(?3 AS BIGINT) FROM successors WHERE deployment_id = ?1 AND revision = ?2) \
             WHERE id = ?1 AND state <> 'stopped' \
             AND EXISTS (SELECT 1 FROM successors WHERE deployment_id = ?1 AND revision = ?2)",
            params![deployment_id, revision, now],
        )?;
        Ok(changed > 0)
    }

    fn delete_successor(&mut self, deployment_id: &str, revision: u32) -> Result<bool, StoreError> {
        let dropped = self.execute(
            "DELETE FROM successors WHERE deployment_id = ?1 AND revision = ?2",
            params![deployment_id, revision],
        )?;
        Ok(dropped > 0)
    }

    fn delete_successors(&mut self, deployment_id: &str) -> Result<(), StoreError> {
        self.execute("DELETE FROM successors WHERE deployment_id = ?1", params![deployment_id])?;
        Ok(())
    }

    fn insert_revision_files(
        &mut self,
        deployment_id: &str,
        revision: u32,
        files: &[(String, Vec<u8>)],
    ) -> Result<(), StoreError> {
        // Up to FILES_PER_INSERT rows a statement: on PostgreSQL each statement is a round
        // trip, made under the writers' lock (a deploy has up to 2,000 files).
        for chunk in files.chunks(FILES_PER_INSERT) {
            let rows: Vec<String> =
                (0..chunk.len()).map(|i| format!("(?1, ?2, ?{}, ?{})", 3 + 2 * i, 4 + 2 * i)).collect();
            let sql =
                format!("INSERT INTO revision_files (deployment_id, revision, path, bytes) VALUES {}", rows.join(", "));
            let mut values = params![deployment_id, revision].to_vec();
            for (path, bytes) in chunk {
                values.extend_from_slice(params![path, bytes.as_slice()]);
            }
            self.execute(&sql, &values)?;
        }
        Ok(())
    }

    fn revision_files(&mut self, deployment_id: &str, revision: u32) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let rows = self.query(
            "SELECT path, bytes FROM revision_files WHERE deployment_id = ?1 AND revision = ?2 ORDER BY path",
            params![deployment_id, revision],
        )?;
        Ok(rows
            .iter()
            .map(|r| Ok((r.text(0)?, r.opt_bytes(1)?.unwrap_or_default())))
            .collect::<Result<Vec<_>, svc_sql::SqlError>>()?)
    }

    fn insert_revision_secrets(
        &mut self,
        deployment_id: &str,
        revision: u32,
        sealed: &str,
        data_key: DataKeyId,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO revision_secrets (deployment_id, revision, secrets, data_key_id) VALUES (?1, ?2, ?3, ?4)",
            params![deployment_id, revision, sealed, data_key],
        )?;
        Ok(())
    }

    fn revision_secrets(&mut self, deployment_id: &str, revision: u32) -> Result<Option<StoredSecret>, StoreError> {
        let row = self.query_opt(
            &format!("SELECT {SECRET_COLUMNS} FROM {SECRET_TABLES} WHERE r.deployment_id = ?1 AND r.revision = ?2"),
            params![deployment_id, revision],
        )?;
        row.as_ref().map(secret_row).transpose()
    }

    fn delete_unused_bundles(&mut self) -> Result<u64, StoreError> {
        // A revision is in use while its deployment (not stopped) serves it or it comes next.
        // Found on `revision_secrets` (a row per revision, written with its files), then each
        // unused revision's files by their key: no scan of every stored file.
        let unused = self.query(
            "SELECT r.deployment_id, r.revision FROM revision_secrets r WHERE NOT EXISTS (SELECT 1 FROM deployments d \
             WHERE d.id = r.deployment_id AND d.revision = r.revision AND d.state <> 'stopped') AND NOT EXISTS \
             (SELECT 1 FROM successors s WHERE s.deployment_id = r.deployment_id AND s.revision = r.revision)",
            &[],
        )?;
        for row in &unused {
            let (id, revision) = (row.text(0)?, row.i64(1)?);
            let key = params![&id, revision];
            self.execute("DELETE FROM revision_files WHERE deployment_id = ?1 AND revision = ?2", key)?;
            self.execute("DELETE FROM revision_secrets WHERE deployment_id = ?1 AND revision = ?2", key)?;
        }
        Ok(unused.len() as u64)
    }
}
