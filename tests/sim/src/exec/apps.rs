//! What a seed's world holds: applications with their plans, built the way the execution
//! crate's own tests build them (`manifest-core/execution/tests/common`), and the pool.

use fastrand::Rng;
use svc_execution::Millis;
use svc_execution::plan::{
    CeaseTrigger, ExistingJobs, Mode, Phasing, Plan, Rate, Recovery, Renewal, Requirements, RuntimeFailure,
    SpendAuthority, Update, UpdateTiming,
};

pub(crate) const MINUTE: Millis = 60_000;
pub(crate) const HOUR: Millis = 3_600_000;
/// Where every world's clock starts: 2026-01-01T00:00:00Z.
pub(crate) const T0: Millis = 1_767_225_600_000;

/// A plan of one application: its mode, renewal, recovery and spend limits, all from the
/// seed. `price` is the pool's price per hour: limits are set around what a window costs.
pub(crate) fn plan(rng: &mut Rng, price: u128) -> Plan {
    let slots = rng.u16(1..=3);
    let mode = match rng.u8(0..5) {
        0 => Mode::Once,
        1 | 2 => Mode::Continuous { until: None },
        3 => Mode::Continuous { until: Some(T0 + rng.u64(1..12) * HOUR) },
        _ => Mode::Interval {
            every_ms: rng.u64(1..4) * 30 * MINUTE,
            until: rng.bool().then(|| T0 + rng.u64(2..12) * HOUR),
        },
    };
    let renewal = if rng.bool() { Renewal::AfterEnd } else { Renewal::Lead(rng.u64(1..20) * MINUTE) };
    let runtime_failure = if rng.u8(0..3) == 0 {
        RuntimeFailure::WaitUntilScheduledEnd
    } else {
        RuntimeFailure::ReplaceAfterFailure {
            contact_loss_after_ms: 3 * MINUTE,
            restart_grace_ms: 5 * MINUTE,
            max_same_job_restarts: rng.u8(0..3),
            max_fresh_replacements: rng.u8(0..3),
        }
    };
    // Limits around one window's price: some launches fit, some do not.
    let scaled = |micros: u128| micros * price / 1_000;
    let spend = SpendAuthority {
        per_job_micros: rng.bool().then(|| scaled(rng.u128(500..3_000))),
        per_generation_micros: rng.bool().then(|| scaled(rng.u128(1_000..5_000))),
        rate: rng
            .bool()
            .then(|| Rate { amount_micros: scaled(rng.u128(2_000..10_000)), window_ms: rng.u64(1..6) * HOUR }),
        ..SpendAuthority::default()
    };
    let phasing = if slots.is_multiple_of(2) && rng.bool() {
        Phasing::EvenlySpaced { jobs_per_phase: slots / 2 }
    } else {
        Phasing::Simultaneous
    };
    Plan {
        policy_version: 1,
        policy_digest: "sha256:01".into(),
        slots,
        window_ms: HOUR,
        start_delay_ms: rng.u64(0..3) * 5 * MINUTE,
        phasing,
        mode,
        renewal,
        update: Update { timing: UpdateTiming::Immediate, existing_jobs: ExistingJobs::StopWhenSuccessorReady },
        recovery: Recovery { max_launch_retries: rng.u8(0..4), runtime_failure, exit_is_failure: rng.u8(0..4) == 0 },
        spend,
        requirements: Requirements::default(),
        hold: None,
    }
}

/// The next version of `plan`: other slots, window and update rules; the same spend limits
/// (the invariants check every charge against them).
pub(crate) fn next_version(rng: &mut Rng, plan: &Plan) -> Plan {
    let mut next = plan.clone();
    next.policy_version += 1;
    next.policy_digest = format!("sha256:{:02}", next.policy_version);
    next.slots = rng.u16(1..=3);
    next.window_ms = rng.u64(1..3) * HOUR;
    next.update.timing = if rng.bool() { UpdateTiming::Immediate } else { UpdateTiming::NextRenewal };
    next.update.existing_jobs = match rng.u8(0..5) {
        0 => ExistingJobs::StopWhenSuccessorReady,
        1 => ExistingJobs::RunUntilScheduledEnd,
        2 => ExistingJobs::CooperativeCease(CeaseTrigger::RolloutStarted),
        3 => ExistingJobs::CooperativeCease(CeaseTrigger::SuccessorProcessorClaimed),
        _ => ExistingJobs::CooperativeCease(CeaseTrigger::SuccessorRuntimeReady),
    };
    next.phasing = match next.phasing {
        Phasing::EvenlySpaced { .. } if next.slots.is_multiple_of(2) => {
            Phasing::EvenlySpaced { jobs_per_phase: next.slots / 2 }
        }
        _ => Phasing::Simultaneous,
    };
    if let Renewal::Lead(ms) = next.renewal {
        next.renewal = Renewal::Lead(ms.min(next.window_ms / 2));
    }
    next
}

/// A short description of a plan, for the trace.
pub(crate) fn describe(plan: &Plan) -> String {
    let failure = match plan.recovery.runtime_failure {
        RuntimeFailure::WaitUntilScheduledEnd => "wait".to_owned(),
        RuntimeFailure::ReplaceAfterFailure { max_same_job_restarts, max_fresh_replacements, .. } => {
            format!("replace(restarts {max_same_job_restarts}, fresh {max_fresh_replacements})")
        }
    };
    let s = &plan.spend;
    format!(
        "v{} {} slots={} window={}m delay={}m {:?} retries={} {failure} perJob={:?} perGen={:?} rate={:?}",
        plan.policy_version,
        plan.mode.as_str(),
        plan.slots,
        plan.window_ms / MINUTE,
        plan.start_delay_ms / MINUTE,
        plan.renewal,
        plan.recovery.max_launch_retries,
        s.per_job_micros,
        s.per_generation_micros,
        s.rate.map(|r| (r.amount_micros, r.window_ms / HOUR)),
    )
}
