//! Cross-field rules shared by both manifest versions.

use crate::diagnostic::{Code, Diagnostic, Layer};

/// An environment name may be claimed only once across variables and secret destinations.
/// `claims` are (name, pointer) in document order; the second claim is reported.
pub(crate) fn environment_names_once<'a>(claims: impl Iterator<Item = (&'a str, String)>, out: &mut Vec<Diagnostic>) {
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
