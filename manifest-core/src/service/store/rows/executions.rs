//! The scheduler's rows: executions, their transitions, the spend ledger and each
//! application's scheduling state. Each [`ExecutionTx`] is one write transaction, like the
//! publication's writes, so a decision and its records commit together.

use std::collections::{BTreeMap, BTreeSet};

use svc_execution::executor::{ExecutionTx, StoreFailure};
use svc_execution::record::Charge;
use svc_execution::{AppKey, AppStatus, AppView, ExecKey, ExecState, Execution, Millis, Quote, Reason, Workload};
use svc_sql::{Sql, SqlError, SqlRow, params};

use super::{Tx, VERSION_COLUMNS, int, version_row};
use crate::plan;
use crate::service::store::{ExecutionSummary, PolicyVersion, Status};

fn failure(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StoreFailure {
    StoreFailure(e.into())
}

const EXECUTION_COLUMNS: &str = "id, execution_id, slot, generation, attempt, policy_version, state, processor_id, \
     window_start, window_end, restarts, charged_micros, charged_reward_planck, charged_fee_planck, created_at, \
     changed_at, silent_since, reason_code, reason_message";

/// The states of a live execution, as SQL.
const LIVE: &str = "('launching', 'running', 'ready', 'restarting', 'stopping')";

/// An execution from a row of [`EXECUTION_COLUMNS`].
fn execution_row(r: &SqlRow) -> Result<Execution, SqlError> {
    let code = r.opt_text(17)?;
    let message = r.opt_text(18)?;
    Ok(Execution {
        key: r.i64(0)?,
        execution_id: r.text(1)?,
        slot: r.u16(2)?,
        generation: r.u64(3)?,
        attempt: r.u32(4)?,
        policy_version: r.u64(5)?,
        state: r.spelled(6, ExecState::parse)?,
        processor_id: r.opt_text(7)?,
        window_start: r.u64(8)?,
        window_end: r.u64(9)?,
        restarts: r.u32(10)?,
        charged: Quote {
            service_credit_micros: r.amount(11)?,
            reward_planck: r.amount(12)?,
            native_fee_planck: r.amount(13)?,
        },
        created_at: r.u64(14)?,
        changed_at: r.u64(15)?,
        silent_since: r.opt_u64(16)?,
        reason: code.map(|code| Reason { code, message: message.unwrap_or_default() }),
    })
}

/// An execution and its application, from [`EXECUTION_COLUMNS`] then `application_id`.
fn owned_execution_row(r: &SqlRow) -> Result<(AppKey, Execution), SqlError> {
    Ok((r.i64(19)?, execution_row(r)?))
}

/// An application's live executions and every attempt of each slot's newest generation,
/// oldest first: what the scheduler decides over and the projection shows.
fn current(sql: &mut impl Sql, app: AppKey) -> Result<Vec<Execution>, SqlError> {
    let rows = sql.query(
        &format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions e
             WHERE application_id = ?1
               AND (state IN {LIVE}
                    OR generation = (SELECT MAX(generation) FROM executions n
                                     WHERE n.application_id = e.application_id AND n.slot = e.slot))
             ORDER BY id"
        ),
        params![app],
    )?;
    rows.iter().map(execution_row).collect()
}

/// The projection's summary of an application.
pub(super) fn summary(sql: &mut impl Sql, app: AppKey) -> Result<ExecutionSummary, SqlError> {
    let row = sql.query_one(
        "SELECT exec_next_at, exec_blocked_code, exec_blocked_message FROM applications WHERE id = ?1",
        params![app],
    )?;
    let blocked = row.opt_text(1)?.map(|code| Ok::<_, SqlError>((code, row.opt_text(2)?.unwrap_or_default())));
    Ok(ExecutionSummary { next_at: row.opt_u64(0)?, blocked: blocked.transpose()?, current: current(sql, app)? })
}

/// One page of an application's executions, newest first.
pub(super) fn page(
    sql: &mut impl Sql,
    app: AppKey,
    before: Option<i64>,
    limit: usize,
) -> Result<Vec<Execution>, SqlError> {
    let rows = sql.query(
        &format!(
            "SELECT {EXECUTION_COLUMNS} FROM executions WHERE application_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3"
        ),
        params![app, before.unwrap_or(i64::MAX), int(limit as u64)],
    )?;
    rows.iter().map(execution_row).collect()
}

impl<S: Sql> Tx<S> {
    fn active_version(&mut self, app: AppKey) -> Result<Option<PolicyVersion>, SqlError> {
        // [`VERSION_COLUMNS`], prefixed.
        const ACTIVE: &str = "SELECT v.version, v.schema_version, v.authored_digest, v.policy_digest, v.policy, \
             v.authored, v.jobs, v.execution, v.published_by
             FROM applications a JOIN policy_versions v
               ON v.application_id = a.id AND v.version = a.active_pointer_version
             WHERE a.id = ?1";
        self.sql().query_opt(ACTIVE, params![app])?.as_ref().map(version_row).transpose()
    }

    /// The organization's spend authority per job, and the application's secrets that have a
    /// value.
    fn context(&mut self, app: AppKey) -> Result<(Option<u64>, BTreeSet<String>), SqlError> {
        let authority = self
            .sql()
            .query_one(
                "SELECT o.spend_authority_micros FROM applications a JOIN organizations o ON o.id = a.organization_id
                 WHERE a.id = ?1",
                params![app],
            )?
            .opt_u64(0)?;
        let valued = self
            .sql()
            .query(
                "SELECT p.secret_id FROM provisioned_secrets p JOIN applications a
                   ON a.organization_id = p.organization_id AND a.application_id = p.application_id
                 WHERE a.id = ?1 AND p.value IS NOT NULL",
                params![app],
            )?
            .iter()
            .map(|r| r.text(0))
            .collect::<Result<_, _>>()?;
        Ok((authority, valued))
    }

    fn view(&mut self, app: AppKey) -> Result<Option<AppView>, StoreFailure> {
        let Some(row) = self
            .sql()
            .query_opt(
                "SELECT application_uid, status, settled, exec_activated_version, exec_activated_at, rearmed_version
                 FROM applications WHERE id = ?1",
                params![app],
            )
            .map_err(failure)?
        else {
            return Ok(None);
        };
        let status = match row.spelled(1, Status::parse).map_err(failure)? {
            Status::Active => AppStatus::Active,
            Status::Paused => AppStatus::Paused,
            Status::Disabled => AppStatus::Disabled,
        };
        let plan = match self.active_version(app).map_err(failure)? {
            Some(version) => {
                let (authority, valued) = self.context(app).map_err(failure)?;
                Some(plan::plan_in_context(version.published(), authority, &valued).map_err(failure)?)
            }
            None => None,
        };
        let executions = current(self.sql(), app).map_err(failure)?;
        // Charges within the rate window of the newest charge (a superset of what any check at
        // a later time needs), and every charge of each slot's newest generation, each net of
        // the refunds recorded against its execution (a refused launch's refunds it all, a gap
        // the service's crash left unserved part of it). A refund is recorded under its
        // execution's application, so looking for it among the application's entries (an
        // index) finds the same one as searching the whole ledger. Amounts are decimal text,
        // so they are subtracted here rather than summed in SQL.
        let window = plan.as_ref().and_then(|p| p.spend.rate).map_or(0, |r| r.window_ms);
        const CHARGED: &str = "application_id = ?1 AND refund = 0
                   AND (at > (SELECT MAX(at) FROM spend_ledger m WHERE m.application_id = ?1) - ?2
                        OR generation = (SELECT MAX(generation) FROM executions n
                                         WHERE n.application_id = ?1 AND n.slot = l.slot))";
        let quote = |r: &SqlRow, at: usize| -> Result<Quote, SqlError> {
            Ok(Quote {
                service_credit_micros: r.amount(at)?,
                reward_planck: r.amount(at + 1)?,
                native_fee_planck: r.amount(at + 2)?,
            })
        };
        let mut refunds: BTreeMap<i64, Quote> = BTreeMap::new();
        for r in self
            .sql()
            .query(
                &format!(
                    "SELECT execution, micros, reward_planck, fee_planck FROM spend_ledger r
                     WHERE r.application_id = ?1 AND r.refund = 1
                       AND r.execution IN (SELECT l.execution FROM spend_ledger l WHERE {CHARGED})"
                ),
                params![app, int(window)],
            )
            .map_err(failure)?
            .iter()
        {
            let (execution, amount) = (r.i64(0).map_err(failure)?, quote(r, 1).map_err(failure)?);
            let total = refunds.entry(execution).or_default();
            total.service_credit_micros = total.service_credit_micros.saturating_add(amount.service_credit_micros);
            total.reward_planck = total.reward_planck.saturating_add(amount.reward_planck);
            total.native_fee_planck = total.native_fee_planck.saturating_add(amount.native_fee_planck);
        }
        let charges = self
            .sql()
            .query(
                &format!(
                    "SELECT slot, generation, at, micros, reward_planck, fee_planck, execution FROM spend_ledger l
                     WHERE {CHARGED}"
                ),
                params![app, int(window)],
            )
            .map_err(failure)?
            .iter()
            .map(|r| {
                let refunded = refunds.get(&r.i64(6)?).copied().unwrap_or_default();
                Ok(Charge {
                    slot: r.u16(0)?,
                    generation: r.u64(1)?,
                    at: r.u64(2)?,
                    quote: quote(r, 3)?.less(&refunded),
                })
            })
            .filter(|c| !matches!(c, Ok(c) if c.quote == Quote::default()))
            .collect::<Result<Vec<_>, SqlError>>()
            .map_err(failure)?;
        let read =
            || -> Result<_, SqlError> { Ok((row.text(0)?, row.bool(2)?, row.u64(3)?, row.u64(4)?, row.u64(5)?)) };
        let (uid, settled, activated_version, activated_at, rearmed_version) = read().map_err(failure)?;
        Ok(Some(AppView {
            key: app,
            uid,
            status,
            // Publication has pause and disable; nothing halts a published application.
            halt: None,
            settled,
            rearmed_version,
            plan,
            activated_version,
            activated_at,
            executions,
            charges,
        }))
    }

    /// Charges (or refunds) an execution's quote in the ledger.
    fn ledger(&mut self, app: AppKey, key: ExecKey, e: &Execution, at: Millis, refund: bool) -> Result<(), SqlError> {
        self.sql().execute(
            "INSERT INTO spend_ledger (application_id, execution, slot, generation, at, micros, reward_planck,
                 fee_planck, refund)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                app,
                key,
                e.slot,
                int(e.generation),
                int(at),
                &e.charged.service_credit_micros.to_string(),
                &e.charged.reward_planck.to_string(),
                &e.charged.native_fee_planck.to_string(),
                refund,
            ],
        )?;
        Ok(())
    }
}

impl<S: Sql> ExecutionTx for Tx<S> {
    fn due(&mut self, now: Millis, limit: usize) -> Result<Vec<AppKey>, StoreFailure> {
        let rows = self
            .sql()
            .query(
                "SELECT id FROM applications WHERE exec_next_at IS NOT NULL AND exec_next_at <= ?1
                 ORDER BY exec_next_at LIMIT ?2",
                params![int(now), int(limit as u64)],
            )
            .map_err(failure)?;
        rows.iter().map(|r| r.i64(0)).collect::<Result<_, _>>().map_err(failure)
    }

    fn next_due(&mut self) -> Result<Option<Millis>, StoreFailure> {
        self.sql()
            .query_one("SELECT MIN(exec_next_at) FROM applications WHERE exec_next_at IS NOT NULL", &[])
            .and_then(|r| r.opt_u64(0))
            .map_err(failure)
    }

    fn app(&mut self, app: AppKey) -> Result<Option<AppView>, StoreFailure> {
        self.view(app)
    }

    fn record_output(&mut self, batch: &svc_execution::output::OutputBatch) -> Result<(), StoreFailure> {
        super::output::record(self.sql(), batch).map_err(failure)
    }

    fn find(&mut self, execution_id: &str) -> Result<Option<(AppKey, Execution)>, StoreFailure> {
        let sql = format!("SELECT {EXECUTION_COLUMNS}, application_id FROM executions WHERE execution_id = ?1");
        let row = self.sql().query_opt(&sql, params![execution_id]).map_err(failure)?;
        row.as_ref().map(owned_execution_row).transpose().map_err(failure)
    }

    fn live(&mut self) -> Result<Vec<(AppKey, Execution)>, StoreFailure> {
        let sql =
            format!("SELECT {EXECUTION_COLUMNS}, application_id FROM executions WHERE state IN {LIVE} ORDER BY id");
        let rows = self.sql().query(&sql, &[]).map_err(failure)?;
        rows.iter().map(owned_execution_row).collect::<Result<_, _>>().map_err(failure)
    }

    fn workload(&mut self, app: AppKey, policy_version: u64) -> Result<Workload, StoreFailure> {
        let sql = format!("SELECT {VERSION_COLUMNS} FROM policy_versions WHERE application_id = ?1 AND version = ?2");
        let version = self
            .sql()
            .query_opt(&sql, params![app, int(policy_version)])
            .and_then(|r| r.as_ref().map(version_row).transpose())
            .map_err(failure)?
            .ok_or_else(|| failure(format!("application {app} has no policy version {policy_version}")))?;
        // Opened here, for the job alone: a value that does not open fails the launch.
        let secrets: BTreeMap<String, Vec<u8>> = self.open_secrets(app).map_err(failure)?;
        plan::workload(version.published(), &secrets).map_err(failure)
    }

    fn insert(&mut self, app: AppKey, e: &Execution) -> Result<ExecKey, StoreFailure> {
        let key = self
            .sql()
            .query_one(
                "INSERT INTO executions (application_id, execution_id, slot, generation, attempt, policy_version,
                     state, processor_id, window_start, window_end, restarts, charged_micros, charged_reward_planck,
                     charged_fee_planck, created_at, changed_at, silent_since, reason_code, reason_message)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)
                 RETURNING id",
                params![
                    app,
                    &e.execution_id,
                    e.slot,
                    int(e.generation),
                    e.attempt,
                    int(e.policy_version),
                    e.state.as_str(),
                    e.processor_id.as_ref(),
                    int(e.window_start),
                    int(e.window_end),
                    e.restarts,
                    &e.charged.service_credit_micros.to_string(),
                    &e.charged.reward_planck.to_string(),
                    &e.charged.native_fee_planck.to_string(),
                    int(e.created_at),
                    int(e.changed_at),
                    e.silent_since.map(int),
                    e.reason.as_ref().map(|r| &r.code),
                    e.reason.as_ref().map(|r| &r.message),
                ],
            )
            .and_then(|r| r.i64(0))
            .map_err(failure)?;
        // A relaunch its window's charge covers (charged nothing) makes no entry.
        if e.state == ExecState::Launching && e.charged != Quote::default() {
            self.ledger(app, key, e, e.created_at, false).map_err(failure)?;
        }
        Ok(key)
    }

    fn transition(&mut self, _app: AppKey, e: &Execution, from: ExecState) -> Result<(), StoreFailure> {
        self.sql()
            .execute(
                "UPDATE executions SET state = ?2, processor_id = ?3, restarts = ?4, changed_at = ?5,
                     silent_since = ?6, reason_code = ?7, reason_message = ?8
                 WHERE id = ?1",
                params![
                    e.key,
                    e.state.as_str(),
                    e.processor_id.as_ref(),
                    e.restarts,
                    int(e.changed_at),
                    e.silent_since.map(int),
                    e.reason.as_ref().map(|r| &r.code),
                    e.reason.as_ref().map(|r| &r.message),
                ],
            )
            .map_err(failure)?;
        if from != e.state {
            self.sql()
                .execute(
                    "INSERT INTO execution_transitions (execution, at, from_state, to_state, reason_code)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        e.key,
                        int(e.changed_at),
                        from.as_str(),
                        e.state.as_str(),
                        e.reason.as_ref().map(|r| &r.code)
                    ],
                )
                .map_err(failure)?;
        }
        Ok(())
    }

    fn refund(&mut self, app: AppKey, e: &Execution, at: Millis) -> Result<(), StoreFailure> {
        // What remains of its charge: a stretch of it may have been refunded already (a launch
        // in flight at a crash, refused when sent again). Amounts are decimal text: summed here.
        let rows = self
            .sql()
            .query(
                "SELECT micros, reward_planck, fee_planck FROM spend_ledger
                 WHERE application_id = ?1 AND execution = ?2 AND refund = 1",
                params![app, e.key],
            )
            .map_err(failure)?;
        let mut remaining = e.charged;
        for r in &rows {
            let refunded = Quote {
                service_credit_micros: r.amount(0).map_err(failure)?,
                reward_planck: r.amount(1).map_err(failure)?,
                native_fee_planck: r.amount(2).map_err(failure)?,
            };
            remaining = remaining.less(&refunded);
        }
        if remaining == Quote::default() {
            return Ok(());
        }
        self.ledger(app, e.key, &Execution { charged: remaining, ..e.clone() }, at, true).map_err(failure)
    }

    fn refund_unserved(
        &mut self,
        app: AppKey,
        paid: &Execution,
        from: Millis,
        to: Millis,
        amount: &Quote,
        at: Millis,
    ) -> Result<(), StoreFailure> {
        // Once per stretch (`spend_ledger_unserved`): asked again, nothing is recorded.
        self.sql()
            .execute(
                "INSERT INTO spend_ledger (application_id, execution, slot, generation, at, micros, reward_planck,
                     fee_planck, refund, unserved_from, unserved_to)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 1, ?9, ?10)
                 ON CONFLICT DO NOTHING",
                params![
                    app,
                    paid.key,
                    paid.slot,
                    int(paid.generation),
                    int(at),
                    &amount.service_credit_micros.to_string(),
                    &amount.reward_planck.to_string(),
                    &amount.native_fee_planck.to_string(),
                    int(from),
                    int(to),
                ],
            )
            .map_err(failure)?;
        Ok(())
    }

    fn heartbeat(&mut self, at: Millis) -> Result<(), StoreFailure> {
        self.sql()
            .execute(
                "INSERT INTO scheduler_heartbeat (id, at) VALUES (1, ?1)
                 ON CONFLICT (id) DO UPDATE SET at = excluded.at",
                params![int(at)],
            )
            .map_err(failure)?;
        Ok(())
    }

    fn last_alive(&mut self) -> Result<Option<Millis>, StoreFailure> {
        let row = self.sql().query_opt("SELECT at FROM scheduler_heartbeat WHERE id = 1", &[]).map_err(failure)?;
        row.map(|r| r.u64(0)).transpose().map_err(failure)
    }

    fn schedule(&mut self, app: AppKey, next_at: Option<Millis>, blocked: Option<&Reason>) -> Result<(), StoreFailure> {
        self.sql()
            .execute(
                "UPDATE applications SET exec_next_at = ?2, exec_blocked_code = ?3, exec_blocked_message = ?4
                 WHERE id = ?1",
                params![app, next_at.map(int), blocked.map(|b| &b.code), blocked.map(|b| &b.message)],
            )
            .map_err(failure)?;
        Ok(())
    }

    fn activate(&mut self, app: AppKey, version: u64, at: Millis) -> Result<(), StoreFailure> {
        self.sql()
            .execute(
                "UPDATE applications SET exec_activated_version = ?2, exec_activated_at = ?3 WHERE id = ?1",
                params![app, int(version), int(at)],
            )
            .map_err(failure)?;
        Ok(())
    }

    fn settle(&mut self, app: AppKey, at: Millis) -> Result<(), StoreFailure> {
        self.sql()
            .execute("UPDATE applications SET settled = 1, settled_at = ?2 WHERE id = ?1", params![app, int(at)])
            .map_err(failure)?;
        // The application's activity says so, as for every change of its status.
        self.sql()
            .execute(
                "INSERT INTO activity (application_id, at, actor, action, policy_version, status, reason)
                 SELECT id, CAST(?2 AS TEXT), 'scheduler', 'application_settled', active_pointer_version, status, NULL
                 FROM applications WHERE id = ?1",
                params![app, &crate::projection::rfc3339_ms(at)],
            )
            .map_err(failure)?;
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreFailure> {
        self.sql().commit_tx().map_err(failure)
    }
}
