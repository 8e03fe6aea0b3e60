//! Money: funding, periods, settlement, refunds, rewards and claims, and validator pins.
//! Each operation is one transaction and takes `now` from its caller, so the engine uses
//! the clock and the ledger property test uses its own. The arithmetic is
//! [`crate::coordinator::money`]'s; what it applies to is decided here.

use super::backend::{NewEntry, NewSession, Transaction};
use super::{RelayStore, StoreError, get_deployment, not_found, random_hex, refused};
use crate::coordinator::model::{Balance, EntryKind, LedgerEntry, Reward, RewardsSummary, Session, SessionState};
use crate::coordinator::money::{self, Terms};
use crate::coordinator::state::DeploymentState;
use svc_execution::money::usd;

/// The money of a deployment, from its sessions and ledger.
fn balance_of(tx: &mut dyn Transaction, deployment_id: &str) -> Result<Balance, StoreError> {
    let sessions = tx.sessions(deployment_id)?;
    balance_with(tx, deployment_id, &sessions)
}

/// [`balance_of`] with the sessions read already.
fn balance_with(tx: &mut dyn Transaction, deployment_id: &str, sessions: &[Session]) -> Result<Balance, StoreError> {
    let mut b = Balance::default();
    for entry in tx.ledger(deployment_id)? {
        match entry.kind {
            EntryKind::Fund => b.funded_micros += entry.amount_micros,
            EntryKind::Refund => b.refunded_micros += entry.amount_micros,
            _ => {}
        }
    }
    for s in sessions {
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
fn not_live_ms(tx: &mut dyn Transaction, deployment_id: &str, from: i64, to: i64) -> Result<u64, StoreError> {
    if to <= from {
        return Ok(0);
    }
    let mut down = 0i64;
    let mut live = false;
    let mut since = from;
    for t in tx.transitions(deployment_id)? {
        let at = t.at.clamp(from, to);
        if !live && at > since {
            down += at - since;
        }
        if at >= since {
            since = at;
        }
        live = t.to == DeploymentState::Live;
    }
    if !live && to > since {
        down += to - since;
    }
    Ok(u64::try_from(down).unwrap_or(0))
}

/// Settles an active session whose period ends (or was cut short) at `end`: the unserved
/// part refundable (an `unserved` entry), the served part split into the operator's reward
/// and the service's share.
fn settle(
    tx: &mut dyn Transaction,
    s: &Session,
    end: i64,
    operator: &str,
    terms: &Terms,
    now: i64,
) -> Result<(), StoreError> {
    let (Some(start), Some(ends_at)) = (s.started_at, s.ends_at) else { return Ok(()) };
    let end = end.min(ends_at);
    let cut_short = u64::try_from(ends_at - end).unwrap_or(0);
    let downtime = not_live_ms(tx, &s.deployment_id, start, end)?;
    let unserved_ms = money::counted_downtime(downtime, s.period_ms, terms.downtime_tolerance_bps) + cut_short;
    let split = money::settle(s.price_micros, s.period_ms, unserved_ms, terms);
    let settled = Session {
        state: SessionState::Settled,
        ends_at: Some(end),
        unserved_ms: Some(unserved_ms.min(s.period_ms)),
        unserved_micros: split.unserved_micros,
        reward_micros: split.reward_micros,
        service_micros: split.service_micros,
        settled_at: Some(now),
        ..s.clone()
    };
    tx.update_session(&settled)?;
    if split.unserved_micros > 0 {
        let note = format!("session {}: {} ms of the period unserved", s.id, unserved_ms.min(s.period_ms));
        let entry = NewEntry {
            kind: EntryKind::Unserved,
            amount_micros: split.unserved_micros,
            quote_id: None,
            period_index: s.period_index,
            note: &note,
            at: now,
        };
        tx.insert_entry(&s.deployment_id, &entry)?;
    }
    let delay = i64::try_from(terms.settlement_delay_ms).unwrap_or(i64::MAX);
    let reward = Reward {
        session_id: s.id.clone(),
        deployment_id: s.deployment_id.clone(),
        amount_micros: split.reward_micros,
        settled_at: now,
        claimable_at: now.saturating_add(delay),
        claim_id: None,
    };
    tx.insert_reward(&reward, operator)
}

fn operator_of(tx: &mut dyn Transaction, deployment_id: &str) -> Result<String, StoreError> {
    tx.gateway_operator(deployment_id)?.ok_or_else(|| not_found(format!("deployment {deployment_id}")))
}

/// Settles the running period at `now` because the deployment stops (inside `stop`).
pub(super) fn settle_running(
    tx: &mut dyn Transaction,
    deployment_id: &str,
    terms: &Terms,
    now: i64,
) -> Result<(), StoreError> {
    let operator = operator_of(tx, deployment_id)?;
    for s in tx.sessions(deployment_id)?.iter().filter(|s| s.state == SessionState::Active) {
        settle(tx, s, now, &operator, terms, now)?;
    }
    Ok(())
}

impl RelayStore {
    /// Funds a quote: one `fund` entry, never above the ceiling, once per quote, only before
    /// it expires and while it still matches the deployment (project and hostnames).
    pub fn fund(
        &self,
        deployment_id: &str,
        quote_id: &str,
        hostnames: &[String],
        now: i64,
    ) -> Result<LedgerEntry, StoreError> {
        self.write(|tx| {
            let d = get_deployment(tx, deployment_id)?;
            let quote = tx
                .quote(deployment_id, quote_id)?
                .ok_or_else(|| not_found(format!("quote {quote_id} of deployment {deployment_id}")))?;
            if matches!(d.state, DeploymentState::Stopped | DeploymentState::Failed) {
                return Err(refused(
                    "deployment_not_fundable",
                    format!("the deployment is {}; it cannot be funded", d.state),
                ));
            }
            if quote.funded_at.is_some() {
                return Err(refused(
                    "quote_already_funded",
                    format!("quote {quote_id} is already funded; ask for a new quote"),
                ));
            }
            if now > quote.expires_at {
                return Err(refused("quote_expired", format!("quote {quote_id} expired; ask for a new quote")));
            }
            // A quote made for a redeploy's successor funds the deployment too: what it buys
            // (periods of the route, for these hostnames) is the same, under the ceiling of
            // the project it was made for. A deployment that serves nothing is taken over by
            // its successor at once (`engine::redeploy`): only the successor's quote funds it
            // then, whether or not the engine has switched yet (issue 41).
            let successor =
                tx.successor(deployment_id)?.filter(|s| s.state != crate::coordinator::model::SuccessorState::Failed);
            let (for_this_project, ceiling_micros) = match &successor {
                Some(s) if s.project_digest == quote.project_digest => (true, s.ceiling_micros),
                Some(_) if !d.state.spends() => (false, d.ceiling_micros),
                _ => (quote.project_digest == d.project_digest, d.ceiling_micros),
            };
            if !for_this_project || quote.hostnames != hostnames {
                return Err(refused(
                    "quote_stale",
                    "the project or its hostnames changed since the quote; ask for a new quote",
                ));
            }
            let sessions = tx.sessions(deployment_id)?;
            let balance = balance_with(tx, deployment_id, &sessions)?;
            let total = balance.funded_micros.saturating_add(quote.total_micros);
            if total > ceiling_micros {
                return Err(refused(
                    "spend_ceiling_exceeded",
                    format!(
                        "funding {} would bring the project to {}, above its ceiling of {} \
                         (spend.ceilingMicros {ceiling_micros} in the project file)",
                        usd(quote.total_micros),
                        usd(total),
                        usd(ceiling_micros)
                    ),
                ));
            }
            tx.set_quote_funded(quote_id, now)?;
            let first = sessions.iter().map(|s| s.ordinal + 1).max().unwrap_or(0);
            for i in 0..quote.periods {
                tx.insert_session(&NewSession {
                    id: format!("ses_{}", random_hex(8)?),
                    deployment_id,
                    quote_id,
                    ordinal: first + i,
                    price_micros: quote.price_micros,
                    period_ms: quote.period_secs.saturating_mul(1000),
                })?;
            }
            let note = format!(
                "funded quote {quote_id}: {} of {}",
                manifest_core::plural(quote.periods, "period"),
                svc_execution::money::duration_words(quote.period_secs)
            );
            let entry = NewEntry {
                kind: EntryKind::Fund,
                amount_micros: quote.total_micros,
                quote_id: Some(quote_id),
                period_index: None,
                note: &note,
                at: now,
            };
            let seq = tx.insert_entry(deployment_id, &entry)?;
            Ok(LedgerEntry {
                seq,
                kind: EntryKind::Fund,
                amount_micros: quote.total_micros,
                quote_id: Some(quote_id.to_owned()),
                period_index: None,
                note,
                at: now,
            })
        })
    }

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
        self.write(|tx| {
            // Read in this transaction: an engine step that read the deployment running may
            // come after a stop committed, and a stopped (or failed) deployment spends nothing
            // (CI found a period charged a millisecond after a stop).
            if !get_deployment(tx, deployment_id)?.state.runs_job() {
                return Ok(false);
            }
            let sessions = tx.sessions(deployment_id)?;
            let operator = operator_of(tx, deployment_id)?;
            let mut chain_from = None;
            if let Some(active) = sessions.iter().find(|s| s.state == SessionState::Active) {
                match active.ends_at {
                    Some(end) if end <= now => {
                        settle(tx, active, end, &operator, terms, now)?;
                        chain_from = Some(end);
                    }
                    _ => return Ok(true),
                }
            }
            let next =
                sessions.iter().find(|s| s.state == SessionState::Funded && s.refundable_micros == s.price_micros);
            let (true, Some(s)) = (start, next) else { return Ok(false) };
            let d = get_deployment(tx, deployment_id)?;
            // Back-to-back periods stay contiguous; after a gap the new one starts now.
            let period = i64::try_from(s.period_ms).unwrap_or(i64::MAX);
            let begin = chain_from.filter(|end| now - end < period).unwrap_or(now);
            let ends = begin.saturating_add(period);
            let index = d.periods_spent;
            let started = Session {
                state: SessionState::Active,
                period_index: Some(index),
                started_at: Some(begin),
                ends_at: Some(ends),
                ..s.clone()
            };
            tx.update_session(&started)?;
            let note = format!("period {index} (session {})", s.id);
            let entry = NewEntry {
                kind: EntryKind::Spend,
                amount_micros: s.price_micros,
                quote_id: None,
                period_index: Some(index),
                note: &note,
                at: now,
            };
            tx.insert_entry(deployment_id, &entry)?;
            tx.set_periods(deployment_id, index + 1, ends, now)?;
            Ok(true)
        })
    }

    /// The deployment's sessions, in funding order.
    pub fn sessions(&self, deployment_id: &str) -> Result<Vec<Session>, StoreError> {
        self.read(|tx| tx.sessions(deployment_id))
    }

    /// The deployment that session `session_id` funds among organization `org_id`'s
    /// deployments of `project`: a session ID names one session of the project, whichever of
    /// its deployments (the newest, an older or stopped one) it funds. `None` when no
    /// deployment of the project (of that organization) has it.
    pub fn session_deployment(
        &self,
        org_id: &str,
        project: &str,
        session_id: &str,
    ) -> Result<Option<String>, StoreError> {
        self.read(|tx| tx.session_deployment(org_id, project, session_id))
    }

    /// The deployment's newest `limit` ledger entries, newest first.
    pub fn recent_ledger(&self, deployment_id: &str, limit: u32) -> Result<Vec<LedgerEntry>, StoreError> {
        self.read(|tx| tx.recent_ledger(deployment_id, limit))
    }

    /// Every ledger entry of a deployment, oldest first.
    pub fn ledger(&self, deployment_id: &str) -> Result<Vec<LedgerEntry>, StoreError> {
        self.read(|tx| tx.ledger(deployment_id))
    }

    /// The deployment's balance.
    pub fn balance(&self, deployment_id: &str) -> Result<Balance, StoreError> {
        self.read(|tx| balance_of(tx, deployment_id))
    }

    /// Refunds what a session has refundable, once: a `refund` ledger entry.
    pub fn refund(&self, deployment_id: &str, session_id: &str, now: i64) -> Result<LedgerEntry, StoreError> {
        self.write(|tx| {
            let s = tx.session(deployment_id, session_id)?.ok_or_else(|| not_found(format!("session {session_id}")))?;
            if s.refundable_micros == 0 {
                return Err(match (s.state, s.refunded_micros) {
                    (_, r) if r > 0 => {
                        refused("session_already_refunded", format!("session {session_id} was refunded ({})", usd(r)))
                    }
                    (SessionState::Active, _) => refused(
                        "session_running",
                        format!(
                            "session {session_id} is the running period; what it does not serve becomes refundable \
                             when it settles"
                        ),
                    ),
                    _ => refused(
                        "nothing_refundable",
                        format!("session {session_id} was served in full; nothing is refundable"),
                    ),
                });
            }
            let amount = s.refundable_micros;
            let refunded = if s.state == SessionState::Funded {
                // A period never started: refunding it cancels it.
                Session {
                    state: SessionState::Settled,
                    unserved_ms: Some(s.period_ms),
                    unserved_micros: s.price_micros,
                    refunded_micros: s.price_micros,
                    settled_at: Some(now),
                    ..s.clone()
                }
            } else {
                Session { refunded_micros: s.refunded_micros.saturating_add(amount), ..s.clone() }
            };
            tx.update_session(&refunded)?;
            let note = format!("refund of session {session_id}");
            let entry = NewEntry {
                kind: EntryKind::Refund,
                amount_micros: amount,
                quote_id: None,
                period_index: s.period_index,
                note: &note,
                at: now,
            };
            let seq = tx.insert_entry(deployment_id, &entry)?;
            Ok(LedgerEntry {
                seq,
                kind: EntryKind::Refund,
                amount_micros: amount,
                quote_id: None,
                period_index: s.period_index,
                note,
                at: now,
            })
        })
    }

    /// An operator's rewards at `now`.
    pub fn rewards(&self, operator: &str, now: i64) -> Result<RewardsSummary, StoreError> {
        let rewards = self.read(|tx| tx.rewards(operator))?;
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

    /// The operator's reward totals (over every reward) and its newest `limit` rewards
    /// (oldest first among them): what a page shows, its work bounded however many there are.
    pub fn recent_rewards(&self, operator: &str, now: i64, limit: u32) -> Result<RewardsSummary, StoreError> {
        self.read(|tx| {
            let [accrued_micros, pending_micros, claimable_micros, claimed_micros] = tx.reward_totals(operator, now)?;
            let mut rewards = tx.recent_rewards(operator, limit)?;
            rewards.reverse();
            Ok(RewardsSummary {
                operator: operator.to_owned(),
                accrued_micros,
                pending_micros,
                claimable_micros,
                claimed_micros,
                rewards,
            })
        })
    }

    /// Claims every claimable reward of the operator, once; returns the claim's ID and amount.
    pub fn claim(&self, operator: &str, now: i64) -> Result<(String, u64), StoreError> {
        self.write(|tx| {
            let claimable: Vec<Reward> =
                tx.rewards(operator)?.into_iter().filter(|r| r.claim_id.is_none() && r.claimable_at <= now).collect();
            if claimable.is_empty() {
                return Err(refused(
                    "nothing_claimable",
                    "no reward is claimable now (claimed already, or still within the settlement delay)",
                ));
            }
            let amount = claimable.iter().map(|r| r.amount_micros).fold(0u64, u64::saturating_add);
            let sessions: Vec<String> = claimable.into_iter().map(|r| r.session_id).collect();
            let id = format!("clm_{}", random_hex(8)?);
            tx.insert_claim(&id, operator, amount, &sessions, now)?;
            Ok((id, amount))
        })
    }

    /// The validator digests a project pins (none: any version is accepted).
    pub fn pins(&self, org_id: &str, project: &str) -> Result<Vec<String>, StoreError> {
        self.read(|tx| tx.pins(org_id, project))
    }

    /// The pins of a deployment's project.
    pub fn pins_of_deployment(&self, deployment_id: &str) -> Result<Vec<String>, StoreError> {
        self.read(|tx| tx.pins_of_deployment(deployment_id))
    }

    /// Pins a validator digest for a project (pinning twice changes nothing).
    pub fn add_pin(&self, org_id: &str, project: &str, digest: &str, now: i64) -> Result<(), StoreError> {
        self.write(|tx| tx.add_pin(org_id, project, digest, now))
    }

    /// Removes a pin; false when it was not pinned.
    pub fn remove_pin(&self, org_id: &str, project: &str, digest: &str) -> Result<bool, StoreError> {
        self.write(|tx| tx.remove_pin(org_id, project, digest))
    }
}
