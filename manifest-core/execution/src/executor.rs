//! Carries decisions out, exactly once. Every decision is recorded (committed) before its
//! effect is sent to the market, and every effect's outcome is recorded after:
//!
//! 1. **intent**: in one transaction, the decision's executions are inserted as `launching`
//!    and charged, stops are recorded as `stopping`, restarts as `restarting`;
//! 2. **effect**: the orders go to the market (idempotent by execution ID);
//! 3. **outcome**: placements become `running`, refusals `refused` (and refunded).
//!
//! A crash between 1 and 3 leaves `launching` or `stopping` rows; [`Executor::recover`]
//! compares them with what the market holds ([`Market::jobs`]) and re-sends what was not
//! done, adopts what was, and stops (and records) any job the store does not know. A slot
//! generation is never launched twice because its execution ID is its idempotency key.
//!
//! Charges follow the paid window, not the attempt ([`crate::unserved`]): a job that stopped
//! with the service is recorded failed as of when the service was last known alive (the
//! newer of its own last change and the executor's heartbeat, [`HEARTBEAT_MS`]), its
//! generation's next attempt in the window is charged nothing, and the time nothing served
//! is refunded.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::clock::{Clock, Millis};
use crate::market::{JobOrder, JobState, JobStatus, Market, StopMode, Workload};
use crate::reason::{PROCESSOR_RESTARTED, Reason};
use crate::record::{AppKey, AppView, ExecKey, ExecState, Execution};
use crate::scheduler::{Action, decide};

/// How often, at most, the executor records that it is alive ([`ExecutionTx::heartbeat`], in
/// a step's transaction). A crash is dated from the last record: at most this plus the gap
/// between two steps (200 ms in the service) before the service actually died, so a refund
/// of the time a crash left unserved errs by at most that much, in the customer's favor.
pub const HEARTBEAT_MS: Millis = 2_000;

/// Why the store failed; the executor stops its step (nothing after the failure is sent).
#[derive(Debug, thiserror::Error)]
#[error("the execution store failed: {0}")]
pub struct StoreFailure(#[source] pub Box<dyn std::error::Error + Send + Sync>);

impl StoreFailure {
    /// Whether the store refused because this instance no longer leads the scheduling
    /// ([`NotLeader`]): another instance took over, and this one must stand by.
    pub fn is_not_leader(&self) -> bool {
        self.0.downcast_ref::<NotLeader>().is_some()
    }
}

/// The store's refusal of a scheduler that does not hold the scheduling lease (several
/// instances on one database: one schedules, the others stand by).
#[derive(Debug, thiserror::Error)]
#[error("this instance does not lead the scheduling: {0}")]
pub struct NotLeader(pub String);

/// Where executions are kept.
pub trait ExecutionStore: Send + Sync {
    /// A write transaction; writers are serialized. A store several instances share refuses
    /// it ([`NotLeader`]) unless this instance holds the scheduling lease, and renews the lease
    /// when it grants it.
    fn begin(&self) -> Result<Box<dyn ExecutionTx + '_>, StoreFailure>;

    /// Takes (or keeps) the scheduling lease: `true` if this instance now schedules. A store
    /// only one instance uses always leads.
    fn lead(&self) -> Result<bool, StoreFailure> {
        Ok(true)
    }

    /// When the next application is due, if any is scheduled: a read for the scheduler's
    /// sleep, which takes no writers' lock where the store can read without it.
    fn next_due(&self) -> Result<Option<Millis>, StoreFailure> {
        self.begin()?.next_due()
    }

    /// Gives the scheduling lease up (a stop asked for): another instance takes over at once
    /// instead of when the lease runs out.
    fn resign(&self) {}
}

/// One transaction of the execution store; dropped uncommitted, it rolls back.
pub trait ExecutionTx {
    /// Applications with something due at or before `now`, soonest first, at most `limit`.
    fn due(&mut self, now: Millis, limit: usize) -> Result<Vec<AppKey>, StoreFailure>;
    /// When the next application is due, if any is scheduled.
    fn next_due(&mut self) -> Result<Option<Millis>, StoreFailure>;
    /// One application as the scheduler sees it.
    fn app(&mut self, app: AppKey) -> Result<Option<AppView>, StoreFailure>;
    /// The execution with this market ID.
    fn find(&mut self, execution_id: &str) -> Result<Option<(AppKey, Execution)>, StoreFailure>;
    /// Every live execution.
    fn live(&mut self) -> Result<Vec<(AppKey, Execution)>, StoreFailure>;
    /// What a job of this policy version runs.
    fn workload(&mut self, app: AppKey, policy_version: u64) -> Result<Workload, StoreFailure>;
    /// Records a new execution and charges its quote to the ledger; returns its key.
    fn insert(&mut self, app: AppKey, execution: &Execution) -> Result<ExecKey, StoreFailure>;
    /// Records an execution's new state (and its processor, restarts, silence and reason),
    /// with a transition entry from `from`.
    fn transition(&mut self, app: AppKey, execution: &Execution, from: ExecState) -> Result<(), StoreFailure>;
    /// Refunds what remains of a refused launch's charge: its charge less what was refunded
    /// of it already ([`ExecutionTx::refund_unserved`]: a launch in flight at a crash has the
    /// stretch before its recovery refunded, and the market may then refuse it), so a
    /// charge is never refunded more than once in all (svc-sim `over-refund`, seed 18).
    /// Nothing is recorded when nothing remains.
    fn refund(&mut self, app: AppKey, execution: &Execution, at: Millis) -> Result<(), StoreFailure>;
    /// Refunds `amount` of `paid`'s charge for `from..to`, a stretch of its window nothing
    /// served because the service stopped ([`crate::unserved`]): one ledger entry of its own,
    /// recorded at `at`, at most once per (`paid`, `from`): asked again, it records nothing.
    /// [`ExecutionTx::app`]'s charges are then net of it.
    ///
    /// Added for issue 41, with a default that records nothing, for stores whose launches
    /// charge nothing (the relay's): a store that charges must implement it.
    fn refund_unserved(
        &mut self,
        app: AppKey,
        paid: &Execution,
        from: Millis,
        to: Millis,
        amount: &crate::market::Quote,
        at: Millis,
    ) -> Result<(), StoreFailure> {
        let _ = (app, paid, from, to, amount, at);
        Ok(())
    }
    /// Records that the scheduler is alive at `at` (the executor's heartbeat: at most every
    /// [`HEARTBEAT_MS`], in a step's transaction). One value per store, the newest.
    ///
    /// Added for issue 41; the default records nothing, and recovery then dates a crash by
    /// each execution's own last change.
    fn heartbeat(&mut self, at: Millis) -> Result<(), StoreFailure> {
        let _ = at;
        Ok(())
    }
    /// Records jobs' output lines and how many lines each execution lost
    /// ([`crate::output`]), keeping each execution's newest within the store's bounds. Lines
    /// of an execution the store does not know are ignored.
    ///
    /// Added for issue 42; the default records nothing (a store that keeps no output).
    fn record_output(&mut self, batch: &crate::output::OutputBatch) -> Result<(), StoreFailure> {
        let _ = batch;
        Ok(())
    }
    /// The newest [`ExecutionTx::heartbeat`], if any (added for issue 41; default: none).
    fn last_alive(&mut self) -> Result<Option<Millis>, StoreFailure> {
        Ok(None)
    }
    /// When to decide for the application next (`None`: only on a wakeup), and why it is
    /// blocked, if it is.
    fn schedule(&mut self, app: AppKey, next_at: Option<Millis>, blocked: Option<&Reason>) -> Result<(), StoreFailure>;
    /// Records the active version as activated.
    fn activate(&mut self, app: AppKey, version: u64, at: Millis) -> Result<(), StoreFailure>;
    /// Settles a `once` application (terminal).
    fn settle(&mut self, app: AppKey, at: Millis) -> Result<(), StoreFailure>;
    /// Makes every write durable.
    fn commit(self: Box<Self>) -> Result<(), StoreFailure>;
}

/// What one step did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepReport {
    /// Applications decided for.
    pub decided: usize,
    /// Launch orders sent.
    pub launched: usize,
    /// Stops sent.
    pub stopped: usize,
    /// Status changes recorded.
    pub recorded: usize,
    /// Whether applications were left due (the batch was full): step again at once.
    pub more: bool,
}

/// What recovery found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Launches re-sent (recorded, never placed).
    pub relaunched: usize,
    /// Launches found placed and adopted.
    pub adopted: usize,
    /// Live executions the market no longer has: recorded failed.
    pub lost: usize,
    /// Jobs the store does not know as live: stopped and recorded.
    pub orphans_stopped: usize,
}

enum Effect {
    Launch(AppKey, Execution, JobOrder),
    Stop(String, StopMode),
    Restart(AppKey, Execution, JobOrder, String),
}

/// Runs the scheduler over a store and a market.
pub struct Executor {
    store: Arc<dyn ExecutionStore>,
    market: Arc<dyn Market>,
    clock: Arc<dyn Clock>,
    batch: usize,
    /// When this executor last recorded its heartbeat (0: not yet).
    heartbeat: std::sync::atomic::AtomicU64,
    /// Reports taken from the market that no transaction has recorded yet (the store failed):
    /// the market tells a change once, so they are kept for the next step, the latest per job.
    unrecorded: std::sync::Mutex<Vec<JobStatus>>,
}

impl Executor {
    /// An executor deciding for at most `batch` applications per transaction.
    pub fn new(
        store: Arc<dyn ExecutionStore>,
        market: Arc<dyn Market>,
        clock: Arc<dyn Clock>,
        batch: usize,
    ) -> Executor {
        Executor {
            store,
            market,
            clock,
            batch: batch.max(1),
            heartbeat: std::sync::atomic::AtomicU64::new(0),
            unrecorded: std::sync::Mutex::default(),
        }
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Whether `job` ended because it was over its memory (the market says how it ended).
    fn out_of_memory(&self, job: &JobStatus) -> bool {
        ended(job.state) && self.market.ending(&job.execution_id).is_some_and(|exit| exit.out_of_memory)
    }

    /// When the next application is due.
    pub fn next_due(&self) -> Result<Option<Millis>, StoreFailure> {
        self.store.next_due()
    }

    /// When the next step records the heartbeat ([`HEARTBEAT_MS`] after the last one): a
    /// scheduler that sleeps longer than it polls steps by then while jobs run, so that a
    /// crash is still dated within a heartbeat.
    pub fn next_heartbeat(&self) -> Millis {
        self.heartbeat.load(std::sync::atomic::Ordering::Relaxed).saturating_add(HEARTBEAT_MS)
    }

    /// Reconciles the store with what the market holds: run at start, before any step.
    pub fn recover(&self) -> Result<RecoveryReport, StoreFailure> {
        let now = self.clock.now();
        // By ID: recovery's stops go out in one order every run (a simulated crash at any of
        // them replays: docs/simulation.md).
        let jobs: BTreeMap<String, JobStatus> =
            self.market.jobs().into_iter().map(|j| (j.execution_id.clone(), j)).collect();
        let mut report = RecoveryReport::default();
        let mut effects = Vec::new();
        let mut release = Vec::new();
        let mut tx = self.store.begin()?;
        let alive = tx.last_alive()?.unwrap_or(0);
        let live = tx.live()?;
        let known: BTreeSet<&str> = live.iter().map(|(_, e)| e.execution_id.as_str()).collect();
        let mut touched = BTreeSet::new();
        let starts_empty = self.market.starts_empty();
        // Each application read once, for the refunds of predecessors (below).
        let mut views: BTreeMap<AppKey, Option<AppView>> = BTreeMap::new();
        for (app, e) in &live {
            match (e.state, jobs.get(&e.execution_id)) {
                (ExecState::Launching, None) => {
                    // One read of the application for both what to avoid and where to run.
                    let view = tx.app(*app)?;
                    // Its process, if it had started, died with the service: the time since
                    // the service was last alive is refunded (`unserved::in_flight`).
                    if starts_empty
                        && let Some(gap) = view.as_ref().and_then(|v| crate::unserved::in_flight(v, e, alive, now))
                        && let Some(paid) = view.as_ref().and_then(|v| v.executions.iter().find(|o| o.key == gap.paid))
                    {
                        tx.refund_unserved(*app, paid, gap.from, gap.to, &gap.amount, now)?;
                    }
                    let avoid = view.as_ref().map(|v| avoid_for(v, e)).unwrap_or_default();
                    let requirements = view.and_then(|v| v.plan).map(|p| p.requirements).unwrap_or_default();
                    let order = order(tx.as_mut(), *app, e, avoid, &requirements)?;
                    effects.push(Effect::Launch(*app, e.clone(), order));
                    report.relaunched += 1;
                }
                (ExecState::Stopping, Some(job)) if !ended(job.state) => {
                    effects.push(Effect::Stop(e.execution_id.clone(), StopMode::Stop));
                }
                (_, Some(job)) => {
                    if e.state == ExecState::Launching {
                        report.adopted += 1;
                    }
                    if record_status(tx.as_mut(), *app, e, job, self.out_of_memory(job), now)? {
                        touched.insert(*app);
                    }
                    if ended(job.state) {
                        release.push(e.execution_id.clone());
                    }
                }
                (ExecState::Stopping, None) => {
                    set(tx.as_mut(), *app, e, ExecState::Stopped, None, now)?;
                    touched.insert(*app);
                }
                (_, None) if starts_empty => {
                    // The market's processes were the service's, so the job ended with it, when
                    // the service was last known alive: the slot gets a new attempt, which the
                    // generation's charge covers (`unserved`).
                    let died = alive.max(e.changed_at).max(e.created_at).min(now);
                    // A predecessor still serving its window while its renewal ran ahead: the
                    // time its window goes unserved is refunded now (`unserved::renewed`).
                    if !views.contains_key(app) {
                        views.insert(*app, tx.app(*app)?);
                    }
                    if let Some(Some(view)) = views.get_mut(app) {
                        // The view holds each slot's newest generation's attempts: a free
                        // predecessor's earlier ones (the attempt its charge is on) are read here.
                        let behind = view.executions.iter().any(|o| o.slot == e.slot && o.generation > e.generation);
                        for attempt in (1..e.attempt).filter(|_| behind && e.charged == crate::market::Quote::default())
                        {
                            let id = Execution::id_for(&view.uid, e.slot, e.generation, attempt);
                            if !view.executions.iter().any(|o| o.execution_id == id)
                                && let Some((_, earlier)) = tx.find(&id)?
                            {
                                view.executions.push(earlier);
                            }
                        }
                        if let Some(gap) = crate::unserved::renewed(view, e, alive, now)
                            && let Some(paid) = view.executions.iter().find(|o| o.key == gap.paid)
                        {
                            tx.refund_unserved(*app, paid, gap.from, gap.to, &gap.amount, now)?;
                        }
                    }
                    let reason = Reason::new(
                        PROCESSOR_RESTARTED,
                        "it stopped with the service (dated when the service was last known alive); the slot gets \
                         a new attempt, not charged again",
                    );
                    set(tx.as_mut(), *app, e, ExecState::Failed, Some(reason), died)?;
                    report.lost += 1;
                    touched.insert(*app);
                }
                (_, None) => {
                    let reason = Reason::new("lost", "its processor no longer has it (found at the service's restart)");
                    set(tx.as_mut(), *app, e, ExecState::Failed, Some(reason), now)?;
                    report.lost += 1;
                    touched.insert(*app);
                }
            }
        }
        // Jobs the store does not know as live: ended ones are released, running ones stopped.
        for (id, job) in &jobs {
            if known.contains(id.as_str()) {
                continue;
            }
            if !ended(job.state) {
                effects.push(Effect::Stop(id.clone(), StopMode::Stop));
                report.orphans_stopped += 1;
            }
            release.push(id.clone());
        }
        for app in &touched {
            tx.schedule(*app, Some(now), None)?;
        }
        tx.heartbeat(now)?;
        tx.commit()?;
        self.heartbeat.store(now, std::sync::atomic::Ordering::Relaxed);
        self.apply(effects, now)?;
        // After the stops: an orphan is stopped first, then forgotten.
        for id in release {
            self.market.release(&id);
        }
        Ok(report)
    }

    /// Records status changes, decides for every due application (one batch), records the
    /// decisions, sends them, and records their outcomes.
    pub fn step(&self) -> Result<StepReport, StoreFailure> {
        let now = self.clock.now();
        let mut report = StepReport::default();
        let mut touched = BTreeSet::new();
        let changes = self.take_changes();
        if !changes.is_empty()
            && let Err(failure) = self.record_changes(&changes, now, &mut touched, &mut report)
        {
            self.keep_unrecorded(changes);
            return Err(failure);
        }

        let mut tx = self.store.begin()?;
        let beat = now >= self.heartbeat.load(std::sync::atomic::Ordering::Relaxed).saturating_add(HEARTBEAT_MS);
        if beat {
            tx.heartbeat(now)?;
        }
        let due = tx.due(now, self.batch)?;
        report.more = due.len() >= self.batch;
        let mut effects = Vec::new();
        for app in due {
            let Some(view) = tx.app(app)? else { continue };
            report.decided += 1;
            let market = &self.market;
            let decision =
                decide(&view, now, &mut |plan, avoid, window| market.quote(&plan.requirements, avoid, window));
            if let Some((version, at)) = decision.activated {
                tx.activate(app, version, at)?;
            }
            let requirements = view.plan.as_ref().map(|p| p.requirements.clone()).unwrap_or_default();
            let by_key: BTreeMap<ExecKey, &Execution> = view.executions.iter().map(|e| (e.key, e)).collect();
            let mut stopped = BTreeSet::new();
            for action in decision.actions {
                match action {
                    Action::Launch { execution, avoid } => {
                        let mut e = execution;
                        e.key = tx.insert(app, &e)?;
                        let order = order(tx.as_mut(), app, &e, avoid, &requirements)?;
                        effects.push(Effect::Launch(app, e, order));
                    }
                    Action::Refuse(e) => {
                        tx.insert(app, &e)?;
                    }
                    Action::Stop { key, mode, reason } => {
                        let Some(e) = by_key.get(&key) else { continue };
                        if stopped.insert(key) {
                            set(tx.as_mut(), app, e, ExecState::Stopping, Some(reason), now)?;
                            effects.push(Effect::Stop(e.execution_id.clone(), mode));
                        }
                    }
                    Action::Fail { key, reason } => {
                        let Some(e) = by_key.get(&key) else { continue };
                        if stopped.insert(key) {
                            set(tx.as_mut(), app, e, ExecState::Failed, Some(reason), now)?;
                            effects.push(Effect::Stop(e.execution_id.clone(), StopMode::Stop));
                        }
                    }
                    Action::Restart { key } => {
                        let Some(e) = by_key.get(&key) else { continue };
                        let Some(processor) = e.processor_id.clone() else { continue };
                        let mut restarted = (*e).clone();
                        restarted.state = ExecState::Restarting;
                        restarted.restarts += 1;
                        restarted.changed_at = now;
                        restarted.silent_since = None;
                        // Why it is restarting, not the ending alone: a restarted job that is
                        // ready again must not read as killed.
                        let after = e.reason.as_ref().map_or("it ended", |r| r.message.as_str());
                        restarted.reason = Some(Reason::new(
                            "restarted",
                            format!("restart {} on its processor, after: {after}", restarted.restarts),
                        ));
                        tx.transition(app, &restarted, e.state)?;
                        let order = order(tx.as_mut(), app, &restarted, Vec::new(), &requirements)?;
                        effects.push(Effect::Restart(app, restarted, order, processor));
                    }
                    Action::Settle => tx.settle(app, now)?,
                    Action::Refund(gap) => {
                        let Some(paid) = by_key.get(&gap.paid) else { continue };
                        tx.refund_unserved(app, paid, gap.from, gap.to, &gap.amount, now)?;
                    }
                }
            }
            tx.schedule(app, decision.next_at, decision.blocked.as_ref())?;
        }
        tx.commit()?;
        if beat {
            self.heartbeat.store(now, std::sync::atomic::Ordering::Relaxed);
        }
        report.launched = effects.iter().filter(|e| matches!(e, Effect::Launch(..))).count();
        report.stopped = effects.iter().filter(|e| matches!(e, Effect::Stop(..))).count();
        self.apply(effects, now)?;
        Ok(report)
    }

    /// The reports to record: those a failed step kept, then the market's new ones, the latest
    /// per job (a job's last state is what its record needs: each step records from any state).
    fn take_changes(&self) -> Vec<JobStatus> {
        let mut changes = std::mem::take(&mut *self.unrecorded.lock().unwrap_or_else(|e| e.into_inner()));
        latest_per_job(&mut changes, self.market.changes());
        changes
    }

    /// Keeps reports no transaction recorded for the next step (simulation seed 3: a job that
    /// exited during a store outage stayed `running` until the service restarted). Bounded:
    /// one report per job.
    fn keep_unrecorded(&self, changes: Vec<JobStatus>) {
        let mut kept = self.unrecorded.lock().unwrap_or_else(|e| e.into_inner());
        let newer = std::mem::replace(&mut *kept, changes);
        latest_per_job(&mut kept, newer);
    }

    /// Records the market's reports of live executions in one transaction, then releases the
    /// ended ones.
    fn record_changes(
        &self,
        changes: &[JobStatus],
        now: Millis,
        touched: &mut BTreeSet<AppKey>,
        report: &mut StepReport,
    ) -> Result<(), StoreFailure> {
        let mut release = Vec::new();
        let mut tx = self.store.begin()?;
        for job in changes {
            match tx.find(&job.execution_id)? {
                Some((app, e)) if e.state.is_live() => {
                    if record_status(tx.as_mut(), app, &e, job, self.out_of_memory(job), now)? {
                        touched.insert(app);
                        report.recorded += 1;
                    }
                    if ended(job.state) {
                        release.push(job.execution_id.clone());
                    }
                }
                Some(_) if ended(job.state) => release.push(job.execution_id.clone()),
                Some(_) => {}
                None => {
                    // Not ours: stop it, and forget it once it has ended.
                    self.market.stop(&job.execution_id, StopMode::Stop);
                    if ended(job.state) {
                        release.push(job.execution_id.clone());
                    }
                }
            }
        }
        for app in touched.iter() {
            tx.schedule(*app, Some(now), None)?;
        }
        tx.commit()?;
        for id in release {
            self.market.release(&id);
        }
        Ok(())
    }

    /// Sends effects to the market and records their outcomes in one transaction.
    fn apply(&self, effects: Vec<Effect>, now: Millis) -> Result<(), StoreFailure> {
        let mut outcomes = Vec::new();
        for effect in effects {
            match effect {
                Effect::Launch(app, e, order) => outcomes.push((app, e, self.market.launch(&order).map(Some))),
                Effect::Restart(app, e, order, processor) => {
                    outcomes.push((app, e, self.market.restart(&order, &processor).map(|()| None)));
                }
                Effect::Stop(id, mode) => self.market.stop(&id, mode),
            }
        }
        if outcomes.is_empty() {
            return Ok(());
        }
        let mut tx = self.store.begin()?;
        for (app, e, outcome) in outcomes {
            match outcome {
                Ok(Some(placement)) => {
                    let mut placed = e.clone();
                    placed.state = ExecState::Running;
                    placed.processor_id = Some(placement.processor_id);
                    placed.changed_at = now;
                    // A status the market reported meanwhile (ready) is recorded by the next step.
                    if current_state(tx.as_mut(), &e)? == Some(ExecState::Launching) {
                        tx.transition(app, &placed, ExecState::Launching)?;
                    }
                }
                Ok(None) => {}
                Err(refusal) => {
                    let from = current_state(tx.as_mut(), &e)?.unwrap_or(e.state);
                    if !from.is_live() {
                        continue;
                    }
                    let mut refused = e.clone();
                    let reason = Reason::new(refusal.code(), refusal.to_string());
                    if e.state == ExecState::Restarting {
                        refused.state = ExecState::Failed;
                    } else {
                        refused.state = ExecState::Refused;
                        // A relaunch the window's charge covers was charged nothing.
                        if e.charged != crate::market::Quote::default() {
                            tx.refund(app, &e, now)?;
                        }
                    }
                    refused.reason = Some(reason);
                    refused.changed_at = now;
                    tx.transition(app, &refused, from)?;
                    tx.schedule(app, Some(now), None)?;
                }
            }
        }
        tx.commit()
    }
}

/// Adds `newer` reports to `reports`, one per job: a job's newer report replaces its older
/// one in place. Indexed, so a step with tens of thousands of reports stays linear.
fn latest_per_job(reports: &mut Vec<JobStatus>, newer: Vec<JobStatus>) {
    let mut at: std::collections::HashMap<String, usize> =
        reports.iter().enumerate().map(|(i, r)| (r.execution_id.clone(), i)).collect();
    for job in newer {
        match at.get(&job.execution_id) {
            Some(&i) => reports[i] = job,
            None => {
                at.insert(job.execution_id.clone(), reports.len());
                reports.push(job);
            }
        }
    }
}

fn ended(state: JobState) -> bool {
    matches!(state, JobState::Exited(_) | JobState::Lost)
}

fn current_state(tx: &mut dyn ExecutionTx, e: &Execution) -> Result<Option<ExecState>, StoreFailure> {
    Ok(tx.find(&e.execution_id)?.map(|(_, found)| found.state))
}

fn set(
    tx: &mut dyn ExecutionTx,
    app: AppKey,
    e: &Execution,
    state: ExecState,
    reason: Option<Reason>,
    now: Millis,
) -> Result<(), StoreFailure> {
    let mut next = e.clone();
    next.state = state;
    next.changed_at = now;
    if reason.is_some() {
        next.reason = reason;
    }
    tx.transition(app, &next, e.state)
}

/// Records what the market says of a live execution; true if its state changed in a way the
/// scheduler must look at.
fn record_status(
    tx: &mut dyn ExecutionTx,
    app: AppKey,
    e: &Execution,
    job: &JobStatus,
    out_of_memory: bool,
    now: Millis,
) -> Result<bool, StoreFailure> {
    let mut next = e.clone();
    next.changed_at = now;
    next.processor_id = Some(job.processor_id.clone());
    match job.state {
        JobState::Starting => {
            next.silent_since = None;
            if e.state != ExecState::Launching {
                return Ok(false);
            }
            next.state = ExecState::Running;
        }
        JobState::Ready => {
            next.silent_since = None;
            if e.state == ExecState::Stopping {
                return Ok(false);
            }
            next.state = ExecState::Ready;
        }
        JobState::Silent(since) => {
            if e.silent_since.is_some() {
                return Ok(false);
            }
            next.silent_since = Some(since);
            next.changed_at = e.changed_at;
        }
        JobState::Exited(code) => {
            (next.state, next.reason) = match (e.state, code) {
                (ExecState::Stopping, _) => (ExecState::Stopped, e.reason.clone()),
                (_, _) if out_of_memory => (
                    ExecState::Failed,
                    Some(Reason::new("out_of_memory", "it was over its memory, and every process of it was killed")),
                ),
                (_, Some(0)) => (ExecState::Completed, Some(Reason::new("exited", "it exited with status 0"))),
                (_, Some(n)) => (ExecState::Failed, Some(Reason::new("exited", format!("it exited with status {n}")))),
                (_, None) => (ExecState::Failed, Some(Reason::new("killed", "it was killed"))),
            };
        }
        JobState::Lost => {
            (next.state, next.reason) = match e.state {
                ExecState::Stopping => (ExecState::Stopped, e.reason.clone()),
                _ => (ExecState::Failed, Some(Reason::new("lost", "its processor lost it"))),
            };
        }
    }
    // The same report again (recovery reads every job): nothing to record, nothing to decide.
    let unchanged = Execution { changed_at: e.changed_at, ..next.clone() } == *e;
    if unchanged {
        return Ok(false);
    }
    tx.transition(app, &next, e.state)?;
    Ok(true)
}

/// Processors an earlier attempt of the same generation failed on.
fn avoid_for(view: &AppView, e: &Execution) -> Vec<String> {
    view.executions
        .iter()
        .filter(|o| o.slot == e.slot && o.generation == e.generation && o.attempt < e.attempt)
        .filter(|o| o.state == ExecState::Failed)
        .filter_map(|o| o.processor_id.clone())
        .collect()
}

fn order(
    tx: &mut dyn ExecutionTx,
    app: AppKey,
    e: &Execution,
    avoid: Vec<String>,
    requirements: &crate::plan::Requirements,
) -> Result<JobOrder, StoreFailure> {
    Ok(JobOrder {
        execution_id: e.execution_id.clone(),
        window_end: e.window_end,
        requirements: requirements.clone(),
        avoid,
        workload: tx.workload(app, e.policy_version)?,
    })
}
