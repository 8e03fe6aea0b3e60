//! The processor market as an ingress job needs it (issue 17, point 8): a decorator over the
//! market the jobs run on (locally, the pool of confined processes) that
//!
//! - **equips** each order with the job's agent before it is placed, and again before a
//!   same-job restart ([`Equip`]: the coordinator gives it its revision's route keys,
//!   recorded before it starts);
//! - reports a job **ready** only once its route passed validation through the public path
//!   ([`IngressMarket::validated`]), whatever its processes say: ready, for a web job, is
//!   "serving", and it is what lets the scheduler stop a predecessor
//!   (`stop_when_successor_ready`);
//! - **drains** on stop: a job asked to stop keeps running while its route still has open
//!   connections, at least [`DRAIN_MIN`] and at most [`DRAIN_LIMIT`], and is stopped by
//!   [`IngressMarket::drain`] (the engine calls it every tick).
//!
//! Everything else is the inner market's. With it, the scheduler's decisions
//! (`svc_execution::scheduler::decide`) run an ingress deployment as they run a published
//! application, and the relay keeps only what is its own: funding, validation and routes.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use svc_execution::Millis;
use svc_execution::market::{Exit, JobOrder, JobState, JobStatus, Market, Part, Placement, Quote, Refusal, StopMode};
use svc_execution::plan::Requirements;

/// How long a stopped job's route may take to close its open connections; then the job is
/// stopped, and what is still open is cut.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// How long a stopped job runs at least: a client routed to it just before the stop has long
/// been counted by then.
pub const DRAIN_MIN: Duration = Duration::from_secs(1);

/// What the coordinator does for the market: the agent of each job, and its route's traffic.
pub trait Equip: Send + Sync {
    /// Adds the job's agent to `order` (its sidecar: its revision's route keys, recorded, and
    /// the gateway told before the agent first connects), or says why it cannot run.
    fn equip(&self, order: &mut JobOrder) -> Result<(), Refusal>;
    /// Public connections open now on the route of execution `execution_id`.
    fn open_connections(&self, execution_id: &str) -> usize;
    /// The job equipped for `execution_id` was refused by the processors: what was kept for
    /// it goes.
    fn abandon(&self, execution_id: &str) {
        let _ = execution_id;
    }
}

/// A job stopped once its connections ended (or were cut).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drained {
    /// The execution.
    pub execution_id: String,
    /// Connections still open when it was stopped (cut).
    pub cut: usize,
}

/// A job the scheduler recorded as ended and released: how it ended and its last output,
/// for the deployment's logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// The execution.
    pub execution_id: String,
    /// How it ended, as the market tells it (which part, its status or signal).
    pub ending: Option<Exit>,
    /// Its last output lines.
    pub output: Vec<(Part, String)>,
}

#[derive(Default)]
struct State {
    /// Jobs whose route passed validation: their readiness is reported.
    validated: HashSet<String>,
    /// Readiness to report at the next [`Market::changes`].
    newly_ready: Vec<String>,
    /// Jobs asked to stop, since when: stopped by [`IngressMarket::drain`].
    draining: HashMap<String, Instant>,
    /// Jobs released since [`IngressMarket::take_ended`] was last called.
    ended: Vec<Ended>,
}

/// The decorator.
pub struct IngressMarket {
    inner: Arc<dyn Market>,
    equip: Arc<dyn Equip>,
    state: Mutex<State>,
}

impl std::fmt::Debug for IngressMarket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngressMarket").finish_non_exhaustive()
    }
}

impl IngressMarket {
    /// Ingress jobs on `inner`, equipped by `equip`.
    pub fn new(inner: Arc<dyn Market>, equip: Arc<dyn Equip>) -> IngressMarket {
        IngressMarket { inner, equip, state: Mutex::default() }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Job `execution_id`'s route passed validation: from the next [`Market::changes`] on, it
    /// is reported ready (once; a later validation changes nothing).
    pub fn validated(&self, execution_id: &str) {
        let mut state = self.state();
        if state.validated.insert(execution_id.to_owned()) && !state.draining.contains_key(execution_id) {
            state.newly_ready.push(execution_id.to_owned());
        }
    }

    /// Whether job `execution_id`'s route passed validation since the job last started (a
    /// restart or its ending forgets it).
    pub fn is_validated(&self, execution_id: &str) -> bool {
        self.state().validated.contains(execution_id)
    }

    /// Stops the draining jobs whose connections have ended (after [`DRAIN_MIN`]) or whose
    /// time is up ([`DRAIN_LIMIT`]); returns them.
    pub fn drain(&self) -> Vec<Drained> {
        let due: Vec<(String, usize)> = {
            let state = self.state();
            state
                .draining
                .iter()
                .filter_map(|(id, since)| {
                    let elapsed = since.elapsed();
                    let open = self.equip.open_connections(id);
                    (elapsed >= DRAIN_LIMIT || elapsed >= DRAIN_MIN && open == 0).then(|| (id.clone(), open))
                })
                .collect()
        };
        let mut drained = Vec::with_capacity(due.len());
        for (id, cut) in due {
            self.inner.stop(&id, StopMode::Stop);
            self.state().draining.remove(&id);
            drained.push(Drained { execution_id: id, cut });
        }
        drained
    }

    /// The jobs released (their end recorded) since the last call, with their ending and
    /// last output.
    pub fn take_ended(&self) -> Vec<Ended> {
        std::mem::take(&mut self.state().ended)
    }

    /// Stops a job now, without draining (the coordinator is stopping).
    pub fn stop_now(&self, execution_id: &str) {
        self.state().draining.remove(execution_id);
        self.inner.stop(execution_id, StopMode::Stop);
    }

    /// Whether job `execution_id` is draining (asked to stop, still serving its connections).
    pub fn is_draining(&self, execution_id: &str) -> bool {
        self.state().draining.contains_key(execution_id)
    }

    /// What the inner market says of a job, as the scheduler is to read it: not ready until
    /// its route validated.
    fn seen(&self, mut status: JobStatus, validated: &HashSet<String>) -> JobStatus {
        if status.state == JobState::Ready && !validated.contains(&status.execution_id) {
            status.state = JobState::Starting;
        }
        status
    }
}

impl Market for IngressMarket {
    fn quote(&self, requirements: &Requirements, avoid: &[String], window_ms: Millis) -> Result<Quote, Refusal> {
        self.inner.quote(requirements, avoid, window_ms).map_err(|refusal| told("a quote", refusal))
    }

    fn launch(&self, order: &JobOrder) -> Result<Placement, Refusal> {
        let mut equipped = order.clone();
        self.equip.equip(&mut equipped)?;
        self.inner.launch(&equipped).map_err(|refusal| {
            self.equip.abandon(&order.execution_id);
            told(&order.execution_id, refusal)
        })
    }

    fn restart(&self, order: &JobOrder, processor_id: &str) -> Result<(), Refusal> {
        // A restarted job validates again before it counts as ready.
        {
            let mut state = self.state();
            state.validated.remove(&order.execution_id);
            state.newly_ready.retain(|id| id != &order.execution_id);
        }
        let mut equipped = order.clone();
        self.equip.equip(&mut equipped)?;
        self.inner.restart(&equipped, processor_id).map_err(|refusal| told(&order.execution_id, refusal))
    }

    fn stop(&self, execution_id: &str, mode: StopMode) {
        let running = self
            .inner
            .jobs()
            .into_iter()
            .any(|j| j.execution_id == execution_id && !matches!(j.state, JobState::Exited(_) | JobState::Lost));
        if running {
            // Its route keeps its open connections until `drain` stops it.
            self.state().draining.entry(execution_id.to_owned()).or_insert_with(Instant::now);
        } else {
            self.inner.stop(execution_id, mode);
        }
    }

    fn changes(&self) -> Vec<JobStatus> {
        let changed = self.inner.changes();
        let (validated, newly_ready) = {
            let mut state = self.state();
            (state.validated.clone(), std::mem::take(&mut state.newly_ready))
        };
        let mut out: Vec<JobStatus> = changed.into_iter().map(|s| self.seen(s, &validated)).collect();
        if !newly_ready.is_empty() {
            let running = |state: JobState| matches!(state, JobState::Starting | JobState::Ready);
            for job in self.inner.jobs() {
                if newly_ready.contains(&job.execution_id) && running(job.state) {
                    out.retain(|s| s.execution_id != job.execution_id);
                    out.push(JobStatus { state: JobState::Ready, ..job });
                }
            }
        }
        out
    }

    fn jobs(&self) -> Vec<JobStatus> {
        let validated = self.state().validated.clone();
        self.inner.jobs().into_iter().map(|s| self.seen(s, &validated)).collect()
    }

    fn release(&self, execution_id: &str) {
        let output = self.inner.take_output(execution_id);
        let ending = self.inner.ending(execution_id);
        {
            let mut state = self.state();
            state.validated.remove(execution_id);
            state.draining.remove(execution_id);
            state.newly_ready.retain(|id| id != execution_id);
            state.ended.push(Ended { execution_id: execution_id.to_owned(), ending, output });
        }
        self.inner.release(execution_id);
    }

    fn starts_empty(&self) -> bool {
        self.inner.starts_empty()
    }

    fn take_output(&self, execution_id: &str) -> Vec<(Part, String)> {
        self.inner.take_output(execution_id)
    }

    fn ending(&self, execution_id: &str) -> Option<Exit> {
        self.inner.ending(execution_id)
    }

    fn processes(&self, execution_id: &str) -> Vec<u32> {
        self.inner.processes(execution_id)
    }
}

/// What a refusal of the processors says to the customer (it is recorded on the execution):
/// what failed, without the host's paths and programs, which go to the coordinator's log.
fn told(execution_id: &str, refusal: Refusal) -> Refusal {
    tracing::warn!("svc relay: job {execution_id} refused: {refusal}");
    match refusal {
        Refusal::NoProcessor(_) => Refusal::NoProcessor("no processor could take the job".to_owned()),
        Refusal::Artifact(_) => Refusal::Artifact("the app's files could not be used for the job".to_owned()),
        Refusal::Start(_) => Refusal::Start("the job could not be started (the coordinator's log has why)".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use svc_execution::SimulatedPool;
    use svc_execution::market::{Sidecar, Workload};

    use super::*;

    /// Equips every order with a marker sidecar (counting), and reports a settable number
    /// of open connections.
    #[derive(Default)]
    struct FakeEquip {
        equipped: AtomicUsize,
        open: AtomicUsize,
        refuse: std::sync::atomic::AtomicBool,
    }

    impl Equip for FakeEquip {
        fn equip(&self, order: &mut JobOrder) -> Result<(), Refusal> {
            if self.refuse.load(Ordering::SeqCst) {
                return Err(Refusal::Start("no route keys".into()));
            }
            let n = self.equipped.fetch_add(1, Ordering::SeqCst) + 1;
            order.workload.sidecar = Some(Sidecar { argv: vec!["agent".into(), n.to_string()], ..Sidecar::default() });
            Ok(())
        }
        fn open_connections(&self, _: &str) -> usize {
            self.open.load(Ordering::SeqCst)
        }
    }

    fn order(id: &str) -> JobOrder {
        JobOrder {
            execution_id: id.into(),
            window_end: u64::MAX,
            requirements: Requirements::default(),
            avoid: Vec::new(),
            workload: Workload::default(),
        }
    }

    fn world() -> (Arc<SimulatedPool>, Arc<FakeEquip>, IngressMarket) {
        let pool = Arc::new(SimulatedPool::new(1, 4, 0));
        let equip = Arc::new(FakeEquip::default());
        let market = IngressMarket::new(pool.clone(), equip.clone());
        (pool, equip, market)
    }

    fn state_of(market: &IngressMarket, id: &str) -> Option<JobState> {
        market.jobs().into_iter().find(|j| j.execution_id == id).map(|j| j.state)
    }

    #[test]
    fn a_refusal_tells_the_customer_what_failed_not_the_hosts_paths() {
        for refusal in [
            Refusal::Start("cannot make the job's scratch directory in /var/lib/svc/relay-jobs/pool: denied".into()),
            Refusal::Artifact("/var/lib/svc/relay-jobs/artifacts/sha256-00: missing".into()),
            Refusal::NoProcessor("local-1 runs 4 of 4 jobs".into()),
        ] {
            let message = told("d/0/1/1", refusal).to_string();
            assert!(!message.contains("/var") && !message.contains("local-1"), "{message}");
        }
    }

    #[test]
    fn every_launch_and_restart_is_equipped_with_its_agent() {
        let (pool, equip, market) = world();
        market.launch(&order("d/0/1/1")).expect("placed");
        let sidecar = pool.order("d/0/1/1").and_then(|o| o.workload.sidecar).expect("an agent");
        assert_eq!(sidecar.argv, ["agent", "1"]);
        pool.exit("d/0/1/1", 1);
        let processor = market.jobs()[0].processor_id.clone();
        market.restart(&order("d/0/1/1"), &processor).expect("restarted");
        assert_eq!(equip.equipped.load(Ordering::SeqCst), 2, "fresh keys at the restart too");
        equip.refuse.store(true, Ordering::SeqCst);
        assert!(market.launch(&order("d/0/2/1")).is_err(), "a job that cannot be equipped is not placed");
        assert!(pool.order("d/0/2/1").is_none());
    }

    #[test]
    fn a_job_is_ready_only_once_its_route_validated() {
        let (pool, _, market) = world();
        market.launch(&order("d/0/1/1")).expect("placed");
        market.changes();
        pool.make_ready("d/0/1/1");
        let changes = market.changes();
        assert!(changes.iter().all(|c| c.state != JobState::Ready), "its processes are up, not its route: {changes:?}");
        assert_eq!(state_of(&market, "d/0/1/1"), Some(JobState::Starting));
        market.validated("d/0/1/1");
        let changes = market.changes();
        assert_eq!(changes.iter().map(|c| c.state).collect::<Vec<_>>(), [JobState::Ready]);
        assert_eq!(state_of(&market, "d/0/1/1"), Some(JobState::Ready));
        market.validated("d/0/1/1");
        assert!(market.changes().is_empty(), "reported once");
        // A restart validates again.
        pool.exit("d/0/1/1", 1);
        market.changes();
        let processor = market.jobs()[0].processor_id.clone();
        market.restart(&order("d/0/1/1"), &processor).expect("restarted");
        pool.make_ready("d/0/1/1");
        assert_eq!(state_of(&market, "d/0/1/1"), Some(JobState::Starting));
    }

    #[test]
    fn a_stopped_job_drains_its_connections_before_it_is_stopped() {
        let (pool, equip, market) = world();
        market.launch(&order("d/0/1/1")).expect("placed");
        equip.open.store(3, Ordering::SeqCst);
        market.stop("d/0/1/1", StopMode::Stop);
        assert!(market.is_draining("d/0/1/1"));
        assert!(market.drain().is_empty(), "still serving its connections");
        assert_eq!(pool.running().len(), 1);
        // Connections ended: stopped once DRAIN_MIN has passed.
        equip.open.store(0, Ordering::SeqCst);
        std::thread::sleep(DRAIN_MIN);
        assert_eq!(market.drain(), [Drained { execution_id: "d/0/1/1".into(), cut: 0 }]);
        assert!(pool.running().is_empty());
        assert!(!market.is_draining("d/0/1/1"));
        // A job that already ended is stopped at once: nothing to drain.
        market.launch(&order("d/0/2/1")).expect("placed");
        pool.exit("d/0/2/1", 0);
        market.stop("d/0/2/1", StopMode::Stop);
        assert!(!market.is_draining("d/0/2/1"));
    }
}
