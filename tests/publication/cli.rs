//! `svc` against the service: publish refuses an invalid manifest before sending anything,
//! the pause and fence flags, the app commands, and schemas fetched and cached by digest.

use std::net::TcpListener;

use manifest_core::SchemaKind;
use serde_json::Value;
use svc_e2e::service::{TempDir, svc};

use super::{World, v5};

fn write(dir: &TempDir, name: &str, value: &Value) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, serde_json::to_vec_pretty(value).expect("json")).expect("write");
    path.to_string_lossy().into_owned()
}

#[test]
fn the_version_is_at_least_0_13_0() {
    let out = svc(&["--version"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.trim().strip_prefix("svc ").expect("svc VERSION");
    let parts: Vec<u64> = version.split('.').map(|p| p.parse().expect("number")).collect();
    assert!(parts >= vec![0, 13, 0], "{version}");
}

#[test]
fn publish_refuses_an_invalid_manifest_before_sending_anything() {
    let files = TempDir::new("cli-invalid");
    let mut bad = v5("web");
    bad["deployment"]["jobs"] = Value::from(0);
    let file = write(&files, "bad.json", &bad);
    // A listener that would see any connection attempt.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let server = format!("http://{}", listener.local_addr().expect("addr"));
    let out = svc(
        &["policy", "publish", "--file", &file, "--app", "web", "--server", &server],
        &[("SVC_TOKEN", "svc_unused")],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/deployment/jobs"), "the pointer is shown: {stderr}");
    assert!(listener.accept().is_err(), "nothing was sent");
}

#[test]
fn publish_and_the_app_commands_against_the_service() {
    let w = World::new("cli");
    let env =
        [("SVC_TOKEN", w.token.as_str()), ("SVC_SERVER", &*w.server.url().leak()), ("SVC_CONFIG", "/nonexistent")];
    let run = |args: &[&str]| svc(args, &env);
    let created = run(&["app", "create", "web"]);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    w.accept_source("web");
    let files = TempDir::new("cli-files");
    let file = write(&files, "web.json", &v5("web"));

    let dry = run(&["policy", "publish", "--file", &file, "--app", "web", "--dry-run", "--format", "json"]);
    assert!(dry.status.success());
    let dry: Value = serde_json::from_slice(&dry.stdout).expect("JSON");
    assert_eq!(dry["dryRun"], true);

    let paused = run(&[
        "policy",
        "publish",
        "--file",
        &file,
        "--app",
        "web",
        "--paused",
        "--reason",
        "not yet",
        "--expect-version",
        "0",
    ]);
    assert!(paused.status.success(), "{}", String::from_utf8_lossy(&paused.stderr));
    assert!(String::from_utf8_lossy(&paused.stdout).contains("published policy version 1"));
    let stale = run(&["policy", "publish", "--file", &file, "--app", "web", "--expect-version", "0"]);
    assert_eq!(stale.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&stale.stderr).contains("active_pointer_version_conflict"));
    let no_reason = run(&["policy", "publish", "--file", &file, "--app", "web", "--paused"]);
    assert_eq!(no_reason.status.code(), Some(2), "clap refuses --paused without --reason");

    let show = run(&["app", "show", "web", "--format", "json"]);
    let show: Value = serde_json::from_slice(&show.stdout).expect("JSON");
    assert_eq!((show["status"].as_str(), show["pauseReason"].as_str()), (Some("paused"), Some("not yet")));
    let versions = String::from_utf8_lossy(&run(&["app", "versions", "web"]).stdout).into_owned();
    assert!(versions.starts_with("* 1 V5 policy sha256:"), "{versions}");
    let one: Value =
        serde_json::from_slice(&run(&["app", "versions", "web", "--version", "1", "--format", "json"]).stdout)
            .expect("JSON");
    assert_eq!(one["policy"]["schemaVersion"], 5);
    let activity = String::from_utf8_lossy(&run(&["app", "activity", "web"]).stdout).into_owned();
    assert!(activity.contains("policy_published version 1 -> paused (reason: not yet)"), "{activity}");

    // A pause survives publishing; `app resume` lifts it, in activity like the pause.
    let again = run(&["policy", "publish", "--file", &file, "--app", "web", "--expect-version", "1"]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let listed: Value = serde_json::from_slice(&run(&["app", "list", "--format", "json"]).stdout).expect("JSON");
    assert_eq!(listed["applications"][0]["status"], "paused", "publishing keeps the pause: {listed:#}");
    let no_reason = run(&["app", "resume", "web", "--reason", "  "]);
    assert_eq!(no_reason.status.code(), Some(1), "a blank reason is refused");
    let resumed = run(&["app", "resume", "web", "--reason", "DNS is ready", "--format", "json"]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let resumed: Value = serde_json::from_slice(&resumed.stdout).expect("JSON");
    assert_eq!((resumed["status"].as_str(), resumed["pauseReason"].as_str()), (Some("active"), None));
    let twice = run(&["app", "resume", "web", "--reason", "again", "--format", "json"]);
    assert_eq!(twice.status.code(), Some(1));
    let twice: Value = serde_json::from_slice(&twice.stdout).expect("one JSON envelope");
    assert_eq!(twice["error"]["code"], "not_paused", "{twice:#}");
    let listed = String::from_utf8_lossy(&run(&["app", "list"]).stdout).into_owned();
    assert_eq!(listed, "web active version 2\n");
    let activity = String::from_utf8_lossy(&run(&["app", "activity", "web"]).stdout).into_owned();
    assert!(activity.contains("application_resumed version 2 -> active (reason: DNS is ready)"), "{activity}");

    let no_token = svc(
        &["app", "show", "web"],
        &[("SVC_SERVER", &w.server.url()), ("SVC_CONFIG", "/nonexistent"), ("SVC_TOKEN", "")],
    );
    assert_eq!(no_token.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_token.stderr).contains("SVC_TOKEN"));
}

#[test]
fn schemas_come_from_the_targeted_service_cached_by_digest() {
    let w = World::new("cli-schema");
    let cache = TempDir::new("cli-cache");
    let env = [("SVC_CACHE_DIR", cache.str()), ("SVC_CONFIG", "/nonexistent")];
    let url = w.server.url();
    let fetch = || svc(&["manifest", "schema", "--version", "5", "--server", &url], &env);
    let first = fetch();
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    assert_eq!(first.stdout, SchemaKind::ManifestV5.bytes().as_bytes());
    let schemas = cache.path().join("schemas");
    let digest_hex = SchemaKind::ManifestV5.digest().trim_start_matches("sha256:").to_owned();
    let cached = schemas.join(format!("{digest_hex}.json"));
    assert_eq!(std::fs::read(&cached).expect("cached by digest"), first.stdout);
    let index = std::fs::read_dir(&schemas)
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "etag"))
        .expect("the route's last digest");
    assert_eq!(std::fs::read_to_string(&index).expect("etag"), SchemaKind::ManifestV5.etag());

    // The service's digest changed since (the cache remembers another): fetched again.
    std::fs::write(&index, "\"sha256:0000\"").expect("write");
    assert_eq!(fetch().stdout, first.stdout);
    assert_eq!(std::fs::read_to_string(&index).expect("etag"), SchemaKind::ManifestV5.etag());
    // A damaged cached copy is not used.
    std::fs::write(&cached, b"{}").expect("write");
    assert_eq!(fetch().stdout, first.stdout);
    assert_eq!(std::fs::read(&cached).expect("cached"), first.stdout);
}

/// Issue 21, point 2: `svc policy diff` reads versions from the service (`APP@N`), and a
/// version saved as JSON (`svc app versions APP --version N --format json`) compares as that
/// version does.
#[test]
fn policy_diff_compares_an_applications_versions_on_the_service() {
    let w = World::new("cli-diff");
    let env =
        [("SVC_TOKEN", w.token.as_str()), ("SVC_SERVER", &*w.server.url().leak()), ("SVC_CONFIG", "/nonexistent")];
    let run = |args: &[&str]| svc(args, &env);
    assert!(run(&["app", "create", "web"]).status.success());
    w.accept_source("web");
    let files = TempDir::new("cli-diff-files");
    let first = v5("web");
    let mut second = v5("web");
    second["deployment"]["spend"]["perJob"] = "2000000".into();
    second["configuration"] = serde_json::json!({"variables": [{"source": "literal", "name": "MODE", "value": "b"}]});
    for (name, manifest) in [("v1.json", &first), ("v2.json", &second)] {
        let file = write(&files, name, manifest);
        let out = run(&["policy", "publish", "--file", &file, "--app", "web"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let out = run(&["policy", "diff", "web@1", "web@2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with("web@1 -> web@2: "), "{text}");
    assert!(text.contains("  spend     ~ /deployment/spend/perJob: \"1000000\" -> \"2000000\"\n"), "{text}");
    assert!(text.contains("+ /configuration/variables/0 (MODE): "), "{text}");
    // A saved version reads as the same policy.
    let saved = run(&["app", "versions", "web", "--version", "1", "--format", "json"]);
    let saved_path = files.path().join("web-1.json");
    std::fs::write(&saved_path, &saved.stdout).expect("write");
    let again = run(&["policy", "diff", &saved_path.to_string_lossy(), "web@2", "--format", "json"]);
    let from_file: Value = serde_json::from_slice(&again.stdout).expect("JSON");
    let from_service: Value =
        serde_json::from_slice(&run(&["policy", "diff", "web@1", "web@2", "--format", "json"]).stdout).expect("JSON");
    assert_eq!(from_file["changes"], from_service["changes"]);
    assert_eq!(run(&["policy", "diff", "web@2", "web@2"]).status.code(), Some(0), "a version equals itself");
    // Issue 45, point 1: the same duration spelled otherwise takes no effect in published
    // versions too (their policies keep the spelling); as written, it is a change.
    let mut third = second.clone();
    third["deployment"]["schedule"]["duration"] = "60m".into();
    let out = run(&["policy", "publish", "--file", &write(&files, "v3.json", &third), "--app", "web"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let same = run(&["policy", "diff", "web@2", "web@3"]);
    assert_eq!(
        (same.status.code(), &*String::from_utf8_lossy(&same.stdout)),
        (Some(0), "web@2 -> web@3: no changes\n")
    );
    let written = run(&["policy", "diff", "web@2", "web@3", "--as-written"]);
    assert_eq!(written.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&written.stdout).contains("~ /deployment/schedule/duration: \"1h\" -> \"60m\""));
    // A version that does not exist: exit 2, the service's answer said.
    let missing = run(&["policy", "diff", "web@1", "web@9"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("404"), "{}", String::from_utf8_lossy(&missing.stderr));
}
