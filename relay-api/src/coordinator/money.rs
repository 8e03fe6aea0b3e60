//! The arithmetic of sessions, exactly: integer service-credit micros, no floating point.
//!
//! A session is one funded period. When its period ends (or the deployment stops early) it
//! is settled: the time the route did not serve is `unserved_ms`; the unserved part of the
//! price is refundable, the rest is spent and split between the gateway operator's reward
//! and the service's share.
//!
//! Rounding: every division rounds down (toward zero), and the remainder goes to the other
//! side of the split, so the parts always add up to the whole exactly. The customer's
//! refundable part is `floor(price × unserved / period)`: at most 1 micro of an unserved
//! period stays spent. The operator's reward is `floor(served × share / 10,000)`: at most
//! 1 micro of a reward goes to the service instead.

use serde::{Deserialize, Serialize};

use super::model::{Funding, Session, SessionState};

/// The economic rules a coordinator runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Terms {
    /// The gateway operator's share of a served period, in basis points (7,000 = 70%).
    pub reward_share_bps: u32,
    /// Downtime within a period up to this share of it (basis points) counts as served;
    /// beyond it, all of the downtime is unserved and refundable. A stop always makes the
    /// rest of the period unserved.
    pub downtime_tolerance_bps: u32,
    /// How long after a period settles its reward becomes claimable, milliseconds.
    pub settlement_delay_ms: u64,
}

impl Default for Terms {
    fn default() -> Terms {
        Terms { reward_share_bps: 7_000, downtime_tolerance_bps: 500, settlement_delay_ms: 24 * 3600 * 1000 }
    }
}

/// How a settled session's price divides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settlement {
    /// Returned to the customer on request.
    pub unserved_micros: u64,
    /// To the gateway operator.
    pub reward_micros: u64,
    /// To the service.
    pub service_micros: u64,
}

fn mul_div_floor(a: u64, b: u64, c: u64) -> u64 {
    if c == 0 {
        return 0;
    }
    // u128: the product of two u64 cannot overflow it.
    u64::try_from(u128::from(a) * u128::from(b) / u128::from(c)).unwrap_or(u64::MAX)
}

/// Downtime that counts against a period: all of it when it passes the tolerance, none
/// otherwise.
pub fn counted_downtime(downtime_ms: u64, period_ms: u64, tolerance_bps: u32) -> u64 {
    // downtime / period > tolerance / 10,000, without division.
    let beyond = u128::from(downtime_ms) * 10_000 > u128::from(period_ms) * u128::from(tolerance_bps);
    if beyond { downtime_ms.min(period_ms) } else { 0 }
}

/// Settles a period of `price` lasting `period_ms`, of which `unserved_ms` went unserved
/// (already after the tolerance: see [`counted_downtime`]).
pub fn settle(price: u64, period_ms: u64, unserved_ms: u64, terms: &Terms) -> Settlement {
    let unserved = mul_div_floor(price, unserved_ms.min(period_ms), period_ms);
    let served = price - unserved;
    let reward = mul_div_floor(served, u64::from(terms.reward_share_bps.min(10_000)), 10_000);
    Settlement { unserved_micros: unserved, reward_micros: reward, service_micros: served - reward }
}

/// What of a session's price is spent and what is refundable, from its state and its
/// unserved and refunded parts.
pub fn session_parts(state: SessionState, price: u64, unserved: u64, refunded: u64) -> (u64, u64) {
    match state {
        SessionState::Funded => (0, price.saturating_sub(refunded)),
        SessionState::Active => (price, 0),
        SessionState::Settled => (price - unserved.min(price), unserved.saturating_sub(refunded)),
    }
}

/// `funds_low` holds when the funded periods end within this share of one period (a quarter:
/// 15 minutes of the default hour). Less than one period, so a deployment just funded for one
/// period never shows it; docs/ingress-economics.md.
pub const FUNDS_LOW_SHARE: (u64, u64) = (1, 4);

/// How long a deployment's funding lasts at `now` (Unix ms), from its sessions (in funding
/// order); `runs` is whether it runs a job (else it burns nothing).
pub fn funding(sessions: &[Session], runs: bool, now: i64) -> Funding {
    let active = sessions.iter().find(|s| s.state == SessionState::Active);
    let waiting = sessions.iter().filter(|s| s.state == SessionState::Funded);
    let available: u64 = waiting.clone().map(|s| s.refundable_micros).fold(0, u64::saturating_add);
    let waiting_ms: u64 = waiting.clone().map(|s| s.period_ms).fold(0, u64::saturating_add);
    let priced = active.or_else(|| sessions.iter().find(|s| s.state == SessionState::Funded));
    let period_ms = priced.map_or(0, |s| s.period_ms);
    let running = active.and_then(|s| s.ends_at.map(|end| (s, end)));
    let left_of_running = running.map_or(0, |(s, end)| {
        let left = u64::try_from(end.saturating_sub(now)).unwrap_or(0).min(s.period_ms);
        mul_div_floor(s.price_micros, left, s.period_ms)
    });
    let runs_out_at =
        running.filter(|_| runs).map(|(_, end)| end.saturating_add(i64::try_from(waiting_ms).unwrap_or(i64::MAX)));
    let threshold = period_ms / FUNDS_LOW_SHARE.1 * FUNDS_LOW_SHARE.0;
    let low = runs_out_at.is_some_and(|end| end.saturating_sub(now) < i64::try_from(threshold).unwrap_or(i64::MAX));
    Funding {
        remaining_micros: available.saturating_add(left_of_running),
        burn_micros_per_day: if runs {
            priced.map_or(0, |s| svc_execution::money::per_day(s.price_micros, s.period_ms))
        } else {
            0
        },
        runs_out_at,
        period_ms,
        low,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_always_add_up_and_round_down() {
        let terms = Terms::default();
        let s = settle(250_000, 3_600_000, 600_000, &terms);
        assert_eq!(s, Settlement { unserved_micros: 41_666, reward_micros: 145_833, service_micros: 62_501 });
        for (price, period, unserved) in [(1, 3, 1), (7, 3_600_000, 1), (u64::MAX, 1_000, 999), (0, 10, 5), (10, 0, 0)]
        {
            let s = settle(price, period, unserved, &terms);
            assert_eq!(s.unserved_micros + s.reward_micros + s.service_micros, price, "{price} {period} {unserved}");
        }
    }

    fn session(state: SessionState, ends_at: Option<i64>) -> Session {
        Session {
            id: "ses_1".into(),
            deployment_id: "dep_1".into(),
            quote_id: "quo_1".into(),
            ordinal: 0,
            price_micros: 250_000,
            period_ms: 3_600_000,
            state,
            period_index: None,
            started_at: ends_at.map(|e| e - 3_600_000),
            ends_at,
            unserved_ms: None,
            unserved_micros: 0,
            refunded_micros: 0,
            reward_micros: 0,
            service_micros: 0,
            settled_at: None,
            spent_micros: if state == SessionState::Active { 250_000 } else { 0 },
            refundable_micros: if state == SessionState::Funded { 250_000 } else { 0 },
        }
    }

    #[test]
    fn funding_lasts_to_the_end_of_the_last_funded_period_and_is_low_only_near_it() {
        let hour = 3_600_000;
        // One period just charged: an hour left, not low.
        let one = [session(SessionState::Active, Some(10 * hour))];
        let f = funding(&one, true, 9 * hour);
        assert_eq!(
            f,
            Funding {
                remaining_micros: 250_000,
                burn_micros_per_day: 6_000_000,
                runs_out_at: Some(10 * hour),
                period_ms: 3_600_000,
                low: false
            }
        );
        // A quarter of the period left is not yet low; a millisecond less is.
        assert!(!funding(&one, true, 10 * hour - hour / 4).low);
        let near = funding(&one, true, 10 * hour - hour / 4 + 1);
        assert!(near.low);
        assert_eq!(near.remaining_micros, 62_499, "prorated, rounded down");
        // Two more periods waiting: the end moves two hours on, and their price is left.
        let three = [
            session(SessionState::Settled, Some(9 * hour)),
            session(SessionState::Active, Some(10 * hour)),
            session(SessionState::Funded, None),
            session(SessionState::Funded, None),
        ];
        let f = funding(&three, true, 10 * hour - 60_000);
        assert_eq!((f.runs_out_at, f.low), (Some(12 * hour), false));
        assert_eq!(f.remaining_micros, 500_000 + 4_166);
        // Stopped: nothing burns and nothing runs out.
        let f = funding(&three, false, 10 * hour - 60_000);
        assert_eq!((f.burn_micros_per_day, f.runs_out_at, f.low), (0, None, false));
        // Funded, not started yet: no end until the first period is charged.
        let waiting = [session(SessionState::Funded, None)];
        let f = funding(&waiting, true, 0);
        assert_eq!(
            (f.remaining_micros, f.burn_micros_per_day, f.runs_out_at, f.low),
            (250_000, 6_000_000, None, false)
        );
        assert_eq!(funding(&[], true, 0), Funding::default());
    }

    #[test]
    fn downtime_within_the_tolerance_counts_as_served() {
        // 5% of an hour is 180 s.
        assert_eq!(counted_downtime(180_000, 3_600_000, 500), 0);
        assert_eq!(counted_downtime(180_001, 3_600_000, 500), 180_001);
        assert_eq!(counted_downtime(5_000_000, 3_600_000, 500), 3_600_000, "never more than the period");
    }
}

#[cfg(test)]
mod worked_examples {
    use super::*;

    /// The economics document, whose examples this test recomputes.
    const DOC: &str = include_str!("../../../docs/ingress-economics.md");

    /// The JSON block after each `<!-- marker -->` line.
    fn blocks(marker: &str) -> Vec<serde_json::Value> {
        DOC.split(marker)
            .skip(1)
            .map(|rest| {
                let start = rest.find("```json").map(|i| i + 7).expect("a json block after the marker");
                let end = rest[start..].find("```").expect("the block's end") + start;
                serde_json::from_str(&rest[start..end]).expect("the example is JSON")
            })
            .collect()
    }

    fn n(v: &serde_json::Value, key: &str) -> u64 {
        v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
    }

    #[test]
    fn worked_examples_in_the_economics_doc_are_exact() {
        let examples = blocks("<!-- example -->");
        assert!(examples.len() >= 4, "the document has its examples");
        for e in &examples {
            let period_ms = n(e, "periodSecs") * 1000;
            let terms = Terms {
                reward_share_bps: u32::try_from(n(e, "rewardShareBps")).unwrap_or(0),
                downtime_tolerance_bps: u32::try_from(n(e, "toleranceBps")).unwrap_or(0),
                settlement_delay_ms: 0,
            };
            let cut = e["stoppedAfterSecs"].as_u64().map_or(0, |s| period_ms - s * 1000);
            let counted = counted_downtime(n(e, "downtimeSecs") * 1000, period_ms, terms.downtime_tolerance_bps);
            let s = settle(n(e, "priceMicros"), period_ms, counted + cut, &terms);
            assert_eq!(
                (s.unserved_micros, s.reward_micros, s.service_micros),
                (n(e, "unservedMicros"), n(e, "rewardMicros"), n(e, "serviceMicros")),
                "{e}"
            );
        }
        let ledgers = blocks("<!-- ledger -->");
        assert_eq!(ledgers.len(), 1);
        let l = &ledgers[0];
        let sessions = l["sessions"].as_array().expect("sessions");
        let (mut spent, mut refundable, mut rewards, mut service) = (0, 0, 0, 0);
        for s in sessions {
            let price = n(s, "priceMicros");
            if s["state"] == "funded" {
                refundable += price;
            } else {
                spent += price - n(s, "unservedMicros");
                refundable += n(s, "unservedMicros");
                assert_eq!(n(s, "unservedMicros") + n(s, "rewardMicros") + n(s, "serviceMicros"), price, "{s}");
            }
            rewards += n(s, "rewardMicros");
            service += n(s, "serviceMicros");
        }
        assert_eq!(
            (spent, refundable, rewards, service),
            (n(l, "spent"), n(l, "refundable"), n(l, "rewards"), n(l, "service"))
        );
        assert_eq!(n(l, "funded"), spent + refundable + n(l, "refunded"));
        assert_eq!(spent, rewards + service);
        // The examples of the ledger are the first and third settlements above.
        assert_eq!(n(&sessions[0], "unservedMicros"), n(&examples[0], "unservedMicros"));
        assert_eq!(n(&sessions[1], "unservedMicros"), n(&examples[2], "unservedMicros"));
    }
}
