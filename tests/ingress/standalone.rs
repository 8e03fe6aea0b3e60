//! The standalone processes: `svc gateway run` and `svc agent run` beside an in-test
//! coordinator and the Node demo. A stopped gateway is a dead path the agent notices by its
//! heartbeats; a restarted gateway is found again by the agent's reconnection.

use std::time::Duration;

use relay_api::local::{LocalCoordinator, ephemeral};
use svc_e2e::service::TempDir;

use super::client::wait_status;
use super::process::node_demo;
use super::{StandaloneRoute, start_gateway};

const HOST: &str = "web.localhost";

/// The agent's heartbeat (the gateway's default, which it announces in its `Welcome`).
const HEARTBEAT: Duration = Duration::from_secs(1);

/// What the agent and gateway promise: a dead path is noticed within 10 s.
const DEAD_WITHIN: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_notices_a_stopped_gateway_and_finds_a_restarted_one() {
    let dir = TempDir::new("standalone");
    let setup = StandaloneRoute::new(dir.path(), "web", HOST, true);
    let (gateway_config, public, tunnel) = setup.write_gateway_config(dir.path());
    let StandaloneRoute { ca, ca_pem, credential, route_key, route, .. } = setup;
    let coordinator = LocalCoordinator::new(ca);
    coordinator.set_routes(vec![relay_api::local::AgentRoute::new(route.clone(), &credential)]);
    let (listener, coordinator_addr) = ephemeral().await.expect("a coordinator port");
    let serving = tokio::spawn(coordinator.clone().serve(listener));

    let (mut gateway, bound) = start_gateway(&gateway_config).await;
    assert_eq!(bound, public);

    // Kept until the test ends: dropping it stops the app.
    let (_app, app_port) = node_demo().await;

    let job = dir.path().join("job");
    std::fs::create_dir_all(&job).expect("job dir");
    let agent_config = agent::AgentConfig {
        route_id: "web".to_owned(),
        hostname: HOST.to_owned(),
        credential,
        replica: None,
        route_key,
        gateway: tunnel,
        gateway_name: "gateway.localhost".to_owned(),
        gateway_ca: ca_pem.clone(),
        pinned_gateways: Vec::new(),
        catalog_key: None,
        app_port,
        app_health_path: "/health".to_owned(),
        proxy_protocol: true,
        certificate: agent::CertificateSource::DevCa { url: format!("http://{coordinator_addr}"), validity_secs: 3600 },
        direct_listen: None,
        coordinator: None,
        refresh_secs: agent::config::DEFAULT_REFRESH_SECS,
    };
    let mut agent = super::start_agent(&job, &agent_config);

    if let Err(e) = wait_status(public, HOST, &ca_pem, "/", 200, Duration::from_secs(30)).await {
        panic!("GET / through the gateway: {e}\n{}\n{}", gateway.output(), agent.output());
    }

    // A stopped gateway answers no heartbeat: the agent declares the path dead. The agent
    // pings every 3 s from the moment its tunnel is up; stopping the gateway just after a
    // ping was answered is the worst case, so the test does exactly that, every time.
    let up = agent.last_line_time(|l| l.contains("tunnel up")).expect("the agent's tunnel came up");
    let beats = up.elapsed().as_millis() / HEARTBEAT.as_millis() + 1;
    let beats = u32::try_from(beats).expect("a few heartbeats");
    tokio::time::sleep_until(up + HEARTBEAT * beats + Duration::from_millis(500)).await;
    let from = agent.line_count();
    gateway.signal("STOP");
    let stopped = tokio::time::Instant::now();
    let dead = agent.wait_line(from, Duration::from_secs(15), |l| l.contains("no heartbeat answer")).await;
    let detected = stopped.elapsed();
    assert!(dead.is_some(), "the agent reports the dead path\n{}", agent.output());

    // A new gateway on the same ports: the agent reconnects with backoff.
    gateway.signal("CONT");
    gateway.signal("KILL");
    assert!(gateway.wait_exit(Duration::from_secs(5)).await.is_some(), "the gateway died");
    let (gateway, bound) = start_gateway(&gateway_config).await;
    assert_eq!(bound, public);
    if let Err(e) = wait_status(public, HOST, &ca_pem, "/", 200, Duration::from_secs(20)).await {
        panic!("GET / after the restart: {e}\n{}\n{}", gateway.output(), agent.output());
    }
    serving.abort();
    // Asserted last, so a slow detection does not hide how the restart went.
    assert!(
        detected <= DEAD_WITHIN,
        "the dead path is reported within {DEAD_WITHIN:?} of the stop, not {detected:?}\n{}",
        agent.output()
    );
}
