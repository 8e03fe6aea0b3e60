//! `svc lsp` in the editors the README shows (issue 21, point 5): Neovim with each of the
//! README's configurations (0.8 and later, and 0.7), word for word, and the VS Code extension
//! in `editors/vscode`.
//!
//! Neovim runs headless on a broken manifest and reports what it shows; its quick fix reaches
//! the server as Neovim's own incremental change (issue 45, point 3). VS Code cannot run
//! here: its extension is checked for what can be (Node.js parses it, and it starts `svc` as
//! `svc lsp --stdio`, which the client tests speak to). Without `nvim` or `node` a test says
//! what it skipped, and fails under `SVC_REQUIRE_ALL` (`.ci/run` installs both and sets it).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_owned()
}

/// The bodies of the fenced blocks of `language` under the heading `heading` in the README
/// (to the next heading of its level).
fn readme_blocks(heading: &str, language: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(workspace().join("README.md")).expect("README.md");
    let after = readme.split_once(&format!("\n{heading}\n")).expect("the heading").1;
    let level = heading.split(' ').next().expect("#s");
    let section = after.split(&format!("\n{level} ")).next().expect("the section");
    let fence = format!("```{language}\n");
    section.split(&fence).skip(1).map(|b| b.split_once("```").expect("the block's end").0.to_owned()).collect()
}

/// Debian 12's Neovim is 0.7, one release before `vim.lsp.start`; this gives it the 0.8
/// function with the same meaning (start a client, attach it to the current buffer), so the
/// README's configuration runs as written.
const BEFORE_0_8: &str = r#"
if not vim.lsp.start then
  vim.lsp.start = function(config)
    local id = vim.lsp.start_client(config)
    vim.lsp.buf_attach_client(0, id)
    return id
  end
end
"#;

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|p| p.join(program).is_file()))
}

#[test]
fn neovim_0_8_with_the_readmes_configuration_shows_validates_diagnostics_and_applies_the_quick_fix() {
    let blocks = readme_blocks("#### Neovim", "lua");
    assert!(blocks[0].contains("vim.lsp.start({"), "the first is 0.8's: {}", blocks[0]);
    neovim_session(&format!("{BEFORE_0_8}\n{}", blocks[0]));
}

#[test]
fn neovim_0_7_with_the_readmes_configuration_shows_validates_diagnostics_and_applies_the_quick_fix() {
    let blocks = readme_blocks("#### Neovim", "lua");
    assert_eq!(blocks.len(), 2, "0.8's and 0.7's");
    assert!(!blocks[1].contains("vim.lsp.start(") && blocks[1].contains("vim.lsp.start_client("), "{}", blocks[1]);
    neovim_session(&blocks[1]);
}

/// Runs the session of `neovim-session.lua` with `init` and checks what Neovim saw.
fn neovim_session(init: &str) {
    if !on_path("nvim") {
        svc_test_require::skip("nvim is not on PATH (Debian's `neovim`)");
        return;
    }
    let dir = tempfile::tempdir().expect("a scratch directory");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lsp");
    std::fs::copy(fixtures.join("broken.yaml"), dir.path().join("app.yaml")).expect("copy");
    std::fs::write(dir.path().join("init.lua"), init).expect("init.lua");

    // `svc` on the PATH, as the README asks; Neovim's own files in the scratch directory.
    let svc = Path::new(env!("CARGO_BIN_EXE_svc")).parent().expect("the binary's directory").to_owned();
    let path = std::env::join_paths(
        std::iter::once(svc).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("a PATH");
    let mut nvim = Command::new("nvim")
        .args(["--headless", "-u", "init.lua", "-c"])
        .arg(format!("luafile {}", fixtures.join("neovim-session.lua").display()))
        .arg("app.yaml")
        .current_dir(dir.path())
        .env("PATH", path)
        .env("HOME", dir.path())
        .env("XDG_CONFIG_HOME", dir.path().join("config"))
        .env("XDG_DATA_HOME", dir.path().join("data"))
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nvim starts");
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = nvim.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = nvim.kill();
            panic!("nvim did not finish its session within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "nvim: {status}");
    let seen: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out.json")).expect("out.json")).expect("JSON");

    assert_eq!(seen["filetype"], "yaml");
    assert_eq!(seen["attached"], true, "no diagnostics reached Neovim: {seen}");
    // Neovim shows what `svc manifest validate` says, at the same places.
    let out = Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(["manifest", "validate", "--format", "json", "app.yaml"])
        .current_dir(dir.path())
        .output()
        .expect("svc runs");
    let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let expected: Vec<Value> = report["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| serde_json::json!([d["code"], d["line"], d["column"], d["message"]]))
        .collect();
    let shown: Vec<Value> = seen["before"]
        .as_array()
        .expect("before")
        .iter()
        .map(|d| serde_json::json!([d["code"], d["line"], d["column"], d["message"]]))
        .collect();
    assert_eq!(shown, expected);

    let hover = seen["hover"].as_str().expect("a hover");
    assert!(hover.starts_with("**`jobs`**"), "{hover}");
    assert_eq!(seen["actions"], serde_json::json!(["Change to \"placement\""]), "{seen}");
    assert_eq!(seen["fixed_line"], "  placement: {}");
    let after: Vec<&Value> = seen["after"].as_array().expect("after").iter().map(|d| &d["code"]).collect();
    assert_eq!(after.len(), expected.len() - 1, "{seen}");
    assert!(!after.contains(&&Value::from("unknown_field")), "{seen}");
    // The outline Neovim was given: the manifest's top-level members, in order.
    let expected: Vec<&str> =
        ["schema", "schemaVersion", "applicationId", "release", "runtime", "execution", "deployment"].to_vec();
    assert_eq!(seen["symbols"], serde_json::json!(expected), "{seen}");
}

#[test]
fn the_vscode_extension_parses_and_starts_svc_lsp_for_json_and_yaml() {
    let dir = workspace().join("editors/vscode");
    let package: Value =
        serde_json::from_slice(&std::fs::read(dir.join("package.json")).expect("package.json")).expect("JSON");
    let main = package["main"].as_str().expect("main");
    let source = std::fs::read_to_string(dir.join(main)).expect("the extension's main file");
    for language in ["json", "yaml"] {
        let event = Value::from(format!("onLanguage:{language}"));
        assert!(package["activationEvents"].as_array().expect("events").contains(&event), "{language}");
        assert!(source.contains(&format!("\"{language}\"")), "the document selector has {language}");
    }
    assert_eq!(package["contributes"]["configuration"]["properties"]["svc.path"]["default"], "svc");
    assert!(source.contains("args: [\"lsp\"]") && source.contains("TransportKind.stdio"), "{source}");
    assert_eq!(package["version"], env!("CARGO_PKG_VERSION"), "the extension's version follows the workspace's");
    if !on_path("node") {
        svc_test_require::skip("node is not on PATH: the extension's JavaScript is not parsed (`node --check`)");
        return;
    }
    let check = Command::new("node").arg("--check").arg(dir.join(main)).output().expect("node runs");
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
}
