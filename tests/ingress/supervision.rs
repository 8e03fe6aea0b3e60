//! Dead jobs are noticed: a job whose app or agent exits is seen within 2 s, logged with its
//! exit status, restarted with backoff, and after too many restarts failed with a
//! `job_exited` hint; the time without a serving job is refundable downtime. No zombie is
//! left behind.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use svc_e2e::service::TempDir;

use super::deploy::{Relay, hint_codes, state};
use super::process::signal;

pub(super) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn pids(status: &Value) -> (u32, u32) {
    let pids: Vec<u32> =
        status["processes"].as_array().expect("pids").iter().filter_map(|p| p.as_u64()).map(|p| p as u32).collect();
    match pids[..] {
        [app, agent] => (app, agent),
        _ => panic!("app and agent pids in {status:#}"),
    }
}

/// The newest transition to `to` after `since` (Unix ms): its time and reason.
pub(super) fn transition_after(status: &Value, to: &str, since: i64) -> Option<(i64, String)> {
    status["transitions"].as_array()?.iter().rev().find_map(|t| {
        // `svc --format json` writes times as RFC 3339.
        let at = humantime::parse_rfc3339(t["at"].as_str()?).ok()?.duration_since(UNIX_EPOCH).ok()?.as_millis() as i64;
        (t["to"] == to && at >= since).then(|| (at, t["reason"].as_str().unwrap_or("").to_owned()))
    })
}

/// Child processes of `pid` that are zombies (exited, never waited for). Fails the test when
/// `/proc` cannot be listed: an empty answer would read as "none".
fn zombies_of(pid: u32) -> Vec<u32> {
    let entries = std::fs::read_dir("/proc").unwrap_or_else(|e| panic!("/proc cannot be listed: {e}"));
    entries
        .map(|e| e.unwrap_or_else(|e| panic!("/proc cannot be listed: {e}")))
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, r)| r).split_whitespace().collect();
                fields.first() == Some(&"Z") && fields.get(1).and_then(|p| p.parse().ok()) == Some(pid)
            })
        })
        .collect()
}

/// Checks [`zombies_of`] before it is trusted to find none: a child of this test that has
/// exited and was not waited for must be one.
fn the_zombie_scan_sees_a_zombie() {
    let mut child = std::process::Command::new("true").spawn().expect("`true` runs");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !zombies_of(std::process::id()).contains(&child.id()) {
        assert!(std::time::Instant::now() < deadline, "the scan does not see this test's exited child {}", child.id());
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait().expect("the child reaped");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_whose_app_or_agent_exits_is_restarted_then_failed_with_job_exited() {
    the_zombie_scan_sees_a_zombie();
    let dir = TempDir::new("dead-jobs");
    let (relay, config) =
        Relay::with_live_demo(dir.path(), &["--max-restarts", "2", "--downtime-tolerance-bps", "0"]).await;
    let project = std::path::PathBuf::from(&config);
    let mut status = relay.json(&["status", "--config", &config]).await;

    // The app, then the agent, dies: each seen within 2 s, logged, restarted, live again.
    for (n, part) in [(1, "app"), (2, "agent")] {
        let (app, agent) = pids(&status);
        let victim = if part == "app" { app } else { agent };
        let killed_at = now_ms();
        signal(victim, "KILL");
        let (seen, _) = relay
            .wait_status(&project, Duration::from_secs(10), "the restart", |s| {
                transition_after(s, "provisioning", killed_at).is_some()
            })
            .await;
        let (at, reason) = transition_after(&seen, "provisioning", killed_at).expect("a restart");
        assert!(at - killed_at <= 2_000, "the {part}'s death was seen after {} ms", at - killed_at);
        assert!(reason.contains(&format!("the {part} was killed by signal 9")), "{reason}");
        assert!(reason.contains(&format!("restart {n} of 2")), "{reason}");
        let (live, _) =
            relay.wait_status(&project, Duration::from_secs(40), "live again", |s| state(s) == "live").await;
        let (new_app, new_agent) = pids(&live);
        assert!(new_app != app && new_agent != agent, "a new job: {live:#}");
        assert!(!std::path::Path::new(&format!("/proc/{victim}")).exists(), "pid {victim} is gone, not a zombie");
        assert_eq!(zombies_of(relay.proc.pid()), Vec::<u32>::new(), "the coordinator reaps its children");
        status = live;
    }
    let (code, logs, err) = relay.svc(&["logs", "--config", &config]).await;
    assert_eq!(code, 0, "{err}");
    assert!(logs.contains("the app was killed by signal 9"), "{logs}");
    assert!(logs.contains("the agent was killed by signal 9"), "{logs}");

    // A third death within the window: no more restarts, a `job_exited` hint.
    let (app, _) = pids(&status);
    let killed_at = now_ms();
    signal(app, "KILL");
    let (failed, _) = relay.wait_status(&project, Duration::from_secs(10), "failed", |s| state(s) == "failed").await;
    let (at, reason) = transition_after(&failed, "failed", killed_at).expect("the failure");
    assert!(at - killed_at <= 2_000, "seen after {} ms", at - killed_at);
    assert!(reason.contains("the app was killed by signal 9") && reason.contains("2 restarts"), "{reason}");
    assert_eq!(failed["deployment"]["failureCode"], "job_exited", "{failed:#}");
    assert_eq!(hint_codes(&failed["hints"]), ["job_exited"], "{failed:#}");
    assert_eq!(failed["processes"], serde_json::json!([]), "no job runs: {failed:#}");
    // The scheduler restarted the same job on its processor: one execution, its restarts
    // counted, ended by the last death (each death is in the logs above).
    let executions = relay.json(&["executions", "--config", &config]).await;
    let ends: Vec<(u64, u64, &str, &str)> = executions["recent"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            let attempt = e["attempt"].as_u64().unwrap_or(0);
            let restarts = e["restarts"].as_u64().unwrap_or(0);
            (attempt, restarts, e["state"].as_str().unwrap_or(""), e["reason"]["code"].as_str().unwrap_or(""))
        })
        .collect();
    assert_eq!(ends, [(1, 2, "failed", "killed")], "{executions:#}");
    assert_eq!(executions["convergence"]["state"], "blocked", "{executions:#}");
    assert_eq!(executions["convergence"]["reason"]["code"], "job_exited", "{executions:#}");

    // The time without a serving job is downtime, and refundable once the deployment stops.
    let stopped = relay.json(&["stop", "--config", &config]).await;
    assert_eq!(stopped["state"], "stopped");
    let sessions = relay.json(&["sessions", "--config", &config]).await;
    let first = &sessions["sessions"][0];
    assert!(first["unservedMs"].as_u64() > Some(0), "the restarts are downtime: {sessions:#}");
    assert!(first["refundableMicros"].as_u64() > Some(0), "{sessions:#}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_coordinator_killed_with_sigkill_leaves_no_orphaned_job() {
    let dir = TempDir::new("orphans");
    let (relay, config) = Relay::with_live_demo(dir.path(), &[]).await;
    let (app, agent) = pids(&relay.json(&["status", "--config", &config]).await);
    assert!(super::process::alive(app) && super::process::alive(agent));
    signal(relay.proc.pid(), "KILL");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while (super::process::alive(app) || super::process::alive(agent)) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!super::process::alive(app), "the app outlived its coordinator");
    assert!(!super::process::alive(agent), "the agent outlived its coordinator");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_job_is_live_again_in_seconds_not_a_revalidation_interval() {
    let dir = TempDir::new("quick-relive");
    // The default interval: 30 s between validations of a live route.
    let (relay, config) = Relay::with_live_demo(dir.path(), &["--revalidate-secs", "30"]).await;
    let project = std::path::PathBuf::from(&config);
    let (app, _) = pids(&relay.json(&["status", "--config", &config]).await);
    let killed_at = now_ms();
    signal(app, "KILL");
    relay
        .wait_status(&project, Duration::from_secs(10), "the restart", |s| {
            transition_after(s, "provisioning", killed_at).is_some()
        })
        .await;
    let (live, took) = relay.wait_status(&project, Duration::from_secs(25), "live again", |s| state(s) == "live").await;
    assert!(took < Duration::from_secs(10), "live again after {took:?}: {live:#}");
}

/// The job's group in the v1 memory hierarchy (or the v2 group) of process `pid`, as this
/// test sees it.
fn memory_group_of(pid: u32) -> std::path::PathBuf {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("its cgroups");
    let line = |prefix: &str| {
        text.lines().find_map(|l| {
            let (_, rest) = l.split_once(':')?;
            let (controllers, path) = rest.split_once(':')?;
            (controllers.split(',').any(|c| c == prefix) || (prefix.is_empty() && controllers.is_empty()))
                .then(|| path.to_owned())
        })
    };
    match line("memory") {
        Some(path) => std::path::Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/')),
        None => std::path::Path::new("/sys/fs/cgroup").join(line("").expect("a v2 group").trim_start_matches('/')),
    }
}

/// Issue 39, point 2: a relay job over its memory (a process in its cgroup allocating 1 GiB
/// beside the app and agent, over the job's 512 MiB) is killed whole, and the deployment's
/// state and log say `out_of_memory`; it is restarted like any job that ended.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_over_its_memory_is_killed_whole_and_its_deployment_says_so() {
    let dir = TempDir::new("oom-job");
    let (relay, config) = Relay::with_live_demo(dir.path(), &[]).await;
    let project = std::path::PathBuf::from(&config);
    let status = relay.json(&["status", "--config", &config]).await;
    let (app, agent) = pids(&status);
    let group = memory_group_of(app);
    assert_eq!(memory_group_of(agent), group, "the app and the agent are one job, in one group");
    assert!(group.to_string_lossy().contains("svc-jobs"), "{}", group.display());
    let procs = group.join("cgroup.procs");
    let started = now_ms();
    let mut hog = std::process::Command::new("sh")
        .args(["-c", r#"echo $$ > "$1" && exec sh -c 'head -c 1024M /dev/zero | tail'"#, "sh"])
        .arg(&procs)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("sh runs");
    let (seen, _) = relay
        .wait_status(&project, Duration::from_secs(15), "the restart", |s| {
            transition_after(s, "provisioning", started).is_some()
        })
        .await;
    let (_, reason) = transition_after(&seen, "provisioning", started).expect("a restart");
    assert!(reason.contains("the job was over its memory (out_of_memory)"), "{reason}");
    let _ = hog.wait();
    for pid in [app, agent] {
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "pid {pid} went with its job");
    }
    let (code, logs, err) = relay.svc(&["logs", "--config", &config]).await;
    assert_eq!(code, 0, "{err}");
    assert!(logs.contains("out_of_memory"), "{logs}");
    relay.wait_status(&project, Duration::from_secs(40), "live again", |s| state(s) == "live").await;
}
