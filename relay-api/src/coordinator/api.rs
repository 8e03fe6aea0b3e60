//! The relay API's request and response bodies (JSON, camelCase). The CLI speaks these too.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::model::{
    Balance, CustomerHostname, Deployment, Funding, LedgerEntry, LogEntry, Quote, RewardsSummary, Session, Successor,
    Transition, ValidationRecord,
};
use crate::hint::Hint;

/// The most app files a deployment may carry (hidden entries are not sent): a bundle's, as
/// for any bundle ([`svc_execution::bundle`]).
pub const BUNDLE_MAX_FILES: usize = svc_execution::bundle::BUNDLE_MAX_FILES;

/// The most bytes of app files a deployment may carry, decoded.
pub const BUNDLE_MAX_BYTES: u64 = svc_execution::bundle::BUNDLE_MAX_BYTES;

/// `POST /api/ingress/deployments`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeployRequest {
    /// The project file's content.
    pub project: serde_json::Value,
    /// The V5 manifest's text, when the project names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
    /// The app directory's files: relative path to base64 content.
    pub bundle: BTreeMap<String, String>,
    /// Secret values by the app's environment name (read from the deployer's environment).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, String>,
}

/// A deployment with its quote: the answer to deploy, and to asking for a quote.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeployResponse {
    /// The deployment.
    pub deployment: Deployment,
    /// The quote to fund.
    pub quote: Quote,
    /// Whether an identical deployment already existed (nothing new was created).
    pub existing: bool,
    /// The next revision this deploy made (or repeated) of a deployment that exists: it
    /// takes over once validated, and `deployment` serves meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successor: Option<Successor>,
}

/// `POST .../quotes`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QuoteRequest {
    /// Periods to price (default: the project's `spend.fundPeriods`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub periods: Option<u64>,
}

/// `POST .../fund`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FundRequest {
    /// The quote to fund.
    pub quote_id: String,
}

/// `POST .../hostnames`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostnameRequest {
    /// The customer hostname.
    pub hostname: String,
}

/// `GET .../{project}`: everything `svc ingress status` shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// The deployment.
    pub deployment: Deployment,
    /// Its money.
    pub balance: Balance,
    /// How long its money lasts: what is left, the burn per day, when it runs out.
    #[serde(default)]
    pub funding: Funding,
    /// Price per period and the period (from the newest quote).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_quote: Option<Quote>,
    /// Customer hostnames.
    pub hostnames: Vec<CustomerHostname>,
    /// The latest validation of each hostname.
    pub validations: Vec<ValidationRecord>,
    /// How it got here.
    pub transitions: Vec<Transition>,
    /// What to fix, first things first.
    pub hints: Vec<Hint>,
    /// The job's process IDs (app, agent) when the local job runner runs it; empty otherwise.
    pub processes: Vec<u32>,
    /// A redeploy not serving yet (or one that failed; the serving revision goes on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successor: Option<Successor>,
}

/// `GET .../ledger`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LedgerResponse {
    /// Every movement, oldest first.
    pub entries: Vec<LedgerEntry>,
    /// The totals.
    pub balance: Balance,
}

/// `GET .../logs?after=CURSOR`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogsResponse {
    /// Entries after the cursor.
    pub entries: Vec<LogEntry>,
    /// Pass this as `after` to continue.
    pub next: i64,
}

/// `GET .../hints`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HintsResponse {
    /// The deployment's state.
    pub state: super::state::DeploymentState,
    /// Ranked: fix the first one first.
    pub hints: Vec<Hint>,
}

/// `GET .../policy`: a published policy version, as the publication service shows one.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyResponse {
    /// The deployment.
    pub deployment_id: String,
    /// The project.
    pub project: String,
    /// The version: the revision that published it.
    pub policy_version: u32,
    /// 5.
    pub schema_version: u8,
    /// The manifest's authored digest.
    pub authored_digest: String,
    /// The effective document's digest.
    pub policy_digest: String,
    /// When it was published, RFC 3339.
    pub published_at: String,
    /// Whether it is the serving revision's.
    pub active: bool,
    /// The effective V5 document.
    pub policy: serde_json::Value,
}

/// `POST .../hostnames` and `.../verify`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HostnameResponse {
    /// The hostname and its state.
    pub hostname: CustomerHostname,
    /// The records it needs (CNAME and TXT; CAA only if one forbids the CA).
    pub records: Vec<crate::hint::DnsRecord>,
}

/// `GET .../sessions`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsResponse {
    /// Every session, in funding order.
    pub sessions: Vec<Session>,
    /// The totals.
    pub balance: Balance,
}

/// `POST /api/ingress/rewards/claim`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimResponse {
    /// `clm_` and 16 hex digits.
    pub claim_id: String,
    /// What was claimed, micros.
    pub amount_micros: u64,
    /// The rewards after the claim.
    pub rewards: RewardsSummary,
}

/// A validator version this coordinator knows.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidatorVersion {
    /// `route-validation/N`.
    pub version: String,
    /// The `sha256:` digest of its canonical definition.
    pub digest: String,
}

/// `GET|POST|DELETE .../pins`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PinsResponse {
    /// The digests the project accepts (none: any version).
    pub pins: Vec<String>,
    /// The version this coordinator judges routes with.
    pub current: ValidatorVersion,
}

/// `POST .../pins`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PinRequest {
    /// `sha256:` and 64 hex digits.
    pub digest: String,
}
