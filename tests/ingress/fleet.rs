//! Issue 20, as operators run it: a gateway host prepared by `gateway-prep init` and run with
//! `svc gateway run` follows the coordinator's route feed, and the route's agent, already
//! running, learns of it and tunnels to it besides the coordinator's own gateway, so the route
//! answers through both.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use svc_e2e::service::{TempDir, gateway_prep_binary, svc_binary};

use super::client;
use super::deploy::{Relay, node_demo_project, state};
use super::process::Proc;

/// The gateway host's `/metrics`, once it has a line holding `want` (at most 15 s).
async fn metrics_with(admin: SocketAddr, want: String) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let text = tokio::task::spawn_blocking(move || {
            String::from_utf8_lossy(&svc_e2e::service::http(admin, "GET", "/metrics", &[], None).body).into_owned()
        })
        .await
        .expect("the metrics");
        if text.lines().any(|l| l.contains(&want)) || std::time::Instant::now() > deadline {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A gateway host prepared by `gateway-prep init` under `<dir>/gateway-host`, admitted as the
/// coordinator's gateway operator `local` (the one every deploy is assigned to).
pub(super) struct GatewayHost {
    /// Its `gateway.json`.
    pub(super) config: std::path::PathBuf,
}

impl GatewayHost {
    /// Prepares it to listen on `[public, tunnel, admin]`.
    pub(super) fn prepare(relay: &Relay, dir: &std::path::Path, listen: [String; 3]) -> GatewayHost {
        GatewayHost::prepare_as(relay, dir, ("gateway-host", "gw1"), &issue_admission_token(relay), listen)
    }

    /// [`GatewayHost::prepare`] under `<dir>/<root>`, registered as `<name>.example.test` with
    /// an admission token issued already: one of several hosts of a test.
    pub(super) fn prepare_as(
        relay: &Relay,
        dir: &std::path::Path,
        (root, name): (&str, &str),
        token: &str,
        listen: [String; 3],
    ) -> GatewayHost {
        let root = dir.join(root);
        let [public, tunnel, admin] = listen;
        let init = Command::new(gateway_prep_binary())
            .args(["init", "--root", &root.to_string_lossy(), "--coordinator", &relay.api])
            .args(["--admission-token", token, "--hostname", &format!("{name}.example.test")])
            .args(["--public", &public, "--tunnel", &tunnel, "--admin", &admin])
            .output()
            .expect("gateway-prep init");
        assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
        GatewayHost { config: root.join("etc/svc-gateway/gateway.json") }
    }

    /// Runs `svc gateway run` on it: the process, its public and admin addresses.
    pub(super) async fn run(&self) -> (Proc, SocketAddr, SocketAddr) {
        let mut command = Command::new(svc_binary());
        command.args(["gateway", "run", "--config"]).arg(&self.config);
        let mut host = Proc::spawn("svc gateway run", command);
        let line = host.expect_line(Duration::from_secs(10), "its addresses", |l| l.contains(" admin http://")).await;
        let words: Vec<&str> = line.split_whitespace().collect();
        let public: SocketAddr = words[3].parse().unwrap_or_else(|_| panic!("a public address in {line:?}"));
        let admin: SocketAddr =
            words[7].trim_start_matches("http://").trim_end_matches("/metrics").parse().expect("an admin address");
        (host, public, admin)
    }
}

/// An admission token for the gateway operator `local`, from `svc relay admin
/// admission-token` on the relay's data directory (its SQLite store).
pub(super) fn issue_admission_token(relay: &Relay) -> String {
    let issued = Command::new(svc_binary())
        .args(["relay", "admin", "admission-token", "--data-dir"])
        .arg(&relay.data)
        .args(["--operator", "local"])
        .output()
        .expect("svc relay admin admission-token");
    assert!(issued.status.success(), "{}", String::from_utf8_lossy(&issued.stderr));
    admission_token(&String::from_utf8_lossy(&issued.stdout))
}

/// The admission token in what `svc relay admin admission-token` printed.
pub(super) fn admission_token(printed: &str) -> String {
    printed.split_whitespace().find(|w| w.starts_with("adm_")).expect("an admission token").to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_route_answers_through_the_coordinators_gateway_and_a_gateway_host_following_the_feed() {
    let dir = TempDir::new("fleet");
    let data = dir.path().join("relay");
    let relay = Relay::start(&data, &["--public".into(), "127.0.0.1:0".into()]).await;
    let config = node_demo_project(dir.path()).to_string_lossy().into_owned();
    let (code, out, err) = relay.svc(&["deploy", "--config", &config]).await;
    assert_eq!(code, 0, "deploy: {err}\n{out}\n{}", relay.proc.output());
    let before = relay.json(&["status", "--config", &config]).await;
    assert_eq!(before["deployment"]["urls"].as_array().map(Vec::len), Some(1), "{before:#}");

    // The gateway host, admitted as the coordinator's gateway operator (`local`, the default
    // every deploy is assigned to), prepared under a root of its own and running.
    let loopback = "127.0.0.1:0".to_owned();
    let host = GatewayHost::prepare(&relay, dir.path(), [loopback.clone(), loopback.clone(), loopback]);
    let (host, public, admin) = host.run().await;
    let text = metrics_with(admin, "svc_gateway_feed_connected 1".into()).await;
    assert!(text.contains("svc_gateway_feed_connected 1\n"), "{text}\n{}", host.output());

    // The running job's agent learns of the host when it next asks for its route (every 2 s
    // here), and tunnels to it: the route answers through both gateways, not relaunched.
    let status = relay.json(&["status", "--config", &config]).await;
    assert_eq!(state(&status), "live", "{status:#}");
    let hostname = status["deployment"]["canonicalHostname"].as_str().expect("a hostname").to_owned();
    let route = status["deployment"]["routeId"].as_str().expect("a route").to_owned();
    let ca = data.join("ca.pem");
    let through_host = client::wait_status(public, &hostname, &ca, "/", 200, Duration::from_secs(20)).await;
    assert!(through_host.is_ok(), "through the gateway host: {through_host:?}\n{}", host.output());
    let after = relay.json(&["status", "--config", &config]).await;
    assert_eq!(after["transitions"], before["transitions"], "not relaunched: {after:#}");
    let direct = client::get(relay.public, &hostname, &ca, "/").await.expect("through the coordinator's gateway");
    assert_eq!(direct.status, 200);
    // The route's URLs list both gateways; the gateway host's answers.
    let host_url = format!("https://{hostname}:{}/", public.port());
    let urls = status["deployment"]["urls"].as_array().expect("the URLs");
    assert_eq!(urls.len(), 2, "{status:#}");
    assert_eq!(urls[0], status["deployment"]["url"]);
    assert_eq!(urls[1].as_str(), Some(host_url.as_str()));
    let (_, text_status, _) = relay.svc(&["status", "--config", &config]).await;
    assert!(text_status.contains(&format!("\nalso {host_url}\n")), "{text_status}");
    let text = metrics_with(admin, format!("svc_gateway_route_agents{{route=\"{route}\"}} 1")).await;
    assert!(text.contains(&format!("svc_gateway_route_agents{{route=\"{route}\"}} 1\n")), "{text}");
    assert!(text.contains(&format!("svc_gateway_route_connections_total{{route=\"{route}\"}}")), "{text}");
}
