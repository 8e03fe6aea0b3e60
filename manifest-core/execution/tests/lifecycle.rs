//! Every lifecycle mode, run through the executor with the simulated pool and a manual clock:
//! hours of windows in milliseconds of test time.

mod common;

use common::*;
use svc_execution::plan::{
    CeaseTrigger, ExistingJobs, Mode, Phasing, Rate, Recovery, Renewal, RuntimeFailure, SpendAuthority, UpdateTiming,
};
use svc_execution::{AppStatus, ExecState, SimulatedPool};

#[test]
fn continuous_renews_every_slot_a_lead_ahead_and_stops_the_predecessor_at_its_end() {
    let w = World::new();
    w.publish(1, plan(2, continuous()));
    w.settle().expect("settles");
    let first = w.live(1);
    assert_eq!(first.len(), 2, "one job per slot");
    assert!(first.iter().all(|e| e.generation == 1 && e.window_start == T0 && e.window_end == T0 + HOUR));
    w.all_ready();
    // Ten minutes before the end, the successors launch for the window that follows.
    w.run_until(T0 + 50 * MINUTE - 1).expect("runs");
    assert_eq!(w.live(1).len(), 2);
    w.run_until(T0 + 50 * MINUTE).expect("runs");
    let live = w.live(1);
    assert_eq!(live.len(), 4, "{live:#?}");
    let successors: Vec<_> = live.iter().filter(|e| e.generation == 2).collect();
    assert!(successors.iter().all(|e| e.window_start == T0 + HOUR && e.window_end == T0 + 2 * HOUR));
    // At the end of the first window, the first generation stops.
    w.run_until(T0 + HOUR).expect("runs");
    let live = w.live(1);
    assert_eq!(live.len(), 2);
    assert!(live.iter().all(|e| e.generation == 2));
    let stopped = w.in_state(1, ExecState::Stopped);
    assert!(stopped.iter().all(|e| e.reason.as_ref().is_some_and(|r| r.code == "window_ended")));
    // Many windows later: generations only grew, one serving job per slot.
    w.run_until(T0 + 10 * HOUR + 30 * MINUTE).expect("runs");
    for slot in 0..2 {
        let gens: Vec<u64> = w.executions(1).iter().filter(|e| e.slot == slot).map(|e| e.generation).collect();
        assert_eq!(gens, (1..=11).collect::<Vec<_>>(), "slot {slot}");
    }
    assert_eq!(w.live(1).len(), 2);
}

#[test]
fn after_scheduled_end_renewal_launches_at_the_end() {
    let w = World::new();
    let mut p = plan(1, continuous());
    p.renewal = Renewal::AfterEnd;
    w.publish(1, p);
    w.run_until(T0 + HOUR - 1).expect("runs");
    assert_eq!(w.executions(1).len(), 1);
    w.run_until(T0 + HOUR).expect("runs");
    let live = w.live(1);
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].generation, 2);
}

#[test]
fn once_runs_one_occurrence_then_settles_and_never_runs_again() {
    let w = World::new();
    w.publish(1, plan(2, Mode::Once));
    w.settle().expect("settles");
    let jobs = w.live(1);
    assert_eq!(jobs.len(), 2);
    w.pool.exit(&jobs[0].execution_id, 0);
    w.settle().expect("settles");
    assert!(!w.app(1).settled, "one slot still runs");
    // A runtime failure is not retried: `once` waits until the scheduled end, then settles.
    w.pool.exit(&jobs[1].execution_id, 1);
    w.settle().expect("settles");
    assert!(w.app(1).settled);
    w.run_until(T0 + 48 * HOUR).expect("runs");
    assert_eq!(w.executions(1).len(), 2, "a settled once application never runs again");
    // Not even when a new version is published.
    w.publish(1, plan(2, Mode::Once));
    w.run_until(T0 + 50 * HOUR).expect("runs");
    assert_eq!(w.executions(1).len(), 2);
}

#[test]
fn once_settles_when_the_window_ends() {
    let w = World::new();
    w.publish(1, plan(1, Mode::Once));
    w.run_until(T0 + HOUR).expect("runs");
    let all = w.executions(1);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].state, ExecState::Stopped);
    assert!(w.app(1).settled);
}

#[test]
fn interval_launches_on_its_cadence_until_the_bound() {
    let w = World::new();
    let mut p = plan(1, Mode::Interval { every_ms: 2 * HOUR, until: Some(T0 + 7 * HOUR) });
    p.window_ms = HOUR;
    w.publish(1, p);
    w.run_until(T0 + 12 * HOUR).expect("runs");
    let starts: Vec<_> = w.executions(1).iter().map(|e| (e.window_start - T0) / HOUR).collect();
    assert_eq!(starts, [0, 2, 4, 6], "no occurrence starts at or after `until`");
    assert!(w.live(1).is_empty());
    assert!(w.executions(1).iter().all(|e| e.window_end - e.window_start == HOUR));
}

#[test]
fn an_interval_occurrence_longer_than_its_cadence_is_cut_at_the_next() {
    let w = World::new();
    let mut p = plan(1, Mode::Interval { every_ms: HOUR, until: None });
    p.window_ms = 3 * HOUR;
    w.publish(1, p);
    w.run_until(T0 + HOUR).expect("runs");
    let live = w.live(1);
    assert_eq!(live.len(), 1, "{live:#?}");
    assert_eq!(live[0].generation, 2);
}

#[test]
fn continuous_until_starts_no_window_at_or_after_the_bound() {
    let w = World::new();
    let mut p = plan(1, Mode::Continuous { until: Some(T0 + 2 * HOUR) });
    p.renewal = Renewal::AfterEnd;
    w.publish(1, p);
    w.run_until(T0 + 6 * HOUR).expect("runs");
    assert_eq!(w.executions(1).len(), 2);
    assert!(w.live(1).is_empty());
}

#[test]
fn start_delay_and_evenly_spaced_phasing_stagger_first_launches() {
    let w = World::new();
    let mut p = plan(4, continuous());
    p.start_delay_ms = 5 * MINUTE;
    p.phasing = Phasing::EvenlySpaced { jobs_per_phase: 2 };
    w.publish(1, p);
    w.run_until(T0 + 5 * MINUTE - 1).expect("runs");
    assert!(w.executions(1).is_empty(), "nothing before the start delay");
    w.run_until(T0 + 5 * MINUTE).expect("runs");
    assert_eq!(w.live(1).iter().map(|e| e.slot).collect::<Vec<_>>(), [0, 1]);
    w.run_until(T0 + 35 * MINUTE).expect("runs");
    let second: Vec<_> = w.live(1).into_iter().filter(|e| e.slot >= 2).collect();
    assert_eq!(second.len(), 2);
    assert!(second.iter().all(|e| e.window_start == T0 + 35 * MINUTE));
}

fn updated(p: &svc_execution::Plan, timing: UpdateTiming, existing: ExistingJobs) -> svc_execution::Plan {
    let mut next = p.clone();
    next.policy_version += 1;
    next.update.timing = timing;
    next.update.existing_jobs = existing;
    next
}

#[test]
fn an_immediate_update_stops_the_old_job_only_when_its_successor_is_ready() {
    let w = World::new();
    let p = plan(1, continuous());
    w.publish(1, p.clone());
    w.all_ready();
    w.clock.advance(5 * MINUTE);
    w.publish(1, updated(&p, UpdateTiming::Immediate, ExistingJobs::StopWhenSuccessorReady));
    w.settle().expect("settles");
    let live = w.live(1);
    assert_eq!(live.len(), 2, "old and new run together until the new one is ready");
    let new = live.iter().find(|e| e.policy_version == 2).expect("successor");
    assert_eq!((new.generation, new.window_start), (2, T0 + 5 * MINUTE));
    w.pool.make_ready(&new.execution_id);
    w.settle().expect("settles");
    let live = w.live(1);
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].policy_version, 2);
    let old = &w.executions(1)[0];
    assert_eq!(old.state, ExecState::Stopped);
    assert_eq!(old.reason.as_ref().map(|r| r.code.as_str()), Some("superseded"));
}

#[test]
fn run_until_scheduled_end_keeps_the_old_job_to_its_window_end() {
    let w = World::new();
    let p = plan(1, continuous());
    w.publish(1, p.clone());
    w.settle().expect("settles");
    w.clock.advance(5 * MINUTE);
    w.publish(1, updated(&p, UpdateTiming::Immediate, ExistingJobs::RunUntilScheduledEnd));
    w.all_ready();
    assert_eq!(w.live(1).len(), 2);
    w.run_until(T0 + HOUR - 1).expect("runs");
    assert!(w.live(1).iter().any(|e| e.policy_version == 1));
    w.run_until(T0 + HOUR).expect("runs");
    let live = w.live(1);
    assert!(live.iter().all(|e| e.policy_version == 2), "{live:#?}");
}

#[test]
fn next_renewal_updates_wait_for_the_next_generation() {
    let w = World::new();
    let p = plan(1, continuous());
    w.publish(1, p.clone());
    w.settle().expect("settles");
    w.clock.advance(5 * MINUTE);
    w.publish(1, updated(&p, UpdateTiming::NextRenewal, ExistingJobs::StopWhenSuccessorReady));
    w.settle().expect("settles");
    assert_eq!(w.executions(1).len(), 1, "nothing launches at once");
    w.run_until(T0 + 50 * MINUTE).expect("runs");
    let successor = w.live(1).into_iter().find(|e| e.generation == 2).expect("renewal");
    assert_eq!(successor.policy_version, 2);
}

#[test]
fn cooperative_cease_fires_at_its_trigger() {
    for (trigger, ceased_after) in [
        (CeaseTrigger::RolloutStarted, "decided"),
        (CeaseTrigger::SuccessorProcessorClaimed, "decided"),
        (CeaseTrigger::SuccessorRuntimeReady, "ready"),
    ] {
        let w = World::new();
        let p = plan(1, continuous());
        w.publish(1, p.clone());
        w.settle().expect("settles");
        w.clock.advance(MINUTE);
        w.publish(1, updated(&p, UpdateTiming::Immediate, ExistingJobs::CooperativeCease(trigger)));
        w.settle().expect("settles");
        let old_live = w.live(1).iter().any(|e| e.policy_version == 1);
        assert_eq!(old_live, ceased_after == "ready", "{trigger:?}");
        w.all_ready();
        assert!(w.live(1).iter().all(|e| e.policy_version == 2), "{trigger:?}");
    }
}

#[test]
fn refused_launches_retry_with_backoff_then_wait_for_the_next_window() {
    let w = World::new();
    let mut p = plan(1, continuous());
    p.recovery = Recovery { max_launch_retries: 2, ..Recovery::default() };
    w.publish(1, p);
    w.pool.set_refuse_all(true);
    w.run_until(T0 + 10 * MINUTE).expect("runs");
    let attempts = w.executions(1);
    assert_eq!(attempts.len(), 3, "one launch and two retries");
    assert!(attempts.iter().all(|e| e.state == ExecState::Refused && e.generation == 1));
    assert_eq!(attempts.iter().map(|e| e.attempt).collect::<Vec<_>>(), [1, 2, 3]);
    let blocked = w.app(1).blocked.expect("blocked");
    assert_eq!(blocked.code, "launch_retries_exhausted");
    // The next window (renewal lead included) tries again, as generation 2.
    w.pool.set_refuse_all(false);
    w.run_until(T0 + 50 * MINUTE).expect("runs");
    let live = w.live(1);
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].generation, 2);
    assert!(w.store.snapshot().ledger.iter().filter(|(_, _, _, refund)| !refund).count() >= 1);
}

/// `replace_after_failure` with `restarts` same-job restarts and one fresh replacement; contact
/// lost after 2 min, a restart's grace 10 min; five launch retries.
fn replace_after_failure(restarts: u8) -> Recovery {
    Recovery {
        max_launch_retries: 5,
        runtime_failure: RuntimeFailure::ReplaceAfterFailure {
            contact_loss_after_ms: 2 * MINUTE,
            restart_grace_ms: 10 * MINUTE,
            max_same_job_restarts: restarts,
            max_fresh_replacements: 1,
        },
        exit_is_failure: false,
    }
}

#[test]
fn replace_after_failure_restarts_then_replaces_on_a_fresh_processor_then_waits() {
    let w = World::new();
    let mut p = plan(1, continuous());
    p.recovery = replace_after_failure(2);
    w.publish(1, p);
    w.settle().expect("settles");
    let first = w.live(1)[0].clone();
    let first_processor = first.processor_id.clone().expect("placed");
    for restarts in 1..=2 {
        w.pool.exit(&first.execution_id, 1);
        w.settle().expect("settles");
        // Restart n waits retry_backoff(n) (1 s, 2 s) after the failure.
        assert!(w.live(1).is_empty(), "restart {restarts} waits its backoff");
        w.advance(svc_execution::scheduler::retry_backoff(restarts));
        let again = w.live(1);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].execution_id, first.execution_id, "the same job restarts");
        assert_eq!(again[0].restarts, restarts);
    }
    w.pool.exit(&first.execution_id, 1);
    w.settle().expect("settles");
    let replacement = w.live(1)[0].clone();
    assert_eq!((replacement.generation, replacement.attempt), (1, 2));
    assert_ne!(replacement.processor_id.as_deref(), Some(first_processor.as_str()), "a fresh processor");
    assert_eq!(w.pool.order(&replacement.execution_id).expect("order").avoid, [first_processor]);
    // Contact loss fails it; no replacement is left, so the slot waits for its next window.
    w.pool.silence(&replacement.execution_id, w.now());
    w.settle().expect("settles");
    assert_eq!(w.live(1).len(), 1, "silent, not yet lost");
    w.advance(2 * MINUTE);
    assert!(w.live(1).is_empty());
    let lost = w.executions(1).into_iter().find(|e| e.execution_id == replacement.execution_id).expect("recorded");
    assert_eq!((lost.state, lost.reason.map(|r| r.code)), (ExecState::Failed, Some("contact_lost".to_owned())));
    w.run_until(T0 + 50 * MINUTE).expect("runs");
    assert_eq!(w.live(1)[0].generation, 2);
}

/// A replacement made after a `next_scheduled_renewal` update runs its generation's own
/// version: it used to run the newly active one, bringing the update in mid-generation.
#[test]
fn a_replacement_runs_its_generations_version_until_a_next_renewal_update_takes_effect() {
    let w = World::new();
    let mut p = plan(1, continuous());
    p.recovery = replace_after_failure(0);
    w.publish(1, p.clone());
    w.settle().expect("settles");
    let first = w.live(1)[0].clone();
    w.clock.advance(5 * MINUTE);
    let mut next = updated(&p, UpdateTiming::NextRenewal, ExistingJobs::StopWhenSuccessorReady);
    w.publish(1, next.clone());
    w.pool.exit(&first.execution_id, 1);
    w.settle().expect("settles");
    let replacement = w.live(1)[0].clone();
    assert_eq!((replacement.generation, replacement.attempt, replacement.policy_version), (1, 2, 1));
    // The renewal brings version 2 in.
    w.run_until(T0 + 50 * MINUTE).expect("runs");
    let renewed = w.live(1).into_iter().find(|e| e.generation == 2).expect("renewal");
    assert_eq!(renewed.policy_version, 2);

    // An immediate update wants the active version at once: a replacement runs it.
    let w = World::new();
    w.publish(1, p.clone());
    w.settle().expect("settles");
    let first = w.live(1)[0].clone();
    w.pool.exit(&first.execution_id, 1);
    next.update.timing = UpdateTiming::Immediate;
    w.publish(1, next);
    w.settle().expect("settles");
    assert!(w.live(1).iter().all(|e| e.policy_version == 2), "{:#?}", w.live(1));
}

#[test]
fn wait_until_scheduled_end_leaves_a_failed_slot_empty_until_renewal() {
    let w = World::new();
    w.publish(1, plan(1, continuous()));
    w.settle().expect("settles");
    let job = w.live(1)[0].clone();
    w.pool.exit(&job.execution_id, 2);
    w.run_until(T0 + 50 * MINUTE - 1).expect("runs");
    assert!(w.live(1).is_empty());
    assert_eq!(w.executions(1).len(), 1);
    w.run_until(T0 + 50 * MINUTE).expect("runs");
    assert_eq!(w.live(1)[0].generation, 2);
}

#[test]
fn a_launch_above_the_spend_authority_is_not_made_and_says_why() {
    let w = World::new();
    let mut p = plan(1, continuous());
    // 1000 micros per hour: a one-hour window costs 1000.
    p.spend = SpendAuthority { per_job_micros: Some(999), ..SpendAuthority::default() };
    w.publish(1, p);
    w.settle().expect("settles");
    assert!(w.executions(1).is_empty());
    let blocked = w.app(1).blocked.expect("blocked");
    assert_eq!(blocked.code, "spend_authority_exceeded");
    assert!(blocked.message.contains("spend.perJob USD 0.000999 (999 micros)"), "{}", blocked.message);
}

/// Found by a new user's pass (issue 42): raising an organization's too-low spend authority
/// (an administrator's change, which wakes no one) left the application blocked for good.
#[test]
fn an_organizations_spend_authority_raised_after_a_refusal_launches_without_a_wakeup() {
    let w = World::new();
    let mut p = plan(1, continuous());
    // 1000 micros per hour: a one-hour window costs 1000.
    p.spend = SpendAuthority { organization_per_job_micros: Some(999), ..SpendAuthority::default() };
    w.publish(1, p);
    w.settle().expect("settles");
    assert!(w.executions(1).is_empty());
    assert_eq!(w.app(1).blocked.expect("blocked").code, "spend_authority_exceeded");
    w.store.edit(|s| {
        let plan = s.apps.get_mut(&1).and_then(|a| a.plan.as_mut()).expect("a plan");
        plan.spend.organization_per_job_micros = Some(1_000);
    });
    w.run_until(T0 + svc_execution::scheduler::HOLD_RECHECK_MS).expect("runs");
    assert_eq!(w.live(1).len(), 1, "launched at the next look, within HOLD_RECHECK_MS");
    assert!(w.app(1).blocked.is_none());
}

#[test]
fn the_rate_ceiling_holds_launches_until_the_window_rolls() {
    let w = World::new();
    let mut p = plan(1, continuous());
    p.renewal = Renewal::AfterEnd;
    p.spend =
        SpendAuthority { rate: Some(Rate { amount_micros: 2_000, window_ms: 3 * HOUR }), ..SpendAuthority::default() };
    w.publish(1, p);
    w.run_until(T0 + 2 * HOUR).expect("runs");
    assert_eq!(w.executions(1).len(), 2, "the third window would pass the rate");
    assert_eq!(w.app(1).blocked.expect("blocked").code, "spend_authority_exceeded");
    w.run_until(T0 + 3 * HOUR + 1).expect("runs");
    assert_eq!(w.executions(1).len(), 3, "the first charge left the window");
}

#[test]
fn pause_stops_new_launches_and_lets_running_jobs_reach_their_end() {
    let w = World::new();
    w.publish(1, plan(1, continuous()));
    w.settle().expect("settles");
    w.set_status(1, AppStatus::Paused);
    w.run_until(T0 + 50 * MINUTE).expect("runs");
    assert_eq!(w.live(1).len(), 1, "no renewal while paused; the job still runs");
    w.run_until(T0 + HOUR).expect("runs");
    assert!(w.live(1).is_empty(), "it stops at its scheduled end");
    w.set_status(1, AppStatus::Active);
    w.settle().expect("settles");
    let live = w.live(1);
    assert_eq!((live.len(), live[0].generation, live[0].window_start), (1, 2, T0 + HOUR));
}

#[test]
fn a_pool_with_no_room_is_a_refused_launch_retried_later() {
    let w = World::with_pool(SimulatedPool::new(1, 1, 1_000));
    w.publish(1, plan(2, continuous()));
    w.settle().expect("settles");
    assert_eq!(w.live(1).len(), 1);
    let refused = w.in_state(1, ExecState::Refused);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].reason.as_ref().map(|r| r.code.as_str()), Some("no_processor"));
}

#[test]
fn a_rearmed_once_application_runs_once_more_under_the_rearming_version() {
    let w = World::new();
    w.publish(1, plan(1, Mode::Once));
    w.settle().expect("settles");
    w.pool.exit(&w.live(1)[0].execution_id, 0);
    w.settle().expect("settles");
    assert!(w.app(1).settled);
    // The publication service re-arms it (release-gated): a new version, settled no more.
    let mut again = plan(1, Mode::Once);
    again.policy_version = 2;
    w.store.edit(|s| {
        let a = s.apps.get_mut(&1).expect("app");
        a.settled = false;
        a.rearmed_version = 2;
    });
    w.publish(1, again);
    w.settle().expect("settles");
    let live = w.live(1);
    assert_eq!((live.len(), live[0].generation, live[0].policy_version), (1, 2, 2));
    w.pool.exit(&live[0].execution_id, 0);
    w.run_until(T0 + 10 * HOUR).expect("runs");
    assert!(w.app(1).settled);
    assert_eq!(w.executions(1).len(), 2, "once more, not twice more");
}

#[test]
fn a_settled_once_application_still_stops_a_removed_slots_job_at_its_window_end() {
    // Found by the property test: settling dropped the timer of a job still running in a
    // slot a newer version removed, so it ran past its window.
    let w = World::new();
    let mut two = plan(2, Mode::Once);
    two.update.existing_jobs = ExistingJobs::RunUntilScheduledEnd;
    w.publish(1, two.clone());
    w.settle().expect("settles");
    let jobs = w.live(1);
    w.pool.exit(&jobs[0].execution_id, 0);
    let mut one = two;
    one.policy_version = 2;
    one.slots = 1;
    w.publish(1, one);
    w.settle().expect("settles");
    assert!(w.app(1).settled);
    assert_eq!(w.live(1).len(), 1, "slot 1 runs out its window");
    w.run_until(T0 + HOUR).expect("runs");
    assert!(w.live(1).is_empty());
    assert!(w.pool.running().is_empty());
}

#[test]
fn a_cadence_of_milliseconds_launches_at_most_one_generation_a_second_per_slot() {
    let w = World::new();
    let mut p = plan(1, Mode::Interval { every_ms: 1, until: None });
    p.window_ms = 1;
    w.publish(1, p);
    w.run_until(T0 + 10_000).expect("runs");
    let launched = w.executions(1).len();
    assert!((10..=11).contains(&launched), "{launched} generations in 10 s");
    let starts: Vec<_> = w.executions(1).iter().map(|e| e.created_at).collect();
    assert!(starts.windows(2).all(|p| p[1] - p[0] >= svc_execution::scheduler::MIN_LAUNCH_SPACING_MS));
}

/// A job that fails as it starts is restarted after 1 s, 2 s, 4 s..., not in a tight loop:
/// the restarts of a crash loop spread over time, and each waits for the one before.
#[test]
fn same_job_restarts_back_off_so_a_crash_loop_does_not_spin() {
    let w = World::new();
    let mut p = plan(1, continuous());
    p.recovery = replace_after_failure(4);
    w.publish(1, p);
    w.settle().expect("settles");
    let job = w.live(1)[0].execution_id.clone();
    let mut restarted_at = Vec::new();
    for n in 1..=4u32 {
        w.pool.exit(&job, 1);
        w.settle().expect("settles");
        let failed_at = w.now();
        w.advance(svc_execution::scheduler::retry_backoff(n) - 1);
        assert!(w.live(1).is_empty(), "restart {n} does not come before its backoff");
        w.advance(1);
        assert_eq!(w.live(1)[0].restarts, n, "restart {n}");
        restarted_at.push(w.now() - failed_at);
    }
    assert_eq!(restarted_at, [1_000, 2_000, 4_000, 8_000]);
}

/// A halted application (an ingress deployment whose funds ran out) stops its jobs now, not
/// at their window's end as a pause would, launches nothing while halted, and says why; once
/// lifted, it launches again.
#[test]
fn a_halt_stops_running_jobs_now_and_launches_nothing_until_lifted() {
    let w = World::new();
    w.publish(1, plan(2, continuous()));
    w.settle().expect("settles");
    w.all_ready();
    assert_eq!(w.live(1).len(), 2);
    let unfunded = svc_execution::Reason::new("unfunded", "the deployment's funds ran out");
    w.set_halt(1, Some(unfunded.clone()));
    w.settle().expect("settles");
    assert!(w.live(1).is_empty(), "stopped now: {:#?}", w.live(1));
    let stopped = w.in_state(1, ExecState::Stopped);
    assert_eq!(stopped.len(), 2);
    assert!(stopped.iter().all(|e| e.reason.as_ref() == Some(&unfunded)));
    assert_eq!(w.app(1).blocked, Some(unfunded));
    // Ten minutes later, still nothing.
    w.advance(10 * MINUTE);
    assert!(w.live(1).is_empty());
    // Lifted within the stopped window: a new generation now, its window from now, not at
    // the renewal of a window nothing ran in.
    w.set_halt(1, None);
    w.settle().expect("settles");
    let live = w.live(1);
    assert_eq!(live.len(), 2, "lifted: a new generation in each slot");
    assert!(live.iter().all(|e| e.generation == 2 && e.window_start == w.now()), "{live:#?}");
    // Halted again past the renewal lead: no renewal either.
    w.set_halt(1, Some(svc_execution::Reason::new("unfunded", "again")));
    w.run_until(T0 + 3 * HOUR).expect("runs");
    assert!(w.live(1).is_empty());
    assert!(w.executions(1).iter().all(|e| e.generation <= 2));
    assert_eq!(w.app(1).blocked.map(|r| r.code), Some("unfunded".to_owned()));
}

/// A version withdrawn after its successor generation started (an ingress redeploy whose
/// successor failed: the active version goes back to the one serving): the withdrawn job
/// stops, the serving one runs on untouched, and renewal goes on from it with a fresh
/// generation number.
#[test]
fn a_withdrawn_versions_job_stops_and_the_serving_generation_runs_on() {
    let w = World::new();
    let p = plan(1, continuous());
    w.publish(1, p.clone());
    w.settle().expect("settles");
    w.all_ready();
    let serving = w.live(1)[0].clone();
    w.clock.advance(5 * MINUTE);
    let next = updated(&p, UpdateTiming::Immediate, ExistingJobs::StopWhenSuccessorReady);
    w.publish(1, next);
    w.settle().expect("settles");
    let successor = w.live(1).into_iter().find(|e| e.policy_version == 2).expect("the successor");
    assert_eq!(successor.generation, 2);
    // Version 2 is withdrawn before its job is ready: version 1 is active again.
    w.publish(1, p);
    w.settle().expect("settles");
    let live = w.live(1);
    assert_eq!(live.len(), 1, "{live:#?}");
    assert_eq!(live[0].execution_id, serving.execution_id, "the serving job runs on");
    let withdrawn = w.executions(1).into_iter().find(|e| e.key == successor.key).expect("recorded");
    assert_eq!((withdrawn.state, withdrawn.reason.map(|r| r.code)), (ExecState::Stopped, Some("withdrawn".into())));
    // Its renewal comes from the serving generation's window, as generation 3.
    w.run_until(T0 + 50 * MINUTE).expect("runs");
    let renewed = w.live(1).into_iter().find(|e| e.key != serving.key).expect("the renewal");
    assert_eq!((renewed.generation, renewed.policy_version, renewed.window_start), (3, 1, T0 + HOUR));
}

/// An `immediate` update to a slot that runs nothing (its job failed and waits for its
/// window's end) takes effect at once, not at the renewal of a window nothing runs in.
#[test]
fn an_immediate_update_launches_at_once_in_a_slot_that_runs_nothing() {
    let w = World::new();
    let p = plan(1, continuous());
    w.publish(1, p.clone());
    w.settle().expect("settles");
    let first = w.live(1)[0].clone();
    w.pool.exit(&first.execution_id, 1);
    w.settle().expect("settles");
    assert!(w.live(1).is_empty(), "wait_until_scheduled_end: the slot waits");
    w.clock.advance(5 * MINUTE);
    w.publish(1, updated(&p, UpdateTiming::Immediate, ExistingJobs::StopWhenSuccessorReady));
    w.settle().expect("settles");
    let live = w.live(1);
    assert_eq!(live.len(), 1, "{live:#?}");
    assert_eq!((live[0].generation, live[0].policy_version, live[0].window_start), (2, 2, w.now()));
    // A `next_renewal` update waits for the renewal, as before.
    let w = World::new();
    w.publish(1, p.clone());
    w.settle().expect("settles");
    let first = w.live(1)[0].clone();
    w.pool.exit(&first.execution_id, 1);
    w.settle().expect("settles");
    w.publish(1, updated(&p, UpdateTiming::NextRenewal, ExistingJobs::StopWhenSuccessorReady));
    w.settle().expect("settles");
    assert!(w.live(1).is_empty());
}

/// A plan that counts an exit with status 0 as a failure (the ingress coordinator's web jobs)
/// restarts a job that completed; without it, a completed job's slot waits.
#[test]
fn exit_is_failure_restarts_a_job_that_completed() {
    let w = World::new();
    let mut p = plan(1, continuous());
    p.recovery = replace_after_failure(2);
    p.recovery.exit_is_failure = true;
    w.publish(1, p);
    w.settle().expect("settles");
    let job = w.live(1)[0].execution_id.clone();
    w.pool.exit(&job, 0);
    w.settle().expect("settles");
    w.advance(svc_execution::scheduler::retry_backoff(1));
    assert_eq!(w.live(1)[0].restarts, 1, "restarted");
    let w = World::new();
    let mut p = plan(1, continuous());
    p.recovery = replace_after_failure(2);
    w.publish(1, p);
    w.settle().expect("settles");
    let job = w.live(1)[0].execution_id.clone();
    w.pool.exit(&job, 0);
    w.settle().expect("settles");
    w.advance(10 * MINUTE);
    assert!(w.live(1).is_empty(), "completed: the slot waits for its renewal");
}

/// Review finding: a job of the old version that failed and waits for a restart's backoff
/// was restarted (its version and all) when an immediate update came; the new version now
/// launches in its place.
#[test]
fn an_immediate_update_replaces_a_failed_job_instead_of_restarting_it() {
    let w = World::new();
    let mut p = plan(1, continuous());
    p.recovery = replace_after_failure(3);
    w.publish(1, p.clone());
    w.settle().expect("settles");
    let first = w.live(1)[0].clone();
    w.pool.exit(&first.execution_id, 1);
    w.settle().expect("settles");
    assert!(w.live(1).is_empty(), "in its backoff");
    w.clock.advance(2_000);
    w.publish(1, updated(&p, UpdateTiming::Immediate, ExistingJobs::StopWhenSuccessorReady));
    w.settle().expect("settles");
    // Its fresh replacement runs the new version, for the rest of the window.
    let live = w.live(1);
    assert_eq!(live.len(), 1, "{live:#?}");
    assert_eq!((live[0].generation, live[0].attempt, live[0].policy_version, live[0].restarts), (1, 2, 2, 0));
    assert_eq!(live[0].window_end, first.window_end);
    let old = w.executions(1).into_iter().find(|e| e.key == first.key).expect("recorded");
    assert_eq!((old.state, old.restarts), (ExecState::Failed, 0), "not restarted");
    // With no fresh replacement allowed (the relay's), a new generation of it launches now.
    let w = World::new();
    let mut p = plan(1, continuous());
    p.recovery = replace_after_failure(3);
    if let RuntimeFailure::ReplaceAfterFailure { max_fresh_replacements, .. } = &mut p.recovery.runtime_failure {
        *max_fresh_replacements = 0;
    }
    w.publish(1, p.clone());
    w.settle().expect("settles");
    let first = w.live(1)[0].clone();
    w.pool.exit(&first.execution_id, 1);
    w.settle().expect("settles");
    w.clock.advance(2_000);
    w.publish(1, updated(&p, UpdateTiming::Immediate, ExistingJobs::StopWhenSuccessorReady));
    w.settle().expect("settles");
    let live = w.live(1);
    assert_eq!(live.len(), 1, "{live:#?}");
    assert_eq!((live[0].generation, live[0].policy_version, live[0].restarts), (2, 2, 0));
}

/// Review finding: the launch paths added for halts and immediate updates did not check
/// `until`: no window starts at or after it, whatever led to the launch.
#[test]
fn no_new_launch_path_starts_a_window_past_until() {
    let w = World::new();
    let p = plan(1, Mode::Continuous { until: Some(T0 + 20 * MINUTE) });
    w.publish(1, p.clone());
    w.settle().expect("settles");
    w.all_ready();
    w.set_halt(1, Some(svc_execution::Reason::new("unfunded", "test")));
    w.settle().expect("settles");
    w.clock.advance(30 * MINUTE);
    w.set_halt(1, None);
    w.settle().expect("settles");
    assert!(w.live(1).is_empty(), "lifted past until: nothing starts");
    w.publish(1, updated(&p, UpdateTiming::Immediate, ExistingJobs::StopWhenSuccessorReady));
    w.settle().expect("settles");
    assert!(w.live(1).is_empty(), "an immediate update past until: nothing starts");
}
