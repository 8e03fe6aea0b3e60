//! Digests: `sha256:` over RFC 8785 (JCS) canonical JSON, so they are stable across key
//! order and across the JSON and YAML spellings of a document, while array order (labels)
//! still counts.
//!
//! `serde_json_canonicalizer` is the reference implementation. Manifests are strings,
//! booleans, small integers, arrays and objects, for which canonical JSON is simple: members
//! sorted by UTF-16 code units, strings escaped as `JSON.stringify` does, integers in decimal.
//! [`authored_digest`] writes those directly (the crate's general path costs about four times
//! the parse) and hands anything else (a float, an integer beyond 2^53) to the crate. A test
//! and a fuzz invariant check both give the same bytes.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::tree::{Authored, Member, Node, Number, Value};

/// `sha256:<hex>` of the canonical JSON of `value` (through `serde_json_canonicalizer`);
/// `None` if it has no JSON form.
pub fn canonical_digest<T: Serialize>(value: &T) -> Option<String> {
    let mut hasher = Sha256::new();
    serde_json_canonicalizer::to_writer(value, &mut hasher).ok()?;
    Some(format!("sha256:{}", hex(&hasher.finalize())))
}

/// The authored digest of a document tree (members filled in as defaults left out): the same
/// value as [`canonical_digest`] of the authored document, faster.
pub fn authored_digest(root: &Node<'_>) -> Option<String> {
    match canonical_bytes(root, root.span.end as usize) {
        Some(bytes) => Some(sha256(&bytes)),
        None => canonical_digest(&Authored(root)),
    }
}

/// `sha256:<hex>` of some bytes (a schema's digest is of the exact bytes served).
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

/// RFC 8785 bytes of the authored part of a tree (members filled in as defaults left out)
/// holding no float and no integer beyond 2^53; `None` otherwise.
/// `size_hint` is the expected length (the source's length is a good upper bound).
pub fn canonical_bytes(root: &Node<'_>, size_hint: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(size_hint);
    write(root, &mut out).then_some(out)
}

/// Integers up to 2^53 print the same as an ECMAScript number; beyond, they need its rules.
const EXACT_INTEGER: i128 = 1 << 53;

fn write(node: &Node<'_>, out: &mut Vec<u8>) -> bool {
    match &node.value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(Number::Integer(i)) if i.abs() <= EXACT_INTEGER => {
            // Writing to a Vec cannot fail.
            let _ = std::io::Write::write_fmt(out, format_args!("{i}"));
        }
        Value::Number(_) => return false,
        Value::String(s) => string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if !write(item, out) {
                    return false;
                }
            }
            out.push(b']');
        }
        Value::Object(members) => {
            // Manifest objects are small: sort references on the stack when they fit.
            const STACK: usize = 24;
            let mut authored = members.iter().filter(|m| !m.defaulted);
            let Some(first) = authored.clone().next() else {
                out.extend_from_slice(b"{}");
                return true;
            };
            if members.len() <= STACK {
                let mut stack = [first; STACK];
                let mut n = 0;
                for m in authored {
                    stack[n] = m;
                    n += 1;
                }
                return write_members(&mut stack[..n], out);
            }
            let mut heap: Vec<&Member<'_>> = authored.by_ref().collect();
            return write_members(&mut heap, out);
        }
    }
    true
}

/// Writes an object's members in canonical order.
fn write_members(members: &mut [&Member<'_>], out: &mut Vec<u8>) -> bool {
    if members.iter().all(|m| m.key.is_ascii()) {
        members.sort_unstable_by(|a, b| a.key.as_bytes().cmp(b.key.as_bytes()));
    } else {
        members.sort_unstable_by(|a, b| utf16_order(&a.key, &b.key));
    }
    out.push(b'{');
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(&m.key, out);
        out.push(b':');
        if !write(&m.value, out) {
            return false;
        }
    }
    out.push(b'}');
    true
}

/// RFC 8785 sorts keys by UTF-16 code units; UTF-8 byte order agrees except where a
/// character beyond U+FFFF meets one in U+E000..U+FFFF.
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Escapes as ECMAScript `JSON.stringify`: `"` `\` and the short forms, other controls as
/// `\u00xx` in lower case, everything else as is.
fn string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    if !bytes.iter().any(|&b| b == b'"' || b == b'\\' || b < 0x20) {
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => {
                out.extend_from_slice(&bytes[start..i]);
                out.extend_from_slice(format!("\\u{b:04x}").as_bytes());
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        out.extend_from_slice(escape);
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(json: &str) -> Node<'_> {
        crate::parse::json(json).0.expect("json")
    }

    #[test]
    fn key_order_does_not_count_array_order_does() {
        let a = tree(r#"{"b": 1, "a": [1, 2]}"#);
        let b = tree(r#"{"a": [1, 2], "b": 1}"#);
        let c = tree(r#"{"a": [2, 1], "b": 1}"#);
        assert_eq!(authored_digest(&a), authored_digest(&b));
        assert_ne!(authored_digest(&a), authored_digest(&c));
        // sha256 of the canonical bytes `{"a":[1,2],"b":1}`, computed with sha256sum.
        assert_eq!(
            authored_digest(&a).as_deref(),
            Some("sha256:94a786c3662bc7beeb598efa7d8cb58d7bea25d6c275ea9785a0230ff1f8c2ba")
        );
    }

    #[test]
    fn direct_writer_matches_the_reference_crate() {
        for json in [
            r#"{"b": "x\u0001\u001f\u007f\n\t\"\\/", "a": true, "c": null, "é": 1, "😀": 2, "\ue000": 3, "": -9007199254740992}"#,
            r#"[{"z": [], "y": {}}, "\u2028\u2029", 0, -0, 9007199254740992]"#,
            r#"{"a": 1.5, "b": 1e300}"#,
            r#"{"big": 123456789012345678901234567890}"#,
        ] {
            let node = tree(json);
            let reference = serde_json_canonicalizer::to_vec(&node).expect("reference");
            if let Some(ours) = canonical_bytes(&node, 0) {
                assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&reference), "{json}");
            }
            assert_eq!(authored_digest(&node), canonical_digest(&node), "{json}");
        }
    }
}
