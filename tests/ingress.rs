//! The ingress path as users reach it, over real processes on loopback: `svc ingress demo`
//! (a relay coordinator with the bundled Node project deployed to it), `svc relay serve` with
//! `svc ingress deploy`, and the standalone `svc gateway run` and `svc agent run` beside an
//! in-test coordinator. Every child process is killed
//! when its test ends, even on panic. One binary, a module per concern.

mod ingress {
    mod access;
    mod acme;
    mod catalog;
    mod chaos;
    mod client;
    mod confinement;
    mod console;
    mod demo;
    mod deploy;
    mod deploy_refusals;
    mod egress_flood;
    mod failover;
    mod fleet;
    mod intake;
    mod interrupt;
    mod keys;
    mod listener;
    mod local_default;
    mod logging;
    mod money_reach;
    mod output;
    mod path_ids;
    mod pebble;
    mod postgres;
    mod process;
    mod quiet;
    mod redeploy;
    mod redeploy_hosts;
    mod renewal;
    mod replicas;
    mod stale_quote;
    mod standalone;
    mod supervision;
    mod terminal;
    mod trust;

    use std::net::SocketAddr;
    use std::path::PathBuf;
    use std::process::Command;
    use std::time::Duration;

    use svc_e2e::service::{TempDir, svc_binary};

    use process::Proc;

    /// The demo's hostname: its project's canonical name, `<project>-<org>.localhost`.
    pub(super) const HOST: &str = "node-demo-acme.localhost";

    /// How long the demo may take to print `ready` (its deploy waits up to 120 s itself).
    const READY: Duration = Duration::from_secs(150);

    /// A running `svc ingress demo` on `127.0.0.1:0` ports, with the addresses, pids and
    /// token it printed.
    pub(super) struct Demo {
        /// The demo process (it kills its app and agent when dropped).
        pub(super) proc: Proc,
        /// The gateway's public TLS address.
        pub(super) public: SocketAddr,
        /// The gateway's metrics address.
        pub(super) metrics: SocketAddr,
        /// The relay API and console, `http://127.0.0.1:PORT`.
        pub(super) api: String,
        /// The organization's token the demo printed.
        pub(super) token: String,
        /// The demo's deployment.
        pub(super) deployment: String,
        /// The Node app's pid.
        pub(super) app_pid: u32,
        /// The agent's pid.
        pub(super) agent_pid: u32,
        /// The data directory (removed last).
        pub(super) dir: TempDir,
    }

    /// The two pids of a `job processes: app pid A, agent pid B` line.
    pub(super) fn job_pids(line: &str) -> [u32; 2] {
        let numbers: Vec<u32> = line
            .split(|c: char| !c.is_ascii_digit())
            .filter(|w| !w.is_empty())
            .map(|w| w.parse().expect("pid"))
            .collect();
        let [app, agent] = numbers[..] else { panic!("two pids in {line:?}") };
        [app, agent]
    }

    /// What follows `marker` in `line`, up to the first character `end` accepts.
    fn after<'a>(line: &'a str, marker: &str, end: impl Fn(char) -> bool) -> &'a str {
        let rest = line.split_once(marker).map(|(_, r)| r).unwrap_or_else(|| panic!("{marker:?} in {line:?}"));
        rest.split(end).next().unwrap_or_default()
    }

    impl Demo {
        pub(super) async fn start(name: &str, extra: &[&str]) -> Demo {
            Demo::start_in(TempDir::new(name), extra).await
        }

        /// The demo on a data directory of an earlier run.
        pub(super) async fn start_in(dir: TempDir, extra: &[&str]) -> Demo {
            let mut command = Command::new(svc_binary());
            command
                .args(["ingress", "demo", "--data-dir"])
                .arg(dir.path())
                .args(["--listen", "127.0.0.1:0", "--api-listen", "127.0.0.1:0"])
                .args(extra)
                .env("SVC_NODE", process::node());
            let mut proc = Proc::spawn("svc ingress demo", command);
            let metrics = proc.expect_line(READY, "the metrics URL", |l| l.contains("metrics http://")).await;
            let metrics: SocketAddr = after(&metrics, "metrics http://", |c| c == '/')
                .parse()
                .unwrap_or_else(|_| panic!("a metrics address in {metrics:?}"));
            let console = proc.expect_line(READY, "the console URL", |l| l.contains(" console http://")).await;
            let api = after(&console, " console ", |c| c == ' ').trim_end_matches("/console/").to_owned();
            let token = after(&console, "the token ", |c| c == ',').to_owned();
            let sent = proc.expect_line(READY, "the deployment", |l| l.contains(" deployment dep_")).await;
            let deployment = after(&sent, " deployment ", |c| c == ' ').to_owned();
            // The pids come before `ready`: register them at once, so they die with the test.
            let pids = proc.expect_line(READY, "the job's pids", |l| l.contains("job processes:")).await;
            let [app_pid, agent_pid] = job_pids(&pids);
            proc.also_kill(app_pid);
            proc.also_kill(agent_pid);
            let ready = proc.expect_line(READY, "`ready URL`", |l| l.starts_with("ready https://")).await;
            let port: u16 = ready
                .trim_end_matches('/')
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse().ok())
                .unwrap_or_else(|| panic!("a port in {ready:?}"));
            assert_ne!(port, 0, "the real port is printed");
            assert_eq!(ready, format!("ready https://{HOST}:{port}/"));
            Demo {
                proc,
                public: SocketAddr::from(([127, 0, 0, 1], port)),
                metrics,
                api,
                token,
                deployment,
                app_pid,
                agent_pid,
                dir,
            }
        }

        /// `DIR/ca.pem`, the only certificate the tests trust.
        pub(super) fn ca(&self) -> PathBuf {
            self.dir.path().join("ca.pem")
        }

        /// `DIR-jobs`: the jobs' state, outside the data directory.
        pub(super) fn jobs_dir(&self) -> PathBuf {
            let mut jobs = self.dir.path().as_os_str().to_owned();
            jobs.push("-jobs");
            PathBuf::from(jobs)
        }

        /// The demo agent's state directory: its deployment's first revision's, in `DIR-jobs`.
        pub(super) fn job_dir(&self) -> PathBuf {
            self.jobs_dir().join(&self.deployment).join("r1").join("agent")
        }

        /// `svc ingress ARGS --format json` against the demo's relay with the token it printed,
        /// as the CLI line it prints says; must succeed.
        pub(super) async fn svc_json(&self, args: &[&str]) -> serde_json::Value {
            let out = tokio::process::Command::new(svc_binary())
                .arg("ingress")
                .args(args)
                .args(["--format", "json"])
                .env("SVC_RELAY", &self.api)
                .env("SVC_RELAY_TOKEN", &self.token)
                .output()
                .await
                .expect("svc ingress");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "svc ingress {args:?}: {}", String::from_utf8_lossy(&out.stderr));
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("svc ingress {args:?} printed no JSON ({e}): {text}"))
        }

        /// GET on a fresh connection; panics on a transport error.
        pub(super) async fn get(&self, path: &str) -> client::Response {
            match client::get(self.public, HOST, &self.ca(), path).await {
                Ok(r) => r,
                Err(e) => panic!("GET {path}: {e}\n{}", self.proc.output()),
            }
        }
    }

    /// What a standalone gateway test needs: a development CA in `dir/ca`, the gateway's
    /// tunnel certificate and key written beside it, and a route for `host` with a fresh
    /// route key.
    pub(super) struct StandaloneRoute {
        /// The CA (it also signs the agent's CSR in the dev-CA tests).
        pub(super) ca: relay_api::ca::DevCa,
        /// `dir/ca/ca.pem`.
        pub(super) ca_pem: PathBuf,
        /// The tunnel certificate chain (PEM file).
        pub(super) tunnel_cert: PathBuf,
        /// Its key (PEM file).
        pub(super) tunnel_key: PathBuf,
        /// The route's credential for a coordinator's agent API (no gateway is given it).
        pub(super) credential: String,
        /// The route key its agent signs its tunnel `Hello` with (the gateway holds the
        /// public half).
        pub(super) route_key: agent::challenge::RouteKey,
        /// The route.
        pub(super) route: relay_api::gateway::RouteConfig,
    }

    impl StandaloneRoute {
        pub(super) fn new(dir: &std::path::Path, route_id: &str, host: &str, proxy_protocol: bool) -> StandaloneRoute {
            let ca = relay_api::ca::DevCa::open(&dir.join("ca")).expect("the development CA");
            let ca_pem = ca.cert_path.clone();
            let (chain, key) = ca
                .issue(&["gateway.localhost".to_owned()], Duration::from_secs(24 * 3600))
                .expect("the tunnel certificate");
            let (tunnel_cert, tunnel_key) = (dir.join("tunnel.pem"), dir.join("tunnel-key.pem"));
            std::fs::write(&tunnel_cert, chain).expect("write");
            std::fs::write(&tunnel_key, key).expect("write");
            let credential = agent::wire::hex(&agent::wire::new_ticket().expect("random"));
            let route_key = agent::challenge::RouteKey::generate().expect("a route key");
            let route = relay_api::gateway::RouteConfig {
                route_id: route_id.to_owned(),
                hostnames: vec![host.to_owned()],
                route_public_key: route_key.public_key(),
                proxy_protocol,
                max_connections: 64,
                standby: false,
                guards: relay_api::gateway::Guards::default(),
            };
            StandaloneRoute { ca, ca_pem, tunnel_cert, tunnel_key, credential, route_key, route }
        }

        /// Writes `dir/gateway.json` for this route, with fixed free public and tunnel ports
        /// (so a restarted gateway is found at the same place): (file, public, tunnel).
        pub(super) fn write_gateway_config(&self, dir: &std::path::Path) -> (PathBuf, SocketAddr, SocketAddr) {
            let tunnel: SocketAddr = ([127, 0, 0, 1], process::free_port()).into();
            let public: SocketAddr = ([127, 0, 0, 1], process::free_port()).into();
            let path = dir.join("gateway.json");
            let file = serde_json::json!({
                "public": public, "tunnel": tunnel, "admin": "127.0.0.1:0",
                "tunnelCert": self.tunnel_cert, "tunnelKey": self.tunnel_key, "routes": [self.route],
            });
            std::fs::write(&path, serde_json::to_vec_pretty(&file).expect("json")).expect("write");
            (path, public, tunnel)
        }
    }

    /// Writes `config` as `JOB/agent.json` and starts `svc agent run` on it.
    pub(super) fn start_agent(job: &std::path::Path, config: &agent::AgentConfig) -> Proc {
        let path = job.join("agent.json");
        std::fs::write(&path, serde_json::to_vec_pretty(config).expect("json")).expect("write");
        let mut command = Command::new(svc_binary());
        command.args(["agent", "run", "--config"]).arg(&path);
        Proc::spawn("svc agent run", command)
    }

    /// Starts `svc gateway run --config FILE` and waits until it prints its addresses; the
    /// process and its public address.
    pub(super) async fn start_gateway(config: &std::path::Path) -> (Proc, SocketAddr) {
        let (gateway, public, _) = start_gateway_with_admin(config).await;
        (gateway, public)
    }

    /// [`start_gateway`], with the URL of its metrics too.
    pub(super) async fn start_gateway_with_admin(config: &std::path::Path) -> (Proc, SocketAddr, String) {
        let mut command = Command::new(svc_binary());
        command.args(["gateway", "run", "--config"]).arg(config);
        let mut gateway = Proc::spawn("svc gateway run", command);
        // "svc gateway: public ADDR tunnel ADDR admin URL"
        let line = gateway
            .expect_line(Duration::from_secs(20), "its addresses", |l| l.starts_with("svc gateway: public "))
            .await;
        let words: Vec<&str> = line.split_whitespace().collect();
        let public = words.get(3).and_then(|a| a.parse().ok());
        let admin = words.get(7).map(|a| (*a).to_owned());
        match (public, admin) {
            (Some(public), Some(admin)) => (gateway, public, admin),
            _ => panic!("addresses in {line:?}"),
        }
    }
}
