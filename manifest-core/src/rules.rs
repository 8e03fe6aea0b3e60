//! Cross-field rules shared by both manifest versions.

use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::sections::Sections;

/// Each environment name is claimed once across `/configuration/variables/*/name` and the
/// `name` of secret destinations of kind `env_kind` (`env` in V4, `environment` in V5). Each
/// claim is read on its own, so an unrelated error elsewhere hides no duplicate.
pub(crate) fn environment_names(sections: &Sections<'_>, env_kind: &str, out: &mut Vec<Diagnostic>) {
    let mut claims: Vec<(String, String)> = Vec::new();
    for i in 0..sections.len("/configuration/variables") {
        let pointer = format!("/configuration/variables/{i}/name");
        if let Some(name) = sections.read::<String>(&pointer, out) {
            claims.push((name, pointer));
        }
    }
    for i in 0..sections.len("/configuration/secrets") {
        if sections.tag(&format!("/configuration/secrets/{i}/destination/kind")) != Some(env_kind) {
            continue;
        }
        let pointer = format!("/configuration/secrets/{i}/destination/name");
        if let Some(name) = sections.read::<String>(&pointer, out) {
            claims.push((name, pointer));
        }
    }
    environment_names_once(claims.iter().map(|(n, p)| (n.as_str(), p.clone())), out);
}

/// An environment name may be claimed only once across variables and secret destinations.
/// `claims` are (name, pointer) in document order; the second claim is reported.
fn environment_names_once<'a>(claims: impl Iterator<Item = (&'a str, String)>, out: &mut Vec<Diagnostic>) {
    let mut seen: Vec<(&str, String)> = Vec::new();
    for (name, pointer) in claims {
        if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
            let message =
                format!("environment name \"{name}\" is already claimed at {first}; each name may be claimed once");
            out.push(Diagnostic::error(Layer::Semantic, Code::DuplicateEnvironmentName, pointer, message));
        } else {
            seen.push((name, pointer));
        }
    }
}
