//! What a storage backend provides: transactions over rows, and nothing else. The rules
//! (what funding may do, how a period settles, when a hostname is taken) live above, in
//! [`RelayStore`](super::RelayStore)'s operations, so a second backend (PostgreSQL) implements
//! these traits and inherits every rule unchanged.
//!
//! The row traits are split by concept; [`Transaction`] is all of them plus `commit`. A
//! transaction dropped without [`Transaction::commit`] rolls back.

use super::{Caller, ExecutionRecord, NewDeployment, NewSuccessor, NewToken, PublishedPolicy, RouteKeys, StoreError};
use crate::coordinator::engine::switch::Lagging;
use crate::coordinator::model::{
    CustomerHostname, Deployment, HostnameState, LedgerEntry, LogEntry, Quote, Reward, Session, Successor,
    SuccessorState, Transition, ValidationRecord,
};
use crate::coordinator::state::DeploymentState;
use relay_wire::admission::Operator;
use relay_wire::feed::{Presence, Report};
use svc_keys::{DataKeyId, WrappedKey};
use svc_sql::Sql;

/// Who holds the engine lease, as a coordinator trying for it sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseState {
    /// Whether the coordinator that asked holds it now.
    pub held: bool,
    /// The holder's gateway port, if a coordinator holds it.
    pub public_port: Option<u16>,
}

/// A storage backend: hands out transactions.
pub trait Backend: Send + Sync + 'static {
    /// A transaction that only reads; it sees one consistent snapshot.
    fn read(&self) -> Result<Box<dyn Transaction + '_>, StoreError>;
    /// A transaction that may write. Writers are serialized, so what a write transaction
    /// read still holds when it commits.
    fn write(&self) -> Result<Box<dyn Transaction + '_>, StoreError>;
    /// Where the data lives, for messages.
    fn location(&self) -> String;
    /// `sqlite` or `postgres`, for the health route.
    fn kind(&self) -> &'static str;

    /// Takes (or keeps, for `lease_ms` more) the engine lease for coordinator `holder`, whose
    /// gateway listens on `public_port`: whether `holder` holds it now, and the holder's
    /// public port. A store one coordinator alone can open (SQLite's, in its locked data
    /// directory) always grants it.
    fn lead(&self, holder: &str, lease_ms: i64, public_port: u16) -> Result<LeaseState, StoreError> {
        let _ = (holder, lease_ms);
        Ok(LeaseState { held: true, public_port: Some(public_port) })
    }

    /// A write transaction that begins only while `holder` holds the engine lease (checked
    /// under the writers' lock, so a coordinator that lost the lease writes nothing with it);
    /// otherwise [`StoreError::NotLeader`].
    fn write_as_leader(&self, holder: &str) -> Result<Box<dyn Transaction + '_>, StoreError> {
        let _ = holder;
        self.write()
    }

    /// Gives the engine lease up, if `holder` holds it: another coordinator takes it at once
    /// instead of when it runs out.
    fn resign(&self, holder: &str) {
        let _ = holder;
    }

    /// Drops what the database files may still hold of values rewritten since (SQLite's
    /// write-ahead log, emptied); after values in clear were sealed, and after a rotation.
    fn forget_old_pages(&self) {}
}

/// One transaction: every row trait, and its end.
pub trait Transaction:
    OrgRows
    + DeploymentRows
    + MoneyRows
    + ActivityRows
    + RevisionRows
    + AdmissionRows
    + ExecutionRows
    + PolicyRows
    + SchedulingRows
    + FeedRows
    + super::console_sessions::SessionRows
    + KeyRows
{
    /// Makes every write of this transaction durable.
    fn commit(self: Box<Self>) -> Result<(), StoreError>;
}

/// Every backend's transaction: the row traits are implemented over [`Sql`].
impl<T: Sql> Transaction for T {
    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        Ok(self.commit_tx()?)
    }
}

/// Organizations and their tokens.
pub trait OrgRows {
    /// The ID of the organization named `name`.
    fn org_id(&mut self, name: &str) -> Result<Option<String>, StoreError>;
    /// Records a new organization.
    fn insert_org(&mut self, id: &str, name: &str, now: i64) -> Result<(), StoreError>;
    /// Records the organization's invitation, unless it has one already.
    fn mark_invited(&mut self, org_id: &str, now: i64) -> Result<(), StoreError>;
    /// Records a token by its hash, with its name.
    fn insert_token(&mut self, org_id: &str, token: &NewToken<'_>, now: i64) -> Result<(), StoreError>;
    /// Whether the organization holds an invitation (`None`: no such organization).
    fn org_invited(&mut self, name: &str) -> Result<Option<bool>, StoreError>;
    /// Who presents the token with this hash.
    fn caller(&mut self, token_hash: &str) -> Result<Option<Caller>, StoreError>;
}

/// A state change as written: the new state, why, the period clock and a failure code.
#[derive(Debug, Clone, Copy)]
pub struct StateChange<'a> {
    /// The new state.
    pub to: DeploymentState,
    /// Why.
    pub reason: &'a str,
    /// When the running period ends (`None`: no period clock).
    pub next_period_at: Option<i64>,
    /// A stable code for a failure's hint.
    pub failure_code: Option<&'a str>,
    /// When.
    pub at: i64,
}

/// Deployments, their transitions and their keys.
pub trait DeploymentRows {
    /// Inserts a deployment in `pending_funding`; `false` when its canonical hostname is
    /// held by another deployment that is not stopped (nothing written then).
    fn insert_deployment(&mut self, new: &NewDeployment, reason: &str, now: i64) -> Result<bool, StoreError>;
    /// A deployment by ID.
    fn deployment(&mut self, id: &str) -> Result<Option<Deployment>, StoreError>;
    /// The organization's deployment with this ID.
    fn org_deployment(&mut self, org_id: &str, id: &str) -> Result<Option<Deployment>, StoreError>;
    /// The organization's newest deployment of `project`.
    fn newest_deployment(&mut self, org_id: &str, project: &str) -> Result<Option<Deployment>, StoreError>;
    /// The organization's deployments, newest first.
    fn deployments_of(&mut self, org_id: &str) -> Result<Vec<Deployment>, StoreError>;
    /// Every deployment not stopped, oldest first.
    fn active_deployments(&mut self) -> Result<Vec<Deployment>, StoreError>;
    /// Whether another organization has (or had) a deployment under `canonical`.
    fn canonical_held_elsewhere(&mut self, canonical: &str, org_id: &str) -> Result<bool, StoreError>;
    /// The project file of a deployment, as JSON text.
    fn project_json(&mut self, id: &str) -> Result<Option<String>, StoreError>;
    /// The operator whose gateway carries the deployment's route.
    fn gateway_operator(&mut self, id: &str) -> Result<Option<String>, StoreError>;
    /// The keys of the deployment's job: the outer `None` for no deployment, the inner for
    /// none launched yet.
    fn route_keys(&mut self, id: &str) -> Result<Option<Option<RouteKeys>>, StoreError>;
    /// Records the keys of the job about to be launched; `false` for no such deployment.
    fn set_route_keys(&mut self, id: &str, keys: &RouteKeys) -> Result<bool, StoreError>;
    /// Writes a state change (the transition is recorded separately).
    fn set_state(&mut self, id: &str, change: &StateChange<'_>) -> Result<(), StoreError>;
    /// Updates the reason of the current state, if it differs.
    fn set_reason(&mut self, id: &str, reason: &str, now: i64) -> Result<(), StoreError>;
    /// Records a transition.
    fn insert_transition(
        &mut self,
        id: &str,
        from: Option<DeploymentState>,
        to: DeploymentState,
        reason: &str,
        at: i64,
    ) -> Result<(), StoreError>;
    /// The deployment's transitions, oldest first.
    fn transitions(&mut self, id: &str) -> Result<Vec<Transition>, StoreError>;
    /// The newest `limit` transitions of a deployment, newest first.
    fn recent_transitions(&mut self, id: &str, limit: u32) -> Result<Vec<Transition>, StoreError>;
    /// Records how many periods were spent and when the running one ends.
    fn set_periods(&mut self, id: &str, periods_spent: u64, next_period_at: i64, now: i64) -> Result<(), StoreError>;
}

/// A session to record (funded, not started).
#[derive(Debug, Clone)]
pub struct NewSession<'a> {
    /// `ses_...`.
    pub id: String,
    /// The deployment.
    pub deployment_id: &'a str,
    /// The quote that funded it.
    pub quote_id: &'a str,
    /// Its place in the deployment's funding order.
    pub ordinal: u64,
    /// What it costs.
    pub price_micros: u64,
    /// How long it lasts.
    pub period_ms: u64,
}

/// A ledger entry to record.
#[derive(Debug, Clone)]
pub struct NewEntry<'a> {
    /// What kind.
    pub kind: crate::coordinator::model::EntryKind,
    /// How much.
    pub amount_micros: u64,
    /// The quote it concerns.
    pub quote_id: Option<&'a str>,
    /// The period it concerns.
    pub period_index: Option<u64>,
    /// What happened, in words.
    pub note: &'a str,
    /// When.
    pub at: i64,
}

/// Quotes, sessions, the ledger, rewards, claims and validator pins.
pub trait MoneyRows {
    /// Records a quote (unfunded).
    fn insert_quote(&mut self, quote: &Quote) -> Result<(), StoreError>;
    /// The deployment's quotes, newest first.
    fn quotes(&mut self, deployment_id: &str) -> Result<Vec<Quote>, StoreError>;
    /// One quote of the deployment.
    fn quote(&mut self, deployment_id: &str, quote_id: &str) -> Result<Option<Quote>, StoreError>;
    /// Marks a quote funded.
    fn set_quote_funded(&mut self, quote_id: &str, at: i64) -> Result<(), StoreError>;
    /// Appends a ledger entry; its sequence number.
    fn insert_entry(&mut self, deployment_id: &str, entry: &NewEntry<'_>) -> Result<i64, StoreError>;
    /// The deployment's ledger, oldest first.
    fn ledger(&mut self, deployment_id: &str) -> Result<Vec<LedgerEntry>, StoreError>;
    /// The newest `limit` ledger entries of a deployment, newest first.
    fn recent_ledger(&mut self, deployment_id: &str, limit: u32) -> Result<Vec<LedgerEntry>, StoreError>;
    /// Records a funded session.
    fn insert_session(&mut self, session: &NewSession<'_>) -> Result<(), StoreError>;
    /// The deployment's sessions, in funding order.
    fn sessions(&mut self, deployment_id: &str) -> Result<Vec<Session>, StoreError>;
    /// One session of the deployment.
    fn session(&mut self, deployment_id: &str, session_id: &str) -> Result<Option<Session>, StoreError>;
    /// The deployment that session `session_id` funds, among the deployments of project
    /// `project` of organization `org_id` (any of them: the newest, an older or stopped one).
    fn session_deployment(
        &mut self,
        org_id: &str,
        project: &str,
        session_id: &str,
    ) -> Result<Option<String>, StoreError>;
    /// Writes a session's state, period and settlement back (its identity and price stay).
    fn update_session(&mut self, session: &Session) -> Result<(), StoreError>;
    /// Records an operator's reward for a settled session.
    fn insert_reward(&mut self, reward: &Reward, operator: &str) -> Result<(), StoreError>;
    /// An operator's rewards, oldest settlement first.
    fn rewards(&mut self, operator: &str) -> Result<Vec<Reward>, StoreError>;
    /// The operator's newest `limit` rewards, newest first.
    fn recent_rewards(&mut self, operator: &str, limit: u32) -> Result<Vec<Reward>, StoreError>;
    /// The operator's reward totals at `now`: accrued, pending, claimable, claimed.
    fn reward_totals(&mut self, operator: &str, now: i64) -> Result<[u64; 4], StoreError>;
    /// Records a claim and marks its rewards claimed.
    fn insert_claim(
        &mut self,
        claim_id: &str,
        operator: &str,
        amount_micros: u64,
        sessions: &[String],
        at: i64,
    ) -> Result<(), StoreError>;
    /// The validator digests a project pins, oldest first.
    fn pins(&mut self, org_id: &str, project: &str) -> Result<Vec<String>, StoreError>;
    /// The pins of a deployment's project.
    fn pins_of_deployment(&mut self, deployment_id: &str) -> Result<Vec<String>, StoreError>;
    /// Pins a digest (pinning twice changes nothing).
    fn add_pin(&mut self, org_id: &str, project: &str, digest: &str, now: i64) -> Result<(), StoreError>;
    /// Removes a pin; `false` when it was not pinned.
    fn remove_pin(&mut self, org_id: &str, project: &str, digest: &str) -> Result<bool, StoreError>;
}

/// Customer hostnames, validations and logs.
pub trait ActivityRows {
    /// Adds a hostname (`pending_dns`), or brings back one removed from this deployment;
    /// `false` when another deployment holds it.
    fn insert_hostname(
        &mut self,
        deployment_id: &str,
        hostname: &str,
        token: &str,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// One hostname of the deployment (removed ones included).
    fn hostname(&mut self, deployment_id: &str, hostname: &str) -> Result<Option<CustomerHostname>, StoreError>;
    /// The deployment's hostnames in use, oldest first.
    fn hostnames(&mut self, deployment_id: &str) -> Result<Vec<CustomerHostname>, StoreError>;
    /// Records a hostname's state and hints as checked at `now`.
    fn set_hostname(
        &mut self,
        deployment_id: &str,
        hostname: &str,
        state: HostnameState,
        hints_json: &str,
        now: i64,
    ) -> Result<(), StoreError>;
    /// Marks every hostname of the deployment removed.
    fn remove_hostnames(&mut self, deployment_id: &str) -> Result<(), StoreError>;
    /// Records a validation.
    fn insert_validation(&mut self, record: &ValidationRecord, deployment_id: &str) -> Result<(), StoreError>;
    /// Moves validation record `seq`'s time to `at` (the same result confirmed again).
    fn touch_validation(&mut self, seq: i64, at: i64) -> Result<(), StoreError>;
    /// The newest validation of each hostname of the deployment.
    fn latest_validations(&mut self, deployment_id: &str) -> Result<Vec<ValidationRecord>, StoreError>;
    /// Appends log lines, keeping only the newest [`LOG_LINES_KEPT`](super::LOG_LINES_KEPT)
    /// of the deployment, of at most [`LOG_BYTES_KEPT`](super::LOG_BYTES_KEPT) bytes.
    fn append_logs(&mut self, deployment_id: &str, source: &str, lines: &[String], at: i64) -> Result<(), StoreError>;
    /// Log lines after `after`, at most `limit`.
    fn logs(&mut self, deployment_id: &str, after: i64, limit: u32) -> Result<Vec<LogEntry>, StoreError>;
    /// The newest `limit` log lines, oldest first.
    fn recent_logs(&mut self, deployment_id: &str, limit: u32) -> Result<Vec<LogEntry>, StoreError>;
}

/// Redeploys' successors.
pub trait RevisionRows {
    /// The deployment's successor.
    fn successor(&mut self, deployment_id: &str) -> Result<Option<Successor>, StoreError>;
    /// Every successor, oldest first.
    fn successors(&mut self) -> Result<Vec<Successor>, StoreError>;
    /// Records a successor (`starting`), replacing any other of the deployment.
    fn put_successor(&mut self, new: &NewSuccessor, reason: &str, now: i64) -> Result<(), StoreError>;
    /// The successor's project file, as JSON text.
    fn successor_project_json(&mut self, deployment_id: &str) -> Result<Option<String>, StoreError>;
    /// The keys of the successor's job (none before its launch, or without a successor).
    fn successor_keys(&mut self, deployment_id: &str) -> Result<Option<RouteKeys>, StoreError>;
    /// Records the keys of a successor's job; `false` for no such revision.
    fn set_successor_keys(&mut self, deployment_id: &str, revision: u32, keys: &RouteKeys) -> Result<bool, StoreError>;
    /// Writes a successor's state and reason.
    fn set_successor_state(
        &mut self,
        deployment_id: &str,
        revision: u32,
        state: SuccessorState,
        reason: &str,
        now: i64,
    ) -> Result<(), StoreError>;
    /// Makes a successor's project, keys and revision the deployment's; `false` when there
    /// is no such revision or the deployment is stopped.
    fn adopt_successor(&mut self, deployment_id: &str, revision: u32, now: i64) -> Result<bool, StoreError>;
    /// Removes a revision's successor; `false` when there was none.
    fn delete_successor(&mut self, deployment_id: &str, revision: u32) -> Result<bool, StoreError>;
    /// Removes the deployment's successor, whichever revision.
    fn delete_successors(&mut self, deployment_id: &str) -> Result<(), StoreError>;
    /// Records a revision's app files.
    fn insert_revision_files(
        &mut self,
        deployment_id: &str,
        revision: u32,
        files: &[(String, Vec<u8>)],
    ) -> Result<(), StoreError>;
    /// A revision's app files (none: not recorded), by path.
    fn revision_files(&mut self, deployment_id: &str, revision: u32) -> Result<Vec<(String, Vec<u8>)>, StoreError>;
    /// Records a revision's secrets, `sealed` (`svc_keys::sealed::to_text`) under data key
    /// `data_key` (`keys::put_secrets` seals them).
    fn insert_revision_secrets(
        &mut self,
        deployment_id: &str,
        revision: u32,
        sealed: &str,
        data_key: DataKeyId,
    ) -> Result<(), StoreError>;
    /// A revision's secrets as stored (sealed; `keys::open_secrets` opens them), if recorded.
    fn revision_secrets(&mut self, deployment_id: &str, revision: u32) -> Result<Option<StoredSecret>, StoreError>;
    /// Removes the files and secrets of revisions that neither serve (of a deployment not
    /// stopped) nor come next; how many revisions' rows went.
    fn delete_unused_bundles(&mut self) -> Result<u64, StoreError>;
}

/// An admission token as stored.
#[derive(Debug, Clone)]
pub struct AdmissionToken {
    /// `admt_...`.
    pub id: String,
    /// The operator it admits.
    pub operator: String,
    /// Unix ms after which it is refused.
    pub expires_at: i64,
    /// The hostname of the gateway it admitted, once used.
    pub used_for: Option<String>,
}

/// Gateway operators and their admission tokens.
pub trait AdmissionRows {
    /// Records an admission token by its hash.
    fn insert_admission_token(
        &mut self,
        hash: &str,
        id: &str,
        operator: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<(), StoreError>;
    /// An admission token by its hash.
    fn admission_token(&mut self, hash: &str) -> Result<Option<AdmissionToken>, StoreError>;
    /// The operator (ID, name) holding a gateway hostname.
    fn hostname_holder(&mut self, hostname: &str) -> Result<Option<(String, String)>, StoreError>;
    /// Records an operator, or a new key and admission of one known by ID; `false` when the
    /// key is another gateway's.
    fn put_operator(&mut self, operator: &Operator, token_id: &str) -> Result<bool, StoreError>;
    /// Marks an admission token used by an operator.
    fn use_admission_token(&mut self, hash: &str, operator_id: &str, now: i64) -> Result<(), StoreError>;
    /// An operator by ID.
    fn operator(&mut self, id: &str) -> Result<Option<Operator>, StoreError>;
    /// Every admitted operator, oldest admission first.
    fn operators(&mut self) -> Result<Vec<Operator>, StoreError>;
    /// Records where operator `operator_id`'s gateway is, seen at `now`.
    fn put_presence(&mut self, operator_id: &str, presence: &Presence, now: i64) -> Result<(), StoreError>;
    /// Where each gateway last said it was, and when (Unix ms), by operator ID.
    fn presences(&mut self) -> Result<Vec<(String, Presence, i64)>, StoreError>;
}

/// A redeploy's switch under way (issue 41): its successor validated at `began_at`, and
/// once every gateway host serving the deployment had the successor's agents (or the bound
/// passed), the hosts' tables flipped to it at feed sequence `flipped` (seq, Unix ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSwitch {
    /// The deployment.
    pub deployment_id: String,
    /// The successor's revision.
    pub revision: u32,
    /// The successor's route.
    pub route_id: String,
    /// When its validation passed, Unix ms.
    pub began_at: i64,
    /// The feed sequence and time (Unix ms) at which the hosts' tables made it serve.
    pub flipped: Option<(u64, i64)>,
}

/// The route feed's sequence, what gateway hosts report, redeploys' switches and the hosts
/// lagging behind them (`feed.rs`; issue 41).
pub trait FeedRows {
    /// The feed's sequence now.
    fn feed_seq(&mut self) -> Result<u64, StoreError>;
    /// Moves the feed's sequence on one; the new sequence.
    fn bump_feed_seq(&mut self) -> Result<u64, StoreError>;
    /// The engine's sequence now: moved on by each operation that wakes the engine.
    fn engine_seq(&mut self) -> Result<u64, StoreError>;
    /// Moves the engine's sequence on one.
    fn bump_engine_seq(&mut self) -> Result<(), StoreError>;
    /// Records operator `operator_id`'s gateway's report, made with a request signed at
    /// `signed_at` (Unix ms), received at `now`.
    fn put_report(&mut self, operator_id: &str, report: &Report, signed_at: i64, now: i64) -> Result<(), StoreError>;
    /// When the request whose report is recorded for operator `operator_id` was signed (Unix
    /// ms; 0 for one recorded before this was), if one is.
    fn report_signed_at(&mut self, operator_id: &str) -> Result<Option<i64>, StoreError>;
    /// Each gateway's last report and when (Unix ms), by operator ID.
    fn reports(&mut self) -> Result<Vec<(String, Report, i64)>, StoreError>;
    /// Every switch under way.
    fn route_switches(&mut self) -> Result<Vec<RouteSwitch>, StoreError>;
    /// Records a deployment's switch (replacing the one it had).
    fn put_route_switch(&mut self, switch: &RouteSwitch) -> Result<(), StoreError>;
    /// Forgets a deployment's switch.
    fn delete_route_switch(&mut self, deployment_id: &str) -> Result<(), StoreError>;
    /// Every (deployment, operator, route awaited) whose host lags.
    fn lagging_hosts(&mut self) -> Result<Vec<(String, String, String)>, StoreError>;
    /// Where operator `operator_id`'s host lags: by deployment, what it must have to rejoin.
    fn lagging_of(&mut self, operator_id: &str) -> Result<Vec<(String, Lagging)>, StoreError>;
    /// Marks operator `operator_id`'s host lagging for a deployment until it has `lag`.
    fn put_lagging_host(
        &mut self,
        deployment_id: &str,
        operator_id: &str,
        lag: &Lagging,
        now: i64,
    ) -> Result<(), StoreError>;
    /// Makes every host lagging for a deployment wait for `lag` instead.
    fn retarget_lagging_hosts(&mut self, deployment_id: &str, lag: &Lagging) -> Result<(), StoreError>;
    /// A host no longer lags for a deployment.
    fn delete_lagging_host(&mut self, deployment_id: &str, operator_id: &str) -> Result<(), StoreError>;
    /// The latest signed time (Unix ms) of a feed request accepted from operator
    /// `operator_id`, if any was (issue 40).
    fn feed_counter(&mut self, operator_id: &str) -> Result<Option<i64>, StoreError>;
    /// Records that a feed request of operator `operator_id` signed at `signed_at` was
    /// accepted.
    fn put_feed_counter(&mut self, operator_id: &str, signed_at: i64) -> Result<(), StoreError>;
    /// The coordinators' probe keys (public halves, hex), newest first.
    fn probe_keys(&mut self) -> Result<Vec<String>, StoreError>;
    /// Records a coordinator's probe key (public half, hex) at `now`: whether it is new.
    fn put_probe_key(&mut self, public_key: &str, now: i64) -> Result<bool, StoreError>;
}

/// The policies revisions publish (`policies.rs`).
pub trait PolicyRows {
    /// Records a revision's policy (refused if the revision has one).
    fn insert_policy(&mut self, deployment_id: &str, policy: &PublishedPolicy) -> Result<(), StoreError>;
    /// The policy of the deployment's revision `revision`.
    fn policy(&mut self, deployment_id: &str, revision: u32) -> Result<Option<PublishedPolicy>, StoreError>;
    /// The highest revision of the deployment that published a policy (0: none).
    fn last_published(&mut self, deployment_id: &str) -> Result<u32, StoreError>;
    /// Every revision (a deployment's current one, or its successor's) with no policy yet.
    fn unpublished(&mut self) -> Result<Vec<Unpublished>, StoreError>;
}

/// A revision with no policy yet: its deployment, revision and route, and whether it is the
/// deployment's successor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpublished {
    /// The deployment.
    pub deployment_id: String,
    /// The revision.
    pub revision: u32,
    /// The revision's route.
    pub route_id: String,
    /// Whether it is the successor being deployed (not the current revision).
    pub successor: bool,
}

/// The deployments' jobs as executions (`executions.rs`).
pub trait ExecutionRows {
    /// The highest attempt recorded for the deployment's revision (0: none).
    /// Records a new execution.
    /// The execution with this order ID, and its deployment.
    /// Writes an execution's state, processor, reason and change time.
    fn update_execution(&mut self, record: &ExecutionRecord) -> Result<(), StoreError>;
    /// The deployment's executions older than the one with row `before` (all, without),
    /// newest first, at most `limit`, each with its row for a cursor.
    fn executions_page(
        &mut self,
        deployment_id: &str,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<(i64, ExecutionRecord)>, StoreError>;
    /// The newest execution of each slot of the deployment's revision `generation`, by slot.
    fn latest_executions(&mut self, deployment_id: &str, generation: u32) -> Result<Vec<ExecutionRecord>, StoreError>;
    /// Whether an execution of a revision older than `generation` is live.
    fn live_before(&mut self, deployment_id: &str, generation: u32) -> Result<bool, StoreError>;
    /// Every live execution (launching, running, ready, restarting, stopping), of every
    /// deployment.
    fn live_executions(&mut self) -> Result<Vec<ExecutionRecord>, StoreError>;
}

/// The scheduler's records of the deployments (`svc_execution`'s view): each deployment is an
/// application keyed by its row, its executions as the scheduler records them, and its
/// scheduling state. [`crate::coordinator::scheduling`] puts the rules on top.
pub trait SchedulingRows {
    /// A deployment's key.
    fn deployment_key(&mut self, id: &str) -> Result<Option<i64>, StoreError>;
    /// The deployment of a key.
    fn deployment_by_key(&mut self, key: i64) -> Result<Option<Deployment>, StoreError>;
    /// Deployments due at or before `now`, soonest first, at most `limit`.
    fn due_deployments(&mut self, now: i64, limit: u32) -> Result<Vec<i64>, StoreError>;
    /// When the next deployment is due.
    fn next_due_deployment(&mut self) -> Result<Option<i64>, StoreError>;
    /// The version the scheduler activated for the deployment, and when.
    fn activated(&mut self, key: i64) -> Result<(u64, i64), StoreError>;
    /// Records the version activated.
    fn set_activated(&mut self, key: i64, version: u64, at: i64) -> Result<(), StoreError>;
    /// When to decide next (`None`: only when woken), and why it is blocked.
    fn set_schedule(
        &mut self,
        key: i64,
        next_at: Option<i64>,
        blocked: Option<&svc_execution::Reason>,
    ) -> Result<(), StoreError>;
    /// Why the scheduler is blocked for the deployment, if it is.
    fn blocked(&mut self, deployment_id: &str) -> Result<Option<svc_execution::Reason>, StoreError>;
    /// Makes the deployment due at `at` at the latest (its state or its revisions changed).
    fn wake(&mut self, deployment_id: &str, at: i64) -> Result<(), StoreError>;
    /// The deployment's live executions and every attempt of its slots' newest generations,
    /// and of their newest generations of a policy version up to `active`, oldest first.
    fn scheduled(&mut self, key: i64, active: u64) -> Result<Vec<svc_execution::Execution>, StoreError>;
    /// The execution with this market ID, with its deployment's key.
    fn scheduled_by_id(&mut self, execution_id: &str) -> Result<Option<(i64, svc_execution::Execution)>, StoreError>;
    /// Every live execution, with its deployment's key.
    fn live_scheduled(&mut self) -> Result<Vec<(i64, svc_execution::Execution)>, StoreError>;
    /// Records a new execution; returns its key.
    fn insert_scheduled(&mut self, key: i64, execution: &svc_execution::Execution) -> Result<i64, StoreError>;
    /// Records an execution's state, processor, restarts, silence and reason.
    fn update_scheduled(&mut self, execution: &svc_execution::Execution) -> Result<(), StoreError>;
}

/// A revision's secrets as stored: the row's key, the value (sealed as
/// `svc_keys::sealed::to_text`; in clear when an older version wrote it) and the data key that
/// sealed it, as the store keeps it (none for a value in clear).
#[derive(Clone, PartialEq, Eq)]
pub struct StoredSecret {
    /// The deployment's organization (the first part of the value's row context).
    pub org_id: String,
    /// The deployment.
    pub deployment_id: String,
    /// The revision.
    pub revision: u32,
    /// The value as stored.
    pub value: String,
    /// Its data key, wrapped; `None`: the value is in clear.
    pub data_key: Option<WrappedKey>,
}

impl std::fmt::Debug for StoredSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the value: one in clear is a secret.
        f.debug_struct("StoredSecret")
            .field("deployment_id", &self.deployment_id)
            .field("revision", &self.revision)
            .field("data_key", &self.data_key.as_ref().map(|k| k.id))
            .finish_non_exhaustive()
    }
}

/// Secrets at rest (`keys.rs`; issue 40): the data keys, wrapped, and the sealed values as a
/// start and a rotation find and reseal them.
pub trait KeyRows {
    /// Every data key, by id.
    fn data_keys(&mut self) -> Result<Vec<WrappedKey>, StoreError>;
    /// The current data key: the highest id.
    fn current_data_key(&mut self) -> Result<Option<WrappedKey>, StoreError>;
    /// Records a data key unless one has its id (another instance made it first): whether
    /// it was recorded.
    fn insert_data_key(&mut self, key: &WrappedKey, now: i64) -> Result<bool, StoreError>;
    /// Records a data key wrapped again (under the key file's new KEK).
    fn rewrap_data_key(&mut self, key: &WrappedKey) -> Result<(), StoreError>;
    /// Deletes the data keys older than `current` that no value names; how many went.
    fn delete_unused_data_keys(&mut self, current: DataKeyId) -> Result<u64, StoreError>;
    /// Up to `limit` values not sealed under `current`: those in clear first, then those
    /// under older data keys.
    fn secrets_to_seal(&mut self, current: Option<DataKeyId>, limit: u32) -> Result<Vec<StoredSecret>, StoreError>;
    /// Replaces `old`'s value with `sealed` under data key `key`, if the row still holds
    /// `old`'s value: whether it did.
    fn reseal_secret(&mut self, old: &StoredSecret, sealed: &str, key: DataKeyId) -> Result<bool, StoreError>;
    /// How many values each data key seals (`None`: in clear).
    fn secrets_by_data_key(&mut self) -> Result<Vec<(Option<DataKeyId>, u64)>, StoreError>;
    /// The organization of deployment `deployment_id`: the first part of its secrets' row
    /// context.
    fn secrets_org(&mut self, deployment_id: &str) -> Result<Option<String>, StoreError>;
}
