//! Completion (`textDocument/completion`): in a key's place the fields an object does not
//! have yet, required first; in a value's place what [`contract::values`] offers (closed
//! sets, defaults, durations and sizes from their formats' examples, and the number being
//! typed with each unit). In JSON, block YAML and flow YAML alike: the cursor module reads
//! where the cursor is.

use ls_types::{
    CompletionItem, CompletionItemKind, CompletionItemLabelDetails, CompletionItemTag, CompletionTextEdit,
    Documentation, Position, TextEdit,
};
use manifest_core::Format;
use manifest_core::shape::Shape;

use super::contract::{self, Place};
use super::cursor::{self, Slot};
use super::document::{Document, markdown};
use super::position::Lines;

/// Field names in a key's place (the ones not written yet, required first), or the values
/// the tables offer in a value's place.
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
                false => match document.place(&cursor.path, &cursor).and_then(Place::shape) {
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
            let Some(place) = document.place(&cursor.path, &cursor) else { return Vec::new() };
            let typed = cursor.word(&document.text);
            contract::values(place, typed)
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    let text = if json { v.json } else { v.bare.clone() };
                    CompletionItem {
                        label: v.bare,
                        label_details: v.note.map(|note| CompletionItemLabelDetails {
                            detail: None,
                            description: Some(note.to_owned()),
                        }),
                        kind: Some(if v.note.is_some() {
                            CompletionItemKind::VALUE
                        } else {
                            CompletionItemKind::ENUM_MEMBER
                        }),
                        detail: v.note.map(str::to_owned),
                        // The tables' order: the default first, then the number being typed.
                        sort_text: Some(format!("{i:03}")),
                        filter_text: Some(text.clone()),
                        text_edit: edit(text),
                        ..Default::default()
                    }
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsp::document::with_cursor as document;

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

    fn edit_of(item: &CompletionItem) -> &TextEdit {
        match &item.text_edit {
            Some(CompletionTextEdit::Edit(edit)) => edit,
            other => panic!("an edit: {other:?}"),
        }
    }

    const HEAD: &str = "schema: svc.application-manifest\nschemaVersion: 5\n";

    #[test]
    fn a_duration_is_offered_the_formats_examples_and_the_number_typed_with_each_unit() {
        let (d, at) = document("m.yaml", &format!("{HEAD}deployment:\n  schedule:\n    duration: 15|\n"));
        let items = complete(&d, at);
        let names = labels(&items);
        assert_eq!(names[..5], ["15ms", "15s", "15m", "15h", "15d"], "{names:?}");
        assert!(names.contains(&"30d") && names.contains(&"1h"), "the format's examples: {names:?}");
        let (d, at) = document(
            "m.json",
            "{\"schema\": \"svc.application-manifest\", \"schemaVersion\": 5, \"deployment\": {\"schedule\": {\"duration\": |}}}",
        );
        let items = complete(&d, at);
        assert!(items.iter().any(|i| edit_of(i).new_text == "\"30s\""), "quoted in JSON: {:?}", labels(&items));
        // A `fixed` lead time's duration may be 0; a schedule's may not.
        let (d, at) = document(
            "m.yaml",
            &format!("{HEAD}deployment:\n  lifecycle:\n    renewal:\n      leadTime: {{mode: fixed, duration: 0|}}\n"),
        );
        assert!(labels(&complete(&d, at)).contains(&"0s"));
        let (d, at) = document("m.yaml", &format!("{HEAD}deployment:\n  schedule:\n    duration: 0|\n"));
        assert!(!labels(&complete(&d, at)).contains(&"0s"), "POSITIVE_DURATION refuses 0");
    }

    #[test]
    fn a_fields_default_comes_first_and_says_so() {
        let (d, at) = document("m.yaml", &format!("{HEAD}runtime:\n  kind: native_image\n  image:\n    catalog: |\n"));
        let items = complete(&d, at);
        assert_eq!(items[0].label, "svc-runtime-images", "{:?}", labels(&items));
        assert_eq!(items[0].detail.as_deref(), Some("the default"));
        let (d, at) = document("m.yaml", &format!("{HEAD}runtime:\n  kind: javascript\n  engine: |\n"));
        let items = complete(&d, at);
        assert_eq!(
            items.iter().filter(|i| i.label == "nodejs").count(),
            1,
            "an enum's default once: {:?}",
            labels(&items)
        );
    }

    #[test]
    fn flow_yaml_completes_keys_and_values_where_block_yaml_does() {
        let (d, at) = document("m.yaml", &format!("{HEAD}runtime: {{kind: |}}\n"));
        let items = complete(&d, at);
        assert!(labels(&items).contains(&"javascript"), "{:?}", labels(&items));
        let (d, at) = document("m.yaml", &format!("{HEAD}runtime: {{kind:|}}\n"));
        assert_eq!(edit_of(&complete(&d, at)[0]).new_text, " javascript", "a space after the colon");
        // The arm written after the cursor picks the fields; written ones are not offered.
        let (d, at) = document("m.yaml", &format!("{HEAD}runtime: {{|, kind: native_image, image: {{}}}}\n"));
        let names = labels(&complete(&d, at)).into_iter().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(names, ["entrypoint"], "native_image's fields not written yet");
        // Inside a list in a flow mapping: the item's shape.
        let (d, at) = document(
            "m.yaml",
            &format!("{HEAD}deployment: {{placement: {{processorSelection: {{mode: e|, processorIds: [a]}}}}}}\n"),
        );
        assert_eq!(labels(&complete(&d, at)), ["exact"]);
    }
}
