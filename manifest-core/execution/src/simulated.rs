//! A market of processors that runs no process: jobs are entries in a table that tests and
//! benchmarks move along (ready, exit, silence, loss). It keeps the [`Market`] contract
//! exactly (idempotent launches, ended jobs listed until released), and it counts what a
//! careless scheduler would get wrong: launches of an execution ID it already ran.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use crate::clock::Millis;
use crate::market::{JobOrder, JobState, JobStatus, Market, Placement, Quote, Refusal, StopMode};
use crate::plan::Requirements;

/// One simulated processor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimProcessor {
    /// Its ID.
    pub id: String,
    /// Jobs it runs at once.
    pub capacity: usize,
    /// Memory it offers, bytes.
    pub memory_bytes: u64,
    /// Its price per hour of window.
    pub price_per_hour: Quote,
}

#[derive(Debug, Default)]
struct Pool {
    processors: Vec<SimProcessor>,
    jobs: BTreeMap<String, SimJob>,
    /// Jobs that run (neither ended nor lost) on each processor, by processor ID: kept with
    /// `jobs`, so choosing a processor does not count every job (benchmarks hold tens of
    /// thousands).
    load: BTreeMap<String, usize>,
    changed: BTreeSet<String>,
    /// Every execution ID ever started, and how many times.
    started: BTreeMap<String, u32>,
    refuse_all: bool,
    auto_ready: bool,
}

#[derive(Debug, Clone)]
struct SimJob {
    processor: String,
    state: JobState,
    order: JobOrder,
}

fn runs(state: JobState) -> bool {
    !matches!(state, JobState::Exited(_) | JobState::Lost)
}

impl Pool {
    /// Records a job (replacing any of its ID) and the load it adds.
    fn put(&mut self, execution_id: String, job: SimJob) {
        if runs(job.state) {
            *self.load.entry(job.processor.clone()).or_default() += 1;
        }
        if let Some(old) = self.jobs.insert(execution_id, job)
            && runs(old.state)
        {
            self.unload(&old.processor);
        }
    }

    /// A job of `processor` ended.
    fn unload(&mut self, processor: &str) {
        if let Some(n) = self.load.get_mut(processor) {
            *n = n.saturating_sub(1);
        }
    }
}

/// The simulated pool.
#[derive(Debug, Default)]
pub struct SimulatedPool {
    pool: Mutex<Pool>,
}

impl SimulatedPool {
    /// `processors` processors named `sim-1`...: each takes `capacity` jobs, offers 1 GiB and
    /// charges `price_per_hour` micros per hour of window.
    pub fn new(processors: usize, capacity: usize, price_per_hour: u128) -> SimulatedPool {
        let processors = (1..=processors)
            .map(|n| SimProcessor {
                id: format!("sim-{n}"),
                capacity,
                memory_bytes: 1 << 30,
                price_per_hour: Quote { service_credit_micros: price_per_hour, ..Quote::default() },
            })
            .collect();
        SimulatedPool { pool: Mutex::new(Pool { processors, ..Pool::default() }) }
    }

    fn with<T>(&self, f: impl FnOnce(&mut Pool) -> T) -> T {
        let mut guard = self.pool.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut guard)
    }

    /// New jobs report ready at once (benchmarks).
    pub fn set_auto_ready(&self, on: bool) {
        self.with(|p| p.auto_ready = on);
    }

    /// Every launch is refused while set.
    pub fn set_refuse_all(&self, on: bool) {
        self.with(|p| p.refuse_all = on);
    }

    fn set_state(&self, execution_id: &str, state: JobState) -> bool {
        self.with(|p| match p.jobs.get_mut(execution_id) {
            Some(job) if runs(job.state) => {
                job.state = state;
                if !runs(state) {
                    let processor = job.processor.clone();
                    p.unload(&processor);
                }
                p.changed.insert(execution_id.to_owned());
                true
            }
            _ => false,
        })
    }

    /// The job reports ready; false if it is not running.
    pub fn make_ready(&self, execution_id: &str) -> bool {
        self.set_state(execution_id, JobState::Ready)
    }

    /// The job exits with `code`.
    pub fn exit(&self, execution_id: &str, code: i32) -> bool {
        self.set_state(execution_id, JobState::Exited(Some(code)))
    }

    /// The job's processor stops reporting it from `at`.
    pub fn silence(&self, execution_id: &str, at: Millis) -> bool {
        self.set_state(execution_id, JobState::Silent(at))
    }

    /// The processor loses the job.
    pub fn lose(&self, execution_id: &str) -> bool {
        self.set_state(execution_id, JobState::Lost)
    }

    /// Jobs that run (neither ended nor lost).
    pub fn running(&self) -> Vec<(String, String, JobState)> {
        self.with(|p| {
            p.jobs
                .iter()
                .filter(|(_, j)| !matches!(j.state, JobState::Exited(_) | JobState::Lost))
                .map(|(id, j)| (id.clone(), j.processor.clone(), j.state))
                .collect()
        })
    }

    /// The order a job was launched with.
    pub fn order(&self, execution_id: &str) -> Option<JobOrder> {
        self.with(|p| p.jobs.get(execution_id).map(|j| j.order.clone()))
    }

    /// Execution IDs started more than once (a restart is not a second start).
    pub fn started_twice(&self) -> Vec<String> {
        self.with(|p| p.started.iter().filter(|(_, n)| **n > 1).map(|(id, _)| id.clone()).collect())
    }

    /// How many launches have started a job.
    pub fn launches(&self) -> usize {
        self.with(|p| p.started.values().map(|n| *n as usize).sum())
    }

    fn choose<'p>(p: &'p Pool, requirements: &Requirements, avoid: &[String]) -> Result<&'p SimProcessor, Refusal> {
        let load = |id: &str| p.load.get(id).copied().unwrap_or(0);
        p.processors
            .iter()
            .filter(|c| !avoid.contains(&c.id))
            .filter(|c| requirements.processor_ids.as_ref().is_none_or(|ids| ids.contains(&c.id)))
            .filter(|c| requirements.memory_bytes.is_none_or(|m| c.memory_bytes >= m))
            .filter(|c| load(&c.id) < c.capacity)
            .min_by_key(|c| load(&c.id))
            .ok_or_else(|| Refusal::NoProcessor("every eligible simulated processor is busy".into()))
    }
}

fn price(per_hour: u128, window_ms: Millis) -> u128 {
    (per_hour * u128::from(window_ms)).div_ceil(3_600_000)
}

impl Market for SimulatedPool {
    fn quote(&self, requirements: &Requirements, avoid: &[String], window_ms: Millis) -> Result<Quote, Refusal> {
        self.with(|p| {
            if p.refuse_all {
                return Err(Refusal::NoProcessor("the pool refuses every launch".into()));
            }
            let c = Self::choose(p, requirements, avoid)?;
            Ok(Quote {
                service_credit_micros: price(c.price_per_hour.service_credit_micros, window_ms),
                reward_planck: price(c.price_per_hour.reward_planck, window_ms),
                native_fee_planck: price(c.price_per_hour.native_fee_planck, window_ms),
            })
        })
    }

    fn launch(&self, order: &JobOrder) -> Result<Placement, Refusal> {
        self.with(|p| {
            if let Some(job) = p.jobs.get(&order.execution_id) {
                return Ok(Placement { processor_id: job.processor.clone(), quote: Quote::default() });
            }
            if p.refuse_all {
                return Err(Refusal::NoProcessor("the pool refuses every launch".into()));
            }
            let processor = Self::choose(p, &order.requirements, &order.avoid)?.id.clone();
            let state = if p.auto_ready { JobState::Ready } else { JobState::Starting };
            p.put(order.execution_id.clone(), SimJob { processor: processor.clone(), state, order: order.clone() });
            *p.started.entry(order.execution_id.clone()).or_default() += 1;
            if p.auto_ready {
                p.changed.insert(order.execution_id.clone());
            }
            Ok(Placement { processor_id: processor, quote: Quote::default() })
        })
    }

    fn restart(&self, order: &JobOrder, processor_id: &str) -> Result<(), Refusal> {
        self.with(|p| {
            if p.refuse_all || !p.processors.iter().any(|c| c.id == processor_id) {
                return Err(Refusal::Start(format!("processor {processor_id} does not take it back")));
            }
            let state = if p.auto_ready { JobState::Ready } else { JobState::Starting };
            let running = p.jobs.get(&order.execution_id).is_some_and(|j| runs(j.state));
            if !running {
                let job = SimJob { processor: processor_id.to_owned(), state, order: order.clone() };
                p.put(order.execution_id.clone(), job);
                p.changed.insert(order.execution_id.clone());
            }
            Ok(())
        })
    }

    fn stop(&self, execution_id: &str, _mode: StopMode) {
        self.with(|p| {
            if let Some(job) = p.jobs.get_mut(execution_id)
                && runs(job.state)
            {
                job.state = JobState::Exited(None);
                let processor = job.processor.clone();
                p.unload(&processor);
                p.changed.insert(execution_id.to_owned());
            }
        });
    }

    fn changes(&self) -> Vec<JobStatus> {
        self.with(|p| {
            let ids = std::mem::take(&mut p.changed);
            ids.into_iter()
                .filter_map(|id| {
                    let job = p.jobs.get(&id)?;
                    Some(JobStatus { execution_id: id, processor_id: job.processor.clone(), state: job.state })
                })
                .collect()
        })
    }

    fn jobs(&self) -> Vec<JobStatus> {
        self.with(|p| {
            p.jobs
                .iter()
                .map(|(id, j)| JobStatus {
                    execution_id: id.clone(),
                    processor_id: j.processor.clone(),
                    state: j.state,
                })
                .collect()
        })
    }

    fn release(&self, execution_id: &str) {
        self.with(|p| {
            if p.jobs.get(execution_id).is_some_and(|j| matches!(j.state, JobState::Exited(_) | JobState::Lost)) {
                p.jobs.remove(execution_id);
                p.changed.remove(execution_id);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(id: &str) -> JobOrder {
        JobOrder {
            execution_id: id.into(),
            window_end: 3_600_000,
            requirements: Requirements::default(),
            avoid: Vec::new(),
            workload: crate::market::Workload::default(),
        }
    }

    #[test]
    fn a_processor_takes_a_job_again_once_one_of_its_jobs_ended() {
        let pool = SimulatedPool::new(1, 1, 1_000);
        assert!(pool.launch(&order("a")).is_ok());
        assert!(pool.launch(&order("b")).is_err(), "sim-1 is full");
        assert!(pool.exit("a", 0));
        assert!(pool.launch(&order("b")).is_ok(), "a exited");
        assert!(pool.lose("b"));
        pool.release("a");
        assert!(pool.restart(&order("b"), "sim-1").is_ok());
        assert!(pool.quote(&Requirements::default(), &[], 1).is_err(), "b runs again");
        pool.stop("b", StopMode::Stop);
        pool.stop("b", StopMode::Stop);
        assert!(pool.launch(&order("c")).is_ok(), "b was stopped (once)");
        assert!(pool.launch(&order("d")).is_err(), "c runs");
    }

    #[test]
    fn the_least_loaded_processor_is_chosen_first_in_order() {
        let pool = SimulatedPool::new(2, 2, 1_000);
        let placed = |id: &str| pool.launch(&order(id)).map(|p| p.processor_id);
        assert_eq!(placed("a"), Ok("sim-1".to_owned()));
        assert_eq!(placed("b"), Ok("sim-2".to_owned()));
        assert!(pool.silence("a", 5), "a silent job still runs");
        assert_eq!(placed("c"), Ok("sim-1".to_owned()));
        assert!(pool.exit("b", 1));
        assert_eq!(placed("d"), Ok("sim-2".to_owned()));
        assert_eq!(placed("e"), Ok("sim-2".to_owned()));
        assert!(placed("f").is_err());
    }
}
