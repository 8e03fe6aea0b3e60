//! The local job runner with real sandboxes (bubblewrap must be installed, as `.ci/run`
//! does): a job's output reaches the engine through pipes, its last lines survive its end,
//! how it ended is read back exactly, and no process outlives a job.

use std::time::Duration;

use svc_runner::{Confined, DEFAULT_UID_BASE, Exit, JobRunner, JobSpec, Limits, LocalRunner, Part};

fn shell(script: &str) -> Confined {
    Confined {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        env: vec![("GREETING".to_owned(), "hello".to_owned())],
        mounts: Vec::new(),
        cwd: "/".into(),
    }
}

async fn runner() -> LocalRunner {
    LocalRunner::new(Limits::default(), DEFAULT_UID_BASE).await.expect("bubblewrap works here")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_jobs_output_and_exit_status_are_read_back_and_its_last_lines_kept() {
    let runner = runner().await;
    let job = JobSpec {
        agent: Some(shell("echo agent up; exec sleep 30")),
        ..JobSpec::new(
            "dep_test",
            shell("echo \"$GREETING from the app\"; echo 'to stderr' >&2; sleep 0.3; echo 'last words'; exit 3"),
        )
    };
    let mut running = runner.launch(&job).expect("launched");
    let mut exit = None;
    let mut lines = Vec::new();
    for _ in 0..100 {
        lines.extend(running.output());
        if let Some(e) = running.exited() {
            exit = Some(e);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(exit, Some(Exit { part: Part::App, code: Some(3), signal: None, out_of_memory: false }));
    lines.extend(running.stop().await);
    let app: Vec<&str> = lines.iter().filter(|(p, _)| *p == Part::App).map(|(_, l)| l.as_str()).collect();
    assert!(app.contains(&"hello from the app") && app.contains(&"to stderr"), "{lines:?}");
    assert!(app.contains(&"last words"), "the last line before the end is kept: {lines:?}");
    assert!(lines.iter().any(|(p, l)| *p == Part::Agent && l == "agent up"), "{lines:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_printing_more_than_the_file_size_limit_keeps_running() {
    // The job's file-size limit (256 MiB by default, 1 MiB here) bounds files it writes, not
    // what it prints: output goes through pipes, never to a file of the job's.
    let runner = LocalRunner::new(Limits { file_size_bytes: 1024 * 1024, ..Limits::default() }, DEFAULT_UID_BASE)
        .await
        .expect("bubblewrap works here");
    let app = shell(
        "i=0; while [ $i -lt 40000 ]; do echo \"line $i of a job that talks a lot\"; i=$((i+1)); done; echo done",
    );
    let job = JobSpec { agent: Some(shell("exec sleep 30")), ..JobSpec::new("dep_chatty", app) };
    let mut running = runner.launch(&job).expect("launched");
    let mut lines = Vec::new();
    let mut exit = None;
    for _ in 0..600 {
        lines.extend(running.output().into_iter().map(|(_, line)| line));
        exit = running.exited();
        if exit.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        exit,
        Some(Exit { part: Part::App, code: Some(0), signal: None, out_of_memory: false }),
        "after {} lines",
        lines.len()
    );
    // What it printed beyond its output budget (1.4 MB at once, 22 MB with each line's cost)
    // is dropped and counted: once its pipe is drained every byte is a line kept or is in a
    // notice.
    let printed: usize =
        (0..40_000).map(|i| format!("line {i} of a job that talks a lot\n").len()).sum::<usize>() + "done\n".len();
    let account = |lines: &[String]| {
        let dropped: usize =
            lines.iter().filter_map(|l| l.strip_prefix("[svc: ")?.split(' ').next()?.parse::<usize>().ok()).sum();
        lines.iter().filter(|l| !l.starts_with("[svc: ")).map(|l| l.len() + 1).sum::<usize>() + dropped
    };
    for _ in 0..100 {
        if account(&lines) == printed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        lines.extend(running.output().into_iter().map(|(_, line)| line));
    }
    assert_eq!(account(&lines), printed, "{:?}", lines.iter().filter(|l| l.starts_with("[svc: ")).collect::<Vec<_>>());
    assert!(lines.len() < 40_001, "some lines are dropped: {}", lines.len());
    assert!(lines.iter().any(|l| l.starts_with("[svc: ")), "and said so");
    running.stop().await;
}

/// The processes whose command line holds `marker` (zombies have none: they hold nothing).
/// Fails the test when `/proc` cannot be read: an empty answer would read as "none left".
fn processes_marked(marker: &str) -> Vec<u32> {
    let entries = std::fs::read_dir("/proc").unwrap_or_else(|e| panic!("/proc cannot be listed: {e}"));
    entries
        .map(|e| e.unwrap_or_else(|e| panic!("/proc cannot be listed: {e}")))
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| match std::fs::read(format!("/proc/{pid}/cmdline")) {
            Ok(line) => line.split(|&b| b == 0).any(|arg| arg == marker.as_bytes()),
            // Ended between the listing and the read.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::SRCH.raw_os_error()) => false,
            Err(e) => panic!("/proc/{pid}/cmdline cannot be read: {e}"),
        })
        .collect()
}

/// Checks the scan before it is trusted to find nothing: it must see a running job's
/// programs (under the job's own uid when the runner is root), then none once the job is
/// stopped.
async fn the_scan_sees_a_running_job(runner: &LocalRunner, marker: &str) {
    let running = runner.launch(&marked_job("dep_seen", marker)).expect("launched");
    let mut programs = Vec::new();
    for _ in 0..100 {
        programs = running.pids();
        let seen = processes_marked(marker);
        if programs.len() == 2 && programs.iter().all(|pid| seen.contains(pid)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = processes_marked(marker);
    assert!(
        programs.len() == 2 && programs.iter().all(|pid| seen.contains(pid)),
        "the scan for {marker} saw {seen:?}, not the running job's app and agent {programs:?}"
    );
    running.stop().await;
    assert_eq!(described(&left_after_stop(marker).await), Vec::<String>::new(), "the stopped job's processes");
}

/// Waits up to 5 s for every process marked `marker` to be gone; the ones left.
async fn left_after_stop(marker: &str) -> Vec<u32> {
    for _ in 0..100 {
        let left = processes_marked(marker);
        if left.is_empty() {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    processes_marked(marker)
}

/// A job whose app and agent loop for ever under `marker` (their `$0`, so it is on every
/// command line of the sandbox: bwrap's, its namespace init's and the shell's).
fn marked_job(id: &str, marker: &str) -> JobSpec {
    let forever = |marker: &str| Confined {
        argv: vec!["sh".into(), "-c".into(), "while :; do sleep 1; done".into(), marker.into()],
        env: Vec::new(),
        mounts: Vec::new(),
        cwd: "/".into(),
    };
    JobSpec { agent: Some(forever(marker)), capture_output: false, ..JobSpec::new(id, forever(marker)) }
}

/// How a job ends in [`processes_left_by_ending_jobs_at_once`].
#[derive(Clone, Copy)]
enum Ending {
    Stop,
    Drop,
}

/// Launches 30 jobs and ends each at once or a few ms later (so every moment of the sandbox's
/// setup is hit); the processes any of them left.
async fn processes_left_by_ending_jobs_at_once(ending: Ending) -> Vec<u32> {
    let runner = runner().await;
    // Each test its own markers: the two run at once in this binary.
    let name = match ending {
        Ending::Stop => "stop",
        Ending::Drop => "drop",
    };
    the_scan_sees_a_running_job(&runner, &format!("svc-{name}-seen-{}", std::process::id())).await;
    let mut leaked = Vec::new();
    for round in 0..30 {
        let marker = format!("svc-{name}-at-once-{}-{round}", std::process::id());
        let running = runner.launch(&marked_job("dep_brief", &marker)).expect("launched");
        if round % 3 > 0 {
            tokio::time::sleep(Duration::from_millis(round)).await;
        }
        match ending {
            Ending::Stop => drop(running.stop().await),
            Ending::Drop => drop(running),
        }
        leaked.extend(left_after_stop(&marker).await);
    }
    leaked
}

/// What a process left behind is, for a failure's message: its state, parent and name
/// (`/proc/PID/stat`) and its command line.
fn described(pids: &[u32]) -> Vec<String> {
    pids.iter()
        .map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            format!("{pid}: stat {} | {cmdline}", stat.trim_end())
        })
        .collect()
}

/// Found by `svc ingress demo` interrupted at once: a sandbox stopped within milliseconds of
/// its launch left its namespace's init running (it takes bwrap's `--die-with-parent` only
/// once the sandbox is built), orphaned, with the job in it.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_stopped_right_after_launch_leaves_no_process() {
    let left = processes_left_by_ending_jobs_at_once(Ending::Stop).await;
    assert_eq!(described(&left), Vec::<String>::new(), "no process of a stopped job remains");
}

/// The same for a job dropped (a coordinator's shutdown) rather than stopped.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_dropped_right_after_launch_leaves_no_process() {
    let left = processes_left_by_ending_jobs_at_once(Ending::Drop).await;
    assert_eq!(described(&left), Vec::<String>::new(), "no process of a dropped job remains");
}

/// Reads lines and waits for an exit, for up to 5 s.
async fn until_exit(running: &mut Box<dyn svc_runner::RunningJob>, lines: &mut Vec<(Part, String)>) -> Option<Exit> {
    for _ in 0..100 {
        lines.extend(running.output());
        if let Some(exit) = running.exited() {
            return Some(exit);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// The publication service's jobs are one process: no agent beside the app.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_without_an_agent_is_its_app_alone() {
    let runner = runner().await;
    let job = JobSpec::new("exe_solo", shell("echo \"$GREETING alone\"; sleep 0.3; exit 4"));
    let mut running = runner.launch(&job).expect("launched");
    // Named once its sandbox runs it (not the sandbox's init before).
    let mut pids = running.pids();
    for _ in 0..40 {
        if !pids.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
        pids = running.pids();
    }
    assert_eq!(pids.len(), 1, "one process");
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", pids[0])).unwrap_or_default();
    assert_ne!(comm.trim_end(), "bwrap", "the program, not its sandbox");
    let mut lines = Vec::new();
    let exit = until_exit(&mut running, &mut lines).await;
    assert_eq!(exit, Some(Exit { part: Part::App, code: Some(4), signal: None, out_of_memory: false }));
    lines.extend(running.stop().await);
    assert_eq!(lines, [(Part::App, "hello alone".to_owned())]);
}

/// A cooperative cease: SIGTERM reaches the program itself (the shell, not the command it
/// waits for), which may end in its own way.
#[tokio::test(flavor = "multi_thread")]
async fn terminate_asks_the_program_itself_to_end() {
    let runner = runner().await;
    let job =
        JobSpec::new("exe_cease", shell("trap 'echo ceasing; exit 7' TERM; echo up; while :; do sleep 0.05; done"));
    let mut running = runner.launch(&job).expect("launched");
    let mut lines = Vec::new();
    for _ in 0..100 {
        lines.extend(running.output());
        if lines.iter().any(|(_, l)| l == "up") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.terminate();
    let exit = until_exit(&mut running, &mut lines).await;
    lines.extend(running.stop().await);
    assert_eq!(exit, Some(Exit { part: Part::App, code: Some(7), signal: None, out_of_memory: false }), "{lines:?}");
    assert!(lines.iter().any(|(_, l)| l == "ceasing"), "{lines:?}");
}

/// Files several jobs share (a stored artifact) keep their owner; the job's own are given to
/// its uid (when the service is root and jobs get their own).
#[tokio::test(flavor = "multi_thread")]
async fn only_the_jobs_own_mounts_are_given_to_its_uid() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let (shared, own) = (scratch.path().join("shared"), scratch.path().join("own"));
    for dir in [&shared, &own] {
        std::fs::create_dir(dir).expect("mkdir");
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        std::fs::write(dir.join("file"), b"readable").expect("write");
        std::fs::set_permissions(dir.join("file"), std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let owner = std::fs::metadata(shared.join("file")).expect("stat").uid();
    let mut app = shell("cat /shared/file /own/file");
    app.mounts = vec![
        svc_runner::Mount { host: shared.clone(), inside: "/shared".into(), writable: false, job_owned: false },
        svc_runner::Mount { host: own.clone(), inside: "/own".into(), writable: false, job_owned: true },
    ];
    let runner = runner().await;
    let job = JobSpec::new("exe_mounts", app);
    let mut running = runner.launch(&job).expect("launched");
    let mut lines = Vec::new();
    let exit = until_exit(&mut running, &mut lines).await;
    lines.extend(running.stop().await);
    assert_eq!(exit, Some(Exit { part: Part::App, code: Some(0), signal: None, out_of_memory: false }), "{lines:?}");
    assert_eq!(std::fs::metadata(shared.join("file")).expect("stat").uid(), owner, "a shared file keeps its owner");
    if owner == 0 {
        assert!(std::fs::metadata(own.join("file")).expect("stat").uid() >= DEFAULT_UID_BASE, "the job's own file");
    }
}

/// A native image's executable runs by the path the job sees (inside its mount), not by its
/// host path.
#[tokio::test(flavor = "multi_thread")]
async fn a_program_inside_a_mount_runs_by_the_path_the_job_sees() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let image = scratch.path().join("image");
    std::fs::create_dir(&image).expect("mkdir");
    std::fs::write(image.join("run.sh"), "#!/bin/sh\necho \"$0 $1 $GREETING\"\n").expect("write");
    std::fs::set_permissions(image.join("run.sh"), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mount = svc_runner::Mount { host: image.clone(), inside: "/image".into(), writable: false, job_owned: false };
    let app = Confined {
        argv: vec!["/image/run.sh".into(), "first".into()],
        env: vec![("GREETING".to_owned(), "hello".to_owned())],
        mounts: vec![mount.clone()],
        cwd: "/image".into(),
    };
    let runner = runner().await;
    let mut running = runner.launch(&JobSpec::new("exe_native", app)).expect("launched");
    let mut lines = Vec::new();
    let exit = until_exit(&mut running, &mut lines).await;
    lines.extend(running.stop().await);
    assert_eq!(exit, Some(Exit { part: Part::App, code: Some(0), signal: None, out_of_memory: false }), "{lines:?}");
    assert_eq!(lines, [(Part::App, "/image/run.sh first hello".to_owned())]);
    // A program the mount does not hold is refused before anything starts.
    let missing =
        Confined { argv: vec!["/image/absent".into()], env: Vec::new(), mounts: vec![mount], cwd: "/".into() };
    let refused = runner.launch(&JobSpec::new("exe_absent", missing)).err().expect("refused");
    assert!(refused.to_string().contains("/image/absent"), "{refused}");
}
