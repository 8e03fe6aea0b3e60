//! The `gateway-prep` binary as an operator's script sees it, without a coordinator: a
//! failure with `--format json` is one JSON error envelope on stdout with its exit code. (The
//! checks and `init` against a real coordinator are in the workspace's `tests/gateway_prep/`.)

/// `init --format json` used to print a failure only as text on standard error.
#[test]
fn a_failed_init_with_format_json_prints_the_error_envelope() {
    let root = tempfile::tempdir().expect("a scratch root");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gateway-prep"))
        .args(["init", "--format", "json", "--root"])
        .arg(root.path())
        .args(["--hostname", "gw1.example.test"])
        .env_remove("SVC_ADMISSION_TOKEN")
        .output()
        .expect("gateway-prep runs");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is one JSON value ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    assert!(json["error"]["code"].as_str().is_some_and(|c| !c.is_empty()), "{json:#}");
    assert!(json["error"]["message"].as_str().is_some(), "{json:#}");
    assert_eq!(json["error"]["exitCode"], out.status.code().expect("an exit code"), "{json:#}");
    assert_ne!(out.status.code(), Some(0));
}
