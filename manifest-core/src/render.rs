//! Output of `svc manifest validate`: JSON (the contract in INTERPRETATION.md section 4) and
//! text for people, which shows each problem in its source line with a caret, as compilers do.

use std::fmt::Write;

use serde::Serialize;

use crate::diagnostic::{Code, Diagnostic, Severity};
use crate::source::LineIndex;
use crate::validate::Report;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct JsonReport<'a> {
    valid: bool,
    schema_version: Option<u8>,
    authored_digest: Option<String>,
    diagnostics: &'a [Diagnostic],
}

/// The one JSON object `--format json` prints.
pub fn render_json(report: &Report) -> String {
    let out = JsonReport {
        valid: report.is_valid(),
        schema_version: report.schema_version,
        authored_digest: report.authored_digest(),
        diagnostics: &report.diagnostics,
    };
    // Serializing plain strings and numbers cannot fail.
    serde_json::to_string_pretty(&out).unwrap_or_default()
}

/// Text for people: every diagnostic with its source line and a caret, then the verdict.
/// `name` is how the source is called (`manifest.yaml`, `<stdin>`).
pub fn render_text(report: &Report, name: &str, source: &[u8]) -> String {
    let text = std::str::from_utf8(source).unwrap_or("");
    let index = LineIndex::new(text);
    let mut out = String::new();
    for d in &report.diagnostics {
        diagnostic(&mut out, d, name, &index);
    }
    // The truncation entry is not a problem of its own; the problems it counts are added last.
    let listed = report.diagnostics.iter().filter(|d| d.code != Code::DiagnosticsTruncated);
    let errors = listed.clone().filter(|d| d.is_error()).count();
    let warnings = listed.count() - errors;
    if report.is_valid() {
        let version = report.schema_version.map_or(String::new(), |v| format!(" Manifest V{v}"));
        let _ = write!(out, "{name}: valid{version}");
        if warnings > 0 {
            let _ = write!(out, " with {}", plural(warnings as u64, "warning"));
        }
        out.push('\n');
    } else {
        let _ =
            write!(out, "{name}: invalid: {}, {}", plural(errors as u64, "error"), plural(warnings as u64, "warning"));
        if report.omitted() > 0 {
            let n = report.omitted();
            let _ = write!(out, " shown; {n} more {} not shown", if n == 1 { "problem" } else { "problems" });
        }
        out.push('\n');
    }
    if let Some(digest) = report.authored_digest() {
        let _ = writeln!(out, "authored digest: {digest}");
    }
    out
}

fn diagnostic(out: &mut String, d: &Diagnostic, name: &str, index: &LineIndex<'_>) {
    let severity = match d.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    let _ = writeln!(out, "{severity}[{}]: {}", d.code.as_str(), d.message);
    let pointer = if d.pointer.is_empty() { "(document)" } else { d.pointer.as_str() };
    let (Some(line), Some(column), Some(span)) = (d.line, d.column, d.span) else {
        let _ = writeln!(out, "  --> {name} at {pointer}");
        let _ = writeln!(out, "   = layer {}: {}\n", d.layer.number(), d.layer.title());
        return;
    };
    let source_line = index.line_text(line);
    let gutter = line.to_string().len();
    let pad = " ".repeat(gutter);
    let _ = writeln!(out, "{pad}--> {name}:{line}:{column} at {pointer}");
    let _ = writeln!(out, "{pad} |");
    let shown = Window::around(source_line, column as usize);
    let _ = writeln!(out, "{line} | {}", shown.text);
    // Underline the span within the part of the line shown (at least one caret).
    let before: String = std::iter::repeat_n(' ', shown.lead)
        .chain(
            source_line
                .chars()
                .skip(shown.skipped)
                .take((column as usize - 1).saturating_sub(shown.skipped))
                .map(|c| if c == '\t' { '\t' } else { ' ' }),
        )
        .collect();
    let rest = shown.chars.saturating_sub((column as usize - 1).saturating_sub(shown.skipped));
    let span_chars = index_chars(index, span, line);
    let carets = span_chars.clamp(1, rest.max(1));
    let _ = writeln!(out, "{pad} | {before}{}", "^".repeat(carets));
    let _ = writeln!(out, "{pad} = layer {}: {}\n", d.layer.number(), d.layer.title());
}

/// How many characters of the span fall on its first line.
fn index_chars(index: &LineIndex<'_>, span: crate::tree::Span, line: u32) -> usize {
    let (end_line, end_column) = index.position(span.end as usize);
    let (_, start_column) = index.position(span.start as usize);
    if end_line == line { (end_column.saturating_sub(start_column)) as usize } else { usize::MAX }
}

/// The most characters of a source line shown.
const SHOWN_CHARS: usize = 200;

/// The part of a source line shown: all of it when short, else [`SHOWN_CHARS`] characters
/// around the column at fault, with `...` where it was cut (a minified JSON document is one
/// line of many thousand characters; its carets must stay under what is shown).
struct Window {
    /// What is printed.
    text: String,
    /// Characters of the line left out before `text`.
    skipped: usize,
    /// Columns `text` spends before the line's first shown character (`...`).
    lead: usize,
    /// Characters of the line in `text`.
    chars: usize,
}

impl Window {
    fn around(line: &str, column: usize) -> Window {
        let total = line.chars().count();
        if total <= SHOWN_CHARS {
            return Window { text: line.to_owned(), skipped: 0, lead: 0, chars: total };
        }
        // Keep the column in view, a quarter of the window from its left edge.
        let skipped = column.saturating_sub(1 + SHOWN_CHARS / 4).min(total - SHOWN_CHARS);
        let body: String = line.chars().skip(skipped).take(SHOWN_CHARS).collect();
        let (lead, prefix) = if skipped > 0 { (3, "...") } else { (0, "") };
        let suffix = if skipped + SHOWN_CHARS < total { "..." } else { "" };
        Window { text: format!("{prefix}{body}{suffix}"), skipped, lead, chars: SHOWN_CHARS }
    }
}

/// `1 period`, `2 periods`: a count with its noun in the right number (regular plurals).
pub fn plural(n: u64, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}

#[cfg(test)]
mod tests {
    /// `svc ingress status` used to say "1 period(s) charged".
    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(super::plural(1, "period"), "1 period");
        assert_eq!(super::plural(0, "period"), "0 periods");
        assert_eq!(super::plural(2, "minute"), "2 minutes");
    }
}
