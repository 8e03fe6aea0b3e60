//! The offline pipeline `svc manifest validate` runs: read (JSON or YAML), pick the version,
//! layer 1 (strict schema, defaults), layer 2 (cross-field rules), then place every diagnostic
//! in the source and sort them into document order.

use serde::Serialize;

use crate::bounded::{Bounded, MAX_DIAGNOSTICS, Omitted, finish};
use crate::check::check_document;
use crate::diagnostic::{Anchor, Code, Diagnostic, Layer};
use crate::digest::authored_digest;
use crate::source::{Format, Parsed, column, decode};
use crate::tree::{Node, Number, Span, Value, to_u32};
use crate::{json, v4, v5, yaml};

/// A valid manifest, fully defaulted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Manifest {
    /// Manifest V4.
    V4(Box<v4::ManifestV4>),
    /// Manifest V5.
    V5(Box<v5::ManifestV5>),
}

/// Why [`Report::manifest`] gave no model.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The document has errors; see [`Report::diagnostics`].
    #[error("the manifest is invalid")]
    Invalid,
    /// The checked document does not fit the typed model: a shape table and a model struct
    /// disagree. This is a bug in this crate, never the author's fault.
    #[error("internal error: the checked document does not fit the model: {0}")]
    Model(#[from] crate::de::ModelError),
}

/// The outcome of validating one document.
#[derive(Debug, Clone)]
pub struct Report<'a> {
    /// The syntax the document was read as (none if it could not be decoded).
    pub format: Option<Format>,
    /// 4 or 5 once read from `schemaVersion`.
    pub schema_version: Option<u8>,
    /// Every problem, in document order.
    pub diagnostics: Vec<Diagnostic>,
    /// The document as read; once layer 1 has run, with every default filled in (those
    /// members are marked `defaulted`).
    pub document: Option<Node<'a>>,
    /// Whether layer 1 ran on `document`.
    checked: bool,
    /// Whether the document was read as an object without a parse-level error, so it has an
    /// authored digest.
    digestible: bool,
    /// How many problems were found past the cap (counted, not listed).
    omitted: usize,
}

impl Report<'_> {
    /// How many problems were found past [`MAX_DIAGNOSTICS`]: counted, not listed (the last
    /// diagnostic, `diagnostics_truncated`, says so). Past the cap layer 2 does not run, so
    /// the count covers what the reader and layer 1 found.
    pub fn omitted(&self) -> usize {
        self.omitted
    }

    /// Valid: read as a manifest of a known version, with no error (warnings allowed).
    pub fn is_valid(&self) -> bool {
        self.checked && !self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// `sha256:` of the RFC 8785 canonical JSON of the document as authored (defaults left
    /// out), when it was read as an object without a parse-level error. Computed on demand:
    /// it identifies the document and is not part of validation.
    pub fn authored_digest(&self) -> Option<String> {
        self.document.as_ref().filter(|_| self.digestible).and_then(authored_digest)
    }

    /// The typed, fully defaulted model of a valid document. Validation itself does not need
    /// it, so it is built on demand (for policy materialization, or to print the model).
    pub fn manifest(&self) -> Result<Manifest, ManifestError> {
        let (Some(document), true) = (&self.document, self.is_valid()) else { return Err(ManifestError::Invalid) };
        Ok(match self.schema_version {
            Some(4) => Manifest::V4(crate::de::from_node(document)?),
            _ => Manifest::V5(crate::de::from_node(document)?),
        })
    }
}

/// Validates one document (layers 1 and 2). Never panics, whatever the bytes. The report
/// lists at most [`MAX_DIAGNOSTICS`] diagnostics, then one `diagnostics_truncated` entry.
pub fn validate(bytes: &[u8]) -> Report<'_> {
    let mut report = Report {
        format: None,
        schema_version: None,
        diagnostics: Vec::new(),
        document: None,
        checked: false,
        digestible: false,
        omitted: 0,
    };
    let text = match decode(bytes) {
        Ok(text) => text,
        Err(d) => {
            report.diagnostics.push(d);
            return report;
        }
    };
    let format = Format::detect(text);
    report.format = Some(format);
    let Parsed { root, diagnostics, stand_ins } = match format {
        Format::Json => json::parse(text),
        Format::Yaml => yaml::parse(text),
    };
    let (read, mut omitted) = diagnostics.into_parts();
    report.diagnostics = read;
    if let Some(mut root) = root {
        let read_overflowed = omitted.count > 0;
        omitted = omitted.and(run(&mut root, format, stand_ins, read_overflowed, &mut report));
        report.document = Some(root);
    }
    place(text, &mut report.diagnostics);
    report.omitted = finish(&mut report.diagnostics, omitted);
    report
}

/// Layers 1 and 2 on a document read as a tree; what layer 1 found past the cap.
fn run(
    root: &mut Node<'_>,
    format: Format,
    stand_ins: Vec<String>,
    read_overflowed: bool,
    report: &mut Report<'_>,
) -> Omitted {
    if !matches!(root.value, Value::Object(_)) {
        let message = format!("a manifest is an object, found {}", root.value.kind());
        report.diagnostics.push(Diagnostic::error(Layer::Schema, Code::RootNotObject, "", message));
        return Omitted::default();
    }
    report.digestible = report.diagnostics.is_empty();
    let version = match root.get("schemaVersion").map(|n| &n.value) {
        None => {
            report.diagnostics.push(Diagnostic::error(
                Layer::Schema,
                Code::MissingRequiredField,
                "/schemaVersion",
                "missing required field \"schemaVersion\": 4 or 5",
            ));
            return Omitted::default();
        }
        Some(Value::Number(Number::Integer(4))) => 4,
        Some(Value::Number(Number::Integer(5))) => 5,
        Some(other) => {
            let shown = match other {
                Value::Number(Number::Integer(i)) => i.to_string(),
                Value::Number(Number::Float(f)) => format!("{f:?}"),
                Value::String(s) => format!("\"{s}\" (a string)"),
                v => v.kind().to_owned(),
            };
            report.diagnostics.push(Diagnostic::error(
                Layer::Schema,
                Code::UnsupportedSchemaVersion,
                "/schemaVersion",
                format!("schemaVersion {shown} is not supported; use the integer 4 or 5"),
            ));
            return Omitted::default();
        }
    };
    report.schema_version = Some(version);
    if version == 4 && format == Format::Yaml {
        report.diagnostics.push(Diagnostic::error(
            Layer::Schema,
            Code::YamlNotSupportedForV4,
            "/schemaVersion",
            "Manifest V4 is JSON only; write this document as JSON, or move it to schemaVersion 5",
        ));
        return Omitted::default();
    }

    let shape = if version == 4 { &v4::MANIFEST } else { &v5::MANIFEST };
    // A stand-in (an alias read as null) is already reported; do not report it again.
    let mut schema = Bounded::silencing(stand_ins);
    let notes = check_document(root, shape, &mut schema);
    let past_cap = read_overflowed || schema.overflowed() || report.diagnostics.len() + schema.len() > MAX_DIAGNOSTICS;
    let (mut schema, omitted) = schema.into_parts();
    report.diagnostics.append(&mut schema);

    // Past the cap layer 2 does not run: the list is already cut, and it would judge
    // sections whose earlier problems were only counted.
    if !past_cap {
        if version == 4 {
            v4::semantic(root, notes, &mut report.diagnostics);
        } else {
            v5::semantic(root, notes, &mut report.diagnostics);
        }
    }
    locate(root, &mut report.diagnostics);
    report.checked = true;
    omitted
}

/// Gives each diagnostic without a span the span its pointer names: the key for problems with
/// the key itself, the value otherwise, and for a missing field the object it belongs in.
pub(crate) fn locate(root: &Node<'_>, diagnostics: &mut [Diagnostic]) {
    for d in diagnostics.iter_mut().filter(|d| d.span.is_none()) {
        let r = root.resolve(&d.pointer);
        let span = match (r.complete, d.anchor, r.member) {
            (true, Anchor::Key, Some(m)) => m.key_span,
            (true, _, _) => r.node.span,
            (false, _, Some(m)) => m.key_span,
            (false, _, None) => Span { start: r.node.span.start, end: r.node.span.start.saturating_add(1) },
        };
        d.span = Some(span);
    }
}

/// Sorts into document order (stable, so problems at one place keep the order they were found
/// in) and adds line and column, in one forward pass over the text.
pub(crate) fn place(text: &str, diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by_key(|d| d.span.map_or(0, |s| s.start));
    let bytes = text.as_bytes();
    let (mut line, mut line_start, mut scanned) = (1u32, 0usize, 0usize);
    for d in diagnostics.iter_mut() {
        let Some(span) = d.span else { continue };
        let offset = (span.start as usize).min(bytes.len());
        let gap = &bytes[scanned..offset];
        if let Some(last) = gap.iter().rposition(|&b| b == b'\n') {
            line += to_u32(count_newlines(gap));
            line_start = scanned + last + 1;
        }
        scanned = offset;
        d.line = Some(line);
        d.column = Some(column(text, line_start, offset));
    }
}

/// The number of `\n` in `bytes`, counted in blocks small enough for an 8-bit count: a loop
/// the compiler turns into vector operations of 16 bytes or more.
fn count_newlines(bytes: &[u8]) -> usize {
    bytes.chunks(255).map(|block| usize::from(block.iter().fold(0u8, |n, &b| n + u8::from(b == b'\n')))).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newlines_are_counted_across_blocks() {
        for len in [0, 1, 254, 255, 256, 600, 1000] {
            let bytes: Vec<u8> = (0..len).map(|i| if i % 3 == 0 { b'\n' } else { b'x' }).collect();
            assert_eq!(count_newlines(&bytes), bytes.iter().filter(|&&b| b == b'\n').count(), "{len}");
        }
        assert_eq!(count_newlines(&[b'\n'; 1000]), 1000);
    }

    fn codes(report: &Report<'_>) -> Vec<Code> {
        report.diagnostics.iter().map(|d| d.code).collect()
    }

    /// A did-you-mean once looked through the object's keys for each unknown one: 50,000
    /// unknown keys took minutes. Linear work grows 4x from 4,000 keys to 16,000; quadratic
    /// 16x: a ratio in one run, not a limit.
    #[test]
    fn many_unknown_keys_in_one_object_are_checked_in_linear_time() {
        let document = |keys: usize| {
            let members: String = (0..keys).map(|i| format!(",\"jobz{i}\": 1")).collect();
            format!("{{\"schema\": \"svc.application-manifest\", \"schemaVersion\": 5{members}}}")
        };
        let time = |text: &str| {
            let start = std::time::Instant::now();
            assert!(!validate(text.as_bytes()).is_valid());
            start.elapsed()
        };
        // The fastest of five each, the sizes taken in turn: a run stretched by other load
        // (CI saw 11x on a machine busy with builds, best of three each, one size after the
        // other) would otherwise decide.
        let (small, large) = (document(4_000), document(16_000));
        let (mut fastest_small, mut fastest_large) = (std::time::Duration::MAX, std::time::Duration::MAX);
        for _ in 0..5 {
            fastest_small = fastest_small.min(time(&small));
            fastest_large = fastest_large.min(time(&large));
        }
        let ratio = fastest_large.as_secs_f64() / fastest_small.as_secs_f64().max(1e-9);
        assert!(ratio < 8.0, "16,000 unknown keys took {ratio:.1}x the time of 4,000");
    }

    #[test]
    fn nine_hundred_kilobytes_of_repeated_keys_list_a_thousand_problems_and_count_the_rest() {
        let text = "a: 1\n".repeat(900 * 1024 / 5);
        let report = validate(text.as_bytes());
        assert_eq!(report.diagnostics.len(), MAX_DIAGNOSTICS + 1);
        // Document order: the missing `schemaVersion` (the whole document) first.
        assert_eq!(report.diagnostics[0].code, Code::MissingRequiredField);
        assert!(report.diagnostics[1..MAX_DIAGNOSTICS].iter().all(|d| d.code == Code::DuplicateKey));
        assert_eq!(report.diagnostics[1].line, Some(2), "the first duplicates are the ones listed");
        let last = &report.diagnostics[MAX_DIAGNOSTICS];
        assert_eq!((last.code, last.pointer.as_str(), last.line), (Code::DiagnosticsTruncated, "", None));
        let duplicates = 900 * 1024 / 5 - 1;
        assert_eq!(report.omitted(), duplicates + 1 - MAX_DIAGNOSTICS);
        assert!(last.message.starts_with(&format!("{} more problems not shown", report.omitted())), "{}", last.message);
        assert!(!report.is_valid());
    }

    #[test]
    fn thousands_of_unknown_fields_are_bounded_in_layer_one_and_layer_two_is_skipped() {
        // 1,500 unknown fields after a cross-field error layer 2 would report.
        let mut text = String::from("{\"schemaVersion\": 5, \"execution\": {\"mode\": \"once\"}");
        text.push_str(", \"deployment\": {\"lifecycle\": {\"renewal\": {\"mode\": \"automatic\"}}}");
        let closed = format!("{text}}}");
        let within = validate(closed.as_bytes());
        assert!(codes(&within).contains(&Code::RenewalRequiresContinuous), "{:?}", codes(&within));
        for i in 0..1500 {
            text.push_str(&format!(", \"unknown{i}\": 1"));
        }
        text.push('}');
        let report = validate(text.as_bytes());
        assert_eq!(report.diagnostics.len(), MAX_DIAGNOSTICS + 1);
        assert_eq!(report.diagnostics.last().map(|d| d.code), Some(Code::DiagnosticsTruncated));
        assert!(!codes(&report).contains(&Code::RenewalRequiresContinuous));
        assert!(report.omitted() > 500);
        assert!(!report.is_valid());
    }

    #[test]
    fn exactly_a_thousand_problems_need_no_truncation_entry() {
        // V5's missing required fields, then one unknown field each up to the cap.
        let base = validate(b"{\"schemaVersion\": 5}");
        let required = base.diagnostics.len();
        let mut text = String::from("{\"schemaVersion\": 5");
        for i in 0..MAX_DIAGNOSTICS - required {
            text.push_str(&format!(", \"unknown{i}\": 1"));
        }
        text.push('}');
        let report = validate(text.as_bytes());
        assert_eq!(report.diagnostics.len(), MAX_DIAGNOSTICS);
        assert!(!codes(&report).contains(&Code::DiagnosticsTruncated));
        assert_eq!(report.omitted(), 0);
        text.insert_str(text.len() - 1, ", \"one_more\": 1");
        let report = validate(text.as_bytes());
        assert_eq!(report.diagnostics.len(), MAX_DIAGNOSTICS + 1);
        assert_eq!(report.omitted(), 1);
    }

    #[test]
    fn problems_under_yaml_aliases_are_reported_once() {
        let mut text = String::from("schemaVersion: 5\nx: &a 1\n");
        for i in 0..3000 {
            text.push_str(&format!("k{i}: *a\n"));
        }
        let report = validate(text.as_bytes());
        // The anchor, 3,000 aliases, the unknown field `x` and V5's missing fields; the unknown
        // fields `k0`... under the stand-ins are silenced, neither listed nor counted.
        let missing = validate(b"schemaVersion: 5\n").diagnostics.len();
        assert_eq!(report.diagnostics.len(), MAX_DIAGNOSTICS + 1);
        assert!(!report.diagnostics.iter().any(|d| d.code == Code::UnknownField && d.pointer.starts_with("/k")));
        assert_eq!(report.omitted(), 1 + 3000 + 1 + missing - MAX_DIAGNOSTICS);
    }
}
