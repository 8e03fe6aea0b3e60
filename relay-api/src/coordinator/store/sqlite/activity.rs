//! Customer hostnames, validations and logs, in SQL.

use rusqlite::{OptionalExtension, params};

use super::rows::{HOSTNAME_COLUMNS, hostname_row, json_column};
use super::{SqliteTransaction, unique_violation};
use crate::coordinator::model::{CustomerHostname, HostnameState, LogEntry, ValidationRecord};
use crate::coordinator::store::backend::ActivityRows;
use crate::coordinator::store::{LOG_LINES_KEPT, StoreError};

/// Old lines are pruned when the log's sequence crosses a multiple of this, not at every
/// append: one `DELETE` per thousand lines.
const LOG_PRUNE_STEP: i64 = 1_000;

impl ActivityRows for SqliteTransaction<'_> {
    fn insert_hostname(
        &mut self,
        deployment_id: &str,
        hostname: &str,
        token: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        let inserted = self.conn.execute(
            "INSERT INTO hostnames (hostname, deployment_id, token, state, created_at) VALUES (?1, ?2, ?3, 'pending_dns', ?4) \
             ON CONFLICT (deployment_id, hostname) DO UPDATE SET state = 'pending_dns', hints_json = '[]', \
             checked_at = NULL WHERE state = 'removed'",
            params![hostname, deployment_id, token, now],
        );
        if unique_violation(&inserted) {
            return Ok(false);
        }
        inserted?;
        Ok(true)
    }

    fn hostname(&mut self, deployment_id: &str, hostname: &str) -> Result<Option<CustomerHostname>, StoreError> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {HOSTNAME_COLUMNS} FROM hostnames WHERE deployment_id = ?1 AND hostname = ?2"),
                params![deployment_id, hostname],
                hostname_row,
            )
            .optional()?)
    }

    fn hostnames(&mut self, deployment_id: &str) -> Result<Vec<CustomerHostname>, StoreError> {
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {HOSTNAME_COLUMNS} FROM hostnames WHERE deployment_id = ?1 AND state <> 'removed' \
             ORDER BY created_at, hostname"
        ))?;
        let rows = stmt.query_map([deployment_id], hostname_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn set_hostname(
        &mut self,
        deployment_id: &str,
        hostname: &str,
        state: HostnameState,
        hints_json: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE hostnames SET state = ?1, hints_json = ?2, checked_at = ?3 WHERE deployment_id = ?4 AND hostname = ?5",
            params![state.as_str(), hints_json, now, deployment_id, hostname],
        )?;
        Ok(())
    }

    fn remove_hostnames(&mut self, deployment_id: &str) -> Result<(), StoreError> {
        self.conn.execute("UPDATE hostnames SET state = 'removed' WHERE deployment_id = ?1", [deployment_id])?;
        Ok(())
    }

    fn insert_validation(&mut self, v: &ValidationRecord, deployment_id: &str) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO validations (deployment_id, hostname, passed, validator_version, validator_digest, detail_json, at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                deployment_id,
                v.hostname,
                v.passed,
                v.validator_version,
                v.validator_digest,
                v.detail.to_string(),
                v.at
            ],
        )?;
        Ok(())
    }

    fn latest_validations(&mut self, deployment_id: &str) -> Result<Vec<ValidationRecord>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
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
                detail: json_column(r, 4)?,
                at: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn append_logs(&mut self, deployment_id: &str, source: &str, lines: &[String], at: i64) -> Result<(), StoreError> {
        let mut last = 0;
        {
            let mut stmt = self
                .conn
                .prepare_cached("INSERT INTO logs (deployment_id, source, line, at) VALUES (?1, ?2, ?3, ?4)")?;
            for line in lines {
                last = stmt.insert(params![deployment_id, source, line, at])?;
            }
        }
        let before = last - i64::try_from(lines.len()).unwrap_or(i64::MAX);
        if !lines.is_empty() && last / LOG_PRUNE_STEP != before / LOG_PRUNE_STEP {
            self.conn.execute(
                "DELETE FROM logs WHERE deployment_id = ?1 AND seq <= (SELECT seq FROM logs WHERE deployment_id = ?1 \
                 ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
                params![deployment_id, LOG_LINES_KEPT],
            )?;
        }
        Ok(())
    }

    fn recent_logs(&mut self, deployment_id: &str, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, source, line, at FROM logs WHERE deployment_id = ?1 ORDER BY seq DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![deployment_id, limit], |r| {
            Ok(LogEntry { seq: r.get(0)?, source: r.get(1)?, line: r.get(2)?, at: r.get(3)? })
        })?;
        let mut newest_first: Vec<LogEntry> = rows.collect::<Result<_, _>>()?;
        newest_first.reverse();
        Ok(newest_first)
    }

    fn logs(&mut self, deployment_id: &str, after: i64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, source, line, at FROM logs WHERE deployment_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        )?;
        let rows = stmt.query_map(params![deployment_id, after, limit], |r| {
            Ok(LogEntry { seq: r.get(0)?, source: r.get(1)?, line: r.get(2)?, at: r.get(3)? })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
