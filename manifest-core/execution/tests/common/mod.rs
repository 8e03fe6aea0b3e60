//! A world for scheduler tests: the in-memory store, the simulated pool, a manual clock and
//! an executor, with helpers to publish, pause and move time along.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use svc_execution::executor::Executor;
use svc_execution::market::{JobOrder, JobStatus, Placement, Quote, Refusal, StopMode};
use svc_execution::memory::{MemoryApp, MemoryStore};
use svc_execution::plan::{
    ExistingJobs, Mode, Phasing, Plan, Recovery, Renewal, Requirements, SpendAuthority, Update, UpdateTiming,
};
use svc_execution::{AppKey, AppStatus, ExecState, Execution, ManualClock, Market, Millis, SimulatedPool};

pub const HOUR: Millis = 3_600_000;
pub const MINUTE: Millis = 60_000;
/// Where every world's clock starts: 2026-01-01T00:00:00Z.
pub const T0: Millis = 1_767_225_600_000;

pub fn plan(slots: u16, mode: Mode) -> Plan {
    Plan {
        policy_version: 1,
        policy_digest: "sha256:01".into(),
        slots,
        window_ms: HOUR,
        start_delay_ms: 0,
        phasing: Phasing::Simultaneous,
        mode,
        renewal: Renewal::Lead(10 * MINUTE),
        update: Update { timing: UpdateTiming::Immediate, existing_jobs: ExistingJobs::StopWhenSuccessorReady },
        recovery: Recovery::default(),
        spend: SpendAuthority::default(),
        requirements: Requirements::default(),
        hold: None,
    }
}

pub fn continuous() -> Mode {
    Mode::Continuous { until: None }
}

pub struct World {
    pub store: Arc<MemoryStore>,
    pub pool: Arc<SimulatedPool>,
    pub market: Arc<dyn Market>,
    pub clock: ManualClock,
    pub executor: Executor,
}

impl World {
    /// Three processors of four jobs each, 1000 micros per hour.
    pub fn new() -> World {
        World::with_pool(SimulatedPool::new(3, 4, 1_000))
    }

    pub fn with_pool(pool: SimulatedPool) -> World {
        let pool = Arc::new(pool);
        World::with_market(Arc::clone(&pool), pool)
    }

    pub fn with_market(pool: Arc<SimulatedPool>, market: Arc<dyn Market>) -> World {
        World::with_store(pool, market, MemoryStore::new())
    }

    /// A world whose service can die: the market switch and the store share one flag.
    pub fn crashable(pool: SimulatedPool) -> (World, Arc<Crashing>) {
        let pool = Arc::new(pool);
        let crashing = Arc::new(Crashing::new(Arc::clone(&pool)));
        let store = MemoryStore::with_crash_flag(Arc::clone(&crashing.dead));
        (World::with_store(pool, Arc::clone(&crashing) as Arc<dyn Market>, store), crashing)
    }

    /// The service is back: commits and market calls work again, and a new executor
    /// recovers before anything else.
    pub fn restart(&mut self, crashing: &Arc<Crashing>) -> svc_execution::executor::RecoveryReport {
        crashing.arm(i64::MAX, true);
        crashing.dead.store(false, Ordering::SeqCst);
        self.executor = Executor::new(
            Arc::clone(&self.store) as Arc<_>,
            Arc::clone(crashing) as Arc<dyn Market>,
            Arc::new(self.clock.clone()),
            64,
        );
        self.executor.recover().expect("recovers")
    }

    fn with_store(pool: Arc<SimulatedPool>, market: Arc<dyn Market>, store: MemoryStore) -> World {
        let store = Arc::new(store);
        let clock = ManualClock::at(T0);
        let executor = Executor::new(Arc::clone(&store) as Arc<_>, Arc::clone(&market), Arc::new(clock.clone()), 64);
        World { store, pool, market, clock, executor }
    }

    pub fn now(&self) -> Millis {
        svc_execution::Clock::now(&self.clock)
    }

    /// Publishes `plan` for application `key` (created if new) and wakes the scheduler.
    pub fn publish(&self, key: AppKey, plan: Plan) {
        let now = self.now();
        self.store.edit(|s| {
            let app = s.apps.entry(key).or_insert_with(|| MemoryApp {
                uid: format!("app{key}"),
                status: AppStatus::Active,
                halt: None,
                settled: false,
                settled_at: None,
                rearmed_version: 0,
                plan: None,
                activated: (0, 0),
                next_at: None,
                blocked: None,
                workload: Default::default(),
            });
            app.plan = Some(plan);
            if app.status == AppStatus::Disabled {
                app.status = AppStatus::Active;
            }
            app.next_at = Some(now);
        });
    }

    pub fn set_status(&self, key: AppKey, status: AppStatus) {
        let now = self.now();
        self.store.edit(|s| {
            if let Some(a) = s.apps.get_mut(&key) {
                a.status = status;
                a.next_at = Some(now);
            }
        });
    }

    /// Halts application `key` for `reason` (`None`: lifts it) and wakes the scheduler.
    pub fn set_halt(&self, key: AppKey, reason: Option<svc_execution::Reason>) {
        let now = self.now();
        self.store.edit(|s| {
            if let Some(a) = s.apps.get_mut(&key) {
                a.halt = reason;
                a.next_at = Some(now);
            }
        });
    }

    /// Steps until nothing more is due now. Errors (a crashed store) stop it.
    pub fn settle(&self) -> Result<(), String> {
        for _ in 0..100 {
            let r = self.executor.step().map_err(|e| e.to_string())?;
            if r.decided == 0 && r.recorded == 0 && !r.more {
                return Ok(());
            }
        }
        Err("the executor did not settle in 100 steps".into())
    }

    /// Moves the clock to `at`, stopping at every due time on the way.
    pub fn run_until(&self, at: Millis) -> Result<(), String> {
        self.settle()?;
        for _ in 0..1_000 {
            match self.executor.next_due().map_err(|e| e.to_string())? {
                Some(due) if due <= at && due > self.now() => {
                    self.clock.set(due);
                    self.settle()?;
                }
                Some(due) if due <= self.now() => self.settle()?,
                _ => break,
            }
        }
        self.clock.set(at);
        self.settle()
    }

    pub fn advance(&self, ms: Millis) {
        self.run_until(self.now() + ms).expect("runs");
    }

    /// Every execution of an application, in the order they were decided.
    pub fn executions(&self, key: AppKey) -> Vec<Execution> {
        self.store.snapshot().executions.into_values().filter(|(k, _)| *k == key).map(|(_, e)| e).collect()
    }

    pub fn live(&self, key: AppKey) -> Vec<Execution> {
        self.executions(key).into_iter().filter(|e| e.state.is_live()).collect()
    }

    pub fn in_state(&self, key: AppKey, state: ExecState) -> Vec<Execution> {
        self.executions(key).into_iter().filter(|e| e.state == state).collect()
    }

    /// Makes every running job of the pool ready, and records it.
    pub fn all_ready(&self) {
        for (id, _, _) in self.pool.running() {
            self.pool.make_ready(&id);
        }
        self.settle().expect("settles");
    }

    pub fn app(&self, key: AppKey) -> MemoryApp {
        self.store.snapshot().apps[&key].clone()
    }
}

/// The pool behind a switch: after a set number of market calls that change something, the
/// service "dies": that call is made (or not), and every later call of the dead process
/// does nothing, and the store refuses its commits.
pub struct Crashing {
    pub inner: Arc<SimulatedPool>,
    pub calls_left: AtomicI64,
    /// Whether the fatal call itself reaches the pool.
    pub fatal_call_lands: AtomicBool,
    pub dead: Arc<AtomicBool>,
}

impl Crashing {
    /// A switch that never trips until armed.
    pub fn new(inner: Arc<SimulatedPool>) -> Crashing {
        Crashing {
            inner,
            calls_left: AtomicI64::new(i64::MAX),
            fatal_call_lands: AtomicBool::new(false),
            dead: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The process dies at its `n`-th market call from now; that call lands or not.
    pub fn arm(&self, n: i64, lands: bool) {
        self.calls_left.store(n, Ordering::SeqCst);
        self.fatal_call_lands.store(lands, Ordering::SeqCst);
    }

    /// Counts one call; false if the process is (now) dead and the call must not land.
    fn call(&self) -> bool {
        if self.dead.load(Ordering::SeqCst) {
            return false;
        }
        if self.calls_left.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.dead.store(true, Ordering::SeqCst);
            return self.fatal_call_lands.load(Ordering::SeqCst);
        }
        true
    }
}

impl Market for Crashing {
    fn quote(&self, r: &svc_execution::plan::Requirements, avoid: &[String], w: Millis) -> Result<Quote, Refusal> {
        self.inner.quote(r, avoid, w)
    }
    fn launch(&self, order: &JobOrder) -> Result<Placement, Refusal> {
        if !self.call() {
            return Err(Refusal::Start("dead".into()));
        }
        self.inner.launch(order)
    }
    fn restart(&self, order: &JobOrder, processor: &str) -> Result<(), Refusal> {
        if !self.call() {
            return Err(Refusal::Start("dead".into()));
        }
        self.inner.restart(order, processor)
    }
    fn stop(&self, id: &str, mode: StopMode) {
        if self.call() {
            self.inner.stop(id, mode);
        }
    }
    fn changes(&self) -> Vec<JobStatus> {
        if self.dead.load(Ordering::SeqCst) { Vec::new() } else { self.inner.changes() }
    }
    fn jobs(&self) -> Vec<JobStatus> {
        self.inner.jobs()
    }
    fn release(&self, id: &str) {
        if self.call() {
            self.inner.release(id);
        }
    }
}

/// The simulated pool, claiming to start empty like the local pool (its jobs are the
/// service's processes, gone with it).
pub struct StartsEmpty(pub Arc<SimulatedPool>);

impl Market for StartsEmpty {
    fn quote(&self, r: &Requirements, a: &[String], w: u64) -> Result<Quote, Refusal> {
        self.0.quote(r, a, w)
    }
    fn launch(&self, o: &JobOrder) -> Result<Placement, Refusal> {
        self.0.launch(o)
    }
    fn restart(&self, o: &JobOrder, p: &str) -> Result<(), Refusal> {
        self.0.restart(o, p)
    }
    fn stop(&self, id: &str, m: StopMode) {
        self.0.stop(id, m)
    }
    fn changes(&self) -> Vec<JobStatus> {
        self.0.changes()
    }
    fn jobs(&self) -> Vec<JobStatus> {
        self.0.jobs()
    }
    fn release(&self, id: &str) {
        self.0.release(id)
    }
    fn starts_empty(&self) -> bool {
        true
    }
}
