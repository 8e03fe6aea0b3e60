//! Ids in a path checked before the store (issue 40, point 5), as both services' suites
//! check them: the ids each route is tried with, and what the refusal must be.

use serde_json::Value;

/// The refused ids, as written in a path (a NUL, an escape sequence, 10,000 bytes), and what
/// the refusal says of each.
pub fn bad_ids() -> Vec<(String, String)> {
    vec![
        ("%00".to_owned(), "control character (U+0000, at byte 0)".to_owned()),
        ("web%1b%5B31m".to_owned(), "control character (U+001B, at byte 3)".to_owned()),
        ("a".repeat(10_000), "10000 bytes long; ids are at most 253".to_owned()),
    ]
}

/// A 400 `invalid_path_id` naming `field` and saying `says`, never echoing the id; `what`
/// names the request in a failure.
pub fn assert_refused(status: u16, body: &[u8], field: &str, says: &str, what: &str) {
    let text = String::from_utf8_lossy(body);
    assert_eq!(status, 400, "{what}: {text}");
    let body: Value = serde_json::from_slice(body).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {text}"));
    assert_eq!(body["error"]["code"], "invalid_path_id", "{what}: {body}");
    assert_eq!(body["error"]["field"], field, "{what}: {body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(field) && message.contains(says), "{what}: {message}");
    assert!(!message.contains('\u{0}') && !message.contains('\u{1b}') && message.len() < 200, "{what}: {message:?}");
}
