//! The jobs the engine launched, as orders on the processor [`Market`] (the same trait the
//! publication service's executions launch on; locally, its pool of confined processes): their
//! output for the deployment logs, and how often each has had to be restarted. A job that
//! ends is seen at the engine's next tick (250 ms), reaped, and answered by [`Jobs::reap`]'s
//! verdict: restart after a backoff that doubles, or give up after
//! [`RestartPolicy::max_restarts`] restarts within [`RestartPolicy::window`].
//!
//! Each launch is its own order and its own execution in the store
//! ([`RelayStore::begin_execution`]: `dep_….rN.<attempt>`), so a relaunch never meets an
//! earlier order the market still holds; every change of a job (placed, ready, ended, stopping,
//! stopped) is recorded on its execution, with why. The market's calls block (a launch starts
//! processes, a stop waits for them): they run off the async runtime.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use svc_execution::market::{JobOrder, JobState, Market, Placement, Refusal, StopMode};
use svc_execution::{ExecState, Reason};

use super::blocking;
use super::store::RelayStore;
use crate::runner::{Exit, Part};

/// Output lines of one job and one process, for the logs.
pub(super) type Output = Vec<(&'static str, Vec<String>)>;

/// Groups lines by process, keeping their order within each.
fn by_part(lines: Vec<(Part, String)>) -> Output {
    let mut out: Output = Vec::new();
    for (part, line) in lines {
        match out.iter_mut().find(|(source, _)| *source == part.as_str()) {
            Some((_, group)) => group.push(line),
            None => out.push((part.as_str(), vec![line])),
        }
    }
    out
}

/// When a job whose process ended is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts allowed within `window`; one more ending fails the deployment (`job_exited`).
    pub max_restarts: u32,
    /// The first restart's delay; each further one doubles it, up to `max_backoff`.
    pub backoff: Duration,
    /// The longest delay.
    pub max_backoff: Duration,
    /// A job that ran this long without ending starts with a clean count.
    pub window: Duration,
}

impl Default for RestartPolicy {
    fn default() -> RestartPolicy {
        RestartPolicy {
            max_restarts: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            window: Duration::from_secs(10 * 60),
        }
    }
}

impl RestartPolicy {
    /// The delay before restart number `n` (1-based).
    pub fn delay(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX);
        self.backoff.saturating_mul(factor).min(self.max_backoff)
    }
}

/// What to do about a job whose process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Start it again after `delay`; this is restart `n` of at most `of`.
    Restart {
        /// The ending.
        exit: Exit,
        /// How long to wait.
        delay: Duration,
        /// Which restart this is.
        n: u32,
        /// The most there may be.
        of: u32,
    },
    /// Too many endings: fail the deployment.
    GiveUp {
        /// The last ending.
        exit: Exit,
        /// How many restarts were made.
        restarts: u32,
    },
}

/// A launched job.
struct Job {
    /// Its order's execution ID.
    execution_id: String,
    /// The digest of its app's files.
    artifact: String,
    started: Instant,
    /// Whether it was recorded ready (a revalidation records nothing more).
    ready: bool,
}

/// Restarts of one deployment's job.
#[derive(Debug, Clone, Copy)]
struct Restarts {
    count: u32,
    not_before: Instant,
}

/// Every job the engine runs.
pub(super) struct Jobs {
    market: Arc<dyn Market>,
    store: Arc<RelayStore>,
    running: Mutex<HashMap<String, Job>>,
    restarts: Mutex<HashMap<String, Restarts>>,
    /// Changes the store refused (busy, full): tried again at each reap, so no execution is
    /// left live for a job that ended.
    unrecorded: Mutex<Vec<Change>>,
    policy: RestartPolicy,
}

/// A change of an execution, to record.
#[derive(Debug, Clone)]
struct Change {
    execution_id: String,
    to: ExecState,
    processor_id: Option<String>,
    reason: Option<Reason>,
}

/// The reason code of a job that ended on its own (its app or agent exited or was killed).
pub(super) const JOB_ENDED: &str = "job_ended";

impl Jobs {
    pub(super) fn new(market: Arc<dyn Market>, store: Arc<RelayStore>, policy: RestartPolicy) -> Jobs {
        Jobs {
            market,
            store,
            running: Mutex::default(),
            restarts: Mutex::default(),
            unrecorded: Mutex::default(),
            policy,
        }
    }

    /// Records a change of execution `execution_id`. The job runs (or ended) whatever the
    /// store says: a change the store refuses is logged and kept to be tried again.
    fn record(&self, execution_id: &str, to: ExecState, processor_id: Option<&str>, reason: Option<Reason>) {
        let change =
            Change { execution_id: execution_id.to_owned(), to, processor_id: processor_id.map(str::to_owned), reason };
        if let Err(change) = self.write(change) {
            self.unrecorded.lock().unwrap_or_else(PoisonError::into_inner).push(change);
        }
    }

    fn write(&self, change: Change) -> Result<(), Change> {
        let Change { execution_id, to, processor_id, reason } = &change;
        let written =
            blocking(|| self.store.set_execution_state(execution_id, *to, processor_id.as_deref(), reason.clone()));
        match written {
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::error!("svc relay: recording execution {execution_id} {}: {e}", to.as_str());
                Err(change)
            }
        }
    }

    /// Tries again the changes the store refused, in order.
    fn record_again(&self) {
        let pending = std::mem::take(&mut *self.unrecorded.lock().unwrap_or_else(PoisonError::into_inner));
        let mut pending = pending.into_iter();
        while let Some(change) = pending.next() {
            if let Err(change) = self.write(change) {
                let mut left = self.unrecorded.lock().unwrap_or_else(PoisonError::into_inner);
                left.push(change);
                left.extend(pending);
                return;
            }
        }
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, Job>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Launches `order` (its execution recorded `launching` already) as job `id`, keeps it,
    /// and records where it runs, or why the market refused it. A job `id` still held (a
    /// launch whose next step failed, launched again) is stopped first, never left running
    /// unheld.
    pub(super) fn launch(&self, id: &str, order: JobOrder) -> Result<Placement, Refusal> {
        if self.contains(id) {
            self.stop(id, false, Reason::new("relaunched", "a new launch of the revision replaces it"));
        }
        let placement = match blocking(|| self.market.launch(&order)) {
            Ok(placement) => placement,
            Err(refusal) => {
                // What the customer reads says what failed; where on the host, the log.
                tracing::warn!("svc relay: job {} refused: {refusal}", order.execution_id);
                let reason = Reason::new(refusal.code(), refused_message(&refusal));
                self.record(&order.execution_id, ExecState::Refused, None, Some(reason));
                return Err(refusal);
            }
        };
        self.record(&order.execution_id, ExecState::Running, Some(&placement.processor_id), None);
        let job = Job {
            execution_id: order.execution_id,
            artifact: order.workload.artifact_digest,
            started: Instant::now(),
            ready: false,
        };
        self.running().insert(id.to_owned(), job);
        Ok(placement)
    }

    /// The artifacts the running jobs were launched from.
    pub(super) fn artifacts(&self) -> Vec<String> {
        self.running().values().map(|job| job.artifact.clone()).collect()
    }

    /// Records job `id` ready: its route passed validation through the public path.
    pub(super) fn ready(&self, id: &str) {
        let execution_id = {
            let mut running = self.running();
            let Some(job) = running.get_mut(id).filter(|job| !job.ready) else { return };
            job.ready = true;
            job.execution_id.clone()
        };
        self.record(&execution_id, ExecState::Ready, None, None);
    }

    /// Records job `id` stopping for `reason`: it runs on until its connections end.
    pub(super) fn stopping(&self, id: &str, reason: Reason) {
        let Some(execution_id) = self.running().get(id).map(|job| job.execution_id.clone()) else { return };
        self.record(&execution_id, ExecState::Stopping, None, Some(reason));
    }

    /// Whether the deployment's job runs.
    pub(super) fn contains(&self, id: &str) -> bool {
        self.running().contains_key(id)
    }

    /// The deployments whose jobs run.
    pub(super) fn ids(&self) -> Vec<String> {
        self.running().keys().cloned().collect()
    }

    /// Process IDs of a deployment's job (app, agent), if it runs and its processor is this
    /// host.
    pub(super) fn pids(&self, id: &str) -> Option<Vec<u32>> {
        let execution_id = self.running().get(id)?.execution_id.clone();
        Some(self.market.processes(&execution_id))
    }

    /// Whether a restart of the deployment's job must wait still (its backoff runs).
    pub(super) fn restart_pending(&self, id: &str) -> bool {
        let restarts = self.restarts.lock().unwrap_or_else(PoisonError::into_inner);
        restarts.get(id).is_some_and(|r| r.not_before > Instant::now())
    }

    /// Stops the deployment's job, if it runs, for `reason`, returning its last output; its
    /// restart count goes with it when `forget`.
    pub(super) fn stop(&self, id: &str, forget: bool, reason: Reason) -> Output {
        let job = self.running().remove(id);
        let last = match job {
            Some(job) => {
                let last = self.end(&job.execution_id, true);
                self.record(&job.execution_id, ExecState::Stopped, None, Some(reason));
                last
            }
            None => Vec::new(),
        };
        if forget {
            self.restarts.lock().unwrap_or_else(PoisonError::into_inner).remove(id);
        }
        last
    }

    /// Stops an order (when `stop`), takes its last output and lets the market forget it.
    fn end(&self, execution_id: &str, stop: bool) -> Output {
        blocking(|| {
            if stop {
                self.market.stop(execution_id, StopMode::Stop);
            }
            let lines = self.market.take_output(execution_id);
            self.market.release(execution_id);
            by_part(lines)
        })
    }

    /// Stops every job (the coordinator is stopping).
    pub(super) fn stop_all(&self) {
        let jobs: Vec<Job> = self.running().drain().map(|(_, j)| j).collect();
        for job in jobs {
            self.end(&job.execution_id, true);
            let reason = Reason::new("coordinator_stopped", "the coordinator stopped; its jobs end with it");
            self.record(&job.execution_id, ExecState::Stopped, None, Some(reason));
        }
    }

    /// Finds jobs that ended: each one's last output is returned for the logs, and it is
    /// judged.
    pub(super) fn reap(&self) -> Vec<(String, Output, Verdict)> {
        self.record_again();
        let market = self.market.jobs();
        let ended: Vec<(String, Job, Exit)> = {
            let mut running = self.running();
            let exits: Vec<(String, Exit)> = running
                .iter()
                .filter_map(|(id, job)| {
                    let state = market.iter().find(|s| s.execution_id == job.execution_id).map(|s| s.state);
                    let code = match state {
                        Some(JobState::Exited(code)) => code,
                        // Gone from the market, or lost by it: ended, for all anyone knows.
                        Some(JobState::Lost) | None => None,
                        Some(_) => return None,
                    };
                    let told = Exit { part: Part::App, code, signal: None };
                    Some((id.clone(), self.market.ending(&job.execution_id).unwrap_or(told)))
                })
                .collect();
            exits.into_iter().filter_map(|(id, exit)| Some((id.clone(), running.remove(&id)?, exit))).collect()
        };
        let mut verdicts = Vec::new();
        for (id, job, exit) in ended {
            let ran = job.started.elapsed();
            let lines = self.end(&job.execution_id, false);
            // A web job that exits 0 still ended before it was stopped: `completed`, not failed.
            let state = if exit.code == Some(0) { ExecState::Completed } else { ExecState::Failed };
            self.record(&job.execution_id, state, None, Some(Reason::new(JOB_ENDED, exit.to_string())));
            verdicts.push((id.clone(), lines, self.judge(&id, exit, ran)));
        }
        verdicts
    }

    fn judge(&self, id: &str, exit: Exit, ran: Duration) -> Verdict {
        let policy = self.policy;
        let mut restarts = self.restarts.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = restarts.entry(id.to_owned()).or_insert(Restarts { count: 0, not_before: Instant::now() });
        if ran >= policy.window {
            entry.count = 0;
        }
        if entry.count >= policy.max_restarts {
            let restarts = entry.count;
            entry.count = 0;
            return Verdict::GiveUp { exit, restarts };
        }
        entry.count += 1;
        let delay = policy.delay(entry.count);
        entry.not_before = Instant::now() + delay;
        Verdict::Restart { exit, delay, n: entry.count, of: policy.max_restarts }
    }

    /// New lines of each job's output, by deployment and source.
    pub(super) fn new_output(&self) -> Vec<(String, Output)> {
        let held: Vec<(String, String)> =
            self.running().iter().map(|(id, job)| (id.clone(), job.execution_id.clone())).collect();
        held.into_iter()
            .filter_map(|(id, execution_id)| {
                let lines = self.market.take_output(&execution_id);
                (!lines.is_empty()).then(|| (id, by_part(lines)))
            })
            .collect()
    }
}

/// What a refused launch's execution says to the customer: what failed, without the host's
/// paths and programs (the coordinator's log has them).
fn refused_message(refusal: &Refusal) -> String {
    match refusal {
        Refusal::NoProcessor(_) => "no processor could take the job".to_owned(),
        Refusal::Artifact(_) => "the app's files could not be used for the job".to_owned(),
        Refusal::Start(_) => "the job could not be started (the coordinator's log has why)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use svc_execution::SimulatedPool;
    use svc_execution::market::{Workload, WorkloadRuntime};
    use svc_execution::plan::Requirements;

    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_ceiling() {
        let policy = RestartPolicy {
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(5),
            ..Default::default()
        };
        let delays: Vec<u64> = (1..=5).map(|n| policy.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        assert_eq!(policy.delay(200), Duration::from_secs(5), "no overflow");
    }

    fn order(execution_id: String) -> JobOrder {
        JobOrder {
            execution_id,
            window_end: u64::MAX,
            requirements: Requirements::default(),
            avoid: Vec::new(),
            workload: Workload {
                artifact_digest: "sha256:00".into(),
                runtime: WorkloadRuntime::Javascript {
                    engine: "nodejs".into(),
                    entry_file: "server.js".into(),
                    args: Vec::new(),
                },
                ..Workload::default()
            },
        }
    }

    #[test]
    fn an_ended_job_restarts_with_backoff_then_gives_up() {
        let pool = Arc::new(SimulatedPool::new(1, 4, 0));
        let policy = RestartPolicy { max_restarts: 2, ..Default::default() };
        // The store records nothing here (no deployment): recording is the engine tests'.
        let dir = tempfile::tempdir().expect("a scratch directory");
        let store = Arc::new(RelayStore::open(dir.path()).expect("a store"));
        let jobs = Jobs::new(pool.clone(), store, policy);
        let exit = Exit { part: Part::App, code: Some(1), signal: None };
        let mut verdicts = Vec::new();
        for attempt in 1..=3 {
            let id = format!("d1.r1.{attempt}");
            jobs.launch("d1", order(id.clone())).expect("launched");
            pool.exit(&id, 1);
            let mut reaped = jobs.reap();
            assert_eq!(reaped.len(), 1);
            assert!(!jobs.contains("d1"), "an ended job is removed");
            assert!(pool.jobs().is_empty(), "and released");
            verdicts.push(reaped.remove(0).2);
        }
        assert_eq!(
            verdicts,
            [
                Verdict::Restart { exit, delay: Duration::from_secs(1), n: 1, of: 2 },
                Verdict::Restart { exit, delay: Duration::from_secs(2), n: 2, of: 2 },
                Verdict::GiveUp { exit, restarts: 2 },
            ]
        );
        assert!(jobs.restart_pending("d1"), "the last restart's delay still runs");
        jobs.launch("d2", order("d2.r1.1".into())).expect("launched");
        assert!(jobs.reap().is_empty(), "a running job is left alone");
        jobs.stop("d2", true, Reason::new("test", "the test stops it"));
        assert!(pool.jobs().is_empty(), "a stopped job is released");
    }

    #[test]
    fn a_job_launched_again_while_held_is_stopped_first_never_left_running_unheld() {
        let pool = Arc::new(SimulatedPool::new(1, 4, 0));
        let dir = tempfile::tempdir().expect("a scratch directory");
        let jobs =
            Jobs::new(pool.clone(), Arc::new(RelayStore::open(dir.path()).expect("a store")), RestartPolicy::default());
        jobs.launch("d1", order("d1.r1.1".into())).expect("launched");
        jobs.launch("d1", order("d1.r1.2".into())).expect("launched again");
        let held: Vec<String> = pool.jobs().into_iter().map(|j| j.execution_id).collect();
        assert_eq!(held, ["d1.r1.2"], "the first is stopped and released");
    }

    #[test]
    fn a_refusal_tells_the_customer_what_failed_not_the_hosts_paths() {
        for refusal in [
            Refusal::Start("cannot make the job's scratch directory in /var/lib/svc/relay-jobs/pool: denied".into()),
            Refusal::Artifact("/var/lib/svc/relay-jobs/artifacts/sha256-00: missing".into()),
            Refusal::NoProcessor("local-1 runs 4 of 4 jobs".into()),
        ] {
            let message = refused_message(&refusal);
            assert!(!message.contains('/') && !message.contains("local-1"), "{message}");
        }
    }
}
