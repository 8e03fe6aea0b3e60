//! Every refusal the relay API answers, declared once (axum's rejection style): a variant per
//! stable `code`, its HTTP status and code in [`Rejection::status_and_code`], its public
//! message in its `#[error]`. Where a message is built from values, the variant carries them;
//! where one code has several wordings (`invalid_request`, `not_found`, ...), the variant
//! carries a small enum that says which.
//!
//! A handler returns `Rejection::DeploymentStopped.into()`: the [`ApiError`] envelope
//! (`{"error": {"code", "message", "diagnostics"?}}`). Two kinds of error stay outside: the
//! store's refusals (`From<StoreError> for ApiError`, their codes are the store's) and a 500
//! (`ApiError::internal`, whose detail only the server's log sees).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{ApiError, LOGS_PAGE_MAX};
use crate::coordinator::api::{BUNDLE_MAX_BYTES, BUNDLE_MAX_FILES};
use crate::coordinator::files::BundlePathProblem;
use crate::dns::DnsError;
use crate::project::{ManifestV5Error, ProjectErrors, Unsupported};

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
    /// The URL names nothing the caller has.
    #[error("{0}")]
    NotFound(Missing),
    /// A quote asked for a stopped deployment.
    #[error("the deployment is stopped")]
    DeploymentNotFundable,
    /// A hostname added to a stopped deployment.
    #[error("the deployment is stopped")]
    DeploymentStopped,
    /// A customer hostname that is not one.
    #[error("{0}")]
    InvalidHostname(DnsError),
    /// A customer hostname on a coordinator without an ACME CA.
    #[error(
        "this coordinator issues development certificates for .localhost names only; customer hostnames need a \
         coordinator configured with an ACME CA (`svc relay serve --acme-directory URL`)"
    )]
    HostnameNeedsAcme,
    /// A pin's digest that is not `sha256:` and 64 lowercase hex digits.
    #[error(
        "\"{digest}\" is not a validator digest: `sha256:` and 64 lowercase hex digits (`svc ingress pins list` shows the current one)"
    )]
    InvalidDigest {
        /// The digest as sent.
        digest: String,
    },
    /// A deploy's project file that is not valid (its problems go in `diagnostics`).
    #[error("the project file is not valid: {0}")]
    InvalidProject(ProjectErrors),
    /// A deploy's project that asks for what the add-on does not do (each in `diagnostics`).
    #[error("the ingress add-on does not support: {}", unsupported_names(.0))]
    IngressUnsupported(Vec<Unsupported>),
    /// A deploy's project whose V5 manifest cannot be had.
    #[error("the project's V5 manifest: {0}")]
    InvalidManifest(ManifestV5Error),
    /// A canonical hostname whose first label is over 63 bytes.
    #[error("\"{canonical}\": the project and organization names together exceed a DNS label (63); shorten `name`")]
    HostnameTooLong {
        /// The canonical hostname.
        canonical: String,
    },
    /// A canonical hostname that another organization's project holds.
    #[error(
        "\"{canonical}\" belongs to another organization's project (project and organization names \
         joined by hyphens can meet); choose another project `name` in ingress.json"
    )]
    CanonicalNameTaken {
        /// The canonical hostname.
        canonical: String,
    },
    /// A deploy whose files lack the project's entrypoint.
    #[error("the app files sent do not include the entrypoint \"{entrypoint}\"")]
    EntrypointMissing {
        /// The project's `app.entrypoint`.
        entrypoint: String,
    },
    /// A deploy whose manifest pins an artifact other than the files it sends.
    #[error(
        "the manifest pins the artifact {pinned}, and the app files sent have the digest {sent}; pin {sent}, or \
         write `release: {{mode: source}}` (the files sent are the release)"
    )]
    ArtifactNotSent {
        /// `/release/artifact/digest`.
        pinned: String,
        /// The bundle digest of the files sent.
        sent: String,
    },
    /// A deploy whose project gives the job what its named manifest does not declare.
    #[error("{0}")]
    ManifestUndeclared(crate::coordinator::policy::PublishError),
    /// A deploy whose named manifest asks for what a route cannot run (two jobs, an update
    /// at the next renewal, a bound on the execution).
    #[error("{0}")]
    ManifestNotRunnable(crate::coordinator::policy::PublishError),
    /// A redeploy whose project lists other hostnames than the deployment has.
    #[error(
        "the project file's hostnames differ from deployment {deployment}'s; nothing was deployed. Change them on the \
         deployment first ({}), or make `hostnames` in ingress.json match",
        hostname_fixes(.added, .removed)
    )]
    HostnamesChanged {
        /// The deployment's id.
        deployment: String,
        /// Hostnames in the project file that the deployment does not have.
        added: Vec<String>,
        /// Hostnames of the deployment that the project file does not list.
        removed: Vec<String>,
    },
    /// A deploy's files over [`BUNDLE_MAX_FILES`] files or [`BUNDLE_MAX_BYTES`] bytes.
    #[error("{0}")]
    BundleTooLarge(Oversize),
    /// A deploy's files that cannot be laid out as they are.
    #[error("{0}")]
    InvalidBundle(BundleProblem),
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
            Rejection::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Rejection::DeploymentNotFundable => (StatusCode::CONFLICT, "deployment_not_fundable"),
            Rejection::DeploymentStopped => (StatusCode::CONFLICT, "deployment_stopped"),
            Rejection::InvalidHostname(_) => (StatusCode::BAD_REQUEST, "invalid_hostname"),
            Rejection::HostnameNeedsAcme => (StatusCode::CONFLICT, "hostname_needs_acme"),
            Rejection::InvalidDigest { .. } => (StatusCode::BAD_REQUEST, "invalid_digest"),
            Rejection::InvalidProject(_) => (StatusCode::BAD_REQUEST, "invalid_project"),
            Rejection::IngressUnsupported(_) => (StatusCode::UNPROCESSABLE_ENTITY, "ingress_unsupported"),
            Rejection::InvalidManifest(_) => (StatusCode::BAD_REQUEST, "invalid_manifest"),
            Rejection::HostnameTooLong { .. } => (StatusCode::BAD_REQUEST, "hostname_too_long"),
            Rejection::CanonicalNameTaken { .. } => (StatusCode::CONFLICT, "canonical_name_taken"),
            Rejection::EntrypointMissing { .. } => (StatusCode::BAD_REQUEST, "entrypoint_missing"),
            Rejection::ArtifactNotSent { .. } => (StatusCode::BAD_REQUEST, "artifact_not_sent"),
            Rejection::ManifestUndeclared(_) => (StatusCode::BAD_REQUEST, "manifest_undeclared"),
            Rejection::ManifestNotRunnable(_) => (StatusCode::BAD_REQUEST, "manifest_not_runnable"),
            Rejection::HostnamesChanged { .. } => (StatusCode::CONFLICT, "hostnames_changed"),
            Rejection::BundleTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "bundle_too_large"),
            Rejection::InvalidBundle(_) => (StatusCode::BAD_REQUEST, "invalid_bundle"),
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

    /// The envelope's `diagnostics`, for the refusals of a project file.
    fn diagnostics(&self) -> Option<serde_json::Value> {
        match self {
            Rejection::InvalidProject(e) => Some(json!(e.diagnostics)),
            Rejection::IngressUnsupported(u) => Some(json!(u.iter().map(|u| u.diagnostic()).collect::<Vec<_>>())),
            // The named manifest's own problems, each at its pointer, line and column (the
            // message only counts them).
            Rejection::InvalidManifest(ManifestV5Error::Invalid { diagnostics, .. }) => Some(json!(diagnostics)),
            _ => None,
        }
    }
}

impl From<Rejection> for ApiError {
    fn from(r: Rejection) -> ApiError {
        let mut e = ApiError::new(r.status(), r.code(), r.to_string());
        e.diagnostics = r.diagnostics();
        e.retry_later = r.retry_later();
        e
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        ApiError::from(self).into_response()
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
    /// A quote's `periods` out of range.
    #[error("periods must be 1 to 10000")]
    Periods,
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
    /// A secret the project does not name.
    #[error("secret {0} is not named in app.secrets")]
    UnknownSecret(String),
}

/// What the URL names and the caller does not have (`not_found`).
#[derive(Debug, thiserror::Error)]
pub(super) enum Missing {
    /// No route.
    #[error("no such route")]
    Route,
    /// No deployment of this id (`dep_...`) in the caller's organization.
    #[error("no deployment {0} in this organization")]
    DeploymentId(String),
    /// No deployment of this project in the caller's organization.
    #[error("no deployment of project \"{0}\"")]
    Project(String),
    /// No published policy of this revision.
    #[error(
        "deployment {deployment} published no policy as revision {revision} (`svc ingress executions` lists its revisions)"
    )]
    Revision {
        /// The deployment's id.
        deployment: String,
        /// The revision asked for.
        revision: u32,
    },
    /// No hostname of this name on the deployment (or a removed one).
    #[error("hostname {0} not found")]
    Hostname(String),
    /// No such pin.
    #[error("{digest} is not pinned for project \"{project}\"")]
    Pin {
        /// The digest.
        digest: String,
        /// The project.
        project: String,
    },
}

impl Missing {
    /// The deployment a URL's `{project}` names: an id (`dep_...`) or a project's name.
    pub(super) fn deployment(project: &str) -> Missing {
        if project.starts_with("dep_") {
            Missing::DeploymentId(project.to_owned())
        } else {
            Missing::Project(project.to_owned())
        }
    }
}

/// Which bound a deploy's files exceed (`bundle_too_large`).
#[derive(Debug, thiserror::Error)]
pub(super) enum Oversize {
    /// More than [`BUNDLE_MAX_FILES`] files.
    #[error("the app has {0} files; a deployment carries at most {BUNDLE_MAX_FILES}")]
    Files(usize),
    /// More than [`BUNDLE_MAX_BYTES`] bytes, reached at a file.
    #[error(
        "the app's files are over {BUNDLE_MAX_BYTES} bytes (at {:?}); a deployment carries at most that",
        truncated(.at)
    )]
    Bytes {
        /// The file at which the total went over.
        at: String,
    },
}

/// Why a deploy's files cannot be laid out (`invalid_bundle`).
#[derive(Debug, thiserror::Error)]
pub(super) enum BundleProblem {
    /// A path that is not a plain, bounded relative path inside the app directory.
    #[error("{:?} {why}", truncated(.path))]
    Path {
        /// The path.
        path: String,
        /// What is wrong with it.
        why: BundlePathProblem,
    },
    /// A path that is a file, and a directory of other files.
    #[error("{:?} is a file, and other files need it as a directory", truncated(.0))]
    FileAndDirectory(String),
    /// A file's content that is not base64.
    #[error("{:?} is not base64: {why}", truncated(.path))]
    NotBase64 {
        /// The file.
        path: String,
        /// The decoder's complaint.
        why: base64::DecodeError,
    },
}

/// `name (pointer), ...` for each unsupported feature.
fn unsupported_names(unsupported: &[Unsupported]) -> String {
    let names: Vec<String> = unsupported.iter().map(|u| format!("{} ({})", u.as_str(), u.pointer())).collect();
    names.join(", ")
}

/// The commands that bring the deployment's hostnames to the project file's.
fn hostname_fixes(added: &[String], removed: &[String]) -> String {
    let mut fixes: Vec<String> = added.iter().map(|h| format!("`svc ingress hostname add {h}`")).collect();
    fixes.extend(removed.iter().map(|h| format!("`svc ingress hostname remove {h}`")));
    fixes.join(", ")
}

/// At most the first 80 characters of `path`, for messages.
fn truncated(path: &str) -> String {
    match path.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &path[..at]),
        None => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    /// One of each variant.
    fn samples() -> Vec<Rejection> {
        let s = || "x".to_owned();
        vec![
            Rejection::Unauthenticated(Credentials::Missing),
            Rejection::CustomerTokenRequired,
            Rejection::OperatorTokenRequired,
            Rejection::InvitationRequired { org: s() },
            Rejection::InvalidRequest(BadRequest::Periods),
            Rejection::NotFound(Missing::Route),
            Rejection::DeploymentNotFundable,
            Rejection::DeploymentStopped,
            Rejection::InvalidHostname(DnsError::NoCaIdentities),
            Rejection::HostnameNeedsAcme,
            Rejection::InvalidDigest { digest: s() },
            Rejection::InvalidProject(ProjectErrors { diagnostics: Vec::new() }),
            Rejection::IngressUnsupported(vec![Unsupported::ArbitraryRuntimes]),
            Rejection::InvalidManifest(ManifestV5Error::NotNamed),
            Rejection::HostnameTooLong { canonical: s() },
            Rejection::CanonicalNameTaken { canonical: s() },
            Rejection::EntrypointMissing { entrypoint: s() },
            Rejection::ArtifactNotSent { pinned: s(), sent: s() },
            Rejection::ManifestUndeclared(crate::coordinator::policy::PublishError::Undeclared(vec![s()])),
            Rejection::ManifestNotRunnable(crate::coordinator::policy::PublishError::NotRunnable(s())),
            Rejection::HostnamesChanged { deployment: s(), added: vec![s()], removed: Vec::new() },
            Rejection::BundleTooLarge(Oversize::Files(1)),
            Rejection::InvalidBundle(BundleProblem::FileAndDirectory(s())),
            Rejection::BodyTooLarge { max: 1 },
            Rejection::TooManyLargeBodies(svc_http::Busy::Tenant(2)),
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
    fn messages_built_from_values() {
        let message = |r: Rejection| r.to_string();
        assert_eq!(
            message(Rejection::NotFound(Missing::deployment("dep_1"))),
            "no deployment dep_1 in this organization"
        );
        assert_eq!(message(Rejection::NotFound(Missing::deployment("web"))), "no deployment of project \"web\"");
        assert_eq!(
            message(Rejection::HostnamesChanged {
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
            message(Rejection::InvalidBundle(BundleProblem::Path { path: long, why: BundlePathProblem::Depth })),
            format!("{:?} is deeper than 32 components", format!("{}...", "a/".repeat(40)))
        );
        let report = manifest_core::validate(b"{\"schemaVersion\": 5,\n \"applicationId\": 7}");
        let diagnostics: Vec<manifest_core::Diagnostic> = report.diagnostics.into_iter().collect();
        assert!(!diagnostics.is_empty());
        let e = ApiError::from(Rejection::InvalidManifest(ManifestV5Error::Invalid {
            path: "manifest.json".to_owned(),
            diagnostics,
        }));
        let listed = e.diagnostics.expect("the manifest's diagnostics");
        let at_line_2 = listed.as_array().into_iter().flatten().any(|d| d.to_string().contains("\"line\":2"));
        assert!(at_line_2, "each with its line and column: {listed:#}");
        let e = ApiError::from(Rejection::IngressUnsupported(vec![Unsupported::ArbitraryRuntimes]));
        assert!(e.message.starts_with("the ingress add-on does not support: "), "{}", e.message);
        assert_eq!(e.diagnostics.as_ref().and_then(|d| d.as_array()).map(Vec::len), Some(1));
    }
}
