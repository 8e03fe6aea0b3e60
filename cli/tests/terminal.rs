//! Every `svc` command at the terminal, enumerated from the clap command tree (so a new
//! subcommand is covered without touching this file): a closed standard output never makes
//! it panic or exit 101, and with `--format json` a failure is exactly one JSON value, the
//! shared envelope `{"error": {"code", "message", ...}}`.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use svc_e2e::service::TempDir;

/// A leaf command: its path (`["ingress", "status"]`) and the arguments it requires.
struct Leaf {
    path: Vec<String>,
    args: Vec<String>,
    json: bool,
}

/// Every leaf of the command tree, with made-up values for its required arguments: paths
/// that do not exist, a closed port, loopback addresses, the first allowed value.
fn leaves(scratch: &Path) -> Vec<Leaf> {
    fn walk(cmd: &clap::Command, path: &mut Vec<String>, scratch: &Path, out: &mut Vec<Leaf>) {
        let subs: Vec<&clap::Command> = cmd.get_subcommands().filter(|c| c.get_name() != "help").collect();
        if subs.is_empty() {
            let mut args = Vec::new();
            for arg in cmd.get_arguments().filter(|a| a.is_required_set()) {
                let value = value_for(arg, scratch);
                match arg.get_long() {
                    Some(long) => args.extend([format!("--{long}"), value]),
                    None => args.push(value),
                }
            }
            let json = cmd
                .get_arguments()
                .any(|a| a.get_id() == "format" && a.get_possible_values().iter().any(|v| v.get_name() == "json"));
            out.push(Leaf { path: path.clone(), args, json });
        }
        for sub in subs {
            path.push(sub.get_name().to_owned());
            walk(sub, path, scratch, out);
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(&svc_cli::command(), &mut Vec::new(), scratch, &mut out);
    out
}

fn value_for(arg: &clap::Arg, scratch: &Path) -> String {
    if let Some(first) = arg.get_possible_values().first() {
        return first.get_name().to_owned();
    }
    let name = arg.get_value_names().and_then(|n| n.first()).map(|n| n.as_str().to_owned()).unwrap_or_default();
    match name.as_str() {
        // A regular file where a directory is expected, a missing file where one is read:
        // every command refuses them without creating anything.
        "DIR" => scratch.join("not-a-dir").display().to_string(),
        "FILE" | "PATH" => scratch.join("missing.json").display().to_string(),
        "ADDR" => "127.0.0.1:0".to_owned(),
        "N" | "SECS" | "MICROS" => "1".to_owned(),
        _ => "x".to_owned(),
    }
}

/// A port nothing listens on (bound, then closed).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

fn command(scratch: &Path, server: &str, args: &[String]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_svc"));
    c.args(args)
        .current_dir(scratch)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", scratch)
        .env("XDG_CONFIG_HOME", scratch.join("config"))
        .env("XDG_CACHE_HOME", scratch.join("cache"))
        .env("XDG_DATA_HOME", scratch.join("data"))
        .env("SVC_CONFIG", scratch.join("no-config.json"))
        .env("SVC_CACHE_DIR", scratch.join("cache"))
        .env("SVC_RELAY_PINS", scratch.join("pins.json"))
        .env("SVC_SERVER", server)
        .env("SVC_RELAY", server)
        .env("SVC_TOKEN", "svc_not-a-token")
        .env("SVC_RELAY_TOKEN", "not-a-token")
        .stdin(Stdio::null());
    c
}

/// Waits at most `limit`, then interrupts (a server stops its children on Ctrl-C), then
/// kills: (the output, whether it ended by itself).
fn wait(mut child: Child, limit: Duration) -> (Output, bool) {
    let start = Instant::now();
    let mut interrupted = false;
    let ended = loop {
        if child.try_wait().ok().flatten().is_some() {
            break !interrupted;
        }
        if start.elapsed() > limit && !interrupted {
            let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
            interrupted = true;
        }
        if start.elapsed() > limit + Duration::from_secs(10) {
            let _ = child.kill();
            break false;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (child.wait_with_output().expect("output"), ended)
}

fn scratch(name: &str) -> TempDir {
    let dir = TempDir::new(name);
    std::fs::write(dir.path().join("not-a-dir"), "a regular file").expect("write");
    dir
}

#[test]
fn the_command_tree_has_the_commands_this_test_relies_on() {
    let dir = scratch("tree");
    let names: Vec<String> = leaves(dir.path()).iter().map(|l| l.path.join(" ")).collect();
    for expected in ["ingress status", "ingress demo", "relay serve", "serve", "policy publish", "app show"] {
        assert!(names.iter().any(|n| n == expected), "{expected} in {names:?}");
    }
    assert!(names.len() >= 40, "every leaf is enumerated: {}", names.len());
}

/// `svc ... | head -0` used to exit 101 with "failed printing to stdout: Broken pipe".
#[test]
fn a_closed_stdout_never_panics_or_exits_101() {
    let dir = scratch("pipe");
    let server = format!("http://127.0.0.1:{}", closed_port());
    let leaves = leaves(dir.path());
    let mut runs: Vec<(String, Child)> = Vec::new();
    for leaf in &leaves {
        for extra in [&[][..], &["--help".to_owned()][..]] {
            let args: Vec<String> = leaf.path.iter().chain(&leaf.args).chain(extra).cloned().collect();
            // The read end is closed before the child starts: its first write fails.
            let (reader, writer) = std::io::pipe().expect("a pipe");
            drop(reader);
            let child =
                command(dir.path(), &server, &args).stdout(writer).stderr(Stdio::piped()).spawn().expect("svc starts");
            runs.push((args.join(" "), child));
        }
    }
    let mut failures = Vec::new();
    for (name, child) in runs {
        let (out, _) = wait(child, Duration::from_secs(10));
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(101) || stderr.contains("panicked") {
            failures.push(format!("svc {name}: {:?}\n{stderr}", out.status));
        }
    }
    assert!(failures.is_empty(), "{} of {} runs failed:\n{}", failures.len(), leaves.len() * 2, failures.join("\n"));
}

/// Exactly one JSON value in `bytes`.
fn one_json_value(bytes: &[u8]) -> Result<Value, String> {
    let values: Vec<Value> = serde_json::Deserializer::from_slice(bytes)
        .into_iter::<Value>()
        .collect::<Result<_, _>>()
        .map_err(|e| format!("not JSON ({e})"))?;
    match <[Value; 1]>::try_from(values) {
        Ok([value]) => Ok(value),
        Err(values) => Err(format!("{} JSON values", values.len())),
    }
}

fn assert_envelope(name: &str, out: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let value = one_json_value(&out.stdout)
        .unwrap_or_else(|e| panic!("svc {name}: stdout is {e}:\n{stdout}\nstderr: {stderr}"));
    let error = &value["error"];
    assert!(
        error["code"].as_str().is_some_and(|c| !c.is_empty()) && error["message"].as_str().is_some(),
        "svc {name}: not the error envelope: {value:#}"
    );
    assert_ne!(out.status.code(), Some(0), "svc {name} failed, so it does not exit 0");
    value
}

/// `policy publish`, `ingress deploy|status|refund` used to print failures as text only.
#[test]
fn every_json_command_fails_with_exactly_one_envelope() {
    let dir = scratch("json");
    let server = format!("http://127.0.0.1:{}", closed_port());
    let mut ran = 0;
    for leaf in leaves(dir.path()).iter().filter(|l| l.json) {
        let mut args: Vec<String> = leaf.path.iter().chain(&leaf.args).cloned().collect();
        args.extend(["--format".to_owned(), "json".to_owned()]);
        let child = command(dir.path(), &server, &args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        let (out, ended) = wait(child.expect("svc starts"), Duration::from_secs(20));
        assert!(ended, "svc {args:?} ends by itself");
        assert_envelope(&args.join(" "), &out);
        ran += 1;
    }
    assert!(ran >= 20, "the JSON commands are found in the tree: {ran}");
}

/// A command's error is said once, where the command returns (issue 43): a project file that
/// cannot be read is one line of standard error naming its path (exit 2), the same line under
/// `--format json` beside one envelope; an invalid one is its diagnostics, then the one line
/// saying nothing was sent (exit 1).
#[test]
fn an_unreadable_or_invalid_project_file_is_said_once_naming_its_path() {
    let dir = scratch("said-once");
    let server = format!("http://127.0.0.1:{}", closed_port());
    let missing = dir.path().join("missing").join("ingress.json").display().to_string();
    let run = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        command(dir.path(), &server, &args).output().expect("svc runs")
    };
    let text = run(&["ingress", "status", "--config", &missing]);
    let err = String::from_utf8_lossy(&text.stderr).into_owned();
    assert_eq!(text.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "said once:\n{err}");
    assert_eq!(err.matches(&missing).count(), 1, "the path, once:\n{err}");
    assert!(
        err.starts_with("svc ingress: cannot read the project file: ")
            && err.ends_with("(use --config FILE, or --project NAME)\n"),
        "{err}"
    );
    assert!(text.stdout.is_empty(), "nothing on standard output");
    let json = run(&["ingress", "status", "--config", &missing, "--format", "json"]);
    let envelope = assert_envelope("ingress status", &json);
    assert_eq!(envelope["error"]["code"], "unreadable_file", "{envelope:#}");
    assert_eq!(envelope["error"]["message"].as_str(), err.strip_prefix("svc ingress: ").map(str::trim_end));
    assert_eq!(String::from_utf8_lossy(&json.stderr), err, "the same line under --format json");

    let invalid = dir.path().join("ingress.json");
    std::fs::write(&invalid, "{\"name\": 5}").expect("write");
    let out = run(&["ingress", "status", "--config", &invalid.display().to_string()]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    let said = format!("svc ingress: {} is not a valid project file; nothing was sent", invalid.display());
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.iter().filter(|l| **l == said).count(), 1, "said once:\n{err}");
    assert_eq!(lines.last(), Some(&said.as_str()), "after the diagnostics:\n{err}");
    assert!(lines[0].starts_with(&format!("{}: ", invalid.display())), "the diagnostics first:\n{err}");
}

/// A one-request HTTP server answering `status` with `body`; returns its base URL.
fn answer_once(status: u16, body: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for stream in listener.incoming().take(4) {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            // The whole request first: an answer sent while the client still writes reads to
            // it as an unexpected message, and the command says `unreachable` (a CI flake).
            read_request(&mut stream);
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// Reads one HTTP request from `stream`: its head, then as many body bytes as its
/// `content-length` says (at most 1 MiB; a failed read ends it).
fn read_request(stream: &mut std::net::TcpStream) {
    let mut request = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
        if request.len() > 1 << 20 {
            return;
        }
    };
    let head = String::from_utf8_lossy(&request[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
        .min(1 << 20);
    while request.len() < head_end + length {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => request.extend_from_slice(&buf[..n]),
        }
    }
}

#[test]
fn a_refusal_keeps_the_servers_envelope_and_a_bare_error_is_wrapped() {
    let dir = scratch("refusal");
    let relay = answer_once(401, r#"{"error": {"code": "unauthenticated", "message": "the token is not valid"}}"#);
    let args: Vec<String> =
        ["ingress", "refund", "ses_x", "--project", "p", "--format", "json"].map(str::to_owned).to_vec();
    let out = command(dir.path(), &relay, &args).output().expect("svc runs");
    let value = assert_envelope("ingress refund", &out);
    assert_eq!(value["error"]["code"], "unauthenticated", "{value:#}");
    assert_eq!(value["error"]["httpStatus"], 401, "{value:#}");

    let bare = answer_once(502, "<html>bad gateway</html>");
    let args: Vec<String> = ["app", "show", "web", "--format", "json"].map(str::to_owned).to_vec();
    let out = command(dir.path(), &bare, &args).output().expect("svc runs");
    let value = assert_envelope("app show", &out);
    assert_eq!(value["error"]["code"], "http_error", "{value:#}");
    assert_eq!(value["error"]["httpStatus"], 502, "{value:#}");
}

/// Every time in JSON output is RFC 3339: no `secs_since_epoch` object, no Unix ms in an
/// `at`/`...At` field (`rewards` used to print `claimableAt` as Unix ms).
fn assert_no_raw_times(value: &Value, at: &str) {
    match value {
        Value::Object(map) => {
            assert!(!map.contains_key("secs_since_epoch"), "{at}: a SystemTime object: {value}");
            for (key, v) in map {
                let here = format!("{at}.{key}");
                if key == "at" || key.ends_with("At") {
                    assert!(!v.is_number(), "{here} is a bare number: {v}");
                    if let Some(s) = v.as_str() {
                        assert!(humantime::parse_rfc3339(s).is_ok(), "{here} is not RFC 3339: {s}");
                    }
                }
                assert_no_raw_times(v, &here);
            }
        }
        Value::Array(items) => {
            items.iter().enumerate().for_each(|(i, v)| assert_no_raw_times(v, &format!("{at}[{i}]")))
        }
        _ => {}
    }
}

#[test]
fn rewards_json_has_rfc3339_times_and_no_unix_ms() {
    let dir = scratch("times");
    let relay = answer_once(
        200,
        r#"{"operator": "local", "accruedMicros": 7, "pendingMicros": 0, "claimableMicros": 7, "claimedMicros": 0,
            "rewards": [{"sessionId": "ses_1", "deploymentId": "dep_1", "amountMicros": 7,
                         "settledAt": 1700000000000, "claimableAt": 1700086400000}]}"#,
    );
    let args: Vec<String> = ["ingress", "rewards", "--format", "json"].map(str::to_owned).to_vec();
    let out = command(dir.path(), &relay, &args).output().expect("svc runs");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let value = one_json_value(&out.stdout).expect("one JSON value");
    assert_no_raw_times(&value, "rewards");
    assert_eq!(value["rewards"][0]["claimableAt"], "2023-11-15T22:13:20.000Z", "{value:#}");
}

/// Each command's `--format` help says what that command prints (they used to be copies of
/// `manifest validate`'s `{valid, schemaVersion, authoredDigest, diagnostics}`).
#[test]
fn each_format_help_describes_its_own_commands_output() {
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
        for arg in cmd.get_arguments().filter(|a| a.get_id() == "format") {
            out.push((path.to_owned(), arg.get_help().map(ToString::to_string).unwrap_or_default()));
        }
        for sub in cmd.get_subcommands() {
            let sub_path =
                if path.is_empty() { sub.get_name().to_owned() } else { format!("{path} {}", sub.get_name()) };
            walk(sub, &sub_path, out);
        }
    }
    let mut helps = Vec::new();
    walk(&svc_cli::command(), "", &mut helps);
    assert!(helps.len() >= 20, "{helps:?}");
    let undescribed: Vec<&String> =
        helps.iter().filter(|(_, help)| !help.contains("json: ")).map(|(path, _)| path).collect();
    assert!(undescribed.is_empty(), "--format without its own description: {undescribed:?}");
    let copied: Vec<&String> = helps
        .iter()
        .filter(|(path, help)| path != "manifest validate" && help.contains("authoredDigest, diagnostics}"))
        .map(|(path, _)| path)
        .collect();
    assert!(copied.is_empty(), "--format help copied from manifest validate: {copied:?}");
    let fund = helps.iter().find(|(p, _)| p == "ingress fund").map(|(_, h)| h.as_str()).unwrap_or("");
    assert!(fund.contains("{quote, entry}"), "fund says what it prints: {fund}");
}

/// Money in the customer's unit (issue 42): the texts of `sessions`, `ledger` and `rewards`
/// show dollars with their cents (a fraction of a cent with the digits it needs); their JSON
/// keeps the integer micros.
#[test]
fn money_texts_show_dollars_and_their_json_keeps_integer_micros() {
    let dir = scratch("money");
    let balance = r#""balance": {"fundedMicros": 750000, "spentMicros": 250000, "refundableMicros": 499999,
        "refundedMicros": 1, "availableMicros": 250000, "inProgressMicros": 250000, "rewardMicros": 0, "serviceMicros": 0}"#;
    let sessions: &'static str = Box::leak(
        format!(
            r#"{{"sessions": [{{"id": "ses_0000000000000001", "deploymentId": "dep_1", "quoteId": "quo_1", "ordinal": 0,
                "priceMicros": 250000, "periodMs": 3600000, "state": "settled", "periodIndex": 0, "unservedMicros": 250000,
                "refundedMicros": 1, "rewardMicros": 0, "serviceMicros": 0, "spentMicros": 0, "refundableMicros": 249999}}], {balance}}}"#
        )
        .into_boxed_str(),
    );
    let ledger: &'static str = Box::leak(
        format!(
            r#"{{"entries": [{{"seq": 1, "kind": "fund", "amountMicros": 750000, "note": "funded quote quo_1: 3 periods of 1 hour", "at": 1700000000000}},
                {{"seq": 2, "kind": "refund", "amountMicros": 1, "note": "refund of session ses_0000000000000001", "at": 1700000001000}}], {balance}}}"#
        )
        .into_boxed_str(),
    );
    let rewards = r#"{"operator": "local", "accruedMicros": 1234567890, "pendingMicros": 0, "claimableMicros": 1234567890,
        "claimedMicros": 0, "rewards": [{"sessionId": "ses_1", "deploymentId": "dep_1", "amountMicros": 1234567890,
        "settledAt": 1700000000000, "claimableAt": 1700086400000}]}"#;
    let mut texts = String::new();
    for (words, body, micros) in [
        (
            &["ingress", "sessions", "--deployment", "dep_0123456789abcdef"][..],
            sessions,
            ("balance", "fundedMicros", 750_000),
        ),
        (&["ingress", "ledger", "--deployment", "dep_0123456789abcdef"][..], ledger, ("balance", "refundedMicros", 1)),
        (&["ingress", "rewards"][..], rewards, ("", "claimableMicros", 1_234_567_890)),
    ] {
        let args: Vec<String> = words.iter().map(|s| (*s).to_owned()).collect();
        let out = command_output(dir.path(), &answer_once(200, body), &args);
        texts.push_str(&format!("$ svc {}\n{out}", words.join(" ")));
        let mut json_args = args.clone();
        json_args.extend(["--format".to_owned(), "json".to_owned()]);
        let json = command(dir.path(), &answer_once(200, body), &json_args).output().expect("svc runs");
        let value = one_json_value(&json.stdout).expect("one JSON value");
        let (object, key, expected) = micros;
        let holder = if object.is_empty() { &value } else { &value[object] };
        assert_eq!(holder[key].as_u64(), Some(expected), "{value:#}");
    }
    insta::assert_snapshot!(texts);
}

/// What `svc ARGS` printed on standard output, after checking it succeeded.
fn command_output(scratch: &Path, server: &str, args: &[String]) -> String {
    let out = command(scratch, server, args).output().expect("svc runs");
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}
