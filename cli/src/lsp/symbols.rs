//! Document symbols (`textDocument/documentSymbol`): the outline of a manifest or project
//! file, one symbol per member and list item, nested as the document is, at the positions the
//! reader gives each key and value (block or flow YAML, JSON alike). A scalar's detail is its
//! value as written; an object's or a list's is what the shape table says it is (a union's
//! arm, `mode: once`), and a deprecated field is tagged so.

use ls_types::{DocumentSymbol, Range, SymbolKind, SymbolTag};
use manifest_core::shape::{ObjectShape, Shape};
use manifest_core::{Format, Node, Span, Value};

use super::contract::{self, Place};
use super::cursor::Step;
use super::document::Document;
use super::position::Lines;

/// The longest detail shown for a scalar, in characters.
const MAX_DETAIL: usize = 60;

/// The document's outline; empty for a document that is not ours or does not parse (its
/// positions would be guesses).
pub(crate) fn outline(document: &Document) -> Vec<DocumentSymbol> {
    let Some(root_shape) = document.known_root() else { return Vec::new() };
    let text = document.text.as_str();
    let (root, _) = match Format::detect(text) {
        Format::Json => manifest_core::parse::json(text),
        Format::Yaml => manifest_core::parse::yaml(text),
    };
    let Some(root) = root else { return Vec::new() };
    let outline = Outline { text, lines: Lines::new(text), root_shape, root: &root };
    let mut path = Vec::new();
    outline.children(&root, &mut path)
}

struct Outline<'o, 't> {
    text: &'t str,
    lines: Lines<'t>,
    root_shape: &'static ObjectShape,
    root: &'o Node<'t>,
}

impl Outline<'_, '_> {
    /// The symbols of a node's members or items.
    fn children(&self, node: &Node<'_>, path: &mut Vec<Step>) -> Vec<DocumentSymbol> {
        match &node.value {
            Value::Object(members) => members
                .iter()
                .map(|m| {
                    path.push(Step::Key(m.key.to_string()));
                    let symbol = self.symbol(m.key.to_string(), m.key_span, &m.value, path);
                    path.pop();
                    symbol
                })
                .collect(),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    path.push(Step::Index(i));
                    let symbol = self.symbol(format!("[{i}]"), item.span, item, path);
                    path.pop();
                    symbol
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    #[expect(deprecated, reason = "`deprecated` is a required field of the struct; `tags` carries it")]
    fn symbol(&self, name: String, name_span: Span, node: &Node<'_>, path: &mut Vec<Step>) -> DocumentSymbol {
        let place = self.place(path);
        // A block collection's span runs on to the next line; the symbol ends at its last
        // character, as the protocol asks (no trailing white space).
        let end = name_span.end.max(node.span.end) as usize;
        let end = self.text.get(..end).map_or(end, |t| t.trim_end().len());
        let whole = self.range(name_span.start.min(node.span.start), to_u32(end).max(name_span.end));
        let deprecated = matches!(place, Some(Place::Field(f)) if f.deprecated);
        let children = self.children(node, path);
        DocumentSymbol {
            name,
            detail: self.detail(node, place),
            kind: kind(&node.value),
            tags: deprecated.then(|| vec![SymbolTag::DEPRECATED]),
            deprecated: None,
            range: whole,
            selection_range: self.range(name_span.start, name_span.end),
            children: (!children.is_empty()).then_some(children),
        }
    }

    fn range(&self, start: u32, end: u32) -> Range {
        self.lines.range(start as usize, end as usize)
    }

    /// Where the tables put `path`, the arms of its unions read from the document.
    fn place(&self, path: &[Step]) -> Option<Place> {
        contract::resolve(self.root_shape, path, &|depth, tag| {
            let mut node = self.root;
            for step in &path[..depth] {
                node = match (&node.value, step) {
                    (Value::Object(_), Step::Key(key)) => node.get(key)?,
                    (Value::Array(items), Step::Index(i)) => items.get(*i)?,
                    _ => return None,
                };
            }
            match &node.get(tag)?.value {
                Value::String(value) => Some(value.to_string()),
                _ => None,
            }
        })
    }

    fn detail(&self, node: &Node<'_>, place: Option<Place>) -> Option<String> {
        match (&node.value, place.and_then(Place::shape)) {
            (Value::Object(_), Some(Shape::Union(union))) => match node.get(union.tag).map(|n| &n.value) {
                Some(Value::String(arm)) => Some(format!("{}: {arm}", union.tag)),
                _ => Some(contract::describe(Shape::Union(union))),
            },
            (Value::Object(_) | Value::Array(_), Some(shape)) => Some(contract::describe(shape)),
            (Value::Object(_) | Value::Array(_), None) => None,
            _ => {
                let written = self.text.get(node.span.start as usize..node.span.end as usize)?.trim();
                let line = written.lines().next().unwrap_or("");
                let mut detail: String = line.chars().take(MAX_DETAIL).collect();
                if detail.len() < written.len() {
                    detail.push('…');
                }
                Some(detail)
            }
        }
    }
}

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn kind(value: &Value<'_>) -> SymbolKind {
    match value {
        Value::Null => SymbolKind::NULL,
        Value::Bool(_) => SymbolKind::BOOLEAN,
        Value::Number(_) => SymbolKind::NUMBER,
        Value::String(_) => SymbolKind::STRING,
        Value::Array(_) => SymbolKind::ARRAY,
        Value::Object(_) => SymbolKind::OBJECT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outline_of(name: &str, text: &str) -> Vec<DocumentSymbol> {
        outline(&Document::new(name, text.into(), 1, None))
    }

    fn names(symbols: &[DocumentSymbol]) -> Vec<&str> {
        symbols.iter().map(|s| s.name.as_str()).collect()
    }

    fn child<'s>(symbols: &'s [DocumentSymbol], name: &str) -> &'s DocumentSymbol {
        symbols.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name} in {:?}", names(symbols)))
    }

    const YAML: &str = "schema: svc.application-manifest\nschemaVersion: 5\nruntime:\n  kind: javascript\n  entrypoint:\n    file: a.js\nconfiguration:\n  variables:\n    - {source: literal, name: A, value: \"x\"}\n";

    #[test]
    fn a_yaml_manifest_nests_members_and_items_with_their_places() {
        let symbols = outline_of("m.yaml", YAML);
        assert_eq!(names(&symbols), ["schema", "schemaVersion", "runtime", "configuration"]);
        let runtime = child(&symbols, "runtime");
        assert_eq!(runtime.kind, SymbolKind::OBJECT);
        assert_eq!(runtime.detail.as_deref(), Some("kind: javascript"), "the union's arm, from the table");
        assert_eq!((runtime.selection_range.start.line, runtime.selection_range.start.character), (2, 0));
        assert_eq!(runtime.range.end.line, 5, "to the end of its last member");
        let file = child(
            child(runtime.children.as_deref().expect("members"), "entrypoint").children.as_deref().expect("file"),
            "file",
        );
        assert_eq!((file.selection_range.start.line, file.selection_range.start.character), (5, 4));
        assert_eq!(file.detail.as_deref(), Some("a.js"));
        assert_eq!(child(&symbols, "schemaVersion").kind, SymbolKind::NUMBER);

        // A flow mapping inside a block list: its members at their columns.
        let variables = child(child(&symbols, "configuration").children.as_deref().expect("c"), "variables");
        assert_eq!(variables.kind, SymbolKind::ARRAY);
        let item = &variables.children.as_deref().expect("items")[0];
        assert_eq!((item.name.as_str(), item.detail.as_deref()), ("[0]", Some("source: literal")));
        let name = child(item.children.as_deref().expect("members"), "name");
        assert_eq!((name.selection_range.start.line, name.selection_range.start.character), (8, 24));
        assert_eq!((name.range.end.line, name.range.end.character), (8, 31), "`name: A`");
    }

    #[test]
    fn a_json_manifest_has_the_same_outline_at_its_own_positions() {
        let text = "{\"schema\": \"svc.application-manifest\", \"schemaVersion\": 5,\n \"runtime\": {\"kind\": \"javascript\"}}";
        let symbols = outline_of("m.json", text);
        assert_eq!(names(&symbols), ["schema", "schemaVersion", "runtime"]);
        let runtime = child(&symbols, "runtime");
        assert_eq!((runtime.selection_range.start.line, runtime.selection_range.start.character), (1, 1));
        assert_eq!(runtime.detail.as_deref(), Some("kind: javascript"));
        assert_eq!(child(&symbols, "schema").detail.as_deref(), Some("\"svc.application-manifest\""));
    }

    #[test]
    fn no_outline_for_other_files_or_text_that_does_not_parse() {
        assert!(outline_of("package.json", "{\"name\": \"x\"}").is_empty());
        assert!(outline_of("m.yaml", "schema: svc.application-manifest\nschemaVersion: 5\nx: [\n").is_empty());
    }
}
