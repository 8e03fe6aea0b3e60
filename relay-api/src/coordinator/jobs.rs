//! The jobs the engine launched: their processes, their output (read through pipes) for the
//! deployment logs, and how often each has had to be restarted. A job process that ends is
//! seen at the engine's next tick (250 ms), reaped, and answered by [`Jobs::reap`]'s verdict:
//! restart after a backoff that doubles, or give up after [`RestartPolicy::max_restarts`]
//! restarts within [`RestartPolicy::window`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use crate::runner::{Exit, Part, RunningJob};

/// Output lines of one job and one process, for the logs.
pub(super) type Output = Vec<(&'static str, Vec<String>)>;

/// Groups lines by process, keeping their order within each.
fn by_part(lines: Vec<(Part, String)>) -> Output {
    let mut out: Output = Vec::new();
    for (part, line) in lines {
        match out.iter_mut().find(|(source, _)| *source == part.as_str()) {
            Some((_, group)) => group.push(line),
            None => out.push((part.as_str(), vec![line])),
        }
    }
    out
}

/// When a job whose process ended is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts allowed within `window`; one more ending fails the deployment (`job_exited`).
    pub max_restarts: u32,
    /// The first restart's delay; each further one doubles it, up to `max_backoff`.
    pub backoff: Duration,
    /// The longest delay.
    pub max_backoff: Duration,
    /// A job that ran this long without ending starts with a clean count.
    pub window: Duration,
}

impl Default for RestartPolicy {
    fn default() -> RestartPolicy {
        RestartPolicy {
            max_restarts: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            window: Duration::from_secs(10 * 60),
        }
    }
}

impl RestartPolicy {
    /// The delay before restart number `n` (1-based).
    pub fn delay(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX);
        self.backoff.saturating_mul(factor).min(self.max_backoff)
    }
}

/// What to do about a job whose process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Start it again after `delay`; this is restart `n` of at most `of`.
    Restart {
        /// The ending.
        exit: Exit,
        /// How long to wait.
        delay: Duration,
        /// Which restart this is.
        n: u32,
        /// The most there may be.
        of: u32,
    },
    /// Too many endings: fail the deployment.
    GiveUp {
        /// The last ending.
        exit: Exit,
        /// How many restarts were made.
        restarts: u32,
    },
}

/// A launched job.
struct Job {
    running: Box<dyn RunningJob>,
    started: Instant,
}

/// Restarts of one deployment's job.
#[derive(Debug, Clone, Copy)]
struct Restarts {
    count: u32,
    not_before: Instant,
}

/// Every job the engine runs.
pub(super) struct Jobs {
    running: Mutex<HashMap<String, Job>>,
    restarts: std::sync::Mutex<HashMap<String, Restarts>>,
    policy: RestartPolicy,
}

impl Jobs {
    pub(super) fn new(policy: RestartPolicy) -> Jobs {
        Jobs { running: Mutex::default(), restarts: std::sync::Mutex::default(), policy }
    }

    /// Keeps a launched job.
    pub(super) async fn insert(&self, id: &str, running: Box<dyn RunningJob>) {
        self.running.lock().await.insert(id.to_owned(), Job { running, started: Instant::now() });
    }

    /// Whether the deployment's job runs.
    pub(super) async fn contains(&self, id: &str) -> bool {
        self.running.lock().await.contains_key(id)
    }

    /// The deployments whose jobs run.
    pub(super) async fn ids(&self) -> Vec<String> {
        self.running.lock().await.keys().cloned().collect()
    }

    /// Process IDs of a deployment's job (app, agent), if it runs.
    pub(super) async fn pids(&self, id: &str) -> Option<Vec<u32>> {
        self.running.lock().await.get(id).map(|j| j.running.pids())
    }

    /// Whether a restart of the deployment's job must wait still (its backoff runs).
    pub(super) fn restart_pending(&self, id: &str) -> bool {
        let Ok(restarts) = self.restarts.lock() else { return false };
        restarts.get(id).is_some_and(|r| r.not_before > Instant::now())
    }

    /// Stops the deployment's job, if it runs, returning its last output; its restart count
    /// goes with it when `forget`.
    pub(super) async fn stop(&self, id: &str, forget: bool) -> Output {
        let job = self.running.lock().await.remove(id);
        let last = match job {
            Some(job) => by_part(job.running.stop().await),
            None => Vec::new(),
        };
        if forget && let Ok(mut r) = self.restarts.lock() {
            r.remove(id);
        }
        last
    }

    /// Stops every job.
    pub(super) async fn stop_all(&self) {
        let jobs: Vec<Job> = self.running.lock().await.drain().map(|(_, j)| j).collect();
        for job in jobs {
            job.running.stop().await;
        }
    }

    /// Finds jobs with a process that ended: each is stopped (its other process too), its
    /// last output returned for the logs, and judged.
    pub(super) async fn reap(&self) -> Vec<(String, Output, Verdict)> {
        let ended: Vec<(String, Job, Exit)> = {
            let mut running = self.running.lock().await;
            let exits: Vec<(String, Exit)> =
                running.iter_mut().filter_map(|(id, job)| Some((id.clone(), job.running.exited()?))).collect();
            exits.into_iter().filter_map(|(id, exit)| Some((id.clone(), running.remove(&id)?, exit))).collect()
        };
        let mut verdicts = Vec::new();
        for (id, job, exit) in ended {
            let ran = job.started.elapsed();
            let lines = by_part(job.running.stop().await);
            verdicts.push((id.clone(), lines, self.judge(&id, exit, ran)));
        }
        verdicts
    }

    fn judge(&self, id: &str, exit: Exit, ran: Duration) -> Verdict {
        let policy = self.policy;
        let Ok(mut restarts) = self.restarts.lock() else {
            return Verdict::GiveUp { exit, restarts: 0 };
        };
        let entry = restarts.entry(id.to_owned()).or_insert(Restarts { count: 0, not_before: Instant::now() });
        if ran >= policy.window {
            entry.count = 0;
        }
        if entry.count >= policy.max_restarts {
            let restarts = entry.count;
            entry.count = 0;
            return Verdict::GiveUp { exit, restarts };
        }
        entry.count += 1;
        let delay = policy.delay(entry.count);
        entry.not_before = Instant::now() + delay;
        Verdict::Restart { exit, delay, n: entry.count, of: policy.max_restarts }
    }

    /// New lines of each job's output, by deployment and source.
    pub(super) async fn new_output(&self) -> Vec<(String, Output)> {
        let mut out = Vec::new();
        for (id, job) in self.running.lock().await.iter_mut() {
            let lines = job.running.output();
            if !lines.is_empty() {
                out.push((id.clone(), by_part(lines)));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Ended(Option<Exit>);

    impl RunningJob for Ended {
        fn pids(&self) -> Vec<u32> {
            Vec::new()
        }
        fn exited(&mut self) -> Option<Exit> {
            self.0.take()
        }
        fn output(&mut self) -> Vec<(Part, String)> {
            Vec::new()
        }
        fn stop(self: Box<Self>) -> crate::runner::Stopping {
            Box::pin(async { vec![(Part::App, "last words".to_owned())] })
        }
    }

    #[test]
    fn backoff_doubles_up_to_its_ceiling() {
        let policy = RestartPolicy {
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(5),
            ..Default::default()
        };
        let delays: Vec<u64> = (1..=5).map(|n| policy.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        assert_eq!(policy.delay(200), Duration::from_secs(5), "no overflow");
    }

    #[tokio::test]
    async fn an_ended_job_restarts_with_backoff_then_gives_up() {
        let policy = RestartPolicy { max_restarts: 2, ..Default::default() };
        let jobs = Jobs::new(policy);
        let exit = Exit { part: Part::App, code: Some(1), signal: None };
        let mut verdicts = Vec::new();
        for _ in 0..3 {
            jobs.insert("d1", Box::new(Ended(Some(exit)))).await;
            let mut reaped = jobs.reap().await;
            assert_eq!(reaped.len(), 1);
            assert!(!jobs.contains("d1").await, "an ended job is removed");
            assert_eq!(reaped[0].1, [("app", vec!["last words".to_owned()])], "its last output is kept");
            verdicts.push(reaped.remove(0).2);
        }
        assert_eq!(
            verdicts,
            [
                Verdict::Restart { exit, delay: Duration::from_secs(1), n: 1, of: 2 },
                Verdict::Restart { exit, delay: Duration::from_secs(2), n: 2, of: 2 },
                Verdict::GiveUp { exit, restarts: 2 },
            ]
        );
        assert!(jobs.restart_pending("d1"), "the last restart's delay still runs");
        jobs.insert("d2", Box::new(Ended(None))).await;
        assert!(jobs.reap().await.is_empty(), "a running job is left alone");
    }
}
