//! The coordinator's engine and relay API in process: a real store (SQLite in a scratch
//! directory), a fake processor market whose jobs end when the test says, a fake probe whose
//! verdicts the test scripts, and a clock the test moves (the scheduler's restart backoffs).
//! Each test drives the engine with `Engine::tick`, one look at a time, and calls the API's
//! router directly: no process, no network, no sleep to wait for something to happen.

#[path = "support/world.rs"]
mod world;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use relay_api::coordinator::model::{Deployment, SuccessorState};
use relay_api::coordinator::state::DeploymentState;
use relay_api::coordinator::store::now_ms;
use relay_api::coordinator::{RelayStore, STEP_CONCURRENCY};
use svc_execution::market::Market as _;
use world::*;

#[tokio::test]
async fn a_funded_deployment_is_launched_validated_and_live() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    assert!(
        w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await,
        "{:?}",
        w.deployment(&d.id)
    );
    assert_eq!(w.market.running(), [format!("{}.r1", d.id)]);
    let path: Vec<DeploymentState> = w.store.transitions(&d.id).expect("transitions").iter().map(|t| t.to).collect();
    use DeploymentState::*;
    assert_eq!(path, [PendingFunding, Provisioning, Validating, Live]);
    assert_eq!(w.probe.calls.lock().expect("lock")[0], ("rt_shop".to_owned(), false), "through the public path");

    // A route that stops passing is degraded (validations are due every interval: force one).
    w.probe.failing.lock().expect("lock").push("rt_shop".into());
    w.engine.due_now(&w.deployment(&d.id));
    assert!(w.tick_until(3, |w| w.deployment(&d.id).state == Degraded).await, "{:?}", w.deployment(&d.id));
}

#[tokio::test]
async fn a_successor_takes_over_once_validated_and_a_failed_one_leaves_the_old_serving() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);

    let successor = |revision: u32| shop_successor(&d.id, revision, published(PROJECT, &d.id, revision));
    w.store.put_successor(&successor(2)).expect("revision 2");
    let switched = w.tick_until(10, |w| w.deployment(&d.id).revision == 2).await;
    assert!(switched, "{:?}", w.store.successor(&d.id));
    let now = w.deployment(&d.id);
    assert_eq!(
        (now.state, now.route_id.as_str(), now.project_digest.as_str()),
        (DeploymentState::Live, "rt_shop_r2", "sha256:r2")
    );
    assert!(
        w.probe.calls.lock().expect("lock").contains(&("rt_shop_r2".to_owned(), true)),
        "validated on its standby route before the switch"
    );
    // The predecessor drains (its connections may still be open): it runs beside the new one.
    assert_eq!(w.market.running(), [format!("{}.r1", d.id), format!("{}.r2", d.id)]);
    assert_eq!(w.store.transitions(&d.id).expect("transitions").len(), 4, "never left live");

    // Revision 3's app ends before it is validated: it fails, revision 2 serves on.
    w.probe.failing.lock().expect("lock").push("rt_shop_r3".into());
    w.store.put_successor(&successor(3)).expect("revision 3");
    assert!(w.tick_until(3, |w| w.market.running().contains(&format!("{}.r3", d.id))).await, "launched");
    w.market.end(&format!("{}.r3", d.id), 3);
    let failed = w
        .tick_until(3, |w| w.store.successor(&d.id).ok().flatten().is_some_and(|s| s.state == SuccessorState::Failed))
        .await;
    assert!(failed, "{:?}", w.store.successor(&d.id));
    let s = w.store.successor(&d.id).expect("read").expect("kept for status");
    assert!(s.reason.contains("exited with status 3 before it was validated"), "{}", s.reason);
    let now = w.deployment(&d.id);
    assert_eq!((now.revision, now.state), (2, DeploymentState::Live));
    let hints = w.engine.hints(&now).expect("hints");
    assert!(hints.iter().any(|h| h.code == "redeploy_failed"), "{hints:?}");
    assert!(!w.market.running().contains(&format!("{}.r3", d.id)), "its job is gone");

    // Each launch is an execution: its generation the revision, with why it is where it is.
    let executions = w.store.executions(&d.id, None, 100).expect("executions");
    let seen: Vec<(String, &str, Option<&str>)> = executions
        .iter()
        .rev()
        .map(|(_, e)| (e.execution_id.clone(), e.state.as_str(), e.reason.as_ref().map(|r| r.code.as_str())))
        .collect();
    assert_eq!(
        seen,
        [
            (format!("{}/0/1/1", d.id), "stopping", Some("superseded")),
            (format!("{}/0/2/1", d.id), "ready", None),
            (format!("{}/0/3/1", d.id), "failed", Some("exited")),
        ]
    );
    let versions: Vec<u32> = executions.iter().rev().map(|(_, e)| e.policy_version).collect();
    assert_eq!(versions, [1, 2, 3], "each generation runs its revision's policy");
    let r3 = &executions[0].1;
    assert_eq!(r3.reason.as_ref().map(|r| r.message.as_str()), Some("it exited with status 3"));
    assert_eq!(r3.processor_id.as_deref(), Some("fake-1"));
    // The projection: revision 2 serves, revision 1 drains, so it is still rolling out.
    let projection =
        relay_api::coordinator::executions::build(&w.store, &now, None, None, None).expect("the projection");
    assert_eq!((projection.status.as_str(), projection.convergence.state.as_str()), ("active", "converging"));
    assert_eq!(projection.convergence.reason.as_ref().map(|r| r.code.as_str()), Some("rolling_out"));
    assert_eq!((projection.slots[0].generation, projection.slots[0].state.as_str()), (2, "ready"));
    assert_eq!(projection.recent.len(), 3);
    let page = relay_api::coordinator::executions::build(&w.store, &now, None, None, Some("2")).expect("a page of two");
    let cursor = page.next_cursor.clone().expect("an older page");
    // The slot and the rollout are the same whatever page is asked for (they were read from
    // the page: a page of one said `pending`, and `converged` while revision 1 drained).
    let one = relay_api::coordinator::executions::build(&w.store, &now, None, None, Some("1")).expect("a page of one");
    assert_eq!((&one.slots, &one.convergence), (&projection.slots, &projection.convergence));
    let older = relay_api::coordinator::executions::build(&w.store, &now, None, Some(&cursor), Some("2"))
        .expect("the older page");
    assert_eq!(older.recent.len(), 1);
    assert_eq!((&older.slots, &older.convergence), (&projection.slots, &projection.convergence));
    assert_eq!(older.recent[0].execution_id, format!("{}/0/1/1", d.id));
    assert!(older.next_cursor.is_none());
    for (cursor, limit) in [(Some("x"), None), (Some("-1"), None), (None, Some("0")), (None, Some("101"))] {
        let refused = relay_api::coordinator::executions::build(&w.store, &now, None, cursor, limit);
        assert!(refused.is_err(), "{cursor:?} {limit:?}");
    }
}

#[tokio::test]
async fn an_ended_job_is_restarted_after_its_backoff_as_the_same_execution() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    w.market.end(&format!("{}.r1", d.id), 3);
    w.engine.tick().await;
    let now = w.deployment(&d.id);
    assert_eq!(now.state, DeploymentState::Provisioning, "{now:?}");
    assert!(
        now.state_reason.contains("it exited with status 3; restarting the job in 1 s (restart 1 of 5)"),
        "{}",
        now.state_reason
    );
    // Not before its backoff.
    w.engine.tick().await;
    assert!(w.market.0.lock().expect("lock").restarts.is_empty());
    w.clock.advance(1_000);
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    assert_eq!(w.market.0.lock().expect("lock").restarts, [format!("{}.r1", d.id)], "the same job, restarted");
    // Its validation made it ready: the scheduler records that at its next step.
    w.engine.tick().await;
    let executions = w.store.executions(&d.id, None, 10).expect("read");
    assert_eq!(executions.len(), 1, "a restart is the same execution: {executions:?}");
    assert_eq!((executions[0].1.state.as_str(), executions[0].1.restarts), ("ready", 1));
    // Ready again, it reads as restarted (and why), not as killed.
    let reason = executions[0].1.reason.clone().expect("a reason");
    assert_eq!(reason.code, "restarted");
    assert!(reason.message.contains("after: it exited with status 3"), "{}", reason.message);
    // The job's window reaches where the funds do: the end of the period under way, and the
    // funded one after it. A relaunch clears the deployment's period clock (`provisioning`),
    // not the period: the window said `now` after a coordinator restart.
    let sessions = w.store.sessions(&d.id).expect("sessions");
    let running_end = sessions.iter().find_map(|s| s.ends_at).expect("a period under way");
    let paid_until = running_end + 3_600_000;
    let window_end = |w: &World| {
        let d = w.deployment(&d.id);
        let projection = relay_api::coordinator::executions::build(&w.store, &d, None, None, None).expect("built");
        projection.slots[0].window_end.clone().expect("a window")
    };
    let expected = humantime::format_rfc3339_millis(
        std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(paid_until).expect("positive")),
    )
    .to_string();
    assert_eq!(window_end(&w), expected);
    let projection =
        relay_api::coordinator::executions::build(&w.store, &w.deployment(&d.id), None, None, None).expect("built");
    assert_eq!(projection.slots[0].restarts, 1);
}

/// Found by the demo's restart test in CI (a 502 from a deployment saying live): the
/// scheduler restarted a live deployment's job between two engine ticks, so the engine never
/// saw it end and kept the deployment live while the new processes did not listen yet.
#[tokio::test]
async fn a_job_restarted_between_two_ticks_is_validated_again_before_it_says_live() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    let live = |w: &World| w.deployment(&d.id).state == DeploymentState::Live;
    assert!(w.tick_until(10, live).await);
    w.market.end(&format!("{}.r1", d.id), 3);
    // The scheduler alone: it records the ending, then restarts the job after its backoff.
    w.engine.schedule();
    w.clock.advance(1_000);
    w.engine.schedule();
    assert_eq!(w.market.0.lock().expect("lock").restarts, [format!("{}.r1", d.id)], "restarted");
    assert_eq!(w.deployment(&d.id).state, DeploymentState::Live, "no deployment was stepped yet");
    // The new processes do not answer yet.
    w.probe.failing.lock().expect("lock").push(d.route_id.clone());
    w.engine.tick().await;
    let now = w.deployment(&d.id);
    // Not live on a job that did not validate; validating, so its route stays routed.
    assert_eq!(now.state, DeploymentState::Validating, "not live on a job that did not validate: {now:?}");
    assert!(
        now.state_reason.contains("it exited with status 3; the job restarted (restart 1 of 5)"),
        "how it ended and that it restarted: {}",
        now.state_reason
    );
    for _ in 0..3 {
        w.engine.tick().await;
        assert!(!live(&w), "live before it validated: {:?}", w.deployment(&d.id));
    }
    // Once they answer, it is live again.
    w.probe.failing.lock().expect("lock").clear();
    assert!(w.tick_until(10, live).await, "{:?}", w.deployment(&d.id));
}

/// Issue 39, point 2: a job killed for its memory (the local pool's cgroup) is told as such in
/// the deployment's state and log, and restarted like any job that ended.
#[tokio::test]
async fn a_job_killed_for_its_memory_says_so_in_the_deployments_state_and_log() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    let live = |w: &World| w.deployment(&d.id).state == DeploymentState::Live;
    assert!(w.tick_until(10, live).await);
    w.market.end_out_of_memory(&format!("{}.r1", d.id));
    w.engine.tick().await;
    let now = w.deployment(&d.id);
    assert_eq!(now.state, DeploymentState::Provisioning, "{now:?}");
    let told = "the app was killed by signal 9: the job was over its memory (out_of_memory); restarting the job";
    assert!(now.state_reason.contains(told), "{}", now.state_reason);
    let log: Vec<String> = w.store.recent_logs(&d.id, 100).expect("logs").into_iter().map(|l| l.line).collect();
    assert!(log.iter().any(|line| line.contains("out_of_memory")), "{log:?}");
}

#[tokio::test]
async fn a_successor_of_a_deployment_that_serves_nothing_takes_over_at_once() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    w.store.transition(&d.id, DeploymentState::Provisioning, "test").expect("provisioning");
    w.store.put_successor(&shop_successor(&d.id, 2, published(PROJECT, &d.id, 2))).expect("revision 2");
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    assert_eq!(w.deployment(&d.id).revision, 2);
    let launches = w.market.0.lock().expect("lock").launches.clone();
    assert_eq!(launches, [format!("{}.r2", d.id)], "revision 1 was never launched only to be replaced");
    let standby = w.probe.calls.lock().expect("lock").iter().any(|(_, standby)| *standby);
    assert!(!standby, "nothing served, so no standby validation was needed");
}

/// Issue 16: "one slow probe stalls all". With probes taking `SLOW` each, a tick over many live
/// deployments takes about one probe's time, not one per deployment.
#[tokio::test(start_paused = true)]
async fn a_slow_probe_does_not_hold_the_other_deployments() {
    const SLOW: Duration = Duration::from_secs(2);
    let w = world(FakeProbe { delay: SLOW, ..FakeProbe::default() });
    // Fewer than STEP_CONCURRENCY: they may all run at once.
    const _: () = assert!(STEP_CONCURRENCY >= 4);
    let ids: Vec<String> = (0..4).map(|i| w.funded(&format!("p{i}")).id).collect();
    let all_live = |w: &World| ids.iter().all(|id| w.deployment(id).state == DeploymentState::Live);
    assert!(w.tick_until(10, all_live).await);
    for id in &ids {
        w.engine.due_now(&w.deployment(id));
    }
    let before = w.probe.calls.lock().expect("lock").len();
    let started = tokio::time::Instant::now();
    w.engine.tick().await;
    let took = started.elapsed();
    assert_eq!(w.probe.calls.lock().expect("lock").len() - before, ids.len(), "each was validated");
    assert!(took < SLOW * 2, "a tick of {} slow probes took {took:?}: they ran one after another", ids.len());
}

/// CI: PostgreSQL restarting in the middle of a tick failed one deployment's reads after the
/// list of deployments had been read, and the route table was set without that route: the
/// next validation found the gateway closing the handshakes of a live route. The table is
/// read in one transaction now; one that fails leaves the gateway's routes as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_failing_half_way_through_the_route_table_leaves_the_gateways_routes_alone() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    let served = |w: &World| w.gateway.route_rows().into_iter().map(|r| r.route_id).collect::<Vec<_>>();
    assert_eq!(served(&w), std::slice::from_ref(&d.route_id));

    // The deployments read, and the hostnames of each fail (as a connection ended mid-tick).
    let db = rusqlite::Connection::open(w.data.join(relay_api::coordinator::store::DATABASE_FILE)).expect("the store");
    db.execute_batch("ALTER TABLE hostnames RENAME TO hostnames_away").expect("renamed");
    assert!(w.store.active_deployments().is_ok_and(|a| a.len() == 1));
    assert!(w.engine.route_table(None).is_err(), "a table with a read failed is an error, not a shorter table");
    w.engine.tick().await;
    assert_eq!(served(&w), std::slice::from_ref(&d.route_id), "the live route stays on the gateway");

    db.execute_batch("ALTER TABLE hostnames_away RENAME TO hostnames").expect("renamed back");
    w.engine.tick().await;
    assert_eq!(served(&w), std::slice::from_ref(&d.route_id));
    assert_eq!(w.deployment(&d.id).state, DeploymentState::Live);
}

/// Issue 39, point 6: a step the database failed is said in the deployment's log as a
/// failure tried again; the database's own message (its tables, where it is) goes to the
/// coordinator's log only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_names_no_detail_of_the_database_in_the_customers_log() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    let db = rusqlite::Connection::open(w.data.join(relay_api::coordinator::store::DATABASE_FILE)).expect("the store");
    db.execute_batch("ALTER TABLE executions RENAME TO executions_away").expect("renamed");
    w.engine.tick().await;
    db.execute_batch("ALTER TABLE executions_away RENAME TO executions").expect("renamed back");
    let lines: Vec<String> = w.store.recent_logs(&d.id, 100).expect("logs").into_iter().map(|l| l.line).collect();
    assert!(
        lines.iter().any(|l| l.starts_with("engine: the relay's database failed this step; it is tried again")),
        "{lines:#?}"
    );
    let seen = lines.join("\n");
    assert!(!seen.contains("executions") && !seen.contains(w.data.to_string_lossy().as_ref()), "{seen}");
    w.engine.tick().await;
    assert_eq!(w.deployment(&d.id).state, DeploymentState::Live);
}

/// Review finding: the engine lease was renewed between ticks only, so a tick held up by a
/// route whose probe does not answer (8 s here, past the 5 s lease) handed the jobs to
/// another coordinator, every time. Renewed by a task of its own, the lease stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tick_held_up_by_a_slow_probe_keeps_the_engine_lease() {
    use relay_api::coordinator::store::postgres::{PoolSettings, PostgresBackend};
    let Some(cluster) = svc_pg_cluster::for_test("a_tick_held_up_keeps_the_lease") else { return };
    let db = svc_postgres::Database::parse(&cluster.svc_url(), None).expect("the cluster's URL");
    // Both coordinators read the one key file, as `--key-file` makes them.
    let keys = tempfile::tempdir().expect("a scratch directory");
    let key_file = keys.path().join("secrets.key");
    let open = || {
        let backend = Box::new(PostgresBackend::open(&db, PoolSettings::default()).expect("opens"));
        Arc::new(RelayStore::on(backend, &key_file).expect("its keys"))
    };
    let w = world_in(FakeProbe { delay: Duration::from_secs(8), ..FakeProbe::default() }, |_| {}, Some(open()));
    let d = w.funded("slow");
    let engine = tokio::spawn(w.engine.clone().run());
    // CI finding: the other coordinator asked first, 21 ms in, and took the free lease before
    // the engine's first try; the engine must hold it before the other one asks.
    let asked = std::time::Instant::now();
    while !w.engine.leading() {
        assert!(asked.elapsed() < Duration::from_secs(10), "the engine never took the free lease");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let other = open();
    let started = std::time::Instant::now();
    let mut validating = false;
    while started.elapsed() < Duration::from_secs(12) {
        let state = tokio::task::block_in_place(|| other.lead("other", 5_000, 9443)).expect("the lease");
        assert!(!state.held, "taken from the engine after {:?}", started.elapsed());
        assert_eq!(state.public_port, Some(8443), "the engine's gateway");
        validating |= w.deployment(&d.id).state == DeploymentState::Validating;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(validating, "the probe was held up in the meantime");
    assert!(w.engine.leading());
    engine.abort();
    let _ = engine.await;
}

// ------------------------------------------------------------------ the relay API in process

/// Calls the relay API in process: (status, JSON body).
async fn call(
    router: &axum::Router,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut request =
        axum::http::Request::builder().method(method).uri(path).header("content-type", "application/json");
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    send(router, request.body(axum::body::Body::from(bytes)).expect("a request")).await
}

fn deploy_body(server_js: &str, hostnames: &[&str]) -> serde_json::Value {
    use base64::Engine as _;
    let mut project: serde_json::Value = serde_json::from_str(PROJECT).expect("the project");
    project["hostnames"] = serde_json::json!(hostnames);
    serde_json::json!({
        "project": project,
        "bundle": {"server.js": base64::engine::general_purpose::STANDARD.encode(server_js)},
    })
}

/// The coordinator's API over `w`, and a customer token of `acme`.
fn customer_api(w: &World) -> (axum::Router, String) {
    let token = relay_api::coordinator::issue_token(
        &w.engine.config().data_dir,
        "acme",
        relay_api::coordinator::store::TokenRole::Customer,
        None,
    )
    .expect("a token")
    .plaintext;
    (relay_api::coordinator::api_router(w.engine.clone()), token)
}

#[tokio::test]
async fn the_api_deploys_once_ships_a_changed_project_as_a_revision_and_refuses_changed_hostnames() {
    let w = world(FakeProbe::default());
    let (api, token) = customer_api(&w);
    let deployments = "/api/ingress/deployments";

    let (status, body) = call(&api, "POST", deployments, None, Some(deploy_body("v1", &[]))).await;
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("unauthenticated")), "{body}");

    let (status, first) = call(&api, "POST", deployments, Some(&token), Some(deploy_body("v1", &[]))).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!((first["existing"].as_bool(), first["deployment"]["revision"].as_u64()), (Some(false), Some(1)));
    let id = first["deployment"]["id"].as_str().expect("an id").to_owned();

    let (status, again) = call(&api, "POST", deployments, Some(&token), Some(deploy_body("v1", &[]))).await;
    assert_eq!((status, again["existing"].as_bool()), (200, Some(true)), "the same project: {again}");
    assert!(again.get("successor").is_none(), "{again}");

    let (status, changed) = call(&api, "POST", deployments, Some(&token), Some(deploy_body("v2", &[]))).await;
    assert_eq!(status, 202, "an edited app file is a new revision: {changed}");
    assert_eq!(
        (changed["deployment"]["id"].as_str(), changed["successor"]["revision"].as_u64()),
        (Some(id.as_str()), Some(2))
    );
    assert_ne!(changed["successor"]["projectDigest"], first["deployment"]["projectDigest"]);

    let (status, refused) =
        call(&api, "POST", deployments, Some(&token), Some(deploy_body("v3", &["shop.example.com"]))).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (409, Some("hostnames_changed")), "{refused}");
    assert!(
        refused["error"]["message"].as_str().is_some_and(|m| m.contains("svc ingress hostname add shop.example.com"))
    );
    assert_eq!(w.store.successor(&id).expect("read").map(|s| s.revision), Some(2), "a refused deploy changes nothing");

    // Unfunded, the deployment serves nothing: revision 2 takes over at the next look.
    w.engine.tick().await;
    let (status, status_body) = call(&api, "GET", &format!("{deployments}/{id}"), Some(&token), None).await;
    assert_eq!(status, 200, "{status_body}");
    assert_eq!(status_body["deployment"]["revision"], 2, "{status_body}");
    assert_eq!(status_body["deployment"]["projectDigest"], changed["successor"]["projectDigest"]);
    assert!(status_body.get("successor").is_none(), "{status_body}");
}

/// Review finding: a revision halted because its stored secrets were damaged says "deploy the
/// project again"; that deploy answered 500 (the comparison with the damaged secrets
/// failed). It makes a new revision, which repairs the deployment.
#[tokio::test]
async fn a_redeploy_after_its_stored_secrets_were_damaged_makes_a_new_revision() {
    let w = world(FakeProbe::default());
    let (api, token) = customer_api(&w);
    let deployments = "/api/ingress/deployments";
    let (status, first) = call(&api, "POST", deployments, Some(&token), Some(deploy_body("v1", &[]))).await;
    assert_eq!(status, 201, "{first}");
    let db = rusqlite::Connection::open(w.engine.config().data_dir.join(relay_api::coordinator::store::DATABASE_FILE))
        .expect("the database");
    let damaged = db.execute("UPDATE revision_secrets SET secrets = 'not json'", []).expect("damaged");
    assert_eq!(damaged, 1);
    let (status, again) = call(&api, "POST", deployments, Some(&token), Some(deploy_body("v1", &[]))).await;
    assert_eq!(status, 202, "a new revision, not a 500: {again}");
    assert_eq!(again["successor"]["revision"], 2, "{again}");
}

/// Soak (bounded): many deployments whose jobs end again and again, then stop. Every count
/// returns to zero: no job left in the market, none held, no execution live; and each launch
/// is exactly one execution.
#[tokio::test]
async fn many_launches_restarts_and_stops_leave_no_job_and_no_live_execution() {
    const DEPLOYMENTS: usize = 24;
    const ENDINGS: usize = 4;
    let w = world_with(FakeProbe::default(), |config| {
        config.restarts.max_restarts = ENDINGS as u32;
    });
    let all: Vec<Deployment> = (0..DEPLOYMENTS).map(|i| w.funded(&format!("s{i}"))).collect();
    let live = |w: &World| all.iter().all(|d| w.deployment(&d.id).state == DeploymentState::Live);
    assert!(w.tick_until(20, live).await, "all live");
    for round in 0..ENDINGS {
        for d in &all {
            w.market.end(&format!("{}.r1", d.id), 1);
        }
        w.engine.tick().await;
        // Past every backoff (1 s doubling: at most 8 s here).
        w.clock.advance(60_000);
        let relaunched = |w: &World| w.market.running().len() == DEPLOYMENTS && live(w);
        assert!(w.tick_until(20, relaunched).await, "all live again after ending {round}");
        let restarts = w.market.0.lock().expect("lock").restarts.len();
        assert_eq!(restarts, DEPLOYMENTS * (round + 1), "one restart per ending, never two");
    }
    let terms = relay_api::coordinator::money::Terms::default();
    for d in &all {
        w.store.stop(&d.id, "the soak ends", &terms, now_ms()).expect("stopped");
    }
    // Stopped, then drained (no connection is open: at least a second).
    w.engine.tick().await;
    tokio::time::sleep(relay_api::coordinator::ingress_market::DRAIN_MIN).await;
    w.engine.tick().await;
    w.engine.tick().await;
    assert!(w.market.jobs().is_empty(), "every job stopped and released: {:?}", w.market.jobs());
    for d in &all {
        let executions = w.store.executions(&d.id, None, 100).expect("read");
        assert_eq!(executions.len(), 1, "one execution, restarted {ENDINGS} times");
        assert!(executions.iter().all(|(_, e)| !e.state.is_live()), "{executions:?}");
        let stopped = &executions[0].1;
        assert_eq!(stopped.restarts, ENDINGS as u32);
        assert_eq!(stopped.reason.as_ref().map(|r| r.code.as_str()), Some("deployment_stopped"));
    }
    assert_eq!(w.engine.job_pids(&all[0]).await, None, "none held");
}

/// Issue 17, point 8: a revision's job runs what the policy it published says (its variables,
/// its secrets by ID, its artifact), and the projection desires that policy.
#[tokio::test]
async fn a_revision_runs_what_its_published_policy_says() {
    let w = world(FakeProbe::default());
    let project = r#"{"version": 1, "name": "shop", "runtime": "node", "app": {"entrypoint": "server.js",
        "env": {"GREETING": "hello"}, "secrets": {"API_KEY": {"fromEnv": "SHOP_API_KEY"}}},
        "spend": {"ceilingMicros": 5000000}}"#;
    let d = w.funded_with("shop", project, &[("API_KEY", "s3cret")]);
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);

    let policy = w.store.policy(&d.id, 1).expect("read").expect("revision 1 published its policy");
    let document: serde_json::Value = serde_json::from_str(&policy.policy_json).expect("JSON");
    assert_eq!(document["applicationUid"], d.id.as_str(), "the deployment is the application");
    assert_eq!(document["artifact"]["cid"], format!("relay:{}/r1", d.id));
    let workload = w.market.0.lock().expect("lock").workloads[0].clone();
    assert_eq!(workload.artifact_digest, document["artifact"]["digest"].as_str().expect("a digest"));
    let env: HashMap<String, String> = workload.env.into_iter().collect();
    assert_eq!(env.get("GREETING").map(String::as_str), Some("hello"), "a variable of the policy");
    assert_eq!(env.get("API_KEY").map(String::as_str), Some("s3cret"), "a secret of the policy, by ID");
    assert_ne!(env.get("PORT").map(String::as_str), Some("8080"), "the job's own loopback port");
    assert!(workload.sidecar.is_some(), "the agent runs beside the app");

    let projection = relay_api::coordinator::executions::build(&w.store, &w.deployment(&d.id), None, None, None)
        .expect("a projection");
    let desired = projection.desired.expect("desired");
    assert_eq!((desired.policy_version, desired.policy_digest.as_str()), (1, policy.policy_digest.as_str()));
    assert_eq!((desired.slots, desired.execution.as_str()), (1, "continuous"));
}

/// Issue 17, point 8: the artifact a policy resolved is what its jobs run. An app file changed
/// on disk since the deploy refuses the launch, saying so.
#[tokio::test]
async fn an_app_file_changed_since_the_deploy_refuses_the_launch() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    let app = w.engine.config().deployments_dir().join(&d.id).join("r1").join("app");
    std::fs::write(app.join("server.js"), "// not what was deployed").expect("write");
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Failed).await);
    assert!(w.market.0.lock().expect("lock").launches.is_empty(), "nothing was launched");
    let reason = w.deployment(&d.id).state_reason;
    assert!(reason.contains("not those the revision published"), "{reason}");
}

/// A revision deployed before revisions published policies publishes one, derived from its
/// project, at its next launch: an upgrade keeps it running, with the same variables.
#[tokio::test]
async fn a_revision_deployed_before_policies_publishes_one_at_its_next_launch() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    let db = rusqlite::Connection::open(w.engine.config().data_dir.join(relay_api::coordinator::store::DATABASE_FILE))
        .expect("the database");
    db.execute("DELETE FROM policies", []).expect("an older store");
    assert!(w.store.policy(&d.id, 1).expect("read").is_none());
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    let policy = w.store.policy(&d.id, 1).expect("read").expect("published at launch");
    assert_eq!(policy.policy_digest, published(PROJECT, &d.id, 1).policy_digest, "the derived manifest's");
    let logs = w.store.logs(&d.id, 0, 100).expect("logs");
    assert!(logs.iter().any(|l| l.line.contains("published its policy")), "{logs:?}");
}

/// Issue 43, point 5: that fix-up of an older store's data is done once, not at every tick:
/// once every revision has its policy, a policy gone again (which no deploy leaves: a deploy
/// records its revision's policy in the same transaction) is not published again.
#[tokio::test]
async fn policies_an_older_store_lacks_are_published_once_not_at_every_tick() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    let db = rusqlite::Connection::open(w.engine.config().data_dir.join(relay_api::coordinator::store::DATABASE_FILE))
        .expect("the database");
    db.execute("DELETE FROM policies", []).expect("an older store");
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    assert!(w.store.policy(&d.id, 1).expect("read").is_some(), "published at the first ticks");
    db.execute("DELETE FROM policies", []).expect("gone again");
    for _ in 0..3 {
        w.engine.tick().await;
    }
    assert!(w.store.policy(&d.id, 1).expect("read").is_none(), "the fix-up is not run again");
}

/// Review finding: a job whose restarts were all refused (its processor full) left its
/// deployment `provisioning` for good; past the limit it fails with `job_exited`.
#[tokio::test]
async fn restarts_refused_to_the_limit_fail_the_deployment() {
    let w = world_with(FakeProbe::default(), |config| config.restarts.max_restarts = 2);
    let d = w.funded("shop");
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    w.market.0.lock().expect("lock").refuse_restarts = true;
    w.market.end(&format!("{}.r1", d.id), 1);
    for _ in 0..6 {
        w.engine.tick().await;
        w.clock.advance(60_000);
    }
    assert!(
        w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Failed).await,
        "{:?}",
        w.deployment(&d.id)
    );
    let failed = w.deployment(&d.id);
    assert_eq!(failed.failure_code.as_deref(), Some("job_exited"), "{failed:?}");
    assert!(failed.state_reason.contains("after 2 restarts"), "{}", failed.state_reason);
}

#[tokio::test]
async fn funds_low_shows_only_when_the_funded_periods_end_within_a_quarter_period() {
    let w = world(FakeProbe::default());
    let d = w.funded("shop");
    assert!(w.tick_until(10, |w| w.deployment(&d.id).state == DeploymentState::Live).await);
    let codes = |w: &World| -> Vec<String> {
        w.engine.hints(&w.deployment(&d.id)).expect("hints").into_iter().map(|h| h.code).collect()
    };
    // Just funded for two hours, the first one running: nothing to fix.
    assert_eq!(codes(&w), Vec::<String>::new());
    let funding = w.engine.funding(&w.deployment(&d.id)).expect("funding");
    assert_eq!(funding.burn_micros_per_day, 6_000_000, "USD 0.25 an hour");
    assert!((450_000..=500_000).contains(&funding.remaining_micros), "{funding:?}");
    let end = funding.runs_out_at.expect("an end");
    let in_two_hours = now_ms() + 2 * 3_600_000;
    assert!((in_two_hours - 60_000..=in_two_hours).contains(&end), "{end} vs {in_two_hours}");
    // Fifteen minutes and a second before the end, still nothing.
    w.clock.advance(2 * 3_600_000 - 15 * 60_000 - 60_000);
    assert_eq!(codes(&w), Vec::<String>::new());
    // Within a quarter of a period (15 minutes) of the end: funds_low, saying when.
    w.clock.advance(2 * 60_000);
    let hints = w.engine.hints(&w.deployment(&d.id)).expect("hints");
    assert_eq!(hints.iter().map(|h| h.code.as_str()).collect::<Vec<_>>(), ["funds_low"], "{hints:?}");
    assert!(hints[0].problem.starts_with("the funds run out in 1"), "{}", hints[0].problem);
    assert!(hints[0].problem.contains(" minutes (USD "), "{}", hints[0].problem);
}
