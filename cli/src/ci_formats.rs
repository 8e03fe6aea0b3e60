//! `svc manifest validate --format junit|github|sarif` (issue 21, point 4): the reports CI
//! systems read, from the same outcomes the text and JSON reports come from.
//!
//! - **github**: one workflow command per diagnostic (`::error file=F,line=L,col=C,title=CODE::
//!   MESSAGE`), escaped as the Actions toolkit escapes them, then the summary line. GitHub
//!   shows a limited number of annotations per step; the log has them all.
//! - **junit**: a test suite of one test case per file; an invalid file's case fails with its
//!   errors, an unreadable one errs. Text that XML 1.0 cannot carry is replaced.
//! - **sarif**: SARIF 2.1.0 with one rule per diagnostic code used, one result per diagnostic,
//!   each located by file URI, line and column (line 1 where the diagnostic has none: code
//!   scanning needs a line).

use std::collections::BTreeSet;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use manifest_core::{Diagnostic, Severity};
use serde_json::{Value, json};

use crate::manifest_outcome::{Outcome, Summary};

/// GitHub Actions workflow commands for one file: an annotation per diagnostic (none for a
/// valid file without warnings). Standard input (`-`) is annotated without a file.
pub(crate) fn github(path: &Path, outcome: &Outcome) -> String {
    let mut out = String::new();
    let file =
        if path == Path::new("-") { String::new() } else { format!("file={},", property(&path.display().to_string())) };
    match outcome {
        Outcome::Checked { diagnostics, .. } => {
            for d in diagnostics {
                let level = if d.is_error() { "error" } else { "warning" };
                let place = match (d.line, d.column) {
                    (Some(line), Some(column)) => format!("line={line},col={column},"),
                    (Some(line), None) => format!("line={line},"),
                    _ => String::new(),
                };
                let title = property(d.code.as_str());
                let message = data(&format!("{} (at {})", d.message, pointer(d)));
                let _ = writeln!(out, "::{level} {file}{place}title={title}::{message}");
            }
        }
        Outcome::Unreadable(why) => {
            let _ = writeln!(out, "::error {file}title=unreadable_file::{}", data(why));
        }
    }
    out
}

/// The pointer a person reads (`(document)` for the root).
fn pointer(d: &Diagnostic) -> &str {
    if d.pointer.is_empty() { "(document)" } else { &d.pointer }
}

/// A workflow command's message, escaped as `@actions/core` does.
fn data(text: &str) -> String {
    text.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// A workflow command's property value, escaped as `@actions/core` does.
fn property(text: &str) -> String {
    data(text).replace(':', "%3A").replace(',', "%2C")
}

/// JUnit XML.
pub(crate) fn junit(outcomes: &[(PathBuf, Outcome)], summary: &Summary) -> String {
    let seconds = summary.elapsed.as_secs_f64();
    let (tests, failures, errors) = (summary.files, summary.invalid, summary.unreadable);
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"svc manifest validate\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{seconds:.3}\">"
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"svc manifest validate\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{seconds:.3}\">"
    );
    for (path, outcome) in outcomes {
        let name = xml_attribute(&path.display().to_string());
        let _ = write!(out, "    <testcase classname=\"manifests\" name=\"{name}\" file=\"{name}\"");
        match outcome {
            Outcome::Checked { valid: true, .. } => out.push_str("/>\n"),
            Outcome::Checked { valid: false, diagnostics, .. } => {
                let errors: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.is_error()).collect();
                let first = errors.first().map_or("invalid_manifest", |d| d.code.as_str());
                let message = format!("{} {}", errors.len(), if errors.len() == 1 { "error" } else { "errors" });
                let _ = write!(
                    out,
                    ">\n      <failure type=\"{}\" message=\"{}\">",
                    xml_attribute(first),
                    xml_attribute(&message)
                );
                for d in &errors {
                    let at = match (d.line, d.column) {
                        (Some(line), Some(column)) => format!(":{line}:{column}"),
                        (Some(line), None) => format!(":{line}"),
                        _ => String::new(),
                    };
                    let line = format!("{}{at} {} [{}]: {}\n", path.display(), pointer(d), d.code.as_str(), d.message);
                    out.push_str(&xml(&line));
                }
                out.push_str("</failure>\n    </testcase>\n");
            }
            Outcome::Unreadable(why) => {
                let _ = write!(
                    out,
                    ">\n      <error type=\"unreadable_file\" message=\"{}\"/>\n    </testcase>\n",
                    xml(why)
                );
            }
        }
    }
    out + "  </testsuite>\n</testsuites>\n"
}

/// `text` for XML 1.0 content or an attribute value: markup escaped, and every character XML
/// cannot carry (most control characters, unpaired surrogates cannot occur in a `str`)
/// replaced by U+FFFD.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// [`xml`] for an attribute value: line ends and tabs as character references too, which an
/// XML reader would otherwise turn into spaces.
fn xml_attribute(text: &str) -> String {
    xml(text).replace('\n', "&#10;").replace('\r', "&#13;").replace('\t', "&#9;")
}

/// SARIF 2.1.0.
pub(crate) fn sarif(outcomes: &[(PathBuf, Outcome)]) -> String {
    let codes: BTreeSet<&str> = outcomes
        .iter()
        .flat_map(|(_, o)| match o {
            Outcome::Checked { diagnostics, .. } => diagnostics.iter().map(|d| d.code.as_str()).collect::<Vec<_>>(),
            Outcome::Unreadable(_) => vec!["unreadable_file"],
        })
        .collect();
    let rules: Vec<&str> = codes.into_iter().collect();
    let index = |code: &str| rules.iter().position(|r| *r == code).unwrap_or(0);
    let mut results = Vec::new();
    for (path, outcome) in outcomes {
        let uri = file_uri(path);
        let location = |region: Value| match &uri {
            Some(uri) => json!([{"physicalLocation": {"artifactLocation": {"uri": uri}, "region": region}}]),
            None => json!([]),
        };
        match outcome {
            Outcome::Checked { diagnostics, .. } => {
                for d in diagnostics {
                    let mut region = json!({"startLine": d.line.unwrap_or(1)});
                    if let Some(column) = d.column {
                        region["startColumn"] = column.into();
                    }
                    results.push(json!({
                        "ruleId": d.code.as_str(),
                        "ruleIndex": index(d.code.as_str()),
                        "level": if d.severity == Severity::Error { "error" } else { "warning" },
                        "message": {"text": format!("{} (at {})", d.message, pointer(d))},
                        "locations": location(region),
                        "properties": {"pointer": d.pointer, "layer": d.layer},
                    }));
                }
            }
            Outcome::Unreadable(why) => results.push(json!({
                "ruleId": "unreadable_file",
                "ruleIndex": index("unreadable_file"),
                "level": "error",
                "message": {"text": why},
                "locations": location(json!({"startLine": 1})),
            })),
        }
    }
    let rules: Vec<Value> = rules
        .iter()
        .map(|code| {
            json!({
                "id": code,
                "name": code,
                "shortDescription": {"text": format!("svc manifest diagnostic `{code}` (docs/diagnostics.md)")},
            })
        })
        .collect();
    let log = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "svc manifest validate",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": rules,
            }},
            // Diagnostics count columns in characters, not SARIF's default UTF-16 units.
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    });
    serde_json::to_string_pretty(&log).unwrap_or_default()
}

/// A URI for `path`: relative paths as relative references (`/`-separated), absolute ones
/// as `file://` URIs, each byte outside RFC 3986's unreserved set and `/` percent-encoded
/// (the path's own bytes, not a lossy UTF-8 reading of them). `None` for standard input.
fn file_uri(path: &Path) -> Option<String> {
    if path == Path::new("-") {
        return None;
    }
    let path = path.strip_prefix("./").unwrap_or(path);
    let bytes = path_bytes(path);
    let mut out = String::with_capacity(bytes.len() + 8);
    if path.is_absolute() {
        out.push_str("file://");
    }
    for b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    Some(out)
}

#[cfg(unix)]
fn path_bytes(path: &Path) -> Vec<u8> {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str().as_bytes().to_vec()
}

#[cfg(not(unix))]
fn path_bytes(path: &Path) -> Vec<u8> {
    path.to_string_lossy().replace('\\', "/").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_commands_escape_what_would_end_them() {
        assert_eq!(data("50% done\r\nnext"), "50%25 done%0D%0Anext");
        assert_eq!(property("a:b,c%"), "a%3Ab%2Cc%25");
    }

    #[test]
    fn xml_text_escapes_markup_and_drops_what_xml_cannot_carry() {
        assert_eq!(xml("<a href=\"x\">&'</a>"), "&lt;a href=&quot;x&quot;&gt;&amp;&apos;&lt;/a&gt;");
        assert_eq!(xml("bell\u{7}tab\tnul\u{0}"), "bell\u{FFFD}tab\tnul\u{FFFD}");
        assert_eq!(xml_attribute("a\nb\tc"), "a&#10;b&#9;c", "kept through an attribute's normalisation");
    }

    #[test]
    fn file_uris_are_relative_and_percent_encoded() {
        assert_eq!(file_uri(Path::new("./manifests/web app.yaml")).as_deref(), Some("manifests/web%20app.yaml"));
        assert_eq!(file_uri(Path::new("a/ü#1.json")).as_deref(), Some("a/%C3%BC%231.json"));
        assert_eq!(file_uri(Path::new("/srv/m.json")).as_deref(), Some("file:///srv/m.json"));
        assert_eq!(file_uri(Path::new("-")), None, "standard input has no location");
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStrExt;
            let raw = Path::new(std::ffi::OsStr::from_bytes(b"bad\xffbyte.json"));
            assert_eq!(file_uri(raw).as_deref(), Some("bad%FFbyte.json"), "the bytes, not U+FFFD");
        }
    }
}
