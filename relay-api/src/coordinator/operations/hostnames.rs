//! A deployment's customer hostnames: add one (with the DNS records it needs), check its DNS
//! now, remove it.

use std::sync::Arc;

use super::{Internal, Missing, OperationError, deployment_of};
use crate::coordinator::Engine;
use crate::coordinator::api::HostnameResponse;
use crate::coordinator::model::{CustomerHostname, Deployment, HostnameState};
use crate::coordinator::store::{Caller, random_hex};
use crate::hint::DnsRecord;

/// The records a customer hostname needs.
fn records(d: &Deployment, hostname: &str, token: &str) -> Vec<DnsRecord> {
    crate::dns::required_records(hostname, &d.canonical_hostname, token).to_vec()
}

/// The deployment's customer hostname `hostname`, unless it was removed (404).
fn live_hostname(engine: &Engine, d: &Deployment, hostname: &str) -> Result<CustomerHostname, OperationError> {
    engine
        .store()
        .hostname(&d.id, hostname)?
        .filter(|h| h.state != HostnameState::Removed)
        .ok_or_else(|| OperationError::NotFound(Missing::Hostname(hostname.to_owned())))
}

/// Adds a customer hostname to the caller's deployment `project`.
pub(in crate::coordinator) fn add_hostname_to(
    engine: &Engine,
    caller: &Caller,
    project: &str,
    hostname: &str,
) -> Result<HostnameResponse, OperationError> {
    let d = deployment_of(engine, caller, project)?;
    if d.state.is_terminal() {
        return Err(OperationError::DeploymentStopped);
    }
    let hostname = crate::dns::customer_hostname(hostname.trim()).map_err(OperationError::InvalidHostname)?;
    if !engine.issues_customer_certificates() {
        return Err(OperationError::HostnameNeedsAcme);
    }
    let h = engine.store().add_hostname(&d.id, &hostname, &random_hex(16)?)?;
    let records = records(&d, &h.hostname, &h.token);
    Ok(HostnameResponse { hostname: h, records })
}

/// Checks a customer hostname's DNS now and answers what it found. Its store work runs off
/// the async runtime.
pub(in crate::coordinator) async fn verify_hostname_of(
    engine: Arc<Engine>,
    caller: Caller,
    project: String,
    hostname: String,
) -> Result<HostnameResponse, OperationError> {
    let reader = Arc::clone(&engine);
    let d = blocking(move || deployment_of(&reader, &caller, &project)).await?;
    engine.check_hostname(&d, &hostname).await?;
    blocking(move || {
        let h = live_hostname(&engine, &d, &hostname)?;
        let records = records(&d, &h.hostname, &h.token);
        Ok(HostnameResponse { hostname: h, records })
    })
    .await
}

/// Removes a customer hostname from the caller's deployment `project`.
pub(in crate::coordinator) fn remove_hostname_of(
    engine: &Engine,
    caller: &Caller,
    project: &str,
    hostname: &str,
) -> Result<HostnameResponse, OperationError> {
    let d = deployment_of(engine, caller, project)?;
    let h = live_hostname(engine, &d, hostname)?;
    engine.store().set_hostname(&d.id, hostname, HostnameState::Removed, &[])?;
    engine.wake();
    let records = records(&d, &h.hostname, &h.token);
    let h = engine.store().hostname(&d.id, hostname)?.unwrap_or(h);
    Ok(HostnameResponse { hostname: h, records })
}

/// Runs store work on a blocking thread (the async runtime's threads stay free).
async fn blocking<R: Send + 'static>(
    work: impl FnOnce() -> Result<R, OperationError> + Send + 'static,
) -> Result<R, OperationError> {
    tokio::task::spawn_blocking(work).await.map_err(Internal::Unfinished)?
}
