//! Quotes, sessions, the ledger, rewards, claims and pins.

use crate::coordinator::model::{EntryKind, LedgerEntry, Quote, Reward, Session, SessionState};
use crate::coordinator::money;
use crate::coordinator::store::StoreError;
use crate::coordinator::store::backend::{MoneyRows, NewEntry, NewSession};
use crate::coordinator::store::sql::{Sql, SqlRow, i64_of, params};

const QUOTE_COLUMNS: &str = "id, deployment_id, project_digest, hostnames_json, price_micros, period_secs, periods, \
     total_micros, created_at, expires_at, funded_at";

fn quote_row(row: &SqlRow) -> Result<Quote, StoreError> {
    Ok(Quote {
        id: row.text(0)?,
        deployment_id: row.text(1)?,
        project_digest: row.text(2)?,
        hostnames: row.json(3)?,
        price_micros: row.u64(4)?,
        period_secs: row.u64(5)?,
        periods: row.u64(6)?,
        total_micros: row.u64(7)?,
        created_at: row.i64(8)?,
        expires_at: row.i64(9)?,
        funded_at: row.opt_i64(10)?,
    })
}

const SESSION_COLUMNS: &str = "id, deployment_id, quote_id, ordinal, price_micros, period_ms, state, period_index, \
     started_at, ends_at, unserved_ms, unserved_micros, refunded_micros, reward_micros, service_micros, settled_at";

fn session_row(r: &SqlRow) -> Result<Session, StoreError> {
    let price = r.u64(4)?;
    let state = r.spelled(6, SessionState::parse)?;
    let unserved = r.u64(11)?;
    let refunded = r.u64(12)?;
    let (spent_micros, refundable_micros) = money::session_parts(state, price, unserved, refunded);
    Ok(Session {
        id: r.text(0)?,
        deployment_id: r.text(1)?,
        quote_id: r.text(2)?,
        ordinal: r.u64(3)?,
        price_micros: price,
        period_ms: r.u64(5)?,
        state,
        period_index: r.opt_u64(7)?,
        started_at: r.opt_i64(8)?,
        ends_at: r.opt_i64(9)?,
        unserved_ms: r.opt_u64(10)?,
        unserved_micros: unserved,
        refunded_micros: refunded,
        reward_micros: r.u64(13)?,
        service_micros: r.u64(14)?,
        settled_at: r.opt_i64(15)?,
        spent_micros,
        refundable_micros,
    })
}

/// One ledger row (`seq, kind, amount_micros, quote_id, period_index, note, at`).
fn ledger_row(r: &SqlRow) -> Result<LedgerEntry, StoreError> {
    Ok(LedgerEntry {
        seq: r.i64(0)?,
        kind: r.spelled(1, EntryKind::parse)?,
        amount_micros: r.u64(2)?,
        quote_id: r.opt_text(3)?,
        period_index: r.opt_u64(4)?,
        note: r.text(5)?,
        at: r.i64(6)?,
    })
}

/// A reward from a row of `session_id, deployment_id, amount_micros, settled_at,
/// claimable_at, claim_id`.
fn reward_row(r: &SqlRow) -> Result<Reward, StoreError> {
    Ok(Reward {
        session_id: r.text(0)?,
        deployment_id: r.text(1)?,
        amount_micros: r.u64(2)?,
        settled_at: r.i64(3)?,
        claimable_at: r.i64(4)?,
        claim_id: r.opt_text(5)?,
    })
}

impl<T: Sql> MoneyRows for T {
    fn insert_quote(&mut self, quote: &Quote) -> Result<(), StoreError> {
        let hostnames = serde_json::to_string(&quote.hostnames).map_err(|e| StoreError::Backend(Box::new(e)))?;
        self.execute(
            &format!("INSERT INTO quotes ({QUOTE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL)"),
            params![
                &quote.id,
                &quote.deployment_id,
                &quote.project_digest,
                hostnames.as_str(),
                i64_of(quote.price_micros)?,
                i64_of(quote.period_secs)?,
                i64_of(quote.periods)?,
                i64_of(quote.total_micros)?,
                quote.created_at,
                quote.expires_at
            ],
        )?;
        Ok(())
    }

    fn quotes(&mut self, deployment_id: &str) -> Result<Vec<Quote>, StoreError> {
        let sql = format!(
            "SELECT {QUOTE_COLUMNS} FROM quotes WHERE deployment_id = ?1 ORDER BY created_at DESC, {} DESC",
            T::ROW_KEY
        );
        self.query(&sql, params![deployment_id])?.iter().map(quote_row).collect()
    }

    fn quote(&mut self, deployment_id: &str, quote_id: &str) -> Result<Option<Quote>, StoreError> {
        let sql = format!("SELECT {QUOTE_COLUMNS} FROM quotes WHERE id = ?1 AND deployment_id = ?2");
        self.query_opt(&sql, params![quote_id, deployment_id])?.as_ref().map(quote_row).transpose()
    }

    fn set_quote_funded(&mut self, quote_id: &str, at: i64) -> Result<(), StoreError> {
        self.execute("UPDATE quotes SET funded_at = ?1 WHERE id = ?2", params![at, quote_id])?;
        Ok(())
    }

    fn insert_entry(&mut self, deployment_id: &str, e: &NewEntry<'_>) -> Result<i64, StoreError> {
        Ok(self
            .query_one(
                "INSERT INTO ledger (deployment_id, kind, amount_micros, quote_id, period_index, note, at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING seq",
                params![
                    deployment_id,
                    e.kind.as_str(),
                    i64_of(e.amount_micros)?,
                    e.quote_id,
                    e.period_index.map(i64_of).transpose()?,
                    e.note,
                    e.at
                ],
            )?
            .i64(0)?)
    }

    fn ledger(&mut self, deployment_id: &str) -> Result<Vec<LedgerEntry>, StoreError> {
        self.query(
            "SELECT seq, kind, amount_micros, quote_id, period_index, note, at FROM ledger WHERE deployment_id = ?1 \
             ORDER BY seq",
            params![deployment_id],
        )?
        .iter()
        .map(ledger_row)
        .collect()
    }

    fn recent_ledger(&mut self, deployment_id: &str, limit: u32) -> Result<Vec<LedgerEntry>, StoreError> {
        self.query(
            "SELECT seq, kind, amount_micros, quote_id, period_index, note, at FROM ledger WHERE deployment_id = ?1 \
             ORDER BY seq DESC LIMIT ?2",
            params![deployment_id, limit],
        )?
        .iter()
        .map(ledger_row)
        .collect()
    }

    fn insert_session(&mut self, s: &NewSession<'_>) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO sessions (id, deployment_id, quote_id, ordinal, price_micros, period_ms, state) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'funded')",
            params![
                &s.id,
                s.deployment_id,
                s.quote_id,
                i64_of(s.ordinal)?,
                i64_of(s.price_micros)?,
                i64_of(s.period_ms)?
            ],
        )?;
        Ok(())
    }

    fn sessions(&mut self, deployment_id: &str) -> Result<Vec<Session>, StoreError> {
        let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE deployment_id = ?1 ORDER BY ordinal");
        self.query(&sql, params![deployment_id])?.iter().map(session_row).collect()
    }

    fn session(&mut self, deployment_id: &str, session_id: &str) -> Result<Option<Session>, StoreError> {
        let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1 AND deployment_id = ?2");
        self.query_opt(&sql, params![session_id, deployment_id])?.as_ref().map(session_row).transpose()
    }

    fn session_deployment(
        &mut self,
        org_id: &str,
        project: &str,
        session_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let row = self.query_opt(
            "SELECT s.deployment_id FROM sessions s JOIN deployments d ON d.id = s.deployment_id \
             WHERE s.id = ?1 AND d.org_id = ?2 AND d.project = ?3",
            params![session_id, org_id, project],
        )?;
        Ok(row.map(|r| r.text(0)).transpose()?)
    }

    fn update_session(&mut self, s: &Session) -> Result<(), StoreError> {
        self.execute(
            "UPDATE sessions SET state = ?1, period_index = ?2, started_at = ?3, ends_at = ?4, unserved_ms = ?5, \
             unserved_micros = ?6, refunded_micros = ?7, reward_micros = ?8, service_micros = ?9, settled_at = ?10 \
             WHERE id = ?11",
            params![
                s.state.as_str(),
                s.period_index.map(i64_of).transpose()?,
                s.started_at,
                s.ends_at,
                s.unserved_ms.map(i64_of).transpose()?,
                i64_of(s.unserved_micros)?,
                i64_of(s.refunded_micros)?,
                i64_of(s.reward_micros)?,
                i64_of(s.service_micros)?,
                s.settled_at,
                &s.id
            ],
        )?;
        Ok(())
    }

    fn insert_reward(&mut self, r: &Reward, operator: &str) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO rewards (session_id, operator, amount_micros, settled_at, claimable_at) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![&r.session_id, operator, i64_of(r.amount_micros)?, r.settled_at, r.claimable_at],
        )?;
        Ok(())
    }

    fn rewards(&mut self, operator: &str) -> Result<Vec<Reward>, StoreError> {
        self.query(
            "SELECT r.session_id, s.deployment_id, r.amount_micros, r.settled_at, r.claimable_at, r.claim_id \
             FROM rewards r JOIN sessions s ON s.id = r.session_id WHERE r.operator = ?1 \
             ORDER BY r.settled_at, r.session_id",
            params![operator],
        )?
        .iter()
        .map(reward_row)
        .collect()
    }

    fn recent_rewards(&mut self, operator: &str, limit: u32) -> Result<Vec<Reward>, StoreError> {
        self.query(
            "SELECT r.session_id, s.deployment_id, r.amount_micros, r.settled_at, r.claimable_at, r.claim_id \
             FROM rewards r JOIN sessions s ON s.id = r.session_id WHERE r.operator = ?1 \
             ORDER BY r.settled_at DESC, r.session_id DESC LIMIT ?2",
            params![operator, limit],
        )?
        .iter()
        .map(reward_row)
        .collect()
    }

    fn reward_totals(&mut self, operator: &str, now: i64) -> Result<[u64; 4], StoreError> {
        // Sums cast back to 64-bit integers: PostgreSQL sums BIGINT as NUMERIC.
        let r = self.query_one(
            "SELECT CAST(COALESCE(SUM(amount_micros), 0) AS BIGINT), \
                    CAST(COALESCE(SUM(CASE WHEN claim_id IS NULL AND claimable_at > ?2 THEN amount_micros END), 0) AS BIGINT), \
                    CAST(COALESCE(SUM(CASE WHEN claim_id IS NULL AND claimable_at <= ?2 THEN amount_micros END), 0) AS BIGINT), \
                    CAST(COALESCE(SUM(CASE WHEN claim_id IS NOT NULL THEN amount_micros END), 0) AS BIGINT) \
             FROM rewards WHERE operator = ?1",
            params![operator, now],
        )?;
        Ok([r.u64(0)?, r.u64(1)?, r.u64(2)?, r.u64(3)?])
    }

    fn insert_claim(
        &mut self,
        claim_id: &str,
        operator: &str,
        amount_micros: u64,
        sessions: &[String],
        at: i64,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO claims (id, operator, amount_micros, at) VALUES (?1, ?2, ?3, ?4)",
            params![claim_id, operator, i64_of(amount_micros)?, at],
        )?;
        for session in sessions {
            self.execute(
                "UPDATE rewards SET claim_id = ?1 WHERE session_id = ?2 AND operator = ?3",
                params![claim_id, session, operator],
            )?;
        }
        Ok(())
    }

    fn pins(&mut self, org_id: &str, project: &str) -> Result<Vec<String>, StoreError> {
        let rows = self.query(
            "SELECT digest FROM validator_pins WHERE org_id = ?1 AND project = ?2 ORDER BY added_at, digest",
            params![org_id, project],
        )?;
        Ok(rows.iter().map(|r| r.text(0)).collect::<Result<_, _>>()?)
    }

    fn pins_of_deployment(&mut self, deployment_id: &str) -> Result<Vec<String>, StoreError> {
        let rows = self.query(
            "SELECT p.digest FROM validator_pins p JOIN deployments d ON d.org_id = p.org_id AND d.project = p.project \
             WHERE d.id = ?1 ORDER BY p.added_at, p.digest",
            params![deployment_id],
        )?;
        Ok(rows.iter().map(|r| r.text(0)).collect::<Result<_, _>>()?)
    }

    fn add_pin(&mut self, org_id: &str, project: &str, digest: &str, now: i64) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO validator_pins (org_id, project, digest, added_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT DO NOTHING",
            params![org_id, project, digest, now],
        )?;
        Ok(())
    }

    fn remove_pin(&mut self, org_id: &str, project: &str, digest: &str) -> Result<bool, StoreError> {
        let n = self.execute(
            "DELETE FROM validator_pins WHERE org_id = ?1 AND project = ?2 AND digest = ?3",
            params![org_id, project, digest],
        )?;
        Ok(n > 0)
    }
}
