//! Incremental sync (`textDocumentSync` kind 2): a change is a list of edits, each a range in
//! the text as the previous edits left it, in the protocol's positions (UTF-16 code units), or
//! a whole text. An editor then sends a keystroke as a few bytes instead of the document.

use ls_types::TextDocumentContentChangeEvent;

use super::position::{self, Lines};

/// `text` after `changes`, applied in order. A range past the text is clamped to it (a
/// position past its line's end is the line's end, a line past the last is the text's end)
/// and an end before its start is the start, so a confused client cannot make this panic.
///
/// The line starts are kept from edit to edit, not found again in the whole text: a change of
/// thousands of edits (a multi-cursor replace) on a large document takes each edit's time.
pub(crate) fn apply(mut text: String, changes: Vec<TextDocumentContentChangeEvent>) -> String {
    let mut starts = Lines::new(&text).into_starts();
    for change in changes {
        match change.range {
            None => {
                text = change.text;
                starts = Lines::new(&text).into_starts();
            }
            Some(range) => {
                let lines = Lines::with_starts(&text, std::mem::take(&mut starts));
                let start = lines.offset(range.start);
                let end = lines.offset(range.end).max(start);
                starts = lines.into_starts();
                text.replace_range(start..end, &change.text);
                position::replaced(&mut starts, &text, start, end, change.text.len());
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

    #[test]
    fn many_edits_in_one_change_on_a_large_document_scan_each_edit_not_the_document() {
        // A multi-cursor replace: 2,000 edits in one change on a 320 KiB document. Finding
        // every line start again for each edit scanned 640 MiB (on 1 MiB and 20,000 edits,
        // minutes with the server deaf).
        let text = "k: v\n".repeat(1 << 16);
        let edits: Vec<_> = (0..2_000).map(|i| edit((i * 10, 0), (i * 10, 1), "K")).collect();
        super::position::SCANNED.with(|n| n.set(0));
        let text = apply(text, edits);
        let scanned = super::position::SCANNED.with(std::cell::Cell::get);
        assert!(scanned < 3 * text.len(), "scanned {scanned} bytes for a text of {}", text.len());
        assert_eq!(text.matches("K: v").count(), 2_000);
        assert!(text.starts_with("K: v\nk: v\n") && text.ends_with("k: v\n"));
    }

    #[test]
    fn edits_of_one_change_land_as_they_would_one_change_at_a_time() {
        // The line starts kept from edit to edit agree with the text's own, whatever the edits
        // join or split: `\r` then `\n` across an edit's end, lone `\r`, characters of two
        // UTF-16 units, ranges past the end or backwards.
        let pieces = ["", "a", "\n", "\r", "\r\n", "𝄞", "é\r", "\nb\r\n", "xyz"];
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            u32::try_from(seed % bound).expect("small")
        };
        for round in 0..300 {
            let mut text = "a\r\nb\rc\n𝄞d\n".to_owned();
            let mut edits = Vec::new();
            for _ in 0..8 {
                let piece = pieces[next(pieces.len() as u64) as usize];
                edits.push(edit((next(6), next(5)), (next(6), next(5)), piece));
            }
            let together = apply(text.clone(), edits.clone());
            for e in edits {
                text = apply(text, vec![e]);
            }
            assert_eq!(together, text, "round {round}");
        }
    }
}
