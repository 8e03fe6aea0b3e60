//! The document tree both readers (JSON and YAML) build: JSON's data model, plus the byte span
//! of every key and value so a pointer can be turned back into a line, a column and a caret.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

/// Text in the tree: borrowed from the source when it is written there without escapes,
/// borrowed from the shape tables when it is a default filled in by validation, and owned only
/// when an escape had to be decoded. Most of a manifest's keys and strings cost no allocation.
pub type Text<'a> = Cow<'a, str>;

/// Whether two keys are equal, for lookups by name: compared inline, as a `memcmp` call costs
/// more than the whole comparison of keys this short (most candidates differ in length).
#[inline]
pub(crate) fn same_key(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    // Eight bytes at a time, then the last (up to seven) one by one.
    let (words_a, tail_a) = a.as_chunks::<8>();
    let (words_b, tail_b) = b.as_chunks::<8>();
    words_a.iter().zip(words_b).all(|(x, y)| u64::from_ne_bytes(*x) == u64::from_ne_bytes(*y))
        && tail_a.iter().zip(tail_b).all(|(x, y)| x == y)
}

/// A byte range of the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// Offset of the first byte.
    pub start: u32,
    /// Offset one past the last byte.
    pub end: u32,
}

impl Span {
    /// A span from byte offsets (inputs are at most 1 MiB, so they fit in `u32`).
    pub fn new(start: usize, end: usize) -> Span {
        Span { start: to_u32(start), end: to_u32(end.max(start)) }
    }
}

/// Offsets and counts of an input of at most 1 MiB fit in `u32`; saturate rather than panic.
pub(crate) fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A number as written: integers are kept exactly, anything with a fraction or an exponent is
/// a float (`1.0` is not the integer 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Number {
    /// An integer literal (within the 128-bit range).
    Integer(i128),
    /// A literal with a fraction or exponent, or an integer beyond 128 bits.
    Float(f64),
}

/// A value with its source span.
#[derive(Debug, Clone, PartialEq)]
pub struct Node<'a> {
    /// Where the value is written (for a default filled in by validation: its parent's span).
    pub span: Span,
    /// The value.
    pub value: Value<'a>,
}

/// One `key: value` member of an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Member<'a> {
    /// The key.
    pub key: Text<'a>,
    /// Where the key is written.
    pub key_span: Span,
    /// The value.
    pub value: Node<'a>,
    /// Filled in by validation as a default, not written by the author (the authored
    /// digest leaves such members out).
    pub defaulted: bool,
}

/// JSON's data model. Objects keep their members in document order.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number.
    Number(Number),
    /// A string.
    String(Text<'a>),
    /// An array.
    Array(Vec<Node<'a>>),
    /// An object.
    Object(Vec<Member<'a>>),
}

impl Value<'_> {
    /// How the value's type is named in messages ("an object", "a string", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(Number::Integer(_)) => "an integer",
            Value::Number(Number::Float(_)) => "a number with a fraction or exponent",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }
}

impl<'a> Node<'a> {
    /// The member `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Node<'a>> {
        self.member(key).map(|m| &m.value)
    }

    /// The member named `key` of an object, with its key span.
    pub fn member(&self, key: &str) -> Option<&Member<'a>> {
        match &self.value {
            Value::Object(members) => members.iter().find(|m| same_key(&m.key, key)),
            _ => None,
        }
    }

    /// Follows an RFC 6901 pointer as far as it resolves. Returns the deepest member reached
    /// (if the last step reached was an object member) and the deepest node reached, plus
    /// whether the whole pointer resolved.
    pub fn resolve(&self, pointer: &str) -> Resolved<'_, 'a> {
        let mut node = self;
        let mut member = None;
        // Everything up to the first `/` is not a token (for a pointer, the empty string).
        // Layer 2 and diagnostic placement resolve short pointers many times per document, so
        // the tokens are split by hand: a `str::split` searcher costs more than the walk.
        let Some(first) = pointer.bytes().position(|b| b == b'/') else {
            return Resolved { node, member, complete: true };
        };
        let mut rest = &pointer[first + 1..];
        loop {
            let (end, tilde) = token_end(rest.as_bytes());
            let (raw, next) = (&rest[..end], rest.get(end + 1..));
            let token = if tilde { unescape(raw) } else { raw.into() };
            let found = match &node.value {
                Value::Object(members) => members.iter().find(|m| same_key(&m.key, &token)).map(|m| {
                    member = Some(m);
                    &m.value
                }),
                Value::Array(items) => token.parse::<usize>().ok().and_then(|i| {
                    member = None;
                    items.get(i)
                }),
                _ => None,
            };
            let Some(found) = found else {
                return Resolved { node, member, complete: false };
            };
            node = found;
            match next {
                Some(next) => rest = next,
                None => return Resolved { node, member, complete: true },
            }
        }
    }
}

/// Where a pointer's token ends (at the next `/` or the end) and whether it holds a `~` (an
/// escape), in one pass: eight bytes at a time up to the word that holds either, then byte
/// by byte. Layer 2 and diagnostic placement resolve about ten pointers per document.
#[inline]
fn token_end(bytes: &[u8]) -> (usize, bool) {
    const ONES: u64 = u64::from_le_bytes([1; 8]);
    const HIGH: u64 = ONES << 7;
    // Flags a word holding `c` (falsely flagging one is harmless: the bytes are then read one
    // by one).
    let holds = |word: u64, c: u8| {
        let x = word ^ (ONES * u64::from(c));
        x.wrapping_sub(ONES) & !x & HIGH != 0
    };
    let mut end = 0;
    for word in bytes.as_chunks::<8>().0 {
        let word = u64::from_le_bytes(*word);
        if holds(word, b'/') || holds(word, b'~') {
            break;
        }
        end += 8;
    }
    let mut tilde = false;
    while let Some(&b) = bytes.get(end)
        && b != b'/'
    {
        tilde |= b == b'~';
        end += 1;
    }
    (end, tilde)
}

/// A tree as its author wrote it: serializes without the members validation filled in.
#[derive(Debug, Clone, Copy)]
pub struct Authored<'n, 'a>(pub &'n Node<'a>);

impl Serialize for Authored<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0.value {
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Authored(item))?;
                }
                seq.end()
            }
            Value::Object(members) => {
                let mut map = serializer.serialize_map(None)?;
                for m in members.iter().filter(|m| !m.defaulted) {
                    map.serialize_entry(&m.key, &Authored(&m.value))?;
                }
                map.end()
            }
            _ => self.0.serialize(serializer),
        }
    }
}

/// The result of [`Node::resolve`].
#[derive(Debug, Clone, Copy)]
pub struct Resolved<'n, 'a> {
    /// The deepest node reached.
    pub node: &'n Node<'a>,
    /// The member whose value is `node`, if `node` was reached as an object member.
    pub member: Option<&'n Member<'a>>,
    /// Whether every token of the pointer was found.
    pub complete: bool,
}

fn unescape(token: &str) -> std::borrow::Cow<'_, str> {
    if token.bytes().any(|b| b == b'~') { token.replace("~1", "/").replace("~0", "~").into() } else { token.into() }
}

/// Serializes as plain JSON (spans dropped). Used for the authored digest (through RFC 8785
/// canonicalization) and to print the defaulted model.
impl Serialize for Node<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.value {
            Value::Null => serializer.serialize_unit(),
            Value::Bool(b) => serializer.serialize_bool(*b),
            Value::Number(Number::Integer(i)) => match (u64::try_from(*i), i64::try_from(*i)) {
                (Ok(u), _) => serializer.serialize_u64(u),
                (_, Ok(s)) => serializer.serialize_i64(s),
                // Beyond 64 bits JSON consumers read a double anyway (RFC 8785 does too).
                _ => serializer.serialize_f64(*i as f64),
            },
            Value::Number(Number::Float(f)) => serializer.serialize_f64(*f),
            Value::String(s) => serializer.serialize_str(s),
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Value::Object(members) => {
                let mut map = serializer.serialize_map(Some(members.len()))?;
                for m in members {
                    map.serialize_entry(&m.key, &m.value)?;
                }
                map.end()
            }
        }
    }
}

/// Builds RFC 6901 pointers while walking a tree: push a token, descend, pop.
#[derive(Debug, Default, Clone)]
pub(crate) struct PointerBuf {
    text: String,
}

impl From<String> for PointerBuf {
    /// Continues an existing pointer.
    fn from(text: String) -> Self {
        PointerBuf { text }
    }
}

impl PointerBuf {
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        PointerBuf { text: String::with_capacity(capacity) }
    }

    pub(crate) fn push(&mut self, token: &str) {
        self.text.push('/');
        if token.bytes().any(|b| b == b'~' || b == b'/') {
            self.text.push_str(&token.replace('~', "~0").replace('/', "~1"));
        } else {
            self.text.push_str(token);
        }
    }

    pub(crate) fn push_index(&mut self, index: usize) {
        use std::fmt::Write;
        // Writing to a String cannot fail.
        let _ = write!(self.text, "/{index}");
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    pub(crate) fn into_string(self) -> String {
        self.text
    }

    /// The pointer with one more token, without changing this buffer.
    pub(crate) fn join(&self, token: &str) -> String {
        let mut p = self.clone();
        p.push(token);
        p.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(v: Value) -> Node {
        Node { span: Span::default(), value: v }
    }

    #[test]
    fn a_token_ends_at_the_first_slash_and_knows_its_escapes() {
        for len in 0..20 {
            for stop in ['/', '~', 'x'] {
                for at in 0..=len {
                    let mut text: Vec<u8> = (0..len).map(|i| b"abcdefg"[i % 7]).collect();
                    if at < len {
                        text[at] = stop as u8;
                    }
                    text.extend_from_slice(b"/~z");
                    let end = text.iter().position(|&b| b == b'/').unwrap_or(text.len());
                    let tilde = text[..end].contains(&b'~');
                    assert_eq!(token_end(&text), (end, tilde), "{:?}", String::from_utf8_lossy(&text));
                }
            }
        }
    }

    #[test]
    fn pointer_escapes_and_resolves() {
        let mut p = PointerBuf::default();
        p.push("a/b");
        p.push("~x");
        assert_eq!(p.as_str(), "/a~1b/~0x");
        p.push_index(7);
        assert_eq!(p.into_string(), "/a~1b/~0x/7");

        let inner = leaf(Value::Object(vec![Member {
            key: "~x".into(),
            key_span: Span::default(),
            value: leaf(Value::Bool(true)),
            defaulted: false,
        }]));
        let root = leaf(Value::Object(vec![Member {
            key: "a/b".into(),
            key_span: Span::default(),
            value: leaf(Value::Array(vec![inner])),
            defaulted: false,
        }]));
        let r = root.resolve("/a~1b/0/~0x");
        assert!(r.complete);
        assert_eq!(r.node.value, Value::Bool(true));
        let r = root.resolve("/a~1b/7");
        assert!(!r.complete);
    }
}
