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

#[test]
fn github_annotations_name_file_line_column_and_code() {
    let dir = tree();
    let out = svc(&["manifest", "validate", "manifests", "--format", "github"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let annotations: Vec<&str> = text.lines().filter(|l| l.starts_with("::")).collect();
    assert!(
        !annotations.is_empty()
            && annotations.iter().all(|l| l.starts_with("::error file=manifests/batch/broken.json,line=1,col=")),
        "every error of the invalid file, none of the valid ones:\n{text}"
    );
    assert!(
        annotations.iter().any(|l| l.starts_with(
            "::error file=manifests/batch/broken.json,line=1,col=22,title=unknown_field::unknown field \"sheduel\""
        )),
        "{text}"
    );
    assert!(text.lines().last().is_some_and(|l| l.ends_with(": 2 valid, 1 invalid, 0 unreadable")), "{text}");
    // One file takes the same form, and a directory given as `--file` is unreadable.
    let one = svc(&["manifest", "validate", "--file", "manifests/web/app.yaml", "--format", "github"], dir.path());
    assert_eq!(one.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&one.stdout).starts_with("1 file checked in "));
    let dir_as_file = svc(&["manifest", "validate", "--file", "manifests", "--format", "github"], dir.path());
    assert_eq!(dir_as_file.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&dir_as_file.stdout).starts_with("::error file=manifests,title=unreadable_file::"));
}

#[test]
fn junit_is_xml_with_a_test_case_per_file_and_a_failure_per_invalid_one() {
    let dir = tree();
    let out = svc(&["manifest", "validate", "manifests", "manifests/missing.json", "--format", "junit"], dir.path());
    assert_eq!(out.status.code(), Some(2), "an unreadable file: exit 2");
    let text = String::from_utf8_lossy(&out.stdout);
    let doc = roxmltree::Document::parse(&text).unwrap_or_else(|e| panic!("not XML ({e}):\n{text}"));
    let suites = doc.root_element();
    assert_eq!(suites.tag_name().name(), "testsuites");
    assert_eq!(
        (suites.attribute("tests"), suites.attribute("failures"), suites.attribute("errors")),
        (Some("4"), Some("1"), Some("1"))
    );
    let cases: Vec<(&str, Option<&str>)> = suites
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|n| (n.attribute("name").unwrap_or(""), n.first_element_child().map(|c| c.tag_name().name())))
        .collect();
    assert_eq!(
        cases,
        [
            ("manifests/batch/broken.json", Some("failure")),
            ("manifests/batch/v4.json", None),
            ("manifests/missing.json", Some("error")),
            ("manifests/web/app.yaml", None),
        ]
    );
    let failure = suites.descendants().find(|n| n.has_tag_name("failure")).expect("a failure");
    assert!(
        failure.text().is_some_and(|t| t.contains("manifests/batch/broken.json:1:22 /sheduel [unknown_field]")),
        "{text}"
    );
}

#[test]
fn sarif_has_a_result_per_diagnostic_located_in_its_file_under_its_rule() {
    let dir = tree();
    let out = svc(&["manifest", "validate", "manifests", "--format", "sarif"], dir.path());
    assert_eq!(out.status.code(), Some(1));
    let log: Value = serde_json::from_slice(&out.stdout).expect("SARIF is JSON");
    assert_eq!(log["version"], "2.1.0");
    assert_eq!(log["$schema"], "https://json.schemastore.org/sarif-2.1.0.json");
    let run = &log["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "svc manifest validate");
    let rules: Vec<&str> =
        run["tool"]["driver"]["rules"].as_array().expect("rules").iter().filter_map(|r| r["id"].as_str()).collect();
    let results = run["results"].as_array().expect("results");
    let json = svc(&["manifest", "validate", "manifests/batch/broken.json", "--format", "json"], dir.path());
    let report: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(
        results.len(),
        report["diagnostics"].as_array().expect("diagnostics").len(),
        "one result per diagnostic"
    );
    for result in results {
        let rule = result["ruleId"].as_str().expect("a rule");
        assert_eq!(rules.get(result["ruleIndex"].as_u64().expect("an index") as usize), Some(&rule), "{result}");
        assert!(result["message"]["text"].as_str().is_some_and(|t| !t.is_empty()));
        let location = &result["locations"][0]["physicalLocation"];
        assert_eq!(location["artifactLocation"]["uri"], "manifests/batch/broken.json");
        assert!(location["region"]["startLine"].as_u64().is_some_and(|l| l >= 1), "{result}");
        assert_eq!(result["level"], "error");
    }
}

#[test]
fn links_are_followed_a_file_is_checked_once_and_a_glob_star_stays_in_its_segment() {
    let dir = tree();
    let root = dir.path();
    // A directory of links only: the invalid one behind a link is found.
    std::fs::create_dir_all(root.join("linked")).expect("mkdir");
    std::os::unix::fs::symlink("../manifests/batch/broken.json", root.join("linked/broken.json")).expect("link");
    std::os::unix::fs::symlink("../manifests/web", root.join("linked/web")).expect("link");
    let out = svc(&["manifest", "validate", "linked"], root);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.lines().last().is_some_and(|l| l.ends_with(": 1 valid, 1 invalid, 0 unreadable")), "{text}");
    // Two spellings of the same file, and the same file through a link: once, first spelling.
    let out = svc(&["manifest", "validate", "manifests/web", "./manifests/web/app.yaml", "linked/web"], root);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.lines().last().is_some_and(|l| l.starts_with("1 file checked")), "{text}");
    // `*` does not cross `/`: `batch/*.json` is not `batch/deeper/x.json`.
    std::fs::create_dir_all(root.join("manifests/batch/deeper")).expect("mkdir");
    std::fs::write(root.join("manifests/batch/deeper/x.json"), golden("v4-minimal.json")).expect("write");
    let out = svc(&["manifest", "validate", "manifests", "--include", "batch/*.json", "--format", "json"], root);
    let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let paths: Vec<&str> = json["files"].as_array().expect("files").iter().filter_map(|f| f["path"].as_str()).collect();
    assert_eq!(paths, ["manifests/batch/broken.json", "manifests/batch/v4.json"]);
    // `--include` without a directory says so.
    let out = svc(&["manifest", "validate", "--file", "manifests/web/app.yaml", "--include", "*.yaml"], root);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no directory was given"));
}

#[test]
fn odd_file_names_survive_every_ci_format() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let odd = "we:ird, 50% name\nx.json";
    std::fs::write(dir.path().join(odd), br#"{"schemaVersion": 5, "sheduel": 1}"#).expect("write");
    let github = svc(&["manifest", "validate", ".", "--format", "github"], dir.path());
    let text = String::from_utf8_lossy(&github.stdout);
    assert!(
        text.lines().next().is_some_and(|l| l.starts_with("::error file=./we%3Aird%2C 50%25 name%0Ax.json,line=1,")),
        "{text}"
    );
    let junit = svc(&["manifest", "validate", ".", "--format", "junit"], dir.path());
    let xml = String::from_utf8_lossy(&junit.stdout);
    let doc = roxmltree::Document::parse(&xml).expect("XML");
    let case = doc.descendants().find(|n| n.has_tag_name("testcase")).expect("a case");
    assert_eq!(case.attribute("name"), Some(format!("./{odd}").as_str()), "the name read back whole");
    let sarif = svc(&["manifest", "validate", ".", "--format", "sarif"], dir.path());
    let log: Value = serde_json::from_slice(&sarif.stdout).expect("JSON");
    assert_eq!(log["runs"][0]["columnKind"], "unicodeCodePoints");
    assert_eq!(
        log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        "we%3Aird%2C%2050%25%20name%0Ax.json"
    );
    // Standard input: annotated and reported without a file location.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(["manifest", "validate", "--file", "-", "--format", "sarif"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("svc runs");
    use std::io::Write as _;
    child.stdin.take().expect("stdin").write_all(br#"{"schemaVersion": 5}"#).expect("write");
    let out = child.wait_with_output().expect("svc finishes");
    let log: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(log["runs"][0]["results"][0]["locations"], serde_json::json!([]), "{log:#}");
}

#[test]
fn no_files_still_gives_a_ci_reader_an_empty_report() {
    let dir = tempfile::tempdir().expect("a scratch directory");
    std::fs::create_dir_all(dir.path().join("empty")).expect("mkdir");
    let sarif = svc(&["manifest", "validate", "empty", "--format", "sarif"], dir.path());
    assert_eq!(sarif.status.code(), Some(2));
    let log: Value = serde_json::from_slice(&sarif.stdout).expect("an empty SARIF log");
    assert_eq!(log["runs"][0]["results"], serde_json::json!([]));
    let junit = svc(&["manifest", "validate", "empty", "--format", "junit"], dir.path());
    assert_eq!(junit.status.code(), Some(2));
    let xml = String::from_utf8_lossy(&junit.stdout);
    let doc = roxmltree::Document::parse(&xml).expect("an empty JUnit report");
    assert_eq!(doc.root_element().attribute("tests"), Some("0"));
    assert!(String::from_utf8_lossy(&junit.stderr).contains("no manifest files under empty"));
}

/// The SARIF 2.1.0 schema (rtm.5, the one code scanning reads), as the npm package
/// `@microsoft/jest-sarif` ships it: `npm ci --prefix tests/ajv` installs it (`.ci/run` does,
/// before the tests). Without it the test says it skipped, and fails under `SVC_REQUIRE_ALL`.
fn sarif_schema() -> Option<jsonschema::Validator> {
    let path = workspace().join("tests/ajv/node_modules/@microsoft/jest-sarif/lib/schemas/sarif-2.1.0-rtm.5.json");
    let Ok(text) = std::fs::read(&path) else {
        svc_test_require::skip(&format!("{} is missing (`npm ci --prefix tests/ajv` installs it)", path.display()));
        return None;
    };
    let mut schema: Value = serde_json::from_slice(&text).expect("the schema is JSON");
    // rtm.5's `language` patterns have a stray `]`, a literal for ECMA-262 regular
    // expressions (what JSON Schema patterns are) and an error for Rust's: escaped, the same
    // patterns.
    assert!(escape_stray_bracket(&mut schema) > 0, "the patterns this test knows");
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft4)
        .should_validate_formats(true)
        .build(&schema)
        .expect("the SARIF schema compiles");
    Some(validator)
}

/// Escapes the stray `]` of rtm.5's language patterns wherever they are; how many.
fn escape_stray_bracket(schema: &mut Value) -> usize {
    const STRAY: &str = "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$";
    match schema {
        Value::Object(map) => {
            let mut n = 0;
            for (key, value) in map.iter_mut() {
                if key == "pattern" && value == STRAY {
                    *value = Value::from(STRAY.replace("}]?", "}\\]?"));
                    n += 1;
                } else {
                    n += escape_stray_bracket(value);
                }
            }
            n
        }
        Value::Array(items) => items.iter_mut().map(escape_stray_bracket).sum(),
        _ => 0,
    }
}

/// Issue 21, point 4: every SARIF report `validate` writes is valid SARIF 2.1.0: results with
/// locations, an unreadable file, odd names, standard input, and no files at all.
#[test]
fn every_sarif_report_is_valid_against_the_sarif_2_1_0_schema() {
    let Some(schema) = sarif_schema() else { return };
    let dir = tree();
    let odd = dir.path().join("manifests/we:ird, 50% name\nx.json");
    std::fs::write(&odd, br#"{"schemaVersion": 5, "sheduel": 1}"#).expect("write");
    std::fs::create_dir_all(dir.path().join("empty")).expect("mkdir");
    let runs = [
        vec!["manifests", "manifests/missing.json"],
        vec!["manifests/web/app.yaml"],
        vec!["--file", "manifests/batch/broken.json"],
        vec!["empty"],
    ];
    for paths in runs {
        let mut args = vec!["manifest", "validate"];
        args.extend(&paths);
        args.extend(["--format", "sarif"]);
        let out = svc(&args, dir.path());
        let log: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{paths:?}: not JSON: {e}"));
        let errors: Vec<String> = schema.iter_errors(&log).map(|e| format!("{} at {}", e, e.instance_path())).collect();
        assert!(errors.is_empty(), "{paths:?}: not valid SARIF 2.1.0: {errors:#?}\n{log:#}");
        assert!(log["runs"][0]["results"].is_array(), "{paths:?}");
        // The check can fail: a level SARIF does not have is refused.
        if let Some(result) = log["runs"][0]["results"].get(0) {
            let mut broken = log.clone();
            broken["runs"][0]["results"][0]["level"] = "fatal".into();
            assert!(!schema.is_valid(&broken), "{paths:?}: the schema refuses a bad level: {result}");
        }
    }
}
