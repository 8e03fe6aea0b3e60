//! The authored digest: RFC 8785 canonical JSON of the whole document, stable across JSON and
//! YAML spellings and key order; label order changes it; shown in `validate` output.

use svc_e2e::workspace;

fn digest_of(bytes: &[u8]) -> String {
    manifest_core::validate(bytes).authored_digest().expect("the document parses")
}

fn golden(name: &str) -> Vec<u8> {
    std::fs::read(workspace().join("tests/golden").join(name)).expect("golden input")
}

#[test]
fn json_and_yaml_spellings_with_other_key_order_share_a_digest() {
    assert_eq!(digest_of(&golden("v5-minimal.yaml")), digest_of(&golden("v5-minimal.json")));
}

#[test]
fn label_order_changes_the_digest() {
    let yaml = String::from_utf8(golden("v5-full.yaml")).expect("utf-8");
    let swapped = yaml.replace("labels: [team-a, nightly.batch]", "labels: [nightly.batch, team-a]");
    assert_ne!(yaml, swapped);
    assert_ne!(digest_of(yaml.as_bytes()), digest_of(swapped.as_bytes()));
}

#[test]
fn metadata_changes_the_authored_digest() {
    let yaml = String::from_utf8(golden("v5-full.yaml")).expect("utf-8");
    let other = yaml.replace("description: Every V5 field, written out.", "description: Something else.");
    assert_ne!(digest_of(yaml.as_bytes()), digest_of(other.as_bytes()));
}

#[test]
fn the_digest_is_of_the_document_as_authored_not_defaulted() {
    // Writing a default out changes the authored document, so it changes the digest.
    let yaml = String::from_utf8(golden("v5-minimal.yaml")).expect("utf-8");
    let explicit = yaml.replace("state:", "debug:\n  holdOnFailure: false\nstate:");
    assert_ne!(digest_of(yaml.as_bytes()), digest_of(explicit.as_bytes()));
}

#[test]
fn the_digest_is_sha256_of_rfc_8785_bytes() {
    // {"b":[1,"x"],"a":true} canonicalizes to {"a":true,"b":[1,"x"]}.
    let report = manifest_core::validate(br#"{"b": [1, "x"], "a": true}"#);
    let canonical = br#"{"a":true,"b":[1,"x"]}"#;
    let want = sha256_hex(canonical);
    assert_eq!(report.authored_digest(), Some(format!("sha256:{want}")));
}

/// SHA-256 through the system's `sha256sum`, an implementation independent of ours.
fn sha256_hex(bytes: &[u8]) -> String {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new("sha256sum").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("sha256sum");
    child.stdin.take().expect("stdin").write_all(bytes).expect("write");
    let out = child.wait_with_output().expect("sha256sum output");
    String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or_default().to_owned()
}
