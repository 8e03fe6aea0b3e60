//! `svc lsp` as an editor runs it: the real binary over standard input and output, spoken to
//! by a client that frames JSON-RPC messages as the protocol says (issue 21, point 5). Its
//! diagnostics are held to what `svc manifest validate --format json` prints for the same
//! file; hover, completion and the quick fix are held to the shape tables.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Neovim with the README's configuration, and the VS Code extension: one test binary with
/// the client's tests, so the workspace links one more, not two.
mod editors;
/// Incremental sync, document symbols, value completion and flow YAML (issue 45, point 3).
mod session;

/// How long any one answer may take: far above what it takes (milliseconds), so a server
/// that never answers fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(20);

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lsp").join(name)
}

fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// A language client: the server's process, and what it sent, message by message.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    from_server: Receiver<Value>,
    next_id: i64,
    /// Notifications received while waiting for something else.
    notifications: Vec<Value>,
}

impl Client {
    fn start() -> Client {
        let mut child = Command::new(env!("CARGO_BIN_EXE_svc"))
            .args(["lsp", "--stdio"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("svc lsp starts");
        let stdout = child.stdout.take().expect("stdout");
        let (to_client, from_server) = channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            while let Some(message) = read_message(&mut reader) {
                if to_client.send(message).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Client { child, stdin, from_server, next_id: 0, notifications: Vec::new() }
    }

    fn send(&mut self, message: &Value) {
        let body = message.to_string();
        self.send_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).expect("write to svc lsp");
        stdin.flush().expect("flush");
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and waits for its response (the whole message: `result` or `error`).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.wait(|m| m["id"] == id)
    }

    /// The next notification `method` about `uri`.
    fn notification(&mut self, method: &str, uri: &str) -> Value {
        let matches = |m: &Value| m["method"] == method && m["params"]["uri"] == uri;
        if let Some(i) = self.notifications.iter().position(matches) {
            return self.notifications.remove(i)["params"].clone();
        }
        self.wait(matches)["params"].clone()
    }

    /// The next notification `method`, whatever it is about.
    fn notified(&mut self, method: &str) -> Value {
        if let Some(i) = self.notifications.iter().position(|m| m["method"] == method) {
            return self.notifications.remove(i)["params"].clone();
        }
        self.wait(|m| m["method"] == method)["params"].clone()
    }

    fn wait(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from_server.recv_timeout(left) {
                Ok(message) if wanted(&message) => return message,
                Ok(message) => self.notifications.push(message),
                Err(RecvTimeoutError::Timeout) => panic!("svc lsp did not answer within {PATIENCE:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("svc lsp closed its output: {}", self.stderr()),
            }
        }
    }

    fn open(&mut self, uri: &str, language: &str, text: &str) -> Value {
        let document = json!({"uri": uri, "languageId": language, "version": 1, "text": text});
        self.notify("textDocument/didOpen", json!({"textDocument": document}));
        self.notification("textDocument/publishDiagnostics", uri)
    }

    /// Waits for the process to end (the test fails rather than hang).
    fn exit_status(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "svc lsp did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stderr(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One framed message, or `None` when the stream ends.
fn read_message(reader: &mut impl BufRead) -> Option<Value> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("Content-Length: ") {
            length = value.parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length?];
    reader.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

fn initialized() -> Client {
    let mut client = Client::start();
    let answer = client.request("initialize", json!({"processId": null, "rootUri": null, "capabilities": {}}));
    let capabilities = &answer["result"]["capabilities"];
    assert_eq!(capabilities["textDocumentSync"], 2, "incremental: ranged edits: {answer}");
    assert_eq!(capabilities["documentSymbolProvider"], true, "{answer}");
    assert_eq!(capabilities["hoverProvider"], true, "{answer}");
    assert!(capabilities["completionProvider"].is_object(), "{answer}");
    assert_eq!(capabilities["codeActionProvider"]["codeActionKinds"], json!(["quickfix"]), "{answer}");
    assert_eq!(answer["result"]["serverInfo"]["name"], "svc lsp");
    client.notify("initialized", json!({}));
    client
}

fn shut_down(mut client: Client) {
    let answer = client.request("shutdown", Value::Null);
    assert_eq!(answer["result"], Value::Null, "{answer}");
    assert!(answer.get("error").is_none(), "{answer}");
    client.notify("exit", Value::Null);
    let status = client.exit_status();
    assert_eq!(status.code(), Some(0), "shutdown then exit is exit 0: {}", client.stderr());
}

/// The protocol's position of line and column (1-based, as `validate` prints them).
fn start_of(diagnostic: &Value) -> (u64, u64) {
    let start = &diagnostic["range"]["start"];
    (start["line"].as_u64().expect("line") + 1, start["character"].as_u64().expect("character") + 1)
}

#[test]
fn an_editor_session_gets_validates_diagnostics_then_hover_completion_and_a_quick_fix() {
    let path = fixture("broken.yaml");
    let text = std::fs::read_to_string(&path).expect("the fixture");
    let uri = uri(&path);
    let mut client = initialized();
    let published = client.open(&uri, "yaml", &text);
    assert_eq!(published["version"], 1);
    let shown = published["diagnostics"].as_array().expect("diagnostics").clone();

    // What `svc manifest validate` says of the same file, as a user runs it.
    let out = Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(["manifest", "validate", "--format", "json"])
        .arg(&path)
        .output()
        .expect("svc manifest validate runs");
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let expected = report["diagnostics"].as_array().expect("diagnostics");
    assert_eq!(shown.len(), expected.len(), "{shown:#?}\n{expected:#?}");
    assert!(expected.len() >= 4, "the fixture has mistakes of both layers: {expected:#?}");
    for (got, want) in shown.iter().zip(expected) {
        assert_eq!(got["code"], want["code"], "{got}");
        assert_eq!(got["message"], want["message"], "{got}");
        assert_eq!(got["data"]["layer"], want["layer"], "{got}");
        assert_eq!(got["data"]["pointer"], want["pointer"], "{got}");
        assert_eq!(start_of(got), (want["line"].as_u64().expect("l"), want["column"].as_u64().expect("c")), "{got}");
        assert_eq!(got["severity"], 1, "an error: {got}");
        assert_eq!(got["source"], "svc");
    }
    let layers: Vec<&Value> = shown.iter().map(|d| &d["data"]["layer"]).collect();
    assert!(layers.contains(&&json!(1)) && layers.contains(&&json!(2)), "{layers:?}");

    // Hover on a key: the field's contract from the shape table.
    let line = text.lines().position(|l| l.starts_with("  jobs:")).expect("jobs") as u64;
    let at = json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": 3}});
    let hover = client.request("textDocument/hover", at);
    let hover_text = hover["result"]["contents"]["value"].as_str().expect("markdown").to_owned();
    let Some(manifest_core::shape::Shape::Object(deployment)) =
        manifest_core::v5::MANIFEST.fields.iter().find(|f| f.name == "deployment").map(|f| f.shape)
    else {
        panic!("deployment is an object")
    };
    let jobs = deployment.fields.iter().find(|f| f.name == "jobs").expect("jobs");
    assert!(hover_text.starts_with("**`jobs`**"), "{hover_text}");
    assert!(hover_text.contains(jobs.doc), "the table's doc {:?} in {hover_text}", jobs.doc);
    assert_eq!(hover["result"]["range"]["start"], json!({"line": line, "character": 2}), "{hover}");

    // Completion of a union's discriminator value, and of the fields an object lacks.
    let line = text.lines().position(|l| l.starts_with("  mode: once")).expect("mode") as u64;
    let at = json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": 9}});
    let items = client.request("textDocument/completion", at);
    let labels: Vec<&str> =
        items["result"]["items"].as_array().expect("items").iter().filter_map(|i| i["label"].as_str()).collect();
    assert!(labels.contains(&"continuous") && labels.contains(&"once"), "{items}");
    let last = text.lines().count() as u64;
    let at = json!({"textDocument": {"uri": uri}, "position": {"line": last, "character": 0}});
    let items = client.request("textDocument/completion", at);
    let labels: Vec<&str> =
        items["result"]["items"].as_array().expect("items").iter().filter_map(|i| i["label"].as_str()).collect();
    assert!(labels.contains(&"state") && labels.contains(&"configuration"), "root fields not written: {labels:?}");
    assert!(!labels.contains(&"schema") && !labels.contains(&"deployment"), "written ones are not offered: {labels:?}");

    // The quick fix for "did you mean": applied, the diagnostic is gone and no other is new.
    let typo = shown.iter().find(|d| d["code"] == "unknown_field").expect("the typo").clone();
    let params = json!({
        "textDocument": {"uri": uri},
        "range": typo["range"],
        "context": {"diagnostics": [typo]},
    });
    let actions = client.request("textDocument/codeAction", params);
    let action = &actions["result"][0];
    assert_eq!(action["kind"], "quickfix", "{actions}");
    assert_eq!(action["title"], "Change to \"placement\"", "{actions}");
    let edit = &action["edit"]["changes"][&uri][0];
    let fixed = apply(&text, edit);
    assert!(fixed.contains("  placement: {}\n"), "{fixed}");
    let change = json!({
        "textDocument": {"uri": uri, "version": 2},
        "contentChanges": [{"text": fixed}],
    });
    client.notify("textDocument/didChange", change);
    let published = client.notification("textDocument/publishDiagnostics", &uri);
    assert_eq!(published["version"], 2);
    let codes: Vec<&Value> =
        published["diagnostics"].as_array().expect("diagnostics").iter().map(|d| &d["code"]).collect();
    assert_eq!(codes.len(), shown.len() - 1, "{published}");
    assert!(!codes.contains(&&json!("unknown_field")), "{published}");

    // Closed, the file shows nothing.
    client.notify("textDocument/didClose", json!({"textDocument": {"uri": uri}}));
    let published = client.notification("textDocument/publishDiagnostics", &uri);
    assert_eq!(published["diagnostics"], json!([]), "{published}");
    shut_down(client);
}

/// Applies one protocol edit (UTF-16 positions; the fixture is ASCII) to `text`.
fn apply(text: &str, edit: &Value) -> String {
    let offset = |p: &Value| {
        let line = p["line"].as_u64().expect("line") as usize;
        let character = p["character"].as_u64().expect("character") as usize;
        text.split_inclusive('\n').take(line).map(str::len).sum::<usize>() + character
    };
    let (start, end) = (offset(&edit["range"]["start"]), offset(&edit["range"]["end"]));
    format!("{}{}{}", &text[..start], edit["newText"].as_str().expect("newText"), &text[end..])
}

#[test]
fn an_ingress_project_file_gets_the_checks_svc_ingress_deploy_runs() {
    let path = fixture("ingress.json");
    let text = std::fs::read_to_string(&path).expect("the fixture");
    let uri = uri(&path);
    let mut client = initialized();
    let published = client.open(&uri, "json", &text);
    let shown = published["diagnostics"].as_array().expect("diagnostics");
    let expected = relay_api::project::check(&text).diagnostics;
    assert!(!expected.is_empty());
    assert_eq!(shown.len(), expected.len(), "{shown:#?}");
    for (got, want) in shown.iter().zip(&expected) {
        assert_eq!(got["code"], want.code.as_str());
        assert_eq!(start_of(got), (u64::from(want.line.expect("line")), u64::from(want.column.expect("column"))));
    }
    // The typo's fix, and completion of the `app` object's fields in JSON (quoted).
    let typo = &shown[0];
    assert_eq!(typo["code"], "unknown_field", "{typo}");
    let params = json!({"textDocument": {"uri": uri}, "range": typo["range"], "context": {"diagnostics": []}});
    let actions = client.request("textDocument/codeAction", params);
    assert_eq!(apply(&text, &actions["result"][0]["edit"]["changes"][&uri][0]).matches("\"port\": 8080").count(), 1);
    let line = text.lines().position(|l| l.contains("\"app\"")).expect("app") as u64;
    let character = text.lines().nth(line as usize).expect("line").find("\"prot\"").expect("prot") as u64;
    let at = json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}});
    let items = client.request("textDocument/completion", at);
    let items = items["result"]["items"].as_array().expect("items");
    let port = items.iter().find(|i| i["label"] == "port").expect("port is offered");
    assert_eq!(port["textEdit"]["newText"], "\"port\"", "{port}");
    assert!(!items.iter().any(|i| i["label"] == "entrypoint"), "written already");

    // A JSON file that is neither a manifest nor a project gets no diagnostics.
    let other = "file:///tmp/package.json";
    let published = client.open(other, "json", r#"{"name": "x", "version": "1.0.0", "sheduel": 1}"#);
    assert_eq!(published["diagnostics"], json!([]));
    shut_down(client);
}

#[test]
fn requests_out_of_order_unknown_or_malformed_get_protocol_errors_and_the_server_goes_on() {
    let mut client = Client::start();
    let early = client.request("textDocument/hover", json!({}));
    assert_eq!(early["error"]["code"], -32002, "before initialize: {early}");
    drop(client);

    let mut client = initialized();
    let unknown = client.request("textDocument/rename", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let malformed = client.request("textDocument/hover", json!({"position": "here"}));
    assert_eq!(malformed["error"]["code"], -32602, "{malformed}");
    // A document nobody opened: no hover, not an error.
    let at = json!({"textDocument": {"uri": "file:///nowhere.json"}, "position": {"line": 0, "character": 0}});
    assert_eq!(client.request("textDocument/hover", at)["result"], Value::Null);
    shut_down(client);
}

#[test]
fn a_message_too_large_or_not_json_rpc_is_skipped_with_a_warning_and_the_session_goes_on() {
    let mut client = initialized();
    let path = fixture("ingress.json");
    let uri = uri(&path);
    let text = std::fs::read_to_string(&path).expect("the fixture");
    let before = client.open(&uri, "json", &text)["diagnostics"].clone();
    // Past the limit (8 MiB): passed over without being kept.
    let size = 8 * 1024 * 1024 + 1;
    let mut oversized = format!("Content-Length: {size}\r\n\r\n").into_bytes();
    oversized.resize(oversized.len() + size, b' ');
    client.send_raw(&oversized);
    let warning = client.notified("window/showMessage");
    assert_eq!(warning["type"], 2, "a warning: {warning}");
    assert!(warning["message"].as_str().is_some_and(|m| m.contains(&format!("{size} bytes"))), "{warning}");
    // Not JSON, a batch, and a request whose id is a fraction.
    for body in [
        "hello",
        r#"[{"jsonrpc": "2.0", "method": "initialized"}]"#,
        r#"{"jsonrpc": "2.0", "id": 1.5, "method": "shutdown"}"#,
    ] {
        client.send_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
        let warning = client.notified("window/showMessage");
        assert!(warning["message"].as_str().is_some_and(|m| m.contains("not JSON-RPC")), "{body}: {warning}");
    }
    // The open document is still there, and the server still answers.
    let fix = client.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": uri}, "range": before[0]["range"], "context": {"diagnostics": []}}),
    );
    assert_eq!(fix["result"][0]["title"], "Change to \"port\"", "{fix}");
    shut_down(client);
}

#[test]
fn a_project_file_that_stops_parsing_keeps_its_kind_and_shows_why() {
    let mut client = initialized();
    let uri = "file:///work/shop.json";
    let text = r#"{"version": 1, "name": "shop", "runtime": "node", "app": {"entrypoint": "s.js"}, "spend": {"ceilingMicros": 1}}"#;
    assert_eq!(client.open(uri, "json", text)["diagnostics"], json!([]), "a valid project, known by its content");
    let broken = text.replace("\"name\": \"shop\",", "\"name\": \"shop\"");
    let change = json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": broken}]});
    client.notify("textDocument/didChange", change);
    let published = client.notification("textDocument/publishDiagnostics", uri);
    assert_eq!(published["diagnostics"][0]["code"], "invalid_json", "{published}");
}

#[test]
fn ranged_changes_are_applied_in_order_and_a_stale_one_is_dropped() {
    let mut client = initialized();
    let uri = "file:///work/ingress.json";
    let text = "{\"version\": 1, \"name\": \"shop\", \"runtime\": \"node\",\n \"app\": {\"entrypoint\": \"s.js\"}, \"spend\": {\"ceilingMicros\": 1}}";
    assert_eq!(client.open(uri, "json", text)["diagnostics"], json!([]));
    // Two edits in one change: "runtime" -> "runtyme", then "app" -> "ap".
    let range = |line: u32, from: u32, to: u32| json!({"start": {"line": line, "character": from}, "end": {"line": line, "character": to}});
    let col = text.find("runtime").expect("runtime") as u32;
    let change = json!({"textDocument": {"uri": uri, "version": 5}, "contentChanges": [
        {"range": range(0, col + 4, col + 5), "text": "y"},
        {"range": range(1, 3, 4), "text": ""},
    ]});
    client.notify("textDocument/didChange", change);
    let published = client.notification("textDocument/publishDiagnostics", uri);
    let pointers: Vec<&Value> =
        published["diagnostics"].as_array().expect("list").iter().map(|d| &d["data"]["pointer"]).collect();
    assert!(pointers.contains(&&json!("/runtyme")) && pointers.contains(&&json!("/ap")), "{published}");
    // An older version than the document's is a client's mistake: dropped.
    let stale = json!({"textDocument": {"uri": uri, "version": 4}, "contentChanges": [{"text": "{}"}]});
    client.notify("textDocument/didChange", stale);
    let typo = published["diagnostics"]
        .as_array()
        .expect("list")
        .iter()
        .find(|d| d["data"]["pointer"] == "/runtyme")
        .expect("the typo")
        .clone();
    let params = json!({"textDocument": {"uri": uri}, "range": typo["range"], "context": {"diagnostics": []}});
    let fix = client.request("textDocument/codeAction", params);
    assert_eq!(fix["result"][0]["title"], "Change to \"runtime\"", "still the edited text: {fix}");
    shut_down(client);
}

#[test]
fn a_client_that_breaks_the_framing_ends_the_server_with_exit_1_and_a_reason() {
    // A header line that is no header: where the next message starts is lost.
    let mut client = initialized();
    client.send_raw(b"hello there\r\n\r\n");
    assert_eq!(client.exit_status().code(), Some(1));
    let stderr = client.stderr();
    assert!(stderr.contains("bad header line"), "{stderr}");

    // An announced length the stream never delivers.
    let mut client = initialized();
    client.send_raw(b"Content-Length: 999999999999\r\n\r\n{}");
    client.stdin = None;
    assert_eq!(client.exit_status().code(), Some(1));
    assert!(client.stderr().contains("in the middle of a message"));

    // The editor went away (its pipe closed) without exit.
    let mut client = initialized();
    client.stdin = None;
    assert_eq!(client.exit_status().code(), Some(1));
    assert!(client.stderr().contains("without exit"));

    // `exit` without `shutdown` first: 1, as the protocol says.
    let mut client = initialized();
    client.notify("exit", Value::Null);
    assert_eq!(client.exit_status().code(), Some(1));
}
