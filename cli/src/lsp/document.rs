//! An open document: which kind it is, its text, and what `validate` says of it.
//!
//! The kind is read from the document, since editors attach a server by file type and a
//! workspace has other JSON and YAML: a file named `ingress.json` (or `*.ingress.json`) is an
//! ingress project; a document whose root says `schema: svc.application-manifest` or
//! `schemaVersion` 4 or 5 is a manifest (while it does not parse, its text is searched for
//! them); a JSON object with `version` and `runtime` is an ingress project. Anything else (a
//! `package.json`, an OCI image manifest's `schemaVersion: 2`) gets no diagnostics, and no
//! completion unless it is a new file on its first line (`sch|`), which is offered the two
//! fields that make it a manifest.

use std::cell::OnceCell;

use ls_types::{DiagnosticSeverity, NumberOrString};
use manifest_core::shape::ObjectShape;
use manifest_core::{Diagnostic, Format, Node, Value};
use serde_json::json;

use super::contract::{self, Place};
use super::cursor::{Cursor, Slot, Step};
use super::position::Lines;

/// What a document is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Manifest V4 or V5 (JSON; V5 also YAML).
    Manifest,
    /// An ingress project file (JSON).
    Project,
}

/// An open document and its diagnostics.
pub(crate) struct Document {
    pub(crate) text: String,
    pub(crate) version: i32,
    pub(crate) kind: Option<Kind>,
    /// What `validate` found (layers 1 and 2), placed in the text: checked when first asked
    /// for, so a burst of changes is checked once, at its end.
    diagnostics: OnceCell<Vec<Diagnostic>>,
}

impl Document {
    /// Reads and checks a document (`name`: the last segment of its URI's path).
    ///
    /// A document that does not parse keeps the kind it had (`previous`): a project file
    /// with a missing comma is still a project file.
    ///
    /// A document over [`manifest_core::MAX_INPUT_BYTES`] is not read (`validate` refuses it
    /// with one diagnostic, and reading 100 MB at each keystroke would leave the server deaf):
    /// it keeps its kind.
    pub(crate) fn new(name: &str, text: String, version: i32, previous: Option<Kind>) -> Document {
        let kind = if text.len() > manifest_core::MAX_INPUT_BYTES {
            previous
        } else {
            let (kind, parsed) = kind(name, &text);
            if parsed { kind } else { kind.or(previous) }
        };
        Document { text, version, kind, diagnostics: OnceCell::new() }
    }

    /// Whether hover, completion, symbols and quick fixes read it: not over the validator's
    /// limit, which the document's one diagnostic names.
    pub(crate) fn readable(&self) -> bool {
        self.text.len() <= manifest_core::MAX_INPUT_BYTES
    }

    /// What `validate` says of it.
    pub(crate) fn diagnostics(&self) -> &[Diagnostic] {
        self.diagnostics.get_or_init(|| match self.kind {
            Some(Kind::Manifest) => manifest_core::validate(self.text.as_bytes()).diagnostics,
            Some(Kind::Project) => relay_api::project::check(&self.text).diagnostics,
            None => Vec::new(),
        })
    }

    /// The table its root is checked against; for a new file on its first line, a manifest's.
    pub(crate) fn root(&self) -> Option<&'static ObjectShape> {
        match self.kind {
            Some(Kind::Project) => Some(&relay_api::project::PROJECT),
            Some(Kind::Manifest) if declares_v4(&self.text) => Some(&manifest_core::v4::MANIFEST),
            Some(Kind::Manifest) => Some(&manifest_core::v5::MANIFEST),
            None if starts_a_manifest(&self.text) => Some(&manifest_core::v5::MANIFEST),
            None => None,
        }
    }

    /// The table of a document known to be ours (not a new file's first line).
    pub(crate) fn known_root(&self) -> Option<&'static ObjectShape> {
        self.kind.and(self.root())
    }

    /// The place `path` names in the document's table, the arms of its unions read from the
    /// document (for the cursor's own object, from what is written around it).
    pub(crate) fn place(&self, path: &[Step], cursor: &Cursor) -> Option<Place> {
        let root = self.root()?;
        // The object the cursor is in: `path` names it for a key, its member for a value.
        let container = match cursor.slot {
            Slot::Key => cursor.path.len(),
            Slot::Value => cursor.path.len().saturating_sub(1),
        };
        let tree = OnceCell::new();
        contract::resolve(root, path, &|depth, tag| self.arm(&tree, &path[..depth], tag, cursor, container))
    }

    /// The value of the discriminator `tag` of the object at `path`, as written: for the
    /// cursor's own object, from its members; for an outer one, from the document's tree.
    ///
    /// `tree` holds the document once read, for the request's other unions.
    pub(crate) fn arm<'d>(
        &'d self,
        tree: &OnceCell<Option<Node<'d>>>,
        path: &[Step],
        tag: &str,
        cursor: &Cursor,
        container: usize,
    ) -> Option<String> {
        if path.len() == container
            && let Some((_, value)) = cursor.siblings.iter().find(|(k, _)| k == tag)
        {
            return value.clone();
        }
        let tree = tree.get_or_init(|| match Format::detect(&self.text) {
            Format::Json => manifest_core::parse::json(&self.text).0,
            Format::Yaml => manifest_core::parse::yaml(&self.text).0,
        });
        match walk(tree.as_ref()?, path)?.get(tag).map(|n| &n.value) {
            Some(Value::String(value)) => Some(value.to_string()),
            _ => None,
        }
    }

    /// The diagnostics as the protocol carries them: code, severity, range, and in `data`
    /// the layer and the JSON pointer, as `svc manifest validate --format json` prints them.
    pub(crate) fn published(&self) -> Vec<ls_types::Diagnostic> {
        let lines = Lines::new(&self.text);
        self.diagnostics()
            .iter()
            .map(|d| {
                let range = d.span.map_or_else(Default::default, |s| lines.range(s.start as usize, s.end as usize));
                ls_types::Diagnostic {
                    range,
                    severity: Some(if d.is_error() { DiagnosticSeverity::ERROR } else { DiagnosticSeverity::WARNING }),
                    code: Some(NumberOrString::String(d.code.as_str().to_owned())),
                    source: Some("svc".to_owned()),
                    message: d.message.clone(),
                    data: Some(json!({"layer": d.layer, "pointer": d.pointer})),
                    ..Default::default()
                }
            })
            .collect()
    }

    /// The bytes a diagnostic's suggestion replaces: its key or value, inside the quotes;
    /// none for a value over several lines (a YAML block scalar), which one word cannot fix.
    pub(crate) fn fix_range(&self, d: &Diagnostic) -> Option<std::ops::Range<usize>> {
        let span = d.span?;
        let start = span.start as usize;
        // A YAML block scalar's span runs past its line break into the next indentation.
        let written = self.text.get(start..span.end as usize)?.trim_end();
        if written.contains(['\n', '\r']) || written.is_empty() {
            return None;
        }
        let end = start + written.len();
        let quoted = written.len() >= 2 && ['"', '\''].iter().any(|&q| written.starts_with(q) && written.ends_with(q));
        Some(if quoted { start + 1..end - 1 } else { start..end })
    }
}

/// A document whose text is `marked` without its first `|`, and the position of the `|`: a
/// cursor written into a test's text.
#[cfg(test)]
pub(crate) fn with_cursor(name: &str, marked: &str) -> (Document, ls_types::Position) {
    let offset = marked.find('|').expect("a |");
    let text = marked.replacen('|', "", 1);
    let position = Lines::new(&text).position(offset);
    (Document::new(name, text, 1, None), position)
}

/// Markdown, as hover and completion documentation carry it.
pub(crate) fn markdown(value: String) -> ls_types::MarkupContent {
    ls_types::MarkupContent { kind: ls_types::MarkupKind::Markdown, value }
}

/// The document's kind, and whether it parsed (a kind read from text that does not parse
/// is a guess).
fn kind(name: &str, text: &str) -> (Option<Kind>, bool) {
    if name == relay_api::project::FILE_NAME || name.ends_with(".ingress.json") {
        return (Some(Kind::Project), true);
    }
    let format = Format::detect(text);
    let (root, _) = match format {
        Format::Json => manifest_core::parse::json(text),
        Format::Yaml => manifest_core::parse::yaml(text),
    };
    match root {
        Some(root) if matches!(root.value, Value::Object(_)) => {
            let schema = matches!(root.get("schema").map(|n| &n.value), Some(Value::String(s)) if s == MANIFEST_SCHEMA);
            let version = matches!(
                root.get("schemaVersion").map(|n| &n.value),
                Some(Value::Number(manifest_core::Number::Integer(4 | 5)))
            );
            if schema || version {
                (Some(Kind::Manifest), true)
            } else {
                let project = format == Format::Json && root.get("version").is_some() && root.get("runtime").is_some();
                (project.then_some(Kind::Project), true)
            }
        }
        Some(_) => (None, true),
        // While it does not parse, the text says what it is.
        None => {
            let manifest = text.contains(MANIFEST_SCHEMA) || declares_version(text, &['4', '5']);
            (manifest.then_some(Kind::Manifest), false)
        }
    }
}

/// What a manifest's `schema` says.
const MANIFEST_SCHEMA: &str = "svc.application-manifest";

/// Whether the text's `schemaVersion` is 4 (read from the text, so a document that does not
/// parse yet is still described by its version's table).
fn declares_v4(text: &str) -> bool {
    declares_version(text, &['4'])
}

/// Whether the text has a `schemaVersion` of one of `versions` (single digits).
fn declares_version(text: &str, versions: &[char]) -> bool {
    text.match_indices("schemaVersion").any(|(at, key)| {
        let rest = text[at + key.len()..].trim_start_matches(['"', '\'', ':', ' ', '\t']);
        rest.starts_with(versions) && !rest[1..].starts_with(|c: char| c.is_ascii_digit())
    })
}

/// Whether the text is a new file's first words on the way to naming a manifest: nothing
/// yet, or a beginning of `schema: svc.application-manifest` or `schemaVersion:`.
fn starts_a_manifest(text: &str) -> bool {
    let written: String = text.chars().filter(|c| !c.is_whitespace() && !matches!(c, '{' | '}' | '"' | '\'')).collect();
    ["schema:svc.application-manifest", "schemaVersion:"].iter().any(|full| full.starts_with(&written))
}

/// The node `path` names.
fn walk<'n, 'a>(root: &'n Node<'a>, path: &[Step]) -> Option<&'n Node<'a>> {
    let mut node = root;
    for step in path {
        node = match (&node.value, step) {
            (Value::Object(_), Step::Key(key)) => node.get(key)?,
            (Value::Array(items), Step::Index(i)) => items.get(*i)?,
            _ => return None,
        };
    }
    Some(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_from_the_name_and_the_content() {
        assert_eq!(kind("ingress.json", "{").0, Some(Kind::Project));
        assert_eq!(kind("shop.ingress.json", "").0, Some(Kind::Project));
        assert_eq!(kind("app.yaml", "schema: svc.application-manifest\n").0, Some(Kind::Manifest));
        assert_eq!(kind("x.json", "{\"schemaVersion\": 4").0, Some(Kind::Manifest));
        assert_eq!(kind("x.yaml", "schemaVersion: 5\nx: [\n").0, Some(Kind::Manifest), "does not parse");
        assert_eq!(kind("shop.json", r#"{"version": 1, "runtime": "node"}"#).0, Some(Kind::Project));
        assert_eq!(kind("package.json", r#"{"name": "x", "version": "1.0.0"}"#).0, None);
    }

    #[test]
    fn other_documents_with_a_schema_version_are_not_taken_for_manifests() {
        let oci = r#"{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "manifests": [{"schemaVersion": 5}]}"#;
        assert_eq!(kind("index.json", oci).0, None);
        assert_eq!(kind("ssm.yaml", "schemaVersion: '2.2'\nmainSteps: []\n").0, None);
    }

    #[test]
    fn a_new_files_first_line_is_offered_a_manifests_root_and_nothing_else_is() {
        for text in ["", "{}", "{\"sch", "sch", "schema: svc.app", "{\"schemaVersion\": "] {
            assert!(Document::new("new.json", text.into(), 1, None).root().is_some(), "{text:?}");
        }
        for text in ["{\"name\": \"x\"}", "apiVersion: v1\n", "{\"schema\": \"other\"}"] {
            assert!(Document::new("other.json", text.into(), 1, None).root().is_none(), "{text:?}");
            assert!(Document::new("other.json", text.into(), 1, None).diagnostics().is_empty(), "{text:?}");
        }
    }

    #[test]
    fn the_version_is_read_from_text_that_does_not_parse() {
        assert!(declares_v4("{\"schemaVersion\": 4, \"x"));
        assert!(!declares_v4("{\"schemaVersion\": 5"));
        assert!(!declares_v4("{\"schemaVersion\": 45"));
        assert!(declares_v4("schemaVersion: 4\n"));
    }

    #[test]
    fn a_fix_replaces_the_inside_of_quotes_and_a_plain_scalar_whole() {
        let text = r#"{"schema": "svc.application-manifest", "schemaVersion": 5, "aplicationId": "x"}"#;
        let json = Document::new("m.json", text.into(), 1, None);
        let d = json.diagnostics().iter().find(|d| d.suggestion.is_some()).expect("a did-you-mean");
        assert_eq!(d.suggestion.as_deref(), Some("applicationId"));
        assert_eq!(&json.text[json.fix_range(d).expect("range")], "aplicationId");

        let text = "schema: svc.application-manifest\nschemaVersion: 5\naplicationId: x\n";
        let yaml = Document::new("m.yaml", text.into(), 1, None);
        let d = yaml.diagnostics().iter().find(|d| d.suggestion.is_some()).expect("a did-you-mean");
        assert_eq!(&yaml.text[yaml.fix_range(d).expect("range")], "aplicationId");
    }

    #[test]
    fn a_fix_on_a_yaml_block_scalar_replaces_its_word_not_the_next_lines_indentation() {
        let text = "schema: svc.application-manifest\nschemaVersion: 5\nruntime:\n  kind: javascript\n  engine: >-\n    nodejz\n  entrypoint:\n    file: a.js\n";
        let doc = Document::new("m.yaml", text.into(), 1, None);
        let d = doc.diagnostics().iter().find(|d| d.pointer == "/runtime/engine").expect("engine");
        assert_eq!(d.suggestion.as_deref(), Some("nodejs"));
        assert_eq!(&doc.text[doc.fix_range(d).expect("range")], "nodejz");
    }
}
