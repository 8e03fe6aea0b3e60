//! The executions page's output (issue 42, point 2): the newest lines of each recent
//! execution that printed, updated with the rest of the live region.

use svc_web::{Markup, html};

use crate::plural;
use crate::service::operations::applications::RecentOutput;
use crate::service::store::{OUTPUT_BYTES_KEPT, OUTPUT_LINES_KEPT, OutputRecord};

/// The newest lines of each execution the console shows.
pub(super) const LINES_SHOWN: u32 = 20;

/// What one execution printed, as the executions page shows it.
pub(super) struct ExecutionOutput {
    /// `SLOT/GENERATION/ATTEMPT`, as `svc app logs --execution` takes it.
    tag: String,
    /// Its newest lines, oldest first.
    lines: Vec<OutputRecord>,
    /// Lines it keeps in all.
    kept: u64,
    /// Lines it did not keep.
    dropped: u64,
}

/// The recent executions' output as the page shows it.
pub(super) fn shown(recent: Vec<RecentOutput>) -> Vec<ExecutionOutput> {
    recent
        .into_iter()
        .map(|e| ExecutionOutput {
            tag: format!("{}/{}/{}", e.slot, e.generation, e.attempt),
            lines: e.lines,
            kept: e.kept,
            dropped: e.dropped,
        })
        .collect()
}

/// Each execution's newest lines: the time to the second, the part, the line (escaped by
/// `maud`, wrapped by the stylesheet, never cut).
pub(super) fn section(app: &str, shown: &[ExecutionOutput]) -> Markup {
    html! {
        h2 { "Output" span.muted { " (the newest " (LINES_SHOWN) " lines of each execution)" } }
        @if shown.is_empty() {
            p.muted #output-empty { "No execution printed anything yet." }
        }
        @for o in shown {
            section.output id={ "output-" (o.tag.replace('/', "-")) } {
                h3 { "Execution " code { (app) "/" (o.tag) } }
                @if o.dropped > 0 {
                    p.muted.dropped {
                        (plural(o.dropped, "line")) " not kept: an execution keeps its newest "
                        (OUTPUT_LINES_KEPT) " lines (" (OUTPUT_BYTES_KEPT >> 20) " MiB)."
                    }
                }
                @if o.kept > o.lines.len() as u64 {
                    p.muted { (o.kept) " kept in all: " code { "svc app logs " (app) " --execution " (o.tag) } }
                }
                @if o.lines.is_empty() {
                    p.muted { "None kept." }
                } @else {
                    pre.output {
                        @for l in &o.lines {
                            span.muted { (rfc3339_seconds(l.at)) " [" (l.part) "] " } (l.line) "\n"
                        }
                    }
                }
            }
        }
    }
}

/// Unix ms as RFC 3339 to the second.
fn rfc3339_seconds(at: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_millis(at)).to_string()
}
