//! The executor's thread in the publication service. It recovers once at start (the market
//! and the store are compared, [`Executor::recover`]), then steps whenever something is due:
//! at the earliest `exec_next_at`, at once after a wakeup (a publication, a pause, a resume),
//! and at least every [`POLL`] to take the market's status changes. A market that says
//! when a job's state changes ([`Market::wakes`]: the local pool) wakes it instead, and it
//! sleeps until the next application is due, at most until the next heartbeat while jobs
//! run and [`IDLE`] while none does, looking at the next due time again at each lease
//! renewal ([`RENEW`]: another instance may have taken a publication) (issue 44). Wakeups
//! that come while the last step is under [`STEP_GAP`] old wait for the gap: under a stream
//! of publications the scheduler steps once per gap for all of them, not once for each. A
//! failing step is logged and retried after a backoff; the thread never takes the service
//! down.
//!
//! Jobs' output has a thread of its own ([`collect_output`]): every [`OUTPUT_EVERY`] (with a
//! waking market: [`OUTPUT_EVERY`] after a job printed, else when a job is released) it
//! takes the lines the jobs printed (and those of jobs released since, which the market hands
//! to a [`Tap`] first) and records them in one transaction, so the scheduler never waits on a
//! write of output, however slow the store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use svc_execution::executor::{ExecutionStore, Executor, StoreFailure};
use svc_execution::market::Wake;
use svc_execution::output::Tap;
use svc_execution::{Clock, JobState, Market};

/// The longest the thread sleeps without looking at a market that does not wake it.
pub const POLL: Duration = Duration::from_millis(200);

/// The longest the thread sleeps between two steps with a market that wakes it and no job
/// running (nothing to take from the market, no heartbeat to record).
pub const IDLE: Duration = Duration::from_secs(30);

/// The least time between the starts of two steps, unless the last one left work due now
/// (a full batch). A step holds the writers' lock for its round trips, so one per publication
/// halved the commits a stream of publications made (`docs/performance.md`); a publication
/// after a quiet moment is still acted on at once.
pub const STEP_GAP: Duration = Duration::from_millis(50);

/// How often an instance standing by tries for the scheduling lease.
pub const STANDBY_POLL: Duration = Duration::from_secs(1);

/// How often the leader renews the scheduling lease (a fifth of its length: a renewal or two
/// may fail without losing it).
pub const RENEW: Duration = Duration::from_secs(1);

/// How long the thread waits after a failed step, doubling to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Applications decided per transaction (the executor's batch).
pub const BATCH: usize = 256;

/// How often jobs' output is taken and recorded: one transaction per collection that found
/// any.
pub const OUTPUT_EVERY: Duration = Duration::from_millis(250);

/// With a market that says when a job prints, the longest the output thread waits without a
/// word from it.
const OUTPUT_IDLE: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Signal {
    woken: Mutex<bool>,
    condvar: Condvar,
}

impl Signal {
    /// Asks for a step now.
    fn wake(&self) {
        *self.woken.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        self.condvar.notify_one();
    }
}

/// The running scheduler.
pub struct Scheduler {
    signal: Arc<Signal>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    output: Option<JoinHandle<()>>,
    /// Stops the output thread, once the scheduler's has stopped (its last releases taken).
    output_stop: Arc<AtomicBool>,
    tap: Arc<Tap>,
    market: Arc<dyn Market>,
    store: Arc<dyn ExecutionStore>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler").finish_non_exhaustive()
    }
}

impl Scheduler {
    /// Recovers (if this instance leads the scheduling; else it stands by, and recovers
    /// when it takes over), then starts the thread.
    pub fn start(
        store: Arc<dyn ExecutionStore>,
        market: Arc<dyn Market>,
        clock: Arc<dyn Clock>,
    ) -> Result<Scheduler, StoreFailure> {
        let leading = store.lead()?;
        let tap = Arc::new(Tap::new(Arc::clone(&market), Arc::clone(&clock)));
        let executor = Executor::new(Arc::clone(&store), Arc::clone(&tap) as _, Arc::clone(&clock), BATCH);
        if leading {
            recover(&executor)?;
        } else {
            tracing::info!("another instance schedules; this one stands by");
        }
        let signal = Arc::new(Signal::default());
        let stop = Arc::new(AtomicBool::new(false));
        let wakes = market.wakes();
        if wakes {
            // Weak: the market holds its waker, and the tap holds the market.
            let (to_step, to_collect) = (Arc::downgrade(&signal), Arc::downgrade(&tap));
            market.set_waker(Arc::new(move |wake| match wake {
                Wake::Changed => to_step.upgrade().iter().for_each(|s| s.wake()),
                Wake::Output => to_collect.upgrade().iter().for_each(|t| t.printed()),
            }));
        }
        let thread = {
            let (signal, stop) = (Arc::clone(&signal), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("svc-scheduler".into())
                .spawn({
                    let (store, market) = (Arc::clone(&store), Arc::clone(&market));
                    move || run(&executor, store.as_ref(), market.as_ref(), leading, clock.as_ref(), &signal, &stop)
                })
                .map_err(|e| StoreFailure(Box::new(e)))?
        };
        let output_stop = Arc::new(AtomicBool::new(false));
        let output = {
            let (store, stop, tap) = (Arc::clone(&store), Arc::clone(&output_stop), Arc::clone(&tap));
            std::thread::Builder::new()
                .name("svc-output".into())
                .spawn(move || collect_output(&tap, store.as_ref(), &stop, wakes))
                .map_err(|e| StoreFailure(Box::new(e)))?
        };
        Ok(Scheduler { signal, stop, thread: Some(thread), output: Some(output), output_stop, tap, market, store })
    }

    /// Asks for a step now (after a publication, a pause or a resume committed).
    pub fn wake(&self) {
        self.signal.wake();
    }

    /// The market it launches on.
    pub fn market(&self) -> &Arc<dyn Market> {
        &self.market
    }

    /// Stops the thread (running jobs are left to the market: the local pool stops them when
    /// it is dropped).
    pub fn shutdown(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake();
        let joined = self.thread.take().map(JoinHandle::join);
        // The output thread's last collection follows the scheduler's last releases, and
        // precedes the lease given up (a store shared by instances takes writes of the
        // leader only).
        self.output_stop.store(true, Ordering::SeqCst);
        self.tap.wake();
        if let Some(output) = self.output.take() {
            let _ = output.join();
        }
        if joined.is_some() {
            self.store.resign();
        }
        if self.market.wakes() {
            self.market.set_waker(Arc::new(|_| {}));
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// Reconciles the store with the market, and says what it found.
fn recover(executor: &Executor) -> Result<(), StoreFailure> {
    let report = executor.recover()?;
    if report != Default::default() {
        tracing::info!(
            relaunched = report.relaunched,
            adopted = report.adopted,
            lost = report.lost,
            orphans_stopped = report.orphans_stopped,
            "scheduler recovered"
        );
    }
    Ok(())
}

fn run(
    executor: &Executor,
    store: &dyn ExecutionStore,
    market: &dyn Market,
    mut leading: bool,
    clock: &dyn Clock,
    signal: &Signal,
    stop: &AtomicBool,
) {
    let wakes = market.wakes();
    let mut backoff = FIRST_BACKOFF;
    let mut renewed = std::time::Instant::now();
    // When the last step started; none if it left more due now (no gap before the next).
    let mut last_step: Option<std::time::Instant> = None;
    // When the next step is due, unless a wakeup comes first: at once, to begin with.
    let mut step_at = std::time::Instant::now();
    while !stop.load(Ordering::SeqCst) {
        if leading && renewed.elapsed() >= RENEW {
            match store.lead() {
                Ok(true) => renewed = std::time::Instant::now(),
                Ok(false) => {
                    tracing::warn!("another instance took the scheduling lease; standing by");
                    stand_down(market);
                    leading = false;
                }
                // Not fatal yet: the lease lasts a few renewals, and a step will say.
                Err(e) => tracing::warn!(error = %e, "could not renew the scheduling lease"),
            }
        }
        if !leading {
            // Standing by: try for the lease now and then; on taking it, recover first (the
            // previous leader's live executions are compared with this instance's market).
            leading = match store.lead().and_then(|led| if led { recover(executor).map(|()| true) } else { Ok(false) })
            {
                Ok(led) => {
                    if led {
                        tracing::info!("this instance now schedules");
                    }
                    led
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not try for the scheduling lease");
                    false
                }
            };
            if !leading {
                sleep_unless_stopped(signal, stop, STANDBY_POLL);
                continue;
            }
            renewed = std::time::Instant::now();
            step_at = renewed;
        }
        if !due(signal, step_at) {
            // Up for the lease's renewal only: another instance may have taken a publication
            // meanwhile, which only the store knows.
            if let Ok(Some(at)) = executor.next_due() {
                step_at = step_at.min(std::time::Instant::now() + millis_until(at, clock));
            }
            if !due(signal, step_at) {
                sleep_until(signal, stop, step_at.min(renewed + RENEW));
                continue;
            }
        }
        if let Some(rest) = last_step.and_then(|at| STEP_GAP.checked_sub(at.elapsed())) {
            sleep_unless_stopped(signal, stop, rest);
            if stop.load(Ordering::SeqCst) {
                break;
            }
        }
        // This step answers every wakeup so far (one during the gap included); a later one
        // asks for another.
        *signal.woken.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = false;
        last_step = Some(std::time::Instant::now());
        // The longest sleep after this step, as it left things.
        let cap = || {
            if !wakes {
                POLL
            } else if market.jobs().iter().any(|job| matches!(job.state, JobState::Starting | JobState::Ready)) {
                // The heartbeat is recorded by a step: one is due by then (a millisecond
                // after, so the clock has passed it).
                millis_until(executor.next_heartbeat(), clock) + Duration::from_millis(1)
            } else {
                IDLE
            }
        };
        let wait = match executor.step() {
            Ok(report) if report.more || report.decided > 0 || report.recorded > 0 => {
                backoff = FIRST_BACKOFF;
                // One line for a step that changed something (issue 42): jobs launched or
                // stopped, their states recorded. A step that only decided "nothing to do"
                // writes none at `info`.
                if report.launched + report.stopped + report.recorded > 0 {
                    tracing::info!(
                        launched = report.launched,
                        stopped = report.stopped,
                        recorded = report.recorded,
                        "scheduler: {} launched, {} stopped, {} state changes recorded",
                        report.launched,
                        report.stopped,
                        report.recorded
                    );
                } else {
                    tracing::debug!(decided = report.decided, "scheduler: nothing to change");
                }
                // Something happened: look again at once (a decision may be due now).
                if report.more {
                    last_step = None;
                    Duration::ZERO
                } else {
                    until_due(executor, clock, cap())
                }
            }
            Ok(_) => {
                backoff = FIRST_BACKOFF;
                until_due(executor, clock, cap())
            }
            Err(e) if e.is_not_leader() => {
                tracing::warn!(error = %e, "this instance no longer schedules; standing by");
                stand_down(market);
                leading = false;
                continue;
            }
            Err(e) => {
                tracing::error!(error = %e, retry_in_ms = backoff.as_millis() as u64, "scheduler step failed");
                let wait = backoff;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                wait
            }
        };
        step_at = std::time::Instant::now() + wait;
        if !wait.is_zero() {
            sleep_until(signal, stop, step_at.min(renewed + RENEW));
        }
    }
}

/// Whether a step is due: asked for (a wakeup), or its time has come.
fn due(signal: &Signal, step_at: std::time::Instant) -> bool {
    *signal.woken.lock().unwrap_or_else(std::sync::PoisonError::into_inner) || std::time::Instant::now() >= step_at
}

/// Sleeps until `at`, or less if a wakeup comes or the scheduler is stopped. The wakeup is
/// left for the step it asks for.
fn sleep_until(signal: &Signal, stop: &AtomicBool, at: std::time::Instant) {
    let wait = at.saturating_duration_since(std::time::Instant::now());
    let woken = signal.woken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let _ = signal
        .condvar
        .wait_timeout_while(woken, wait, |w| !*w && !stop.load(Ordering::SeqCst))
        .unwrap_or_else(std::sync::PoisonError::into_inner);
}

/// How long until `at` on `clock` (none if it has passed).
fn millis_until(at: svc_execution::Millis, clock: &dyn Clock) -> Duration {
    Duration::from_millis(at.saturating_sub(clock.now()))
}

/// The output thread: every [`OUTPUT_EVERY`], the jobs' new lines recorded in one
/// transaction; once more when the service stops. A collection the store could not record is
/// given back to the tap (held, bounded) and tried again with the next. So is one refused
/// because this instance does not hold the scheduling lease: after a database outage longer
/// than the lease the store says so until the scheduler renews it (its jobs ran on), and
/// what they printed meanwhile is recorded then; an instance that lost the lease for good
/// has stopped its jobs, and holds at most the tap's bounds.
fn collect_output(tap: &Tap, store: &dyn ExecutionStore, stop: &AtomicBool, wakes: bool) {
    let mut failing = false;
    loop {
        // Held back (not recorded): tried again at the next collection, which comes soon.
        let mut held_back = false;
        let stopping = stop.load(Ordering::SeqCst);
        let batch = tap.collect();
        if !batch.is_empty() {
            let recorded = store.begin().and_then(|mut tx| {
                tx.record_output(&batch)?;
                tx.commit()
            });
            match recorded {
                Ok(()) => {
                    if failing {
                        tracing::info!("jobs' output is recorded again");
                    }
                    failing = false;
                }
                Err(e) if e.is_not_leader() => {
                    held_back = true;
                    tap.restore(batch);
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "could not record jobs' output; holding it and trying again");
                    }
                    failing = true;
                    held_back = true;
                    tap.restore(batch);
                }
            }
        }
        if stopping {
            break;
        }
        // At once when a job ended (its last lines), or when stopped; with a market that
        // says when a job prints, only then (and its lines gathered for a moment).
        if wakes && !held_back {
            tap.wait_for_output(OUTPUT_IDLE, OUTPUT_EVERY);
        } else {
            tap.wait(OUTPUT_EVERY);
        }
    }
}

/// How long until the next application is due, at most `cap`.
fn until_due(executor: &Executor, clock: &dyn Clock, cap: Duration) -> Duration {
    match executor.next_due() {
        Ok(Some(at)) => millis_until(at, clock).min(cap),
        _ => cap,
    }
}

/// What an instance that lost the scheduling lease does with the jobs it runs. The new
/// leader finds the executions it cannot see in its own market lost, and gives their slots
/// new attempts: where the market's jobs are this instance's own processes (the local pool),
/// they are stopped here, so that no job runs twice (this instance stalled past its lease,
/// or lost the database while the others kept it). A market the instances share (the
/// compute network) is left alone: the new leader sees its jobs and adopts them.
fn stand_down(market: &dyn Market) {
    if !market.starts_empty() {
        return;
    }
    let jobs = market.jobs();
    for job in &jobs {
        market.stop(&job.execution_id, svc_execution::market::StopMode::Stop);
    }
    if !jobs.is_empty() {
        tracing::warn!(stopped = jobs.len(), "stopped this instance's jobs: another instance schedules them now");
    }
}

/// Sleeps `wait`, or less if the scheduler is stopped.
fn sleep_unless_stopped(signal: &Signal, stop: &AtomicBool, wait: Duration) {
    let woken = signal.woken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let _ = signal
        .condvar
        .wait_timeout_while(woken, wait, |_| !stop.load(Ordering::SeqCst))
        .unwrap_or_else(std::sync::PoisonError::into_inner);
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use svc_execution::plan::Requirements;
    use svc_execution::{JobOrder, JobState, JobStatus, Millis, Placement, Quote, Refusal, StopMode};

    use super::*;

    /// A market that holds two jobs and records what it is told to stop.
    struct Held {
        own_processes: bool,
        stopped: Mutex<Vec<String>>,
    }

    impl Market for Held {
        fn quote(&self, _: &Requirements, _: &[String], _: Millis) -> Result<Quote, Refusal> {
            Err(Refusal::NoProcessor("none".into()))
        }
        fn launch(&self, _: &JobOrder) -> Result<Placement, Refusal> {
            Err(Refusal::NoProcessor("none".into()))
        }
        fn restart(&self, _: &JobOrder, _: &str) -> Result<(), Refusal> {
            Ok(())
        }
        fn stop(&self, execution_id: &str, _: StopMode) {
            self.stopped.lock().expect("lock").push(execution_id.to_owned());
        }
        fn changes(&self) -> Vec<JobStatus> {
            Vec::new()
        }
        fn jobs(&self) -> Vec<JobStatus> {
            ["a", "b"]
                .map(|id| JobStatus { execution_id: id.into(), processor_id: "p".into(), state: JobState::Ready })
                .into()
        }
        fn release(&self, _: &str) {}
        fn starts_empty(&self) -> bool {
            self.own_processes
        }
    }

    /// A store in memory that counts its write transactions (a step begins one).
    #[derive(Default)]
    struct Counting {
        inner: svc_execution::memory::MemoryStore,
        begins: std::sync::atomic::AtomicUsize,
    }

    impl ExecutionStore for Counting {
        fn begin(&self) -> Result<Box<dyn svc_execution::executor::ExecutionTx + '_>, StoreFailure> {
            self.begins.fetch_add(1, Ordering::SeqCst);
            self.inner.begin()
        }
        fn next_due(&self) -> Result<Option<Millis>, StoreFailure> {
            self.inner.next_due()
        }
    }

    /// Found measuring publications on PostgreSQL: a step per publication held the writers'
    /// lock so often that commits halved.
    #[test]
    fn a_stream_of_wakeups_makes_a_step_per_gap_not_one_each() {
        let store = Arc::new(Counting::default());
        let market = Arc::new(Held { own_processes: false, stopped: Mutex::new(Vec::new()) });
        let scheduler = Scheduler::start(store.clone(), market, Arc::new(svc_execution::SystemClock)).expect("started");
        let start = std::time::Instant::now();
        let before = store.begins.load(Ordering::SeqCst);
        for _ in 0..200 {
            scheduler.wake();
            std::thread::sleep(Duration::from_millis(1));
        }
        let steps = store.begins.load(Ordering::SeqCst) - before;
        let elapsed = start.elapsed();
        scheduler.shutdown();
        let most = usize::try_from(elapsed.as_millis() / STEP_GAP.as_millis()).expect("small") + 2;
        assert!((1..=most).contains(&steps), "{steps} steps for 200 wakeups in {elapsed:?}");
    }

    /// A market without jobs whose changes the test makes, saying so to its waker if it
    /// `wakes`.
    struct Waking {
        wakes: bool,
        waker: Mutex<Option<svc_execution::market::Waker>>,
        changes: Mutex<Vec<JobStatus>>,
    }

    impl Waking {
        fn new(wakes: bool) -> Arc<Waking> {
            Arc::new(Waking { wakes, waker: Mutex::new(None), changes: Mutex::new(Vec::new()) })
        }

        /// Job `id` exited, as the local pool's watcher would say.
        fn exited(&self, id: &str) {
            let status =
                JobStatus { execution_id: id.into(), processor_id: "p".into(), state: JobState::Exited(Some(3)) };
            self.changes.lock().expect("lock").push(status);
            let waker = self.waker.lock().expect("lock").clone();
            if let Some(waker) = waker {
                waker(Wake::Changed);
            }
        }
    }

    impl Market for Waking {
        fn quote(&self, _: &Requirements, _: &[String], _: Millis) -> Result<Quote, Refusal> {
            Err(Refusal::NoProcessor("none".into()))
        }
        fn launch(&self, _: &JobOrder) -> Result<Placement, Refusal> {
            Err(Refusal::NoProcessor("none".into()))
        }
        fn restart(&self, _: &JobOrder, _: &str) -> Result<(), Refusal> {
            Ok(())
        }
        fn stop(&self, _: &str, _: StopMode) {}
        fn changes(&self) -> Vec<JobStatus> {
            std::mem::take(&mut *self.changes.lock().expect("lock"))
        }
        fn jobs(&self) -> Vec<JobStatus> {
            Vec::new()
        }
        fn release(&self, _: &str) {}
        fn wakes(&self) -> bool {
            self.wakes
        }
        fn set_waker(&self, waker: svc_execution::market::Waker) {
            *self.waker.lock().expect("lock") = Some(waker);
        }
    }

    /// Issue 44: with nothing due and nothing running, a scheduler whose market wakes it
    /// steps about once (at its start), where one that polls steps every [`POLL`]; both
    /// side by side over the same time.
    #[test]
    fn a_market_that_wakes_lets_the_scheduler_sleep_past_poll() {
        let start = |market: Arc<Waking>| {
            let store = Arc::new(Counting::default());
            let scheduler =
                Scheduler::start(store.clone(), market, Arc::new(svc_execution::SystemClock)).expect("started");
            (store, scheduler)
        };
        let (polled, polling) = start(Waking::new(false));
        let (woken, waking) = start(Waking::new(true));
        std::thread::sleep(Duration::from_millis(1_500));
        let steps = |store: &Counting| store.begins.load(Ordering::SeqCst);
        let (polled_steps, woken_steps) = (steps(&polled), steps(&woken));
        polling.shutdown();
        waking.shutdown();
        assert!(polled_steps >= 4, "the polling scheduler steps every {POLL:?}: {polled_steps} steps");
        assert!(
            woken_steps * 4 <= polled_steps,
            "the woken scheduler sleeps: {woken_steps} steps, against {polled_steps} polling"
        );
    }

    /// ... and a job's exit, which the market tells, is still acted on at once, not after
    /// [`IDLE`].
    #[test]
    fn a_job_exit_is_still_acted_on_promptly_by_a_scheduler_its_market_wakes() {
        let market = Waking::new(true);
        let store = Arc::new(Counting::default());
        let scheduler =
            Scheduler::start(store.clone(), market.clone(), Arc::new(svc_execution::SystemClock)).expect("started");
        // Past the first step and its gap: asleep, until `IDLE` unless woken.
        std::thread::sleep(STEP_GAP * 4);
        let before = store.begins.load(Ordering::SeqCst);
        let exited = std::time::Instant::now();
        market.exited("a/0/1/1");
        let limit = Duration::from_secs(5);
        while store.begins.load(Ordering::SeqCst) == before && exited.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(5));
        }
        let took = exited.elapsed();
        let taken = market.changes.lock().expect("lock").is_empty();
        scheduler.shutdown();
        assert!(taken && took < limit, "the exit was taken by a step {took:?} after it (the idle sleep is {IDLE:?})");
    }

    #[test]
    fn an_instance_that_loses_the_lease_stops_its_own_jobs_and_leaves_a_shared_markets_alone() {
        let own = Held { own_processes: true, stopped: Mutex::new(Vec::new()) };
        stand_down(&own);
        assert_eq!(*own.stopped.lock().expect("lock"), ["a", "b"]);
        let shared = Held { own_processes: false, stopped: Mutex::new(Vec::new()) };
        stand_down(&shared);
        assert!(shared.stopped.lock().expect("lock").is_empty());
    }
}
