//! Other strict JSON documents (the ingress project file, `ingress.json`) checked with the
//! manifests' own machinery: the strict reader (spans, duplicate keys, depth and size limits),
//! layer 1 against the caller's shape table (every problem in one pass, near-miss suggestions,
//! defaults filled in), the caller's cross-field rules, then pointers placed at line and
//! column in document order. [`schema_for`] generates the JSON Schema from the same table.
//!
//! ```
//! use manifest_core::shape::{ObjectShape, Shape, defaulted, int, object, required, DefaultValue, NON_EMPTY};
//!
//! static TABLE: ObjectShape = object("example file", &[
//!     required("name", NON_EMPTY, "what it is called"),
//!     defaulted("count", int(1, 9), DefaultValue::Integer(1), "how many, 1-9"),
//! ]);
//!
//! let report = manifest_core::document::check_json("{\"name\": \"x\", \"cuont\": 2}", &TABLE, |_, _| {});
//! assert!(!report.is_valid());
//! assert_eq!(report.diagnostics.len(), 1);
//! assert_eq!(report.diagnostics[0].pointer, "/cuont");
//! assert!(report.diagnostics[0].message.contains("did you mean \"count\"?"));
//! assert_eq!((report.diagnostics[0].line, report.diagnostics[0].column), (Some(1), Some(15)));
//!
//! let schema = manifest_core::document::schema_for(&TABLE, "urn:example:file:1");
//! assert!(schema.contains("\"additionalProperties\": false"));
//! ```

use std::collections::HashSet;

use serde::de::{DeserializeOwned, Error as _};

use crate::bounded::{Bounded, MAX_DIAGNOSTICS, finish};
use crate::check::{check_document, defaults_are_valid};
use crate::de::{ModelError, from_node};
use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::shape::{ObjectShape, Shape};
use crate::source::decode;
use crate::tree::{Node, Value};
use crate::validate::{locate, place};

/// The outcome of checking one document.
#[derive(Debug, Clone)]
pub struct DocumentReport<'a> {
    /// Every problem, in document order, with line and column.
    pub diagnostics: Vec<Diagnostic>,
    /// The document as read; once checked, with every default filled in (those members are
    /// marked `defaulted`). `None` after a fatal read error.
    pub document: Option<Node<'a>>,
    /// Whether layer 1 ran (the root is an object).
    checked: bool,
}

impl DocumentReport<'_> {
    /// Valid: checked, with no error (warnings allowed).
    pub fn is_valid(&self) -> bool {
        self.checked && !self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// Reads the typed model from the checked, defaulted document. Meant for a valid report:
    /// on a valid one a failure means the table and the model disagree (a bug, not the
    /// author's fault); on an invalid one it fails or reads a partial document.
    pub fn model<T: DeserializeOwned>(&self) -> Result<T, ModelError> {
        match &self.document {
            Some(root) => from_node(root),
            None => Err(ModelError::custom("the document could not be read")),
        }
    }
}

/// Checks JSON `text` against `table`: reads it strictly, runs layer 1 (filling defaults),
/// then `rules`, the document kind's own cross-field rules (layer 2), which see the checked
/// tree and, in `out`, the diagnostics so far (so a rule can skip fields that already failed).
/// `rules` runs only when the root is an object and the problems so far are within
/// [`crate::MAX_DIAGNOSTICS`]; the report lists at most that many, then one
/// `diagnostics_truncated` entry. Never panics, whatever the text.
pub fn check_json<'a>(
    text: &'a str,
    table: &'static ObjectShape,
    rules: impl FnOnce(&Node<'a>, &mut Vec<Diagnostic>),
) -> DocumentReport<'a> {
    let mut report = DocumentReport { diagnostics: Vec::new(), document: None, checked: false };
    // Size and byte-order mark: the same limits as a manifest.
    if let Err(d) = decode(text.as_bytes()) {
        report.diagnostics.push(d);
        place(text, &mut report.diagnostics);
        return report;
    }
    let parsed = crate::json::parse(text);
    let read_overflowed = parsed.diagnostics.overflowed();
    let (read, mut omitted) = parsed.diagnostics.into_parts();
    report.diagnostics = read;
    if let Some(mut root) = parsed.root {
        if matches!(root.value, Value::Object(_)) {
            let mut schema = Bounded::default();
            check_document(&mut root, table, &mut schema);
            let past_cap =
                read_overflowed || schema.overflowed() || report.diagnostics.len() + schema.len() > MAX_DIAGNOSTICS;
            let (mut schema, schema_omitted) = schema.into_parts();
            report.diagnostics.append(&mut schema);
            omitted = omitted.and(schema_omitted);
            if !past_cap {
                rules(&root, &mut report.diagnostics);
            }
            report.checked = true;
        } else {
            let message = format!("the {} is an object, found {}", table.name, root.value.kind());
            report.diagnostics.push(Diagnostic::error(Layer::Schema, Code::RootNotObject, "", message));
        }
        locate(&root, &mut report.diagnostics);
        report.document = Some(root);
    }
    place(text, &mut report.diagnostics);
    let _ = finish(&mut report.diagnostics, omitted);
    report
}

/// The JSON Schema (draft 2020-12) of documents `table` describes, with `$id` `id`: closed
/// objects, enums, patterns, bounds and defaults, self-contained. Pretty JSON and a final
/// newline; the bytes depend only on the table, so cache them (and their digest) per process.
/// Cross-field rules and formats whose regex says less than their check (`Pattern::exact`
/// false) stay the validator's.
pub fn schema_for(table: &'static ObjectShape, id: &str) -> String {
    crate::schema::render_table(table, id, false)
}

/// What makes a table unusable by [`check_json`], for the table's own tests: an object with
/// more than 64 fields, a field name twice in one object, a default that its own shape
/// refuses. Empty when the table is sound.
pub fn table_problems(table: &'static ObjectShape) -> Vec<String> {
    let mut problems = Vec::new();
    each_object(table, &mut |o| {
        if o.fields.len() > 64 {
            problems.push(format!("{} has {} fields; at most 64", o.name, o.fields.len()));
        }
        let names: HashSet<&str> = o.fields.iter().map(|f| f.name).collect();
        if names.len() != o.fields.len() {
            problems.push(format!("{} repeats a field name", o.name));
        }
    });
    problems.extend(defaults_are_valid(table).into_iter().map(|d| format!("default at {}: {}", d.pointer, d.message)));
    problems
}

fn each_object(root: &'static ObjectShape, check: &mut dyn FnMut(&'static ObjectShape)) {
    fn walk(shape: &Shape, check: &mut dyn FnMut(&'static ObjectShape)) {
        match *shape {
            Shape::Object(o) => each_object(o, check),
            Shape::Union(u) => u.arms.iter().for_each(|a| {
                check(&a.object);
                a.object.fields.iter().for_each(|f| walk(&f.shape, check));
            }),
            Shape::Array(a) => walk(&a.items, check),
            Shape::Map(m) => walk(&m.values, check),
            _ => {}
        }
    }
    check(root);
    root.fields.iter().for_each(|f| walk(&f.shape, check));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::{
        DefaultValue, MapShape, NON_EMPTY, StrFormat, StrShape, constant, defaulted, int, object, optional, required,
    };

    static KEYS: MapShape = MapShape {
        keys: StrShape {
            format: StrFormat::Pattern(&crate::formats::ENV_NAME_V5),
            min_chars: 1,
            max_chars: Some(8),
            hint: None,
        },
        values: NON_EMPTY,
        max_entries: Some(2),
    };

    static TABLE: ObjectShape = object(
        "test file",
        &[
            required("version", int(1, 1), "1"),
            required("name", NON_EMPTY, "a name"),
            defaulted("mode", constant("on"), DefaultValue::Str("on"), "on"),
            optional("env", Shape::Map(&KEYS), "env"),
        ],
    );

    #[test]
    fn every_problem_in_one_pass_with_positions_and_defaults() {
        let text = "{\n  \"version\": 2,\n  \"nmae\": \"x\",\n  \"env\": {\"lower\": \"v\", \"TOOLONGNAME\": \"v\", \"OK\": \"\"}\n}";
        let report = check_json(text, &TABLE, |_, _| {});
        let got: Vec<(&str, &str, Option<u32>, Option<u32>)> =
            report.diagnostics.iter().map(|d| (d.pointer.as_str(), d.code.as_str(), d.line, d.column)).collect();
        assert_eq!(
            got,
            [
                // A missing field is placed at the start of the object it belongs in.
                ("/name", "missing_required_field", Some(1), Some(1)),
                ("/version", "out_of_range", Some(2), Some(14)),
                ("/nmae", "unknown_field", Some(3), Some(3)),
                ("/env", "too_many_items", Some(4), Some(10)),
                // Key problems point at the key, value problems at the value.
                ("/env/lower", "invalid_format", Some(4), Some(11)),
                ("/env/TOOLONGNAME", "too_long", Some(4), Some(25)),
                ("/env/OK", "too_short", Some(4), Some(51)),
            ]
        );
        assert!(report.diagnostics[2].message.contains("did you mean \"name\"?"));
        assert!(report.diagnostics[4].message.starts_with("key \"lower\" is not an environment name"));
        assert!(!report.is_valid());
    }

    #[test]
    fn rules_run_after_layer_one_and_are_placed() {
        let text = "{\"version\": 1, \"name\": \"x\", \"env\": {\"PORT\": \"1\"}}";
        let report = check_json(text, &TABLE, |root, out| {
            assert!(out.is_empty(), "layer 1 found nothing");
            assert!(root.get("mode").is_some(), "defaults are filled before the rules run");
            out.push(
                Diagnostic::error(Layer::Semantic, Code::ReservedEnvironmentName, "/env/PORT", "reserved").on_key(),
            );
        });
        assert_eq!(report.diagnostics.len(), 1);
        assert_eq!((report.diagnostics[0].line, report.diagnostics[0].column), (Some(1), Some(37)));
        #[derive(serde::Deserialize)]
        struct Model {
            mode: String,
        }
        assert_eq!(report.model::<Model>().expect("model").mode, "on");
    }

    #[test]
    fn fatal_and_root_problems() {
        for (text, code) in [
            ("", "empty_document"),
            ("[]", "root_not_object"),
            ("{\"version\": 1, \"name\": \"x\", \"name\": \"y\"}", "duplicate_key"),
            ("\u{feff}{}", "byte_order_mark"),
            ("{\"version\": 1,", "invalid_json"),
        ] {
            let mut ran = false;
            let report = check_json(text, &TABLE, |_, _| ran = true);
            assert!(!report.is_valid(), "{text:?}");
            assert_eq!(report.diagnostics[0].code.as_str(), code, "{text:?}");
            // A duplicate key does not stop reading: the rest is still checked.
            assert_eq!(ran, code == "duplicate_key", "{text:?}");
        }
        let big = format!("{{\"name\": \"{}\"}}", "x".repeat(crate::MAX_INPUT_BYTES));
        assert_eq!(check_json(&big, &TABLE, |_, _| {}).diagnostics[0].code, Code::InputTooLarge);
    }

    #[test]
    fn the_schema_is_closed_and_bounds_maps() {
        let schema: serde_json::Value = serde_json::from_str(&schema_for(&TABLE, "urn:test")).expect("json");
        assert_eq!(schema["$id"], "urn:test");
        assert_eq!(schema["title"], "test file");
        assert_eq!(schema["additionalProperties"], false);
        assert_eq!(schema["properties"]["env"]["maxProperties"], 2);
        assert_eq!(schema["properties"]["env"]["propertyNames"]["maxLength"], 8);
        assert_eq!(schema["properties"]["mode"]["default"], "on");
        assert_eq!(table_problems(&TABLE), Vec::<String>::new());
        assert_eq!(table_problems(&crate::v5::MANIFEST), Vec::<String>::new());
    }

    #[test]
    fn unsound_tables_are_reported() {
        static BAD: ObjectShape = object(
            "bad",
            &[
                required("a", NON_EMPTY, "a"),
                required("a", NON_EMPTY, "a again"),
                defaulted("b", int(1, 2), DefaultValue::Integer(3), "b"),
            ],
        );
        let problems = table_problems(&BAD);
        assert_eq!(problems.len(), 2, "{problems:?}");
    }
}
