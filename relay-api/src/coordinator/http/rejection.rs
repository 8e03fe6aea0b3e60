//! Every answer the relay API gives for an error, declared once (axum's rejection style): the
//! refusals of HTTP's own (a token, a body, a query: [`Rejection`], a variant per stable
//! `code`, its HTTP status and code in [`Rejection::status_and_code`]) and the one table that
//! turns an operation's error ([`OperationError`], whose `#[error]` is the public message)
//! into its status and code ([`operation_status_and_code`]). Where a message is built from
//! values, the variant carries them; where one code has several wordings (`invalid_request`,
//! `not_found`, ...), the variant carries a small enum that says which.
//!
//! A handler returns `Rejection::InvalidRequest(..).into()` or an operation's error: the
//! [`ApiError`] envelope (`{"error": {"code", "message", "diagnostics"?}}`). The store's
//! refusals keep their own codes (`From<StoreError> for ApiError`) and a 500
//! (`ApiError::internal`) shows only its request id, its detail is for the server's log.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{ApiError, LOGS_PAGE_MAX};
use crate::coordinator::operations::OperationError;
use crate::project::ManifestV5Error;

/// A request the relay API refuses (4xx, and 503 for a large body beyond the intake's bounds);
/// one variant per `code`.
#[derive(Debug, thiserror::Error)]
pub(super) enum Rejection {
    /// No bearer token, or one the coordinator does not know.
    #[error("{0}")]
    Unauthenticated(Credentials),
    /// An operator's token on a customer's route.
    #[error("this is an operator token; deployments need a customer token (`svc relay admin token --org NAME`)")]
    CustomerTokenRequired,
    /// A customer's token on an operator's route (rewards).
    #[error(
        "rewards belong to gateway operators; use an operator token (`svc relay admin token --org NAME --operator`)"
    )]
    OperatorTokenRequired,
    /// The caller's organization holds no invitation to the ingress add-on.
    #[error(
        "the ingress add-on is by invitation only and organization \"{org}\" has no invitation; ask the service for one"
    )]
    InvitationRequired {
        /// The organization's name.
        org: String,
    },
    /// A body or query string that does not read as the route's request.
    #[error("{0}")]
    InvalidRequest(BadRequest),
    /// No route at the URL.
    #[error("no such route")]
    NoRoute,
    /// A body that arrived (chunked) over the route's limit; a declared one over it is refused
    /// before the handler runs (`svc_http::limit_body`).
    #[error("the request body is over {max} bytes, the most this route takes")]
    BodyTooLarge {
        /// The route's limit.
        max: usize,
    },
    /// A large body (a deploy) beyond the bounds on large bodies read at once, refused before
    /// it is read (with `Retry-After`).
    #[error("{0}")]
    TooManyLargeBodies(svc_http::Busy),
}

impl Rejection {
    /// The one table of statuses and codes.
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Rejection::Unauthenticated(_) => (StatusCode::UNAUTHORIZED, svc_http::UNAUTHENTICATED),
            Rejection::CustomerTokenRequired => (StatusCode::FORBIDDEN, "customer_token_required"),
            Rejection::OperatorTokenRequired => (StatusCode::FORBIDDEN, "operator_token_required"),
            Rejection::InvitationRequired { .. } => (StatusCode::FORBIDDEN, "ingress_invitation_required"),
            Rejection::InvalidRequest(_) => (StatusCode::BAD_REQUEST, "invalid_request"),
            Rejection::NoRoute => (StatusCode::NOT_FOUND, "not_found"),
            Rejection::BodyTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
            Rejection::TooManyLargeBodies(_) => (StatusCode::SERVICE_UNAVAILABLE, "too_many_large_bodies"),
        }
    }

    /// Whether the client is to come back later (`Retry-After`), its body unread.
    fn retry_later(&self) -> bool {
        matches!(self, Rejection::TooManyLargeBodies(_))
    }

    /// The HTTP status.
    pub(super) fn status(&self) -> StatusCode {
        self.status_and_code().0
    }

    /// The stable `code` of the envelope.
    pub(super) fn code(&self) -> &'static str {
        self.status_and_code().1
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> ApiError {
        let mut e = ApiError::new(r.status(), r.code(), r.to_string());
        e.retry_later = r.retry_later();
        e
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
    }
}

/// The one table of an operation's refusals: the HTTP status and stable `code` of each (the
/// console shows the same status with the message). `None` for the store's errors, which
/// answer with their own (`From<StoreError> for ApiError`), and the relay's own failures (500).
pub(super) fn operation_status_and_code(e: &OperationError) -> Option<(StatusCode, &'static str)> {
    use OperationError as E;
    Some(match e {
        E::Store(_) | E::Internal(_) => return None,
        E::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
        E::DeploymentNotFundable => (StatusCode::CONFLICT, "deployment_not_fundable"),
        E::DeploymentStopped => (StatusCode::CONFLICT, "deployment_stopped"),
        E::Periods | E::UnknownSecret(_) => (StatusCode::BAD_REQUEST, "invalid_request"),
        E::InvalidHostname(_) => (StatusCode::BAD_REQUEST, "invalid_hostname"),
        E::HostnameNeedsAcme => (StatusCode::CONFLICT, "hostname_needs_acme"),
        E::InvalidDigest { .. } => (StatusCode::BAD_REQUEST, "invalid_digest"),
        E::InvalidProject(_) => (StatusCode::BAD_REQUEST, "invalid_project"),
        E::IngressUnsupported(_) => (StatusCode::UNPROCESSABLE_ENTITY, "ingress_unsupported"),
        E::InvalidManifest(_) => (StatusCode::BAD_REQUEST, "invalid_manifest"),
        E::HostnameTooLong { .. } => (StatusCode::BAD_REQUEST, "hostname_too_long"),
        E::CanonicalNameTaken { .. } => (StatusCode::CONFLICT, "canonical_name_taken"),
        E::EntrypointMissing { .. } => (StatusCode::BAD_REQUEST, "entrypoint_missing"),
        E::ArtifactNotSent { .. } => (StatusCode::BAD_REQUEST, "artifact_not_sent"),
        E::ManifestUndeclared(_) => (StatusCode::BAD_REQUEST, "manifest_undeclared"),
        E::ManifestNotRunnable(_) => (StatusCode::BAD_REQUEST, "manifest_not_runnable"),
        E::HostnamesChanged { .. } => (StatusCode::CONFLICT, "hostnames_changed"),
        E::BundleTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "bundle_too_large"),
        E::InvalidBundle(_) => (StatusCode::BAD_REQUEST, "invalid_bundle"),
    })
}

/// The envelope's `diagnostics`, for the refusals of a project file.
fn diagnostics(e: &OperationError) -> Option<serde_json::Value> {
    match e {
        OperationError::InvalidProject(e) => Some(json!(e.diagnostics)),
        OperationError::IngressUnsupported(u) => Some(json!(u.iter().map(|u| u.diagnostic()).collect::<Vec<_>>())),
        // The named manifest's own problems, each at its pointer, line and column (the
        // message only counts them).
        OperationError::InvalidManifest(ManifestV5Error::Invalid { diagnostics, .. }) => Some(json!(diagnostics)),
        _ => None,
    }
}

impl From<OperationError> for ApiError {
    fn from(e: OperationError) -> ApiError {
        match operation_status_and_code(&e) {
            Some((status, code)) => {
                let mut answer = ApiError::new(status, code, e.to_string());
                answer.diagnostics = diagnostics(&e);
                answer
            }
            None => match e {
                OperationError::Store(e) => e.into(),
                e => ApiError::internal(&e),
            },
        }
    }
}

/// How a bearer token fails (`unauthenticated`).
#[derive(Debug, Clone, Copy, thiserror::Error)]
pub(super) enum Credentials {
    /// No `Authorization: Bearer` header.
    #[error("send `Authorization: Bearer <token>`")]
    Missing,
    /// A token the coordinator does not know.
    #[error("the token is not valid")]
    NotValid,
}

/// What is wrong with a request (`invalid_request`).
#[derive(Debug, thiserror::Error)]
pub(super) enum BadRequest {
    /// The body as a whole does not read.
    #[error("the request body: {0}")]
    Body(String),
    /// The body does not read at a field.
    #[error("the request body at `{at}`: {why}")]
    BodyAt {
        /// The field's path (`periods`, `bundle.x.js`).
        at: String,
        /// Why.
        why: String,
    },
    /// The query string does not read.
    #[error("the query string: {0}")]
    Query(String),
    /// A negative log cursor.
    #[error("`after` is a cursor (0 or more), not {0}")]
    After(i64),
    /// A body that stopped arriving (the client hung up; a body timeout is answered 408 by the
    /// listener).
    #[error("the request body did not arrive whole: {0}")]
    BodyIncomplete(String),
    /// A log page size out of range.
    #[error("`limit` must be 1 to {LOGS_PAGE_MAX}, not {0}")]
    Limit(u32),
    /// A page of executions asked for wrongly (`cursor`, `limit`).
    #[error("{0}")]
    Page(String),
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::coordinator::files::BundlePathProblem;
    use crate::coordinator::operations::{BundleProblem, Internal, Missing, Oversize};
    use crate::coordinator::policy::PublishError;
    use crate::coordinator::store::StoreError;
    use crate::dns::DnsError;
    use crate::project::{ProjectErrors, Unsupported};

    /// One of each variant.
    fn samples() -> Vec<Rejection> {
        vec![
            Rejection::Unauthenticated(Credentials::Missing),
            Rejection::CustomerTokenRequired,
            Rejection::OperatorTokenRequired,
            Rejection::InvitationRequired { org: "x".to_owned() },
            Rejection::InvalidRequest(BadRequest::After(-1)),
            Rejection::NoRoute,
            Rejection::BodyTooLarge { max: 1 },
            Rejection::TooManyLargeBodies(svc_http::Busy::Tenant(2)),
        ]
    }

    /// One of each refusal of an operation.
    fn refusals() -> Vec<OperationError> {
        let s = || "x".to_owned();
        vec![
            OperationError::NotFound(Missing::Hostname(s())),
            OperationError::DeploymentNotFundable,
            OperationError::DeploymentStopped,
            OperationError::Periods,
            OperationError::InvalidHostname(DnsError::NoCaIdentities),
            OperationError::HostnameNeedsAcme,
            OperationError::InvalidDigest { digest: s() },
            OperationError::InvalidProject(ProjectErrors { diagnostics: Vec::new() }),
            OperationError::IngressUnsupported(vec![Unsupported::ArbitraryRuntimes]),
            OperationError::InvalidManifest(ManifestV5Error::NotNamed),
            OperationError::HostnameTooLong { canonical: s() },
            OperationError::CanonicalNameTaken { canonical: s() },
            OperationError::UnknownSecret(s()),
            OperationError::EntrypointMissing { entrypoint: s() },
            OperationError::ArtifactNotSent { pinned: s(), sent: s() },
            OperationError::ManifestUndeclared(PublishError::Undeclared(vec![s()])),
            OperationError::ManifestNotRunnable(PublishError::NotRunnable(s())),
            OperationError::HostnamesChanged { deployment: s(), added: vec![s()], removed: Vec::new() },
            OperationError::BundleTooLarge(Oversize::Files(1)),
            OperationError::InvalidBundle(BundleProblem::FileAndDirectory(s())),
        ]
    }

    #[test]
    fn each_variant_has_its_own_code_and_a_4xx_but_the_busy_intake_a_503_to_retry() {
        let mut codes = HashSet::new();
        for r in samples() {
            let (status, code) = (r.status(), r.code());
            assert!(codes.insert(code), "{code} is the code of two variants");
            let busy = matches!(r, Rejection::TooManyLargeBodies(_));
            assert_eq!(r.retry_later(), busy, "{r:?}");
            if busy {
                assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
            } else {
                assert!(status.is_client_error(), "{r:?}: {status}");
            }
            assert!(!r.to_string().is_empty(), "{r:?}");
            let e = ApiError::from(r);
            assert_eq!((e.status, e.code), (status, code));
        }
    }

    #[test]
    fn each_refusal_of_an_operation_has_a_4xx_and_a_code_of_its_own_but_invalid_request() {
        let mut codes = HashSet::new();
        for r in refusals() {
            let (status, code) = operation_status_and_code(&r).expect("a refusal");
            assert!(status.is_client_error(), "{r:?}: {status}");
            assert!(
                codes.insert(code) || code == "invalid_request",
                "{code} is the code of two refusals (or of an HTTP one)"
            );
            assert!(!matches!(code, "unauthenticated" | "body_too_large" | "too_many_large_bodies"), "{code}");
            let message = r.to_string();
            assert!(!message.is_empty(), "{r:?}");
            let e = ApiError::from(r);
            assert_eq!((e.status, e.code, e.message.as_str(), e.retry_later), (status, code, message.as_str(), false));
        }
    }

    #[test]
    fn the_store_answers_with_its_own_codes_and_the_relay_s_failures_are_500s() {
        let refused = ApiError::from(OperationError::Store(StoreError::Refused {
            code: "hostname_taken",
            message: "taken".to_owned(),
        }));
        assert_eq!(
            (refused.status, refused.code, refused.message.as_str()),
            (StatusCode::CONFLICT, "hostname_taken", "taken")
        );
        let unreadable = serde_json::from_str::<serde_json::Value>("{").expect_err("not JSON");
        let ours = ApiError::from(OperationError::Internal(Internal::PolicyJson(unreadable)));
        assert_eq!((ours.status, ours.code), (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"));
        assert!(ours.message.contains("EOF while parsing"), "the detail for the log: {}", ours.message);
    }

    #[test]
    fn messages_built_from_values() {
        let message = |r: OperationError| ApiError::from(r).message;
        assert_eq!(
            message(OperationError::NotFound(Missing::deployment("dep_1"))),
            "no deployment dep_1 in this organization"
        );
        assert_eq!(message(OperationError::NotFound(Missing::deployment("web"))), "no deployment of project \"web\"");
        assert_eq!(message(OperationError::Periods), "periods must be 1 to 10000");
        assert_eq!(message(OperationError::UnknownSecret("KEY".to_owned())), "secret KEY is not named in app.secrets");
        assert_eq!(ApiError::from(Rejection::NoRoute).message, "no such route");
        assert_eq!(
            message(OperationError::HostnamesChanged {
                deployment: "dep_1".to_owned(),
                added: vec!["a.example".to_owned()],
                removed: vec!["b.example".to_owned()],
            }),
            "the project file's hostnames differ from deployment dep_1's; nothing was deployed. Change them on the \
             deployment first (`svc ingress hostname add a.example`, `svc ingress hostname remove b.example`), or make \
             `hostnames` in ingress.json match"
        );
        let long = "a/".repeat(50);
        assert_eq!(
            message(OperationError::InvalidBundle(BundleProblem::Path { path: long, why: BundlePathProblem::Depth })),
            format!("{:?} is deeper than 32 components", format!("{}...", "a/".repeat(40)))
        );
        let report = manifest_core::validate(b"{\"schemaVersion\": 5,\n \"applicationId\": 7}");
        let diagnostics: Vec<manifest_core::Diagnostic> = report.diagnostics.into_iter().collect();
        assert!(!diagnostics.is_empty());
        let e = ApiError::from(OperationError::InvalidManifest(ManifestV5Error::Invalid {
            path: "manifest.json".to_owned(),
            diagnostics,
        }));
        let listed = e.diagnostics.expect("the manifest's diagnostics");
        let at_line_2 = listed.as_array().into_iter().flatten().any(|d| d.to_string().contains("\"line\":2"));
        assert!(at_line_2, "each with its line and column: {listed:#}");
        let e = ApiError::from(OperationError::IngressUnsupported(vec![Unsupported::ArbitraryRuntimes]));
        assert!(e.message.starts_with("the ingress add-on does not support: "), "{}", e.message);
        assert_eq!(e.diagnostics.as_ref().and_then(|d| d.as_array()).map(Vec::len), Some(1));
    }
}
