//! The relay's use cases, as plain functions over the store and the engine: deploy (a first
//! deploy, a redeploy, the same project again), quote and fund, stop, refund, customer
//! hostnames, pins, a gateway operator's claim, the signed catalog. Each returns what happened
//! or an [`OperationError`]; the API (`http`) and the console (`console`) only translate
//! requests, answers and errors, and the engine asks here for the catalog it hands the agents.
//!
//! They read and write the store, which waits for the disk: callers run them off the async
//! runtime (the one async operation, [`verify_hostname_of`], does so itself).

mod catalog;
mod deploy;
mod error;
mod funds;
mod hostnames;
mod pins;

pub(super) use catalog::signed_catalog;
pub(super) use deploy::{Bundle, Deploy, Deployed, deploy_now};
pub(super) use error::{BundleProblem, Internal, Missing, OperationError, Oversize};
pub(super) use funds::{fund, quote_and_fund, quote_for, refund};
pub(super) use hostnames::{add_hostname_to, remove_hostname_of, verify_hostname_of};
pub(super) use pins::{pin, pins_of, unpin};

use super::Engine;
use super::api::ClaimResponse;
use super::model::Deployment;
use super::store::{Caller, now_ms};

/// The caller's deployment that `project` names (a project's newest deployment, or a
/// `dep_...` ID), with its URLs.
pub(super) fn deployment_of(engine: &Engine, caller: &Caller, project: &str) -> Result<Deployment, OperationError> {
    engine
        .store()
        .deployment_of(&caller.org_id, project)?
        .map(|d| engine.with_url(d))
        .ok_or_else(|| OperationError::NotFound(Missing::deployment(project)))
}

/// Stops deployment `d` for `reason` (which names the caller's token): the timeline names
/// the token by its name, the log keeps its ID. The deployment as it is now.
pub(super) fn stop(
    engine: &Engine,
    caller: &Caller,
    d: &Deployment,
    reason: &str,
) -> Result<Deployment, OperationError> {
    let stopped = engine.store().stop(&d.id, reason, &engine.config().terms, now_ms())?;
    tracing::info!(deployment = %d.id, token = %caller.token_id, name = %caller.token_name, "deployment stopped");
    engine.wake();
    Ok(stopped)
}

/// Claims the operator's claimable rewards, once.
pub(super) fn claim_rewards(engine: &Engine, caller: &Caller) -> Result<ClaimResponse, OperationError> {
    let now = now_ms();
    let (claim_id, amount_micros) = engine.store().claim(&caller.org_name, now)?;
    let rewards = engine.store().rewards(&caller.org_name, now)?;
    Ok(ClaimResponse { claim_id, amount_micros, rewards })
}
