//! Charges follow the paid window, not the attempt (issue 41): after the service's own crash
//! (the local pool's jobs die with it), the slot's new attempt in the same window is not
//! charged again, and the time nothing served is refunded as entries of their own.

mod common;

use std::sync::Arc;

use common::*;
use svc_execution::executor::Executor;
use svc_execution::market::Quote;
use svc_execution::plan::{Rate, SpendAuthority};
use svc_execution::{ExecState, Market, Millis, SimulatedPool};

/// 10,000 micros an hour: one window of the plan.
const PRICE: u128 = 10_000;

fn world() -> (World, Arc<SimulatedPool>) {
    let pool = Arc::new(SimulatedPool::new(2, 4, PRICE));
    (World::with_market(Arc::clone(&pool), Arc::new(StartsEmpty(Arc::clone(&pool)))), pool)
}

/// `kill -9` of the service at the clock's time (its jobs die with it), `down` ms of nothing,
/// then a new service that recovers and steps.
fn crash_and_restart(w: &mut World, pool: &Arc<SimulatedPool>, down: Millis) {
    for (id, _, _) in pool.running() {
        pool.lose(&id);
        pool.release(&id);
    }
    w.clock.advance(down);
    w.executor = Executor::new(
        Arc::clone(&w.store) as Arc<_>,
        Arc::new(StartsEmpty(Arc::clone(pool))),
        Arc::new(w.clock.clone()),
        64,
    );
    w.executor.recover().expect("recovers");
    w.settle().expect("settles");
}

/// As if the service died between each launch and the record of its placement.
fn in_flight(w: &World) {
    w.store.edit(|s| {
        for (_, e) in s.executions.values_mut() {
            e.state = ExecState::Launching;
            e.processor_id = None;
        }
    });
}

/// Charges and refunds of application 1's slot 0, generation `generation`.
fn ledger(w: &World, generation: u64) -> (Vec<u128>, Vec<u128>) {
    let state = w.store.snapshot();
    let of = |refund: bool| {
        state
            .ledger
            .iter()
            .filter(|(app, _, c, r)| *app == 1 && c.slot == 0 && c.generation == generation && *r == refund)
            .map(|(_, _, c, _)| c.quote.service_credit_micros)
            .collect::<Vec<_>>()
    };
    (of(false), of(true))
}

#[test]
fn three_crashes_of_the_service_in_one_window_charge_the_window_once_and_refund_the_downtime() {
    let (mut w, pool) = world();
    // A rate that this window and the next fit (net of the refunds: 7,500 + 10,000), but not
    // a charge per attempt: before, the second relaunch's new charge blocked the slot
    // (`spend_authority_exceeded`).
    let mut p = plan(1, continuous());
    p.spend = SpendAuthority { rate: Some(Rate { amount_micros: 18_000, window_ms: 2 * HOUR }), ..p.spend };
    w.publish(1, p);
    w.settle().expect("settles");
    w.all_ready();
    let first = w.live(1)[0].clone();
    assert_eq!(first.charged.service_credit_micros, PRICE);
    // Alive (stepping) until minute 10, 20 and 30; down 5 minutes each time.
    for (crash, n) in [(10, 2), (20, 3), (30, 4)] {
        w.run_until(T0 + crash * MINUTE).expect("runs");
        crash_and_restart(&mut w, &pool, 5 * MINUTE);
        let live = w.live(1);
        assert_eq!(live.len(), 1, "crash at minute {crash}: the slot runs again");
        assert_eq!((live[0].generation, live[0].attempt), (1, n), "the same generation, a new attempt");
        assert_eq!(live[0].charged, Quote::default(), "not charged again");
        assert_eq!(live[0].window_end, first.window_end, "within the paid window");
        assert_eq!(w.app(1).blocked, None, "crash at minute {crash}");
        w.all_ready();
    }
    let (charges, refunds) = ledger(&w, 1);
    assert_eq!(charges, [PRICE], "one window, one charge");
    // 3 x 5 minutes of an hour, each gap from the last heartbeat to the relaunch.
    assert_eq!(refunds.len(), 3, "each gap its own entry: {refunds:?}");
    assert_eq!(refunds.iter().sum::<u128>(), PRICE * 15 / 60);
    // Served 45 of 60 minutes: charged net at most that, plus a micro of rounding.
    assert!(PRICE - refunds.iter().sum::<u128>() <= PRICE * 45 / 60 + 1);
    // The renewal is a new window, charged as one.
    w.run_until(T0 + HOUR).expect("runs");
    assert_eq!(ledger(&w, 2).0, [PRICE], "the next window is charged once");
    assert_eq!(w.app(1).blocked, None);
}

#[test]
fn a_service_down_past_its_windows_end_refunds_the_rest_of_the_window_once() {
    let (mut w, pool) = world();
    w.publish(1, plan(1, continuous()));
    w.settle().expect("settles");
    w.run_until(T0 + 30 * MINUTE).expect("runs");
    // Down for 40 minutes: the window ended while nothing ran it.
    crash_and_restart(&mut w, &pool, 40 * MINUTE);
    w.advance(MINUTE);
    let (charges, refunds) = ledger(&w, 1);
    assert_eq!(charges, [PRICE]);
    assert_eq!(refunds, [PRICE / 2], "minute 30 to the window's end, once");
    assert_eq!(w.in_state(1, ExecState::Failed).len(), 1, "no attempt in a window that ended");
    assert_eq!(ledger(&w, 2).0, [PRICE], "the next window is charged");
}

#[test]
fn a_free_relaunch_the_market_refuses_is_retried_free_and_its_wait_is_refunded_too() {
    let (mut w, pool) = world();
    w.publish(1, plan(1, continuous()));
    w.settle().expect("settles");
    w.run_until(T0 + 10 * MINUTE).expect("runs");
    pool.set_refuse_all(true);
    crash_and_restart(&mut w, &pool, 5 * MINUTE);
    assert!(w.live(1).is_empty(), "refused");
    // The retry comes a second later (backoff), free as well.
    pool.set_refuse_all(false);
    w.advance(6 * MINUTE);
    let live = w.live(1);
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].charged, Quote::default());
    let (charges, refunds) = ledger(&w, 1);
    assert_eq!(charges, [PRICE], "no refund of a zero charge, no second charge");
    // From minute 10 to the retry, a second after minute 15.
    let unserved: Millis = live[0].created_at - (T0 + 10 * MINUTE);
    assert_eq!(refunds.iter().sum::<u128>(), PRICE * u128::from(unserved) / u128::from(HOUR));
}

/// Issue 41: a job launched in the moments before a `kill -9` of the service (its intent
/// committed as `launching`, its outcome never recorded) died with the service; recovery
/// finds the row and sends it again under its own ID, charged once, and refunds the time
/// nothing ran.
#[test]
fn a_launching_row_whose_job_died_with_the_service_is_found_at_recovery_and_sent_again_not_charged_again() {
    let (mut w, pool) = world();
    w.publish(1, plan(1, continuous()));
    w.settle().expect("settles");
    in_flight(&w);
    crash_and_restart(&mut w, &pool, MINUTE);
    let executions = w.executions(1);
    assert_eq!(executions.len(), 1, "sent again under its own ID: {executions:?}");
    assert_eq!((executions[0].attempt, executions[0].state), (1, ExecState::Running), "recovery found it");
    let (charges, refunds) = ledger(&w, 1);
    assert_eq!(charges, [PRICE]);
    assert_eq!(refunds, [PRICE / 60], "the minute nothing ran");
}

/// Issue 41, found by the publication chaos suite (`tests/publication/chaos.rs`, seed 1): a
/// `kill -9` while a renewal ran ahead of its window (launched a lead before the
/// predecessor's end) left the predecessor's window unrefunded for the outage. Recovery
/// relaunched only the newest generation, whose window does not hold that time: 1.6 s of a
/// 4 s window was charged for nothing served. Now recovery refunds the predecessor's stretch.
#[test]
fn a_crash_while_a_renewal_runs_ahead_refunds_the_predecessors_window_too() {
    let (mut w, pool) = world();
    let mut p = plan(1, continuous());
    // The predecessor serves to its window's end beside its successor (launched at minute 50).
    p.update.existing_jobs = svc_execution::plan::ExistingJobs::RunUntilScheduledEnd;
    w.publish(1, p);
    w.settle().expect("settles");
    // A first crash (minutes 20-25): generation 1 goes on as a free attempt 2, whose charge is
    // attempt 1's (which the store's view of the application no longer holds once a newer
    // generation exists).
    w.run_until(T0 + 20 * MINUTE).expect("runs");
    crash_and_restart(&mut w, &pool, 5 * MINUTE);
    w.run_until(T0 + 55 * MINUTE).expect("runs");
    assert_eq!(w.live(1).len(), 2, "the predecessor and its renewal run");
    // Down from minute 55 to 65: minutes 55-60 of generation 1's window, 60-65 of generation 2's.
    crash_and_restart(&mut w, &pool, 10 * MINUTE);
    let live = w.live(1);
    assert_eq!(live.len(), 1, "the newest generation runs again: {live:?}");
    assert_eq!((live[0].generation, live[0].attempt, live[0].charged), (2, 2, Quote::default()));
    let five = PRICE * 5 / 60;
    assert_eq!(ledger(&w, 1), (vec![PRICE], vec![five, five]), "generation 1: minutes 20-25 and 55-60");
    assert_eq!(ledger(&w, 2), (vec![PRICE], vec![five]), "generation 2: minutes 60-65");
    // Asked again (another step, another recovery), nothing more.
    w.advance(MINUTE);
    assert_eq!(ledger(&w, 1).1, [five, five]);
}

/// svc-sim `over-refund` (seed 18, 466 of 40,000 seeds): a launch in flight at a crash had
/// the stretch before its recovery refunded, then the market refused it when recovery sent
/// it again, and the refusal refunded its whole charge too: 3,603 refunded of 3,600. Now a
/// refusal refunds what remains of the charge.
#[test]
fn a_launch_in_flight_at_a_crash_that_the_market_then_refuses_is_refunded_its_charge_once() {
    let (mut w, pool) = world();
    w.publish(1, plan(1, continuous()));
    w.settle().expect("settles");
    in_flight(&w);
    pool.set_refuse_all(true);
    crash_and_restart(&mut w, &pool, MINUTE);
    let (charges, refunds) = ledger(&w, 1);
    assert_eq!(charges, [PRICE]);
    assert_eq!(refunds.iter().sum::<u128>(), PRICE, "refunded once in all: {refunds:?}");
    assert_eq!(refunds, [PRICE / 60, PRICE - PRICE / 60], "the minute, then what remained");
}

/// svc-sim `dropped-slot-outage` (seed 27, 139 of 40,000 seeds): a job still serving its
/// window in a slot a newer version removed died with the service; nothing relaunched it (the
/// scheduler decides for the plan's slots only), and nothing of its window was refunded. Now
/// the rest of its window is refunded once it ends.
#[test]
fn a_job_of_a_dropped_slot_that_dies_with_the_service_is_refunded_the_rest_of_its_window() {
    let (mut w, pool) = world();
    let mut p = plan(2, continuous());
    p.update.existing_jobs = svc_execution::plan::ExistingJobs::RunUntilScheduledEnd;
    w.publish(1, p.clone());
    w.settle().expect("settles");
    w.all_ready();
    w.run_until(T0 + 10 * MINUTE).expect("runs");
    // Version 2 has one slot: slot 1's job runs to its window's end.
    let mut fewer = p;
    fewer.slots = 1;
    fewer.policy_version = 2;
    w.publish(1, fewer);
    w.settle().expect("settles");
    assert_eq!(w.live(1).iter().filter(|e| e.slot == 1).count(), 1, "slot 1 runs on: {:?}", w.live(1));
    w.run_until(T0 + 30 * MINUTE).expect("runs");
    crash_and_restart(&mut w, &pool, 5 * MINUTE);
    assert!(w.live(1).iter().all(|e| e.slot == 0), "slot 1 is not relaunched");
    // Refunded once its window is over, as a paused application's is.
    w.run_until(T0 + 61 * MINUTE).expect("runs");
    let state = w.store.snapshot();
    let slot_one = |refund: bool| -> Vec<u128> {
        let of = |c: &svc_execution::record::Charge, r: bool| c.slot == 1 && r == refund;
        state.ledger.iter().filter(|(_, _, c, r)| of(c, *r)).map(|(_, _, c, _)| c.quote.service_credit_micros).collect()
    };
    assert_eq!(slot_one(false), [PRICE]);
    // Dead from minute 30 (its last heartbeat) to its window's end at minute 60: half of it.
    assert_eq!(slot_one(true), [PRICE / 2], "the rest of its window");
}
