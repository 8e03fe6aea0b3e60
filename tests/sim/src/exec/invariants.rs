//! What must hold after every step of the scheduler and executor, read from what the store
//! committed and what the pool really runs (`docs/simulation.md` says why each holds):
//!
//! 1. each attempt (`{app}/{slot}/{generation}/{attempt}`) is started at most once by a pool
//!    (a pool that starts empty is a new pool after each crash: its jobs died with it);
//! 2. never two live attempts of one slot generation, in the pool, nor (once recovered) in
//!    the store;
//! 3. once recovered, every job the pool runs is a live execution of the store;
//! 4. money, per application and slot generation: refunds never pass charges (nor, per
//!    charged attempt, its charge), each refunded stretch lies within its charged attempt's
//!    window and none overlaps another of that attempt, and
//!    `charged - refunded <= price x (served time - outage) + 1 micro a charge and an outage`,
//!    where a generation's served time is the window of its first attempt and of each
//!    attempt after one the market ended (a failure, a loss, a dead processor: the
//!    customer's risk, paid again by design), but not of an attempt after one that died with
//!    the service, and its outage is, once its window is over, every stretch of the window of
//!    an attempt of it that died with the service (serving, not stopping, and not being
//!    replaced by an update) from the service's true death to its recovery;
//! 5. spend limits: no net charge above `perJob`, no generation above `perGeneration`, no
//!    trailing rate window above `rate`.

use std::collections::BTreeMap;

use svc_execution::memory::MemoryState;
use svc_execution::plan::SpendAuthority;
use svc_execution::{AppKey, ExecKey, ExecState, Execution, Millis};

use super::faults::parse_id;
use super::world::World;

const HOUR_MS: u128 = 3_600_000;

/// An invariant broken: its code (`docs/simulation.md`) and what was seen.
#[derive(Debug, Clone)]
pub(crate) struct Broken {
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

fn broken(code: &'static str, message: String) -> Broken {
    Broken { code, message }
}

/// Checks every invariant; the first broken one, in a sentence.
pub(crate) fn check(w: &World) -> Result<(), Broken> {
    w.memory.read(|state| check_state(w, state))
}

fn check_state(w: &World, state: &MemoryState) -> Result<(), Broken> {
    let pool = w.market.pool();
    let alive = !w.faults.dead() && w.recovered;

    // 1. Each attempt started at most once.
    if let Some(id) = pool.started_twice().first() {
        return Err(broken("started-twice", format!("execution {id} was started twice by the market")));
    }

    // 2. Never two live attempts of one slot generation.
    let running = pool.running();
    let mut per_generation: BTreeMap<(String, u16, u64), Vec<&str>> = BTreeMap::new();
    for (id, _, _) in &running {
        let Some((uid, slot, generation, _)) = parse_id(id) else {
            return Err(broken("unowned-job", format!("the market runs {id}, which is no execution ID")));
        };
        per_generation.entry((uid, slot, generation)).or_default().push(id);
    }
    if let Some(ids) = per_generation.values().find(|ids| ids.len() > 1) {
        return Err(broken("two-live", format!("two attempts of one slot generation run in the market: {ids:?}")));
    }
    if alive {
        let by_id: BTreeMap<&str, (AppKey, &Execution)> =
            state.executions.values().map(|(app, e)| (e.execution_id.as_str(), (*app, e))).collect();
        let mut live: BTreeMap<(AppKey, u16, u64), Vec<&str>> = BTreeMap::new();
        for (app, e) in state.executions.values().filter(|(_, e)| e.state.is_live()) {
            live.entry((*app, e.slot, e.generation)).or_default().push(&e.execution_id);
        }
        if let Some(ids) = live.values().find(|ids| ids.len() > 1) {
            return Err(broken("two-live", format!("two live attempts of one slot generation in the store: {ids:?}")));
        }

        // 3. No job the store does not own.
        for (id, processor, _) in &running {
            match by_id.get(id.as_str()) {
                Some((_, e)) if e.state.is_live() => {}
                found => {
                    let state = found.map(|(_, e)| e.state.as_str()).unwrap_or("unknown");
                    return Err(broken(
                        "unowned-job",
                        format!("the market runs {id} on {processor}, which the store records {state}"),
                    ));
                }
            }
        }
    }

    // 6. Once a step finds nothing to do, the store's live executions are what the market runs.
    if alive && w.stepped {
        for e in state.executions.values().map(|(_, e)| e).filter(|e| e.state.is_live()) {
            if e.state != ExecState::Launching && !running.iter().any(|(id, _, _)| *id == e.execution_id) {
                return Err(broken(
                    "lost-report",
                    format!(
                        "the store records {} {} once a step finds nothing to do, but the market no longer runs it",
                        e.execution_id,
                        e.state.as_str()
                    ),
                ));
            }
        }
    }

    // 4. Money.
    let mut net: BTreeMap<ExecKey, (u128, u128)> = BTreeMap::new();
    for (_, exec, charge, refund) in &state.ledger {
        let entry = net.entry(*exec).or_default();
        if *refund {
            entry.1 += charge.quote.service_credit_micros;
        } else {
            entry.0 += charge.quote.service_credit_micros;
        }
    }
    let died = &w.faults.lock().died_with_service;
    // Refunded stretches: within the charged attempt's window, and disjoint.
    let mut last: Option<(ExecKey, Millis)> = None;
    for (&(key, from), &to) in &state.unserved {
        let Some((app, paid)) = state.executions.get(&key) else {
            return Err(broken(
                "refund-outside-window",
                format!("a stretch from {from} refunds unknown execution {key}"),
            ));
        };
        let earlier = last.filter(|(k, end)| *k == key && *end > from);
        if from >= to || from < paid.window_start || to > paid.window_end || earlier.is_some() {
            return Err(broken(
                "refund-outside-window",
                format!(
                    "app{app}: {} refunds [{}, {}), outside its window [{}, {}) or over an earlier stretch",
                    paid.execution_id,
                    from.saturating_sub(super::apps::T0),
                    to.saturating_sub(super::apps::T0),
                    paid.window_start.saturating_sub(super::apps::T0),
                    paid.window_end.saturating_sub(super::apps::T0)
                ),
            ));
        }
        last = Some((key, to));
    }
    if let Some((key, (c, r))) = net.iter().find(|(_, (c, r))| r > c) {
        let id = state.executions.get(key).map_or("?", |(_, e)| e.execution_id.as_str());
        let refunds: Vec<String> = state
            .ledger
            .iter()
            .filter(|(_, k, _, refund)| k == key && *refund)
            .map(|(_, _, r, _)| {
                format!("{} at {}", r.quote.service_credit_micros, r.at.saturating_sub(super::apps::T0))
            })
            .collect();
        let stretches: Vec<String> = state
            .unserved
            .iter()
            .filter(|((k, _), _)| k == key)
            .map(|((_, from), to)| {
                format!("[{}, {})", from.saturating_sub(super::apps::T0), to.saturating_sub(super::apps::T0))
            })
            .collect();
        return Err(broken(
            "over-refund",
            format!(
                "{id} was refunded {r}, more than its charge {c}: refunds {} (stretches {})",
                refunds.join(", "),
                stretches.join(", ")
            ),
        ));
    }
    // Outages are owed once a step that began after the window's end found nothing to do.
    let now = if alive && w.stepped { w.step_at } else { 0 };
    // Whose window an update is replacing: a newer generation of its slot whose window
    // starts before this one's end (its rest is given up for the update, refunded or not).
    let replaced = |app: AppKey, e: &Execution| {
        state
            .executions
            .values()
            .any(|(a, o)| *a == app && o.slot == e.slot && o.generation > e.generation && o.window_start < e.window_end)
    };
    let mut generations: BTreeMap<(AppKey, u16, u64), Vec<&Execution>> = BTreeMap::new();
    for (app, e) in state.executions.values() {
        generations.entry((*app, e.slot, e.generation)).or_default().push(e);
    }
    let mut per_app: BTreeMap<AppKey, (u128, u128)> = BTreeMap::new();
    for ((app, slot, generation), mut attempts) in generations {
        attempts.sort_by_key(|e| e.attempt);
        let (mut charged, mut refunded, mut served, mut served_all) = (0u128, 0u128, 0u128, 0u128);
        let mut after_death = false;
        let mut paid = Vec::new();
        // The time the service's outages took from the generation's windows, once over.
        let (mut outage, mut outages, mut stretches) = (0u128, 0u128, Vec::new());
        for o in &w.outages {
            let Some(to) = o.to else { continue };
            let took = attempts
                .iter()
                .filter(|e| o.jobs.contains(&e.execution_id) && e.window_end <= now)
                .filter(|e| !replaced(app, e))
                // A launch the market then refused is refunded all of its charge, the outage
                // with it (seed 2942: counting its outage again asked for it twice).
                .filter(|e| e.state != ExecState::Refused)
                .map(|e| (o.from.max(e.window_start), to.min(e.window_end)))
                .filter(|(from, to)| from < to)
                .max_by_key(|(from, to)| to - from);
            if let Some((from, to)) = took {
                outage += u128::from(to - from);
                outages += 1;
                stretches.push((from, to));
            }
        }
        for e in &attempts {
            let (c, r) = net.get(&e.key).copied().unwrap_or_default();
            charged += c;
            refunded += r;
            if e.state == ExecState::Refused {
                continue;
            }
            let window = u128::from(e.window_end.saturating_sub(e.window_start));
            let price = (w.price * window).div_ceil(HOUR_MS) + 1;
            served_all += price;
            if !after_death {
                served += price;
                paid.push(e.attempt);
            }
            after_death = died.contains(&e.execution_id);
        }
        let totals = per_app.entry(app).or_default();
        totals.0 += charged;
        totals.1 += refunded;
        if refunded > charged {
            return Err(broken(
                "refund-over-charge",
                format!("app{app} slot {slot} generation {generation}: refunded {refunded} > charged {charged}"),
            ));
        }
        // The outage at the price, rounded down; refunds round down once on a chain's total
        // and once more per launch in flight: a micro an outage.
        let unserved = (w.price * outage) / HOUR_MS;
        let whole = served;
        let (served, served_all) =
            ((served + outages).saturating_sub(unserved), (served_all + outages).saturating_sub(unserved));
        if charged - refunded > served {
            // Served time counting every attempt: if the charge fits that, what passes is
            // the charge of a relaunch after the service's crash (issue 41). An outage left
            // unrefunded in a slot the application's plan no longer has: a finding of its own.
            let dropped = w.plans.get(&app).is_some_and(|plan| slot >= plan.slots);
            let code = if dropped && charged - refunded <= whole {
                "dropped-slot-outage"
            } else if charged - refunded <= served_all {
                "charged-again-after-crash"
            } else {
                "money"
            };
            let at = |t: Millis| t.saturating_sub(super::apps::T0);
            let stretches: Vec<String> =
                stretches.iter().map(|(from, to)| format!("[{}, {})", at(*from), at(*to))).collect();
            let rows: Vec<String> = attempts
                .iter()
                .map(|e| {
                    let (c, r) = net.get(&e.key).copied().unwrap_or_default();
                    let gaps: Vec<String> = state
                        .unserved
                        .iter()
                        .filter(|((k, _), _)| *k == e.key)
                        .map(|((_, from), to)| format!("[{}, {})", at(*from), at(*to)))
                        .collect();
                    format!(
                        "{} {} [{}, {}) charged {c} refunded {r} (stretches {}) {}",
                        e.execution_id,
                        e.state.as_str(),
                        at(e.window_start),
                        at(e.window_end),
                        gaps.join(", "),
                        e.reason.as_ref().map_or("", |r| r.code.as_str())
                    )
                })
                .collect();
            return Err(broken(
                code,
                format!(
                    "money: app{app} slot {slot} generation {generation} was charged {charged} and refunded {refunded}, \
                 but (served time - outage) x price (+1 a charge and an outage) is {served} (attempts paid for: \
                 {paid:?}; outage {outage} ms: {}): {}",
                    stretches.join(", "),
                    rows.join("; ")
                ),
            ));
        }
    }
    if let Some((app, (charged, refunded))) = per_app.iter().find(|(_, (c, r))| r > c) {
        return Err(broken(
            "refund-over-charge",
            format!("app{app} was refunded {refunded}, more than its charges {charged}"),
        ));
    }

    // 5. Spend limits.
    for (app, plan) in &w.plans {
        let charges: Vec<(u16, u64, Millis, u128)> = state
            .ledger
            .iter()
            .filter(|(a, _, _, refund)| a == app && !refund)
            .filter_map(|(_, exec, c, _)| {
                let (charged, refunded) = net.get(exec).copied().unwrap_or_default();
                let left = charged.saturating_sub(refunded);
                (left > 0).then_some((c.slot, c.generation, c.at, left))
            })
            .collect();
        spend(*app, &plan.spend, &charges).map_err(|m| broken("spend", m))?;
    }
    Ok(())
}

fn spend(app: AppKey, limits: &SpendAuthority, charges: &[(u16, u64, Millis, u128)]) -> Result<(), String> {
    let mut per_generation: BTreeMap<(u16, u64), u128> = BTreeMap::new();
    for &(slot, generation, at, micros) in charges {
        if let Some(max) = limits.per_job_micros.filter(|&max| micros > max) {
            return Err(format!("app{app}: a charge of {micros} passes perJob {max}"));
        }
        *per_generation.entry((slot, generation)).or_default() += micros;
        if let Some(rate) = limits.rate {
            let within: u128 = charges.iter().filter(|o| o.2 <= at && o.2 + rate.window_ms > at).map(|o| o.3).sum();
            if within > rate.amount_micros {
                return Err(format!(
                    "app{app}: {within} charged within {} ms passes rate {}",
                    rate.window_ms, rate.amount_micros
                ));
            }
        }
    }
    if let Some(max) = limits.per_generation_micros
        && let Some(((slot, generation), sum)) = per_generation.iter().find(|(_, sum)| **sum > max)
    {
        return Err(format!("app{app} slot {slot} generation {generation}: {sum} charged passes perGeneration {max}"));
    }
    Ok(())
}
