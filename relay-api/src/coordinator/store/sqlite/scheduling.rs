//! The scheduler's records of the deployments, in SQL (migration 0008).

use rusqlite::{OptionalExtension, Row, params};
use svc_execution::{ExecState, Execution, Quote, Reason};

use super::SqliteTransaction;
use super::rows::{DEPLOYMENT_COLUMNS, deployment_row};
use crate::coordinator::model::Deployment;
use crate::coordinator::store::StoreError;
use crate::coordinator::store::backend::SchedulingRows;

const COLUMNS: &str = "id, execution_id, slot, generation, attempt, policy_version, state, processor_id, \
     window_start, window_end, restarts, created_at, changed_at, silent_since, reason_code, reason_message";

/// What the scheduler calls live.
const LIVE: &str = "('launching', 'running', 'ready', 'restarting', 'stopping')";

fn ms(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn execution_row(r: &Row<'_>) -> rusqlite::Result<Execution> {
    let state: String = r.get(6)?;
    let state = ExecState::parse(&state).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(6, rusqlite::types::Type::Text, format!("state {state:?}").into())
    })?;
    let reason = match (r.get::<_, Option<String>>(14)?, r.get::<_, Option<String>>(15)?) {
        (Some(code), message) => Some(Reason { code, message: message.unwrap_or_default() }),
        (None, _) => None,
    };
    Ok(Execution {
        key: r.get(0)?,
        execution_id: r.get(1)?,
        slot: r.get(2)?,
        generation: ms(r.get(3)?),
        attempt: r.get(4)?,
        policy_version: ms(r.get(5)?),
        state,
        processor_id: r.get(7)?,
        window_start: ms(r.get(8)?),
        window_end: ms(r.get(9)?),
        restarts: r.get(10)?,
        // The relay charges by funded periods, not by launch (docs/decisions.md).
        charged: Quote::default(),
        created_at: ms(r.get(11)?),
        changed_at: ms(r.get(12)?),
        silent_since: r.get::<_, Option<i64>>(13)?.map(ms),
        reason,
    })
}

fn keyed_row(r: &Row<'_>) -> rusqlite::Result<(i64, Execution)> {
    Ok((r.get(16)?, execution_row(r)?))
}

impl SchedulingRows for SqliteTransaction<'_> {
    fn deployment_key(&mut self, id: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.conn.query_row("SELECT rowid FROM deployments WHERE id = ?1", [id], |r| r.get(0)).optional()?)
    }

    fn deployment_by_key(&mut self, key: i64) -> Result<Option<Deployment>, StoreError> {
        let sql = format!("SELECT {DEPLOYMENT_COLUMNS} FROM deployments WHERE rowid = ?1");
        Ok(self.conn.query_row(&sql, [key], deployment_row).optional()?)
    }

    fn due_deployments(&mut self, now: i64, limit: u32) -> Result<Vec<i64>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT rowid FROM deployments WHERE exec_next_at IS NOT NULL AND exec_next_at <= ?1 \
             ORDER BY exec_next_at LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![now, limit], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn next_due_deployment(&mut self) -> Result<Option<i64>, StoreError> {
        Ok(self.conn.query_row(
            "SELECT MIN(exec_next_at) FROM deployments WHERE exec_next_at IS NOT NULL",
            [],
            |r| r.get(0),
        )?)
    }

    fn activated(&mut self, key: i64) -> Result<(u64, i64), StoreError> {
        Ok(self.conn.query_row(
            "SELECT exec_activated_version, exec_activated_at FROM deployments WHERE rowid = ?1",
            [key],
            |r| Ok((ms(r.get(0)?), r.get(1)?)),
        )?)
    }

    fn set_activated(&mut self, key: i64, version: u64, at: i64) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE deployments SET exec_activated_version = ?2, exec_activated_at = ?3 WHERE rowid = ?1",
            params![key, int(version), at],
        )?;
        Ok(())
    }

    fn set_schedule(&mut self, key: i64, next_at: Option<i64>, blocked: Option<&Reason>) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE deployments SET exec_next_at = ?2, exec_blocked_code = ?3, exec_blocked_message = ?4 \
             WHERE rowid = ?1",
            params![key, next_at, blocked.map(|r| &r.code), blocked.map(|r| &r.message)],
        )?;
        Ok(())
    }

    fn blocked(&mut self, deployment_id: &str) -> Result<Option<Reason>, StoreError> {
        let row = self
            .conn
            .query_row(
                "SELECT exec_blocked_code, exec_blocked_message FROM deployments WHERE id = ?1",
                [deployment_id],
                |r| Ok((r.get::<_, Option<String>>(0)?, r.get::<_, Option<String>>(1)?)),
            )
            .optional()?;
        Ok(row.and_then(|(code, message)| Some(Reason { code: code?, message: message.unwrap_or_default() })))
    }

    fn wake(&mut self, deployment_id: &str, at: i64) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE deployments SET exec_next_at = MIN(COALESCE(exec_next_at, ?2), ?2) WHERE id = ?1",
            params![deployment_id, at],
        )?;
        Ok(())
    }

    fn scheduled(&mut self, key: i64, active: u64) -> Result<Vec<Execution>, StoreError> {
        // The newest generation of a version up to the active one too: after a withdrawn
        // successor, the serving generation's ending must stay in view (review finding).
        let sql = format!(
            "SELECT e.{cols} FROM executions e JOIN deployments d ON d.id = e.deployment_id
             WHERE d.rowid = ?1
               AND (e.state IN {LIVE}
                    OR e.generation = (SELECT MAX(n.generation) FROM executions n
                                       WHERE n.deployment_id = e.deployment_id AND n.slot = e.slot)
                    OR e.generation = (SELECT MAX(n.generation) FROM executions n
                                       WHERE n.deployment_id = e.deployment_id AND n.slot = e.slot
                                         AND n.policy_version <= ?2))
             ORDER BY e.id",
            cols = COLUMNS.replace(", ", ", e.")
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![key, int(active)], execution_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn scheduled_by_id(&mut self, execution_id: &str) -> Result<Option<(i64, Execution)>, StoreError> {
        let sql = format!(
            "SELECT e.{cols}, d.rowid FROM executions e JOIN deployments d ON d.id = e.deployment_id
             WHERE e.execution_id = ?1",
            cols = COLUMNS.replace(", ", ", e.")
        );
        Ok(self.conn.query_row(&sql, [execution_id], keyed_row).optional()?)
    }

    fn live_scheduled(&mut self) -> Result<Vec<(i64, Execution)>, StoreError> {
        let sql = format!(
            "SELECT e.{cols}, d.rowid FROM executions e JOIN deployments d ON d.id = e.deployment_id
             WHERE e.state IN {LIVE} ORDER BY e.id",
            cols = COLUMNS.replace(", ", ", e.")
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([], keyed_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn insert_scheduled(&mut self, key: i64, e: &Execution) -> Result<i64, StoreError> {
        let reason = e.reason.as_ref();
        self.conn.execute(
            "INSERT INTO executions (deployment_id, execution_id, slot, generation, attempt, policy_version, state,
                 processor_id, window_start, window_end, restarts, created_at, changed_at, silent_since,
                 reason_code, reason_message)
             SELECT id, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16
             FROM deployments WHERE rowid = ?1",
            params![
                key,
                e.execution_id,
                e.slot,
                int(e.generation),
                e.attempt,
                int(e.policy_version),
                e.state.as_str(),
                e.processor_id,
                int(e.window_start),
                int(e.window_end),
                e.restarts,
                int(e.created_at),
                int(e.changed_at),
                e.silent_since.map(int),
                reason.map(|r| &r.code),
                reason.map(|r| &r.message),
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    fn update_scheduled(&mut self, e: &Execution) -> Result<(), StoreError> {
        let reason = e.reason.as_ref();
        self.conn.execute(
            "UPDATE executions SET state = ?2, processor_id = ?3, restarts = ?4, changed_at = ?5, silent_since = ?6,
                 reason_code = ?7, reason_message = ?8, policy_version = ?9
             WHERE id = ?1",
            params![
                e.key,
                e.state.as_str(),
                e.processor_id,
                e.restarts,
                int(e.changed_at),
                e.silent_since.map(int),
                reason.map(|r| &r.code),
                reason.map(|r| &r.message),
                int(e.policy_version),
            ],
        )?;
        Ok(())
    }
}
