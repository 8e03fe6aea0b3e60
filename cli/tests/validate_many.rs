//! `svc manifest validate PATH...` over many files and directories (issue 21, point 3), as a
//! user runs it: the real binary on a tree of files, its per-file reports in path order, its
//! summary, its `--include` globs and its exit codes.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use svc_e2e::workspace;

fn svc(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_svc")).args(args).current_dir(dir).output().expect("svc runs")
}

fn golden(name: &str) -> Vec<u8> {
    std::fs::read(workspace().join("tests/golden").join(name)).expect("a golden manifest")
}

/// `manifests/`: two valid (V5 YAML, V4 JSON), one invalid, one hidden and one non-manifest
/// file that a walk skips.
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let root = dir.path().join("manifests");
    for (path, bytes) in [
        ("web/app.yaml", golden("v5-full.yaml")),
        ("batch/v4.json", golden("v4-minimal.json")),
        ("batch/broken.json", br#"{"schemaVersion": 5, "sheduel": 1}"#.to_vec()),
        (".git/config.json", b"not a manifest".to_vec()),
        ("README.txt", b"not a manifest".to_vec()),
    ] {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, bytes).expect("write");
    }
    dir
}

#[test]
fn a_directory_is_walked_each_file_reported_in_path_order_then_one_summary() {
    let dir = tree();
    let out = svc(&["manifest", "validate", "manifests"], dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "one invalid file: exit 1\n{text}");
    let verdicts: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("manifests/") && l.contains(": "))
        .map(|l| l.split(": invalid: ").next().unwrap_or(l))
        .collect();
    assert_eq!(
        verdicts,
        [
            "manifests/batch/broken.json",
            "manifests/batch/v4.json: valid Manifest V4",
            "manifests/web/app.yaml: valid Manifest V5"
        ],
        "{text}"
    );
    assert!(text.contains("--> manifests/batch/broken.json:1:"), "diagnostics point into the file:\n{text}");
    let summary = text.lines().last().expect("a summary");
    assert!(
        summary.starts_with("3 files checked in ") && summary.ends_with(": 2 valid, 1 invalid, 0 unreadable"),
        "{summary}"
    );
}

#[test]
fn json_lists_every_file_with_its_path_and_a_summary() {
    let dir = tree();
    let out = svc(&["manifest", "validate", "manifests", "--format", "json"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&out.stdout).expect("one JSON value");
    let files = json["files"].as_array().expect("files");
    let paths: Vec<&str> = files.iter().filter_map(|f| f["path"].as_str()).collect();
    assert_eq!(paths, ["manifests/batch/broken.json", "manifests/batch/v4.json", "manifests/web/app.yaml"]);
    let valid: Vec<bool> = files.iter().filter_map(|f| f["valid"].as_bool()).collect();
    assert_eq!(valid, [false, true, true]);
    let pointers: Vec<&str> =
        files[0]["diagnostics"].as_array().expect("diagnostics").iter().filter_map(|d| d["pointer"].as_str()).collect();
    assert!(pointers.contains(&"/sheduel"), "{json:#}");
    assert_eq!(json["summary"], serde_json::json!({"files": 3, "valid": 2, "invalid": 1, "unreadable": 0}));
}

#[test]
fn include_globs_choose_a_directorys_files_and_named_files_are_always_checked() {
    let dir = tree();
    let out = svc(&["manifest", "validate", "manifests", "--include", "**/*.yaml"], dir.path());
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).lines().last().is_some_and(|l| l.contains("1 valid, 0 invalid")));
    // A file named on the command line, whatever its name, beside a directory.
    let out = svc(&["manifest", "validate", "manifests/README.txt", "manifests/web"], dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("manifests/README.txt: invalid") && text.contains("manifests/web/app.yaml: valid"), "{text}");
}

#[test]
fn unreadable_files_no_files_and_bad_globs_exit_2_and_one_file_reads_as_before() {
    let dir = tree();
    let out = svc(&["manifest", "validate", "manifests/web", "manifests/missing.json"], dir.path());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "an unreadable file: exit 2\n{text}");
    assert!(text.contains("manifests/missing.json: unreadable: ") && text.contains("1 valid, 0 invalid, 1 unreadable"));

    std::fs::create_dir_all(dir.path().join("empty")).expect("mkdir");
    let out = svc(&["manifest", "validate", "empty", "--format", "json"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    let json: Value = serde_json::from_slice(&out.stdout).expect("one JSON value");
    assert_eq!(json["error"]["code"], "no_files", "{json}");

    let out = svc(&["manifest", "validate", "manifests", "--include", "[z-a"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--include \"[z-a\" is not a glob"));

    // One file, named either way: its report alone, as before.
    for args in [
        &["manifest", "validate", "manifests/web/app.yaml"][..],
        &["manifest", "validate", "--file", "manifests/web/app.yaml"],
    ] {
        let out = svc(args, dir.path());
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).lines().next(),
            Some("manifests/web/app.yaml: valid Manifest V5")
        );
    }
    // `--file` is one file: a directory there is still refused.
    assert_eq!(svc(&["manifest", "validate", "--file", "manifests"], dir.path()).status.code(), Some(2));
}
