//! Incremental sync (`textDocumentSync` kind 2): a change is a list of edits, each a range in
//! the text as the previous edits left it, in the protocol's positions (UTF-16 code units), or
//! a whole text. An editor then sends a keystroke as a few bytes instead of the document.

use ls_types::TextDocumentContentChangeEvent;

use super::position::Lines;

/// `text` after `changes`, applied in order. A range past the text is clamped to it (a
/// position past its line's end is the line's end, a line past the last is the text's end)
/// and an end before its start is the start, so a confused client cannot make this panic.
pub(crate) fn apply(mut text: String, changes: Vec<TextDocumentContentChangeEvent>) -> String {
    for change in changes {
        match change.range {
            None => text = change.text,
            Some(range) => {
                let lines = Lines::new(&text);
                let start = lines.offset(range.start);
                let end = lines.offset(range.end).max(start);
                text.replace_range(start..end, &change.text);
            }
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use ls_types::{Position, Range};

    use super::*;

    fn edit(from: (u32, u32), to: (u32, u32), text: &str) -> TextDocumentContentChangeEvent {
        let at = |(line, character)| Position { line, character };
        TextDocumentContentChangeEvent {
            range: Some(Range { start: at(from), end: at(to) }),
            range_length: None,
            text: text.into(),
        }
    }

    #[test]
    fn edits_after_characters_of_two_utf16_units_land_where_the_editor_means() {
        // "𝄞" is 2 UTF-16 units and 4 bytes; "é" 1 unit and 2 bytes.
        let text = "a: \"𝄞é\"\nb: x\n".to_owned();
        // Replace the `é` (units 6..7 of line 0), then type on line 1 after `x`.
        let text = apply(text, vec![edit((0, 6), (0, 7), "e"), edit((1, 4), (1, 4), "yz")]);
        assert_eq!(text, "a: \"𝄞e\"\nb: xyz\n");
        // A keystroke at a time, as an editor sends them: each on the text the last one left.
        let text = apply(text, vec![edit((0, 7), (0, 7), "!"), edit((0, 8), (0, 8), "?")]);
        assert_eq!(text, "a: \"𝄞e!?\"\nb: xyz\n");
    }

    #[test]
    fn edits_that_join_or_split_lines_across_crlf() {
        let text = "a: 1\r\nb: 2\r\n".to_owned();
        // Join: from line 0's end to line 1's start removes the `\r\n`.
        assert_eq!(apply(text.clone(), vec![edit((0, 4), (1, 0), ", ")]), "a: 1, b: 2\r\n");
        // Split, then a whole text resets everything before the next edit.
        let split = apply(text, vec![edit((1, 1), (1, 1), "\r\n")]);
        assert_eq!(split, "a: 1\r\nb\r\n: 2\r\n");
        let whole = TextDocumentContentChangeEvent { range: None, range_length: None, text: "x\n".into() };
        assert_eq!(apply(split, vec![whole, edit((0, 1), (0, 1), "y")]), "xy\n");
    }

    #[test]
    fn ranges_out_of_the_text_or_backwards_are_clamped_not_a_panic() {
        assert_eq!(apply("ab".into(), vec![edit((0, 9), (7, 0), "!")]), "ab!");
        assert_eq!(apply("abc".into(), vec![edit((0, 2), (0, 1), "-")]), "ab-c");
        // Inside a surrogate pair: the character's start.
        assert_eq!(apply("𝄞".into(), vec![edit((0, 1), (0, 1), "x")]), "x𝄞");
    }
}
