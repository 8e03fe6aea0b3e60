//! Secrets at rest through the real `svc` (issue 40, point 1): a provisioned value is in no
//! file of the data directory (the database, its WAL and shared memory, the artifacts) nor
//! in a `pg_dump` of the cluster, and its job still gets it; `svc serve` and `svc admin`
//! refuse a missing, another store's or a world-readable key file and serve nothing;
//! `svc admin keys rotate` runs while the service writes and launches with secrets; two
//! instances on one PostgreSQL database share one key file.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc_e2e::service::{Server, TempDir, accept_build_of, admin, attach_database, svc, token};
use svc_test_leaks::canary;

use super::{World, v5};

/// The longest any wait of these tests takes.
const WAIT: Duration = Duration::from_secs(30);

/// A service on a fresh data directory, its store on `cluster` when given.
fn world(name: &str, cluster: Option<&svc_pg_cluster::Cluster>) -> World {
    let dir = TempDir::new(name);
    if let Some(cluster) = cluster {
        attach_database(dir.path(), &cluster.svc_url());
    }
    let token = token(dir.str(), "acme", "developer");
    let server = Server::start(dir.path(), &[]);
    World { server, dir, token }
}

/// A job that exits 0 only if its `API_KEY` and `/run/secrets/token` have these SHA-256
/// digests (the values themselves are in no file of the data directory): 4, 5 otherwise.
fn checking_job(api_key: &str, token: &str) -> String {
    let digest = manifest_core::service::auth::hash_token;
    format!(
        r#"
const fs = require("fs");
const crypto = require("crypto");
const sha = (v) => crypto.createHash("sha256").update(v).digest("hex");
if (sha(process.env.API_KEY || "") !== "{}") process.exit(4);
let file = "";
try {{ file = fs.readFileSync("/run/secrets/token", "utf8"); }} catch (e) {{ process.exit(5); }}
if (sha(file) !== "{}") process.exit(5);
process.exit(0);
"#,
        digest(api_key),
        digest(token)
    )
}

/// Provisions secret `id` of `app` with `value`, from a file outside the data directory.
fn provision(w: &World, app: &str, id: &str, value: &str) {
    let outside = tempfile::tempdir().expect("a scratch directory");
    let file = outside.path().join("value");
    std::fs::write(&file, value).expect("the value's file");
    let file = file.to_str().expect("UTF-8").to_owned();
    admin(&[
        "secret",
        "provision",
        "--data-dir",
        w.dir.str(),
        "--org",
        "acme",
        "--app",
        app,
        "--secret-id",
        id,
        "--value-file",
        &file,
    ]);
}

/// Publishes a once application `app` running `script`, which gets `api-key` in its
/// environment and `token` as a file.
fn launch(w: &World, app: &str, script: &str) {
    let bundle = tempfile::tempdir().expect("a bundle directory");
    std::fs::write(bundle.path().join("server.js"), script).expect("server.js");
    let digest =
        admin(&["artifact", "store", "--data-dir", w.dir.str(), "--bundle", bundle.path().to_str().expect("UTF-8")]);
    admin(&["spend-authority", "set", "--data-dir", w.dir.str(), "--org", "acme", "--micros", "1000000"]);
    w.create(app);
    accept_build_of(w.dir.str(), "acme", app, &digest);
    let mut manifest = v5(app);
    manifest["configuration"] = json!({"secrets": [
        {"secretId": "api-key", "destination": {"kind": "environment", "name": "API_KEY"}},
        {"secretId": "token", "destination": {"kind": "file", "path": "/run/secrets/token"}}
    ]});
    let r = w.publish(app, &json!({ "manifest": manifest }));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

/// The state and reason of `app`'s execution once it settled.
fn settled(w: &World, app: &str) -> (String, String) {
    let deadline = Instant::now() + WAIT;
    loop {
        let a: Value = w.get(&format!("/api/applications/{app}/executions?limit=10"));
        if a["convergence"]["state"] == "settled" {
            let e = &a["recent"][0];
            return (
                e["state"].as_str().unwrap_or("").to_owned(),
                e["reason"]["message"].as_str().unwrap_or("").to_owned(),
            );
        }
        assert!(Instant::now() < deadline, "{app} did not settle: {a:#}\nsvc stderr:\n{}", w.server.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn sealed_values_reach_the_job_and_no_file_holds_them(name: &str, cluster: Option<&svc_pg_cluster::Cluster>) {
    let w = world(name, cluster);
    let (api_key, file_token) = (canary(), canary());
    // An ID found in clear in the store: the search's control.
    let app = format!("check-{:08x}", fastrand::u32(..));
    provision(&w, &app, "api-key", &api_key);
    provision(&w, &app, "token", &file_token);
    launch(&w, &app, &checking_job(&api_key, &file_token));
    assert_eq!(settled(&w, &app), ("completed".to_owned(), "it exited with status 0".to_owned()));
    // While the service runs (the WAL not checkpointed), then once it stopped.
    for value in [&api_key, &file_token] {
        let leaked = svc_test_leaks::found(w.dir.path(), cluster, value).places;
        assert!(leaked.is_empty(), "{value} is readable in: {leaked:?}");
    }
    // The same search finds what is in clear in the store: the application's ID (unless the
    // harness put this store on a database of its own, SVC_E2E_BACKEND=postgres, whose files
    // the test that names its cluster searches).
    if cluster.is_some() || !svc_e2e::service::on_postgres() {
        let wal = w.dir.path().join(format!("{}-wal", manifest_core::service::store::DATABASE_FILE));
        assert!(cluster.is_some() || wal.exists(), "the search read the SQLite store's log too");
        assert!(
            !svc_test_leaks::found(w.dir.path(), cluster, &app).places.is_empty(),
            "the same search finds the application's ID"
        );
    }
    let World { server, dir, .. } = w;
    assert!(server.stop().success());
    for value in [&api_key, &file_token] {
        let leaked = svc_test_leaks::found(dir.path(), cluster, value).places;
        assert!(leaked.is_empty(), "{value} is readable after the stop in: {leaked:?}");
    }
    let key_file = std::fs::metadata(dir.path().join("secrets.key")).expect("the key file");
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&key_file.permissions()) & 0o777, 0o600);
}

#[test]
fn a_provisioned_value_is_in_no_store_file_and_its_job_gets_it() {
    sealed_values_reach_the_job_and_no_file_holds_them("keys-grep", None);
}

#[test]
fn a_provisioned_value_is_in_no_file_of_the_postgres_cluster_nor_its_dump_and_its_job_gets_it() {
    let Some(cluster) = svc_pg_cluster::for_test("keys-grep-postgres") else { return };
    sealed_values_reach_the_job_and_no_file_holds_them("keys-grep-pg", Some(&cluster));
}

/// `svc serve` on `dir` with `extra` arguments, run to its end: its exit code and stderr.
fn serve_refused(dir: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let mut args =
        vec!["serve", "--listen", "127.0.0.1:0", "--processors", "0", "--data-dir", dir.to_str().expect("UTF-8")];
    args.extend(extra);
    let out = svc(&args, &[]);
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_missing_foreign_or_world_readable_key_file_refuses_every_command_that_opens_the_store() {
    let w = world("keys-refused", None);
    provision(&w, "web", "api-key", "a value");
    let World { server, dir, .. } = w;
    assert!(server.stop().success());
    let key_file = dir.path().join("secrets.key");
    let data_dir = dir.str();
    let grant = ["admin", "entitlement", "set", "--data-dir", data_dir, "--org", "acme", "developer"];

    // Missing: refused, nothing listens, no new key file is made.
    let moved = dir.path().join("moved.key");
    std::fs::rename(&key_file, &moved).expect("moved");
    let (code, stderr) = serve_refused(dir.path(), &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("does not exist") && stderr.contains("refusing to start"), "{stderr}");
    assert!(!stderr.contains("listening on"), "{stderr}");
    assert!(!key_file.exists(), "no new key file for a store that has keys");
    let admin_refused = svc(&grant, &[]);
    assert_eq!(admin_refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&admin_refused.stderr).contains("restore the key file from its backup"));

    // Another store's key file, by flag and by SVC_KEY_FILE.
    let other = world("keys-other", None);
    assert!(other.server.stop().success());
    let foreign = other.dir.path().join("secrets.key");
    let (code, stderr) = serve_refused(dir.path(), &["--key-file", foreign.to_str().expect("UTF-8")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("does not hold key-encryption key"), "{stderr}");
    let by_env = svc(&grant, &[("SVC_KEY_FILE", foreign.to_str().expect("UTF-8"))]);
    assert_eq!(by_env.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&by_env.stderr).contains("another store's key file"));

    // Readable by others: refused with the fix, which then works.
    std::fs::rename(&moved, &key_file).expect("back");
    std::fs::set_permissions(&key_file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).expect("chmod");
    let (code, stderr) = serve_refused(dir.path(), &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(&format!("run `chmod 600 {}`", key_file.display())), "{stderr}");
    std::fs::set_permissions(&key_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod");
    let granted = svc(&grant, &[]);
    assert!(granted.status.success(), "{}", String::from_utf8_lossy(&granted.stderr));
}

#[test]
fn keys_rotate_while_the_service_writes_and_launches_with_secrets() {
    let w = world("keys-rotate", None);
    let (api_key, file_token) = (canary(), canary());
    provision(&w, "check", "api-key", &api_key);
    provision(&w, "check", "token", &file_token);
    let before = std::fs::read_to_string(w.dir.path().join("secrets.key")).expect("the key file");
    // Writes: secret values provisioned again and again, each command a writer of its own.
    let done = std::sync::atomic::AtomicBool::new(false);
    let (rotated, writes) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut writes = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) || writes < 3 {
                let value = format!("churn {writes}");
                let outside = tempfile::tempdir().expect("scratch");
                std::fs::write(outside.path().join("v"), &value).expect("value");
                let out = svc(
                    &[
                        "admin",
                        "secret",
                        "provision",
                        "--data-dir",
                        w.dir.str(),
                        "--org",
                        "acme",
                        "--app",
                        "churn",
                        "--secret-id",
                        &format!("s{}", writes % 20),
                        "--value-file",
                        outside.path().join("v").to_str().expect("UTF-8"),
                    ],
                    &[],
                );
                assert!(out.status.success(), "a write failed: {}", String::from_utf8_lossy(&out.stderr));
                writes += 1;
            }
            writes
        });
        // A launch with the secrets while the rotation runs, and requests that read.
        launch(&w, "check", &checking_job(&api_key, &file_token));
        let rotated = svc(&["admin", "keys", "rotate", "--data-dir", w.dir.str()], &[]);
        for _ in 0..20 {
            let r = w.server.request("GET", "/api/applications/check/executions", Some(&w.token), None);
            assert_eq!(r.status, 200);
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        (rotated, writer.join().expect("the writer"))
    });
    let report = String::from_utf8_lossy(&rotated.stdout).into_owned();
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    assert!(writes >= 3, "{writes} writes");
    assert!(report.contains("data key 2 seals every secret value now"), "{report}");
    assert!(report.contains("copy it to every host"), "{report}");
    assert_eq!(settled(&w, "check"), ("completed".to_owned(), "it exited with status 0".to_owned()));

    // No value under the old data key; the key file holds one KEK, another than before.
    // The store's rows, on SQLite or on the harness's database (SVC_E2E_BACKEND=postgres).
    let db = w.dir.path().join(manifest_core::service::store::DATABASE_FILE);
    let query = |sql: &str| {
        svc_e2e::service::postgres_sql(w.dir.path(), sql).unwrap_or_else(|| svc_e2e::service::sqlite_rows(&db, sql))
    };
    let rows =
        query("SELECT data_key_id, COUNT(*) FROM provisioned_secrets WHERE value IS NOT NULL GROUP BY data_key_id");
    assert_eq!(rows.lines().count(), 1, "one data key seals every value: {rows}");
    assert!(rows.starts_with("2|"), "{rows}");
    assert_eq!(query("SELECT id FROM data_keys"), "2");
    let after = std::fs::read_to_string(w.dir.path().join("secrets.key")).expect("the key file");
    let keks = |text: &str| text.lines().filter(|l| l.starts_with("kek-v1 ")).map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(keks(&after).len(), 1, "{after}");
    assert_ne!(keks(&after), keks(&before));
    // A launch after the rotation opens them too.
    provision(&w, "again", "api-key", &api_key);
    provision(&w, "again", "token", &file_token);
    launch(&w, "again", &checking_job(&api_key, &file_token));
    assert_eq!(settled(&w, "again").0, "completed");
    assert!(w.server.stop().success());
}

#[test]
fn two_instances_on_one_postgres_database_share_one_key_file() {
    let Some(cluster) = svc_pg_cluster::for_test("keys-two-instances") else { return };
    let scratch = TempDir::new("keys-two");
    let url = cluster.svc_url();
    let shared = scratch.path().join("shared.key");
    let (one, two) = (scratch.path().join("one"), scratch.path().join("two"));
    for dir in [&one, &two] {
        std::fs::create_dir_all(dir).expect("a data directory");
    }
    let store = ["--database", &url, "--key-file", shared.to_str().expect("UTF-8")];
    let on = |dir: &Path, args: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        all.extend(["--data-dir".to_owned(), dir.to_str().expect("UTF-8").to_owned()]);
        all.extend(store.iter().map(|a| (*a).to_owned()));
        all
    };
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = svc(&args, &[]);
        assert!(out.status.success(), "svc {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let owner = run(on(&one, &["admin", "token", "create", "--org", "acme", "--role", "developer"]));
    let first = Server::start(&one, &store);
    let second = Server::start(&two, &store);
    // The default key file of the second's data directory is not the store's: refused.
    let (code, stderr) = serve_refused(&two, &["--database", &url]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("does not exist"), "{stderr}");

    // A value provisioned through one instance's directory, a rotation through the other's,
    // and both instances still answer; the key file holds one KEK.
    let value_file = scratch.path().join("value");
    std::fs::write(&value_file, "shared value").expect("value");
    run(on(
        &one,
        &[
            "admin",
            "secret",
            "provision",
            "--org",
            "acme",
            "--app",
            "web",
            "--secret-id",
            "api-key",
            "--value-file",
            value_file.to_str().expect("UTF-8"),
        ],
    ));
    let report = run(on(&two, &["admin", "keys", "rotate"]));
    assert!(report.contains("data key 2 seals every secret value now: 1 value resealed"), "{report}");
    for server in [&first, &second] {
        let r = server.request("GET", "/api/applications", Some(&owner), None);
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    let rows = cluster.sql("svc", "SELECT data_key_id FROM provisioned_secrets").expect("a query");
    assert_eq!(rows, "2");
    let keks = std::fs::read_to_string(&shared).expect("the key file");
    assert_eq!(keks.lines().filter(|l| l.starts_with("kek-v1 ")).count(), 1, "{keks}");
    // A third instance started after the rotation, from the shared key file alone.
    let third = Server::start(&scratch.path().join("one"), &store);
    assert_eq!(third.request("GET", "/api/applications", Some(&owner), None).status, 200);
    for server in [first, second, third] {
        assert!(server.stop().success());
    }
}
