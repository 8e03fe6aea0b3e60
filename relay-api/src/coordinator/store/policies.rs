//! The policy each revision of a deployment publishes: its Manifest V5 made into an immutable
//! effective document (`coordinator::policy`), recorded with the revision in the same
//! transaction, and read by every launch of the revision's job and by the deployment's
//! projection.

use super::{RelayStore, StoreError, now_ms};

/// One published policy version: the revision it is (its version number) and its document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishedPolicy {
    /// The revision, and the policy's version.
    pub revision: u32,
    /// 5.
    pub schema_version: u8,
    /// The manifest's authored digest.
    pub authored_digest: String,
    /// The effective document's digest (`policyDigest`).
    pub policy_digest: String,
    /// The effective document, canonical JSON.
    pub policy_json: String,
    /// When it was published, Unix milliseconds (0 until recorded).
    pub published_at: i64,
}

impl PublishedPolicy {
    /// The version as the scheduler reads it.
    pub fn published(&self) -> manifest_core::plan::Published<'_> {
        manifest_core::plan::Published {
            version: u64::from(self.revision),
            schema_version: self.schema_version,
            policy_digest: &self.policy_digest,
            policy: &self.policy_json,
        }
    }
}

impl RelayStore {
    /// The policy revision `revision` of the deployment published, if it published one
    /// (revisions deployed before policies were recorded did not: see
    /// [`RelayStore::publish_policy`]).
    pub fn policy(&self, deployment_id: &str, revision: u32) -> Result<Option<PublishedPolicy>, StoreError> {
        self.read(|tx| tx.policy(deployment_id, revision))
    }

    /// Every revision with no policy yet (the engine publishes those of its active
    /// deployments): one read, whatever the number of deployments.
    pub fn unpublished(&self) -> Result<Vec<super::backend::Unpublished>, StoreError> {
        self.read(|tx| tx.unpublished())
    }

    /// Records the policy of a revision deployed before policies were recorded, when its job
    /// is next launched; a revision's policy, once recorded, is never replaced: the one
    /// recorded is returned.
    pub fn publish_policy(&self, deployment_id: &str, policy: &PublishedPolicy) -> Result<PublishedPolicy, StoreError> {
        self.write(|tx| {
            if let Some(recorded) = tx.policy(deployment_id, policy.revision)? {
                return Ok(recorded);
            }
            let mut policy = policy.clone();
            policy.published_at = now_ms();
            tx.insert_policy(deployment_id, &policy)?;
            Ok(policy)
        })
    }
}
