//! Published policies, in SQL.

use rusqlite::{OptionalExtension, params};

use super::SqliteTransaction;
use crate::coordinator::store::backend::PolicyRows;
use crate::coordinator::store::{PublishedPolicy, StoreError};

impl PolicyRows for SqliteTransaction<'_> {
    fn insert_policy(&mut self, deployment_id: &str, policy: &PublishedPolicy) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO policies (deployment_id, revision, schema_version, authored_digest, policy_digest, \
             policy_json, published_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                deployment_id,
                policy.revision,
                policy.schema_version,
                policy.authored_digest,
                policy.policy_digest,
                policy.policy_json,
                policy.published_at
            ],
        )?;
        Ok(())
    }

    fn policy(&mut self, deployment_id: &str, revision: u32) -> Result<Option<PublishedPolicy>, StoreError> {
        Ok(self
            .conn
            .query_row(
                "SELECT revision, schema_version, authored_digest, policy_digest, policy_json, published_at \
                 FROM policies WHERE deployment_id = ?1 AND revision = ?2",
                params![deployment_id, revision],
                |row| {
                    Ok(PublishedPolicy {
                        revision: row.get(0)?,
                        schema_version: row.get(1)?,
                        authored_digest: row.get(2)?,
                        policy_digest: row.get(3)?,
                        policy_json: row.get(4)?,
                        published_at: row.get(5)?,
                    })
                },
            )
            .optional()?)
    }

    fn last_published(&mut self, deployment_id: &str) -> Result<u32, StoreError> {
        Ok(self.conn.query_row(
            "SELECT COALESCE(MAX(revision), 0) FROM policies WHERE deployment_id = ?1",
            [deployment_id],
            |r| r.get(0),
        )?)
    }
}
