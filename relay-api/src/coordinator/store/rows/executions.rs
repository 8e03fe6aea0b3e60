//! The deployments' jobs as executions.

use svc_execution::{ExecState, Reason};

use crate::coordinator::store::backend::ExecutionRows;
use crate::coordinator::store::sql::{Sql, SqlRow, params};
use crate::coordinator::store::{ExecutionRecord, StoreError};

const COLUMNS: &str = "execution_id, generation, attempt, state, processor_id, created_at, changed_at, \
                       reason_code, reason_message, policy_version, restarts, slot";

/// What the scheduler calls live.
pub(super) const LIVE: &str = "('launching', 'running', 'ready', 'restarting', 'stopping')";

/// A reason from its code and message columns (none without a code).
pub(super) fn reason_of(row: &SqlRow, code: usize, message: usize) -> Result<Option<Reason>, StoreError> {
    Ok(match (row.opt_text(code)?, row.opt_text(message)?) {
        (Some(code), message) => Some(Reason { code, message: message.unwrap_or_default() }),
        (None, _) => None,
    })
}

fn record_row(row: &SqlRow) -> Result<ExecutionRecord, StoreError> {
    Ok(ExecutionRecord {
        execution_id: row.text(0)?,
        generation: row.u32(1)?,
        attempt: row.u32(2)?,
        state: row.spelled(3, ExecState::parse)?,
        processor_id: row.opt_text(4)?,
        created_at: row.i64(5)?,
        changed_at: row.i64(6)?,
        reason: reason_of(row, 7, 8)?,
        policy_version: row.u32(9)?,
        restarts: row.u32(10)?,
        slot: {
            let slot = row.i64(11)?;
            u16::try_from(slot)
                .map_err(|_| StoreError::Backend(format!("a stored execution's slot {slot} is beyond 65535").into()))?
        },
    })
}

impl<T: Sql> ExecutionRows for T {
    fn update_execution(&mut self, record: &ExecutionRecord) -> Result<(), StoreError> {
        let reason = record.reason.as_ref();
        self.execute(
            "UPDATE executions SET state = ?2, processor_id = ?3, changed_at = ?4, reason_code = ?5, \
             reason_message = ?6 WHERE execution_id = ?1",
            params![
                &record.execution_id,
                record.state.as_str(),
                record.processor_id.as_ref(),
                record.changed_at,
                reason.map(|r| &r.code),
                reason.map(|r| &r.message),
            ],
        )?;
        Ok(())
    }

    fn executions_page(
        &mut self,
        deployment_id: &str,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<(i64, ExecutionRecord)>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS}, id FROM executions WHERE deployment_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3"
        );
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.query(&sql, params![deployment_id, before.unwrap_or(i64::MAX), limit])?
            .iter()
            .map(|r| Ok((r.i64(12)?, record_row(r)?)))
            .collect()
    }

    fn latest_executions(&mut self, deployment_id: &str, generation: u32) -> Result<Vec<ExecutionRecord>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM executions e WHERE deployment_id = ?1 AND policy_version = ?2
               AND NOT EXISTS (SELECT 1 FROM executions n
                               WHERE n.deployment_id = e.deployment_id AND n.slot = e.slot
                                 AND n.policy_version = e.policy_version
                                 AND (n.generation > e.generation
                                      OR n.generation = e.generation AND n.attempt > e.attempt))
             ORDER BY slot"
        );
        self.query(&sql, params![deployment_id, generation])?.iter().map(record_row).collect()
    }

    fn live_before(&mut self, deployment_id: &str, generation: u32) -> Result<bool, StoreError> {
        let sql = format!(
            "SELECT 1 FROM executions WHERE deployment_id = ?1 AND policy_version < ?2 AND state IN {LIVE} LIMIT 1"
        );
        Ok(self.query_opt(&sql, params![deployment_id, generation])?.is_some())
    }

    fn live_executions(&mut self) -> Result<Vec<ExecutionRecord>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM executions WHERE state IN {LIVE} ORDER BY id");
        self.query(&sql, &[])?.iter().map(record_row).collect()
    }
}
