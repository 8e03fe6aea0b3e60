//! What an application should be running: the lifecycle rules of one policy version, in the
//! scheduler's own terms (milliseconds, slots, micros). The publication service derives a
//! [`Plan`] from an effective Policy V4 or V5 (`manifest_core::service::executions`); the
//! ingress coordinator from its derived V5 manifest. Nothing here parses a manifest.

use crate::clock::Millis;

/// The desired execution of one policy version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The policy version it comes from.
    pub policy_version: u64,
    /// That version's policy digest.
    pub policy_digest: String,
    /// Logical job slots: V4 `deployment.parallelism`, V5 `deployment.jobs`.
    pub slots: u16,
    /// One paid window: V4 `schedule.durationMs`, V5 `schedule.duration`.
    pub window_ms: Millis,
    /// V4 `schedule.startDelayMs`: the first windows start this long after activation.
    pub start_delay_ms: Millis,
    /// V5 `schedule.phasing` (V4: simultaneous).
    pub phasing: Phasing,
    /// V5 `execution` (V4: continuous, without bound).
    pub mode: Mode,
    /// When a successor generation is launched, relative to its predecessor's window end.
    pub renewal: Renewal,
    /// How a newer policy version replaces running jobs.
    pub update: Update,
    /// Launch retries and runtime-failure handling.
    pub recovery: Recovery,
    /// Spend authority every launch is charged against.
    pub spend: SpendAuthority,
    /// Where jobs may run.
    pub requirements: Requirements,
    /// Why no job may launch now, whatever the rules say (a required secret without a value,
    /// no spend authority): the application is blocked with this reason until it changes.
    pub hold: Option<crate::reason::Reason>,
}

/// V5 `deployment.schedule.phasing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phasing {
    /// Every slot's windows start together.
    Simultaneous,
    /// Slots start in `slots / jobs_per_phase` phases, spread evenly over one window, so their
    /// renewals never all fall at once.
    EvenlySpaced {
        /// Slots per phase (divides `slots`).
        jobs_per_phase: u16,
    },
}

/// V5 `execution`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One occurrence per slot, then the application settles (terminal).
    Once,
    /// Successive paid windows, until `until` (no window starts at or after it) or forever.
    Continuous {
        /// Unix ms bound.
        until: Option<Millis>,
    },
    /// A new occurrence every `every_ms`; each runs at most one window, cut at the next
    /// occurrence.
    Interval {
        /// Cadence.
        every_ms: Millis,
        /// Unix ms bound: no occurrence starts at or after it.
        until: Option<Millis>,
    },
}

impl Mode {
    /// `once`, `continuous` or `interval`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Once => "once",
            Mode::Continuous { .. } => "continuous",
            Mode::Interval { .. } => "interval",
        }
    }
}

/// When the successor generation launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// V4 `renewal.mode: after_scheduled_end`: at the predecessor's window end.
    AfterEnd,
    /// V4 `before_scheduled_end` with a fixed lead, V5 `leadTime: fixed`, or an automatic lead
    /// resolved by [`automatic_lead`]: this long before the predecessor's window end.
    Lead(Millis),
}

/// The `svc.renewal-lead.v1` profile: a tenth of the window, at least one minute, at most 30
/// minutes, never more than half the window (the bounds of a fixed V4 lead).
pub fn automatic_lead(window_ms: Millis) -> Millis {
    (window_ms / 10).clamp(60_000, 1_800_000).min(window_ms / 2)
}

/// V4/V5 `lifecycle.update`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Update {
    /// `immediate` or `next_scheduled_renewal` / `next_renewal`.
    pub timing: UpdateTiming,
    /// What happens to jobs of the older version.
    pub existing_jobs: ExistingJobs,
}

/// `update.timing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateTiming {
    /// A successor of the new version launches in every running slot at once.
    Immediate,
    /// The new version takes effect with the next generation a renewal launches.
    NextRenewal,
}

/// `update.existingJobs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExistingJobs {
    /// Older jobs run until their window's end.
    RunUntilScheduledEnd,
    /// V5 default: an older job stops once its slot's successor is ready.
    StopWhenSuccessorReady,
    /// V4 `cooperative_cease`: the older job is asked to cease at the trigger.
    CooperativeCease(CeaseTrigger),
}

/// V4 `cooperative_cease.trigger`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CeaseTrigger {
    /// As soon as the successor is decided.
    RolloutStarted,
    /// When a processor has taken the successor.
    SuccessorProcessorClaimed,
    /// When the successor reports ready.
    SuccessorRuntimeReady,
}

/// V4 `lifecycle.recovery` (V5 takes its defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovery {
    /// `recovery.launch.maxRetries`: launches of one generation the market refused, retried
    /// with backoff, before the slot waits for its next window.
    pub max_launch_retries: u8,
    /// `recovery.runtimeFailure`.
    pub runtime_failure: RuntimeFailure,
    /// Whether a job that exits with status 0 before its window's end is recovered as a
    /// failed one. No manifest says so (a batch job that finishes is done); the ingress
    /// coordinator's web jobs do: a web server that exits has stopped serving.
    pub exit_is_failure: bool,
}

impl Default for Recovery {
    /// V4's defaults, which V5 uses: five launch retries, wait until the scheduled end.
    fn default() -> Recovery {
        Recovery {
            max_launch_retries: 5,
            runtime_failure: RuntimeFailure::WaitUntilScheduledEnd,
            exit_is_failure: false,
        }
    }
}

/// `recovery.runtimeFailure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeFailure {
    /// A failed job's slot stays empty until its window's scheduled end.
    WaitUntilScheduledEnd,
    /// `replace_after_failure`.
    ReplaceAfterFailure {
        /// A running job silent this long has failed.
        contact_loss_after_ms: Millis,
        /// How long a restarted job has to report ready before it counts as failed again.
        restart_grace_ms: Millis,
        /// Restarts of the same job on its processor, per generation.
        max_same_job_restarts: u8,
        /// Replacements on a fresh processor, per generation.
        max_fresh_replacements: u8,
    },
}

/// What a launch may cost. Every field is a maximum; `None` is no limit of that kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpendAuthority {
    /// V5 `spend.perJob`: service-credit micros one occurrence may cost.
    pub per_job_micros: Option<u128>,
    /// V4 `maxServiceCreditMicrosPerGeneration`: micros every launch of one slot generation
    /// (replacements included) may cost together.
    pub per_generation_micros: Option<u128>,
    /// V4 `maxRewardPlanckPerJob`.
    pub reward_planck_per_job: Option<u128>,
    /// V4 `maxNativeFeePlanckPerJob`.
    pub native_fee_planck_per_job: Option<u128>,
    /// V5 `spend.rate`: micros charged within any trailing window of this length.
    pub rate: Option<Rate>,
    /// The organization's service-credit authority per job (`svc admin spend-authority set`).
    pub organization_per_job_micros: Option<u128>,
}

/// V5 `spend.rate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// The ceiling, micros.
    pub amount_micros: u128,
    /// The trailing window, ms (default 30 days).
    pub window_ms: Millis,
}

/// V5 `placement`: what a processor must offer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Requirements {
    /// `processorSelection: exact`: only these processors.
    pub processor_ids: Option<Vec<String>>,
    /// `minimums.memory`, bytes.
    pub memory_bytes: Option<u64>,
    /// `minimums.storage`, bytes.
    pub storage_bytes: Option<u64>,
}

impl Plan {
    /// When slot `slot`'s first window starts, for a plan activated at `activated`: after the
    /// start delay, plus the slot's phase offset (V5 `evenly_spaced`: phase `p` of `n` starts
    /// `p/n` of a window later; for `interval`, of the cadence).
    pub fn first_start(&self, activated: Millis, slot: u16) -> Millis {
        let base = activated.saturating_add(self.start_delay_ms);
        let Phasing::EvenlySpaced { jobs_per_phase } = self.phasing else { return base };
        let per_phase = u64::from(jobs_per_phase.max(1));
        let phases = (u64::from(self.slots) / per_phase).max(1);
        let phase = (u64::from(slot) / per_phase).min(phases - 1);
        let span = match self.mode {
            Mode::Interval { every_ms, .. } => every_ms,
            _ => self.window_ms,
        };
        base.saturating_add(span / phases * phase)
    }

    /// The lead before a window's end at which its successor launches.
    pub fn lead_ms(&self) -> Millis {
        match self.renewal {
            Renewal::AfterEnd => 0,
            Renewal::Lead(ms) => ms.min(self.window_ms / 2),
        }
    }

    /// Whether a window starting at `start` may still begin (the `until` bound).
    pub fn may_start(&self, start: Millis) -> bool {
        match self.mode {
            Mode::Once => true,
            Mode::Continuous { until } | Mode::Interval { until, .. } => until.is_none_or(|u| start < u),
        }
    }

    /// The window of an occurrence starting at `start`: one duration, but an interval
    /// occurrence ends where the next begins.
    pub fn window_end(&self, start: Millis) -> Millis {
        let end = start.saturating_add(self.window_ms);
        match self.mode {
            Mode::Interval { every_ms, .. } => end.min(start.saturating_add(every_ms)),
            _ => end,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn plan(slots: u16, mode: Mode) -> Plan {
        Plan {
            policy_version: 1,
            policy_digest: "sha256:00".into(),
            slots,
            window_ms: 3_600_000,
            start_delay_ms: 0,
            phasing: Phasing::Simultaneous,
            mode,
            renewal: Renewal::Lead(600_000),
            update: Update { timing: UpdateTiming::Immediate, existing_jobs: ExistingJobs::StopWhenSuccessorReady },
            recovery: Recovery::default(),
            spend: SpendAuthority::default(),
            requirements: Requirements::default(),
            hold: None,
        }
    }

    #[test]
    fn the_automatic_lead_stays_within_the_fixed_lead_bounds() {
        assert_eq!(automatic_lead(3_600_000), 360_000);
        assert_eq!(automatic_lead(120_000), 60_000);
        assert_eq!(automatic_lead(86_400_000), 1_800_000);
        // Half of a one-minute window, never the one-minute floor.
        assert_eq!(automatic_lead(60_000), 30_000);
    }

    #[test]
    fn evenly_spaced_phases_spread_first_starts_over_one_window() {
        let mut p = plan(4, Mode::Continuous { until: None });
        p.phasing = Phasing::EvenlySpaced { jobs_per_phase: 2 };
        let starts: Vec<_> = (0..4).map(|s| p.first_start(1_000, s)).collect();
        assert_eq!(starts, [1_000, 1_000, 1_801_000, 1_801_000]);
        p.phasing = Phasing::Simultaneous;
        assert!((0..4).all(|s| p.first_start(1_000, s) == 1_000));
    }

    #[test]
    fn an_interval_occurrence_ends_where_the_next_begins() {
        let p = plan(1, Mode::Interval { every_ms: 600_000, until: Some(5_000_000) });
        assert_eq!(p.window_end(0), 600_000);
        assert!(p.may_start(4_999_999));
        assert!(!p.may_start(5_000_000));
    }
}
