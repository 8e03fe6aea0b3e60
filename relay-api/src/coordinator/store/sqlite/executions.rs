//! The deployments' jobs as executions, in SQL.

use rusqlite::{OptionalExtension, params};
use svc_execution::{ExecState, Reason};

use super::SqliteTransaction;
use crate::coordinator::store::backend::ExecutionRows;
use crate::coordinator::store::{ExecutionRecord, StoreError};

const COLUMNS: &str = "execution_id, generation, attempt, state, processor_id, created_at, changed_at, \
                       reason_code, reason_message, policy_version, restarts";

fn record_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<ExecutionRecord> {
    let state: String = row.get(3)?;
    let state = ExecState::parse(&state).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, format!("state {state:?}").into())
    })?;
    let reason = match (row.get::<_, Option<String>>(7)?, row.get::<_, Option<String>>(8)?) {
        (Some(code), message) => Some(Reason { code, message: message.unwrap_or_default() }),
        (None, _) => None,
    };
    Ok(ExecutionRecord {
        execution_id: row.get(0)?,
        generation: row.get(1)?,
        attempt: row.get(2)?,
        state,
        processor_id: row.get(4)?,
        created_at: row.get(5)?,
        changed_at: row.get(6)?,
        reason,
        policy_version: row.get(9)?,
        restarts: row.get(10)?,
    })
}

impl ExecutionRows for SqliteTransaction<'_> {
    fn update_execution(&mut self, record: &ExecutionRecord) -> Result<(), StoreError> {
        let reason = record.reason.as_ref();
        self.conn.execute(
            "UPDATE executions SET state = ?2, processor_id = ?3, changed_at = ?4, reason_code = ?5, \
             reason_message = ?6 WHERE execution_id = ?1",
            params![
                record.execution_id,
                record.state.as_str(),
                record.processor_id,
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
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = stmt.query_map(params![deployment_id, before.unwrap_or(i64::MAX), limit], |r| {
            Ok((r.get(11)?, record_row(r)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn latest_execution(
        &mut self,
        deployment_id: &str,
        generation: u32,
    ) -> Result<Option<ExecutionRecord>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM executions WHERE deployment_id = ?1 AND policy_version = ?2 \
             ORDER BY generation DESC, attempt DESC LIMIT 1"
        );
        Ok(self.conn.query_row(&sql, params![deployment_id, generation], record_row).optional()?)
    }

    fn live_before(&mut self, deployment_id: &str, generation: u32) -> Result<bool, StoreError> {
        Ok(self.conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM executions WHERE deployment_id = ?1 AND policy_version < ?2 \
             AND state IN ('launching', 'running', 'ready', 'restarting', 'stopping'))",
            params![deployment_id, generation],
            |r| r.get(0),
        )?)
    }

    fn live_executions(&mut self) -> Result<Vec<ExecutionRecord>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM executions \
             WHERE state IN ('launching', 'running', 'ready', 'restarting', 'stopping') ORDER BY id"
        );
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([], record_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}
