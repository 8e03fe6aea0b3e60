//! One job's process, followed on the pool's runtime: its output kept, `Ready` once it has
//! stayed up a while, a cease or a stop carried out, and its end recorded once the process
//! is gone (reaped, its scratch directory removed).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use svc_runner::RunningJob;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::Shared;
use crate::market::{JobState, StopMode, Wake};

/// How long output is gathered before the job is looked at again once it printed: a job
/// printing line after line is looked at this often, not once a line.
const POLL: Duration = Duration::from_millis(50);

/// The pool's timings.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    /// How long a process must stay up to be ready.
    pub(super) ready_after: Duration,
    /// How long a ceasing process has between SIGTERM and its kill.
    pub(super) grace: Duration,
}

/// One run of a job.
pub(super) struct Run {
    /// The job's execution ID.
    pub(super) id: String,
    /// Which run of it (a restart is another): a later run's record is never touched.
    pub(super) run: u64,
    /// Its process.
    pub(super) job: Box<dyn RunningJob>,
    /// Stops and ceases for it; closed when the pool goes.
    pub(super) commands: mpsc::UnboundedReceiver<StopMode>,
    /// Its scratch directory, removed at its end.
    pub(super) scratch: PathBuf,
}

/// What woke a watcher.
enum Woken {
    Command(Option<StopMode>),
    /// A deadline passed, or the job may have something new.
    Look,
}

/// Follows `run` until its process is gone; then records how it ended.
///
/// A job is looked at only when something may have happened (issue 44: an idle job costs
/// nothing): its process ended, it printed or its memory events moved
/// ([`RunningJob::changed`]), a command came, it has stayed up long enough to be ready, or its
/// grace after a cease is over. Once it printed, it is looked at again [`POLL`] later, its
/// output gathered meanwhile.
pub(super) async fn watch(shared: Arc<Shared>, mut run: Run, timing: Timing) {
    let ready_at = Instant::now() + timing.ready_after;
    let mut starting = true;
    let mut cease_until: Option<Instant> = None;
    // The next look at the latest; whether a change of the job's wakes it sooner.
    let mut deadline = Some(Instant::now());
    let mut listen = false;
    let ended = loop {
        let woken = tokio::select! {
            command = run.commands.recv() => Woken::Command(command),
            () = sleep_until_some(deadline) => Woken::Look,
            () = run.job.changed(), if listen => Woken::Look,
        };
        match woken {
            Woken::Command(Some(StopMode::Cease)) => {
                if cease_until.is_none() {
                    run.job.terminate();
                    cease_until = Some(Instant::now() + timing.grace);
                }
            }
            Woken::Command(Some(StopMode::Stop) | None) => break None,
            Woken::Look => {}
        }
        let lines = run.job.output();
        let printed = !lines.is_empty();
        // Read again each time: a program's own PID is known once its sandbox has started it.
        let pids = run.job.pids();
        let exit = run.job.exited();
        let ready = exit.is_none() && Instant::now() >= ready_at;
        let mut became_ready = false;
        shared.update(&run.id, run.run, |job| {
            job.keep_output(lines);
            job.pids = pids;
            if ready && job.state == JobState::Starting {
                job.state = JobState::Ready;
                became_ready = true;
            }
        });
        starting &= !ready;
        if became_ready {
            shared.wake(Wake::Changed);
        }
        if printed {
            shared.wake(Wake::Output);
        }
        if let Some(exit) = exit {
            // A job asked to cease ended because it was told to.
            break if cease_until.is_some() { None } else { Some(exit) };
        }
        if cease_until.is_some_and(|until| Instant::now() >= until) {
            break None;
        }
        // After output, its next lines are gathered for POLL; else the job's next change, or
        // the moment it is ready or its grace is over, wakes the watcher.
        listen = !printed;
        deadline = [printed.then(|| Instant::now() + POLL), starting.then_some(ready_at), cease_until]
            .into_iter()
            .flatten()
            .min();
    };
    if let Some(exit) = ended.filter(|e| e.out_of_memory) {
        tracing::warn!(execution_id = %run.id, "job {}: {exit}; every process of it was killed", run.id);
    }
    // Killed if still running, and reaped: no process of the job is left once it is `Exited`.
    let last = run.job.stop().await;
    // Its secret files go with it; a directory that will not go is only space.
    let _ = fs_err::remove_dir_all(&run.scratch);
    shared.update(&run.id, run.run, |job| {
        job.keep_output(last);
        job.state = JobState::Exited(ended.and_then(|exit| exit.code));
        job.ending = ended;
        job.control = None;
    });
    shared.ended.notify_all();
    shared.wake(Wake::Changed);
}

/// Sleeps until `deadline`; for ever without one.
async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Condvar, Mutex};

    use svc_runner::{Changed, Exit, Part, Stopping};
    use tokio::sync::Notify;

    use super::*;
    use crate::local::Job;
    use crate::market::Quote;

    /// A job that tells its changes ([`RunningJob::changed`]) and counts the looks at it.
    struct Told {
        looks: Arc<AtomicUsize>,
        ended: Arc<AtomicBool>,
        change: Arc<Notify>,
    }

    impl RunningJob for Told {
        fn pids(&self) -> Vec<u32> {
            Vec::new()
        }
        fn exited(&mut self) -> Option<Exit> {
            self.looks.fetch_add(1, Ordering::SeqCst);
            let ended = self.ended.load(Ordering::SeqCst);
            ended.then_some(Exit { part: Part::App, code: Some(0), signal: None, out_of_memory: false })
        }
        fn output(&mut self) -> Vec<(Part, String)> {
            Vec::new()
        }
        fn stop(self: Box<Self>) -> Stopping {
            Box::pin(async { Vec::new() })
        }
        fn changed(&mut self) -> Changed<'_> {
            let change = self.change.clone();
            Box::pin(async move { change.notified().await })
        }
    }

    /// Issue 44, point 5: a ready, quiet job is not looked at on a timer (an hour of the
    /// paused clock passes with no look), and its end, told, is acted on at once.
    #[tokio::test(start_paused = true)]
    async fn a_quiet_ready_job_is_looked_at_only_when_it_tells_a_change() {
        let job = Job {
            processor: 0,
            quote: Quote::default(),
            state: JobState::Starting,
            reported: Some(JobState::Starting),
            output: VecDeque::new(),
            printed: 0,
            taken: 0,
            pids: Vec::new(),
            ending: None,
            run: 7,
            control: None,
        };
        let shared = Arc::new(Shared {
            jobs: Mutex::new(BTreeMap::from([("ex_1".to_owned(), job)])),
            ended: Condvar::new(),
            waker: Mutex::new(None),
        });
        let (looks, ended, change) = (Arc::default(), Arc::new(AtomicBool::new(false)), Arc::new(Notify::new()));
        let told = Told { looks: Arc::clone(&looks), ended: Arc::clone(&ended), change: Arc::clone(&change) };
        let (_control, commands) = mpsc::unbounded_channel();
        let scratch = std::env::temp_dir().join("svc-watch-test-scratch-never-made");
        let run = Run { id: "ex_1".into(), run: 7, job: Box::new(told), commands, scratch };
        let timing = Timing { ready_after: Duration::from_millis(500), grace: Duration::from_secs(5) };
        let watcher = tokio::spawn(watch(Arc::clone(&shared), run, timing));
        let state = || shared.lock().get("ex_1").map(|job| job.state);

        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(state(), Some(JobState::Ready));
        let ready = looks.load(Ordering::SeqCst);
        assert!(ready <= 2, "looked at {ready} times while starting: at its launch and once ready");
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert_eq!(looks.load(Ordering::SeqCst), ready, "no look at a quiet job in an hour");

        ended.store(true, Ordering::SeqCst);
        change.notify_one();
        tokio::time::timeout(Duration::from_millis(1), watcher).await.expect("acted on at once").expect("no panic");
        assert_eq!(state(), Some(JobState::Exited(Some(0))));
    }
}
