//! A publication's request body (INTERPRETATION.md section 5): read strictly, the fence
//! read exactly, and the pause rules.

use std::borrow::Cow;

use crate::service::operations::refusal::{BodyProblem, PauseProblem, Rejection};
use crate::tree::{Number, Value};

/// A pause reason's bound, in characters after trimming.
pub(crate) const MAX_REASON_CHARS: usize = 500;

/// The publication fields of the body.
#[derive(Debug)]
pub(crate) struct PublishRequest<'a> {
    /// The manifest's bytes: the object's own text, or the string's content.
    pub(crate) manifest: Cow<'a, str>,
    pub(crate) dry_run: bool,
    /// The trimmed reason when the publication pauses the application.
    pub(crate) pause_reason: Option<String>,
    pub(crate) expected_active_pointer_version: Option<u64>,
    /// The authored digest the caller previewed, when it confirms a preview (the console):
    /// another manifest is refused ([`Rejection::ManifestChanged`]). The API's body has none.
    pub(crate) reviewed_digest: Option<String>,
}

/// The publication fields, as a refusal of another field lists them.
const FIELDS: &str = "manifest, dryRun, postPublishStatus, reason, expectedActivePointerVersion";

/// Reads the body strictly: JSON with no duplicate key, only the listed fields, each of its type.
pub(crate) fn parse_request(body: &[u8]) -> Result<PublishRequest<'_>, Rejection> {
    let bad = Rejection::InvalidRequestBody;
    let bad_pause = Rejection::InvalidPublicationPause;
    let text = std::str::from_utf8(body).map_err(|_| bad(BodyProblem::NotUtf8))?;
    let (root, problems) = crate::parse::json(text);
    if let Some(p) = problems.first() {
        return Err(bad(BodyProblem::NotJsonAt { message: p.message.clone(), pointer: p.pointer.clone() }));
    }
    let Some(Value::Object(members)) = root.map(|r| r.value) else {
        return Err(bad(BodyProblem::NotObject));
    };
    let (mut manifest, mut dry_run, mut status, mut reason, mut expected) = (None, false, None, None, None);
    for m in members {
        match m.key.as_ref() {
            "manifest" => {
                manifest = Some(match m.value.value {
                    Value::Object(_) => Cow::Borrowed(&text[m.value.span.start as usize..m.value.span.end as usize]),
                    Value::String(s) => Cow::Owned(s.into_owned()),
                    _ => return Err(bad(BodyProblem::ManifestType)),
                })
            }
            "dryRun" => match m.value.value {
                Value::Bool(b) => dry_run = b,
                _ => return Err(bad(BodyProblem::DryRunType)),
            },
            "postPublishStatus" => match m.value.value {
                Value::String(s) => status = Some(s.into_owned()),
                _ => return Err(bad_pause(PauseProblem::StatusType)),
            },
            "reason" => match m.value.value {
                Value::String(s) => reason = Some(s.into_owned()),
                _ => return Err(bad_pause(PauseProblem::ReasonType)),
            },
            "expectedActivePointerVersion" => expected = Some(pointer_version(&m.value.value)?),
            other => return Err(bad(BodyProblem::UnknownField { field: other.to_owned(), fields: FIELDS })),
        }
    }
    let Some(manifest) = manifest else {
        return Err(bad(BodyProblem::ManifestMissing));
    };
    Ok(PublishRequest {
        manifest,
        dry_run,
        pause_reason: pause(status.as_deref(), reason.as_deref())?,
        expected_active_pointer_version: expected,
        reviewed_digest: None,
    })
}

/// `expectedActivePointerVersion`: an integer from 0 to 2^64 - 1, the active version the caller
/// reviewed. Anything else (2^64 or more, negative, fractional, a string) is refused naming
/// the field: a fence that cannot be read must never be dropped and the publish let through.
fn pointer_version(value: &Value<'_>) -> Result<u64, Rejection> {
    let shown = match value {
        Value::Number(Number::Integer(n)) => match u64::try_from(*n) {
            Ok(version) => return Ok(version),
            Err(_) => n.to_string(),
        },
        Value::Number(Number::Float(f)) => format!("{f:?}"),
        other => other.kind().to_owned(),
    };
    Err(Rejection::InvalidRequestBody(BodyProblem::PointerVersion { found: shown }))
}

/// The pause pair: both or neither; only `paused`; a reason of 1-500 characters once trimmed.
fn pause(status: Option<&str>, reason: Option<&str>) -> Result<Option<String>, Rejection> {
    let problem = match (status, reason) {
        (None, None) => return Ok(None),
        (Some("active"), _) => PauseProblem::Active,
        (Some(s), _) if s != "paused" => PauseProblem::Status(s.to_owned()),
        (Some(_), None) => PauseProblem::ReasonMissing,
        (None, Some(_)) => PauseProblem::ReasonAlone,
        (Some(_), Some(r)) => {
            let trimmed = r.trim();
            let n = trimmed.chars().count();
            if n == 0 {
                PauseProblem::ReasonBlank
            } else if n > MAX_REASON_CHARS {
                PauseProblem::ReasonTooLong(n)
            } else if let Some(at) = trimmed.chars().position(char::is_control) {
                PauseProblem::ReasonControl(at + 1)
            } else {
                return Ok(Some(trimmed.to_owned()));
            }
        }
    };
    Err(Rejection::InvalidPublicationPause(problem))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(body: &str) -> &'static str {
        parse_request(body.as_bytes()).map(|_| "ok").unwrap_or_else(|e| e.code())
    }

    #[test]
    fn the_pause_pair_follows_the_rules() {
        let m = r#""manifest": {}"#;
        assert_eq!(code(&format!("{{{m}}}")), "ok");
        assert_eq!(code(&format!(r#"{{{m}, "postPublishStatus": "paused", "reason": " why "}}"#)), "ok");
        for bad in [
            r#""postPublishStatus": "active", "reason": "x""#,
            r#""postPublishStatus": "paused""#,
            r#""reason": "x""#,
            r#""postPublishStatus": "paused", "reason": "   ""#,
            r#""postPublishStatus": "stopped", "reason": "x""#,
            r#""postPublishStatus": true, "reason": "x""#,
            r#""postPublishStatus": "paused", "reason": "a\u0000b""#,
            r#""postPublishStatus": "paused", "reason": "two\nlines""#,
        ] {
            assert_eq!(code(&format!("{{{m}, {bad}}}")), "invalid_publication_pause", "{bad}");
        }
        let long = "x".repeat(501);
        assert_eq!(
            code(&format!(r#"{{{m}, "postPublishStatus": "paused", "reason": "{long}"}}"#)),
            "invalid_publication_pause"
        );
        let padded = format!("  {}  ", "é".repeat(500));
        assert_eq!(code(&format!(r#"{{{m}, "postPublishStatus": "paused", "reason": "{padded}"}}"#)), "ok");
    }

    #[test]
    fn the_body_is_strict() {
        assert_eq!(code(r#"{"manifest": {}, "extra": 1}"#), "invalid_request_body");
        assert_eq!(code(r#"{"manifest": {}, "dryRun": true, "dryRun": false}"#), "invalid_request_body");
        assert_eq!(code(r#"{"manifest": 5}"#), "invalid_request_body");
        assert_eq!(code(r#"{"dryRun": true}"#), "invalid_request_body");
        assert_eq!(code("[]"), "invalid_request_body");
        let e = parse_request(br#"{"manifest": {}, "x": 1}"#).map(|_| ()).expect_err("an unknown field");
        assert_eq!(
            e.to_string(),
            "unknown field \"x\" in the request body (at /x); the fields are manifest, dryRun, postPublishStatus, \
             reason, expectedActivePointerVersion"
        );
    }

    #[test]
    fn pointer_version_of_two_to_the_64_is_refused_not_ignored() {
        let body = |v: &str| format!(r#"{{"manifest": {{}}, "expectedActivePointerVersion": {v}}}"#);
        for bad in [
            "18446744073709551616",                    // 2^64
            "340282366920938463463374607431768211456", // 2^128, past i128: read as a float
            "99999999999999999999999999999999999999999999",
            "-1",
            "-18446744073709551616",
            "1.0",
            "0.5",
            "1e3",
            "\"1\"",
            "null",
            "true",
            "[1]",
        ] {
            let e = parse_request(body(bad).as_bytes()).expect_err(bad);
            assert_eq!((e.status(), e.code()), (400, "invalid_request_body"), "{bad}");
            assert!(e.to_string().contains("/expectedActivePointerVersion"), "{bad}: {e}");
        }
        for (good, version) in [("0", 0), ("1", 1), ("18446744073709551615", u64::MAX), ("-0", 0)] {
            let text = body(good);
            let r = parse_request(text.as_bytes()).expect(good);
            assert_eq!(r.expected_active_pointer_version, Some(version), "{good}");
        }
        let r = parse_request(br#"{"manifest": {}}"#).expect("no fence");
        assert_eq!(r.expected_active_pointer_version, None);
    }

    #[test]
    fn an_object_manifest_is_its_own_text_and_a_string_is_its_content() {
        let r = parse_request(br#"{"manifest": {"a": [1, 2]}, "dryRun": true}"#).expect("ok");
        assert_eq!(r.manifest, r#"{"a": [1, 2]}"#);
        assert!(r.dry_run);
        let r = parse_request(br#"{"manifest": "a: 1\nb: 2\n"}"#).expect("ok");
        assert_eq!(r.manifest, "a: 1\nb: 2\n");
    }
}
