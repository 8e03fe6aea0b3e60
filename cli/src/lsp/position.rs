//! Byte offsets in a document and the protocol's positions: a line (0-based) and a
//! character counted in UTF-16 code units, the encoding every client speaks (LSP 3.17's
//! default). Lines end at `\n`, `\r\n` or a lone `\r`, as the protocol counts them. A
//! position past the end of its line is the line's end, as the protocol says.

use ls_types::{Position, Range};

/// Where each line of a text starts.
pub(crate) struct Lines<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> Lines<'a> {
    pub(crate) fn new(text: &'a str) -> Lines<'a> {
        Lines { text, starts: line_starts(text, 0..text.len()) }
    }

    /// The lines of `text` whose line starts are already known (kept up to date by
    /// [`replaced`] edit after edit).
    pub(crate) fn with_starts(text: &'a str, starts: Vec<usize>) -> Lines<'a> {
        Lines { text, starts }
    }

    /// Gives back its line starts.
    pub(crate) fn into_starts(self) -> Vec<usize> {
        self.starts
    }

    /// The position of byte `offset` (clamped to the text, and back to a character boundary).
    pub(crate) fn position(&self, offset: usize) -> Position {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        let character = self.text[self.starts[line]..offset].encode_utf16().count();
        Position { line: saturate(line), character: saturate(character) }
    }

    /// The range of bytes `start..end`.
    pub(crate) fn range(&self, start: usize, end: usize) -> Range {
        Range { start: self.position(start), end: self.position(end.max(start)) }
    }

    /// The byte offset of `position`: a line past the last is the text's end, a character past
    /// its line's end is the line's end (before its `\r\n` or `\n`), and a position inside a
    /// character that takes two UTF-16 units is that character's start.
    pub(crate) fn offset(&self, position: Position) -> usize {
        let Some(&start) = self.starts.get(position.line as usize) else { return self.text.len() };
        let end = self.starts.get(position.line as usize + 1).map_or(self.text.len(), |&next| next);
        let line = self.text[start..end].trim_end_matches(['\n', '\r']);
        let mut units = 0usize;
        for (i, c) in line.char_indices() {
            units += c.len_utf16();
            if units > position.character as usize {
                return start + i;
            }
        }
        start + line.len()
    }
}

/// The line starts that the bytes at `scan` make (with 0 when the scan starts there): a line
/// starts after a `\n`, or after a `\r` not followed by `\n`.
fn line_starts(text: &str, scan: std::ops::Range<usize>) -> Vec<usize> {
    let bytes = text.as_bytes();
    let ends_line = |i: usize| bytes[i] == b'\n' || (bytes[i] == b'\r' && bytes.get(i + 1) != Some(&b'\n'));
    #[cfg(test)]
    SCANNED.with(|n| n.set(n.get() + scan.len()));
    let first = (scan.start == 0).then_some(0);
    first.into_iter().chain(scan.filter(|&i| ends_line(i)).map(|i| i + 1)).collect()
}

/// `starts` (the line starts of a text) updated for the text now holding `inserted` bytes at
/// `at` where it held `at..removed_end`: only the lines the edit touches are scanned again,
/// so a change of many edits costs each edit its size, not the document's (`text` is the new
/// text).
pub(crate) fn replaced(starts: &mut Vec<usize>, text: &str, at: usize, removed_end: usize, inserted: usize) {
    // A start `s` follows the byte `s - 1`, whose ending a line depends on it and the next
    // byte: the bytes `at - 1 .. at + inserted` decide anew; those from `removed_end` on
    // only move.
    let keep = starts.partition_point(|&s| s < at).max(1);
    let moved = starts.partition_point(|&s| s <= removed_end);
    let fresh = line_starts(text, at.saturating_sub(1)..at + inserted);
    let fresh = fresh.into_iter().filter(|&s| s > 0);
    let tail: Vec<usize> = starts[moved.max(keep)..].iter().map(|&s| s - removed_end + at + inserted).collect();
    starts.truncate(keep);
    starts.extend(fresh);
    starts.extend(tail);
}

#[cfg(test)]
thread_local! {
    /// Bytes [`line_starts`] has looked at on this thread: what sync's tests hold to each
    /// edit's size.
    pub(crate) static SCANNED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn saturate(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: u32, character: u32) -> Position {
        Position { line, character }
    }

    #[test]
    fn offsets_and_positions_agree_in_utf16_across_lines() {
        // "é" is 2 bytes and 1 unit; "𝄞" is 4 bytes and 2 units.
        let text = "{\n  \"é\": \"𝄞x\"\r\n}";
        let lines = Lines::new(text);
        let x = text.find('x').expect("x");
        assert_eq!(lines.position(x), at(1, 10));
        assert_eq!(lines.offset(at(1, 10)), x);
        assert_eq!(lines.position(text.len()), at(2, 1));
        // Every character but the `\n` of `\r\n` (its position is the line's end, before `\r`).
        for offset in
            text.char_indices().map(|(i, _)| i).filter(|&i| !(text[..i].ends_with('\r') && text[i..].starts_with('\n')))
        {
            assert_eq!(lines.offset(lines.position(offset)), offset, "{offset}");
        }
    }

    #[test]
    fn a_lone_carriage_return_ends_a_line_as_the_protocol_counts() {
        let text = "a\rbc\r\nd\ne";
        let lines = Lines::new(text);
        assert_eq!(lines.position(text.find('b').expect("b")), at(1, 0));
        assert_eq!(lines.position(text.find('d').expect("d")), at(2, 0));
        assert_eq!(lines.position(text.find('e').expect("e")), at(3, 0));
        assert_eq!(lines.offset(at(1, 9)), 4, "the end of `bc`, before its \\r\\n");
        assert_eq!(lines.offset(at(0, 9)), 1);
    }

    #[test]
    fn positions_out_of_the_text_are_clamped_not_refused() {
        let text = "ab\r\ncd";
        let lines = Lines::new(text);
        assert_eq!(lines.offset(at(0, 99)), 2, "the line's end, before \\r\\n");
        assert_eq!(lines.offset(at(9, 0)), text.len());
        assert_eq!(lines.position(999), at(1, 2));
        // Inside a surrogate pair: the character's start.
        let lines = Lines::new("𝄞");
        assert_eq!(lines.offset(at(0, 1)), 0);
        assert_eq!(lines.position(2), at(0, 0), "back to a character boundary");
    }
}
