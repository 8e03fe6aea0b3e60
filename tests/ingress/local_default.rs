//! The README's ingress flow as a new user runs it: a relative `--data-dir relay`, default
//! flags (no `--allow-private-targets`), `svc ingress deploy` from the project's directory.
//! The `.localhost` route is validated at the gateway's own loopback listener and is live
//! within seconds of the deploy.

use std::process::Command;
use std::time::{Duration, Instant};

use svc_e2e::service::{TempDir, svc_binary};

use super::deploy::Relay;
use super::process::Proc;

fn svc_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(svc_binary()).args(args).current_dir(dir).output().expect("svc")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_readme_flow_with_a_relative_data_dir_and_default_flags_is_live_within_five_seconds() {
    let dir = TempDir::new("readme-flow");
    let root = dir.path().to_owned();
    let project = root.join("examples/node-demo");
    std::fs::create_dir_all(&project).expect("mkdir");
    let demo = svc_e2e::workspace().join("examples/node-demo");
    for file in ["server.js", "ingress.json", "package.json"] {
        std::fs::copy(demo.join(file), project.join(file)).expect("copy the demo");
    }
    let invite = svc_in(&root, &["relay", "admin", "invite", "--data-dir", "relay", "--org", "acme"]);
    assert!(invite.status.success(), "{}", String::from_utf8_lossy(&invite.stderr));
    let token = svc_in(&root, &["relay", "admin", "token", "--data-dir", "relay", "--org", "acme"]);
    assert!(token.status.success(), "{}", String::from_utf8_lossy(&token.stderr));
    let token = String::from_utf8_lossy(&token.stdout).trim().to_owned();

    // Ports of the test's own choosing (the defaults may be taken on a shared machine);
    // nothing else differs from the README.
    let mut serve = Command::new(svc_binary());
    serve
        .args(["relay", "serve", "--data-dir", "relay", "--listen", "127.0.0.1:0", "--public", "127.0.0.1:0"])
        .current_dir(&root)
        .env("SVC_NODE", super::process::node());
    let relay = Relay::attach(Proc::spawn("svc relay serve", serve), &root.join("relay"), token.clone()).await;

    let started = Instant::now();
    let deploy = tokio::process::Command::new(svc_binary())
        .args(["ingress", "deploy"])
        .current_dir(&project)
        .env("SVC_RELAY", &relay.api)
        .env("SVC_RELAY_TOKEN", &token)
        .output()
        .await
        .expect("svc ingress deploy");
    let took = started.elapsed();
    let (out, err) = (String::from_utf8_lossy(&deploy.stdout), String::from_utf8_lossy(&deploy.stderr));
    assert!(deploy.status.success(), "deploy: {err}\n{out}\n{}", relay.proc.output());
    assert!(out.contains("live https://node-demo-acme.localhost:"), "{out}");
    println!("README flow: deploy to live in {:.2} s", took.as_secs_f64());
    assert!(took < Duration::from_secs(5), "live only after {took:?}: {out}\n{err}");
    let status = relay.json(&["status", "--config", &project.join("ingress.json").to_string_lossy()]).await;
    assert_eq!(status["deployment"]["state"], "live", "{status:#}");
    // No failed validation was recorded on the way: validation waited for the agent's tunnel.
    let failed: Vec<_> =
        status["validations"].as_array().into_iter().flatten().filter(|v| v["passed"] == false).collect();
    assert!(failed.is_empty(), "no `tls handshake eof` on the way to live: {failed:#?}");
}
