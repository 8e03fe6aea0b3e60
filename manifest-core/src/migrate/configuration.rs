//! V4 variables and secrets as V5 ones.

use serde_json::{Map, Value, json};

use super::{Migrator, NoteKind};

/// V5 environment names: `[A-Z_][A-Z0-9_]{0,127}`.
fn env_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name.bytes().next().is_some_and(|b| b.is_ascii_uppercase() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

pub(super) fn configuration(m: &mut Migrator<'_>, out: &mut Map<String, Value>) {
    let mut variables = Vec::new();
    let listed = m.get("/configuration/variables").and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, v) in listed.iter().enumerate() {
        let at = format!("/configuration/variables/{i}");
        let name = v["name"].as_str().unwrap_or_default();
        if !env_name(name) {
            // The note names the variable, not its name alone: `--drop` leaves it out whole.
            m.droppable(
                &at,
                format!("its name {name:?} is not a V5 environment name (`[A-Z_][A-Z0-9_]{{0,127}}`)"),
                "V5 cannot set it: rename it in the V5 document, and read the new name in the job",
            );
            continue;
        }
        let managed = v["managed"].as_bool().unwrap_or(false);
        let required = v["required"].as_bool().unwrap_or(false);
        let variable = match (managed, v.get("default")) {
            (false, Some(default)) if !required => {
                m.note(
                    &at,
                    NoteKind::Changed,
                    "V5 variables are literal (a fixed value) or managed; an optional V4 variable with a default is \
                     the default",
                    format!("kept as the literal {name}={default}: make it `source: managed` to set it per deployment"),
                );
                json!({"source": "literal", "name": name, "value": default})
            }
            _ => {
                let mut variable = json!({"source": "managed", "name": name, "required": required});
                if let Some(default) = v.get("default") {
                    variable["default"] = default.clone();
                }
                if !managed {
                    m.note(
                        &at,
                        NoteKind::Changed,
                        "a V4 variable without a fixed value is a managed variable in V5",
                        "set its value among the application's managed variables",
                    );
                } else {
                    m.keep(&at);
                }
                variable
            }
        };
        variables.push(variable);
    }
    let mut secrets = Vec::new();
    let listed = m.get("/configuration/secrets").and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, s) in listed.iter().enumerate() {
        let at = format!("/configuration/secrets/{i}");
        let destination = match (s["destination"]["kind"].as_str(), &s["destination"]) {
            (Some("env"), d) if d["name"].as_str().is_some_and(env_name) => {
                json!({"kind": "environment", "name": d["name"]})
            }
            (Some("file"), d) if d["path"].as_str().is_some_and(|p| p.starts_with('/')) => {
                json!({"kind": "file", "path": d["path"]})
            }
            _ => {
                m.droppable(
                    &at,
                    "its destination is not one V5 delivers to: an environment name (`[A-Z_][A-Z0-9_]{0,127}`) or \
                     an absolute path",
                    "V5 cannot deliver it there: give it another destination in the V5 document, and read it there in \
                     the job",
                );
                continue;
            }
        };
        let mut secret = json!({"secretId": s["secretId"], "destination": destination});
        if let Some(required) = s.get("required") {
            secret["required"] = required.clone();
        }
        m.keep(&format!("{at}/secretId"));
        m.keep(&format!("{at}/required"));
        m.keep(&format!("{at}/destination"));
        m.note_if(
            &format!("{at}/bundleId"),
            NoteKind::Dropped,
            "V5 does not group secrets in bundles",
            "nothing: each secret is delivered on its own",
        );
        secrets.push(secret);
    }
    let mut configuration = Map::new();
    if !variables.is_empty() {
        configuration.insert("variables".into(), Value::Array(variables));
    }
    if !secrets.is_empty() {
        configuration.insert("secrets".into(), Value::Array(secrets));
    }
    if !configuration.is_empty() {
        out.insert("configuration".into(), Value::Object(configuration));
    }
}
