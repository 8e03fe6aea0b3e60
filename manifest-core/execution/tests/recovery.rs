//! A crash of the service at each point of a launch and a stop, then a restart: what was
//! recorded but not sent is sent once, what was sent but not recorded is adopted, and a job
//! the store does not know is stopped.

mod common;

use std::sync::Arc;

use common::*;
use svc_execution::market::{JobOrder, Workload};
use svc_execution::{ExecState, Market, SimulatedPool};

fn world() -> (World, Arc<Crashing>) {
    World::crashable(SimulatedPool::new(2, 4, 1_000))
}

fn restart(w: &mut World, crashing: &Arc<Crashing>) -> svc_execution::executor::RecoveryReport {
    let report = w.restart(crashing);
    w.settle().expect("settles");
    report
}
#[test]
fn a_launch_recorded_but_never_sent_is_sent_once_after_a_restart() {
    let (mut w, crashing) = world();
    w.publish(1, plan(1, continuous()));
    crashing.arm(1, false);
    assert!(w.settle().is_err(), "the service died sending the launch");
    assert_eq!(w.pool.launches(), 0);
    assert_eq!(w.in_state(1, ExecState::Launching).len(), 1, "the intent was committed");
    let report = restart(&mut w, &crashing);
    assert_eq!((report.relaunched, report.adopted), (1, 0));
    assert_eq!(w.pool.launches(), 1);
    assert_eq!(w.in_state(1, ExecState::Running).len(), 1);
}

#[test]
fn a_launch_sent_but_never_recorded_is_adopted_not_repeated() {
    let (mut w, crashing) = world();
    w.publish(1, plan(1, continuous()));
    crashing.arm(1, true);
    assert!(w.settle().is_err());
    assert_eq!(w.pool.launches(), 1, "the launch landed");
    let report = restart(&mut w, &crashing);
    assert_eq!((report.relaunched, report.adopted), (0, 1));
    assert_eq!(w.pool.launches(), 1, "not launched again");
    assert!(w.pool.started_twice().is_empty());
    assert_eq!(w.in_state(1, ExecState::Running).len(), 1);
}

#[test]
fn a_stop_recorded_but_never_sent_is_sent_after_a_restart() {
    let (mut w, crashing) = world();
    w.publish(1, plan(1, continuous()));
    w.settle().expect("settles");
    w.clock.set(T0 + HOUR);
    // The stop of the ended window is the first call: the process dies making it, and the
    // renewal launch recorded with it is never sent either.
    crashing.arm(1, false);
    assert!(w.settle().is_err());
    assert_eq!(w.in_state(1, ExecState::Stopping).len(), 1);
    assert_eq!(w.in_state(1, ExecState::Launching).len(), 1);
    assert_eq!(w.pool.running().len(), 1, "the old job still runs");
    restart(&mut w, &crashing);
    let running = w.pool.running();
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!(w.live(1).len(), 1);
    assert_eq!(w.live(1)[0].generation, 2);
}

#[test]
fn a_job_the_store_does_not_know_is_stopped_at_restart() {
    let (mut w, crashing) = world();
    let stray = JobOrder {
        execution_id: "nobody/0/1/1".into(),
        window_end: T0 + HOUR,
        requirements: Default::default(),
        avoid: Vec::new(),
        workload: Workload::default(),
    };
    w.pool.launch(&stray).expect("launches");
    let report = restart(&mut w, &crashing);
    assert_eq!(report.orphans_stopped, 1);
    assert!(w.pool.running().is_empty());
    assert!(w.pool.jobs().is_empty(), "released");
}

#[test]
fn a_job_lost_while_the_service_was_down_is_recorded_failed() {
    let (mut w, crashing) = world();
    w.publish(1, plan(1, continuous()));
    w.settle().expect("settles");
    let id = w.live(1)[0].execution_id.clone();
    w.pool.lose(&id);
    w.pool.release(&id);
    let report = restart(&mut w, &crashing);
    assert_eq!(report.lost, 1);
    let e = w.executions(1).into_iter().find(|e| e.execution_id == id).expect("recorded");
    assert_eq!(e.state, ExecState::Failed);
    assert_eq!(e.reason.expect("why").code, "lost");
}

/// The service dies with its processors (`first`'s job with them) and is back at `at`: a new
/// executor recovers, finding the job lost.
fn restart_after_losing(w: &mut World, pool: &Arc<SimulatedPool>, first: &svc_execution::Execution, at: u64) {
    pool.lose(&first.execution_id);
    pool.release(&first.execution_id);
    w.clock.set(at);
    w.executor = svc_execution::executor::Executor::new(
        Arc::clone(&w.store) as Arc<_>,
        Arc::new(StartsEmpty(Arc::clone(pool))),
        Arc::new(w.clock.clone()),
        64,
    );
    assert_eq!(w.executor.recover().expect("recovers").lost, 1);
}

#[test]
fn a_job_that_stopped_with_the_service_gets_a_new_attempt_for_the_rest_of_its_window() {
    let pool = Arc::new(SimulatedPool::new(2, 4, 1_000));
    let mut w = World::with_market(Arc::clone(&pool), Arc::new(StartsEmpty(Arc::clone(&pool))));
    w.publish(1, plan(1, continuous()));
    w.settle().expect("settles");
    let first = w.live(1)[0].clone();
    // The service dies and its processors with it.
    restart_after_losing(&mut w, &pool, &first, T0 + 10 * MINUTE);
    w.settle().expect("settles");
    let live = w.live(1);
    assert_eq!(live.len(), 1);
    assert_eq!((live[0].generation, live[0].attempt), (1, 2), "the same generation, a new attempt");
    assert_eq!((live[0].window_start, live[0].window_end), (T0 + 10 * MINUTE, first.window_end));
    assert!(pool.started_twice().is_empty());
}

/// Simulation seed 3 (docs/simulation.md): a job's report taken from the market while the
/// store failed was dropped with the failed step, and the store kept the ended job `running`
/// until the service restarted (its slot never replaced, the ended job never released).
#[test]
fn a_job_that_ends_while_the_store_is_down_is_recorded_once_the_store_is_back() {
    let w = World::new();
    w.publish(1, plan(1, continuous()));
    w.settle().expect("settles");
    w.all_ready();
    let id = w.live(1)[0].execution_id.clone();
    w.store.crash();
    w.pool.exit(&id, 1);
    assert!(w.settle().is_err(), "the step fails with the store");
    assert!(w.settle().is_err(), "and the next one");
    w.store.restart();
    w.settle().expect("settles");
    let ended = w.executions(1).into_iter().find(|e| e.execution_id == id).expect("the execution");
    assert_eq!(ended.state, ExecState::Failed, "{ended:?}");
    assert!(w.pool.running().iter().all(|(job, _, _)| *job != id), "the ended job is released");
}

/// Publication chaos on PostgreSQL, seed 1778901580: the service came back (after waiting out
/// the killed instance's lease) with 0.7 s left of a window whose renewal was already due.
/// Its relaunched attempt held the renewal back by the launch spacing, counted from that
/// attempt, past the window's end: the slot ran nothing between the two. The spacing is
/// between generations, so the renewal launches at once, before the window ends.
#[test]
fn a_window_relaunched_after_its_renewal_was_due_is_renewed_before_it_ends() {
    let pool = Arc::new(SimulatedPool::new(2, 4, 1_000));
    let mut w = World::with_market(Arc::clone(&pool), Arc::new(StartsEmpty(Arc::clone(&pool))));
    w.publish(1, plan(1, continuous()));
    w.settle().expect("settles");
    let first = w.live(1)[0].clone();
    // The service dies with its processors and is back 500 ms before the window ends, long
    // after its renewal (10 minutes ahead) was due.
    restart_after_losing(&mut w, &pool, &first, first.window_end - 500);
    w.settle().expect("settles");
    let live = w.live(1);
    let attempts: Vec<(u64, u32)> = live.iter().map(|e| (e.generation, e.attempt)).collect();
    assert_eq!(attempts, [(1, 2), (2, 1)], "the window's rest relaunched, and its renewal launched with it");
    assert_eq!((live[1].window_start, live[1].window_end), (first.window_end, first.window_end + HOUR));
    assert!(pool.started_twice().is_empty());
}

/// SPEC execution `interval`: "the next starts on the cadence". An occurrence relaunched
/// after a restart of the service starts late (the rest of its window); the cadence is its
/// generation's, not the relaunch's, so the next occurrence is not pushed back by the outage.
#[test]
fn an_interval_occurrence_relaunched_late_keeps_the_next_on_its_cadence() {
    let pool = Arc::new(SimulatedPool::new(2, 4, 1_000));
    let mut w = World::with_market(Arc::clone(&pool), Arc::new(StartsEmpty(Arc::clone(&pool))));
    let mut p = plan(1, svc_execution::plan::Mode::Interval { every_ms: 2 * HOUR, until: None });
    p.window_ms = HOUR;
    w.publish(1, p);
    w.settle().expect("settles");
    let first = w.live(1)[0].clone();
    restart_after_losing(&mut w, &pool, &first, T0 + 30 * MINUTE);
    w.run_until(T0 + 3 * HOUR).expect("runs");
    let starts: Vec<(u64, u32, u64)> =
        w.executions(1).iter().map(|e| (e.generation, e.attempt, (e.window_start - T0) / MINUTE)).collect();
    assert_eq!(starts, [(1, 1, 0), (1, 2, 30), (2, 1, 120)], "the second occurrence on the cadence");
}
