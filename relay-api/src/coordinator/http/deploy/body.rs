//! A deploy request as the coordinator reads it: the fields of
//! [`DeployRequest`](crate::coordinator::api::DeployRequest) (what the CLI sends), the project
//! file's text kept as it was sent (read once, by the deploy), the app's files decoded as the
//! body is parsed ([`Bundle`]).

use std::collections::BTreeMap;

use serde_json::value::RawValue;

use crate::coordinator::operations::{Bundle, Deploy};

/// A deploy's body.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct DeployBody {
    /// The project file's content, as sent.
    project: Box<RawValue>,
    /// The V5 manifest's text, when the project names one.
    #[serde(default)]
    manifest: Option<String>,
    /// The app's files, decoded.
    bundle: Bundle,
    /// Secret values by the app's environment name.
    #[serde(default)]
    secrets: BTreeMap<String, String>,
}

impl From<DeployBody> for Deploy {
    fn from(body: DeployBody) -> Deploy {
        let project: Box<str> = body.project.into();
        Deploy { project: project.into(), manifest: body.manifest, bundle: body.bundle, secrets: body.secrets }
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;
    use crate::coordinator::api::DeployRequest;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    fn read(body: &serde_json::Value) -> Result<DeployBody, serde_path_to_error::Error<serde_json::Error>> {
        let text = serde_json::to_vec(body).expect("json");
        let mut de = serde_json::Deserializer::from_slice(&text);
        serde_path_to_error::deserialize(&mut de)
    }

    #[test]
    fn it_reads_what_the_cli_sends_with_the_project_text_as_sent() {
        let sent = DeployRequest {
            project: serde_json::json!({"name": "web", "app": {"entrypoint": "a.js"}}),
            manifest: Some("schemaVersion: 5\n".to_owned()),
            bundle: BTreeMap::from([("b/x.js".to_owned(), b64(b"x")), ("a.js".to_owned(), b64(b"hello"))]),
            secrets: BTreeMap::from([("KEY".to_owned(), "value".to_owned())]),
        };
        let read = Deploy::from(read(&serde_json::to_value(&sent).expect("json")).expect("read"));
        // The text the store keeps is the one the CLI sent, byte for byte.
        assert_eq!(read.project, serde_json::to_string(&sent.project).expect("json"));
        assert_eq!((read.manifest, read.secrets), (sent.manifest, sent.secrets));
        let files = read.bundle.files().expect("files");
        assert_eq!(files, [("a.js".to_owned(), b"hello".to_vec()), ("b/x.js".to_owned(), b"x".to_vec())]);
    }

    /// The project is read once, from the text as sent: its spacing and order are kept (a
    /// text made again from a parsed value would have neither), so the store keeps what the
    /// customer sent and the project's diagnostics point into it.
    #[test]
    fn the_project_text_is_kept_as_sent_not_made_again() {
        let project = "{ \"version\": 1,\n  \"name\": \"web\" }";
        let body = format!("{{\"project\": {project}, \"bundle\": {{}}}}");
        let mut de = serde_json::Deserializer::from_slice(body.as_bytes());
        let read: DeployBody = serde_path_to_error::deserialize(&mut de).expect("read");
        assert_eq!(Deploy::from(read).project, project);
    }

    #[test]
    fn refusals_name_the_field_as_a_body_read_whole_did() {
        let project = serde_json::json!({});
        // Where and why, as the API's refusal says them.
        let at = |body: serde_json::Value| {
            let e = read(&body).expect_err("refused");
            format!("at {}: {}", e.path(), e.inner())
        };
        let file = at(serde_json::json!({"project": project, "bundle": {"a.js": 5}}));
        assert!(file.starts_with("at bundle.a.js: invalid type: integer `5`, expected a string at line 1"), "{file}");
        let bundle = at(serde_json::json!({"project": project, "bundle": []}));
        assert!(bundle.starts_with("at bundle: invalid type: sequence, expected a map at line 1"), "{bundle}");
        assert!(
            at(serde_json::json!({"project": project, "bundle": {}, "extra": 1})).contains("unknown field `extra`")
        );
        assert!(at(serde_json::json!({"project": project})).contains("missing field `bundle`"));
        assert!(at(serde_json::json!({"bundle": {}})).contains("missing field `project`"));
    }
}
