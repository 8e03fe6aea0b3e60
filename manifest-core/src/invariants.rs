//! Properties that must hold for any input, whatever the bytes. The fuzz targets in `fuzz/`
//! call these, and a normal test replays the committed fuzz corpus through them, so a crash
//! found once stays fixed.

use crate::diagnostic::Diagnostic;
use crate::tree::{Node, Value};
use crate::{Code, MAX_DIAGNOSTICS, parse, render_json, render_text, validate};

/// The JSON reader agrees with serde_json: both accept or both reject, and accepted values
/// are equal (floats to within rounding). Duplicate keys and nesting past our limit are where
/// we differ on purpose.
pub fn json_agrees_with_serde(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let (root, diagnostics) = parse::json(text);
    assert_bounded(&diagnostics);
    let ours_refuses = |code: Code| diagnostics.iter().any(|d| d.code == code);
    if ours_refuses(Code::DuplicateKey) || ours_refuses(Code::NestingTooDeep) {
        return;
    }
    let theirs = serde_json::from_str::<serde_json::Value>(text);
    match (&root, &theirs) {
        (Some(node), Ok(value)) => {
            check_spans(node, text.len());
            let ours = serde_json::to_value(node).expect("a tree always serializes");
            assert!(same(&ours, value), "values differ on {text:?}: ours {ours} theirs {value}");
        }
        (None, Err(_)) => {}
        (Some(_), Err(e)) => {
            // serde_json stops at 128 levels; everything else it refuses we must refuse too.
            assert!(e.to_string().contains("recursion limit"), "we accept what serde_json refuses ({e}): {text:?}")
        }
        (None, Ok(_)) => panic!("we refuse what serde_json accepts ({diagnostics:?}): {text:?}"),
    }
}

/// The YAML reader never panics and every span lies within the text.
pub fn yaml_reads_safely(bytes: &[u8]) {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let (root, diagnostics) = parse::yaml(text);
    assert_bounded(&diagnostics);
    if let Some(node) = root {
        check_spans(&node, text.len());
    }
    for d in diagnostics {
        if let Some(span) = d.span {
            assert!(span.start as usize <= text.len(), "diagnostic span past the end: {d:?}");
        }
    }
}

/// Validation and both renderings never panic, and the verdict is consistent.
pub fn validation_is_consistent(bytes: &[u8]) {
    let report = validate(bytes);
    let has_error = report.diagnostics.iter().any(|d| d.is_error());
    assert_eq!(report.is_valid(), !has_error && report.document.is_some());
    if report.is_valid() {
        assert!(report.authored_digest().is_some(), "a valid document has an authored digest");
        assert!(report.schema_version.is_some());
        if let Err(e) = report.manifest() {
            panic!("a valid document has a model: {e}");
        }
    }
    assert!(
        !report.diagnostics.iter().any(|d| d.code == Code::InternalError),
        "internal error: {:?}",
        report.diagnostics
    );
    for d in &report.diagnostics {
        assert!(d.pointer.is_empty() || d.pointer.starts_with('/'), "bad pointer {:?}", d.pointer);
    }
    assert_bounded(&report.diagnostics);
    assert_eq!(report.omitted() > 0, report.diagnostics.len() > MAX_DIAGNOSTICS);
    if let Some(digest) = report.authored_digest() {
        // The direct canonical writer agrees with the reference crate.
        let text = std::str::from_utf8(bytes).expect("a digest implies UTF-8");
        let root = match crate::Format::detect(text) {
            crate::Format::Json => parse::json(text).0,
            crate::Format::Yaml => parse::yaml(text).0,
        };
        let root = root.expect("a digest implies a tree");
        assert_eq!(Some(digest), crate::canonical_digest(&root), "digest differs from the reference");
    }
    let json: serde_json::Value = serde_json::from_str(&render_json(&report)).expect("render_json is JSON");
    assert_eq!(json["valid"], serde_json::Value::Bool(report.is_valid()));
    let _ = render_text(&report, "fuzz", bytes);
}

/// At most [`MAX_DIAGNOSTICS`] problems, then at most one `diagnostics_truncated`, last.
fn assert_bounded(diagnostics: &[Diagnostic]) {
    let truncated = diagnostics.iter().position(|d| d.code == Code::DiagnosticsTruncated);
    match truncated {
        Some(at) => assert_eq!(at, MAX_DIAGNOSTICS, "the truncation entry comes after exactly the cap"),
        None => assert!(diagnostics.len() <= MAX_DIAGNOSTICS, "{} diagnostics", diagnostics.len()),
    }
    assert!(diagnostics.len() <= MAX_DIAGNOSTICS + 1);
}

fn check_spans(node: &Node<'_>, len: usize) {
    assert!(node.span.start <= node.span.end && node.span.end as usize <= len, "span out of bounds: {:?}", node.span);
    match &node.value {
        Value::Array(items) => items.iter().for_each(|n| check_spans(n, len)),
        Value::Object(members) => members.iter().for_each(|m| check_spans(&m.value, len)),
        _ => {}
    }
}

fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as V;
    match (a, b) {
        (V::Number(x), V::Number(y)) => match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
            (Some(i), Some(j), _, _) => i == j,
            (_, _, Some(i), Some(j)) => i == j,
            _ => {
                let (x, y) = (x.as_f64().unwrap_or(f64::NAN), y.as_f64().unwrap_or(f64::NAN));
                x == y || ((x - y).abs() <= f64::EPSILON * 4.0 * x.abs().max(y.abs()))
            }
        },
        (V::Array(x), V::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (V::Object(x), V::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}
