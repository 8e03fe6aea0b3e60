//! One seed's run of the scheduler and executor: a pure step loop over a virtual clock. The
//! seed draws the applications, the pool and a schedule of events; after each event the
//! service runs as `svc serve`'s scheduler thread does (a step whenever something is due,
//! retries while the store is down, and after a crash a new executor that recovers first),
//! and the invariants are checked after every step.

use std::collections::BTreeMap;
use std::sync::Arc;

use fastrand::Rng;
use svc_execution::executor::{ExecutionStore, Executor};
use svc_execution::memory::{MemoryApp, MemoryStore};
use svc_execution::{AppKey, AppStatus, Clock, ExecState, ManualClock, Market, Millis, Plan, SimulatedPool};

use super::apps::{self, MINUTE, T0};
use super::faults::{CrashAt, Faults, SimMarket, SimStore};
use super::invariants::{self, Broken};
use crate::trace::{Failure, Trace};

/// What a run did, for the summary.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Events applied.
    pub events: u32,
    /// Executor steps and recoveries run (each followed by the invariants).
    pub steps: u32,
    /// Crashes of the service.
    pub crashes: u32,
    /// Jobs the market started.
    pub launches: u32,
}

/// A world being simulated.
pub(crate) struct World {
    pub(crate) rng: Rng,
    pub(crate) clock: ManualClock,
    pub(crate) faults: Arc<Faults>,
    pub(crate) memory: Arc<MemoryStore>,
    store: Arc<SimStore>,
    pub(crate) market: Arc<SimMarket>,
    executor: Executor,
    /// Whether the executor recovered since it started (it steps only then).
    pub(crate) recovered: bool,
    /// The plan each application runs now.
    pub(crate) plans: BTreeMap<AppKey, Plan>,
    /// The pool's price per hour of window, micros.
    pub(crate) price: u128,
    processors: usize,
    capacity: usize,
    pub(crate) starts_empty: bool,
    pub(crate) trace: Trace,
    pub(crate) summary: Summary,
    /// Whether the last step succeeded and found nothing to do: the market's reports are
    /// all recorded.
    pub(crate) stepped: bool,
    /// When the last step began (its store calls may move the clock on).
    pub(crate) step_at: Millis,
    /// Launches counted on pools a crash replaced.
    launches_before: u32,
    /// The service's outages, on the true clock, oldest first; the last one is open (`to`
    /// is `None`) from the service's death until a recovery succeeds.
    pub(crate) outages: Vec<Outage>,
}

/// One outage of the service: from its death (the true time, not the heartbeat's) to the
/// start of the first recovery that succeeded (a death during recovery, or a store that
/// fails it, prolongs it), and the jobs that died with it while the store had them live and
/// not stopping (a pool that starts empty).
#[derive(Debug, Clone)]
pub(crate) struct Outage {
    pub(crate) from: Millis,
    pub(crate) to: Option<Millis>,
    pub(crate) jobs: Vec<String>,
}

impl World {
    fn new(seed: u64) -> World {
        let mut rng = Rng::with_seed(seed);
        let clock = ManualClock::at(T0);
        let faults = Arc::new(Faults::new(clock.clone(), rng.u64(..)));
        let memory = Arc::new(MemoryStore::new());
        let store = Arc::new(SimStore { inner: Arc::clone(&memory), faults: Arc::clone(&faults) });
        let (processors, capacity) = (rng.usize(1..=4), rng.usize(1..=4));
        let price = [1_000, 3_600, 10_000][rng.usize(0..3)];
        let starts_empty = rng.bool();
        let pool = SimulatedPool::new(processors, capacity, price);
        let market = Arc::new(SimMarket::new(pool, Arc::clone(&faults), starts_empty));
        let executor = executor(&store, &market, &clock);
        let mut world = World {
            rng,
            clock,
            faults,
            memory,
            store,
            market,
            executor,
            recovered: false,
            plans: BTreeMap::new(),
            price,
            processors,
            capacity,
            starts_empty,
            trace: Trace::default(),
            summary: Summary::default(),
            launches_before: 0,
            stepped: false,
            step_at: T0,
            outages: Vec::new(),
        };
        let pool = if starts_empty { "starts empty with the service" } else { "outlives the service" };
        world.log(format!("pool: {processors} processors x {capacity} jobs at {price} micros/h; it {pool}"));
        for key in 1..=world.rng.i64(1..=3) {
            let plan = apps::plan(&mut world.rng, price);
            world.log(format!("app{key}: {}", apps::describe(&plan)));
            world.publish(key, plan);
        }
        world
    }

    pub(crate) fn now(&self) -> Millis {
        self.clock.now()
    }

    pub(crate) fn log(&mut self, line: impl std::fmt::Display) {
        let at = self.now().saturating_sub(T0);
        self.trace.push(at, line);
    }

    /// What the publication service commits in its own transactions: a new plan, and a wakeup.
    fn publish(&mut self, key: AppKey, plan: Plan) {
        let now = self.now();
        self.plans.insert(key, plan.clone());
        self.memory.edit(|s| {
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
                workload: svc_execution::Workload::default(),
            });
            app.plan = Some(plan);
            app.next_at = Some(now);
        });
    }

    fn set_status(&mut self, key: AppKey, status: AppStatus) {
        let now = self.now();
        self.memory.edit(|s| {
            if let Some(a) = s.apps.get_mut(&key) {
                a.status = status;
                a.next_at = Some(now);
            }
        });
    }

    /// One turn of the service: after a crash, a restart; before anything else, recovery;
    /// then a step. The invariants are checked after it. Returns whether the step did
    /// something (step again at once).
    fn tick(&mut self) -> Result<bool, Broken> {
        if self.faults.dead() {
            self.restart();
        }
        self.stepped = false;
        let busy = if self.recovered {
            self.step_at = self.now();
            match self.executor.step() {
                Ok(r) => {
                    self.stepped = !(r.more || r.decided > 0 || r.recorded > 0);
                    if r.decided + r.recorded + r.launched + r.stopped > 0 {
                        self.log(format!(
                            "step: decided {} launched {} stopped {} recorded {}",
                            r.decided, r.launched, r.stopped, r.recorded
                        ));
                    }
                    r.more || r.decided > 0 || r.recorded > 0
                }
                Err(e) => {
                    self.log(format!("step failed: {e}"));
                    false
                }
            }
        } else {
            self.faults.lock().market_crashes = false;
            // The service is back from here: the recovery's own store calls may take a while.
            let back = self.now();
            let recovered = self.executor.recover();
            self.faults.lock().market_crashes = true;
            match recovered {
                Ok(r) => {
                    self.recovered = true;
                    if let Some(outage) = self.outages.last_mut().filter(|o| o.to.is_none()) {
                        outage.to = Some(back);
                    }
                    self.log(format!(
                        "recovered: relaunched {} adopted {} lost {} orphans stopped {}",
                        r.relaunched, r.adopted, r.lost, r.orphans_stopped
                    ));
                    true
                }
                Err(e) => {
                    self.log(format!("recovery failed: {e}"));
                    false
                }
            }
        };
        self.summary.steps += 1;
        if self.faults.dead() {
            self.log("the service died");
        }
        invariants::check(self)?;
        Ok(busy)
    }

    /// The service died: its executor is gone, a pool that starts empty with it is empty,
    /// and after a while a new process starts over the same store.
    fn restart(&mut self) {
        self.summary.crashes += 1;
        let old = self.market.pool();
        let lost = if self.starts_empty { old.running().len() } else { 0 };
        if self.starts_empty {
            self.launches_before += u32::try_from(old.launches()).unwrap_or(u32::MAX);
        }
        let died = self.market.service_died(SimulatedPool::new(self.processors, self.capacity, self.price));
        // Lost to the service only if its end was not decided already (a job recorded failed
        // whose stop the crash cut off ended by the market's fault, not the service's).
        let state = self.memory.snapshot();
        let live = |id: &String| state.executions.values().any(|(_, e)| e.execution_id == *id && e.state.is_live());
        let died: Vec<String> = died.into_iter().filter(live).collect();
        // The outage's refund is owed for a job that was serving, not for one being stopped.
        let serving = died.iter().filter(|id| {
            state.executions.values().any(|(_, e)| e.execution_id == **id && e.state != ExecState::Stopping)
        });
        let died_at = self.faults.lock().died_at;
        match self.outages.last_mut().filter(|o| o.to.is_none()) {
            Some(outage) => outage.jobs.extend(serving.cloned()),
            None => self.outages.push(Outage { from: died_at, to: None, jobs: serving.cloned().collect() }),
        }
        self.faults.lock().died_with_service.extend(died);
        let down = self.rng.u64(0..=5 * MINUTE);
        self.clock.advance(down);
        {
            let mut f = self.faults.lock();
            f.dead = false;
            f.crash = CrashAt::Never;
        }
        self.executor = executor(&self.store, &self.market, &self.clock);
        self.recovered = false;
        self.log(format!("restart after {down} ms down ({lost} jobs died with the service)"));
    }

    /// Steps until nothing more is due now (or the store fails: time must move first).
    fn settle(&mut self) -> Result<(), Broken> {
        for _ in 0..40 {
            if !self.tick()? && !self.faults.dead() && self.recovered {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Moves the clock to `at`, stopping at every due time on the way, as the scheduler's
    /// thread sleeps until the next due time (and retries every few seconds while the store
    /// is down).
    pub(crate) fn run_until(&mut self, at: Millis) -> Result<(), Broken> {
        for _ in 0..400 {
            self.settle()?;
            let now = self.now();
            if now >= at {
                return Ok(());
            }
            let outage = self.faults.lock().outage_until;
            let next = if now < outage || !self.recovered {
                Some(outage.max(now + 1).min(now + self.rng.u64(1_000..=30_000)))
            } else {
                ExecutionStore::next_due(&*self.memory).ok().flatten()
            };
            let next = match next {
                Some(due) if due > now => due.min(at),
                // Due already, but the last step could not act (a refusal, a full pool).
                Some(_) => (now + 1_000).min(at),
                None => at,
            };
            self.clock.set(next);
        }
        self.log("run_until gave up after 400 wakeups");
        Ok(())
    }

    /// Launches the market started, over every pool of the run.
    fn launches(&self) -> u32 {
        self.launches_before + u32::try_from(self.market.pool().launches()).unwrap_or(u32::MAX)
    }

    /// One event of the schedule, drawn from the seed.
    fn event(&mut self) -> Result<(), Broken> {
        let now = self.now();
        let pool = self.market.pool();
        let running = pool.running();
        let pick = |rng: &mut Rng| (!running.is_empty()).then(|| running[rng.usize(0..running.len())].clone());
        let roll = self.rng.u32(0..100);
        match roll {
            0..=24 => {
                let ms = self.rng.u64(1..90) * MINUTE;
                self.log(format!("advance {} min", ms / MINUTE));
                return self.run_until(now + ms);
            }
            25..=34 => {
                let ms = self.rng.u64(0..120_000);
                self.log(format!("advance {ms} ms"));
                return self.run_until(now + ms);
            }
            35..=49 => {
                if let Some((id, _, _)) = pick(&mut self.rng) {
                    self.log(format!("job {id} ready"));
                    pool.make_ready(&id);
                }
            }
            50..=59 => {
                if let Some((id, _, _)) = pick(&mut self.rng) {
                    let code = [0, 1, 137][self.rng.usize(0..3)];
                    self.log(format!("job {id} exits {code}"));
                    pool.exit(&id, code);
                }
            }
            60..=63 => {
                if let Some((id, _, _)) = pick(&mut self.rng) {
                    self.log(format!("job {id} goes silent"));
                    pool.silence(&id, now);
                }
            }
            64..=66 => {
                if let Some((id, _, _)) = pick(&mut self.rng) {
                    self.log(format!("job {id} lost by its processor"));
                    pool.lose(&id);
                }
            }
            67..=69 => {
                let processor = format!("sim-{}", self.rng.usize(1..=self.processors));
                self.log(format!("processor {processor} dies"));
                for (id, _, _) in running.iter().filter(|(_, p, _)| *p == processor) {
                    pool.lose(id);
                }
            }
            70..=73 => {
                let on = self.rng.u8(0..3) == 0;
                self.log(format!("the market refuses every launch: {on}"));
                pool.set_refuse_all(on);
            }
            74..=77 => {
                let ms = self.rng.u64(1_000..=10 * MINUTE);
                self.log(format!("store outage for {ms} ms"));
                self.faults.lock().outage_until = now + ms;
            }
            78..=80 => {
                let ms = [0, 500, 3_000][self.rng.usize(0..3)];
                self.log(format!("store calls take up to {ms} ms"));
                self.faults.lock().slow_ms = ms;
            }
            81..=92 => {
                let n = self.rng.u32(1..=6);
                let lands = self.rng.bool();
                let crash = if self.rng.bool() { CrashAt::Commit(n, lands) } else { CrashAt::MarketCall(n, lands) };
                self.log(format!("armed: the service dies at {crash:?}"));
                self.faults.lock().crash = crash;
            }
            93..=96 => {
                let key = self.rng.i64(1..=i64::try_from(self.plans.len()).unwrap_or(1));
                if let Some(plan) = self.plans.get(&key) {
                    let next = apps::next_version(&mut self.rng, plan);
                    self.log(format!("app{key} publishes {}", apps::describe(&next)));
                    self.publish(key, next);
                }
            }
            _ => {
                let key = self.rng.i64(1..=i64::try_from(self.plans.len()).unwrap_or(1));
                let status = if self.rng.bool() { AppStatus::Paused } else { AppStatus::Active };
                self.log(format!("app{key} status {status:?}"));
                self.set_status(key, status);
            }
        }
        self.run_until(now)
    }
}

fn executor(store: &Arc<SimStore>, market: &Arc<SimMarket>, clock: &ManualClock) -> Executor {
    Executor::new(
        Arc::clone(store) as Arc<dyn ExecutionStore>,
        Arc::clone(market) as Arc<dyn Market>,
        Arc::new(clock.clone()),
        64,
    )
}

/// Runs seed `seed`: its world, its events, the invariants after every step.
fn simulate(seed: u64) -> (World, Result<(), Broken>) {
    let mut world = World::new(seed);
    let events = world.rng.u32(20..=50);
    let mut outcome = world.run_until(T0);
    for _ in 0..events {
        if outcome.is_err() {
            break;
        }
        world.summary.events += 1;
        outcome = world.event();
    }
    world.summary.launches = world.launches();
    (world, outcome)
}

/// Runs seed `seed`: its summary, or the invariant it broke with its trace.
pub fn run(seed: u64) -> Result<Summary, Failure> {
    let (world, outcome) = simulate(seed);
    match outcome {
        Ok(()) => Ok(world.summary),
        Err(b) => Err(Failure { part: "exec", seed, code: b.code, invariant: b.message, trace: world.trace }),
    }
}

/// Runs seed `seed` and returns its whole trace too (`--seed`).
pub fn replay(seed: u64) -> (Trace, Result<Summary, Failure>) {
    let (world, outcome) = simulate(seed);
    let trace = world.trace.clone();
    match outcome {
        Ok(()) => (trace, Ok(world.summary)),
        Err(b) => (trace, Err(Failure { part: "exec", seed, code: b.code, invariant: b.message, trace: world.trace })),
    }
}
