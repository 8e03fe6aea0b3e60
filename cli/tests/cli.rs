//! `svc manifest validate` as a user runs it: the real binary, its exit codes, its JSON
//! contract (INTERPRETATION.md section 4), standard input, and the whole corpus.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use svc_e2e::{cases, expected_from, workspace};

fn svc(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("svc runs");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(bytes) = stdin {
        // The binary may stop reading at its limit; a broken pipe then is expected.
        let _ = input.write_all(bytes);
    }
    drop(input);
    child.wait_with_output().expect("svc finishes")
}

fn validate_json(path: &str) -> (i32, Value) {
    let out = svc(&["manifest", "validate", "--file", path, "--format", "json"], None);
    let json =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{path}: stdout is not one JSON object ({e})"));
    (out.status.code().unwrap_or(-1), json)
}

fn golden(name: &str) -> String {
    workspace().join("tests/golden").join(name).display().to_string()
}

#[test]
fn valid_exits_0_with_the_exact_json_shape() {
    let (code, json) = validate_json(&golden("v5-minimal.yaml"));
    assert_eq!(code, 0);
    let mut keys: Vec<&str> = json.as_object().expect("object").keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["authoredDigest", "diagnostics", "schemaVersion", "valid"]);
    assert_eq!(json["valid"], true);
    assert_eq!(json["schemaVersion"], 5);
    assert!(json["authoredDigest"].as_str().is_some_and(|d| d.starts_with("sha256:") && d.len() == 71));
    assert_eq!(json["diagnostics"], Value::Array(vec![]));
}

#[test]
fn warnings_keep_exit_0() {
    let (code, json) = validate_json(&golden("v4-full.json"));
    assert_eq!(code, 0);
    assert_eq!(json["valid"], true);
    let diagnostics = json["diagnostics"].as_array().expect("array");
    let codes: Vec<&str> = diagnostics.iter().filter_map(|d| d["code"].as_str()).collect();
    assert_eq!(codes, ["deprecated_manifest_field"; 3]);
    for d in diagnostics {
        assert_eq!(d["severity"], "warning");
        for key in ["severity", "code", "pointer", "message", "layer"] {
            assert!(d.get(key).is_some(), "diagnostic lacks {key}: {d}");
        }
    }
}

#[test]
fn invalid_exits_1_with_one_json_answer() {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let dir = scratch.path();
    for (name, body, schema_version) in [
        ("empty.json", "", Value::Null),
        ("truncated.json", r#"{"schema": "svc.application-manifest", "schemaVersion": 5,"#, Value::Null),
        ("array.json", "[1, 2]", Value::Null),
        ("string.yaml", "just a string", Value::Null),
        ("v6.json", r#"{"schemaVersion": 6}"#, Value::Null),
        ("v4.yaml", "schemaVersion: 4\n", Value::from(4)),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, body).expect("write");
        let (code, json) = validate_json(&path.display().to_string());
        assert_eq!(code, 1, "{name}");
        assert_eq!(json["valid"], false, "{name}");
        assert_eq!(json["schemaVersion"], schema_version, "{name}");
        assert!(!json["diagnostics"].as_array().expect("array").is_empty(), "{name}");
    }
}

#[test]
fn unreadable_file_and_usage_errors_exit_2() {
    let missing = svc(&["manifest", "validate", "--file", "/nonexistent/manifest.json"], None);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/manifest.json"));
    assert!(missing.stdout.is_empty());

    let directory = svc(&["manifest", "validate", "--file", "/"], None);
    assert_eq!(directory.status.code(), Some(2));

    let usage: [&[&str]; 3] = [
        &["manifest", "validate"],
        &["manifest", "validate", "--file", "x", "--format", "xml"],
        &["manifest", "frobnicate"],
    ];
    for args in usage {
        assert_eq!(svc(args, None).status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn dash_reads_standard_input() {
    let bytes = std::fs::read(golden("v5-minimal.yaml")).expect("golden");
    let out = svc(&["manifest", "validate", "--file", "-", "--format", "json"], Some(&bytes));
    assert_eq!(out.status.code(), Some(0));
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["valid"], true);

    let out = svc(&["manifest", "validate", "--file", "-"], Some(b"{\"schemaVersion\": 5, \"sheduel\": 1}"));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("<stdin>:1:"));
}

#[test]
fn input_over_one_mib_from_stdin_is_input_too_large() {
    let mut bytes = std::fs::read(golden("v5-minimal.yaml")).expect("golden");
    bytes.resize(3 * 1024 * 1024, b'\n');
    let out = svc(&["manifest", "validate", "--file", "-", "--format", "json"], Some(&bytes));
    assert_eq!(out.status.code(), Some(1));
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(json["diagnostics"][0]["code"], "input_too_large");
}

#[test]
fn a_manifest_of_a_hundred_eighty_thousand_repeated_keys_lists_a_thousand_problems_in_text_and_json() {
    // 900 KB of `a: 1` lines: 184,319 duplicate keys and a missing `schemaVersion`.
    let lines = 900 * 1024 / 5;
    let doc = "a: 1\n".repeat(lines);
    let out = svc(&["manifest", "validate", "--file", "-", "--format", "json"], Some(doc.as_bytes()));
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.len() < 1_000_000, "{} bytes of JSON", out.stdout.len());
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    let diagnostics = json["diagnostics"].as_array().expect("array");
    assert_eq!(diagnostics.len(), 1001);
    assert_eq!(diagnostics[1000]["code"], "diagnostics_truncated");
    assert_eq!(diagnostics[1000]["pointer"], "");
    let omitted = lines - 1000; // 184,319 duplicates and one missing field, less the 1,000 listed
    assert!(diagnostics[1000]["message"].as_str().is_some_and(|m| m.starts_with(&format!("{omitted} more problems"))));

    let out = svc(&["manifest", "validate", "--file", "-"], Some(doc.as_bytes()));
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("error[duplicate_key]").count(), 999, "1,000 listed with the missing field");
    assert!(text.contains(&format!("error[diagnostics_truncated]: {omitted} more problems not shown")), "{text:.300}");
    assert!(
        text.contains(&format!("<stdin>: invalid: 1000 errors, 0 warnings shown; {omitted} more problems not shown\n")),
        "{}",
        &text[text.len().saturating_sub(300)..]
    );
}

#[test]
fn numeric_flags_outside_their_range_are_refused_naming_the_flag() {
    for (args, flag) in [
        (&["ingress", "fund", "--periods", "0"][..], "--periods"),
        (&["ingress", "fund", "--periods", "10001"], "--periods"),
        (&["ingress", "logs", "--after=-1"], "--after"),
        (&["ingress", "deploy", "--timeout", "18446744073709551615"], "--timeout"),
        (&["policy", "publish", "--expect-version", "18446744073709551616"], "--expect-version"),
        (&["policy", "publish", "--expect-version=-1"], "--expect-version"),
        (&["app", "versions", "web", "--version", "1.5"], "--version"),
        (&["admin", "spend-authority", "set", "--micros", "9223372036854775808"], "--micros"),
        (&["relay", "serve", "--reward-share-bps", "10001"], "--reward-share-bps"),
        (&["relay", "serve", "--downtime-tolerance-bps", "20000"], "--downtime-tolerance-bps"),
        (&["relay", "serve", "--period-secs", "0"], "--period-secs"),
        (&["relay", "serve", "--revalidate-secs", "0"], "--revalidate-secs"),
        (&["relay", "serve", "--price-micros", "18446744073709551615"], "--price-micros"),
        (&["relay", "serve", "--settlement-delay-secs", "18446744073709551615"], "--settlement-delay-secs"),
        (&["relay", "serve", "--catalog-validity-secs", "0"], "--catalog-validity-secs"),
        (&["relay", "admin", "admission-token", "--ttl-secs", "18446744073709551615"], "--ttl-secs"),
    ] {
        let out = svc(args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("invalid value") && stderr.contains(flag), "{args:?}: {stderr}");
    }
}

#[test]
fn text_output_points_at_the_line_with_a_caret() {
    let doc = "schemaVersion: 5\nschema: svc.application-manifest\ndeployment:\n  sheduel: {}\n";
    let out = svc(&["manifest", "validate", "--file", "-"], Some(doc.as_bytes()));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("error[unknown_field]: unknown field \"sheduel\"; did you mean \"schedule\"?"), "{text}");
    assert!(text.contains("<stdin>:4:3 at /deployment/sheduel"), "{text}");
    assert!(text.contains("4 |   sheduel: {}\n  |   ^^^^^^^\n"), "{text}");
    assert!(text.contains("layer 1: parse and strict schema"), "{text}");
    assert!(text.contains("<stdin>: invalid:"), "{text}");
}

/// A new user turns `examples/hello-job` into a continuous job: the refusal gives a
/// `spend.rate` to add, and the manifest with it added is valid.
#[test]
fn a_continuous_job_without_a_rate_is_told_one_to_add_that_validates() {
    let once = std::fs::read_to_string(workspace().join("examples/hello-job/manifest.yaml")).expect("the example");
    let continuous = once.replace("mode: once", "mode: continuous");
    let out = svc(&["manifest", "validate", "--file", "-"], Some(continuous.as_bytes()));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let example = "`rate: {amount: \"1000000\", window: 30d}` (USD 1.00 per 30 days)";
    assert!(text.contains(&format!("under `deployment.spend`, add for example {example}")), "{text}");
    let fixed = continuous
        .replace("    perJob: \"100000\"\n", "    perJob: \"100000\"\n    rate: {amount: \"1000000\", window: 30d}\n");
    let out = svc(&["manifest", "validate", "--file", "-"], Some(fixed.as_bytes()));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn every_corpus_case_through_the_binary_matches_the_library() {
    let mut failures = Vec::new();
    for case in cases() {
        let (code, json) = validate_json(&case.path.display().to_string());
        let mut got: Vec<_> = json["diagnostics"].as_array().expect("array").iter().map(expected_from).collect();
        got.sort();
        let want_code = if case.valid() { 0 } else { 1 };
        if code != want_code || json["valid"] != case.valid() || got != case.expected() {
            failures.push(format!("{}: exit {code}, {json}", case.name()));
        }
        let report = manifest_core::validate(&case.bytes);
        let library: Value = serde_json::from_str(&manifest_core::render_json(&report)).expect("json");
        if library != json {
            failures.push(format!("{}: binary and library disagree", case.name()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn schema_prints_the_exact_bytes_the_service_serves() {
    for (flag, kind) in [
        ("4", manifest_core::SchemaKind::ManifestV4),
        ("5", manifest_core::SchemaKind::ManifestV5),
        ("policy", manifest_core::SchemaKind::PolicyV4),
    ] {
        let out = svc(&["manifest", "schema", "--version", flag], None);
        assert_eq!(out.status.code(), Some(0));
        assert_eq!(out.stdout, kind.bytes().as_bytes(), "--version {flag}");
        let schema: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(schema["$id"], kind.id());
    }
    assert_eq!(svc(&["manifest", "schema", "--version", "6"], None).status.code(), Some(2));
}

#[test]
fn policy_prints_only_the_policy_and_names_a_missing_flag() {
    let out = svc(&["manifest", "policy", "--file", &golden("v4-minimal.json"), "--application-uid", "app_min"], None);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let policy: Value = serde_json::from_slice(&out.stdout).expect("stdout is exactly one JSON object");
    let golden_policy: Value =
        serde_json::from_str(&std::fs::read_to_string(golden("v4-minimal.policy.json")).expect("golden"))
            .expect("json");
    assert_eq!(policy, golden_policy);

    let out = svc(&["manifest", "policy", "--file", &golden("v4-minimal.json")], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--application-uid"));

    let out =
        svc(&["manifest", "policy", "--file", &golden("v4-full.json"), "--application-uid", "app_01HZX3J7Q2"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--artifact-cid"));

    let cid = "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi";
    let out = svc(&["manifest", "policy", "--file", &golden("v4-full.json"), "--artifact-cid", cid], None);
    assert_eq!(out.status.code(), Some(2), "--artifact-cid needs --artifact-digest");

    let out = svc(&["manifest", "policy", "--file", &golden("v5-minimal.yaml"), "--application-uid", "app"], None);
    assert_eq!(out.status.code(), Some(2), "policies are materialized from V4");
}

#[test]
fn digest_prints_authored_and_policy_digests() {
    let out = svc(&["manifest", "digest", "--file", &golden("v5-minimal.yaml")], None);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let bytes = std::fs::read(golden("v5-minimal.yaml")).expect("golden");
    let report = manifest_core::validate(&bytes);
    assert_eq!(text, format!("authored {}\n", report.authored_digest().expect("digest")));

    let out = svc(&["manifest", "digest", "--file", &golden("v4-minimal.json"), "--application-uid", "app_min"], None);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("authored sha256:"));
    assert!(lines[1].starts_with("policy sha256:"));
}

#[test]
fn digest_refuses_facts_it_cannot_use_and_prints_nothing_on_failure() {
    let cid = "ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi";
    let digest = format!("sha256:{}", "0".repeat(64));
    let args =
        ["manifest", "digest", "--file", &golden("v4-full.json"), "--artifact-cid", cid, "--artifact-digest", &digest];
    let out = svc(&args, None);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--application-uid"));

    // A build release without the artifact version: no half answer on stdout.
    let out =
        svc(&["manifest", "digest", "--file", &golden("v4-full.json"), "--application-uid", "app_01HZX3J7Q2"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));

    let out = svc(&["manifest", "digest", "--file", &golden("v5-minimal.yaml"), "--application-uid", "app"], None);
    assert_eq!(out.status.code(), Some(2), "policy digests are for V4");
}

#[test]
fn a_malformed_artifact_fact_names_its_own_flag() {
    let args = [
        "manifest",
        "policy",
        "--file",
        &golden("v4-full.json"),
        "--application-uid",
        "app_01HZX3J7Q2",
        "--artifact-cid",
        "https://not-ipfs.example/x",
        "--artifact-digest",
    ];
    let digest = format!("sha256:{}", "0".repeat(64));
    let mut args: Vec<&str> = args.to_vec();
    args.push(&digest);
    let out = svc(&args, None);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("(see --artifact-cid)"), "{stderr}");
}

/// An unknown execution mode used to be refused as "is not a execution mode".
#[test]
fn an_unknown_execution_mode_is_not_an_execution_mode() {
    let text = std::fs::read_to_string(golden("v5-minimal.yaml")).expect("golden");
    let broken = text.replacen("mode: once", "mode: sometimes", 1);
    assert_ne!(broken, text, "the golden manifest has `mode: once`");
    let out = svc(&["manifest", "validate", "--file", "-"], Some(broken.as_bytes()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\"sometimes\" is not an execution mode"), "{stdout}");
    assert!(!stdout.contains("is not a execution"), "{stdout}");
}

/// `--org Acme` and `--org a--b` were accepted and became parts of hostnames; every command
/// that names an organization now refuses them before touching the data directory.
#[test]
fn organization_names_break_no_hostname_and_touch_nothing_when_refused() {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let dir = scratch.path();
    let data = dir.join("relay");
    let data = data.to_str().expect("UTF-8");
    for args in [
        vec!["relay", "admin", "invite", "--data-dir", data, "--org", "Acme"],
        vec!["relay", "admin", "token", "--data-dir", data, "--org", "a--b"],
        vec!["admin", "token", "create", "--data-dir", data, "--org=-x", "--role", "developer"],
    ] {
        let out = svc(&args, None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("a-z, 0-9 and single hyphens"), "{args:?}: {err}");
    }
    let out = svc(&["relay", "admin", "invite", "--data-dir", data, "--org", "Acme"], None);
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean \"acme\""));
    assert_eq!(std::fs::read_dir(dir).map(Iterator::count).ok(), Some(0), "nothing was created for a refused name");
}

/// A typo'd `--data-dir` made a second store and printed a token no server read. Admin
/// commands now refuse a directory that does not exist (only `relay admin invite`, the first
/// command on a new machine, and the servers make one), naming the path.
#[test]
fn a_typod_data_dir_is_refused_and_nothing_is_created() {
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let dir = scratch.path();
    let typo = dir.join("relya");
    let typo = typo.to_str().expect("UTF-8");
    for args in [
        vec!["relay", "admin", "token", "--data-dir", typo, "--org", "acme"],
        vec!["relay", "admin", "catalog-key", "--data-dir", typo],
        vec!["admin", "token", "create", "--data-dir", typo, "--org", "acme", "--role", "developer"],
        vec!["admin", "capability", "grant", "--data-dir", typo, "--org", "acme", "ssh_access"],
    ] {
        let out = svc(&args, None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(typo) && err.contains("no such data directory"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "no token printed: {args:?}");
    }
    assert_eq!(std::fs::read_dir(dir).map(Iterator::count).ok(), Some(0), "nothing was created");
    // The README's first command still makes its directory.
    let out = svc(&["relay", "admin", "invite", "--data-dir", typo, "--org", "acme"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = svc(&["relay", "admin", "token", "--data-dir", typo, "--org", "acme"], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Found by hand: `--value-file /dev/zero` read forever (and without bound). A device or a
/// FIFO is refused at once, and a large file is read only one byte past the bound.
#[test]
fn a_secret_value_file_must_be_a_regular_file_of_bounded_size() {
    let dir = tempfile::tempdir().expect("scratch");
    let data = dir.path().to_str().expect("utf-8");
    let token = svc(&["admin", "token", "create", "--data-dir", data, "--org", "acme", "--role", "owner"], None);
    assert!(token.status.success(), "{}", String::from_utf8_lossy(&token.stderr));
    let provision = |file: &str| {
        svc(
            &[
                "admin",
                "secret",
                "provision",
                "--data-dir",
                data,
                "--org",
                "acme",
                "--app",
                "web",
                "--secret-id",
                "k",
                "--value-file",
                file,
            ],
            None,
        )
    };
    let zero = provision("/dev/zero");
    assert_eq!(zero.status.code(), Some(1), "{}", String::from_utf8_lossy(&zero.stderr));
    assert!(String::from_utf8_lossy(&zero.stderr).contains("/dev/zero is not a regular file"));
    let big = dir.path().join("big");
    std::fs::write(&big, vec![b'x'; 1 << 20]).expect("write");
    let large = provision(big.to_str().expect("utf-8"));
    assert_eq!(large.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&large.stderr).contains("the most is 65536"),
        "{}",
        String::from_utf8_lossy(&large.stderr)
    );
    let small = dir.path().join("small");
    std::fs::write(&small, b"s3cret").expect("write");
    assert!(provision(small.to_str().expect("utf-8")).status.success());
}
