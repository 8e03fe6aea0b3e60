//! What init warns of: a coordinator that routes its deployments through another operator's
//! hosts than this one's.

use crate::check::network::{operator_fix, operator_mismatch};
use crate::coordinator::CoordinatorClient;

/// A warning when the coordinator routes its deployments through another operator's hosts
/// than `operator` (this host's): its route feed would assign this host nothing. Nothing
/// when it cannot tell (no operator name yet, no answer, a coordinator that does not say):
/// `check`'s `coordinator.operator` says so.
pub async fn operator_warnings(client: &CoordinatorClient, operator: Option<&str>) -> Vec<String> {
    let Some(name) = operator else { return Vec::new() };
    let Ok(health) = client.health().await else { return Vec::new() };
    match health.gateway_operator.as_deref() {
        Some(routed) if routed != name => {
            vec![format!("{}; fix: {}", operator_mismatch(name, routed), operator_fix(name, routed))]
        }
        _ => Vec::new(),
    }
}
