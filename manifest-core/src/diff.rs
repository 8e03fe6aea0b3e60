//! What changed between two policies (or two manifests): field-level changes, each with its
//! JSON pointer, grouped by whom they reach. A change to `deployment.lifecycle`,
//! `deployment.schedule`, `deployment.jobs` (V4: `deployment.parallelism`) or `execution` (how
//! jobs renew, update, restart and end, how many run), to `deployment.placement` (where they
//! run) or to `deployment.spend` (what they may spend) reaches the jobs running now; a change
//! to `metadata` or to the `$schema` editor hint reaches no job (the effective policy holds
//! neither); every other change (the artifact, the runtime, the configuration, observability,
//! state) reaches only the jobs launched from the new version, as its update rule rolls them
//! out. [`crate::effective`] makes the documents compared here of two manifests.
//!
//! ```
//! use serde_json::json;
//! let a = json!({"deployment": {"spend": {"perJob": "1"}}, "configuration": {"variables": [{"name": "A", "value": "1"}]}});
//! let b = json!({"deployment": {"spend": {"perJob": "2"}}, "configuration": {"variables": [{"name": "A", "value": "2"}]}});
//! let changes = manifest_core::diff::diff(&a, &b);
//! assert_eq!(changes[0].pointer, "/configuration/variables/0/value");
//! assert_eq!(changes[0].key.as_deref(), Some("A"));
//! assert_eq!(changes[1].effect, manifest_core::diff::Effect::RunningJobs(manifest_core::diff::Area::Spend));
//! ```

use serde::Serialize;
use serde_json::Value;

/// Whom a change reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "reaches", content = "area")]
pub enum Effect {
    /// The jobs running now.
    RunningJobs(Area),
    /// Only the jobs launched from the new version.
    NextJobs,
    /// No job: metadata and editor hints, which the effective policy does not hold.
    Nothing,
}

/// The part of a policy that governs running jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Area {
    /// Renewal, update, recovery, the paid window, the number of jobs (V5 `jobs`, V4
    /// `parallelism`), the execution mode.
    Lifecycle,
    /// Capability minimums and processor selection.
    Placement,
    /// The spend authority.
    Spend,
}

impl Area {
    /// Its name, as the text report prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Area::Lifecycle => "lifecycle",
            Area::Placement => "placement",
            Area::Spend => "spend",
        }
    }
}

/// What happened at a pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Only in the second document.
    Added,
    /// Only in the first.
    Removed,
    /// In both, with other values.
    Changed,
}

/// One field-level change.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// Where, as a JSON pointer (RFC 6901) into the second document (into the first for a
    /// removal).
    pub pointer: String,
    /// Added, removed or changed.
    pub kind: Kind,
    /// The value before (none for an addition).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<Value>,
    /// The value after (none for a removal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<Value>,
    /// The name of the list entry it is in, when the list's entries are named (a variable,
    /// a secret): entries are matched by name, not by place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Whom it reaches.
    pub effect: Effect,
}

/// The fields that name a list's entries, first found first used.
const ENTRY_KEYS: [&str; 3] = ["name", "secretId", "id"];

/// The field-level changes from `a` to `b`: each object's fields in key order, the fields
/// only in `a` after the others.
pub fn diff(a: &Value, b: &Value) -> Vec<Change> {
    let mut changes = Vec::new();
    walk(a, b, &mut Vec::new(), None, &mut changes);
    changes
}

/// Whom a change at `path` (the pointer's segments) reaches.
pub fn effect_of(path: &[String]) -> Effect {
    match path {
        [first, ..] if first == "execution" => Effect::RunningJobs(Area::Lifecycle),
        [first, ..] if first == "metadata" || first == "$schema" => Effect::Nothing,
        [first, second, ..] if first == "deployment" => match second.as_str() {
            // V4 `parallelism` is V5 `jobs`: how many run.
            "lifecycle" | "schedule" | "jobs" | "parallelism" | "recovery" => Effect::RunningJobs(Area::Lifecycle),
            "placement" => Effect::RunningJobs(Area::Placement),
            "spend" => Effect::RunningJobs(Area::Spend),
            _ => Effect::NextJobs,
        },
        _ => Effect::NextJobs,
    }
}

fn pointer(path: &[String]) -> String {
    path.iter().map(|s| format!("/{}", s.replace('~', "~0").replace('/', "~1"))).collect()
}

fn record(
    path: &[String],
    key: Option<&str>,
    kind: Kind,
    from: Option<&Value>,
    to: Option<&Value>,
    out: &mut Vec<Change>,
) {
    out.push(Change {
        pointer: pointer(path),
        kind,
        from: from.cloned(),
        to: to.cloned(),
        key: key.map(str::to_owned),
        effect: effect_of(path),
    });
}

fn walk(a: &Value, b: &Value, path: &mut Vec<String>, key: Option<&str>, out: &mut Vec<Change>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (name, after) in y {
                path.push(name.clone());
                match x.get(name) {
                    Some(before) => walk(before, after, path, key, out),
                    None => record(path, key, Kind::Added, None, Some(after), out),
                }
                path.pop();
            }
            for (name, before) in x.iter().filter(|(name, _)| !y.contains_key(*name)) {
                path.push(name.clone());
                record(path, key, Kind::Removed, Some(before), None, out);
                path.pop();
            }
        }
        (Value::Array(x), Value::Array(y)) => match entry_key(x, y) {
            Some(field) => walk_named(x, y, field, path, out),
            None => {
                for (i, after) in y.iter().enumerate() {
                    path.push(i.to_string());
                    match x.get(i) {
                        Some(before) => walk(before, after, path, key, out),
                        None => record(path, key, Kind::Added, None, Some(after), out),
                    }
                    path.pop();
                }
                for (i, before) in x.iter().enumerate().skip(y.len()) {
                    path.push(i.to_string());
                    record(path, key, Kind::Removed, Some(before), None, out);
                    path.pop();
                }
            }
        },
        _ if a != b => record(path, key, Kind::Changed, Some(a), Some(b), out),
        _ => {}
    }
}

/// Entries matched by their name: each entry of `y` with the entry of `x` of the same name
/// (its pointer at its place in `y`), then the entries of `x` no longer there.
fn walk_named(x: &[Value], y: &[Value], field: &str, path: &mut Vec<String>, out: &mut Vec<Change>) {
    let name_of = |v: &Value| v.get(field).and_then(Value::as_str).map(str::to_owned);
    for (i, after) in y.iter().enumerate() {
        let name = name_of(after);
        path.push(i.to_string());
        match x.iter().find(|before| name_of(before) == name) {
            Some(before) => walk(before, after, path, name.as_deref(), out),
            None => record(path, name.as_deref(), Kind::Added, None, Some(after), out),
        }
        path.pop();
    }
    for (i, before) in x.iter().enumerate() {
        let name = name_of(before);
        if !y.iter().any(|after| name_of(after) == name) {
            path.push(i.to_string());
            record(path, name.as_deref(), Kind::Removed, Some(before), None, out);
            path.pop();
        }
    }
}

/// The field naming the entries of both lists, if every entry of each is an object with a
/// distinct string there.
fn entry_key(x: &[Value], y: &[Value]) -> Option<&'static str> {
    if x.is_empty() && y.is_empty() {
        return None;
    }
    ENTRY_KEYS.into_iter().find(|field| {
        [x, y].iter().all(|list| {
            let names: Vec<&str> = list.iter().filter_map(|v| v.get(*field).and_then(Value::as_str)).collect();
            let mut distinct = names.clone();
            distinct.sort_unstable();
            distinct.dedup();
            names.len() == list.len() && distinct.len() == names.len()
        })
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn summary(changes: &[Change]) -> Vec<(String, Kind, Effect)> {
        changes.iter().map(|c| (c.pointer.clone(), c.kind, c.effect)).collect()
    }

    #[test]
    fn changes_are_found_at_their_pointers_and_grouped_by_whom_they_reach() {
        let a = json!({
            "artifact": {"digest": "sha256:aa"},
            "execution": {"mode": "continuous"},
            "deployment": {"jobs": 1, "spend": {"perJob": "1"}, "placement": {"minimums": null},
                           "lifecycle": {"update": {"timing": "next_renewal"}}},
            "debug": {"a/b~c": 1},
            "metadata": {"description": "one"},
        });
        let b = json!({
            "artifact": {"digest": "sha256:bb"},
            "execution": {"mode": "continuous"},
            "deployment": {"jobs": 2, "spend": {"perJob": "1"}, "placement": {"minimums": {"memory": "1GiB"}},
                           "lifecycle": {"update": {"timing": "immediate"}}},
            "debug": {},
            "metadata": {"description": "two"},
        });
        use Area::*;
        use Effect::*;
        let mut got = summary(&diff(&a, &b));
        got.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(
            got,
            [
                ("/artifact/digest".into(), Kind::Changed, NextJobs),
                ("/debug/a~1b~0c".into(), Kind::Removed, NextJobs),
                ("/deployment/jobs".into(), Kind::Changed, RunningJobs(Lifecycle)),
                ("/deployment/lifecycle/update/timing".into(), Kind::Changed, RunningJobs(Lifecycle)),
                ("/deployment/placement/minimums".into(), Kind::Changed, RunningJobs(Placement)),
                ("/metadata/description".into(), Kind::Changed, Nothing),
            ]
        );
        // V4 counts its jobs as `parallelism`: it reaches the running jobs as V5 `jobs` does.
        let v4 = diff(&json!({"deployment": {"parallelism": 1}}), &json!({"deployment": {"parallelism": 3}}));
        assert_eq!(summary(&v4), [("/deployment/parallelism".into(), Kind::Changed, RunningJobs(Lifecycle))]);
        assert!(diff(&a, &a).is_empty(), "a document equals itself");
    }

    #[test]
    fn named_entries_are_matched_by_name_and_others_by_place() {
        let a = json!({"configuration": {"variables": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        "secrets": [], "list": [1, 2, 3]}});
        let b = json!({"configuration": {"variables": [{"name": "B", "value": "2"}, {"name": "C", "value": "3"}],
                        "secrets": [{"secretId": "K"}], "list": [1, 5]}});
        let got: Vec<(String, Kind, Option<String>)> =
            diff(&a, &b).into_iter().map(|c| (c.pointer, c.kind, c.key)).collect();
        assert_eq!(
            got,
            [
                ("/configuration/list/1".into(), Kind::Changed, None),
                ("/configuration/list/2".into(), Kind::Removed, None),
                ("/configuration/secrets/0".into(), Kind::Added, Some("K".into())),
                ("/configuration/variables/1".into(), Kind::Added, Some("C".into())),
                ("/configuration/variables/0".into(), Kind::Removed, Some("A".into())),
            ]
        );
    }
}
