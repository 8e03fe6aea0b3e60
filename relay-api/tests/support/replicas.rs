//! The setup the tests of routes of two jobs share (`engine_replicas.rs`,
//! `executions_projection.rs`), over [`crate::world`]: `shop` deployed with two jobs, funded
//! and live, and the fake market's name for each of its jobs.

use relay_api::coordinator::model::Deployment;
use relay_api::coordinator::state::DeploymentState;

use crate::world::{PROJECT, World};

/// Deploys `shop` ([`PROJECT`]) with two jobs, funded, and ticks `w`'s engine until it is
/// live (at most 10 ticks).
pub(crate) async fn live_two_jobs(w: &World) -> Deployment {
    let d = w.funded_jobs("shop", PROJECT, &[], 2);
    let live = w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await;
    assert!(live, "{:?}", w.deployment(&d.id));
    d
}

/// The market's name of `d`'s job in `slot` of `revision` (`<id>.r1`, then `<id>.r1.1`).
pub(crate) fn job(d: &Deployment, revision: u32, slot: u16) -> String {
    match slot {
        0 => format!("{}.r{revision}", d.id),
        _ => format!("{}.r{revision}.{slot}", d.id),
    }
}
