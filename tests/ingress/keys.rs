//! Secrets at rest on the relay (issue 40, point 1), over the real binaries: a secret an
//! ingress project is deployed with reaches its job and is in no file of the coordinator's
//! data directory (the store, its write-ahead log and shared memory, anything else) nor in a
//! `pg_dump` of the database; `svc relay admin keys rotate` while redeploys with new secrets
//! run loses none of them and leaves one key; a coordinator whose key file is missing,
//! another store's or readable by others refuses to start, saying what to do. (Two
//! coordinators on one PostgreSQL sharing a key file: `postgres.rs`, whose standby launches
//! the job with its secret.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use svc_e2e::service::{TempDir, svc_binary};
use svc_test_leaks::canary;

use super::deploy::{Relay, node_demo_project, state};
use super::process::Proc;

/// Gives the project file at `project` the secret `name`, taken from `env` at deploy time.
pub(super) fn with_secret(project: &Path, name: &str, env: &str) {
    let mut file: Value = serde_json::from_slice(&std::fs::read(project).expect("read")).expect("json");
    file["app"]["secrets"] = json!({ name: {"fromEnv": env} });
    std::fs::write(project, file.to_string()).expect("write");
}

/// The environment of the job's app (the first of `status`'s processes), as its process has it.
pub(super) fn app_environ(status: &Value) -> String {
    let pid = status["processes"][0].as_u64().unwrap_or_else(|| panic!("the app's pid in {status:#}"));
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/environ")).expect("the app's environment"))
        .replace('\0', "\n")
}

/// Asserts no file under `data` holds `value` in any form, and that the store's files were
/// among those read.
fn assert_no_file_holds(data: &Path, value: &str, store_files: &[&str]) {
    let found = svc_test_leaks::found(data, None, value);
    found.read_each(store_files);
    assert!(found.places.is_empty(), "the secret's value is at rest: {:?}", found.places);
}

/// Deploys the Node demo with secret `API_KEY` = `value` and waits until live: the project
/// file, and the status.
async fn deploy_with_secret(relay: &Relay, dir: &Path, value: &str) -> (PathBuf, Value) {
    let project = node_demo_project(dir);
    with_secret(&project, "API_KEY", "CANARY_VALUE");
    let config = project.to_string_lossy().into_owned();
    let (code, out, err) =
        relay.svc_with_env(&relay.token, &["deploy", "--config", &config], &[("CANARY_VALUE", value)]).await;
    assert_eq!(code, 0, "deploy: {err}\n{out}\n{}", relay.proc.output());
    let (status, _) = relay.wait_status(&project, Duration::from_secs(30), "live", |s| state(s) == "live").await;
    (project, status)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deployed_secret_reaches_its_job_and_no_file_of_the_sqlite_data_directory() {
    let dir = TempDir::new("keys-sqlite");
    let data = dir.path().join("relay");
    let relay = Relay::start(&data, &["--public".into(), "127.0.0.1:0".into()]).await;
    let value = canary();
    let (_, status) = deploy_with_secret(&relay, dir.path(), &value).await;
    assert!(app_environ(&status).contains(&format!("API_KEY={value}")), "the job has its secret");
    let key_file = data.join("secrets.key");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key_file).expect("the key file").permissions())
            & 0o777,
        0o600
    );
    assert_no_file_holds(&data, &value, &["relay.sqlite3", "relay.sqlite3-wal", "relay.sqlite3-shm", "secrets.key"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deployed_secret_reaches_its_job_and_neither_the_data_directory_nor_a_pg_dump() {
    let Some(cluster) = svc_pg_cluster::for_test("keys-postgres") else { return };
    let url = cluster.svc_url();
    let dir = TempDir::new("keys-postgres");
    let data = dir.path().join("relay");
    super::postgres::admin(&data, &url, &["invite", "--org", "acme"]);
    let token = super::postgres::admin(&data, &url, &["token", "--org", "acme"]);
    let serve = super::postgres::serve(&data, &url);
    let relay = Relay::attach(Proc::spawn("svc relay serve", serve), &data, token).await;
    let value = canary();
    let (_, status) = deploy_with_secret(&relay, dir.path(), &value).await;
    assert!(app_environ(&status).contains(&format!("API_KEY={value}")), "the job has its secret");
    assert_no_file_holds(&data, &value, &[]);
    let dump = svc_test_leaks::pg_dumpall(&cluster);
    let text = String::from_utf8_lossy(&dump);
    assert!(text.contains("sealed-v1.") && text.contains("data_keys"), "the dump has the sealed rows");
    assert!(svc_test_leaks::leaks(&dump, &value).is_empty(), "the dump holds the secret's value");
}

/// Runs `svc relay admin ARGS --data-dir DATA`: (exit code, stdout, stderr).
fn relay_admin(data: &Path, args: &[&str], env: &[(&str, &Path)]) -> (i32, String, String) {
    let out = Command::new(svc_binary())
        .args(["relay", "admin"])
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .output()
        .expect("svc relay admin");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

/// The data key ids the store's secrets are under, and how many data keys it holds.
fn keys_in(data: &Path) -> (Vec<Option<i64>>, i64) {
    let conn = rusqlite::Connection::open(data.join("relay.sqlite3")).expect("the store");
    let mut statement =
        conn.prepare("SELECT DISTINCT data_key_id FROM revision_secrets ORDER BY 1").expect("a statement");
    let ids = statement.query_map([], |r| r.get(0)).expect("runs").map(|r| r.expect("a row")).collect();
    let count = conn.query_row("SELECT COUNT(*) FROM data_keys", [], |r| r.get(0)).expect("a count");
    (ids, count)
}

/// `svc relay admin keys rotate` while the coordinator serves and redeploys with new
/// secrets run (each launching a job that reads its secret): every deploy and status
/// succeeds, the last revision's job has the last secret, every revision's secrets are under
/// the new data key, the store holds one data key and the key file one KEK.
#[tokio::test(flavor = "multi_thread")]
async fn rotating_the_keys_while_redeploys_with_new_secrets_run_loses_nothing() {
    let dir = TempDir::new("keys-rotate");
    let data = dir.path().join("relay");
    let relay = Relay::start(&data, &["--public".into(), "127.0.0.1:0".into()]).await;
    let (project, _) = deploy_with_secret(&relay, dir.path(), "first-value").await;
    let config = project.to_string_lossy().into_owned();
    let before = keys_in(&data);
    assert_eq!(before, (vec![Some(1)], 1), "sealed under the first data key");

    let redeploys = {
        let (relay, config) = (&relay, &config);
        async move {
            let mut last = String::new();
            for i in 0..4 {
                last = format!("value-{i}-{}", canary());
                let env = [("CANARY_VALUE", last.as_str())];
                let (code, out, err) =
                    relay.svc_with_env(&relay.token, &["deploy", "--no-wait", "--config", config], &env).await;
                assert_eq!(code, 0, "redeploy {i} during the rotation: {err}\n{out}\n{}", relay.proc.output());
                let (code, _, err) = relay.svc(&["status", "--config", config]).await;
                assert_eq!(code, 0, "status during the rotation: {err}");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            last
        }
    };
    let rotation = {
        let data = data.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            tokio::task::spawn_blocking(move || relay_admin(&data, &["keys", "rotate"], &[]))
                .await
                .expect("the rotation")
        }
    };
    let (last, (code, out, err)) = tokio::join!(redeploys, rotation);
    assert_eq!(code, 0, "the rotation: {err}\n{out}");
    assert!(out.contains("data key 2 seals the store's secrets now") && out.contains("back the key file up"), "{out}");

    // The last redeploy takes over with its secret.
    let (status, _) = relay
        .wait_status(&project, Duration::from_secs(60), "the last revision live", |s| {
            state(s) == "live" && s["deployment"]["revision"] == 5 && s["successor"].is_null()
        })
        .await;
    assert!(app_environ(&status).contains(&format!("API_KEY={last}")), "the last revision's job has its secret");
    let (ids, data_keys) = keys_in(&data);
    assert!(ids.iter().all(|id| *id == Some(2)) && data_keys == 1, "{ids:?}, {data_keys} data keys");
    let key_file = std::fs::read_to_string(data.join("secrets.key")).expect("the key file");
    assert_eq!(key_file.lines().filter(|l| l.starts_with("kek-v1 ")).count(), 1, "{key_file}");
    assert!(relay.proc.output().lines().all(|l| !l.contains("ERROR")), "{}", relay.proc.output());
}

/// `svc relay serve` on `data` with `extra` flags, which must exit by itself: its exit code
/// and everything it printed.
async fn serve_refused(data: &Path, extra: &[&std::ffi::OsStr]) -> (i32, String) {
    let mut command = Command::new(svc_binary());
    command
        .args(["relay", "serve", "--data-dir"])
        .arg(data)
        .args(["--listen", "127.0.0.1:0", "--public", "127.0.0.1:0"])
        .args(extra)
        .env("SVC_NODE", super::process::node());
    let mut proc = Proc::spawn("svc relay serve", command);
    let status = proc.wait_exit(Duration::from_secs(20)).await.unwrap_or_else(|| panic!("{}", proc.output()));
    (status.code().unwrap_or(-1), proc.output())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_coordinator_refuses_to_start_without_its_key_file_with_another_or_a_readable_one() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("keys-refused");
    let data = dir.path().join("relay");
    // The first command on a new data directory makes the key file, and says so.
    let (code, _, err) = relay_admin(&data, &["invite", "--org", "acme"], &[]);
    assert_eq!(code, 0, "{err}");
    let key_file = data.join("secrets.key");
    assert!(err.contains("created the key file") && err.contains("back it up apart from the database"), "{err}");
    assert_eq!(std::fs::metadata(&key_file).expect("made").permissions().mode() & 0o777, 0o600);

    // Missing (a data directory restored without it): refused, nothing served, no new file.
    let kept = dir.path().join("kept.key");
    std::fs::rename(&key_file, &kept).expect("move");
    let (code, said) = serve_refused(&data, &[]).await;
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("does not exist") && said.contains("refusing to start"), "{said}");
    assert!(!said.contains("ready http") && !said.contains("gateway public"), "served nothing: {said}");
    assert!(!key_file.exists(), "no new key file made");
    let (code, _, err) = relay_admin(&data, &["token", "--org", "acme"], &[]);
    assert_eq!(code, 2, "the admin commands refuse too: {err}");
    assert!(err.contains("does not exist"), "{err}");

    // Another store's key file.
    let other = dir.path().join("other");
    assert_eq!(relay_admin(&other, &["invite", "--org", "acme"], &[]).0, 0);
    let (code, said) = serve_refused(&data, &["--key-file".as_ref(), other.join("secrets.key").as_os_str()]).await;
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("does not hold key-encryption key"), "{said}");

    // Its own, readable by others.
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let (code, said) = serve_refused(&data, &["--key-file".as_ref(), kept.as_os_str()]).await;
    assert_eq!(code, 2, "{said}");
    assert!(said.contains("mode 0644") && said.contains("chmod 600"), "{said}");

    // Put right, kept elsewhere and named by SVC_RELAY_KEY_FILE: the store opens.
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let (code, out, err) = relay_admin(&data, &["token", "--org", "acme"], &[("SVC_RELAY_KEY_FILE", &kept)]);
    assert_eq!(code, 0, "{err}");
    assert!(out.trim().starts_with("rly_"), "{out}");
}
