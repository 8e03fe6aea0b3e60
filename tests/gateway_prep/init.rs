//! `gateway-prep init` against a real coordinator running in process on loopback, writing
//! under a fake root: the dry run writes nothing, the first run registers and writes every
//! file with its mode, the second changes nothing and does not register again, a hand-edited
//! file is refused without --force and replaced with it, and the coordinator refuses
//! unknown, expired and reused admission tokens.

use std::os::unix::fs::PermissionsExt as _;
use std::time::Duration;

use super::common::{ScratchRoot, TestCoordinator};
use gateway_prep::check::{Status, config};
use gateway_prep::init::files::Action;
use gateway_prep::init::record::Registration;
use gateway_prep::init::{InitError, InitReport, RegistrationAction, Settings, execute};
use gateway_prep::key::OperatorKey;
use gateway_prep::layout;
use relay_api::gateway::file::GatewayFile;

const HOST: &str = "gw1.example.test";
const UNIT: &str = "/etc/systemd/system/svc-gateway.service";
const GATEWAY: &str = "/etc/svc-gateway/gateway.json";

/// Settings as `gateway-prep init` gives them for these flags: every address at its default.
fn options(root: &ScratchRoot, coordinator: &TestCoordinator, token: &str) -> Settings {
    let mut settings = Settings::new(root.root());
    settings.coordinator = Some(coordinator.url.clone());
    settings.admission_token = Some(token.to_owned());
    settings.operator = Some("north".into());
    settings.hostname = Some(HOST.into());
    settings.public = Some(layout::PUBLIC.parse().expect("addr"));
    settings.tunnel = Some(layout::TUNNEL.parse().expect("addr"));
    settings.admin = Some(layout::ADMIN.parse().expect("addr"));
    settings
}

fn actions(report: &InitReport) -> Vec<(String, Action)> {
    report.files.iter().map(|f| (f.path.clone(), f.action)).collect()
}

fn mode(root: &ScratchRoot, path: &str) -> u32 {
    std::fs::metadata(root.root().path(path)).expect("exists").permissions().mode() & 0o777
}

const FILES: [(&str, u32); 6] = [
    ("/etc/svc-gateway/operator.key", 0o600),
    ("/etc/svc-gateway/tunnel.key", 0o600),
    ("/etc/svc-gateway/tunnel.crt", 0o644),
    ("/etc/svc-gateway/gateway.json", 0o644),
    ("/etc/systemd/system/svc-gateway.service", 0o644),
    ("/etc/svc-gateway/operator.json", 0o644),
];

#[tokio::test]
async fn a_dry_run_reports_every_file_and_the_registration_and_writes_nothing() {
    let coordinator = TestCoordinator::start().await;
    let root = ScratchRoot::new("dry-run");
    let token = coordinator.token("north", Duration::from_secs(600));
    let mut opts = options(&root, &coordinator, &token);
    opts.dry_run = true;
    let report = execute(&opts).await.expect("dry run");
    assert!(report.dry_run);
    let expected: Vec<(String, Action)> = FILES.iter().map(|(p, _)| (p.to_string(), Action::Create)).collect();
    assert_eq!(actions(&report), expected);
    let modes: Vec<&str> = report.files.iter().map(|f| f.mode.as_str()).collect();
    assert_eq!(modes, ["0600", "0600", "0644", "0644", "0644", "0644"]);
    assert_eq!(report.registration.action, RegistrationAction::Register);
    assert_eq!(report.registration.hostname, HOST);
    assert_eq!(report.registration.public_key.len(), 44, "a base64 Ed25519 key");
    let text = report.text();
    assert!(text.starts_with("dry run: nothing is written or registered\n"), "{text}");
    assert!(text.contains("create     0600  /etc/svc-gateway/operator.key\n"), "{text}");
    assert!(text.contains(&format!("register   gateway {HOST} with {}", coordinator.url)), "{text}");
    assert_eq!(root.files(), Vec::<String>::new(), "the fake root stays empty");
    assert!(coordinator.store().admitted_gateways().expect("list").is_empty(), "nothing registered");
    // The token is still good for the real run.
    opts.dry_run = false;
    execute(&opts).await.expect("the real run");
}

#[tokio::test]
async fn the_first_run_registers_and_writes_the_second_changes_nothing() {
    let coordinator = TestCoordinator::start().await;
    let root = ScratchRoot::new("twice");
    let token = coordinator.token("north", Duration::from_secs(600));
    let opts = options(&root, &coordinator, &token);

    let first = execute(&opts).await.expect("first run");
    let expected: Vec<(String, Action)> = FILES.iter().map(|(p, _)| (p.to_string(), Action::Create)).collect();
    assert_eq!(actions(&first), expected);
    for (path, want) in FILES {
        assert_eq!(mode(&root, path), want, "{path}");
    }
    assert_eq!(first.registration.action, RegistrationAction::Register);
    let admitted = coordinator.store().admitted_gateways().expect("list");
    assert_eq!(admitted.len(), 1);
    assert_eq!((admitted[0].name.as_str(), admitted[0].hostname.as_str()), ("north", HOST));
    let key = OperatorKey::from_pem(&root.root().read("/etc/svc-gateway/operator.key").expect("key")).expect("pem");
    assert_eq!(admitted[0].public_key, key.public_key(), "the key on the host is the registered one");
    let record = Registration::read(&root.root()).expect("record").expect("present");
    assert_eq!(record.operator, admitted[0]);
    assert_eq!(record.coordinator, coordinator.url);
    assert_eq!(record.files.len(), 5, "every file but the record itself: {:?}", record.files);

    // What init wrote is what `svc gateway run` reads, and the unit runs it.
    let gateway = GatewayFile::read(&root.root().path(GATEWAY)).expect("gateway.json");
    assert_eq!(gateway.public.to_string(), layout::PUBLIC);
    // Its paths are relative to it (read as the gateway reads them: beside the file).
    assert_eq!(gateway.tunnel_key, root.root().path("/etc/svc-gateway/tunnel.key"));
    let feed = gateway.coordinator.expect("the coordinator whose route feed it follows");
    assert_eq!((feed.url.as_str(), feed.operator_id.as_str()), (coordinator.url.as_str(), admitted[0].id.as_str()));
    assert_eq!(feed.operator_key, root.root().path("/etc/svc-gateway/operator.key"));
    let unit = root.root().read(UNIT).expect("unit");
    assert!(unit.contains("ExecStart=/usr/local/bin/svc gateway run --config /etc/svc-gateway/gateway.json\n"));
    assert_eq!(config::gateway(&root.root()).status, Status::Pass, "{:?}", config::gateway(&root.root()));
    assert_eq!(config::registration(&root.root()).status, Status::Pass);
    let feed_check = config::feed(&root.root());
    assert_eq!(feed_check.status, Status::Pass, "{feed_check:?}");
    assert!(feed_check.found.contains(&admitted[0].id), "{feed_check:?}");

    let before: Vec<(String, Vec<u8>)> =
        root.files().into_iter().map(|f| (f.clone(), std::fs::read(root.dir().join(&f)).expect("read"))).collect();
    let second = execute(&opts).await.expect("second run");
    assert!(second.unchanged(), "{}", second.text());
    let unchanged: Vec<(String, Action)> = FILES.iter().map(|(p, _)| (p.to_string(), Action::Unchanged)).collect();
    assert_eq!(actions(&second), unchanged);
    assert_eq!(second.registration.action, RegistrationAction::Unchanged);
    let after: Vec<(String, Vec<u8>)> =
        root.files().into_iter().map(|f| (f.clone(), std::fs::read(root.dir().join(&f)).expect("read"))).collect();
    assert_eq!(before, after, "no byte changed");
    assert_eq!(coordinator.store().admitted_gateways().expect("list"), admitted, "not registered again");

    // A changed input updates the file init wrote, without --force; routes are kept.
    let mut edited: serde_json::Value = serde_json::from_str(&root.root().read(GATEWAY).expect("read")).expect("json");
    edited["routes"] = serde_json::json!([{"routeId": "rt_1", "hostnames": ["a.example.test"], "routePublicKey": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]);
    root.write(GATEWAY, &serde_json::to_string_pretty(&edited).expect("json"));
    let routes_only = execute(&opts).await.expect("routes are the gateway's");
    assert!(routes_only.unchanged(), "{}", routes_only.text());
    let mut moved = options(&root, &coordinator, "not needed any more");
    moved.admin = Some("127.0.0.1:9999".parse().expect("addr"));
    let third = execute(&moved).await.expect("a new metrics address");
    assert_eq!(third.files[3].action, Action::Update, "{}", third.text());
    let gateway = GatewayFile::read(&root.root().path(GATEWAY)).expect("gateway.json");
    assert_eq!(gateway.admin.port(), 9999);
    assert_eq!(gateway.routes.len(), 1, "the routes survive");
    assert!(execute(&moved).await.expect("again").unchanged());

    // A bare re-run (no address flags) keeps the configured addresses: it used to write the
    // defaults back over them and exit 0.
    let mut bare = options(&root, &coordinator, "not needed any more");
    (bare.public, bare.tunnel, bare.admin) = (None, None, None);
    let rerun = execute(&bare).await.expect("a bare re-run");
    assert!(rerun.unchanged(), "{}", rerun.text());
    assert_eq!(GatewayFile::read(&root.root().path(GATEWAY)).expect("gateway.json").admin.port(), 9999);
}

#[tokio::test]
async fn a_hand_edited_file_is_refused_without_force_and_replaced_with_it() {
    let coordinator = TestCoordinator::start().await;
    let root = ScratchRoot::new("edited");
    let token = coordinator.token("north", Duration::from_secs(600));
    let mut opts = options(&root, &coordinator, &token);
    execute(&opts).await.expect("first run");

    let edited = root.root().read(UNIT).expect("unit").replace("LimitNOFILE=1048576", "LimitNOFILE=4096");
    root.write(UNIT, &edited);
    let refused = execute(&opts).await.expect_err("the unit changed");
    assert!(matches!(&refused, InitError::Changed(files) if files == &[UNIT.to_owned()]), "{refused:?}");
    assert_eq!(refused.exit_code(), 2);
    assert!(refused.to_string().contains(UNIT) && refused.to_string().contains("--force"), "{refused}");
    assert_eq!(root.root().read(UNIT).expect("unit"), edited, "left as edited");

    // A dry run shows it as changed.
    opts.dry_run = true;
    let dry = execute(&opts).await.expect("dry run");
    assert_eq!(dry.files[4].action, Action::Changed);
    assert_eq!(root.root().read(UNIT).expect("unit"), edited);

    opts.dry_run = false;
    opts.force = true;
    let forced = execute(&opts).await.expect("forced");
    assert_eq!(forced.files[4].action, Action::Replace);
    assert!(root.root().read(UNIT).expect("unit").contains("LimitNOFILE=1048576\n"));
    opts.force = false;
    assert!(execute(&opts).await.expect("after force").unchanged());

    // A file init never wrote counts as changed too.
    let fresh = ScratchRoot::new("foreign");
    fresh.write(UNIT, "[Service]\nExecStart=/bin/true\n");
    let token = coordinator.token("north", Duration::from_secs(600));
    let mut other = options(&fresh, &coordinator, &token);
    other.hostname = Some("gw2.example.test".into());
    let refused = execute(&other).await.expect_err("a foreign unit");
    assert!(matches!(refused, InitError::Changed(_)), "{refused:?}");
    assert_eq!(fresh.files(), ["etc/systemd/system/svc-gateway.service"], "nothing written, nothing registered");
    assert_eq!(coordinator.store().admitted_gateways().expect("list").len(), 1);

    // The operator key is never replaced: a different key is a conflict, force or not.
    let foreign = OperatorKey::generate().expect("key");
    root.write("/etc/svc-gateway/operator.key", foreign.pem());
    opts.force = true;
    let conflict = execute(&opts).await.expect_err("not the registered key");
    assert!(matches!(conflict, InitError::Conflict(_)), "{conflict:?}");
    assert!(conflict.to_string().contains("not the key registered"), "{conflict}");
}

#[tokio::test]
async fn unknown_expired_and_reused_admission_tokens_are_refused() {
    let coordinator = TestCoordinator::start().await;

    let root = ScratchRoot::new("unknown");
    let refused = execute(&options(&root, &coordinator, "adm_0000")).await.expect_err("unknown token");
    assert_eq!(refused.refusal_code(), Some("admission_token_unknown"), "{refused}");
    assert!(refused.to_string().contains("403") && refused.to_string().contains("new admission token"), "{refused}");
    assert_eq!(refused.exit_code(), 2);
    assert_eq!(root.files(), Vec::<String>::new(), "the key made for the refused registration is removed");
    assert!(!root.root().path("/etc/svc-gateway").exists(), "and the directory made for it");

    let expired = coordinator.token("north", Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let refused = execute(&options(&root, &coordinator, &expired)).await.expect_err("expired token");
    assert_eq!(refused.refusal_code(), Some("admission_token_expired"), "{refused}");

    let token = coordinator.token("north", Duration::from_secs(600));
    execute(&options(&root, &coordinator, &token)).await.expect("admitted");
    let other = ScratchRoot::new("reused");
    let mut again = options(&other, &coordinator, &token);
    again.hostname = Some("gw2.example.test".into());
    let refused = execute(&again).await.expect_err("reused token");
    assert_eq!(refused.refusal_code(), Some("admission_token_used"), "{refused}");
    assert!(refused.to_string().contains("409"), "{refused}");

    let token = coordinator.token("north", Duration::from_secs(600));
    let mut wrong = options(&other, &coordinator, &token);
    wrong.operator = Some("south".into());
    let refused = execute(&wrong).await.expect_err("another operator's token");
    assert_eq!(refused.refusal_code(), Some("admission_operator_mismatch"), "{refused}");
    assert_eq!(coordinator.store().admitted_gateways().expect("list").len(), 1);

    // Without a token nothing is sent.
    let mut none = options(&other, &coordinator, "");
    none.admission_token = None;
    let usage = execute(&none).await.expect_err("no token");
    assert!(matches!(usage, InitError::Usage(_)) && usage.exit_code() == 64, "{usage:?}");
}

/// Issue 20, point 1, as an operator runs it: `gateway-prep init` prepares the host (under a
/// fake root here), and `svc gateway run --config` on the file it wrote follows the
/// coordinator's route feed as the registered operator: its metrics say it is connected, and
/// once the coordinator stops, that it serves its last table without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn svc_gateway_run_on_what_init_wrote_follows_the_coordinators_route_feed() {
    use std::io::BufRead as _;
    let coordinator = TestCoordinator::start().await;
    let root = ScratchRoot::new("follow");
    let token = coordinator.token("north", Duration::from_secs(600));
    let loopback = "127.0.0.1:0";
    let init = std::process::Command::new(svc_e2e::service::gateway_prep_binary())
        .args(["init", "--root", &root.dir().to_string_lossy(), "--coordinator", &coordinator.url])
        .args(["--admission-token", &token, "--hostname", HOST])
        .args(["--public", loopback, "--tunnel", loopback, "--admin", loopback])
        .output()
        .expect("gateway-prep init");
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));

    let config = root.root().path(GATEWAY);
    let mut gateway = std::process::Command::new(svc_e2e::service::svc_binary())
        .args(["gateway", "run", "--config"])
        .arg(&config)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("svc gateway run");
    let stdout = gateway.stdout.take().expect("its output");
    let (lines, said) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let (mut admin, mut tunnel) = (None, String::new());
    while let Ok(line) = said.recv_timeout(Duration::from_secs(10)) {
        if let Some(at) = line.split("admin http://").nth(1) {
            admin = at.trim_end_matches("/metrics").parse::<std::net::SocketAddr>().ok();
            tunnel = line.split(" tunnel ").nth(1).and_then(|t| t.split(' ').next()).unwrap_or_default().to_owned();
            break;
        }
    }
    let Some(admin) = admin else {
        let _ = gateway.kill();
        let out = gateway.wait_with_output().expect("its output");
        panic!("no admin address: {}", String::from_utf8_lossy(&out.stderr));
    };
    let metrics = move || {
        let answer = svc_e2e::service::http(admin, "GET", "/metrics", &[], None);
        String::from_utf8_lossy(&answer.body).into_owned()
    };
    let until = |want: &'static str| async move {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            let text = tokio::task::spawn_blocking(metrics).await.expect("the metrics");
            if text.contains(want) || std::time::Instant::now() > deadline {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let text = until("svc_gateway_feed_connected 1\n").await;
    assert!(text.contains("svc_gateway_feed_connected 1\n"), "{text}");
    assert!(text.contains("svc_gateway_feed_updates_total 1\n"), "the (empty) table, applied: {text}");
    assert!(text.contains("svc_gateway_routes 0\n"), "{text}");

    // The signed catalog says where the gateway is, as it announced itself: its tunnel
    // address and its tunnel certificate's digest, which agents pin.
    coordinator.store().invite("acme").expect("an invited organization");
    let token = relay_api::coordinator::issue_token(
        coordinator.data.dir(),
        "acme",
        relay_api::coordinator::store::TokenRole::Customer,
        None,
    )
    .expect("a token")
    .plaintext;
    let api = coordinator.api;
    let answer = tokio::task::spawn_blocking(move || {
        let bearer = format!("Bearer {token}");
        svc_e2e::service::http(api, "GET", "/api/ingress/catalog", &[("authorization", &bearer)], None)
    })
    .await
    .expect("the catalog");
    let signed: serde_json::Value = serde_json::from_slice(&answer.body).expect("JSON");
    let endpoints = &signed["catalog"]["gateways"][0]["endpoints"];
    assert_eq!(endpoints["tunnel"].as_str(), Some(tunnel.as_str()), "{signed:#}");
    let cert = root.root().read("/etc/svc-gateway/tunnel.crt").expect("the tunnel certificate");
    assert_eq!(endpoints["tunnelSha256"].as_str(), relay_gateway_host::follow::tunnel_sha256(&cert).as_deref());

    drop(coordinator);
    let text = until("svc_gateway_feed_connected 0\n").await;
    assert!(text.contains("svc_gateway_feed_connected 0\n"), "{text}");
    assert_eq!(gateway.try_wait().expect("its state"), None, "the gateway runs on");
    let _ = gateway.kill();
    let out = gateway.wait_with_output().expect("its output");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("the route feed failed"), "said once, in the log: {log}");
}

/// `config.feed` (issue 20): a gateway file that follows another operator's feed, signs with a
/// key that is not the registered one or one others may read, or names no coordinator at all
/// is caught, each with the fix.
#[tokio::test]
async fn the_feed_check_catches_a_file_following_another_operator_a_wrong_key_or_no_coordinator() {
    let coordinator = TestCoordinator::start().await;
    let root = ScratchRoot::new("feed-check");
    let token = coordinator.token("north", Duration::from_secs(600));
    execute(&options(&root, &coordinator, &token)).await.expect("init");
    assert_eq!(config::feed(&root.root()).status, Status::Pass);
    let written = root.root().read(GATEWAY).expect("gateway.json");
    let edit = |change: &dyn Fn(&mut serde_json::Value)| {
        let mut file: serde_json::Value = serde_json::from_str(&written).expect("json");
        change(&mut file);
        root.write(GATEWAY, &file.to_string());
        config::feed(&root.root())
    };

    let other = edit(&|f| f["coordinator"]["operatorId"] = "op_0000000000000000".into());
    assert_eq!(other.status, Status::Fail, "{other:?}");
    assert!(
        other.found.contains("registered with") && other.fix.as_deref().is_some_and(|f| f.contains("--force")),
        "{other:?}"
    );

    let stranger = OperatorKey::generate().expect("a key");
    root.write("/etc/svc-gateway/stranger.key", stranger.pem());
    root.chmod("/etc/svc-gateway/stranger.key", 0o600);
    let wrong_key = edit(&|f| f["coordinator"]["operatorKey"] = "stranger.key".into());
    assert_eq!(wrong_key.status, Status::Fail, "{wrong_key:?}");
    assert!(wrong_key.found.contains("not the registered one"), "{wrong_key:?}");

    let none = edit(&|f| {
        if let Some(f) = f.as_object_mut() {
            f.remove("coordinator");
        }
    });
    assert_eq!(none.status, Status::Warn, "{none:?}");
    assert!(none.found.contains("names no coordinator"), "{none:?}");

    root.write(GATEWAY, &written);
    root.chmod("/etc/svc-gateway/operator.key", 0o644);
    let shared = config::feed(&root.root());
    assert_eq!(shared.status, Status::Fail, "{shared:?}");
    assert!(shared.fix.as_deref().is_some_and(|f| f.contains("chmod 600")), "{shared:?}");
}

/// Issue 42: a host registered as operator `north` with a coordinator that routes for `local`
/// (`svc relay serve`'s default) connects to the route feed and serves nothing; `init` and
/// `check` now say so, with the fix, and say nothing of it when the operators match.
#[tokio::test(flavor = "multi_thread")]
async fn init_and_check_warn_when_the_coordinator_routes_for_another_operator() {
    let coordinator = TestCoordinator::start().await;
    let root = ScratchRoot::new("other-operator");
    let token = coordinator.token("north", Duration::from_secs(600));
    let mut dry = options(&root, &coordinator, &token);
    dry.dry_run = true;
    let report = execute(&dry).await.expect("a dry run");
    assert_eq!(report.warnings.len(), 1, "the dry run warns too: {report:?}");
    let report = execute(&options(&root, &coordinator, &token)).await.expect("registered");
    let [warning] = &report.warnings[..] else { panic!("one warning: {report:?}") };
    assert!(
        warning.contains("registered as operator \"north\"")
            && warning.contains("routes its deployments through operator \"local\"'s hosts")
            && warning.contains("--gateway-operator north"),
        "{warning}"
    );
    let json = serde_json::to_value(&report).expect("json");
    assert_eq!(json["warnings"][0], warning.as_str(), "{json}");
    // The binary says it on standard error, and `check` as `coordinator.operator`.
    let gateway_prep = svc_e2e::service::gateway_prep_binary();
    let root_dir = root.dir().display().to_string();
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(&gateway_prep).args(["init", "--root", &root_dir]).output().expect("init runs")
    });
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("gateway-prep init: warning: this host is registered as operator \"north\""), "{err}");
    let out = tokio::task::block_in_place(|| {
        std::process::Command::new(&gateway_prep)
            .args(["check", "--root", &root_dir, "--format", "json"])
            .output()
            .expect("check runs")
    });
    let checks: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let check =
        checks.as_array().and_then(|c| c.iter().find(|c| c["id"] == "coordinator.operator")).expect("the check");
    assert_eq!(check["status"], "warn", "{check}");
    assert!(check["fix"].as_str().is_some_and(|f| f.contains("--gateway-operator north")), "{check}");

    // A coordinator that routes for north: no warning, and the check passes.
    let north = TestCoordinator::start_as(Some("north")).await;
    let root = ScratchRoot::new("same-operator");
    let token = north.token("north", Duration::from_secs(600));
    let report = execute(&options(&root, &north, &token)).await.expect("registered");
    assert!(report.warnings.is_empty(), "{report:?}");
    assert!(!serde_json::to_string(&report).expect("json").contains("warnings"), "no warnings key when none");
    let client = gateway_prep::coordinator::CoordinatorClient::new(&north.url, None).expect("a client");
    let health = client.health().await.expect("an answer");
    assert_eq!(health.gateway_operator.as_deref(), Some("north"));
    let check = gateway_prep::check::network::coordinator_operator(true, Some("north"), Some(&health));
    assert_eq!(check.status, Status::Pass, "{check:?}");
}
