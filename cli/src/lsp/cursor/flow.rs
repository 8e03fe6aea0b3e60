//! The cursor in a flow collection: a JSON document, or a YAML flow collection (`runtime:
//! {kind: javascript, args: [a, b]}`), which is JSON with plain scalars, single quotes and
//! comments. The text is scanned from the collection's opening bracket up to the cursor
//! (brackets, strings, words, `:` and `,`), keeping the open objects and lists; the members
//! after the cursor are read on to the object's end. A string left open at a line's end is
//! taken as ending there, so one broken line does not swallow the rest.

use super::{Cursor, Slot, Step};

/// Which flow syntax is read.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    /// JSON: `"` strings, words are literals (`true`, `12`) and never keys.
    Json,
    /// YAML's flow style: also `'` strings, plain scalars as keys and values (`{a: x y}`),
    /// `#` comments after white space.
    Yaml,
}

/// An object or a list open at the cursor.
struct Frame {
    /// How its parent reaches it (none for the root).
    step: Option<Step>,
    object: bool,
    /// In an object: whether the next string is a key.
    expect_key: bool,
    /// In a list: the current item's index.
    index: usize,
    members: Vec<(String, Option<String>)>,
}

impl Frame {
    fn new(step: Option<Step>, object: bool) -> Frame {
        Frame { step, object, expect_key: object, index: 0, members: Vec::new() }
    }

    /// The step to a value that opens here.
    fn child(&self) -> Option<Step> {
        if self.object {
            self.members.last().map(|(key, _)| Step::Key(key.clone()))
        } else {
            Some(Step::Index(self.index))
        }
    }

    /// A string was read: a key, or the last key's value.
    fn string(&mut self, content: &str) {
        if !self.object {
            return;
        }
        if self.expect_key {
            self.members.push((content.to_owned(), None));
        } else if let Some(last) = self.members.last_mut() {
            last.1 = Some(content.to_owned());
        }
    }
}

/// How a string that opens at some offset ends.
enum StringEnd {
    /// At this closing quote.
    Closed(usize),
    /// At this line break, unclosed.
    Broken(usize),
    /// Not before the limit.
    Open,
}

/// How the string opening at `start` (a `"`, or in YAML a `'`) ends before `limit`.
fn string_end(bytes: &[u8], start: usize, limit: usize) -> StringEnd {
    let quote = bytes[start];
    let mut j = start + 1;
    while j < limit.min(bytes.len()) {
        match bytes[j] {
            b'\\' if quote == b'"' => j += 2,
            // YAML's single-quoted strings write a quote as `''`.
            b'\'' if quote == b'\'' && bytes.get(j + 1) == Some(&b'\'') => j += 2,
            b if b == quote => return StringEnd::Closed(j),
            b'\n' | b'\r' => return StringEnd::Broken(j),
            _ => j += 1,
        }
    }
    StringEnd::Open
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-' | b'_')
}

/// Where a word starting at `start` ends: a JSON literal's characters; a YAML plain scalar
/// runs to a flow indicator, a line break, a `:` or ` #` that ends it, its trailing blanks
/// left out (`{a: x y, b: c}` reads `x y`).
fn word_end(bytes: &[u8], start: usize, dialect: Dialect) -> usize {
    if dialect == Dialect::Json {
        return start + bytes[start..].iter().take_while(|&&b| is_word(b)).count();
    }
    if !bytes.get(start).is_some_and(|&b| starts_word(b, dialect)) {
        return start;
    }
    let mut end = start;
    let mut i = start;
    while let Some(&b) = bytes.get(i) {
        let blank = matches!(b, b' ' | b'\t');
        let ends = matches!(b, b',' | b'[' | b']' | b'{' | b'}' | b'\n' | b'\r')
            || (b == b':'
                && bytes.get(i + 1).is_none_or(|n| matches!(n, b' ' | b'\t' | b'\n' | b'\r' | b',' | b']' | b'}')))
            || (b == b'#' && i > start && matches!(bytes[i - 1], b' ' | b'\t'));
        if ends {
            break;
        }
        i += 1;
        if !blank {
            end = i;
        }
    }
    end
}

/// Whether a word starts with `b` in `dialect`.
fn starts_word(b: u8, dialect: Dialect) -> bool {
    match dialect {
        Dialect::Json => is_word(b),
        Dialect::Yaml => {
            !matches!(b, b',' | b'[' | b']' | b'{' | b'}' | b'#' | b':' | b'"' | b'\'') && !b.is_ascii_whitespace()
        }
    }
}

/// The cursor at `offset` of a JSON document.
pub(super) fn at(text: &str, offset: usize) -> Option<Cursor> {
    scan(text, 0, offset, Dialect::Json)
}

/// The cursor at `offset` inside the YAML flow collection whose opening bracket is at
/// `from`: its path starts at the collection.
pub(super) fn yaml_at(text: &str, from: usize, offset: usize) -> Option<Cursor> {
    scan(text, from, offset, Dialect::Yaml)
}

fn scan(text: &str, from: usize, offset: usize, dialect: Dialect) -> Option<Cursor> {
    let bytes = text.as_bytes();
    let mut frames: Vec<Frame> = Vec::new();
    let mut i = from;
    // Where the token under the cursor starts, once the scan reaches it.
    let mut token_start = None;
    // Whether the last thing read was a whole string or word, with nothing since but space.
    let mut finished = false;
    while i < offset {
        match bytes[i] {
            b'#' if dialect == Dialect::Yaml && (i == 0 || bytes[i - 1].is_ascii_whitespace()) => {
                // A comment runs to the line's end; the cursor in it is no place.
                let end = bytes[i..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |n| i + n);
                if end >= offset {
                    return None;
                }
                i = end;
            }
            b'"' | b'\'' if bytes[i] == b'"' || dialect == Dialect::Yaml => match string_end(bytes, i, offset) {
                StringEnd::Open => {
                    token_start = Some(i);
                    break;
                }
                StringEnd::Closed(end) => {
                    if let Some(frame) = frames.last_mut() {
                        frame.string(&text[i + 1..end]);
                    }
                    finished = true;
                    i = end + 1;
                }
                StringEnd::Broken(end) => {
                    if let Some(frame) = frames.last_mut() {
                        // A value left open most likely swallowed its member's `,`.
                        let value = frame.object && !frame.expect_key;
                        frame.string(&text[i + 1..end]);
                        frame.expect_key |= value;
                    }
                    finished = false;
                    i = end;
                }
            },
            b':' | b',' | b'{' | b'[' | b'}' | b']' => {
                structural(&mut frames, bytes[i]);
                finished = false;
                i += 1;
            }
            b if starts_word(b, dialect) => {
                let end = word_end(bytes, i, dialect);
                if end >= offset {
                    token_start = Some(i);
                    break;
                }
                // A plain scalar is a key or a value, as a string is; a JSON literal is
                // neither a key nor a value an arm is read from.
                if dialect == Dialect::Yaml
                    && let Some(frame) = frames.last_mut()
                {
                    frame.string(&text[i..end]);
                }
                finished = true;
                i = end;
            }
            _ => i += 1,
        }
    }
    let frame = frames.last()?;
    let start = token_start.unwrap_or(offset);
    let end = match bytes.get(start) {
        Some(b'"' | b'\'') if token_start.is_some() => match string_end(bytes, start, bytes.len()) {
            StringEnd::Closed(close) => close + 1,
            StringEnd::Broken(line_end) => line_end,
            StringEnd::Open => bytes.len(),
        },
        _ => word_end(bytes, start, dialect),
    }
    .max(offset);
    let mut path: Vec<Step> = frames.iter().filter_map(|f| f.step.clone()).collect();
    let slot = if frame.object && frame.expect_key {
        Slot::Key
    } else {
        path.extend(frame.child());
        Slot::Value
    };
    let mut cursor = Cursor {
        path,
        slot,
        token: start..end,
        siblings: frame.members.clone(),
        finished: finished && token_start.is_none(),
        // YAML reads `a:b` as one scalar: a value typed right after the `:` needs a space.
        space_before: dialect == Dialect::Yaml
            && slot == Slot::Value
            && start == offset
            && offset > 0
            && bytes[offset - 1] == b':',
    };
    // The key under the cursor is being written: it is not one of the siblings.
    if slot == Slot::Key && token_start.is_some() {
        let word = cursor.word(text).to_owned();
        if cursor.siblings.last().is_some_and(|(key, _)| *key == word) {
            cursor.siblings.pop();
        }
    }
    if frame.object {
        // Past an empty key slot the next string is a key; past a key being written or a
        // value, the rest of the cursor's own member comes first.
        let at_key = slot == Slot::Key && token_start.is_none();
        cursor.siblings.extend(members_after(text, end, at_key, dialect));
    }
    Some(cursor)
}

/// What `,`, `:` or a bracket does to the open frames.
fn structural(frames: &mut Vec<Frame>, b: u8) {
    match b {
        b':' => {
            if let Some(frame) = frames.last_mut() {
                frame.expect_key = false;
            }
        }
        b',' => {
            if let Some(frame) = frames.last_mut() {
                if frame.object {
                    frame.expect_key = true;
                } else {
                    frame.index += 1;
                }
            }
        }
        b'{' | b'[' => {
            let step = frames.last().and_then(Frame::child);
            frames.push(Frame::new(step, b == b'{'));
        }
        _ => {
            frames.pop();
        }
    }
}

/// The members of the object the cursor is in that follow `from`, to the object's end.
fn members_after(text: &str, from: usize, at_key: bool, dialect: Dialect) -> Vec<(String, Option<String>)> {
    let bytes = text.as_bytes();
    let mut frame = Frame::new(None, true);
    frame.expect_key = at_key;
    let mut depth = 0usize;
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'"' | b'\'' if bytes[i] == b'"' || dialect == Dialect::Yaml => {
                let (content_end, next) = match string_end(bytes, i, bytes.len()) {
                    StringEnd::Closed(end) => (end, end + 1),
                    StringEnd::Broken(end) => (end, end),
                    StringEnd::Open => return frame.members,
                };
                if depth == 0 {
                    frame.string(&text[i + 1..content_end]);
                    frame.expect_key = false;
                }
                i = next;
                continue;
            }
            b'#' if dialect == Dialect::Yaml && i > 0 && bytes[i - 1].is_ascii_whitespace() => {
                i = bytes[i..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |n| i + n);
                continue;
            }
            b if dialect == Dialect::Yaml && starts_word(b, dialect) => {
                let end = word_end(bytes, i, dialect).max(i + 1);
                if depth == 0 {
                    frame.string(&text[i..end]);
                    frame.expect_key = false;
                }
                i = end;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth == 0 => return frame.members,
            b'}' | b']' => depth -= 1,
            b',' if depth == 0 => frame.expect_key = true,
            // After `:` the next string is the last key's value (`string` keeps it).
            b':' if depth == 0 => frame.expect_key = false,
            _ => {}
        }
        i += 1;
    }
    frame.members
}
