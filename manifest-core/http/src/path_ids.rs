//! Ids in a request's path, checked before any handler (and so before any store) sees them
//! ([`check_path_ids`]): a control character or an id longer than [`MAX_PATH_ID_BYTES`] is
//! answered 400 `invalid_path_id` naming the field, on every route of a router at once. A
//! store cannot then answer such an id differently by backend (PostgreSQL refuses a NUL in
//! text and answered 500 where SQLite answered 404).
//!
//! The check reads the route's template (`MatchedPath`) beside the request's path, segment
//! by segment from the end (a nested router sees its path without its prefix), and decodes
//! each `{param}` segment as axum does (`%XX`, anything else as it is).

use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;

use crate::envelope::{ErrorBody, envelope_response};

/// The longest id a path may hold, in bytes: a DNS name's longest (253), the longest thing
/// any route takes (a hostname; application ids, projects and digests are shorter).
pub const MAX_PATH_ID_BYTES: usize = 253;

/// The error code of a refused path id.
pub const INVALID_PATH_ID: &str = "invalid_path_id";

/// What is wrong with an id in the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathIdProblem {
    /// A control character (a NUL, an escape, a newline, U+0080 to U+009F).
    #[error("the {field} in the path holds a control character (U+{code:04X}, at byte {at}); ids are printable text")]
    Control {
        /// The field, as the API names it (`applicationId`).
        field: String,
        /// The character.
        code: u32,
        /// Its byte offset in the decoded id.
        at: usize,
    },
    /// Longer than [`MAX_PATH_ID_BYTES`].
    #[error("the {field} in the path is {len} bytes long; ids are at most {MAX_PATH_ID_BYTES}")]
    TooLong {
        /// The field.
        field: String,
        /// Its length once decoded.
        len: usize,
    },
    /// Not UTF-8 once its `%XX` are decoded.
    #[error("the {field} in the path is not UTF-8 once decoded; ids are printable text")]
    NotUtf8 {
        /// The field.
        field: String,
    },
}

impl PathIdProblem {
    /// The field, as the API names it.
    pub fn field(&self) -> &str {
        match self {
            PathIdProblem::Control { field, .. }
            | PathIdProblem::TooLong { field, .. }
            | PathIdProblem::NotUtf8 { field } => field,
        }
    }

    /// `{"error": {"code": "invalid_path_id", "field", "message"}}`.
    pub fn envelope(&self) -> ErrorBody {
        ErrorBody::new(INVALID_PATH_ID, self.to_string()).with("field", self.field())
    }

    /// The envelope as a 400 response (the APIs' answer).
    pub fn response(&self) -> Response {
        envelope_response(&self.envelope(), StatusCode::BAD_REQUEST)
    }
}

/// How a router's path ids are named and refused.
#[derive(Debug, Clone, Copy)]
pub struct PathIds {
    /// Each route parameter (`id` of `{id}`) and the field its refusal names
    /// (`applicationId`); a parameter not listed is named as the route names it.
    pub fields: &'static [(&'static str, &'static str)],
    /// The answer to a refused id: [`PathIdProblem::response`] for an API, a page for a console.
    pub answer: fn(&PathIdProblem) -> Response,
}

/// `router` with every path id of every route checked before its handler runs (a route
/// layer: routes added to `router` later are not covered, so call it last).
pub fn check_path_ids<S: Clone + Send + Sync + 'static>(router: axum::Router<S>, ids: PathIds) -> axum::Router<S> {
    router.route_layer(axum::middleware::from_fn_with_state(ids, path_id_check))
}

/// The check as a middleware, for a router built in one chain:
/// `.route_layer(axum::middleware::from_fn_with_state(IDS, svc_http::path_id_check))`.
pub async fn path_id_check(State(ids): State<PathIds>, request: Request, next: Next) -> Response {
    let problem = request
        .extensions()
        .get::<MatchedPath>()
        .and_then(|template| first_problem(template.as_str(), request.uri().path(), ids.fields));
    match problem {
        Some(problem) => (ids.answer)(&problem),
        None => next.run(request).await,
    }
}

/// The first id of `path` (matched by `template`) that is refused.
fn first_problem(template: &str, path: &str, fields: &[(&str, &str)]) -> Option<PathIdProblem> {
    let segments = template.rsplit('/').zip(path.rsplit('/'));
    // From the end; the last refusal found is the leftmost id's.
    segments
        .filter_map(|(pattern, raw)| {
            let param = pattern.strip_prefix('{')?.strip_suffix('}')?;
            let field = fields.iter().find(|(p, _)| *p == param).map_or(param, |(_, f)| *f);
            problem_of(field, &percent_decoded(raw))
        })
        .last()
}

fn problem_of(field: &str, id: &[u8]) -> Option<PathIdProblem> {
    let field = field.to_owned();
    if id.len() > MAX_PATH_ID_BYTES {
        return Some(PathIdProblem::TooLong { field, len: id.len() });
    }
    let Ok(text) = std::str::from_utf8(id) else { return Some(PathIdProblem::NotUtf8 { field }) };
    text.char_indices().find(|(_, c)| c.is_control()).map(|(at, c)| PathIdProblem::Control {
        field,
        code: u32::from(c),
        at,
    })
}

/// `%XX` decoded, anything else (a `%` not followed by two hex digits) as it is.
fn percent_decoded(text: &str) -> Vec<u8> {
    percent_encoding::percent_decode_str(text).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;
    use http_body_util::BodyExt as _;
    use tower_service::Service as _;

    const FIELDS: &[(&str, &str)] = &[("id", "applicationId"), ("n", "policyVersion")];

    fn router() -> Router {
        let inner = check_path_ids(
            Router::new().route("/pages/{id}", get(|| async { "page" })),
            PathIds { fields: FIELDS, answer: |p| (StatusCode::BAD_REQUEST, format!("page: {p}")).into_response() },
        );
        let api = Router::new()
            .route("/api/apps/{id}", get(|| async { "app" }))
            .route("/api/apps/{id}/versions/{n}", get(|| async { "version" }))
            .route("/api/other/{thing}", get(|| async { "other" }));
        check_path_ids(api, PathIds { fields: FIELDS, answer: PathIdProblem::response }).nest("/console", inner)
    }

    use axum::response::IntoResponse as _;

    async fn get_path(path: &str) -> (StatusCode, String) {
        let request = Request::builder().uri(path).body(Body::empty()).expect("a request");
        let response = router().call(request).await.expect("infallible");
        let status = response.status();
        let body = response.into_body().collect().await.expect("the body").to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn control_characters_and_long_ids_are_refused_naming_the_field() {
        let long = "a".repeat(MAX_PATH_ID_BYTES + 1);
        let cases = [
            ("/api/apps/%00", "applicationId", "U+0000, at byte 0"),
            ("/api/apps/ok%1bx", "applicationId", "U+001B, at byte 2"),
            ("/api/apps/a%0Ab/versions/1", "applicationId", "U+000A"),
            ("/api/apps/app/versions/%7f", "policyVersion", "U+007F"),
            ("/api/apps/%C2%85", "applicationId", "U+0085"),
            (&format!("/api/apps/{long}"), "applicationId", "254 bytes long"),
            ("/api/apps/%FF", "applicationId", "not UTF-8"),
            ("/api/other/%00", "thing", "U+0000"),
        ];
        for (path, field, says) in cases {
            let (status, body) = get_path(path).await;
            assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
            let body: serde_json::Value = serde_json::from_str(&body).expect("the envelope");
            assert_eq!(body["error"]["code"], INVALID_PATH_ID, "{path}");
            assert_eq!(body["error"]["field"], field, "{path}");
            let message = body["error"]["message"].as_str().expect("a message");
            assert!(message.contains(says) && message.contains(field), "{path}: {message}");
            assert!(!message.contains('\0') && !message.contains('\u{1b}'), "never echoed: {message:?}");
        }
        // A nested router's routes, answered its own way.
        let (status, body) = get_path("/console/pages/%1b").await;
        assert_eq!(
            (status, body.as_str()),
            (
                StatusCode::BAD_REQUEST,
                "page: the applicationId in the path holds a control character (U+001B, at byte 0); ids are printable text"
            )
        );
    }

    #[tokio::test]
    async fn printable_ids_up_to_the_bound_reach_the_handler() {
        let longest = "a".repeat(MAX_PATH_ID_BYTES);
        for path in [
            "/api/apps/app-1".to_owned(),
            "/api/apps/caf%C3%A9/versions/2".to_owned(),
            format!("/api/apps/{longest}"),
            "/api/apps/%2F%20x".to_owned(),
            "/console/pages/p".to_owned(),
        ] {
            let (status, body) = get_path(&path).await;
            assert_eq!(status, StatusCode::OK, "{path}: {body}");
        }
    }
}
