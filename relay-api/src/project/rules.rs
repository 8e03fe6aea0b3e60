//! Cross-field rules of the project file (layer 2), over the checked, defaulted tree: the
//! environment names the job will see. Names that are not environment names at all are
//! layer 1's to report, so they are skipped here: one mistake gives one diagnostic.

use manifest_core::formats::ENV_NAME_V5;
use manifest_core::{Code, Diagnostic, Layer, Node, Value};

/// The environment name the platform sets: the port the app must listen on.
pub const PORT: &str = "PORT";
/// The prefix of names the platform and its agent keep for themselves.
pub const RESERVED_PREFIX: &str = "SVC_";

/// Runs every rule; `out` already holds layer 1's diagnostics.
pub(crate) fn check(root: &Node<'_>, out: &mut Vec<Diagnostic>) {
    let env = names(root, "env");
    let secrets = names(root, "secrets");
    for (name, pointer) in env.iter().chain(&secrets) {
        if let Some(message) = reserved(name) {
            out.push(Diagnostic::error(Layer::Semantic, Code::ReservedEnvironmentName, pointer, message).on_key());
        }
    }
    for (name, pointer) in &secrets {
        if env.iter().any(|(n, _)| n == name) {
            let message = format!(
                "environment name \"{name}\" is already claimed at /app/env/{name}; each name may be claimed once (a secret or a plain variable, not both)"
            );
            out.push(Diagnostic::error(Layer::Semantic, Code::DuplicateEnvironmentName, pointer, message).on_key());
        }
    }
}

/// Why an environment name cannot be used, and what to do, if it cannot.
fn reserved(name: &str) -> Option<String> {
    if name == PORT {
        Some(format!(
            "\"{PORT}\" is set by the platform (the port the app must listen on); remove it and set `app.port` instead"
        ))
    } else if name.starts_with(RESERVED_PREFIX) {
        Some(format!(
            "\"{name}\" is in the `{RESERVED_PREFIX}` namespace, which the platform and its agent keep for themselves; rename it"
        ))
    } else {
        None
    }
}

/// The keys of `/app/<map>` that are environment names, with their pointers (such a name
/// needs no escaping in a pointer).
fn names(root: &Node<'_>, map: &str) -> Vec<(String, String)> {
    let Some(Value::Object(members)) = root.get("app").and_then(|app| app.get(map)).map(|n| &n.value) else {
        return Vec::new();
    };
    members
        .iter()
        .filter(|m| (ENV_NAME_V5.check)(&m.key))
        .map(|m| (m.key.to_string(), format!("/app/{map}/{}", m.key)))
        .collect()
}
