//! `svc manifest migrate` (issue 21, point 1) as a user runs it: the real binary on the golden
//! V4 manifests, the V5 document on standard output and the notes on standard error.

use std::process::{Command, Output};

use svc_e2e::workspace;

fn svc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_svc")).args(args).current_dir(workspace()).output().expect("svc runs")
}

/// `svc manifest migrate` of the minimal golden V4 manifest, given the two values it lacks,
/// with `extra` arguments.
fn migrate_minimal(entrypoint: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "manifest",
        "migrate",
        "--file",
        "tests/golden/v4-minimal.json",
        "--entrypoint",
        entrypoint,
        "--per-job",
        "1000000",
    ];
    args.extend(extra);
    svc(&args)
}

#[test]
fn a_v4_manifest_migrates_to_a_v5_one_that_validates_with_a_note_per_field_without_a_v5_form() {
    let out = migrate_minimal("server.js", &[]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    insta::assert_snapshot!("v4_minimal_as_v5", stdout);
    insta::assert_snapshot!("v4_minimal_notes", stderr);
    // The output round-trips through validate, as YAML and as JSON.
    let dir = tempfile::tempdir().expect("a scratch directory");
    let yaml = dir.path().join("v5.yaml");
    std::fs::write(&yaml, out.stdout.as_slice()).expect("write");
    let checked = svc(&["manifest", "validate", "--file", &yaml.to_string_lossy(), "--format", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&checked.stdout).expect("JSON");
    assert_eq!((&report["valid"], &report["schemaVersion"]), (&true.into(), &5.into()), "{report:#}");
    let json = migrate_minimal("server.js", &["--format", "json"]);
    assert!(json.stderr.is_empty(), "with --format json the notes are in the answer: {:?}", json.stderr);
    let answer: serde_json::Value = serde_json::from_slice(&json.stdout).expect("one JSON object");
    assert_eq!(answer["migrated"], true);
    let v5 = answer["manifest"].clone();
    assert!(manifest_core::validate(v5.to_string().as_bytes()).is_valid(), "{v5:#}");
    // Every note the text shows is in the answer, with its pointer and kind.
    let notes = answer["notes"].as_array().expect("notes");
    assert_eq!(notes.len(), stderr.lines().filter(|l| !l.starts_with(' ') && l.contains(": ")).count() - 1);
    assert!(notes.iter().all(|n| n["pointer"].as_str().is_some_and(|p| p.starts_with('/'))), "{notes:?}");
    assert!(notes.iter().any(|n| n["pointer"] == "/deployment/lifecycle/renewal" && n["kind"] == "changed"));
    let from_yaml = manifest_core::parse::yaml(std::str::from_utf8(&out.stdout).expect("UTF-8")).0.expect("a tree");
    assert_eq!(serde_json::to_value(from_yaml).expect("JSON"), v5, "the same document either way");
}

#[test]
fn what_v5_cannot_express_blocks_the_migration_and_says_what_to_change() {
    let out = svc(&["manifest", "migrate", "--file", "tests/golden/v4-full.json"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "nothing is written while a field blocks it");
    let stderr = String::from_utf8_lossy(&out.stderr);
    insta::assert_snapshot!("v4_full_notes", stderr);
    // Without the values V4 does not state, the minimal manifest says which to pass.
    let bare = svc(&["manifest", "migrate", "--file", "tests/golden/v4-minimal.json"]);
    assert_eq!(bare.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&bare.stderr);
    assert!(stderr.contains("--entrypoint") && stderr.contains("--per-job"), "{stderr}");
    // A V5 manifest, an invalid V4 one, a missing file.
    let v5 = svc(&["manifest", "migrate", "--file", "tests/golden/v5-minimal.json"]);
    assert_eq!(v5.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&v5.stderr).contains("is a Manifest V5 already"));
    let dir = tempfile::tempdir().expect("a scratch directory");
    let invalid = dir.path().join("bad.json");
    std::fs::write(&invalid, br#"{"schema": "svc.application-manifest", "schemaVersion": 4}"#).expect("write");
    let bad = svc(&["manifest", "migrate", "--file", &invalid.to_string_lossy()]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("missing required field"), "the diagnostics are shown");
    let missing = svc(&["manifest", "migrate", "--file", "nowhere.json"]);
    assert_eq!(missing.status.code(), Some(2));
}

/// Found by trying it as an attacker would: an `--entrypoint` outside the artifact is refused
/// by the V5 validator, and the message named only the V4 fields as what to change.
#[test]
fn a_bad_entrypoint_given_on_the_command_line_is_refused_naming_the_flag() {
    let out = migrate_minimal("../../etc/passwd", &[]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    assert!(out.stdout.is_empty(), "nothing is written");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("svc: --entrypoint ../../etc/passwd: "), "{stderr}");
}

/// Found by the attacker pass of issue 45: a flag's value the V5 validator refuses exited 1
/// (as an invalid V4 manifest) with the line of a V5 document nobody sees, and a score of -1
/// was said to be "a string; write the number without quotes".
#[test]
fn a_flag_value_v5_refuses_is_a_usage_error_naming_the_flag_not_a_line_of_the_unseen_v5_document() {
    for (extra, says) in [
        (&["--pin-artifact", "sha256:abc"][..], "svc: --pin-artifact sha256:abc: \"sha256:abc\" is not `sha256:`"),
        (&["--rate", "1", "--rate-window", ""][..], "svc: --rate-window \"\": \"\" is not a duration"),
        (&["--minimum", "memory=lots"][..], "svc: --minimum memory=lots: \"lots\" is not a byte size"),
        (&["--minimum", "cpuMultiCoreScore=-1"][..], "svc: --minimum cpuMultiCoreScore=-1: -1 is out of range"),
        (&["--minimum", "bogus=1"][..], "svc: --minimum bogus=1: unknown field \"bogus\""),
    ] {
        let out = migrate_minimal("main.js", extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(out.stdout.is_empty() && stderr.contains(says), "{extra:?}: {stderr}");
        assert!(!stderr.contains("the V5 document:") && !stderr.contains("quotes"), "{extra:?}: {stderr}");
    }
}

/// Found by the attacker pass of issue 45: `--drop ""` (the whole document) left out every
/// blocking field unseen, `--drop ingress` (no `/`) was only "no blocking field", a minimum
/// given twice kept the last value silently, and a mistyped `--drop` listed as droppable a
/// field only `--per-job` unblocks.
#[test]
fn a_drop_of_the_whole_document_or_not_a_pointer_and_a_minimum_given_twice_are_refused() {
    let full = ["manifest", "migrate", "--file", "tests/golden/v4-full.json", "--per-job", "3000000"];
    let full =
        [&full[..], &["--existing-jobs", "stop_when_successor_ready", "--minimum", "cpuMultiCoreScore=1"]].concat();
    for (extra, says) in [
        (&["--drop", ""][..], "svc: --drop \"\": the empty pointer is the whole document"),
        (&["--drop", "ingress"][..], "svc: --drop ingress: not a JSON pointer"),
        (&["--minimum", "cpuMultiCoreScore=2"][..], "cpuMultiCoreScore is given twice (1 and 2)"),
    ] {
        let out = svc(&[&full[..], extra].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(out.stdout.is_empty() && stderr.contains(says), "{extra:?}: {stderr}");
    }
    let demo = ["manifest", "migrate", "--file", "examples/node-demo/manifest.v4.json", "--per-job", "1"];
    let typo = svc(&[&demo[..], &["--drop", "/ingress"]].concat());
    let stderr = String::from_utf8_lossy(&typo.stderr);
    assert_eq!(typo.status.code(), Some(2));
    assert!(
        stderr.contains("the fields --drop can leave out are: none") && !stderr.contains("/deployment"),
        "{stderr}"
    );
}

/// Issue 45, point 2: each blocking note names the flag that supplies the V5 decision; with
/// them, the full golden V4 manifest migrates without a hand edit, and `--format json` carries
/// every note, blocked or not.
#[test]
fn the_flags_named_by_the_blocking_notes_migrate_the_full_v4_manifest() {
    let blocked = svc(&["manifest", "migrate", "--file", "tests/golden/v4-full.json", "--format", "json"]);
    assert_eq!(blocked.status.code(), Some(1));
    let answer: serde_json::Value = serde_json::from_slice(&blocked.stdout).expect("one JSON object");
    assert_eq!((&answer["migrated"], &answer["error"]["code"]), (&false.into(), &"migration_blocked".into()));
    let blocking: Vec<&serde_json::Value> =
        answer["notes"].as_array().expect("notes").iter().filter(|n| n["kind"] == "blocking").collect();
    assert_eq!(blocking.len(), 10, "{blocking:#?}");
    assert!(blocking.iter().all(|n| n["fix"].as_str().is_some_and(|f| f.contains("--"))), "each names its flag");
    let flags = [
        "--per-job",
        "3000000",
        "--rate",
        "50000000",
        "--existing-jobs",
        "stop_when_successor_ready",
        "--minimum",
        "cpuMultiCoreScore=1200",
        "--drop",
        "/ingress/http",
        "--drop",
        "/deployment/placement/groups",
        "--drop",
        "/deployment/placement/topologyConstraints",
        "--drop",
        "/deployment/lifecycle/recovery",
    ];
    let mut args = vec!["manifest", "migrate", "--file", "tests/golden/v4-full.json", "--format", "json"];
    args.extend(flags);
    let out = svc(&args);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    let spend = &answer["manifest"]["deployment"]["spend"];
    assert_eq!((&spend["perJob"], &spend["rate"]["amount"]), (&"3000000".into(), &"50000000".into()));
    let dropped = answer["notes"].as_array().expect("notes").iter().find(|n| n["pointer"] == "/ingress/http");
    let dropped = dropped.expect("the ingress note");
    assert_eq!(dropped["kind"], "dropped");
    assert!(dropped["fix"].as_str().is_some_and(|f| f.contains("svc ingress deploy")), "names the V5 way: {dropped}");
    // A `--drop` that names no blocking field is a usage error naming the ones there are.
    args.extend(["--drop", "/nowhere"]);
    let typo = svc(&args);
    assert_eq!(typo.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&typo.stderr).contains("--drop /nowhere: no blocking field"));
    // The demo's V4 manifest needs only the credits per job.
    let demo = svc(&["manifest", "migrate", "--file", "examples/node-demo/manifest.v4.json", "--per-job", "250000"]);
    assert_eq!(demo.status.code(), Some(0), "{}", String::from_utf8_lossy(&demo.stderr));
}
