//! Customer hostnames, validations and logs: what the engine records as it looks at routes.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{RelayStore, StoreError, now_ms, refused};
use crate::coordinator::model::{CustomerHostname, HostnameState, LogEntry, ValidationRecord};
use crate::hint::Hint;

/// Adds (or re-adds a removed) customer hostname in `pending_dns`, inside a transaction.
pub(super) fn insert_hostname(
    conn: &Connection,
    deployment_id: &str,
    hostname: &str,
    token: &str,
    now: i64,
) -> Result<(), StoreError> {
    let inserted = conn.execute(
        "INSERT INTO hostnames (hostname, deployment_id, token, state, created_at) VALUES (?1, ?2, ?3, 'pending_dns', ?4) \
         ON CONFLICT (deployment_id, hostname) DO UPDATE SET state = 'pending_dns', hints_json = '[]', \
         checked_at = NULL WHERE state = 'removed'",
        params![hostname, deployment_id, token, now],
    );
    if let Err(rusqlite::Error::SqliteFailure(e, _)) = &inserted
        && e.code == rusqlite::ErrorCode::ConstraintViolation
    {
        return Err(refused("hostname_taken", format!("{hostname} belongs to another deployment")));
    }
    inserted?;
    Ok(())
}

/// The newest log lines kept per deployment (route, app and agent together).
pub(super) const LOG_LINES_KEPT: i64 = 10_000;

/// Older lines are pruned each time the log's sequence passes a multiple of this.
const LOG_PRUNE_STEP: i64 = 1_000;

impl RelayStore {
    // ------------------------------------------------------------------ hostnames

    /// Adds a customer hostname in `pending_dns` with its DNS token.
    pub fn add_hostname(
        &self,
        deployment_id: &str,
        hostname: &str,
        token: &str,
    ) -> Result<CustomerHostname, StoreError> {
        let conn = self.conn()?;
        insert_hostname(&conn, deployment_id, hostname, token, now_ms())?;
        drop(conn);
        self.hostname(deployment_id, hostname)?.ok_or_else(|| StoreError::NotFound(format!("hostname {hostname}")))
    }

    /// One customer hostname of a deployment (removed ones included).
    pub fn hostname(&self, deployment_id: &str, hostname: &str) -> Result<Option<CustomerHostname>, StoreError> {
        let conn = self.conn()?;
        Ok(conn
            .query_row(
                "SELECT hostname, token, state, hints_json, checked_at FROM hostnames WHERE deployment_id = ?1 AND hostname = ?2",
                params![deployment_id, hostname],
                hostname_row,
            )
            .optional()?)
    }

    /// The deployment's customer hostnames that are not removed, in the order added.
    pub fn hostnames(&self, deployment_id: &str) -> Result<Vec<CustomerHostname>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT hostname, token, state, hints_json, checked_at FROM hostnames \
             WHERE deployment_id = ?1 AND state <> 'removed' ORDER BY created_at, hostname",
        )?;
        let rows = stmt.query_map([deployment_id], hostname_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records a hostname's new state and what its check found.
    pub fn set_hostname(
        &self,
        deployment_id: &str,
        hostname: &str,
        state: HostnameState,
        hints: &[Hint],
    ) -> Result<(), StoreError> {
        let hints = serde_json::to_string(hints).map_err(|e| StoreError::Backend(e.to_string()))?;
        let conn = self.conn()?;
        let old: Option<String> = conn
            .query_row(
                "SELECT state FROM hostnames WHERE deployment_id = ?1 AND hostname = ?2",
                params![deployment_id, hostname],
                |r| r.get(0),
            )
            .optional()?;
        conn.execute(
            "UPDATE hostnames SET state = ?1, hints_json = ?2, checked_at = ?3 WHERE deployment_id = ?4 AND hostname = ?5",
            params![state.as_str(), hints, now_ms(), deployment_id, hostname],
        )?;
        if let Some(old) = old
            && old != state.as_str()
        {
            conn.execute(
                "INSERT INTO logs (deployment_id, source, line, at) VALUES (?1, 'route', ?2, ?3)",
                params![deployment_id, format!("hostname {hostname}: {old} -> {}", state.as_str()), now_ms()],
            )?;
        }
        Ok(())
    }

    // ------------------------------------------------------------------ validations and logs

    /// Records a validation.
    pub fn add_validation(
        &self,
        deployment_id: &str,
        hostname: &str,
        passed: bool,
        (version, digest): (&str, &str),
        detail: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.conn()?.execute(
            "INSERT INTO validations (deployment_id, hostname, passed, validator_version, validator_digest, detail_json, at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![deployment_id, hostname, passed, version, digest, detail.to_string(), now_ms()],
        )?;
        Ok(())
    }

    /// The latest validation of each hostname of the deployment.
    pub fn latest_validations(&self, deployment_id: &str) -> Result<Vec<ValidationRecord>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare(
            "SELECT seq, hostname, passed, validator_version, detail_json, at, validator_digest FROM validations v \
             WHERE deployment_id = ?1 AND seq = (SELECT MAX(seq) FROM validations w \
             WHERE w.deployment_id = v.deployment_id AND w.hostname = v.hostname) ORDER BY hostname",
        )?;
        let rows = stmt.query_map([deployment_id], |r| {
            Ok(ValidationRecord {
                seq: r.get(0)?,
                hostname: r.get(1)?,
                passed: r.get(2)?,
                validator_version: r.get(3)?,
                validator_digest: r.get(6)?,
                detail: super::json_column(r, 4)?,
                at: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Appends log lines of one source.
    pub fn append_logs(&self, deployment_id: &str, source: &str, lines: &[String]) -> Result<(), StoreError> {
        if lines.is_empty() {
            return Ok(());
        }
        let mut conn = self.conn()?;
        let tx = conn.transaction()?;
        let now = now_ms();
        let mut last = 0;
        {
            let mut stmt =
                tx.prepare_cached("INSERT INTO logs (deployment_id, source, line, at) VALUES (?1, ?2, ?3, ?4)")?;
            for line in lines {
                last = stmt.insert(params![deployment_id, source, line, now])?;
            }
        }
        // Keep each deployment's newest lines only; pruned when a batch crosses a multiple of
        // the step, so most appends cost no delete.
        let before = last - i64::try_from(lines.len()).unwrap_or(i64::MAX);
        if last / LOG_PRUNE_STEP != before / LOG_PRUNE_STEP {
            tx.execute(
                "DELETE FROM logs WHERE deployment_id = ?1 AND seq <= (SELECT seq FROM logs WHERE deployment_id = ?1 \
                 ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
                params![deployment_id, LOG_LINES_KEPT],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Up to `limit` log entries after the cursor `after`.
    pub fn logs(&self, deployment_id: &str, after: i64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(
            "SELECT seq, source, line, at FROM logs WHERE deployment_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![deployment_id, after, limit], |r| {
            Ok(LogEntry { seq: r.get(0)?, source: r.get(1)?, line: r.get(2)?, at: r.get(3)? })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

fn hostname_row(r: &Row<'_>) -> rusqlite::Result<CustomerHostname> {
    Ok(CustomerHostname {
        hostname: r.get(0)?,
        token: r.get(1)?,
        state: super::spelled(r, 2, HostnameState::parse)?,
        hints: super::json_column(r, 3)?,
        checked_at: r.get(4)?,
    })
}
