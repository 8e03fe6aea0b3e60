//! A cgroup per job, on this host's real hierarchies (v1 here and in CI, where the service
//! runs as root): a process joins by writing its pid into the group's `procs_files` and
//! execs its program, as a job's first step does. Memory is bounded for the group as a
//! whole, memfd included, and an OOM kill is told; forks beyond the process bound fail; a
//! busy loop gets its CPU quota and no more; groups are gone once removed or dropped, and
//! the groups of a service that is gone are swept. Through the runner: a job over its
//! memory is killed whole (its app and its agent), says so, and another job runs on.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use svc_runner::{
    Cgroups, Confined, DEFAULT_UID_BASE, JobCgroup, JobResources, JobRunner, JobSpec, Limits, LocalRunner, Part,
};

const MIB: u64 = 1024 * 1024;

/// The host's cgroups for jobs, or `None` (the test skips, or fails in CI) where it has none.
fn cgroups() -> Option<Cgroups> {
    match Cgroups::detect() {
        Ok(cgroups) => Some(cgroups),
        Err(e) => {
            svc_test_require::skip(&format!("jobs cannot have cgroups here (run as root): {e}"));
            None
        }
    }
}

/// `script` run by `sh` inside `group`: the shell joins, then execs another shell.
fn joined(group: &JobCgroup, script: &str) -> Command {
    let mut command = Command::new("sh");
    command
        .args(["-c", r#"for f; do echo $$ > "$f" || exit 99; done; exec sh -c "$SCRIPT""#, "sh"])
        .args(group.procs_files())
        .env("SCRIPT", script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn run(group: &JobCgroup, script: &str) -> Output {
    joined(group, script).output().expect("sh runs")
}

/// A python3 outside any user's home, or `None` (the test skips, or fails in CI).
fn python() -> Option<&'static str> {
    let found = ["/usr/bin/python3", "/usr/local/bin/python3"].into_iter().find(|p| std::path::Path::new(p).is_file());
    if found.is_none() {
        svc_test_require::skip("python3 allocates memory in this test (Debian: apt-get install python3)");
    }
    found
}

#[test]
fn a_group_over_its_memory_has_a_process_killed_and_says_so() {
    let Some(cgroups) = cgroups() else { return };
    let group = cgroups
        .create("oom", JobResources { memory_bytes: 64 * MIB, ..JobResources::DEFAULT })
        .expect("a group is made");
    assert!(!group.out_of_memory());
    let out = run(&group, "head -c 300M /dev/zero | tail > /dev/null; echo status $?");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("status 137"), "tail killed by SIGKILL: {said:?} {:?}", String::from_utf8_lossy(&out.stderr));
    assert!(group.out_of_memory(), "the group tells it was over its memory");
    let dirs = group.dirs().to_vec();
    group.remove().expect("removed");
    assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
}

#[test]
fn memory_is_bounded_for_every_process_of_the_group_together() {
    // The finding: one job held 8 x 400 MiB with a per-process bound. Here four processes of
    // 40 MiB each fit a per-process bound of anything over 40 MiB, not a group's 100 MiB.
    let Some(cgroups) = cgroups() else { return };
    let group = cgroups
        .create("together", JobResources { memory_bytes: 100 * MIB, ..JobResources::DEFAULT })
        .expect("a group is made");
    let Some(python) = python() else { return };
    let hold = format!("{python} -c 'b = bytearray(40 << 20); import time; time.sleep(30)'");
    let script = format!("for i in 1 2 3 4; do {hold} & done; wait; echo done");
    let mut child = joined(&group, &script).spawn().expect("sh runs");
    let started = Instant::now();
    while !group.out_of_memory() && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(group.out_of_memory(), "four processes of 40 MiB are over a group of 100 MiB together");
    assert!(group.memory_used().expect("usage") <= 100 * MIB);
    // The runner then ends the rest.
    group.kill_all();
    assert!(group.pids().is_empty());
    let _ = child.wait();
    group.remove().expect("removed");
}

#[test]
fn memfd_memory_counts_against_the_group() {
    let Some(cgroups) = cgroups() else { return };
    let group = cgroups
        .create("memfd", JobResources { memory_bytes: 64 * MIB, ..JobResources::DEFAULT })
        .expect("a group is made");
    let Some(python) = python() else { return };
    let script = format!(
        "{python} -c 'import os; fd = os.memfd_create(\"x\"); [os.write(fd, bytes(1 << 20)) for _ in range(200)]; print(\"held\")'; echo status $?"
    );
    let out = run(&group, &script);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!said.contains("held") && said.contains("status 137"), "{said:?}");
    assert!(group.out_of_memory());
    group.remove().expect("removed");
}

#[test]
fn forks_beyond_the_process_bound_fail() {
    let Some(cgroups) = cgroups() else { return };
    let group =
        cgroups.create("forks", JobResources { processes: 8, ..JobResources::DEFAULT }).expect("a group is made");
    let mut child = joined(&group, "i=0; while [ $i -lt 20 ]; do sleep 30 & i=$((i+1)); done; echo forked; sleep 30")
        .spawn()
        .expect("sh runs");
    let started = Instant::now();
    let mut seen = 0;
    while started.elapsed() < Duration::from_secs(2) {
        seen = seen.max(group.pids().len());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!((4..=8).contains(&seen), "at most 8 processes at once, {seen} seen");
    group.kill_all();
    let out = wait(&mut child);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.to_lowercase().contains("fork"), "the shell was refused a fork: {stderr:?}");
    group.remove().expect("removed");
}

#[test]
fn a_busy_loop_gets_its_cpu_quota_and_no_more() {
    let Some(cgroups) = cgroups() else { return };
    let group =
        cgroups.create("cpu", JobResources { cpu_millicores: 200, ..JobResources::DEFAULT }).expect("a group is made");
    let mut child = joined(&group, "while :; do :; done").spawn().expect("sh runs");
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(200));
    let (cpu_before, wall_before) = (cpu_time(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    let ratio = (cpu_time(pid) - cpu_before).as_secs_f64() / wall_before.elapsed().as_secs_f64();
    eprintln!("a busy loop bounded to 200 millicores used {ratio:.3} of a core");
    group.kill_all();
    let _ = wait(&mut child);
    group.remove().expect("removed");
    assert!(ratio <= 0.26, "200 millicores: {ratio:.3} of a core");
    assert!(ratio >= 0.05, "it ran at all: {ratio:.3}");
}

#[test]
fn a_dropped_group_kills_its_processes_and_is_removed() {
    let Some(cgroups) = cgroups() else { return };
    let group = cgroups.create("dropped", JobResources::DEFAULT).expect("a group is made");
    let mut child = joined(&group, "sleep 30 & sleep 30 & wait").spawn().expect("sh runs");
    let started = Instant::now();
    while group.pids().len() < 3 && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(group.pids().len(), 3);
    let dirs = group.dirs().to_vec();
    drop(group);
    let out = wait(&mut child);
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&out.status), Some(9));
    let started = Instant::now();
    while dirs.iter().any(|d| d.exists()) && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
}

#[test]
fn the_groups_of_a_service_that_is_gone_are_swept_at_start() {
    let Some(cgroups) = cgroups() else { return };
    let group = cgroups.create("sweep", JobResources::DEFAULT).expect("a group is made");
    // A pid that was and is no more: a finished child's.
    let mut gone = Command::new("true").spawn().expect("true runs");
    let dead = gone.id();
    gone.wait().expect("reaped");
    let left: Vec<PathBuf> =
        group.dirs().iter().map(|d| d.parent().expect("svc-jobs").join(format!("{dead}-0"))).collect();
    for dir in &left {
        std::fs::create_dir(dir).expect("a leftover group");
    }
    let mut orphan = Command::new("sh")
        .args(["-c", r#"for f; do echo $$ > "$f"; done; exec sleep 30"#, "sh"])
        .args(left.iter().map(|d| d.join("cgroup.procs")))
        .spawn()
        .expect("sh runs");
    std::thread::sleep(Duration::from_millis(100));
    assert!(cgroups.sweep() >= 1);
    assert!(left.iter().all(|d| !d.exists()), "{left:?}");
    let status = orphan.wait().expect("reaped");
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "its process was killed");
    assert!(group.dirs().iter().all(|d| d.exists()), "a live service's groups are kept");
    group.remove().expect("removed");
}

fn wait(child: &mut Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the process ended");
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = child.wait().expect("reaped");
    let read = |stream: Option<&mut dyn std::io::Read>| {
        let mut buf = Vec::new();
        if let Some(s) = stream {
            let _ = s.read_to_end(&mut buf);
        }
        buf
    };
    let stdout = read(child.stdout.as_mut().map(|s| s as &mut dyn std::io::Read));
    let stderr = read(child.stderr.as_mut().map(|s| s as &mut dyn std::io::Read));
    Output { status, stdout, stderr }
}

/// The CPU time `pid` has had, from `/proc/PID/schedstat` (nanoseconds on a CPU first).
fn cpu_time(pid: u32) -> Duration {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).expect("schedstat");
    Duration::from_nanos(text.split_whitespace().next().and_then(|n| n.parse().ok()).expect("a number"))
}

fn shell(script: &str) -> Confined {
    Confined {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        env: Vec::new(),
        mounts: Vec::new(),
        cwd: "/".into(),
    }
}

fn job(id: &str, app: &str, agent: &str, resources: Option<JobResources>) -> JobSpec {
    JobSpec { agent: Some(shell(agent)), resources, ..JobSpec::new(id, shell(app)) }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_runner_job_over_its_memory_is_killed_whole_and_says_so_and_another_runs_on() {
    let Some(cgroups) = cgroups() else { return };
    let runner = LocalRunner::new(Limits::default(), DEFAULT_UID_BASE)
        .await
        .expect("bubblewrap works here")
        .with_cgroups(cgroups, JobResources::DEFAULT);
    // The app's shell lives on after its `tail` is killed: the runner ends it, and the agent.
    let small = JobResources { memory_bytes: 64 * MIB, ..JobResources::DEFAULT };
    let hog = job("dep_hog", "head -c 300M /dev/zero | tail; exec sleep 30", "exec sleep 30", Some(small));
    let calm = job("dep_calm", "exec sleep 30", "exec sleep 30", None);
    let mut calm = runner.launch(&calm).expect("launched");
    let mut hog = runner.launch(&hog).expect("launched");
    let started = Instant::now();
    let mut exits = Vec::new();
    let mut lines = Vec::new();
    while exits.len() < 2 && started.elapsed() < Duration::from_secs(15) {
        lines.extend(hog.output());
        exits.extend(hog.exited());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(exits.len(), 2, "the app and the agent ended: {exits:?}");
    for exit in &exits {
        assert!(exit.out_of_memory && exit.signal == Some(9), "{exit:?}: {lines:?}");
    }
    assert!(exits.iter().any(|e| e.part == Part::Agent), "the agent went with it");
    assert_eq!(
        exits[0].to_string(),
        format!("the {} was killed by signal 9: the job was over its memory (out_of_memory)", exits[0].part.as_str())
    );
    assert!(calm.exited().is_none(), "the other job runs on");
    assert_eq!(calm.pids().len(), 2);
    let _ = hog.stop().await;
    let _ = calm.stop().await;
}

/// Issue 44, point 5: a job over its memory is seen without a look on a timer. Its group's
/// memory events descriptor turns readable when the kernel kills a process of it (here one of
/// several: the shell lives on), and not before.
#[test]
fn a_groups_memory_events_turn_readable_when_a_process_of_it_is_killed() {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    let Some(cgroups) = cgroups() else { return };
    let group = cgroups
        .create("oom-events", JobResources { memory_bytes: 64 * MIB, ..JobResources::DEFAULT })
        .expect("a group is made");
    let events = group.memory_events().expect("this kernel tells memory events");
    let readable_within = |seconds: i64| {
        let mut fds = [PollFd::new(&events, PollFlags::IN)];
        poll(&mut fds, Some(&Timespec { tv_sec: seconds, tv_nsec: 0 })).expect("poll") == 1
    };
    let mut quiet = joined(&group, "exec sleep 30").spawn().expect("sh runs");
    assert!(!readable_within(1), "nothing moved yet");
    assert!(!events.take().expect("read"));
    let mut hog = joined(&group, "head -c 300M /dev/zero | tail > /dev/null; echo status $?; exec sleep 30")
        .spawn()
        .expect("sh runs");
    assert!(readable_within(10), "the kill is told");
    assert!(events.take().expect("read"), "and taken");
    // The event comes as the kernel starts the kill; its count may lag it for a moment (a CI
    // run under load read it before it moved).
    let deadline = Instant::now() + Duration::from_secs(5);
    while !group.out_of_memory() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(group.out_of_memory(), "the group counts the kill");
    assert_eq!(hog.try_wait().expect("wait"), None, "the hog's shell lives on: only the events tell");
    let _ = (hog.kill(), quiet.kill(), hog.wait(), quiet.wait());
    group.remove().expect("removed");
}

/// Issue 44, point 5: an idle job costs nothing. Once its programs are found, a quiet job's
/// [`svc_runner::RunningJob::changed`] does not resolve (no timer: not for its exit, its
/// output or its memory events), waiting keeps its lifeline open, and its app's end wakes the
/// waiter at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_quiet_job_wakes_no_one_and_its_end_wakes_at_once() {
    let Some(cgroups) = cgroups() else { return };
    let runner = LocalRunner::new(Limits::default(), DEFAULT_UID_BASE)
        .await
        .expect("bubblewrap works here")
        .with_cgroups(cgroups, JobResources::DEFAULT);
    let mut quiet = runner.launch(&job("dep_quiet", "exec sleep 30", "exec sleep 30", None)).expect("launched");
    let started = Instant::now();
    while quiet.pids().len() < 2 {
        assert!(started.elapsed() < Duration::from_secs(10), "its programs run");
        let _ = tokio::time::timeout(Duration::from_secs(1), quiet.changed()).await;
    }
    assert!(quiet.exited().is_none());
    let woke = tokio::time::timeout(Duration::from_secs(3), quiet.changed()).await;
    assert!(woke.is_err(), "a quiet job woke its waiter");
    assert!(quiet.exited().is_none(), "waiting kept it running");
    let app = quiet.pids()[0];
    let killed = std::process::Command::new("kill").args(["-KILL", &app.to_string()]).status().expect("kill runs");
    assert!(killed.success());
    let woke = tokio::time::timeout(Duration::from_secs(1), quiet.changed()).await;
    assert!(woke.is_ok(), "its end woke its waiter within a second");
    let exit = quiet.exited().expect("its app ended");
    assert_eq!((exit.part, exit.signal, exit.out_of_memory), (Part::App, Some(9), false), "{exit:?}");
    let _ = quiet.stop().await;
}
