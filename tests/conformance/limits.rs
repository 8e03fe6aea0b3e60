//! Input limits at their edges: 1 MiB of input, 64 levels of nesting, in JSON and YAML.

use manifest_core::{Code, MAX_DEPTH, MAX_INPUT_BYTES, validate};
use svc_e2e::workspace;

fn codes(bytes: &[u8]) -> Vec<Code> {
    validate(bytes).diagnostics.iter().map(|d| d.code).collect()
}

fn padded_to(len: usize) -> Vec<u8> {
    let mut doc = std::fs::read(workspace().join("tests/golden/v5-minimal.yaml")).expect("golden input");
    doc.resize(len, b'\n');
    doc
}

#[test]
fn exactly_one_mib_is_read_one_byte_more_is_refused() {
    let at = padded_to(MAX_INPUT_BYTES);
    assert!(validate(&at).is_valid(), "{:?}", codes(&at));
    let above = padded_to(MAX_INPUT_BYTES + 1);
    let report = validate(&above);
    assert_eq!(codes(&above), [Code::InputTooLarge]);
    assert_eq!(report.schema_version, None);
    assert_eq!(report.authored_digest(), None);
}

fn nested_json(levels: usize) -> String {
    // The root object is level 1; `x` holds `levels - 1` nested arrays.
    format!(r#"{{"schemaVersion": 5, "x": {}{}}}"#, "[".repeat(levels - 1), "]".repeat(levels - 1))
}

fn nested_yaml(levels: usize) -> String {
    format!("schemaVersion: 5\nx: {}{}\n", "[".repeat(levels - 1), "]".repeat(levels - 1))
}

#[test]
fn sixty_four_levels_are_read_sixty_five_are_refused() {
    for doc in [nested_json(MAX_DEPTH), nested_yaml(MAX_DEPTH)] {
        assert!(!codes(doc.as_bytes()).contains(&Code::NestingTooDeep), "{doc}");
    }
    for doc in [nested_json(MAX_DEPTH + 1), nested_yaml(MAX_DEPTH + 1)] {
        let report = validate(doc.as_bytes());
        assert_eq!(codes(doc.as_bytes()), [Code::NestingTooDeep], "{doc}");
        assert!(report.diagnostics[0].pointer.starts_with("/x/0/0"));
    }
}

#[test]
fn deep_nesting_far_past_the_limit_does_not_overflow_the_stack() {
    let deep = "[".repeat(500_000);
    let doc = format!(r#"{{"x": {deep}"#);
    assert_eq!(codes(doc.as_bytes()), [Code::NestingTooDeep]);
    let doc = format!("x: {deep}");
    assert_eq!(codes(doc.as_bytes()), [Code::NestingTooDeep]);
}
