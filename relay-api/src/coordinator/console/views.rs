//! What each ingress console view shows, as markup (escaped by `maud`).

use svc_web::page::state;
use svc_web::text::{id, prose, repeated, runs};
use svc_web::{Markup, html};

use svc_execution::money::{relative, usd, usd_per};

use crate::coordinator::model::{
    Balance, CustomerHostname, Deployment, Funding, HostnameState, LedgerEntry, LogEntry, Session, Transition,
    ValidationRecord,
};
use crate::hint::Hint;

/// A store time (Unix milliseconds) as the console writes it.
pub(super) fn at(ms: i64) -> String {
    manifest_core::projection::rfc3339_ms(u64::try_from(ms).unwrap_or(0))
}

pub(super) fn sign_in(problem: Option<&str>) -> Markup {
    html! {
        @if let Some(problem) = problem {
            p.notice.error role="alert" #sign-in-problem { (prose(problem)) }
        }
        form.stack method="post" action="/console/sign-in" {
            label for="token" { "Customer token" }
            input #token type="password" name="token" autocomplete="off" required aria-describedby="token-help";
            p.muted #token-help { (prose("The token `svc relay admin token` (or `svc ingress demo`) printed for your organization. It is exchanged for a session (30 minutes unused, 12 hours at most) and kept nowhere: not in this browser, not in a cookie.")) }
            button type="submit" { "Sign in" }
        }
    }
}

pub(super) fn deployments(organization: &str, list: &[Deployment]) -> Markup {
    html! {
        p.muted { "Organization " strong { (organization) } ": " (manifest_core::plural(u64::try_from(list.len()).unwrap_or(u64::MAX), "deployment")) ", stopped ones included." }
        @if list.is_empty() {
            p { (prose("No deployment yet: `svc ingress deploy` in a project's folder.")) }
        } @else {
            div.table-wrap {
                table #deployments {
                    caption.muted { "Deployments, newest first" }
                    thead { tr { th scope="col" { "Project" } th scope="col" { "State" } th scope="col" { "Revision" } th scope="col" { "URL" } th scope="col" { "Deployment" } } }
                    tbody {
                        @for d in list {
                            tr {
                                td { a href={ "/console/deployments/" (d.id) } { (d.project) } }
                                td { (state(d.state.as_str())) }
                                td { (d.revision) }
                                td.wrap { @if d.state.is_terminal() { span.muted { (d.url) } } @else { a href=(d.url) { (d.url) } } }
                                td { (id(&d.id)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Everything a deployment's page shows.
pub(super) struct DeploymentView {
    pub(super) deployment: Deployment,
    pub(super) balance: Balance,
    /// How long its money lasts, and the time it was read at (Unix ms).
    pub(super) funding: Funding,
    pub(super) now: i64,
    /// A new period's price and length (what the Fund form buys).
    pub(super) price_micros: u64,
    pub(super) period_secs: u64,
    /// How many periods the Fund form offers (the project's `spend.fundPeriods`).
    pub(super) fund_periods: u64,
    pub(super) hints: Vec<Hint>,
    pub(super) hostnames: Vec<CustomerHostname>,
    pub(super) validations: Vec<ValidationRecord>,
    pub(super) transitions: Vec<Transition>,
    pub(super) logs: Vec<LogEntry>,
    pub(super) sessions: Vec<Session>,
    pub(super) ledger: Vec<LedgerEntry>,
    /// Whether customer hostnames can be added here (the relay issues ACME certificates).
    pub(super) adds_hostnames: bool,
}

/// A deployment's page. Its forms and live region name the deployment by its ID, never by the
/// project's name (review finding: a redeploy in between would make Stop stop the new one).
pub(super) fn deployment(v: &DeploymentView, done: Option<&str>, csrf: &str) -> Markup {
    let d = &v.deployment;
    html! {
        @if let Some(done) = done { p.notice role="status" #notice { (prose(done)) } }
        dl.facts {
            dt { "State" } dd #state { (state(d.state.as_str())) " " span.muted.why { (prose(&d.state_reason)) } }
            dt { "URL" } dd { a href=(d.url) { (d.url) } }
            dt { "Revision" } dd { (d.revision) }
            dt { "Balance" } dd #balance { (usd(v.funding.remaining_micros)) " left " span.muted { "(" (usd(v.balance.funded_micros)) " funded, " (usd(v.balance.spent_micros)) " spent, " (usd(v.balance.refundable_micros)) " refundable)" } }
            dt { "Burn rate" } dd #burn-rate { @if v.funding.burn_micros_per_day > 0 { (usd(v.funding.burn_micros_per_day)) " per day" } @else { "nothing while no job runs" } " " span.muted { "(" (usd_per(v.price_micros, v.period_secs)) ")" } }
            dt { "Funds run out" } dd #runs-out { @if let Some(end) = v.funding.runs_out_at { (relative(v.now, end)) " " span.muted { "(" (at(end)) ")" } } @else { span.muted { "not counting: no funded period is running" } } }
            dt { "Deployment" } dd { (id(&d.id)) }
            dt { "Project digest" } dd { (id(&d.project_digest)) }
        }
        h2 { "What to fix" }
        @if v.hints.is_empty() {
            p.muted #hints-none { "Nothing: the deployment is " (d.state.as_str()) "." }
        } @else {
            ol #hints {
                @for h in &v.hints {
                    li.why {
                        strong { (prose(&h.problem)) } " " code { (h.code) }
                        @if let Some(host) = &h.hostname { " (" (host) ")" }
                        br;
                        (prose(&h.fix))
                        @if let Some(record) = &h.record {
                            div.record {
                                code { (record.zone_line()) }
                                " "
                                button.plain type="button" data-copy=(record.zone_line()) aria-label={ "Copy the " (record.kind) " record for " (record.name) } { "Copy" }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Hostnames" }
        div.table-wrap {
            table #hostnames {
                thead { tr { th scope="col" { "Hostname" } th scope="col" { "State" } th scope="col" { "Checked" } th scope="col" { "Actions" } } }
                tbody {
                    tr { td { (d.canonical_hostname) } td { "canonical" } td {} td {} }
                    @for h in &v.hostnames {
                        tr {
                            td { (h.hostname) }
                            td { (state(h.state.as_str())) }
                            td { @if let Some(t) = h.checked_at { (at(t)) } }
                            td {
                                @if h.state != HostnameState::Removed && !d.state.is_terminal() {
                                    div.actions {
                                        form method="post" action={ "/console/deployments/" (d.id) "/hostnames/" (h.hostname) "/verify" } {
                                            input type="hidden" name="csrf" value=(csrf);
                                            button.plain.verify type="submit" aria-label={ "Check DNS of " (h.hostname) } { "Check DNS" }
                                        }
                                        form method="post" action={ "/console/deployments/" (d.id) "/hostnames/" (h.hostname) "/remove" } {
                                            input type="hidden" name="csrf" value=(csrf);
                                            button.plain.remove type="submit" aria-label={ "Remove " (h.hostname) } { "Remove" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @let pending: Vec<&CustomerHostname> = v.hostnames.iter().filter(|h| h.state == HostnameState::PendingDns).collect();
        @if !pending.is_empty() && !d.state.is_terminal() {
            div #records {
                h3 { "DNS records to create" }
                p.muted { "At your DNS provider, for each hostname: the CNAME routes it here, the TXT proves it is yours. Then Check DNS." }
                @for h in pending {
                    @for record in crate::dns::required_records(&h.hostname, &d.canonical_hostname, &h.token) {
                        div.record {
                            code { (record.zone_line()) }
                            " "
                            button.plain type="button" data-copy=(record.zone_line()) aria-label={ "Copy the " (record.kind) " record for " (record.name) } { "Copy" }
                        }
                    }
                }
            }
        }
        @if !d.state.is_terminal() {
            @if v.adds_hostnames {
                form.inline #add-hostname method="post" action={ "/console/deployments/" (d.id) "/hostnames" } {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="hostname" { "Add a hostname you own" }
                    input #hostname type="text" name="hostname" required placeholder="shop.example.com" autocomplete="off" inputmode="url" aria-describedby="hostname-help";
                    button type="submit" { "Add" }
                    p.muted #hostname-help { "The DNS records it needs (a CNAME to " (d.canonical_hostname) " and a TXT proof) then appear above it." }
                }
            } @else {
                p.muted #hostnames-acme { (prose("Hostnames of your own need certificates from a public CA: this relay runs with its development CA (`svc relay serve --acme-directory URL` enables them).")) }
            }
        }
        h2 { "Validations" }
        @if v.validations.is_empty() {
            p.muted { "None yet." }
        } @else {
            div.table-wrap {
                table #validations {
                    thead { tr { th scope="col" { "When" } th scope="col" { "Hostname" } th scope="col" { "Result" } th scope="col" { "Validator" } } }
                    tbody {
                        @for r in &v.validations {
                            tr {
                                td { (at(r.at)) } td { (r.hostname) }
                                td { @if r.passed { (state("passed")) } @else { (state("failed")) } }
                                td { (r.validator_version) }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Funds" }
        div.table-wrap {
            table #sessions {
                caption.muted { "Funded periods (sessions); what a period did not serve is refundable once it settles" }
                thead { tr { th scope="col" { "Session" } th scope="col" { "State" } th scope="col" { "Price" } th scope="col" { "Refundable" } th scope="col" { "Refunded" } th scope="col" { "Action" } } }
                tbody {
                    @for s in &v.sessions {
                        tr {
                            td { (id(&s.id)) } td { (state(s.state.as_str())) } td { (usd(s.price_micros)) }
                            td { (usd(s.refundable_micros)) } td { (usd(s.refunded_micros)) }
                            td {
                                @if s.refundable_micros > 0 {
                                    form method="post" action={ "/console/deployments/" (d.id) "/sessions/" (s.id) "/refund" } {
                                        input type="hidden" name="csrf" value=(csrf);
                                        button.plain.refund type="submit" aria-label={ "Refund " (usd(s.refundable_micros)) " of session " (s.id) } { "Refund" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if !d.state.is_terminal() {
            form.inline #fund method="post" action={ "/console/deployments/" (d.id) "/fund" } {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="funded" value=(v.balance.funded_micros);
                label for="periods" { "Fund more periods" }
                input #periods type="number" name="periods" min="1" max="10000" step="1" required value=(v.fund_periods) aria-describedby="fund-help";
                button #fund-submit type="submit" { "Fund" }
                p.muted #fund-help { "Each period is " (usd_per(v.price_micros, v.period_secs)) ", charged when it starts; what a period does not serve becomes refundable. Funding stops at the project's spend ceiling (" (usd(d.ceiling_micros)) ")." }
            }
        }
        h2 { "Ledger" span.muted { " (the newest 100 entries; " code { "svc ingress ledger" } " lists them all)" } }
        div.table-wrap {
            table #ledger {
                thead { tr { th scope="col" { "When" } th scope="col" { "Entry" } th scope="col" { "Amount" } th scope="col" { "Note" } } }
                tbody {
                    @for e in &v.ledger {
                        tr { td { span.time { (at(e.at)) } } td { (e.kind.as_str()) } td { (usd(e.amount_micros)) } td.why { (prose(&e.note)) } }
                    }
                }
            }
        }
        @if !d.state.is_terminal() {
            h2 { "Stop" }
            form method="post" action={ "/console/deployments/" (d.id) "/stop" } {
                input type="hidden" name="csrf" value=(csrf);
                p.muted { "Stopping ends the job and the route; what its funds did not serve becomes refundable." }
                button #stop type="submit" { "Stop the deployment" }
            }
        }
        h2 { "Timeline" span.muted { " (the newest 50 changes)" } }
        (timeline(&v.transitions))
        h2 #logs-title { "Logs" }
        p.live-status.muted #logs-status aria-live="polite" { "the newest 100 lines; updates every 2 seconds" }
        div #logs data-refresh={ "/console/deployments/" (d.id) "/logs/live" } data-every="2000" data-status="logs-status" {
            (logs(&v.logs))
        }
    }
}

/// The state timeline, newest first: the same state for the same reason in a row (a launch
/// refused six times) is one row, counted, with its first and last time.
pub(super) fn timeline(transitions: &[Transition]) -> Markup {
    html! {
        div.table-wrap {
            table.cards #timeline {
                thead { tr { th scope="col" { "When" } th scope="col" { "State" } th scope="col" { "Why" } } }
                tbody {
                    @for run in runs(transitions, |t| Some((t.to.as_str(), &t.reason))) {
                        @let t = run.first;
                        tr {
                            td data-label="When" { span.time { (at(t.at)) } (repeated(&run, |t| at(t.at))) }
                            td data-label="State" { (state(t.to.as_str())) }
                            td.why data-label="Why" { (prose(&t.reason)) }
                        }
                    }
                }
            }
        }
    }
}

/// The logs region: the newest lines, oldest first, wrapped; a line repeated in a row is shown
/// once with its count and its first and last time.
pub(super) fn logs(entries: &[LogEntry]) -> Markup {
    html! {
        @if entries.is_empty() {
            p.muted { "No line yet." }
        } @else {
            pre.document.log #log-lines tabindex="0" aria-labelledby="logs-title" {
                @for run in runs(entries, |e| Some((&e.source, &e.line))) {
                    @let e = run.first;
                    (at(e.at)) " " (e.source) " " (e.line) (repeated(&run, |e| at(e.at))) "\n"
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::state::DeploymentState;

    fn transition(seq: i64, to: DeploymentState, reason: &str) -> Transition {
        Transition { seq, from: None, to, reason: reason.to_owned(), at: 1_700_000_000_000 + seq * 1_000 }
    }

    #[test]
    fn a_state_entered_again_and_again_for_one_reason_is_one_row_with_its_count() {
        let refused = "the job would not start: run `svc ingress status` for why";
        let mut newest_first: Vec<Transition> =
            (1..=6).rev().map(|seq| transition(seq + 1, DeploymentState::Failed, refused)).collect();
        newest_first.push(transition(1, DeploymentState::PendingFunding, "created"));
        let html = timeline(&newest_first).into_string();
        assert_eq!(html.matches("<tr>").count(), 3, "the header, the six alike, the creation: {html}");
        assert!(html.contains(">×6</abbr>"), "{html}");
        assert!(html.contains(&format!("from {} to {}", at(1_700_000_002_000), at(1_700_000_007_000))), "{html}");
        assert!(html.contains("run <code>svc ingress status</code> for why") && !html.contains('`'), "{html}");
    }

    #[test]
    fn a_log_line_repeated_in_a_row_is_shown_once_with_its_count_and_wraps() {
        let line = |seq: i64, text: &str| LogEntry { seq, source: "route".into(), line: text.into(), at: seq * 1_000 };
        let entries: Vec<LogEntry> =
            (1..=6).map(|seq| line(seq, "refused: no route")).chain([line(7, "serving")]).collect();
        let html = logs(&entries).into_string();
        assert_eq!(html.matches("refused: no route").count(), 1, "{html}");
        assert!(html.contains(">×6</abbr>") && html.contains("serving"), "{html}");
        assert!(html.contains(r#"class="document log""#), "log lines wrap: {html}");
    }
}
