//! The decision: given one application as recorded ([`AppView`]) and the time, what to do
//! next. Pure: no store, no market (only a quote function), no clock; the executor records
//! each [`Action`] durably before sending it to the market.
//!
//! Each rule cites the SPEC row it runs. Where SPEC is silent the choice is in
//! `docs/decisions.md` ("Executions") and `docs/executions.md`.

use crate::clock::Millis;
use crate::market::{Quote, Refusal, StopMode};
use crate::plan::{CeaseTrigger, ExistingJobs, Mode, Plan, RuntimeFailure, UpdateTiming};
use crate::reason::Reason;
use crate::record::{AppStatus, AppView, Charge, ExecKey, ExecState, Execution};
use crate::spend;
use crate::unserved::{self, Gap};

/// One thing to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Record this execution (launching, charged its quote), then send its order.
    Launch {
        /// The new execution (key 0).
        execution: Execution,
        /// Processors the order avoids.
        avoid: Vec<String>,
    },
    /// Record an attempt the market could not even quote (refused: it counts as a launch
    /// attempt for the retry limit); nothing is sent.
    Refuse(Execution),
    /// Stop a live execution.
    Stop {
        /// Which.
        key: ExecKey,
        /// Now, or cooperatively.
        mode: StopMode,
        /// Why.
        reason: Reason,
    },
    /// A live execution has failed (contact lost, restart grace exceeded): record it failed
    /// and stop whatever is left of it.
    Fail {
        /// Which.
        key: ExecKey,
        /// Why.
        reason: Reason,
    },
    /// Restart a failed execution on its own processor.
    Restart {
        /// Which.
        key: ExecKey,
    },
    /// The `once` application settles: terminal.
    Settle,
    /// Refund time a paid window went unserved because the service stopped
    /// ([`crate::unserved`]); the store records each gap once, however often it is asked.
    Refund(Gap),
}

/// What to do for one application, and when to look at it again.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    /// In order.
    pub actions: Vec<Action>,
    /// The next time something is due, if anything will be.
    pub next_at: Option<Millis>,
    /// Why a slot that should run cannot (spend, retries exhausted, no processor).
    pub blocked: Option<Reason>,
    /// The active version seen for the first time: record it as activated at this time.
    pub activated: Option<(u64, Millis)>,
}

/// Prices a launch: the plan, processors to avoid, the window length.
pub type QuoteFn<'a> = dyn FnMut(&Plan, &[String], Millis) -> Result<Quote, Refusal> + 'a;

/// The least time between two generations launched in one slot.
pub const MIN_LAUNCH_SPACING_MS: Millis = 1_000;

/// How often a held application (a missing secret, no spend authority) is looked at again.
pub const HOLD_RECHECK_MS: Millis = 10_000;

/// Launch retries and same-job restarts back off: 1 s, 2 s, 4 s, ... at most one minute.
pub fn retry_backoff(refusals: u32) -> Millis {
    1_000u64.saturating_mul(1 << refusals.saturating_sub(1).min(6)).min(60_000)
}

/// Decides for one application at `now`.
pub fn decide(app: &AppView, now: Millis, quote: &mut QuoteFn<'_>) -> Decision {
    let mut d = Decision::default();
    let plan = app.plan.as_ref();
    let activated_at = match plan {
        Some(p) if p.policy_version != app.activated_version => {
            d.activated = Some((p.policy_version, now));
            now
        }
        _ => app.activated_at,
    };
    let slots_seen = app.executions.iter().map(|e| e.slot + 1).max().unwrap_or(0);
    let slots = slots_seen.max(plan.map_or(0, |p| p.slots));
    if let Some(halt) = &app.halt {
        d.blocked = Some(halt.clone());
    }
    let mut finished = 0u16;
    // Charges of launches decided in this call count for the next slots' spend checks.
    let mut charges = app.charges.clone();
    for slot in 0..slots {
        let mut s =
            SlotDecider { app, plan, now, activated_at, slot, d: &mut d, quote, charges: &mut charges, next_gen: 1 };
        if s.run() {
            finished += 1;
        }
    }
    // SPEC execution `once`: "one occurrence, then terminal"; States: a settled once
    // application "does not re-run".
    if let Some(p) = plan
        && p.mode == Mode::Once
        && !app.settled
        && finished == p.slots
        && d.actions.is_empty()
    {
        // Timers of jobs still running (a slot a newer version removed) stay set.
        d.actions.push(Action::Settle);
    }
    d
}

struct SlotDecider<'v, 'q, 'f> {
    app: &'v AppView,
    plan: Option<&'v Plan>,
    now: Millis,
    activated_at: Millis,
    slot: u16,
    d: &'v mut Decision,
    quote: &'q mut QuoteFn<'f>,
    charges: &'v mut Vec<Charge>,
    /// The number a new generation of the slot gets: one past every generation it had.
    next_gen: u64,
}

impl SlotDecider<'_, '_, '_> {
    fn wake_at(&mut self, at: Millis) {
        let at = at.max(self.now);
        self.d.next_at = Some(self.d.next_at.map_or(at, |n| n.min(at)));
    }

    fn block(&mut self, reason: Reason) {
        self.d.blocked.get_or_insert(reason);
    }

    /// Decides for the slot; true when it is finished for a `once` application (its one
    /// occurrence ran and nothing more will be tried).
    fn run(&mut self) -> bool {
        let execs: Vec<&Execution> = self.app.executions.iter().filter(|e| e.slot == self.slot).collect();
        for e in execs.iter().filter(|e| e.state.is_live()) {
            self.live(e, &execs);
        }
        let Some(plan) = self.plan else { return false };
        if self.app.halt.is_some() {
            return false;
        }
        if self.slot >= plan.slots {
            self.refund_dropped(&execs);
            return false;
        }
        // SPEC States: a settled `once` application "does not run again by itself".
        if self.app.settled {
            return false;
        }
        self.next_gen = execs.iter().map(|e| e.generation).max().unwrap_or(0) + 1;
        // Generations of a version newer than the active one were withdrawn (an ingress
        // redeploy whose successor failed): `live` stops them, and the slot goes on from the
        // active version's own newest generation. Their numbers are not given again.
        let newest =
            execs.iter().filter(|e| e.policy_version <= plan.policy_version).map(|e| e.generation).max().unwrap_or(0);
        let attempts: Vec<&Execution> = execs
            .iter()
            .copied()
            .filter(|e| e.generation == newest && e.policy_version <= plan.policy_version)
            .collect();
        let Some(latest) = attempts.iter().copied().max_by_key(|e| e.attempt) else {
            return self.first(plan);
        };
        let generation_live = attempts.iter().any(|e| e.state.is_live());
        // A window the service's stop left unserved, with no attempt since: refunded once it
        // ends (whatever the application's status), looked at again then.
        if !generation_live && let Some(links) = unserved::chain(&attempts) {
            if self.now >= latest.window_end {
                self.refund(&links, latest.window_end);
            } else {
                self.wake_at(latest.window_end);
            }
        }
        if self.app.status != AppStatus::Active {
            // Decision (docs/decisions.md "Pause"): a pause stops new launches; running jobs
            // run to their scheduled end.
            return false;
        }
        if !generation_live && self.recover(plan, latest, &attempts) {
            return false;
        }
        if plan.mode == Mode::Once {
            // SPEC execution `once`: one occurrence per slot; its generation is never followed,
            // unless a re-arm (release-gated, `once_rearm`) published after it ran.
            if !generation_live && latest.policy_version < self.app.rearmed_version {
                self.launch(plan, self.next_gen, 1, self.now, Vec::new());
                return false;
            }
            return !generation_live;
        }
        self.next_generation(plan, latest);
        false
    }

    /// Rules for one live execution.
    fn live(&mut self, e: &Execution, slot_execs: &[&Execution]) {
        if e.state == ExecState::Stopping {
            return;
        }
        if let Some(halt) = &self.app.halt {
            self.stop(e.key, StopMode::Stop, halt.clone());
            return;
        }
        let Some(plan) = self.plan else {
            self.stop(e.key, StopMode::Stop, Reason::new("unpublished", "the application has no active policy"));
            return;
        };
        // SPEC schedule.durationMs / schedule.duration: "one paid job window"; a job does not
        // run past its window's scheduled end.
        if self.now >= e.window_end {
            self.stop(e.key, StopMode::Stop, Reason::new("window_ended", "its paid window ended"));
            return;
        }
        if e.policy_version > plan.policy_version {
            let reason = Reason::new(
                "withdrawn",
                format!("policy version {} is no longer active; version {} is", e.policy_version, plan.policy_version),
            );
            self.stop(e.key, StopMode::Stop, reason);
            return;
        }
        if self.slot >= plan.slots && plan.update.existing_jobs != ExistingJobs::RunUntilScheduledEnd {
            self.stop(
                e.key,
                StopMode::Stop,
                Reason::new("slot_removed", format!("policy version {} has {} slots", plan.policy_version, plan.slots)),
            );
            return;
        }
        self.wake_at(e.window_end);
        // SPEC lifecycle.update.existingJobs: what happens to a job once a successor of a
        // newer policy version exists in its slot.
        let successor = slot_execs
            .iter()
            .filter(|s| s.state.is_live() && s.generation > e.generation && s.policy_version > e.policy_version)
            .max_by_key(|s| s.generation);
        if let Some(succ) = successor {
            let superseded = Reason::new(
                "superseded",
                format!("generation {} of policy version {} replaces it", succ.generation, succ.policy_version),
            );
            match plan.update.existing_jobs {
                ExistingJobs::RunUntilScheduledEnd => {}
                ExistingJobs::StopWhenSuccessorReady => {
                    if succ.state == ExecState::Ready {
                        return self.stop(e.key, StopMode::Stop, superseded);
                    }
                }
                ExistingJobs::CooperativeCease(trigger) => {
                    let fired = match trigger {
                        CeaseTrigger::RolloutStarted => true,
                        CeaseTrigger::SuccessorProcessorClaimed => {
                            matches!(succ.state, ExecState::Running | ExecState::Ready | ExecState::Restarting)
                        }
                        CeaseTrigger::SuccessorRuntimeReady => succ.state == ExecState::Ready,
                    };
                    if fired {
                        return self.stop(e.key, StopMode::Cease, superseded);
                    }
                }
            }
        }
        // SPEC replace_after_failure contactLossAfterMs and restartGraceMs.
        if let RuntimeFailure::ReplaceAfterFailure { contact_loss_after_ms, restart_grace_ms, .. } =
            plan.recovery.runtime_failure
        {
            if let Some(since) = e.silent_since {
                let lost_at = since.saturating_add(contact_loss_after_ms);
                if self.now >= lost_at {
                    let reason = Reason::new(
                        "contact_lost",
                        format!("its processor has not reported for {contact_loss_after_ms} ms"),
                    );
                    self.d.actions.push(Action::Fail { key: e.key, reason });
                    self.wake_at(self.now);
                    return;
                }
                self.wake_at(lost_at);
            }
            if e.state == ExecState::Restarting {
                let deadline = e.changed_at.saturating_add(restart_grace_ms);
                if self.now >= deadline {
                    let reason = Reason::new(
                        "restart_grace_exceeded",
                        format!("it was not ready {restart_grace_ms} ms after its restart"),
                    );
                    self.d.actions.push(Action::Fail { key: e.key, reason });
                    self.wake_at(self.now);
                    return;
                }
                self.wake_at(deadline);
            }
        }
    }

    fn stop(&mut self, key: ExecKey, mode: StopMode, reason: Reason) {
        self.d.actions.push(Action::Stop { key, mode, reason });
    }

    /// The slot's first generation. Returns whether the slot is finished (never, here).
    fn first(&mut self, plan: &Plan) -> bool {
        if self.app.status != AppStatus::Active {
            return false;
        }
        if let Some(hold) = &plan.hold {
            // Lifted by an administrator's change, which wakes no one: look again shortly.
            self.block(hold.clone());
            self.wake_at(self.now.saturating_add(HOLD_RECHECK_MS));
            return false;
        }
        // SPEC schedule.startDelayMs (V4) and schedule.phasing (V5 `evenly_spaced`).
        let start = plan.first_start(self.activated_at, self.slot);
        if !plan.may_start(start.max(self.now)) {
            return false;
        }
        if self.now < start {
            self.wake_at(start);
            return false;
        }
        self.launch(plan, self.next_gen, 1, self.now, Vec::new());
        false
    }

    /// Whether anything runs in the slot (a withdrawn version's job being stopped included).
    fn slot_live(&self) -> bool {
        self.app.executions.iter().any(|e| e.slot == self.slot && e.state.is_live())
    }

    /// Launch retries and runtime-failure recovery of the newest generation, which has no
    /// live attempt. True when it decided something (or must wait for a retry).
    fn recover(&mut self, plan: &Plan, latest: &Execution, attempts: &[&Execution]) -> bool {
        let open = self.now < latest.window_end;
        // An older version's job that ended, with an `immediate` update active: it is not
        // restarted as it was (a same-job restart runs its old version); a replacement or a
        // new generation runs the new one (review finding: a redeploy during a restart's
        // backoff waited out every restart of the old revision).
        let superseded = plan.update.timing == UpdateTiming::Immediate && latest.policy_version < plan.policy_version;
        match latest.state {
            // SPEC lifecycle.recovery.launch `maxRetries`: a refused launch is retried, with
            // backoff, at most that many times per generation.
            ExecState::Refused => {
                let refusals = u32::try_from(attempts.iter().filter(|e| e.state == ExecState::Refused).count())
                    .unwrap_or(u32::MAX);
                if refusals > u32::from(plan.recovery.max_launch_retries) {
                    if open {
                        let why = latest.reason.as_ref().map_or("", |r| r.message.as_str());
                        self.block(Reason::new(
                            "launch_retries_exhausted",
                            format!(
                                "slot {} generation {}: {refusals} launches were refused ({why}); the slot waits \
                                 for its next window",
                                self.slot, latest.generation
                            ),
                        ));
                    }
                    return false;
                }
                if !open && plan.mode != Mode::Once {
                    // The window passed while retrying: the next generation takes over.
                    return false;
                }
                let due = latest.changed_at.saturating_add(retry_backoff(refusals));
                if self.now < due {
                    self.wake_at(due);
                    return true;
                }
                let which = Attempt::next(plan, latest);
                if open {
                    let start = latest.window_start.max(self.now);
                    // A retry of a relaunch after the service's stop is as free as the relaunch.
                    let paid = unserved::chain(attempts);
                    self.launch_in(plan, which, start, latest.window_end, Vec::new(), paid.as_deref());
                } else {
                    // A `once` occurrence that never ran gets a whole window when it finally does.
                    self.launch_window(plan, which, self.now, plan.window_end(self.now), Vec::new());
                }
                true
            }
            // Not a runtime failure: the job stopped with the service (the local pool), so its
            // generation gets a new attempt for the rest of its window (docs/decisions.md),
            // which the generation's charge already covers: it is not charged again, and the
            // time nothing served is refunded (`unserved`, issue 41).
            ExecState::Failed
                if open && latest.reason.as_ref().is_some_and(|r| r.code == crate::reason::PROCESSOR_RESTARTED) =>
            {
                let paid = unserved::chain(attempts);
                let start = latest.window_start.max(self.now);
                self.launch_in(
                    plan,
                    Attempt::next(plan, latest),
                    start,
                    latest.window_end,
                    Vec::new(),
                    paid.as_deref(),
                );
                true
            }
            // Stopped with its window still open by something other than its lifecycle (a
            // halt, the application unpublished): now that it may run again, the slot runs a
            // new generation at once rather than waiting out a window nothing runs in
            // (docs/decisions.md "Halt is not pause"). A `once` occurrence is not run again.
            ExecState::Stopped
                if open
                    && matches!(plan.mode, Mode::Continuous { .. })
                    && !self.slot_live()
                    && plan.may_start(self.now) =>
            {
                self.launch(plan, self.next_gen, 1, self.now, Vec::new());
                true
            }
            // SPEC lifecycle.recovery.runtimeFailure (and, where the plan says so, an exit
            // with status 0 before the window's end: a web job's).
            ExecState::Failed | ExecState::Completed
                if open && (latest.state == ExecState::Failed || plan.recovery.exit_is_failure) =>
            {
                match plan.recovery.runtime_failure {
                    RuntimeFailure::WaitUntilScheduledEnd => false,
                    RuntimeFailure::ReplaceAfterFailure { max_same_job_restarts, max_fresh_replacements, .. } => {
                        let lost = latest.reason.as_ref().is_some_and(|r| r.code == "contact_lost");
                        // maxSameJobRestarts: the same job, on its processor.
                        if !superseded
                            && !lost
                            && latest.processor_id.is_some()
                            && latest.restarts < u32::from(max_same_job_restarts)
                        {
                            // A platform bound (docs/decisions.md "Restart backoff"): restart `n`
                            // waits `retry_backoff(n)` after the failure, so a job that fails as
                            // it starts is not restarted in a tight loop.
                            let due = latest.changed_at.saturating_add(retry_backoff(latest.restarts + 1));
                            if self.now < due {
                                self.wake_at(due);
                                return true;
                            }
                            self.d.actions.push(Action::Restart { key: latest.key });
                            // Its restart grace starts now.
                            self.wake_at(self.now);
                            return true;
                        }
                        // maxFreshRegistrationReplacements: a new attempt on another processor.
                        let placed = attempts.iter().filter(|e| e.state != ExecState::Refused).count();
                        if placed <= usize::from(max_fresh_replacements) {
                            let avoid: Vec<String> = attempts.iter().filter_map(|e| e.processor_id.clone()).collect();
                            let start = self.now;
                            self.launch_window(plan, Attempt::next(plan, latest), start, latest.window_end, avoid);
                            return true;
                        }
                        false
                    }
                }
            }
            _ => false,
        }
    }

    /// Renewal, the next interval occurrence, and immediate updates.
    fn next_generation(&mut self, plan: &Plan, latest: &Execution) {
        let next = self.next_gen;
        // SPEC lifecycle.update.timing `immediate`: a slot running an older version gets a
        // successor of the new one now (its predecessor then follows existingJobs).
        if plan.update.timing == UpdateTiming::Immediate && latest.policy_version < plan.policy_version {
            let serving = self.app.executions.iter().any(|e| {
                e.slot == self.slot
                    && e.generation == latest.generation
                    && e.state.is_live()
                    && e.state != ExecState::Stopping
            });
            if serving {
                let app = self.app;
                let (slot, newest) = (self.slot, latest.generation);
                let live = |e: &&Execution| e.slot == slot && e.state.is_live() && e.state != ExecState::Stopping;
                let older: Vec<&Execution> =
                    app.executions.iter().filter(live).filter(|e| e.generation < newest).collect();
                let latest_serves = latest.state == ExecState::Ready && self.now >= latest.window_start;
                // At most one predecessor overlaps a successor: a newest generation that does
                // not serve yet (a renewal launched ahead of its window, or a successor of an
                // earlier update not ready yet) is replaced before it serves; otherwise older
                // generations still overlapping it are stopped.
                let (start, end, replaced): (Millis, Millis, Vec<&Execution>) =
                    if !latest_serves && (!older.is_empty() || self.now < latest.window_start) {
                        let replaced = app.executions.iter().filter(live).filter(|e| e.generation == newest).collect();
                        if self.now < latest.window_start {
                            (latest.window_start, latest.window_end, replaced)
                        } else {
                            (self.now, plan.window_end(self.now), replaced)
                        }
                    } else {
                        (self.now, plan.window_end(self.now), older)
                    };
                for e in replaced {
                    let reason =
                        Reason::new("superseded", format!("policy version {} replaces it", plan.policy_version));
                    self.stop(e.key, StopMode::Stop, reason);
                }
                let which = Attempt { generation: next, attempt: 1, policy_version: plan.policy_version };
                if self.launch_window(plan, which, start, end, Vec::new()) {
                    // Decide again at once: existingJobs rules apply to the predecessor as
                    // soon as the successor exists.
                    self.wake_at(self.now);
                }
                return;
            }
            if !self.slot_live() && plan.may_start(self.now) {
                // The new version takes effect now (`immediate`) in a slot that runs nothing
                // (its job failed and waits for its window's end, or was stopped): at once,
                // not at the renewal of a window nothing runs in (docs/decisions.md).
                let due = latest.created_at.saturating_add(MIN_LAUNCH_SPACING_MS);
                if self.now < due {
                    self.wake_at(due);
                    return;
                }
                self.launch(plan, next, 1, self.now, Vec::new());
                return;
            }
        }
        // The generation's first attempt: where its window and its launch began (a later
        // attempt, relaunched after a restart of the service, starts late).
        let first = self
            .app
            .executions
            .iter()
            .filter(|e| e.slot == self.slot && e.generation == latest.generation)
            .min_by_key(|e| e.attempt)
            .unwrap_or(latest);
        let (start, due) = match plan.mode {
            Mode::Once => return,
            // SPEC lifecycle.renewal: the successor launches at the window's end
            // (`after_scheduled_end`) or a lead before it (`before_scheduled_end`, V5 `leadTime`).
            Mode::Continuous { .. } => (latest.window_end, latest.window_end.saturating_sub(plan.lead_ms())),
            // SPEC execution `interval`: a new occurrence every `every`; missed occurrences are
            // not made up, the next starts on the cadence (the occurrence's, not a relaunch's).
            Mode::Interval { every_ms, .. } => {
                let every = every_ms.max(1);
                let mut start = first.window_start.saturating_add(every);
                if self.now > start {
                    start += (self.now - start) / every * every;
                }
                (start, start)
            }
        };
        // SPEC execution `until`: no window starts at or after the bound.
        if !plan.may_start(start.max(self.now)) {
            return;
        }
        // A platform bound (SPEC: "platform and plan bounds apply at publication or launch"):
        // a slot launches at most one generation per MIN_LAUNCH_SPACING_MS, so a window or
        // cadence of milliseconds cannot turn into a process per millisecond. Counted from
        // the generation's launch, its first attempt: an attempt relaunched late in the
        // window (a restart of the service) must not hold the renewal past the window's end,
        // leaving the slot unserved (publication chaos on PostgreSQL, seed 1778901580).
        let due = due.max(first.created_at.saturating_add(MIN_LAUNCH_SPACING_MS));
        if self.now < due {
            self.wake_at(due);
            return;
        }
        let launched = self.launch(plan, next, 1, start.max(self.now), Vec::new());
        if launched && plan.update.existing_jobs != ExistingJobs::RunUntilScheduledEnd {
            // At most one predecessor overlaps a successor: a generation older than the one
            // being renewed (still waiting out an update's overlap) stops now. A
            // `run_until_scheduled_end` job keeps its promise and runs to its window's end.
            let app = self.app;
            let slot = self.slot;
            for e in app.executions.iter().filter(|e| {
                e.slot == slot
                    && e.state.is_live()
                    && e.state != ExecState::Stopping
                    && e.generation < latest.generation
            }) {
                let reason = Reason::new("superseded", format!("generation {next} renews its successor"));
                self.stop(e.key, StopMode::Stop, reason);
            }
        }
    }

    fn launch(&mut self, plan: &Plan, generation: u64, attempt: u32, start: Millis, avoid: Vec<String>) -> bool {
        let which = Attempt { generation, attempt, policy_version: plan.policy_version };
        self.launch_window(plan, which, start, plan.window_end(start), avoid)
    }

    fn launch_window(&mut self, plan: &Plan, which: Attempt, start: Millis, end: Millis, avoid: Vec<String>) -> bool {
        self.launch_in(plan, which, start, end, avoid, None)
    }

    /// A slot the active version no longer has (a newer version with fewer slots let its job
    /// run to its window's end): nothing relaunches it, so a window the service's stop left
    /// unserved is refunded once it ends, as a paused application's is (svc-sim
    /// `dropped-slot-outage`, seeds 27 and 7323: never refunded before).
    fn refund_dropped(&mut self, execs: &[&Execution]) {
        let Some(newest) = execs.iter().map(|e| e.generation).max() else { return };
        let attempts: Vec<&Execution> = execs.iter().copied().filter(|e| e.generation == newest).collect();
        let Some(latest) = attempts.iter().copied().max_by_key(|e| e.attempt) else { return };
        if attempts.iter().any(|e| e.state.is_live()) {
            return;
        }
        if let Some(links) = unserved::chain(&attempts) {
            if self.now >= latest.window_end {
                self.refund(&links, latest.window_end);
            } else {
                self.wake_at(latest.window_end);
            }
        }
    }

    /// Refunds each gap of a chain of attempts stopped with the service, up to `end`.
    fn refund(&mut self, links: &[&Execution], end: Millis) {
        for gap in unserved::gaps(links, end) {
            if gap.amount != Quote::default() {
                self.d.actions.push(Action::Refund(gap));
            }
        }
    }

    /// Launches an attempt for `start..end`; within a window already `paid` (a chain of
    /// attempts stopped with the service, its charged attempt first), it is charged nothing,
    /// no spend check applies (it spends nothing), and the gaps up to now are refunded.
    fn launch_in(
        &mut self,
        plan: &Plan,
        Attempt { generation, attempt, policy_version }: Attempt,
        start: Millis,
        end: Millis,
        avoid: Vec<String>,
        paid: Option<&[&Execution]>,
    ) -> bool {
        if let Some(hold) = &plan.hold {
            // Lifted by an administrator's change, which wakes no one: look again shortly.
            self.block(hold.clone());
            self.wake_at(self.now.saturating_add(HOLD_RECHECK_MS));
            return false;
        }
        let mut execution = Execution {
            key: 0,
            execution_id: Execution::id_for(&self.app.uid, self.slot, generation, attempt),
            slot: self.slot,
            generation,
            attempt,
            policy_version,
            state: ExecState::Launching,
            processor_id: None,
            window_start: start,
            window_end: end,
            restarts: 0,
            charged: Quote::default(),
            created_at: self.now,
            changed_at: self.now,
            silent_since: None,
            reason: None,
        };
        match (self.quote)(plan, &avoid, end.saturating_sub(start)) {
            Err(refusal) => {
                execution.state = ExecState::Refused;
                execution.reason = Some(Reason::new(refusal.code(), refusal.to_string()));
                self.d.actions.push(Action::Refuse(execution));
                if let Some(links) = paid {
                    self.refund(links, self.now);
                }
                self.wake_at(self.now.saturating_add(retry_backoff(1)));
                false
            }
            Ok(q) => {
                if let Some(links) = paid {
                    // Paid already: charged nothing, so nothing to check against the authority.
                    self.d.actions.push(Action::Launch { execution, avoid });
                    self.refund(links, self.now);
                } else {
                    // Spend authority: a launch that would exceed it is not made.
                    if let Err(exceeded) = spend::check(&plan.spend, self.charges, self.slot, generation, &q, self.now)
                    {
                        // A rate frees itself at a known time; a per-job limit is lifted by a
                        // publication (which wakes) or an administrator raising the
                        // organization's authority (which wakes no one): look again shortly,
                        // as for a hold.
                        self.wake_at(exceeded.retry_at.unwrap_or(self.now.saturating_add(HOLD_RECHECK_MS)));
                        self.block(exceeded.reason);
                        return false;
                    }
                    execution.charged = q;
                    self.charges.push(Charge { slot: self.slot, generation, at: self.now, quote: q });
                    self.d.actions.push(Action::Launch { execution, avoid });
                }
                // Its window's end, and (continuous) its successor's launch.
                self.wake_at(end);
                self.wake_at(end.saturating_sub(plan.lead_ms()).max(start));
                true
            }
        }
    }
}

/// Which attempt a launch makes: its generation, its number within it, and the policy
/// version it runs.
#[derive(Debug, Clone, Copy)]
struct Attempt {
    generation: u64,
    attempt: u32,
    policy_version: u64,
}

impl Attempt {
    /// The attempt after `latest` in its generation (a retry, a replacement). It runs its
    /// generation's own version (SPEC lifecycle.update.timing `next_scheduled_renewal`: a
    /// version takes effect at the next renewal, so a retry within the generation does not
    /// bring it in), unless the update is `immediate`, which wants the active version now.
    /// Where it may run and what it may cost are the active version's (placement, spend): the
    /// scheduler holds one plan, the active one (docs/decisions.md, "Executions").
    fn next(plan: &Plan, latest: &Execution) -> Attempt {
        let policy_version = match plan.update.timing {
            UpdateTiming::Immediate => plan.policy_version,
            UpdateTiming::NextRenewal => latest.policy_version,
        };
        Attempt { generation: latest.generation, attempt: latest.attempt + 1, policy_version }
    }
}
