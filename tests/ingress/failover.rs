//! Issue 20, point 4: two gateways and two replicas of one route on loopback, as operators and
//! jobs run them (`svc gateway run` twice, `svc agent run` twice, each agent tunnelling to both
//! gateways: the first trusted by its CA, the second pinned by its certificate's digest), with
//! a client loop running throughout, the way a client with two addresses for a name behaves:
//! each new connection tries one gateway, and the other if that one fails. Kill one gateway,
//! then one replica, then restart both: after each detection window no new connection fails,
//! and the gateways' counters show where the traffic went.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use relay_api::local::{LocalCoordinator, ephemeral};
use svc_e2e::service::TempDir;
use tokio::time::Instant;

use super::client::get;
use super::process::{Proc, node_demo};
use super::{StandaloneRoute, start_agent, start_gateway_with_admin};

const HOST: &str = "web.localhost";
const ROUTE: &str = "web";

/// How long after a kill new connections may still fail: a client sees a killed gateway's
/// port refuse at once; a killed replica's sessions close with its process.
const DETECTION: Duration = Duration::from_secs(1);

/// One new connection of the client loop: when it started and ended. A connection belongs to
/// a kill's detection window if it was under way at the kill or began within the window (one
/// that began before the next kill and failed because of it is that kill's).
#[derive(Debug, Clone)]
struct Attempt {
    at: Instant,
    ended: Instant,
    ok: bool,
    error: String,
}

/// A client loop: new HTTPS connections one after another (a GET each), alternating which
/// gateway is tried first and falling back to the other, until stopped.
struct Clients {
    stop: Arc<AtomicBool>,
    made: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<Vec<Attempt>>,
}

impl Clients {
    fn start(gateways: [SocketAddr; 2], host: &str, ca: &Path) -> Clients {
        let (stop, made) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let (stopping, counting, ca, host) = (stop.clone(), made.clone(), ca.to_owned(), host.to_owned());
        let task = tokio::spawn(async move {
            let mut attempts = Vec::new();
            let mut i = 0usize;
            // Bounded: at most 20,000 connections, whatever the test does.
            while !stopping.load(Ordering::Relaxed) && i < 20_000 {
                let (first, second) = (gateways[i % 2], gateways[(i + 1) % 2]);
                i += 1;
                let at = Instant::now();
                let tried = |gateway: SocketAddr, ca: std::path::PathBuf| {
                    let host = host.clone();
                    async move {
                        match get(gateway, &host, &ca, "/").await {
                            Ok(page) if page.status == 200 => Ok(()),
                            Ok(page) => Err(format!("{gateway}: status {}", page.status)),
                            Err(e) => Err(format!("{gateway}: {e}")),
                        }
                    }
                };
                let answer = match tried(first, ca.clone()).await {
                    Ok(()) => Ok(()),
                    Err(before) => tried(second, ca.clone()).await.map_err(|e| format!("{before}; then {e}")),
                };
                let ended = Instant::now();
                attempts.push(Attempt { at, ended, ok: answer.is_ok(), error: answer.err().unwrap_or_default() });
                counting.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            attempts
        });
        Clients { stop, made, task }
    }

    /// Waits until `n` more connections were made (at most `limit`).
    async fn run_for(&self, n: usize, limit: Duration) {
        let target = self.made.load(Ordering::Relaxed) + n;
        let start = Instant::now();
        while self.made.load(Ordering::Relaxed) < target && start.elapsed() < limit {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn stop(self) -> Vec<Attempt> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("the client loop")
    }
}

/// A gateway's metrics text.
async fn metrics(admin: &str) -> String {
    super::client::metrics_text(admin)
}

/// The value of `series` (the whole name with labels) in `text`, 0 if absent.
fn value(text: &str, series: &str) -> u64 {
    text.lines().find_map(|l| l.strip_prefix(series)?.trim().parse().ok()).unwrap_or(0)
}

fn in_rotation(text: &str, route: &str) -> u64 {
    value(text, &format!("svc_gateway_route_replicas{{route=\"{route}\",state=\"in_rotation\"}} "))
}

fn routed_to(text: &str, route: &str, replica: &str) -> u64 {
    value(text, &format!("svc_gateway_replica_connections_total{{route=\"{route}\",replica=\"{replica}\"}} "))
}

/// Waits until every gateway in `admins` has `want` replicas of `route` in rotation.
async fn until_in_rotation(admins: &[&str], route: &str, want: u64, limit: Duration) {
    let start = Instant::now();
    loop {
        let mut counts = Vec::new();
        for admin in admins {
            counts.push(in_rotation(&metrics(admin).await, route));
        }
        if counts.iter().all(|&n| n == want) {
            return;
        }
        assert!(start.elapsed() < limit, "replicas in rotation {counts:?}, not {want} each, after {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The failed connections of `attempts` made after `since`.
fn failed_after(attempts: &[Attempt], since: Instant) -> Vec<String> {
    attempts.iter().filter(|a| a.at > since && !a.ok).map(|a| a.error.clone()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_gateways_and_two_replicas_lose_no_new_connection_when_one_of_each_is_killed_and_restarted() {
    let dir = TempDir::new("failover");
    let setup = StandaloneRoute::new(dir.path(), ROUTE, HOST, false);
    let configs: Vec<_> = ["gateway-a", "gateway-b"]
        .iter()
        .map(|name| {
            let at = dir.path().join(name);
            std::fs::create_dir_all(&at).expect("mkdir");
            setup.write_gateway_config(&at)
        })
        .collect();
    let coordinator = LocalCoordinator::new(relay_api::ca::DevCa::open(&dir.path().join("ca")).expect("the CA"));
    coordinator.set_routes(vec![relay_api::local::AgentRoute::new(setup.route.clone(), &setup.credential)]);
    let (listener, coordinator_addr) = ephemeral().await.expect("a coordinator port");
    let serving = tokio::spawn(coordinator.clone().serve(listener));

    let (mut gateway_a, public_a, admin_a) = start_gateway_with_admin(&configs[0].0).await;
    let (gateway_b, public_b, admin_b) = start_gateway_with_admin(&configs[1].0).await;
    let tunnel_pem = std::fs::read_to_string(&setup.tunnel_cert).expect("the tunnel certificate");
    let pin = relay_gateway_host::follow::tunnel_sha256(&tunnel_pem).expect("its digest");

    // Two replicas: each its own app and agent, tunnelling to both gateways.
    let mut apps = Vec::new();
    let mut agent_configs = Vec::new();
    for replica in ["web-0", "web-1"] {
        let (app, app_port) = node_demo().await;
        apps.push(app);
        let job = dir.path().join(replica);
        std::fs::create_dir_all(&job).expect("job dir");
        let config = agent::AgentConfig {
            route_id: ROUTE.to_owned(),
            hostname: HOST.to_owned(),
            credential: setup.credential.clone(),
            replica: Some(replica.to_owned()),
            route_key: setup.route_key.clone(),
            gateway: configs[0].2,
            gateway_name: "gateway.localhost".to_owned(),
            gateway_ca: setup.ca_pem.clone(),
            pinned_gateways: vec![agent::PinnedGateway {
                address: configs[1].2.to_string(),
                tunnel_sha256: pin.clone(),
            }],
            catalog_key: None,
            app_port,
            app_health_path: "/health".to_owned(),
            proxy_protocol: false,
            certificate: agent::CertificateSource::DevCa {
                url: format!("http://{coordinator_addr}"),
                validity_secs: 3600,
            },
            direct_listen: None,
            coordinator: None,
            refresh_secs: agent::config::DEFAULT_REFRESH_SECS,
        };
        agent_configs.push((job, config));
    }
    let mut agents: Vec<Proc> = agent_configs.iter().map(|(job, config)| start_agent(job, config)).collect();
    until_in_rotation(&[&admin_a, &admin_b], ROUTE, 2, Duration::from_secs(30)).await;

    let ca = setup.ca_pem.clone();
    let clients = Clients::start([public_a, public_b], HOST, &ca);
    clients.run_for(60, Duration::from_secs(30)).await;
    let steady = Instant::now();

    // One gateway killed.
    // The instant is taken before the signal: a connection under way as the process dies
    // belongs to the kill's window, not to the time after it.
    let killed_gateway = Instant::now();
    gateway_a.signal("KILL");
    clients.run_for(80, Duration::from_secs(30)).await;

    // One replica killed (its agent: its tunnels close with it).
    let killed_replica = Instant::now();
    agents[1].signal("KILL");
    until_in_rotation(&[&admin_b], ROUTE, 1, Duration::from_secs(5)).await;
    clients.run_for(80, Duration::from_secs(30)).await;

    // Both restarted, on the same ports and files.
    let (restarted, _, admin_a) = start_gateway_with_admin(&configs[0].0).await;
    gateway_a = restarted;
    agents[1] = start_agent(&agent_configs[1].0, &agent_configs[1].1);
    // Agents reconnect with backoff (at most 10 s, jittered).
    until_in_rotation(&[&admin_a, &admin_b], ROUTE, 2, Duration::from_secs(30)).await;
    let restored = Instant::now();
    clients.run_for(80, Duration::from_secs(30)).await;
    let attempts = clients.stop().await;
    serving.abort();

    let failed = |since: Instant, until: Instant| -> Vec<String> {
        attempts.iter().filter(|a| a.at > since && a.ended < until && !a.ok).map(|a| a.error.clone()).collect()
    };
    let output =
        || format!("{}\n{}\n{}\n{}", gateway_a.output(), gateway_b.output(), agents[0].output(), agents[1].output());
    assert!(
        failed(steady - Duration::from_secs(3600), steady).is_empty(),
        "steady: {:?}",
        failed(steady - Duration::from_secs(3600), steady)
    );
    let after_gateway = failed(killed_gateway + DETECTION, killed_replica);
    assert!(after_gateway.is_empty(), "after the gateway was killed: {after_gateway:?}\n{}", output());
    let after_replica = failed(killed_replica + DETECTION, restored);
    assert!(after_replica.is_empty(), "after the replica was killed: {after_replica:?}\n{}", output());
    let in_windows = failed(killed_gateway, killed_gateway + DETECTION).len()
        + failed(killed_replica, killed_replica + DETECTION).len();
    eprintln!(
        "failover: {} connections, {} failed, {in_windows} of them within a detection window",
        attempts.len(),
        attempts.iter().filter(|a| !a.ok).count()
    );
    let after_restart = failed_after(&attempts, restored);
    assert!(after_restart.is_empty(), "after both restarted: {after_restart:?}\n{}", output());

    // Where the traffic went: the restarted gateway and the survivor both served both
    // replicas again; the survivor carried web-0 alone while web-1 was gone.
    let (text_a, text_b) = (metrics(&admin_a).await, metrics(&admin_b).await);
    for (gateway, text) in [("a (restarted)", &text_a), ("b", &text_b)] {
        for replica in ["web-0", "web-1"] {
            assert!(routed_to(text, ROUTE, replica) > 0, "gateway {gateway} routed nothing to {replica}:\n{text}");
        }
    }
    assert!(
        routed_to(&text_b, ROUTE, "web-0") > routed_to(&text_b, ROUTE, "web-1"),
        "gateway b carried web-0 alone for a while:\n{text_b}"
    );
    drop((apps, agents, gateway_a, gateway_b));
}

/// Point 4 through the product: the coordinator launches the route's two replicas (a project
/// asking for `jobs: 2`, deployed with `svc ingress deploy`), and a gateway host prepared with
/// `gateway-prep init` follows its route feed, so each replica tunnels to both gateways. With
/// the client loop running: kill the gateway host, then one replica, then restart the host
/// (the coordinator restarts the replica itself). After each detection window no new
/// connection fails, and the host's counters show both replicas served.
#[tokio::test(flavor = "multi_thread")]
async fn a_coordinators_two_replicas_and_its_gateway_host_lose_no_new_connection_through_kills_and_restarts() {
    use super::deploy::{Relay, hint_codes};
    use super::fleet::GatewayHost;
    use super::process::{free_port, signal_job};
    use super::replicas::{deploy_two_replicas, processes};

    let dir = TempDir::new("failover-product");
    let relay = Relay::start(&dir.path().join("relay"), &["--public".into(), "127.0.0.1:0".into()]).await;
    // Fixed ports, so the host comes back where the agents and clients look for it.
    let listen = [free_port(), free_port(), free_port()].map(|port| format!("127.0.0.1:{port}"));
    let host_admin = listen[2].clone();
    let host = GatewayHost::prepare(&relay, dir.path(), listen);
    let (mut host_proc, host_public, _) = host.run().await;
    let (config, status) = deploy_two_replicas(&relay, dir.path()).await;
    let project = Path::new(&config).to_owned();
    let route = status["deployment"]["routeId"].as_str().expect("a route").to_owned();
    let hostname = status["deployment"]["canonicalHostname"].as_str().expect("a hostname").to_owned();
    // The agents learn of the host at their next route refresh (every 2 s here).
    until_in_rotation(&[&host_admin], &route, 2, Duration::from_secs(30)).await;

    let clients = Clients::start([relay.public, host_public], &hostname, &relay.data.join("ca.pem"));
    clients.run_for(60, Duration::from_secs(30)).await;
    let steady = Instant::now();

    // Each instant is taken before its signals: a connection under way as a process dies (a
    // request in flight at the app's kill is answered 502 by its agent) belongs to the kill's
    // window. Taken after, a CI run counted such a connection as failing after the window.
    let killed_gateway = Instant::now();
    host_proc.signal("KILL");
    clients.run_for(80, Duration::from_secs(30)).await;

    // The replica's processes as they are now: the ones at deploy time may have been
    // restarted meanwhile (printed, with what the relay said, to see why).
    let now = relay.json(&["status", "--config", &config]).await;
    let pids = processes(&now);
    if pids != processes(&status) {
        eprintln!(
            "the replicas' processes changed since the deploy: {:?} -> {pids:?}\nstatus: {now:#}\n{}",
            processes(&status),
            relay.proc.output()
        );
    }
    let killed_replica = Instant::now();
    signal_job(&pids[2..], "KILL");
    clients.run_for(80, Duration::from_secs(30)).await;

    let (restarted, _, _) = host.run().await;
    host_proc = restarted;
    relay
        .wait_status(&project, Duration::from_secs(60), "the replica back", |s| {
            let now = processes(s);
            now.len() == 4 && !now.contains(&pids[2]) && !hint_codes(&s["hints"]).contains(&"replica_down".to_owned())
        })
        .await;
    until_in_rotation(&[&host_admin], &route, 2, Duration::from_secs(30)).await;
    let restored = Instant::now();
    clients.run_for(80, Duration::from_secs(30)).await;
    let attempts = clients.stop().await;

    let failed = |since: Instant, until: Instant| -> Vec<String> {
        attempts.iter().filter(|a| a.at > since && a.ended < until && !a.ok).map(|a| a.error.clone()).collect()
    };
    // The agents' own lines (a 502 comes from an agent) are in the deployment's logs.
    let logs = relay.svc(&["logs", "--config", &config]).await.1;
    let output = || format!("{}\n{}\njob logs:\n{logs}", relay.proc.output(), host_proc.output());
    assert!(failed(steady - Duration::from_secs(3600), steady).is_empty(), "steady: {}", output());
    let after_gateway = failed(killed_gateway + DETECTION, killed_replica);
    assert!(after_gateway.is_empty(), "after the gateway host was killed: {after_gateway:?}\n{}", output());
    let after_replica = failed(killed_replica + DETECTION, restored);
    assert!(after_replica.is_empty(), "after the replica was killed: {after_replica:?}\n{}", output());
    let after_restart = failed_after(&attempts, restored);
    assert!(after_restart.is_empty(), "after the restarts: {after_restart:?}\n{}", output());
    eprintln!(
        "failover through the coordinator: {} connections, {} failed, all within a detection window",
        attempts.len(),
        attempts.iter().filter(|a| !a.ok).count()
    );
    // The restarted host served both replicas again.
    let text = metrics(&host_admin).await;
    for replica in ["job-0", "job-1"] {
        assert!(routed_to(&text, &route, replica) > 0, "the host routed nothing to {replica}:\n{text}");
    }
    drop(host_proc);
}
