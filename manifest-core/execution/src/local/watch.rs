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

/// How often a job's process is looked at while something happens: it is starting, ceasing,
/// printing or was just told something.
const POLL: Duration = Duration::from_millis(50);
/// How often at most once nothing has changed for a while: the look doubles from [`POLL`]
/// up to this (issue 44: 50 ms looks at every idle job were most of an idle coordinator's
/// CPU). An exit is still seen within this.
const IDLE_POLL: Duration = Duration::from_millis(500);

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

/// Follows `run` until its process is gone; then records how it ended.
pub(super) async fn watch(shared: Arc<Shared>, mut run: Run, timing: Timing) {
    let started = Instant::now();
    let mut every = POLL;
    let mut next_look = Instant::now();
    let mut cease_until: Option<Instant> = None;
    let ended = loop {
        tokio::select! {
            command = run.commands.recv() => match command {
                Some(StopMode::Cease) => {
                    if cease_until.is_none() {
                        run.job.terminate();
                        cease_until = Some(Instant::now() + timing.grace);
                    }
                }
                Some(StopMode::Stop) | None => break None,
            },
            () = tokio::time::sleep_until(next_look) => {}
        }
        let lines = run.job.output();
        let printed = !lines.is_empty();
        // Read again each time: a program's own PID is known once its sandbox has started it.
        let pids = run.job.pids();
        let exit = run.job.exited();
        let ready = exit.is_none() && started.elapsed() >= timing.ready_after;
        let mut became_ready = false;
        shared.update(&run.id, run.run, |job| {
            job.keep_output(lines);
            job.pids = pids;
            if ready && job.state == JobState::Starting {
                job.state = JobState::Ready;
                became_ready = true;
            }
        });
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
        let busy = printed || cease_until.is_some() || started.elapsed() < timing.ready_after;
        every = if busy { POLL } else { (every * 2).min(IDLE_POLL) };
        next_look = Instant::now() + every;
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
