//! V4 `deployment.lifecycle`: renewal, update and recovery, all required.

use serde::{Deserialize, Serialize};

use crate::notes::Note;
use crate::shape::{
    DefaultValue, ObjectShape, Shape, UnionShape, arm, constant, defaulted, int, object, one_of, required,
};

/// The automatic renewal-lead profile (capability not enabled; structurally valid).
pub const RENEWAL_LEAD_PROFILE: &str = "svc.renewal-lead.v1";

/// Fixed renewal lead bounds, before the half-duration rule of layer 2.
pub const FIXED_LEAD_MIN_MS: u64 = 60_000;
/// See [`FIXED_LEAD_MIN_MS`].
pub const FIXED_LEAD_MAX_MS: u64 = 1_800_000;

static LEAD_TIME: UnionShape = UnionShape {
    name: "renewal lead time",
    tag: "mode",
    arms: &[
        arm(
            "fixed",
            &[required(
                "durationMs",
                int(FIXED_LEAD_MIN_MS, FIXED_LEAD_MAX_MS),
                "from 60000 to the lesser of 1800000 and half of schedule.durationMs",
            )],
        ),
        arm("automatic", &[required("profile", constant(RENEWAL_LEAD_PROFILE), "only `svc.renewal-lead.v1`")]),
    ],
};

static RENEWAL: UnionShape = UnionShape {
    name: "renewal",
    tag: "mode",
    arms: &[
        arm("after_scheduled_end", &[]),
        arm("before_scheduled_end", &[required("leadTime", Shape::Union(&LEAD_TIME), "fixed or automatic lead")]),
    ],
};

static EXISTING_JOBS: UnionShape = UnionShape {
    name: "existing jobs policy",
    tag: "mode",
    arms: &[
        arm("run_until_scheduled_end", &[]),
        arm(
            "cooperative_cease",
            &[required(
                "trigger",
                one_of(&["rollout_started", "successor_processor_claimed", "successor_runtime_ready"]),
                "when existing jobs cease",
            )],
        ),
    ],
};

static UPDATE: ObjectShape = object(
    "update",
    &[
        required("timing", one_of(&["next_scheduled_renewal", "immediate"]), "`next_scheduled_renewal` or `immediate`"),
        required("existingJobs", Shape::Union(&EXISTING_JOBS), "what happens to running jobs"),
    ],
);

static LAUNCH: ObjectShape =
    object("launch", &[defaulted("maxRetries", int(0, 10), DefaultValue::Integer(5), "0-10, default 5")]);

static RUNTIME_FAILURE: UnionShape = UnionShape {
    name: "runtime failure policy",
    tag: "mode",
    arms: &[
        arm("wait_until_scheduled_end", &[]),
        arm(
            "replace_after_failure",
            &[
                defaulted(
                    "contactLossAfterMs",
                    int(120_000, 1_800_000),
                    DefaultValue::Integer(300_000),
                    "120000-1800000",
                ),
                defaulted("restartGraceMs", int(0, 86_400_000), DefaultValue::Integer(600_000), "0-86400000"),
                defaulted("maxSameJobRestarts", int(0, 50), DefaultValue::Integer(3), "0-50"),
                defaulted("maxFreshRegistrationReplacements", int(0, 10), DefaultValue::Integer(2), "0-10"),
            ],
        ),
    ],
};

static RECOVERY: ObjectShape = object(
    "recovery",
    &[
        defaulted("launch", Shape::Object(&LAUNCH), DefaultValue::EmptyObject, "default `{maxRetries: 5}`"),
        required("runtimeFailure", Shape::Union(&RUNTIME_FAILURE), "`{mode: wait_until_scheduled_end}`"),
    ],
);

/// `deployment.lifecycle`.
pub static LIFECYCLE: ObjectShape = object(
    "lifecycle",
    &[
        required("renewal", Shape::Union(&RENEWAL), "after the scheduled end, or before it by a lead time")
            .noted(Note::Renewal),
        required("update", Shape::Object(&UPDATE), "update timing and existing jobs"),
        required("recovery", Shape::Object(&RECOVERY), "launch retries and runtime failure"),
    ],
);

/// `deployment.lifecycle`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lifecycle {
    /// When jobs renew.
    pub renewal: Renewal,
    /// How updates roll out.
    pub update: Update,
    /// Recovery policy.
    pub recovery: Recovery,
}

/// `lifecycle.renewal`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Renewal {
    /// Renew after the scheduled end.
    AfterScheduledEnd {},
    /// Renew before the scheduled end.
    #[serde(rename_all = "camelCase")]
    BeforeScheduledEnd {
        /// How long before.
        lead_time: LeadTime,
    },
}

/// `renewal.leadTime`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum LeadTime {
    /// A fixed lead.
    #[serde(rename_all = "camelCase")]
    Fixed {
        /// Milliseconds before the scheduled end.
        duration_ms: u64,
    },
    /// An automatic lead (capability not enabled).
    Automatic {
        /// `svc.renewal-lead.v1`.
        profile: String,
    },
}

/// `lifecycle.update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Update {
    /// When updates apply.
    pub timing: UpdateTiming,
    /// What happens to running jobs.
    pub existing_jobs: ExistingJobs,
}

/// `update.timing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpdateTiming {
    /// At the next scheduled renewal.
    NextScheduledRenewal,
    /// Now.
    Immediate,
}

/// `update.existingJobs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum ExistingJobs {
    /// Keep running to the scheduled end.
    RunUntilScheduledEnd {},
    /// Cease cooperatively (release-gated).
    CooperativeCease {
        /// When.
        trigger: CeaseTrigger,
    },
}

/// When existing jobs cease cooperatively.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CeaseTrigger {
    /// When the rollout starts.
    RolloutStarted,
    /// When a successor processor is claimed.
    SuccessorProcessorClaimed,
    /// When the successor runtime is ready.
    SuccessorRuntimeReady,
}

/// `lifecycle.recovery`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recovery {
    /// Launch retries.
    pub launch: Launch,
    /// What happens when the runtime fails.
    pub runtime_failure: RuntimeFailure,
}

/// `recovery.launch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Launch {
    /// 0-10.
    pub max_retries: u8,
}

/// `recovery.runtimeFailure`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum RuntimeFailure {
    /// Wait until the scheduled end.
    WaitUntilScheduledEnd {},
    /// Replace the job after a failure (internal).
    #[serde(rename_all = "camelCase")]
    ReplaceAfterFailure {
        /// Contact loss before replacing, ms.
        contact_loss_after_ms: u64,
        /// Restart grace, ms.
        restart_grace_ms: u64,
        /// Restarts of the same job.
        max_same_job_restarts: u64,
        /// Fresh registrations.
        max_fresh_registration_replacements: u64,
    },
}
