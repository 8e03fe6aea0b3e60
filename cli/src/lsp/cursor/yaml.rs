//! The cursor in YAML, read by indentation: the nearest lines above with less indentation
//! are the parents (a `key:` opening a block, a `- ` list item), the lines at the cursor's
//! indentation in the same block are its siblings. Inside a flow collection (`runtime: {kind:
//! javascript}`, `- [a, b]`, over one line or several) the block path leads to the
//! collection and the flow scanner ([`super::flow`]) reads the rest.

use std::borrow::Cow;
use std::ops::Range;

use super::{Cursor, Slot, Step};

/// One line of YAML, as far as the cursor needs it.
struct Line<'t> {
    /// The columns of its `- ` markers.
    markers: Vec<usize>,
    /// Where its content starts (after indentation and markers).
    content: usize,
    /// Its key, if it is `key:` or `key: value`.
    key: Option<&'t str>,
    /// Its scalar value after `key:`, without a comment, if any (`None` for a key that opens
    /// a block).
    value: Option<&'t str>,
}

impl Line<'_> {
    /// The column of its first marker, or of its content.
    fn first(&self) -> usize {
        self.markers.first().copied().unwrap_or(self.content)
    }

    /// A `key:` with nothing after it, and no marker: the parent of a block, or of a list
    /// written at its own column (`variables:` then `- name: A` below it, not indented).
    fn opens_block(&self) -> bool {
        self.markers.is_empty() && self.opens_block_after_markers()
    }

    /// A `key:` with nothing after it, after any markers (`- env:`).
    fn opens_block_after_markers(&self) -> bool {
        self.key.is_some() && self.value.is_none()
    }
}

fn read_line(line: &str) -> Option<Line<'_>> {
    let mut content = line.len() - line.trim_start_matches(' ').len();
    let mut markers = Vec::new();
    while line[content..].starts_with("- ") || line[content..].starts_with("-\t") || &line[content..] == "-" {
        markers.push(content);
        content += 1;
        content += line[content..].len() - line[content..].trim_start_matches([' ', '\t']).len();
    }
    let body = line[content..].trim_end();
    if body.is_empty() && markers.is_empty() || body.starts_with('#') {
        return None;
    }
    let (key, value) = match key_split(body) {
        Some(colon) => {
            let value = without_comment(body[colon + 1..].trim());
            (Some(unquote(body[..colon].trim())), (!value.is_empty()).then(|| unquote(value)))
        }
        None => (None, None),
    };
    Some(Line { markers, content, key, value })
}

/// Where the `:` that ends a line's key is: the first `:` followed by a space, a tab or the
/// line's end, outside quotes.
fn key_split(body: &str) -> Option<usize> {
    let bytes = body.as_bytes();
    let mut quote = None;
    for (i, &b) in bytes.iter().enumerate() {
        match (quote, b) {
            (None, b'"' | b'\'') if i == 0 => quote = Some(b),
            (Some(q), _) if b == q => quote = None,
            (None, b':') if bytes.get(i + 1).is_none_or(|&n| n == b' ' || n == b'\t') => return Some(i),
            (None, b'#') if i > 0 && matches!(bytes[i - 1], b' ' | b'\t') => return None,
            _ => {}
        }
    }
    None
}

/// A scalar without the comment after it (` # ...`), and without trailing space; a quoted
/// scalar is kept to its closing quote.
fn without_comment(s: &str) -> &str {
    if let Some(q @ ('"' | '\'')) = s.chars().next()
        && let Some(close) = s[1..].find(q)
    {
        return &s[..close + 2];
    }
    let cut = s.char_indices().find(|&(i, c)| c == '#' && i > 0 && s[..i].ends_with([' ', '\t'])).map(|(i, _)| i);
    s[..cut.unwrap_or(s.len())].trim_end()
}

fn unquote(s: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

pub(super) fn at(text: &str, offset: usize) -> Option<Cursor> {
    let flows = flows(text);
    // The block reader sees each flow collection's inside as blank, so the lines of one that
    // spans several are neither parents nor siblings of a key below it.
    let block = masked(text, &flows);
    if let Some(flow) = flows.iter().find(|f| f.start < offset && offset < f.end) {
        // The block path names the collection's value; the flow scanner goes on from there.
        let outer = block_at(&block, flow.start)?;
        let mut inner = super::flow::yaml_at(text, flow.start, offset)?;
        let mut path = outer.path;
        path.append(&mut inner.path);
        inner.path = path;
        return Some(inner);
    }
    block_at(&block, offset)
}

/// `text` with the inside of each flow collection blanked (line breaks kept, so every offset
/// and line stays where it was).
fn masked<'t>(text: &'t str, flows: &[Range<usize>]) -> Cow<'t, str> {
    if flows.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut bytes = text.as_bytes().to_vec();
    for flow in flows {
        let inside = flow.start + 1..(flow.end - 1).min(bytes.len());
        for b in bytes.get_mut(inside).unwrap_or_default() {
            if !matches!(b, b'\n' | b'\r') {
                *b = b' ';
            }
        }
    }
    // Brackets are ASCII, so a character is blanked whole or not at all.
    String::from_utf8(bytes).map_or(Cow::Borrowed(text), Cow::Owned)
}

/// The outermost flow collections, each from its opening bracket to one past its closing one
/// (to one past the text's end plus one for a collection left open): the text is read line by
/// line in block style (a block scalar's lines skipped) until a value opens with `{` or `[`,
/// then bracket by bracket (strings and comments skipped) until it closes.
fn flows(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let len = text.len();
    let mut found = Vec::new();
    let mut i = 0;
    let mut open = 0;
    let mut depth = 0usize;
    // The column of the key whose block scalar (`|`, `>`) the next lines may belong to.
    let mut block_scalar: Option<usize> = None;
    while i < len {
        if depth == 0 {
            let line_end = text[i..].find('\n').map_or(text.len(), |n| i + n);
            let line = &text[i..line_end];
            let indent = line.len() - line.trim_start_matches(' ').len();
            if let Some(column) = block_scalar {
                if line.trim().is_empty() || indent > column {
                    i = line_end + 1;
                    continue;
                }
                block_scalar = None;
            }
            let value_at = read_line(line).and_then(|l| {
                let body = &line[l.content..];
                if body.starts_with(['{', '[']) {
                    return Some(l.content);
                }
                let colon = l.content + key_split(body)?;
                let after = &line[colon + 1..];
                let value_at = colon + 1 + after.len() - after.trim_start_matches([' ', '\t']).len();
                if line[value_at..].starts_with(['|', '>']) {
                    block_scalar = Some(l.first());
                }
                Some(value_at)
            });
            match value_at {
                Some(at) if line[at..].starts_with(['{', '[']) => {
                    open = i + at;
                    i += at;
                }
                _ => {
                    i = line_end + 1;
                    continue;
                }
            }
        }
        match bytes[i] {
            // A quote opens a string only where a scalar starts (`it's` is a plain scalar).
            q @ (b'"' | b'\'') if matches!(bytes[i - 1], b' ' | b'\t' | b'\n' | b'\r' | b'{' | b'[' | b',' | b':') => {
                // To the closing quote (`\"` escaped in one, `''` in the other), over lines.
                i += 1;
                while i < len {
                    match bytes[i] {
                        b'\\' if q == b'"' => i += 2,
                        b'\'' if q == b'\'' && bytes.get(i + 1) == Some(&b'\'') => i += 2,
                        b if b == q => break,
                        _ => i += 1,
                    }
                }
            }
            b'#' if i > 0 && bytes[i - 1].is_ascii_whitespace() => {
                i = text[i..].find('\n').map_or(text.len(), |n| i + n);
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    // The collection is closed: what follows on its line is a comment.
                    found.push(open..i + 1);
                    i = text[i..].find('\n').map_or(text.len(), |n| i + n + 1);
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    if depth > 0 {
        found.push(open..text.len() + 1);
    }
    found
}

/// The cursor in block style.
fn block_at(text: &str, offset: usize) -> Option<Cursor> {
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let whole = text[line_start..line_end].trim_end_matches('\r');
    let column = (offset - line_start).min(whole.len());
    // The current line up to the cursor decides key or value; a blank line is a new key at
    // the cursor's column.
    let before = &whole[..column.min(whole.len())];
    let here = read_line(before).unwrap_or(Line { markers: Vec::new(), content: column, key: None, value: None });
    if before[..here.content.min(before.len())].contains('#') {
        return None;
    }
    let above: Vec<&str> = text[..line_start].lines().collect();
    let mut path = parents(&above, &here);
    let mut own_index = index_of(&above, here.markers.first().copied().unwrap_or(usize::MAX));
    for _ in &here.markers {
        path.push(Step::Index(own_index));
        own_index = 0;
    }
    let content = here.content.min(whole.len());
    let colon = key_split(&before[content.min(before.len())..]).map(|c| content + c);
    let (slot, start, end, space_before) = match (here.key, colon) {
        (Some(key), Some(colon)) => {
            let after = &whole[colon + 1..];
            let value_start = colon + 1 + after.len() - after.trim_start_matches([' ', '\t']).len();
            // Inside a flow collection, or a comment: no place of ours.
            if whole[value_start..column.max(value_start)].starts_with(['{', '[', '#']) {
                return None;
            }
            path.push(Step::Key(key.to_owned()));
            let value = without_comment(&whole[value_start..]);
            let value_end = (value_start + value.len()).max(column);
            (Slot::Value, value_start.min(column), value_end, value_start == colon + 1 && column == value_start)
        }
        _ => {
            let rest = &whole[content..];
            let key_end = key_split(rest).unwrap_or_else(|| without_comment(rest).len());
            (Slot::Key, content.min(column), (content + key_end).max(column), false)
        }
    };
    let siblings = siblings(text, line_start, here.content, &here, slot == Slot::Value);
    let token = line_start + start..line_start + end;
    Some(Cursor { path, slot, token, siblings, finished: false, space_before })
}

/// The steps down to the line `here`, from the lines `above` it.
fn parents(above: &[&str], here: &Line<'_>) -> Vec<Step> {
    let mut limit = here.first();
    // Whether `limit` is a list marker's column: a `key:` at that same column is the list's
    // parent (a list written at its key's indentation).
    let mut at_marker = !here.markers.is_empty();
    let mut steps = Vec::new();
    for (n, raw) in above.iter().enumerate().rev() {
        let Some(line) = read_line(raw) else { continue };
        let first = line.first();
        if at_marker && first == limit && line.opens_block() {
            steps.push(Step::Key(line.key.unwrap_or("").to_owned()));
            at_marker = false;
        } else if first < limit {
            // A key that opens a block left of the limit is a parent; so is each marker left
            // of it.
            if line.content < limit && line.opens_block_after_markers() {
                steps.push(Step::Key(line.key.unwrap_or("").to_owned()));
            }
            for &marker in line.markers.iter().rev().filter(|&&m| m < limit) {
                steps.push(Step::Index(index_of(&above[..n], marker)));
            }
            at_marker = !line.markers.is_empty() && line.content >= limit;
            limit = first;
        } else {
            continue;
        }
        if limit == 0 && !at_marker {
            break;
        }
    }
    steps.reverse();
    steps
}

/// The index of the list item whose marker is at `column` on the line after `above`: the
/// markers at that column since the list began (at a line left of it, or at the `key:` that
/// holds it at the same column).
fn index_of(above: &[&str], column: usize) -> usize {
    let mut count = 0;
    for raw in above.iter().rev() {
        let Some(line) = read_line(raw) else { continue };
        let first = line.first();
        if first < column || (first == column && line.opens_block()) {
            break;
        }
        if line.markers.contains(&column) {
            count += 1;
        }
    }
    count
}

/// The keys written at `column` in the cursor's block: above, the cursor's own (when the
/// cursor is past its `:`), and below.
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
        let first = line.first();
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
        let first = line.first();
        if first < column || (first == column && !line.markers.is_empty()) {
            break;
        }
        take(&line);
    }
    found
}
