//! The error envelope (`{"error": {"code", "message", "diagnostics"?}}`) and the one mapping
//! of every error to it: each [`Rejection`] (declared in `operations::refusal`) to its HTTP
//! status and stable code ([`Rejection::status_and_code`]), the store's errors, and an
//! operation's ([`OperationError`]). The handlers and the console answer with [`ApiError`];
//! a 500 (`ApiError::internal`) keeps its detail for the server's log.

use crate::diagnostic::{Code, Diagnostic, Layer};
use crate::service::operations::OperationError;
use crate::service::store::StoreError;

pub(crate) use crate::service::operations::refusal::{BodyProblem, BundleProblem, Denied, Oversize, Rejection};

/// The code of a large body refused for now, to be sent again after `Retry-After`.
const TOO_MANY_LARGE_BODIES: &str = "too_many_large_bodies";

/// Whether an error of this code asks the client to come back later (`Retry-After`), its body
/// unread.
pub(crate) fn retry_later(code: &str) -> bool {
    code == TOO_MANY_LARGE_BODIES
}

impl Rejection {
    /// The one table of statuses and codes.
    fn status_and_code(&self) -> (u16, &'static str) {
        match self {
            Rejection::Unauthenticated => (401, svc_http::UNAUTHENTICATED),
            Rejection::Forbidden(_) => (403, "forbidden"),
            Rejection::InvalidRequestBody(_) => (400, "invalid_request_body"),
            Rejection::InvalidPublicationPause(_) => (400, "invalid_publication_pause"),
            Rejection::InvalidApplicationId { .. } => (400, "invalid_application_id"),
            Rejection::ApplicationNotFound { .. } => (404, "application_not_found"),
            Rejection::PolicyVersionNotFound { .. } => (404, "policy_version_not_found"),
            Rejection::InvalidQuery(_) => (400, "invalid_query"),
            Rejection::NoSuchRoute => (404, "not_found"),
            Rejection::MethodNotAllowed => (405, "method_not_allowed"),
            Rejection::BodyTooLarge { .. } => (413, "body_too_large"),
            Rejection::TooManyLargeBodies(_) => (503, TOO_MANY_LARGE_BODIES),
            Rejection::ApplicationExists(_) => (409, "application_exists"),
            Rejection::NotPaused { .. } => (409, "not_paused"),
            Rejection::ManifestInvalid(_) => (422, "manifest_invalid"),
            Rejection::ManifestChanged => (409, "manifest_changed"),
            Rejection::ActivePointerVersionConflict { .. } => (409, "active_pointer_version_conflict"),
            Rejection::InvalidBundle(_) => (400, "invalid_bundle"),
            Rejection::BundleTooLarge(_) => (413, "bundle_too_large"),
        }
    }

    /// The HTTP status.
    pub(crate) fn status(&self) -> u16 {
        self.status_and_code().0
    }

    /// The stable `code` of the envelope.
    pub(crate) fn code(&self) -> &'static str {
        self.status_and_code().1
    }
}

/// An API error: HTTP status, stable code, message, and diagnostics for a refused manifest.
/// A refusal is a [`Rejection`]; the others are the store's errors and a 500.
#[derive(Debug)]
pub(crate) struct ApiError {
    pub(crate) status: u16,
    pub(crate) code: &'static str,
    pub(crate) message: String,
    pub(crate) diagnostics: Option<Vec<Diagnostic>>,
}

impl ApiError {
    fn new(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { status, code, message: message.into(), diagnostics: None }
    }

    /// A failure inside the service (500): `detail` goes only to the server log, under the
    /// request id; the client sees `internal_error` and the id.
    pub(crate) fn internal(detail: impl Into<String>) -> ApiError {
        ApiError::new(500, "internal_error", detail)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> ApiError {
        match e {
            StoreError::Conflict(m) => ApiError::new(409, "conflict", m),
            StoreError::NotFound(m) => ApiError::new(404, "not_found", m),
            StoreError::Backend(m) => ApiError::internal(format!("store error: {m}")),
            StoreError::Keys(e) => ApiError::internal(format!("store keys: {e}")),
            StoreError::Unavailable(why) => {
                // Where the database is and why it failed are for the log, not the caller.
                tracing::warn!("svc serve: the store is unavailable: {why}");
                ApiError::new(
                    503,
                    "store_unavailable",
                    "the service's database cannot be reached just now; try again in a moment",
                )
            }
        }
    }
}

impl From<OperationError> for ApiError {
    fn from(e: OperationError) -> ApiError {
        match e {
            OperationError::Refused(r) => r.into(),
            OperationError::Store(e) => e.into(),
            internal @ OperationError::Internal { .. } => ApiError::internal(internal.detail()),
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> ApiError {
        let (status, code, message) = (r.status(), r.code(), r.to_string());
        let diagnostics = match r {
            Rejection::ManifestInvalid(diagnostics) => Some(diagnostics),
            Rejection::ActivePointerVersionConflict { .. } => Some(vec![Diagnostic::error(
                Layer::Publication,
                Code::ActivePointerVersionConflict,
                "/expectedActivePointerVersion",
                message.clone(),
            )]),
            _ => None,
        };
        ApiError { status, code, message, diagnostics }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::service::operations::refusal::PauseProblem;

    /// One of each variant.
    fn samples() -> Vec<Rejection> {
        let s = || "x".to_owned();
        vec![
            Rejection::Unauthenticated,
            Rejection::Forbidden(Denied::Resume),
            Rejection::InvalidRequestBody(BodyProblem::NotUtf8),
            Rejection::InvalidPublicationPause(PauseProblem::ReasonBlank),
            Rejection::InvalidApplicationId { id: s() },
            Rejection::ApplicationNotFound { application_id: s() },
            Rejection::PolicyVersionNotFound { version: s() },
            Rejection::InvalidQuery(s()),
            Rejection::NoSuchRoute,
            Rejection::MethodNotAllowed,
            Rejection::BodyTooLarge { max: 1024 * 1024 },
            Rejection::ManifestChanged,
            Rejection::TooManyLargeBodies(svc_http::Busy::All(8)),
            Rejection::ApplicationExists(s()),
            Rejection::NotPaused { application_id: s(), status: "active" },
            Rejection::ManifestInvalid(Vec::new()),
            Rejection::ActivePointerVersionConflict { expected: 1, active: 2 },
            Rejection::InvalidBundle(BundleProblem::Empty),
            Rejection::BundleTooLarge(Oversize::Files { count: 2001 }),
        ]
    }

    #[test]
    fn each_variant_has_its_own_code_and_a_4xx_but_the_busy_intake_a_503_to_retry() {
        let mut codes = HashSet::new();
        for r in samples() {
            let (status, code) = (r.status(), r.code());
            assert!(codes.insert(code), "{code} is the code of two variants");
            let busy = matches!(r, Rejection::TooManyLargeBodies(_));
            assert_eq!(retry_later(code), busy, "{r:?}");
            assert!(if busy { status == 503 } else { (400..500).contains(&status) }, "{r:?}: {status}");
            assert!(!r.to_string().is_empty(), "{r:?}");
            let e = ApiError::from(r);
            assert_eq!((e.status, e.code), (status, code));
        }
    }

    #[test]
    fn messages_built_from_values() {
        let message = |r: Rejection| r.to_string();
        assert_eq!(
            message(Rejection::InvalidApplicationId { id: "A".to_owned() }),
            "\"A\" is not an application ID: 1-64 lowercase letters, digits, `.`, `_` or `-`, starting with a letter \
             or digit (1-64 characters)"
        );
        assert_eq!(
            message(Rejection::InvalidRequestBody(BodyProblem::UnknownField { field: "x".to_owned(), fields: "a, b" })),
            "unknown field \"x\" in the request body (at /x); the fields are a, b"
        );
        assert_eq!(
            message(Rejection::InvalidRequestBody(BodyProblem::ResumeReason { max_chars: 500 })),
            "the resume `reason` must be 1-500 characters; say why the application runs again"
        );
        let conflict = ApiError::from(Rejection::ActivePointerVersionConflict { expected: 3, active: 4 });
        assert_eq!(conflict.message, "you reviewed active version 3, but the active version is now 4; review it again");
        let d = conflict.diagnostics.expect("the fence's diagnostic");
        assert_eq!((d.len(), d[0].message.as_str()), (1, conflict.message.as_str()));
        let refused = ApiError::from(Rejection::ManifestInvalid(vec![d[0].clone(), d[0].clone()]));
        assert_eq!(refused.message, "the manifest was refused with 2 errors; see `diagnostics`");
        assert_eq!(refused.diagnostics.map(|d| d.len()), Some(2));
    }
}
