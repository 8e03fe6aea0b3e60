//! Issue 41, "a redeploy drops connections through gateway hosts": with two admitted gateway
//! hosts following the coordinator's route feed (`svc gateway run`) and a client loop through
//! each, a redeploy failed 1-8 requests in 7 of 10 runs: the coordinator switched the route
//! once the successor validated through its own gateway, before the hosts had the successor
//! with its agents connected, and the feed looked for changes once a second. Now the switch
//! waits for every host's report (`engine::switch`) and the feed is pushed.
//!
//! Over the real binaries: a coordinator, two hosts, the node demo deployed, a loop of fresh
//! TLS connections through every host (and the coordinator's gateway) at well over 20 a
//! second each, through four redeploys (two of one replica, one to two replicas, one of two
//! replicas), the second host frozen (SIGSTOP) for 2.5 s at the start of two of them: no
//! request fails, and each loop sees the last revision's page at the end.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use svc_e2e::service::TempDir;
use tokio::time::Instant;

use super::HOST;
use super::client::{get, heading, wait_status};
use super::deploy::{Relay, node_demo_project, repo};
use super::fleet::{GatewayHost, issue_admission_token};
use super::process::{Proc, signal};

/// How long the second host is frozen during two of the redeploys.
const FROZEN: Duration = Duration::from_millis(2_500);

/// A gateway host prepared by `gateway-prep init` under `<dir>/<name>`, admitted as the
/// coordinator's gateway operator `local`, and running `svc gateway run`.
struct Host {
    proc: Proc,
    public: SocketAddr,
}

impl Host {
    async fn start(relay: &Relay, dir: &Path, name: &str) -> Host {
        let any = || "127.0.0.1:0".to_owned();
        let token = issue_admission_token(relay);
        let (proc, public, _) =
            GatewayHost::prepare_as(relay, dir, (name, name), &token, [any(), any(), any()]).run().await;
        Host { proc, public }
    }
}

/// One request of a loop: when it started, and its page heading or why it failed.
#[derive(Debug)]
struct Request {
    at: Instant,
    answer: Result<String, String>,
}

/// GETs `/` through `gateway` on a fresh TLS connection again and again, every 10 ms, until
/// `stop` (at most 20,000).
fn request_loop(gateway: SocketAddr, ca: PathBuf, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<Request>> {
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while !stop.load(Ordering::Relaxed) && seen.len() < 20_000 {
            let at = Instant::now();
            let answer = match tokio::time::timeout(Duration::from_secs(10), get(gateway, HOST, &ca, "/")).await {
                Ok(Ok(r)) if r.status == 200 => Ok(heading(&r.text())),
                Ok(Ok(r)) => Err(format!("status {}: {}", r.status, r.text())),
                Ok(Err(e)) => Err(e),
                Err(_) => Err("no answer within 10 s".to_owned()),
            };
            seen.push(Request { at, answer });
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        seen
    })
}

fn processes(status: &Value) -> usize {
    status["processes"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redeploy_through_two_gateway_hosts_fails_no_request() {
    let started = Instant::now();
    let dir = TempDir::new("redeploy-hosts");
    let relay = Relay::start(&dir.path().join("relay"), &["--public".into(), "127.0.0.1:0".into()]).await;
    let ca = relay.data.join("ca.pem");
    let hosts = [Host::start(&relay, dir.path(), "gw1").await, Host::start(&relay, dir.path(), "gw2").await];
    let config = node_demo_project(dir.path());
    let config_arg = config.to_string_lossy().into_owned();
    let (code, out, err) = relay.svc(&["deploy", "--config", &config_arg]).await;
    assert_eq!(code, 0, "deploy: {err}\n{out}\n{}", relay.proc.output());
    relay.wait_status(&config, Duration::from_secs(60), "live", |s| s["deployment"]["state"] == "live").await;
    for host in &hosts {
        let through = wait_status(host.public, HOST, &ca, "/", 200, Duration::from_secs(30)).await;
        assert!(through.is_ok(), "through a gateway host: {through:?}\n{}", host.proc.output());
    }

    // A loop through every gateway host and through the coordinator's gateway.
    let gateways = [hosts[0].public, hosts[1].public, relay.public];
    let stop = Arc::new(AtomicBool::new(false));
    // Two loops per gateway: requests through a frozen host wait, and the others go on.
    let loops: Vec<_> = gateways
        .iter()
        .map(|g| [request_loop(*g, ca.clone(), stop.clone()), request_loop(*g, ca.clone(), stop.clone())])
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let project = config.parent().expect("the project directory").to_owned();
    let server = project.join("server.js");
    let original = std::fs::read_to_string(&server).expect("server.js");
    let manifest = std::fs::read_to_string(repo().join("examples/node-demo/manifest.yaml")).expect("the manifest");
    let looped_from = Instant::now();
    // Revisions 2 and 3 of one replica, 4 going to two replicas, 5 of two replicas (`before`:
    // the predecessor's).
    for (revision, jobs, before) in [(2u64, 1usize, 1usize), (3, 1, 1), (4, 2, 1), (5, 2, 2)] {
        let page = format!("Hello from revision {revision}");
        std::fs::write(&server, original.replace("Hello from the svc Node.js demo", &page)).expect("edit");
        if jobs == 2 && !project.join("manifest.yaml").exists() {
            std::fs::write(project.join("manifest.yaml"), manifest.replace("  jobs: 1\n", "  jobs: 2\n"))
                .expect("write the manifest");
            let mut ingress: Value =
                serde_json::from_slice(&std::fs::read(&config).expect("ingress.json")).expect("JSON");
            ingress["manifest"] = "manifest.yaml".into();
            std::fs::write(&config, serde_json::to_vec_pretty(&ingress).expect("JSON")).expect("ingress.json");
        }
        // Revisions 3 and 5: the second host frozen (SIGSTOP) for 2.5 s from just before the
        // deploy, so it lags behind the successor; its clients wait meanwhile, and must
        // not be sent to a stopped predecessor once it runs again.
        if revision % 2 == 1 {
            let pid = hosts[1].proc.pid();
            signal(pid, "STOP");
            tokio::spawn(async move {
                tokio::time::sleep(FROZEN).await;
                signal(pid, "CONT");
            });
        }
        let at = Instant::now();
        let (code, out, err) = relay.svc(&["deploy", "--config", &config_arg]).await;
        assert_eq!(code, 0, "redeploy {revision}: {err}\n{out}\n{}", relay.proc.output());
        // Switched, and the predecessor stopped: only the new revision's app and agent(s).
        let (status, _) = relay
            .wait_status(&config, Duration::from_secs(60), "the new revision alone", |s| {
                s["deployment"]["revision"] == revision
                    && s["deployment"]["state"] == "live"
                    && processes(s) == 2 * jobs
            })
            .await;
        assert_eq!(status["deployment"]["state"], "live", "{status:#}");
        // The predecessor drained and stopped (at least a second after the switch): the
        // hosts must not send a client to it from then on.
        let stopped = format!("revision {} stopped", revision - 1);
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            let logs = relay.json(&["logs", "--config", &config_arg]).await;
            let lines = logs["entries"].as_array().into_iter().flatten().filter_map(|e| e["line"].as_str());
            if lines.filter(|l| l.starts_with(&stopped)).count() >= before {
                break;
            }
            assert!(Instant::now() < deadline, "{stopped}: {logs:#}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        println!(
            "revision {revision} ({jobs} jobs): its predecessor stopped {} ms after its deploy",
            at.elapsed().as_millis()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    stop.store(true, Ordering::Relaxed);
    let looped = looped_from.elapsed();
    let mut failures = Vec::new();
    for (gateway, looping) in gateways.iter().zip(loops) {
        let mut seen = Vec::new();
        for one in looping {
            seen.extend(one.await.expect("a request loop"));
        }
        seen.sort_by_key(|r| r.at);
        let during = seen.iter().filter(|r| r.at >= looped_from).count();
        let failed: Vec<&Request> = seen.iter().filter(|r| r.answer.is_err()).collect();
        let rate = during as f64 / looped.as_secs_f64();
        println!(
            "through {gateway}: {} requests ({during} during the redeploys, {rate:.0} a second), {} failed",
            seen.len(),
            failed.len()
        );
        // A floor that shows the loop kept asking through every redeploy, not the machine's
        // speed: 15-16 a second were seen with other tests sharing CI's two cores (27-45 alone).
        assert!(rate >= 5.0, "at least 5 requests a second through {gateway}: {rate:.1}");
        let last = seen.iter().rev().find_map(|r| r.answer.as_ref().ok());
        assert_eq!(last.map(String::as_str), Some("Hello from revision 5"), "through {gateway}");
        failures.extend(failed.into_iter().map(|r| format!("{gateway}: {:?}", r.answer)));
    }
    assert!(
        failures.is_empty(),
        "requests failed during the redeploys: {failures:#?}\n{}\n{}",
        hosts[0].proc.output(),
        relay.proc.output()
    );
    println!("the test took {} s", started.elapsed().as_secs());
}
