//! The service's two doors to the world, with faults behind them: [`SimStore`] wraps the
//! in-memory execution store and [`SimMarket`] the simulated pool. Both count their calls
//! and share one [`Faults`]: the service "dies" at the n-th commit or market call (the fatal
//! call lands or not), after which nothing it does reaches either; the store can be down
//! for a while (an outage) or slow (the virtual clock moves during a call).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard};

use svc_execution::SimulatedPool;
use svc_execution::executor::{ExecutionStore, ExecutionTx, StoreFailure};
use svc_execution::market::{JobOrder, JobStatus, Market, Placement, Quote, Refusal, StopMode, Workload};
use svc_execution::memory::MemoryStore;
use svc_execution::plan::Requirements;
use svc_execution::{AppKey, AppView, Clock, ExecKey, ExecState, Execution, ManualClock, Millis, Reason};

/// Where the service dies next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CrashAt {
    /// Not armed.
    Never,
    /// At its n-th commit from now (1: the next); the commit lands or not.
    Commit(u32, bool),
    /// At its n-th market call from now; the call lands or not.
    MarketCall(u32, bool),
}

/// What the faults are now. One per world; single-threaded, so a mutex is only for `Sync`.
#[derive(Debug)]
pub(crate) struct FaultState {
    /// The service died: nothing it does reaches the store or the market.
    pub(crate) dead: bool,
    pub(crate) crash: CrashAt,
    /// Whether market calls may be the crash point now (not during recovery: its orphan
    /// stops are sent in a `HashMap`'s order, which differs between runs).
    pub(crate) market_crashes: bool,
    /// The store refuses every call until then.
    pub(crate) outage_until: Millis,
    /// Each store call takes up to this long on the virtual clock (0: instant).
    pub(crate) slow_ms: Millis,
    /// Jobs that died with the service (a pool that starts empty) while the store still
    /// had them live (not already recorded failed or stopped), by execution ID, until
    /// launched again under the same ID.
    pub(crate) died_with_service: BTreeSet<String>,
    /// When the service last died, on the true clock (the simulator knows it; the service
    /// itself dates a death by its heartbeat, up to 2 s and a step before).
    pub(crate) died_at: Millis,
    /// Store and market calls seen, for the trace.
    pub(crate) commits: u64,
    pub(crate) market_calls: u64,
    rng: fastrand::Rng,
}

/// The faults both doors share, and the clock they move.
#[derive(Debug)]
pub(crate) struct Faults {
    state: Mutex<FaultState>,
    clock: ManualClock,
}

impl Faults {
    pub(crate) fn new(clock: ManualClock, seed: u64) -> Faults {
        let state = FaultState {
            dead: false,
            crash: CrashAt::Never,
            market_crashes: true,
            outage_until: 0,
            slow_ms: 0,
            died_with_service: BTreeSet::new(),
            died_at: 0,
            commits: 0,
            market_calls: 0,
            rng: fastrand::Rng::with_seed(seed),
        };
        Faults { state: Mutex::new(state), clock }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, FaultState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn dead(&self) -> bool {
        self.lock().dead
    }

    /// A store call: the clock moves if the store is slow; refused if the service is dead
    /// or the store is down.
    fn store_call(&self) -> Result<(), StoreFailure> {
        let mut s = self.lock();
        if s.dead {
            return Err(failure("the service is dead"));
        }
        if s.slow_ms > 0 {
            let max = s.slow_ms;
            let took = s.rng.u64(0..=max);
            self.clock.advance(took);
        }
        if self.clock.now() < s.outage_until {
            return Err(failure("the store is down"));
        }
        Ok(())
    }

    /// A commit: whether it lands, and whether the service is still alive after it.
    fn commit(&self) -> (bool, Result<(), StoreFailure>) {
        if let Err(e) = self.store_call() {
            return (false, Err(e));
        }
        let mut s = self.lock();
        s.commits += 1;
        match s.crash {
            CrashAt::Commit(1, lands) => {
                s.dead = true;
                s.died_at = self.clock.now();
                s.crash = CrashAt::Never;
                (lands, Err(failure("the service died at this commit")))
            }
            CrashAt::Commit(n, lands) => {
                s.crash = CrashAt::Commit(n - 1, lands);
                (true, Ok(()))
            }
            _ => (true, Ok(())),
        }
    }

    /// A market call that changes something: whether it lands.
    fn market_call(&self) -> bool {
        let mut s = self.lock();
        if s.dead {
            return false;
        }
        s.market_calls += 1;
        match s.crash {
            CrashAt::MarketCall(1, lands) if s.market_crashes => {
                s.dead = true;
                s.died_at = self.clock.now();
                s.crash = CrashAt::Never;
                lands
            }
            CrashAt::MarketCall(n, lands) if s.market_crashes => {
                s.crash = CrashAt::MarketCall(n - 1, lands);
                true
            }
            _ => true,
        }
    }
}

fn failure(message: &str) -> StoreFailure {
    StoreFailure(message.to_owned().into())
}

/// The execution store behind the faults.
pub(crate) struct SimStore {
    pub(crate) inner: Arc<MemoryStore>,
    pub(crate) faults: Arc<Faults>,
}

struct SimTx<'a> {
    inner: Box<dyn ExecutionTx + 'a>,
    faults: &'a Faults,
}

impl ExecutionStore for SimStore {
    fn begin(&self) -> Result<Box<dyn ExecutionTx + '_>, StoreFailure> {
        self.faults.store_call()?;
        Ok(Box::new(SimTx { inner: self.inner.begin()?, faults: &self.faults }))
    }
}

impl ExecutionTx for SimTx<'_> {
    fn due(&mut self, now: Millis, limit: usize) -> Result<Vec<AppKey>, StoreFailure> {
        self.inner.due(now, limit)
    }
    fn next_due(&mut self) -> Result<Option<Millis>, StoreFailure> {
        self.inner.next_due()
    }
    fn app(&mut self, app: AppKey) -> Result<Option<AppView>, StoreFailure> {
        self.inner.app(app)
    }
    fn find(&mut self, execution_id: &str) -> Result<Option<(AppKey, Execution)>, StoreFailure> {
        self.inner.find(execution_id)
    }
    fn live(&mut self) -> Result<Vec<(AppKey, Execution)>, StoreFailure> {
        self.inner.live()
    }
    fn workload(&mut self, app: AppKey, policy_version: u64) -> Result<Workload, StoreFailure> {
        self.inner.workload(app, policy_version)
    }
    fn insert(&mut self, app: AppKey, execution: &Execution) -> Result<ExecKey, StoreFailure> {
        self.inner.insert(app, execution)
    }
    fn transition(&mut self, app: AppKey, execution: &Execution, from: ExecState) -> Result<(), StoreFailure> {
        self.inner.transition(app, execution, from)
    }
    fn refund(&mut self, app: AppKey, execution: &Execution, at: Millis) -> Result<(), StoreFailure> {
        self.inner.refund(app, execution, at)
    }
    // The three issue 41 added with defaults that record nothing: a store that charges must
    // implement them, so the wrapper forwards them (without them no refund of unserved time
    // and no heartbeat ever reached the store).
    fn refund_unserved(
        &mut self,
        app: AppKey,
        paid: &Execution,
        from: Millis,
        to: Millis,
        amount: &Quote,
        at: Millis,
    ) -> Result<(), StoreFailure> {
        self.inner.refund_unserved(app, paid, from, to, amount, at)
    }
    fn heartbeat(&mut self, at: Millis) -> Result<(), StoreFailure> {
        self.inner.heartbeat(at)
    }
    fn last_alive(&mut self) -> Result<Option<Millis>, StoreFailure> {
        self.inner.last_alive()
    }
    fn schedule(&mut self, app: AppKey, next_at: Option<Millis>, blocked: Option<&Reason>) -> Result<(), StoreFailure> {
        self.inner.schedule(app, next_at, blocked)
    }
    fn activate(&mut self, app: AppKey, version: u64, at: Millis) -> Result<(), StoreFailure> {
        self.inner.activate(app, version, at)
    }
    fn settle(&mut self, app: AppKey, at: Millis) -> Result<(), StoreFailure> {
        self.inner.settle(app, at)
    }
    fn commit(self: Box<Self>) -> Result<(), StoreFailure> {
        let (lands, outcome) = self.faults.commit();
        if lands {
            self.inner.commit()?;
        }
        outcome
    }
}

/// The market behind the faults: the simulated pool, replaced by an empty one when the
/// service dies if its processors start empty with the service (the local pool).
pub(crate) struct SimMarket {
    pool: Mutex<Arc<SimulatedPool>>,
    faults: Arc<Faults>,
    starts_empty: bool,
}

impl SimMarket {
    pub(crate) fn new(pool: SimulatedPool, faults: Arc<Faults>, starts_empty: bool) -> SimMarket {
        SimMarket { pool: Mutex::new(Arc::new(pool)), faults, starts_empty }
    }

    /// The pool now.
    pub(crate) fn pool(&self) -> Arc<SimulatedPool> {
        Arc::clone(&self.pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// The service died: a pool that starts empty loses every job with it and comes back as
    /// `fresh`. Returns the jobs that died with it.
    pub(crate) fn service_died(&self, fresh: SimulatedPool) -> Vec<String> {
        if !self.starts_empty {
            return Vec::new();
        }
        let died = self.pool().running().into_iter().map(|(id, _, _)| id).collect();
        *self.pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(fresh);
        died
    }
}

impl Market for SimMarket {
    fn quote(&self, requirements: &Requirements, avoid: &[String], window_ms: Millis) -> Result<Quote, Refusal> {
        if self.faults.dead() {
            return Err(Refusal::NoProcessor("the service is dead".into()));
        }
        self.pool().quote(requirements, avoid, window_ms)
    }
    fn launch(&self, order: &JobOrder) -> Result<Placement, Refusal> {
        if !self.faults.market_call() {
            return Err(Refusal::Start("the service is dead".into()));
        }
        let placed = self.pool().launch(order);
        if placed.is_ok() {
            self.faults.lock().died_with_service.remove(&order.execution_id);
        }
        placed
    }
    fn restart(&self, order: &JobOrder, processor_id: &str) -> Result<(), Refusal> {
        if !self.faults.market_call() {
            return Err(Refusal::Start("the service is dead".into()));
        }
        self.pool().restart(order, processor_id)
    }
    fn stop(&self, execution_id: &str, mode: StopMode) {
        if self.faults.market_call() {
            self.pool().stop(execution_id, mode);
        }
    }
    fn changes(&self) -> Vec<JobStatus> {
        if self.faults.dead() { Vec::new() } else { self.pool().changes() }
    }
    fn jobs(&self) -> Vec<JobStatus> {
        self.pool().jobs()
    }
    fn release(&self, execution_id: &str) {
        if self.faults.market_call() {
            self.pool().release(execution_id);
        }
    }
    fn starts_empty(&self) -> bool {
        self.starts_empty
    }
}

/// The execution's slot and generation, read back from its ID (`{uid}/{slot}/{gen}/{attempt}`).
pub(crate) fn parse_id(execution_id: &str) -> Option<(String, u16, u64, u32)> {
    let mut parts = execution_id.rsplitn(4, '/');
    let attempt = parts.next()?.parse().ok()?;
    let generation = parts.next()?.parse().ok()?;
    let slot = parts.next()?.parse().ok()?;
    Some((parts.next()?.to_owned(), slot, generation, attempt))
}
