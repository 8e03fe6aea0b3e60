//! JSON Schema (draft 2020-12) generated from the shape tables that drive validation, so the
//! schemas can never drift from the validator: closed objects, closed unions (`oneOf` with
//! `const` discriminators), enums, patterns and bounds, self-contained (no `$ref`).
//!
//! What a schema cannot say stays in the validator: cross-field rules (layer 2), and the few
//! formats a regex cannot fully express (`Pattern::exact` is false, e.g. a real calendar date).
//! The bytes of each schema are fixed for a build; their digest is the HTTP ETag.

use std::sync::OnceLock;

use serde_json::{Map, Value as Json, json};

use crate::check::default_value;
use crate::shape::{ArrayShape, Field, ObjectShape, Presence, Shape, StrFormat, StrShape, UnionShape};

/// The JSON Schema dialect of every generated schema.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The schemas the service serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemaKind {
    /// The authored Manifest V4 (`GET /api/application-manifest/schema`).
    ManifestV4,
    /// The authored Manifest V5 (`GET /api/application-manifest/v5/schema`).
    ManifestV5,
    /// The materialized Policy V4 (`GET /api/application-policy/schema`).
    PolicyV4,
    /// The `svc.execution-convergence.v1` projection
    /// (`GET /api/execution-convergence/schema`).
    Executions,
}

impl SchemaKind {
    /// Every schema.
    pub const ALL: [SchemaKind; 4] =
        [SchemaKind::ManifestV4, SchemaKind::ManifestV5, SchemaKind::PolicyV4, SchemaKind::Executions];

    /// The schema's `$id`.
    pub fn id(self) -> &'static str {
        match self {
            SchemaKind::ManifestV4 => "urn:svc:schema:application-manifest:4",
            SchemaKind::ManifestV5 => "urn:svc:schema:application-manifest:5",
            SchemaKind::PolicyV4 => "urn:svc:schema:application-policy:4",
            SchemaKind::Executions => "urn:svc:schema:execution-convergence:1",
        }
    }

    fn table(self) -> &'static ObjectShape {
        match self {
            SchemaKind::ManifestV4 => &crate::v4::MANIFEST,
            SchemaKind::ManifestV5 => &crate::v5::MANIFEST,
            SchemaKind::PolicyV4 => &crate::policy::POLICY,
            SchemaKind::Executions => &crate::projection::CONVERGENCE,
        }
    }

    /// The exact bytes served (pretty JSON and a final newline).
    pub fn bytes(self) -> &'static str {
        &self.generated().0
    }

    /// `sha256:<hex>` of [`SchemaKind::bytes`]; the route's ETag, quoted.
    pub fn digest(self) -> &'static str {
        &self.generated().1
    }

    /// The HTTP `ETag` of the schema route: the digest, quoted.
    pub fn etag(self) -> String {
        format!("\"{}\"", self.digest())
    }

    fn generated(self) -> &'static (String, String) {
        static CELLS: [OnceLock<(String, String)>; 4] =
            [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
        let index = SchemaKind::ALL.iter().position(|k| *k == self).unwrap_or(0);
        CELLS[index].get_or_init(|| {
            let bytes = render(self);
            let digest = crate::digest::sha256(bytes.as_bytes());
            (bytes, digest)
        })
    }
}

fn render(kind: SchemaKind) -> String {
    // The policy writes every default out, so there a defaulted field is required.
    render_table(kind.table(), kind.id(), kind == SchemaKind::PolicyV4)
}

/// The schema of a table, with its dialect and `$id`: pretty JSON and a final newline.
pub(crate) fn render_table(table: &ObjectShape, id: &str, defaults_required: bool) -> String {
    let generator = Generator { defaults_required };
    let mut root = generator.object(table);
    root.insert("$schema".into(), json!(DIALECT));
    root.insert("$id".into(), json!(id));
    let mut text = serde_json::to_string_pretty(&Json::Object(root)).unwrap_or_default();
    text.push('\n');
    text
}

struct Generator {
    defaults_required: bool,
}

impl Generator {
    fn shape(&self, shape: &Shape) -> Map<String, Json> {
        match shape {
            Shape::Bool => obj([("type", json!("boolean"))]),
            Shape::AlwaysTrue(why) => {
                obj([("type", json!("boolean")), ("const", json!(true)), ("description", json!(why))])
            }
            Shape::Integer(b) => {
                obj([("type", json!("integer")), ("minimum", json!(b.min)), ("maximum", json!(b.max))])
            }
            Shape::Str(rule) => string(rule),
            Shape::Array(a) => self.array(a),
            Shape::Object(o) => self.object(o),
            Shape::Union(u) => self.union(u),
            Shape::Map(m) => {
                let mut out =
                    obj([("type", json!("object")), ("additionalProperties", Json::Object(self.shape(&m.values)))]);
                out.insert("propertyNames".into(), Json::Object(string(&m.keys)));
                if let Some(max) = m.max_entries {
                    out.insert("maxProperties".into(), json!(max));
                }
                out
            }
        }
    }

    fn array(&self, a: &ArrayShape) -> Map<String, Json> {
        let mut m = obj([("type", json!("array")), ("items", Json::Object(self.shape(&a.items)))]);
        if a.min_items > 0 {
            m.insert("minItems".into(), json!(a.min_items));
        }
        if let Some(max) = a.max_items {
            m.insert("maxItems".into(), json!(max));
        }
        if a.unique {
            m.insert("uniqueItems".into(), json!(true));
        }
        m
    }

    fn object(&self, o: &ObjectShape) -> Map<String, Json> {
        let mut m = obj([("type", json!("object")), ("title", json!(o.name))]);
        self.fields(&mut m, o.fields, None);
        if o.min_fields > 0 {
            m.insert("minProperties".into(), json!(o.min_fields));
        }
        m
    }

    fn union(&self, u: &UnionShape) -> Map<String, Json> {
        let arms: Vec<Json> = u
            .arms
            .iter()
            .map(|arm| {
                let mut m = obj([("type", json!("object")), ("title", json!(format!("{} {}", u.name, arm.value)))]);
                self.fields(&mut m, arm.object.fields, Some((u.tag, arm.value)));
                Json::Object(m)
            })
            .collect();
        obj([("type", json!("object")), ("title", json!(u.name)), ("oneOf", Json::Array(arms))])
    }

    /// `properties`, `required` and `additionalProperties: false`; a union arm adds its tag as
    /// a required `const`.
    fn fields(&self, m: &mut Map<String, Json>, fields: &[Field], tag: Option<(&str, &str)>) {
        let mut properties = Map::new();
        let mut required = Vec::new();
        if let Some((tag, value)) = tag {
            properties.insert(tag.into(), json!({ "const": value }));
            required.push(json!(tag));
        }
        for f in fields {
            let mut schema = self.shape(&f.shape);
            schema.entry("description").or_insert(json!(f.doc));
            if f.deprecated {
                schema.insert("deprecated".into(), json!(true));
            }
            match f.presence {
                Presence::Required => required.push(json!(f.name)),
                // In the policy every default is written out, so the field is required and a
                // `default` (shallow, as authored) would not even satisfy its own schema.
                Presence::Default(_) if self.defaults_required => required.push(json!(f.name)),
                Presence::Default(d) => {
                    let value = serde_json::to_value(crate::tree::Node {
                        span: Default::default(),
                        value: default_value(d, &f.shape),
                    })
                    .unwrap_or(Json::Null);
                    schema.insert("default".into(), value);
                }
                Presence::Optional => {}
            }
            properties.insert(f.name.into(), Json::Object(schema));
        }
        m.insert("properties".into(), Json::Object(properties));
        if !required.is_empty() {
            m.insert("required".into(), Json::Array(required));
        }
        m.insert("additionalProperties".into(), json!(false));
    }
}

fn string(rule: &StrShape) -> Map<String, Json> {
    let mut m = obj([("type", json!("string"))]);
    match rule.format {
        StrFormat::Any => {}
        StrFormat::Const(v) => {
            m.insert("const".into(), json!(v));
        }
        StrFormat::Enum(values) => {
            m.insert("enum".into(), json!(values));
        }
        StrFormat::Pattern(p) => {
            m.insert("pattern".into(), json!(portable(p.regex)));
        }
    }
    if rule.min_chars > 0 {
        m.insert("minLength".into(), json!(rule.min_chars));
    }
    if let Some(max) = rule.max_chars {
        m.insert("maxLength".into(), json!(max));
    }
    m
}

/// A regex whose end anchor means the same in ECMA-262 and Python `re`: Python's `$` also
/// matches before a final newline (and Python validators use `re.search`), so a final `$`
/// becomes `(?![\s\S])`, "no character follows", which both read alike.
fn portable(regex: &str) -> String {
    match regex.strip_suffix('$') {
        Some(body) if !body.ends_with('\\') => format!("{body}(?![\\s\\S])"),
        _ => regex.to_owned(),
    }
}

fn obj<const N: usize>(entries: [(&str, Json); N]) -> Map<String, Json> {
    entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_schema_has_its_dialect_id_and_a_stable_digest() {
        for kind in SchemaKind::ALL {
            let schema: Json = serde_json::from_str(kind.bytes()).expect("schema is JSON");
            assert_eq!(schema["$schema"], DIALECT);
            assert_eq!(schema["$id"], kind.id());
            assert_eq!(schema["additionalProperties"], false);
            assert_eq!(kind.digest(), crate::digest::sha256(kind.bytes().as_bytes()));
            assert_eq!(kind.etag(), format!("\"{}\"", kind.digest()));
            assert!(!kind.bytes().contains("$ref"), "self-contained");
        }
    }

    #[test]
    fn end_anchors_are_portable_and_policy_defaults_absent() {
        assert_eq!(portable("^a$"), "^a(?![\\s\\S])");
        assert_eq!(portable("^/"), "^/");
        for kind in SchemaKind::ALL {
            assert!(!kind.bytes().contains("$\""), "{kind:?}: a pattern still ends with `$`");
        }
        // `default` as a keyword (not as the name of a property, which V4 variables have).
        fn defaults(v: &Json, in_properties: bool) -> usize {
            match v {
                Json::Object(m) => m
                    .iter()
                    .map(|(k, v)| usize::from(!in_properties && k == "default") + defaults(v, k == "properties"))
                    .sum(),
                Json::Array(items) => items.iter().map(|v| defaults(v, false)).sum(),
                _ => 0,
            }
        }
        let policy: Json = serde_json::from_str(SchemaKind::PolicyV4.bytes()).expect("json");
        assert_eq!(defaults(&policy, false), 0, "the policy schema states no defaults");
        let v4: Json = serde_json::from_str(SchemaKind::ManifestV4.bytes()).expect("json");
        assert!(defaults(&v4, false) > 20, "the manifest schema states its defaults");
    }

    #[test]
    fn unions_are_closed_one_of_with_const_discriminators() {
        let schema: Json = serde_json::from_str(SchemaKind::ManifestV5.bytes()).expect("json");
        let runtime = &schema["properties"]["runtime"];
        let arms = runtime["oneOf"].as_array().expect("oneOf");
        assert_eq!(arms.len(), 2);
        for arm in arms {
            assert_eq!(arm["additionalProperties"], false);
            assert!(arm["properties"]["kind"]["const"].is_string());
            assert!(arm["required"].as_array().expect("required").contains(&json!("kind")));
        }
    }
}
