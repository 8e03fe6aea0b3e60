//! Ids in the relay API's paths are checked before the store (issue 40, point 5): a control
//! character or an over-long id is 400 `invalid_path_id` naming the field, the same on SQLite
//! and on PostgreSQL, on every route that takes one, the console's included.

use std::process::Command;

use svc_e2e::path_ids::{assert_refused, bad_ids};
use svc_e2e::service::{TempDir, http, svc_binary};

use super::deploy::Relay;
use super::process::Proc;

/// `svc relay ARGS --data-dir DATA`, on `database` if given.
fn relay_command(data: &std::path::Path, database: Option<&str>, args: &[&str]) -> Command {
    let mut command = Command::new(svc_binary());
    command.arg("relay").args(args).arg("--data-dir").arg(data).env_remove("SVC_RELAY_DATABASE");
    if let Some(url) = database {
        command.env("SVC_RELAY_DATABASE", url);
    }
    command
}

/// The relay API's routes with each bad id, on the store `backend` names.
async fn every_route_refuses_bad_ids(database: Option<&str>, backend: &str) {
    let dir = TempDir::new("relay-path-ids");
    let data = dir.path().join("relay");
    let admin = |args: &[&str]| {
        let out = relay_command(&data, database, &[&["admin"], args].concat()).output().expect("svc relay admin");
        assert!(out.status.success(), "{backend}: {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    admin(&["invite", "--org", "acme"]);
    let token = admin(&["token", "--org", "acme"]);
    let mut serve = relay_command(&data, database, &["serve", "--listen", "127.0.0.1:0", "--public", "127.0.0.1:0"]);
    serve.env("SVC_NODE", super::process::node());
    let relay = Relay::attach(Proc::spawn("svc relay serve", serve), &data, token.clone()).await;
    let addr = relay.api.trim_start_matches("http://").trim_end_matches('/').parse().expect("the API's address");
    let auth = format!("Bearer {token}");
    for (id, says) in bad_ids() {
        let base = "/api/ingress/deployments";
        let routes = [
            ("GET", format!("{base}/{id}"), "project"),
            ("GET", format!("{base}/{id}/ledger"), "project"),
            ("GET", format!("{base}/{id}/logs"), "project"),
            ("POST", format!("{base}/{id}/stop"), "project"),
            ("POST", format!("{base}/{id}/quotes"), "project"),
            ("DELETE", format!("{base}/shop/hostnames/{id}"), "hostname"),
            ("POST", format!("{base}/shop/hostnames/{id}/verify"), "hostname"),
            ("POST", format!("{base}/shop/sessions/{id}/refund"), "sessionId"),
            ("DELETE", format!("{base}/shop/pins/{id}"), "digest"),
        ];
        for (method, path, field) in routes {
            let body = (method == "POST").then_some(&b"{}"[..]);
            let answer = http(addr, method, &path, &[("Authorization", &auth)], body);
            let what = format!("{backend}: {method} {}", &path[..path.len().min(70)]);
            assert_refused(answer.status, &answer.body, field, &says, &what);
        }
        let page = http(addr, "GET", &format!("/console/deployments/{id}"), &[], None);
        let text = String::from_utf8_lossy(&page.body);
        assert_eq!(page.status, 400, "{backend}: the console: {text}");
        assert!(text.contains("project") && text.contains(&says), "{backend}: the console: {text}");
    }
    // A printable project that names nothing is still looked up: 404 on either store.
    let missing = http(addr, "GET", "/api/ingress/deployments/nope", &[("Authorization", &auth)], None);
    assert_eq!(missing.status, 404, "{backend}: {}", String::from_utf8_lossy(&missing.body));
    assert!(!relay.proc.output().contains("internal_error"), "{backend}: no 500: {}", relay.proc.output());
}

#[tokio::test(flavor = "multi_thread")]
async fn relay_path_ids_with_control_characters_or_too_long_are_400_naming_the_field_on_sqlite_and_postgres() {
    every_route_refuses_bad_ids(None, "SQLite").await;
    let Some(cluster) = svc_pg_cluster::for_test("relay_path_ids") else { return };
    let url = cluster.create_database("relay_path_ids").expect("a database");
    every_route_refuses_bad_ids(Some(&url), "PostgreSQL").await;
}
