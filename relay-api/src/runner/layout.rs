//! How an ingress job's two processes see their files. The app sees its own files, read-only,
//! at `/app` (its working directory); the agent sees its state directory at `/agent`
//! (`agent.json`, its key and certificate, the CA files it trusts, copied in). Neither sees
//! the other's, nor anything of the service's.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use relay_agent_config::AgentConfig;
use relay_wire::files::{create_private_dir, replace_private};

use svc_execution::market::{JobOrder, Sidecar, Workload};
use svc_execution::plan::Requirements;

use super::{Confined, JobSpec, Mount};

/// Where the app's files appear inside its sandbox.
pub const APP_INSIDE: &str = "/app";

/// Where the agent's state directory appears inside its sandbox.
pub const AGENT_INSIDE: &str = "/agent";

/// An ingress job to lay out.
#[derive(Debug, Clone)]
pub struct IngressJob {
    /// The job's name (the deployment ID).
    pub id: String,
    /// The app's files on the host (shown read-only).
    pub app_dir: PathBuf,
    /// The entrypoint, relative to the app's files.
    pub entrypoint: String,
    /// The Node.js program (a path, or a name on `PATH`).
    pub node: OsString,
    /// The app's environment besides `PORT`: the project's variables and secrets.
    pub env: Vec<(String, String)>,
    /// The app's loopback port (`PORT`).
    pub app_port: u16,
    /// The agent's state directory on the host (shown writable; kept across launches, so the
    /// key and certificate survive a restart).
    pub agent_dir: PathBuf,
    /// The agent program and its leading arguments (`svc agent run`).
    pub agent_command: Vec<OsString>,
    /// The agent's configuration, with host paths for the CA files: they are copied into
    /// the state directory and the configuration rewritten to name the copies.
    pub agent_config: AgentConfig,
    /// Whether the runner collects the processes' output (else they write to its own).
    pub capture_output: bool,
    /// Where the agent may connect (its job's network namespace has nothing of the host):
    /// the gateways' tunnels, the agent API, the ACME server.
    pub egress: svc_runner::Egress,
}

/// Why a job could not be laid out.
#[derive(Debug, thiserror::Error)]
#[error("cannot prepare {path} for job {job}: {source}")]
pub struct LayoutError {
    job: String,
    path: PathBuf,
    #[source]
    source: std::io::Error,
}

impl IngressJob {
    /// Writes the agent's state directory (its configuration, 0600, and the CA files it
    /// trusts) and returns what the runner launches. The directory is the job's to write, so
    /// files are replaced, never written through a link the job may have planted.
    pub fn prepare(self) -> Result<JobSpec, LayoutError> {
        let fail = |path: &Path| {
            let (job, path) = (self.id.clone(), path.to_owned());
            move |source| LayoutError { job, path, source }
        };
        create_private_dir(&self.agent_dir).map_err(fail(&self.agent_dir))?;
        for (name, bytes) in self.agent_files()? {
            let path = self.agent_dir.join(name);
            replace_private(&path, &bytes).map_err(fail(&path))?;
        }
        let app = Confined {
            argv: vec![self.node.clone(), Path::new(APP_INSIDE).join(&self.entrypoint).into_os_string()],
            env: self.app_env(),
            mounts: vec![Mount {
                host: self.app_dir.clone(),
                inside: APP_INSIDE.into(),
                writable: false,
                job_owned: true,
            }],
            cwd: APP_INSIDE.into(),
        };
        let agent = Confined {
            argv: self.agent_argv(),
            // The agent gets no app environment: the app's secrets are not the agent's business.
            env: Vec::new(),
            mounts: vec![Mount {
                host: self.agent_dir.clone(),
                inside: AGENT_INSIDE.into(),
                writable: true,
                job_owned: true,
            }],
            cwd: AGENT_INSIDE.into(),
        };
        Ok(JobSpec {
            id: self.id,
            app,
            agent: Some(agent),
            capture_output: self.capture_output,
            network: svc_runner::Network::default(),
            egress: Some(self.egress.clone()),
            resources: None,
        })
    }

    /// The order the processor market launches: the app as its published policy's
    /// `workload` says (artifact, runtime, variables, secrets; `PORT` is the job's loopback
    /// port), and the agent as its sidecar, whose state directory (`agent_dir`, kept across
    /// launches) gets its configuration and CA files. The agent gets no app environment: the
    /// app's secrets are not the agent's business. (`entrypoint` and `env` are what
    /// [`IngressJob::prepare`] runs; an order runs the workload's.)
    pub fn order(&self, mut workload: Workload) -> Result<JobOrder, LayoutError> {
        let sidecar = Sidecar {
            argv: self.agent_argv().into_iter().map(|arg| arg.to_string_lossy().into_owned()).collect(),
            env: Vec::new(),
            state_dir: AGENT_INSIDE.into(),
            files: self.agent_files()?,
            // Its key, certificate and ACME account survive a restart of the job, as they
            // always have: an ACME CA is not asked for a new account at each launch.
            kept_state: Some(self.agent_dir.clone()),
            egress: Some(self.egress.clone()),
        };
        Ok(JobOrder {
            execution_id: self.id.clone(),
            // An ingress job runs while its route is funded: the coordinator stops it.
            window_end: u64::MAX,
            requirements: Requirements::default(),
            avoid: Vec::new(),
            workload: {
                workload.env.retain(|(name, _)| name != "PORT");
                workload.env.push(("PORT".to_owned(), self.app_port.to_string()));
                workload.sidecar = Some(sidecar);
                workload
            },
        })
    }

    /// `PORT` (the app's loopback port), then the project's variables and secrets.
    fn app_env(&self) -> Vec<(String, String)> {
        let mut env = vec![("PORT".to_owned(), self.app_port.to_string())];
        env.extend(self.env.iter().filter(|(k, _)| k != "PORT").cloned());
        env
    }

    fn agent_argv(&self) -> Vec<OsString> {
        let mut argv = self.agent_command.clone();
        argv.extend([OsString::from("--config"), Path::new(AGENT_INSIDE).join("agent.json").into_os_string()]);
        argv
    }

    /// The agent's files, by name in its state directory: the CA files it trusts (copied from
    /// the host) and its configuration, rewritten to name the copies.
    fn agent_files(&self) -> Result<Vec<(String, Vec<u8>)>, LayoutError> {
        let mut files = Vec::new();
        let mut config = self.agent_config.clone();
        config.gateway_ca = self.copy_in(&config.gateway_ca, "gateway-ca.pem", &mut files)?;
        if let relay_agent_config::CertificateSource::Acme { directory_ca: Some(ca), .. } = &mut config.certificate {
            *ca = self.copy_in(ca, "acme-directory-ca.pem", &mut files)?;
        }
        let json = serde_json::to_vec_pretty(&config).map_err(|e| LayoutError {
            job: self.id.clone(),
            path: self.agent_dir.join("agent.json"),
            source: std::io::Error::other(e),
        })?;
        files.push(("agent.json".to_owned(), json));
        Ok(files)
    }

    fn copy_in(&self, host: &Path, name: &str, files: &mut Vec<(String, Vec<u8>)>) -> Result<PathBuf, LayoutError> {
        let bytes =
            fs_err::read(host).map_err(|source| LayoutError { job: self.id.clone(), path: host.to_owned(), source })?;
        files.push((name.to_owned(), bytes));
        Ok(Path::new(AGENT_INSIDE).join(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Review finding: the coordinator (root) wrote the job's CA files through links a
    /// compromised agent had planted in its own state directory.
    #[test]
    fn links_planted_in_the_agent_directory_are_never_written_through() {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let dir = scratch.path();
        let agent_dir = dir.join("agent");
        create_private_dir(&agent_dir).expect("mkdir");
        let outside = dir.join("host-file");
        std::fs::write(&outside, b"the host's").expect("write");
        for name in ["gateway-ca.pem", "agent.json"] {
            std::os::unix::fs::symlink(&outside, agent_dir.join(name)).expect("link");
        }
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, b"-----BEGIN CERTIFICATE-----\n").expect("write");
        let config: AgentConfig = serde_json::from_value(serde_json::json!({
            "routeId": "r", "hostname": "a.localhost", "credential": "c",
            "routeKey": relay_wire::challenge::RouteKey::generate().expect("a key"),
            "gateway": "127.0.0.1:1", "gatewayName": "gateway.localhost", "gatewayCa": ca,
            "appPort": 1, "certificate": {"kind": "dev_ca", "url": "http://127.0.0.1:2", "validity_secs": 60},
        }))
        .expect("a configuration");
        let job = IngressJob {
            id: "dep_1".into(),
            app_dir: dir.join("app"),
            entrypoint: "server.js".into(),
            node: "node".into(),
            env: vec![("PORT".into(), "9".into()), ("A".into(), "b".into())],
            app_port: 3000,
            agent_dir: agent_dir.clone(),
            agent_command: vec!["svc".into(), "agent".into(), "run".into()],
            agent_config: config,
            capture_output: false,
            egress: svc_runner::Egress(std::sync::Arc::new(svc_runner::Destinations::default())),
        };
        let spec = job.prepare().expect("prepared");
        assert_eq!(std::fs::read(&outside).expect("read"), b"the host's", "written through a link");
        let written: AgentConfig = AgentConfig::read(&agent_dir.join("agent.json")).expect("the configuration");
        assert_eq!(written.gateway_ca, Path::new("/agent/gateway-ca.pem"), "the copy the agent sees");
        assert_eq!(spec.app.env, [("PORT".to_owned(), "3000".to_owned()), ("A".to_owned(), "b".to_owned())]);
        assert_eq!(spec.agent.expect("an agent").env, [], "the agent gets no app environment");
    }
}
