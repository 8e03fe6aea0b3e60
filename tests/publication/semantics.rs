//! Publication semantics: dry runs commit nothing, the fence, pauses, immutable versions,
//! layers 3, 4 and 7, `once` settlement and job slots, schema pair registration.

use serde_json::{Value, json};
use svc_e2e::service::{add_node_image, admin, fixtures};

use super::{World, curate_v4, diagnostics, v4, v5};

fn status_of(w: &World, app: &str) -> (String, u64) {
    let a = w.get(&format!("/api/applications/{app}"));
    (a["status"].as_str().unwrap_or("").to_owned(), a["activePointerVersion"].as_u64().unwrap_or(99))
}

fn versions(w: &World, app: &str) -> usize {
    w.get(&format!("/api/applications/{app}/policy-versions"))["policyVersions"].as_array().map_or(0, Vec::len)
}

#[test]
fn a_dry_run_resolves_everything_and_commits_nothing() {
    let w = World::new("dry-run");
    w.create("web");
    w.accept_source("web");
    let r = w.publish("web", &json!({"manifest": v5("web"), "dryRun": true}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let body = r.json();
    assert_eq!(body["dryRun"], true);
    assert_eq!((body["policyVersion"].as_u64(), body["activePointerVersion"].as_u64()), (Some(1), Some(1)));
    assert!(body["policyDigest"].as_str().is_some_and(|d| d.starts_with("sha256:")));
    // Nothing happened: no version, no pointer move, no status change, no wakeup, no activity.
    assert_eq!(status_of(&w, "web"), ("disabled".to_owned(), 0));
    assert_eq!(versions(&w, "web"), 0);
    assert_eq!(w.wakeups("web"), 0);
    assert_eq!(w.get("/api/applications/web/activity")["activity"].as_array().map(Vec::len), Some(1));

    let committed = w.publish("web", &json!({"manifest": v5("web")}));
    assert_eq!(committed.status, 201);
    let c = committed.json();
    assert!(c.get("dryRun").is_none(), "a committed response has no dryRun member");
    let keys: Vec<&str> = c.as_object().expect("object").keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "activePointerVersion",
            "applicationId",
            "authoredDigest",
            "diagnostics",
            "policyDigest",
            "policyVersion",
            "status"
        ]
    );
    assert_eq!(c["policyDigest"], body["policyDigest"], "the dry run previewed exactly what was committed");
    assert_eq!(status_of(&w, "web"), ("active".to_owned(), 1));
    assert_eq!(w.wakeups("web"), 1);
}

#[test]
fn the_fence_guards_dry_runs_and_commits_alike() {
    let w = World::new("fence");
    w.create("web");
    w.accept_source("web");
    assert_eq!(w.publish("web", &json!({"manifest": v5("web"), "expectedActivePointerVersion": 0})).status, 201);
    for dry in [true, false] {
        let r = w.publish("web", &json!({"manifest": v5("web"), "expectedActivePointerVersion": 0, "dryRun": dry}));
        assert_eq!(r.status, 409, "dry run {dry}");
        let body = r.json();
        assert_eq!(body["error"]["code"], "active_pointer_version_conflict");
        assert_eq!(body["error"]["diagnostics"][0]["layer"], 6);
    }
    assert_eq!(versions(&w, "web"), 1, "a stale fence commits nothing");
    let second = w.publish("web", &json!({"manifest": v5("web"), "expectedActivePointerVersion": 1}));
    assert_eq!(second.status, 201);
    // Every publication is a new immutable version, even with the same policy digest.
    let list = w.get("/api/applications/web/policy-versions");
    let list = list["policyVersions"].as_array().expect("list");
    assert_eq!(list.len(), 2);
    assert_eq!(list[0]["policyDigest"], list[1]["policyDigest"]);
    assert_eq!((list[0]["active"].as_bool(), list[1]["active"].as_bool()), (Some(false), Some(true)));
}

#[test]
fn fifty_concurrent_publishes_on_one_fence_give_one_winner() {
    let w = World::new("race");
    w.create("web");
    w.accept_source("web");
    let statuses: Vec<u16> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..50)
            .map(|_| {
                s.spawn(|| w.publish("web", &json!({"manifest": v5("web"), "expectedActivePointerVersion": 0})).status)
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), 49, "{statuses:?}");
    assert_eq!(versions(&w, "web"), 1);
}

#[test]
fn pauses_commit_with_the_version_and_omission_keeps_them() {
    let w = World::new("pause");
    w.create("web");
    w.accept_source("web");
    let r = w.publish(
        "web",
        &json!({"manifest": v5("web"), "postPublishStatus": "paused", "reason": "  waiting for DNS  "}),
    );
    assert_eq!(r.status, 201);
    assert_eq!(r.json()["status"], "paused");
    let app = w.get("/api/applications/web");
    assert_eq!((app["status"].as_str(), app["pauseReason"].as_str()), (Some("paused"), Some("waiting for DNS")));
    // Omitting the pause fields keeps an existing pause.
    assert_eq!(w.publish("web", &json!({"manifest": v5("web")})).json()["status"], "paused");
    let activity = w.get("/api/applications/web/activity");
    let entries = activity["activity"].as_array().expect("list");
    assert_eq!(entries[1]["reason"], "waiting for DNS");
    assert!(entries[1]["actor"].as_str().is_some_and(|a| a.contains("developer")));

    // Omitting them activates a disabled application.
    w.create("api");
    w.accept_source("api");
    assert_eq!(w.publish("api", &json!({"manifest": v5("api")})).json()["status"], "active");
}

#[test]
fn invalid_pause_pairs_are_400_and_commit_nothing() {
    let w = World::new("pause-errors");
    w.create("web");
    w.accept_source("web");
    let long = "x".repeat(501);
    let bodies = [
        json!({"postPublishStatus": "active"}),
        json!({"postPublishStatus": "active", "reason": "x"}),
        json!({"reason": "only a reason"}),
        json!({"postPublishStatus": "paused"}),
        json!({"postPublishStatus": "paused", "reason": " \t "}),
        json!({"postPublishStatus": "paused", "reason": long}),
    ];
    for mut body in bodies {
        body["manifest"] = v5("web");
        let r = w.publish("web", &body);
        assert_eq!((r.status, r.json()["error"]["code"].as_str()), (400, Some("invalid_publication_pause")), "{body}");
    }
    assert_eq!(versions(&w, "web"), 0);
    assert_eq!(status_of(&w, "web"), ("disabled".to_owned(), 0));
}

#[test]
fn refusals_name_their_layer_code_and_pointer() {
    let w = World::new("layers");
    w.create("web");
    // Layers 1-2: 422 with the validator's diagnostics.
    let mut bad = v5("web");
    bad["deployment"]["sheduel"] = json!({});
    let r = w.publish("web", &json!({"manifest": bad}));
    assert_eq!(r.status, 422);
    assert_eq!(diagnostics(&r.json()), [("unknown_field".to_owned(), "/deployment/sheduel".to_owned())]);
    // Layer 3 (identity) and layer 4 (no build evidence yet), reported together.
    let r = w.publish("web", &json!({"manifest": v5("other")}));
    assert_eq!(r.status, 422);
    let body = r.json();
    assert_eq!(
        diagnostics(&body),
        [
            ("application_id_mismatch".to_owned(), "/applicationId".to_owned()),
            ("source_evidence_missing".to_owned(), "/release/mode".to_owned())
        ]
    );
    assert_eq!(
        (body["error"]["diagnostics"][0]["layer"].as_u64(), body["error"]["diagnostics"][1]["layer"].as_u64()),
        (Some(3), Some(4))
    );
    // A YAML string manifest works the same way.
    let yaml = "schema: svc.application-manifest\nschemaVersion: 5\napplicationId: web\nrelease: {mode: source}\n";
    assert_eq!(w.publish("web", &json!({"manifest": yaml})).status, 422);

    // V4: the UID must match; a pinned artifact must be curated.
    w.create("v4app");
    let mut m = v4("v4app");
    m["applicationUid"] = json!("app_wrong");
    let r = w.publish("v4app", &json!({"manifest": m}));
    assert_eq!(
        diagnostics(&r.json()),
        [
            ("application_uid_mismatch".to_owned(), "/applicationUid".to_owned()),
            ("artifact_not_curated".to_owned(), "/release/artifact".to_owned())
        ]
    );
    curate_v4(&w.dir);
    let r = w.publish("v4app", &json!({"manifest": v4("v4app")}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn a_build_release_resolves_to_the_accepted_version_built_exactly_as_named() {
    let w = World::new("build");
    w.create("web");
    let mut m = v4("web");
    m["release"] = json!({"mode": "build", "artifact": {"kind": "ipfs_bundle", "encryption": {"mode": "none"}},
        "builder": {"kind": "codehost", "repository": "acme/web", "allowedRefs": ["refs/heads/main"],
            "workflowRef": "acme/web/.github/workflows/other.yml@refs/heads/main", "manifestPath": "svc.yaml"}});
    let r = w.publish("web", &json!({"manifest": m, "dryRun": true}));
    assert_eq!(diagnostics(&r.json()), [("artifact_not_accepted".to_owned(), "/release".to_owned())]);
    w.accept_source("web");
    let r = w.publish("web", &json!({"manifest": m, "dryRun": true}));
    assert_eq!(
        diagnostics(&r.json()),
        [("artifact_evidence_mismatch".to_owned(), "/release/builder/workflowRef".to_owned())]
    );
    m["release"]["builder"]["workflowRef"] = json!("acme/web/.github/workflows/build.yml@refs/heads/main");
    let r = w.publish("web", &json!({"manifest": m}));
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    let v = w.get("/api/applications/web/policy-versions/1");
    assert_eq!(v["policy"]["artifact"]["cid"], fixtures::CID);
    assert_eq!(v["policy"]["artifact"]["digest"], fixtures::digest('a'));
    assert!(v["policy"].get("metadata").is_none());
    // The stored policy's digest is the digest of its canonical JSON.
    assert_eq!(v["policyDigest"], manifest_core::canonical_digest(&v["policy"]).expect("digest"));
}

#[test]
fn metadata_changes_the_authored_digest_and_never_the_policy_digest() {
    let w = World::new("metadata");
    w.create("web");
    w.accept_source("web");
    let mut a = v5("web");
    a["metadata"] = json!({"description": "first"});
    let mut b = v5("web");
    b["metadata"] = json!({"description": "second"});
    let (ra, rb) = (w.publish("web", &json!({"manifest": a})).json(), w.publish("web", &json!({"manifest": b})).json());
    assert_ne!(ra["authoredDigest"], rb["authoredDigest"]);
    assert_eq!(ra["policyDigest"], rb["policyDigest"]);
}

#[test]
fn native_images_resolve_to_the_highest_version_of_the_floor_major() {
    let w = World::new("images");
    w.create("tool");
    w.accept_source("tool");
    let mut m = v5("tool");
    m["runtime"] = json!({"kind": "native_image", "image": {"name": "node", "version": "20.1"}, "entrypoint": {"executable": "/bin/app"}});
    let r = w.publish("tool", &json!({"manifest": m, "dryRun": true}));
    assert_eq!(diagnostics(&r.json()), [("image_not_found".to_owned(), "/runtime/image/name".to_owned())]);
    for (version, c) in [("20.0.9", 'd'), ("20.3.1", 'e'), ("21.0.0", 'f')] {
        add_node_image(w.dir.str(), version, &fixtures::digest(c));
    }
    assert_eq!(w.publish("tool", &json!({"manifest": m})).status, 201);
    let v = w.get("/api/applications/tool/policy-versions/1");
    assert_eq!(v["policy"]["runtime"]["image"]["version"], "20.3.1");
    assert_eq!(v["policy"]["runtime"]["image"]["digest"], fixtures::digest('e'));
    m["runtime"]["image"]["version"] = json!("22");
    let r = w.publish("tool", &json!({"manifest": m, "dryRun": true}));
    assert_eq!(diagnostics(&r.json()), [("image_version_unresolved".to_owned(), "/runtime/image/version".to_owned())]);
}

#[test]
fn deployment_facts_are_warnings_that_do_not_block() {
    let w = World::new("facts");
    w.create("web");
    w.accept_source("web");
    let mut m = v5("web");
    m["configuration"] =
        json!({"secrets": [{"secretId": "db-password", "destination": {"kind": "environment", "name": "DB"}}]});
    let r = w.publish("web", &json!({"manifest": m, "dryRun": true}));
    assert_eq!(r.status, 200);
    let codes: Vec<(String, u64)> = r.json()["diagnostics"]
        .as_array()
        .expect("list")
        .iter()
        .map(|d| (d["code"].as_str().unwrap_or("").to_owned(), d["layer"].as_u64().unwrap_or(0)))
        .collect();
    assert_eq!(codes, [("secret_not_provisioned".to_owned(), 7), ("spend_authority_missing".to_owned(), 7)]);
    admin(&[
        "secret",
        "provision",
        "--data-dir",
        w.dir.str(),
        "--org",
        "acme",
        "--app",
        "web",
        "--secret-id",
        "db-password",
    ]);
    admin(&["spend-authority", "set", "--data-dir", w.dir.str(), "--org", "acme", "--micros", "500000"]);
    let r = w.publish("web", &json!({"manifest": m, "dryRun": true})).json();
    assert_eq!(r["diagnostics"][0]["code"], "spend_exceeds_authority");
    assert_eq!(r["diagnostics"][0]["pointer"], "/deployment/spend/perJob");
    admin(&["spend-authority", "set", "--data-dir", w.dir.str(), "--org", "acme", "--micros", "1000000"]);
    assert_eq!(w.publish("web", &json!({"manifest": m, "dryRun": true})).json()["diagnostics"], json!([]));
}

/// A bundle whose `server.js` runs until stopped, or exits 0 at once when `EXIT_AT_ONCE` is
/// set; stored in the service's artifact store. Its digest.
fn stored_bundle(w: &World) -> String {
    let bundle = w.dir.path().join("bundle");
    std::fs::create_dir_all(&bundle).expect("bundle dir");
    std::fs::write(
        bundle.join("server.js"),
        "if (process.env.EXIT_AT_ONCE) process.exit(0);\nsetInterval(() => {}, 1000);\n",
    )
    .expect("server.js");
    let bundle = bundle.to_str().expect("utf-8").to_owned();
    admin(&["artifact", "store", "--data-dir", w.dir.str(), "--bundle", &bundle])
}

fn once_app(w: &World, id: &str, digest: &str, exit_at_once: bool) -> Value {
    w.create(id);
    svc_e2e::service::accept_build_of(w.dir.str(), "acme", id, digest);
    let mut manifest = v5(id);
    if !exit_at_once {
        return w.publish(id, &json!({"manifest": manifest})).json();
    }
    manifest["configuration"] = json!({"variables": [{"source": "literal", "name": "EXIT_AT_ONCE", "value": "1"}]});
    w.publish(id, &json!({"manifest": manifest, "postPublishStatus": "paused", "reason": "held for the test"})).json()
}

#[test]
fn a_once_application_settles_after_its_run_is_not_rearmed_and_a_new_one_takes_a_job_slot() {
    let w = World::new("once");
    let digest = stored_bundle(&w);
    admin(&["spend-authority", "set", "--data-dir", w.dir.str(), "--org", "acme", "--micros", "1000000"]);
    // The basic tier has 4 job slots; each of these holds one, a paused application too.
    // `a` exits at once, so it is published paused: it must not settle (and free its slot)
    // before `e` is refused.
    assert_eq!(once_app(&w, "a", &digest, true)["status"], "paused");
    for id in ["b", "c", "d"] {
        assert_eq!(once_app(&w, id, &digest, false)["status"], "active");
    }
    w.create("e");
    svc_e2e::service::accept_build_of(w.dir.str(), "acme", "e", &digest);
    let r = w.publish("e", &json!({"manifest": v5("e")}));
    assert_eq!(diagnostics(&r.json()), [("job_slots_exceeded".to_owned(), "/deployment/jobs".to_owned())]);
    let resumed =
        w.server.request("POST", "/api/applications/a/resume", Some(&w.token), Some(&json!({"reason": "run it now"})));
    assert_eq!(resumed.status, 200, "{}", String::from_utf8_lossy(&resumed.body));

    // The scheduler runs `a` once on the local pool; its job exits 0 and the application
    // settles (no stand-in: the run itself settles it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while w.get("/api/applications/a")["settled"] != true {
        assert!(std::time::Instant::now() < deadline, "{}", w.get("/api/applications/a/executions"));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let executions = w.get("/api/applications/a/executions");
    assert_eq!(executions["convergence"]["state"], "settled");
    assert_eq!(executions["recent"][0]["state"], "completed");
    assert_eq!(executions["recent"].as_array().map(Vec::len), Some(1));
    let activity = w.get("/api/applications/a/activity");
    let actions: Vec<_> =
        activity["activity"].as_array().expect("activity").iter().map(|a| a["action"].clone()).collect();
    assert!(actions.contains(&json!("application_settled")), "{actions:?}");
    // Publishing to it again does not re-arm it ...
    let again = w.publish("a", &json!({"manifest": v5("a"), "dryRun": true}));
    assert_eq!(diagnostics(&again.json()), [("once_application_settled".to_owned(), "/execution".to_owned())]);
    // ... running the document again takes a new application, which now has a free slot.
    assert_eq!(w.publish("e", &json!({"manifest": v5("e")})).status, 201);
    // Re-arming is release-gated.
    admin(&["capability", "grant", "--data-dir", w.dir.str(), "--org", "acme", "once_rearm"]);
    // b, c, d and e hold the basic tier's 4 slots; re-arming `a` needs a fifth.
    admin(&["entitlement", "set", "--data-dir", w.dir.str(), "--org", "acme", "developer"]);
    let rearm = w.publish("a", &json!({"manifest": v5("a")}));
    assert_eq!(rearm.status, 201, "{}", String::from_utf8_lossy(&rearm.body));
    assert_eq!(w.get("/api/applications/a")["settled"], false);
}

#[test]
fn the_schema_pair_registration_holds_for_dry_runs_too() {
    let w = World::with_args("pairs", &["--schema-pairs", "v4"]);
    w.create("web");
    w.accept_source("web");
    for dry in [true, false] {
        let r = w.publish("web", &json!({"manifest": v5("web"), "dryRun": dry}));
        assert_eq!(r.status, 422);
        assert_eq!(diagnostics(&r.json()), [("schema_pair_not_registered".to_owned(), "/schemaVersion".to_owned())]);
    }
    assert_eq!(w.get("/api/capabilities")["schemaPairs"], "v4");
}

#[test]
fn v5_pinned_digests_resolve_their_evidence_and_access_snapshots_the_keys() {
    let w = World::new("v5-pinned");
    w.create("tool");
    let mut m = v5("tool");
    m["release"] = json!({"mode": "pinned", "artifact": {"digest": fixtures::digest('c')}});
    m["runtime"] = json!({"kind": "native_image", "image": {"name": "node", "version": "20"}, "entrypoint": {"executable": "/bin/app"}});
    m["access"] = json!({"ssh": {"provider": {"kind": "managed"}}});
    add_node_image(w.dir.str(), "20.0.0", &fixtures::digest('d'));
    admin(&["capability", "grant", "--data-dir", w.dir.str(), "--org", "acme", "runtime_ssh"]);
    admin(&["entitlement", "set", "--data-dir", w.dir.str(), "--org", "acme", "developer"]);
    let r = w.publish("tool", &json!({"manifest": m, "dryRun": true}));
    assert_eq!(diagnostics(&r.json()), [("artifact_not_found".to_owned(), "/release/artifact/digest".to_owned())]);
    admin(&[
        "artifact",
        "curate",
        "--data-dir",
        w.dir.str(),
        "--cid",
        fixtures::CID,
        "--digest",
        &fixtures::digest('c'),
        "--encryption",
        "aes256_gcm",
    ]);
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOperator ops@acme";
    admin(&["ssh-key", "add", "--data-dir", w.dir.str(), "--org", "acme", key]);
    assert_eq!(w.publish("tool", &json!({"manifest": m})).status, 201);
    let policy = &w.get("/api/applications/tool/policy-versions/1")["policy"];
    assert_eq!(
        policy["artifact"],
        json!({"kind": "ipfs_bundle", "cid": fixtures::CID, "digest": fixtures::digest('c'), "encryption": {"mode": "aes256_gcm"}})
    );
    assert_eq!(policy["access"], json!({"provider": "managed", "authorizedKeys": [key]}));
    // A key added later is not in the published version: the snapshot is immutable.
    admin(&["ssh-key", "add", "--data-dir", w.dir.str(), "--org", "acme", "ssh-ed25519 AAAAlater later@acme"]);
    assert_eq!(w.get("/api/applications/tool/policy-versions/1")["policy"]["access"]["authorizedKeys"], json!([key]));
}
