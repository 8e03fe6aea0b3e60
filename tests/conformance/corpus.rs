//! Every corpus case through the library: verdict and diagnostics (severity, code, pointer,
//! layer) as expected. All mismatches are listed at once.

use svc_e2e::{actual, cases};

#[test]
fn corpus_cases_match_their_expectations() {
    let cases = cases();
    assert!(!cases.is_empty(), "the corpus is empty");
    let mut failures = Vec::new();
    for case in &cases {
        let report = manifest_core::validate(&case.bytes);
        let got = actual(&report);
        let want = case.expected();
        if report.is_valid() != case.valid() || got != want {
            failures.push(format!(
                "{}: expected valid={} {:?}\n    got valid={} {:?}",
                case.name(),
                case.valid(),
                want,
                report.is_valid(),
                report
                    .diagnostics
                    .iter()
                    .map(|d| format!("{} {} {} ({})", d.code.as_str(), d.pointer, d.layer.number(), d.message))
                    .collect::<Vec<_>>()
            ));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
}

/// Where an expectation gives `line` and `column`, a diagnostic with that code and pointer is
/// reported there (YAML features, duplicate keys: "fail with line and column").
#[test]
fn positions_match_where_the_corpus_gives_them() {
    let mut failures = Vec::new();
    for case in cases() {
        let report = manifest_core::validate(&case.bytes);
        for want in case.expect["diagnostics"].as_array().into_iter().flatten() {
            let (Some(line), Some(column)) = (want["line"].as_u64(), want["column"].as_u64()) else { continue };
            let found = report.diagnostics.iter().any(|d| {
                Some(d.code.as_str()) == want["code"].as_str()
                    && Some(d.pointer.as_str()) == want["pointer"].as_str()
                    && d.line.map(u64::from) == Some(line)
                    && d.column.map(u64::from) == Some(column)
            });
            if !found {
                failures.push(format!("{}: no {} at {line}:{column}", case.name(), want["code"]));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn valid_cases_have_a_model_and_a_digest() {
    for case in cases().iter().filter(|c| c.valid()) {
        let report = manifest_core::validate(&case.bytes);
        assert!(report.manifest().is_ok(), "{}", case.name());
        assert!(report.authored_digest().is_some_and(|d| d.starts_with("sha256:") && d.len() == 71), "{}", case.name());
    }
}

#[test]
fn diagnostics_come_in_document_order() {
    for case in cases() {
        let report = manifest_core::validate(&case.bytes);
        let lines: Vec<(u32, u32)> = report.diagnostics.iter().filter_map(|d| d.line.zip(d.column)).collect();
        assert!(lines.windows(2).all(|w| w[0] <= w[1]), "{}: {lines:?}", case.name());
    }
}
