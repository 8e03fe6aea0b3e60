//! The routes' contract: schemas (exact bytes, ETag, caching, 304), the error envelope and
//! status codes, authentication and authorization, the read-contract header.

use manifest_core::SchemaKind;
use serde_json::json;
use svc_e2e::service::{http, svc, token};

use super::{World, v5};

const SCHEMA_ROUTES: [(&str, SchemaKind, &str); 3] = [
    ("/api/application-manifest/schema", SchemaKind::ManifestV4, "4"),
    ("/api/application-manifest/v5/schema", SchemaKind::ManifestV5, "5"),
    ("/api/application-policy/schema", SchemaKind::PolicyV4, "policy"),
];

#[test]
fn schema_routes_serve_the_cli_bytes_with_their_digest_as_etag() {
    let w = World::new("schemas");
    for (path, kind, version) in SCHEMA_ROUTES {
        let r = w.server.request("GET", path, None, None);
        assert_eq!(r.status, 200, "{path}");
        let cli = svc(&["manifest", "schema", "--version", version], &[]);
        assert!(cli.status.success());
        assert_eq!(r.body, cli.stdout, "{path}: the service and `svc manifest schema` differ");
        assert_eq!(r.body, kind.bytes().as_bytes());
        let etag = r.header("etag").expect("etag");
        assert_eq!(
            etag,
            format!("\"{}\"", manifest_core::sha256(&r.body)),
            "{path}: ETag is the quoted content digest"
        );
        assert_eq!(r.header("cache-control"), Some("public, max-age=300"));
        assert_eq!(r.header("content-type"), Some("application/schema+json"));
        assert_eq!(r.header("svc-read-contract"), Some("3"));

        let again = http(w.server.addr, "GET", path, &[("If-None-Match", etag)], None);
        assert_eq!(again.status, 304, "{path}");
        assert!(again.body.is_empty());
        assert_eq!(again.header("etag"), Some(etag));
        assert_eq!(again.header("svc-read-contract"), Some("3"));
        let stale = http(w.server.addr, "GET", path, &[("If-None-Match", "\"sha256:00\"")], None);
        assert_eq!(stale.status, 200);
    }
}

#[test]
fn every_response_carries_the_read_contract_and_errors_share_one_envelope() {
    let w = World::new("envelope");
    let cases = [
        ("GET", "/api/applications/x", None, 401),
        ("GET", "/api/nope", Some(w.token.as_str()), 404),
        ("DELETE", "/api/capabilities", Some(w.token.as_str()), 405),
        ("GET", "/api/applications/missing", Some(w.token.as_str()), 404),
    ];
    for (method, path, token, status) in cases {
        let r = w.server.request(method, path, token, None);
        assert_eq!(r.status, status, "{method} {path}");
        assert_eq!(r.header("svc-read-contract"), Some("3"), "{method} {path}");
        let body = r.json();
        assert!(body["error"]["code"].is_string() && body["error"]["message"].is_string(), "{body}");
    }
    let ok = w.server.request("GET", "/api/capabilities", Some(&w.token), None);
    assert_eq!(ok.header("svc-read-contract"), Some("3"));
}

#[test]
fn bodies_are_strict_and_bounded() {
    let w = World::new("bodies");
    w.create("web");
    let unknown = w.publish("web", &json!({"manifest": v5("web"), "dryrun": true}));
    assert_eq!(unknown.status, 400);
    assert_eq!(unknown.json()["error"]["code"], "invalid_request_body");
    assert!(unknown.json()["error"]["message"].as_str().unwrap_or("").contains("dryrun"));

    let auth = format!("Bearer {}", w.token);
    let malformed = http(
        w.server.addr,
        "POST",
        "/api/applications/web/policy-versions",
        &[("Authorization", &auth)],
        Some(b"{\"manifest\": "),
    );
    assert_eq!(malformed.status, 400);

    let big = json!({"manifest": "x".repeat(1024 * 1024)});
    let r = w.publish("web", &big);
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["error"]["code"], "body_too_large");
    assert_eq!(r.header("svc-read-contract"), Some("3"));

    let create_extra = w.server.request(
        "POST",
        "/api/applications",
        Some(&w.token),
        Some(&json!({"applicationId": "a", "name": "x"})),
    );
    assert_eq!(create_extra.status, 400);
    let bad_id =
        w.server.request("POST", "/api/applications", Some(&w.token), Some(&json!({"applicationId": "Bad Id"})));
    assert_eq!((bad_id.status, bad_id.json()["error"]["code"].as_str()), (400, Some("invalid_application_id")));
}

#[test]
fn authentication_and_authorization() {
    let w = World::new("auth");
    w.create("web");
    let none = w.server.request("GET", "/api/applications/web", None, None);
    assert_eq!(none.status, 401);
    assert_eq!(none.header("www-authenticate"), Some("Bearer"));
    // One 401 code on both APIs (the relay's is `unauthenticated` too).
    assert_eq!(none.json()["error"]["code"], "unauthenticated");
    let bad = w.server.request("GET", "/api/applications/web", Some("svc_not-a-token"), None);
    assert_eq!(bad.status, 401);
    assert_eq!(bad.json()["error"]["code"], "unauthenticated");

    // Another organization sees no trace of acme's application: the same 404 as a missing one.
    let other = token(w.dir.str(), "globex", "owner");
    let theirs = w.server.request("GET", "/api/applications/web", Some(&other), None);
    let missing = w.server.request("GET", "/api/applications/nothing-here", Some(&other), None);
    assert_eq!((theirs.status, missing.status), (404, 404));
    assert_eq!(theirs.json()["error"]["code"], missing.json()["error"]["code"]);
    let publish = w.server.request(
        "POST",
        "/api/applications/web/policy-versions",
        Some(&other),
        Some(&json!({"manifest": v5("web")})),
    );
    assert_eq!(publish.status, 404);

    // A viewer reads but cannot publish or create.
    let viewer = token(w.dir.str(), "acme", "viewer");
    assert_eq!(w.server.request("GET", "/api/applications/web", Some(&viewer), None).status, 200);
    let denied = w.server.request(
        "POST",
        "/api/applications/web/policy-versions",
        Some(&viewer),
        Some(&json!({"manifest": v5("web")})),
    );
    assert_eq!((denied.status, denied.json()["error"]["code"].as_str()), (403, Some("forbidden")));
    let create = w.server.request("POST", "/api/applications", Some(&viewer), Some(&json!({"applicationId": "new"})));
    assert_eq!(create.status, 403);
}

#[test]
fn applications_are_created_once_and_read_without_volatile_fields() {
    let w = World::new("apps");
    let created = w.create("web");
    let keys: Vec<&str> = created.as_object().expect("object").keys().map(String::as_str).collect();
    assert_eq!(keys, ["activePointerVersion", "applicationId", "applicationUid", "status"]);
    assert_eq!((created["status"].as_str(), created["activePointerVersion"].as_u64()), (Some("disabled"), Some(0)));
    assert!(created["applicationUid"].as_str().is_some_and(|u| u.starts_with("app_")));

    let again = w.server.request("POST", "/api/applications", Some(&w.token), Some(&json!({"applicationId": "web"})));
    assert_eq!((again.status, again.json()["error"]["code"].as_str()), (409, Some("application_exists")));

    let first = w.server.request("GET", "/api/applications/web", Some(&w.token), None);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let second = w.server.request("GET", "/api/applications/web", Some(&w.token), None);
    assert_eq!(first.body, second.body, "no server clock or other volatile field in the application");
    assert_eq!(first.json()["applicationUid"], created["applicationUid"]);
}

#[test]
fn the_capabilities_statement_is_per_organization_and_live() {
    let w = World::new("statement");
    let before = w.get("/api/capabilities");
    assert_eq!(before["organization"], "acme");
    assert_eq!(before["entitlement"], "basic");
    assert_eq!(before["schemaPairs"], "v4_and_v5");
    let parallelism = |s: &serde_json::Value| {
        s["capabilities"].as_array().expect("list").iter().find(|c| c["name"] == "parallelism").expect("row")["granted"]
            .clone()
    };
    assert_eq!(parallelism(&before), false);
    // An offline admin command on the same data directory counts at once.
    svc_e2e::service::admin(&["capability", "grant", "--data-dir", w.dir.str(), "--org", "acme", "parallelism"]);
    svc_e2e::service::admin(&["entitlement", "set", "--data-dir", w.dir.str(), "--org", "acme", "developer"]);
    let after = w.get("/api/capabilities");
    assert_eq!(parallelism(&after), true);
    assert_eq!(after["entitlement"], "developer");
    assert_eq!(after["limits"]["jobSlots"], 16);
    let other = token(w.dir.str(), "globex", "viewer");
    let theirs = w.server.request("GET", "/api/capabilities", Some(&other), None).json();
    assert_eq!(parallelism(&theirs), false);
}
