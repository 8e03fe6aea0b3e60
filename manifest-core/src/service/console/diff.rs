//! A field-level diff of two JSON documents (two versions' effective policies or authored
//! manifests): each leaf that differs, by its JSON pointer, with the value before and after.
//! Objects are compared by key and arrays by position; at most [`MAX_CHANGES`] rows.

use serde_json::Value;

/// The most changes listed (a page stays small; the rest is counted).
pub(super) const MAX_CHANGES: usize = 500;

/// One difference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Change {
    /// Where, as a JSON pointer (`""` for the whole document).
    pub(super) pointer: String,
    /// The value before (`None`: added).
    pub(super) before: Option<String>,
    /// The value after (`None`: removed).
    pub(super) after: Option<String>,
}

/// The differences from `a` to `b`, in document order, and how many there are in all.
pub(super) fn diff(a: &Value, b: &Value) -> (Vec<Change>, usize) {
    let mut out = Vec::new();
    let mut total = 0;
    walk(String::new(), Some(a), Some(b), &mut out, &mut total);
    (out, total)
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn show(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

fn walk(pointer: String, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<Change>, total: &mut usize) {
    match (a, b) {
        (Some(Value::Object(x)), Some(Value::Object(y))) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                walk(format!("{pointer}/{}", escape(key)), x.get(key), y.get(key), out, total);
            }
        }
        (Some(Value::Array(x)), Some(Value::Array(y))) => {
            for i in 0..x.len().max(y.len()) {
                walk(format!("{pointer}/{i}"), x.get(i), y.get(i), out, total);
            }
        }
        (a, b) if a == b => {}
        (a, b) => {
            *total += 1;
            if out.len() < MAX_CHANGES {
                out.push(Change { pointer, before: a.map(show), after: b.map(show) });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn leaves_that_differ_are_listed_by_pointer() {
        let a = json!({"deployment": {"jobs": 1, "schedule": {"duration": "1h"}}, "vars": [{"name": "A"}], "x/y": 1});
        let b = json!({"deployment": {"jobs": 2, "schedule": {"duration": "1h"}}, "vars": [{"name": "A"}, {"name": "B"}], "new": true});
        let (changes, total) = diff(&a, &b);
        let rows: Vec<(&str, Option<&str>, Option<&str>)> =
            changes.iter().map(|c| (c.pointer.as_str(), c.before.as_deref(), c.after.as_deref())).collect();
        assert_eq!(
            rows,
            [
                ("/deployment/jobs", Some("1"), Some("2")),
                ("/new", None, Some("true")),
                ("/vars/1", None, Some("{\"name\":\"B\"}")),
                ("/x~1y", Some("1"), None),
            ]
        );
        assert_eq!(total, 4);
        assert_eq!(diff(&a, &a).1, 0);
    }

    #[test]
    fn a_long_diff_is_cut_and_counted() {
        let a = json!((0..2000).collect::<Vec<_>>());
        let b = json!((1..2001).collect::<Vec<_>>());
        let (changes, total) = diff(&a, &b);
        assert_eq!((changes.len(), total), (MAX_CHANGES, 2000));
    }
}
