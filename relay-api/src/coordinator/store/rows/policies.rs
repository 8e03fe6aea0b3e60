//! Published policies.

use crate::coordinator::store::backend::{PolicyRows, Unpublished};
use crate::coordinator::store::sql::{Sql, params};
use crate::coordinator::store::{PublishedPolicy, StoreError};

impl<T: Sql> PolicyRows for T {
    fn insert_policy(&mut self, deployment_id: &str, policy: &PublishedPolicy) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO policies (deployment_id, revision, schema_version, authored_digest, policy_digest, \
             policy_json, published_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                deployment_id,
                policy.revision,
                i64::from(policy.schema_version),
                &policy.authored_digest,
                &policy.policy_digest,
                &policy.policy_json,
                policy.published_at
            ],
        )?;
        Ok(())
    }

    fn policy(&mut self, deployment_id: &str, revision: u32) -> Result<Option<PublishedPolicy>, StoreError> {
        let row = self.query_opt(
            "SELECT revision, schema_version, authored_digest, policy_digest, policy_json, published_at \
             FROM policies WHERE deployment_id = ?1 AND revision = ?2",
            params![deployment_id, revision],
        )?;
        row.map(|r| {
            Ok(PublishedPolicy {
                revision: r.u32(0)?,
                schema_version: u8::try_from(r.u32(1)?)
                    .map_err(|_| StoreError::Backend("a stored policy's schema version is beyond 255".into()))?,
                authored_digest: r.text(2)?,
                policy_digest: r.text(3)?,
                policy_json: r.text(4)?,
                published_at: r.i64(5)?,
            })
        })
        .transpose()
    }

    fn last_published(&mut self, deployment_id: &str) -> Result<u32, StoreError> {
        Ok(self
            .query_one(
                "SELECT COALESCE(MAX(revision), 0) FROM policies WHERE deployment_id = ?1",
                params![deployment_id],
            )?
            .u32(0)?)
    }

    fn unpublished(&mut self) -> Result<Vec<Unpublished>, StoreError> {
        let rows = self.query(
            "SELECT d.id, d.revision, d.route_id, 0 FROM deployments d \
             WHERE NOT EXISTS (SELECT 1 FROM policies p WHERE p.deployment_id = d.id AND p.revision = d.revision) \
             UNION ALL \
             SELECT s.deployment_id, s.revision, s.route_id, 1 FROM successors s \
             WHERE NOT EXISTS (SELECT 1 FROM policies p WHERE p.deployment_id = s.deployment_id \
                               AND p.revision = s.revision)",
            &[],
        )?;
        Ok(rows
            .iter()
            .map(|r| {
                Ok(Unpublished {
                    deployment_id: r.text(0)?,
                    revision: r.u32(1)?,
                    route_id: r.text(2)?,
                    successor: r.bool(3)?,
                })
            })
            .collect::<Result<_, svc_sql::SqlError>>()?)
    }
}
