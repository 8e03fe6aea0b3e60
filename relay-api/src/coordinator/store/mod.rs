//! The coordinator's store. Every customer or engine operation (deploy with its hostnames
//! and quote, fund, stop, settle, refund, claim, admit) is one transaction: a crash leaves
//! all of a change or none of it, and money moves only inside one.
//!
//! The rules live here, in Rust, over the row traits of [`backend`]; the statements are in
//! `rows/`, written once for both backends over [`sql`]: [`sqlite`] (embedded, the default)
//! and [`postgres`] (a database several coordinators can share). The operations block (a
//! disk, a network): the HTTP handlers run them off the async runtime (`http::blocking`).

mod activity;
pub mod backend;
mod console_sessions;
mod deployments;
mod executions;
mod feed;
pub mod keys;
mod ledger;
mod policies;
pub mod postgres;
mod revisions;
mod rows;
pub(crate) mod sql;
pub mod sqlite;

use crate::coordinator::model::Quote;
use crate::coordinator::state::TransitionError;

pub use backend::{Backend, LeaseState, RouteSwitch, Transaction};
pub use console_sessions::ConsoleSession;
pub use executions::ExecutionRecord;
pub use keys::{KEY_FILE, KeyCensus, OpenAt, Rotation, default_key_file};
pub use policies::PublishedPolicy;
pub use revisions::NewSuccessor;
pub use revisions::RecordedSuccessor;
pub(crate) use revisions::revision_secrets;
pub use sqlite::{DATABASE_FILE, SqliteBackend};

/// Log lines kept per deployment; older ones are pruned.
pub const LOG_LINES_KEPT: i64 = 10_000;

/// The bytes of log lines a deployment's log holds at most (issue 39, point 4): an append
/// that would take it over prunes its oldest lines first, down to [`LOG_BYTES_KEPT`] less
/// [`LOG_PRUNE_BYTES`], so the next prune is a megabyte of output away.
pub const LOG_BYTES_KEPT: i64 = 4 * 1024 * 1024;

/// How far under [`LOG_BYTES_KEPT`] a prune takes a deployment's log.
pub const LOG_PRUNE_BYTES: i64 = 1024 * 1024;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The backend failed (the database, the file system, the random number generator);
    /// the cause is kept, typed, for whoever inspects it.
    #[error("the relay store failed: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The database cannot be reached now (down, restarting, every connection busy): the
    /// same operation may succeed in a moment.
    #[error("the relay store is unavailable: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A refused state change.
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// The key file is missing, another store's or readable by others, or a sealed value did
    /// not open (issue 40): the message says what to do.
    #[error(transparent)]
    Keys(#[from] svc_keys::KeyError),
    /// Something named does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// This coordinator does not hold the engine lease (another coordinator on the database
    /// runs the jobs): a write only the lease's holder makes was refused, nothing written.
    #[error("{0} does not hold the engine lease")]
    NotLeader(String),
    /// A rule of the ledger or the hostnames refused the change.
    #[error("{message}")]
    Refused {
        /// A stable code (`quote_expired`, `spend_ceiling_exceeded`, ...).
        code: &'static str,
        /// What to tell the customer.
        message: String,
    },
}

fn refused(code: &'static str, message: impl Into<String>) -> StoreError {
    StoreError::Refused { code, message: message.into() }
}

/// Who a bearer token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The organization's ID.
    pub org_id: String,
    /// Its name.
    pub org_name: String,
    /// Whether it holds an invitation to the ingress add-on.
    pub invited: bool,
    /// The token's public ID.
    pub token_id: String,
    /// The token's name, what people read (`svc relay admin token --name`).
    pub token_name: String,
    /// What the token may do.
    pub role: TokenRole,
}

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRole {
    /// Deploy and manage the organization's projects.
    Customer,
    /// Read and claim the rewards of the gateway operator named like the organization.
    Operator,
}

impl TokenRole {
    /// Reads a spelling.
    pub fn parse(text: &str) -> Option<TokenRole> {
        [TokenRole::Customer, TokenRole::Operator].into_iter().find(|r| r.as_str() == text)
    }

    /// The spelling in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenRole::Customer => "customer",
            TokenRole::Operator => "operator",
        }
    }
}

/// A token to record: its hash (never the plaintext), public ID, role and name.
#[derive(Debug, Clone, Copy)]
pub struct NewToken<'a> {
    /// SHA-256 of the plaintext, hex.
    pub hash: &'a str,
    /// `tok_` and 16 hex digits.
    pub id: &'a str,
    /// What it may do.
    pub role: TokenRole,
    /// What people read.
    pub name: &'a str,
}

/// What a new deployment is made of.
#[derive(Debug, Clone)]
pub struct NewDeployment {
    /// `dep_...`.
    pub id: String,
    /// The organization.
    pub org_id: String,
    /// The project's name.
    pub project: String,
    /// The project file, as JSON text.
    pub project_json: String,
    /// Its digest.
    pub project_digest: String,
    /// The V5 manifest's digest.
    pub manifest_digest: String,
    /// The policy its first revision publishes (recorded with it).
    pub policy: PublishedPolicy,
    /// The canonical hostname.
    pub canonical_hostname: String,
    /// The gateway route ID.
    pub route_id: String,
    /// The spend ceiling.
    pub ceiling_micros: u64,
    /// The operator of the gateway that carries the route (its rewards go there).
    pub gateway_operator: String,
    /// Customer hostnames to add with it: (hostname, its DNS token).
    pub hostnames: Vec<(String, String)>,
    /// Its first quote.
    pub quote: Option<Quote>,
    /// Its first revision's files and secrets.
    pub bundle: RevisionBundle,
}

/// A revision's files and secrets, as a deploy sent them: recorded with the revision, and
/// written into a coordinator's data directory when it launches the revision
/// (`files::materialize`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RevisionBundle {
    /// The app's files: each path (relative, `/`-separated) and its bytes.
    pub files: Vec<(String, Vec<u8>)>,
    /// The secrets' values, by name.
    pub secrets: std::collections::BTreeMap<String, String>,
}

/// What the coordinator keeps to recognise a deployment's jobs: hashes and public keys only,
/// one pair per revision, which each of its jobs holds (the jobs hold the secrets; the
/// coordinator keeps them in the revision's directory to equip the next slot or restart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteKeys {
    /// SHA-256 (hex) of the job's credential for the coordinator's agent API: what the
    /// certificate signer compares with (no gateway is given it).
    pub credential_sha256: String,
    /// The public half of the job's route key (base64url): what the challenge proof and a
    /// gateway's check of the agent's tunnel `Hello` verify with.
    pub route_public_key: String,
}

/// The store of one data directory: its operations over a backend, and the keys that seal
/// its secrets ([`keys`]).
pub struct RelayStore {
    backend: Box<dyn Backend>,
    keys: svc_keys::Keyring,
    key_file: std::path::PathBuf,
    /// Read and write transactions begun through [`RelayStore::read`] and
    /// [`RelayStore::write`] ([`RelayStore::transactions`]).
    counted: [std::sync::atomic::AtomicU64; 2],
}

impl std::fmt::Debug for RelayStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayStore").field("backend", &self.backend.location()).finish()
    }
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `n` random bytes as hex.
pub fn random_hex(n: usize) -> Result<String, StoreError> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes)
        .map_err(|e| StoreError::Backend(format!("the random number generator failed: {e}").into()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn not_found(what: String) -> StoreError {
    StoreError::NotFound(what)
}

/// A deployment read inside a transaction, or `NotFound`: the read an operation on one
/// deployment starts with (its state, its ledger, its revisions).
fn get_deployment(tx: &mut dyn Transaction, id: &str) -> Result<crate::coordinator::model::Deployment, StoreError> {
    tx.deployment(id)?.ok_or_else(|| not_found(format!("deployment {id}")))
}

/// Where a relay store lives (`relay.sqlite3` in a data directory, or a PostgreSQL database).
pub use svc_sql::StoreAt;

impl RelayStore {
    /// Opens (creating and migrating) the store where `at` says, with its keys: refused when
    /// its key file is missing or wrong ([`keys::start`]).
    pub fn open_at(at: &OpenAt) -> Result<RelayStore, StoreError> {
        let backend: Box<dyn Backend> = match &at.store {
            StoreAt::DataDir(dir) => Box::new(SqliteBackend::open(dir)?),
            StoreAt::Postgres { db, pool } => Box::new(postgres::PostgresBackend::open(db, *pool)?),
        };
        RelayStore::on(backend, &at.key_file)
    }

    /// Opens (creating and migrating) the SQLite store in `dir` ([`SqliteBackend::open`]), its
    /// key file beside it ([`KEY_FILE`]).
    pub fn open(dir: &std::path::Path) -> Result<RelayStore, StoreError> {
        RelayStore::open_at(&OpenAt::data_dir(dir))
    }

    /// The store's operations over `backend`, its secrets sealed with the keys of `key_file`
    /// ([`keys::start`]: refused when it is missing or wrong).
    pub fn on(backend: Box<dyn Backend>, key_file: &std::path::Path) -> Result<RelayStore, StoreError> {
        let keys = keys::start(backend.as_ref(), key_file)?;
        Ok(RelayStore { backend, keys, key_file: key_file.to_owned(), counted: Default::default() })
    }

    /// The key file that unwraps the store's data keys.
    pub fn key_file(&self) -> &std::path::Path {
        &self.key_file
    }

    /// Where the data lives, for messages.
    pub fn location(&self) -> String {
        self.backend.location()
    }

    /// `sqlite` or `postgres`.
    pub fn kind(&self) -> &'static str {
        self.backend.kind()
    }

    /// Whether the store answers: one read of an index, in a read transaction.
    pub fn ping(&self) -> Result<(), StoreError> {
        self.read(|tx| tx.org_id("").map(drop))
    }

    /// Takes (or keeps) the engine lease for coordinator `holder` (its gateway on
    /// `public_port`) for `lease_ms`: whether it holds it now, and the holder's gateway port
    /// ([`Backend::lead`]).
    pub fn lead(&self, holder: &str, lease_ms: i64, public_port: u16) -> Result<LeaseState, StoreError> {
        self.backend.lead(holder, lease_ms, public_port)
    }

    /// Gives the engine lease up, if `holder` holds it.
    pub fn resign(&self, holder: &str) {
        self.backend.resign(holder);
    }

    /// A write transaction that begins only while `holder` holds the engine lease, for a
    /// caller that holds it across its own steps (the scheduler's:
    /// [`crate::coordinator::scheduling`]); dropped uncommitted, it rolls back.
    pub(crate) fn begin_write_as_leader(&self, holder: &str) -> Result<Box<dyn Transaction + '_>, StoreError> {
        self.backend.write_as_leader(holder)
    }

    /// How many read and write transactions were begun through [`RelayStore::read`] and
    /// [`RelayStore::write`] since the store was opened (not the scheduler's, which begin as
    /// the lease holder): what a test of the engine's idle cost counts.
    pub fn transactions(&self) -> (u64, u64) {
        let count = |i: usize| self.counted[i].load(std::sync::atomic::Ordering::Relaxed);
        (count(0), count(1))
    }

    /// Runs `read` in one read transaction.
    pub fn read<T>(&self, read: impl FnOnce(&mut dyn Transaction) -> Result<T, StoreError>) -> Result<T, StoreError> {
        self.counted[0].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut tx = self.backend.read()?;
        read(tx.as_mut())
    }

    /// Runs `write` in one write transaction, committed if it succeeds (rolled back if not).
    pub fn write<T, E: From<StoreError>>(
        &self,
        write: impl FnOnce(&mut dyn Transaction) -> Result<T, E>,
    ) -> Result<T, E> {
        self.counted[1].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut tx = self.backend.write()?;
        let value = write(tx.as_mut())?;
        tx.commit()?;
        Ok(value)
    }
}

#[cfg(test)]
mod keys_tests;
#[cfg(test)]
mod tests;
