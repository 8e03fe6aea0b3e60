//! What a revision publishes: the Manifest V5 its deploy sends (the project's named file) or
//! derives, made into the effective V5 document the publication service makes
//! (`manifest_core::PolicyV5`), with the facts the coordinator resolves itself. The
//! application's identity is the deployment; a `source` release resolves to the app files the
//! deploy sent (their bundle digest, which every launch checks again). The revision is the
//! policy's version; its jobs run what the document says (`manifest_core::plan::workload`).

use serde_json::Value;

use manifest_core::v5::release::Release;
use manifest_core::{EncryptionMode, Manifest, PolicyV5, ResolvedArtifact, V5Facts};

use super::store::PublishedPolicy;
use crate::project::Project;

/// What a published policy's artifact is: the files a deploy sent, kept by the coordinator.
pub const ARTIFACT_KIND: &str = "ipfs_bundle";

/// Where a revision's files are kept: the coordinator's data directory, not IPFS, so the
/// artifact's locator says so (`relay:<deployment>/r<revision>`).
pub fn artifact_locator(deployment_id: &str, revision: u32) -> String {
    format!("relay:{deployment_id}/r{revision}")
}

/// Why a revision's manifest cannot be published.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The manifest pins an artifact other than the files the deploy sent.
    #[error(
        "the manifest pins the artifact {pinned}, and the files sent have the digest {sent}; pin {sent}, or use \
         `release: {{mode: source}}` (the files sent are the release)"
    )]
    PinnedElsewhere {
        /// `/release/artifact/digest`.
        pinned: String,
        /// The bundle digest of the files sent.
        sent: String,
    },
    /// The manifest's entrypoint is not among the files sent.
    #[error("the manifest runs {entrypoint}, and no file of that name was sent")]
    EntrypointMissing {
        /// `/runtime/entrypoint/file`.
        entrypoint: String,
    },
    /// The project gives the job a variable or a secret its named manifest does not declare:
    /// the job runs what the manifest says, so it would never see it.
    #[error(
        "the project file gives the job {}, which its manifest does not declare (the job runs what the manifest \
         declares); declare each in the manifest's `configuration` (`variables` or `secrets`), or remove it from \
         the project file",
        .0.join(", ")
    )]
    Undeclared(Vec<String>),
    /// The manifest asks for what the relay does not run: a route is one job, continuous,
    /// and a redeploy takes over as soon as its job validates.
    #[error("the manifest asks for what a route cannot run: {0}")]
    NotRunnable(String),
    /// The manifest checked at deploy does not read as a Manifest V5 any more: a bug.
    #[error("internal error: the checked manifest does not read as a Manifest V5 ({0}); please report this")]
    NotV5(String),
}

/// The most jobs (replicas) one route runs: `deployment.jobs` up to this is admitted.
pub const MAX_JOBS: u16 = 2;

/// Publishes `manifest` (checked: `Project::manifest_v5`) as revision `revision` of the
/// deployment, whose app files have the bundle digest `bundle_digest` (`has_file`: whether
/// one of them has this path). Every `app.env` and `app.secrets` name of `project` must be a
/// variable or a secret of the manifest (a derived manifest declares them all; `PORT` is
/// always the job's).
pub fn publish(
    manifest: &Value,
    project: &Project,
    deployment_id: &str,
    revision: u32,
    bundle_digest: &str,
    has_file: impl Fn(&str) -> bool,
) -> Result<PublishedPolicy, PublishError> {
    let text = manifest.to_string();
    let report = manifest_core::validate(text.as_bytes());
    let authored_digest = report.authored_digest().unwrap_or_default();
    let manifest = match report.manifest() {
        Ok(Manifest::V5(m)) => m,
        Ok(Manifest::V4(_)) => return Err(PublishError::NotV5("schema version 4".to_owned())),
        Err(e) => return Err(PublishError::NotV5(e.to_string())),
    };
    if let Release::Pinned { artifact } = &manifest.release
        && artifact.digest != bundle_digest
    {
        return Err(PublishError::PinnedElsewhere { pinned: artifact.digest.clone(), sent: bundle_digest.to_owned() });
    }
    let facts = V5Facts {
        application_uid: deployment_id.to_owned(),
        artifact: ResolvedArtifact {
            kind: ARTIFACT_KIND.to_owned(),
            cid: artifact_locator(deployment_id, revision),
            digest: bundle_digest.to_owned(),
            encryption: EncryptionMode { mode: "none".to_owned() },
        },
        image: None,
        ssh_keys: Vec::new(),
    };
    let policy = PolicyV5::materialize(&manifest, &facts).map_err(|e| PublishError::NotV5(e.to_string()))?;
    if let manifest_core::EffectiveRuntime::Javascript { entrypoint, .. } = &policy.runtime
        && !has_file(&entrypoint.file)
    {
        return Err(PublishError::EntrypointMissing { entrypoint: entrypoint.file.clone() });
    }
    let undeclared = undeclared(project, &policy);
    if !undeclared.is_empty() {
        return Err(PublishError::Undeclared(undeclared));
    }
    let policy_json = serde_json_canonicalizer::to_string(&policy)
        .map_err(|e| PublishError::NotV5(format!("the effective document has no canonical JSON: {e}")))?;
    let published = PublishedPolicy {
        revision,
        schema_version: 5,
        authored_digest,
        policy_digest: policy.digest(),
        policy_json,
        published_at: 0,
    };
    runnable(&published)?;
    Ok(published)
}

/// Refuses a policy the relay cannot roll out as a route: more jobs than a route has
/// replicas, or a job that ends by itself.
fn runnable(published: &PublishedPolicy) -> Result<(), PublishError> {
    use svc_execution::plan::Mode;
    let plan = manifest_core::plan::plan(published.published())
        .map_err(|e| PublishError::NotRunnable(format!("its policy cannot be scheduled ({e})")))?;
    let refused = |why: String| Err(PublishError::NotRunnable(why));
    if plan.slots > MAX_JOBS {
        return refused(format!(
            "`deployment.jobs` is {}: a route is served by at most {MAX_JOBS} jobs (its replicas)",
            plan.slots
        ));
    }
    if plan.mode != (Mode::Continuous { until: None }) {
        return refused("a web job runs until it is stopped: `execution.mode: continuous`, without `until`".to_owned());
    }
    Ok(())
}

/// The project's `app.env` and `app.secrets` entries the policy does not declare, as JSON
/// pointers into the project file.
fn undeclared(project: &Project, policy: &PolicyV5) -> Vec<String> {
    use manifest_core::v5::configuration::Variable;
    let variables: Vec<&str> = policy
        .configuration
        .variables
        .iter()
        .map(|v| match v {
            Variable::Literal { name, .. } | Variable::Managed { name, .. } => name.as_str(),
        })
        .collect();
    let secrets: Vec<&str> = policy.configuration.secrets.iter().map(|s| s.secret_id.as_str()).collect();
    let env = project
        .app
        .env
        .keys()
        .filter(|name| name.as_str() != "PORT" && !variables.contains(&name.as_str()))
        .map(|name| format!("/app/env/{name}"));
    let secret = project
        .app
        .secrets
        .keys()
        .filter(|name| !secrets.contains(&name.as_str()))
        .map(|name| format!("/app/secrets/{name}"));
    env.chain(secret).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROJECT: &str = r#"{"version": 1, "name": "shop", "runtime": "node", "app": {"entrypoint": "server.js",
        "env": {"GREETING": "hello"}}, "spend": {"ceilingMicros": 5000000}, "manifest": "deploy/manifest.yaml"}"#;

    const NAMED: &str = "schema: svc.application-manifest\nschemaVersion: 5\napplicationId: shop\nrelease:\n  mode: \
                         source\nruntime:\n  kind: javascript\n  entrypoint:\n    file: main.js\nexecution:\n  mode: \
                         continuous\ndeployment:\n  schedule:\n    duration: 1h\n  spend:\n    unit: \
                         service_credit_micros\n    perJob: \"100\"\n    rate:\n      amount: \"1000\"\n\
                         configuration:\n  variables:\n    - source: literal\n      name: GREETING\n      value: \
                         hi\n    - source: literal\n      name: MODE\n      value: named\nstate:\n  mode: off\n";

    fn project(text: &str) -> Project {
        crate::project::read(text).expect("a valid project")
    }

    fn publish_named(manifest: &str, project_text: &str, files: &[&str]) -> Result<PublishedPolicy, PublishError> {
        let p = project(project_text);
        let manifest = p.manifest_v5(Some(manifest)).expect("a valid named manifest");
        publish(&manifest, &p, "dep_1", 2, "sha256:files", |f| files.contains(&f))
    }

    #[test]
    fn a_named_manifest_is_published_as_its_jobs_run_it() {
        let policy = publish_named(NAMED, PROJECT, &["main.js"]).expect("published");
        assert_eq!((policy.revision, policy.schema_version), (2, 5));
        let document: Value = serde_json::from_str(&policy.policy_json).expect("JSON");
        assert_eq!(document["applicationUid"], "dep_1");
        assert_eq!(document["artifact"]["cid"], "relay:dep_1/r2");
        assert_eq!(document["artifact"]["digest"], "sha256:files");
        let workload = manifest_core::plan::workload(policy.published(), &Default::default()).expect("a workload");
        assert!(workload.env.contains(&("MODE".to_owned(), "named".to_owned())), "{:?}", workload.env);
        assert!(
            workload.env.contains(&("GREETING".to_owned(), "hi".to_owned())),
            "the manifest's value, not the project's"
        );
        assert_eq!(
            workload.runtime,
            svc_execution::WorkloadRuntime::Javascript {
                engine: "nodejs".into(),
                entry_file: "main.js".into(),
                args: vec![]
            }
        );
        // The same inputs publish the same document.
        let again = publish_named(NAMED, PROJECT, &["main.js"]).expect("published");
        assert_eq!(again.policy_digest, policy.policy_digest);
    }

    #[test]
    fn a_manifest_that_cannot_run_the_files_sent_is_not_published() {
        assert!(matches!(
            publish_named(NAMED, PROJECT, &["server.js"]),
            Err(PublishError::EntrypointMissing { entrypoint }) if entrypoint == "main.js"
        ));
        let pinned = NAMED.replace(
            "release:\n  mode: source\n",
            &format!("release:\n  mode: pinned\n  artifact:\n    digest: sha256:{}\n", "a".repeat(64)),
        );
        let refused = publish_named(&pinned, PROJECT, &["main.js"]).expect_err("pinned elsewhere");
        assert!(matches!(&refused, PublishError::PinnedElsewhere { sent, .. } if sent == "sha256:files"), "{refused}");
    }

    #[test]
    fn what_the_project_gives_the_job_must_be_declared_by_its_named_manifest() {
        let extra = PROJECT.replace(
            r#""env": {"GREETING": "hello"}"#,
            r#""env": {"GREETING": "hello", "DEBUG": "1"},
            "secrets": {"API_KEY": {"fromEnv": "SHOP_API_KEY"}}"#,
        );
        let refused = publish_named(NAMED, &extra, &["main.js"]).expect_err("undeclared");
        assert!(
            matches!(&refused, PublishError::Undeclared(list) if list == &["/app/env/DEBUG", "/app/secrets/API_KEY"]),
            "{refused}"
        );
        assert!(refused.to_string().contains("declare each in the manifest's `configuration`"), "{refused}");
    }

    /// What a route cannot run is refused at deploy, saying what to change: more jobs than
    /// a route has replicas, or an end.
    #[test]
    fn a_manifest_the_relay_cannot_roll_out_is_refused_at_deploy() {
        let jobs = |n: u16| NAMED.replace("deployment:\n", &format!("deployment:\n  jobs: {n}\n"));
        publish_named(&jobs(2), PROJECT, &["main.js"]).expect("two replicas");
        let refused = publish_named(&jobs(3), PROJECT, &["main.js"]).expect_err("three jobs");
        assert!(refused.to_string().contains("`deployment.jobs` is 3: a route is served by at most 2"), "{refused}");
        let bounded = NAMED.replace("mode: continuous\n", "mode: continuous\n  until: \"2030-01-01T00:00:00Z\"\n");
        let refused = publish_named(&bounded, PROJECT, &["main.js"]).expect_err("until");
        assert!(refused.to_string().contains("without `until`"), "{refused}");
    }
}
