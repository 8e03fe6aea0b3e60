//! A strict RFC 8259 JSON reader that builds a [`Node`] tree with spans.
//!
//! Why not serde_json: it gives no positions and keeps the last duplicate key. This reader
//! refuses duplicate keys (and keeps reading, so other problems are still reported), limits
//! nesting, keeps `1.0` apart from `1`, and records the byte span of every key and value. It is
//! differentially fuzzed against serde_json (`fuzz/fuzz_targets/json_differential.rs`).

use std::collections::HashSet;

use crate::bounded::Bounded;
use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::source::{MAX_DEPTH, Parsed};
use std::borrow::Cow;

use crate::shape::Hint;
use crate::tree::{Member, Node, Number, PointerBuf, Span, Text, Value, same_key};

/// Reads `text` as one JSON value.
pub(crate) fn parse(text: &str) -> Parsed<'_> {
    let mut reader = Reader::new(text);
    let result = reader.document();
    let mut diagnostics = reader.problems;
    match result {
        Ok(root) => Parsed { root: Some(root), diagnostics, ..Parsed::default() },
        Err(fatal) => {
            diagnostics.push(*fatal);
            Parsed { root: None, diagnostics, ..Parsed::default() }
        }
    }
}

/// One step of the path from the root to where the reader is, kept cheap: a key is its raw
/// span in the source and is decoded only if a pointer is needed.
#[derive(Clone, Copy)]
enum Step {
    Key(Span),
    Index(usize),
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    path: Vec<Step>,
    /// Non-fatal problems (duplicate keys), bounded.
    problems: Bounded,
    /// The root's `schemaVersion` (4 or 5) once read: which table sizes the root's sections.
    version: Option<u8>,
}

/// A member before it is read: a constant, so pushing it copies bytes no store has just
/// written (see [`Reader::value`]).
const SLOT: Member<'static> = Member {
    key: Cow::Borrowed(""),
    key_span: Span { start: 0, end: 0 },
    value: Node { span: Span { start: 0, end: 0 }, value: Value::Null },
    defaulted: false,
};

/// Objects up to this many members look for duplicates by scanning; larger ones use a set, so
/// an adversarial object with many keys stays linear.
const SCAN_LIMIT: usize = 16;

/// The error that stops reading, boxed: results pass up through every level of nesting, and
/// a diagnostic is larger than the node a successful read returns.
type Fatal = Box<Diagnostic>;

impl<'a> Reader<'a> {
    fn new(text: &'a str) -> Self {
        Reader { text, bytes: text.as_bytes(), pos: 0, path: Vec::new(), problems: Bounded::default(), version: None }
    }

    fn document(&mut self) -> Result<Node<'a>, Fatal> {
        self.skip_ws();
        if self.pos == self.bytes.len() {
            return Err(Box::new(
                Diagnostic::error(Layer::Schema, Code::EmptyDocument, "", "the document is empty")
                    .with_span(Span::new(0, 0)),
            ));
        }
        let mut root = Node { span: Span::default(), value: Value::Null };
        self.value(&mut root, 1, Hint::Root)?;
        self.skip_ws();
        if self.pos != self.bytes.len() {
            return Err(self.syntax("trailing characters after the JSON document; remove them"));
        }
        Ok(root)
    }

    /// Reads one value into `slot`, a `null` already in its place in the tree. Values are
    /// written where they stay rather than returned: moving a node up through every level of
    /// nesting (written in small pieces, read back in wide ones) stalled store forwarding, and
    /// `perf` put about 40% of the reader's samples on three such moves.
    fn value(&mut self, slot: &mut Node<'a>, depth: usize, hint: Hint) -> Result<(), Fatal> {
        let start = self.pos;
        match self.peek() {
            Some(b'{') => slot.value = Value::Object(self.object(depth, hint)?),
            Some(b'[') => slot.value = Value::Array(self.array(depth, hint)?),
            Some(b'"') => slot.value = Value::String(self.string()?),
            Some(b't') => self.literal(b"true", &mut slot.value, Value::Bool(true))?,
            Some(b'f') => self.literal(b"false", &mut slot.value, Value::Bool(false))?,
            Some(b'n') => self.literal(b"null", &mut slot.value, Value::Null)?,
            Some(b'-' | b'0'..=b'9') => slot.value = Value::Number(self.number()?),
            Some(_) => {
                return Err(self.syntax("expected a value (object, array, string, number, true, false or null)"));
            }
            None => return Err(self.eof()),
        }
        slot.span = Span::new(start, self.pos);
        Ok(())
    }

    fn enter(&self, depth: usize) -> Result<(), Fatal> {
        if depth > MAX_DEPTH {
            let message = format!("objects and arrays are nested deeper than {MAX_DEPTH} levels");
            return Err(Box::new(
                Diagnostic::error(Layer::Schema, Code::NestingTooDeep, self.pointer(), message)
                    .with_span(Span::new(self.pos, self.pos + 1)),
            ));
        }
        Ok(())
    }

    fn object(&mut self, depth: usize, hint: Hint) -> Result<Vec<Member<'a>>, Fatal> {
        self.enter(depth)?;
        self.pos += 1;
        let mut members: Vec<Member<'a>> = Vec::with_capacity(hint.room(self.version));
        let mut seen: Option<HashSet<String>> = None;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(members);
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(match self.peek() {
                    None => self.eof(),
                    Some(b'}') => self.syntax("trailing comma before `}`; remove it"),
                    Some(_) => self.syntax("expected a string key in double quotes"),
                });
            }
            let key_start = self.pos;
            let key = self.string()?;
            let key_span = Span::new(key_start, self.pos);
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(if self.peek().is_none() { self.eof() } else { self.syntax("expected `:` after the key") });
            }
            self.pos += 1;
            self.skip_ws();
            self.path.push(Step::Key(key_span));
            // Only objects and arrays are sized, so only they look their field up.
            let child = match self.peek() {
                Some(b'{' | b'[') => hint.member(&key, self.version),
                _ => Hint::Unknown,
            };
            let duplicate = match &mut seen {
                Some(set) => !set.insert(key.to_string()),
                None => {
                    let dup = members.iter().any(|m| same_key(&m.key, &key));
                    if members.len() >= SCAN_LIMIT {
                        seen = Some(members.iter().map(|m| m.key.to_string()).chain([key.to_string()]).collect());
                    }
                    dup
                }
            };
            // The member goes in first, its value read in place (a duplicate is taken out
            // again once read, after any problem inside it, as before).
            let at = members.len();
            members.push(SLOT);
            let member = &mut members[at];
            member.key = key;
            member.key_span = key_span;
            self.value(&mut member.value, depth + 1, child)?;
            self.path.pop();
            if matches!(hint, Hint::Root) && same_key(&member.key, "schemaVersion") {
                self.version = match member.value.value {
                    Value::Number(Number::Integer(4)) => Some(4),
                    Value::Number(Number::Integer(5)) => Some(5),
                    _ => None,
                };
            }
            if duplicate && let Some(Member { key, .. }) = members.pop() {
                let mut pointer = self.pointer_buf();
                pointer.push(&key);
                let message = format!("duplicate key \"{key}\": each key may appear once in an object");
                self.problems.push(
                    Diagnostic::error(Layer::Schema, Code::DuplicateKey, pointer.as_str(), message).with_span(key_span),
                );
            }

            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(members);
                }
                Some(_) => return Err(self.syntax("expected `,` or `}` after an object member")),
                None => return Err(self.eof()),
            }
        }
    }

    fn array(&mut self, depth: usize, hint: Hint) -> Result<Vec<Node<'a>>, Fatal> {
        self.enter(depth)?;
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(items);
        }
        loop {
            self.skip_ws();
            if self.peek() == Some(b']') {
                return Err(self.syntax("trailing comma before `]`; remove it"));
            }
            self.path.push(Step::Index(items.len()));
            let item = match self.peek() {
                Some(b'{' | b'[') => hint.item(),
                _ => Hint::Unknown,
            };
            let at = items.len();
            items.push(SLOT.value);
            self.value(&mut items[at], depth + 1, item)?;
            self.path.pop();
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(items);
                }
                Some(_) => return Err(self.syntax("expected `,` or `]` after an array item")),
                None => return Err(self.eof()),
            }
        }
    }

    fn literal(&mut self, word: &[u8], slot: &mut Value<'a>, value: Value<'a>) -> Result<(), Fatal> {
        if self.bytes[self.pos..].starts_with(word) {
            self.pos += word.len();
            *slot = value;
            Ok(())
        } else {
            Err(self.syntax("expected a value (object, array, string, number, true, false or null)"))
        }
    }

    /// Reads a string starting at its opening quote: borrowed from the source unless it holds
    /// an escape.
    fn string(&mut self) -> Result<Text<'a>, Fatal> {
        self.pos += 1;
        let start = self.pos;
        self.run();
        if self.peek() == Some(b'"') {
            self.pos += 1;
            // The run ends at an ASCII byte, so it is a whole UTF-8 sequence.
            return Ok(Cow::Borrowed(&self.text[start..self.pos - 1]));
        }
        self.decoded(start)
    }

    /// The rest of a string that holds an escape (or is not closed), decoded from `start`.
    /// Rare, so kept out of [`Reader::string`], which stays small.
    #[cold]
    fn decoded(&mut self, start: usize) -> Result<Text<'a>, Fatal> {
        let mut out = String::from(&self.text[start..self.pos]);
        loop {
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                Some(b'\\') => {
                    self.pos += 1;
                    self.escape(&mut out)?;
                    let run_start = self.pos;
                    self.run();
                    out.push_str(&self.text[run_start..self.pos]);
                }
                Some(_) => return Err(self.syntax("control character in a string; escape it (for example `\\n`)")),
                None => return Err(self.eof()),
            }
        }
    }

    /// Skips the bytes of a string that need no decoding: all but `"`, `\` and control
    /// characters. Strings are most of a manifest's bytes, so they are read a word of eight
    /// bytes at a time; the last few bytes of the input are padded with a quote, so every
    /// word test has an answer.
    fn run(&mut self) {
        let (words, tail) = self.bytes.get(self.pos..).unwrap_or_default().as_chunks::<8>();
        let mut pos = self.pos;
        for word in words {
            let care = needs_care(*word);
            if care != 0 {
                self.pos = pos + first_flagged(care);
                return;
            }
            pos += 8;
        }
        let mut last = [b'"'; 8];
        last[..tail.len()].copy_from_slice(tail);
        self.pos = pos + first_flagged(needs_care(last));
    }

    fn escape(&mut self, out: &mut String) -> Result<(), Fatal> {
        let Some(b) = self.peek() else {
            return Err(self.eof());
        };
        self.pos += 1;
        let c = match b {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let first = self.hex4()?;
                match first {
                    0xD800..=0xDBFF => {
                        if !self.bytes[self.pos..].starts_with(b"\\u") {
                            return Err(self.syntax("lone leading surrogate in a `\\u` escape"));
                        }
                        self.pos += 2;
                        let second = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&second) {
                            return Err(self.syntax("invalid surrogate pair in a `\\u` escape"));
                        }
                        let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                        char::from_u32(code).ok_or_else(|| self.syntax("invalid `\\u` escape"))?
                    }
                    0xDC00..=0xDFFF => {
                        return Err(self.syntax("lone trailing surrogate in a `\\u` escape"));
                    }
                    _ => char::from_u32(first).ok_or_else(|| self.syntax("invalid `\\u` escape"))?,
                }
            }
            _ => {
                self.pos -= 1;
                return Err(self.syntax("invalid escape; JSON allows \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX"));
            }
        };
        out.push(c);
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, Fatal> {
        let Some(digits) = self.bytes.get(self.pos..self.pos + 4) else {
            return Err(self.eof());
        };
        let mut n = 0u32;
        for &d in digits {
            let v = (d as char).to_digit(16).ok_or_else(|| self.syntax("expected four hex digits after `\\u`"))?;
            n = n * 16 + v;
            self.pos += 1;
        }
        Ok(n)
    }

    fn number(&mut self) -> Result<Number, Fatal> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if matches!(self.peek(), Some(b'0'..=b'9')) {
                    return Err(self.syntax("numbers must not have leading zeros"));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            Some(_) => return Err(self.syntax("expected a digit")),
            None => return Err(self.eof()),
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            integer = false;
            self.pos += 1;
            self.require_digit()?;
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            integer = false;
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.require_digit()?;
            self.digits();
        }
        let text = &self.text[start..self.pos];
        if integer && let Ok(i) = text.parse::<i128>() {
            return Ok(Number::Integer(i));
        }
        match text.parse::<f64>() {
            Ok(f) if f.is_finite() => Ok(Number::Float(f)),
            _ => Err(Box::new(
                Diagnostic::error(
                    Layer::Schema,
                    Code::NumberOutOfRange,
                    self.pointer(),
                    format!("number {text} is out of range"),
                )
                .with_span(Span::new(start, self.pos)),
            )),
        }
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    fn require_digit(&self) -> Result<(), Fatal> {
        match self.peek() {
            Some(b'0'..=b'9') => Ok(()),
            Some(_) => Err(self.syntax("expected a digit")),
            None => Err(self.eof()),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn syntax(&self, message: &str) -> Fatal {
        // Point at the whole character, which may be several bytes.
        let len = self.text[self.pos.min(self.text.len())..].chars().next().map_or(0, char::len_utf8);
        Box::new(
            Diagnostic::error(Layer::Schema, Code::InvalidJson, "", format!("invalid JSON: {message}"))
                .with_span(Span::new(self.pos, self.pos + len)),
        )
    }

    fn eof(&self) -> Fatal {
        Box::new(
            Diagnostic::error(
                Layer::Schema,
                Code::InvalidJson,
                "",
                "invalid JSON: unexpected end of input; the document is truncated",
            )
            .with_span(Span::new(self.pos, self.pos)),
        )
    }

    fn pointer(&self) -> String {
        self.pointer_buf().as_str().to_owned()
    }

    /// Decodes the path to a pointer; only called when reporting a problem.
    fn pointer_buf(&self) -> PointerBuf {
        let mut p = PointerBuf::default();
        for step in &self.path {
            match *step {
                Step::Index(i) => {
                    p.push_index(i);
                }
                Step::Key(span) => {
                    let raw = &self.text[span.start as usize..span.end as usize];
                    let mut sub = Reader::new(raw);
                    let key = sub.string().unwrap_or_default();
                    p.push(&key);
                }
            }
        }
        p
    }
}

/// Flags (in their high bit) the bytes of `word` that end a plain run of a string: `"`, `\`
/// and control characters (below 0x20). Only bytes above a flagged one can be flagged falsely
/// (a borrow carries upwards), so the lowest flag is exact: subtracting `n` from every byte
/// borrows into a high bit that the byte itself has clear only where the byte is below `n`
/// (for `n` up to 128), and a byte equal to `c` is a zero byte after an XOR with `c`.
fn needs_care(word: [u8; 8]) -> u64 {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    let word = u64::from_le_bytes(word);
    let below = |x: u64, n: u8| x.wrapping_sub(ONES * u64::from(n)) & !x & HIGH;
    let equal = |c: u8| below(word ^ (ONES * u64::from(c)), 1);
    equal(b'"') | equal(b'\\') | below(word, 0x20)
}

/// The index of the lowest flagged byte of a non-zero [`needs_care`] answer.
fn first_flagged(care: u64) -> usize {
    care.trailing_zeros() as usize / 8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Node<'_> {
        let parsed = parse(text);
        assert!(parsed.diagnostics.is_empty(), "{:?}", parsed.diagnostics);
        parsed.root.expect("root")
    }

    fn err(text: &str) -> Diagnostic {
        let parsed = parse(text);
        parsed.diagnostics.into_iter().next().expect("a diagnostic")
    }

    #[test]
    fn reads_values_with_spans() {
        let root = ok(r#" {"a": [1, -2.5, "x\u00e9\ud83d\ude00", true, null]} "#);
        let a = root.get("a").expect("a");
        assert_eq!(a.span, Span::new(7, 51));
        let Value::Array(items) = &a.value else { panic!("array") };
        assert_eq!(items[0].value, Value::Number(Number::Integer(1)));
        assert_eq!(items[1].value, Value::Number(Number::Float(-2.5)));
        assert_eq!(items[2].value, Value::String("xé😀".into()));
        assert_eq!(items[3].value, Value::Bool(true));
        assert_eq!(items[4].value, Value::Null);
    }

    #[test]
    fn plain_runs_end_at_the_first_quote_backslash_or_control_character() {
        let fill = ['a', 'é', '~', '\u{7f}', '€', 'Z', ' ', '😀', '0'];
        for len in 0..24 {
            for stop in ['"', '\\', '\u{0}', '\u{1f}', '\n'] {
                for at in 0..=len {
                    let mut chars: Vec<char> = fill.iter().copied().cycle().take(len).collect();
                    if at < len {
                        chars[at] = stop;
                    }
                    let text: String = chars.into_iter().collect();
                    let expected = text.bytes().position(|b| b == b'"' || b == b'\\' || b < 0x20);
                    let mut reader = Reader::new(&text);
                    reader.run();
                    assert_eq!(reader.pos, expected.unwrap_or(text.len()), "{text:?}");
                }
            }
        }
    }

    #[test]
    fn one_point_zero_is_not_an_integer() {
        assert_eq!(ok("1.0").value, Value::Number(Number::Float(1.0)));
        assert_eq!(ok("1e2").value, Value::Number(Number::Float(100.0)));
        assert_eq!(ok("-0").value, Value::Number(Number::Integer(0)));
    }

    #[test]
    fn duplicate_keys_point_at_the_second_and_reading_goes_on() {
        let parsed = parse(r#"{"a": {"b": 1, "b": 2}, "c": [{"d": 1, "d": 1}]}"#);
        let pointers: Vec<_> = parsed.diagnostics.iter().map(|d| (d.code, d.pointer.as_str())).collect();
        assert_eq!(pointers, [(Code::DuplicateKey, "/a/b"), (Code::DuplicateKey, "/c/0/d")]);
        assert!(parsed.root.is_some());
    }

    #[test]
    fn many_keys_still_detect_duplicates() {
        let mut text = String::from("{");
        for i in 0..100 {
            text.push_str(&format!("\"k{i}\": {i},"));
        }
        text.push_str("\"k3\": 0}");
        let parsed = parse(&text);
        assert_eq!(parsed.diagnostics.len(), 1);
        assert_eq!(parsed.diagnostics[0].pointer, "/k3");
    }

    #[test]
    fn refuses_what_rfc_8259_refuses() {
        for bad in [
            "{",
            "[1,]",
            "{\"a\":1,}",
            "01",
            "1.",
            ".5",
            "+1",
            "'a'",
            "{a:1}",
            "\"\\x\"",
            "\"a\tb\"",
            "NaN",
            "[1 2]",
            "\"\\ud800\"",
            "\"\\udc00x\"",
            "1 2",
            "tru",
            "{\"a\" 1}",
        ] {
            let d = err(bad);
            assert_eq!(d.code, Code::InvalidJson, "{bad}");
        }
        assert_eq!(err("1e400").code, Code::NumberOutOfRange);
        assert_eq!(err("  ").code, Code::EmptyDocument);
    }

    #[test]
    fn nesting_limit_is_64() {
        let ok_text = format!("{}{}", "[".repeat(64), "]".repeat(64));
        assert!(parse(&ok_text).diagnostics.is_empty());
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        let d = err(&deep);
        assert_eq!(d.code, Code::NestingTooDeep);
        assert_eq!(d.pointer, format!("/{}", vec!["0"; 64].join("/")));
    }

    #[test]
    fn big_integers_become_floats() {
        let big = "1".repeat(50);
        assert!(matches!(ok(&big).value, Value::Number(Number::Float(_))));
    }
}
