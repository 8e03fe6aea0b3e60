//! Where a cursor is in a document that may not parse: the path of keys and list items down
//! to it, whether it is on a key or a value, and the token under it. An editor asks for
//! completion while the author is halfway through a word (`"sche|`), so this reads the text
//! tolerantly: JSON by scanning up to the cursor (brackets, strings, `:` and `,`), YAML by
//! its indentation (the lines above with less indentation are the parents).

use std::ops::Range;

use manifest_core::Format;

/// One step down a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// An object member.
    Key(String),
    /// A list item, by index.
    Index(usize),
}

/// What the cursor stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// A member's key: `path` names the object.
    Key,
    /// A value: `path` names it (the member or the list item).
    Value,
}

/// The cursor's place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cursor {
    pub(crate) path: Vec<Step>,
    pub(crate) slot: Slot,
    /// The bytes of the word under the cursor (with its quotes, if any), possibly empty: what
    /// a completion replaces.
    pub(crate) token: Range<usize>,
    /// The members already written in the object the cursor is in (a key, and its value when
    /// that is a plain string): which fields not to offer again, and which arm a union is.
    pub(crate) siblings: Vec<(String, Option<String>)>,
}

impl Cursor {
    /// The token's text without its quotes.
    pub(crate) fn word<'t>(&self, text: &'t str) -> &'t str {
        let raw = text.get(self.token.clone()).unwrap_or("");
        let raw = raw.strip_prefix(['"', '\'']).unwrap_or(raw);
        raw.strip_suffix(['"', '\'']).unwrap_or(raw)
    }
}

/// The cursor at byte `offset` of `text`, or `None` outside any object (before the first
/// `{`, in a comment).
pub(crate) fn at(text: &str, offset: usize) -> Option<Cursor> {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    match Format::detect(text) {
        Format::Json => json(text, offset),
        Format::Yaml => yaml(text, offset),
    }
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
}

fn json(text: &str, offset: usize) -> Option<Cursor> {
    let bytes = text.as_bytes();
    let mut frames: Vec<Frame> = Vec::new();
    let mut i = 0;
    // Where the token under the cursor starts, once the scan reaches it.
    let mut token_start = None;
    while i < offset {
        match bytes[i] {
            b'"' => {
                let Some(end) = string_end(bytes, i, offset) else {
                    token_start = Some(i);
                    break;
                };
                let content = &text[i + 1..end];
                if let Some(frame) = frames.last_mut().filter(|f| f.object) {
                    if frame.expect_key {
                        frame.members.push((content.to_owned(), None));
                    } else if let Some(last) = frame.members.last_mut() {
                        last.1 = Some(content.to_owned());
                    }
                }
                i = end + 1;
            }
            b':' => {
                if let Some(frame) = frames.last_mut() {
                    frame.expect_key = false;
                }
                i += 1;
            }
            b',' => {
                if let Some(frame) = frames.last_mut() {
                    if frame.object {
                        frame.expect_key = true;
                    } else {
                        frame.index += 1;
                    }
                }
                i += 1;
            }
            open @ (b'{' | b'[') => {
                let step = frames.last().and_then(Frame::child);
                frames.push(Frame::new(step, open == b'{'));
                i += 1;
            }
            b'}' | b']' => {
                frames.pop();
                i += 1;
            }
            b if is_word(b) => {
                let end = i + bytes[i..].iter().take_while(|&&b| is_word(b)).count();
                if end >= offset {
                    token_start = Some(i);
                    break;
                }
                i = end;
            }
            _ => i += 1,
        }
    }
    let frame = frames.last()?;
    let start = token_start.unwrap_or(offset);
    let end = match bytes.get(start) {
        Some(b'"') if start < offset || token_start.is_some() => {
            // To the closing quote on the same line, if the author has one.
            let rest = &bytes[start + 1..];
            let stop = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            string_end(bytes, start, start + 1 + stop).map_or(start + 1 + stop, |e| e + 1)
        }
        _ => start + bytes[start..].iter().take_while(|&&b| is_word(b)).count(),
    };
    let end = end.max(offset);
    let mut path: Vec<Step> = frames.iter().filter_map(|f| f.step.clone()).collect();
    let slot = if frame.object && frame.expect_key {
        Slot::Key
    } else {
        path.extend(frame.child());
        Slot::Value
    };
    // The key under the cursor is being written: it is not one of the siblings.
    let mut siblings = frame.members.clone();
    if slot == Slot::Key && token_start.is_some() {
        siblings.retain(|(key, _)| key.as_str() != &text[start + 1..end.saturating_sub(1).max(start + 1)]);
    }
    Some(Cursor { path, slot, token: start..end, siblings })
}

/// The offset of the quote that closes the string opening at `start`, if it closes before
/// `limit`.
fn string_end(bytes: &[u8], start: usize, limit: usize) -> Option<usize> {
    let mut j = start + 1;
    while j < limit.min(bytes.len()) {
        match bytes[j] {
            b'\\' => j += 2,
            b'"' => return Some(j),
            _ => j += 1,
        }
    }
    None
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'+' | b'-' | b'_')
}

/// One line of YAML, as far as the cursor needs it.
struct Line<'t> {
    /// The columns of its `- ` markers.
    markers: Vec<usize>,
    /// Where its content starts (after indentation and markers).
    content: usize,
    /// Its key, if it is `key:` or `key: value`.
    key: Option<&'t str>,
    /// Its scalar value after `key:`, if any (`None` for a key that opens a block).
    value: Option<&'t str>,
}

fn read_line(line: &str) -> Option<Line<'_>> {
    let mut content = line.len() - line.trim_start_matches(' ').len();
    let mut markers = Vec::new();
    while line[content..].starts_with("- ") || &line[content..] == "-" {
        markers.push(content);
        content += 1;
        content += line[content..].len() - line[content..].trim_start_matches(' ').len();
    }
    let body = line[content..].trim_end();
    if body.is_empty() && markers.is_empty() || body.starts_with('#') {
        return None;
    }
    let (key, value) = match key_split(body) {
        Some(colon) => {
            let value = body[colon + 1..].trim();
            let value = (!value.is_empty() && !value.starts_with('#')).then_some(value);
            (Some(unquote(body[..colon].trim())), value.map(unquote))
        }
        None => (None, None),
    };
    Some(Line { markers, content, key, value })
}

/// Where the `:` that ends a line's key is: the first `:` followed by a space or the line's
/// end, outside quotes.
fn key_split(body: &str) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut quote = None;
    for (i, &b) in bytes.iter().enumerate() {
        match (quote, b) {
            (None, b'"' | b'\'') if i == 0 => quote = Some(b),
            (Some(q), _) if b == q => quote = None,
            (None, b':') if bytes.get(i + 1).is_none_or(|&n| n == b' ') => return Some(i),
            (None, b'#') if i > 0 && bytes[i - 1] == b' ' => return None,
            _ => {}
        }
    }
    None
}

fn unquote(s: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

fn yaml(text: &str, offset: usize) -> Option<Cursor> {
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let whole = text[line_start..line_end].trim_end_matches('\r');
    let column = offset - line_start;
    // The current line up to the cursor decides key or value; a blank line is a new key at
    // the cursor's column.
    let before = &whole[..column.min(whole.len())];
    let here = read_line(before).unwrap_or(Line { markers: Vec::new(), content: column, key: None, value: None });
    if before[..here.content.min(before.len())].contains('#') {
        return None;
    }
    let mut path = Vec::new();
    // Parents: walking up, the nearest line whose content starts left of the limit.
    let above: Vec<&str> = text[..line_start].lines().collect();
    let mut limit = here.markers.first().copied().unwrap_or(here.content);
    let mut parents = Vec::new();
    for (n, raw) in above.iter().enumerate().rev() {
        let Some(line) = read_line(raw) else { continue };
        let first = line.markers.first().copied().unwrap_or(line.content);
        if first >= limit && line.content >= limit {
            continue;
        }
        // A key that opens a block left of the limit is a parent; so is each marker left of it.
        if line.content < limit
            && let (Some(key), None) = (line.key, line.value)
        {
            parents.push(Step::Key(key.to_owned()));
        }
        for &marker in line.markers.iter().rev().filter(|&&m| m < limit) {
            parents.push(Step::Index(index_of(&above[..n], marker)));
        }
        limit = first;
        if limit == 0 {
            break;
        }
    }
    parents.reverse();
    path.extend(parents);
    let mut own_index = index_of(&above, here.markers.first().copied().unwrap_or(usize::MAX));
    for _ in &here.markers {
        path.push(Step::Index(own_index));
        own_index = 0;
    }
    let after_key = here.key.is_some() && key_split(&before[here.content..]).is_some();
    let content_column = here.content;
    let (slot, start, end) = if after_key {
        let colon = here.content + key_split(&before[here.content..]).unwrap_or(0);
        path.push(Step::Key(here.key.unwrap_or("").to_owned()));
        let value_start = colon + 1 + whole[colon + 1..].len() - whole[colon + 1..].trim_start().len();
        let value_end = whole[..].trim_end().len().max(value_start);
        (Slot::Value, value_start.min(column), value_end.max(column))
    } else {
        let end = key_split(&whole[content_column.min(whole.len())..])
            .map_or(whole.trim_end().len(), |c| content_column + c)
            .max(column);
        (Slot::Key, content_column.min(column), end)
    };
    let siblings = siblings(text, line_start, content_column, &here, after_key);
    Some(Cursor { path, slot, token: line_start + start..line_start + end, siblings })
}

/// The index of the list item whose marker is at `column` on the line after `above`: the
/// markers at that column since the block began.
fn index_of(above: &[&str], column: usize) -> usize {
    let mut count = 0;
    for raw in above.iter().rev() {
        let Some(line) = read_line(raw) else { continue };
        let first = line.markers.first().copied().unwrap_or(line.content);
        if first < column {
            break;
        }
        if line.markers.contains(&column) {
            count += 1;
        }
    }
    count
}

/// The keys written at the cursor's column in the same block: above, the cursor's own (when
/// the cursor is past its `:`), and below.
fn siblings(text: &str, line_start: usize, column: usize, here: &Line<'_>, own: bool) -> Vec<(String, Option<String>)> {
    let mut found = Vec::new();
    let opens_item = !here.markers.is_empty();
    let mut take = |line: &Line<'_>| {
        if line.content == column
            && let Some(key) = line.key
        {
            found.push((key.to_owned(), line.value.map(str::to_owned)));
        }
    };
    for raw in text[..line_start].lines().rev() {
        if opens_item {
            break;
        }
        let Some(line) = read_line(raw) else { continue };
        let first = line.markers.first().copied().unwrap_or(line.content);
        if line.content == column && first < column {
            // The first key of this list item, on its marker's line.
            take(&line);
            break;
        }
        if first < column {
            break;
        }
        take(&line);
    }
    if own {
        take(here);
    }
    let after = text[line_start..].find('\n').map_or(text.len(), |i| line_start + i + 1);
    for raw in text[after.min(text.len())..].lines() {
        let Some(line) = read_line(raw) else { continue };
        let first = line.markers.first().copied().unwrap_or(line.content);
        if first < column || (first == column && !line.markers.is_empty()) {
            break;
        }
        take(&line);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cursor where `|` is (the bar removed).
    fn cursor(marked: &str) -> (String, Cursor) {
        let offset = marked.find('|').expect("a |");
        let text = marked.replacen('|', "", 1);
        let cursor = at(&text, offset).expect("in an object");
        (text, cursor)
    }

    fn keys(path: &[Step]) -> Vec<String> {
        path.iter()
            .map(|s| match s {
                Step::Key(k) => k.clone(),
                Step::Index(i) => format!("[{i}]"),
            })
            .collect()
    }

    #[test]
    fn json_key_halfway_typed_in_a_nested_object() {
        let (text, c) = cursor("{\"schema\": \"x\", \"deployment\": {\"jobs\": 1, \"pla|\n}");
        assert_eq!(keys(&c.path), ["deployment"]);
        assert_eq!(c.slot, Slot::Key);
        assert_eq!(c.word(&text), "pla");
        assert_eq!(c.siblings, [("jobs".to_owned(), None)]);
    }

    #[test]
    fn json_value_in_a_list_of_objects_knows_its_index_and_key() {
        let (text, c) = cursor("{\"a\": [{\"k\": 1}, {\"kind\": \"se|cret\"}]}");
        assert_eq!(keys(&c.path), ["a", "[1]", "kind"]);
        assert_eq!(c.slot, Slot::Value);
        assert_eq!(c.word(&text), "secret", "the whole word, to the closing quote");
        assert_eq!(&text[c.token.clone()], "\"secret\"");
    }

    #[test]
    fn json_empty_key_slot_after_a_comma_and_closed_objects_are_left() {
        let (text, c) = cursor("{\"a\": {\"b\": {}}, |}");
        assert!(c.path.is_empty());
        assert_eq!(c.slot, Slot::Key);
        assert_eq!(c.word(&text), "");
        assert_eq!(c.siblings.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["a"]);
        assert!(at("{\"a\": 1} ", 9).is_none(), "after the root object");
        // YAML's empty document is the root object's key slot.
        assert!(at("  ", 1).is_some_and(|c| c.path.is_empty() && c.slot == Slot::Key));
    }

    #[test]
    fn yaml_nested_key_and_value_by_indentation() {
        let (text, c) = cursor("schema: x\ndeployment:\n  jobs: 1\n  pla|\nruntime:\n  kind: javascript\n");
        assert_eq!(keys(&c.path), ["deployment"]);
        assert_eq!((c.slot, c.word(&text)), (Slot::Key, "pla"));
        assert_eq!(c.siblings, [("jobs".to_owned(), Some("1".to_owned()))]);

        let (text, c) = cursor("runtime:\n  kind: java|\n  entrypoint: a.js\n");
        assert_eq!(keys(&c.path), ["runtime", "kind"]);
        assert_eq!((c.slot, c.word(&text)), (Slot::Value, "java"));
        assert_eq!(c.siblings.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["kind", "entrypoint"]);
    }

    #[test]
    fn yaml_list_items_count_their_markers() {
        let (text, c) = cursor("configuration:\n  variables:\n    - kind: plain\n      name: A\n    - kind: sec|ret\n");
        assert_eq!(keys(&c.path), ["configuration", "variables", "[1]", "kind"]);
        assert_eq!(c.word(&text), "secret");

        let (_, c) = cursor("configuration:\n  variables:\n    - kind: plain\n      na|\n");
        assert_eq!(keys(&c.path), ["configuration", "variables", "[0]"]);
        assert_eq!(c.slot, Slot::Key);
        assert_eq!(c.siblings.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["kind"]);
    }

    #[test]
    fn yaml_comments_are_no_place() {
        assert!(at("# a comment |", 12).is_none());
    }
}
