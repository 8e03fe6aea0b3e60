//! Ids in a path are checked before the store (issue 40, point 5): a control character or an
//! over-long id is 400 `invalid_path_id` naming the field, the same on SQLite and on
//! PostgreSQL (which refuses a NUL in text: `/api/applications/%00` answered 500 there and 404
//! on SQLite), on every route that takes one, the console's included. A printable id that
//! names nothing is still 404.

use serde_json::{Value, json};
use svc_e2e::path_ids::{assert_refused, bad_ids};
use svc_e2e::service::{Server, TempDir, attach_database, token};

/// The publication service's routes with each bad id, on the store `backend` names.
fn every_route_refuses_bad_ids(dir: &TempDir, backend: &str) {
    let server = Server::start(dir.path(), &[]);
    let owner = token(dir.str(), "acme", "owner");
    let created = server.request("POST", "/api/applications", Some(&owner), Some(&json!({"applicationId": "web"})));
    assert_eq!(created.status, 201, "{backend}: {}", String::from_utf8_lossy(&created.body));
    let publish = json!({"manifest": {}});
    for (id, says) in bad_ids() {
        let routes: [(&str, String, Option<&Value>, &str); 9] = [
            ("GET", format!("/api/applications/{id}"), None, "applicationId"),
            ("GET", format!("/api/applications/{id}/policy-versions"), None, "applicationId"),
            ("POST", format!("/api/applications/{id}/policy-versions"), Some(&publish), "applicationId"),
            ("GET", format!("/api/applications/web/policy-versions/{id}"), None, "policyVersion"),
            ("GET", format!("/api/applications/{id}/activity"), None, "applicationId"),
            ("GET", format!("/api/applications/{id}/executions"), None, "applicationId"),
            ("GET", format!("/api/applications/{id}/logs"), None, "applicationId"),
            ("POST", format!("/api/applications/{id}/resume"), Some(&json!({})), "applicationId"),
            ("POST", format!("/api/applications/{id}/artifacts"), Some(&json!({})), "applicationId"),
        ];
        for (method, path, body, field) in routes {
            let answer = server.request(method, &path, Some(&owner), body);
            let what = format!("{backend}: {method} {}", &path[..path.len().min(60)]);
            assert_refused(answer.status, &answer.body, field, &says, &what);
        }
        // The console answers with a page of its own, naming the field too.
        let page = server.request("GET", &format!("/console/apps/{id}/versions"), None, None);
        let text = String::from_utf8_lossy(&page.body);
        assert_eq!(page.status, 400, "{backend}: the console: {text}");
        assert!(text.contains("applicationId") && text.contains(&says), "{backend}: the console: {text}");
    }
    // A printable id that names nothing is still looked up: 404 on either store.
    let missing = server.request("GET", "/api/applications/nope", Some(&owner), None);
    assert_eq!(missing.status, 404, "{backend}: {}", String::from_utf8_lossy(&missing.body));
    let longest = server.request("GET", &format!("/api/applications/{}", "a".repeat(253)), Some(&owner), None);
    assert_eq!(longest.status, 404, "{backend}: {}", String::from_utf8_lossy(&longest.body));
    assert!(!server.stderr().contains("internal_error"), "{backend}: no 500: {}", server.stderr());
}

#[test]
fn path_ids_with_control_characters_or_too_long_are_400_naming_the_field_on_sqlite_and_postgres() {
    every_route_refuses_bad_ids(&TempDir::new("path-ids-sqlite"), "SQLite");
    let Some(cluster) = svc_pg_cluster::for_test("path_ids") else { return };
    let dir = TempDir::new("path-ids-postgres");
    attach_database(dir.path(), &cluster.create_database("path_ids").expect("a database"));
    every_route_refuses_bad_ids(&dir, "PostgreSQL");
}
