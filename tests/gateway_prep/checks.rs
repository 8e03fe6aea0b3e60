//! Every preflight check's pass and non-pass paths: files under a fake root, ports on
//! loopback, the hostname's records on a real DNS server on loopback (pebble-challtestsrv),
//! the coordinator in process, and the binary's exit code and JSON.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::path::Path;
use std::time::{Duration, SystemTime};

use super::common::{FakeServer, MockDns, ScratchRoot, TestCoordinator};
use gateway_prep::check::{CheckResult, Status, config, network, system};
use gateway_prep::coordinator::CoordinatorClient;
use gateway_prep::init::record::{Registration, VERSION};
use gateway_prep::key::{OperatorKey, tunnel_cert};
use relay_api::coordinator::admission::Operator;
use relay_api::dns::DnsChecker;

fn assert_status(result: &CheckResult, status: Status) {
    assert_eq!(result.status, status, "{result:?}");
    assert_eq!(result.fix.is_some(), status != Status::Pass, "a fix exactly when not passing: {result:?}");
}

// ---------------------------------------------------------------------------- configuration

fn gateway_json(admin: &str) -> String {
    format!(
        r#"{{"public": "0.0.0.0:443", "tunnel": "0.0.0.0:7443", "admin": "{admin}",
            "tunnelCert": "/etc/svc-gateway/tunnel.crt", "tunnelKey": "/etc/svc-gateway/tunnel.key"}}"#
    )
}

fn write_tunnel(root: &ScratchRoot) {
    let pair = tunnel_cert("gw1.example.test").expect("cert");
    root.write("/etc/svc-gateway/tunnel.crt", &pair.cert_pem);
    root.write("/etc/svc-gateway/tunnel.key", &pair.key_pem);
    root.chmod("/etc/svc-gateway/tunnel.key", 0o600);
}

#[test]
fn the_gateway_configuration_passes_when_valid_and_fails_when_not() {
    let root = ScratchRoot::new("config-gateway");
    let missing = config::gateway(&root.root());
    assert_status(&missing, Status::Warn);
    assert!(missing.fix.as_deref().is_some_and(|f| f.contains("gateway-prep init")), "{missing:?}");

    root.write("/etc/svc-gateway/gateway.json", &gateway_json("127.0.0.1:7444"));
    write_tunnel(&root);
    let ok = config::gateway(&root.root());
    assert_status(&ok, Status::Pass);
    assert!(ok.found.contains("public 0.0.0.0:443, tunnel 0.0.0.0:7443"), "{ok:?}");

    root.write("/etc/svc-gateway/gateway.json", &gateway_json("0.0.0.0:7444"));
    assert_status(&config::gateway(&root.root()), Status::Warn);

    root.write("/etc/svc-gateway/gateway.json", &gateway_json("127.0.0.1:7444"));
    root.chmod("/etc/svc-gateway/tunnel.key", 0o644);
    let shared = config::gateway(&root.root());
    assert_status(&shared, Status::Fail);
    assert_eq!(shared.fix.as_deref(), Some("chmod 600 /etc/svc-gateway/tunnel.key"));
    root.chmod("/etc/svc-gateway/tunnel.key", 0o600);

    let other = tunnel_cert("gw1.example.test").expect("cert");
    root.write("/etc/svc-gateway/tunnel.key", &other.key_pem);
    let mismatch = config::gateway(&root.root());
    assert_status(&mismatch, Status::Fail);
    assert!(mismatch.found.contains("tunnel certificate"), "{mismatch:?}");

    root.write("/etc/svc-gateway/gateway.json", r#"{"public": "0.0.0.0:443", "extra": 1}"#);
    let invalid = config::gateway(&root.root());
    assert_status(&invalid, Status::Fail);
    assert!(invalid.found.contains("not a valid gateway configuration"), "{invalid:?}");
}

fn record(key: &OperatorKey) -> String {
    Registration {
        version: VERSION,
        coordinator: "https://relay.example.test".into(),
        operator: Operator {
            id: "op_1".into(),
            name: "north".into(),
            public_key: key.public_key(),
            hostname: "gw1.example.test".into(),
            admitted_at: 1,
        },
        files: Default::default(),
    }
    .to_text()
}

#[test]
fn the_registration_passes_with_its_private_key_and_fails_otherwise() {
    let root = ScratchRoot::new("config-registration");
    assert_status(&config::registration(&root.root()), Status::Warn);

    let key = OperatorKey::generate().expect("key");
    root.write("/etc/svc-gateway/operator.key", key.pem());
    root.chmod("/etc/svc-gateway/operator.key", 0o600);
    let unregistered = config::registration(&root.root());
    assert_status(&unregistered, Status::Warn);
    assert!(unregistered.found.contains("not registered"), "{unregistered:?}");

    root.write("/etc/svc-gateway/operator.json", &record(&key));
    let ok = config::registration(&root.root());
    assert_status(&ok, Status::Pass);
    assert!(ok.found.contains("\"north\" registered gateway gw1.example.test"), "{ok:?}");

    root.chmod("/etc/svc-gateway/operator.key", 0o640);
    let shared = config::registration(&root.root());
    assert_status(&shared, Status::Fail);
    assert!(shared.found.contains("mode 0640"), "{shared:?}");
    root.chmod("/etc/svc-gateway/operator.key", 0o600);

    let other = OperatorKey::generate().expect("key");
    root.write("/etc/svc-gateway/operator.json", &record(&other));
    let mismatch = config::registration(&root.root());
    assert_status(&mismatch, Status::Fail);
    assert!(mismatch.found.contains("not the key registered"), "{mismatch:?}");

    root.write("/etc/svc-gateway/operator.json", "{");
    assert_status(&config::registration(&root.root()), Status::Fail);
}

// ---------------------------------------------------------------------------- ports

#[test]
fn a_free_port_passes_and_a_taken_or_foreign_address_fails() {
    let root = ScratchRoot::new("ports");
    let free = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    assert_status(&network::port("ports.public", free, &root.root()), Status::Pass);

    let held = TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken = network::port("ports.tunnel", held.local_addr().expect("addr"), &root.root());
    assert_status(&taken, Status::Fail);
    assert!(taken.found.contains("in use"), "{taken:?}");
    assert!(taken.fix.as_deref().is_some_and(|f| f.contains("ss -ltnp")), "{taken:?}");

    // TEST-NET-1 is never this host's address: bind fails without a packet sent.
    let foreign: SocketAddr = ([192, 0, 2, 1], 0).into();
    let not_here = network::port("ports.public", foreign, &root.root());
    assert_status(&not_here, Status::Fail);
    assert!(not_here.found.contains("not an address of this host"), "{not_here:?}");
}

// ---------------------------------------------------------------------------- limits, sysctls

const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            SOFT                 HARD                 files\n";

#[test]
fn the_open_files_limit_passes_when_high_and_warns_when_low() {
    let root = ScratchRoot::new("nofile");
    assert_status(&system::nofile(&root.root()), Status::Warn);
    root.write("/proc/self/limits", &LIMITS.replace("SOFT", "1048576").replace("HARD", "1048576"));
    assert_status(&system::nofile(&root.root()), Status::Pass);
    root.write("/proc/self/limits", &LIMITS.replace("SOFT", "1024").replace("HARD", "4096"));
    let low = system::nofile(&root.root());
    assert_status(&low, Status::Warn);
    assert!(low.found.contains("soft 1024, hard 4096"), "{low:?}");
    assert!(low.fix.as_deref().is_some_and(|f| f.contains("ulimit -n 65536")), "{low:?}");
}

fn sysctl_root(values: &[(&str, &str)]) -> ScratchRoot {
    let root = ScratchRoot::new("sysctl");
    for (name, value) in values {
        root.write(&format!("/proc/sys/{}", name.replace('.', "/")), &format!("{value}\n"));
    }
    root
}

#[test]
fn sysctls_pass_when_tuned_and_fail_or_warn_when_not() {
    let good = sysctl_root(&[
        ("fs.nr_open", "1048576"),
        ("fs.file-max", "9223372036854775807"),
        ("net.core.somaxconn", "4096"),
        ("net.ipv4.ip_local_port_range", "32768\t60999"),
        ("net.ipv4.tcp_fin_timeout", "60"),
    ]);
    let results = system::sysctls(&good.root(), 1_048_576);
    let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "sysctl.fs.nr_open",
            "sysctl.fs.file-max",
            "sysctl.net.core.somaxconn",
            "sysctl.net.ipv4.ip_local_port_range",
            "sysctl.net.ipv4.tcp_fin_timeout"
        ]
    );
    for r in &results {
        assert_status(r, Status::Pass);
    }

    let bad = sysctl_root(&[
        ("fs.nr_open", "65536"),
        ("fs.file-max", "100000"),
        ("net.core.somaxconn", "128"),
        ("net.ipv4.ip_local_port_range", "60000 61000"),
        ("net.ipv4.tcp_fin_timeout", "120"),
    ]);
    let results = system::sysctls(&bad.root(), 1_048_576);
    let statuses: Vec<Status> = results.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [Status::Fail, Status::Warn, Status::Warn, Status::Warn, Status::Warn]);
    for r in &results {
        assert_status(r, r.status);
    }
    assert!(results[0].found.contains("fs.nr_open = 65536, below 1048576"), "{:?}", results[0]);
    assert_eq!(
        results[2].fix.as_deref(),
        Some(
            "sysctl -w net.core.somaxconn=4096 and keep it with `echo 'net.core.somaxconn = 4096' >> /etc/sysctl.d/90-svc-gateway.conf`"
        )
    );
    assert!(results[3].found.contains("only 1001 ports"), "{:?}", results[3]);
    // The unit's own limit is the bar: a smaller LimitNOFILE passes a smaller nr_open.
    assert_status(&system::sysctls(&bad.root(), 65_536)[0], Status::Pass);
    // Unreadable (not Linux, or hidden): a warning, never a pass.
    let empty = ScratchRoot::new("no-proc");
    assert!(system::sysctls(&empty.root(), 1_048_576).iter().all(|r| r.status == Status::Warn));
}

#[test]
fn pacing_passes_without_bbr_or_with_fq_and_warns_for_bbr_without_fq() {
    let cubic = sysctl_root(&[("net.ipv4.tcp_congestion_control", "cubic"), ("net.core.default_qdisc", "pfifo_fast")]);
    let result = system::pacing(&cubic.root());
    assert_status(&result, Status::Pass);
    assert!(result.found.contains("cubic (it does not pace)"), "{result:?}");

    let bbr_fq = sysctl_root(&[("net.ipv4.tcp_congestion_control", "bbr"), ("net.core.default_qdisc", "fq")]);
    assert_status(&system::pacing(&bbr_fq.root()), Status::Pass);

    let bbr = sysctl_root(&[("net.ipv4.tcp_congestion_control", "bbr"), ("net.core.default_qdisc", "fq_codel")]);
    let result = system::pacing(&bbr.root());
    assert_status(&result, Status::Warn);
    assert!(result.found.contains("bbr with default qdisc fq_codel"), "{result:?}");
    assert!(result.fix.as_deref().is_some_and(|f| f.contains("sysctl -w net.core.default_qdisc=fq")), "{result:?}");

    // Unreadable: a warning, never a pass.
    let empty = ScratchRoot::new("no-proc-pacing");
    assert_status(&system::pacing(&empty.root()), Status::Warn);
    let no_qdisc = sysctl_root(&[("net.ipv4.tcp_congestion_control", "bbr")]);
    assert_status(&system::pacing(&no_qdisc.root()), Status::Warn);
}

// ---------------------------------------------------------------------------- clock

#[test]
fn the_clock_passes_when_timesyncd_says_synchronised_and_warns_otherwise() {
    let root = ScratchRoot::new("clock");
    let nothing = system::clock_sync(&root.root());
    assert_status(&nothing, Status::Warn);
    assert!(nothing.found.contains("no time synchronisation found"), "{nothing:?}");
    root.write("/run/chrony/chronyd.pid", "42\n");
    let chrony = system::clock_sync(&root.root());
    assert_status(&chrony, Status::Warn);
    assert!(chrony.fix.as_deref().is_some_and(|f| f.contains("chronyc tracking")), "{chrony:?}");
    root.write("/run/systemd/timesync/synchronized", "");
    assert_status(&system::clock_sync(&root.root()), Status::Pass);
}

#[tokio::test]
async fn the_clock_skew_against_the_coordinator_passes_in_sync_and_fails_far_off() {
    let coordinator = TestCoordinator::start().await;
    let client = CoordinatorClient::new(&coordinator.url, None).expect("client");
    let (reach, health) = network::coordinator(Some(&client)).await;
    assert_status(&reach, Status::Pass);
    let skew = network::clock_skew(true, health.as_ref(), SystemTime::now(), Duration::from_secs(30));
    assert_status(&skew, Status::Pass);

    // A coordinator whose clock says 1994.
    let old = FakeServer::start("200 OK", "Sun, 06 Nov 1994 08:49:37 GMT", r#"{"status":"ok"}"#).await;
    let client = CoordinatorClient::new(&old.url, None).expect("client");
    let (reach, health) = network::coordinator(Some(&client)).await;
    assert_status(&reach, Status::Pass);
    let skew = network::clock_skew(true, health.as_ref(), SystemTime::now(), Duration::from_secs(30));
    assert_status(&skew, Status::Fail);
    assert!(skew.found.contains("ahead of the coordinator's"), "{skew:?}");
}

// ---------------------------------------------------------------------------- coordinator

#[tokio::test]
async fn the_coordinator_passes_when_healthy_and_fails_when_unreachable_or_not_it() {
    let (none, _) = network::coordinator(None).await;
    assert_status(&none, Status::Warn);

    let coordinator = TestCoordinator::start().await;
    let client = CoordinatorClient::new(&coordinator.url, None).expect("client");
    let (ok, health) = network::coordinator(Some(&client)).await;
    assert_status(&ok, Status::Pass);
    assert!(health.expect("answered").date.is_some(), "the coordinator sends Date");

    let closed = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let client = CoordinatorClient::new(&format!("http://{closed}"), None).expect("client");
    let (down, health) = network::coordinator(Some(&client)).await;
    assert_status(&down, Status::Fail);
    assert!(down.found.contains("cannot reach the coordinator"), "{down:?}");
    assert!(health.is_none());
    assert_status(&network::clock_skew(true, None, SystemTime::now(), Duration::from_secs(30)), Status::Warn);

    let other = FakeServer::start("404 Not Found", "Sun, 06 Nov 1994 08:49:37 GMT", "{}").await;
    let client = CoordinatorClient::new(&other.url, None).expect("client");
    let (wrong, _) = network::coordinator(Some(&client)).await;
    assert_status(&wrong, Status::Fail);
    assert!(wrong.found.contains("answered 404"), "{wrong:?}");
}

// ---------------------------------------------------------------------------- DNS

const HOST: &str = "gw1.example.test";

#[tokio::test]
async fn the_hostname_passes_when_it_points_here_and_fails_when_not() {
    let Some(dns) = MockDns::start().await else { return };
    let checker = DnsChecker::new(&dns.config()).expect("checker");
    let here = [IpAddr::V4(Ipv4Addr::LOCALHOST)];

    // The server's default answer for every name: A 127.0.0.1, AAAA ::1.
    let ok = network::hostname_dns(Ok(&checker), Some(HOST), &here).await;
    assert_status(&ok, Status::Pass);
    assert!(ok.found.contains("including this host (127.0.0.1)"), "{ok:?}");

    let unknown = network::hostname_dns(Ok(&checker), Some(HOST), &[]).await;
    assert_status(&unknown, Status::Warn);
    assert!(unknown.fix.as_deref().is_some_and(|f| f.contains("--public-ip")), "{unknown:?}");
    assert_status(&network::hostname_dns(Ok(&checker), None, &here).await, Status::Warn);

    dns.post("/add-a", serde_json::json!({"host": HOST, "addresses": ["127.0.0.7"]})).await;
    dns.post("/add-aaaa", serde_json::json!({"host": HOST, "addresses": ["::7"]})).await;
    let elsewhere = network::hostname_dns(Ok(&checker), Some(HOST), &here).await;
    assert_status(&elsewhere, Status::Fail);
    assert!(elsewhere.found.contains("resolves to 127.0.0.7, ::7, not to this host (127.0.0.1)"), "{elsewhere:?}");
    assert!(
        elsewhere.fix.as_deref().is_some_and(|f| f.contains("`gw1.example.test. 300 IN A 127.0.0.1`")),
        "{elsewhere:?}"
    );

    dns.post("/set-default-ipv4", serde_json::json!({"ip": ""})).await;
    dns.post("/set-default-ipv6", serde_json::json!({"ip": ""})).await;
    let none = network::hostname_dns(Ok(&checker), Some("gw9.example.test"), &here).await;
    assert_status(&none, Status::Fail);
    assert!(none.found.contains("has no A or AAAA record"), "{none:?}");

    let invalid = network::hostname_dns(Ok(&checker), Some("not a name"), &here).await;
    assert_status(&invalid, Status::Fail);
}

#[tokio::test]
async fn a_dns_server_that_does_not_answer_fails_the_check() {
    // Nothing serves DNS on this loopback port.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let config = relay_api::dns::DnsConfig { nameservers: vec![silent], timeout: Duration::from_millis(200) };
    let checker = DnsChecker::new(&config).expect("checker");
    let result = network::hostname_dns(Ok(&checker), Some(HOST), &[IpAddr::V4(Ipv4Addr::LOCALHOST)]).await;
    assert_status(&result, Status::Fail);
    assert!(result.found.contains("failed"), "{result:?}");
}

// ---------------------------------------------------------------------------- disk

#[test]
fn disk_space_passes_above_the_minimum_and_fails_below() {
    let root = ScratchRoot::new("disk");
    let ok = system::disk(&root.root(), Path::new("/var/lib/svc-gateway"), 1024 * 1024);
    assert_status(&ok, Status::Pass);
    assert!(ok.found.contains("MiB free on the file system of"), "{ok:?}");
    let short = system::disk(&root.root(), Path::new("/var/lib/svc-gateway"), u64::MAX / 2);
    assert_status(&short, Status::Fail);
    assert!(short.found.contains("below"), "{short:?}");
}

// ---------------------------------------------------------------------------- the binary

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_prints_json_and_exits_by_the_worst_status() {
    let coordinator = TestCoordinator::start().await;
    let root = ScratchRoot::new("binary");
    root.write("/proc/self/limits", &LIMITS.replace("SOFT", "1048576").replace("HARD", "1048576"));
    root.write("/run/systemd/timesync/synchronized", "");
    for (name, value) in [
        ("fs/nr_open", "1048576"),
        ("fs/file-max", "2097152"),
        ("net/core/somaxconn", "4096"),
        ("net/ipv4/ip_local_port_range", "32768 60999"),
        ("net/ipv4/tcp_fin_timeout", "60"),
        ("net/ipv4/tcp_congestion_control", "cubic"),
    ] {
        root.write(&format!("/proc/sys/{name}"), value);
    }
    let free = |_| TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").to_string();
    let (public, tunnel) = (free(0), free(1));
    let run = |extra: &[&str]| {
        let root_dir = root.dir().display().to_string();
        let mut args =
            vec!["check", "--root", root_dir.as_str(), "--format", "json", "--coordinator", &coordinator.url];
        args.extend(["--public", public.as_str(), "--tunnel", tunnel.as_str(), "--hostname", "gw1.localhost"]);
        args.extend(extra);
        let out =
            std::process::Command::new(svc_e2e::service::gateway_prep_binary()).args(&args).output().expect("run");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        (out.status.code(), json)
    };
    let (code, json) = tokio::task::block_in_place(|| run(&[]));
    let checks = json.as_array().expect("an array");
    let ids: Vec<&str> = checks.iter().map(|c| c["id"].as_str().expect("id")).collect();
    assert_eq!(
        ids,
        [
            "config.gateway",
            "config.registration",
            "config.feed",
            "ports.public",
            "ports.tunnel",
            "limits.nofile",
            "sysctl.fs.nr_open",
            "sysctl.fs.file-max",
            "sysctl.net.core.somaxconn",
            "sysctl.net.ipv4.ip_local_port_range",
            "sysctl.net.ipv4.tcp_fin_timeout",
            "tcp.pacing",
            "clock.sync",
            "clock.skew",
            "dns.hostname",
            "coordinator",
            "coordinator.operator",
            "disk"
        ]
    );
    for c in checks {
        let keys: Vec<&String> = c.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["fix", "found", "id", "status"], "{c}");
    }
    let status = |id: &str| checks.iter().find(|c| c["id"] == id).map(|c| c["status"].clone()).expect("check");
    // Not configured or registered yet: warnings, and everything else passes.
    assert_eq!(status("config.gateway"), "warn");
    assert_eq!(status("config.registration"), "warn");
    assert_eq!(status("config.feed"), "warn");
    assert_eq!(status("coordinator.operator"), "warn", "not registered: which operator to register as");
    for id in ["ports.public", "coordinator", "clock.skew", "dns.hostname", "sysctl.fs.nr_open", "tcp.pacing"] {
        assert_eq!(status(id), "pass", "{id}: {json}");
    }
    let worst = checks.iter().map(|c| c["status"].as_str().expect("status")).max_by_key(|s| match *s {
        "pass" => 0,
        "warn" => 1,
        _ => 2,
    });
    assert_eq!(worst, Some("warn"));
    assert_eq!(code, Some(1), "warnings exit 1");

    // A failure exits 2.
    root.write("/proc/sys/fs/nr_open", "1024");
    let (code, json) = tokio::task::block_in_place(|| run(&[]));
    assert_eq!(code, Some(2), "{json}");

    // A usage error exits 64.
    let out = std::process::Command::new(svc_e2e::service::gateway_prep_binary())
        .args(["check", "--format", "xml"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(64));
}
