//! Admission of gateway operators. The service issues an operator a single-use admission
//! token (`svc relay admin admission-token`, stored hashed with an expiry); the operator's
//! host registers its Ed25519 public key and gateway hostname with it
//! (`POST /api/operators/register`, what `gateway-prep init` sends) and proves it holds the
//! key by signing [`registration_message`]. Only a known, unexpired, unused token admits; the
//! operator is recorded and [`RelayStore::admitted_gateways`] lists them for a catalog.
//!
//! `GET /api/relay/health` lives here too: the unauthenticated answer operators' preflight
//! checks and load balancers use to prove the coordinator is reachable and its store answers.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;

use super::Engine;
use super::store::{RelayStore, StoreError, now_ms, random_hex};
use relay_wire::wire;

pub use relay_wire::admission::{Operator, REGISTRATION_CONTEXT, RegisterRequest, registration_message};
use relay_wire::feed::Presence;

/// A freshly issued admission token: print the plaintext once; the store keeps its hash.
#[derive(Debug, Clone)]
pub struct IssuedAdmission {
    /// `adm_` and 64 hex digits.
    pub plaintext: String,
    /// `admt_` and 16 hex digits (safe to log).
    pub id: String,
    /// The operator it admits.
    pub operator: String,
    /// Unix ms after which it is refused.
    pub expires_at: i64,
}

/// Why a registration was refused. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// The request is malformed (bad base64, key length, hostname, operator name).
    #[error("{message}")]
    Invalid {
        /// `invalid_request`, `invalid_hostname`, `invalid_public_key`, `invalid_operator_name`.
        code: &'static str,
        /// What is wrong.
        message: String,
    },
    /// No such token.
    #[error(
        "the admission token is not known to this coordinator: check it was copied whole, or ask the service for a new admission token"
    )]
    Unknown,
    /// The token's time ran out.
    #[error(
        "the admission token expired {} ago; ask the service for a new admission token",
        manifest_core::plural(minutes.unsigned_abs(), "minute")
    )]
    Expired {
        /// How long ago.
        minutes: i64,
    },
    /// The token admitted someone already.
    #[error(
        "the admission token was already used to admit gateway {hostname}: tokens are single-use; if this host \
         registered then, keep its registration record; otherwise ask the service for a new admission token"
    )]
    Used {
        /// The hostname it admitted.
        hostname: String,
    },
    /// The token admits another operator.
    #[error("the admission token admits operator \"{admits}\", not \"{asked}\"; use the token issued to \"{asked}\"")]
    OperatorMismatch {
        /// The token's operator.
        admits: String,
        /// The one the request named.
        asked: String,
    },
    /// The signature does not verify with the key sent.
    #[error(
        "the registration signature does not verify with the public key sent: sign the registration message with the key being registered"
    )]
    BadSignature,
    /// Another operator's gateway has the hostname, or the key is registered already.
    #[error("{message}")]
    Taken {
        /// `gateway_hostname_taken`, `operator_key_taken`.
        code: &'static str,
        /// What clashes.
        message: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AdmissionError {
    /// The stable code of the error envelope.
    pub fn code(&self) -> &'static str {
        match self {
            AdmissionError::Invalid { code, .. } | AdmissionError::Taken { code, .. } => code,
            AdmissionError::Unknown => "admission_token_unknown",
            AdmissionError::Expired { .. } => "admission_token_expired",
            AdmissionError::Used { .. } => "admission_token_used",
            AdmissionError::OperatorMismatch { .. } => "admission_operator_mismatch",
            AdmissionError::BadSignature => "registration_signature_invalid",
            AdmissionError::Store(_) => "store_failed",
        }
    }

    /// The HTTP status it is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            AdmissionError::Invalid { .. } | AdmissionError::BadSignature => StatusCode::BAD_REQUEST,
            AdmissionError::Unknown | AdmissionError::Expired { .. } | AdmissionError::OperatorMismatch { .. } => {
                StatusCode::FORBIDDEN
            }
            AdmissionError::Used { .. } | AdmissionError::Taken { .. } => StatusCode::CONFLICT,
            AdmissionError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl IntoResponse for AdmissionError {
    fn into_response(self) -> Response {
        svc_http::envelope_response(&svc_http::ErrorBody::new(self.code(), self.to_string()), self.status())
    }
}

fn invalid(code: &'static str, message: impl Into<String>) -> AdmissionError {
    AdmissionError::Invalid { code, message: message.into() }
}

/// Checks an operator name: a DNS label (1-63 of `a-z`, `0-9`, `-`, not starting or ending
/// with `-`), as it may name the operator's gateways in a catalog.
pub fn operator_name(name: &str) -> Result<&str, OperatorNameError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok { Ok(name) } else { Err(OperatorNameError(name.to_owned())) }
}

/// An operator name that is not a DNS label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("operator name \"{0}\" is not a DNS label: use 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'")]
pub struct OperatorNameError(pub String);

/// Issues a single-use admission token for `operator`, valid for `ttl`.
pub fn issue_admission_token(
    at: impl Into<crate::coordinator::store::OpenAt>,
    operator: &str,
    ttl: Duration,
) -> Result<IssuedAdmission, StoreError> {
    let operator = operator_name(operator)
        .map_err(|e| StoreError::Refused { code: "invalid_operator_name", message: e.to_string() })?
        .to_owned();
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    let store = RelayStore::open_at(&at.into())?;
    let plaintext = format!("adm_{}", random_hex(32)?);
    let id = format!("admt_{}", random_hex(8)?);
    let expires_at = now_ms().saturating_add(ttl_ms);
    store.add_admission_token(&wire::sha256_hex(plaintext.as_bytes()), &id, &operator, expires_at)?;
    Ok(IssuedAdmission { plaintext, id, operator, expires_at })
}

impl RelayStore {
    /// Records an admission token by its hash.
    pub fn add_admission_token(&self, hash: &str, id: &str, operator: &str, expires_at: i64) -> Result<(), StoreError> {
        self.write(|tx| tx.insert_admission_token(hash, id, operator, now_ms(), expires_at))
    }

    /// Admits the operator of a registration at `now` (Unix ms): the token must be known,
    /// unused and unexpired, the signature must verify. In one transaction the token is
    /// marked used and the operator recorded, so a token admits once even under concurrent
    /// registrations. A refused registration changes nothing. The same operator registering
    /// the same hostname again (a rebuilt host, with a new token) replaces its key.
    pub fn admit(&self, req: &RegisterRequest, now: i64) -> Result<Operator, AdmissionError> {
        let b64 = &base64::engine::general_purpose::STANDARD;
        let key = b64
            .decode(req.public_key.trim())
            .map_err(|e| invalid("invalid_public_key", format!("publicKey is not base64: {e}")))?;
        if key.len() != 32 {
            return Err(invalid(
                "invalid_public_key",
                format!("publicKey must be a raw 32-byte Ed25519 key, not {} bytes", key.len()),
            ));
        }
        let signature =
            b64.decode(req.signature.trim()).map_err(|e| invalid("invalid_request", format!("signature: {e}")))?;
        let hostname = crate::dns::customer_hostname(req.hostname.trim())
            .map_err(|e| invalid("invalid_hostname", format!("the gateway hostname: {e}")))?;
        if let Some(name) = &req.operator {
            operator_name(name).map_err(|e| invalid("invalid_operator_name", e.to_string()))?;
        }
        let hash = wire::sha256_hex(req.admission_token.trim().as_bytes());
        self.write(|tx| {
            let Some(token) = tx.admission_token(&hash)? else { return Err(AdmissionError::Unknown) };
            if let Some(hostname) = token.used_for {
                return Err(AdmissionError::Used { hostname });
            }
            if now > token.expires_at {
                return Err(AdmissionError::Expired { minutes: (now - token.expires_at) / 60_000 });
            }
            let admits = token.operator;
            if let Some(asked) = &req.operator
                && asked != &admits
            {
                return Err(AdmissionError::OperatorMismatch { admits, asked: asked.clone() });
            }
            let message = registration_message(req.admission_token.trim(), &hostname, req.public_key.trim());
            ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &key)
                .verify(&message, &signature)
                .map_err(|_| AdmissionError::BadSignature)?;
            let id = match tx.hostname_holder(&hostname)? {
                Some((_, name)) if name != admits => {
                    return Err(AdmissionError::Taken {
                        code: "gateway_hostname_taken",
                        message: format!(
                            "gateway hostname {hostname} belongs to another operator; register this host under its \
                             own hostname"
                        ),
                    });
                }
                Some((id, _)) => id,
                None => format!("op_{}", random_hex(8)?),
            };
            let operator =
                Operator { id: id.clone(), name: admits, public_key: b64.encode(&key), hostname, admitted_at: now };
            if !tx.put_operator(&operator, &token.id)? {
                return Err(AdmissionError::Taken {
                    code: "operator_key_taken",
                    message: "this public key is registered for another gateway already; generate a new key for \
                              this host"
                        .into(),
                });
            }
            tx.use_admission_token(&hash, &id, now)?;
            Ok(tx.operator(&id)?.ok_or_else(|| StoreError::NotFound(format!("operator {id}")))?)
        })
    }

    /// Every admitted operator's gateway, oldest admission first: what a gateway catalog
    /// offers. Each has the hostname it serves and the Ed25519 public key its host
    /// registered (the key that can prove it is that gateway).
    pub fn admitted_gateways(&self) -> Result<Vec<Operator>, StoreError> {
        self.read(|tx| tx.operators())
    }

    /// Records where operator `operator_id`'s gateway is (its signed feed request said so at
    /// `now`). An address it listens on unspecified (`0.0.0.0`) stands for its hostname.
    pub fn record_presence(&self, operator_id: &str, presence: &Presence, now: i64) -> Result<(), StoreError> {
        self.write(|tx| tx.put_presence(operator_id, presence, now))
    }

    /// Where each admitted gateway last said it was, and when (Unix ms), by operator ID.
    pub fn gateway_presence(&self) -> Result<Vec<(String, Presence, i64)>, StoreError> {
        self.read(|tx| tx.presences())
    }
}

/// `POST /api/operators/register`: no bearer token, the admission token authenticates.
pub(super) async fn register(State(engine): State<Arc<Engine>>, bytes: Bytes) -> Result<Response, AdmissionError> {
    let req: RegisterRequest =
        serde_json::from_slice(&bytes).map_err(|e| invalid("invalid_request", format!("the request body: {e}")))?;
    // Off the runtime: the admission is a store transaction.
    let operator = tokio::task::spawn_blocking(move || engine.store().admit(&req, now_ms()))
        .await
        .map_err(|e| StoreError::Backend(Box::new(e)))??;
    Ok((StatusCode::CREATED, axum::Json(operator)).into_response())
}

/// `GET /api/relay/health`: whether the relay serves and its store answers (200, or 503),
/// whether this coordinator runs the jobs (`engine`: `leading`, or `standing_by` while
/// another coordinator on the database holds the engine lease), and the gateway operator
/// whose hosts carry its deployments (`gatewayOperator`, `svc relay serve
/// --gateway-operator`): a gateway host registered as another operator is assigned no route,
/// which `gateway-prep check` and `init` warn of.
pub(super) async fn health(State(engine): State<Arc<Engine>>) -> axum::response::Response {
    let kind = engine.store().kind();
    let role = if engine.leading() { "leading" } else { "standing_by" };
    let checked = Arc::clone(&engine);
    let extra = vec![
        ("engine", serde_json::Value::from(role)),
        ("gatewayOperator", serde_json::Value::from(engine.config().gateway_operator.as_str())),
    ];
    svc_http::store_health_with(checked.health(), "svc relay", kind, move || engine.store().ping(), extra).await
}

#[cfg(test)]
mod tests {
    use ring::signature::KeyPair as _;

    use super::*;

    fn temp_dir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new().prefix(&format!("svc-relay-admission-{name}-")).tempdir().expect("a scratch directory")
    }

    fn signed(token: &str, hostname: &str) -> RegisterRequest {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).expect("pkcs8");
        let pair = ring::signature::Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("pair");
        let b64 = &base64::engine::general_purpose::STANDARD;
        let public_key = b64.encode(pair.public_key().as_ref());
        let signature = b64.encode(pair.sign(&registration_message(token, hostname, &public_key)).as_ref());
        RegisterRequest {
            admission_token: token.into(),
            operator: None,
            public_key,
            signature,
            hostname: hostname.into(),
        }
    }

    #[test]
    fn a_token_admits_once_before_it_expires() {
        let scratch = temp_dir("once");
        let dir = scratch.path();
        let issued = issue_admission_token(dir, "north", Duration::from_secs(60)).expect("issued");
        assert!(issued.plaintext.starts_with("adm_") && issued.plaintext.len() == 68);
        let store = RelayStore::open(dir).expect("open");

        let unknown = store.admit(&signed("adm_nope", "gw1.example.test"), now_ms()).expect_err("unknown");
        assert_eq!((unknown.code(), unknown.status()), ("admission_token_unknown", StatusCode::FORBIDDEN));

        let mut forged = signed(&issued.plaintext, "gw1.example.test");
        forged.hostname = "gw2.example.test".into();
        assert_eq!(store.admit(&forged, now_ms()).expect_err("forged").code(), "registration_signature_invalid");

        let mut other = signed(&issued.plaintext, "gw1.example.test");
        other.operator = Some("south".into());
        assert_eq!(store.admit(&other, now_ms()).expect_err("mismatch").code(), "admission_operator_mismatch");

        let late = store.admit(&signed(&issued.plaintext, "gw1.example.test"), issued.expires_at + 120_001);
        let late = late.expect_err("expired");
        assert_eq!(late.code(), "admission_token_expired");
        assert!(late.to_string().contains("2 minutes ago") && late.to_string().contains("new admission token"));

        let req = signed(&issued.plaintext, "gw1.example.test");
        let admitted = store.admit(&req, now_ms()).expect("admitted");
        assert_eq!((admitted.name.as_str(), admitted.hostname.as_str()), ("north", "gw1.example.test"));
        assert_eq!(admitted.public_key, req.public_key);

        let again = store.admit(&req, now_ms()).expect_err("reused");
        assert_eq!((again.code(), again.status()), ("admission_token_used", StatusCode::CONFLICT));
        assert!(again.to_string().contains("gw1.example.test"), "{again}");
        assert_eq!(store.admitted_gateways().expect("list"), [admitted]);
    }

    #[test]
    fn hostnames_belong_to_one_operator_and_names_are_labels() {
        let scratch = temp_dir("hostnames");
        let dir = scratch.path();
        let north = issue_admission_token(dir, "north", Duration::from_secs(60)).expect("north");
        let south = issue_admission_token(dir, "south", Duration::from_secs(60)).expect("south");
        let north2 = issue_admission_token(dir, "north", Duration::from_secs(60)).expect("north again");
        let store = RelayStore::open(dir).expect("open");
        let first = store.admit(&signed(&north.plaintext, "gw1.example.test"), now_ms()).expect("north");
        let taken = store.admit(&signed(&south.plaintext, "gw1.example.test"), now_ms()).expect_err("taken");
        assert_eq!(taken.code(), "gateway_hostname_taken");
        // A refused registration leaves the token unused.
        store.admit(&signed(&south.plaintext, "gw2.example.test"), now_ms()).expect("south, elsewhere");
        // The same operator re-registers the hostname with a new key (a rebuilt host).
        let rebuilt = store.admit(&signed(&north2.plaintext, "gw1.example.test"), now_ms()).expect("rebuilt");
        assert_eq!(rebuilt.id, first.id);
        assert_ne!(rebuilt.public_key, first.public_key);
        assert_eq!(store.admitted_gateways().expect("list").len(), 2);

        assert!(operator_name("north-1").is_ok());
        for bad in ["", "North", "-a", "a-", "a.b", &"a".repeat(64)] {
            assert!(operator_name(bad).is_err(), "{bad}");
        }
        let refused = issue_admission_token(dir, "Bad Name", Duration::from_secs(1)).expect_err("bad name");
        assert!(matches!(refused, StoreError::Refused { code: "invalid_operator_name", .. }));
        let bad_host = store.admit(&signed(&north2.plaintext, "localhost"), now_ms()).expect_err("bad hostname");
        assert_eq!(bad_host.code(), "invalid_hostname");
    }
}
