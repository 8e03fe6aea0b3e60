//! From a published policy version to what the scheduler runs: its [`Plan`] (lifecycle
//! rules) and its [`Workload`] (what a job starts with). Both are read from the version's
//! effective policy JSON, never from the authored manifest. The publication service reads its
//! stored versions through here, and the ingress coordinator the versions its deployments
//! publish (feature `executions`, without the service).

use std::path::PathBuf;

use svc_execution::plan::{
    CeaseTrigger, ExistingJobs, Mode, Phasing, Plan, Rate, Recovery, Renewal, Requirements, RuntimeFailure,
    SpendAuthority, Update, UpdateTiming, automatic_lead,
};
use svc_execution::{Workload, WorkloadRuntime};

use crate::policy::PolicyV4;
use crate::policy_v5::{EffectiveRuntime, EffectiveSelection, PolicyV5};
use crate::v4::configuration::SecretDestination as V4Destination;
use crate::v4::lifecycle as v4;
use crate::v4::release::PinnedArtifact;
use crate::v5::configuration::{SecretDestination as V5Destination, Variable as V5Variable};
use crate::v5::deployment as v5;
use crate::v5::execution::Execution;

/// A published policy version, as the scheduler reads it.
#[derive(Debug, Clone, Copy)]
pub struct Published<'a> {
    /// 1, 2, ...
    pub version: u64,
    /// 4 or 5.
    pub schema_version: u8,
    /// Of the effective policy.
    pub policy_digest: &'a str,
    /// The effective policy's JSON.
    pub policy: &'a str,
}

/// Why a stored version cannot be run (it was valid when published: a bug or a damaged store).
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The policy JSON does not read as its schema version's effective policy.
    #[error("policy version {version} does not read as an effective policy: {source}")]
    Policy {
        /// The version.
        version: u64,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// A value the validator accepted does not convert (a duration, a money string).
    #[error("policy version {version}: {what} \"{value}\" cannot be used")]
    Value {
        /// The version.
        version: u64,
        /// Which field.
        what: &'static str,
        /// Its value.
        value: String,
    },
}

/// An effective policy of either version.
pub(crate) enum Effective {
    V4(Box<PolicyV4>),
    V5(Box<PolicyV5>),
}

pub(crate) fn effective(version: Published<'_>) -> Result<Effective, PlanError> {
    let wrap = |source| PlanError::Policy { version: version.version, source };
    Ok(match version.schema_version {
        4 => Effective::V4(Box::new(serde_json::from_str(version.policy).map_err(wrap)?)),
        _ => Effective::V5(Box::new(serde_json::from_str(version.policy).map_err(wrap)?)),
    })
}

/// Milliseconds of a V5 duration (`90s`, `1h`, `30d`).
pub fn duration_ms(text: &str) -> Option<u64> {
    let at = text.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = text.split_at(at);
    let n: u64 = n.parse().ok()?;
    let scale = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// Unix milliseconds of a V5 UTC bound (`2027-01-31T00:00:00Z`).
pub fn utc_bound_ms(text: &str) -> Option<u64> {
    let at = humantime::parse_rfc3339(text).ok()?;
    u64::try_from(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis()).ok()
}

/// Bytes of a V5 byte size (`512MiB`), if it fits in 64 bits.
pub fn byte_size(text: &str) -> Option<u64> {
    crate::formats::byte_size(text).and_then(|b| u64::try_from(b).ok())
}

/// The plan of a stored version.
pub fn plan(version: Published<'_>) -> Result<Plan, PlanError> {
    plan_of(version, &effective(version)?)
}

/// The plan of a stored version in its context (see [`in_context`]): the policy is read once.
pub fn plan_in_context(
    version: Published<'_>,
    authority_micros: Option<u64>,
    valued_secrets: &std::collections::BTreeSet<String>,
) -> Result<Plan, PlanError> {
    let effective = effective(version)?;
    let plan = plan_of(version, &effective)?;
    Ok(in_context(plan, &effective, authority_micros, valued_secrets))
}

fn plan_of(version: Published<'_>, effective: &Effective) -> Result<Plan, PlanError> {
    let bad =
        |what: &'static str, value: &str| PlanError::Value { version: version.version, what, value: value.to_owned() };
    let money = |what: &'static str, value: &str| value.parse::<u128>().map_err(|_| bad(what, value));
    let mut plan = Plan {
        policy_version: version.version,
        policy_digest: version.policy_digest.to_owned(),
        slots: 1,
        window_ms: 0,
        start_delay_ms: 0,
        phasing: Phasing::Simultaneous,
        mode: Mode::Continuous { until: None },
        renewal: Renewal::AfterEnd,
        update: Update { timing: UpdateTiming::Immediate, existing_jobs: ExistingJobs::RunUntilScheduledEnd },
        recovery: Recovery::default(),
        spend: SpendAuthority::default(),
        requirements: Requirements::default(),
        hold: None,
    };
    match effective {
        Effective::V4(p) => {
            let d = &p.deployment;
            // SPEC deployment (V4) parallelism: logical job slots with monotonic generations.
            plan.slots = u16::from(d.parallelism);
            plan.window_ms = d.schedule.duration_ms;
            plan.start_delay_ms = d.schedule.start_delay_ms.unwrap_or(0);
            plan.renewal = match &d.lifecycle.renewal {
                v4::Renewal::AfterScheduledEnd {} => Renewal::AfterEnd,
                v4::Renewal::BeforeScheduledEnd { lead_time: v4::LeadTime::Fixed { duration_ms } } => {
                    Renewal::Lead(*duration_ms)
                }
                v4::Renewal::BeforeScheduledEnd { lead_time: v4::LeadTime::Automatic { .. } } => {
                    Renewal::Lead(automatic_lead(plan.window_ms))
                }
            };
            plan.update = Update {
                timing: match d.lifecycle.update.timing {
                    v4::UpdateTiming::Immediate => UpdateTiming::Immediate,
                    v4::UpdateTiming::NextScheduledRenewal => UpdateTiming::NextRenewal,
                },
                existing_jobs: match &d.lifecycle.update.existing_jobs {
                    v4::ExistingJobs::RunUntilScheduledEnd {} => ExistingJobs::RunUntilScheduledEnd,
                    v4::ExistingJobs::CooperativeCease { trigger } => ExistingJobs::CooperativeCease(match trigger {
                        v4::CeaseTrigger::RolloutStarted => CeaseTrigger::RolloutStarted,
                        v4::CeaseTrigger::SuccessorProcessorClaimed => CeaseTrigger::SuccessorProcessorClaimed,
                        v4::CeaseTrigger::SuccessorRuntimeReady => CeaseTrigger::SuccessorRuntimeReady,
                    }),
                },
            };
            let recovery = &d.lifecycle.recovery;
            plan.recovery = Recovery {
                max_launch_retries: recovery.launch.max_retries,
                runtime_failure: match &recovery.runtime_failure {
                    v4::RuntimeFailure::WaitUntilScheduledEnd {} => RuntimeFailure::WaitUntilScheduledEnd,
                    v4::RuntimeFailure::ReplaceAfterFailure {
                        contact_loss_after_ms,
                        restart_grace_ms,
                        max_same_job_restarts,
                        max_fresh_registration_replacements,
                    } => RuntimeFailure::ReplaceAfterFailure {
                        contact_loss_after_ms: *contact_loss_after_ms,
                        restart_grace_ms: *restart_grace_ms,
                        max_same_job_restarts: u8::try_from(*max_same_job_restarts).unwrap_or(u8::MAX),
                        max_fresh_replacements: u8::try_from(*max_fresh_registration_replacements).unwrap_or(u8::MAX),
                    },
                },
                exit_is_failure: false,
            };
            let spend = &d.spend;
            plan.spend = SpendAuthority {
                per_generation_micros: spend.max_service_credit_micros_per_generation.map(u128::from),
                reward_planck_per_job: spend
                    .max_reward_planck_per_job
                    .as_deref()
                    .map(|v| money("maxRewardPlanckPerJob", v))
                    .transpose()?,
                native_fee_planck_per_job: spend
                    .max_native_fee_planck_per_job
                    .as_deref()
                    .map(|v| money("maxNativeFeePlanckPerJob", v))
                    .transpose()?,
                ..SpendAuthority::default()
            };
            plan.requirements = Requirements {
                processor_ids: None,
                memory_bytes: p.runtime.resources.memory_mib.map(|m| m.saturating_mul(1 << 20)),
                storage_bytes: p.runtime.resources.storage_mib.map(|m| m.saturating_mul(1 << 20)),
            };
        }
        Effective::V5(p) => {
            let d = &p.deployment;
            plan.slots = d.jobs;
            plan.window_ms =
                duration_ms(&d.schedule.duration).ok_or_else(|| bad("schedule.duration", &d.schedule.duration))?;
            plan.phasing = match d.schedule.phasing {
                v5::Phasing::Simultaneous {} => Phasing::Simultaneous,
                v5::Phasing::EvenlySpaced { jobs_per_phase } => {
                    Phasing::EvenlySpaced { jobs_per_phase: u16::try_from(jobs_per_phase).unwrap_or(1) }
                }
            };
            let until = |u: &Option<String>| -> Result<Option<u64>, PlanError> {
                u.as_deref().map(|t| utc_bound_ms(t).ok_or_else(|| bad("execution.until", t))).transpose()
            };
            plan.mode = match &p.execution {
                Execution::Once {} => Mode::Once,
                Execution::Continuous { until: u } => Mode::Continuous { until: until(u)? },
                Execution::Interval { every, until: u } => Mode::Interval {
                    every_ms: duration_ms(every).ok_or_else(|| bad("execution.every", every))?,
                    until: until(u)?,
                },
            };
            // SPEC lifecycle (V5) renewal.leadTime: `automatic` (default) or `fixed`.
            plan.renewal = match d.lifecycle.renewal.as_ref().map(|r| &r.lead_time) {
                None => Renewal::AfterEnd,
                Some(v5::LeadTime::Automatic {}) => Renewal::Lead(automatic_lead(plan.window_ms)),
                Some(v5::LeadTime::Fixed { duration }) => {
                    Renewal::Lead(duration_ms(duration).ok_or_else(|| bad("renewal.leadTime.duration", duration))?)
                }
            };
            plan.update = Update {
                timing: match d.lifecycle.update.timing {
                    v5::UpdateTiming::Immediate => UpdateTiming::Immediate,
                    v5::UpdateTiming::NextRenewal => UpdateTiming::NextRenewal,
                },
                existing_jobs: match d.lifecycle.update.existing_jobs {
                    v5::ExistingJobs::StopWhenSuccessorReady {} => ExistingJobs::StopWhenSuccessorReady,
                    v5::ExistingJobs::RunUntilScheduledEnd {} => ExistingJobs::RunUntilScheduledEnd,
                },
            };
            let rate = d
                .spend
                .rate
                .as_ref()
                .map(|r| -> Result<Rate, PlanError> {
                    Ok(Rate {
                        amount_micros: money("spend.rate.amount", &r.amount)?,
                        window_ms: duration_ms(&r.window).ok_or_else(|| bad("spend.rate.window", &r.window))?,
                    })
                })
                .transpose()?;
            plan.spend = SpendAuthority {
                per_job_micros: Some(money("spend.perJob", &d.spend.per_job)?),
                rate,
                ..SpendAuthority::default()
            };
            let minimums = d.placement.minimums.as_ref();
            plan.requirements = Requirements {
                processor_ids: match &d.placement.processor_selection {
                    EffectiveSelection::OpenMarket {} => None,
                    EffectiveSelection::Exact { processor_ids } => Some(processor_ids.clone()),
                },
                memory_bytes: minimums.and_then(|m| m.memory.as_deref()).and_then(byte_size),
                storage_bytes: minimums.and_then(|m| m.storage.as_deref()).and_then(byte_size),
            };
        }
    }
    Ok(plan)
}

/// What the organization and the application's secrets add to a plan: the organization's
/// spend authority per job (a launch is never charged above it; a policy that spends
/// service credits launches nothing while the organization has none), and the hold of a
/// required secret that has no value yet: what publication's layer 7 warned of.
fn in_context(
    mut plan: Plan,
    effective: &Effective,
    authority_micros: Option<u64>,
    valued_secrets: &std::collections::BTreeSet<String>,
) -> Plan {
    plan.spend.organization_per_job_micros = authority_micros.map(u128::from);
    let (spends, required): (bool, Vec<String>) = match effective {
        Effective::V4(p) => (
            p.deployment.spend.max_service_credit_micros_per_generation.is_some(),
            p.configuration.secrets.iter().filter(|s| s.required).map(|s| s.secret_id.clone()).collect(),
        ),
        Effective::V5(p) => {
            (true, p.configuration.secrets.iter().filter(|s| s.required).map(|s| s.secret_id.clone()).collect())
        }
    };
    if let Some(missing) = required.iter().find(|id| !valued_secrets.contains(*id)) {
        plan.hold = Some(svc_execution::Reason::new(
            "secret_missing",
            format!(
                "the required secret \"{missing}\" has no value; `svc admin secret provision --secret-id {missing} \
                 --value-file FILE` sets one"
            ),
        ));
    } else if spends && authority_micros.is_none() {
        plan.hold = Some(svc_execution::Reason::new(
            "spend_authority_missing",
            "the organization has no service-credit spend authority; `svc admin spend-authority set` sets one",
        ));
    }
    plan
}

/// What a job of a stored version runs: the artifact, the runtime, the variables, and the
/// values of the secrets provisioned for the application (`secret_values`: by secret ID).
pub fn workload(
    version: Published<'_>,
    secret_values: &std::collections::BTreeMap<String, Vec<u8>>,
) -> Result<Workload, PlanError> {
    let mut env = Vec::new();
    let mut files = Vec::new();
    let mut secret = |id: &str, env_name: Option<&str>, path: Option<&str>| {
        let Some(value) = secret_values.get(id) else { return };
        if let Some(name) = env_name {
            env.push((name.to_owned(), String::from_utf8_lossy(value).into_owned()));
        }
        if let Some(path) = path {
            files.push((PathBuf::from(path), value.clone()));
        }
    };
    let mut outbound = false;
    let (artifact_digest, runtime) = match effective(version)? {
        Effective::V4(p) => {
            outbound = p.runtime.required_modules.iter().any(|m| m == NETWORK_MODULE);
            for s in &p.configuration.secrets {
                match &s.destination {
                    V4Destination::Env { name } => secret(&s.secret_id, Some(name), None),
                    V4Destination::File { path } => secret(&s.secret_id, None, Some(path)),
                }
            }
            for v in &p.configuration.variables {
                if let Some(value) = &v.default {
                    env.push((v.name.clone(), value.clone()));
                }
            }
            let engine = p.runtime.engine.map_or("nodejs", engine_name).to_owned();
            let (entry_file, args) = v4_command(p.runtime.command.as_deref());
            match &p.artifact {
                PinnedArtifact::IpfsBundle { digest, .. } => {
                    (digest.clone(), WorkloadRuntime::Javascript { engine, entry_file, args })
                }
                PinnedArtifact::RuntimeImage { image_digest, bootstrap_digest, .. } => (
                    bootstrap_digest.clone(),
                    WorkloadRuntime::NativeImage { image_digest: image_digest.clone(), executable: entry_file, args },
                ),
            }
        }
        Effective::V5(p) => {
            for s in &p.configuration.secrets {
                match &s.destination {
                    V5Destination::Environment { name } => secret(&s.secret_id, Some(name), None),
                    V5Destination::File { path } => secret(&s.secret_id, None, Some(path)),
                }
            }
            for v in &p.configuration.variables {
                match v {
                    V5Variable::Literal { name, value } => env.push((name.clone(), value.clone())),
                    V5Variable::Managed { name, default: Some(value), .. } => env.push((name.clone(), value.clone())),
                    V5Variable::Managed { .. } => {}
                }
            }
            let runtime = match &p.runtime {
                EffectiveRuntime::Javascript { engine, entrypoint } => WorkloadRuntime::Javascript {
                    engine: engine_name(*engine).to_owned(),
                    entry_file: entrypoint.file.clone(),
                    args: Vec::new(),
                },
                EffectiveRuntime::NativeImage { image, entrypoint } => WorkloadRuntime::NativeImage {
                    image_digest: image.digest.clone(),
                    executable: entrypoint.executable.clone(),
                    args: entrypoint.args.clone(),
                },
            };
            (p.artifact.digest.clone(), runtime)
        }
    };
    env.sort();
    Ok(Workload { artifact_digest, runtime, env, files, sidecar: None, outbound })
}

/// The V4 module (`runtime.requiredModules`) that grants a job network access.
pub const NETWORK_MODULE: &str = "network";

/// V4 `runtime.command` as an entry file and its arguments: words split on spaces (no shell
/// string is parsed: no quotes, no variables), a leading engine name (`node`, `deno`, `bun`)
/// dropped, since the engine is `runtime.engine`. Absent or empty: `index.js`.
fn v4_command(command: Option<&str>) -> (String, Vec<String>) {
    let mut words = command.unwrap_or("").split_whitespace().peekable();
    if words.peek().is_some_and(|w| ["node", "nodejs", "deno", "bun"].contains(w)) {
        words.next();
    }
    let entry = words.next().unwrap_or("index.js").to_owned();
    (entry, words.map(str::to_owned).collect())
}

fn engine_name(engine: crate::v4::runtime::Engine) -> &'static str {
    match engine {
        crate::v4::runtime::Engine::Nodejs => "nodejs",
        crate::v4::runtime::Engine::Deno => "deno",
        crate::v4::runtime::Engine::Bun => "bun",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn golden(file: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden").join(file);
        std::fs::read_to_string(&path).expect("golden policy")
    }

    fn stored(policy: &str, schema_version: u8) -> Published<'_> {
        Published { version: 3, schema_version, policy_digest: "sha256:p", policy }
    }

    #[test]
    fn a_v4_policy_becomes_its_plan_and_workload() {
        let text = golden("v4-full.policy.json");
        let v = stored(&text, 4);
        let p = plan(v).expect("a plan");
        assert_eq!((p.policy_version, p.slots, p.window_ms, p.start_delay_ms), (3, 3, 7_200_000, 60_000));
        assert_eq!(p.mode, Mode::Continuous { until: None });
        assert_eq!(p.requirements.memory_bytes, Some(512 << 20));
        let secrets = std::collections::BTreeMap::from([("db.password".to_owned(), b"s3cret".to_vec())]);
        let w = workload(v, &secrets).expect("a workload");
        // `command: node dist/worker.js`: the engine is runtime.engine, the file is the entry.
        assert_eq!(
            w.runtime,
            WorkloadRuntime::Javascript { engine: "nodejs".into(), entry_file: "dist/worker.js".into(), args: vec![] }
        );
        assert!(w.env.contains(&("LOG_LEVEL".to_owned(), "info".to_owned())));
        assert!(w.env.contains(&("DB_PASSWORD".to_owned(), "s3cret".to_owned())));
        assert!(w.files.is_empty(), "tls.key has no value");
    }

    #[test]
    fn v4_commands_split_into_an_entry_and_arguments() {
        assert_eq!(v4_command(Some("node dist/worker.js --fast")), ("dist/worker.js".into(), vec!["--fast".into()]));
        assert_eq!(v4_command(Some("server.js")), ("server.js".into(), vec![]));
        assert_eq!(v4_command(None), ("index.js".into(), vec![]));
    }

    #[test]
    fn durations_sizes_and_bounds_convert() {
        assert_eq!(duration_ms("90s"), Some(90_000));
        assert_eq!(duration_ms("30d"), Some(2_592_000_000));
        assert_eq!(duration_ms("1h"), Some(3_600_000));
        assert_eq!(duration_ms("h"), None);
        assert_eq!(byte_size("512MiB"), Some(512 << 20));
        assert_eq!(byte_size("1GB"), Some(1_000_000_000));
        assert_eq!(utc_bound_ms("1970-01-01T00:00:01Z"), Some(1_000));
    }
}
