//! Customer code is untrusted: a hostile tenant's app, deployed beside another tenant's job
//! on one `svc relay serve`, tries every read the issue found open (other jobs' secrets and
//! agent configuration, the store, the development CA's key, the catalog key, the
//! coordinator's environment, other processes) and gets none. And every file the services
//! keep is private.

use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use svc_e2e::service::{Server, TempDir};

use super::client::get;
use super::deploy::{Relay, admin, node_demo_project, state};

/// A value of the coordinator's environment that must never reach a job.
const MARKER: &str = "coordinator-environment-must-not-leak";

/// The job directory beside a data directory.
fn jobs_dir(data: &Path) -> PathBuf {
    let mut jobs = data.as_os_str().to_owned();
    jobs.push("-jobs");
    PathBuf::from(jobs)
}

/// The state directory of the agent of revision `revision` of deployment `id`, kept across
/// the job's launches.
fn agent_dir(jobs: &Path, id: &str, revision: u32) -> PathBuf {
    jobs.join(id).join(format!("r{revision}")).join("agent")
}

/// The hostile app's project: `tests/ingress/fixtures/hostile/server.js` with what to probe
/// in its environment, and a secret of its own.
fn hostile_project(dir: &Path, probe_paths: &[String], probe_pids: &[u32]) -> PathBuf {
    let project = dir.join("hostile");
    std::fs::create_dir_all(&project).expect("mkdir");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("ingress/fixtures/hostile/server.js");
    std::fs::copy(fixture, project.join("server.js")).expect("copy the hostile app");
    let file = json!({
        "version": 1,
        "name": "hostile",
        "runtime": "node",
        "app": {
            "dir": ".",
            "entrypoint": "server.js",
            "port": 8080,
            "healthPath": "/health",
            "env": {"PROBE_PATHS": json!(probe_paths).to_string(), "PROBE_PIDS": json!(probe_pids).to_string()},
            "secrets": {"HOSTILE_SECRET": {"fromEnv": "HOSTILE_SECRET_VALUE"}},
        },
        "spend": {"ceilingMicros": 5_000_000, "fundPeriods": 1},
    });
    let path = project.join("ingress.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&file).expect("json")).expect("write");
    path
}

fn uid_of(pid: u32) -> u32 {
    std::fs::metadata(format!("/proc/{pid}")).expect("the process").uid()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_job_reads_no_other_tenants_secrets_keys_store_or_environment() {
    let dir = TempDir::new("hostile");
    let data = dir.path().join("relay");
    let relay =
        Relay::start_with_env(&data, &["--public".into(), "127.0.0.1:0".into()], &[("SVC_TEST_MARKER", MARKER)]).await;

    // Tenant A: the demo, with a secret.
    let demo = node_demo_project(dir.path());
    let mut demo_file: Value = serde_json::from_slice(&std::fs::read(&demo).expect("read")).expect("json");
    demo_file["app"]["secrets"] = json!({"DEMO_SECRET": {"fromEnv": "DEMO_SECRET_VALUE"}});
    std::fs::write(&demo, demo_file.to_string()).expect("write");
    let demo_config = demo.to_string_lossy().into_owned();
    let (code, out, err) = relay
        .svc_with_env(&relay.token, &["deploy", "--config", &demo_config], &[("DEMO_SECRET_VALUE", "tenant-a-secret")])
        .await;
    assert_eq!(code, 0, "tenant A deploys: {err}\n{out}\n{}", relay.proc.output());
    let a = relay.json(&["status", "--config", &demo_config]).await;
    let a_id = a["deployment"]["id"].as_str().expect("an ID").to_owned();
    let a_pids: Vec<u32> =
        a["processes"].as_array().expect("pids").iter().filter_map(|p| p.as_u64()).map(|p| p as u32).collect();
    assert_eq!(a_pids.len(), 2, "{a:#}");

    // Tenant B: the hostile app, aimed at everything A and the service hold.
    let jobs = jobs_dir(&data);
    let catalog_key = std::fs::read_dir(data.join("catalog"))
        .expect("the catalog directory")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().contains("key"))
        .expect("the catalog's signing key");
    let mut probes: Vec<String> = [
        data.join("relay.sqlite3"),
        data.join("relay.sqlite3-wal"),
        data.join("ca-key.pem"),
        catalog_key,
        data.clone(),
        // Tenant A's secrets are in the store (probed above), not in a file of their own.
        data.join("deployments").join(&a_id).join("r1/app/server.js"),
        agent_dir(&jobs, &a_id, 1).join("agent.json"),
        agent_dir(&jobs, &a_id, 1).join("key.pem"),
        jobs.clone(),
        jobs.join("artifacts"),
        PathBuf::from(format!("/proc/{}/environ", relay.proc.pid())),
        PathBuf::from(format!("/proc/{}/environ", a_pids[0])),
        PathBuf::from(format!("/proc/{}/root", a_pids[0])),
        PathBuf::from("/etc/shadow"),
        PathBuf::from("/root"),
        PathBuf::from("/home"),
        PathBuf::from("/var"),
        std::env::current_dir().expect("cwd"),
    ]
    .iter()
    .map(|p| p.to_string_lossy().into_owned())
    .collect();
    for probe in probes.iter().filter(|p| p.contains(&a_id)) {
        assert!(Path::new(probe).exists(), "tenant A's secret file {probe} is where the probe looks");
    }
    probes.sort();
    probes.dedup();
    let pids = [relay.proc.pid(), a_pids[0], a_pids[1]];
    let hostile = hostile_project(dir.path(), &probes, &pids);
    let hostile_config = hostile.to_string_lossy().into_owned();
    admin(&relay.data, "invite", "evil");
    let evil = admin(&relay.data, "token", "evil");
    let (code, out, err) = relay
        .svc_with_env(&evil, &["deploy", "--config", &hostile_config], &[("HOSTILE_SECRET_VALUE", "its-own-secret")])
        .await;
    assert_eq!(code, 0, "tenant B deploys: {err}\n{out}\n{}", relay.proc.output());

    let ca = data.join("ca.pem");
    let host = "hostile-evil.localhost";
    let answer = get(relay.public, host, &ca, "/report").await.expect("the report through the gateway");
    assert_eq!(answer.status, 200, "{}", answer.text());
    let report = answer.json();

    // No file or directory of the service or of tenant A: not even their names exist.
    for (path, outcome) in report["paths"].as_object().expect("paths") {
        assert_ne!(outcome, "read", "the hostile job read {path}: {report:#}");
    }
    assert_eq!(report["paths"].as_object().map(|p| p.len()), Some(probes.len()));
    // `../../..` from its working directory is its own root, which holds only the system's
    // read-only parts, its app and its private /tmp.
    let allowed: BTreeSet<&str> =
        ["app", "bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr"].into();
    for listing in ["root", "up"] {
        for entry in report[listing].as_array().expect("a listing") {
            let entry = entry.as_str().unwrap_or("");
            assert!(allowed.contains(entry), "{listing} shows {entry:?}: {report:#}");
        }
    }
    assert_eq!(report["cwd"], "/app");
    // bwrap's command line (PID 1 of the job) names host paths, never a secret.
    let pid1 = report["pid1"].as_str().expect("PID 1's command line");
    assert!(!pid1.contains("its-own-secret") && !pid1.contains(MARKER), "{pid1}");
    // Its environment is exactly what it was given: no variable of the coordinator's.
    let env: BTreeSet<&str> = report["env"].as_object().expect("env").keys().map(String::as_str).collect();
    assert_eq!(env, ["HOSTILE_SECRET", "PORT", "PROBE_PATHS", "PROBE_PIDS"].into(), "{report:#}");
    assert_eq!(report["env"]["HOSTILE_SECRET"], "its-own-secret");
    assert!(!answer.text().contains(MARKER) && !answer.text().contains("tenant-a-secret"), "{report:#}");
    // Other processes do not exist for it; it sees its own PID namespace only.
    for pid in pids {
        assert_eq!(report["signals"][pid.to_string()], "ESRCH", "pid {pid}: {report:#}");
    }
    assert!(report["processes"].as_u64() <= Some(3), "its own processes only: {report:#}");
    // Limits on memory, processes and open files.
    let limits = report["limits"].as_str().expect("limits");
    let limit = |name: &str| {
        limits
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l[name.len()..].split_whitespace().next())
            .unwrap_or_else(|| panic!("{name} in {limits}"))
            .to_owned()
    };
    assert_eq!(limit("Max data size"), (512u64 * 1024 * 1024).to_string());
    assert_eq!(limit("Max open files"), "4096");
    assert_eq!(limit("Max core file size"), "0");
    // Under a root service each job runs as its own unprivileged user.
    let uid = report["uid"].as_u64().expect("uid") as u32;
    if uid_of(std::process::id()) == 0 {
        assert_ne!(uid, 0, "not root");
        assert_ne!(uid, uid_of(a_pids[0]), "not tenant A's user");
        assert!(uid_of(a_pids[0]) != 0, "tenant A's app is not root either");
        assert_eq!(limit("Max processes"), "256");
    } else {
        svc_test_require::skip("not root: jobs get a uid and a process limit of their own only under a root service");
    }

    // Tenant A is still served, and its secret stayed its own.
    let a = relay.json(&["status", "--config", &demo_config]).await;
    assert_eq!(state(&a), "live", "{a:#}");
}

/// Issue 39 finding: jobs shared the host's network, so a job connected to another tenant's
/// app on loopback (bypassing TLS, `allowClients` and the rate limit) and to the coordinator's
/// ports. Each job has a network namespace of its own now: from a hostile job, another
/// tenant's app port, the API, the gateway's public and tunnel ports and the agent API are
/// all closed on its loopback, and the host's own address is not routed.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_reaches_no_other_tenants_app_and_no_port_of_the_service() {
    let dir = TempDir::new("netns");
    let data = dir.path().join("relay");
    let relay = Relay::start(&data, &["--public".into(), "127.0.0.1:0".into()]).await;
    let demo = node_demo_project(dir.path()).to_string_lossy().into_owned();
    let (code, out, err) = relay.svc(&["deploy", "--config", &demo]).await;
    assert_eq!(code, 0, "tenant A deploys: {err}\n{out}\n{}", relay.proc.output());
    let a = relay.json(&["status", "--config", &demo]).await;
    let a_id = a["deployment"]["id"].as_str().expect("an ID").to_owned();
    let agent: Value =
        serde_json::from_slice(&std::fs::read(agent_dir(&jobs_dir(&data), &a_id, 1).join("agent.json")).expect("read"))
            .expect("json");
    let app_port = agent["appPort"].as_u64().expect("appPort");
    let tunnel = agent["gateway"].as_str().expect("the tunnel").rsplit_once(':').expect("a port").1.to_owned();
    let agent_api =
        agent["coordinator"].as_str().expect("the agent API").rsplit_once(':').expect("a port").1.to_owned();
    let api = relay.api.rsplit_once(':').expect("a port").1.trim_end_matches('/').to_owned();
    // The gateway is the only way in: the app's port is not on the host's loopback.
    let from_host = std::net::TcpStream::connect(("127.0.0.1", app_port as u16));
    assert!(from_host.is_err(), "tenant A's app port {app_port} answered on the host's loopback");
    // The app answers its own agent: tenant A is served.
    let answer = get(relay.public, "node-demo-acme.localhost", &data.join("ca.pem"), "/api/info").await.expect("A");
    assert_eq!(answer.status, 200, "{}", answer.text());

    let hostile = hostile_project(dir.path(), &[], &[]).to_string_lossy().into_owned();
    admin(&relay.data, "invite", "evil");
    let evil = admin(&relay.data, "token", "evil");
    let (code, out, err) =
        relay.svc_with_env(&evil, &["deploy", "--config", &hostile], &[("HOSTILE_SECRET_VALUE", "x")]).await;
    assert_eq!(code, 0, "tenant B deploys: {err}\n{out}\n{}", relay.proc.output());
    let ca = data.join("ca.pem");
    let ports = [app_port.to_string(), api, relay.public.port().to_string(), tunnel, agent_api];
    let query = format!("/connect?host=127.0.0.1&ports={}", ports.join(","));
    let answer = get(relay.public, "hostile-evil.localhost", &ca, &query).await.expect("the hostile job answers");
    assert_eq!(answer.status, 200, "{}", answer.text());
    let reached = answer.json();
    for port in &ports {
        assert_eq!(reached[format!("127.0.0.1:{port}")], "ECONNREFUSED", "port {port} from the job: {reached:#}");
    }
    // Issue 39's flood from inside a tenant's job: 2,000 unauthenticated connections to the
    // tunnel port. None reaches it (the job's loopback is its own), and tenant A is served
    // throughout.
    let flood = format!("/flood?host=127.0.0.1&port={}&count=2000", ports[3]);
    let flooding = tokio::spawn({
        let ca = ca.clone();
        let public = relay.public;
        async move { get(public, "hostile-evil.localhost", &ca, &flood).await }
    });
    for _ in 0..5 {
        let answer = get(relay.public, "node-demo-acme.localhost", &ca, "/api/info").await.expect("A during the flood");
        assert_eq!(answer.status, 200, "{}", answer.text());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let flooded = flooding.await.expect("the flood").expect("the hostile job answers").json();
    assert_eq!(flooded["connected"], 0, "{flooded:#}");
    assert_eq!(flooded["failed"]["ECONNREFUSED"], 2000, "{flooded:#}");
    // The host's own (non-loopback) address leads nowhere either.
    let host = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("192.0.2.1:9").and_then(|()| s.local_addr()))
        .map(|a| a.ip().to_string())
        .expect("the host's address");
    let query = format!("/connect?host={host}&ports={}", relay.public.port());
    let reached = get(relay.public, "hostile-evil.localhost", &ca, &query).await.expect("answers").json();
    assert_eq!(reached[format!("{host}:{}", relay.public.port())], "ENETUNREACH", "{reached:#}");
}

/// Every directory 0700 and every file 0600 under `root`; but the stored artifacts (the apps'
/// files, each job's read-only `/app`) are 0755 and 0644 inside their 0700 directory, to be
/// read by the jobs' own uids through their mounts and by no one else.
fn assert_private(root: &Path) -> usize {
    let mut seen = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mode = meta.permissions().mode() & 0o777;
        let artifact = path.parent().is_some_and(|p| p.ends_with("artifacts"))
            && path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("sha256-"));
        if artifact {
            assert_eq!(mode, 0o755, "{} is {mode:o}", path.display());
            seen += 1;
            continue;
        }
        if meta.is_dir() {
            assert_eq!(mode, 0o700, "{} is {mode:o}", path.display());
            stack.extend(std::fs::read_dir(&path).expect("read").flatten().map(|e| e.path()));
        } else {
            assert_eq!(mode, 0o600, "{} is {mode:o}", path.display());
        }
        seen += 1;
    }
    seen
}

#[tokio::test(flavor = "multi_thread")]
async fn stores_and_data_directories_are_private_never_0644() {
    let dir = TempDir::new("modes");
    let (relay, _) = Relay::with_live_demo(dir.path(), &[]).await;
    let data = relay.data.clone();
    // The agent's key and certificate are in place once the route is live.
    let seen = assert_private(&data) + assert_private(&jobs_dir(&data));
    assert!(seen > 15, "the store, CA, catalog, deployment and agent files: {seen}");
    drop(relay);

    let publication = dir.path().join("svc");
    let server = Server::start(&publication, &[]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(publication.join("svc.sqlite3").is_file());
    assert_private(&publication);
    drop(server);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_relay_store_holds_no_route_credential_or_route_key_in_clear() {
    let dir = TempDir::new("at-rest");
    let (relay, config) = Relay::with_live_demo(dir.path(), &[]).await;
    let data = relay.data.clone();
    let status = relay.json(&["status", "--config", &config]).await;
    let id = status["deployment"]["id"].as_str().expect("an ID");
    let agent: Value = serde_json::from_slice(
        &std::fs::read(agent_dir(&jobs_dir(&data), id, 1).join("agent.json")).expect("agent.json"),
    )
    .expect("JSON");
    let credential = agent["credential"].as_str().expect("a credential");
    let route_key = agent["routeKey"].as_str().expect("a route key");
    assert!(credential.len() >= 32 && route_key.len() >= 32);
    let mut store = Vec::new();
    for name in ["relay.sqlite3", "relay.sqlite3-wal"] {
        store.extend(std::fs::read(data.join(name)).unwrap_or_default());
    }
    assert!(store.len() > 4096, "the store was read");
    let holds = |needle: &str| store.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(!holds(credential), "the tunnel credential is in the store in clear");
    assert!(!holds(route_key), "the route key is in the store in clear");
    let hash = agent::wire::sha256_hex(credential.as_bytes());
    assert!(holds(&hash), "the store keeps the credential's hash (what the gateway checks)");
    let public = agent::challenge::RouteKey::from_text(route_key).expect("a key").public_key();
    assert!(holds(&public), "and the route key's public half (what the challenge verifies with)");
}

/// Review finding: jobs share the host's network, so another tenant could listen on the port
/// a job's agent proxies to (`127.0.0.1:PORT`, while the app listens on `::1` or has not
/// started yet) and receive that route's decrypted traffic, cookies included. The agent now
/// refuses a connection accepted by a socket that is not its own job's.
#[tokio::test(flavor = "multi_thread")]
async fn another_tenant_listening_on_the_apps_port_never_gets_its_traffic() {
    if uid_of(std::process::id()) != 0 {
        svc_test_require::skip("not root: jobs get a uid of their own only under a root service");
        return;
    }
    let dir = TempDir::new("squat");
    let data = dir.path().join("relay");
    let relay = Relay::start(&data, &["--public".into(), "127.0.0.1:0".into()]).await;
    // The victim's app listens on ::1 only: its agent's 127.0.0.1:PORT is free for a squatter.
    let project = dir.path().join("victim");
    std::fs::create_dir_all(&project).expect("mkdir");
    std::fs::write(
        project.join("server.js"),
        "const port = Number(process.env.PORT);\n\
         require('node:http').createServer((q, s) => s.end('the victim')).listen(port, '::1', () => console.log(`port ${port}`));\n",
    )
    .expect("write");
    let file = json!({
        "version": 1, "name": "victim", "runtime": "node",
        "app": {"dir": ".", "entrypoint": "server.js", "port": 8080, "healthPath": "/"},
        "spend": {"ceilingMicros": 5_000_000, "fundPeriods": 1},
    });
    let config = project.join("ingress.json");
    std::fs::write(&config, file.to_string()).expect("write");
    let config = config.to_string_lossy().into_owned();
    let (code, out, err) = relay.svc(&["deploy", "--no-wait", "--config", &config]).await;
    assert_eq!(code, 0, "{err}\n{out}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let port: u16 = loop {
        let (_, logs, _) = relay.svc(&["logs", "--config", &config]).await;
        if let Some(port) = logs.lines().find_map(|l| l.rsplit_once("port ").and_then(|(_, p)| p.trim().parse().ok())) {
            break port;
        }
        assert!(std::time::Instant::now() < deadline, "the app never listened: {logs}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // A squatter of another uid (the test runs as root) takes 127.0.0.1:PORT.
    let squatter = std::net::TcpListener::bind(("127.0.0.1", port)).expect("the squatter binds");
    squatter.set_nonblocking(true).expect("nonblocking");
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = served.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopping = stop.clone();
    let thread = std::thread::spawn(move || {
        use std::io::{Read, Write};
        while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
            match squatter.accept() {
                Ok((mut s, _)) => {
                    let mut buf = [0u8; 4096];
                    let _ = s.read(&mut buf);
                    if buf.windows(6).any(|w| w == b"Cookie" || w == b"cookie") {
                        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nHIJACKED");
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    // The route never validates through the squatter, and no request reaches it.
    for _ in 0..10 {
        if let Ok(answer) = get(relay.public, "victim-acme.localhost", &data.join("ca.pem"), "/").await {
            assert!(!answer.text().contains("HIJACKED"), "the squatter answered for the victim");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let status = relay.json(&["status", "--config", &config]).await;
    assert_ne!(state(&status), "live", "validated through the squatter: {status:#}");
    // The agent reaches its app in its job's own network namespace, where the squatter is not
    // (before issue 39, the app socket's owner check caught it: "is not the app's").
    let (_, logs, _) = relay.svc(&["logs", "--config", &config]).await;
    assert!(!logs.contains("HIJACKED"), "{logs}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = thread.join();
    assert_eq!(served.load(std::sync::atomic::Ordering::Relaxed), 0);
}

/// A tenant with a token reads its own organization's deployments only: another
/// organization's project, its status, logs, ledger, hints, executions, policy, sessions and
/// are the same 404 as a project that does not exist, its list holds none of them, and its
/// validator pins for that project name are its own (none), as for any name.
#[tokio::test(flavor = "multi_thread")]
async fn another_organizations_token_reads_nothing_of_a_deployment() {
    let dir = TempDir::new("cross-tenant");
    let (relay, _config) = Relay::with_live_demo(dir.path(), &[]).await;
    admin(&relay.data, "invite", "evil");
    let evil = admin(&relay.data, "token", "evil");
    let api: std::net::SocketAddr =
        relay.api.trim_start_matches("http://").trim_end_matches('/').parse().expect("the API's address");
    let get = |token: &str, path: &str| {
        let auth = format!("Bearer {token}");
        svc_e2e::service::http(api, "GET", path, &[("Authorization", &auth)], None)
    };
    let reads = ["", "/ledger", "/logs", "/hints", "/executions", "/policy", "/sessions"];
    for read in reads {
        let path = format!("/api/ingress/deployments/node-demo{read}");
        assert_eq!(get(&relay.token, &path).status, 200, "the owner reads {path}");
        let missing = get(&evil, &format!("/api/ingress/deployments/no-such-project{read}"));
        let other = get(&evil, &path);
        assert_eq!(other.status, 404, "{path} as another organization: {}", String::from_utf8_lossy(&other.body));
        assert_eq!(other.status, missing.status, "{path}: the same answer as a missing project");
        assert!(!String::from_utf8_lossy(&other.body).contains("node-demo-acme"), "{path} leaks the hostname");
    }
    // Pins belong to an organization's project name, deployed or not: the other
    // organization's are its own, empty, exactly as for a name it never used.
    let pins = get(&evil, "/api/ingress/deployments/node-demo/pins");
    let never_used = get(&evil, "/api/ingress/deployments/no-such-project/pins");
    assert_eq!((pins.status, &pins.body), (200, &never_used.body), "{}", String::from_utf8_lossy(&pins.body));
    let list = get(&evil, "/api/ingress/deployments");
    assert_eq!(list.status, 200);
    assert!(!String::from_utf8_lossy(&list.body).contains("node-demo"), "{}", String::from_utf8_lossy(&list.body));
}
