//! Issue 41: a job launched in the last moments before a `kill -9` of its service ran on,
//! unowned, until the next start swept it. A process hosting the runner (this test binary,
//! run again as [`host_launching_jobs_until_killed`]) launches jobs without pause and is
//! killed with SIGKILL at a random moment; no process of any of its jobs may outlive it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use svc_runner::{Confined, DEFAULT_UID_BASE, JobRunner, JobSpec, Limits, LocalRunner};

/// The environment variable that makes [`host_launching_jobs_until_killed`] run, with the
/// marker its jobs carry.
const HOST: &str = "SVC_RUNNER_KILL9_HOST";

/// The processes whose command line has `marker` as one of its arguments.
fn processes_marked(marker: &str) -> Vec<u32> {
    let entries = std::fs::read_dir("/proc").unwrap_or_else(|e| panic!("/proc cannot be listed: {e}"));
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| line.split(|&b| b == 0).any(|arg| arg == marker.as_bytes()))
        })
        .collect()
}

fn described(pids: &[u32]) -> Vec<String> {
    pids.iter()
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            format!("{pid}: {} | {}", stat.trim_end(), String::from_utf8_lossy(&cmdline).replace('\0', " "))
        })
        .collect()
}

/// Not a test of its own: the process the test kills. Launches jobs marked with `$HOST`'s
/// value, one after another, keeping them, until it is killed.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "run by a_job_launched_just_before_a_kill_9_of_its_service_does_not_outlive_it"]
async fn host_launching_jobs_until_killed() {
    let Ok(marker) = std::env::var(HOST) else { return };
    let runner = LocalRunner::new(Limits::default(), DEFAULT_UID_BASE).await.expect("bubblewrap works here");
    println!("svc-host-ready");
    let mut jobs = Vec::new();
    for n in 0..200 {
        let forever = Confined {
            argv: vec!["sh".into(), "-c".into(), "while :; do sleep 1; done".into(), marker.clone().into()],
            env: Vec::new(),
            mounts: Vec::new(),
            cwd: "/".into(),
        };
        let job = JobSpec { capture_output: false, ..JobSpec::new(format!("dep_kill9_{n}"), forever) };
        jobs.push(runner.launch(&job).expect("launched"));
    }
    tokio::time::sleep(Duration::from_secs(60)).await;
}

#[test]
fn a_job_launched_just_before_a_kill_9_of_its_service_does_not_outlive_it() {
    let exe = std::env::current_exe().expect("this test's binary");
    let mut leaked = Vec::new();
    let mut seen = 0;
    let rounds = 12;
    for round in 0..rounds {
        let marker = format!("svc-kill9-{}-{round}", std::process::id());
        let mut host = Command::new(&exe)
            .args(["--exact", "host_launching_jobs_until_killed", "--ignored", "--nocapture", "--test-threads=1"])
            .env(HOST, &marker)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("the host starts");
        let stdout = host.stdout.take().expect("piped");
        let ready = BufReader::new(stdout).lines().map_while(Result::ok).any(|line| line.ends_with("svc-host-ready"));
        assert!(ready, "the host did not start its runner");
        // A different moment each round, among the launches (each a few tens of ms).
        let jitter = u64::from(
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos()),
        );
        std::thread::sleep(Duration::from_millis(20 + jitter % 400));
        // The scan must see the host's jobs running (else finding none after proves nothing).
        if !processes_marked(&marker).is_empty() {
            seen += 1;
        }
        host.kill().expect("SIGKILL");
        host.wait().expect("reaped");
        // What dies with its service dies at once; 5 s is plenty.
        let started = Instant::now();
        let mut left = processes_marked(&marker);
        while !left.is_empty() && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(50));
            left = processes_marked(&marker);
        }
        leaked.extend(described(&left));
        // Leave the machine as found.
        for pid in left {
            if let Some(pid) = rustix::process::Pid::from_raw(i32::try_from(pid).unwrap_or(0)) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
    assert!(seen * 2 >= rounds, "the host's jobs were seen running in {seen} of {rounds} rounds");
    assert_eq!(leaked, Vec::<String>::new(), "processes of jobs that outlived their service in {rounds} kills");
}
