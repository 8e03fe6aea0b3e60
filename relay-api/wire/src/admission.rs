//! Admission of a gateway operator's host, as the host and the coordinator both see it: the
//! registration request `gateway-prep init` sends, the bytes its key signs, and the admitted
//! operator the coordinator answers with and lists in catalogs.

use serde::{Deserialize, Serialize};

/// What a registration signature covers, before the token, hostname and key.
pub const REGISTRATION_CONTEXT: &str = "svc-gateway-register/1";

/// The bytes a registering host signs with its new key: the context, the admission token,
/// the gateway hostname and the public key (base64), one per line. Binding the token proves
/// possession for this admission only; binding the hostname and key keeps a captured
/// signature from registering anything else.
pub fn registration_message(admission_token: &str, hostname: &str, public_key: &str) -> Vec<u8> {
    format!("{REGISTRATION_CONTEXT}\n{admission_token}\n{hostname}\n{public_key}").into_bytes()
}

/// The body of `POST /api/operators/register`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegisterRequest {
    /// The admission token as issued (`adm_...`); it authenticates the request.
    pub admission_token: String,
    /// The operator name; when given it must be the one the token admits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    /// The raw 32-byte Ed25519 public key, base64 (standard alphabet, padded).
    pub public_key: String,
    /// The Ed25519 signature of [`registration_message`], base64.
    pub signature: String,
    /// The gateway's public hostname.
    pub hostname: String,
}

/// An admitted operator's gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Operator {
    /// `op_` and 16 hex digits.
    pub id: String,
    /// The operator's name (from the admission token).
    pub name: String,
    /// The gateway host's Ed25519 public key, base64 of the raw 32 bytes.
    pub public_key: String,
    /// The gateway's public hostname.
    pub hostname: String,
    /// Unix ms.
    pub admitted_at: i64,
}
