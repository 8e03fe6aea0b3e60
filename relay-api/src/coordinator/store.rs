//! The coordinator's SQLite store (`relay.sqlite3` in its data directory): WAL mode,
//! `synchronous = FULL`, versioned migrations. Every method is one transaction, so a crash
//! leaves either all of a change or none of it; money moves only inside these transactions.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use super::model::{Balance, Deployment, EntryKind, LedgerEntry, Quote, Transition};
use super::state::{DeploymentState, TransitionError};
use crate::coordinator::money::Terms;

mod activity;
mod money;
mod revisions;

pub use revisions::NewSuccessor;

const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/0001_coordinator.sql"),
    include_str!("../../migrations/0002_admission.sql"),
    include_str!("../../migrations/0003_economics.sql"),
    include_str!("../../migrations/0004_route_keys.sql"),
    include_str!("../../migrations/0005_revisions.sql"),
];

/// The database file's name inside the data directory.
pub const DATABASE_FILE: &str = "relay.sqlite3";

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite or the file system.
    #[error("the relay store failed: {0}")]
    Backend(String),
    /// A refused state change.
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// Something named does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// A rule of the ledger or the hostnames refused the change.
    #[error("{message}")]
    Refused {
        /// A stable code (`quote_expired`, `spend_ceiling_exceeded`, ...).
        code: &'static str,
        /// What to tell the customer.
        message: String,
    },
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        StoreError::Backend(e.to_string())
    }
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
}

/// What the coordinator keeps to recognise a deployment's job: hashes and public keys only,
/// made afresh at each launch (the job holds the secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteKeys {
    /// SHA-256 (hex) of the job's tunnel credential: what the gateway and the certificate
    /// signer compare with.
    pub credential_sha256: String,
    /// The public half of the job's route key (base64url): what the challenge proof
    /// verifies with.
    pub route_public_key: String,
}

/// The store of one data directory.
#[derive(Debug)]
pub struct RelayStore {
    path: PathBuf,
    conn: Mutex<Connection>,
}

/// Now, in Unix milliseconds.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A job's keys as stored (`credential_sha256`, `route_public_key`): none before its launch.
fn route_keys_row(row: &Row<'_>) -> rusqlite::Result<Option<RouteKeys>> {
    let (credential_sha256, route_public_key): (String, String) = (row.get(0)?, row.get(1)?);
    Ok((!credential_sha256.is_empty()).then_some(RouteKeys { credential_sha256, route_public_key }))
}

/// A stored spelling read back. A value no version of this code writes is a corrupt row: it
/// fails loudly (the API answers `internal_error`) instead of passing as some default.
fn spelled<T>(row: &Row<'_>, index: usize, parse: impl FnOnce(&str) -> Option<T>) -> rusqlite::Result<T> {
    let text: String = row.get(index)?;
    parse(&text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            index,
            rusqlite::types::Type::Text,
            format!("{text:?} is not a value this store writes").into(),
        )
    })
}

/// A JSON column read back; unreadable JSON is a corrupt row, as in [`spelled`].
fn json_column<T: serde::de::DeserializeOwned>(row: &Row<'_>, index: usize) -> rusqlite::Result<T> {
    let text: String = row.get(index)?;
    serde_json::from_str(&text)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e)))
}

fn u64_of(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn i64_of(v: u64) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| refused("amount_too_large", format!("{v} is beyond the ledger's range")))
}

const DEPLOYMENT_COLUMNS: &str = "id, project, project_digest, manifest_digest, canonical_hostname, route_id, \
     ceiling_micros, state, state_reason, periods_spent, next_period_at, created_at, updated_at, failure_code, revision";

fn deployment_row(row: &Row<'_>) -> rusqlite::Result<Deployment> {
    let host: String = row.get(4)?;
    Ok(Deployment {
        id: row.get(0)?,
        project: row.get(1)?,
        project_digest: row.get(2)?,
        manifest_digest: row.get(3)?,
        url: String::new(),
        canonical_hostname: host,
        route_id: row.get(5)?,
        ceiling_micros: row.get::<_, u64>(6)?,
        state: spelled(row, 7, DeploymentState::parse)?,
        state_reason: row.get(8)?,
        periods_spent: row.get::<_, u64>(9)?,
        next_period_at: row.get(10)?,
        created_at: row.get(11)?,
        updated_at: row.get(12)?,
        failure_code: row.get(13)?,
        revision: row.get(14)?,
    })
}

const QUOTE_COLUMNS: &str = "id, deployment_id, project_digest, hostnames_json, price_micros, period_secs, periods, \
     total_micros, created_at, expires_at, funded_at";

fn quote_row(row: &Row<'_>) -> rusqlite::Result<Quote> {
    Ok(Quote {
        id: row.get(0)?,
        deployment_id: row.get(1)?,
        project_digest: row.get(2)?,
        hostnames: json_column(row, 3)?,
        price_micros: row.get::<_, u64>(4)?,
        period_secs: row.get::<_, u64>(5)?,
        periods: row.get::<_, u64>(6)?,
        total_micros: row.get::<_, u64>(7)?,
        created_at: row.get(8)?,
        expires_at: row.get(9)?,
        funded_at: row.get(10)?,
    })
}

impl RelayStore {
    /// Opens (creating and migrating) the store in `dir`. The directory is made 0700 and
    /// the database files 0600; deleted content is overwritten (`secure_delete`).
    pub fn open(dir: &Path) -> Result<RelayStore, StoreError> {
        agent::files::create_private_dir(dir)
            .map_err(|e| StoreError::Backend(format!("cannot create the data directory {}: {e}", dir.display())))?;
        let path = dir.join(DATABASE_FILE);
        // SQLite creates its WAL and shared-memory files with the database file's mode.
        agent::files::make_private(&path)
            .map_err(|e| StoreError::Backend(format!("cannot make {} private: {e}", path.display())))?;
        for suffix in ["-wal", "-shm"] {
            let side = dir.join(format!("{DATABASE_FILE}{suffix}"));
            if side.exists() {
                agent::files::make_private(&side)
                    .map_err(|e| StoreError::Backend(format!("cannot make {} private: {e}", side.display())))?;
            }
        }
        let wrap = |e: rusqlite::Error| StoreError::Backend(format!("{}: {e}", path.display()));
        let mut conn = Connection::open(&path).map_err(wrap)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(wrap)?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(wrap)?;
        conn.pragma_update(None, "synchronous", "FULL").map_err(wrap)?;
        conn.pragma_update(None, "foreign_keys", "ON").map_err(wrap)?;
        conn.pragma_update(None, "secure_delete", "ON").map_err(wrap)?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(wrap)?;
        let applied: usize = tx.pragma_query_value(None, "user_version", |r| r.get(0)).map_err(wrap)?;
        let migrated = applied < MIGRATIONS.len();
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(applied) {
            tx.execute_batch(sql).map_err(wrap)?;
            tx.pragma_update(None, "user_version", i + 1).map_err(wrap)?;
        }
        tx.commit().map_err(wrap)?;
        if migrated {
            // Old pages (credentials in clear, before 0004) may linger in the log: empty it.
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(wrap)?;
        }
        Ok(RelayStore { path, conn: Mutex::new(conn) })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(super) fn conn(&self) -> Result<MutexGuard<'_, Connection>, StoreError> {
        self.conn.lock().map_err(|_| StoreError::Backend("a previous store operation panicked".into()))
    }

    // ------------------------------------------------------------------ organizations

    /// Creates the organization if needed and records its invitation; returns its ID.
    pub fn invite(&self, org: &str) -> Result<String, StoreError> {
        let id = self.ensure_org(org)?;
        self.conn()?
            .execute("UPDATE orgs SET invited_at = COALESCE(invited_at, ?1) WHERE id = ?2", params![now_ms(), id])?;
        Ok(id)
    }

    /// Creates the organization if needed (without an invitation); returns its ID.
    pub fn ensure_org(&self, org: &str) -> Result<String, StoreError> {
        let conn = self.conn()?;
        if let Some(id) = conn.query_row("SELECT id FROM orgs WHERE name = ?1", [org], |r| r.get(0)).optional()? {
            return Ok(id);
        }
        // A new name follows the one organization rule (existing ones stay reachable).
        manifest_core::names::organization(org).map_err(|e| refused("invalid_org", e.to_string()))?;
        let id = format!("org_{}", random_hex(8)?);
        conn.execute("INSERT INTO orgs (id, name, created_at) VALUES (?1, ?2, ?3)", params![id, org, now_ms()])?;
        Ok(id)
    }

    /// Records a token (by its hash) for an organization.
    pub fn add_token(&self, org_id: &str, token_id: &str, hash: &str, role: TokenRole) -> Result<(), StoreError> {
        self.conn()?.execute(
            "INSERT INTO tokens (hash, id, org_id, created_at, role) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![hash, token_id, org_id, now_ms(), role.as_str()],
        )?;
        Ok(())
    }

    /// Who presents the token with this hash.
    pub fn caller(&self, token_hash: &str) -> Result<Option<Caller>, StoreError> {
        let conn = self.conn()?;
        let caller = conn
            .query_row(
                "SELECT o.id, o.name, o.invited_at IS NOT NULL, t.id, t.role FROM tokens t JOIN orgs o ON o.id = t.org_id \
                 WHERE t.hash = ?1",
                [token_hash],
                |r| {
                    Ok(Caller {
                        org_id: r.get(0)?,
                        org_name: r.get(1)?,
                        invited: r.get(2)?,
                        token_id: r.get(3)?,
                        role: spelled(r, 4, TokenRole::parse)?,
                    })
                },
            )
            .optional()?;
        Ok(caller)
    }

    // ------------------------------------------------------------------ deployments

    /// Creates a deployment in `pending_funding` with its customer hostnames and its first
    /// quote, recording the transition: all of it, or (a hostname taken, a crash) none.
    pub fn create_deployment(&self, new: &NewDeployment) -> Result<Deployment, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let now = now_ms();
        let reason = "created; fund the quote to launch it";
        let inserted = tx.execute(
            "INSERT INTO deployments (id, org_id, project, project_json, project_digest, manifest_digest, \
             canonical_hostname, route_id, ceiling_micros, state, state_reason, created_at, updated_at, \
             gateway_operator) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13)",
            params![
                new.id,
                new.org_id,
                new.project,
                new.project_json,
                new.project_digest,
                new.manifest_digest,
                new.canonical_hostname,
                new.route_id,
                i64_of(new.ceiling_micros)?,
                DeploymentState::PendingFunding.as_str(),
                reason,
                now,
                new.gateway_operator
            ],
        );
        if let Err(rusqlite::Error::SqliteFailure(e, _)) = &inserted
            && e.code == rusqlite::ErrorCode::ConstraintViolation
        {
            return Err(refused(
                "hostname_taken",
                format!("{} is already served by another running deployment", new.canonical_hostname),
            ));
        }
        inserted?;
        tx.execute(
            "INSERT INTO transitions (deployment_id, from_state, to_state, reason, at) VALUES (?1, NULL, ?2, ?3, ?4)",
            params![new.id, DeploymentState::PendingFunding.as_str(), reason, now],
        )?;
        for (hostname, token) in &new.hostnames {
            activity::insert_hostname(&tx, &new.id, hostname, token, now)?;
        }
        if let Some(quote) = &new.quote {
            insert_quote(&tx, quote)?;
        }
        let d = get_deployment(&tx, &new.id)?;
        tx.commit()?;
        Ok(d)
    }

    /// Whether another organization ever had a deployment under `canonical`: a canonical
    /// name stays its first organization's, stopped or not (`<project>-<org>` is not
    /// injective: org `c` with project `a-b` and org `b-c` with project `a` both make `a-b-c`).
    pub fn canonical_held_elsewhere(&self, canonical: &str, org_id: &str) -> Result<bool, StoreError> {
        let conn = self.conn()?;
        let held: Option<i64> = conn
            .query_row(
                "SELECT 1 FROM deployments WHERE canonical_hostname = ?1 AND org_id <> ?2 LIMIT 1",
                params![canonical, org_id],
                |r| r.get(0),
            )
            .optional()?;
        Ok(held.is_some())
    }

    /// A deployment by ID.
    pub fn deployment(&self, id: &str) -> Result<Deployment, StoreError> {
        get_deployment(&*self.conn()?, id)
    }

    /// The newest deployment of `project` in the organization, or, for a deployment ID
    /// (`dep_...`; project names hold no `_`), that deployment if it is the organization's:
    /// older and stopped deployments stay reachable, their money included.
    pub fn deployment_of(&self, org_id: &str, project: &str) -> Result<Option<Deployment>, StoreError> {
        let conn = self.conn()?;
        let by_id = project.starts_with("dep_");
        let sql = if by_id {
            format!("SELECT {DEPLOYMENT_COLUMNS} FROM deployments WHERE org_id = ?1 AND id = ?2")
        } else {
            format!(
                "SELECT {DEPLOYMENT_COLUMNS} FROM deployments WHERE org_id = ?1 AND project = ?2 \
                 ORDER BY created_at DESC, rowid DESC LIMIT 1"
            )
        };
        Ok(conn.query_row(&sql, params![org_id, project], deployment_row).optional()?)
    }

    /// The organization's deployments, newest first.
    pub fn deployments_of(&self, org_id: &str) -> Result<Vec<Deployment>, StoreError> {
        let conn = self.conn()?;
        let sql = format!(
            "SELECT {DEPLOYMENT_COLUMNS} FROM deployments WHERE org_id = ?1 ORDER BY created_at DESC, rowid DESC"
        );
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map([org_id], deployment_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every deployment not stopped (the engine's work list).
    pub fn active_deployments(&self) -> Result<Vec<Deployment>, StoreError> {
        let conn = self.conn()?;
        let sql = format!("SELECT {DEPLOYMENT_COLUMNS} FROM deployments WHERE state <> 'stopped' ORDER BY created_at");
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map([], deployment_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The project file of a deployment, as JSON text.
    pub fn project_json(&self, id: &str) -> Result<String, StoreError> {
        let conn = self.conn()?;
        conn.query_row("SELECT project_json FROM deployments WHERE id = ?1", [id], |r| r.get(0))
            .optional()?
            .ok_or_else(|| StoreError::NotFound(format!("deployment {id}")))
    }

    /// How the coordinator recognises the deployment's current job; `None` before its first
    /// launch.
    pub fn route_keys(&self, id: &str) -> Result<Option<RouteKeys>, StoreError> {
        let conn = self.conn()?;
        conn.query_row(
            "SELECT credential_sha256, route_public_key FROM deployments WHERE id = ?1",
            [id],
            route_keys_row,
        )
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("deployment {id}")))
    }

    /// Records the keys of the job about to be launched (the previous job's stop working).
    pub fn set_route_keys(&self, id: &str, keys: &RouteKeys) -> Result<(), StoreError> {
        let changed = self.conn()?.execute(
            "UPDATE deployments SET credential_sha256 = ?1, route_public_key = ?2 WHERE id = ?3",
            params![keys.credential_sha256, keys.route_public_key, id],
        )?;
        if changed == 0 {
            return Err(StoreError::NotFound(format!("deployment {id}")));
        }
        Ok(())
    }

    /// Moves a deployment to `to` (when the machine allows it) and records why. Moving to the
    /// state it is already in changes nothing and records nothing. Returns the deployment.
    pub fn transition(&self, id: &str, to: DeploymentState, reason: &str) -> Result<Deployment, StoreError> {
        self.transition_at(id, to, reason, now_ms())
    }

    /// [`RelayStore::transition`] at a given time (tests drive their own clock).
    pub fn transition_at(
        &self,
        id: &str,
        to: DeploymentState,
        reason: &str,
        now: i64,
    ) -> Result<Deployment, StoreError> {
        self.transition_with(id, to, reason, None, now)
    }

    /// Moves a deployment to `failed`, with a stable code for its hint (`job_exited`).
    pub fn fail(&self, id: &str, code: &str, reason: &str) -> Result<Deployment, StoreError> {
        self.transition_with(id, DeploymentState::Failed, reason, Some(code), now_ms())
    }

    fn transition_with(
        &self,
        id: &str,
        to: DeploymentState,
        reason: &str,
        failure: Option<&str>,
        now: i64,
    ) -> Result<Deployment, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let d = get_deployment(&tx, id)?;
        if d.state == to {
            return Ok(d);
        }
        if !d.state.may_become(to) {
            return Err(TransitionError { from: d.state, to }.into());
        }
        // Leaving the spending states ends the period clock; a new one starts when live again.
        let next_period = if to.runs_job() { d.next_period_at } else { None };
        tx.execute(
            "UPDATE deployments SET state = ?1, state_reason = ?2, updated_at = ?3, next_period_at = ?4, \
             failure_code = ?5 WHERE id = ?6",
            params![to.as_str(), reason, now, next_period, failure, id],
        )?;
        tx.execute(
            "INSERT INTO transitions (deployment_id, from_state, to_state, reason, at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![id, d.state.as_str(), to.as_str(), reason, now],
        )?;
        tx.execute(
            "INSERT INTO logs (deployment_id, source, line, at) VALUES (?1, 'route', ?2, ?3)",
            params![id, format!("{} -> {}: {reason}", d.state, to), now],
        )?;
        let d = get_deployment(&tx, id)?;
        tx.commit()?;
        Ok(d)
    }

    /// Updates the reason of the current state (without a transition) when it changed.
    pub fn set_reason(&self, id: &str, reason: &str) -> Result<(), StoreError> {
        self.conn()?.execute(
            "UPDATE deployments SET state_reason = ?1, updated_at = ?2 WHERE id = ?3 AND state_reason <> ?1",
            params![reason, now_ms(), id],
        )?;
        Ok(())
    }

    /// The deployment's transitions, oldest first.
    pub fn transitions(&self, id: &str) -> Result<Vec<Transition>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT seq, from_state, to_state, reason, at FROM transitions WHERE deployment_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map([id], |r| {
            let from: Option<String> = r.get(1)?;
            Ok(Transition {
                seq: r.get(0)?,
                from: match from {
                    Some(_) => Some(spelled(r, 1, DeploymentState::parse)?),
                    None => None,
                },
                to: spelled(r, 2, DeploymentState::parse)?,
                reason: r.get(3)?,
                at: r.get(4)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    // ------------------------------------------------------------------ quotes and ledger

    /// Records a quote.
    pub fn add_quote(&self, quote: &Quote) -> Result<(), StoreError> {
        insert_quote(&*self.conn()?, quote)
    }

    /// The deployment's quotes, newest first.
    pub fn quotes(&self, deployment_id: &str) -> Result<Vec<Quote>, StoreError> {
        let conn = self.conn()?;
        let sql =
            format!("SELECT {QUOTE_COLUMNS} FROM quotes WHERE deployment_id = ?1 ORDER BY created_at DESC, rowid DESC");
        let mut stmt = conn.prepare(&sql)?;
        let rows = stmt.query_map([deployment_id], quote_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Funds a quote: one `fund` entry, never above the ceiling, once per quote, only before
    /// it expires and while it still matches the deployment (project and hostnames).
    pub fn fund(
        &self,
        deployment_id: &str,
        quote_id: &str,
        hostnames: &[String],
        now: i64,
    ) -> Result<LedgerEntry, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let d = get_deployment(&tx, deployment_id)?;
        let quote = tx
            .query_row(
                &format!("SELECT {QUOTE_COLUMNS} FROM quotes WHERE id = ?1 AND deployment_id = ?2"),
                params![quote_id, deployment_id],
                quote_row,
            )
            .optional()?
            .ok_or_else(|| StoreError::NotFound(format!("quote {quote_id} of deployment {deployment_id}")))?;
        if matches!(d.state, DeploymentState::Stopped | DeploymentState::Failed) {
            return Err(refused(
                "deployment_not_fundable",
                format!("the deployment is {}; it cannot be funded", d.state),
            ));
        }
        if quote.funded_at.is_some() {
            return Err(refused(
                "quote_already_funded",
                format!("quote {quote_id} is already funded; ask for a new quote"),
            ));
        }
        if now > quote.expires_at {
            return Err(refused("quote_expired", format!("quote {quote_id} expired; ask for a new quote")));
        }
        // A quote made for a redeploy's successor funds the deployment too: what it buys (periods
        // of the route, for these hostnames) is the same.
        let successor_digest: Option<String> = tx
            .query_row(
                "SELECT project_digest FROM successors WHERE deployment_id = ?1 AND state <> 'failed'",
                [deployment_id],
                |r| r.get(0),
            )
            .optional()?;
        let for_this_project =
            quote.project_digest == d.project_digest || successor_digest.as_deref() == Some(&quote.project_digest);
        if !for_this_project || quote.hostnames != hostnames {
            return Err(refused(
                "quote_stale",
                "the project or its hostnames changed since the quote; ask for a new quote",
            ));
        }
        let balance = money::balance_of(&tx, deployment_id)?;
        let total = balance.funded_micros.saturating_add(quote.total_micros);
        if total > d.ceiling_micros {
            return Err(refused(
                "spend_ceiling_exceeded",
                format!(
                    "funding {} micros would bring the project to {total} micros, above its ceiling of {} micros \
                     (spend.ceilingMicros in the project file)",
                    quote.total_micros, d.ceiling_micros
                ),
            ));
        }
        tx.execute("UPDATE quotes SET funded_at = ?1 WHERE id = ?2", params![now, quote_id])?;
        money::create_sessions(
            &tx,
            deployment_id,
            quote_id,
            quote.periods,
            quote.price_micros,
            quote.period_secs.saturating_mul(1000),
        )?;
        let note = format!("funded quote {quote_id}: {} periods of {} s", quote.periods, quote.period_secs);
        let seq =
            insert_entry(&tx, deployment_id, EntryKind::Fund, quote.total_micros, Some(quote_id), None, &note, now)?;
        tx.commit()?;
        Ok(LedgerEntry {
            seq,
            kind: EntryKind::Fund,
            amount_micros: quote.total_micros,
            quote_id: Some(quote_id.to_owned()),
            period_index: None,
            note,
            at: now,
        })
    }

    /// Stops a deployment, in one transaction: the transition, the running period settled at
    /// `now` (the rest of it unserved, so refundable), and a `stop` entry. Periods never
    /// started stay refundable (`refund`). Stopping twice changes nothing.
    pub fn stop(&self, deployment_id: &str, reason: &str, terms: &Terms, now: i64) -> Result<Deployment, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let d = get_deployment(&tx, deployment_id)?;
        if d.state == DeploymentState::Stopped {
            return Ok(d);
        }
        tx.execute(
            "UPDATE deployments SET state = 'stopped', state_reason = ?1, updated_at = ?2, next_period_at = NULL \
             WHERE id = ?3",
            params![reason, now, deployment_id],
        )?;
        tx.execute(
            "INSERT INTO transitions (deployment_id, from_state, to_state, reason, at) VALUES (?1, ?2, 'stopped', ?3, ?4)",
            params![deployment_id, d.state.as_str(), reason, now],
        )?;
        tx.execute(
            "INSERT INTO logs (deployment_id, source, line, at) VALUES (?1, 'route', ?2, ?3)",
            params![deployment_id, format!("{} -> stopped: {reason}", d.state), now],
        )?;
        RelayStore::settle_early(&tx, deployment_id, terms, now)?;
        insert_entry(&tx, deployment_id, EntryKind::Stop, 0, None, None, "spending stopped", now)?;
        tx.execute("UPDATE hostnames SET state = 'removed' WHERE deployment_id = ?1", [deployment_id])?;
        tx.execute("DELETE FROM successors WHERE deployment_id = ?1", [deployment_id])?;
        let d = get_deployment(&tx, deployment_id)?;
        tx.commit()?;
        Ok(d)
    }

    /// The deployment's ledger, oldest first.
    pub fn ledger(&self, deployment_id: &str) -> Result<Vec<LedgerEntry>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT seq, kind, amount_micros, quote_id, period_index, note, at FROM ledger WHERE deployment_id = ?1 \
             ORDER BY seq",
        )?;
        let rows = stmt.query_map([deployment_id], |r| {
            Ok(LedgerEntry {
                seq: r.get(0)?,
                kind: spelled(r, 1, EntryKind::parse)?,
                amount_micros: r.get::<_, u64>(2)?,
                quote_id: r.get(3)?,
                period_index: r.get::<_, Option<u64>>(4)?,
                note: r.get(5)?,
                at: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The deployment's balance.
    pub fn balance(&self, deployment_id: &str) -> Result<Balance, StoreError> {
        money::balance_of(&*self.conn()?, deployment_id)
    }
}

fn insert_quote(conn: &Connection, quote: &Quote) -> Result<(), StoreError> {
    conn.execute(
        &format!("INSERT INTO quotes ({QUOTE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL)"),
        params![
            quote.id,
            quote.deployment_id,
            quote.project_digest,
            serde_json::to_string(&quote.hostnames).unwrap_or_default(),
            i64_of(quote.price_micros)?,
            i64_of(quote.period_secs)?,
            i64_of(quote.periods)?,
            i64_of(quote.total_micros)?,
            quote.created_at,
            quote.expires_at
        ],
    )?;
    Ok(())
}

fn get_deployment(conn: &Connection, id: &str) -> Result<Deployment, StoreError> {
    let sql = format!("SELECT {DEPLOYMENT_COLUMNS} FROM deployments WHERE id = ?1");
    conn.query_row(&sql, [id], deployment_row)
        .optional()?
        .ok_or_else(|| StoreError::NotFound(format!("deployment {id}")))
}

#[allow(clippy::too_many_arguments)]
fn insert_entry(
    conn: &Connection,
    deployment_id: &str,
    kind: EntryKind,
    amount: u64,
    quote_id: Option<&str>,
    period: Option<u64>,
    note: &str,
    at: i64,
) -> Result<i64, StoreError> {
    conn.execute(
        "INSERT INTO ledger (deployment_id, kind, amount_micros, quote_id, period_index, note, at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![deployment_id, kind.as_str(), i64_of(amount)?, quote_id, period.map(i64_of).transpose()?, note, at],
    )?;
    Ok(conn.last_insert_rowid())
}

/// `n` random bytes as hex.
pub fn random_hex(n: usize) -> Result<String, StoreError> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).map_err(|e| StoreError::Backend(format!("the random number generator failed: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests;
