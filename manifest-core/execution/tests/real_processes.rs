//! A few lifecycle runs with real processes: the executor over the in-memory store, the local
//! pool (bubblewrap and Node.js, as `.ci/run` installs them) and the real clock, with windows
//! of seconds. The rules themselves are covered in simulated time by `lifecycle.rs`; these
//! check that they hold with real jobs starting, becoming ready, exiting and being stopped.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::plan;
use svc_execution::artifacts::ArtifactStore;
use svc_execution::executor::Executor;
use svc_execution::local::{LocalPool, LocalPoolConfig};
use svc_execution::memory::{MemoryApp, MemoryStore};
use svc_execution::plan::{Mode, Renewal};
use svc_execution::{AppStatus, Clock, ExecState, Market, Quote, SystemClock, Workload, WorkloadRuntime};

struct Real {
    _dir: tempfile::TempDir,
    store: Arc<MemoryStore>,
    pool: Arc<LocalPool>,
    executor: Executor,
    digest: String,
}

impl Real {
    /// A pool of one processor of four jobs, and a bundle whose `main.js` runs until stopped,
    /// or exits with `EXIT_WITH` after 300 ms when that is set.
    fn new() -> Real {
        let dir = tempfile::tempdir().expect("scratch");
        let artifacts = ArtifactStore::open(dir.path().join("artifacts")).expect("store");
        let bundle = dir.path().join("bundle");
        fs_err::create_dir_all(&bundle).expect("bundle");
        fs_err::write(
            bundle.join("main.js"),
            "const code = process.env.EXIT_WITH;\n\
             if (code !== undefined) setTimeout(() => process.exit(Number(code)), 300);\n\
             else setInterval(() => {}, 1000);\n",
        )
        .expect("main.js");
        let digest = artifacts.store(&bundle, None).expect("stored");
        let mut config = LocalPoolConfig::new(dir.path().join("work"), artifacts);
        config.processors = 1;
        config.jobs_per_processor = 4;
        config.ready_after = Duration::from_millis(200);
        config.price = Quote { service_credit_micros: 1_000, ..Quote::default() };
        let pool = Arc::new(LocalPool::new(config).expect("bubblewrap works here"));
        let store = Arc::new(MemoryStore::new());
        let executor = Executor::new(
            Arc::clone(&store) as Arc<_>,
            Arc::clone(&pool) as Arc<dyn Market>,
            Arc::new(SystemClock),
            16,
        );
        Real { _dir: dir, store, pool, executor, digest }
    }

    fn publish(&self, p: svc_execution::Plan, env: &[(&str, &str)]) {
        let now = SystemClock.now();
        let workload = Workload {
            artifact_digest: self.digest.clone(),
            runtime: WorkloadRuntime::Javascript {
                engine: "nodejs".into(),
                entry_file: "main.js".into(),
                args: Vec::new(),
            },
            env: env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            files: Vec::new(),
            sidecar: None,
            outbound: false,
        };
        self.store.edit(|s| {
            s.apps.insert(
                1,
                MemoryApp {
                    uid: "app1".into(),
                    status: AppStatus::Active,
                    halt: None,
                    settled: false,
                    settled_at: None,
                    rearmed_version: 0,
                    plan: Some(p),
                    activated: (0, 0),
                    next_at: Some(now),
                    blocked: None,
                    workload,
                },
            );
        });
    }

    /// Steps every 20 ms for `duration`, checking after each step that the pool runs at most
    /// two jobs of the slot and never two attempts of one generation.
    fn run_for(&self, duration: Duration) {
        let end = Instant::now() + duration;
        while Instant::now() < end {
            self.executor.step().expect("steps");
            let running: Vec<_> = self
                .pool
                .jobs()
                .into_iter()
                .filter(|j| !matches!(j.state, svc_execution::JobState::Exited(_) | svc_execution::JobState::Lost))
                .collect();
            assert!(running.len() <= 2, "{running:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn executions(&self) -> Vec<svc_execution::Execution> {
        self.store.snapshot().executions.into_values().map(|(_, e)| e).collect()
    }
}

#[test]
fn a_continuous_job_renews_with_real_processes_and_the_predecessor_stops_at_its_end() {
    let r = Real::new();
    let mut p = plan(1, Mode::Continuous { until: None });
    p.window_ms = 1_500;
    p.renewal = Renewal::Lead(500);
    r.publish(p, &[]);
    r.run_for(Duration::from_millis(4_200));
    let all = r.executions();
    let generations: Vec<u64> = all.iter().map(|e| e.generation).collect();
    assert!(generations.len() >= 3, "{all:#?}");
    assert_eq!(generations, (1..=generations.len() as u64).collect::<Vec<_>>(), "one attempt each, in order");
    // Every generation but the newest two ran to its window's end and was stopped there.
    for e in &all[..all.len() - 2] {
        assert_eq!(e.state, ExecState::Stopped, "{e:#?}");
        assert_eq!(e.reason.as_ref().map(|r| r.code.as_str()), Some("window_ended"));
        assert_eq!(e.processor_id.as_deref(), Some("local-1"));
    }
    // Successive windows touch: each starts where the previous one ended.
    for pair in all.windows(2) {
        assert_eq!(pair[1].window_start, pair[0].window_end);
    }
}

#[test]
fn a_once_job_that_exits_settles_and_a_failing_one_settles_without_a_rerun() {
    for (code, state) in [("0", ExecState::Completed), ("3", ExecState::Failed)] {
        let r = Real::new();
        let mut p = plan(1, Mode::Once);
        p.window_ms = 60_000;
        r.publish(p, &[("EXIT_WITH", code)]);
        r.run_for(Duration::from_millis(1_500));
        let all = r.executions();
        assert_eq!(all.len(), 1, "exit {code}: {all:#?}");
        assert_eq!(all[0].state, state, "exit {code}");
        assert!(r.store.snapshot().apps[&1].settled, "exit {code}");
    }
}
