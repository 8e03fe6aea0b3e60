//! The local pool with real sandboxes (bubblewrap and Node.js must be installed, as
//! `.ci/run` does): jobs become ready, see exactly their environment and mounts, end with
//! their code, are launched once per execution ID, fill exactly the places offered, go where
//! the order says, and leave no process behind when stopped or when the pool goes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use svc_execution::artifacts::ArtifactStore;
use svc_execution::local::{LocalPool, LocalPoolConfig};
use svc_execution::market::{JobOrder, JobState, Market, Part, Quote, Refusal, StopMode, Workload, WorkloadRuntime};
use svc_execution::plan::Requirements;

/// A scratch directory with a store and a work directory in it.
struct World {
    dir: tempfile::TempDir,
    store: ArtifactStore,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let store = ArtifactStore::open(dir.path().join("artifacts")).expect("a store");
        World { dir, store }
    }

    fn work_dir(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// Stores a bundle of `files`; its digest.
    fn artifact(&self, files: &[(&str, &str)]) -> String {
        let bundle = tempfile::tempdir_in(self.dir.path()).expect("a bundle directory");
        for (name, text) in files {
            let path = bundle.path().join(name);
            fs_err::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            fs_err::write(&path, text).expect("write");
            if name.ends_with(".sh") {
                use std::os::unix::fs::PermissionsExt;
                fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            }
        }
        self.store.store(bundle.path(), None).expect("stored")
    }

    fn pool(&self, processors: usize, jobs_per_processor: usize) -> LocalPool {
        let mut config = LocalPoolConfig::new(self.work_dir(), self.store.clone());
        config.processors = processors;
        config.jobs_per_processor = jobs_per_processor;
        config.ready_after = Duration::from_millis(300);
        config.cease_grace = Duration::from_millis(1500);
        config.price = Quote { service_credit_micros: 1_000, ..Quote::default() };
        LocalPool::new(config).expect("bubblewrap works here")
    }

    /// What is left in the work directory (each job's scratch directory while it runs).
    fn scratch_left(&self) -> Vec<PathBuf> {
        fs_err::read_dir(self.work_dir()).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default()
    }
}

/// A javascript order for `entry` of `digest`.
fn order(id: &str, digest: &str, entry: &str) -> JobOrder {
    JobOrder {
        execution_id: id.to_owned(),
        window_end: now() + 3_600_000,
        requirements: Requirements::default(),
        avoid: Vec::new(),
        workload: Workload {
            artifact_digest: digest.to_owned(),
            runtime: WorkloadRuntime::Javascript {
                engine: "nodejs".into(),
                entry_file: entry.to_owned(),
                args: Vec::new(),
            },
            env: vec![("GREETING".into(), "hello".into())],
            files: Vec::new(),
            sidecar: None,
            outbound: false,
        },
    }
}

/// Unix milliseconds.
fn now() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970");
    u64::try_from(since.as_millis()).expect("in range")
}

/// A name unique to this test process and `test`: it appears on the job's command lines (as
/// its entry file), so its processes can be found.
fn marker(test: &str) -> String {
    format!("{test}-{}", std::process::id())
}

/// A script that says it is up and stays up.
const STAYS_UP: &str = "console.log('up'); setInterval(() => {}, 1000);";

/// Polls `done` every 20 ms for up to `secs` seconds.
fn wait_for(secs: u64, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

fn state(pool: &LocalPool, id: &str) -> Option<JobState> {
    pool.jobs().into_iter().find(|j| j.execution_id == id).map(|j| j.state)
}

/// Processes with `marker` in an argument of their command line: the sandbox's and the job's.
fn processes_marked(marker: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| line.split(|&b| b == 0).any(|arg| String::from_utf8_lossy(arg).contains(marker)))
        })
        .collect()
}

/// The job programs (not bwrap) among [`processes_marked`].
fn programs_marked(marker: &str) -> Vec<u32> {
    processes_marked(marker)
        .into_iter()
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end() != "bwrap"))
        .collect()
}

#[test]
fn a_javascript_job_becomes_ready_with_exactly_its_environment_and_only_its_mounts() {
    let world = World::new();
    let other = world.artifact(&[("other.js", "secret of another app")]);
    let other_dir = world.store.path(&other).expect("stored");
    let entry = format!("{}.js", marker("env"));
    let script = r#"
        const fs = require("fs");
        console.log("ENV " + JSON.stringify(process.env));
        console.log("SECRET " + fs.readFileSync("/run/secrets/token", "utf8"));
        console.log("APP " + fs.readdirSync("/app").join(","));
        for (const path of process.env.PROBES.split(":")) {
            try { fs.readdirSync(path); console.log("SEES " + path); }
            catch (e) { console.log("HIDDEN " + path + " " + e.code); }
        }
        setInterval(() => {}, 1000);
    "#;
    let digest = world.artifact(&[(&entry, script)]);
    let pool = world.pool(1, 1);
    let probes = [world.store.dir(), &other_dir, Path::new("/root"), &world.work_dir()]
        .map(|p| p.display().to_string())
        .join(":");
    let mut order = order("app/0/1/1", &digest, &entry);
    order.workload.env.push(("PROBES".into(), probes.clone()));
    order.workload.files = vec![(PathBuf::from("/run/secrets/token"), b"s3cret".to_vec())];
    let placement = pool.launch(&order).expect("launched");
    assert_eq!(placement.processor_id, "local-1");
    assert_eq!(state(&pool, "app/0/1/1"), Some(JobState::Starting));
    assert_eq!(pool.changes(), [], "the launch itself is no change");
    assert!(wait_for(5, || state(&pool, "app/0/1/1") == Some(JobState::Ready)), "{:?}", pool.output("app/0/1/1"));
    let changes = pool.changes();
    assert_eq!(changes.len(), 1);
    assert_eq!((changes[0].execution_id.as_str(), changes[0].state), ("app/0/1/1", JobState::Ready));
    assert_eq!(pool.changes(), [], "reported once");

    assert!(wait_for(5, || pool.output("app/0/1/1").len() >= 7), "{:?}", pool.output("app/0/1/1"));
    let output = pool.output("app/0/1/1");
    let env = output.iter().find_map(|l| l.strip_prefix("ENV ")).expect("the environment");
    let env: serde_json::Map<String, serde_json::Value> = serde_json::from_str(env).expect("JSON");
    let expected: serde_json::Map<String, serde_json::Value> = [("GREETING", "hello"), ("PROBES", probes.as_str())]
        .map(|(k, v)| (k.to_owned(), v.into()))
        .into_iter()
        .collect();
    assert_eq!(env, expected, "exactly the workload's environment");
    assert!(output.contains(&"SECRET s3cret".to_owned()), "{output:?}");
    assert!(output.contains(&format!("APP {entry}")), "{output:?}");
    for probe in probes.split(':') {
        assert!(output.iter().any(|l| l == &format!("HIDDEN {probe} ENOENT")), "{probe} is seen: {output:?}");
    }
    pool.stop("app/0/1/1", StopMode::Stop);
    assert!(world.scratch_left().is_empty(), "the secret files go with the job: {:?}", world.scratch_left());
}

#[test]
fn launching_one_execution_id_twice_starts_one_process() {
    let world = World::new();
    let mark = marker("twice");
    let entry = format!("{mark}.js");
    let digest = world.artifact(&[(&entry, STAYS_UP)]);
    let pool = world.pool(2, 2);
    let order = order("app/0/1/1", &digest, &entry);
    let first = pool.launch(&order).expect("launched");
    let second = pool.launch(&order).expect("the same placement");
    assert_eq!(first, second);
    assert_eq!(first.quote.service_credit_micros, 1_000, "an hour of window, rounded up");
    assert!(wait_for(5, || state(&pool, "app/0/1/1") == Some(JobState::Ready)));
    assert_eq!(pool.launch(&order).expect("still the same"), first);
    assert_eq!(programs_marked(&mark).len(), 1, "one process: {:?}", processes_marked(&mark));
    assert_eq!(pool.jobs().len(), 1);
}

#[test]
fn a_job_launched_from_a_thread_that_ends_outlives_the_thread() {
    // A sandbox dies with the thread that forked it (bwrap's --die-with-parent); the service
    // recovers on a short-lived thread, so the pool must not fork from its caller's.
    let world = World::new();
    let mark = marker("thread");
    let entry = format!("{mark}.js");
    let digest = world.artifact(&[(&entry, STAYS_UP)]);
    let pool = std::sync::Arc::new(world.pool(1, 1));
    let launcher = std::sync::Arc::clone(&pool);
    let order = order("app/0/1/1", &digest, &entry);
    // The thread outlives the sandbox's setup (bwrap asks for the signal once it runs), then ends.
    let thread = std::thread::spawn(move || {
        let launched = launcher.launch(&order).map(|_| ());
        std::thread::sleep(Duration::from_millis(500));
        launched
    });
    thread.join().expect("the thread ends").expect("launched");
    assert!(wait_for(5, || state(&pool, "app/0/1/1") == Some(JobState::Ready)), "{:?}", pool.jobs());
    // Well past the thread's end: still running.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(state(&pool, "app/0/1/1"), Some(JobState::Ready), "{:?}", pool.jobs());
    assert_eq!(programs_marked(&mark).len(), 1, "{:?}", processes_marked(&mark));
}

#[test]
fn a_job_exiting_with_3_is_exited_3_until_released() {
    let world = World::new();
    let entry = format!("{}.js", marker("exit"));
    let digest = world.artifact(&[(&entry, "console.log('bye'); process.exit(3);")]);
    let pool = world.pool(1, 1);
    pool.launch(&order("app/0/1/1", &digest, &entry)).expect("launched");
    assert!(wait_for(5, || state(&pool, "app/0/1/1") == Some(JobState::Exited(Some(3)))), "{:?}", pool.jobs());
    let changes = pool.changes();
    assert_eq!(changes.iter().map(|c| c.state).collect::<Vec<_>>(), [JobState::Exited(Some(3))]);
    assert_eq!(pool.output("app/0/1/1"), ["bye"]);
    // Listed until released, and holding no place.
    assert_eq!(state(&pool, "app/0/1/1"), Some(JobState::Exited(Some(3))));
    pool.launch(&order("app/0/1/2", &digest, &entry)).expect("the place is free");
    pool.release("app/0/1/1");
    pool.release("app/0/1/1");
    assert_eq!(state(&pool, "app/0/1/1"), None);
    assert_eq!(pool.output("app/0/1/1"), Vec::<String>::new());
}

#[test]
fn a_missing_or_changed_artifact_is_refused_and_starts_nothing() {
    let world = World::new();
    let mark = marker("tampered");
    let entry = format!("{mark}.js");
    let digest = world.artifact(&[(&entry, STAYS_UP)]);
    let pool = world.pool(1, 1);
    let absent = format!("sha256:{}", "0".repeat(64));
    let refused = pool.launch(&order("app/0/1/1", &absent, &entry)).expect_err("refused");
    assert_eq!(
        refused,
        Refusal::Artifact(format!(
            "the artifact {absent} is not in the service's artifact store; upload the application's files with `svc app deploy DIR` (or, on the service's host, `svc admin artifact store --bundle DIR`)"
        )),
        "named by its digest, not where the store is"
    );
    fs_err::write(world.store.path(&digest).expect("stored").join(&entry), "console.log('changed')").expect("tamper");
    let refused = pool.launch(&order("app/0/1/1", &digest, &entry)).expect_err("refused");
    assert!(matches!(&refused, Refusal::Artifact(why) if why.contains(&format!("not {digest}"))), "{refused}");
    assert_eq!(refused.code(), "artifact_refused");
    assert_eq!(pool.jobs(), []);
    assert_eq!(processes_marked(&mark), Vec::<u32>::new());
    assert!(world.scratch_left().is_empty(), "{:?}", world.scratch_left());
    let bad = pool.launch(&order("app/0/1/1", "md5:00", &entry)).expect_err("refused");
    assert!(matches!(&bad, Refusal::Artifact(why) if why.contains("not an artifact digest")), "{bad}");
}

#[test]
fn the_pool_takes_processors_times_jobs_per_processor_jobs() {
    let world = World::new();
    let entry = format!("{}.js", marker("capacity"));
    let digest = world.artifact(&[(&entry, STAYS_UP)]);
    let pool = world.pool(2, 2);
    let placed: Vec<String> = (1..=4)
        .map(|n| pool.launch(&order(&format!("app/{n}/1/1"), &digest, &entry)).expect("placed").processor_id)
        .collect();
    assert_eq!(placed, ["local-1", "local-2", "local-1", "local-2"], "least loaded first");
    let refused = pool.launch(&order("app/5/1/1", &digest, &entry)).expect_err("full");
    assert_eq!(
        refused,
        Refusal::NoProcessor(
            "every processor the job may use is busy (local-1 runs 2 of 2 jobs, local-2 runs 2 of 2 jobs)".into()
        )
    );
    assert!(pool.quote(&Requirements::default(), &[], 3_600_000).is_err(), "no quote either");
    pool.stop("app/2/1/1", StopMode::Stop);
    assert_eq!(state(&pool, "app/2/1/1"), Some(JobState::Exited(None)), "ended when stop returns");
    assert_eq!(pool.launch(&order("app/5/1/1", &digest, &entry)).expect("a place is free").processor_id, "local-2");
    // An hour of window costs the hourly price; a part of it, rounded up.
    assert_eq!(pool.quote(&Requirements::default(), &[], 0), Err(refused.clone()));
    pool.stop("app/5/1/1", StopMode::Stop);
    assert_eq!(pool.quote(&Requirements::default(), &[], 3_600_000).expect("a quote").service_credit_micros, 1_000);
    assert_eq!(pool.quote(&Requirements::default(), &[], 1).expect("a quote").service_credit_micros, 1);
}

#[test]
fn exact_processor_selection_avoidance_and_minimums_are_honoured() {
    let world = World::new();
    let entry = format!("{}.js", marker("select"));
    let digest = world.artifact(&[(&entry, STAYS_UP)]);
    let pool = world.pool(3, 1);
    let only = |ids: &[&str]| Requirements {
        processor_ids: Some(ids.iter().map(|s| (*s).to_owned()).collect()),
        ..Requirements::default()
    };
    let mut exact = order("app/1/1/1", &digest, &entry);
    exact.requirements = only(&["local-2"]);
    assert_eq!(pool.launch(&exact).expect("placed").processor_id, "local-2");
    exact.execution_id = "app/2/1/1".into();
    assert_eq!(
        pool.launch(&exact),
        Err(Refusal::NoProcessor("every processor the job may use is busy (local-2 runs 1 of 1 jobs)".into()))
    );
    exact.requirements = only(&["local-9"]);
    assert_eq!(
        pool.launch(&exact),
        Err(Refusal::NoProcessor(
            "the job may run only on local-9, and this pool's processors are local-1 to local-3".into()
        ))
    );
    let mut avoiding = order("app/3/1/1", &digest, &entry);
    avoiding.avoid = vec!["local-1".into()];
    assert_eq!(pool.launch(&avoiding).expect("placed").processor_id, "local-3", "local-1 avoided, local-2 busy");
    avoiding.execution_id = "app/4/1/1".into();
    avoiding.requirements = only(&["local-1"]);
    assert_eq!(
        pool.launch(&avoiding),
        Err(Refusal::NoProcessor("every processor the job may use is to be avoided (local-1)".into()))
    );
    let big = Requirements { memory_bytes: Some(2 << 30), ..Requirements::default() };
    assert_eq!(
        pool.quote(&big, &[], 1),
        Err(Refusal::NoProcessor("the job needs 2147483648 bytes of memory; each processor offers 1073741824".into()))
    );
    let roomy = Requirements { storage_bytes: Some(20 << 30), ..Requirements::default() };
    assert!(matches!(pool.quote(&roomy, &[], 1), Err(Refusal::NoProcessor(why)) if why.contains("bytes of storage")));
    assert_eq!(pool.jobs().len(), 2, "only the two placed");
}

#[test]
fn stop_and_cease_leave_no_process() {
    let world = World::new();
    let mark = marker("stop");
    let entry = format!("{mark}.js");
    let script = "process.on('SIGTERM', () => { console.log('ceasing'); process.exit(0); }); \
                  console.log('up'); setInterval(() => {}, 1000);";
    let stubborn = format!("{mark}-stubborn.js");
    let digest = world.artifact(&[
        (&entry, script),
        (&stubborn, "process.on('SIGTERM', () => {}); console.log('up'); setInterval(() => {}, 1000);"),
    ]);
    let pool = world.pool(1, 3);
    for id in ["app/1/1/1", "app/2/1/1"] {
        pool.launch(&order(id, &digest, &entry)).expect("launched");
    }
    pool.launch(&order("app/3/1/1", &digest, &stubborn)).expect("launched");
    assert!(wait_for(5, || pool.jobs().iter().all(|j| j.state == JobState::Ready)), "{:?}", pool.jobs());
    assert_eq!(programs_marked(&mark).len(), 3);
    // Ready says the process has been up a moment, not that Node has run the script's first
    // lines: their handlers are in place once they said so.
    let up = |id: &str| pool.output(id).contains(&"up".to_owned());
    assert!(wait_for(5, || up("app/2/1/1") && up("app/3/1/1")), "{:?}", pool.output("app/3/1/1"));

    pool.stop("app/1/1/1", StopMode::Stop);
    assert_eq!(state(&pool, "app/1/1/1"), Some(JobState::Exited(None)));
    pool.stop("app/1/1/1", StopMode::Stop);
    pool.stop("unknown", StopMode::Stop);

    let asked = Instant::now();
    pool.stop("app/2/1/1", StopMode::Cease);
    pool.stop("app/3/1/1", StopMode::Cease);
    assert!(wait_for(5, || state(&pool, "app/2/1/1") == Some(JobState::Exited(None))));
    assert!(pool.output("app/2/1/1").contains(&"ceasing".to_owned()), "{:?}", pool.output("app/2/1/1"));
    assert!(asked.elapsed() < Duration::from_millis(1500), "it ceased on its own: {:?}", asked.elapsed());
    // The one that ignores SIGTERM is killed after the grace.
    assert!(wait_for(5, || state(&pool, "app/3/1/1") == Some(JobState::Exited(None))));
    assert!(asked.elapsed() >= Duration::from_millis(1500), "{:?}", asked.elapsed());
    assert_eq!(processes_marked(&mark), Vec::<u32>::new(), "no process is left");
    assert_eq!(state(&pool, "app/1/1/1"), Some(JobState::Exited(None)), "listed until released");
}

#[test]
fn dropping_the_pool_leaves_no_process() {
    let world = World::new();
    let mark = marker("drop");
    let entry = format!("{mark}.js");
    let digest = world.artifact(&[(&entry, STAYS_UP)]);
    let pool = world.pool(2, 2);
    for n in 1..=3 {
        pool.launch(&order(&format!("app/{n}/1/1"), &digest, &entry)).expect("launched");
    }
    assert!(wait_for(5, || programs_marked(&mark).len() == 3));
    drop(pool);
    assert_eq!(processes_marked(&mark), Vec::<u32>::new(), "no process is left");
    assert!(world.scratch_left().is_empty(), "{:?}", world.scratch_left());
}

#[test]
fn a_failed_job_restarts_on_its_processor_and_a_running_one_is_left_alone() {
    let world = World::new();
    let mark = marker("restart");
    let entry = format!("{mark}.js");
    let script = "console.log('run'); if (process.env.FAIL === '1') process.exit(3); \
                  setInterval(() => {}, 1000);";
    let digest = world.artifact(&[(&entry, script)]);
    let pool = world.pool(2, 1);
    let mut failing = order("app/1/1/1", &digest, &entry);
    failing.workload.env.push(("FAIL".into(), "1".into()));
    let placed = pool.launch(&failing).expect("launched").processor_id;
    assert!(wait_for(5, || state(&pool, "app/1/1/1") == Some(JobState::Exited(Some(3)))));
    pool.changes();
    failing.workload.env.pop();
    pool.restart(&failing, &placed).expect("restarted");
    assert_eq!(
        pool.changes().iter().map(|c| (c.processor_id.as_str(), c.state)).collect::<Vec<_>>(),
        [(placed.as_str(), JobState::Starting)]
    );
    assert!(wait_for(5, || state(&pool, "app/1/1/1") == Some(JobState::Ready)));
    pool.restart(&failing, &placed).expect("left alone");
    assert_eq!(programs_marked(&mark).len(), 1, "one process");
    // The second run's line is read a moment after the process is ready.
    assert!(wait_for(5, || pool.output("app/1/1/1").len() >= 2), "{:?}", pool.output("app/1/1/1"));
    assert_eq!(pool.output("app/1/1/1"), ["run", "run"], "both runs' lines");
    assert!(
        matches!(pool.restart(&failing, "local-7"), Err(Refusal::Start(why)) if why.contains("no processor local-7"))
    );
}

/// Issue 44: the pool says when there is news, so its scheduler need not poll it: a
/// `Changed` for each change [`Market::changes`] reports (ready, ended, restarted), an
/// `Output` when a job printed.
#[test]
fn the_pool_wakes_its_waker_for_every_change_it_reports_and_for_output() {
    use std::sync::{Arc, Mutex};
    use svc_execution::market::Wake;

    let world = World::new();
    let entry = format!("{}.js", marker("waker"));
    let digest = world.artifact(&[(&entry, "console.log('up'); setTimeout(() => process.exit(3), 800);")]);
    let pool = world.pool(1, 1);
    assert!(pool.wakes());
    let told = Arc::new(Mutex::new(Vec::new()));
    let waker = Arc::clone(&told);
    pool.set_waker(Arc::new(move |wake| waker.lock().expect("lock").push(wake)));
    let count = |what: Wake| told.lock().expect("lock").iter().filter(|&&w| w == what).count();
    let mut job = order("app/0/1/1", &digest, &entry);
    let placed = pool.launch(&job).expect("launched").processor_id;
    assert_eq!(count(Wake::Changed), 0, "the launch is the caller's own news");
    assert!(wait_for(5, || state(&pool, "app/0/1/1") == Some(JobState::Ready)));
    assert!(wait_for(1, || count(Wake::Changed) == 1), "ready: {:?}", told.lock().expect("lock"));
    assert!(wait_for(5, || count(Wake::Output) >= 1), "printed: {:?}", told.lock().expect("lock"));
    assert!(wait_for(5, || state(&pool, "app/0/1/1") == Some(JobState::Exited(Some(3)))));
    assert!(wait_for(1, || count(Wake::Changed) == 2), "ended: {:?}", told.lock().expect("lock"));
    assert_eq!(pool.changes().len(), 1, "the exit, reported");
    job.workload.env.push(("AGAIN".into(), "1".into()));
    pool.restart(&job, &placed).expect("restarted");
    assert_eq!(count(Wake::Changed), 3, "a restart is news: {:?}", told.lock().expect("lock"));
}

#[test]
fn a_native_image_runs_its_executable_from_the_image() {
    let world = World::new();
    let image = world.artifact(&[("bin/run.sh", "#!/bin/sh\necho \"$0 $* in $(pwd)\"\nls /app\nexit 5\n")]);
    let app = world.artifact(&[("data.txt", "data")]);
    let pool = world.pool(1, 1);
    let mut native = order("app/1/1/1", &app, "unused");
    native.workload.runtime = WorkloadRuntime::NativeImage {
        image_digest: image.clone(),
        executable: "bin/run.sh".into(),
        args: vec!["a".into(), "b".into()],
    };
    pool.launch(&native).expect("launched");
    assert!(
        wait_for(5, || state(&pool, "app/1/1/1") == Some(JobState::Exited(Some(5)))),
        "{:?}",
        pool.output("app/1/1/1")
    );
    assert_eq!(pool.output("app/1/1/1"), ["/image/bin/run.sh a b in /app", "data.txt"]);
    native.execution_id = "app/2/1/1".into();
    native.workload.runtime =
        WorkloadRuntime::NativeImage { image_digest: image, executable: "../run.sh".into(), args: Vec::new() };
    assert!(
        matches!(pool.launch(&native), Err(Refusal::Start(why)) if why.contains("must be a path inside the image"))
    );
    native.workload.runtime =
        WorkloadRuntime::NativeImage { image_digest: app.clone(), executable: "data.txt".into(), args: Vec::new() };
    assert_eq!(pool.launch(&native), Err(Refusal::Start(format!("the image {app} has no executable file data.txt"))));
}

#[test]
fn an_engine_that_is_not_installed_is_refused_by_name() {
    let world = World::new();
    let digest = world.artifact(&[("main.ts", "console.log(1)")]);
    let pool = world.pool(1, 1);
    for engine in ["deno", "bun"] {
        if svc_runner_has(engine) {
            continue;
        }
        let mut job = order(&format!("app/{engine}/1/1"), &digest, "main.ts");
        job.workload.runtime =
            WorkloadRuntime::Javascript { engine: engine.into(), entry_file: "main.ts".into(), args: Vec::new() };
        assert_eq!(
            pool.launch(&job),
            Err(Refusal::Start(format!("the javascript engine {engine} is not installed on the job's processor")))
        );
    }
    assert_eq!(pool.jobs(), []);
}

/// Whether `program` is on `PATH`.
fn svc_runner_has(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// A sidecar running node on `script`, written into its state directory as `<mark>.js`.
fn sidecar(mark: &str, script: &str) -> svc_execution::Sidecar {
    svc_execution::Sidecar {
        argv: vec!["node".into(), format!("/sidecar/{mark}.js")],
        env: vec![("SIDE".into(), "car".into())],
        state_dir: "/sidecar".into(),
        files: vec![(format!("{mark}.js"), script.as_bytes().to_vec())],
        kept_state: None,
        egress: None,
    }
}

#[test]
fn a_sidecar_runs_beside_the_job_in_its_own_sandbox_and_goes_with_it() {
    let world = World::new();
    let mark = marker("sidecar");
    let entry = format!("{mark}-app.js");
    let digest = world.artifact(&[(&entry, STAYS_UP)]);
    let pool = world.pool(1, 2);
    // The sidecar writes into its own state directory, sees only its own environment, and
    // cannot see the application's files.
    let script = "const fs = require('fs');\n\
                  fs.writeFileSync('/sidecar/state', 'written');\n\
                  console.log('side', process.env.SIDE, process.env.GREETING === undefined, fs.existsSync('/app'));\n\
                  setInterval(() => {}, 1000);";
    let mut job = order("app/1/1/1", &digest, &entry);
    job.workload.sidecar = Some(sidecar(&mark, script));
    pool.launch(&job).expect("launched");
    assert!(wait_for(5, || state(&pool, "app/1/1/1") == Some(JobState::Ready)), "{:?}", pool.jobs());
    assert!(
        wait_for(5, || pool.output("app/1/1/1").contains(&"side car true false".to_owned())),
        "{:?}",
        pool.output("app/1/1/1")
    );
    assert_eq!(programs_marked(&mark).len(), 2, "the app and its sidecar");
    // Its scratch directory (its secrets, its sidecar's state) is the service's alone: it was
    // 0755, left to the umask, while this said 0700.
    let scratch = world.scratch_left();
    assert_eq!(scratch.len(), 1, "{scratch:?}");
    let mode = std::os::unix::fs::PermissionsExt::mode(&fs_err::metadata(&scratch[0]).expect("stat").permissions());
    assert_eq!(mode & 0o777, 0o700, "{}", scratch[0].display());
    // Its processes are the host's, program first; its output comes once, by part.
    let pids = pool.processes("app/1/1/1");
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert!(pids.iter().all(|pid| programs_marked(&mark).contains(pid)), "{pids:?}");
    let taken = pool.take_output("app/1/1/1");
    assert!(taken.contains(&(Part::Agent, "side car true false".to_owned())), "{taken:?}");
    assert!(!pool.take_output("app/1/1/1").contains(&(Part::Agent, "side car true false".to_owned())), "taken once");
    pool.stop("app/1/1/1", StopMode::Stop);
    assert_eq!(pool.processes("app/1/1/1"), Vec::<u32>::new(), "none once it ended");
    assert_eq!(pool.ending("app/1/1/1"), None, "a stopped job ended because it was told to");
    assert_eq!(processes_marked(&mark), Vec::<u32>::new(), "both go");
    assert!(world.scratch_left().is_empty(), "its state directory goes with the job");
}

#[test]
fn a_sidecar_that_ends_ends_its_job() {
    let world = World::new();
    let mark = marker("sidecar-exit");
    let entry = format!("{mark}-app.js");
    let digest = world.artifact(&[(&entry, STAYS_UP)]);
    let pool = world.pool(1, 2);
    let mut job = order("app/1/1/1", &digest, &entry);
    job.workload.sidecar = Some(sidecar(&mark, "setTimeout(() => process.exit(7), 300);"));
    pool.launch(&job).expect("launched");
    assert!(wait_for(5, || state(&pool, "app/1/1/1") == Some(JobState::Exited(Some(7)))), "{:?}", pool.jobs());
    assert_eq!(processes_marked(&mark), Vec::<u32>::new(), "the app went with it");
    let ending = pool.ending("app/1/1/1").expect("how it ended");
    assert_eq!((ending.part, ending.code), (Part::Agent, Some(7)), "the sidecar ended it");
    assert_eq!(ending.to_string(), "the agent exited with status 7");
    // A sidecar that names no program, or a state directory that is not its own, is refused.
    let mut bad = order("app/2/1/1", &digest, &entry);
    bad.workload.sidecar = Some(svc_execution::Sidecar { argv: vec![], ..sidecar(&mark, "") });
    assert!(matches!(pool.launch(&bad), Err(Refusal::Start(m)) if m.contains("names no program")));
    let mut bad = order("app/3/1/1", &digest, &entry);
    bad.workload.sidecar = Some(svc_execution::Sidecar { state_dir: "/app".into(), ..sidecar(&mark, "") });
    assert!(matches!(pool.launch(&bad), Err(Refusal::Start(m)) if m.contains("state directory")));
}

/// An ingress agent's key, certificate and ACME account live in its state directory: kept
/// across the job's launches, they are not made again (an ACME CA asked for a new account)
/// at each one. Files given are replaced, never written through a link the job planted.
#[test]
fn a_sidecars_kept_state_outlives_its_run_and_links_planted_in_it_are_replaced() {
    let world = World::new();
    let mark = marker("kept");
    let entry = format!("{mark}-app.js");
    let digest = world.artifact(&[(&entry, STAYS_UP)]);
    let pool = world.pool(1, 2);
    let kept = world.dir.path().join("agent-state");
    let script = "const fs = require('fs');\n\
                  const n = fs.existsSync('/sidecar/count') ? Number(fs.readFileSync('/sidecar/count')) : 0;\n\
                  fs.writeFileSync('/sidecar/count', String(n + 1));\n\
                  try { fs.unlinkSync('/sidecar/config'); } catch (e) {}\n\
                  fs.symlinkSync(process.env.OUTSIDE, '/sidecar/config');\n\
                  setInterval(() => {}, 1000);";
    for (run, id) in ["app/1/1/1", "app/1/1/2"].into_iter().enumerate() {
        let mut job = order(id, &digest, &entry);
        let mut side = sidecar(&mark, script);
        side.files.push(("config".to_owned(), format!("run {run}").into_bytes()));
        side.kept_state = Some(kept.clone());
        // The link the job plants names this host file: followed, the next launch's
        // `config` would overwrite it.
        side.env.push(("OUTSIDE".to_owned(), kept.join("outside").display().to_string()));
        job.workload.sidecar = Some(side);
        std::fs::create_dir_all(&kept).expect("mkdir");
        std::fs::write(kept.join("outside"), b"not the job's config").expect("write");
        pool.launch(&job).expect("launched");
        assert!(
            wait_for(5, || std::fs::read_to_string(kept.join("count")).is_ok_and(|c| c == (run + 1).to_string())),
            "run {run} counted in the kept state"
        );
        // The script writes `count`, then replaces `config` by its link: wait for the link too
        // before stopping it (CI once stopped it in between).
        let linked = || std::fs::symlink_metadata(kept.join("config")).is_ok_and(|m| m.file_type().is_symlink());
        wait_for(5, linked);
        pool.stop(id, StopMode::Stop);
        let planted = std::fs::symlink_metadata(kept.join("config")).expect("config").file_type().is_symlink();
        assert!(planted, "the job planted its link");
        assert_eq!(std::fs::read(kept.join("outside")).expect("read"), b"not the job's config", "not written through");
    }
    let mode = std::os::unix::fs::PermissionsExt::mode(&fs_err::metadata(&kept).expect("stat").permissions());
    assert_eq!(mode & 0o777, 0o700);
    assert!(world.scratch_left().is_empty(), "the runs' scratch went; the kept state stays");
}

/// Issue 39, point 6: a refused launch shows the tenant what failed by the artifact's digest
/// and paths inside the job; the host's directories (the store, the scratch space, a kept
/// state) and programs go to the service's log only.
#[test]
fn a_refused_launch_names_no_host_path_in_the_tenants_reason() {
    let world = World::new();
    let host = world.dir.path().display().to_string();
    let digest = world.artifact(&[("server.js", STAYS_UP)]);
    let told = |refusal: Refusal| {
        let text = refusal.to_string();
        assert!(!text.contains(&host) && !text.contains("/tmp"), "a host path in {text:?}");
        text
    };
    let pool = world.pool(1, 4);
    // Not in the store: its digest, not the store's directory.
    let absent = format!("sha256:{}", "0".repeat(64));
    let refused = told(pool.launch(&order("app/0/1/1", &absent, "server.js")).expect_err("refused"));
    assert_eq!(
        refused,
        format!(
            "the artifact cannot be used: the artifact {absent} is not in the service's artifact store; upload the application's files with `svc app deploy DIR` (or, on the service's host, `svc admin artifact store --bundle DIR`)"
        )
    );
    // A link planted in the stored artifact: named by its path inside the job.
    let stored = world.store.path(&digest).expect("stored");
    std::os::unix::fs::symlink("/etc/passwd", stored.join("passwd")).expect("link");
    let refused = told(pool.launch(&order("app/0/2/1", &digest, "server.js")).expect_err("refused"));
    assert_eq!(
        refused,
        format!("the artifact cannot be used: the stored artifact {digest} holds /app/passwd that is a symbolic link")
    );
    fs_err::remove_file(stored.join("passwd")).expect("unlink");
    // A kept state that is not a directory: named where the sidecar sees it.
    let mut job = order("app/0/3/1", &digest, "server.js");
    let mut side = sidecar("unused", "");
    let kept = world.dir.path().join("kept-state-file");
    fs_err::write(&kept, b"not a directory").expect("write");
    side.kept_state = Some(kept);
    job.workload.sidecar = Some(side);
    let refused = told(pool.launch(&job).expect_err("refused"));
    assert!(
        refused.starts_with("the job did not start: the job's sidecar cannot start: its state directory /sidecar"),
        "{refused}"
    );
    // The scratch space gone: the job's scratch directory, not where.
    fs_err::remove_dir_all(world.work_dir()).expect("remove");
    fs_err::write(world.work_dir(), b"not a directory").expect("write");
    let refused = told(pool.launch(&order("app/0/4/1", &digest, "server.js")).expect_err("refused"));
    assert_eq!(refused, "the job did not start: cannot make the job's scratch directory on its processor");
    assert_eq!(pool.jobs(), []);
    drop(pool);
    fs_err::remove_file(world.work_dir()).expect("remove");
    // An engine configured by its host path (`SVC_NODE`) and missing: named by the engine.
    let mut config = LocalPoolConfig::new(world.work_dir(), world.store.clone());
    config.node = world.dir.path().join("no-such-node").into_os_string();
    let pool = LocalPool::new(config).expect("bubblewrap works here");
    let refused = told(pool.launch(&order("app/0/5/1", &digest, "server.js")).expect_err("refused"));
    assert_eq!(refused, "the job did not start: the javascript engine nodejs is not installed on the job's processor");
}

/// Issue 44: a job left alone is not looked at on a timer (its end wakes its watcher), yet a
/// program killed after a long quiet is seen ended within a second.
#[test]
fn a_job_killed_after_a_long_quiet_is_seen_exited_within_a_second() {
    let world = World::new();
    let mark = marker("quiet");
    let entry = format!("{mark}.js");
    let digest = world.artifact(&[(&entry, STAYS_UP)]);
    let pool = world.pool(1, 1);
    pool.launch(&order("app/0/1/1", &digest, &entry)).expect("launched");
    assert!(wait_for(5, || state(&pool, "app/0/1/1") == Some(JobState::Ready)), "{:?}", pool.jobs());
    assert!(wait_for(5, || pool.output("app/0/1/1").contains(&"up".to_owned())));
    // Quiet long enough for its watcher to wait for its changes alone.
    std::thread::sleep(Duration::from_secs(2));
    let programs = programs_marked(&mark);
    assert_eq!(programs.len(), 1, "{:?}", processes_marked(&mark));
    let killed = Instant::now();
    let status = std::process::Command::new("kill").args(["-KILL", &programs[0].to_string()]).status();
    assert!(status.is_ok_and(|s| s.success()), "kill -KILL {}", programs[0]);
    assert!(wait_for(5, || matches!(state(&pool, "app/0/1/1"), Some(JobState::Exited(_)))), "{:?}", pool.jobs());
    assert!(killed.elapsed() < Duration::from_secs(1), "seen after {:?}", killed.elapsed());
    assert_eq!(processes_marked(&mark), Vec::<u32>::new(), "no process is left");
}
