//! Reads a V5 YAML document into a [`Node`] tree from `saphyr-parser` events.
//!
//! Events show anchors, aliases, tags and document starts with positions, so everything the
//! spec refuses is refused here, each with its own code and position: duplicate keys, anchors,
//! aliases, merge keys, explicit tags, non-string keys and a second document. Plain scalars
//! resolve by the YAML 1.2 core schema only (`yes`, `no`, `on`, `off` stay strings).

use std::collections::HashSet;

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError, Span as YamlSpan};

use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::shape::Hint;
use crate::source::{MAX_DEPTH, Parsed};
use crate::tree::{Member, Node, Number, PointerBuf, Span, Text, Value, same_key, to_u32};

/// Reads `text` as one YAML document.
pub(crate) fn parse(text: &str) -> Parsed<'_> {
    let mut builder = Builder {
        offsets: Offsets::new(text),
        frames: Vec::new(),
        root: None,
        version: None,
        documents: 0,
        parsed: Parsed::default(),
    };
    let mut parser = Parser::new_from_str(text);
    while let Some(event) = parser.next_event() {
        let step = match event {
            Ok((event, span)) => builder.event(event, span),
            Err(e) => Err(builder.scan_error(&e)),
        };
        match step {
            Ok(true) => {}
            Ok(false) => break,
            Err(fatal) => {
                builder.parsed.diagnostics.push(fatal);
                return builder.parsed;
            }
        }
    }
    let mut parsed = builder.parsed;
    match builder.root {
        // `---` alone, or an empty plain scalar: nothing was written.
        Some((root, true)) => parsed.diagnostics.push(empty(root.span)),
        Some((root, false)) => parsed.root = Some(root),
        None => parsed.diagnostics.push(empty(Span::new(0, 0))),
    }
    parsed
}

fn empty(span: Span) -> Diagnostic {
    Diagnostic::error(Layer::Schema, Code::EmptyDocument, "", "the document is empty").with_span(span)
}

/// Character index to byte offset (saphyr counts characters).
enum Offsets {
    Ascii,
    Table(Vec<u32>),
}

impl Offsets {
    fn new(text: &str) -> Offsets {
        if text.is_ascii() {
            return Offsets::Ascii;
        }
        let mut table: Vec<u32> = text.char_indices().map(|(i, _)| to_u32(i)).collect();
        table.push(to_u32(text.len()));
        Offsets::Table(table)
    }

    fn byte(&self, char_index: usize) -> usize {
        match self {
            Offsets::Ascii => char_index,
            Offsets::Table(t) => t.get(char_index).or(t.last()).map_or(0, |&b| b as usize),
        }
    }

    fn span(&self, span: &YamlSpan) -> Span {
        Span::new(self.byte(span.start.index()), self.byte(span.end.index()))
    }
}

/// A mapping key waiting for its value.
struct PendingKey<'a> {
    key: Text<'a>,
    span: Span,
    /// False when the member is dropped (merge key, non-string key, duplicate).
    keep: bool,
}

enum Frame<'a> {
    Seq {
        start: usize,
        items: Vec<Node<'a>>,
        hint: Hint,
    },
    Map {
        start: usize,
        members: Vec<Member<'a>>,
        key: Option<PendingKey<'a>>,
        seen: Option<HashSet<String>>,
        hint: Hint,
    },
}

struct Builder<'a> {
    offsets: Offsets,
    frames: Vec<Frame<'a>>,
    /// The finished root, and whether it was an empty plain scalar.
    root: Option<(Node<'a>, bool)>,
    /// The root's `schemaVersion` (4 or 5) once read: which table sizes the root's sections.
    version: Option<u8>,
    documents: usize,
    parsed: Parsed<'a>,
}

/// Mappings up to this size look for duplicate keys by scanning.
const SCAN_LIMIT: usize = 16;

impl<'a> Builder<'a> {
    /// Handles one event; `Ok(false)` ends the stream.
    fn event(&mut self, event: Event<'a>, yspan: YamlSpan) -> Result<bool, Diagnostic> {
        let span = self.offsets.span(&yspan);
        match event {
            Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
            Event::StreamEnd => return Ok(false),
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(Diagnostic::error(
                        Layer::Schema,
                        Code::YamlMultipleDocuments,
                        "",
                        "a second YAML document; a manifest is exactly one document (remove the extra `---` and what follows)",
                    )
                    .with_span(span));
                }
            }
            Event::Alias(_) => {
                let pointer = self.value_pointer();
                self.problem(
                    Code::YamlAlias,
                    &pointer,
                    "YAML aliases (`*name`) are not allowed; write the value out in full",
                    span,
                );
                if self.awaiting_key() {
                    self.set_key(Text::Borrowed(""), span, false);
                } else {
                    self.parsed.stand_ins.push(pointer);
                    self.attach(Node { span, value: Value::Null }, false);
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                self.features(anchor, tag.is_some(), span);
                if self.awaiting_key() {
                    self.key(text, style, span);
                } else {
                    let empty = style == ScalarStyle::Plain && text.is_empty();
                    let value = self.scalar(text, style, span);
                    self.attach(Node { span, value }, empty);
                }
            }
            Event::SequenceStart(anchor, ref tag) | Event::MappingStart(anchor, ref tag) => {
                self.features(anchor, tag.is_some(), span);
                if self.frames.len() + 1 > MAX_DEPTH {
                    let message = format!("objects and arrays are nested deeper than {MAX_DEPTH} levels");
                    return Err(Diagnostic::error(Layer::Schema, Code::NestingTooDeep, self.value_pointer(), message)
                        .with_span(span));
                }
                if self.awaiting_key() {
                    let pointer = self.container_pointer();
                    self.problem(
                        Code::YamlNonStringKey,
                        &pointer,
                        "mapping keys must be strings, not mappings or sequences",
                        span,
                    );
                }
                let start = span.start as usize;
                let hint = match self.frames.last() {
                    None => Hint::Root,
                    Some(Frame::Seq { hint, .. }) => hint.item(),
                    Some(Frame::Map { hint, key: Some(k), .. }) if k.keep => hint.member(&k.key, self.version),
                    Some(Frame::Map { .. }) => Hint::Unknown,
                };
                self.frames.push(if matches!(event, Event::SequenceStart(..)) {
                    Frame::Seq { start, items: Vec::new(), hint }
                } else {
                    let members = Vec::with_capacity(hint.room(self.version));
                    Frame::Map { start, members, key: None, seen: None, hint }
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let node = match self.frames.pop() {
                    Some(Frame::Seq { start, items, .. }) => {
                        Node { span: Span::new(start, span.end as usize), value: Value::Array(items) }
                    }
                    Some(Frame::Map { start, members, .. }) => {
                        Node { span: Span::new(start, span.end as usize), value: Value::Object(members) }
                    }
                    None => return Ok(true),
                };
                if self.awaiting_key() {
                    // A complex key: already reported when it started; drop the member.
                    self.set_key(Text::Borrowed(""), node.span, false);
                } else {
                    self.attach(node, false);
                }
            }
        }
        Ok(true)
    }

    fn features(&mut self, anchor: usize, tagged: bool, span: Span) {
        if anchor != 0 {
            let pointer = self.value_pointer();
            self.problem(
                Code::YamlAnchor,
                &pointer,
                "YAML anchors (`&name`) are not allowed; write each value out in full",
                span,
            );
        }
        if tagged {
            let pointer = self.value_pointer();
            self.problem(
                Code::YamlTag,
                &pointer,
                "explicit YAML tags (`!tag`, `!!str`) are not allowed; quote the value if it must be a string",
                span,
            );
        }
    }

    fn key(&mut self, text: Text<'a>, style: ScalarStyle, span: Span) {
        let mut keep = true;
        if style == ScalarStyle::Plain {
            if text == "<<" {
                let pointer = self.container_pointer_with(&text);
                self.problem(
                    Code::YamlMergeKey,
                    &pointer,
                    "YAML merge keys (`<<`) are not allowed; write the fields out in full",
                    span,
                );
                keep = false;
            } else if let Some(kind) = non_string(&text) {
                let pointer = self.container_pointer_with(&text);
                let message =
                    format!("mapping keys must be strings; `{text}` reads as {kind} (quote it if you mean the string)");
                self.problem(Code::YamlNonStringKey, &pointer, &message, span);
                keep = false;
            }
        }
        if keep && self.is_duplicate(&text) {
            let pointer = self.container_pointer_with(&text);
            let message = format!("duplicate key \"{text}\": each key may appear once in a mapping");
            self.problem(Code::DuplicateKey, &pointer, &message, span);
            keep = false;
        }
        self.set_key(text, span, keep);
    }

    fn is_duplicate(&mut self, key: &str) -> bool {
        let Some(Frame::Map { members, seen, .. }) = self.frames.last_mut() else {
            return false;
        };
        if let Some(set) = seen {
            return !set.insert(key.to_owned());
        }
        let dup = members.iter().any(|m| m.key == key);
        if members.len() >= SCAN_LIMIT {
            *seen = Some(members.iter().map(|m| m.key.to_string()).chain([key.to_owned()]).collect());
        }
        dup
    }

    fn scalar(&mut self, text: Text<'a>, style: ScalarStyle, span: Span) -> Value<'a> {
        if style != ScalarStyle::Plain {
            return Value::String(text);
        }
        match resolve_plain(text) {
            Ok(value) => value,
            Err(why) => {
                let pointer = self.value_pointer();
                self.problem(Code::NumberOutOfRange, &pointer, why, span);
                self.parsed.stand_ins.push(pointer);
                Value::Null
            }
        }
    }

    fn awaiting_key(&self) -> bool {
        matches!(self.frames.last(), Some(Frame::Map { key: None, .. }))
    }

    fn set_key(&mut self, key: Text<'a>, span: Span, keep: bool) {
        if let Some(Frame::Map { key: slot, .. }) = self.frames.last_mut() {
            *slot = Some(PendingKey { key, span, keep });
        }
    }

    fn attach(&mut self, node: Node<'a>, empty_scalar: bool) {
        match self.frames.last_mut() {
            None => self.root = Some((node, empty_scalar)),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { members, key, hint, .. }) => {
                if let Some(k) = key.take()
                    && k.keep
                {
                    if matches!(hint, Hint::Root) && same_key(&k.key, "schemaVersion") {
                        self.version = match node.value {
                            Value::Number(Number::Integer(4)) => Some(4),
                            Value::Number(Number::Integer(5)) => Some(5),
                            _ => None,
                        };
                    }
                    members.push(Member { key: k.key, key_span: k.span, value: node, defaulted: false });
                }
            }
        }
    }

    /// Path of the innermost container: every enclosing frame's current position.
    fn container_path(&self) -> PointerBuf {
        let mut p = PointerBuf::default();
        let enclosing = self.frames.len().saturating_sub(1);
        for frame in &self.frames[..enclosing] {
            match frame {
                Frame::Seq { items, .. } => {
                    p.push_index(items.len());
                }
                Frame::Map { key, .. } => {
                    p.push(key.as_ref().map_or("", |k| k.key.as_ref()));
                }
            }
        }
        p
    }

    fn container_pointer(&self) -> String {
        self.container_path().as_str().to_owned()
    }

    fn container_pointer_with(&self, key: &str) -> String {
        self.container_path().join(key)
    }

    /// Pointer of the value about to be attached.
    fn value_pointer(&self) -> String {
        let mut p = self.container_path();
        match self.frames.last() {
            None => {}
            Some(Frame::Seq { items, .. }) => {
                p.push_index(items.len());
            }
            Some(Frame::Map { key, .. }) => {
                p.push(key.as_ref().map_or("", |k| k.key.as_ref()));
            }
        }
        p.as_str().to_owned()
    }

    fn problem(&mut self, code: Code, pointer: &str, message: &str, span: Span) {
        self.parsed.diagnostics.push(Diagnostic::error(Layer::Schema, code, pointer, message).with_span(span).on_key());
    }

    fn scan_error(&self, e: &ScanError) -> Diagnostic {
        let at = self.offsets.byte(e.marker().index());
        let (code, message) = if e.info().contains("recursion limit") {
            // The scanner reads ahead and can meet its own nesting limit before the events
            // reach ours; it is the same problem.
            (Code::NestingTooDeep, format!("objects and arrays are nested deeper than {MAX_DEPTH} levels"))
        } else if e.info().contains("anchor") {
            (Code::YamlAlias, format!("invalid YAML: {}; aliases are not allowed", e.info()))
        } else {
            (Code::YamlSyntax, format!("invalid YAML: {}", e.info()))
        };
        Diagnostic::error(Layer::Schema, code, "", message).with_span(Span::new(at, at))
    }
}

/// What a plain scalar that is not a string reads as, for messages.
fn non_string(text: &str) -> Option<&'static str> {
    match resolve_plain(Text::Borrowed(text)) {
        Ok(Value::String(_)) => None,
        Ok(v) => Some(v.kind()),
        Err(_) => Some("a number"),
    }
}

/// Resolves a plain scalar by the YAML 1.2 core schema.
fn resolve_plain(text: Text<'_>) -> Result<Value<'_>, &'static str> {
    // Every word and number of the core schema starts with one of these bytes; anything else
    // (most plain scalars: names, paths) is a string without trying each form.
    if !matches!(
        text.as_bytes().first(),
        None | Some(b'~' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'.' | b'+' | b'-' | b'0'..=b'9')
    ) {
        return Ok(Value::String(text));
    }
    Ok(match text.as_ref() {
        "" | "~" | "null" | "Null" | "NULL" => Value::Null,
        "true" | "True" | "TRUE" => Value::Bool(true),
        "false" | "False" | "FALSE" => Value::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => Value::Number(Number::Float(f64::INFINITY)),
        "-.inf" | "-.Inf" | "-.INF" => Value::Number(Number::Float(f64::NEG_INFINITY)),
        ".nan" | ".NaN" | ".NAN" => Value::Number(Number::Float(f64::NAN)),
        _ => {
            if let Some(n) = core_integer(&text) {
                return n.map(|i| Value::Number(Number::Integer(i)));
            }
            if is_core_float(&text) {
                return match text.parse::<f64>() {
                    Ok(f) if f.is_finite() => Ok(Value::Number(Number::Float(f))),
                    _ => Err("the number is out of range"),
                };
            }
            Value::String(text)
        }
    })
}

/// `[-+]?[0-9]+`, `0o[0-7]+`, `0x[0-9a-fA-F]+`; `None` when not an integer.
fn core_integer(text: &str) -> Option<Result<i128, &'static str>> {
    let (radix, digits, negative) = if let Some(h) = text.strip_prefix("0x") {
        (16, h, false)
    } else if let Some(o) = text.strip_prefix("0o") {
        (8, o, false)
    } else {
        let (neg, rest) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        (10, rest, neg)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    Some(match i128::from_str_radix(digits, radix) {
        Ok(i) => Ok(if negative { -i } else { i }),
        // A decimal integer beyond 128 bits reads as a (non-integer) float, as in JSON.
        Err(_) if radix == 10 => {
            return text.parse::<f64>().ok().map(|_| Err("the number is out of range"));
        }
        Err(_) => Err("the number is out of range"),
    })
}

/// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
fn is_core_float(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'-' | b'+')));
    let int_start = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let int_digits = i - int_start;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let s = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if int_digits == 0 && i == s {
            return false;
        }
    } else if int_digits == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        let s = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == s {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(text: &str) -> Vec<(Code, String)> {
        parse(text).diagnostics.into_iter().map(|d| (d.code, d.pointer)).collect()
    }

    fn root(text: &str) -> Node<'_> {
        let p = parse(text);
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        p.root.expect("root")
    }

    #[test]
    fn core_schema_only() {
        let r = root("a: yes\nb: off\nc: 0x1F\nd: 1.0\ne: ~\nf: '12'\ng: true\nh: 0o17\ni: -3\nj: 10m\n");
        assert_eq!(r.get("a").map(|n| &n.value), Some(&Value::String("yes".into())));
        assert_eq!(r.get("b").map(|n| &n.value), Some(&Value::String("off".into())));
        assert_eq!(r.get("c").map(|n| &n.value), Some(&Value::Number(Number::Integer(31))));
        assert_eq!(r.get("d").map(|n| &n.value), Some(&Value::Number(Number::Float(1.0))));
        assert_eq!(r.get("e").map(|n| &n.value), Some(&Value::Null));
        assert_eq!(r.get("f").map(|n| &n.value), Some(&Value::String("12".into())));
        assert_eq!(r.get("g").map(|n| &n.value), Some(&Value::Bool(true)));
        assert_eq!(r.get("h").map(|n| &n.value), Some(&Value::Number(Number::Integer(15))));
        assert_eq!(r.get("i").map(|n| &n.value), Some(&Value::Number(Number::Integer(-3))));
        assert_eq!(r.get("j").map(|n| &n.value), Some(&Value::String("10m".into())));
    }

    #[test]
    fn refuses_yaml_features_with_their_codes() {
        assert_eq!(codes("a: &x 1\nb: 2\n"), [(Code::YamlAnchor, "/a".to_owned())]);
        assert_eq!(
            codes("a: &x 1\nb: *x\n"),
            [(Code::YamlAnchor, "/a".to_owned()), (Code::YamlAlias, "/b".to_owned())]
        );
        assert_eq!(codes("a:\n  <<: {b: 1}\n"), [(Code::YamlMergeKey, "/a/<<".to_owned())]);
        assert_eq!(codes("a: !!str 1\n"), [(Code::YamlTag, "/a".to_owned())]);
        assert_eq!(codes("a: !custom x\n"), [(Code::YamlTag, "/a".to_owned())]);
        assert_eq!(codes("a: 1\na: 2\n"), [(Code::DuplicateKey, "/a".to_owned())]);
        assert_eq!(codes("a:\n  - {b: 1, b: 2}\n"), [(Code::DuplicateKey, "/a/0/b".to_owned())]);
        assert_eq!(codes("1: x\n"), [(Code::YamlNonStringKey, "/1".to_owned())]);
        assert_eq!(codes("? [a]\n: x\n"), [(Code::YamlNonStringKey, "".to_owned())]);
        assert_eq!(codes("a: 1\n---\nb: 2\n"), [(Code::YamlMultipleDocuments, String::new())]);
        assert_eq!(codes("a: [1\n")[0].0, Code::YamlSyntax);
        assert_eq!(codes("")[0].0, Code::EmptyDocument);
        assert_eq!(codes("# only a comment\n")[0].0, Code::EmptyDocument);
        assert_eq!(codes("---\n")[0].0, Code::EmptyDocument);
    }

    #[test]
    fn an_explicit_document_start_is_fine() {
        assert!(parse("---\na: 1\n...\n").diagnostics.is_empty());
    }

    #[test]
    fn positions_are_byte_offsets_even_after_non_ascii() {
        let text = "é: 1\nb: &x 2\n";
        let d = &parse(text).diagnostics[0];
        let span = d.span.expect("span");
        assert!(text[span.start as usize..].starts_with("&x") || text[span.start as usize..].starts_with('2'));
    }

    #[test]
    fn nesting_limit() {
        let ok = format!("{}{}", "[".repeat(64), "]".repeat(64));
        assert!(parse(&ok).diagnostics.is_empty());
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert_eq!(codes(&deep)[0].0, Code::NestingTooDeep);
    }
}
