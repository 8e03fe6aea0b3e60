//! The deployments as applications of the scheduler (`svc_execution`): the relay's store seen
//! as an [`ExecutionStore`], so the same `scheduler::decide` and executor that run published
//! applications decide an ingress deployment's jobs (issue 17, point 8).
//!
//! - A deployment is an application: its key is its row, its identity its ID (execution IDs
//!   start with it).
//! - Its plan is the policy of its newest revision that has not failed (a successor's, while
//!   one is deployed: a newer policy version, rolled out as the policy's `lifecycle.update`
//!   says), read as the publication service reads one ([`manifest_core::plan::plan`]), with
//!   the relay's own recovery and spend ([`ingress_plan`]).
//! - It runs while it is funded and not stopped or failed; otherwise it is halted
//!   ([`svc_execution::AppView::halt`]): its jobs stop now, since a route must not serve on
//!   credit until a day-long window ends.
//! - What a job runs is its revision's policy with the revision's secrets; the agent beside
//!   it is the market's to add (the ingress market).
//!
//! Every deployment state change and every new or withdrawn revision wakes the deployment
//! (the store's rules set it due in the same transaction).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use svc_execution::executor::{ExecutionStore, ExecutionTx, StoreFailure};
use svc_execution::plan::{ExistingJobs, Recovery, RuntimeFailure, SpendAuthority, Update, UpdateTiming};
use svc_execution::{AppKey, AppStatus, AppView, ExecKey, ExecState, Execution, Millis, Plan, Reason, Workload};

use super::files;
use super::model::{Deployment, SuccessorState};
use super::state::DeploymentState;
use super::store::{RelayStore, StoreError, Transaction};

/// Same-job restarts of an ingress job per generation before its deployment is given up as
/// failed (`job_exited`), unless the coordinator is told otherwise (`--max-restarts`):
/// restart *n* waits `retry_backoff(n)`.
pub const MAX_RESTARTS: u8 = 5;

/// An ingress job's window: its route serves while it is funded, and the coordinator stops
/// it when it is not, so no paid window of the policy's schedule ends it. (Until routes are
/// per execution, a renewal could not hand a route over to its successor as a redeploy does:
/// docs/decisions.md.)
pub const INGRESS_WINDOW_MS: Millis = 100 * 365 * 86_400_000;

/// Deployments the scheduler decides for in one transaction.
pub const BATCH: usize = 64;

/// How long a restarted ingress job has to be ready before it counts as failed again: no
/// limit. Ready is its route validating through the public path, which can fail for reasons
/// no restart mends (a DNS record, a validator version the project does not pin); the
/// deployment says `degraded` with the hint instead.
pub const RESTART_GRACE_MS: Millis = Millis::MAX / 4;

/// How long an ingress job's processor may be silent before the job counts as failed.
pub const CONTACT_LOSS_MS: Millis = 60_000;

/// The relay's store as the scheduler's: the deployments, their executions and policies, and
/// the revisions' secrets in the data directory.
pub struct Scheduling {
    store: Arc<RelayStore>,
    deployments_dir: PathBuf,
    max_restarts: u8,
    /// The coordinator, as the engine lease names its holder: every scheduler transaction
    /// begins only while it holds the lease.
    holder: String,
}

impl Scheduling {
    /// The scheduler's view of `store`, whose revisions keep their files under
    /// `deployments_dir`; a job is restarted at most `max_restarts` times per generation; it
    /// writes only while coordinator `holder` holds the engine lease.
    pub fn new(store: Arc<RelayStore>, deployments_dir: PathBuf, max_restarts: u8, holder: String) -> Scheduling {
        Scheduling { store, deployments_dir, max_restarts, holder }
    }
}

fn failure(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StoreFailure {
    StoreFailure(e.into())
}

fn store_failure(e: StoreError) -> StoreFailure {
    failure(e)
}

fn ms(n: i64) -> Millis {
    u64::try_from(n).unwrap_or(0)
}

fn int(n: Millis) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl ExecutionStore for Scheduling {
    fn begin(&self) -> Result<Box<dyn ExecutionTx + '_>, StoreFailure> {
        // A coordinator that lost the lease (stalled past it, or cut off from the database)
        // decides nothing more: the one holding it now launches the jobs.
        let tx = self.store.begin_write_as_leader(&self.holder).map_err(store_failure)?;
        Ok(Box::new(SchedulingTx {
            tx,
            keys: self.store.keys(),
            deployments_dir: &self.deployments_dir,
            max_restarts: self.max_restarts,
        }))
    }
}

struct SchedulingTx<'a> {
    tx: Box<dyn Transaction + 'a>,
    /// The keys the revisions' secrets are sealed with.
    keys: &'a svc_keys::Keyring,
    deployments_dir: &'a Path,
    max_restarts: u8,
}

/// The revision whose policy is the deployment's active version: a successor's while one is
/// deployed and has not failed, else the one it serves.
fn active_revision(tx: &mut dyn Transaction, d: &Deployment) -> Result<u32, StoreError> {
    Ok(match tx.successor(&d.id)? {
        Some(s) if s.state != SuccessorState::Failed && s.revision > d.revision => s.revision,
        _ => d.revision,
    })
}

/// Why nothing of the deployment may run now, if so.
pub fn halt_of(d: &Deployment) -> Option<Reason> {
    match d.state {
        DeploymentState::PendingFunding => {
            Some(Reason::new("unfunded", "the deployment's funds do not cover a period; fund a quote"))
        }
        DeploymentState::Stopped => Some(Reason::new("deployment_stopped", "the deployment was stopped")),
        DeploymentState::Failed => Some(Reason::new("deployment_failed", d.state_reason.clone())),
        DeploymentState::Provisioning
        | DeploymentState::Validating
        | DeploymentState::Live
        | DeploymentState::Degraded => None,
    }
}

/// An ingress policy's plan, as the relay runs it: the policy's slots, windows, renewal and
/// update rules, with the relay's recovery and without a spend authority of its own.
///
/// - **Recovery.** A web job that ends (whatever its status: a web server that exits has
///   stopped serving) is restarted on its processor, up to `max_restarts` times, each after
///   a backoff; a V5 policy has no recovery field, and SPEC's V5 default (wait until the
///   window's end) would leave a route dark until then.
/// - **Window.** [`INGRESS_WINDOW_MS`]: the funding, not the schedule, bounds a web job.
/// - **Update.** A redeploy is the update, and it takes over once its job serves: `immediate`
///   with `stop_when_successor_ready`, whatever the manifest's `lifecycle.update` says (its
///   `next_renewal` would hold a redeploy back until a renewal a route never has).
/// - **Spend.** The deployment's funded periods are what it may spend (the ledger and its
///   ceiling); a launch costs nothing more.
/// - **Phasing.** A route's replicas start together: phases spread over [`INGRESS_WINDOW_MS`]
///   would start the second replica decades later (review finding).
pub fn ingress_plan(mut plan: Plan, max_restarts: u8) -> Plan {
    plan.phasing = svc_execution::plan::Phasing::Simultaneous;
    plan.recovery = Recovery {
        runtime_failure: RuntimeFailure::ReplaceAfterFailure {
            contact_loss_after_ms: CONTACT_LOSS_MS,
            restart_grace_ms: RESTART_GRACE_MS,
            max_same_job_restarts: max_restarts,
            max_fresh_replacements: 0,
        },
        exit_is_failure: true,
        ..plan.recovery
    };
    plan.spend = SpendAuthority::default();
    plan.window_ms = INGRESS_WINDOW_MS;
    plan.update = Update { timing: UpdateTiming::Immediate, existing_jobs: ExistingJobs::StopWhenSuccessorReady };
    plan
}

impl SchedulingTx<'_> {
    fn deployment(&mut self, app: AppKey) -> Result<Deployment, StoreFailure> {
        self.tx
            .deployment_by_key(app)
            .map_err(store_failure)?
            .ok_or_else(|| failure(format!("no deployment has key {app}")))
    }
}

/// Why a revision's secrets cannot be read.
#[derive(Debug, thiserror::Error)]
enum SecretsUnreadable {
    /// The store's record of them.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The `secrets.json` of a revision deployed before the store recorded them.
    #[error(transparent)]
    File(#[from] files::SecretsError),
}

/// The values of a revision's secrets, by name: as the store recorded them with the revision,
/// or, for a revision deployed before it did, from its `secrets.json` under `deployments`.
fn secret_values(
    keys: &svc_keys::Keyring,
    tx: &mut dyn Transaction,
    deployments: &Path,
    id: &str,
    revision: u32,
) -> Result<BTreeMap<String, Vec<u8>>, SecretsUnreadable> {
    match super::store::revision_secrets(keys, tx, id, revision)? {
        Some(values) => Ok(values.into_iter().map(|(name, value)| (name, value.into_bytes())).collect()),
        None => Ok(files::secret_values(&files::revision_dir(deployments, id, revision))?),
    }
}

impl ExecutionTx for SchedulingTx<'_> {
    fn due(&mut self, now: Millis, limit: usize) -> Result<Vec<AppKey>, StoreFailure> {
        self.tx.due_deployments(int(now), u32::try_from(limit).unwrap_or(u32::MAX)).map_err(store_failure)
    }

    fn next_due(&mut self) -> Result<Option<Millis>, StoreFailure> {
        Ok(self.tx.next_due_deployment().map_err(store_failure)?.map(ms))
    }

    fn app(&mut self, app: AppKey) -> Result<Option<AppView>, StoreFailure> {
        let tx = self.tx.as_mut();
        let Some(d) = tx.deployment_by_key(app).map_err(store_failure)? else { return Ok(None) };
        let revision = active_revision(tx, &d).map_err(store_failure)?;
        let mut halt = halt_of(&d);
        let plan = match tx.policy(&d.id, revision).map_err(store_failure)? {
            Some(policy) => match manifest_core::plan::plan(policy.published()) {
                Ok(plan) => Some(ingress_plan(plan, self.max_restarts)),
                Err(e) => {
                    // One damaged policy halts its deployment, not the scheduler.
                    halt.get_or_insert(Reason::new("policy_unreadable", format!("revision {revision}: {e}")));
                    None
                }
            },
            None => {
                // A revision deployed before revisions published a policy publishes one at
                // its launch (the engine's); until then nothing of it is decided.
                halt.get_or_insert(Reason::new("unpublished", format!("revision {revision} has no policy yet")));
                None
            }
        };
        // What a launch will read, read now: a failure inside the decision's transaction would
        // abort the step of every deployment, so one that cannot be launched is halted here.
        if halt.is_none()
            && let Err(e) = secret_values(self.keys, tx, self.deployments_dir, &d.id, revision)
        {
            tracing::warn!("svc relay: {} revision {revision}: {e}", d.id);
            halt = Some(Reason::new(
                "secrets_unreadable",
                "the revision's secrets cannot be read (the coordinator's log has why); deploy the project again",
            ));
        }
        let (activated_version, activated_at) = tx.activated(app).map_err(store_failure)?;
        let executions = tx.scheduled(app, u64::from(revision)).map_err(store_failure)?;
        Ok(Some(AppView {
            key: app,
            uid: d.id,
            status: AppStatus::Active,
            halt,
            settled: false,
            rearmed_version: 0,
            plan,
            activated_version,
            activated_at: ms(activated_at),
            executions,
            charges: Vec::new(),
        }))
    }

    fn find(&mut self, execution_id: &str) -> Result<Option<(AppKey, Execution)>, StoreFailure> {
        self.tx.scheduled_by_id(execution_id).map_err(store_failure)
    }

    fn live(&mut self) -> Result<Vec<(AppKey, Execution)>, StoreFailure> {
        self.tx.live_scheduled().map_err(store_failure)
    }

    fn workload(&mut self, app: AppKey, policy_version: u64) -> Result<Workload, StoreFailure> {
        let d = self.deployment(app)?;
        let revision = u32::try_from(policy_version).map_err(|_| failure(format!("no revision {policy_version}")))?;
        let policy = self
            .tx
            .policy(&d.id, revision)
            .map_err(store_failure)?
            .ok_or_else(|| failure(format!("revision {revision} of {} has no policy", d.id)))?;
        let secrets =
            secret_values(self.keys, self.tx.as_mut(), self.deployments_dir, &d.id, revision).map_err(failure)?;
        manifest_core::plan::workload(policy.published(), &secrets).map_err(failure)
    }

    fn insert(&mut self, app: AppKey, execution: &Execution) -> Result<ExecKey, StoreFailure> {
        self.tx.insert_scheduled(app, execution).map_err(store_failure)
    }

    fn transition(&mut self, _app: AppKey, execution: &Execution, _from: ExecState) -> Result<(), StoreFailure> {
        self.tx.update_scheduled(execution).map_err(store_failure)
    }

    fn refund(&mut self, _app: AppKey, _execution: &Execution, _at: Millis) -> Result<(), StoreFailure> {
        // A launch charges nothing (funded periods are the spend): nothing to refund.
        Ok(())
    }

    fn schedule(&mut self, app: AppKey, next_at: Option<Millis>, blocked: Option<&Reason>) -> Result<(), StoreFailure> {
        self.tx.set_schedule(app, next_at.map(int), blocked).map_err(store_failure)
    }

    fn activate(&mut self, app: AppKey, version: u64, at: Millis) -> Result<(), StoreFailure> {
        self.tx.set_activated(app, version, int(at)).map_err(store_failure)
    }

    fn settle(&mut self, _app: AppKey, _at: Millis) -> Result<(), StoreFailure> {
        // An ingress policy is `continuous` (a `once` manifest is refused at deploy): a web job
        // never settles.
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<(), StoreFailure> {
        self.tx.commit().map_err(store_failure)
    }
}
