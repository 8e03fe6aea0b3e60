//! A deployment's jobs as executions, in the record model of the publication service's
//! (svc-execution): slot 0, generation = the revision, attempt = the launch of that revision.
//! Every launch, readiness, end and stop of a job is one transaction here, so the deployment's
//! `svc.execution-convergence.v1` says what ran, where, and why it ended. An ended execution
//! never changes again.

use svc_execution::{ExecState, Reason};

use super::deployments::get;
use super::{RelayStore, StoreError, now_ms};

/// One execution of a deployment's job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionRecord {
    /// The processor market's order ID: `<deployment>.r<revision>.<attempt>`.
    pub execution_id: String,
    /// The revision whose job it is.
    pub generation: u32,
    /// Which launch of that revision (a restart is the next).
    pub attempt: u32,
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
}

impl RelayStore {
    /// Records the next launch of the deployment's revision `revision` (`launching`);
    /// returns its order ID.
    pub fn begin_execution(&self, deployment_id: &str, revision: u32) -> Result<String, StoreError> {
        self.write(|tx| {
            get(tx, deployment_id)?;
            let attempt = tx.last_attempt(deployment_id, revision)?.saturating_add(1);
            let now = now_ms();
            let record = ExecutionRecord {
                execution_id: format!("{deployment_id}.r{revision}.{attempt}"),
                generation: revision,
                attempt,
                state: ExecState::Launching,
                processor_id: None,
                created_at: now,
                changed_at: now,
                reason: None,
            };
            tx.insert_execution(deployment_id, &record)?;
            Ok(record.execution_id)
        })
    }

    /// Moves a live execution to `to`, with where it runs (kept if `None`) and why; an ended
    /// one, one not recorded, or a stopping one asked back to a running state is left alone.
    /// Whether it moved.
    pub fn set_execution_state(
        &self,
        execution_id: &str,
        to: ExecState,
        processor_id: Option<&str>,
        reason: Option<Reason>,
    ) -> Result<bool, StoreError> {
        self.write(|tx| {
            let Some((_, mut record)) = tx.execution(execution_id)? else { return Ok(false) };
            // An ended one never changes, nor does a stopping one come back.
            let back = record.state == ExecState::Stopping && to.is_live() && to != ExecState::Stopping;
            if !record.state.is_live() || record.state == to || back {
                return Ok(false);
            }
            record.state = to;
            if let Some(p) = processor_id {
                record.processor_id = Some(p.to_owned());
            }
            record.reason = reason;
            record.changed_at = now_ms();
            tx.update_execution(&record)?;
            Ok(true)
        })
    }

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

    /// The newest execution of the deployment's revision `revision`, and whether a job of an
    /// older revision is still live (draining): what its projection's slot and rollout say,
    /// whatever page of executions is asked for.
    pub fn execution_summary(
        &self,
        deployment_id: &str,
        revision: u32,
    ) -> Result<(Option<ExecutionRecord>, bool), StoreError> {
        self.read(|tx| Ok((tx.latest_execution(deployment_id, revision)?, tx.live_before(deployment_id, revision)?)))
    }

    /// Why the scheduler launches nothing for the deployment now, if it is blocked (unfunded,
    /// restarts exhausted, ...): what its projection's convergence says.
    pub fn scheduler_blocked(&self, deployment_id: &str) -> Result<Option<Reason>, StoreError> {
        self.read(|tx| tx.blocked(deployment_id))
    }

    /// Ends every execution still live as `failed` for `reason`: at a start of the
    /// coordinator, whose jobs are its processes and ended with it. How many.
    pub fn end_live_executions(&self, reason: &Reason) -> Result<usize, StoreError> {
        self.write(|tx| {
            let live = tx.live_executions()?;
            let now = now_ms();
            for mut record in live.iter().cloned() {
                record.state = ExecState::Failed;
                record.reason = Some(reason.clone());
                record.changed_at = now;
                tx.update_execution(&record)?;
            }
            Ok(live.len())
        })
    }
}
