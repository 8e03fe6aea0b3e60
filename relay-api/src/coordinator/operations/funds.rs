//! A deployment's funds: a quote, funding one, refunding a session.

use super::{OperationError, deployment_of};
use crate::coordinator::Engine;
use crate::coordinator::model::{Deployment, LedgerEntry, Quote};
use crate::coordinator::store::{Caller, now_ms};

/// A new quote of `periods` for `d` (the project's `spend.fundPeriods` when absent): refused
/// for a stopped deployment and outside 1-10,000 periods.
pub(in crate::coordinator) fn quote_for(
    engine: &Engine,
    d: &Deployment,
    periods: Option<u64>,
) -> Result<Quote, OperationError> {
    if d.state.is_terminal() {
        return Err(OperationError::DeploymentNotFundable);
    }
    let stored = engine.store().project_json(&d.id)?;
    let default_periods = crate::project::read(&stored).map_or(1, |p| u64::from(p.spend.fund_periods));
    let periods = periods.unwrap_or(default_periods);
    if !(1..=10_000).contains(&periods) {
        return Err(OperationError::Periods);
    }
    Ok(engine.quote(d, periods)?)
}

/// Funds quote `quote_id` of `d`.
pub(in crate::coordinator) fn fund(
    engine: &Engine,
    d: &Deployment,
    quote_id: &str,
) -> Result<LedgerEntry, OperationError> {
    let hostnames = engine.quoted_hostnames(d)?;
    let entry = engine.store().fund(&d.id, quote_id, &hostnames, now_ms())?;
    engine.wake();
    Ok(entry)
}

/// Quotes `periods` and funds that quote at once, under the same rules as the API's two calls
/// (`svc ingress fund`): the console's Fund form.
pub(in crate::coordinator) fn quote_and_fund(
    engine: &Engine,
    d: &Deployment,
    periods: Option<u64>,
) -> Result<LedgerEntry, OperationError> {
    let quote = quote_for(engine, d, periods)?;
    fund(engine, d, &quote.id)
}

/// The deployment whose session `session` is: with a project's name, whichever of the
/// caller's deployments of the project holds it (a session of an older deployment is still
/// the project's); with a deployment's ID, that deployment. A session no deployment of the
/// project holds is looked for in the newest, which answers it not found.
pub(in crate::coordinator) fn session_owner(
    engine: &Engine,
    caller: &Caller,
    project: &str,
    session: &str,
) -> Result<String, OperationError> {
    let d = deployment_of(engine, caller, project)?;
    if project.starts_with("dep_") {
        return Ok(d.id);
    }
    Ok(engine.store().session_deployment(&caller.org_id, &d.project, session)?.unwrap_or(d.id))
}

/// Refunds what session `session` of the caller's `project` has refundable.
pub(in crate::coordinator) fn refund(
    engine: &Engine,
    caller: &Caller,
    project: &str,
    session: &str,
) -> Result<LedgerEntry, OperationError> {
    let id = session_owner(engine, caller, project, session)?;
    let entry = engine.store().refund(&id, session, now_ms())?;
    engine.wake();
    Ok(entry)
}
