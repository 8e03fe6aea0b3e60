//! What servers write while nothing happens (issue 42, point 4): a relay with a live
//! deployment, left alone, writes nothing at the default level, though its agent refreshes its
//! route and the engine revalidates it every 2 s (`--revalidate-secs 2`); with
//! `RUST_LOG=debug` those refreshes are there. The demo, once `ready`, says nothing more
//! across a route refresh and a certificate renewal.

use std::path::Path;
use std::time::Duration;

use svc_e2e::service::TempDir;

use super::Demo;
use super::deploy::{Relay, node_demo_project};

/// A relay in `dir` with `examples/node-demo` deployed and live, the relay's log level set by
/// `rust_log`.
async fn live_relay(dir: &Path, rust_log: &str) -> Relay {
    let flags: Vec<String> = vec!["--public".into(), "127.0.0.1:0".into()];
    let relay = Relay::start_with_env(&dir.join("relay"), &flags, &[("RUST_LOG", rust_log)]).await;
    let config = node_demo_project(dir).to_string_lossy().into_owned();
    let (code, out, err) = relay.svc(&["deploy", "--config", &config]).await;
    assert_eq!(code, 0, "deploy: {err}\n{out}\n{}", relay.proc.output());
    relay
}

/// The relay's lines written during `idle` from now, with nothing asked of it.
async fn idle_lines(relay: &Relay, idle: Duration) -> Vec<String> {
    // The deploy's last requests are logged as they are answered: let them land first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let from = relay.proc.line_count();
    tokio::time::sleep(idle).await;
    relay.proc.lines().split_off(from)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_relay_writes_nothing_at_info_and_its_refreshes_at_debug() {
    // The two relays side by side: the same windows, half the wait.
    let (info_dir, debug_dir) = (TempDir::new("quiet-info"), TempDir::new("quiet-debug"));
    let (info, debug) = tokio::join!(live_relay(info_dir.path(), "info"), live_relay(debug_dir.path(), "debug"));
    // Several agent refreshes and revalidations (every 2 s) happen in these windows.
    let window = Duration::from_secs(12);
    let (lines, debug_lines) = tokio::join!(idle_lines(&info, window), idle_lines(&debug, window));
    assert!(lines.is_empty(), "an idle relay wrote {} lines at info:\n{}", lines.len(), lines.join("\n"));

    let lines = debug_lines;
    let refreshes = lines.iter().filter(|l| l.contains("path=/api/agent/route") && l.contains("DEBUG")).count();
    assert!(refreshes >= 3, "the agent's refreshes every 2 s, at debug: {refreshes} in\n{}", lines.join("\n"));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_demo_says_nothing_after_ready_and_its_trust_hint() {
    // Certificates of 15 s, renewed after 10 s, and route refreshes every 5 s: a renewal and
    // two refreshes fall in the window.
    let demo = Demo::start("quiet-demo", &["--cert-validity-secs", "15", "--revalidate-secs", "5"]).await;
    let lines = demo.proc.lines();
    let ready = lines.iter().position(|l| l.starts_with("ready https://")).expect("ready");
    let from = ready + 2;
    tokio::time::sleep(Duration::from_secs(13)).await;
    let after: Vec<String> = demo.proc.lines().split_off(from.min(demo.proc.line_count()));
    assert!(after.is_empty(), "the demo wrote after ready and its trust hint:\n{}", after.join("\n"));
}
