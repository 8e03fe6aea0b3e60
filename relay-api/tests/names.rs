//! Names people read and IDs they hold (issue 42): a token carries a name, which the timeline
//! says instead of its ID; a customer token is issued for an invited organization only; a
//! session ID is found among all the deployments of its project, never another
//! organization's. The engine and the relay API in process (`support/world.rs`).

#[path = "support/world.rs"]
mod world;

use relay_api::coordinator::StoreError;
use relay_api::coordinator::store::TokenRole;
use world::*;

/// Calls the relay API in process as `token`: (status, JSON body).
async fn call(router: &axum::Router, method: &str, path: &str, token: &str) -> (u16, serde_json::Value) {
    let request = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header("authorization", format!("Bearer {token}"))
        .body(axum::body::Body::empty())
        .expect("a request");
    send(router, request).await
}

fn token(w: &World, org: &str, name: Option<&str>) -> relay_api::coordinator::IssuedToken {
    relay_api::coordinator::issue_token(&w.engine.config().data_dir, org, TokenRole::Customer, name).expect("a token")
}

#[tokio::test]
async fn a_customer_token_is_issued_named_and_for_an_invited_organization_only() {
    let w = world(FakeProbe::default());
    let data = w.engine.config().data_dir.clone();
    let named = token(&w, "acme", Some("Ada Lovelace"));
    assert_eq!(named.name, "Ada Lovelace");
    let unnamed = token(&w, "acme", None);
    assert_eq!(unnamed.name, format!("customer-{}", &unnamed.id[4..8]));

    let refused = relay_api::coordinator::issue_token(&data, "outsider", TokenRole::Customer, None)
        .expect_err("an organization without an invitation");
    assert!(
        matches!(&refused, StoreError::Refused { code: "not_invited", message } if message.contains("\"outsider\"")),
        "{refused:?}"
    );
    assert_eq!(w.store.invited("outsider").expect("a read"), None, "no organization was created");
    // An operator token names its gateway operator, which no invitation concerns.
    let operator = relay_api::coordinator::issue_token(&data, "north", TokenRole::Operator, None).expect("issued");
    assert_eq!(operator.name, format!("operator-{}", &operator.id[4..8]));
    let bad = relay_api::coordinator::issue_token(&data, "acme", TokenRole::Customer, Some("a\nb"));
    assert!(matches!(bad, Err(StoreError::Refused { code: "invalid_name", .. })), "{bad:?}");
}

#[tokio::test]
async fn the_timeline_says_who_stopped_a_deployment_by_the_tokens_name() {
    let w = world(FakeProbe::default());
    let ada = token(&w, "acme", Some("Ada Lovelace"));
    let router = relay_api::coordinator::api_router(w.engine.clone());
    let d = w.funded("shop");
    let (status, body) = call(&router, "POST", "/api/ingress/deployments/shop/stop", &ada.plaintext).await;
    assert_eq!(status, 200, "{body}");
    let transitions = w.store.transitions(&d.id).expect("the timeline");
    let stop = transitions.iter().find(|t| t.to == relay_api::coordinator::state::DeploymentState::Stopped);
    let reason = stop.map(|t| t.reason.clone()).unwrap_or_default();
    assert_eq!(reason, "stopped by Ada Lovelace");
    assert!(!reason.contains(&ada.id), "{reason}");
}

#[tokio::test]
async fn a_session_is_found_across_its_projects_deployments_and_never_another_organizations() {
    let w = world(FakeProbe::default());
    let acme = token(&w, "acme", None);
    let router = relay_api::coordinator::api_router(w.engine.clone());
    // An older deployment of the project, stopped: its unstarted period is refundable.
    let older = w.funded("shop");
    let (status, body) = call(&router, "POST", "/api/ingress/deployments/shop/stop", &acme.plaintext).await;
    assert_eq!(status, 200, "{body}");
    let sessions = w.store.sessions(&older.id).expect("sessions");
    let session = sessions.iter().find(|s| s.refundable_micros > 0).expect("a refundable session").id.clone();
    // The project's newest deployment is another one (not funded: no session of its own).
    let newer = w
        .store
        .create_deployment(&mine("dep_00000000000000a2", &w.org, &older.canonical_hostname, "rt_shop_2"))
        .expect("a newer deployment");
    let newest = w.store.deployment_of(&w.org, "shop").expect("a read").expect("the project's newest");
    assert_eq!(newest.id, newer.id);

    // Another organization with a project of the same name: the session is not its.
    let other_org = w.store.invite("other").expect("invited");
    let theirs = mine("dep_00000000000000b1", &other_org, "shop-other.localhost", "rt_shop_other");
    w.store.create_deployment(&theirs).expect("their deployment of a project named shop");
    let other = token(&w, "other", None);
    let refund = format!("/api/ingress/deployments/shop/sessions/{session}/refund");
    let (status, body) = call(&router, "POST", &refund, &other.plaintext).await;
    assert_eq!(status, 404, "another organization's session: {body}");
    let refunded =
        |w: &World| w.store.sessions(&older.id).expect("sessions").iter().map(|s| s.refunded_micros).sum::<u64>();
    assert_eq!(refunded(&w), 0, "nothing refunded");

    // By the project's name, the session of its older deployment is found and refunded.
    let (status, body) = call(&router, "POST", &refund, &acme.plaintext).await;
    assert_eq!(status, 201, "{body}");
    assert!(refunded(&w) > 0, "the older deployment's session was refunded: {body}");
    // Refunded once.
    let (status, body) = call(&router, "POST", &refund, &acme.plaintext).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("session_already_refunded")), "{body}");
    // A session no deployment of the project has is still not found.
    let unknown = "/api/ingress/deployments/shop/sessions/ses_0000000000000000/refund";
    let (status, body) = call(&router, "POST", unknown, &acme.plaintext).await;
    assert_eq!(status, 404, "{body}");
}

/// A deployment `id` of project `shop` for organization `org_id`, unfunded.
fn mine(id: &str, org_id: &str, canonical: &str, route: &str) -> relay_api::coordinator::store::NewDeployment {
    relay_api::coordinator::store::NewDeployment {
        id: id.into(),
        org_id: org_id.into(),
        project: "shop".into(),
        project_json: PROJECT.to_owned(),
        project_digest: "sha256:two".into(),
        manifest_digest: "sha256:m".into(),
        canonical_hostname: canonical.into(),
        route_id: route.into(),
        ceiling_micros: 5_000_000,
        gateway_operator: "local".into(),
        hostnames: Vec::new(),
        quote: None,
        policy: published(PROJECT, id, 1),
        bundle: app_bundle(),
    }
}

/// A customer token of an organization without an invitation, as stores from before issue 42
/// may hold: answered 403 `ingress_invitation_required`, saying how to be invited.
#[tokio::test]
async fn a_token_of_an_organization_not_invited_from_an_older_store_is_answered_403() {
    let w = world(FakeProbe::default());
    let db = rusqlite::Connection::open(w.engine.config().data_dir.join(relay_api::coordinator::store::DATABASE_FILE))
        .expect("the store's file");
    let plaintext = "rly_legacy";
    let hash = relay_wire::wire::sha256_hex(plaintext.as_bytes());
    db.execute_batch(&format!(
        "INSERT INTO orgs (id, name, created_at) VALUES ('org_legacy', 'outsider', 0);
         INSERT INTO tokens (hash, id, org_id, created_at, role, name)
         VALUES ('{hash}', 'tok_legacy', 'org_legacy', 0, 'customer', 'customer-lega');"
    ))
    .expect("a token from before");
    let router = relay_api::coordinator::api_router(w.engine.clone());
    for path in ["/api/ingress/deployments", "/api/ingress/deployments/shop/sessions"] {
        let (status, body) = call(&router, "GET", path, plaintext).await;
        assert_eq!((status, body["error"]["code"].as_str()), (403, Some("ingress_invitation_required")), "{body}");
    }
}
