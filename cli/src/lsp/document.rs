//! An open document: which kind it is, its text, and what `validate` says of it.
//!
//! The kind is read from the document, since editors attach a server by file type and a
//! workspace has other JSON and YAML: a file named `ingress.json` (or `*.ingress.json`) is an
//! ingress project; a document that names the manifest schema (`svc.application-manifest`)
//! or has a `schemaVersion` is a manifest; an object with `version` and `runtime` is an
//! ingress project. Anything else (a `package.json`) gets no diagnostics at all.

use ls_types::{DiagnosticSeverity, NumberOrString};
use manifest_core::shape::ObjectShape;
use manifest_core::{Diagnostic, Format, Node, Value};
use serde_json::json;

use super::cursor::{Cursor, Step};
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
    /// What `validate` found (layers 1 and 2), placed in the text.
    pub(crate) diagnostics: Vec<Diagnostic>,
}

impl Document {
    /// Reads and checks a document (`name`: the last segment of its URI's path).
    pub(crate) fn new(name: &str, text: String, version: i32) -> Document {
        let kind = kind(name, &text);
        let diagnostics = match kind {
            Some(Kind::Manifest) => manifest_core::validate(text.as_bytes()).diagnostics,
            Some(Kind::Project) => relay_api::project::check(&text).diagnostics,
            None => Vec::new(),
        };
        Document { text, version, kind, diagnostics }
    }

    /// The table its root is checked against.
    pub(crate) fn root(&self) -> Option<&'static ObjectShape> {
        match self.kind? {
            Kind::Project => Some(&relay_api::project::PROJECT),
            Kind::Manifest if declares_v4(&self.text) => Some(&manifest_core::v4::MANIFEST),
            Kind::Manifest => Some(&manifest_core::v5::MANIFEST),
        }
    }

    /// The value of the discriminator `tag` of the object at `path`, as written: from the
    /// document's tree when it parses, else from the members the cursor's object has.
    pub(crate) fn arm(&self, path: &[Step], tag: &str, cursor: &Cursor, container: usize) -> Option<String> {
        let (root, _) = match Format::detect(&self.text) {
            Format::Json => manifest_core::parse::json(&self.text),
            Format::Yaml => manifest_core::parse::yaml(&self.text),
        };
        if let Some(node) = root.as_ref().and_then(|root| walk(root, path))
            && let Some(Value::String(value)) = node.get(tag).map(|n| &n.value)
        {
            return Some(value.to_string());
        }
        (path.len() == container)
            .then(|| cursor.siblings.iter().find(|(k, _)| k == tag).and_then(|(_, v)| v.clone()))
            .flatten()
    }

    /// The diagnostics as the protocol carries them: code, severity, range, and in `data`
    /// the layer and the JSON pointer, as `svc manifest validate --format json` prints them.
    pub(crate) fn published(&self) -> Vec<ls_types::Diagnostic> {
        let lines = Lines::new(&self.text);
        self.diagnostics
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

    /// The bytes a diagnostic's suggestion replaces: its key or value, inside the quotes.
    pub(crate) fn fix_range(&self, d: &Diagnostic) -> Option<std::ops::Range<usize>> {
        let span = d.span?;
        let (start, end) = (span.start as usize, span.end as usize);
        let written = self.text.get(start..end)?;
        let quoted = written.len() >= 2 && ['"', '\''].iter().any(|&q| written.starts_with(q) && written.ends_with(q));
        Some(if quoted { start + 1..end - 1 } else { start..end })
    }
}

fn kind(name: &str, text: &str) -> Option<Kind> {
    if name == relay_api::project::FILE_NAME || name.ends_with(".ingress.json") {
        return Some(Kind::Project);
    }
    if text.contains("svc.application-manifest") || text.contains("schemaVersion") {
        return Some(Kind::Manifest);
    }
    let (root, _) = manifest_core::parse::json(text);
    let root = root?;
    (root.get("version").is_some() && root.get("runtime").is_some()).then_some(Kind::Project)
}

/// Whether the text's `schemaVersion` is 4 (read from the text, so a document that does not
/// parse yet is still described by its version's table).
fn declares_v4(text: &str) -> bool {
    text.match_indices("schemaVersion").any(|(at, key)| {
        let rest = text[at + key.len()..].trim_start_matches(['"', '\'', ':', ' ', '\t']);
        rest.starts_with('4') && !rest[1..].starts_with(|c: char| c.is_ascii_digit())
    })
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
        assert_eq!(kind("ingress.json", "{"), Some(Kind::Project));
        assert_eq!(kind("shop.ingress.json", ""), Some(Kind::Project));
        assert_eq!(kind("app.yaml", "schema: svc.application-manifest\n"), Some(Kind::Manifest));
        assert_eq!(kind("x.json", "{\"schemaVersion\": 4"), Some(Kind::Manifest));
        assert_eq!(kind("shop.json", r#"{"version": 1, "runtime": "node"}"#), Some(Kind::Project));
        assert_eq!(kind("package.json", r#"{"name": "x", "version": "1.0.0"}"#), None);
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
        let json = Document::new("m.json", text.into(), 1);
        let d = json.diagnostics.iter().find(|d| d.suggestion.is_some()).expect("a did-you-mean");
        assert_eq!(d.suggestion.as_deref(), Some("applicationId"));
        assert_eq!(&json.text[json.fix_range(d).expect("range")], "aplicationId");

        let text = "schema: svc.application-manifest\nschemaVersion: 5\naplicationId: x\n";
        let yaml = Document::new("m.yaml", text.into(), 1);
        let d = yaml.diagnostics.iter().find(|d| d.suggestion.is_some()).expect("a did-you-mean");
        assert_eq!(&yaml.text[yaml.fix_range(d).expect("range")], "aplicationId");
    }
}
