//! `svc ingress demo`: the whole ingress path on one machine, in one command. A local
//! coordinator with a development CA, the gateway with its public TLS port, and a local job
//! runner that launches the bundled Node demo and the agent as real, confined processes. It
//! prints `ready <url>` once the URL answers 200 end to end, through the gateway and the
//! agent's TLS, with a certificate chaining to `DIR/ca.pem`.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent::challenge::RouteKey;
use agent::files::{create_private_dir, write_private};

use crate::ca::DevCa;
use crate::gateway::{Gateway, GatewayConfig, RouteConfig};
use crate::local::{LocalCoordinator, ephemeral};
use crate::runner::{DEFAULT_UID_BASE, IngressJob, JobRunner, Limits, LocalRunner};
use crate::validation::https::get;
use agent::wire;

/// The bundled Node.js demo, carried inside the binary so the command works anywhere.
pub const NODE_DEMO: &str = include_str!("../../examples/node-demo/server.js");

/// The demo's canonical hostname (browsers and curl resolve `.localhost` to loopback).
pub const HOSTNAME: &str = "demo.localhost";

/// How the demo runs.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    /// Data directory (may exist and hold other files).
    pub data_dir: PathBuf,
    /// The gateway's public TLS address.
    pub listen: SocketAddr,
    /// How to run the agent: program and leading arguments (`svc agent run`).
    pub agent_command: Vec<OsString>,
    /// The Node.js program.
    pub node: OsString,
    /// Development certificate lifetime.
    pub certificate_validity: Duration,
    /// How long to wait for the URL to answer.
    pub ready_timeout: Duration,
}

/// Why the demo could not come up.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A part of the demo could not be set up: which, and why.
    #[error("{what}: {source}")]
    Setup {
        /// The part (`the development CA`, `job confinement`, ...).
        what: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The URL did not answer in time.
    #[error("{url} did not answer 200 within {secs} s: {last}")]
    NotReady {
        /// The URL.
        url: String,
        /// The wait.
        secs: u64,
        /// The last failure.
        last: String,
    },
}

fn setup<E: Into<Box<dyn std::error::Error + Send + Sync>>>(what: &str) -> impl FnOnce(E) -> DemoError + '_ {
    move |e| DemoError::Setup { what: what.to_owned(), source: e.into() }
}

/// Runs the demo until `shutdown` completes; `say` receives each progress line.
pub async fn run(
    config: DemoConfig,
    say: impl Fn(&str) + Send + Sync + 'static,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), DemoError> {
    let (dir, jobs_dir) =
        crate::coordinator::prepare_dirs(&config.data_dir).map_err(setup("the data and job directories"))?;
    let dir = &dir;
    say(&format!("data directory {}", dir.display()));
    say(&format!("job directory {}", jobs_dir.display()));
    let ca = DevCa::open(dir).map_err(setup("the development CA"))?;
    say(&format!("development CA {}", ca.cert_path.display()));

    // The gateway's tunnel port certificate, from the same CA.
    let (tunnel_chain, tunnel_key) = ca
        .issue(&["gateway.localhost".to_owned()], Duration::from_secs(30 * 24 * 3600))
        .map_err(setup("the gateway certificate"))?;
    let ephemeral_addr: SocketAddr = ([127, 0, 0, 1], 0).into();
    let gw_config = GatewayConfig::new(config.listen, ephemeral_addr, ephemeral_addr, tunnel_chain, tunnel_key);
    let gateway = Gateway::new(gw_config);
    let (gw_task, bound) = gateway.clone().start().await.map_err(setup("the gateway"))?;
    say(&format!(
        "gateway: public TLS {}, agent tunnels {}, metrics http://{}/metrics",
        bound.public, bound.tunnel, bound.admin
    ));

    // The route, its credential and key, the coordinator that signs its CSR.
    let credential = wire::hex(&wire::new_ticket().map_err(|e| setup("randomness")(e.to_string()))?);
    let route_key = RouteKey::generate().map_err(setup("the route key"))?;
    let route = RouteConfig {
        route_id: "demo".to_owned(),
        hostnames: vec![HOSTNAME.to_owned()],
        credential_sha256: wire::sha256_hex(credential.as_bytes()),
        proxy_protocol: true,
        max_connections: 1024,
        standby: false,
    };
    gateway.set_routes(vec![route.clone()]);
    let coordinator = LocalCoordinator::new(ca);
    coordinator.set_routes(vec![route]);
    let (listener, coordinator_addr) = ephemeral().await.map_err(setup("the coordinator port"))?;
    tokio::spawn(coordinator.clone().serve(listener));
    say(&format!("coordinator http://{coordinator_addr}"));

    // The job: the Node app and its agent, each confined, as every job is.
    let runner = LocalRunner::new(Limits::default(), DEFAULT_UID_BASE).await.map_err(setup("job confinement"))?;
    let app_dir = dir.join("deployments").join("demo").join("app");
    create_private_dir(&app_dir).map_err(setup("the app directory"))?;
    write_private(&app_dir.join("server.js"), NODE_DEMO.as_bytes()).map_err(setup("the Node demo"))?;
    let app_port = free_port().map_err(setup("a port for the app"))?;
    let agent_config = agent::AgentConfig {
        route_id: "demo".to_owned(),
        hostname: HOSTNAME.to_owned(),
        credential,
        route_key,
        gateway: bound.tunnel,
        gateway_name: "gateway.localhost".to_owned(),
        gateway_ca: coordinator.ca().cert_path.clone(),
        app_port,
        app_health_path: "/health".to_owned(),
        proxy_protocol: true,
        certificate: agent::CertificateSource::DevCa {
            url: format!("http://{coordinator_addr}"),
            validity_secs: config.certificate_validity.as_secs(),
        },
        direct_listen: None,
        // One hostname, fixed for the demo's life: nothing to refresh.
        coordinator: None,
        refresh_secs: agent::config::DEFAULT_REFRESH_SECS,
    };
    let spec = IngressJob {
        id: "demo".to_owned(),
        app_dir,
        entrypoint: "server.js".to_owned(),
        node: config.node.clone(),
        env: Vec::new(),
        app_port,
        agent_dir: jobs_dir.join("demo").join("agent"),
        agent_command: config.agent_command.clone(),
        agent_config,
        capture_output: false,
    }
    .prepare()
    .map_err(setup("the job"))?;
    say(&format!("starting the Node demo on 127.0.0.1:{app_port} and its agent, confined"));
    let job = runner.launch(&spec).map_err(|e| DemoError::Setup {
        what: "the Node demo's job (is Node.js installed?)".to_owned(),
        source: e.into(),
    })?;
    if let [app, agent] = job.pids()[..] {
        say(&format!("job processes: app pid {app}, agent pid {agent}"));
    }

    let url = if bound.public.port() == 443 {
        format!("https://{HOSTNAME}/")
    } else {
        format!("https://{HOSTNAME}:{}/", bound.public.port())
    };
    say(&format!("waiting for {url} to answer through the gateway"));
    let ca_pem = coordinator.ca().cert_pem().to_owned();
    let ready = wait_ready(bound.public, &ca_pem, config.ready_timeout, &url);
    tokio::pin!(shutdown);
    // `None`: asked to stop while waiting (the shutdown future is then spent).
    let outcome = tokio::select! {
        r = ready => Some(r),
        () = &mut shutdown => None,
    };
    match outcome {
        Some(Ok(())) => {
            // A closed stdout must not end the demo with its jobs running.
            let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), format!("ready {url}\n").as_bytes());
            shutdown.await;
        }
        Some(Err(e)) => {
            job.stop().await;
            return Err(e);
        }
        None => {}
    }
    say("stopping");
    job.stop().await;
    gw_task.abort();
    Ok(())
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// GETs `/` through the public port until it answers 200.
async fn wait_ready(public: SocketAddr, ca_pem: &str, limit: Duration, url: &str) -> Result<(), DemoError> {
    let start = Instant::now();
    let mut last = String::from("not tried");
    while start.elapsed() < limit {
        match get(public, ca_pem, HOSTNAME, "/").await {
            Ok((200, _)) => return Ok(()),
            Ok((status, _)) => last = format!("status {status}"),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(DemoError::NotReady { url: url.to_owned(), secs: limit.as_secs(), last })
}

/// The default data directory: `svc/ingress-demo` in the user's data directory.
pub fn default_data_dir(user_data: Option<&Path>) -> PathBuf {
    user_data.map_or_else(|| PathBuf::from(".svc-ingress-demo"), |d| d.join("svc").join("ingress-demo"))
}
