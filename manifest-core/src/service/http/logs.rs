//! `GET /api/applications/{id}/logs` (issue 42, point 2): the application's jobs' output, each
//! line with its execution, slot, generation, attempt, part and time, oldest first, after a
//! `seq` (`?after=`, for paging and following), at most `?limit=` lines ([`MAX_LIMIT`]), of
//! one execution if `?execution=` names one (its whole ID, or `SLOT/GENERATION/ATTEMPT`). Any
//! member may read it; another organization's application is the same 404 as a missing one.
//! `dropped` says, for each execution the page shows, how many of its lines were not kept.

use std::collections::BTreeSet;

use axum::extract::{Path, State as Extract};
use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::json;

use super::rejection::{ApiError, Rejection};
use super::{Shared, as_caller, json_response, respond};
use crate::projection::rfc3339_ms;
use crate::service::operations::applications::{self, OutputPage};

/// Lines per page unless `?limit=` says.
pub(crate) const DEFAULT_LIMIT: u32 = 500;

/// The most lines a page holds.
pub(crate) const MAX_LIMIT: u32 = 5_000;

/// What the query asks.
type Query = OutputPage;

/// `execution`, `after` and `limit`, each at most once, and nothing else.
fn query(text: &str) -> Result<Query, ApiError> {
    let invalid = |why: String| ApiError::from(Rejection::InvalidQuery(why));
    let mut q = Query { execution: None, after: 0, limit: DEFAULT_LIMIT };
    let mut seen = BTreeSet::new();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !seen.insert(key.to_owned()) {
            return Err(invalid(format!("`{key}` is given twice")));
        }
        match key {
            "execution" => {
                let id = value.replace("%2F", "/").replace("%2f", "/");
                if id.is_empty() || id.len() > 200 {
                    return Err(invalid("`execution` names an execution: its ID, or SLOT/GENERATION/ATTEMPT".into()));
                }
                q.execution = Some(id);
            }
            "after" => {
                q.after = value
                    .parse()
                    .ok()
                    .filter(|n: &i64| *n >= 0)
                    .ok_or_else(|| invalid(format!("`after` is a line's seq (0 or more), not \"{value}\"")))?;
            }
            "limit" => {
                q.limit = value.parse().ok().filter(|n| (1..=MAX_LIMIT).contains(n)).ok_or_else(|| {
                    invalid(format!("`limit` is a number of lines from 1 to {MAX_LIMIT}, not \"{value}\""))
                })?;
            }
            other => {
                return Err(invalid(format!(
                    "unknown query parameter \"{other}\"; the parameters are execution, after and limit"
                )));
            }
        }
    }
    Ok(q)
}

/// The application's jobs' output, a page after `?after=`.
pub(super) async fn logs(
    Extract(state): Extract<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    uri: axum::http::Uri,
) -> Response {
    respond(
        async {
            let q = query(uri.query().unwrap_or(""))?;
            let page =
                as_caller(&state, &headers, move |state, caller| applications::output(state, caller, &id, q)).await?;
            let dropped: Vec<_> = page
                .dropped
                .into_iter()
                .map(|d| {
                    json!({
                        "executionId": d.execution_id, "slot": d.slot, "generation": d.generation,
                        "attempt": d.attempt, "kept": d.kept, "dropped": d.dropped,
                    })
                })
                .collect();
            let lines: Vec<_> = page
                .lines
                .into_iter()
                .map(|l| {
                    json!({
                        "seq": l.seq, "executionId": l.execution_id, "slot": l.slot,
                        "generation": l.generation, "attempt": l.attempt, "part": l.part,
                        "at": rfc3339_ms(l.at), "line": l.line,
                    })
                })
                .collect();
            Ok(json_response(
                200,
                &json!({
                    "applicationId": page.application.application_id,
                    "lines": lines,
                    "dropped": dropped,
                    "next": page.next,
                    "more": page.more,
                }),
            ))
        }
        .await,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_is_bounded_and_says_what_is_wrong() {
        assert_eq!(query("").expect("empty"), Query { execution: None, after: 0, limit: DEFAULT_LIMIT });
        let q = query("execution=app_1%2F0%2F1%2F1&after=7&limit=10").expect("valid");
        assert_eq!(q, Query { execution: Some("app_1/0/1/1".into()), after: 7, limit: 10 });
        for (bad, says) in [
            ("limit=0", "from 1 to 5000"),
            ("limit=5001", "from 1 to 5000"),
            ("after=-1", "`after`"),
            ("after=1&after=2", "twice"),
            ("since=3", "unknown query parameter"),
        ] {
            let e = query(bad).expect_err(bad);
            assert_eq!(e.status, 400, "{bad}");
            assert!(e.message.contains(says), "{bad}: {}", e.message);
        }
    }
}
