//! Issue 45, point 3, as a client drives `svc lsp`: incremental sync with ranged edits in
//! UTF-16 positions, document symbols, completion of values, and flow-style YAML, each
//! answer held to what `svc manifest validate` or the shape tables say.

use serde_json::{Value, json};

use super::{initialized, shut_down};

/// A valid Manifest V5 in YAML, most of it in flow style, with characters of one and two
/// UTF-16 units before the places the test edits.
const FLOW: &str = "schema: svc.application-manifest
schemaVersion: 5
applicationId: node-demo
metadata: {description: \"d\u{e9}mo \u{1d11e}\", labels: [demo, nodejs]}
release: {mode: source}
runtime: {kind: javascript, entrypoint: {file: server.js}}
execution: {mode: continuous}
deployment:
  jobs: 1
  schedule: {duration: 1h}
  spend: {unit: service_credit_micros, perJob: \"250000\", rate: {amount: \"5000000\", window: 30d}}
state: {mode: off}
";

fn at(line: u32, character: u32) -> Value {
    json!({"line": line, "character": character})
}

fn range(line: u32, from: u32, to: u32) -> Value {
    json!({"start": at(line, from), "end": at(line, to)})
}

/// The UTF-16 column of `needle` on line `line` of `text` (what an editor counts).
fn column(text: &str, line: usize, needle: &str) -> u32 {
    let line = text.lines().nth(line).expect("the line");
    let byte = line.find(needle).unwrap_or_else(|| panic!("{needle} in {line}"));
    line[..byte].encode_utf16().count() as u32
}

fn labels(answer: &Value) -> Vec<String> {
    let items = answer["result"]["items"].as_array().unwrap_or_else(|| panic!("items: {answer}"));
    items.iter().filter_map(|i| i["label"].as_str().map(str::to_owned)).collect()
}

fn validate(text: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("a scratch directory");
    let path = dir.path().join("m.yaml");
    std::fs::write(&path, text).expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(["manifest", "validate", "--format", "json"])
        .arg(&path)
        .output()
        .expect("svc manifest validate runs");
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    report["diagnostics"].as_array().expect("diagnostics").clone()
}

#[test]
fn ranged_edits_in_utf16_keep_the_servers_text_the_editors_in_flow_yaml() {
    assert!(validate(FLOW).is_empty(), "the fixture is valid: {:?}", validate(FLOW));
    let mut client = initialized();
    let uri = "file:///work/flow.yaml";
    assert_eq!(client.open(uri, "yaml", FLOW)["diagnostics"], json!([]));

    // Three keystrokes as an editor sends them, each a range in the text the last one left:
    // on line 3, after `é` (1 unit, 2 bytes) and `𝄞` (2 units, 4 bytes), `demo` -> `demos`;
    // on line 5, `javascript` -> `javascrip` (a wrong arm); on line 9, `1h` -> `0h`.
    let demo = column(FLOW, 3, "demo,");
    let kind = column(FLOW, 5, "javascript");
    let duration = column(FLOW, 9, "1h");
    let change = json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
        {"range": range(3, demo + 4, demo + 4), "text": "s"},
        {"range": range(5, kind + 9, kind + 10), "text": ""},
        {"range": range(9, duration, duration + 1), "text": "0"},
    ]});
    client.notify("textDocument/didChange", change);
    let published = client.notification("textDocument/publishDiagnostics", uri);
    assert_eq!(published["version"], 2);
    let edited = FLOW.replacen("demo, nodejs", "demos, nodejs", 1).replacen("javascript", "javascrip", 1).replacen(
        "duration: 1h",
        "duration: 0h",
        1,
    );
    // The server's text is the editor's: its diagnostics are validate's of the edited file,
    // at the same UTF-16 positions.
    let expected = validate(&edited);
    let shown = published["diagnostics"].as_array().expect("diagnostics");
    assert_eq!(shown.len(), expected.len(), "{shown:#?}\n{expected:#?}");
    assert!(expected.len() >= 2, "a wrong arm and a zero duration: {expected:#?}");
    for (got, want) in shown.iter().zip(&expected) {
        assert_eq!((&got["code"], &got["data"]["pointer"]), (&want["code"], &want["pointer"]), "{got}");
        let start = &got["range"]["start"];
        let line = want["line"].as_u64().expect("line") as usize - 1;
        // validate counts columns in characters; the protocol in UTF-16 units.
        let chars = want["column"].as_u64().expect("column") as usize - 1;
        let units: usize = edited.lines().nth(line).expect("line").chars().take(chars).map(char::len_utf16).sum();
        assert_eq!(
            (start["line"].as_u64(), start["character"].as_u64()),
            (Some(line as u64), Some(units as u64)),
            "{got}"
        );
    }
    let pointers: Vec<&Value> = shown.iter().map(|d| &d["data"]["pointer"]).collect();
    assert!(pointers.contains(&&json!("/runtime/kind")), "the arm in a flow mapping: {pointers:?}");
    let on_kind = shown.iter().find(|d| d["data"]["pointer"] == "/runtime/kind").expect("kind");
    assert_eq!(on_kind["range"], range(5, kind, kind + 9), "the flow scalar's own range: {on_kind}");

    // A label after the astral character: the edit landed after `demo`, so the list reads
    // `demos` (the outline shows the text as the server holds it).
    let symbols = client.request("textDocument/documentSymbol", json!({"textDocument": {"uri": uri}}));
    let metadata = &symbols["result"].as_array().expect("symbols")[3];
    assert_eq!(metadata["name"], "metadata", "{symbols}");
    let labels_symbol = &metadata["children"][1];
    assert_eq!(labels_symbol["children"][0]["detail"], "demos", "{labels_symbol}");
    assert_eq!(labels_symbol["children"][0]["selectionRange"]["start"], at(3, demo), "{labels_symbol}");

    // Undo with one whole-text change; the stale version after it is dropped.
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"text": FLOW}]}),
    );
    assert_eq!(client.notification("textDocument/publishDiagnostics", uri)["diagnostics"], json!([]));
    shut_down(client);
}

#[test]
fn document_symbols_nest_as_the_manifest_does_in_yaml_and_json() {
    let mut client = initialized();
    let uri = "file:///work/flow.yaml";
    client.open(uri, "yaml", FLOW);
    let answer = client.request("textDocument/documentSymbol", json!({"textDocument": {"uri": uri}}));
    let symbols = answer["result"].as_array().expect("a list");
    let names: Vec<&str> = symbols.iter().filter_map(|s| s["name"].as_str()).collect();
    let expected = "schema schemaVersion applicationId metadata release runtime execution deployment state";
    assert_eq!(names.join(" "), expected, "one symbol per member, in order");
    let runtime = &symbols[5];
    // Kind 19 is Object, 15 String: the protocol's numbers.
    assert_eq!(
        (runtime["kind"].as_u64(), runtime["detail"].as_str()),
        (Some(19), Some("kind: javascript")),
        "{runtime}"
    );
    assert_eq!(runtime["selectionRange"], range(5, 0, 7));
    let file = &runtime["children"][1]["children"][0];
    let col = column(FLOW, 5, "file");
    assert_eq!((file["name"].as_str(), file["kind"].as_u64()), (Some("file"), Some(15)), "{file}");
    assert_eq!(file["range"], range(5, col, col + "file: server.js".len() as u32), "{file}");
    let window = &symbols[7]["children"][2]["children"][2]["children"][1];
    assert_eq!((window["name"].as_str(), window["detail"].as_str()), (Some("window"), Some("30d")), "{window}");

    // The same manifest in JSON has the same outline.
    let json_uri = "file:///work/m.json";
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/node-demo/manifest.v4.json"))
        .expect("the V4 demo manifest");
    client.open(json_uri, "json", &text);
    let answer = client.request("textDocument/documentSymbol", json!({"textDocument": {"uri": json_uri}}));
    let symbols = answer["result"].as_array().expect("a list");
    let root: serde_json::Map<String, Value> = serde_json::from_str(&text).expect("JSON");
    let mut names: Vec<&str> = symbols.iter().filter_map(|s| s["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, root.keys().map(String::as_str).collect::<Vec<_>>(), "one symbol per member");
    assert!(symbols.iter().all(|s| s["range"]["start"]["line"].as_u64() > Some(0)), "members start below the `{{`");

    // Not ours: nothing.
    let other = "file:///work/package.json";
    client.open(other, "json", r#"{"name": "x"}"#);
    let answer = client.request("textDocument/documentSymbol", json!({"textDocument": {"uri": other}}));
    assert_eq!(answer["result"], json!([]));
    shut_down(client);
}

#[test]
fn completion_offers_values_in_flow_yaml_durations_and_defaults() {
    let mut client = initialized();
    let uri = "file:///work/flow.yaml";
    client.open(uri, "yaml", FLOW);
    let complete = |client: &mut super::Client, line: u32, character: u32| {
        client
            .request("textDocument/completion", json!({"textDocument": {"uri": uri}, "position": at(line, character)}))
    };
    // A union's arm inside a flow mapping, the word under the cursor replaced.
    let kind = column(FLOW, 5, "javascript");
    let answer = complete(&mut client, 5, kind + 4);
    assert!(labels(&answer).contains(&"native_image".to_owned()), "{answer}");
    let item =
        answer["result"]["items"].as_array().expect("items").iter().find(|i| i["label"] == "javascript").cloned();
    assert_eq!(item.expect("javascript")["textEdit"]["range"], range(5, kind, kind + 10));

    // A key in a flow mapping: the fields not written yet.
    let line = 9;
    let end = column(FLOW, line as usize, "}");
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"range": range(line, end, end), "text": ", "}]}),
    );
    assert_eq!(labels(&complete(&mut client, line, end + 2)), ["phasing"]);

    // A duration: the number typed with each unit, then the format's examples.
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"range": range(line, end - 2, end), "text": "15"}]}),
    );
    let answer = complete(&mut client, line, end);
    let offered = labels(&answer);
    assert_eq!(offered[..5], ["15ms", "15s", "15m", "15h", "15d"], "{offered:?}");
    assert!(offered.contains(&"30d".to_owned()), "{offered:?}");
    shut_down(client);
}
