//! Snapshots of what `svc ingress` prints for people (`snapshots/`): a changed wording or
//! layout fails here until reviewed (`INSTA_UPDATE=always cargo test -p svc-cli --lib deploy`).
//! The inputs are API answers in `cli/tests/status/`, with fixed ids and times.

use super::*;

/// An API answer from `cli/tests/status/`.
fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/status").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn status(name: &str) -> Status {
    serde_json::from_slice(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Live, with a customer hostname, a redeploy validating beside it and one hint.
#[test]
fn status_of_a_live_deployment() {
    // Ten minutes before its funded periods end (`runsOutAt`).
    insta::assert_snapshot!(status_text_at(&status("live.json"), 1_700_006_600_000));
}

/// Failed: its app exited, a hostname waits for DNS, validation failed; hints with a record.
#[test]
fn status_of_a_failed_deployment() {
    insta::assert_snapshot!(status_text_at(&status("failed.json"), 1_700_006_600_000));
}

/// `svc ingress hints` prints the same numbered list `status` ends with.
#[test]
fn hints_are_numbered_with_their_fix_and_record() {
    let failed = status("failed.json");
    let text = hints_text(&failed.hints);
    assert!(status_text_at(&failed, 0).ends_with(&format!("hints:\n{text}")));
    insta::assert_snapshot!(text);
}

/// A refusal with diagnostics and hints, and answers that are not the envelope.
#[test]
fn refusals_of_the_relay() {
    let refused = api_error_text(422, &fixture("refused.json"));
    insta::assert_snapshot!("refused_with_diagnostics_and_hints", refused);
    let bare = [
        api_error_text(
            409,
            br#"{"error": {"code": "quote_expired", "message": "the quote expired; ask for a new one"}}"#,
        ),
        api_error_text(502, b"<html>bad gateway</html>"),
    ];
    insta::assert_snapshot!("refused_without_details", bare.concat());
}
