//! An application's policy versions: the list (newest first, the active one marked), each
//! version's effective policy and authored manifest, and a field-level diff between any two
//! (`?a=1&b=2`, of the effective policies or, with `of=authored`, of the manifests).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State as Extract};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use serde_json::Value;
use svc_web::{Markup, html};

use super::diff::{Change, diff};
use super::{Shared, answer, as_member, member, nav, not_found};
use crate::plural;
use crate::service::operations::OperationError;
use crate::service::operations::applications;
use crate::service::operations::refusal::Rejection;
use crate::service::store::PolicyVersion;

/// The compare form's fields.
#[derive(Deserialize, Default)]
pub(super) struct Compare {
    a: Option<u64>,
    b: Option<u64>,
    /// `policy` (default) or `authored`.
    of: Option<String>,
}

fn pretty(json: &str) -> String {
    serde_json::from_str::<Value>(json).ok().and_then(|v| serde_json::to_string_pretty(&v).ok()).unwrap_or_default()
}

pub(super) async fn list(
    Extract(state): Extract<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    query: Result<Query<Compare>, QueryRejection>,
) -> Response {
    answer(
        async {
            let member = member(&state, &headers).await?;
            let compare = query.map(|q| q.0).unwrap_or_default();
            let app_id = id.clone();
            let (app, versions) =
                as_member(&state, &member, move |state, caller| applications::versions(state, caller, &app_id)).await?;
            let active = app.active_pointer_version;
            let page = member.page(format!("{id}: versions"), nav(Some(&id), "versions", member.can_publish()));
            Ok(page.respond(StatusCode::OK, list_view(&id, &versions, active, &compare)))
        }
        .await,
    )
}

fn list_view(id: &str, versions: &[PolicyVersion], active: u64, compare: &Compare) -> Markup {
    let newest_first: Vec<&PolicyVersion> = versions.iter().rev().collect();
    let (a, b) = match (compare.a, compare.b) {
        (Some(a), Some(b)) => (Some(a), Some(b)),
        _ => (versions.len().checked_sub(2).map(|i| versions[i].version), versions.last().map(|v| v.version)),
    };
    let authored = compare.of.as_deref() == Some("authored");
    html! {
        @if versions.is_empty() {
            p { "No version published yet." }
        } @else {
            div.table-wrap {
                table #versions {
                    thead { tr { th scope="col" { "Version" } th scope="col" { "Schema" } th scope="col" { "Policy digest" } th scope="col" { "Published by" } } }
                    tbody {
                        @for v in &newest_first {
                            tr {
                                td {
                                    a href={ "/console/apps/" (id) "/versions/" (v.version) } { (v.version) }
                                    @if v.version == active { " " span.state.state-active { "active" } }
                                }
                                td { "V" (v.schema_version) }
                                td { (svc_web::text::id(&v.policy_digest)) }
                                td { (v.published_by) }
                            }
                        }
                    }
                }
            }
            h2 { "Compare two versions" }
            form.inline method="get" action={ "/console/apps/" (id) "/versions" } {
                label for="compare-a" { "From" }
                select #compare-a name="a" { @for v in &newest_first { (option(v.version, a)) } }
                label for="compare-b" { "to" }
                select #compare-b name="b" { @for v in &newest_first { (option(v.version, b)) } }
                label for="compare-of" { "of" }
                select #compare-of name="of" {
                    @if authored { option value="policy" { "the effective policies" } option value="authored" selected { "the authored manifests" } }
                    @else { option value="policy" selected { "the effective policies" } option value="authored" { "the authored manifests" } }
                }
                button #compare type="submit" { "Compare" }
            }
            @if let (Some(a), Some(b), true) = (a, b, compare.a.is_some()) {
                (diff_view(versions, a, b, authored))
            }
        }
    }
}

fn option(version: u64, selected: Option<u64>) -> Markup {
    html! {
        @if selected == Some(version) { option value=(version) selected { (version) } }
        @else { option value=(version) { (version) } }
    }
}

fn diff_view(versions: &[PolicyVersion], a: u64, b: u64, authored: bool) -> Markup {
    let find = |n: u64| versions.iter().find(|v| v.version == n);
    let (Some(va), Some(vb)) = (find(a), find(b)) else {
        return html! { p.notice.error role="alert" { "Version " (a) " or " (b) " does not exist." } };
    };
    let read = |v: &PolicyVersion| -> Value {
        serde_json::from_str(if authored { &v.authored } else { &v.policy }).unwrap_or(Value::Null)
    };
    let (changes, total) = diff(&read(va), &read(vb));
    let what = if authored { "authored manifests" } else { "effective policies" };
    html! {
        h2 #diff-title { "Version " (a) " to version " (b) ": " (plural(u64::try_from(total).unwrap_or(u64::MAX), "field")) @if total == 1 { " differs" } @else { " differ" } " (" (what) ")" }
        @if changes.is_empty() {
            p.muted { "They are the same." }
        } @else {
            div.table-wrap {
                table #diff {
                    thead { tr { th scope="col" { "Field" } th scope="col" { "Version " (a) } th scope="col" { "Version " (b) } } }
                    tbody { @for c in &changes { (row(c)) } }
                }
            }
            @if total > changes.len() { p.muted { "The first " (changes.len()) " are shown." } }
        }
    }
}

fn row(c: &Change) -> Markup {
    html! {
        tr {
            td { code { @if c.pointer.is_empty() { "(the document)" } @else { (c.pointer) } } }
            td { @if let Some(v) = &c.before { code { (v) } } @else { span.muted { "absent" } } }
            td { @if let Some(v) = &c.after { code { (v) } } @else { span.muted { "absent" } } }
        }
    }
}

pub(super) async fn show(
    Extract(state): Extract<Shared>,
    headers: HeaderMap,
    Path((id, n)): Path<(String, String)>,
) -> Response {
    answer(
        async {
            let member = member(&state, &headers).await?;
            let Ok(version) = n.parse::<u64>() else { return Ok(not_found("no such version")) };
            let app_id = id.clone();
            let found = as_member(&state, &member, move |state, caller| {
                match applications::version(state, caller, &app_id, &version.to_string()) {
                    Ok((app, v)) => Ok(Some((v, app.active_pointer_version))),
                    Err(OperationError::Refused(Rejection::PolicyVersionNotFound { .. })) => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await?;
            let Some((v, active)) = found else { return Ok(not_found("no such version of this application")) };
            let page = member.page(format!("{id}: version {version}"), nav(Some(&id), "versions", member.can_publish()));
            let content = html! {
                dl.facts {
                    dt { "Version" } dd { (v.version) @if v.version == active { " " span.state.state-active { "active" } } }
                    dt { "Schema version" } dd { (v.schema_version) }
                    dt { "Policy digest" } dd { (svc_web::text::id(&v.policy_digest)) }
                    dt { "Authored digest" } dd { (svc_web::text::id(&v.authored_digest)) }
                    dt { "Published by" } dd { (v.published_by) }
                }
                h2 { "Effective policy" }
                // Scrollable: focusable, so a keyboard can scroll it (axe: scrollable-region-focusable).
                pre.document #policy tabindex="0" aria-label="Effective policy" { (pretty(&v.policy)) }
                h2 { "Authored manifest" }
                pre.document #authored tabindex="0" aria-label="Authored manifest" { (pretty(&v.authored)) }
            };
            Ok(page.respond(StatusCode::OK, content))
        }
        .await,
    )
}
