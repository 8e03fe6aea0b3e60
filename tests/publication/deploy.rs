//! `svc app deploy DIR` end to end (issue 42, point 1): from a folder to a running job on a
//! fresh data directory, through the real `svc` binary and `svc serve`'s local pool; the
//! upload route (`POST /api/applications/{id}/artifacts`) scoped to its organization; the
//! ignore file; the bounds.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use svc_e2e::service::{admin, svc, token};

use super::{World, diagnostics, v5};

/// The repository's `examples/hello-job/`.
fn hello_job() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/hello-job")
}

/// The digest `svc admin artifact store --bundle examples/hello-job` prints too
/// (docs/executions.md): `main.js` alone, the manifest left out.
const HELLO_DIGEST: &str = "sha256:10d0b0b22c3b6317323892c85c7c6ce23c5fcacef881702f8591e34767ac90be";

/// `svc app deploy ARGS` against the world's service with its developer token (or `token`).
fn deploy(w: &World, token: &str, args: &[&str]) -> Output {
    let url = w.server.url();
    svc(&[&["app", "deploy"], args].concat(), &[("SVC_SERVER", &url), ("SVC_TOKEN", token)])
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn authorize(w: &World, org: &str) {
    admin(&["spend-authority", "set", "--data-dir", w.dir.str(), "--org", org, "--micros", "1000000"]);
}

/// A directory with these files (path, content).
fn folder(root: &Path, name: &str, files: &[(&str, &[u8])]) -> PathBuf {
    let dir = root.join(name);
    for (path, bytes) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(&path, bytes).expect("write");
    }
    dir
}

/// A V5 manifest's YAML for `app`: a once job running `main.js`.
fn manifest(app: &str) -> String {
    format!(
        "schema: svc.application-manifest\nschemaVersion: 5\napplicationId: {app}\nrelease:\n  mode: source\n\
         runtime:\n  kind: javascript\n  entrypoint:\n    file: main.js\nexecution:\n  mode: once\n\
         deployment:\n  schedule:\n    duration: 10m\n  spend:\n    unit: service_credit_micros\n    perJob: \"100000\"\n\
         state:\n  mode: \"off\"\n"
    )
}

#[test]
fn svc_app_deploy_takes_a_folder_to_a_job_that_ran_on_a_fresh_data_dir() {
    let w = World::new("deploy-fresh");
    // Without a spend authority: refused, with the reason and the exact fix.
    let out = deploy(&w, &w.token, &[hello_job().to_str().expect("UTF-8"), "--timeout", "60"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "refused: {stdout}\n{stderr}");
    for line in [
        "  main.js  312 bytes\n",
        "1 file, 312 bytes\n",
        "created application hello-job\n",
        &format!("uploaded {HELLO_DIGEST}: the source release of hello-job\n"),
        "dry run: would publish policy version 1 (active version 0)\n",
        "published policy version 1 of hello-job\n",
        "hello-job is refused: the organization has no service-credit spend authority",
        "fix: a service administrator gives acme a spend authority on the service's host: \
         `svc admin spend-authority set --data-dir DATA_DIR --org acme --micros 100000` (USD 0.10, what one job \
         of hello-job may spend;",
    ] {
        assert!(stdout.contains(line), "{line:?} in\n{stdout}\n{stderr}");
    }
    assert!(!stdout.contains("manifest.yaml"), "the manifest is not a file of the bundle:\n{stdout}");

    // With one: the job runs, exits 0 and the application settles; exit 0.
    authorize(&w, "acme");
    let out = deploy(&w, &w.token, &[hello_job().to_str().expect("UTF-8"), "--timeout", "60"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}\nsvc serve:\n{}", w.server.stderr());
    for line in [
        "dry run: would publish policy version 2 (active version 1)\n",
        "published policy version 2 of hello-job\n",
        "slot 0 generation 1 attempt 1: running on local-",
        "hello-job settled: its once job ran and exited\n",
    ] {
        assert!(stdout.contains(line), "{line:?} in\n{stdout}\n{stderr}");
    }
    assert!(!stdout.contains("created application"), "it exists now:\n{stdout}");
    let view = w.get("/api/applications/hello-job/executions");
    assert_eq!(view["convergence"]["state"], "settled", "{view:#}");
    let completed = view["recent"].as_array().into_iter().flatten().any(|e| e["state"] == "completed");
    assert!(completed, "the job completed: {view:#}");
    // One upload recorded: the same files again are not a new version.
    let activity = w.get("/api/applications/hello-job/activity");
    let uploads: Vec<&Value> =
        activity["activity"].as_array().into_iter().flatten().filter(|a| a["action"] == "artifact_uploaded").collect();
    assert_eq!(uploads.len(), 1, "{activity:#}");
    assert_eq!(uploads[0]["reason"], format!("{HELLO_DIGEST} (1 files, 312 bytes)"));

    // A settled `once` application does not run again: the publication says why, exit 1.
    let out = deploy(&w, &w.token, &[hello_job().to_str().expect("UTF-8")]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("error[once_application_settled] at /execution"), "{stderr}");
    // What to do instead, in the terms of the folder at hand; `see `diagnostics`` is for JSON.
    let hello = hello_job();
    let fix = format!(
        "fix: hello-job is a `once` application that ran, and it does not run again; to run these files once \
         more, give {} a new `applicationId` (such as `hello-job-2`), then `svc app deploy {}` again\n",
        hello.join("manifest.yaml").display(),
        hello.display()
    );
    assert!(stderr.contains(&fix), "{fix:?} in\n{stderr}");
    assert!(stderr.contains("the manifest was refused with 1 error:\n"), "{stderr}");

    // `--app` names the manifest's application, or nothing is sent.
    let out = deploy(&w, &w.token, &[hello_job().to_str().expect("UTF-8"), "--app", "hello-again"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("is the manifest of application \"hello-job\", not \"hello-again\""));
    assert!(text(&out.stdout).is_empty(), "{}", text(&out.stdout));

    // JSON, under another name: one object on stdout, the progress on stderr.
    let main = std::fs::read(hello_job().join("main.js")).expect("main.js");
    let again =
        folder(w.dir.path(), "again", &[("main.js", &main), ("manifest.yaml", manifest("hello-again").as_bytes())]);
    let args = [again.to_str().expect("UTF-8"), "--app", "hello-again", "--no-wait", "--format", "json"];
    let out = deploy(&w, &w.token, &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(answer["digest"], HELLO_DIGEST);
    assert_eq!(answer["files"], json!([{"path": "main.js", "bytes": 312}]));
    assert_eq!((answer["policyVersion"].as_u64(), answer["outcome"].as_str()), (Some(1), Some("published")));
    assert!(text(&out.stderr).contains("published policy version 1 of hello-again"), "{}", text(&out.stderr));
}

#[test]
fn an_invalid_manifest_sends_nothing() {
    let w = World::new("deploy-invalid");
    let dir = folder(w.dir.path(), "app", &[("main.js", b"console.log(1)"), ("manifest.yaml", b"schema: nope\n")]);
    let out = deploy(&w, &w.token, &[dir.to_str().expect("UTF-8")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("the manifest is invalid; nothing was sent"), "{}", text(&out.stderr));
    assert_eq!(w.get("/api/applications")["applications"], json!([]), "nothing created");
}

#[test]
fn another_organization_can_never_use_an_uploaded_artifact() {
    let w = World::new("deploy-tenants");
    let out = deploy(&w, &w.token, &[hello_job().to_str().expect("UTF-8"), "--no-wait"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let beta = token(w.dir.str(), "beta", "developer");
    let as_beta = |method: &str, path: &str, body: Option<&Value>| w.server.request(method, path, Some(&beta), body);
    // Not beta's application: nothing to read, nothing to upload to.
    assert_eq!(as_beta("GET", "/api/applications/hello-job", None).status, 404);
    let files = json!({"files": {"main.js": "Y29uc29sZS5sb2coMSk="}});
    let r = as_beta("POST", "/api/applications/hello-job/artifacts", Some(&files));
    assert_eq!((r.status, r.json()["error"]["code"].clone()), (404, json!("application_not_found")));
    // Beta's own application of the same ID resolves no source release from acme's upload...
    assert_eq!(as_beta("POST", "/api/applications", Some(&json!({"applicationId": "hello-job"}))).status, 201);
    let mut source = v5("hello-job");
    source["runtime"]["entrypoint"]["file"] = json!("main.js");
    let r = as_beta("POST", "/api/applications/hello-job/policy-versions", Some(&json!({"manifest": source})));
    assert_eq!(r.status, 422, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(diagnostics(&r.json()), [("source_evidence_missing".to_owned(), "/release/mode".to_owned())]);
    // ...nor pins acme's digest.
    let mut pinned = source.clone();
    pinned["release"] = json!({"mode": "pinned", "artifact": {"digest": HELLO_DIGEST}});
    let r = as_beta("POST", "/api/applications/hello-job/policy-versions", Some(&json!({"manifest": pinned})));
    assert_eq!(r.status, 422, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(diagnostics(&r.json()), [("artifact_not_found".to_owned(), "/release/artifact/digest".to_owned())]);
    // Acme's own pin of its upload resolves (the same rule, its organization).
    let r = w.publish("hello-job", &json!({"manifest": pinned, "dryRun": true}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

#[test]
fn the_ignore_file_hidden_files_and_the_manifest_stay_out_of_the_bundle() {
    let w = World::new("deploy-ignore");
    let dir = folder(
        w.dir.path(),
        "app",
        &[
            ("main.js", b"console.log('hi')\n"),
            ("lib/util.js", b"module.exports = 1;\n"),
            ("lib/util.test.js", b"test\n"),
            ("node_modules/dep/index.js", b"dep\n"),
            ("debug.log", b"noise\n"),
            (".env", b"SECRET=1\n"),
            (".git/HEAD", b"ref: refs/heads/main\n"),
            (".svcignore", b"# not sent\nnode_modules/\n*.log\n*.test.js\n"),
            ("manifest.yaml", manifest("ignored").as_bytes()),
        ],
    );
    let out = deploy(&w, &w.token, &[dir.to_str().expect("UTF-8"), "--no-wait"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains(&format!(
            "files of {} (.svcignore):\n  lib/util.js  20 bytes\n  main.js  18 bytes\n2 files, 38 bytes\n",
            dir.display()
        )),
        "{stdout}"
    );
    // What the service stored is exactly those two files.
    let digest = stdout.lines().find_map(|l| l.strip_prefix("uploaded ")).and_then(|l| l.split(':').nth(1));
    let stored = w.dir.path().join("artifacts").join(format!("sha256-{}", digest.expect("the digest")));
    let mut files: Vec<String> = walk(&stored);
    files.sort();
    assert_eq!(files, ["lib/util.js", "main.js"]);
    // `svc admin artifact store` leaves out the same files: the same digest.
    let stored_by_admin =
        admin(&["artifact", "store", "--data-dir", w.dir.str(), "--bundle", dir.to_str().expect("UTF-8")]);
    assert!(stdout.contains(&format!("uploaded {stored_by_admin}:")), "{stored_by_admin} in\n{stdout}");
}

/// The files under `dir`, relative.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            out.extend(walk(&path).into_iter().map(|p| format!("{name}/{p}")));
        } else {
            out.push(name);
        }
    }
    out
}

#[test]
fn a_bundle_over_the_bounds_is_refused_with_a_clear_error() {
    let w = World::new("deploy-bounds");
    // At the terminal: refused before anything is sent.
    let big = vec![b'x'; 12 * 1024 * 1024 + 1];
    let dir = folder(
        w.dir.path(),
        "big",
        &[("main.js", b"console.log(1)\n"), ("assets/video.bin", &big), ("manifest.yaml", manifest("big").as_bytes())],
    );
    let out = deploy(&w, &w.token, &[dir.to_str().expect("UTF-8")]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{} has more than 12 MiB of files to send (reached at assets/video.bin), the most a bundle holds; \
             leave build output and dependencies out in .svcignore",
            dir.display()
        )),
        "{stderr}"
    );
    assert_eq!(w.get("/api/applications")["applications"], json!([]), "nothing was sent");

    // At the service: the same bounds, whoever sends.
    w.create("raw");
    let upload = |body: &Value| w.server.request("POST", "/api/applications/raw/artifacts", Some(&w.token), Some(body));
    let refused = |r: svc_e2e::service::Response| -> (u16, String, String) {
        let b = r.json();
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        (r.status, text(&b["error"]["code"]), text(&b["error"]["message"]))
    };
    let many: serde_json::Map<String, Value> = (0..2001).map(|i| (format!("f{i}.js"), json!(""))).collect();
    let (status, code, message) = refused(upload(&json!({ "files": many })));
    assert_eq!((status, code.as_str()), (413, "bundle_too_large"));
    assert!(message.starts_with("the bundle has 2001 files; the most is 2000"), "{message}");
    // 6.375 MiB decoded each: the second passes 12 MiB (the body stays under its limit).
    let half = "A".repeat(8_912_896);
    let (status, code, message) = refused(upload(&json!({ "files": {"a.bin": half, "b.bin": half} })));
    assert_eq!((status, code.as_str()), (413, "bundle_too_large"));
    assert!(message.starts_with("the bundle's files are over 12 MiB with \"b.bin\""), "{message}");
    let (status, code, message) = refused(upload(&json!({ "files": {"../escape.js": ""} })));
    assert_eq!((status, code.as_str()), (400, "invalid_bundle"));
    assert!(message.starts_with("the bundle's path \"../escape.js\" is not a relative path"), "{message}");
    let (status, code, _) = refused(upload(&json!({ "files": {"a.js": "%%%"} })));
    assert_eq!((status, code.as_str()), (400, "invalid_bundle"));
    // A declared body over the route's limit is refused before it is read.
    let headers = [("Authorization", format!("Bearer {}", w.token)), ("Content-Length", "99999999".to_owned())];
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let r = svc_e2e::service::http(addr(&w), "POST", "/api/applications/raw/artifacts", &headers, None);
    assert_eq!(r.status, 413);
    // A viewer cannot upload.
    let viewer = token(w.dir.str(), "acme", "viewer");
    let r =
        w.server.request("POST", "/api/applications/raw/artifacts", Some(&viewer), Some(&json!({"files": {"a": ""}})));
    assert_eq!((r.status, r.json()["error"]["code"].clone()), (403, json!("forbidden")));
    // Nothing of it was stored.
    let stored = std::fs::read_dir(w.dir.path().join("artifacts")).map_or(0, |d| d.count());
    assert_eq!(stored, 0, "no artifact and no leftover");
}

fn addr(w: &World) -> std::net::SocketAddr {
    w.server.url().trim_start_matches("http://").parse().expect("an address")
}

#[test]
fn ctrl_c_stops_the_waiting_and_says_what_runs_on() {
    use std::io::{BufRead as _, BufReader};
    let w = World::new("deploy-interrupt");
    authorize(&w, "acme");
    // A `once` job that runs until its window ends: the deploy waits for it to settle.
    let dir = folder(
        w.dir.path(),
        "long",
        &[("main.js", b"setInterval(() => {}, 1000);\n"), ("manifest.yaml", manifest("long").as_bytes())],
    );
    let mut child = std::process::Command::new(svc_e2e::service::svc_binary())
        .args(["app", "deploy", dir.to_str().expect("UTF-8")])
        .env("SVC_SERVER", w.server.url())
        .env("SVC_TOKEN", &w.token)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("svc app deploy");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.expect("a line");
        seen += &format!("{line}\n");
        if line.contains(": running on local-") {
            break;
        }
    }
    assert!(seen.contains(": running on local-"), "{seen}");
    let kill = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill");
    assert!(kill.success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().expect("exit");
    assert_eq!(status.code(), Some(130), "{seen}{}", rest.join("\n"));
    assert_eq!(
        rest.last().map(String::as_str),
        Some(
            "stopped waiting: long stays published (policy version 1) and the service runs it on; follow it with \
             `svc app executions long --watch`"
        ),
        "{rest:?}"
    );
    // It does run on.
    let view = w.get("/api/applications/long/executions");
    assert_eq!(view["slots"][0]["state"], "ready", "{view:#}");
}

/// What new users get wrong, each refused before anything runs with the fix in its message
/// and the exit code README's "At the terminal" gives (1 refused, 2 usage or connection).
#[test]
fn a_new_users_mistakes_each_say_the_fix() {
    let w = World::new("deploy-mistakes");
    let hello = hello_job();
    let hello = hello.to_str().expect("UTF-8");
    let url = w.server.url();
    // `svc app deploy ARGS` against `server` with `token` (none: SVC_TOKEN empty, as unset).
    let call = |server: &str, token: Option<&str>, args: &[&str]| {
        let env = [("SVC_CONFIG", "/nonexistent"), ("SVC_SERVER", server), ("SVC_TOKEN", token.unwrap_or(""))];
        let out = svc(&[&["app", "deploy"], args].concat(), &env);
        (out.status.code(), text(&out.stderr))
    };
    let mine = Some(w.token.as_str());

    // A path that is no directory: the manifest itself, a file, nothing.
    let manifest = format!("{hello}/manifest.yaml");
    let (code, err) = call(&url, mine, &[&manifest]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err,
        format!(
            "svc: {manifest} is not a directory: it is the manifest: give its directory, `svc app deploy {hello}`\n"
        )
    );
    let missing = w.dir.path().join("no-such-folder");
    let (code, err) = call(&url, mine, &[missing.to_str().expect("UTF-8")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is not a directory: it does not exist;"), "{err}");

    // A server nobody listens on: exit 2, what to check.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let nobody = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let (code, err) = call(&nobody, mine, &[hello]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&format!("svc: cannot reach {nobody}: ")), "{err}");
    assert!(err.contains("is `svc serve` running there?"), "{err}");

    // https:// to a plain HTTP service: says to use http://.
    let https = url.replacen("http://", "https://", 1);
    let (code, err) = call(&https, mine, &[hello]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "answered in plain HTTP, not TLS: if it is a `svc serve` without a certificate, use {url}"
        )),
        "{err}"
    );

    // No token; a token this service does not know (another service's).
    let (code, err) = call(&url, None, &[hello]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("svc: no token: set SVC_TOKEN, or put \"token\" in "), "{err}");
    assert!(err.contains("`svc admin token create --data-dir DATA_DIR --org ORG --role developer`"), "{err}");
    let other = svc_e2e::service::TempDir::new("deploy-mistakes-other");
    let foreign = token(other.str(), "acme", "developer");
    let (code, err) = call(&url, Some(&foreign), &[hello]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("fix: the service does not accept the token in SVC_TOKEN"), "{err}");
    assert!(err.contains("Is SVC_SERVER the service whose data directory made it?"), "{err}");

    // An authority below what a job costs: refused (1) with the command that lets it run,
    // the amount in dollars; after it, the same deploy runs the job.
    let authority = |micros: &str| {
        admin(&["spend-authority", "set", "--data-dir", w.dir.str(), "--org", "acme", "--micros", micros]);
    };
    authority("1");
    let out = deploy(&w, &w.token, &[hello, "--timeout", "60"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    let fix = format!(
        "fix: a service administrator raises acme's spend authority to what one job of hello-job may spend, USD \
         0.10 (its `deployment.spend.perJob`): `svc admin spend-authority set --data-dir DATA_DIR --org acme \
         --micros 100000`; then `svc app deploy {hello}` again\n"
    );
    assert!(stdout.contains(&fix), "{fix:?} in\n{stdout}");
    authority("100000");
    let out = deploy(&w, &w.token, &[hello, "--timeout", "60"]);
    assert_eq!(out.status.code(), Some(0), "{}{}", text(&out.stdout), text(&out.stderr));
}
