//! Customer hostnames, validations and logs.

use crate::coordinator::model::{CustomerHostname, HostnameState, LogEntry, ValidationRecord};
use crate::coordinator::store::backend::ActivityRows;
use crate::coordinator::store::sql::{Sql, SqlRow, params};
use crate::coordinator::store::{LOG_BYTES_KEPT, LOG_LINES_KEPT, LOG_PRUNE_BYTES, StoreError};

/// Lines a deployment's log may hold beyond [`LOG_LINES_KEPT`] before they are pruned, so a
/// `DELETE` runs once per thousand lines, not at every append; bytes are bounded at every
/// append ([`LOG_BYTES_KEPT`]), from what `log_sizes` says the log holds.
const LOG_PRUNE_STEP: i64 = 1_000;

const HOSTNAME_COLUMNS: &str = "hostname, token, state, hints_json, checked_at";

fn hostname_row(r: &SqlRow) -> Result<CustomerHostname, StoreError> {
    Ok(CustomerHostname {
        hostname: r.text(0)?,
        token: r.text(1)?,
        state: r.spelled(2, HostnameState::parse)?,
        hints: r.json(3)?,
        checked_at: r.opt_i64(4)?,
    })
}

fn log_row(r: &SqlRow) -> Result<LogEntry, StoreError> {
    Ok(LogEntry { seq: r.i64(0)?, source: r.text(1)?, line: r.text(2)?, at: r.i64(3)? })
}

impl<T: Sql> ActivityRows for T {
    fn insert_hostname(
        &mut self,
        deployment_id: &str,
        hostname: &str,
        token: &str,
        now: i64,
    ) -> Result<bool, StoreError> {
        Ok(self.execute_unique(
            "INSERT INTO hostnames (hostname, deployment_id, token, state, created_at) VALUES (?1, ?2, ?3, 'pending_dns', ?4) \
             ON CONFLICT (deployment_id, hostname) DO UPDATE SET state = 'pending_dns', hints_json = '[]', \
             checked_at = NULL WHERE hostnames.state = 'removed'",
            params![hostname, deployment_id, token, now],
        )?)
    }

    fn hostname(&mut self, deployment_id: &str, hostname: &str) -> Result<Option<CustomerHostname>, StoreError> {
        let sql = format!("SELECT {HOSTNAME_COLUMNS} FROM hostnames WHERE deployment_id = ?1 AND hostname = ?2");
        self.query_opt(&sql, params![deployment_id, hostname])?.as_ref().map(hostname_row).transpose()
    }

    fn hostnames(&mut self, deployment_id: &str) -> Result<Vec<CustomerHostname>, StoreError> {
        let sql = format!(
            "SELECT {HOSTNAME_COLUMNS} FROM hostnames WHERE deployment_id = ?1 AND state <> 'removed' \
             ORDER BY created_at, hostname"
        );
        self.query(&sql, params![deployment_id])?.iter().map(hostname_row).collect()
    }

    fn set_hostname(
        &mut self,
        deployment_id: &str,
        hostname: &str,
        state: HostnameState,
        hints_json: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        self.execute(
            "UPDATE hostnames SET state = ?1, hints_json = ?2, checked_at = ?3 WHERE deployment_id = ?4 AND hostname = ?5",
            params![state.as_str(), hints_json, now, deployment_id, hostname],
        )?;
        Ok(())
    }

    fn remove_hostnames(&mut self, deployment_id: &str) -> Result<(), StoreError> {
        self.execute("UPDATE hostnames SET state = 'removed' WHERE deployment_id = ?1", params![deployment_id])?;
        Ok(())
    }

    fn insert_validation(&mut self, v: &ValidationRecord, deployment_id: &str) -> Result<(), StoreError> {
        let detail = v.detail.to_string();
        self.execute(
            "INSERT INTO validations (deployment_id, hostname, passed, validator_version, validator_digest, detail_json, at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                deployment_id,
                &v.hostname,
                v.passed,
                &v.validator_version,
                &v.validator_digest,
                detail.as_str(),
                v.at
            ],
        )?;
        Ok(())
    }

    fn touch_validation(&mut self, seq: i64, at: i64) -> Result<(), StoreError> {
        self.execute("UPDATE validations SET at = ?1 WHERE seq = ?2", params![at, seq])?;
        Ok(())
    }

    fn latest_validations(&mut self, deployment_id: &str) -> Result<Vec<ValidationRecord>, StoreError> {
        let rows = self.query(
            "SELECT seq, hostname, passed, validator_version, detail_json, at, validator_digest FROM validations v \
             WHERE deployment_id = ?1 AND seq = (SELECT MAX(seq) FROM validations w \
             WHERE w.deployment_id = v.deployment_id AND w.hostname = v.hostname) ORDER BY hostname",
            params![deployment_id],
        )?;
        rows.iter()
            .map(|r| {
                Ok(ValidationRecord {
                    seq: r.i64(0)?,
                    hostname: r.text(1)?,
                    passed: r.bool(2)?,
                    validator_version: r.text(3)?,
                    validator_digest: r.text(6)?,
                    detail: r.json(4)?,
                    at: r.i64(5)?,
                })
            })
            .collect()
    }

    fn append_logs(&mut self, deployment_id: &str, source: &str, lines: &[String], at: i64) -> Result<(), StoreError> {
        for line in lines {
            self.execute(
                "INSERT INTO logs (deployment_id, source, line, at) VALUES (?1, ?2, ?3, ?4)",
                params![deployment_id, source, line, at],
            )?;
        }
        let count = i64::try_from(lines.len()).unwrap_or(i64::MAX);
        let bytes = lines.iter().map(|l| i64::try_from(l.len()).unwrap_or(i64::MAX)).fold(0, i64::saturating_add);
        let held = self.query_one(
            "INSERT INTO log_sizes (deployment_id, lines, bytes) VALUES (?1, ?2, ?3) ON CONFLICT (deployment_id) \
             DO UPDATE SET lines = log_sizes.lines + excluded.lines, bytes = log_sizes.bytes + excluded.bytes \
             RETURNING lines, bytes",
            params![deployment_id, count, bytes],
        )?;
        if held.i64(0)? > LOG_LINES_KEPT + LOG_PRUNE_STEP || held.i64(1)? > LOG_BYTES_KEPT {
            // The oldest lines beyond either bound go: the newest LOG_LINES_KEPT lines of at
            // most LOG_BYTES_KEPT - LOG_PRUNE_BYTES bytes stay.
            self.execute(
                "DELETE FROM logs WHERE deployment_id = ?1 AND seq <= (SELECT COALESCE(MAX(seq), 0) FROM \
                 (SELECT seq, ROW_NUMBER() OVER newest AS n, SUM(octet_length(line)) OVER newest AS newer \
                 FROM logs WHERE deployment_id = ?1 WINDOW newest AS (ORDER BY seq DESC)) AS w \
                 WHERE n > ?2 OR newer > ?3)",
                params![deployment_id, LOG_LINES_KEPT, LOG_BYTES_KEPT - LOG_PRUNE_BYTES],
            )?;
            self.execute(
                "UPDATE log_sizes SET lines = (SELECT COUNT(*) FROM logs WHERE deployment_id = ?1), \
                 bytes = (SELECT COALESCE(SUM(octet_length(line)), 0) FROM logs WHERE deployment_id = ?1) \
                 WHERE deployment_id = ?1",
                params![deployment_id],
            )?;
        }
        Ok(())
    }

    fn recent_logs(&mut self, deployment_id: &str, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        let rows = self.query(
            "SELECT seq, source, line, at FROM logs WHERE deployment_id = ?1 ORDER BY seq DESC LIMIT ?2",
            params![deployment_id, limit],
        )?;
        let mut newest_first: Vec<LogEntry> = rows.iter().map(log_row).collect::<Result<_, _>>()?;
        newest_first.reverse();
        Ok(newest_first)
    }

    fn logs(&mut self, deployment_id: &str, after: i64, limit: u32) -> Result<Vec<LogEntry>, StoreError> {
        self.query(
            "SELECT seq, source, line, at FROM logs WHERE deployment_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            params![deployment_id, after, limit],
        )?
        .iter()
        .map(log_row)
        .collect()
    }
}
