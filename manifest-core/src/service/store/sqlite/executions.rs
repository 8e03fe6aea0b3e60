//! The scheduler's records in the SQLite store: executions, their transitions, the spend
//! ledger and each application's scheduling state (migration 0002). Each
//! [`ExecutionTx`] is one `BEGIN IMMEDIATE` transaction on the writer connection, like the
//! publication's writes, so a decision and its records commit together.

use std::collections::BTreeMap;

use rusqlite::{OptionalExtension, Row, params};
use svc_execution::executor::{ExecutionStore, ExecutionTx, StoreFailure};
use svc_execution::record::Charge;
use svc_execution::{AppKey, AppStatus, AppView, ExecKey, ExecState, Execution, Millis, Quote, Reason, Workload};

use super::{Held, SqliteStore, SqliteTransaction, int, poisoned, run_cached, version_row};
use crate::plan;
use crate::service::store::{PolicyVersion, Status, StoreError};

fn failure(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StoreFailure {
    StoreFailure(e.into())
}

fn sql(e: rusqlite::Error) -> StoreFailure {
    failure(e)
}

const EXECUTION_COLUMNS: &str = "id, execution_id, slot, generation, attempt, policy_version, state, processor_id, \
     window_start, window_end, restarts, charged_micros, charged_reward_planck, charged_fee_planck, created_at, \
     changed_at, silent_since, reason_code, reason_message";

fn ms(n: i64) -> Millis {
    u64::try_from(n).unwrap_or(0)
}

fn amount(text: &str) -> u128 {
    text.parse().unwrap_or(0)
}

/// An execution from a row of [`EXECUTION_COLUMNS`].
pub(crate) fn execution_row(r: &Row<'_>) -> rusqlite::Result<Execution> {
    let state: String = r.get(6)?;
    let code: Option<String> = r.get(17)?;
    let message: Option<String> = r.get(18)?;
    Ok(Execution {
        key: r.get(0)?,
        execution_id: r.get(1)?,
        slot: r.get(2)?,
        generation: ms(r.get(3)?),
        attempt: r.get(4)?,
        policy_version: ms(r.get(5)?),
        state: ExecState::parse(&state).unwrap_or(ExecState::Failed),
        processor_id: r.get(7)?,
        window_start: ms(r.get(8)?),
        window_end: ms(r.get(9)?),
        restarts: r.get(10)?,
        charged: Quote {
            service_credit_micros: amount(&r.get::<_, String>(11)?),
            reward_planck: amount(&r.get::<_, String>(12)?),
            native_fee_planck: amount(&r.get::<_, String>(13)?),
        },
        created_at: ms(r.get(14)?),
        changed_at: ms(r.get(15)?),
        silent_since: r.get::<_, Option<i64>>(16)?.map(ms),
        reason: code.map(|code| Reason { code, message: message.unwrap_or_default() }),
    })
}

/// An application's live executions and every attempt of each slot's newest generation,
/// oldest first: what the scheduler decides over and the projection shows.
fn current(conn: &rusqlite::Connection, app: AppKey) -> rusqlite::Result<Vec<Execution>> {
    let mut s = conn.prepare_cached(&format!(
        "SELECT {EXECUTION_COLUMNS} FROM executions e
         WHERE application_id = ?1
           AND (state IN ('launching', 'running', 'ready', 'restarting', 'stopping')
                OR generation = (SELECT MAX(generation) FROM executions n
                                 WHERE n.application_id = e.application_id AND n.slot = e.slot))
         ORDER BY id"
    ))?;
    s.query_map([app], execution_row)?.collect()
}

/// The projection's summary of an application.
pub(super) fn summary(
    conn: &rusqlite::Connection,
    app: AppKey,
) -> rusqlite::Result<crate::service::store::ExecutionSummary> {
    let (next_at, code, message) = conn
        .prepare_cached("SELECT exec_next_at, exec_blocked_code, exec_blocked_message FROM applications WHERE id = ?1")?
        .query_row([app], |r| {
            Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<String>>(1)?, r.get::<_, Option<String>>(2)?))
        })?;
    let current = current(conn, app)?;
    Ok(crate::service::store::ExecutionSummary {
        next_at: next_at.map(ms),
        blocked: code.map(|c| (c, message.unwrap_or_default())),
        current,
    })
}

/// One page of an application's executions, newest first.
pub(super) fn page(
    conn: &rusqlite::Connection,
    app: AppKey,
    before: Option<i64>,
    limit: usize,
) -> rusqlite::Result<Vec<Execution>> {
    let mut s = conn.prepare_cached(&format!(
        "SELECT {EXECUTION_COLUMNS} FROM executions WHERE application_id = ?1 AND id < ?2 ORDER BY id DESC LIMIT ?3"
    ))?;
    let rows = s.query_map(params![app, before.unwrap_or(i64::MAX), int(limit as u64)], execution_row)?;
    rows.collect()
}

impl ExecutionStore for SqliteStore {
    fn begin(&self) -> Result<Box<dyn ExecutionTx + '_>, StoreFailure> {
        let conn = self.writer.lock().map_err(poisoned).map_err(|e: StoreError| failure(e.to_string()))?;
        conn.execute_batch("BEGIN IMMEDIATE").map_err(sql)?;
        Ok(Box::new(SqliteTransaction { conn: Held::Writer(conn), open: true }))
    }
}

impl SqliteTransaction<'_> {
    fn active_version(&self, app: AppKey) -> Result<Option<PolicyVersion>, StoreFailure> {
        self.conn()
            .prepare_cached(
                "SELECT v.version, v.schema_version, v.authored_digest, v.policy_digest, v.policy, v.authored, v.jobs,
                        v.execution, v.published_by
                 FROM applications a JOIN policy_versions v
                   ON v.application_id = a.id AND v.version = a.active_pointer_version
                 WHERE a.id = ?1",
            )
            .and_then(|mut s| s.query_row([app], version_row).optional())
            .map_err(sql)
    }
}

impl SqliteTransaction<'_> {
    /// The organization's spend authority per job, and the application's secrets that have a
    /// value.
    fn context(&self, app: AppKey) -> Result<(Option<u64>, std::collections::BTreeSet<String>), StoreFailure> {
        let authority = self
            .conn()
            .prepare_cached(
                "SELECT o.spend_authority_micros FROM applications a JOIN organizations o ON o.id = a.organization_id
                 WHERE a.id = ?1",
            )
            .and_then(|mut s| s.query_row([app], |r| r.get::<_, Option<i64>>(0)))
            .map_err(sql)?
            .map(|m| u64::try_from(m).unwrap_or(0));
        let mut s = self
            .conn()
            .prepare_cached(
                "SELECT p.secret_id FROM provisioned_secrets p JOIN applications a
                   ON a.organization_id = p.organization_id AND a.application_id = p.application_id
                 WHERE a.id = ?1 AND p.value IS NOT NULL",
            )
            .map_err(sql)?;
        let valued = s.query_map([app], |r| r.get(0)).map_err(sql)?.collect::<Result<_, _>>().map_err(sql)?;
        Ok((authority, valued))
    }
}

impl ExecutionTx for SqliteTransaction<'_> {
    fn due(&mut self, now: Millis, limit: usize) -> Result<Vec<AppKey>, StoreFailure> {
        let mut s = self
            .conn()
            .prepare_cached(
                "SELECT id FROM applications WHERE exec_next_at IS NOT NULL AND exec_next_at <= ?1
                 ORDER BY exec_next_at LIMIT ?2",
            )
            .map_err(sql)?;
        let rows = s.query_map(params![int(now), int(limit as u64)], |r| r.get(0)).map_err(sql)?;
        rows.collect::<Result<_, _>>().map_err(sql)
    }

    fn next_due(&mut self) -> Result<Option<Millis>, StoreFailure> {
        self.conn()
            .prepare_cached("SELECT MIN(exec_next_at) FROM applications WHERE exec_next_at IS NOT NULL")
            .and_then(|mut s| s.query_row([], |r| r.get::<_, Option<i64>>(0)))
            .map(|t| t.map(ms))
            .map_err(sql)
    }

    fn app(&mut self, app: AppKey) -> Result<Option<AppView>, StoreFailure> {
        let row = self
            .conn()
            .prepare_cached(
                "SELECT application_uid, status, settled, exec_activated_version, exec_activated_at, rearmed_version
                 FROM applications WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([app], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, bool>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, i64>(5)?,
                    ))
                })
                .optional()
            })
            .map_err(sql)?;
        let Some((uid, status, settled, activated_version, activated_at, rearmed)) = row else { return Ok(None) };
        let status = match Status::parse(&status) {
            Some(Status::Active) => AppStatus::Active,
            Some(Status::Paused) => AppStatus::Paused,
            _ => AppStatus::Disabled,
        };
        let plan = match self.active_version(app)? {
            Some(version) => {
                let (authority, valued) = self.context(app)?;
                Some(plan::plan_in_context(version.published(), authority, &valued).map_err(failure)?)
            }
            None => None,
        };
        let executions = current(self.conn(), app).map_err(sql)?;
        // Charges within the rate window of the newest charge (a superset of what any check at
        // a later time needs), and every charge of each slot's newest generation. A refund is
        // recorded under its execution's application, so looking for it among the
        // application's entries (an index) finds the same one as searching the whole ledger.
        let window = plan.as_ref().and_then(|p| p.spend.rate).map_or(0, |r| r.window_ms);
        let charges = {
            let mut s = self
                .conn()
                .prepare_cached(
                    "SELECT slot, generation, at, micros, reward_planck, fee_planck FROM spend_ledger l
                     WHERE application_id = ?1 AND refund = 0
                       AND NOT EXISTS (SELECT 1 FROM spend_ledger r
                                       WHERE r.application_id = ?1 AND r.execution = l.execution AND r.refund = 1)
                       AND (at > (SELECT MAX(at) FROM spend_ledger m WHERE m.application_id = ?1) - ?2
                            OR generation = (SELECT MAX(generation) FROM executions n
                                             WHERE n.application_id = ?1 AND n.slot = l.slot))",
                )
                .map_err(sql)?;
            let rows = s
                .query_map(params![app, int(window)], |r| {
                    Ok(Charge {
                        slot: r.get(0)?,
                        generation: ms(r.get(1)?),
                        at: ms(r.get(2)?),
                        quote: Quote {
                            service_credit_micros: amount(&r.get::<_, String>(3)?),
                            reward_planck: amount(&r.get::<_, String>(4)?),
                            native_fee_planck: amount(&r.get::<_, String>(5)?),
                        },
                    })
                })
                .map_err(sql)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(sql)?
        };
        Ok(Some(AppView {
            key: app,
            uid,
            status,
            // Publication has pause and disable; nothing halts a published application.
            halt: None,
            settled,
            rearmed_version: ms(rearmed),
            plan,
            activated_version: ms(activated_version),
            activated_at: ms(activated_at),
            executions,
            charges,
        }))
    }

    fn find(&mut self, execution_id: &str) -> Result<Option<(AppKey, Execution)>, StoreFailure> {
        self.conn()
            .prepare_cached(&format!(
                "SELECT {EXECUTION_COLUMNS}, application_id FROM executions WHERE execution_id = ?1"
            ))
            .and_then(|mut s| s.query_row([execution_id], |r| Ok((r.get(19)?, execution_row(r)?))).optional())
            .map_err(sql)
    }

    fn live(&mut self) -> Result<Vec<(AppKey, Execution)>, StoreFailure> {
        let mut s = self
            .conn()
            .prepare_cached(&format!(
                "SELECT {EXECUTION_COLUMNS}, application_id FROM executions
                 WHERE state IN ('launching', 'running', 'ready', 'restarting', 'stopping') ORDER BY id"
            ))
            .map_err(sql)?;
        let rows = s.query_map([], |r| Ok((r.get(19)?, execution_row(r)?))).map_err(sql)?;
        rows.collect::<Result<_, _>>().map_err(sql)
    }

    fn workload(&mut self, app: AppKey, policy_version: u64) -> Result<Workload, StoreFailure> {
        let version = self
            .conn()
            .prepare_cached(
                "SELECT version, schema_version, authored_digest, policy_digest, policy, authored, jobs, execution,
                        published_by
                 FROM policy_versions WHERE application_id = ?1 AND version = ?2",
            )
            .and_then(|mut s| s.query_row(params![app, int(policy_version)], version_row).optional())
            .map_err(sql)?
            .ok_or_else(|| failure(format!("application {app} has no policy version {policy_version}")))?;
        let secrets: BTreeMap<String, Vec<u8>> = {
            let mut s = self
                .conn()
                .prepare_cached(
                    "SELECT p.secret_id, p.value FROM provisioned_secrets p JOIN applications a
                       ON a.organization_id = p.organization_id AND a.application_id = p.application_id
                     WHERE a.id = ?1 AND p.value IS NOT NULL",
                )
                .map_err(sql)?;
            let rows = s.query_map([app], |r| Ok((r.get(0)?, r.get(1)?))).map_err(sql)?;
            rows.collect::<Result<_, _>>().map_err(sql)?
        };
        plan::workload(version.published(), &secrets).map_err(failure)
    }

    fn insert(&mut self, app: AppKey, e: &Execution) -> Result<ExecKey, StoreFailure> {
        let conn = self.conn();
        conn.prepare_cached(
            "INSERT INTO executions (application_id, execution_id, slot, generation, attempt, policy_version, state,
                 processor_id, window_start, window_end, restarts, charged_micros, charged_reward_planck,
                 charged_fee_planck, created_at, changed_at, silent_since, reason_code, reason_message)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)",
        )
        .and_then(|mut s| {
            s.execute(params![
                app,
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
                e.charged.service_credit_micros.to_string(),
                e.charged.reward_planck.to_string(),
                e.charged.native_fee_planck.to_string(),
                int(e.created_at),
                int(e.changed_at),
                e.silent_since.map(int),
                e.reason.as_ref().map(|r| &r.code),
                e.reason.as_ref().map(|r| &r.message),
            ])
        })
        .map_err(sql)?;
        let key = conn.last_insert_rowid();
        if e.state == ExecState::Launching {
            ledger(conn, app, key, e, e.created_at, false)?;
        }
        Ok(key)
    }

    fn transition(&mut self, _app: AppKey, e: &Execution, from: ExecState) -> Result<(), StoreFailure> {
        let conn = self.conn();
        conn.prepare_cached(
            "UPDATE executions SET state = ?2, processor_id = ?3, restarts = ?4, changed_at = ?5, silent_since = ?6,
                 reason_code = ?7, reason_message = ?8
             WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.execute(params![
                e.key,
                e.state.as_str(),
                e.processor_id,
                e.restarts,
                int(e.changed_at),
                e.silent_since.map(int),
                e.reason.as_ref().map(|r| &r.code),
                e.reason.as_ref().map(|r| &r.message),
            ])
        })
        .map_err(sql)?;
        if from != e.state {
            conn.prepare_cached(
                "INSERT INTO execution_transitions (execution, at, from_state, to_state, reason_code)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    e.key,
                    int(e.changed_at),
                    from.as_str(),
                    e.state.as_str(),
                    e.reason.as_ref().map(|r| &r.code)
                ])
            })
            .map_err(sql)?;
        }
        Ok(())
    }

    fn refund(&mut self, app: AppKey, e: &Execution, at: Millis) -> Result<(), StoreFailure> {
        ledger(self.conn(), app, e.key, e, at, true)
    }

    fn schedule(&mut self, app: AppKey, next_at: Option<Millis>, blocked: Option<&Reason>) -> Result<(), StoreFailure> {
        self.conn()
            .prepare_cached(
                "UPDATE applications SET exec_next_at = ?2, exec_blocked_code = ?3, exec_blocked_message = ?4
                 WHERE id = ?1",
            )
            .and_then(|mut s| {
                s.execute(params![app, next_at.map(int), blocked.map(|b| &b.code), blocked.map(|b| &b.message)])
            })
            .map_err(sql)?;
        Ok(())
    }

    fn activate(&mut self, app: AppKey, version: u64, at: Millis) -> Result<(), StoreFailure> {
        self.conn()
            .prepare_cached("UPDATE applications SET exec_activated_version = ?2, exec_activated_at = ?3 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![app, int(version), int(at)]))
            .map_err(sql)?;
        Ok(())
    }

    fn settle(&mut self, app: AppKey, at: Millis) -> Result<(), StoreFailure> {
        let conn = self.conn();
        conn.prepare_cached("UPDATE applications SET settled = 1, settled_at = ?2 WHERE id = ?1")
            .and_then(|mut s| s.execute(params![app, int(at)]))
            .map_err(sql)?;
        // The application's activity says so, as for every change of its status.
        conn.prepare_cached(
            "INSERT INTO activity (application_id, at, actor, action, policy_version, status, reason)
             SELECT id, ?2, 'scheduler', 'application_settled', active_pointer_version, status, NULL
             FROM applications WHERE id = ?1",
        )
        .and_then(|mut s| s.execute(params![app, crate::projection::rfc3339_ms(at)]))
        .map_err(sql)?;
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreFailure> {
        run_cached(self.conn(), "COMMIT").map_err(sql)?;
        self.open = false;
        Ok(())
    }
}

fn ledger(
    conn: &rusqlite::Connection,
    app: AppKey,
    key: ExecKey,
    e: &Execution,
    at: Millis,
    refund: bool,
) -> Result<(), StoreFailure> {
    conn.prepare_cached(
        "INSERT INTO spend_ledger (application_id, execution, slot, generation, at, micros, reward_planck, fee_planck,
             refund)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )
    .and_then(|mut s| {
        s.execute(params![
            app,
            key,
            e.slot,
            int(e.generation),
            int(at),
            e.charged.service_credit_micros.to_string(),
            e.charged.reward_planck.to_string(),
            e.charged.native_fee_planck.to_string(),
            refund,
        ])
    })
    .map_err(sql)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::store::Store;

    fn launching(uid: &str, slot: u16) -> Execution {
        Execution {
            key: 0,
            execution_id: Execution::id_for(uid, slot, 1, 1),
            slot,
            generation: 1,
            attempt: 1,
            policy_version: 1,
            state: ExecState::Launching,
            processor_id: None,
            window_start: 1_000,
            window_end: 3_601_000,
            restarts: 0,
            charged: Quote { service_credit_micros: 7, ..Quote::default() },
            created_at: 1_000,
            changed_at: 1_000,
            silent_since: None,
            reason: None,
        }
    }

    #[test]
    fn a_refunded_charge_is_not_among_the_charges_the_scheduler_reads() {
        let scratch = tempfile::Builder::new().prefix("svc-store-refund-").tempdir().expect("a scratch directory");
        let store = SqliteStore::open(scratch.path()).expect("open");
        let mut tx = store.write().expect("tx");
        let org = tx.ensure_organization("acme").expect("org");
        let app = tx.insert_application(org.id, "web", "app_1").expect("app").key;
        let other = tx.insert_application(org.id, "api", "app_2").expect("app").key;
        tx.commit().expect("commit");

        let mut tx = ExecutionStore::begin(&store).expect("tx");
        let refused = launching("app_1", 0);
        let refused = Execution { key: tx.insert(app, &refused).expect("insert"), ..refused };
        tx.insert(app, &launching("app_1", 1)).expect("insert");
        tx.insert(other, &launching("app_2", 0)).expect("insert");
        tx.refund(app, &refused, 2_000).expect("refund");
        let view = tx.app(app).expect("read").expect("the application");
        assert_eq!(view.charges.iter().map(|c| c.slot).collect::<Vec<_>>(), [1]);
        let view = tx.app(other).expect("read").expect("the application");
        assert_eq!(view.charges.iter().map(|c| (c.slot, c.quote.service_credit_micros)).collect::<Vec<_>>(), [(0, 7)]);
    }
}
