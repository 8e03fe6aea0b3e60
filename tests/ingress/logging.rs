//! The relay's logs as an operator reads them: `svc relay serve --log-format json` writes one
//! JSON object per line on standard error, one line per request (method, path, status,
//! latency, request id), and never a secret: not the bearer token (even when a client puts
//! it in the URL path or query), not a secret's value sent with a deploy.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use svc_e2e::service::{TempDir, http, svc_binary};

use super::deploy::{admin, node_demo_project};
use super::process::{alive, signal_quietly};

#[test]
fn relay_json_logs_have_one_line_per_request_and_never_the_token_or_a_secret() {
    let dir = TempDir::new("relay-logs");
    let data = dir.path().join("relay");
    admin(&data, "invite", "acme");
    let token = admin(&data, "token", "acme");
    let stderr_path = dir.path().join("relay.stderr");
    let stderr = std::fs::File::create(&stderr_path).expect("stderr file");
    let mut relay = Command::new(svc_binary())
        .args(["relay", "serve", "--data-dir"])
        .arg(&data)
        .args(["--listen", "127.0.0.1:0", "--public", "127.0.0.1:0", "--log-format", "json"])
        .env("SVC_NODE", super::process::node())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("svc relay serve starts");
    let pid = relay.id();
    let mut lines = BufReader::new(relay.stdout.take().expect("stdout")).lines();
    let api = loop {
        let line = lines.next().expect("a `ready` line").expect("stdout");
        if let Some(url) = line.strip_prefix("ready ") {
            break url.to_owned();
        }
    };

    // A deploy with a secret, its value only in the deploying shell's environment.
    let secret = "s3cr3t-value-7a1c9e";
    let project = node_demo_project(dir.path());
    let mut json: Value = serde_json::from_str(&std::fs::read_to_string(&project).expect("read")).expect("json");
    json["app"]["secrets"] = serde_json::json!({"API_KEY": {"fromEnv": "DEMO_API_KEY"}});
    std::fs::write(&project, json.to_string()).expect("write");
    let deploy = Command::new(svc_binary())
        .args(["ingress", "deploy", "--no-wait", "--config"])
        .arg(&project)
        .args(["--relay", &api])
        .env("SVC_RELAY_TOKEN", &token)
        .env("DEMO_API_KEY", secret)
        .output()
        .expect("svc ingress deploy");
    assert!(deploy.status.success(), "deploy: {}", String::from_utf8_lossy(&deploy.stderr));

    // A careless client puts the token in the path and the query.
    let addr: std::net::SocketAddr = api.trim_start_matches("http://").parse().expect("the API address");
    let auth = format!("Bearer {token}");
    let careless = http(
        addr,
        "GET",
        &format!("/api/ingress/deployments/{token}?token={token}"),
        &[("authorization", &auth)],
        None,
    );
    assert_eq!(careless.status, 404, "no such project");

    signal_quietly(pid, "TERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = relay.wait();

    let log = std::fs::read_to_string(&stderr_path).expect("the relay's stderr");
    assert!(!log.contains(&token), "the token is in the logs:\n{log}");
    assert!(!log.contains(secret), "the secret's value is in the logs:\n{log}");
    let entries: Vec<Value> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("a stderr line is not JSON ({e}): {l}\n{log}")))
        .collect();
    let deployed =
        entries.iter().find(|e| e["fields"]["method"] == "POST" && e["fields"]["path"] == "/api/ingress/deployments");
    let deployed = deployed.unwrap_or_else(|| panic!("a line for the deploy request:\n{log}"));
    assert_eq!(deployed["fields"]["status"], 201, "{deployed}");
    assert!(deployed["fields"]["latency_ms"].is_u64(), "{deployed}");
    assert!(deployed["fields"]["request_id"].as_str().is_some_and(|id| id.starts_with("req_")), "{deployed}");
    assert!(
        entries.iter().any(|e| e["fields"]["path"].as_str().is_some_and(|p| p.contains("[redacted]"))),
        "the token in the path is redacted, the request still logged:\n{log}"
    );
}
