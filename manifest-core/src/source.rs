//! The source text: input limits, format detection, and positions for people.

use crate::bounded::Bounded;
use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::tree::{Node, Span, to_u32};

/// Inputs over this many bytes (1 MiB) are refused before reading.
pub const MAX_INPUT_BYTES: usize = 1024 * 1024;

/// Objects and arrays may nest this many levels (the root is level 1).
pub const MAX_DEPTH: usize = 64;

/// The syntax a document is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// JSON (V4 and V5).
    Json,
    /// YAML (V5 only).
    Yaml,
}

impl Format {
    /// Chosen by content, never by file name: a document whose first non-space byte is `{`
    /// is JSON; anything else is read as YAML.
    pub fn detect(text: &str) -> Format {
        match text.trim_start().as_bytes().first() {
            Some(b'{') => Format::Json,
            _ => Format::Yaml,
        }
    }
}

/// What a reader produced: the tree (absent after a fatal error) and its diagnostics.
#[derive(Debug, Default)]
pub(crate) struct Parsed<'a> {
    pub(crate) root: Option<Node<'a>>,
    pub(crate) diagnostics: Bounded,
    /// Pointers whose value stands in for something the reader refused (a YAML alias): no
    /// schema diagnostic is reported at or under them, as the author's real fault is already
    /// reported.
    pub(crate) stand_ins: Vec<String>,
}

/// Checks size and encoding, returning the text or the one diagnostic that stops reading.
pub(crate) fn decode(bytes: &[u8]) -> Result<&str, Diagnostic> {
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(Diagnostic::error(
            Layer::Schema,
            Code::InputTooLarge,
            "",
            format!("the input is {} bytes; the limit is {MAX_INPUT_BYTES} bytes (1 MiB)", bytes.len()),
        ));
    }
    if bytes.starts_with(b"\xEF\xBB\xBF") {
        return Err(Diagnostic::error(
            Layer::Schema,
            Code::ByteOrderMark,
            "",
            "the input starts with a UTF-8 byte-order mark; save the file as UTF-8 without BOM",
        )
        .with_span(Span::new(0, 3)));
    }
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        Diagnostic::error(
            Layer::Schema,
            Code::InvalidUtf8,
            "",
            format!("the input is not valid UTF-8 (at byte {at}); manifests must be UTF-8"),
        )
        .with_span(Span::new(at, at))
    })
}

/// The 1-based column, in characters, of byte `offset` on the line starting at `line_start`.
pub(crate) fn column(text: &str, line_start: usize, offset: usize) -> u32 {
    let chars = text.get(line_start..offset).map_or(offset - line_start, |s| s.chars().count());
    to_u32(chars + 1)
}

/// Line starts of a text, to turn byte offsets into 1-based lines and columns.
#[derive(Debug, Clone)]
pub struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    /// Indexes `text`.
    pub fn new(text: &'a str) -> Self {
        let starts = std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect();
        LineIndex { text, starts }
    }

    /// The 1-based line and column (in characters) of a byte offset.
    pub fn position(&self, offset: usize) -> (u32, u32) {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= offset) - 1;
        (to_u32(line + 1), column(self.text, self.starts[line], offset))
    }

    /// The text of a 1-based line, without its line ending.
    pub fn line_text(&self, line: u32) -> &'a str {
        let i = (line as usize).saturating_sub(1);
        let start = self.starts.get(i).copied().unwrap_or(self.text.len());
        let end = self.starts.get(i + 1).map_or(self.text.len(), |&e| e - 1);
        self.text.get(start..end).unwrap_or("").trim_end_matches('\r')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_is_chosen_by_content() {
        assert_eq!(Format::detect("  \n{\"a\": 1}"), Format::Json);
        assert_eq!(Format::detect("a: 1"), Format::Yaml);
        assert_eq!(Format::detect("# {\n{}"), Format::Yaml);
    }

    #[test]
    fn positions_count_characters() {
        let idx = LineIndex::new("ab\né€x\r\nlast");
        assert_eq!(idx.position(0), (1, 1));
        assert_eq!(idx.position(3), (2, 1));
        assert_eq!(idx.position(3 + 2 + 3), (2, 3));
        assert_eq!(idx.line_text(2), "é€x");
        assert_eq!(idx.line_text(3), "last");
    }

    #[test]
    fn limits_and_encoding() {
        assert_eq!(decode(&vec![b' '; MAX_INPUT_BYTES]).map(str::len), Ok(MAX_INPUT_BYTES));
        assert_eq!(decode(&vec![b' '; MAX_INPUT_BYTES + 1]).map_err(|d| d.code), Err(Code::InputTooLarge));
        assert_eq!(decode(b"\xEF\xBB\xBF{}").map_err(|d| d.code), Err(Code::ByteOrderMark));
        assert_eq!(decode(b"{\"a\": \"\xff\"}").map_err(|d| d.code), Err(Code::InvalidUtf8));
    }
}
