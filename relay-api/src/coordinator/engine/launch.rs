//! Equipping a revision's jobs for the market ([`Launcher`], the ingress market's [`Equip`]):
//! one job per slot of the revision's policy, each one replica of its route (`job-<slot>`,
//! with its own agent state directory); the revision's keys for its agent, the same for every
//! slot ([`super::keys`]; the store keeps their hash and public half, on the revision it
//! runs); its app files stored by digest (checked against its published policy's artifact);
//! and the agent added to its order as its sidecar. The scheduler decides each launch and
//! records it; the gateway learns new keys at the engine's next route sync, and the agent
//! retries until it does.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use relay_agent_config::{AgentConfig, CertificateSource, PinnedGateway};
use svc_execution::market::{JobOrder, Refusal};
use svc_execution::{Workload, WorkloadRuntime};

use super::keys::RevisionKeys;
use super::{AgentCertificates, job_key, replica_name};
use crate::coordinator::CoordinatorConfig;
use crate::coordinator::files::APP_DIR;
use crate::coordinator::gateway_hosts::GatewayHosts;
use crate::coordinator::ingress_market::Equip;
use crate::coordinator::model::Deployment;
use crate::coordinator::store::{PublishedPolicy, RelayStore, StoreError, now_ms};
use crate::project::Project;
use crate::runner::IngressJob;

/// A job of one revision of a deployment (its slot: which of the route's replicas).
pub(super) struct JobOf<'a> {
    pub(super) deployment: &'a Deployment,
    pub(super) revision: u32,
    pub(super) slot: u16,
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
    /// The revision's keys were made anew while another of its jobs runs with the old ones
    /// (its keys file was lost): launching would lock that job out.
    #[error("revision {0}'s route keys were lost while another of its jobs runs; deploy again (`svc ingress deploy`)")]
    KeysLost(u32),
    /// The revision's route keys could not be made or kept.
    #[error(transparent)]
    Keys(#[from] super::keys::KeysError),
    /// No loopback port for the app.
    #[error("no free port for the app: {0}")]
    Port(#[source] std::io::Error),
    /// The catalog's signing key, which the agent checks gateway hosts against, could not be
    /// read: launching without it would let the agent take any host it is told of.
    #[error("cannot read the catalog's signing key for the agent: {0}")]
    CatalogKey(#[source] crate::catalog::CatalogError),
    /// The revision's secrets could not be read.
    #[error(transparent)]
    Secrets(#[from] crate::coordinator::files::SecretsError),
    /// The revision's files could not be written from the store.
    #[error(transparent)]
    Files(#[from] crate::coordinator::files::MaterializeError),
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
    /// The revision is neither the one the deployment serves nor its successor (withdrawn
    /// meanwhile).
    #[error("revision {0} is neither served nor deployed any more")]
    NotDeployed(u32),
    /// No execution has this ID (its order came from elsewhere).
    #[error("no execution {0} is recorded")]
    Unknown(String),
}

/// What a job equipped by the [`Launcher`] is: its deployment, the revision it runs, the
/// artifact it was launched from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobMeta {
    pub(crate) deployment: String,
    pub(crate) revision: u32,
    pub(crate) artifact: String,
    /// The gateway route its agent serves (its revision's).
    pub(crate) route_id: String,
    /// Its replica name, when its revision runs several jobs (its output lines say it).
    pub(crate) replica: Option<String>,
}

/// Equips ingress jobs: what it needs of the coordinator, and the jobs it equipped.
pub(crate) struct Launcher {
    pub(super) config: CoordinatorConfig,
    pub(super) store: Arc<RelayStore>,
    pub(super) artifacts: svc_execution::artifacts::ArtifactStore,
    pub(super) tunnel: SocketAddr,
    pub(super) gateway_ca: PathBuf,
    pub(super) agent_api: SocketAddr,
    /// By execution ID.
    pub(super) jobs: Mutex<HashMap<String, JobMeta>>,
    /// Held while a revision's files are written and its keys read or made and recorded: two
    /// slots launched at once write its files once and get the same pair.
    pub(super) keys: Mutex<()>,
    /// The gateway, for the open connections of a draining job's route.
    pub(super) gateway: Arc<crate::gateway::Gateway>,
    /// The catalog's publisher: each agent is launched with its signing key as it is then
    /// (a key rotated since the engine started included), to check the gateway hosts it is
    /// told of against.
    pub(super) catalog: Arc<crate::catalog::Publisher>,
}

impl Equip for Launcher {
    fn equip(&self, order: &mut JobOrder) -> Result<(), Refusal> {
        match self.prepare(order) {
            Ok(()) => Ok(()),
            Err(e) => {
                // What the customer reads says what failed; where on the host, the log.
                tracing::warn!("svc relay: job {} not launched: {e}", order.execution_id);
                Err(match e {
                    StartError::Artifact { .. } => Refusal::Artifact(
                        "the app's files are not those the revision published (changed since the deploy?)".to_owned(),
                    ),
                    StartError::Project(e) => Refusal::Start(format!("the stored project no longer validates: {e}")),
                    StartError::KeysLost(_) => Refusal::Start(e.to_string()),
                    StartError::NotDeployed(revision) => {
                        Refusal::Start(format!("revision {revision} is neither served nor deployed any more"))
                    }
                    _ => Refusal::Start("the job could not be prepared (the coordinator's log has why)".to_owned()),
                })
            }
        }
    }

    fn abandon(&self, execution_id: &str) {
        self.forget(execution_id);
    }

    fn open_connections(&self, execution_id: &str) -> usize {
        self.meta(execution_id).map_or(0, |meta| self.gateway.active_connections(&meta.route_id))
    }
}

impl Launcher {
    /// What job `execution_id` is, if this launcher equipped it.
    pub(crate) fn meta(&self, execution_id: &str) -> Option<JobMeta> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner).get(execution_id).cloned()
    }

    /// Whether another job of revision `revision` of the deployment than `execution_id` runs
    /// (this launcher equipped it and it has not ended).
    fn sibling_runs(&self, deployment_id: &str, revision: u32, execution_id: &str) -> bool {
        let jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        jobs.iter()
            .any(|(id, meta)| id != execution_id && meta.deployment == deployment_id && meta.revision == revision)
    }

    /// Forgets a job that ended.
    pub(crate) fn forget(&self, execution_id: &str) -> Option<JobMeta> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner).remove(execution_id)
    }

    /// The artifacts the jobs equipped were launched from.
    pub(crate) fn artifacts(&self) -> Vec<String> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner).values().map(|m| m.artifact.clone()).collect()
    }

    /// A revision's directory in the data directory: its app files, its secrets.
    fn revision_dir(&self, deployment_id: &str, revision: u32) -> PathBuf {
        crate::coordinator::files::revision_dir(&self.config.deployments_dir(), deployment_id, revision)
    }

    /// The state directory of slot `slot`'s agent (outside the data directory): `agent/` for
    /// the first, `agent-<slot>/` for the others, each kept across the slot's restarts.
    fn agent_dir(&self, deployment_id: &str, revision: u32, slot: u16) -> PathBuf {
        let job_dir = crate::coordinator::files::revision_dir(&self.config.jobs_dir, deployment_id, revision);
        match slot {
            0 => job_dir.join("agent"),
            n => job_dir.join(format!("agent-{n}")),
        }
    }

    /// Makes `order` (the scheduler's, for a recorded execution) the revision's job: its
    /// keys made and recorded, its files checked and stored, its agent added.
    fn prepare(&self, order: &mut JobOrder) -> Result<(), StartError> {
        let (d, revision, slot) = self
            .store
            .execution_deployment(&order.execution_id)?
            .ok_or_else(|| StartError::Unknown(order.execution_id.clone()))?;
        let successor = self.store.successor(&d.id)?;
        let (route_id, project_json, serving) = if revision == d.revision {
            (d.route_id.clone(), self.store.project_json(&d.id)?, true)
        } else if let Some(s) = successor.filter(|s| s.revision == revision) {
            (s.route_id, self.store.successor_project_json(&d.id)?, false)
        } else {
            return Err(StartError::NotDeployed(revision));
        };
        let job = JobOf { deployment: &d, revision, slot, route_id: &route_id, project_json: &project_json };
        let project = crate::project::read(job.project_json).map_err(StartError::Project)?;
        // Held from here: two slots of a revision launched at once write its files once, and
        // get the same keys.
        let _revision_lock = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        crate::coordinator::files::materialize(&self.store, &self.config.deployments_dir(), &d.id, revision)?;
        let app_dir = self.revision_dir(&d.id, revision).join(APP_DIR);
        // Stored again at each launch (a copy, checked against the policy's artifact digest: a
        // file changed since the deploy refuses the launch): the store keeps what the
        // revisions that run need, and nothing once they are gone (`Engine::sweep_artifacts`).
        let digest = order.workload.artifact_digest.clone();
        self.artifacts
            .store(&app_dir, Some(&digest))
            .map_err(|source| StartError::Artifact { path: app_dir.clone(), source })?;
        // The revision's keys, the same for each of its slots, recorded before its job starts.
        let (keys, made) = RevisionKeys::kept_or_new(&self.revision_dir(&d.id, revision))?;
        let recorded = keys.recorded();
        let stored = if serving { self.store.route_keys(&d.id)? } else { self.store.successor_keys(&d.id)? };
        if made && stored.is_some() && self.sibling_runs(&d.id, revision, &order.execution_id) {
            return Err(StartError::KeysLost(revision));
        }
        let ingress = self.ingress_job(&job, &project, &order.workload, keys)?;
        let mut equipped = ingress.order(order.workload.clone())?;
        equipped.execution_id = order.execution_id.clone();
        equipped.window_end = order.window_end;
        equipped.requirements = order.requirements.clone();
        equipped.avoid = order.avoid.clone();
        if stored.as_ref() != Some(&recorded) {
            if serving {
                self.store.set_route_keys(&d.id, &recorded)?;
            } else {
                self.store.set_successor_keys(&d.id, revision, &recorded)?;
            }
        }
        let several = self
            .store
            .policy(&d.id, revision)?
            .and_then(|policy| manifest_core::plan::plan(policy.published()).ok())
            .is_some_and(|plan| plan.slots > 1);
        let meta = JobMeta {
            deployment: d.id.clone(),
            revision,
            artifact: digest,
            route_id: route_id.clone(),
            replica: several.then(|| replica_name(slot)),
        };
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner).insert(order.execution_id.clone(), meta);
        *order = equipped;
        Ok(())
    }

    /// Publishes the policy of a revision deployed before revisions published one: the
    /// manifest derived from its project (a named manifest's text was not kept then; its jobs
    /// ran the project's variables, which the derived manifest declares), over its app files.
    pub(super) fn publish_unpublished(
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
        let artifacts = &self.artifacts;
        let digest = artifacts
            .store(app_dir, None)
            .map_err(|source| StartError::Artifact { path: app_dir.to_owned(), source })?;
        let has_file = |name: &str| app_dir.join(name).is_file();
        let policy = crate::coordinator::policy::publish(&manifest, &derived, &d.id, revision, &digest, has_file)
            .map_err(failed)?;
        let policy = self.store.publish_policy(&d.id, &policy)?;
        let line = format!(
            "revision {revision} published its policy {} (deployed before revisions published one: the manifest \
             derived from its project)",
            policy.policy_digest
        );
        let _ = self.store.append_logs(&d.id, "route", &[line]);
        Ok(policy)
    }

    /// The gateway hosts serving the deployment's routes, which its agents tunnel to besides
    /// the coordinator's gateway, each pinned by its tunnel certificate.
    fn pinned_gateways(&self, deployment_id: &str) -> Result<Vec<PinnedGateway>, StoreError> {
        self.store
            .read(|tx| GatewayHosts::read(tx, now_ms(), self.config.gateway_hosts_per_route)?.pinned(tx, deployment_id))
    }

    fn ingress_job(
        &self,
        job: &JobOf<'_>,
        project: &Project,
        workload: &Workload,
        keys: RevisionKeys,
    ) -> Result<IngressJob, StartError> {
        let (d, revision) = (job.deployment, job.revision);
        let config = &self.config;
        let app_port =
            std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(StartError::Port)?.port();
        let agent_api = format!("http://{}", self.agent_api);
        let certificate = match &config.certificates {
            AgentCertificates::DevCa => CertificateSource::DevCa {
                url: agent_api.clone(),
                validity_secs: config.dev_certificate_validity.as_secs(),
            },
            AgentCertificates::Acme { directory_url, directory_ca, .. } => CertificateSource::Acme {
                directory_url: directory_url.clone(),
                contact: Vec::new(),
                directory_ca: directory_ca.clone(),
            },
        };
        let agent_config = AgentConfig {
            route_id: job.route_id.to_owned(),
            hostname: d.canonical_hostname.clone(),
            credential: keys.credential,
            replica: Some(replica_name(job.slot)),
            route_key: keys.route_key,
            gateway: self.tunnel,
            gateway_name: "gateway.localhost".to_owned(),
            gateway_ca: self.gateway_ca.clone(),
            pinned_gateways: self.pinned_gateways(&d.id)?,
            catalog_key: Some(self.catalog.public_key().map_err(StartError::CatalogKey)?),
            app_port,
            app_health_path: project.app.health_path.clone(),
            proxy_protocol: project.proxy_protocol,
            certificate,
            direct_listen: None,
            coordinator: Some(agent_api),
            refresh_secs: config.revalidate.as_secs().clamp(1, 30),
        };
        // Where the agent may connect from its job's network namespace (through the runner's
        // egress broker): nothing else of the host or the world.
        let mut fixed = vec![self.tunnel.to_string(), self.agent_api.to_string()];
        if let AgentCertificates::Acme { directory_url, .. } = &config.certificates {
            fixed.extend(crate::coordinator::egress::authority(directory_url));
        }
        fixed.extend(agent_config.pinned_gateways.iter().map(|g| g.address.clone()));
        let destinations = crate::coordinator::egress::AgentDestinations::new(
            fixed,
            &d.id,
            self.store.clone(),
            config.gateway_hosts_per_route,
        );
        let entrypoint = match &workload.runtime {
            WorkloadRuntime::Javascript { entry_file, .. } => entry_file.clone(),
            WorkloadRuntime::NativeImage { executable, .. } => executable.clone(),
        };
        Ok(IngressJob {
            id: job_key(&d.id, revision, job.slot),
            app_dir: self.revision_dir(&d.id, revision).join(APP_DIR),
            entrypoint,
            node: config.node.clone(),
            env: workload.env.clone(),
            app_port,
            agent_dir: self.agent_dir(&d.id, revision, job.slot),
            agent_command: config.agent_command.clone(),
            agent_config,
            capture_output: true,
            egress: svc_runner::Egress(Arc::new(destinations)),
        })
    }
}
