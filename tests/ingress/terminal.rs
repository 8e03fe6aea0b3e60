//! `svc ingress deploy` at the terminal (issue 42, point 4): a validation that fails is said
//! with its hint as soon as the relay knows it, not after the deploy's timeout; Ctrl-C says
//! what keeps running, until when it is funded, and the exact commands to follow and stop it
//! (which work); a redeploy whose new revision fails says that revision failed and which
//! one still serves, and exits 1.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use svc_e2e::service::{TempDir, svc_binary};
use tokio::time::Instant;

use super::deploy::{Relay, node_demo_project, state};
use super::process::{Proc, signal};

/// Makes the project's app listen where the agent does not look (a fixed port, not `PORT`):
/// it starts, and never answers its health path.
fn break_port(project: &Path) {
    let server = project.parent().expect("the project's directory").join("server.js");
    let text = std::fs::read_to_string(&server).expect("read server.js");
    let broken = text.replace("const port = Number(process.env.PORT || 8080);", "const port = 8099;");
    assert_ne!(broken, text, "server.js reads PORT as it used to");
    std::fs::write(&server, broken).expect("write server.js");
}

/// `svc ingress deploy ARGS --relay API` as a process whose lines are collected.
fn deploy(relay: &Relay, config: &str, extra: &[&str]) -> Proc {
    let mut command = Command::new(svc_binary());
    command
        .args(["ingress", "deploy", "--config", config])
        .args(extra)
        .args(["--relay", &relay.api])
        .env("SVC_RELAY_TOKEN", &relay.token)
        .env_remove("SVC_RELAY")
        .env_remove("SVC_CA");
    Proc::spawn("svc ingress deploy", command)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_validation_is_said_at_once_and_ctrl_c_names_what_keeps_running() {
    let dir = TempDir::new("terminal-ctrl-c");
    let relay = Relay::start(&dir.path().join("relay"), &["--public".into(), "127.0.0.1:0".into()]).await;
    let project = node_demo_project(dir.path());
    break_port(&project);
    let config = project.to_string_lossy().into_owned();

    let started = Instant::now();
    let mut proc = deploy(&relay, &config, &["--timeout", "120"]);
    // The hint comes with the first failed validation, long before the 120 s timeout.
    let problem = proc
        .wait_line(0, Duration::from_secs(30), |l| l.contains("problem:") && l.contains("health_failing"))
        .await
        .unwrap_or_else(|| panic!("no hint within 30 s of a 120 s deploy\n{}", proc.output()));
    let said_after = started.elapsed();
    assert!(said_after < Duration::from_secs(30), "the hint came after {said_after:?}: {problem}");
    let lines = proc.lines();
    let at = lines.iter().position(|l| *l == problem).expect("the problem's line");
    assert!(
        lines.get(at + 1).is_some_and(|l| l.contains("fix: Make the app answer 200 on its health path")),
        "the fix follows the problem: {lines:#?}"
    );
    // Once: the wait goes on, and the same problem is not said again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let told = proc.lines().iter().filter(|l| l.contains("problem:")).count();
    assert_eq!(told, 1, "the problem is said once\n{}", proc.output());

    signal(proc.pid(), "INT");
    let status = proc.wait_exit(Duration::from_secs(10)).await;
    assert_eq!(status.and_then(|s| s.code()), Some(130), "exit 130 after Ctrl-C\n{}", proc.output());
    let note = proc
        .lines()
        .into_iter()
        .find(|l| l.starts_with("interrupted: deployment dep_"))
        .unwrap_or_else(|| panic!("Ctrl-C says what it left\n{}", proc.output()));
    assert!(note.contains("keeps running") && note.contains("funded for 1 period"), "{note}");
    let id = note.split_whitespace().nth(2).expect("the deployment's ID").to_owned();
    let after = |label: &str| -> Vec<String> {
        let rest = note.split(label).nth(1).unwrap_or_else(|| panic!("{label} in {note}"));
        let command = rest.split(" or ").next().unwrap_or(rest).split(';').next().unwrap_or(rest);
        command.split_whitespace().map(str::to_owned).collect()
    };
    // The commands it names are exact: they reach the deployment as printed.
    let follow = after("follow it: ");
    assert_eq!(follow[..4], ["svc", "ingress", "status", "--deployment"], "{note}");
    assert!(follow.contains(&id) && follow.contains(&relay.api), "{note}");
    let run = |words: &[String]| {
        Command::new(svc_binary())
            .args(&words[1..])
            .env("SVC_RELAY_TOKEN", &relay.token)
            .env_remove("SVC_RELAY")
            .output()
            .expect("svc")
    };
    let out = run(&follow);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains(&id) && text.contains("validating"), "{text}");
    // A deploy whose wait times out says the same: the deployment keeps running.
    let (code, out, err) = relay.svc(&["deploy", "--config", &config, "--timeout", "2"]).await;
    assert_eq!(code, 1, "not live within 2 s: {out}\n{err}");
    let said = format!("svc ingress deploy: stopped waiting; deployment {id} (revision 1) keeps running (validating)");
    assert!(err.contains(&said) && err.contains("stop it: svc ingress stop --deployment"), "{err}");

    let stop = after("stop it: ");
    assert_eq!(stop[..3], ["svc", "ingress", "stop"], "{note}");
    let out = run(&stop);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let status = relay.json(&["status", "--deployment", &id]).await;
    assert_eq!(state(&status), "stopped", "{status:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redeploy_whose_new_revision_fails_says_it_failed_and_which_still_serves() {
    let dir = TempDir::new("terminal-redeploy");
    // The new revision fails at its deadline: 10 s here (the hidden flag's least) instead of
    // the default minute. Its problem is said with the first failed validation, long before
    // (0.6 s after the deploy began, 3 runs side by side on 2 busy cores).
    const DEADLINE_SECS: u64 = 10;
    let deadline = ["--successor-deadline-secs", &DEADLINE_SECS.to_string()];
    let (relay, config) = Relay::with_live_demo(dir.path(), &deadline).await;
    break_port(Path::new(&config));
    let started = Instant::now();
    let mut proc = deploy(&relay, &config, &[]);
    let status = proc.wait_exit(Duration::from_secs(150)).await;
    let output = proc.output();
    assert_eq!(status.and_then(|s| s.code()), Some(1), "a failed revision fails the deploy\n{output}");
    let lines = proc.lines();
    // Its validation's problem and fix, said while it still had time, long before it failed.
    // (A validation before the new agent has its certificate fails its handshake first, on a
    // loaded machine: that problem is said too, each reason once, before this one.)
    let health = "fix: Make the app answer 200 on its health path";
    let is_problem = |l: &str| {
        l.contains("problem: revision 2: validation failed")
            && l.contains("revision 1 serves meanwhile")
            && l.contains(health)
    };
    let problem = lines
        .iter()
        .find(|l| is_problem(l))
        .unwrap_or_else(|| panic!("the new revision's problem, said as it happened\n{output}"));
    assert!(problem.contains(health), "{problem}");
    let first = proc.last_line_time(is_problem).expect("when");
    let said = first.duration_since(started);
    println!("the problem was said {said:?} after the deploy began ({DEADLINE_SECS} s deadline)");
    assert!(said < Duration::from_secs(DEADLINE_SECS), "said late, not before the deadline\n{output}");
    assert!(!lines.iter().any(|l| l.contains("revision 2 serves")), "revision 2 never served\n{output}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("svc ingress: revision 2 failed: ") && l.contains("revision 1 still serves")),
        "{output}"
    );
    let within = format!("did not pass validation within {DEADLINE_SECS} s");
    assert!(output.contains(&within), "failed at the relay's deadline\n{output}");
    assert!(lines.iter().any(|l| l.contains("(redeploy_failed)")), "the hint\n{output}");
    assert!(!lines.iter().any(|l| l.contains("(funds_low)")), "only the deploy's problem\n{output}");
    let status = relay.json(&["status", "--config", &config]).await;
    assert_eq!((&status["deployment"]["revision"], state(&status)), (&1.into(), "live"), "{status:#}");
}
