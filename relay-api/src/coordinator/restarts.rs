//! How often a deployment's job is restarted when its app or agent ends: the scheduler's
//! same-job restarts (`replace_after_failure`, restart *n* after `retry_backoff(n)`: 1 s
//! doubling to 60 s), at most [`RestartPolicy::max_restarts`] per generation of the job; one
//! more ending fails the deployment (`job_exited`).

/// When a job whose process ended is started again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// Restarts allowed per generation of the job (at most 255); one more ending fails the
    /// deployment (`job_exited`).
    pub max_restarts: u32,
}

impl Default for RestartPolicy {
    fn default() -> RestartPolicy {
        RestartPolicy { max_restarts: u32::from(super::scheduling::MAX_RESTARTS) }
    }
}
