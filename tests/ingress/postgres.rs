//! `svc relay serve --database postgres://...`: the relay's store on PostgreSQL, the way an
//! operator runs it, with `svc relay admin` against the same database.

use std::process::Command;
use std::time::Duration;

use svc_e2e::service::{TempDir, svc_binary};

use super::deploy::{Relay, node_demo_project, state};
use super::process::Proc;

fn admin(data: &std::path::Path, url: &str, args: &[&str]) -> String {
    let out = Command::new(svc_binary())
        .args(["relay", "admin"])
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .env("SVC_RELAY_DATABASE", url)
        .output()
        .expect("svc relay admin");
    assert!(out.status.success(), "svc relay admin {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn serve(data: &std::path::Path, url: &str) -> Command {
    let mut command = Command::new(svc_binary());
    command
        .args(["relay", "serve", "--data-dir"])
        .arg(data)
        .args(["--listen", "127.0.0.1:0", "--public", "127.0.0.1:0", "--revalidate-secs", "2", "--database", url])
        .env("SVC_NODE", super::process::node());
    command
}

#[tokio::test(flavor = "multi_thread")]
async fn a_relay_on_postgres_deploys_keeps_its_state_across_a_restart_runs_alone_and_moves_with_its_database() {
    let Some(cluster) = svc_pg_cluster::for_test("relay-on-postgres") else { return };
    let url = cluster.svc_url();
    let dir = TempDir::new("relay-postgres");
    let data = dir.path().join("relay");
    admin(&data, &url, &["invite", "--org", "acme"]);
    let token = admin(&data, &url, &["token", "--org", "acme"]);

    let relay = Relay::attach(Proc::spawn("svc relay serve", serve(&data, &url)), &data, token.clone()).await;
    let config = node_demo_project(dir.path()).to_string_lossy().into_owned();
    let (code, out, err) = relay.svc(&["deploy", "--config", &config]).await;
    assert_eq!(code, 0, "deploy: {err}\n{out}\n{}", relay.proc.output());
    assert!(out.lines().last().is_some_and(|l| l.starts_with("live https://")), "{out}");
    // The store is the database: the deployment is there, and nothing in the data directory.
    let rows = cluster.sql("svc", "SELECT state FROM deployments").expect("a query");
    assert_eq!(rows, "live", "the deployment's row in PostgreSQL");
    assert!(!data.join("relay.sqlite3").exists(), "no SQLite store beside it");

    // A second coordinator on the same database is refused, before it touches a job.
    let other = dir.path().join("other");
    let out = serve(&other, &url).output().expect("a second svc relay serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("another coordinator runs on it"), "{stderr}");

    // The database restarting: the API says 503 `store_unavailable` (no detail), at once,
    // and answers again once it is back, with no coordinator restart.
    cluster.stop().expect("stop the database");
    let started = std::time::Instant::now();
    let (code, out, err) = relay.svc(&["status", "--config", &config]).await;
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("store_unavailable (HTTP 503)"), "{err}");
    assert!(!err.contains("127.0.0.1") && !err.contains("postgres"), "no database detail to the caller: {err}");
    assert!(started.elapsed() < Duration::from_secs(10), "fast: {:?}", started.elapsed());
    cluster.restart().expect("start the database again");
    let project = std::path::PathBuf::from(&config);
    relay.wait_status(&project, Duration::from_secs(30), "answers again", |s| state(s) == "live").await;

    // Started again on another data directory (a coordinator moved to a new host, with only
    // the database): it finds the deployment there, writes its files from the database and
    // brings it back.
    let mut relay = relay;
    relay.proc.signal("TERM");
    assert!(relay.proc.wait_exit(Duration::from_secs(15)).await.is_some(), "{}", relay.proc.output());
    let id = cluster.sql("svc", "SELECT id FROM deployments").expect("a query");
    assert!(!other.join("deployments").join(&id).exists(), "nothing of it in the other data directory yet");
    let moved_at = super::supervision::now_ms();
    let relay = Relay::attach(Proc::spawn("svc relay serve (moved)", serve(&other, &url)), &other, token).await;
    // Its state in the database says live from the start: what counts is a job of this
    // coordinator validated, a transition to live after the move.
    let (status, _) = relay
        .wait_status(&project, Duration::from_secs(60), "live again, on the moved coordinator", |s| {
            super::supervision::transition_after(s, "live", moved_at).is_some()
        })
        .await;
    assert_eq!(status["deployment"]["revision"], 1, "{status:#}");
    let server = other.join("deployments").join(&id).join("r1").join("app").join("server.js");
    assert_eq!(
        std::fs::read(&server).expect("the app's files, written from the database"),
        std::fs::read(data.join("deployments").join(&id).join("r1").join("app").join("server.js")).expect("the first")
    );
}
