//! What each console view shows, as markup (escaped by `maud`): the sign-in form, the
//! applications list, an application's overview, and its executions.

use svc_web::page::state;
use svc_web::text::{id, prose, repeated, runs};
use svc_web::{Markup, html};

use crate::plural;
use crate::projection::{Convergence, State as Verdict};
use crate::service::store::{Activity, Application, PolicyVersion};

pub(super) fn sign_in(problem: Option<&str>) -> Markup {
    html! {
        @if let Some(problem) = problem {
            p.notice.error role="alert" id="sign-in-problem" { (prose(problem)) }
        }
        form.stack method="post" action="/console/sign-in" {
            label for="token" { "API token" }
            input #token type="password" name="token" autocomplete="off" required
                aria-describedby="token-help";
            p.muted #token-help { "The token " code { "svc admin token create" } " printed for you. It is exchanged for a session (30 minutes unused, 12 hours at most) and kept nowhere: not in this browser, not in a cookie." }
            button type="submit" { "Sign in" }
        }
    }
}

fn verdict(v: &Verdict) -> Markup {
    html! {
        (state(&v.state))
        @if let Some(reason) = &v.reason {
            " " span.muted.why { (prose(&reason.message)) " (" code { (reason.code) } ")" }
        }
    }
}

/// Where a page of the applications list is.
pub(super) struct ListPage {
    /// From 1.
    pub(super) number: usize,
    pub(super) per_page: usize,
    /// Applications in all.
    pub(super) total: usize,
}

pub(super) fn applications(organization: &str, rows: &[(Application, Verdict)], list: &ListPage) -> Markup {
    let first = (list.number - 1).saturating_mul(list.per_page) + 1;
    let more = list.number.saturating_mul(list.per_page) < list.total;
    html! {
        p.muted {
            "Organization " strong { (organization) } ": " (plural(u64::try_from(list.total).unwrap_or(u64::MAX), "application")) "."
            @if list.total > list.per_page && !rows.is_empty() { " Showing " (first) " to " (first + rows.len() - 1) "." }
        }
        @if list.number > 1 || more {
            nav aria-label="Pages" {
                ul {
                    @if list.number > 1 { li { a href={ "/console/apps?page=" (list.number - 1) } { "Previous page" } } }
                    @if more { li { a #next-page href={ "/console/apps?page=" (list.number + 1) } { "Next page" } } }
                }
            }
        }
        @if rows.is_empty() && list.total > 0 {
            p { "No application on this page: " a href="/console/apps" { "back to the first" } "." }
        } @else if rows.is_empty() {
            p { (prose("No application yet: `svc app create ID`, then `svc policy publish --app ID --file manifest.yaml`.")) }
        } @else {
            div.table-wrap {
                table {
                    caption.muted { "Applications, their status, active version and whether what runs matches it" }
                    thead { tr { th scope="col" { "Application" } th scope="col" { "Status" } th scope="col" { "Active version" } th scope="col" { "Convergence" } } }
                    tbody {
                        @for (app, v) in rows {
                            tr {
                                td { a href={ "/console/apps/" (app.application_id) } { (app.application_id) } }
                                td { (state(app.status.as_str())) }
                                td { @if app.active_pointer_version == 0 { span.muted { "none" } } @else { (app.active_pointer_version) } }
                                td { (verdict(v)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

pub(super) fn overview(
    app: &Application,
    v: &Verdict,
    active: Option<&PolicyVersion>,
    activity: &[Activity],
    notice: Option<&str>,
    resume: Option<Markup>,
) -> Markup {
    html! {
        @if let Some(notice) = notice { p.notice role="status" #notice { (prose(notice)) } }
        dl.facts {
            dt { "Status" } dd #status { (state(app.status.as_str())) }
            @if let Some(reason) = &app.pause_reason {
                dt { "Pause reason" } dd { (prose(reason)) }
            }
            dt { "Convergence" } dd #convergence { (verdict(v)) }
            dt { "Active version" }
            dd { @if let Some(p) = active { (p.version) " (schema version " (p.schema_version) ")" } @else { span.muted { "none published" } } }
            @if let Some(p) = active {
                dt { "Policy digest" } dd { (id(&p.policy_digest)) }
                dt { "Authored digest" } dd { (id(&p.authored_digest)) }
            }
            dt { "Application UID" } dd { (id(&app.application_uid)) }
            @if app.settled { dt { "Settled" } dd { "yes: its once execution ran" } }
        }
        @if let Some(form) = resume { h2 { "Resume" } (form) }
        p { a href={ "/console/apps/" (app.application_id) "/executions" } { "Executions, live" } }
        h2 { "Recent activity" span.muted { " (the newest 20)" } }
        @if activity.is_empty() {
            p.muted { "Nothing yet." }
        } @else {
            div.table-wrap {
                table {
                    thead { tr { th scope="col" { "When" } th scope="col" { "What" } th scope="col" { "Version" } th scope="col" { "Who" } th scope="col" { "Reason" } } }
                    tbody {
                        // The same action, version, member and reason in a row: one row, counted.
                        @for run in runs(activity, |a| Some((&a.action, a.policy_version, &a.actor, &a.reason))) {
                            @let a = run.first;
                            tr {
                                td { span.time { (a.at) } (repeated(&run, |a| a.at.clone())) }
                                td { (a.action) }
                                td { @if let Some(n) = a.policy_version { (n) } }
                                td { (a.actor) }
                                td.why { @if let Some(r) = &a.reason { (prose(r)) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The executions page: the live region (swapped by the script every two seconds).
pub(super) fn executions_page(id: &str, live: Markup) -> Markup {
    html! {
        p.live-status.muted #live-status aria-live="polite" { "updates every 2 seconds" }
        div #executions data-refresh={ "/console/apps/" (id) "/executions/live" } data-every="2000" data-status="live-status" {
            (live)
        }
    }
}

/// The live region: the verdict, each slot's current job, recent executions and their
/// newest output.
pub(super) fn executions(c: &Convergence, output: &[super::output::ExecutionOutput]) -> Markup {
    html! {
        dl.facts {
            dt { "Convergence" } dd #verdict { (verdict(&c.convergence)) }
            @if let Some(d) = &c.desired {
                dt { "Desired" } dd { "version " (d.policy_version) ", " (plural(u64::from(d.slots), "slot")) ", " (d.execution) }
            }
            @if let Some(next) = &c.next { dt { "Next decision" } dd { (next.at) } }
        }
        h2 { "Slots" }
        div.table-wrap {
            table #slots {
                thead { tr { th scope="col" { "Slot" } th scope="col" { "Generation" } th scope="col" { "Version" } th scope="col" { "State" } th scope="col" { "Processor" } th scope="col" { "Window" } th scope="col" { "Restarts" } } }
                tbody {
                    @for s in &c.slots {
                        tr {
                            td { (s.slot) } td { (s.generation) } td { (s.policy_version) }
                            td { (state(&s.state)) }
                            td { @if let Some(p) = &s.processor_id { (id(p)) } }
                            td { @if let (Some(a), Some(b)) = (&s.window_start, &s.window_end) { (a) " to " (b) } }
                            td { (s.restarts) }
                        }
                    }
                }
            }
        }
        h2 { "Recent executions" }
        @if c.recent.is_empty() {
            p.muted #recent-empty { "None yet." }
        } @else {
            div.table-wrap {
                table.cards #recent {
                    thead { tr { th scope="col" { "Execution" } th scope="col" { "State" } th scope="col" { "Version" } th scope="col" { "Processor" } th scope="col" { "Changed" } th scope="col" { "Why" } } }
                    tbody {
                        // Executions refused (or ended) alike in a row: one row, counted, with the
                        // newest's ID and the first and last time (six refused launches are one).
                        @for run in runs(&c.recent, |e| e.reason.as_ref().map(|r| (&e.state, e.policy_version, &e.processor_id, &r.code, &r.message))) {
                            @let e = run.first;
                            tr {
                                td data-label="Execution" { (id(&e.execution_id)) }
                                td data-label="State" { (state(&e.state)) }
                                td data-label="Version" { (e.policy_version) }
                                td data-label="Processor" { @if let Some(p) = &e.processor_id { (id(p)) } }
                                td data-label="Changed" { span.time { (e.changed_at) } (repeated(&run, |e| e.changed_at.clone())) }
                                td.why data-label="Why" { @if let Some(r) = &e.reason { (prose(&r.message)) " (" code { (r.code) } ")" } }
                            }
                        }
                    }
                }
            }
        }
        (super::output::section(&c.application_id, output))
    }
}
