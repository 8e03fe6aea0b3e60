//! Publishing from the console, as `svc policy publish` does, in two steps: a **preview** (the
//! publication's dry run, fenced on the active version read then: what would commit, its
//! version, status and digests, its warnings), then **confirm** with that same fence. A
//! manifest the layers refuse comes back with every diagnostic at its line; a fence another
//! publication moved shows the conflict and offers a fresh review. Publishing may pause the
//! application (with a reason); the overview resumes it. A viewer sees no form and is refused
//! if it posts anyway, as by the API.

use std::borrow::Cow;

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, Path, State as Extract};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;
use svc_web::page::{see_other, state};
use svc_web::{Markup, html};

use super::{Member, Refusal, Shared, answer, as_member, blocking, error_page, member, nav};
use crate::diagnostic::{Diagnostic, Severity};
use crate::service::http::rejection::ApiError;
use crate::service::operations::OperationError;
use crate::service::operations::applications;
use crate::service::operations::publish::{self, Asked, MAX_REASON_CHARS, PublishRequest, PublishResponse};
use crate::service::operations::refusal::Rejection;

/// The publish form's fields.
#[derive(Deserialize)]
pub(super) struct PublishForm {
    csrf: String,
    #[serde(default)]
    manifest: String,
    /// `preview` or `confirm`.
    action: String,
    /// The active version the preview was fenced on (confirm only).
    #[serde(default)]
    expected: Option<u64>,
    /// `on` when the publication pauses the application.
    #[serde(default)]
    pause: Option<String>,
    #[serde(default)]
    reason: String,
    /// The authored digest the preview showed (confirm only).
    #[serde(default)]
    reviewed: Option<String>,
}

/// What the form shows again after a refusal or a conflict.
struct Draft<'a> {
    manifest: &'a str,
    pause: bool,
    reason: &'a str,
}

pub(super) async fn form(Extract(state): Extract<Shared>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    answer(
        async {
            let member = member(&state, &headers).await?;
            let app_id = id.clone();
            let app =
                as_member(&state, &member, move |state, caller| applications::find(state, caller, &app_id)).await?;
            let page = member.page(format!("{id}: publish"), nav(Some(&id), "publish", member.can_publish()));
            if !member.can_publish() {
                return Ok(page.respond(StatusCode::OK, viewer_notice(&member)));
            }
            let draft = Draft { manifest: "", pause: false, reason: "" };
            let content = html! {
                p.muted { "Active version now: " (active_label(app.active_pointer_version)) "." }
                (editor(&id, &member, &draft))
            };
            Ok(page.respond(StatusCode::OK, content))
        }
        .await,
    )
}

fn viewer_notice(member: &Member) -> Markup {
    html! {
        p.notice role="status" {
            "A " (member.caller.role.as_str()) " token cannot publish; ask for a developer token."
        }
    }
}

fn active_label(version: u64) -> String {
    if version == 0 { "none".to_owned() } else { format!("version {version}") }
}

pub(super) async fn submit(
    Extract(state): Extract<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    form: Result<Form<PublishForm>, FormRejection>,
) -> Response {
    answer(
        async {
            let member = member(&state, &headers).await?;
            let Ok(Form(form)) = form else {
                return Ok(error_page(StatusCode::BAD_REQUEST, "the form arrived incomplete: reload the page"));
            };
            super::CONSOLE.from_own_page(&headers, &member.csrf, &form.csrf)?;
            let page = member.page(format!("{id}: publish"), nav(Some(&id), "publish", member.can_publish()));
            if !member.can_publish() {
                return Ok(page.respond(StatusCode::FORBIDDEN, viewer_notice(&member)));
            }
            // Browsers send a form's line breaks as CRLF; the manifest is read as written.
            let manifest = form.manifest.replace("\r\n", "\n");
            let weight = escaped_len(&manifest);
            if weight > MANIFEST_PAGE_BUDGET {
                // Every page stays under 200 KB: one that carries this manifest back (the editor,
                // the confirmation) would not.
                let problem = format!(
                    "this manifest takes {} KB in a page, more than the console's {} KB; publish it with `svc \
                     policy publish --app {id} --file FILE`",
                    weight.div_ceil(1000),
                    MANIFEST_PAGE_BUDGET / 1000
                );
                let empty = Draft { manifest: "", pause: false, reason: "" };
                return Ok(page.respond(StatusCode::PAYLOAD_TOO_LARGE, refused(&id, &member, &empty, &problem, &[])));
            }
            let draft = Draft { manifest: &manifest, pause: form.pause.as_deref() == Some("on"), reason: &form.reason };
            let pause_reason = match (draft.pause, form.reason.trim()) {
                (false, _) => None,
                (true, r) if !r.is_empty() && r.chars().count() <= MAX_REASON_CHARS => Some(r.to_owned()),
                (true, _) => {
                    let problem = format!("a pause needs a reason of 1 to {MAX_REASON_CHARS} characters");
                    return Ok(page.respond(StatusCode::BAD_REQUEST, refused(&id, &member, &draft, &problem, &[])));
                }
            };
            let confirm = form.action == "confirm";
            let expected = match (confirm, form.expected) {
                (true, Some(n)) => n,
                // The preview is fenced on the active version it reads now.
                _ => {
                    let app_id = id.clone();
                    as_member(&state, &member, move |state, caller| applications::find(state, caller, &app_id))
                        .await?
                        .active_pointer_version
                }
            };
            let request = PublishRequest {
                manifest: Cow::Owned(manifest.clone()),
                dry_run: !confirm,
                pause_reason,
                expected_active_pointer_version: Some(expected),
                // The confirm publishes what was previewed, or nothing (review finding: the
                // manifest makes a round trip through the page, whose parser may change it).
                reviewed_digest: form.reviewed.filter(|_| confirm),
            };
            let outcome = publish::publish(&state, member.caller.clone(), id.clone(), Asked::Request(request)).await;
            Ok(match outcome {
                Ok(done) if confirm => {
                    see_other(&format!("/console/apps/{id}?published={}", done.response.policy_version))
                }
                Ok(preview) => {
                    page.respond(StatusCode::OK, preview_view(&id, &member, &draft, &preview.response, expected))
                }
                Err(OperationError::Refused(
                    conflict @ (Rejection::ActivePointerVersionConflict { .. } | Rejection::ManifestChanged),
                )) => page.respond(StatusCode::CONFLICT, refused(&id, &member, &draft, &conflict.to_string(), &[])),
                Err(e) => match ApiError::from(e) {
                    e if e.status == 500 => return Err(Refusal::from(e)),
                    e => {
                        let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
                        let diagnostics = e.diagnostics.unwrap_or_default();
                        page.respond(status, refused(&id, &member, &draft, &e.message, &diagnostics))
                    }
                },
            })
        }
        .await,
    )
}

/// The most a manifest may take in a page, escaped: a page that carries it back (the editor
/// of a refused manifest, the preview's confirmation) stays under 200 KB with its diagnostics
/// (at most 100 rows of at most 160 source characters).
const MANIFEST_PAGE_BUDGET: usize = 96_000;

/// The bytes `text` takes in a page once escaped (maud escapes `&`, `<`, `>` and `"`).
fn escaped_len(text: &str) -> usize {
    text.bytes()
        .map(|b| match b {
            b'&' => 5,
            b'<' | b'>' => 4,
            b'"' => 6,
            _ => 1,
        })
        .sum()
}

/// The form, with the manifest as it was and a file picker that fills it.
fn editor(id: &str, member: &Member, draft: &Draft<'_>) -> Markup {
    html! {
        form.stack.wide method="post" action={ "/console/apps/" (id) "/publish" } {
            input type="hidden" name="csrf" value=(member.csrf);
            label for="manifest" { "Manifest (YAML or JSON)" }
            textarea #manifest name="manifest" rows="18" spellcheck="false" required { (draft.manifest) }
            label for="manifest-file" { "Or read it from a file" }
            input #manifest-file type="file" accept=".yaml,.yml,.json" data-file-into="manifest";
            div.check {
                @if draft.pause {
                    input #pause type="checkbox" name="pause" value="on" checked;
                } @else {
                    input #pause type="checkbox" name="pause" value="on";
                }
                label for="pause" { "Pause the application once published" }
            }
            label for="reason" { "Pause reason (1 to 500 characters)" }
            input #reason type="text" name="reason" maxlength="500" value=(draft.reason);
            button #preview type="submit" name="action" value="preview" { "Preview" }
        }
    }
}

/// A refused manifest (every diagnostic at its line), a conflict, or a bad pause: the message,
/// then the form again with what was sent.
fn refused(id: &str, member: &Member, draft: &Draft<'_>, message: &str, diagnostics: &[Diagnostic]) -> Markup {
    html! {
        p.notice.error role="alert" #publish-problem { (svc_web::text::prose(message)) }
        @if !diagnostics.is_empty() { (diagnostics_table(draft.manifest, diagnostics)) }
        (editor(id, member, draft))
    }
}

/// Rows the diagnostics table shows (the validator reports up to 1,000).
const DIAGNOSTIC_ROWS: usize = 100;

/// Characters of a source line shown around a diagnostic's column.
const SOURCE_WINDOW: usize = 160;

/// The part of `line` around `column` (1-based, in characters), at most [`SOURCE_WINDOW`]
/// characters, with `…` where it was cut. Review finding: a one-line manifest of 900 KB with
/// 1,000 diagnostics on that line made a 900 MB page when each row echoed the whole line.
fn excerpt(line: &str, column: Option<u32>) -> String {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= SOURCE_WINDOW {
        return line.to_owned();
    }
    let at = column.map_or(0, |c| (c as usize).saturating_sub(1)).min(chars.len());
    let start = at.saturating_sub(SOURCE_WINDOW / 2).min(chars.len() - SOURCE_WINDOW);
    let end = start + SOURCE_WINDOW;
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.extend(&chars[start..end]);
    if end < chars.len() {
        out.push('…');
    }
    out
}

fn diagnostics_table(text: &str, diagnostics: &[Diagnostic]) -> Markup {
    let lines: Vec<&str> = text.lines().collect();
    let shown = &diagnostics[..diagnostics.len().min(DIAGNOSTIC_ROWS)];
    html! {
        div.table-wrap {
            table #diagnostics {
                caption.muted { "What the validator found, at its line" }
                thead { tr { th scope="col" { "Line" } th scope="col" { "Where" } th scope="col" { "Problem" } } }
                tbody {
                    @for d in shown {
                        tr {
                            td {
                                @if let Some(line) = d.line {
                                    (line) @if let Some(column) = d.column { ":" (column) }
                                }
                            }
                            td { code { (d.pointer) } }
                            td.why {
                                (state(d.severity.as_str())) " " (svc_web::text::prose(&d.message)) " (" code { (d.code.as_str()) } ")"
                                @if let Some(source) = d.line.and_then(|l| lines.get((l as usize).saturating_sub(1))) {
                                    pre.source { (excerpt(source, d.column)) }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if diagnostics.len() > shown.len() {
            p.muted { "The first " (shown.len()) " of " (diagnostics.len()) " are shown: fix these, then preview again." }
        }
    }
}

/// What the dry run would commit, and the form that commits it on the same fence.
fn preview_view(id: &str, member: &Member, draft: &Draft<'_>, p: &PublishResponse, fence: u64) -> Markup {
    let warnings: Vec<&Diagnostic> = p.diagnostics.iter().filter(|d| d.severity == Severity::Warning).collect();
    html! {
        p.notice role="status" #preview-summary {
            "Nothing is committed yet. Publishing would make version " strong { (p.policy_version) }
            " active, with the application " strong { (p.status) } "."
        }
        dl.facts {
            dt { "Version" } dd #preview-version { (p.policy_version) }
            dt { "Status after" } dd { (state(p.status)) }
            dt { "Fenced on" } dd #preview-fence { (active_label(fence)) " (the active version now; publishing checks it still is)" }
            dt { "Policy digest" } dd { (svc_web::text::id(&p.policy_digest)) }
            dt { "Authored digest" } dd { (svc_web::text::id(&p.authored_digest)) }
            dt { "Warnings" } dd { (warnings.len()) }
        }
        @if !warnings.is_empty() {
            (diagnostics_table(draft.manifest, &p.diagnostics))
        }
        form method="post" action={ "/console/apps/" (id) "/publish" } {
            input type="hidden" name="csrf" value=(member.csrf);
            input type="hidden" name="manifest" value=(draft.manifest);
            input type="hidden" name="expected" value=(fence);
            input type="hidden" name="reviewed" value=(p.authored_digest);
            @if draft.pause {
                input type="hidden" name="pause" value="on";
                input type="hidden" name="reason" value=(draft.reason);
            }
            button #confirm type="submit" name="action" value="confirm" { "Publish version " (p.policy_version) }
        }
        p { a href={ "/console/apps/" (id) "/publish" } { "Start over" } }
    }
}

/// The resume form's fields.
#[derive(Deserialize)]
pub(super) struct ResumeForm {
    csrf: String,
    #[serde(default)]
    reason: String,
}

pub(super) async fn resume(
    Extract(state): Extract<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
    form: Result<Form<ResumeForm>, FormRejection>,
) -> Response {
    answer(
        async {
            let member = member(&state, &headers).await?;
            let Ok(Form(form)) = form else {
                return Ok(error_page(StatusCode::BAD_REQUEST, "the form arrived incomplete: reload the page"));
            };
            super::CONSOLE.from_own_page(&headers, &member.csrf, &form.csrf)?;
            let (resume_state, caller, app_id) = (state.clone(), member.caller.clone(), id.clone());
            let done =
                blocking(move || Ok(applications::resume(&resume_state, &caller, &app_id, &form.reason))).await?;
            match done.map_err(ApiError::from) {
                Ok(_) => Ok(see_other(&format!("/console/apps/{id}?resumed=1"))),
                Err(e) if e.status == 500 => Err(Refusal::from(e)),
                Err(e) => Ok(error_page(StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST), &e.message)),
            }
        }
        .await,
    )
}

/// The resume form the overview shows for a paused application (a developer or more).
pub(super) fn resume_form(id: &str, member: &Member) -> Markup {
    html! {
        form.stack method="post" action={ "/console/apps/" (id) "/resume" } {
            input type="hidden" name="csrf" value=(member.csrf);
            label for="resume-reason" { "Why resume (1 to 500 characters)" }
            input #resume-reason type="text" name="reason" maxlength="500" required;
            button #resume type="submit" { "Resume" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_diagnostic_shows_its_line() {
        let text = "schema: svc.application-manifest\nschemaVersion: 5\nbogus: 1\n";
        let report = crate::validate(text.as_bytes());
        assert!(!report.is_valid());
        let html = diagnostics_table(text, &report.diagnostics).into_string();
        assert!(html.contains("<pre class=\"source\">bogus: 1</pre>"), "{html}");
        assert!(html.contains("<code>/bogus</code>"), "{html}");
    }
}
