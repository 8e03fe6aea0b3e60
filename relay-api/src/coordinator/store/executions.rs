//! A deployment's jobs as executions, in the record model of the publication service's
//! (svc-execution): the scheduler records them (`coordinator::scheduling`), each launch, same-
//! job restart, readiness, end and stop one transaction, so the deployment's
//! `svc.execution-convergence.v1` says what ran, where, and why it ended. These are the reads
//! its projection makes, and what the coordinator records when it stops.

use svc_execution::{ExecState, Reason};

use super::{RelayStore, StoreError, now_ms};

/// One execution of a deployment's job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionRecord {
    /// The processor market's order ID: `<deployment>.r<revision>.<attempt>`.
    pub execution_id: String,
    /// The slot's generation (each launch of a revision, or of its renewal, is one).
    pub generation: u32,
    /// Which attempt of that generation.
    pub attempt: u32,
    /// The revision (policy version) it runs.
    pub policy_version: u32,
    /// Its same-job restarts.
    pub restarts: u32,
    /// Its state.
    pub state: ExecState,
    /// Where it was placed.
    pub processor_id: Option<String>,
    /// When it was decided, Unix milliseconds.
    pub created_at: i64,
    /// When its state last changed.
    pub changed_at: i64,
    /// Why it is in its state (an end, a refusal, a stop).
    pub reason: Option<Reason>,
    /// Its slot (which job of the revision: the route's replica `job-<slot>`).
    pub slot: u16,
}

impl RelayStore {
    /// The deployment's executions older than row `before` (all, without), newest first, at
    /// most `limit`, each with its row (the cursor of the next page).
    pub fn executions(
        &self,
        deployment_id: &str,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<(i64, ExecutionRecord)>, StoreError> {
        self.read(|tx| tx.executions_page(deployment_id, before, limit))
    }

    /// The newest execution of each slot of the deployment's revision `revision`, and whether
    /// a job of an older revision is still live (draining): what its projection's slots and
    /// rollout say, whatever page of executions is asked for.
    pub fn execution_summary(
        &self,
        deployment_id: &str,
        revision: u32,
    ) -> Result<(Vec<ExecutionRecord>, bool), StoreError> {
        self.read(|tx| Ok((tx.latest_executions(deployment_id, revision)?, tx.live_before(deployment_id, revision)?)))
    }

    /// The deployment of execution `execution_id`, the revision (policy version) it runs, and
    /// its slot (which replica of the route it is).
    pub fn execution_deployment(
        &self,
        execution_id: &str,
    ) -> Result<Option<(crate::coordinator::model::Deployment, u32, u16)>, StoreError> {
        self.read(|tx| {
            let Some((key, e)) = tx.scheduled_by_id(execution_id)? else { return Ok(None) };
            let Some(d) = tx.deployment_by_key(key)? else { return Ok(None) };
            Ok(Some((d, u32::try_from(e.policy_version).unwrap_or(0), e.slot)))
        })
    }

    /// The scheduler's current executions of a deployment: the live ones and every attempt of
    /// its slots' newest generations, and of their newest generations of a revision up to
    /// `serving`, oldest first.
    pub fn current_executions(
        &self,
        deployment_id: &str,
        serving: u32,
    ) -> Result<Vec<svc_execution::Execution>, StoreError> {
        self.read(|tx| match tx.deployment_key(deployment_id)? {
            Some(key) => tx.scheduled(key, u64::from(serving)),
            None => Ok(Vec::new()),
        })
    }

    /// Records every live execution as stopped for `reason` (the coordinator stopped, and its
    /// jobs with it), only while coordinator `holder` holds the engine lease, checked in the
    /// same transaction: a coordinator that lost it records nothing over the jobs its
    /// successor launched ([`StoreError::NotLeader`]). How many.
    pub fn stop_live_executions(&self, holder: &str, reason: &Reason) -> Result<usize, StoreError> {
        let mut tx = self.begin_write_as_leader(holder)?;
        let live = tx.live_executions()?;
        let now = now_ms();
        for mut record in live.iter().cloned() {
            record.state = ExecState::Stopped;
            record.reason = Some(reason.clone());
            record.changed_at = now;
            tx.update_execution(&record)?;
        }
        tx.commit()?;
        Ok(live.len())
    }

    /// Makes the deployment due for the scheduler now (what it plans from changed outside
    /// the store's own operations: a policy published at last).
    pub fn wake_scheduler(&self, deployment_id: &str) -> Result<(), StoreError> {
        self.write(|tx| tx.wake(deployment_id, now_ms()))
    }

    /// Why the scheduler launches nothing for the deployment now, if it is blocked (unfunded,
    /// restarts exhausted, ...): what its projection's convergence says.
    pub fn scheduler_blocked(&self, deployment_id: &str) -> Result<Option<Reason>, StoreError> {
        self.read(|tx| tx.blocked(deployment_id))
    }
}
