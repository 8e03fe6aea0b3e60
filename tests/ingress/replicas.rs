//! Issue 20, points 3 and 4 through the coordinator: a project whose manifest asks for two jobs
//! (`deployment.jobs: 2`), deployed with `svc ingress deploy` as customers deploy, runs two
//! replicas of its route. With a request loop running throughout, one replica's processes are
//! killed with `kill -9`: after the detection window no request fails, the deployment stays
//! live and says which replica is down, and the coordinator restarts it. Then a redeploy rolls
//! both replicas over to the new code with no failed request.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use svc_e2e::service::TempDir;
use tokio::time::Instant;

use super::HOST;
use super::client::{get, heading};
use super::deploy::{Relay, hint_codes, node_demo_project, repo};
use super::process::{alive, assert_alive, signal_job};

/// How long after a kill requests may still fail: the killed agent's tunnel sessions close
/// with its process, and the gateway asks the other replica from then on.
const DETECTION: Duration = Duration::from_secs(1);

/// One request of the loop: when it started and ended, and its page heading or why it failed.
#[derive(Debug)]
struct Request {
    at: Instant,
    ended: Instant,
    answer: Result<String, String>,
}

/// GETs `/` on a fresh connection again and again (at most 5,000) until `stop`.
fn request_loop(relay: &Relay, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<Request>> {
    let (public, ca) = (relay.public, relay.data.join("ca.pem"));
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while !stop.load(Ordering::Relaxed) && seen.len() < 5_000 {
            let at = Instant::now();
            let answer = match tokio::time::timeout(Duration::from_secs(10), get(public, HOST, &ca, "/")).await {
                Ok(Ok(r)) if r.status == 200 => Ok(heading(&r.text())),
                Ok(Ok(r)) => Err(format!("status {}: {}", r.status, r.text())),
                Ok(Err(e)) => Err(e),
                Err(_) => Err("no answer within 10 s".to_owned()),
            };
            seen.push(Request { at, ended: Instant::now(), answer });
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        seen
    })
}

/// The demo project in `dir`, its manifest (the bundled one) asking for two jobs.
pub(super) fn two_job_project(dir: &Path) -> String {
    let config = node_demo_project(dir);
    let project = config.parent().expect("the project directory");
    let manifest = std::fs::read_to_string(repo().join("examples/node-demo/manifest.yaml")).expect("the manifest");
    assert!(manifest.contains("  jobs: 1\n"), "the demo manifest says how many jobs");
    std::fs::write(project.join("manifest.yaml"), manifest.replace("  jobs: 1\n", "  jobs: 2\n")).expect("write");
    let mut ingress: Value = serde_json::from_slice(&std::fs::read(&config).expect("ingress.json")).expect("JSON");
    ingress["manifest"] = "manifest.yaml".into();
    std::fs::write(&config, serde_json::to_vec_pretty(&ingress).expect("JSON")).expect("write ingress.json");
    config.to_string_lossy().into_owned()
}

/// Deploys [`two_job_project`] in `dir` with `svc ingress deploy`, and waits until both
/// replicas are live with nothing to fix (one period funded, just started): its project file and
/// that status.
pub(super) async fn deploy_two_replicas(relay: &Relay, dir: &Path) -> (String, Value) {
    let config = two_job_project(dir);
    let (code, out, err) = relay.svc(&["deploy", "--config", &config]).await;
    assert_eq!(code, 0, "deploy: {err}\n{out}\n{}", relay.proc.output());
    let (status, _) = relay
        .wait_status(Path::new(&config), Duration::from_secs(60), "both replicas live", |s| {
            processes(s).len() == 4 && s["deployment"]["state"] == "live" && hint_codes(&s["hints"]).is_empty()
        })
        .await;
    (config, status)
}

pub(super) fn processes(status: &Value) -> Vec<u32> {
    status["processes"].as_array().into_iter().flatten().filter_map(Value::as_u64).map(|p| p as u32).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_route_of_two_jobs_serves_through_a_killed_replica_and_a_rolling_redeploy() {
    let dir = TempDir::new("replicas");
    let relay = Relay::start(&dir.path().join("relay"), &["--public".into(), "127.0.0.1:0".into()]).await;
    let (config, status) = deploy_two_replicas(&relay, dir.path()).await;
    let project = Path::new(&config).to_owned();
    let pids = processes(&status);
    assert_alive(&pids, "both replicas' apps and agents");

    // Kill replica job-0 (its app and its agent) while requests run.
    let stop = Arc::new(AtomicBool::new(false));
    let looping = request_loop(&relay, stop.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let killed_at = Instant::now();
    signal_job(&pids[..2], "KILL");
    // It is restarted (after its backoff) and validated again, while the other serves: the
    // deployment never leaves `live`, and its logs say which replica went down.
    let (back, _) = relay
        .wait_status(&project, Duration::from_secs(60), "the replica back", |s| {
            let now = processes(s);
            now.len() == 4 && !now.contains(&pids[0]) && !hint_codes(&s["hints"]).contains(&"replica_down".to_owned())
        })
        .await;
    assert_eq!(back["deployment"]["state"], "live", "{back:#}");
    assert_eq!(back["transitions"], status["transitions"], "never left live: {back:#}");
    assert!(pids[..2].iter().all(|&p| !alive(p)), "killed");
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let seen = looping.await.expect("the request loop");
    let late: Vec<&Request> = seen.iter().filter(|r| r.answer.is_err() && r.at > killed_at + DETECTION).collect();
    let during = seen.iter().filter(|r| r.at > killed_at).count();
    println!(
        "replica killed: {} requests ({} after the kill), {} failed, {} after the detection window",
        seen.len(),
        during,
        seen.iter().filter(|r| r.answer.is_err()).count(),
        late.len()
    );
    assert!(late.is_empty(), "requests failed after the detection window: {late:?}");
    assert!(during >= 10, "the loop ran through the kill and the restart: {during} requests");
    assert!(seen.iter().all(|r| r.ended >= r.at));
    let logs = relay.json(&["logs", "--config", &config]).await;
    let lines: Vec<&str> =
        logs["entries"].as_array().into_iter().flatten().filter_map(|e| e["line"].as_str()).collect();
    assert!(lines.iter().any(|l| l.starts_with("replica job-0: ")), "{lines:#?}");
    assert!(lines.iter().any(|l| l.starts_with("[job-1] ")), "each replica's output says which: {lines:#?}");

    // A redeploy rolls both replicas over, with requests running throughout: none fails.
    let server = project.parent().expect("the project directory").join("server.js");
    let text = std::fs::read_to_string(&server).expect("server.js");
    std::fs::write(&server, text.replace("Hello from the svc Node.js demo", "Hello from revision 2")).expect("edit");
    let stop = Arc::new(AtomicBool::new(false));
    let looping = request_loop(&relay, stop.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (code, out, err) = relay.svc(&["deploy", "--config", &config]).await;
    assert_eq!(code, 0, "redeploy: {err}\n{out}\n{}", relay.proc.output());
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let seen = looping.await.expect("the request loop");
    let failed: Vec<&Request> = seen.iter().filter(|r| r.answer.is_err()).collect();
    println!("rolling redeploy of two replicas: {} requests, {} failed", seen.len(), failed.len());
    assert!(failed.is_empty(), "requests failed during the redeploy: {failed:?}");
    let headings: Vec<&str> = seen.iter().filter_map(|r| r.answer.as_deref().ok()).collect();
    assert_eq!(headings.first(), Some(&"Hello from the svc Node.js demo"), "the old code served first");
    assert_eq!(headings.last(), Some(&"Hello from revision 2"), "the new code answers after");
    let (after, _) = relay
        .wait_status(&project, Duration::from_secs(30), "revision 2 on two replicas", |s| {
            s["deployment"]["revision"] == 2 && processes(s).len() == 4
        })
        .await;
    assert_eq!(after["deployment"]["state"], "live", "{after:#}");
    // The projection shows both slots of the new revision, ready.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let executions = relay.json(&["executions", "--config", &config]).await;
        let slots: Vec<(u64, u64, &str)> = executions["slots"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|s| {
                (
                    s["slot"].as_u64().unwrap_or(9),
                    s["generation"].as_u64().unwrap_or(0),
                    s["state"].as_str().unwrap_or(""),
                )
            })
            .collect();
        if slots == [(0, 2, "ready"), (1, 2, "ready")] {
            assert_eq!(executions["desired"]["slots"], 2, "{executions:#}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "two ready slots of revision 2: {executions:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Issue 20 with ACME: a route of two replicas where agents certify through ACME (a real
/// Pebble, tls-alpn-01 through the gateway). A validation carries only the hostname, so each
/// replica orders in its turn (the coordinator's ACME turn) and says in its heartbeat that
/// its challenge is pending, and the gateway sends the CA to it. Both replicas come up, each
/// serving a Pebble certificate for its own key.
#[tokio::test(flavor = "multi_thread")]
async fn two_replicas_certifying_through_acme_each_get_a_certificate_for_their_own_key() {
    use super::client::{Https, serial_and_spki};
    use super::deploy::{ACME_CANONICAL, AcmeRelay};
    let Some((pebble_bin, dns_bin)) = super::pebble::programs() else { return };
    let dir = TempDir::new("acme-replicas");
    let (relay, stack, public) = AcmeRelay::started(dir.path(), &pebble_bin, &dns_bin).await;
    let config = two_job_project(dir.path());
    let (code, out, err) = relay.svc(&["deploy", "--config", &config, "--timeout", "120"]).await;
    assert_eq!(code, 0, "deploy: {err}\n{out}\n{}\n{}", relay.proc.output(), stack.pebble.output());
    // The relay's periods are 3 s: the two orders, one after the other, and the handshakes
    // below need more than the one the deploy funded (found in CI: the route ran out of funds
    // while the second replica ordered, and the next handshake met a closed route).
    let (code, _, err) = relay.svc(&["fund", "--periods", "12", "--config", &config]).await;
    assert_eq!(code, 0, "fund: {err}");
    let (status, _) = relay
        .wait_status(Path::new(&config), Duration::from_secs(120), "both replicas live", |s| {
            processes(s).len() == 4
                && s["deployment"]["state"] == "live"
                && !hint_codes(&s["hints"]).contains(&"replica_down".to_owned())
        })
        .await;
    // The second replica orders once the first has given the turn back; until it has its
    // certificate it is out of rotation, so every handshake meanwhile is the first's.
    let mut keys = std::collections::BTreeSet::new();
    let started = Instant::now();
    while keys.len() < 2 && started.elapsed() < Duration::from_secs(60) {
        let conn = match Https::connect(public, ACME_CANONICAL, &stack.root, None).await {
            Ok(conn) => conn,
            Err(e) => {
                let logs = relay.svc(&["logs", "--config", &config]).await.1;
                panic!("TLS chaining to Pebble's root: {e}\n{status:#}\n{logs}\n{}", relay.proc.output());
            }
        };
        let leaf = conn.leaf();
        let (_, parsed) = x509_parser::parse_x509_certificate(&leaf).expect("X.509");
        assert!(parsed.issuer().to_string().contains("Pebble"), "issued by Pebble: {}", parsed.issuer());
        keys.insert(serial_and_spki(&leaf).1);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let logs = relay.svc(&["logs", "--config", &config]).await.1;
    assert_eq!(keys.len(), 2, "each replica serves a certificate for its own key: {status:#}\n{logs}");
    // One order at a time, each validation sent to its replica: no order failed and retried.
    assert!(logs.contains("[job-1]") && logs.contains("[job-0]"), "both replicas' lines: {logs}");
    assert!(!logs.contains("svc agent: certificate:"), "an order failed: {logs}");
}
