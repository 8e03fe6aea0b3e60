//! Ctrl-C (SIGINT) at any moment of the long-running commands: each exits 130, as shells
//! expect, without a panic and without leaving a process behind. `svc ingress demo` used to
//! panic ("`async fn` resumed after completion") when interrupted while waiting.

use std::process::Command;
use std::time::Duration;

use svc_e2e::service::{TempDir, svc_binary};
use tokio::time::Instant;

use super::Demo;
use super::deploy::Relay;
use super::process::{Proc, alive, assert_alive, signal};

/// Waits for `pids` to be gone, at most 5 s; the ones still alive.
async fn survivors(pids: &[u32]) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    pids.iter().copied().filter(|&p| alive(p)).collect()
}

/// Sends SIGINT and asserts: exit 130 within 10 s, no panic message.
async fn interrupt(proc: &mut Proc, what: &str) {
    signal(proc.pid(), "INT");
    let status = proc.wait_exit(Duration::from_secs(10)).await;
    let output = proc.output();
    assert_eq!(status.and_then(|s| s.code()), Some(130), "{what}: exit 130 after Ctrl-C, got {status:?}\n{output}");
    assert!(!output.contains("panicked"), "{what}: no panic\n{output}");
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_while_the_demo_waits_exits_130_and_stops_its_jobs() {
    let dir = TempDir::new("int-demo-waiting");
    let mut command = Command::new(svc_binary());
    command
        .args(["ingress", "demo", "--data-dir"])
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0"])
        .env("SVC_NODE", super::process::node());
    let mut proc = Proc::spawn("svc ingress demo", command);
    let line = proc.expect_line(Duration::from_secs(60), "the job's pids", |l| l.contains("job processes:")).await;
    let pids: Vec<u32> =
        line.split(|c: char| !c.is_ascii_digit()).filter(|w| !w.is_empty()).filter_map(|w| w.parse().ok()).collect();
    assert_eq!(pids.len(), 2, "two pids in {line:?}");
    assert_alive(&pids, "the job's app and agent");
    pids.iter().for_each(|&p| proc.also_kill(p));
    // At once: the demo is still waiting for its URL to answer.
    interrupt(&mut proc, "svc ingress demo (waiting)").await;
    assert_eq!(survivors(&pids).await, Vec::<u32>::new(), "the app and agent are gone");
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_on_a_ready_demo_exits_130_and_stops_its_jobs() {
    let mut demo = Demo::start("int-demo-ready", &[]).await;
    let pids = [demo.app_pid, demo.agent_pid];
    assert_alive(&pids, "the job's app and agent");
    interrupt(&mut demo.proc, "svc ingress demo (ready)").await;
    assert_eq!(survivors(&pids).await, Vec::<u32>::new(), "the app and agent are gone");
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_on_logs_follow_deploy_and_the_relay_exits_130_and_leaves_no_job() {
    let dir = TempDir::new("int-relay");
    let (mut relay, config) = Relay::with_live_demo(dir.path(), &[]).await;
    let status = relay.json(&["status", "--config", &config]).await;
    let pids: Vec<u32> = status["processes"]
        .as_array()
        .expect("pids")
        .iter()
        .filter_map(|p| p.as_u64().and_then(|p| u32::try_from(p).ok()))
        .collect();
    assert_eq!(pids.len(), 2, "app and agent pids in {status:#}");
    assert_alive(&pids, "the job's app and agent");

    // `logs --follow` polls for ever.
    let mut command = Command::new(svc_binary());
    command
        .args(["ingress", "logs", "--follow", "--config", &config, "--relay", &relay.api])
        .env("SVC_RELAY_TOKEN", &relay.token);
    let mut logs = Proc::spawn("svc ingress logs --follow", command);
    logs.expect_line(Duration::from_secs(10), "a log line", |_| true).await;
    interrupt(&mut logs, "svc ingress logs --follow").await;

    // `deploy` waiting on a relay that accepted the connection and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let silent_url = format!("http://{}", silent.local_addr().expect("addr"));
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let mut command = Command::new(svc_binary());
    command.args(["ingress", "deploy", "--config", &config, "--relay", &silent_url]).env("SVC_RELAY_TOKEN", "t");
    let mut deploy = Proc::spawn("svc ingress deploy (waiting)", command);
    deploy.expect_line(Duration::from_secs(10), "the deploy's first line", |l| l.contains("sending project")).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    interrupt(&mut deploy, "svc ingress deploy (waiting)").await;
    held.abort();

    interrupt(&mut relay.proc, "svc relay serve").await;
    assert_eq!(survivors(&pids).await, Vec::<u32>::new(), "the job's app and agent are gone");
}

/// Every process under `pid` (by parent pid, from /proc).
fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // `pid (comm) S ppid ...`: the parent follows the state after the last `)`.
        let ppid = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok());
        if let Some(ppid) = ppid {
            parents.push((child, ppid));
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.split_off(1)
}

/// `svc ingress demo | head -1` used to end the demo on its next line (a panic, then a quiet
/// exit) with its app and agent left running: a server's stdout may close and it serves on.
#[test]
fn a_demo_whose_stdout_closes_keeps_its_jobs_and_ctrl_c_still_stops_them() {
    let dir = TempDir::new("int-demo-closed-stdout");
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let mut demo = Command::new(svc_binary())
        .args(["ingress", "demo", "--data-dir"])
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0"])
        .env("SVC_NODE", super::process::node())
        .stdin(std::process::Stdio::null())
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("svc ingress demo starts");
    let pid = demo.id();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut jobs = Vec::new();
    while std::time::Instant::now() < deadline {
        assert!(demo.try_wait().expect("wait").is_none(), "the demo ended when its stdout closed");
        jobs = descendants(pid);
        if jobs.len() >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(jobs.len() >= 2, "the app and the agent run under the demo: {jobs:?}");
    // Past the `ready` line (or the wait for it): the demo still runs.
    std::thread::sleep(Duration::from_secs(3));
    assert!(demo.try_wait().expect("wait").is_none(), "the demo still runs");
    signal(pid, "INT");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = demo.try_wait().expect("wait") {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = demo.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    for &job in &jobs {
        if alive(job) {
            super::process::signal_quietly(job, "KILL");
        }
    }
    let mut stderr = String::new();
    let _ = std::io::Read::read_to_string(&mut demo.stderr.take().expect("stderr"), &mut stderr);
    assert_eq!(status.and_then(|s| s.code()), Some(130), "exit 130 after Ctrl-C: {status:?}\n{stderr}");
    let left: Vec<u32> = jobs.iter().copied().filter(|&j| alive(j)).collect();
    assert!(left.is_empty(), "no job process is left: {left:?}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
