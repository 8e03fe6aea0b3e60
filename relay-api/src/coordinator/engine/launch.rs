//! Launching a revision's job: fresh keys for its agent (the store keeps their hash and
//! public half), its app files stored by digest (checked against its published policy's
//! artifact), its order (the app as the policy's workload says, and the agent as its sidecar)
//! placed on the processor market, and the gateway told before the agent first connects.

use agent::challenge::RouteKey;
use agent::wire;

use super::{APP_DIR, AgentCertificates, Engine, job_key};
use crate::coordinator::model::Deployment;

use svc_execution::{Workload, WorkloadRuntime};

use crate::coordinator::store::{PublishedPolicy, RouteKeys, StoreError, random_hex};
use crate::project::Project;
use crate::runner::IngressJob;

/// The job of one revision of a deployment.
pub(super) struct JobOf<'a> {
    pub(super) deployment: &'a Deployment,
    pub(super) revision: u32,
    pub(super) route_id: &'a str,
    pub(super) project_json: &'a str,
}

/// Why a revision's job could not be started: what its deployment (or successor) records as
/// the reason it failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StartError {
    /// The project stored with the revision no longer validates (a newer validator).
    #[error("the stored project no longer validates: {0}")]
    Project(#[source] crate::project::ProjectErrors),
    /// The job's route key could not be made.
    #[error("cannot make the job's route key: {0}")]
    RouteKey(#[source] agent::challenge::RouteKeyError),
    /// No loopback port for the app.
    #[error("no free port for the app: {0}")]
    Port(#[source] std::io::Error),
    /// The revision's secrets could not be read.
    #[error(transparent)]
    Secrets(#[from] crate::coordinator::files::SecretsError),
    /// The agent's files could not be read.
    #[error(transparent)]
    Layout(#[from] crate::runner::layout::LayoutError),
    /// The app's files could not be stored as the job's artifact.
    #[error("cannot store the app's files {path} for its job: {source}", path = path.display())]
    Artifact {
        /// The revision's app files.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: svc_execution::artifacts::ArtifactError,
    },
    /// The revision's published policy does not read as a workload (a bug or a damaged store).
    #[error(transparent)]
    Policy(#[from] manifest_core::plan::PlanError),
    /// A revision deployed before policies were recorded could not publish one.
    #[error("cannot publish revision {revision}'s policy: {source}")]
    Publish {
        /// The revision.
        revision: u32,
        /// Why.
        #[source]
        source: crate::coordinator::policy::PublishError,
    },
    /// The store refused (recording the keys, reading the project, randomness).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The processor market would not run it.
    #[error(transparent)]
    Launch(#[from] svc_execution::market::Refusal),
}

impl Engine {
    /// Launches the deployment's job with a fresh tunnel credential and route key (the
    /// store keeps only their hash and public half); returns where it runs, for the log, or
    /// why not.
    pub(super) async fn launch(&self, d: &Deployment) -> Result<String, StartError> {
        let project_json = self.db(|store| store.project_json(&d.id))?;
        let job = JobOf { deployment: d, revision: d.revision, route_id: &d.route_id, project_json: &project_json };
        self.launch_job(job, |keys| self.db(|store| store.set_route_keys(&d.id, keys))).await
    }

    /// Launches a revision's job: its keys are made, `record`ed, and known to the gateway
    /// and the certificate signer before its agent first presents them.
    pub(super) async fn launch_job(
        &self,
        job: JobOf<'_>,
        record: impl FnOnce(&RouteKeys) -> Result<(), StoreError>,
    ) -> Result<String, StartError> {
        let project = crate::project::read(job.project_json).map_err(StartError::Project)?;
        let credential = random_hex(32)?;
        let route_key = RouteKey::generate().map_err(StartError::RouteKey)?;
        let keys = RouteKeys {
            credential_sha256: wire::sha256_hex(credential.as_bytes()),
            route_public_key: route_key.public_key(),
        };
        let (d, revision) = (job.deployment, job.revision);
        let revision_dir = self.revision_dir(&d.id, revision);
        let app_dir = revision_dir.join(APP_DIR);
        let policy = match self.db(|store| store.policy(&d.id, revision))? {
            Some(policy) => policy,
            None => self.publish_unpublished(&job, &project, &app_dir)?,
        };
        let workload = manifest_core::plan::workload(
            policy.published(),
            &crate::coordinator::files::secret_values(&revision_dir)?,
        )?;
        // Stored again at each launch (a copy, checked against the policy's artifact digest: a
        // file changed since the deploy refuses the launch): the store keeps what the
        // revisions that run need, and nothing once they are gone (`Engine::sweep_artifacts`).
        let artifacts = &self.parts.artifacts;
        crate::coordinator::blocking(|| artifacts.store(&app_dir, Some(&workload.artifact_digest)))
            .map_err(|source| StartError::Artifact { path: app_dir.clone(), source })?;
        let ingress = self.ingress_job(&job, &project, &workload, credential, route_key)?;
        let mut order = ingress.order(workload)?;
        record(&keys)?;
        let (id, revision) = (&job.deployment.id, job.revision);
        order.execution_id = self.db(|store| store.begin_execution(id, revision))?;
        let placement = self.jobs.launch(&job_key(&job.deployment.id, job.revision), order)?;
        self.sync_routes().await;
        Ok(format!("on processor {}", placement.processor_id))
    }

    /// Publishes the policy of a revision deployed before revisions published one: the
    /// manifest derived from its project (a named manifest's text was not kept then; its jobs
    /// ran the project's variables, which the derived manifest declares), over its app files.
    fn publish_unpublished(
        &self,
        job: &JobOf<'_>,
        project: &Project,
        app_dir: &std::path::Path,
    ) -> Result<PublishedPolicy, StartError> {
        let (d, revision) = (job.deployment, job.revision);
        let failed = |source| StartError::Publish { revision, source };
        let mut derived = project.clone();
        derived.manifest = None;
        let manifest = derived
            .manifest_v5(None)
            .map_err(|e| failed(crate::coordinator::policy::PublishError::NotV5(e.to_string())))?;
        let artifacts = &self.parts.artifacts;
        let digest = crate::coordinator::blocking(|| artifacts.store(app_dir, None))
            .map_err(|source| StartError::Artifact { path: app_dir.to_owned(), source })?;
        let has_file = |name: &str| app_dir.join(name).is_file();
        let policy = crate::coordinator::policy::publish(&manifest, &derived, &d.id, revision, &digest, has_file)
            .map_err(failed)?;
        let policy = self.db(|store| store.publish_policy(&d.id, &policy))?;
        let line = format!(
            "revision {revision} published its policy {} (deployed before revisions published one: the manifest \
             derived from its project)",
            policy.policy_digest
        );
        let _ = self.db(|store| store.append_logs(&d.id, "route", &[line]));
        Ok(policy)
    }

    fn ingress_job(
        &self,
        job: &JobOf<'_>,
        project: &Project,
        workload: &Workload,
        credential: String,
        route_key: RouteKey,
    ) -> Result<IngressJob, StartError> {
        let (d, revision) = (job.deployment, job.revision);
        let config = &self.parts.config;
        let app_port =
            std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(StartError::Port)?.port();
        let agent_api = format!("http://{}", self.parts.agent_api);
        let certificate = match &config.certificates {
            AgentCertificates::DevCa => {
                agent::CertificateSource::DevCa { url: agent_api.clone(), validity_secs: 7 * 24 * 3600 }
            }
            AgentCertificates::Acme { directory_url, directory_ca, .. } => agent::CertificateSource::Acme {
                directory_url: directory_url.clone(),
                contact: Vec::new(),
                directory_ca: directory_ca.clone(),
            },
        };
        let agent_config = agent::AgentConfig {
            route_id: job.route_id.to_owned(),
            hostname: d.canonical_hostname.clone(),
            credential,
            route_key,
            gateway: self.parts.tunnel,
            gateway_name: "gateway.localhost".to_owned(),
            gateway_ca: self.parts.gateway_ca.clone(),
            app_port,
            app_health_path: project.app.health_path.clone(),
            proxy_protocol: project.proxy_protocol,
            certificate,
            direct_listen: None,
            coordinator: Some(agent_api),
            refresh_secs: config.revalidate.as_secs().clamp(1, 30),
        };
        let entrypoint = match &workload.runtime {
            WorkloadRuntime::Javascript { entry_file, .. } => entry_file.clone(),
            WorkloadRuntime::NativeImage { executable, .. } => executable.clone(),
        };
        Ok(IngressJob {
            id: job_key(&d.id, revision),
            app_dir: self.revision_dir(&d.id, revision).join(APP_DIR),
            entrypoint,
            node: config.node.clone(),
            env: workload.env.clone(),
            app_port,
            agent_dir: self.job_dir(&d.id, revision).join("agent"),
            agent_command: config.agent_command.clone(),
            agent_config,
            capture_output: true,
        })
    }
}
