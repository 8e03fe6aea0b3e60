//! Deploys are atomic: a refused or failed deploy leaves nothing on disk or in the store,
//! bundle limits hold exactly (2,000 files, 12 MiB), and a 500 says `internal_error` with a
//! request id while the detail goes only to the server's log.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::Path;

use base64::Engine as _;
use serde_json::{Value, json};
use svc_e2e::service::TempDir;

use super::deploy::{Relay, admin, repo};

/// `POST path` with a bearer token and a JSON body to the relay API: (status, body).
fn post(relay: &Relay, token: &str, path: &str, body: &Value) -> (u16, Value) {
    request(relay, token, "POST", path, &body.to_string())
}

/// One request with a bearer token to the relay API: (status, body as JSON, or null).
fn request(relay: &Relay, token: &str, method: &str, path: &str, body: &str) -> (u16, Value) {
    let addr = relay.api.trim_start_matches("http://").trim_end_matches('/');
    let mut tcp = std::net::TcpStream::connect(addr).expect("connect");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).expect("write");
    // The server may answer (413) before the body is read; a refused write is fine then.
    let _ = tcp.write_all(body.as_bytes());
    let mut answer = Vec::new();
    let _ = tcp.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    let status = answer.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// A deploy request for project `name` with these app files.
fn deploy_request(name: &str, files: BTreeMap<String, Vec<u8>>, hostnames: &[&str]) -> Value {
    let bundle: BTreeMap<String, String> =
        files.into_iter().map(|(k, v)| (k, base64::engine::general_purpose::STANDARD.encode(v))).collect();
    json!({
        "project": {
            "version": 1, "name": name, "runtime": "node",
            "app": {"dir": ".", "entrypoint": "server.js", "port": 8080, "healthPath": "/health"},
            "hostnames": hostnames,
            "spend": {"ceilingMicros": 1_000_000, "fundPeriods": 1},
        },
        "bundle": bundle,
    })
}

fn app_files(extra: usize, filler: usize) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::from([("server.js".to_owned(), b"// nothing\n".to_vec())]);
    for i in 0..extra {
        files.insert(format!("lib/f{i:05}.js"), Vec::new());
    }
    if filler > 0 {
        files.insert("big.bin".to_owned(), vec![7u8; filler]);
    }
    files
}

/// The deployments directory's entries (one per deployment with files).
fn deployment_dirs(data: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(data.join("deployments"))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    names.sort();
    names
}

async fn relay(dir: &TempDir) -> Relay {
    Relay::start(&dir.path().join("relay"), &["--public".into(), "127.0.0.1:0".into()]).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deploy_refused_for_a_taken_hostname_leaves_no_files_and_no_deployment() {
    let dir = TempDir::new("taken");
    let relay = relay(&dir).await;
    let path = "/api/ingress/deployments";
    let (status, first) =
        post(&relay, &relay.token, path, &deploy_request("shop", app_files(0, 0), &["shop.example.test"]));
    assert_eq!(status, 201, "{first:#}");
    assert_eq!(deployment_dirs(&relay.data).len(), 1);

    admin(&relay.data, "invite", "evil");
    let evil = admin(&relay.data, "token", "evil");
    let (status, refused) =
        post(&relay, &evil, path, &deploy_request("copycat", app_files(3, 1000), &["shop.example.test"]));
    assert_eq!(status, 409, "{refused:#}");
    assert_eq!(refused["error"]["code"], "hostname_taken", "{refused:#}");
    assert_eq!(deployment_dirs(&relay.data), [first["deployment"]["id"].as_str().expect("an ID")], "no files left");
    let (code, _, err) = relay.svc_as(&evil, &["status", "--project", "copycat"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("not_found"), "no half-made deployment: {err}");
    // The next deploy of the same project is a new one, not `existing: true` of a half-made one.
    let (status, again) = post(&relay, &evil, path, &deploy_request("copycat", app_files(0, 0), &[]));
    assert_eq!(status, 201, "{again:#}");
    assert_eq!(again["existing"], false);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bundle_of_6000_files_or_over_12_mib_is_refused_and_the_limits_hold_exactly() {
    let dir = TempDir::new("bundle-limits");
    let relay = relay(&dir).await;
    let path = "/api/ingress/deployments";
    let cases: [(&str, usize, usize, u16); 5] = [
        ("six-thousand", 5999, 0, 413),
        ("two-thousand-one", 2000, 0, 413),
        ("two-thousand", 1999, 0, 201),
        ("over-twelve", 0, 12 * 1024 * 1024 - 10, 413),
        ("twelve", 0, 12 * 1024 * 1024 - 11, 201),
    ];
    let mut created = 0;
    for (name, extra, filler, expected) in cases {
        let files = app_files(extra, filler);
        let (status, body) = post(&relay, &relay.token, path, &deploy_request(name, files, &[]));
        assert_eq!(status, expected, "{name}: {body:#}");
        if expected == 413 {
            assert_eq!(body["error"]["code"], "bundle_too_large", "{name}: {body:#}");
        } else {
            created += 1;
        }
        assert_eq!(deployment_dirs(&relay.data).len(), created, "{name}: only accepted deploys leave files");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_deploy_says_internal_error_with_a_request_id_and_leaves_nothing() {
    let dir = TempDir::new("deploy-500");
    let mut relay = relay(&dir).await;
    // The deployments directory becomes a file: writing the app's files fails.
    let deployments = relay.data.join("deployments");
    std::fs::remove_dir_all(&deployments).expect("remove");
    std::fs::write(&deployments, b"not a directory").expect("write");
    let (status, body) =
        post(&relay, &relay.token, "/api/ingress/deployments", &deploy_request("app", app_files(0, 0), &[]));
    assert_eq!(status, 500, "{body:#}");
    assert_eq!(body["error"]["code"], "internal_error", "{body:#}");
    let id = body["error"]["requestId"].as_str().expect("a request id").to_owned();
    assert!(id.starts_with("req_"), "{body:#}");
    let text = body.to_string();
    assert!(!text.contains(relay.data.to_string_lossy().as_ref()) && !text.contains("/tmp"), "no path: {text}");
    // The log is read as the coordinator writes it: wait for the line (a busy machine lags).
    relay
        .proc
        .expect_line(std::time::Duration::from_secs(10), &format!("the detail under {id}"), |l| {
            l.contains(&id) && l.contains("deployments")
        })
        .await;
    let (code, _, err) = relay.svc(&["status", "--project", "app"]).await;
    assert_eq!(code, 1);
    assert!(err.contains("not_found"), "nothing in the store: {err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn relay_numbers_outside_their_type_are_400_naming_the_field_never_ignored() {
    let dir = TempDir::new("relay-numbers");
    let relay = relay(&dir).await;
    let (status, body) =
        post(&relay, &relay.token, "/api/ingress/deployments", &deploy_request("app", app_files(0, 0), &[]));
    assert_eq!(status, 201, "{body:#}");
    let quotes = "/api/ingress/deployments/app/quotes";
    for periods in ["18446744073709551616", "-1", "1.5", "\"3\""] {
        let (status, body) = request(&relay, &relay.token, "POST", quotes, &format!("{{\"periods\": {periods}}}"));
        assert_eq!(status, 400, "periods {periods}: {body:#}");
        assert_eq!(body["error"]["code"], "invalid_request", "{body:#}");
        assert!(body["error"]["message"].as_str().unwrap_or("").contains("`periods`"), "names the field: {body:#}");
    }
    let logs = "/api/ingress/deployments/app/logs";
    for query in ["after=-1", "after=99999999999999999999", "limit=0", "limit=5001", "limit=x"] {
        let (status, body) = request(&relay, &relay.token, "GET", &format!("{logs}?{query}"), "");
        assert_eq!(status, 400, "{query}: {body:#}");
        assert_eq!(body["error"]["code"], "invalid_request", "a JSON envelope for {query}: {body:#}");
    }
    let (status, body) = request(&relay, &relay.token, "GET", &format!("{logs}?after=0&limit=5000"), "");
    assert_eq!(status, 200, "{body:#}");
}

/// Review finding: 2,000 nested directories (`d/d/.../d/x`, under PATH_MAX) were accepted, and
/// when funded the runner's recursive ownership walk overflowed a worker's stack: the whole
/// coordinator aborted, and again at every start. Bundle paths are now bounded (depth,
/// length, characters, no file that is also a directory), and the walk is iterative.
#[tokio::test(flavor = "multi_thread")]
async fn a_bundle_of_2000_nested_directories_is_refused_and_the_coordinator_lives() {
    let dir = TempDir::new("deep-bundle");
    let relay = relay(&dir).await;
    let path = "/api/ingress/deployments";
    let deep = |depth: usize| {
        let mut files = app_files(0, 0);
        files.insert(format!("{}/x", vec!["d"; depth].join("/")), b"deep".to_vec());
        files
    };
    let (status, body) = post(&relay, &relay.token, path, &deploy_request("deep", deep(2000), &[]));
    assert_eq!((status, &body["error"]["code"]), (400, &json!("invalid_bundle")), "{body:#}");
    for (name, bad) in [
        ("nul", "a\u{0}b".to_owned()),
        ("newline", "a\nb".to_owned()),
        ("long-component", "x".repeat(256)),
        ("long-path", vec!["x".repeat(200); 8].join("/")),
        ("trailing-slash", "dir/".to_owned()),
        ("empty-component", "a//b".to_owned()),
    ] {
        let mut files = app_files(0, 0);
        files.insert(bad, b"x".to_vec());
        let (status, body) = post(&relay, &relay.token, path, &deploy_request(name, files, &[]));
        assert_eq!((status, &body["error"]["code"]), (400, &json!("invalid_bundle")), "{name}: {body:#}");
    }
    let mut both = app_files(0, 0);
    both.insert("lib".to_owned(), b"a file".to_vec());
    both.insert("lib/a.js".to_owned(), b"and a directory".to_vec());
    let (status, body) = post(&relay, &relay.token, path, &deploy_request("both", both, &[]));
    assert_eq!((status, &body["error"]["code"]), (400, &json!("invalid_bundle")), "{body:#}");
    assert!(deployment_dirs(&relay.data).is_empty(), "nothing left on disk");

    // The deepest bundle allowed deploys, launches and is judged like any other.
    let (status, body) = post(&relay, &relay.token, path, &deploy_request("deepest", deep(31), &[]));
    assert_eq!(status, 201, "{body:#}");
    let (code, out, err) = relay.svc(&["fund", "--project", "deepest"]).await;
    assert_eq!(code, 0, "funded: {err}\n{out}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let status = relay.json(&["status", "--project", "deepest"]).await;
        if status["transitions"].as_array().is_some_and(|t| t.iter().any(|t| t["to"] == "validating")) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never launched: {status:#}\n{}", relay.proc.output());
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn twelve_identical_deploys_at_once_make_one_deployment_and_no_conflict() {
    let dir = TempDir::new("same-deploys");
    let relay = relay(&dir).await;
    let request = deploy_request("twins", app_files(0, 0), &[]);
    let statuses: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> =
            (0..12).map(|_| scope.spawn(|| post(&relay, &relay.token, "/api/ingress/deployments", &request))).collect();
        handles.into_iter().map(|h| h.join().expect("a deploy")).collect()
    });
    let created = statuses.iter().filter(|(s, _)| *s == 201).count();
    let existing = statuses.iter().filter(|(s, b)| *s == 200 && b["existing"] == true).count();
    assert_eq!((created, existing), (1, 11), "{statuses:#?}");
    let ids: std::collections::BTreeSet<&str> =
        statuses.iter().filter_map(|(_, b)| b["deployment"]["id"].as_str()).collect();
    assert_eq!(ids.len(), 1, "one deployment: {ids:?}");
    assert_eq!(deployment_dirs(&relay.data).len(), 1, "one set of files");
}

/// `<project>-<org>` is not injective: org `c` with project `a-b` and org `b-c` with project
/// `a` both make `a-b-c.localhost`. The first organization keeps the name, stopped or not.
#[tokio::test(flavor = "multi_thread")]
async fn canonical_names_never_pass_to_another_organization() {
    let dir = TempDir::new("canonical");
    let relay = relay(&dir).await;
    let path = "/api/ingress/deployments";
    admin(&relay.data, "invite", "c");
    admin(&relay.data, "invite", "b-c");
    let (c, bc) = (admin(&relay.data, "token", "c"), admin(&relay.data, "token", "b-c"));
    let (status, first) = post(&relay, &c, path, &deploy_request("a-b", app_files(0, 0), &[]));
    assert_eq!(status, 201, "{first:#}");
    assert_eq!(first["deployment"]["canonicalHostname"], "a-b-c.localhost");
    let (status, refused) = post(&relay, &bc, path, &deploy_request("a", app_files(0, 0), &[]));
    assert_eq!(status, 409, "{refused:#}");
    assert_eq!(refused["error"]["code"], "canonical_name_taken", "{refused:#}");
    // Stopped, the name is still not the other organization's.
    let (code, _, err) = relay.svc_as(&c, &["stop", "--project", "a-b"]).await;
    assert_eq!(code, 0, "{err}");
    let (status, refused) = post(&relay, &bc, path, &deploy_request("a", app_files(0, 0), &[]));
    assert_eq!((status, refused["error"]["code"].as_str()), (409, Some("canonical_name_taken")), "{refused:#}");
    // The owner deploys under it again.
    let (status, again) = post(&relay, &c, path, &deploy_request("a-b", app_files(1, 10), &[]));
    assert_eq!(status, 201, "{again:#}");
}

/// Issue 17, point 8: a revision publishes its manifest, and its job runs what the manifest
/// declares. A project that gives the job a variable its named manifest leaves out, or a
/// manifest that pins other files than those sent, is refused before anything is kept; a
/// deploy that publishes answers its policy at `.../policy`.
#[tokio::test(flavor = "multi_thread")]
async fn a_deploy_whose_manifest_cannot_run_what_is_sent_is_refused_and_a_published_one_is_readable() {
    let dir = TempDir::new("published");
    let relay = relay(&dir).await;
    let manifest =
        std::fs::read_to_string(repo().join("examples/node-demo/manifest.yaml")).expect("the demo manifest").replace(
            "  - source: literal\n      name: PORT\n      value: \"8080\"\n",
            "  - source: literal\n      name: MODE\n      value: named\n",
        );
    let mut request = deploy_request("named", app_files(0, 0), &[]);
    request["project"]["manifest"] = json!("manifest.yaml");
    request["project"]["app"]["env"] = json!({"DEBUG": "1"});
    request["manifest"] = json!(manifest);
    let (status, body) = post(&relay, &relay.token, "/api/ingress/deployments", &request);
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("manifest_undeclared")), "{body:#}");
    assert!(body["error"]["message"].as_str().is_some_and(|m| m.contains("/app/env/DEBUG")), "{body:#}");

    request["project"]["app"]["env"] = json!({});
    let pinned = manifest
        .replace("  mode: source\n", &format!("  mode: pinned\n  artifact:\n    digest: sha256:{}\n", "0".repeat(64)));
    request["manifest"] = json!(pinned);
    let (status, body) = post(&relay, &relay.token, "/api/ingress/deployments", &request);
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("artifact_not_sent")), "{body:#}");
    assert!(deployment_dirs(&relay.data).is_empty(), "nothing kept");

    request["manifest"] = json!(manifest);
    let (status, body) = post(&relay, &relay.token, "/api/ingress/deployments", &request);
    assert_eq!(status, 201, "{body:#}");
    let (status, policy) = request_get(&relay, "/api/ingress/deployments/named/policy");
    assert_eq!(status, 200, "{policy:#}");
    assert_eq!((&policy["policyVersion"], &policy["active"]), (&json!(1), &json!(true)), "{policy:#}");
    assert_eq!(policy["policy"]["configuration"]["variables"][0]["name"], "MODE", "as the manifest says");
    assert_eq!(policy["policy"]["applicationUid"], body["deployment"]["id"]);
    assert!(policy["policyDigest"].as_str().is_some_and(|d| d.starts_with("sha256:")), "{policy:#}");
    let (status, missing) = request_get(&relay, "/api/ingress/deployments/named/policy?revision=2");
    assert_eq!((status, missing["error"]["code"].as_str()), (404, Some("not_found")), "{missing:#}");
}

fn request_get(relay: &Relay, path: &str) -> (u16, Value) {
    request(relay, &relay.token, "GET", path, "")
}
