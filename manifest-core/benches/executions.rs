//! Executions over the SQLite store: how fast the scheduler launches, against the store's own
//! commit floor measured in the same run, and how soon a committed wakeup becomes a committed
//! launch through the service's scheduler thread.
//!
//! 1. Setup: a fresh store (a temporary directory) with one organization, its spend authority
//!    set, and `SVC_BENCH_APPS` (default 10,000) applications, each with one published Policy
//!    V5 version of 2 continuous slots (a pinned artifact, 1 h windows), all made due by their
//!    publication's wakeup. The rows are written through the store's `Transaction` as a
//!    publication writes them (the basic tier's job-slot gate, a publication-layer check, is
//!    not run).
//! 2. Commit floor: commits per second of the smallest write transactions on a second store
//!    in the same temporary directory (same file system, WAL, `synchronous = FULL`): an
//!    `ExecutionStore::begin` + one `schedule` + commit, and a `Store::write` + one
//!    `record_activity` + commit, for a second each.
//! 3. Throughput: an `Executor` (the service's batch size) over the store and a
//!    `SimulatedPool` (10 processors, jobs ready at once), stepped until every application runs
//!    its 2 jobs, ready and recorded: launches per second over that time. Steps 1 to 3 run
//!    `SVC_BENCH_ROUNDS` (default 3) times, each round on a fresh store with the floor
//!    measured just before and just after it; a round's ratio is its launches per second over
//!    the highest of its four floor measurements (goal: at least 0.5), and the median of the
//!    rounds' ratios is printed, so that load from other processes (the floor is an fsync)
//!    weighs on both alike.
//! 4. Latency: the service's scheduler thread (`runner::Scheduler`) over the last round's
//!    converged store. `SVC_BENCH_SAMPLES` (default 1,000) times, one application at a time,
//!    a new policy version is published (the publication's writes, one commit) and the
//!    scheduler woken, as the publish route does; measured from that commit to the commit
//!    recording the placement of both successors (goal: p99 under 50 ms), with the commit of
//!    the launch decision and the sending of the orders on the way.
//!
//! Run with `cargo bench -p manifest-core --features service --bench executions`
//! (`SVC_BENCH_APPS=1000 SVC_BENCH_SAMPLES=100 SVC_BENCH_ROUNDS=1` for a quick run).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use manifest_core::service::executions::runner::{BATCH, Scheduler};
use manifest_core::service::store::{Activity, Application, SqliteStore, Store};
use svc_execution::executor::{ExecutionStore, ExecutionTx, Executor, StoreFailure};
use svc_execution::plan::Requirements;
use svc_execution::{
    AppKey, AppView, ExecKey, ExecState, Execution, JobOrder, JobStatus, Market, Millis, Placement, Quote, Reason,
    Refusal, SimulatedPool, StopMode, SystemClock, Workload,
};

mod common;

use common::{Result, SLOTS, ms, percentile, policy_version, publish, publish_all, setting};

/// Simulated processors.
const PROCESSORS: usize = 10;
/// The price of a processor's hour, micros (a 1 h window is charged this).
const PRICE_PER_HOUR: u128 = 1_000;
/// How long the commit floor is measured each time.
const FLOOR_TIME: Duration = Duration::from_secs(1);
/// How long a step, a sample or a settling may take before the bench gives up.
const PATIENCE: Duration = Duration::from_secs(120);

fn main() -> Result<()> {
    let apps = setting("SVC_BENCH_APPS", 10_000)?.max(1);
    let samples = setting("SVC_BENCH_SAMPLES", 1_000)?.min(apps);
    let rounds = setting("SVC_BENCH_ROUNDS", 3)?.max(1);
    let scratch = tempfile::Builder::new().prefix("svc-bench-executions-").tempdir()?;
    println!("executions: {apps} applications x {SLOTS} slots, SQLite in {}", scratch.path().display());

    // The commit floor's store, beside the measured ones.
    let floor_store = SqliteStore::open(&scratch.path().join("floor"))?;
    let floor_app = publish_all(&floor_store, 1)?.remove(0).key;

    // Rounds of: the floor, a fresh store stepped to convergence, the floor again.
    let mut measured = Vec::new();
    let mut last = None;
    for round in 1..=rounds {
        // Only the last round's store is kept, for the latency.
        if let Some((old, _, _, dir)) = last.take() {
            drop(old);
            std::fs::remove_dir_all(dir)?;
        }
        let before = commit_floor(&floor_store, floor_app)?;
        let started = Instant::now();
        let dir = scratch.path().join(format!("service-{round}"));
        let store = Arc::new(SqliteStore::open(&dir)?);
        let applications = publish_all(store.as_ref(), apps)?;
        let setup = started.elapsed();
        let pool = Arc::new(SimulatedPool::new(PROCESSORS, (SLOTS * apps).div_ceil(PROCESSORS) + 10, PRICE_PER_HOUR));
        pool.set_auto_ready(true);
        let throughput = converge(&store, &pool, apps)?;
        check_converged(store.as_ref(), &pool, &applications)?;
        let after = commit_floor(&floor_store, floor_app)?;
        println!(
            "  round {round}: setup {:.1} s; floor before {:.0} / {:.0}, after {:.0} / {:.0} commits/s; \
             {} launches converged in {:.2} s ({} steps; the last placement committed at {:.2} s)",
            setup.as_secs_f64(),
            before.0,
            before.1,
            after.0,
            after.1,
            SLOTS * apps,
            throughput.converged.as_secs_f64(),
            throughput.steps,
            throughput.launched.as_secs_f64()
        );
        measured
            .push(Round { floor: [before.0, before.1, after.0, after.1].into_iter().fold(0.0, f64::max), throughput });
        last = Some((store, pool, applications, dir));
    }
    let (store, pool, applications, _) = last.ok_or("no round ran")?;

    // Wakeup-to-launch latency through the scheduler thread.
    let latency = latency(&store, &pool, &applications, samples)?;

    println!("\n| Round | Commit floor (highest) | Launches/s | Launches/s ÷ floor (goal ≥ 0.5) |");
    println!("|---|---|---|---|");
    let mut ratios = Vec::new();
    for (n, round) in measured.iter().enumerate() {
        let rate = (SLOTS * apps) as f64 / round.throughput.converged.as_secs_f64();
        ratios.push(rate / round.floor);
        println!("| {} | {:.0} commits/s | {rate:.0} | {:.2} |", n + 1, round.floor, rate / round.floor);
    }
    ratios.sort_by(f64::total_cmp);
    // The lower median (of an even count, the lower middle).
    println!("| median | | | {:.2} |", ratios[(ratios.len() - 1) / 2]);

    println!(
        "\n| Latency ({} samples; scheduler start over {} live executions: {:.2} s) | p50 | p99 | max |",
        samples,
        SLOTS * apps,
        latency.settle.as_secs_f64()
    );
    println!("|---|---|---|---|");
    for (what, times) in [
        ("wakeup commit → launch decision committed", &latency.intent),
        ("wakeup commit → both orders sent", &latency.sent),
        ("wakeup commit → both placements committed (goal p99 < 50 ms)", &latency.placed),
    ] {
        println!(
            "| {what} | {:.2} ms | {:.2} ms | {:.2} ms |",
            ms(percentile(times, 0.50)),
            ms(percentile(times, 0.99)),
            ms(percentile(times, 1.0))
        );
    }
    Ok(())
}

/// One round's floor (the highest of its four measurements) and throughput.
struct Round {
    floor: f64,
    throughput: Throughput,
}

/// Commits per second of the smallest write transactions: (`begin` + `schedule`, `write` +
/// `record_activity`), each for [`FLOOR_TIME`].
fn commit_floor(store: &SqliteStore, app: AppKey) -> Result<(f64, f64)> {
    let mut rates = [0.0; 2];
    for (which, rate) in rates.iter_mut().enumerate() {
        let started = Instant::now();
        let mut commits = 0u64;
        while started.elapsed() < FLOOR_TIME {
            if which == 0 {
                let mut tx = ExecutionStore::begin(store)?;
                tx.schedule(app, Some(4_000_000_000_000 + commits), None)?;
                tx.commit()?;
            } else {
                let mut tx = store.write()?;
                let entry = Activity {
                    at: "2026-01-01T00:00:00Z".into(),
                    actor: "bench".into(),
                    action: "bench_floor".into(),
                    policy_version: None,
                    status: None,
                    reason: None,
                };
                tx.record_activity(app, &entry)?;
                tx.commit()?;
            }
            commits += 1;
        }
        *rate = commits as f64 / started.elapsed().as_secs_f64();
    }
    Ok((rates[0], rates[1]))
}

struct Throughput {
    /// Until the step whose placements brought the launches to every slot.
    launched: Duration,
    /// Until a step found nothing to record or decide.
    converged: Duration,
    steps: usize,
}

/// Steps an executor until every slot runs and nothing is left to do.
fn converge(store: &Arc<SqliteStore>, pool: &Arc<SimulatedPool>, apps: usize) -> Result<Throughput> {
    let executor = Executor::new(
        Arc::clone(store) as Arc<dyn ExecutionStore>,
        Arc::clone(pool) as Arc<dyn Market>,
        Arc::new(SystemClock),
        BATCH,
    );
    executor.recover()?;
    let started = Instant::now();
    let (mut steps, mut launches, mut launched) = (0, 0, None);
    loop {
        let report = executor.step()?;
        steps += 1;
        launches += report.launched;
        if launched.is_none() && launches >= SLOTS * apps {
            launched = Some(started.elapsed());
        }
        if !report.more && report.decided == 0 && report.recorded == 0 && report.launched == 0 {
            break;
        }
        if started.elapsed() > PATIENCE {
            return Err(format!("not converged after {steps} steps ({launches} launches)").into());
        }
    }
    let converged = started.elapsed();
    Ok(Throughput { launched: launched.unwrap_or(converged), converged, steps })
}

/// Every application runs exactly its slots, ready, and no execution was launched twice.
fn check_converged(store: &SqliteStore, pool: &SimulatedPool, applications: &[Application]) -> Result<()> {
    let mut tx = store.read()?;
    for app in applications {
        let summary = tx.execution_summary(app.key)?;
        let ready = summary.current.iter().filter(|e| e.state == ExecState::Ready).count();
        if ready != SLOTS || summary.current.len() != SLOTS {
            return Err(format!("{} did not converge: {:?}", app.application_id, summary.current).into());
        }
    }
    if pool.launches() != SLOTS * applications.len() || !pool.started_twice().is_empty() {
        return Err(format!("the pool started {} jobs", pool.launches()).into());
    }
    Ok(())
}

struct Latency {
    settle: Duration,
    intent: Vec<Duration>,
    sent: Vec<Duration>,
    placed: Vec<Duration>,
}

/// Publishes a new version of one application at a time to the running scheduler and times
/// its successors' launch.
fn latency(
    store: &Arc<SqliteStore>,
    pool: &Arc<SimulatedPool>,
    applications: &[Application],
    samples: usize,
) -> Result<Latency> {
    let probe = Arc::new(Probe::default());
    let started = Instant::now();
    let scheduler = Scheduler::start(
        Arc::new(ProbeStore { inner: Arc::clone(store), probe: Arc::clone(&probe) }),
        Arc::new(ProbeMarket { inner: Arc::clone(pool), probe: Arc::clone(&probe) }),
        Arc::new(SystemClock),
    )?;
    // Recovery records every live execution again and makes its application due: wait until
    // the thread has decided for all of them (nothing due within a minute).
    loop {
        let next = ExecutionStore::begin(store.as_ref())?.next_due()?;
        let now = svc_execution::Clock::now(&SystemClock);
        if next.is_none_or(|at| at > now + 60_000) {
            break;
        }
        if started.elapsed() > PATIENCE {
            return Err("the scheduler did not settle after its start".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let settle = started.elapsed();

    let mut result = Latency { settle, intent: Vec::new(), sent: Vec::new(), placed: Vec::new() };
    for k in 0..samples {
        let mut app = applications[k * applications.len() / samples].clone();
        let n = app.application_uid.strip_prefix("app_").and_then(|h| usize::from_str_radix(h, 16).ok());
        let version = policy_version(n.ok_or("an unexpected uid")?, app.active_pointer_version + 1)?;
        {
            let mut s = probe.lock();
            *s = ProbeState { prefix: format!("{}/", app.application_uid), ..ProbeState::default() };
            probe.app.store(app.key, Ordering::SeqCst);
        }
        let mut tx = store.write()?;
        publish(tx.as_mut(), &mut app, version)?;
        tx.commit()?;
        let woken = Instant::now();
        scheduler.wake();

        let s = probe.wait(|s| s.placed >= SLOTS)?;
        let since = |at: Option<Instant>| at.map(|t| t.saturating_duration_since(woken)).ok_or("a step was not seen");
        result.intent.push(since(s.intent_at)?);
        result.sent.push(since(s.sent_at)?);
        result.placed.push(since(s.placed_at)?);
        drop(s);
        // The predecessors stop once their successors are ready; then let the store go quiet
        // so that each sample starts alone.
        drop(
            probe.wait(|s| {
                s.stopped >= SLOTS && s.last_commit.is_some_and(|t| t.elapsed() > Duration::from_millis(5))
            })?,
        );
    }
    scheduler.shutdown();
    Ok(result)
}

/// What the scheduler did for the watched application, and when.
#[derive(Default)]
struct Probe {
    app: AtomicI64,
    state: Mutex<ProbeState>,
    changed: Condvar,
}

#[derive(Default)]
struct ProbeState {
    /// Execution IDs of the watched application start with this.
    prefix: String,
    /// Launches recorded (decided), and when the last such commit ended.
    intents: usize,
    intent_at: Option<Instant>,
    /// Orders sent to the market, and when the last one was.
    sent: usize,
    sent_at: Option<Instant>,
    /// Placements recorded, and when the last such commit ended.
    placed: usize,
    placed_at: Option<Instant>,
    /// Stops sent to the watched application's jobs.
    stopped: usize,
    /// When the last commit of any step ended.
    last_commit: Option<Instant>,
}

impl Probe {
    fn lock(&self) -> MutexGuard<'_, ProbeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits (polling every millisecond) until `done` holds.
    fn wait(&self, done: impl Fn(&ProbeState) -> bool) -> Result<MutexGuard<'_, ProbeState>> {
        let started = Instant::now();
        let mut s = self.lock();
        while !done(&s) {
            if started.elapsed() > PATIENCE {
                return Err("the scheduler did not launch a published version's successors".into());
            }
            s = self.changed.wait_timeout(s, Duration::from_millis(1)).unwrap_or_else(PoisonError::into_inner).0;
        }
        Ok(s)
    }
}

/// The SQLite store, telling the probe when the watched application's launches and
/// placements commit.
struct ProbeStore {
    inner: Arc<SqliteStore>,
    probe: Arc<Probe>,
}

impl ExecutionStore for ProbeStore {
    fn begin(&self) -> std::result::Result<Box<dyn ExecutionTx + '_>, StoreFailure> {
        let inner = ExecutionStore::begin(self.inner.as_ref())?;
        let watched = self.probe.app.load(Ordering::SeqCst);
        Ok(Box::new(ProbeTx { inner, probe: &self.probe, watched, intents: 0, placed: 0 }))
    }
}

struct ProbeTx<'a> {
    inner: Box<dyn ExecutionTx + 'a>,
    probe: &'a Probe,
    watched: AppKey,
    intents: usize,
    placed: usize,
}

type Stored<T> = std::result::Result<T, StoreFailure>;

impl ExecutionTx for ProbeTx<'_> {
    fn due(&mut self, now: Millis, limit: usize) -> Stored<Vec<AppKey>> {
        self.inner.due(now, limit)
    }
    fn next_due(&mut self) -> Stored<Option<Millis>> {
        self.inner.next_due()
    }
    fn app(&mut self, app: AppKey) -> Stored<Option<AppView>> {
        self.inner.app(app)
    }
    fn find(&mut self, execution_id: &str) -> Stored<Option<(AppKey, Execution)>> {
        self.inner.find(execution_id)
    }
    fn live(&mut self) -> Stored<Vec<(AppKey, Execution)>> {
        self.inner.live()
    }
    fn workload(&mut self, app: AppKey, policy_version: u64) -> Stored<Workload> {
        self.inner.workload(app, policy_version)
    }
    fn insert(&mut self, app: AppKey, execution: &Execution) -> Stored<ExecKey> {
        if app == self.watched && execution.state == ExecState::Launching {
            self.intents += 1;
        }
        self.inner.insert(app, execution)
    }
    fn transition(&mut self, app: AppKey, execution: &Execution, from: ExecState) -> Stored<()> {
        if app == self.watched && from == ExecState::Launching && execution.state == ExecState::Running {
            self.placed += 1;
        }
        self.inner.transition(app, execution, from)
    }
    fn refund(&mut self, app: AppKey, execution: &Execution, at: Millis) -> Stored<()> {
        self.inner.refund(app, execution, at)
    }
    fn schedule(&mut self, app: AppKey, next_at: Option<Millis>, blocked: Option<&Reason>) -> Stored<()> {
        self.inner.schedule(app, next_at, blocked)
    }
    fn activate(&mut self, app: AppKey, version: u64, at: Millis) -> Stored<()> {
        self.inner.activate(app, version, at)
    }
    fn settle(&mut self, app: AppKey, at: Millis) -> Stored<()> {
        self.inner.settle(app, at)
    }
    fn commit(self: Box<Self>) -> Stored<()> {
        let ProbeTx { inner, probe, intents, placed, .. } = *self;
        inner.commit()?;
        let now = Instant::now();
        let mut s = probe.lock();
        s.last_commit = Some(now);
        if intents > 0 {
            s.intents += intents;
            s.intent_at = Some(now);
        }
        if placed > 0 {
            s.placed += placed;
            s.placed_at = Some(now);
        }
        drop(s);
        probe.changed.notify_all();
        Ok(())
    }
}

/// The simulated pool, telling the probe when orders for the watched application are sent
/// and its jobs stopped.
struct ProbeMarket {
    inner: Arc<SimulatedPool>,
    probe: Arc<Probe>,
}

impl ProbeMarket {
    fn note(&self, execution_id: &str, what: impl FnOnce(&mut ProbeState)) {
        let mut s = self.probe.lock();
        if !s.prefix.is_empty() && execution_id.starts_with(&s.prefix) {
            what(&mut s);
            drop(s);
            self.probe.changed.notify_all();
        }
    }
}

impl Market for ProbeMarket {
    fn quote(
        &self,
        requirements: &Requirements,
        avoid: &[String],
        window_ms: Millis,
    ) -> std::result::Result<Quote, Refusal> {
        self.inner.quote(requirements, avoid, window_ms)
    }
    fn launch(&self, order: &JobOrder) -> std::result::Result<Placement, Refusal> {
        self.note(&order.execution_id, |s| {
            s.sent += 1;
            s.sent_at = Some(Instant::now());
        });
        self.inner.launch(order)
    }
    fn restart(&self, order: &JobOrder, processor_id: &str) -> std::result::Result<(), Refusal> {
        self.inner.restart(order, processor_id)
    }
    fn stop(&self, execution_id: &str, mode: StopMode) {
        self.note(execution_id, |s| s.stopped += 1);
        self.inner.stop(execution_id, mode);
    }
    fn changes(&self) -> Vec<JobStatus> {
        self.inner.changes()
    }
    fn jobs(&self) -> Vec<JobStatus> {
        self.inner.jobs()
    }
    fn release(&self, execution_id: &str) {
        self.inner.release(execution_id);
    }
    fn starts_empty(&self) -> bool {
        self.inner.starts_empty()
    }
}
