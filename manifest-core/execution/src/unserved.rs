//! Charges follow the paid window, not the attempt (issue 41): what a slot generation's charge
//! still covers after the service's own crash, and what it refunds for the time it went
//! unserved.
//!
//! A generation is charged once, for its window, by the attempt that launched it. When that
//! attempt (or a later one) stops with the service (`processor_restarted`: the local pool's
//! jobs are the service's processes), the platform, not the job, failed, so:
//!
//! - the generation's next attempt within the window is **not charged** (its charge is zero,
//!   and no ledger entry is made for it): the first charge covers the window;
//! - every stretch of the window nothing served because of it is **refunded pro rata**, as a
//!   ledger entry of its own against the charged attempt ([`Gap`]): from when the attempt was
//!   last known alive (recovery records that as its `changed_at`: the newer of the service's
//!   last heartbeat and the attempt's own last change) to the next attempt's decision, or to
//!   the window's end if none comes; a free attempt the market refused leaves a gap from its
//!   decision to the next one's.
//!
//! A launch in flight at the crash (`launching`, its process gone with the service) is sent
//! again under its own ID at recovery, as before; the stretch from when the service was
//! last known alive to that recovery is refunded then ([`in_flight`]).
//!
//! Amounts are rounded down on the total of the gaps so far, so however many gaps, what the
//! generation is charged net is at most its price times the time it was not in a gap, plus
//! one unit (micro or planck) of rounding, and one more per launch in flight at a crash.

use crate::clock::Millis;
use crate::market::Quote;
use crate::reason::PROCESSOR_RESTARTED;
use crate::record::{AppView, ExecState, Execution};

/// One stretch of a paid window nothing served because the service stopped, and its refund.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gap {
    /// The charged attempt whose window it is (the ledger entry's execution).
    pub paid: crate::record::ExecKey,
    /// Its start: the store refunds a gap at most once, by (`paid`, `from`).
    pub from: Millis,
    /// Its end.
    pub to: Millis,
    /// The refund: `paid`'s charge pro rata.
    pub amount: Quote,
}

/// The attempts of a generation since its charged attempt stopped with the service: the
/// charged attempt, then every later one (each stopped with the service or refused
/// without a charge), oldest first. `None` unless the newest attempt ends such a chain.
pub(crate) fn chain<'a>(attempts: &[&'a Execution]) -> Option<Vec<&'a Execution>> {
    let mut sorted: Vec<&Execution> = attempts.to_vec();
    sorted.sort_by_key(|e| e.attempt);
    let mut links = Vec::new();
    for e in sorted.into_iter().rev() {
        let free = e.charged == Quote::default();
        let with_the_service =
            e.state == ExecState::Failed && e.reason.as_ref().is_some_and(|r| r.code == PROCESSOR_RESTARTED);
        if e.state == ExecState::Refused && free {
            links.push(e);
        } else if with_the_service {
            links.push(e);
            if !free {
                links.reverse();
                return Some(links);
            }
        } else {
            return None;
        }
    }
    None
}

/// The gaps of a chain ([`chain`]) up to `end` (the next attempt's decision, or the window's
/// end), each with its refund, rounded down on the running total.
pub(crate) fn gaps(links: &[&Execution], end: Millis) -> Vec<Gap> {
    let Some(paid) = links.first() else { return Vec::new() };
    let (start, stop) = (paid.window_start, paid.window_end);
    let length = stop.saturating_sub(start);
    if length == 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut total: Millis = 0;
    for (i, link) in links.iter().enumerate() {
        // A stopped attempt's gap starts when it was last known alive; a refused one's at its
        // decision (nothing of it ever served).
        let from = if link.state == ExecState::Refused { link.created_at } else { link.changed_at };
        let to = links.get(i + 1).map_or(end, |next| next.created_at);
        let (from, to) = (from.clamp(start, stop), to.clamp(start, stop));
        if to <= from {
            continue;
        }
        let before = total;
        total += to - from;
        let share = |charged: u128| pro_rata(charged, total, length) - pro_rata(charged, before, length);
        let amount = Quote {
            service_credit_micros: share(paid.charged.service_credit_micros),
            reward_planck: share(paid.charged.reward_planck),
            native_fee_planck: share(paid.charged.native_fee_planck),
        };
        out.push(Gap { paid: paid.key, from, to, amount });
    }
    out
}

/// The stretch a launch in flight at the service's crash (`launching`, its job gone with the
/// service) went unserved, from when the service was last known alive (`alive`, or the
/// launch's own last change if later) to `now`, when recovery sends it again under its own
/// ID; refunded against the generation's charged attempt: the launch itself, or, for a free
/// relaunch, the charged attempt of its chain. Rounded down on its own.
pub(crate) fn in_flight(view: &AppView, e: &Execution, alive: Millis, now: Millis) -> Option<Gap> {
    let paid = if e.charged == Quote::default() {
        let earlier: Vec<&Execution> = view
            .executions
            .iter()
            .filter(|o| o.slot == e.slot && o.generation == e.generation && o.attempt < e.attempt)
            .collect();
        *chain(&earlier)?.first()?
    } else {
        e
    };
    let (start, stop) = (paid.window_start, paid.window_end);
    let from = alive.max(e.changed_at).clamp(start, stop);
    let to = now.clamp(start, stop);
    if to <= from {
        return None;
    }
    let length = stop.saturating_sub(start);
    let share = |charged: u128| pro_rata(charged, to - from, length);
    let amount = Quote {
        service_credit_micros: share(paid.charged.service_credit_micros),
        reward_planck: share(paid.charged.reward_planck),
        native_fee_planck: share(paid.charged.native_fee_planck),
    };
    (amount != Quote::default()).then_some(Gap { paid: paid.key, from, to, amount })
}

/// The stretch a predecessor went unserved when it died with the service while its renewal
/// ran ahead of its own window (a newer generation of its slot, launched a lead before this
/// one's end, whose window starts at or after it): the scheduler relaunches only the newest
/// generation, whose window does not hold this time, so recovery refunds it against this
/// generation's charge, from when the service was last known alive to `now`, as for a launch
/// in flight ([`in_flight`]). `None` for the newest generation (the scheduler refunds its
/// chain) and for one an update was replacing (a newer window overlaps its own).
pub(crate) fn renewed(view: &AppView, e: &Execution, alive: Millis, now: Millis) -> Option<Gap> {
    let mut newer = view.executions.iter().filter(|o| o.slot == e.slot && o.generation > e.generation).peekable();
    newer.peek()?;
    if newer.any(|o| o.window_start < e.window_end) {
        return None;
    }
    in_flight(view, e, alive, now)
}

/// `amount * part / whole`, rounded down, without overflow (`part <= whole`).
fn pro_rata(amount: u128, part: Millis, whole: Millis) -> u128 {
    let (part, whole) = (u128::from(part.min(whole)), u128::from(whole.max(1)));
    (amount / whole) * part + (amount % whole) * part / whole
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reason::Reason;

    fn attempt(n: u32, state: ExecState, charged: u128, created: Millis, changed: Millis) -> Execution {
        Execution {
            key: i64::from(n),
            execution_id: format!("a/0/1/{n}"),
            slot: 0,
            generation: 1,
            attempt: n,
            policy_version: 1,
            state,
            processor_id: None,
            window_start: 0,
            window_end: 3_600_000,
            restarts: 0,
            charged: Quote { service_credit_micros: charged, ..Quote::default() },
            created_at: created,
            changed_at: changed,
            silent_since: None,
            reason: (state == ExecState::Failed).then(|| Reason::new(PROCESSOR_RESTARTED, "it stopped")),
        }
    }

    #[test]
    fn refunds_of_many_gaps_round_down_on_their_total_not_each() {
        // Three gaps of a third of a window each: rounded one by one, 10 micros would refund
        // 3 + 3 + 3 and keep 1 for nothing served.
        let a = [
            attempt(1, ExecState::Failed, 10, 0, 0),
            attempt(2, ExecState::Failed, 0, 1_200_000, 1_200_000),
            attempt(3, ExecState::Failed, 0, 2_400_000, 2_400_000),
        ];
        let links: Vec<&Execution> = a.iter().collect();
        let chained = chain(&links).expect("a chain");
        let refunds: u128 = gaps(&chained, 3_600_000).iter().map(|g| g.amount.service_credit_micros).sum();
        assert_eq!(refunds, 10);
    }

    #[test]
    fn only_the_services_stops_and_free_refusals_make_a_chain() {
        let paid = attempt(1, ExecState::Failed, 10, 0, 5);
        let mut own = attempt(1, ExecState::Failed, 10, 0, 5);
        own.reason = Some(Reason::new("exited", "status 1"));
        let refused = attempt(2, ExecState::Refused, 0, 9, 9);
        assert_eq!(chain(&[&paid, &refused]).map(|c| c.len()), Some(2));
        assert!(chain(&[&own, &refused]).is_none(), "the job's own failure is not the platform's");
        assert!(chain(&[&refused]).is_none(), "nothing was charged");
        assert!(pro_rata(u128::MAX, 7, 7) == u128::MAX && pro_rata(u128::MAX, 0, 7) == 0);
    }
}
