//! What the coordinator stores and its API returns. These types are the JSON shapes of the
//! relay API and of `svc ingress ... --format json` (documented in docs/ingress-project.md).

use serde::{Deserialize, Serialize};

use super::state::DeploymentState;
use crate::hint::Hint;

/// A deployment of a project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    /// `dep_` and 16 hex digits.
    pub id: String,
    /// The project's name (from the project file).
    pub project: String,
    /// The `sha256:` digest of the project (quotes bind to it).
    pub project_digest: String,
    /// The `sha256:` authored digest of the V5 manifest the job runs under.
    pub manifest_digest: String,
    /// The service-assigned hostname (`<project>-<org>.<relay domain>`).
    pub canonical_hostname: String,
    /// The public URL of the canonical hostname (the coordinator's gateway's).
    pub url: String,
    /// Every public URL of the canonical hostname: [`Deployment::url`], then that of each
    /// gateway host serving it (issue 20).
    #[serde(default)]
    pub urls: Vec<String>,
    /// The route's ID at the gateway.
    pub route_id: String,
    /// The most this project may ever be funded, micros.
    pub ceiling_micros: u64,
    /// The current state.
    pub state: DeploymentState,
    /// Why it is in that state.
    pub state_reason: String,
    /// Periods charged so far.
    pub periods_spent: u64,
    /// When the next period is charged (Unix ms), while live or degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_period_at: Option<i64>,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms of the last change.
    pub updated_at: i64,
    /// Why it failed, as a stable code (`job_exited`, `job_failed`), while it is failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_code: Option<String>,
    /// The revision of the project it serves: 1 for the first deploy, one more for each
    /// deploy of a changed project that took over.
    #[serde(default = "first_revision")]
    pub revision: u32,
}

fn first_revision() -> u32 {
    1
}

/// Where a redeploy's successor is: started beside the serving revision, it takes the route
/// only once validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SuccessorState {
    /// Recorded; its job starts at the engine's next look.
    Starting,
    /// Its job runs; it is validated through the gateway until it passes or its time is up.
    Validating,
    /// It did not pass (its app ended, or validation kept failing): the serving revision
    /// goes on, and the next deploy replaces it.
    Failed,
}

impl SuccessorState {
    /// The spelling in the store and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            SuccessorState::Starting => "starting",
            SuccessorState::Validating => "validating",
            SuccessorState::Failed => "failed",
        }
    }

    /// Reads a spelling.
    pub fn parse(text: &str) -> Option<SuccessorState> {
        [SuccessorState::Starting, SuccessorState::Validating, SuccessorState::Failed]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// A redeploy not serving yet: the next revision of a deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Successor {
    /// The deployment it would take over.
    pub deployment_id: String,
    /// Its revision number.
    pub revision: u32,
    /// Its project's digest (the project file and every app file).
    pub project_digest: String,
    /// Its project's spend ceiling, micros: the deployment's once it takes over.
    #[serde(default)]
    pub ceiling_micros: u64,
    /// Its own route at the gateway (no public traffic until it takes over).
    pub route_id: String,
    /// Where it is.
    pub state: SuccessorState,
    /// Why (what failed, when it did).
    pub reason: String,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms of the last change.
    pub updated_at: i64,
}

/// A recorded state change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    /// Order.
    pub seq: i64,
    /// The state before (none for creation).
    pub from: Option<DeploymentState>,
    /// The state after.
    pub to: DeploymentState,
    /// Why.
    pub reason: String,
    /// Unix ms.
    pub at: i64,
}

/// A price for running the route, bound to the project and its hostnames.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Quote {
    /// `quo_` and 16 hex digits.
    pub id: String,
    /// The deployment it prices.
    pub deployment_id: String,
    /// The project digest it was made for.
    pub project_digest: String,
    /// The hostnames it was made for (canonical first).
    pub hostnames: Vec<String>,
    /// Price per period, micros.
    pub price_micros: u64,
    /// The period, seconds.
    pub period_secs: u64,
    /// Periods quoted.
    pub periods: u64,
    /// `price_micros * periods`.
    pub total_micros: u64,
    /// Unix ms.
    pub created_at: i64,
    /// Funding is refused after this (Unix ms).
    pub expires_at: i64,
    /// When it was funded (Unix ms), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub funded_at: Option<i64>,
}

/// How long before its expiry a quote stops being handed out as one to fund (a deploy or
/// `svc ingress fund` funds it a moment later).
pub const QUOTE_MARGIN_MS: i64 = 5_000;

impl Quote {
    /// Whether it can still be funded at `now` for the project of `project_digest` serving
    /// `hostnames`: not funded, at least [`QUOTE_MARGIN_MS`] from expiring, and made for them
    /// (else the fund is refused `quote_stale`).
    pub fn is_open_for(&self, project_digest: &str, hostnames: &[String], now: i64) -> bool {
        self.funded_at.is_none()
            && self.expires_at > now.saturating_add(QUOTE_MARGIN_MS)
            && self.project_digest == project_digest
            && self.hostnames == hostnames
    }
}

/// The kind of a ledger movement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// Credits moved onto the deployment against a quote.
    Fund,
    /// One period charged (at its start).
    Spend,
    /// The part of a charged period the route did not serve, back to refundable (at settlement).
    Unserved,
    /// The deployment stopped (amount 0: marks the moment spending ended).
    Stop,
    /// Unspent credits returned.
    Refund,
}

impl EntryKind {
    /// The spelling in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Fund => "fund",
            EntryKind::Spend => "spend",
            EntryKind::Unserved => "unserved",
            EntryKind::Stop => "stop",
            EntryKind::Refund => "refund",
        }
    }

    /// Reads a spelling.
    pub fn parse(text: &str) -> Option<EntryKind> {
        [EntryKind::Fund, EntryKind::Spend, EntryKind::Unserved, EntryKind::Stop, EntryKind::Refund]
            .into_iter()
            .find(|k| k.as_str() == text)
    }
}

/// One ledger movement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerEntry {
    /// Order (global).
    pub seq: i64,
    /// What moved.
    pub kind: EntryKind,
    /// How much, micros.
    pub amount_micros: u64,
    /// The quote funded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote_id: Option<String>,
    /// The period charged (0 first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_index: Option<u64>,
    /// A short description.
    pub note: String,
    /// Unix ms.
    pub at: i64,
}

/// A deployment's money, from its ledger and sessions. Always:
/// `funded = spent + refundable + refunded`, and
/// `spent = reward + service + inProgress` (the running period splits when it settles).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Balance {
    /// Sum of fund entries.
    pub funded_micros: u64,
    /// Charged and served (or running): spend entries less unserved entries.
    pub spent_micros: u64,
    /// Returnable on request: periods never started and the unserved parts of settled ones.
    pub refundable_micros: u64,
    /// Sum of refund entries.
    pub refunded_micros: u64,
    /// Of the refundable: periods not started yet (what keeps the route running).
    pub available_micros: u64,
    /// Of the spent: the running period, not settled yet.
    pub in_progress_micros: u64,
    /// Of the spent: gateway operators' rewards.
    pub reward_micros: u64,
    /// Of the spent: the service's share.
    pub service_micros: u64,
}

/// How long a deployment's money lasts: what is left of it, how fast it goes, and when it
/// ends (`svc ingress status`, the console's deployment page; docs/ingress-economics.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Funding {
    /// Funded and not yet spent: the periods not started, and the part of the running period
    /// still ahead (its price prorated by the time left, rounded down).
    pub remaining_micros: u64,
    /// What serving costs per day at the running (else the next) period's price; 0 while the
    /// deployment runs no job.
    pub burn_micros_per_day: u64,
    /// When the funded periods end (Unix ms): the running period's end plus every period not
    /// started. Absent while no period runs (before the first is charged, after a stop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_out_at: Option<i64>,
    /// The period's length, milliseconds (the running or next session's); 0 without one.
    pub period_ms: u64,
    /// Whether the funded periods end within [`crate::coordinator::money::FUNDS_LOW_SHARE`] of
    /// one period: the `funds_low` hint.
    pub low: bool,
}

/// Where a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// Funded, its period not started.
    Funded,
    /// Its period is running (charged).
    Active,
    /// Its period ended, was cut short, or was refunded before it started.
    Settled,
}

impl SessionState {
    /// The spelling in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::Funded => "funded",
            SessionState::Active => "active",
            SessionState::Settled => "settled",
        }
    }

    /// Reads a spelling.
    pub fn parse(text: &str) -> Option<SessionState> {
        [SessionState::Funded, SessionState::Active, SessionState::Settled].into_iter().find(|s| s.as_str() == text)
    }
}

/// One funded period of a route, bound to the quote that funded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// `ses_` and 16 hex digits.
    pub id: String,
    /// The deployment.
    pub deployment_id: String,
    /// The quote that funded it.
    pub quote_id: String,
    /// Funding order within the deployment (periods start in this order).
    pub ordinal: u64,
    /// Its price, micros.
    pub price_micros: u64,
    /// Its period, milliseconds.
    pub period_ms: u64,
    /// Where it is.
    pub state: SessionState,
    /// The period it ran as, once started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_index: Option<u64>,
    /// When its period started (Unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<i64>,
    /// When its period ends or ended (Unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<i64>,
    /// Milliseconds of its period counted as unserved, once settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unserved_ms: Option<u64>,
    /// The unserved part of its price.
    pub unserved_micros: u64,
    /// How much of it was refunded.
    pub refunded_micros: u64,
    /// The gateway operator's reward from it.
    pub reward_micros: u64,
    /// The service's share of it.
    pub service_micros: u64,
    /// When it settled (Unix ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_at: Option<i64>,
    /// Charged and served (or running).
    pub spent_micros: u64,
    /// Returnable now by `svc ingress refund`.
    pub refundable_micros: u64,
}

/// One reward of a gateway operator: the share of one served session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reward {
    /// The session it comes from.
    pub session_id: String,
    /// The session's deployment.
    pub deployment_id: String,
    /// Micros.
    pub amount_micros: u64,
    /// When the session settled (Unix ms).
    pub settled_at: i64,
    /// When it can be claimed (Unix ms).
    pub claimable_at: i64,
    /// The claim that took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_id: Option<String>,
}

/// An operator's rewards: `accrued = pending + claimable + claimed`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RewardsSummary {
    /// The operator.
    pub operator: String,
    /// Every reward.
    pub accrued_micros: u64,
    /// Still within the settlement delay.
    pub pending_micros: u64,
    /// Past the delay, not claimed.
    pub claimable_micros: u64,
    /// Claimed.
    pub claimed_micros: u64,
    /// The rewards, oldest first.
    pub rewards: Vec<Reward>,
}

/// Where a customer hostname is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostnameState {
    /// Waiting for its CNAME, TXT and CAA records to check out.
    PendingDns,
    /// DNS checks out; waiting for the route to validate through it.
    Verified,
    /// Validated through the public path: serving.
    Live,
    /// Removed by the customer.
    Removed,
}

impl HostnameState {
    /// The spelling in the store.
    pub fn as_str(self) -> &'static str {
        match self {
            HostnameState::PendingDns => "pending_dns",
            HostnameState::Verified => "verified",
            HostnameState::Live => "live",
            HostnameState::Removed => "removed",
        }
    }

    /// Reads a spelling.
    pub fn parse(text: &str) -> Option<HostnameState> {
        [HostnameState::PendingDns, HostnameState::Verified, HostnameState::Live, HostnameState::Removed]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// A customer hostname of a deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomerHostname {
    /// The hostname.
    pub hostname: String,
    /// The DNS token to publish at `_svc-challenge.<hostname>`.
    pub token: String,
    /// Where it is.
    pub state: HostnameState,
    /// What its last check found wrong.
    pub hints: Vec<Hint>,
    /// Unix ms of the last check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at: Option<i64>,
}

/// One route validation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidationRecord {
    /// Order.
    pub seq: i64,
    /// The hostname validated.
    pub hostname: String,
    /// Whether it passed.
    pub passed: bool,
    /// The validation procedure's version.
    pub validator_version: String,
    /// The `sha256:` digest of that version's canonical definition.
    pub validator_digest: String,
    /// What was seen (certificate serial and expiry, health status, latency) or the hint.
    pub detail: serde_json::Value,
    /// Unix ms.
    pub at: i64,
}

/// One log line of a deployment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogEntry {
    /// The cursor: ask for entries after it.
    pub seq: i64,
    /// `route` (the coordinator's own), `app` or `agent`.
    pub source: String,
    /// The line.
    pub line: String,
    /// Unix ms.
    pub at: i64,
}
