//! Hover (`textDocument/hover`): what the shape tables say of the key or value under the
//! cursor (presence or default, type, bounds, closed values, the table's words).

use ls_types::{Hover, HoverContents, Position};

use super::contract;
use super::cursor::{self, Slot, Step};
use super::document::{Document, markdown};
use super::position::Lines;

/// What the tables say of the key or value under `position`.
pub(crate) fn hover(document: &Document, position: Position) -> Option<Hover> {
    let lines = Lines::new(&document.text);
    let offset = lines.offset(position);
    let mut cursor = cursor::at(&document.text, offset)?;
    if cursor.token.is_empty() && document.text[offset..].starts_with('"') {
        // On a string's opening quote: the string is what the pointer is over.
        cursor = cursor::at(&document.text, offset + 1)?;
    }
    let word = cursor.word(&document.text);
    let mut path = cursor.path.clone();
    if cursor.slot == Slot::Key {
        if word.is_empty() {
            return None;
        }
        path.push(Step::Key(word.to_owned()));
    }
    let name = match path.last()? {
        Step::Key(key) => key.clone(),
        Step::Index(i) => format!("[{i}]"),
    };
    let place = document.place(&path, &cursor)?;
    Some(Hover {
        contents: HoverContents::Markup(markdown(contract::hover(place, &name))),
        range: Some(lines.range(cursor.token.start, cursor.token.end)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsp::document::with_cursor as document;

    #[test]
    fn hover_on_a_key_and_on_a_value_describes_the_field() {
        let (d, at) = document("ingress.json", "{\"version\": 1, \"ru|ntime\": \"node\"}");
        let Some(Hover { contents: HoverContents::Markup(text), .. }) = hover(&d, at) else { panic!("a hover") };
        assert!(text.value.starts_with("**`runtime`**: required"), "{}", text.value);
        assert!(text.value.contains("`node`"), "{}", text.value);
        let (d, at) = document("ingress.json", "{\"version\": 1, \"runtime\": \"no|de\"}");
        assert!(hover(&d, at).is_some());
        let (d, at) = document("package.json", "{\"name\": \"x\", \"ver|sion\": \"1\"}");
        assert!(hover(&d, at).is_none(), "not a document of ours");
    }

    #[test]
    fn hover_in_flow_yaml_names_the_key_or_the_arm_under_the_cursor() {
        let head = "schema: svc.application-manifest\nschemaVersion: 5\n";
        let (d, at) =
            document("m.yaml", &format!("{head}runtime: {{kind: javascript, entrypoint: {{fi|le: a.js}}}}\n"));
        let Some(Hover { contents: HoverContents::Markup(text), range }) = hover(&d, at) else { panic!("a hover") };
        assert!(text.value.starts_with("**`file`**: required"), "{}", text.value);
        let range = range.expect("the key's range");
        assert_eq!((range.start.line, range.start.character, range.end.character), (2, 41, 45));
        let (d, at) = document("m.yaml", &format!("{head}runtime: {{kind: java|script}}\n"));
        let Some(Hover { contents: HoverContents::Markup(text), .. }) = hover(&d, at) else { panic!("a hover") };
        assert!(text.value.starts_with("**`kind`**"), "{}", text.value);
    }
}
