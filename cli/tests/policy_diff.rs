//! `svc policy diff A B` over files (issue 21, point 2), as a user runs it: the real binary,
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
    assert_eq!(report["summary"], serde_json::json!({"changes": 7, "runningJobs": 3}));
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
    assert!(stderr.contains("a.yaml is svc.application-manifest and v2.json is svc.application-policy"), "{stderr}");
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
