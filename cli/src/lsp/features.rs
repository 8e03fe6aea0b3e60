//! Hover, completion and quick fixes, each over one open document.

use std::collections::HashMap;

use ls_types::{
    CodeAction, CodeActionKind, CodeActionOrCommand, CompletionItem, CompletionItemKind, CompletionItemTag,
    CompletionTextEdit, Documentation, Hover, HoverContents, MarkupContent, MarkupKind, Position, Range, TextEdit, Uri,
    WorkspaceEdit,
};
use manifest_core::Format;
use manifest_core::shape::Shape;

use super::contract::{self, Place};
use super::cursor::{self, Cursor, Slot, Step};
use super::document::Document;
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
    let place = resolve(document, &path, &cursor)?;
    Some(Hover {
        contents: HoverContents::Markup(markdown(contract::hover(place, &name))),
        range: Some(lines.range(cursor.token.start, cursor.token.end)),
    })
}

/// Field names in a key's place (the ones not written yet, required first), or the values
/// of a closed set in a value's place.
pub(crate) fn complete(document: &Document, position: Position) -> Vec<CompletionItem> {
    let lines = Lines::new(&document.text);
    let Some(cursor) = cursor::at(&document.text, lines.offset(position)) else { return Vec::new() };
    let Some(root) = document.root() else { return Vec::new() };
    if cursor.finished {
        return Vec::new();
    }
    let json = Format::detect(&document.text) == Format::Json;
    let range = lines.range(cursor.token.start, cursor.token.end);
    let space = if cursor.space_before { " " } else { "" };
    let edit = |text: String| Some(CompletionTextEdit::Edit(TextEdit { range, new_text: format!("{space}{text}") }));
    match cursor.slot {
        Slot::Key => {
            let shape = match cursor.path.is_empty() {
                true => Shape::Object(root),
                false => match resolve(document, &cursor.path, &cursor).and_then(Place::shape) {
                    Some(shape) => shape,
                    None => return Vec::new(),
                },
            };
            contract::fields(shape, &cursor.siblings)
                .into_iter()
                .enumerate()
                .map(|(i, c)| {
                    let text = if json { format!("\"{}\"", c.name) } else { c.name.to_owned() };
                    CompletionItem {
                        label: c.name.to_owned(),
                        kind: Some(CompletionItemKind::PROPERTY),
                        detail: Some(c.detail),
                        documentation: Some(Documentation::MarkupContent(markdown(c.doc))),
                        tags: c.deprecated.then(|| vec![CompletionItemTag::DEPRECATED]),
                        // Required fields first, deprecated ones last, each in the table's order.
                        sort_text: Some(format!("{}{i:03}", u8::from(!c.required) + 2 * u8::from(c.deprecated))),
                        filter_text: Some(text.clone()),
                        text_edit: edit(text),
                        ..Default::default()
                    }
                })
                .collect()
        }
        Slot::Value => {
            let Some(place) = resolve(document, &cursor.path, &cursor) else { return Vec::new() };
            contract::values(place)
                .into_iter()
                .map(|v| {
                    let text = if json { v.json } else { v.bare.clone() };
                    CompletionItem {
                        label: v.bare,
                        kind: Some(CompletionItemKind::ENUM_MEMBER),
                        filter_text: Some(text.clone()),
                        text_edit: edit(text),
                        ..Default::default()
                    }
                })
                .collect()
        }
    }
}

/// A quick fix for each diagnostic in `range` that has a "did you mean".
pub(crate) fn quick_fixes(uri: &Uri, document: &Document, range: Range) -> Vec<CodeActionOrCommand> {
    let lines = Lines::new(&document.text);
    let (start, end) = (lines.offset(range.start), lines.offset(range.end));
    let published = document.published();
    document
        .diagnostics()
        .iter()
        .zip(published)
        .filter_map(|(d, shown)| {
            let suggestion = d.suggestion.as_ref()?;
            let fix = document.fix_range(d)?;
            // The diagnostic's own span meets the asked range (a cursor is an empty range).
            let span = d.span?;
            if (span.end as usize) < start || (span.start as usize) > end {
                return None;
            }
            let edit = TextEdit { range: lines.range(fix.start, fix.end), new_text: suggestion.clone() };
            Some(CodeActionOrCommand::CodeAction(CodeAction {
                title: format!("Change to \"{suggestion}\""),
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(vec![shown]),
                edit: Some(WorkspaceEdit {
                    changes: Some(HashMap::from([(uri.clone(), vec![edit])])),
                    ..Default::default()
                }),
                is_preferred: Some(true),
                ..Default::default()
            }))
        })
        .collect()
}

/// The place `path` names in the document's table, the arms of its unions read from the
/// document.
fn resolve(document: &Document, path: &[Step], cursor: &Cursor) -> Option<Place> {
    let root = document.root()?;
    // The object the cursor is in: `path` names it for a key, its member for a value.
    let container = match cursor.slot {
        Slot::Key => cursor.path.len(),
        Slot::Value => cursor.path.len().saturating_sub(1),
    };
    let tree = std::cell::OnceCell::new();
    contract::resolve(root, path, &|depth, tag| document.arm(&tree, &path[..depth], tag, cursor, container))
}

fn markdown(value: String) -> MarkupContent {
    MarkupContent { kind: MarkupKind::Markdown, value }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn document(name: &str, marked: &str) -> (Document, Position) {
        let offset = marked.find('|').expect("a |");
        let text = marked.replacen('|', "", 1);
        let position = Lines::new(&text).position(offset);
        (Document::new(name, text, 1, None), position)
    }

    fn labels(items: &[CompletionItem]) -> Vec<&str> {
        items.iter().map(|i| i.label.as_str()).collect()
    }

    #[test]
    fn completion_offers_the_fields_not_written_required_first() {
        let (d, at) = document("m.json", "{\"schema\": \"svc.application-manifest\", \"schemaVersion\": 5, |}");
        let items = complete(&d, at);
        let names = labels(&items);
        assert!(!names.contains(&"schema") && !names.contains(&"schemaVersion"), "{names:?}");
        let mut sorted = items.clone();
        sorted.sort_by(|a, b| a.sort_text.cmp(&b.sort_text));
        assert_eq!(sorted[0].label, "applicationId", "{:?}", labels(&sorted));
        let Some(CompletionTextEdit::Edit(edit)) = &items[0].text_edit else { panic!("an edit") };
        assert!(edit.new_text.starts_with('"'), "JSON keys are quoted: {edit:?}");
    }

    #[test]
    fn completion_of_a_union_arm_and_an_ingress_projects_runtime() {
        let (d, at) = document("m.yaml", "schema: svc.application-manifest\nschemaVersion: 5\nruntime:\n  kind: |\n");
        let names: Vec<String> = complete(&d, at).into_iter().map(|i| i.label).collect();
        assert!(names.contains(&"javascript".to_owned()), "{names:?}");

        let (d, at) = document("ingress.json", "{\"version\": 1, \"runtime\": \"n|\"}");
        let items = complete(&d, at);
        assert!(labels(&items).contains(&"node"), "{:?}", labels(&items));
        let Some(CompletionTextEdit::Edit(edit)) = &items[0].text_edit else { panic!("an edit") };
        assert_eq!((edit.range.start.character, edit.range.end.character), (26, 29), "the quoted word: {edit:?}");
    }

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
}
