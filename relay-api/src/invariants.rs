//! Properties of the relay API's request bodies that must hold for any bytes a client can
//! send. The `relay_api_bodies` fuzz target in `fuzz/` calls [`api_bodies`], and a normal test
//! replays the committed fuzz corpus through it, so a crash found once stays fixed.
//!
//! The bundle's path rule (a file path is relative and stays inside the app directory) is
//! private to the coordinator's HTTP layer, so it is fuzzed only through what is public: the
//! project's own paths (`app.dir`, `app.entrypoint`) in [`crate::project::read`].

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::coordinator::api::{DeployRequest, FundRequest, HostnameRequest, PinRequest, QuoteRequest};
use crate::project;
use manifest_core::{Code, Diagnostic, MAX_DIAGNOSTICS};

/// `bytes` read as each request body and as a project file: never a panic; a body read
/// writes back to JSON that reads to the same value; a project's problems are bounded
/// (at most [`MAX_DIAGNOSTICS`], then one `diagnostics_truncated`), point into the document,
/// and a valid project derives a valid manifest or says why not.
pub fn api_bodies(bytes: &[u8]) {
    round_trips::<QuoteRequest>(bytes);
    round_trips::<FundRequest>(bytes);
    round_trips::<HostnameRequest>(bytes);
    round_trips::<PinRequest>(bytes);
    if round_trips::<DeployRequest>(bytes).is_some() {
        // What the coordinator does with a deploy body's project: reads its text as sent.
        if let Ok(ProjectText { project }) = serde_json::from_slice::<ProjectText>(bytes) {
            project_file(project.get());
        }
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        project_file(text);
    }
}

/// A deploy body's `project`, as the text it was sent as.
#[derive(serde::Deserialize)]
struct ProjectText {
    project: Box<serde_json::value::RawValue>,
}

/// Reads `bytes` as `T`; if it reads, its JSON reads back to the same JSON.
fn round_trips<T: DeserializeOwned + Serialize>(bytes: &[u8]) -> Option<T> {
    let body: T = serde_json::from_slice(bytes).ok()?;
    let json = serde_json::to_value(&body).expect("a body serializes");
    let again: T = serde_json::from_value(json.clone()).expect("a body's own JSON reads back");
    assert_eq!(serde_json::to_value(&again).expect("serializes"), json, "round trip");
    Some(body)
}

fn project_file(text: &str) {
    match project::read(text) {
        Ok(project) => {
            let _ = project.unsupported();
            let _ = project.digest();
            if let Err(project::ManifestV5Error::Derived(d)) = project.manifest_v5(None) {
                panic!("a valid project derived an invalid manifest: {d:?}");
            }
        }
        Err(errors) => bounded(&errors.diagnostics, text),
    }
}

fn bounded(diagnostics: &[Diagnostic], text: &str) {
    assert!(!diagnostics.is_empty(), "an invalid project says why");
    let truncated = diagnostics.iter().position(|d| d.code == Code::DiagnosticsTruncated);
    assert!(truncated.is_none_or(|at| at == MAX_DIAGNOSTICS && diagnostics.len() == MAX_DIAGNOSTICS + 1));
    assert!(diagnostics.len() <= MAX_DIAGNOSTICS + 1);
    for d in diagnostics {
        assert!(d.pointer.is_empty() || d.pointer.starts_with('/'), "pointer {:?}", d.pointer);
        assert_ne!(d.code, Code::InternalError, "{d:?} on {text:?}");
        if let Some(span) = d.span {
            assert!(span.start as usize <= text.len(), "{d:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_bodies_hold_the_property() {
        let project = r#"{"version": 1, "name": "shop", "runtime": "node", "app": {"entrypoint": "server.js"}, "spend": {"ceilingMicros": 5000000}}"#;
        for body in [
            format!(r#"{{"project": {project}, "bundle": {{"server.js": "aGk="}}, "secrets": {{"K": "v"}}}}"#),
            r#"{"periods": 3}"#.to_owned(),
            r#"{"quoteId": "qt_1"}"#.to_owned(),
            r#"{"hostname": "shop.example.com"}"#.to_owned(),
            format!(r#"{{"digest": "sha256:{}"}}"#, "a".repeat(64)),
            project.to_owned(),
            "{".to_owned(),
        ] {
            api_bodies(body.as_bytes());
        }
    }
}
