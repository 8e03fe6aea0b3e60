//! Sessions, refunds, rewards, claims and validator pins: the store's money side. Each
//! function is one transaction and takes `now` from its caller, so the engine uses the clock
//! and the ledger property test uses its own.

use rusqlite::{Connection, OptionalExtension, Row, TransactionBehavior, params};

use super::{RelayStore, StoreError, get_deployment, i64_of, insert_entry, random_hex, refused, u64_of};
use crate::coordinator::model::{Balance, EntryKind, LedgerEntry, Reward, RewardsSummary, Session, SessionState};
use crate::coordinator::money::{self, Terms};
use crate::coordinator::state::DeploymentState;

const SESSION_COLUMNS: &str = "id, deployment_id, quote_id, ordinal, price_micros, period_ms, state, period_index, \
     started_at, ends_at, unserved_ms, unserved_micros, refunded_micros, reward_micros, service_micros, settled_at";

fn session_row(r: &Row<'_>) -> rusqlite::Result<Session> {
    let price = r.get::<_, u64>(4)?;
    let state = super::spelled(r, 6, SessionState::parse)?;
    let unserved = r.get::<_, u64>(11)?;
    let refunded = r.get::<_, u64>(12)?;
    let (spent, refundable) = match state {
        SessionState::Funded => (0, price.saturating_sub(refunded)),
        SessionState::Active => (price, 0),
        SessionState::Settled => (price - unserved.min(price), unserved.saturating_sub(refunded)),
    };
    let period_index: Option<i64> = r.get(7)?;
    let unserved_ms: Option<i64> = r.get(10)?;
    Ok(Session {
        id: r.get(0)?,
        deployment_id: r.get(1)?,
        quote_id: r.get(2)?,
        ordinal: r.get::<_, u64>(3)?,
        price_micros: price,
        period_ms: r.get::<_, u64>(5)?,
        state,
        period_index: period_index.map(u64_of),
        started_at: r.get(8)?,
        ends_at: r.get(9)?,
        unserved_ms: unserved_ms.map(u64_of),
        unserved_micros: unserved,
        refunded_micros: refunded,
        reward_micros: r.get::<_, u64>(13)?,
        service_micros: r.get::<_, u64>(14)?,
        settled_at: r.get(15)?,
        spent_micros: spent,
        refundable_micros: refundable,
    })
}

fn sessions_of(conn: &Connection, deployment_id: &str) -> Result<Vec<Session>, StoreError> {
    let mut stmt = conn
        .prepare_cached(&format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE deployment_id = ?1 ORDER BY ordinal"))?;
    let rows = stmt.query_map([deployment_id], session_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Creates `periods` funded sessions of a quote (called inside the funding transaction).
pub(super) fn create_sessions(
    conn: &Connection,
    deployment_id: &str,
    quote_id: &str,
    periods: u64,
    price: u64,
    period_ms: u64,
) -> Result<(), StoreError> {
    let next: i64 = conn.query_row(
        "SELECT COALESCE(MAX(ordinal) + 1, 0) FROM sessions WHERE deployment_id = ?1",
        [deployment_id],
        |r| r.get(0),
    )?;
    for i in 0..periods {
        conn.execute(
            "INSERT INTO sessions (id, deployment_id, quote_id, ordinal, price_micros, period_ms, state) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'funded')",
            params![
                format!("ses_{}", random_hex(8)?),
                deployment_id,
                quote_id,
                next + i64_of(i)?,
                i64_of(price)?,
                i64_of(period_ms)?
            ],
        )?;
    }
    Ok(())
}

/// The money of a deployment, from its sessions and ledger.
pub(super) fn balance_of(conn: &Connection, deployment_id: &str) -> Result<Balance, StoreError> {
    let (funded, refunded): (i64, i64) = conn.query_row(
        "SELECT COALESCE(SUM(CASE kind WHEN 'fund' THEN amount_micros END), 0), \
         COALESCE(SUM(CASE kind WHEN 'refund' THEN amount_micros END), 0) FROM ledger WHERE deployment_id = ?1",
        [deployment_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let mut b = Balance { funded_micros: u64_of(funded), refunded_micros: u64_of(refunded), ..Balance::default() };
    for s in sessions_of(conn, deployment_id)? {
        b.spent_micros += s.spent_micros;
        b.refundable_micros += s.refundable_micros;
        b.reward_micros += s.reward_micros;
        b.service_micros += s.service_micros;
        match s.state {
            SessionState::Funded => b.available_micros += s.refundable_micros,
            SessionState::Active => b.in_progress_micros += s.price_micros,
            SessionState::Settled => {}
        }
    }
    Ok(b)
}

/// Milliseconds of `[from, to)` during which the deployment was not live, from its
/// recorded transitions.
fn not_live_ms(conn: &Connection, deployment_id: &str, from: i64, to: i64) -> Result<u64, StoreError> {
    if to <= from {
        return Ok(0);
    }
    let mut stmt = conn.prepare_cached("SELECT to_state, at FROM transitions WHERE deployment_id = ?1 ORDER BY seq")?;
    let rows: Vec<(String, i64)> =
        stmt.query_map([deployment_id], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
    let mut down = 0i64;
    let mut state_live = false;
    let mut since = from;
    for (state, at) in rows {
        let at = at.clamp(from, to);
        if !state_live && at > since {
            down += at - since;
        }
        if at >= since {
            since = at;
        }
        state_live = state == DeploymentState::Live.as_str();
    }
    if !state_live && to > since {
        down += to - since;
    }
    Ok(u64_of(down))
}

/// Settles an active session whose period ends (or was cut short) at `end`.
fn settle(conn: &Connection, s: &Session, end: i64, operator: &str, terms: &Terms, now: i64) -> Result<(), StoreError> {
    let (Some(start), Some(ends_at)) = (s.started_at, s.ends_at) else { return Ok(()) };
    let end = end.min(ends_at);
    let cut_short = u64_of(ends_at - end);
    let downtime = not_live_ms(conn, &s.deployment_id, start, end)?;
    let unserved_ms = money::counted_downtime(downtime, s.period_ms, terms.downtime_tolerance_bps) + cut_short;
    let split = money::settle(s.price_micros, s.period_ms, unserved_ms, terms);
    conn.execute(
        "UPDATE sessions SET state = 'settled', ends_at = ?1, unserved_ms = ?2, unserved_micros = ?3, reward_micros = ?4, \
         service_micros = ?5, settled_at = ?6 WHERE id = ?7",
        params![
            end,
            i64_of(unserved_ms.min(s.period_ms))?,
            i64_of(split.unserved_micros)?,
            i64_of(split.reward_micros)?,
            i64_of(split.service_micros)?,
            now,
            s.id
        ],
    )?;
    if split.unserved_micros > 0 {
        let note = format!("session {}: {} ms of the period unserved", s.id, unserved_ms.min(s.period_ms));
        insert_entry(
            conn,
            &s.deployment_id,
            EntryKind::Unserved,
            split.unserved_micros,
            None,
            s.period_index,
            &note,
            now,
        )?;
    }
    conn.execute(
        "INSERT INTO rewards (session_id, operator, amount_micros, settled_at, claimable_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            s.id,
            operator,
            i64_of(split.reward_micros)?,
            now,
            now.saturating_add(i64::try_from(terms.settlement_delay_ms).unwrap_or(i64::MAX))
        ],
    )?;
    Ok(())
}

fn operator_of(conn: &Connection, deployment_id: &str) -> Result<String, StoreError> {
    Ok(conn.query_row("SELECT gateway_operator FROM deployments WHERE id = ?1", [deployment_id], |r| r.get(0))?)
}

impl RelayStore {
    /// Moves the deployment's periods along at `now`: settles the active session if its
    /// period ended, and starts the next funded one (its `spend` entry) when `start` allows.
    /// Returns whether a period is running afterwards.
    pub fn advance_periods(
        &self,
        deployment_id: &str,
        start: bool,
        terms: &Terms,
        now: i64,
    ) -> Result<bool, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let sessions = sessions_of(&tx, deployment_id)?;
        let operator = operator_of(&tx, deployment_id)?;
        let mut chain_from = None;
        if let Some(active) = sessions.iter().find(|s| s.state == SessionState::Active) {
            match active.ends_at {
                Some(end) if end <= now => {
                    settle(&tx, active, end, &operator, terms, now)?;
                    chain_from = Some(end);
                }
                _ => {
                    tx.commit()?;
                    return Ok(true);
                }
            }
        }
        let next = sessions.iter().find(|s| s.state == SessionState::Funded && s.refundable_micros == s.price_micros);
        let running = match (start, next) {
            (true, Some(s)) => {
                let d = get_deployment(&tx, deployment_id)?;
                // Back-to-back periods stay contiguous; after a gap the new one starts now.
                let period = i64_of(s.period_ms)?;
                let begin = chain_from.filter(|end| now - end < period).unwrap_or(now);
                let ends = begin.saturating_add(period);
                let index = d.periods_spent;
                tx.execute(
                    "UPDATE sessions SET state = 'active', period_index = ?1, started_at = ?2, ends_at = ?3 WHERE id = ?4",
                    params![i64_of(index)?, begin, ends, s.id],
                )?;
                insert_entry(
                    &tx,
                    deployment_id,
                    EntryKind::Spend,
                    s.price_micros,
                    None,
                    Some(index),
                    &format!("period {index} (session {})", s.id),
                    now,
                )?;
                tx.execute(
                    "UPDATE deployments SET periods_spent = ?1, next_period_at = ?2, updated_at = ?3 WHERE id = ?4",
                    params![i64_of(index + 1)?, ends, now, deployment_id],
                )?;
                true
            }
            _ => false,
        };
        tx.commit()?;
        Ok(running)
    }

    /// Settles the running period at `now` because the deployment stops (inside `stop`).
    pub(super) fn settle_early(
        conn: &Connection,
        deployment_id: &str,
        terms: &Terms,
        now: i64,
    ) -> Result<(), StoreError> {
        let operator = operator_of(conn, deployment_id)?;
        for s in sessions_of(conn, deployment_id)?.iter().filter(|s| s.state == SessionState::Active) {
            settle(conn, s, now, &operator, terms, now)?;
        }
        Ok(())
    }

    /// The deployment's sessions, in funding order.
    pub fn sessions(&self, deployment_id: &str) -> Result<Vec<Session>, StoreError> {
        sessions_of(&*self.conn()?, deployment_id)
    }

    /// Refunds what a session has refundable, once: a `refund` ledger entry.
    pub fn refund(&self, deployment_id: &str, session_id: &str, now: i64) -> Result<LedgerEntry, StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let s = tx
            .query_row(
                &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1 AND deployment_id = ?2"),
                params![session_id, deployment_id],
                session_row,
            )
            .optional()?
            .ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))?;
        if s.refundable_micros == 0 {
            return Err(match (s.state, s.refunded_micros) {
                (_, r) if r > 0 => {
                    refused("session_already_refunded", format!("session {session_id} was refunded ({r} micros)"))
                }
                (SessionState::Active, _) => refused(
                    "session_running",
                    format!(
                        "session {session_id} is the running period; what it does not serve becomes refundable when it settles"
                    ),
                ),
                _ => refused(
                    "nothing_refundable",
                    format!("session {session_id} was served in full; nothing is refundable"),
                ),
            });
        }
        let amount = s.refundable_micros;
        if s.state == SessionState::Funded {
            // A period never started: refunding it cancels it.
            tx.execute(
                "UPDATE sessions SET state = 'settled', unserved_ms = period_ms, unserved_micros = price_micros, \
                 refunded_micros = price_micros, settled_at = ?1 WHERE id = ?2",
                params![now, session_id],
            )?;
        } else {
            tx.execute(
                "UPDATE sessions SET refunded_micros = refunded_micros + ?1 WHERE id = ?2",
                params![i64_of(amount)?, session_id],
            )?;
        }
        let note = format!("refund of session {session_id}");
        let seq = insert_entry(&tx, deployment_id, EntryKind::Refund, amount, None, s.period_index, &note, now)?;
        tx.commit()?;
        Ok(LedgerEntry {
            seq,
            kind: EntryKind::Refund,
            amount_micros: amount,
            quote_id: None,
            period_index: s.period_index,
            note,
            at: now,
        })
    }

    /// An operator's rewards at `now`.
    pub fn rewards(&self, operator: &str, now: i64) -> Result<RewardsSummary, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(
            "SELECT r.session_id, s.deployment_id, r.amount_micros, r.settled_at, r.claimable_at, r.claim_id \
             FROM rewards r JOIN sessions s ON s.id = r.session_id WHERE r.operator = ?1 ORDER BY r.settled_at, r.session_id",
        )?;
        let rewards: Vec<Reward> = stmt
            .query_map([operator], |r| {
                Ok(Reward {
                    session_id: r.get(0)?,
                    deployment_id: r.get(1)?,
                    amount_micros: r.get::<_, u64>(2)?,
                    settled_at: r.get(3)?,
                    claimable_at: r.get(4)?,
                    claim_id: r.get(5)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        let mut summary = RewardsSummary { operator: operator.to_owned(), ..RewardsSummary::default() };
        for r in &rewards {
            summary.accrued_micros += r.amount_micros;
            if r.claim_id.is_some() {
                summary.claimed_micros += r.amount_micros;
            } else if r.claimable_at <= now {
                summary.claimable_micros += r.amount_micros;
            } else {
                summary.pending_micros += r.amount_micros;
            }
        }
        summary.rewards = rewards;
        Ok(summary)
    }

    /// Claims every claimable reward of the operator, once; returns the claim's ID and amount.
    pub fn claim(&self, operator: &str, now: i64) -> Result<(String, u64), StoreError> {
        let mut conn = self.conn()?;
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let amount: i64 = tx.query_row(
            "SELECT COALESCE(SUM(amount_micros), 0) FROM rewards WHERE operator = ?1 AND claim_id IS NULL AND claimable_at <= ?2",
            params![operator, now],
            |r| r.get(0),
        )?;
        let count: i64 = tx.query_row(
            "SELECT COUNT(*) FROM rewards WHERE operator = ?1 AND claim_id IS NULL AND claimable_at <= ?2",
            params![operator, now],
            |r| r.get(0),
        )?;
        if count == 0 {
            return Err(refused(
                "nothing_claimable",
                "no reward is claimable now (claimed already, or still within the settlement delay)",
            ));
        }
        let id = format!("clm_{}", random_hex(8)?);
        tx.execute(
            "INSERT INTO claims (id, operator, amount_micros, at) VALUES (?1, ?2, ?3, ?4)",
            params![id, operator, amount, now],
        )?;
        tx.execute(
            "UPDATE rewards SET claim_id = ?1 WHERE operator = ?2 AND claim_id IS NULL AND claimable_at <= ?3",
            params![id, operator, now],
        )?;
        tx.commit()?;
        Ok((id, u64_of(amount)))
    }

    /// The validator digests a project pins (none: any version is accepted).
    pub fn pins(&self, org_id: &str, project: &str) -> Result<Vec<String>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(
            "SELECT digest FROM validator_pins WHERE org_id = ?1 AND project = ?2 ORDER BY added_at, digest",
        )?;
        let rows = stmt.query_map(params![org_id, project], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The pins of a deployment's project.
    pub fn pins_of_deployment(&self, deployment_id: &str) -> Result<Vec<String>, StoreError> {
        let conn = self.conn()?;
        let mut stmt = conn.prepare_cached(
            "SELECT p.digest FROM validator_pins p JOIN deployments d ON d.org_id = p.org_id AND d.project = p.project \
             WHERE d.id = ?1 ORDER BY p.added_at, p.digest",
        )?;
        let rows = stmt.query_map([deployment_id], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Pins a validator digest for a project (pinning twice changes nothing).
    pub fn add_pin(&self, org_id: &str, project: &str, digest: &str, now: i64) -> Result<(), StoreError> {
        self.conn()?.execute(
            "INSERT OR IGNORE INTO validator_pins (org_id, project, digest, added_at) VALUES (?1, ?2, ?3, ?4)",
            params![org_id, project, digest, now],
        )?;
        Ok(())
    }

    /// Removes a pin; false when it was not pinned.
    pub fn remove_pin(&self, org_id: &str, project: &str, digest: &str) -> Result<bool, StoreError> {
        let n = self.conn()?.execute(
            "DELETE FROM validator_pins WHERE org_id = ?1 AND project = ?2 AND digest = ?3",
            params![org_id, project, digest],
        )?;
        Ok(n > 0)
    }
}
