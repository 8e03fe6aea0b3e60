//! Digests: `sha256:` over RFC 8785 (JCS) canonical JSON, so they are stable across key
//! order and across the JSON and YAML spellings of a document, while array order (labels)
//! still counts.

use serde::Serialize;
use sha2::{Digest, Sha256};

/// `sha256:<hex>` of the canonical JSON of `value`; `None` if it has no JSON form.
pub fn canonical_digest<T: Serialize>(value: &T) -> Option<String> {
    let mut hasher = Sha256::new();
    serde_json_canonicalizer::to_writer(value, &mut hasher).ok()?;
    Some(format!("sha256:{}", hex(&hasher.finalize())))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        // Writing to a String cannot fail.
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_does_not_count_array_order_does() {
        let a: serde_json::Value = serde_json::from_str(r#"{"b": 1, "a": [1, 2]}"#).expect("json");
        let b: serde_json::Value = serde_json::from_str(r#"{"a": [1, 2], "b": 1}"#).expect("json");
        let c: serde_json::Value = serde_json::from_str(r#"{"a": [2, 1], "b": 1}"#).expect("json");
        assert_eq!(canonical_digest(&a), canonical_digest(&b));
        assert_ne!(canonical_digest(&a), canonical_digest(&c));
        // sha256 of the canonical bytes `{"a":[1,2],"b":1}`, computed with sha256sum.
        assert_eq!(
            canonical_digest(&a).as_deref(),
            Some("sha256:94a786c3662bc7beeb598efa7d8cb58d7bea25d6c275ea9785a0230ff1f8c2ba")
        );
    }
}
