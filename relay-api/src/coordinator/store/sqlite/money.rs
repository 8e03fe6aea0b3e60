//! Quotes, sessions, the ledger, rewards, claims and pins, in SQL.

use rusqlite::{OptionalExtension, params};

use super::SqliteTransaction;
use super::rows::{QUOTE_COLUMNS, SESSION_COLUMNS, i64_of, quote_row, session_row, spelled};
use crate::coordinator::model::{EntryKind, LedgerEntry, Quote, Reward, Session};
use crate::coordinator::store::StoreError;
use crate::coordinator::store::backend::{MoneyRows, NewEntry, NewSession};

impl MoneyRows for SqliteTransaction<'_> {
    fn insert_quote(&mut self, quote: &Quote) -> Result<(), StoreError> {
        let hostnames = serde_json::to_string(&quote.hostnames).map_err(|e| StoreError::Backend(Box::new(e)))?;
        self.conn.execute(
            &format!("INSERT INTO quotes ({QUOTE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL)"),
            params![
                quote.id,
                quote.deployment_id,
                quote.project_digest,
                hostnames,
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
        let sql =
            format!("SELECT {QUOTE_COLUMNS} FROM quotes WHERE deployment_id = ?1 ORDER BY created_at DESC, rowid DESC");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map([deployment_id], quote_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn quote(&mut self, deployment_id: &str, quote_id: &str) -> Result<Option<Quote>, StoreError> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {QUOTE_COLUMNS} FROM quotes WHERE id = ?1 AND deployment_id = ?2"),
                params![quote_id, deployment_id],
                quote_row,
            )
            .optional()?)
    }

    fn set_quote_funded(&mut self, quote_id: &str, at: i64) -> Result<(), StoreError> {
        self.conn.execute("UPDATE quotes SET funded_at = ?1 WHERE id = ?2", params![at, quote_id])?;
        Ok(())
    }

    fn insert_entry(&mut self, deployment_id: &str, e: &NewEntry<'_>) -> Result<i64, StoreError> {
        self.conn.execute(
            "INSERT INTO ledger (deployment_id, kind, amount_micros, quote_id, period_index, note, at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                deployment_id,
                e.kind.as_str(),
                i64_of(e.amount_micros)?,
                e.quote_id,
                e.period_index.map(i64_of).transpose()?,
                e.note,
                e.at
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    fn ledger(&mut self, deployment_id: &str) -> Result<Vec<LedgerEntry>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, kind, amount_micros, quote_id, period_index, note, at FROM ledger WHERE deployment_id = ?1 \
             ORDER BY seq",
        )?;
        let rows = stmt.query_map([deployment_id], ledger_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn recent_ledger(&mut self, deployment_id: &str, limit: u32) -> Result<Vec<LedgerEntry>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT seq, kind, amount_micros, quote_id, period_index, note, at FROM ledger WHERE deployment_id = ?1 \
             ORDER BY seq DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![deployment_id, limit], ledger_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn insert_session(&mut self, s: &NewSession<'_>) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO sessions (id, deployment_id, quote_id, ordinal, price_micros, period_ms, state) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'funded')",
            params![
                s.id,
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
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions WHERE deployment_id = ?1 ORDER BY ordinal"
        ))?;
        let rows = stmt.query_map([deployment_id], session_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn session(&mut self, deployment_id: &str, session_id: &str) -> Result<Option<Session>, StoreError> {
        Ok(self
            .conn
            .query_row(
                &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1 AND deployment_id = ?2"),
                params![session_id, deployment_id],
                session_row,
            )
            .optional()?)
    }

    fn update_session(&mut self, s: &Session) -> Result<(), StoreError> {
        self.conn.execute(
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
                s.id
            ],
        )?;
        Ok(())
    }

    fn insert_reward(&mut self, r: &Reward, operator: &str) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO rewards (session_id, operator, amount_micros, settled_at, claimable_at) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![r.session_id, operator, i64_of(r.amount_micros)?, r.settled_at, r.claimable_at],
        )?;
        Ok(())
    }

    fn rewards(&mut self, operator: &str) -> Result<Vec<Reward>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT r.session_id, s.deployment_id, r.amount_micros, r.settled_at, r.claimable_at, r.claim_id \
             FROM rewards r JOIN sessions s ON s.id = r.session_id WHERE r.operator = ?1 \
             ORDER BY r.settled_at, r.session_id",
        )?;
        let rows = stmt.query_map([operator], reward_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn recent_rewards(&mut self, operator: &str, limit: u32) -> Result<Vec<Reward>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT r.session_id, s.deployment_id, r.amount_micros, r.settled_at, r.claimable_at, r.claim_id \
             FROM rewards r JOIN sessions s ON s.id = r.session_id WHERE r.operator = ?1 \
             ORDER BY r.settled_at DESC, r.session_id DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![operator, limit], reward_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn reward_totals(&mut self, operator: &str, now: i64) -> Result<[u64; 4], StoreError> {
        Ok(self.conn.query_row(
            "SELECT COALESCE(SUM(amount_micros), 0), \
                    COALESCE(SUM(CASE WHEN claim_id IS NULL AND claimable_at > ?2 THEN amount_micros END), 0), \
                    COALESCE(SUM(CASE WHEN claim_id IS NULL AND claimable_at <= ?2 THEN amount_micros END), 0), \
                    COALESCE(SUM(CASE WHEN claim_id IS NOT NULL THEN amount_micros END), 0) \
             FROM rewards WHERE operator = ?1",
            params![operator, now],
            |r| Ok([r.get::<_, u64>(0)?, r.get::<_, u64>(1)?, r.get::<_, u64>(2)?, r.get::<_, u64>(3)?]),
        )?)
    }

    fn insert_claim(
        &mut self,
        claim_id: &str,
        operator: &str,
        amount_micros: u64,
        sessions: &[String],
        at: i64,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO claims (id, operator, amount_micros, at) VALUES (?1, ?2, ?3, ?4)",
            params![claim_id, operator, i64_of(amount_micros)?, at],
        )?;
        let mut stmt =
            self.conn.prepare_cached("UPDATE rewards SET claim_id = ?1 WHERE session_id = ?2 AND operator = ?3")?;
        for session in sessions {
            stmt.execute(params![claim_id, session, operator])?;
        }
        Ok(())
    }

    fn pins(&mut self, org_id: &str, project: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT digest FROM validator_pins WHERE org_id = ?1 AND project = ?2 ORDER BY added_at, digest",
        )?;
        let rows = stmt.query_map(params![org_id, project], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn pins_of_deployment(&mut self, deployment_id: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT p.digest FROM validator_pins p JOIN deployments d ON d.org_id = p.org_id AND d.project = p.project \
             WHERE d.id = ?1 ORDER BY p.added_at, p.digest",
        )?;
        let rows = stmt.query_map([deployment_id], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn add_pin(&mut self, org_id: &str, project: &str, digest: &str, now: i64) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT OR IGNORE INTO validator_pins (org_id, project, digest, added_at) VALUES (?1, ?2, ?3, ?4)",
            params![org_id, project, digest, now],
        )?;
        Ok(())
    }

    fn remove_pin(&mut self, org_id: &str, project: &str, digest: &str) -> Result<bool, StoreError> {
        let n = self.conn.execute(
            "DELETE FROM validator_pins WHERE org_id = ?1 AND project = ?2 AND digest = ?3",
            params![org_id, project, digest],
        )?;
        Ok(n > 0)
    }
}

/// One ledger row (`seq, kind, amount_micros, quote_id, period_index, note, at`).
fn ledger_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LedgerEntry> {
    Ok(LedgerEntry {
        seq: r.get(0)?,
        kind: spelled(r, 1, EntryKind::parse)?,
        amount_micros: r.get::<_, u64>(2)?,
        quote_id: r.get(3)?,
        period_index: r.get::<_, Option<u64>>(4)?,
        note: r.get(5)?,
        at: r.get(6)?,
    })
}

/// A reward from a row of `session_id, deployment_id, amount_micros, settled_at,
/// claimable_at, claim_id`.
fn reward_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Reward> {
    Ok(Reward {
        session_id: r.get(0)?,
        deployment_id: r.get(1)?,
        amount_micros: r.get::<_, u64>(2)?,
        settled_at: r.get(3)?,
        claimable_at: r.get(4)?,
        claim_id: r.get(5)?,
    })
}
