//! The executor's thread in the publication service. It recovers once at start (the market
//! and the store are compared, [`Executor::recover`]), then steps whenever something is due:
//! at the earliest `exec_next_at`, at once after a wakeup (a publication, a pause, a resume),
//! and at least every [`POLL`] to take the market's status changes. Wakeups that come while
//! the last step is under [`STEP_GAP`] old wait for the gap: under a stream of publications
//! the scheduler steps once per gap for all of them, not once for each. A failing step is
//! logged and retried after a backoff; the thread never takes the service down.
//!
//! Jobs' output has a thread of its own ([`collect_output`]): every [`OUTPUT_EVERY`] it takes
//! the lines the jobs printed (and those of jobs released since, which the market hands to a
//! [`Tap`] first) and records them in one transaction, so the scheduler never waits on a
//! write of output, however slow the store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use svc_execution::executor::{ExecutionStore, Executor, StoreFailure};
use svc_execution::output::Tap;
use svc_execution::{Clock, Market};

/// The longest the thread sleeps without looking at the market.
pub const POLL: Duration = Duration::from_millis(200);

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

#[derive(Default)]
struct Signal {
    woken: Mutex<bool>,
    condvar: Condvar,
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
                .spawn(move || collect_output(&tap, store.as_ref(), &stop))
                .map_err(|e| StoreFailure(Box::new(e)))?
        };
        Ok(Scheduler { signal, stop, thread: Some(thread), output: Some(output), output_stop, tap, market, store })
    }

    /// Asks for a step now (after a publication, a pause or a resume committed).
    pub fn wake(&self) {
        let mut woken = self.signal.woken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *woken = true;
        self.signal.condvar.notify_one();
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
    let mut backoff = FIRST_BACKOFF;
    let mut renewed = std::time::Instant::now();
    // When the last step started; none if it left more due now (no gap before the next).
    let mut last_step: Option<std::time::Instant> = None;
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
                    until_due(executor, clock)
                }
            }
            Ok(_) => {
                backoff = FIRST_BACKOFF;
                until_due(executor, clock)
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
        if wait.is_zero() {
            continue;
        }
        let woken = signal.woken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (mut woken, _) = signal
            .condvar
            .wait_timeout_while(woken, wait, |w| !*w && !stop.load(Ordering::SeqCst))
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *woken = false;
    }
}

/// The output thread: every [`OUTPUT_EVERY`], the jobs' new lines recorded in one
/// transaction; once more when the service stops. A collection the store could not record is
/// given back to the tap (held, bounded) and tried again with the next. So is one refused
/// because this instance does not hold the scheduling lease: after a database outage longer
/// than the lease the store says so until the scheduler renews it (its jobs ran on), and
/// what they printed meanwhile is recorded then; an instance that lost the lease for good
/// has stopped its jobs, and holds at most the tap's bounds.
fn collect_output(tap: &Tap, store: &dyn ExecutionStore, stop: &AtomicBool) {
    let mut failing = false;
    loop {
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
                Err(e) if e.is_not_leader() => tap.restore(batch),
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "could not record jobs' output; holding it and trying again");
                    }
                    failing = true;
                    tap.restore(batch);
                }
            }
        }
        if stopping {
            break;
        }
        // At once when a job ended (its last lines), or when stopped.
        tap.wait(OUTPUT_EVERY);
    }
}

/// How long until the next application is due, at most [`POLL`].
fn until_due(executor: &Executor, clock: &dyn Clock) -> Duration {
    match executor.next_due() {
        Ok(Some(at)) => Duration::from_millis(at.saturating_sub(clock.now())).min(POLL),
        _ => POLL,
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
