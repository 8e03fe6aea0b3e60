//! Effective Policy V4: materialized from a valid V4 manifest and server facts, every default
//! written out, only the policy's own keys, and a digest that metadata never changes.

use manifest_core::{ArtifactVersion, Manifest, PolicyError, PolicyV4, ServerFacts, validate};
use svc_e2e::workspace;

fn manifest(name: &str) -> Box<manifest_core::v4::ManifestV4> {
    let bytes = std::fs::read(workspace().join("tests/golden").join(name)).expect("golden input");
    match validate(&bytes).manifest() {
        Ok(Manifest::V4(m)) => m,
        other => panic!("{name}: {other:?}"),
    }
}

fn facts(uid: &str, artifact: bool) -> ServerFacts {
    ServerFacts {
        application_uid: uid.to_owned(),
        artifact: artifact.then(|| ArtifactVersion {
            cid: "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi".to_owned(),
            digest: format!("sha256:{}", "ab".repeat(32)),
            image_digest: None,
        }),
    }
}

fn golden(stem: &str, policy: &PolicyV4) {
    let text = serde_json::to_string_pretty(policy).expect("serializes") + "\n";
    let path = workspace().join("tests/golden").join(format!("{stem}.policy.json"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).expect("write golden");
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1)", path.display()));
    assert_eq!(text, want, "{stem}: the policy changed; review and regenerate with UPDATE_GOLDEN=1");
}

#[test]
fn pinned_and_build_policies_match_their_golden_files() {
    golden(
        "v4-minimal",
        &PolicyV4::materialize(&manifest("v4-minimal.json"), &facts("app_min", false)).expect("policy"),
    );
    golden(
        "v4-full",
        &PolicyV4::materialize(&manifest("v4-full.json"), &facts("app_01HZX3J7Q2", true)).expect("policy"),
    );
}

#[test]
fn top_level_keys_are_exactly_the_policys() {
    let policy = PolicyV4::materialize(&manifest("v4-full.json"), &facts("app_01HZX3J7Q2", true)).expect("policy");
    let value = serde_json::to_value(&policy).expect("json");
    let mut keys: Vec<&str> = value.as_object().expect("object").keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut want = [
        "schema",
        "schemaVersion",
        "applicationId",
        "applicationUid",
        "artifact",
        "runtime",
        "deployment",
        "ingress",
        "observability",
        "configuration",
    ];
    want.sort_unstable();
    assert_eq!(keys, want);
    assert_eq!(value["schema"], "svc.application-policy");
    assert_eq!(value["schemaVersion"], 4);
    // The build release's artifact is resolved from the accepted version; no builder authority.
    assert_eq!(value["artifact"]["cid"], "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi");
    assert!(!serde_json::to_string(&value).expect("json").contains("builder"));
    // Deprecated log fields keep their authored values.
    assert_eq!(value["observability"]["logs"]["profileId"], "legacy-profile");
}

#[test]
fn every_default_is_written_out() {
    let policy = PolicyV4::materialize(&manifest("v4-minimal.json"), &facts("app_min", false)).expect("policy");
    let v = serde_json::to_value(&policy).expect("json");
    assert_eq!(v["deployment"]["parallelism"], 1);
    assert_eq!(v["deployment"]["recovery"], serde_json::Value::Null, "recovery lives under lifecycle");
    assert_eq!(v["deployment"]["lifecycle"]["recovery"]["launch"]["maxRetries"], 5);
    let market = &v["deployment"]["placement"]["processorSelection"];
    assert_eq!(market["mode"], "open_market");
    for flag in ["allowUnknownManager", "requireScheduleClear", "requireConsumerAccess"] {
        assert_eq!(market[flag], false, "{flag}");
    }
    assert_eq!(v["runtime"]["bootstrap"]["trustProfile"], "svc.attested-runtime.v1");
    assert_eq!(v["runtime"]["bootstrap"]["signedDiagnosticsRequired"], true);
    assert_eq!(v["observability"]["logs"]["enabled"], false);
    assert_eq!(v["observability"]["runtimeDiagnostics"]["signed"], true);
    assert_eq!(v["configuration"]["variables"], serde_json::json!([]));
}

#[test]
fn metadata_changes_the_authored_digest_never_the_policy_digest() {
    let path = workspace().join("tests/golden/v4-full.json");
    let text = std::fs::read_to_string(path).expect("golden");
    let other =
        text.replace("\"Every V4 field, written out.\"", "\"Other words.\"").replace("\"batch\"", "\"nightly\"");
    assert_ne!(text, other);
    let (a, b) = (validate(text.as_bytes()), validate(other.as_bytes()));
    assert_ne!(a.authored_digest(), b.authored_digest());
    let policy = |r: &manifest_core::Report<'_>| match r.manifest() {
        Ok(Manifest::V4(m)) => PolicyV4::materialize(&m, &facts("app_01HZX3J7Q2", true)).expect("policy"),
        other => panic!("{other:?}"),
    };
    assert_eq!(policy(&a).digest(), policy(&b).digest());
    assert!(policy(&a).digest().starts_with("sha256:"));
}

#[test]
fn missing_or_wrong_facts_are_refused() {
    let build = manifest("v4-full.json");
    assert_eq!(
        PolicyV4::materialize(&build, &facts("app_01HZX3J7Q2", false)),
        Err(PolicyError::MissingArtifactVersion)
    );
    assert_eq!(PolicyV4::materialize(&build, &facts("", true)), Err(PolicyError::MissingApplicationUid));
    assert!(matches!(
        PolicyV4::materialize(&build, &facts("app_other", true)),
        Err(PolicyError::ApplicationUidMismatch { .. })
    ));
    let mut bad = facts("app_01HZX3J7Q2", true);
    if let Some(a) = bad.artifact.as_mut() {
        a.cid = "https://example.test/x".to_owned();
    }
    assert!(matches!(
        PolicyV4::materialize(&build, &bad),
        Err(PolicyError::InvalidArtifactVersion { field: "cid", .. })
    ));
    let pinned = manifest("v4-minimal.json");
    assert!(matches!(
        PolicyV4::materialize(&pinned, &facts("app_min", true)),
        Err(PolicyError::PinnedArtifactMismatch { .. })
    ));
}

fn v4_with_release(release: serde_json::Value) -> Box<manifest_core::v4::ManifestV4> {
    let text = std::fs::read_to_string(workspace().join("tests/golden/v4-minimal.json")).expect("golden");
    let mut doc: serde_json::Value = serde_json::from_str(&text).expect("json");
    doc["release"] = release;
    let bytes = serde_json::to_vec(&doc).expect("json");
    match validate(&bytes).manifest() {
        Ok(Manifest::V4(m)) => m,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_pinned_runtime_image_binds_image_and_bootstrap_and_takes_no_artifact_facts() {
    let hex = |c: &str| format!("sha256:{}", c.repeat(64));
    let m = v4_with_release(serde_json::json!({"mode": "pinned", "artifact": {"kind": "runtime_image",
        "imageDigest": hex("a"), "bootstrapCid": "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi",
        "bootstrapDigest": hex("b")}}));
    let policy = PolicyV4::materialize(&m, &facts("app", false)).expect("policy");
    let v = serde_json::to_value(&policy).expect("json");
    assert_eq!(v["artifact"]["kind"], "runtime_image");
    assert_eq!(v["artifact"]["imageDigest"], hex("a"));
    assert_eq!(v["artifact"]["bootstrapDigest"], hex("b"));
    assert!(matches!(PolicyV4::materialize(&m, &facts("app", true)), Err(PolicyError::PinnedArtifactMismatch { .. })));
}

#[test]
fn a_runtime_image_build_gives_no_policy_and_says_what_to_do() {
    let m = v4_with_release(serde_json::json!({"mode": "build", "artifact": {"kind": "runtime_image"},
        "builder": {"kind": "codehost", "repository": "acme/app", "allowedRefs": ["refs/heads/main"],
        "workflowRef": "acme/app/.github/workflows/b.yml@refs/heads/main", "manifestPath": "svc.json"}}));
    let err = PolicyV4::materialize(&m, &facts("app", true)).expect_err("no recipe");
    assert_eq!(err, PolicyError::RuntimeImageBuild);
    assert!(err.to_string().contains("pin the image"));
}
