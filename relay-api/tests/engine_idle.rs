//! Issue 44, point 5: idle costs nothing. The engine's agenda steps a settled live deployment
//! only at its due times (its next validation, the end of its period) or on an event, and
//! costs no store write between them. Driven as `Engine::run` drives it, with
//! `Engine::tick_due`, one look at a time (the store counts its transactions).

#[path = "support/world.rs"]
mod world;

use relay_api::coordinator::state::DeploymentState;
use relay_api::coordinator::store::now_ms;
use world::*;

/// The 250 ms looks `Engine::run` makes in five seconds.
const LOOKS_IN_FIVE_SECONDS: u64 = 20;

#[tokio::test]
async fn an_idle_live_deployment_costs_no_store_write_between_its_due_times() {
    let w = world(FakeProbe::default());
    let ids: Vec<String> = (0..10).map(|i| w.funded(&format!("shop{i}")).id).collect();
    let all_live = |w: &World| ids.iter().all(|id| w.deployment(id).state == DeploymentState::Live);
    assert!(w.tick_until(20, all_live).await, "every one live");
    // The first look steps every deployment and places each on the agenda: settled, next due
    // at its validation (the periods run for an hour).
    w.engine.tick_due().await;
    for id in &ids {
        assert!(w.engine.settled_until(id).is_some(), "{id} settled: {:?}", w.deployment(id));
    }
    let (reads, writes) = w.store.transactions();
    for _ in 0..LOOKS_IN_FIVE_SECONDS {
        w.engine.tick_due().await;
    }
    let (reads_after, writes_after) = w.store.transactions();
    assert_eq!(writes_after - writes, 0, "no write between the due times");
    // One read per look (the engine sequence), whatever the number of deployments: none of
    // them is read, stepped or routed again.
    assert!(
        reads_after - reads <= LOOKS_IN_FIVE_SECONDS,
        "{} reads in {LOOKS_IN_FIVE_SECONDS} looks at 10 settled deployments",
        reads_after - reads
    );
    // Even a look at every deployment (a full tick) writes nothing while their periods run.
    let (_, writes) = w.store.transactions();
    for _ in 0..3 {
        w.engine.tick().await;
    }
    assert_eq!(w.store.transactions().1 - writes, 0, "a full tick advances no period that runs");
    assert!(all_live(&w));
}

#[tokio::test]
async fn a_job_exit_is_stepped_at_once_without_a_tick() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    w.engine.tick_due().await;
    assert!(w.engine.settled_until(&d.id).is_some(), "settled, due in 30 s");
    w.market.end(&format!("{}.r1", d.id), 3);
    // The next look (not a full tick, not its due time) steps it: the job's exit is an event.
    w.engine.tick_due().await;
    let now = w.deployment(&d.id);
    assert_eq!(now.state, DeploymentState::Provisioning, "{now:?}");
    assert!(now.state_reason.contains("exited with status 3"), "{}", now.state_reason);
    assert_eq!(w.engine.settled_until(&d.id), None, "in motion again");
}

#[tokio::test]
async fn a_period_end_is_stepped_at_next_period_at() {
    let w = world(FakeProbe::default());
    let d = w.funded_periods("shop", PROJECT, &[], &|id| published(PROJECT, id, 1), 1);
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    w.engine.tick_due().await;
    let live = w.deployment(&d.id);
    assert_eq!(live.periods_spent, 1, "{live:?}");
    let end = live.next_period_at.expect("the first period's end");
    // Due at the period's end, not at its validation 30 s later.
    let due = w.engine.settled_until(&d.id).expect("settled");
    let left = std::time::Duration::from_millis(u64::try_from(end - now_ms()).unwrap_or(0));
    let at_end = std::time::Instant::now() + left;
    assert!(due <= at_end + std::time::Duration::from_millis(50), "due {due:?}, the period ends at {at_end:?}");
    // Once the period has ended, the next look starts the second one (and writes only then).
    while now_ms() <= end {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (_, writes) = w.store.transactions();
    w.engine.tick_due().await;
    let next = w.deployment(&d.id);
    assert_eq!(next.periods_spent, 2, "the second period started at the first one's end: {next:?}");
    assert!(w.store.transactions().1 > writes);
    assert_eq!(next.state, DeploymentState::Live);
}

#[tokio::test]
async fn a_stop_on_another_coordinator_reaches_the_leader_through_the_engine_sequence() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    w.engine.tick_due().await;
    assert!(w.engine.settled_until(&d.id).is_some());
    let served = |w: &World| w.gateway.route_rows().into_iter().any(|r| r.route_id == d.route_id);
    assert!(served(&w));
    // Another coordinator on the same database answers a stop: its operation commits, then its
    // engine moves the sequence on (as `Engine::wake` has it done).
    w.store.stop(&d.id, "stopped by a test", &w.engine.config().terms, now_ms()).expect("stopped");
    w.store.bump_engine_seq().expect("the sequence moved on");
    w.engine.tick_due().await;
    assert!(!served(&w), "the leader stepped every deployment and dropped the route");
}
