//! The one error envelope of every JSON answer: `{"error": {"code", "message", ...}}`. The
//! publication service, the relay API and the `svc` CLI (`--format json`) all write it
//! through [`ErrorBody`], so a client parses failures one way whoever produced them (and so do
//! `gateway-prep` and the agent, which serve no HTTP framework). Known
//! context (`requestId`, `hints`, `diagnostics`, `pointer`, `hint`, `httpStatus`) goes in
//! extra fields beside `code` and `message`.
//!
//! A crate of its own below both services (and the relay's wire types, which re-export it as
//! `relay_wire::envelope`), so neither serving side depends on the other's folder for it.

#![forbid(unsafe_code)]

use serde_json::{Map, Value};

/// `{"error": {"code", "message", ...extra}}`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ErrorBody {
    /// The error itself.
    pub error: ErrorDetail,
}

/// The inside of [`ErrorBody`]: a stable snake_case `code`, a sentence for people, and any
/// extra fields (camelCase) that are known.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ErrorDetail {
    /// Stable, snake_case: what programs match on.
    pub code: String,
    /// For people.
    pub message: String,
    /// Anything else known: `requestId`, `hints`, `diagnostics`, `hint`, ...
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ErrorBody {
    /// An envelope with only `code` and `message`.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> ErrorBody {
        ErrorBody { error: ErrorDetail { code: code.into(), message: message.into(), extra: Map::new() } }
    }

    /// Adds an extra field (a `null` value is left out: absent means unknown).
    #[must_use]
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> ErrorBody {
        let value = value.into();
        if !value.is_null() {
            self.error.extra.insert(key.to_owned(), value);
        }
        self
    }

    /// The envelope as a JSON value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Reads an envelope from a body; `None` if the body is not one.
    pub fn parse(body: &[u8]) -> Option<ErrorBody> {
        serde_json::from_slice(body).ok()
    }
}

/// The one code for a missing or invalid bearer token (HTTP 401), on every API.
pub const UNAUTHENTICATED: &str = "unauthenticated";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_fields_sit_beside_code_and_message_and_round_trip() {
        let body = ErrorBody::new("not_found", "no such app").with("requestId", "req_1").with("hint", Value::Null);
        let value = body.to_value();
        assert_eq!(value["error"]["code"], "not_found");
        assert_eq!(value["error"]["requestId"], "req_1");
        assert!(value["error"].get("hint").is_none(), "a null extra is left out: {value}");
        let bytes = serde_json::to_vec(&body).expect("json");
        assert_eq!(ErrorBody::parse(&bytes), Some(body));
        assert_eq!(ErrorBody::parse(b"{\"status\": \"ok\"}"), None);
    }
}
