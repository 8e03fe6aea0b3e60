//! `svc policy diff A B` over files (issue 21, point 2; issue 45, point 1: what takes effect),
//! as a user runs it: the real binary,
//! two manifests or two saved policy versions, its text and JSON reports and its exit codes.
//! Versions read from the service (`APP@N`) are tested beside the service
//! (`tests/publication/cli.rs`).

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use svc_e2e::workspace;

fn svc(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(args)
        .current_dir(dir)
        .env("SVC_CONFIG", "/nonexistent")
        .env_remove("SVC_SERVER")
        .output()
        .expect("svc runs")
}

/// A scratch directory with `a.yaml` (tests/golden/v5-full.yaml) and `b.yaml` (the fixture
/// `policy_diff/v5-full-changed.yaml`).
fn sides() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a scratch directory");
    std::fs::copy(workspace().join("tests/golden/v5-full.yaml"), dir.path().join("a.yaml")).expect("copy");
    std::fs::copy(workspace().join("cli/tests/policy_diff/v5-full-changed.yaml"), dir.path().join("b.yaml"))
        .expect("copy");
    dir
}

#[test]
fn two_manifests_differ_field_by_field_grouped_by_whom_each_change_reaches() {
    let dir = sides();
    let out = svc(&["policy", "diff", "a.yaml", "b.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(1), "changes: exit 1\n{}", String::from_utf8_lossy(&out.stderr));
    insta::assert_snapshot!(String::from_utf8_lossy(&out.stdout));
    let same = svc(&["policy", "diff", "a.yaml", "a.yaml"], dir.path());
    assert_eq!(same.status.code(), Some(0), "no changes: exit 0");
    assert_eq!(String::from_utf8_lossy(&same.stdout), "a.yaml -> a.yaml: no changes\n");
}

#[test]
fn json_lists_each_change_with_its_pointer_values_and_reach() {
    let dir = sides();
    let out = svc(&["policy", "diff", "a.yaml", "b.yaml", "--format", "json"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!((&report["from"], &report["to"]), (&"a.yaml".into(), &"b.yaml".into()));
    assert_eq!(report["compared"], "effective");
    assert_eq!(report["summary"], serde_json::json!({"changes": 7, "runningJobs": 3, "noEffect": 0}));
    let spend = report["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .find(|c| c["pointer"] == "/deployment/spend/perJob")
        .expect("the spend change");
    assert_eq!(
        spend,
        &serde_json::json!({"pointer": "/deployment/spend/perJob", "kind": "changed", "from": "2500000",
            "to": "5000000", "effect": {"reaches": "running_jobs", "area": "spend"}})
    );
    let removed = report["changes"].as_array().expect("changes").iter().find(|c| c["kind"] == "removed");
    let removed = removed.expect("the removed secret");
    assert_eq!((&removed["key"], &removed["effect"]["reaches"]), (&"tls.cert".into(), &"next_jobs".into()));
    // The pointers resolve in the documents they name.
    let b: Value = serde_json::to_value(
        manifest_core::parse::yaml(&std::fs::read_to_string(dir.path().join("b.yaml")).expect("read"))
            .0
            .expect("a tree"),
    )
    .expect("JSON");
    for change in report["changes"].as_array().expect("changes").iter().filter(|c| c["kind"] != "removed") {
        let pointer = change["pointer"].as_str().expect("a pointer");
        assert_eq!(b.pointer(pointer), Some(&change["to"]), "{pointer}");
    }
}

#[test]
fn a_saved_version_is_read_as_its_policy_and_unlike_documents_or_bad_input_exit_2() {
    let dir = sides();
    let policy = |digest: &str| {
        serde_json::json!({"schema": "svc.application-policy", "schemaVersion": 5,
            "deployment": {"spend": {"perJob": "1"}}, "artifact": {"digest": digest}})
    };
    let view = serde_json::json!({"policyVersion": 1, "active": false, "policy": policy("sha256:aa")});
    std::fs::write(dir.path().join("v1.json"), view.to_string()).expect("write");
    std::fs::write(dir.path().join("v2.json"), policy("sha256:bb").to_string()).expect("write");
    let out = svc(&["policy", "diff", "v1.json", "v2.json"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "v1.json -> v2.json: 1 change, 0 reaching the running jobs\nfor the jobs launched next (as the update \
         rule rolls them out):\n            ~ /artifact/digest: \"sha256:aa\" -> \"sha256:bb\"\n"
    );
    // A manifest against a policy: refused, saying how to compare like with like.
    let unlike = svc(&["policy", "diff", "a.yaml", "v2.json"], dir.path());
    assert_eq!(unlike.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&unlike.stderr);
    assert!(stderr.contains("a.yaml is Manifest V5 and v2.json is Policy V5: compare like with like"), "{stderr}");
    // A duplicate key, a missing file, APP@N without a service: exit 2, each saying why.
    std::fs::write(dir.path().join("dup.json"), "{\"a\": 1,\n \"a\": 2}").expect("write");
    for (args, says) in [
        (["dup.json", "a.yaml"], "dup.json:2:2: duplicate key \"a\""),
        (["missing.json", "a.yaml"], "missing.json"),
        (["shop@3", "a.yaml"], "no service given"),
    ] {
        let out = svc(&["policy", "diff", args[0], args[1]], dir.path());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    let json = svc(&["policy", "diff", "missing.json", "a.yaml", "--format", "json"], dir.path());
    let envelope: Value = serde_json::from_slice(&json.stdout).expect("a JSON error envelope");
    assert_eq!(envelope["error"]["code"], "unreadable_policy");
}

/// The node demo's manifest (`a.yaml`) and a copy with `edit` applied (`b.yaml`), each
/// replacement checked to have happened.
fn demo_and(edits: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let demo = std::fs::read_to_string(workspace().join("examples/node-demo/manifest.yaml")).expect("the demo");
    let mut edited = demo.clone();
    for (from, to) in edits {
        assert!(edited.contains(from), "{from:?} is in the demo's manifest");
        edited = edited.replacen(from, to, 1);
    }
    std::fs::write(dir.path().join("a.yaml"), demo).expect("write");
    std::fs::write(dir.path().join("b.yaml"), edited).expect("write");
    dir
}

/// Issue 45, point 1: a default written out, a duration spelled otherwise and a metadata
/// edit take no effect: exit 0, the metadata listed apart; `--as-written` shows the text's
/// changes, as before.
#[test]
fn two_manifests_compare_as_what_takes_effect_and_as_written_on_request() {
    let dir = demo_and(&[
        ("duration: 1h\n", "duration: 60m\n    phasing: {mode: simultaneous}\n"),
        ("timing: next_renewal\n", "timing: next_renewal\n      existingJobs: {mode: stop_when_successor_ready}\n"),
        ("window: 30d", "window: 720h"),
        ("description: The bundled", "description: The"),
    ]);
    let out = svc(&["policy", "diff", "a.yaml", "b.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(0), "nothing that takes effect\n{}", String::from_utf8_lossy(&out.stderr));
    insta::assert_snapshot!("takes_effect", String::from_utf8_lossy(&out.stdout));
    let out = svc(&["policy", "diff", "a.yaml", "b.yaml", "--as-written"], dir.path());
    assert_eq!(out.status.code(), Some(1), "the text changed");
    insta::assert_snapshot!("as_written", String::from_utf8_lossy(&out.stdout));
    let json = svc(&["policy", "diff", "a.yaml", "b.yaml", "--as-written", "--format", "json"], dir.path());
    let report: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(report["compared"], "as_written");
    assert_eq!(report["summary"], serde_json::json!({"changes": 5, "runningJobs": 4, "noEffect": 1}));

    // A change that takes effect is listed with the others apart.
    let dir = demo_and(&[("duration: 1h\n", "duration: 90m\n"), ("labels: [demo, nodejs]", "labels: [demo]")]);
    let out = svc(&["policy", "diff", "a.yaml", "b.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "a.yaml -> b.yaml: 1 change, 1 reaching the running jobs, and 1 with no effect\nfor the running jobs:\n  \
         lifecycle ~ /deployment/schedule/duration: \"1h\" -> \"90m\"\nwith no effect (metadata: not in the effective \
         policy):\n            - /metadata/labels/1: \"nodejs\"\n"
    );
}

/// Issue 45, point 1: V4's `parallelism` is V5's `jobs`, and reaches the running jobs.
#[test]
fn a_v4_parallelism_change_reaches_the_running_jobs() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let v4 = std::fs::read_to_string(workspace().join("tests/golden/v4-minimal.json")).expect("the golden V4");
    std::fs::write(dir.path().join("a.json"), &v4).expect("write");
    let more = v4.replacen("\"deployment\": {", "\"deployment\": {\"parallelism\": 3, ", 1);
    std::fs::write(dir.path().join("b.json"), more).expect("write");
    let out = svc(&["policy", "diff", "a.json", "b.json"], dir.path());
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "a.json -> b.json: 1 change, 1 reaching the running jobs\nfor the running jobs:\n  lifecycle ~ \
         /deployment/parallelism: 1 -> 3\n",
        "the default (1) written out on the first side"
    );
}

/// Issue 45, point 1: a V4 manifest against a V5 one is refused (exit 2) with the way to
/// compare like with like, in either mode; a manifest that does not validate has no
/// effective policy, and is compared as written on request.
#[test]
fn a_v4_against_a_v5_manifest_or_an_invalid_one_exits_2_with_the_way_on() {
    let dir = demo_and(&[]);
    std::fs::copy(workspace().join("examples/node-demo/manifest.v4.json"), dir.path().join("v4.json")).expect("copy");
    for extra in [&[][..], &["--as-written"][..]] {
        let out = svc(&[&["policy", "diff", "v4.json", "a.yaml"][..], extra].concat(), dir.path());
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert_eq!(out.stdout, b"", "no changes listed");
        insta::assert_snapshot!("v4_against_v5", String::from_utf8_lossy(&out.stderr));
    }
    std::fs::write(dir.path().join("bad.yaml"), "schema: svc.application-manifest\nschemaVersion: 5\n").expect("write");
    let out = svc(&["policy", "diff", "a.yaml", "bad.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.yaml is not a valid manifest") && stderr.contains("--as-written"), "{stderr}");
    let out = svc(&["policy", "diff", "a.yaml", "bad.yaml", "--as-written"], dir.path());
    assert_eq!(out.status.code(), Some(1), "compared as written");
}
