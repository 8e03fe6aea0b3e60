//! Writing a JSON value as block YAML that the strict V5 reader accepts: mappings and
//! sequences in block style; a string plain when it is a simple word (`[A-Za-z][A-Za-z0-9_.-]*`,
//! none of YAML's words for booleans and null), else double-quoted (JSON's escapes are
//! YAML's); numbers, booleans and null plain; empty collections as `{}` and `[]`. Keys come in
//! the order given, then alphabetically. No anchors, tags or multi-line scalars, so it reads
//! back as the same value.

use serde_json::Value;

/// The order of a Manifest V5's keys, as its documentation writes them.
pub const V5_KEY_ORDER: &[&str] = &[
    "schema",
    "schemaVersion",
    "applicationId",
    "metadata",
    "release",
    "runtime",
    "execution",
    "deployment",
    "access",
    "configuration",
    "observability",
    "state",
    "debug",
    "description",
    "labels",
    "mode",
    "kind",
    "source",
    "name",
    "secretId",
    "engine",
    "image",
    "entrypoint",
    "artifact",
    "jobs",
    "schedule",
    "placement",
    "lifecycle",
    "spend",
    "unit",
    "perJob",
    "rate",
    "amount",
    "window",
    "renewal",
    "update",
    "timing",
    "existingJobs",
    "value",
    "required",
    "default",
    "destination",
    "variables",
    "secrets",
];

/// YAML 1.1 and 1.2 words a plain scalar would be read as (not a string).
const RESERVED: &[&str] = &["y", "yes", "n", "no", "true", "false", "on", "off", "null"];

/// `value` as a YAML document (ending in a newline), each mapping's keys in `order` first.
pub fn to_yaml(value: &Value, order: &[&str]) -> String {
    let mut out = String::new();
    let emitter = Emitter { order };
    match value {
        Value::Object(map) if !map.is_empty() => emitter.mapping(map, 0, &mut out),
        Value::Array(items) if !items.is_empty() => emitter.sequence(items, 0, &mut out),
        scalar => {
            out += &inline(scalar);
            out.push('\n');
        }
    }
    out
}

fn string(text: &str) -> String {
    let simple = text.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        && !RESERVED.contains(&text.to_ascii_lowercase().as_str());
    // serde_json writes `\"`, `\\`, `\n`, `\uXXXX`...: all YAML double-quoted escapes.
    if simple { text.to_owned() } else { Value::from(text).to_string() }
}

fn inline(value: &Value) -> String {
    match value {
        Value::Object(map) if map.is_empty() => "{}".to_owned(),
        Value::Array(items) if items.is_empty() => "[]".to_owned(),
        Value::String(text) => string(text),
        other => other.to_string(),
    }
}

fn nested(value: &Value) -> bool {
    matches!(value, Value::Object(m) if !m.is_empty()) || matches!(value, Value::Array(a) if !a.is_empty())
}

struct Emitter<'a> {
    order: &'a [&'a str],
}

impl Emitter<'_> {
    fn mapping(&self, map: &serde_json::Map<String, Value>, indent: usize, out: &mut String) {
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort_by_key(|k| (self.order.iter().position(|o| o == k).unwrap_or(usize::MAX), (*k).clone()));
        for key in keys {
            let value = &map[key];
            out.push_str(&" ".repeat(indent));
            out.push_str(&string(key));
            if nested(value) {
                out.push_str(":\n");
                self.block(value, indent + 2, out);
            } else {
                out.push_str(": ");
                out.push_str(&inline(value));
                out.push('\n');
            }
        }
    }

    fn sequence(&self, items: &[Value], indent: usize, out: &mut String) {
        for item in items {
            out.push_str(&" ".repeat(indent));
            out.push('-');
            if nested(item) {
                out.push('\n');
                self.block(item, indent + 2, out);
            } else {
                out.push(' ');
                out.push_str(&inline(item));
                out.push('\n');
            }
        }
    }

    fn block(&self, value: &Value, indent: usize, out: &mut String) {
        match value {
            Value::Object(map) => self.mapping(map, indent, out),
            Value::Array(items) => self.sequence(items, indent, out),
            scalar => {
                out.push_str(&" ".repeat(indent));
                out.push_str(&inline(scalar));
                out.push('\n');
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn yaml_reads_back_as_the_same_value() {
        let value = json!({
            "a": {"b": [1, "two", {"c": null, "d": []}, [true, false]], "e": {}},
            "quote\"d": "line\nbreak \u{1F600} # not a comment: - x",
            "n": -1.5,
            "words": ["plain", "off", "Yes", "1h", "a:b", "-x", "sha256:ab", ""],
        });
        let text = to_yaml(&value, &["quote\"d"]);
        assert!(text.starts_with("\"quote\\\"d\": "), "keys in the order given:\n{text}");
        assert!(text.contains("  - plain\n  - \"off\"\n  - \"Yes\"\n  - \"1h\"\n"), "{text}");
        let (root, diagnostics) = crate::parse::yaml(&text);
        assert!(diagnostics.is_empty(), "{diagnostics:?}\n{text}");
        assert_eq!(serde_json::to_value(root.expect("a tree")).expect("JSON"), value, "{text}");
    }
}
