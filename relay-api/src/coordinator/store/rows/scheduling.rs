//! The scheduler's records of the deployments (migration 0008). A deployment's scheduler key
//! is its row key ([`Sql::ROW_KEY`]).

use svc_execution::{ExecState, Execution, Quote, Reason};

use super::columns::{DEPLOYMENT_COLUMNS, deployment_row};
use super::executions::{LIVE, reason_of};
use crate::coordinator::model::Deployment;
use crate::coordinator::store::StoreError;
use crate::coordinator::store::backend::SchedulingRows;
use crate::coordinator::store::sql::{Sql, SqlRow, params};

const COLUMNS: &str = "id, execution_id, slot, generation, attempt, policy_version, state, processor_id, \
     window_start, window_end, restarts, created_at, changed_at, silent_since, reason_code, reason_message";

fn ms(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn execution_row(r: &SqlRow) -> Result<Execution, StoreError> {
    let slot = r.i64(2)?;
    Ok(Execution {
        key: r.i64(0)?,
        execution_id: r.text(1)?,
        slot: u16::try_from(slot)
            .map_err(|_| StoreError::Backend(format!("a stored execution's slot {slot} is beyond 65535").into()))?,
        generation: ms(r.i64(3)?),
        attempt: r.u32(4)?,
        policy_version: ms(r.i64(5)?),
        state: r.spelled(6, ExecState::parse)?,
        processor_id: r.opt_text(7)?,
        window_start: ms(r.i64(8)?),
        window_end: ms(r.i64(9)?),
        restarts: r.u32(10)?,
        // The relay charges by funded periods, not by launch (docs/decisions.md).
        charged: Quote::default(),
        created_at: ms(r.i64(11)?),
        changed_at: ms(r.i64(12)?),
        silent_since: r.opt_i64(13)?.map(ms),
        reason: reason_of(r, 14, 15)?,
    })
}

fn keyed_row(r: &SqlRow) -> Result<(i64, Execution), StoreError> {
    Ok((r.i64(16)?, execution_row(r)?))
}

/// The execution columns, each prefixed `e.`.
fn e_columns() -> String {
    format!("e.{}", COLUMNS.replace(", ", ", e."))
}

impl<T: Sql> SchedulingRows for T {
    fn deployment_key(&mut self, id: &str) -> Result<Option<i64>, StoreError> {
        let sql = format!("SELECT {} FROM deployments WHERE id = ?1", T::ROW_KEY);
        Ok(self.query_opt(&sql, params![id])?.map(|r| r.i64(0)).transpose()?)
    }

    fn deployment_by_key(&mut self, key: i64) -> Result<Option<Deployment>, StoreError> {
        let sql = format!("SELECT {DEPLOYMENT_COLUMNS} FROM deployments WHERE {} = ?1", T::ROW_KEY);
        self.query_opt(&sql, params![key])?.as_ref().map(deployment_row).transpose()
    }

    fn due_deployments(&mut self, now: i64, limit: u32) -> Result<Vec<i64>, StoreError> {
        let sql = format!(
            "SELECT {} FROM deployments WHERE exec_next_at IS NOT NULL AND exec_next_at <= ?1 \
             ORDER BY exec_next_at LIMIT ?2",
            T::ROW_KEY
        );
        Ok(self.query(&sql, params![now, limit])?.iter().map(|r| r.i64(0)).collect::<Result<_, _>>()?)
    }

    fn next_due_deployment(&mut self) -> Result<Option<i64>, StoreError> {
        Ok(self
            .query_one("SELECT MIN(exec_next_at) FROM deployments WHERE exec_next_at IS NOT NULL", &[])?
            .opt_i64(0)?)
    }

    fn activated(&mut self, key: i64) -> Result<(u64, i64), StoreError> {
        let sql =
            format!("SELECT exec_activated_version, exec_activated_at FROM deployments WHERE {} = ?1", T::ROW_KEY);
        let r = self.query_one(&sql, params![key])?;
        Ok((ms(r.i64(0)?), r.i64(1)?))
    }

    fn set_activated(&mut self, key: i64, version: u64, at: i64) -> Result<(), StoreError> {
        let sql = format!(
            "UPDATE deployments SET exec_activated_version = ?2, exec_activated_at = ?3 WHERE {} = ?1",
            T::ROW_KEY
        );
        self.execute(&sql, params![key, int(version), at])?;
        Ok(())
    }

    fn set_schedule(&mut self, key: i64, next_at: Option<i64>, blocked: Option<&Reason>) -> Result<(), StoreError> {
        let sql = format!(
            "UPDATE deployments SET exec_next_at = ?2, exec_blocked_code = ?3, exec_blocked_message = ?4 \
             WHERE {} = ?1",
            T::ROW_KEY
        );
        self.execute(&sql, params![key, next_at, blocked.map(|r| &r.code), blocked.map(|r| &r.message)])?;
        Ok(())
    }

    fn blocked(&mut self, deployment_id: &str) -> Result<Option<Reason>, StoreError> {
        let row = self.query_opt(
            "SELECT exec_blocked_code, exec_blocked_message FROM deployments WHERE id = ?1",
            params![deployment_id],
        )?;
        Ok(row.as_ref().map(|r| reason_of(r, 0, 1)).transpose()?.flatten())
    }

    fn wake(&mut self, deployment_id: &str, at: i64) -> Result<(), StoreError> {
        // The earlier of the two (no scalar MIN in PostgreSQL, no LEAST in SQLite).
        self.execute(
            "UPDATE deployments SET exec_next_at = CASE WHEN exec_next_at IS NULL OR exec_next_at > ?2 THEN ?2 \
             ELSE exec_next_at END WHERE id = ?1",
            params![deployment_id, at],
        )?;
        Ok(())
    }

    fn scheduled(&mut self, key: i64, active: u64) -> Result<Vec<Execution>, StoreError> {
        // The newest generation of a version up to the active one too: after a withdrawn
        // successor, the serving generation's ending must stay in view (review finding).
        let sql = format!(
            "SELECT {cols} FROM executions e JOIN deployments d ON d.id = e.deployment_id
             WHERE d.{key} = ?1
               AND (e.state IN {LIVE}
                    OR e.generation = (SELECT MAX(n.generation) FROM executions n
                                       WHERE n.deployment_id = e.deployment_id AND n.slot = e.slot)
                    OR e.generation = (SELECT MAX(n.generation) FROM executions n
                                       WHERE n.deployment_id = e.deployment_id AND n.slot = e.slot
                                         AND n.policy_version <= ?2))
             ORDER BY e.id",
            cols = e_columns(),
            key = T::ROW_KEY
        );
        self.query(&sql, params![key, int(active)])?.iter().map(execution_row).collect()
    }

    fn scheduled_by_id(&mut self, execution_id: &str) -> Result<Option<(i64, Execution)>, StoreError> {
        let sql = format!(
            "SELECT {cols}, d.{key} FROM executions e JOIN deployments d ON d.id = e.deployment_id
             WHERE e.execution_id = ?1",
            cols = e_columns(),
            key = T::ROW_KEY
        );
        self.query_opt(&sql, params![execution_id])?.as_ref().map(keyed_row).transpose()
    }

    fn live_scheduled(&mut self) -> Result<Vec<(i64, Execution)>, StoreError> {
        let sql = format!(
            "SELECT {cols}, d.{key} FROM executions e JOIN deployments d ON d.id = e.deployment_id
             WHERE e.state IN {LIVE} ORDER BY e.id",
            cols = e_columns(),
            key = T::ROW_KEY
        );
        self.query(&sql, &[])?.iter().map(keyed_row).collect()
    }

    fn insert_scheduled(&mut self, key: i64, e: &Execution) -> Result<i64, StoreError> {
        let reason = e.reason.as_ref();
        // Parameters in a SELECT list have no column to take their type from: cast.
        let sql = format!(
            "INSERT INTO executions (deployment_id, execution_id, slot, generation, attempt, policy_version, state,
                 processor_id, window_start, window_end, restarts, created_at, changed_at, silent_since,
                 reason_code, reason_message)
             SELECT id, CAST(?2 AS TEXT), CAST(?3 AS BIGINT), CAST(?4 AS BIGINT), CAST(?5 AS BIGINT),
                 CAST(?6 AS BIGINT), CAST(?7 AS TEXT), CAST(?8 AS TEXT), CAST(?9 AS BIGINT), CAST(?10 AS BIGINT),
                 CAST(?11 AS BIGINT), CAST(?12 AS BIGINT), CAST(?13 AS BIGINT), CAST(?14 AS BIGINT),
                 CAST(?15 AS TEXT), CAST(?16 AS TEXT)
             FROM deployments WHERE {} = ?1 RETURNING id",
            T::ROW_KEY
        );
        Ok(self
            .query_one(
                &sql,
                params![
                    key,
                    &e.execution_id,
                    i64::from(e.slot),
                    int(e.generation),
                    e.attempt,
                    int(e.policy_version),
                    e.state.as_str(),
                    e.processor_id.as_ref(),
                    int(e.window_start),
                    int(e.window_end),
                    e.restarts,
                    int(e.created_at),
                    int(e.changed_at),
                    e.silent_since.map(int),
                    reason.map(|r| &r.code),
                    reason.map(|r| &r.message),
                ],
            )?
            .i64(0)?)
    }

    fn update_scheduled(&mut self, e: &Execution) -> Result<(), StoreError> {
        let reason = e.reason.as_ref();
        self.execute(
            "UPDATE executions SET state = ?2, processor_id = ?3, restarts = ?4, changed_at = ?5, silent_since = ?6,
                 reason_code = ?7, reason_message = ?8, policy_version = ?9
             WHERE id = ?1",
            params![
                e.key,
                e.state.as_str(),
                e.processor_id.as_ref(),
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
