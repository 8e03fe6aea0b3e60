//! Cross-field rules shared by both manifest versions.

use std::borrow::Cow;

use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::notes::Note;
use crate::sections::Sections;
use crate::tree::{Node, Value};

/// Each environment name is claimed once across `/configuration/variables/*/name` and the
/// `name` of secret destinations of kind `env_kind` (`env` in V4, `environment` in V5). Each
/// claim is read on its own, so an unrelated error elsewhere hides no duplicate. The arrays are
/// looked up once and a claim's pointer is spelled out only for a message.
pub(crate) fn environment_names(sections: &Sections<'_>, env_kind: &str, out: &mut Vec<Diagnostic>) {
    let mut claims: Vec<(Cow<'_, str>, Claim)> = Vec::new();
    let variables = sections.under(Note::Variables);
    for (i, item) in variables.items().iter().enumerate() {
        let claim = Claim::Variable(i);
        if let Some(name) = variables.text_node(item.get("name"), || claim.pointer(), out) {
            claims.push((name, claim));
        }
    }
    let secrets = sections.under(Note::Secrets);
    for (i, item) in secrets.items().iter().enumerate() {
        let Some(destination) = item.get("destination") else { continue };
        match destination.get("kind") {
            Some(Node { value: Value::String(kind), .. }) if kind == env_kind => {}
            _ => continue,
        }
        let claim = Claim::Secret(i);
        if let Some(name) = secrets.text_node(destination.get("name"), || claim.pointer(), out) {
            claims.push((name, claim));
        }
    }
    environment_names_once(claims.iter().map(|(n, c)| (n.as_ref(), *c)), out);
}

/// Where an environment name is claimed.
#[derive(Debug, Clone, Copy)]
enum Claim {
    /// `/configuration/variables/{i}/name`
    Variable(usize),
    /// `/configuration/secrets/{i}/destination/name`
    Secret(usize),
}

impl Claim {
    fn pointer(self) -> String {
        match self {
            Claim::Variable(i) => format!("/configuration/variables/{i}/name"),
            Claim::Secret(i) => format!("/configuration/secrets/{i}/destination/name"),
        }
    }
}

/// An environment name may be claimed only once across variables and secret destinations.
/// `claims` are (name, where) in document order; the second claim is reported.
fn environment_names_once<'a>(claims: impl Iterator<Item = (&'a str, Claim)>, out: &mut Vec<Diagnostic>) {
    let mut seen: Vec<(&str, Claim)> = Vec::new();
    for (name, claim) in claims {
        if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
            let first = first.pointer();
            let message =
                format!("environment name \"{name}\" is already claimed at {first}; each name may be claimed once");
            out.push(Diagnostic::error(Layer::Semantic, Code::DuplicateEnvironmentName, claim.pointer(), message));
        } else {
            seen.push((name, claim));
        }
    }
}
