//! The service's storage, behind a trait so another backend (PostgreSQL) can follow without
//! touching the handlers. Every read and write happens inside a [`Transaction`]: handlers open
//! one, read what they need, decide, write, and commit; dropping it uncommitted rolls it back.
//! Nothing is cached between transactions, so offline `svc admin` commands on the same store
//! take effect at once.

mod decided;
mod group;
pub mod keys;
#[cfg(test)]
mod keys_tests;
pub mod postgres;
mod rows;
#[cfg(test)]
mod runtime_tests;
#[cfg(test)]
mod session_tests;
mod sqlite;
#[cfg(test)]
mod tests;

pub use decided::{DecidedOn, DecidedWrite, PublicationInputs};
pub use keys::{KEY_FILE, Keys, KeysStarted, Rotation};
pub use postgres::PostgresStore;
pub use sqlite::{DATABASE_FILE, SqliteStore};
pub use svc_sql::StoreAt;

use std::collections::BTreeSet;

use crate::service::auth::Role;
use crate::service::capability::Tier;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule refused the write (the message says which).
    #[error("{0}")]
    Conflict(String),
    /// The named thing does not exist.
    #[error("{0}")]
    NotFound(String),
    /// The backend failed (I/O, corruption, a lock held too long); the cause is kept, typed.
    #[error("storage error: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The database cannot be reached now (down, restarting, every connection busy): the
    /// same operation may succeed in a moment (503, not 500).
    #[error("the store is unavailable: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The key file or a sealed secret (missing, another store's, readable by others, or a
    /// value that does not open): the message says what to do.
    #[error(transparent)]
    Keys(#[from] svc_keys::KeyError),
}

/// A store opened, and what its start found of its keys.
pub struct Opened {
    /// The store, its keys started.
    pub store: std::sync::Arc<dyn ServiceStore>,
    /// The key file, and what the start did (say it: a new key file must be backed up).
    pub keys: KeysStarted,
}

/// Opens (creating and migrating) the store where `at` says: SQLite in a data directory, or a
/// PostgreSQL database; then starts its keys with the key file `key_file` ([`keys::start`]):
/// a store whose key file is missing or wrong is refused ([`StoreError::Keys`]), never opened
/// without its secrets.
pub fn open(at: &svc_sql::StoreAt, key_file: &std::path::Path) -> Result<Opened, StoreError> {
    let store: std::sync::Arc<dyn ServiceStore> = match at {
        svc_sql::StoreAt::DataDir(dir) => std::sync::Arc::new(SqliteStore::open(dir)?),
        svc_sql::StoreAt::Postgres { db, pool } => std::sync::Arc::new(PostgresStore::open(db, *pool)?),
    };
    let keys = keys::start(store.as_ref(), key_file)?;
    Ok(Opened { store, keys })
}

/// A store the service runs on: the publication's transactions and the scheduler's.
pub trait ServiceStore: Store + svc_execution::executor::ExecutionStore {
    /// Where the data lives, for messages (a file, or a database's host, port and name).
    fn location(&self) -> String;
    /// The keys its secrets are sealed with, once started ([`keys::start`]).
    fn keys(&self) -> &Keys;
    /// Rewrites what the database keeps of rows it no longer holds, where it can (SQLite:
    /// `VACUUM`, then the log emptied): after values in clear were sealed, no copy of them
    /// is left in its files.
    fn compact(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

impl ServiceStore for SqliteStore {
    fn location(&self) -> String {
        self.path().display().to_string()
    }

    fn keys(&self) -> &Keys {
        SqliteStore::keys(self)
    }

    fn compact(&self) -> Result<(), StoreError> {
        SqliteStore::compact(self)
    }
}

impl ServiceStore for PostgresStore {
    fn location(&self) -> String {
        format!("postgres {}", PostgresStore::location(self))
    }

    fn keys(&self) -> &Keys {
        PostgresStore::keys(self)
    }
}

/// A storage backend: hands out transactions.
pub trait Store: Send + Sync + 'static {
    /// A transaction that only reads; it sees one consistent snapshot.
    fn read(&self) -> Result<Box<dyn Transaction + '_>, StoreError>;
    /// A transaction that may write. Writers are serialized, so a decision taken on what a
    /// write transaction read still holds when it commits.
    fn write(&self) -> Result<Box<dyn Transaction + '_>, StoreError>;
    /// `sqlite` or `postgres`, for the health route.
    fn kind(&self) -> &'static str;

    /// Whether a read is local and short (SQLite: microseconds, fine on the async runtime) or
    /// round trips to a database across a network (kept off the async workers).
    fn is_local(&self) -> bool {
        self.kind() == "sqlite"
    }

    /// Reads whose statements each see their own snapshot: on a database across a network,
    /// no `BEGIN` and no `ROLLBACK` round trips, for reads whose consistency holds another
    /// way (one statement; or what is checked again when written, [`DecidedOn`]). The default
    /// is [`Store::read`].
    fn read_each(&self) -> Result<Box<dyn Transaction + '_>, StoreError> {
        self.read()
    }

    /// Writes a decided publication as a transaction of its own, where the backend does
    /// that in one call (`None`: it does not, and the publication runs in grouped work).
    /// As [`Transaction::publish_decided`]: the version written, or `None` if anything it
    /// was decided on changed.
    fn publish_decided_alone(&self, _on: &DecidedOn, _write: &DecidedWrite) -> Option<Result<Option<u64>, StoreError>> {
        None
    }

    /// The publication's hot path as statements on the async runtime, where the backend has
    /// it (a database across a network; `None`: the blocking calls here serve).
    fn on_runtime(&self) -> Option<&dyn OnRuntime> {
        None
    }

    /// The caller a token's hash names, read alone (every request asks).
    fn caller(&self, token_hash: &str) -> Result<Option<Caller>, StoreError> {
        self.read_each()?.caller(token_hash)
    }

    /// Whether the store answers: one read of an index.
    fn ping(&self) -> Result<(), StoreError> {
        self.caller("").map(drop)
    }

    /// Runs `work` inside a write transaction and makes its writes durable if it returns
    /// `true` (otherwise they are rolled back), then calls `done` with the commit's outcome.
    /// A backend may group concurrent work into one transaction and one commit (group
    /// commit): each unit runs after the units before it, and sees their writes. A unit that
    /// does not keep its writes is rolled back alone on SQLite; on PostgreSQL, if it wrote,
    /// with its whole group (`group::Undo`), so work for it writes only what it keeps. The
    /// default runs it at once on the calling thread.
    fn write_grouped(&self, work: GroupedWork, done: GroupedDone) {
        let outcome = self.write().and_then(|mut tx| if work(tx.as_mut()) { tx.commit() } else { Ok(()) });
        done(outcome);
    }
}

/// A store's answer, on the async runtime.
pub type Answer<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The statements of every publication (and every request's caller), each alone, run on the
/// async runtime: on a database across a network, a statement sent from the blocking pool
/// crosses threads four times; here it is written to the connection from the request's task.
/// Each answers as the [`Store`] call of the same name.
pub trait OnRuntime: Send + Sync {
    /// As [`Store::caller`].
    fn caller<'a>(&'a self, token_hash: &'a str) -> Answer<'a, Option<Caller>>;
    /// As [`Transaction::publication_inputs`], read alone.
    fn publication_inputs<'a>(
        &'a self,
        organization: i64,
        application_id: &'a str,
    ) -> Answer<'a, Option<PublicationInputs>>;
    /// As [`Store::publish_decided_alone`].
    fn publish_decided<'a>(&'a self, on: &'a DecidedOn, write: &'a DecidedWrite) -> Answer<'a, Option<u64>>;
    /// Makes the connections and prepares these statements, before the first request needs
    /// them (a failure is left for the requests to meet).
    fn warm(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>;
}

/// A unit of write work: `true` keeps its writes.
pub type GroupedWork = Box<dyn FnOnce(&mut dyn Transaction) -> bool + Send>;

/// Told the outcome of the commit that made a unit of grouped work durable (or failed).
pub type GroupedDone = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// What publication layers 3-7 read: a transaction's reads, or the same facts read ahead in
/// one statement ([`PublicationInputs`]).
pub trait LayerReads {
    /// The organization's capability grants.
    fn grants(&mut self, organization: i64) -> Result<BTreeSet<String>, StoreError>;
    /// The organization's operator SSH public keys.
    fn ssh_keys(&mut self, organization: i64) -> Result<Vec<String>, StoreError>;
    /// Job slots held by the organization's applications other than `except`: the jobs of
    /// each one's active version, unless it is disabled or settled.
    fn jobs_in_use(&mut self, organization: i64, except: i64) -> Result<u64, StoreError>;
    /// Curated artifacts with this digest (global).
    fn curated(&mut self, digest: &str) -> Result<Vec<ArtifactEvidence>, StoreError>;
    /// Accepted artifact versions of an application, newest first.
    fn accepted(&mut self, organization: i64, application_id: &str) -> Result<Vec<AcceptedArtifact>, StoreError>;
    /// Every version of a catalog image.
    fn runtime_images(&mut self, catalog: &str, name: &str) -> Result<Vec<RuntimeImage>, StoreError>;
    /// Secrets with a provisioned value for an application.
    fn provisioned_secrets(&mut self, organization: i64, application_id: &str) -> Result<BTreeSet<String>, StoreError>;
}

/// Secrets at rest ([`keys`]; issue 40): the data keys, wrapped, and the sealed values as a
/// start and a rotation find and reseal them.
pub trait KeyRows {
    /// Every data key, by id.
    fn data_keys(&mut self) -> Result<Vec<svc_keys::WrappedKey>, StoreError>;
    /// The current data key: the highest id.
    fn current_data_key(&mut self) -> Result<Option<svc_keys::WrappedKey>, StoreError>;
    /// Records a data key unless one has its id (another instance made it first): whether
    /// it was recorded.
    fn insert_data_key(&mut self, key: &svc_keys::WrappedKey, now: i64) -> Result<bool, StoreError>;
    /// Records a data key wrapped again (under the key file's new KEK).
    fn rewrap_data_key(&mut self, key: &svc_keys::WrappedKey) -> Result<(), StoreError>;
    /// Deletes the data keys older than `current` that no value names; how many went.
    fn delete_unused_data_keys(&mut self, current: svc_keys::DataKeyId) -> Result<u64, StoreError>;
    /// Up to `limit` values not sealed under `current`: those in clear first, then those
    /// under older data keys.
    fn secrets_to_seal(
        &mut self,
        current: Option<svc_keys::DataKeyId>,
        limit: u32,
    ) -> Result<Vec<StoredSecret>, StoreError>;
    /// Replaces `old`'s value with `sealed` under data key `key`, if the row still holds
    /// `old`'s value: whether it did.
    fn reseal_secret(
        &mut self,
        old: &StoredSecret,
        sealed: &[u8],
        key: svc_keys::DataKeyId,
    ) -> Result<bool, StoreError>;
    /// How many values each data key seals (`None`: in clear).
    fn secrets_by_data_key(&mut self) -> Result<Vec<(Option<svc_keys::DataKeyId>, u64)>, StoreError>;
}

/// A provisioned secret's value as stored: the row's key, the value (sealed by
/// `svc_keys`; in clear when an older version wrote it) and the data key that sealed it, as
/// the store keeps it (none for a value in clear).
#[derive(Clone, PartialEq, Eq)]
pub struct StoredSecret {
    /// The organization (the first part of the value's row context).
    pub organization: i64,
    /// The application's ID.
    pub application_id: String,
    /// The secret's ID.
    pub secret_id: String,
    /// The value as stored.
    pub value: Vec<u8>,
    /// Its data key, wrapped; `None`: the value is in clear.
    pub data_key: Option<svc_keys::WrappedKey>,
}

impl std::fmt::Debug for StoredSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the value: one in clear is a secret.
        f.debug_struct("StoredSecret")
            .field("organization", &self.organization)
            .field("application_id", &self.application_id)
            .field("secret_id", &self.secret_id)
            .field("data_key", &self.data_key.as_ref().map(|k| k.id))
            .finish_non_exhaustive()
    }
}

/// The console's sessions (`svc_web::session`): stored by the hash of their id, read
/// through their token's row (a session never outlives its token). Times are Unix ms.
pub trait SessionRows {
    /// Records a session made from the token `token_id` at `now`.
    fn insert_console_session(&mut self, id_hash: &str, token_id: &str, csrf: &str, now: i64)
    -> Result<(), StoreError>;
    /// The session with this hash, if it is live at `now` and its token still exists.
    fn console_session(&mut self, id_hash: &str, now: i64) -> Result<Option<ConsoleSession>, StoreError>;
    /// Records that the session was used at `now`.
    fn touch_console_session(&mut self, id_hash: &str, now: i64) -> Result<(), StoreError>;
    /// Ends the session (signing out): whether there was one.
    fn delete_console_session(&mut self, id_hash: &str) -> Result<bool, StoreError>;
    /// Deletes at most `limit` sessions expired at `now`: how many.
    fn collect_console_sessions(&mut self, now: i64, limit: u32) -> Result<u64, StoreError>;
}

/// A live console session: its member, its CSRF token, and when it was last recorded used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSession {
    /// The member, as their token names them.
    pub caller: Caller,
    /// The session's CSRF token.
    pub csrf: String,
    /// When it was last recorded used (Unix ms).
    pub last_seen_at: i64,
}

/// One transaction. Dropped without [`Transaction::commit`], it rolls back.
pub trait Transaction: LayerReads + KeyRows + SessionRows {
    /// Makes every write of this transaction durable.
    fn commit(self: Box<Self>) -> Result<(), StoreError>;

    /// The organization and role of a token, by the token's hash.
    fn caller(&mut self, token_hash: &str) -> Result<Option<Caller>, StoreError>;
    /// An organization by name.
    fn organization(&mut self, name: &str) -> Result<Option<Organization>, StoreError>;
    /// What layers 3-7 read of an organization and one of its applications, in one
    /// statement; `None` if there is no such organization.
    fn publication_inputs(
        &mut self,
        organization: i64,
        application_id: &str,
    ) -> Result<Option<PublicationInputs>, StoreError>;
    /// An organization by key, with its inputs revision ([`DecidedOn::inputs_revision`]).
    fn organization_inputs(&mut self, organization: i64) -> Result<Option<(Organization, i64)>, StoreError>;
    /// An organization by name, created (basic tier, no authority) if new.
    fn ensure_organization(&mut self, name: &str) -> Result<Organization, StoreError>;
    /// Records a new token.
    fn insert_token(&mut self, organization: i64, token: &NewToken) -> Result<(), StoreError>;
    /// Grants (or revokes) a capability.
    fn set_grant(&mut self, organization: i64, capability: &str, granted: bool) -> Result<(), StoreError>;
    /// Sets the organization's entitlement tier.
    fn set_tier(&mut self, organization: i64, tier: Tier) -> Result<(), StoreError>;
    /// Sets (or clears) the organization's service-credit spend authority per job.
    fn set_spend_authority(&mut self, organization: i64, micros: Option<u64>) -> Result<(), StoreError>;
    /// Adds an operator SSH public key.
    fn add_ssh_key(&mut self, organization: i64, public_key: &str) -> Result<(), StoreError>;

    /// An application of the organization.
    fn application(&mut self, organization: i64, application_id: &str) -> Result<Option<Application>, StoreError>;
    /// The organization's applications, by ID.
    fn applications(&mut self, organization: i64) -> Result<Vec<Application>, StoreError>;
    /// Creates an application; [`StoreError::Conflict`] if the ID is taken.
    fn insert_application(
        &mut self,
        organization: i64,
        application_id: &str,
        application_uid: &str,
    ) -> Result<Application, StoreError>;
    /// Changes an application's status, pointer and settlement.
    fn update_application(&mut self, application: &Application) -> Result<(), StoreError>;

    /// Every version of an application, oldest first.
    fn policy_versions(&mut self, application: i64) -> Result<Vec<PolicyVersion>, StoreError>;
    /// One version of an application.
    fn policy_version(&mut self, application: i64, version: u64) -> Result<Option<PolicyVersion>, StoreError>;
    /// Writes a publication decided on a snapshot, if what it was decided on still holds
    /// ([`DecidedOn`]): the version (numbered after the active one), the application's new
    /// pointer and status, the activity and the wakeup, as one statement where the backend
    /// allows. The version written, or `None` if anything changed (nothing written).
    fn publish_decided(&mut self, on: &DecidedOn, write: &DecidedWrite) -> Result<Option<u64>, StoreError>;
    /// Writes a new immutable version.
    fn insert_policy_version(&mut self, application: i64, version: &PolicyVersion) -> Result<(), StoreError>;
    /// Appends to an application's activity.
    fn record_activity(&mut self, application: i64, entry: &Activity) -> Result<(), StoreError>;
    /// An application's activity, oldest first.
    fn activity(&mut self, application: i64) -> Result<Vec<Activity>, StoreError>;
    /// The newest `limit` activity entries of an application, newest first (the console's
    /// overview: its work stays bounded whatever the history).
    fn recent_activity(&mut self, application: i64, limit: u32) -> Result<Vec<Activity>, StoreError>;
    /// Records that a publication asked the scheduler to reconcile an application at a
    /// version. What makes the scheduler look is the application's `exec_next_at`, which
    /// [`Transaction::update_application`] sets in the same transaction.
    fn record_wakeup(&mut self, application: i64, version: u64) -> Result<(), StoreError>;
    /// How many wakeups an application has had.
    fn wakeups(&mut self, application: i64) -> Result<u64, StoreError>;

    /// What the scheduler has recorded for an application: when it decides next, why it is
    /// blocked, and each slot's live executions and newest generation.
    fn execution_summary(&mut self, application: i64) -> Result<ExecutionSummary, StoreError>;
    /// An application's executions, newest first, older than `before` (an execution key),
    /// at most `limit`.
    fn executions_page(
        &mut self,
        application: i64,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<svc_execution::Execution>, StoreError>;
    /// An application's output lines after `after` (a [`OutputRecord::seq`]; 0: from the
    /// oldest kept), oldest first, at most `limit`; of one execution if `execution` names one.
    fn output_after(
        &mut self,
        application: i64,
        execution: Option<&str>,
        after: i64,
        limit: u32,
    ) -> Result<Vec<OutputRecord>, StoreError>;
    /// The newest `limit` output lines of an application's execution, oldest first.
    fn output_tail(
        &mut self,
        application: i64,
        execution_id: &str,
        limit: u32,
    ) -> Result<Vec<OutputRecord>, StoreError>;
    /// What the named executions (by ID) of an application kept of their output and
    /// dropped, for those that printed.
    fn output_drops(&mut self, application: i64, executions: &[&str]) -> Result<Vec<OutputDrop>, StoreError>;
    /// Stores a secret's value for an application's jobs (provisioning it), sealed under the
    /// current data key ([`keys`]) for its row.
    fn set_secret_value(
        &mut self,
        organization: i64,
        application_id: &str,
        secret_id: &str,
        value: &[u8],
    ) -> Result<(), StoreError>;

    /// Curates an artifact.
    fn curate(&mut self, artifact: &ArtifactEvidence) -> Result<(), StoreError>;
    /// Accepts an artifact version for an application.
    fn accept(
        &mut self,
        organization: i64,
        application_id: &str,
        artifact: &AcceptedArtifact,
    ) -> Result<(), StoreError>;
    /// Adds an image version to a catalog.
    fn add_runtime_image(&mut self, image: &RuntimeImage) -> Result<(), StoreError>;
    /// Marks a secret as provisioned.
    fn provision_secret(&mut self, organization: i64, application_id: &str, secret_id: &str) -> Result<(), StoreError>;
}

/// Who is calling: the token's organization and role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The organization.
    pub organization: Organization,
    /// The token's ID (not the secret).
    pub token_id: String,
    /// The token's name, shown in activity.
    pub name: String,
    /// The member role.
    pub role: Role,
}

impl Caller {
    /// How activity names this caller.
    pub fn actor(&self) -> String {
        format!("{} ({}, {})", self.name, self.role.as_str(), self.token_id)
    }
}

/// An organization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Organization {
    /// Store key.
    pub id: i64,
    /// Unique name.
    pub name: String,
    /// Entitlement tier.
    pub tier: Tier,
    /// Service-credit spend authority per job, in micros.
    pub spend_authority_micros: Option<u64>,
}

/// A token to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewToken {
    /// Public ID.
    pub id: String,
    /// Role.
    pub role: Role,
    /// Name shown in activity.
    pub name: String,
    /// SHA-256 of the token, hex.
    pub hash: String,
}

/// Publication status of an application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Created, never published.
    Disabled,
    /// Published and running.
    Active,
    /// Published and paused, with a reason.
    Paused,
}

impl Status {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Disabled => "disabled",
            Status::Active => "active",
            Status::Paused => "paused",
        }
    }

    /// Reads the API spelling.
    pub fn parse(text: &str) -> Option<Status> {
        Some(match text {
            "disabled" => Status::Disabled,
            "active" => Status::Active,
            "paused" => Status::Paused,
            _ => return None,
        })
    }
}

/// An application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Application {
    /// Store key.
    pub key: i64,
    /// Owning organization.
    pub organization: i64,
    /// The organization-local ID.
    pub application_id: String,
    /// The server-issued immutable identity.
    pub application_uid: String,
    /// Publication status.
    pub status: Status,
    /// Why it is paused.
    pub pause_reason: Option<String>,
    /// The active policy version (0: none).
    pub active_pointer_version: u64,
    /// A `once` application that ran and settled.
    pub settled: bool,
    /// The version that re-armed it after it settled (0: never).
    pub rearmed_version: u64,
}

/// One immutable policy version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyVersion {
    /// 1, 2, ...
    pub version: u64,
    /// 4 or 5.
    pub schema_version: u8,
    /// Of the manifest as authored.
    pub authored_digest: String,
    /// Of the effective policy.
    pub policy_digest: String,
    /// Canonical JSON of the effective policy.
    pub policy: String,
    /// Canonical JSON of the manifest as authored.
    pub authored: String,
    /// Job slots it needs.
    pub jobs: u64,
    /// `once`, `continuous`, `interval`, or `scheduled` (V4).
    pub execution: String,
    /// Who published it.
    pub published_by: String,
}

impl PolicyVersion {
    /// The version as the scheduler reads it.
    pub fn published(&self) -> crate::plan::Published<'_> {
        crate::plan::Published {
            version: self.version,
            schema_version: self.schema_version,
            policy_digest: &self.policy_digest,
            policy: &self.policy,
        }
    }
}

/// One activity entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activity {
    /// RFC 3339 UTC time.
    pub at: String,
    /// Who.
    pub actor: String,
    /// What: `application_created`, `policy_published`, `application_settled`, ...
    pub action: String,
    /// The version concerned.
    pub policy_version: Option<u64>,
    /// The status after the action.
    pub status: Option<String>,
    /// A pause reason.
    pub reason: Option<String>,
}

/// What the service knows of an artifact: where it is, its digest, kind and encryption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactEvidence {
    /// `ipfs://...` (for a runtime image: the bootstrap's).
    pub cid: String,
    /// `sha256:...` (for a runtime image: the bootstrap's).
    pub digest: String,
    /// `ipfs_bundle` or `runtime_image`.
    pub kind: String,
    /// `none` or `aes256_gcm`.
    pub encryption: String,
    /// For a runtime image: the image's digest.
    pub image_digest: Option<String>,
}

/// An artifact version accepted from a build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedArtifact {
    /// `owner/repository` it was built from.
    pub repository: String,
    /// The ref it was built at.
    pub git_ref: String,
    /// The workflow that built it.
    pub workflow_ref: String,
    /// The manifest's path in the repository.
    pub manifest_path: String,
    /// The artifact.
    pub evidence: ArtifactEvidence,
}

/// One exact version of a catalog image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeImage {
    /// Catalog name.
    pub catalog: String,
    /// Image name.
    pub name: String,
    /// Exact version, `MAJOR.MINOR.PATCH`.
    pub version: String,
    /// `sha256:...`
    pub digest: String,
}

/// The output lines an execution keeps at most (the relay's per deployment,
/// `LOG_LINES_KEPT`): beyond them its oldest go, counted as dropped.
pub const OUTPUT_LINES_KEPT: i64 = 10_000;

/// The bytes of output lines an execution keeps at most (the relay's per deployment,
/// `LOG_BYTES_KEPT`).
pub const OUTPUT_BYTES_KEPT: i64 = 4 * 1024 * 1024;

/// The executions of a slot that keep their output: the newest; an older one's goes when a
/// newer one prints (a job restarting for ever keeps a bounded output).
pub const OUTPUT_EXECUTIONS_KEPT: i64 = 5;

/// One line of a job's output, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputRecord {
    /// Its place in the store's order: paging and following read after it.
    pub seq: i64,
    /// The execution whose job printed it.
    pub execution_id: String,
    /// The execution's slot.
    pub slot: u16,
    /// The execution's generation.
    pub generation: u64,
    /// The execution's attempt.
    pub attempt: u32,
    /// `program` or `sidecar`.
    pub part: String,
    /// When the service took it (Unix ms).
    pub at: u64,
    /// The line.
    pub line: String,
}

/// What an execution kept of its output, and dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputDrop {
    /// The execution.
    pub execution_id: String,
    /// Its slot.
    pub slot: u16,
    /// Its generation.
    pub generation: u64,
    /// Its attempt.
    pub attempt: u32,
    /// Lines kept.
    pub kept: u64,
    /// Lines printed and not kept: beyond the bounds, or lost before the service took them.
    pub dropped: u64,
}

/// What the scheduler has recorded for an application.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExecutionSummary {
    /// When it decides next (Unix ms).
    pub next_at: Option<u64>,
    /// Why a slot cannot run: code and message.
    pub blocked: Option<(String, String)>,
    /// Live executions and every attempt of each slot's newest generation, oldest first.
    pub current: Vec<svc_execution::Execution>,
}
