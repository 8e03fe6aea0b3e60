//! What the scheduler reads and writes: executions and their states, and the view of one
//! application it decides over. A store keeps these durably ([`crate::executor::ExecutionStore`]).

use crate::clock::Millis;
use crate::market::Quote;
use crate::plan::Plan;
use crate::reason::Reason;

/// An application's store key.
pub type AppKey = i64;

/// An execution's store key.
pub type ExecKey = i64;

/// What an execution is doing, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecState {
    /// Decided and charged; the launch is being (or, after a crash, will again be) sent.
    Launching,
    /// Placed on a processor and starting.
    Running,
    /// Its runtime reported ready.
    Ready,
    /// Restarted on its processor after a failure (`replace_after_failure`).
    Restarting,
    /// Being stopped (its window ended, a successor replaced it, the application settled).
    Stopping,
    /// It exited with status 0 before being stopped.
    Completed,
    /// It failed at runtime: a non-zero exit, a kill, contact lost, or lost by its processor.
    Failed,
    /// It was stopped.
    Stopped,
    /// The market refused the launch: nothing ran, and the charge was refunded.
    Refused,
}

impl ExecState {
    /// Every state, for parsing.
    pub const ALL: [ExecState; 9] = [
        ExecState::Launching,
        ExecState::Running,
        ExecState::Ready,
        ExecState::Restarting,
        ExecState::Stopping,
        ExecState::Completed,
        ExecState::Failed,
        ExecState::Stopped,
        ExecState::Refused,
    ];

    /// The stored and API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ExecState::Launching => "launching",
            ExecState::Running => "running",
            ExecState::Ready => "ready",
            ExecState::Restarting => "restarting",
            ExecState::Stopping => "stopping",
            ExecState::Completed => "completed",
            ExecState::Failed => "failed",
            ExecState::Stopped => "stopped",
            ExecState::Refused => "refused",
        }
    }

    /// Reads a spelling.
    pub fn parse(text: &str) -> Option<ExecState> {
        ExecState::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether a process may exist for it (or is being started or stopped).
    pub fn is_live(self) -> bool {
        matches!(
            self,
            ExecState::Launching | ExecState::Running | ExecState::Ready | ExecState::Restarting | ExecState::Stopping
        )
    }
}

/// One attempt at running one generation of one slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    /// Store key (0 before it is stored).
    pub key: ExecKey,
    /// The market's idempotency key: `{application uid}/{slot}/{generation}/{attempt}`.
    pub execution_id: String,
    /// The slot, from 0.
    pub slot: u16,
    /// The slot's generation, from 1, never reused.
    pub generation: u64,
    /// The attempt within the generation, from 1: launch retries and fresh replacements.
    pub attempt: u32,
    /// The policy version it runs.
    pub policy_version: u64,
    /// Its state.
    pub state: ExecState,
    /// Where it runs (once placed).
    pub processor_id: Option<String>,
    /// Its paid window.
    pub window_start: Millis,
    /// The window's scheduled end.
    pub window_end: Millis,
    /// Same-job restarts so far.
    pub restarts: u32,
    /// What its launch was charged.
    pub charged: Quote,
    /// When it was decided.
    pub created_at: Millis,
    /// When its state last changed.
    pub changed_at: Millis,
    /// Since when its processor has been silent, if it is.
    pub silent_since: Option<Millis>,
    /// Why it is in its state (a refusal, a failure, why it was stopped).
    pub reason: Option<Reason>,
}

impl Execution {
    /// The market's idempotency key of an attempt.
    pub fn id_for(application_uid: &str, slot: u16, generation: u64, attempt: u32) -> String {
        format!("{application_uid}/{slot}/{generation}/{attempt}")
    }
}

/// Publication status, as the scheduler needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppStatus {
    /// Runs its active policy.
    Active,
    /// No new launches (running jobs run to their scheduled end).
    Paused,
    /// Nothing published.
    Disabled,
}

/// One charge of the spend ledger: a launch's quote, net of the refunds recorded against it
/// (each its own entry: a refused launch's refunds it all, a gap the service's crash left
/// unserved part of it, `crate::unserved`); a launch charged nothing has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge {
    /// The slot charged.
    pub slot: u16,
    /// The generation charged.
    pub generation: u64,
    /// When.
    pub at: Millis,
    /// How much.
    pub quote: Quote,
}

/// Everything the scheduler decides over for one application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppView {
    /// Store key.
    pub key: AppKey,
    /// The server-issued identity (execution IDs start with it).
    pub uid: String,
    /// Publication status.
    pub status: AppStatus,
    /// Why nothing of the application may run now, whatever its status and plan (an ingress
    /// deployment whose funds ran out, or that was stopped): its live executions are stopped
    /// now with this reason, and nothing is launched. A pause, by contrast, lets running jobs
    /// reach their window's end.
    pub halt: Option<Reason>,
    /// A `once` application that has settled.
    pub settled: bool,
    /// The version that re-armed it after it settled (0: never): `once` occurrences of
    /// earlier versions do not count.
    pub rearmed_version: u64,
    /// The active policy version's plan.
    pub plan: Option<Plan>,
    /// The version the scheduler last activated, and when (0: none yet).
    pub activated_version: u64,
    /// When `activated_version` became active.
    pub activated_at: Millis,
    /// Executions that are live, and every attempt of each slot's newest generation.
    pub executions: Vec<Execution>,
    /// Charges within the plan's rate window (and every charge of the newest generations), net
    /// of their refunds; none is zero.
    pub charges: Vec<Charge>,
}
