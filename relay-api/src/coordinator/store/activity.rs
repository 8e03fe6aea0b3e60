//! Customer hostnames, validations and logs: what a deployment did and what was checked.

use super::{RelayStore, StoreError, not_found, now_ms, refused};
use crate::coordinator::model::{CustomerHostname, HostnameState, LogEntry, ValidationRecord};
use crate::hint::Hint;

/// What a validation's detail says of the route, without what it measured (`latencyMs`,
/// different at every probe): two validations with the same result repeat each other.
fn result_of(detail: &serde_json::Value) -> serde_json::Value {
    let mut result = detail.clone();
    if let Some(fields) = result.as_object_mut() {
        fields.remove("latencyMs");
    }
    result
}

/// How old a hostname's last validation record may grow while validations repeat its result
/// before its time is moved to the last one's ([`RelayStore::add_validation`]).
pub(crate) const VALIDATION_REFRESH_MS: i64 = 10 * 60 * 1000;

impl RelayStore {
    /// Adds a customer hostname to a deployment (`pending_dns`), or brings back one removed
    /// from it; `hostname_taken` when another deployment holds it.
    pub fn add_hostname(
        &self,
        deployment_id: &str,
        hostname: &str,
        token: &str,
    ) -> Result<CustomerHostname, StoreError> {
        self.write(|tx| {
            if !tx.insert_hostname(deployment_id, hostname, token, now_ms())? {
                return Err(refused("hostname_taken", format!("{hostname} belongs to another deployment")));
            }
            tx.hostname(deployment_id, hostname)?.ok_or_else(|| not_found(format!("hostname {hostname}")))
        })
    }

    /// One hostname of a deployment.
    pub fn hostname(&self, deployment_id: &str, hostname: &str) -> Result<Option<CustomerHostname>, StoreError> {
        self.read(|tx| tx.hostname(deployment_id, hostname))
    }

    /// The deployment's hostnames in use, oldest first.
    pub fn hostnames(&self, deployment_id: &str) -> Result<Vec<CustomerHostname>, StoreError> {
        self.read(|tx| tx.hostnames(deployment_id))
    }

    /// Records a hostname's checked state and hints; a change of state is logged.
    pub fn set_hostname(
        &self,
        deployment_id: &str,
        hostname: &str,
        state: HostnameState,
        hints: &[Hint],
    ) -> Result<(), StoreError> {
        let hints = serde_json::to_string(hints).map_err(|e| StoreError::Backend(Box::new(e)))?;
        self.write(|tx| {
            let now = now_ms();
            let old = tx.hostname(deployment_id, hostname)?.map(|h| h.state);
            tx.set_hostname(deployment_id, hostname, state, &hints, now)?;
            if let Some(old) = old
                && old != state
            {
                let line = format!("hostname {hostname}: {} -> {}", old.as_str(), state.as_str());
                tx.append_logs(deployment_id, "route", &[line], now)?;
            }
            Ok(())
        })
    }

    /// Records a validation of one hostname by a validator (version, digest): a new record
    /// when its result differs from the hostname's last one (passed, validator, detail but
    /// its latency);
    /// otherwise the last one's time is moved to now only once it is
    /// [`VALIDATION_REFRESH_MS`] old. So a route that keeps passing writes the store every 10
    /// minutes, not at every validation (issue 44, point 5: the store written at rest), and
    /// its records do not grow by one every interval.
    pub fn add_validation(
        &self,
        deployment_id: &str,
        hostname: &str,
        passed: bool,
        judge: (&str, &str),
        detail: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.add_validation_at(deployment_id, hostname, passed, judge, detail, now_ms())
    }

    /// [`RelayStore::add_validation`] at `now` (ms).
    pub(crate) fn add_validation_at(
        &self,
        deployment_id: &str,
        hostname: &str,
        passed: bool,
        (version, digest): (&str, &str),
        detail: &serde_json::Value,
        now: i64,
    ) -> Result<(), StoreError> {
        let record = ValidationRecord {
            seq: 0,
            hostname: hostname.to_owned(),
            passed,
            validator_version: version.to_owned(),
            validator_digest: digest.to_owned(),
            detail: detail.clone(),
            at: now,
        };
        let same = |last: &ValidationRecord| {
            (last.passed, &last.validator_version, &last.validator_digest, result_of(&last.detail))
                == (passed, &record.validator_version, &record.validator_digest, result_of(detail))
        };
        let last = self.latest_validations(deployment_id)?.into_iter().find(|v| v.hostname == hostname);
        match last {
            Some(last) if same(&last) && now.saturating_sub(last.at) < VALIDATION_REFRESH_MS => Ok(()),
            Some(last) if same(&last) => self.write(|tx| tx.touch_validation(last.seq, now)),
            _ => self.write(|tx| tx.insert_validation(&record, deployment_id)),
        }
    }

    /// The newest validation of each hostname of the deployment.
    pub fn latest_validations(&self, deployment_id: &str) -> Result<Vec<ValidationRecord>, StoreError> {
        self.read(|tx| tx.latest_validations(deployment_id))
    }

    /// Appends a job's output lines (one transaction for the batch), keeping only the newest
    /// [`LOG_LINES_KEPT`](super::LOG_LINES_KEPT) of the deployment, of at most
    /// [`LOG_BYTES_KEPT`](super::LOG_BYTES_KEPT) bytes.
    pub fn append_logs(&self, deployment_id: &str, source: &str, lines: &[String]) -> Result<(), StoreError> {
        if lines.is_empty() {
            return Ok(());
        }
        self.write(|tx| tx.append_logs(deployment_id, source, lines, now_ms()))
    }

    /// The newest `limit` log lines, oldest first (the console's live view).
    pub fn recent_logs(&self, deployment_id: &str, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        self.read(|tx| tx.recent_logs(deployment_id, limit))
    }

    /// Log lines after `after`, at most `limit`.
    pub fn logs(&self, deployment_id: &str, after: i64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        self.read(|tx| tx.logs(deployment_id, after, limit))
    }
}
