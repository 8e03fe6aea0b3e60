//! The CNAME and TXT decisions over what the resolver answered, and the hints they give.
//! Kept apart from the queries so each outcome is tested without a server.

use super::{Check, LookupFailure, challenge_name};
use crate::hint::{DnsRecord, Hint, Stage};

/// At most this many found TXT values are quoted back in a hint.
const MAX_QUOTED: usize = 3;
/// Found values are cut to this many characters in a hint.
const MAX_QUOTED_LEN: usize = 80;

/// The record that makes `hostname` an alias of `canonical`.
pub(crate) fn cname_record(hostname: &str, canonical: &str) -> DnsRecord {
    DnsRecord { name: hostname.to_owned(), kind: "CNAME".into(), value: format!("{canonical}.") }
}

/// The record that carries the verification token.
pub(crate) fn txt_record(hostname: &str, token: &str) -> DnsRecord {
    DnsRecord { name: challenge_name(hostname), kind: "TXT".into(), value: format!("\"{token}\"") }
}

/// Passes when one CNAME target of `hostname` is `canonical` (case-insensitive, trailing dot
/// ignored). `targets` are the CNAME targets found (empty: NXDOMAIN or no CNAME).
pub(crate) fn cname_check(hostname: &str, canonical: &str, targets: Result<Vec<String>, LookupFailure>) -> Check {
    let targets = match targets {
        Ok(targets) => targets,
        Err(failure) => return Check::Failed(lookup_failed(Stage::Dns, hostname, &failure)),
    };
    let normal = |n: &str| n.trim_end_matches('.').to_ascii_lowercase();
    if targets.iter().any(|t| normal(t) == canonical) {
        return Check::Passed;
    }
    let record = cname_record(hostname, canonical);
    let hint = if targets.is_empty() {
        Hint::new(
            "dns_cname_missing",
            Stage::Dns,
            format!("{hostname} has no CNAME record, so it does not reach the relay."),
            format!(
                "Add a CNAME record at {hostname} pointing to {canonical} (a CNAME cannot share its name: remove \
                 any A, AAAA or other records at {hostname})."
            ),
        )
    } else {
        let now: Vec<String> = targets.iter().map(|t| format!("{}.", t.trim_end_matches('.'))).collect();
        Hint::new(
            "dns_cname_wrong",
            Stage::Dns,
            format!("{hostname} is a CNAME to {}, but it must point to {canonical}.", now.join(", ")),
            format!("Change the CNAME record at {hostname} to point to {canonical}."),
        )
    };
    Check::Failed(hint.with_record(record).for_host(hostname))
}

/// Passes when one TXT record at the challenge name, its character-strings joined, equals
/// `token`. `values` are those joined TXT values (empty: NXDOMAIN or no TXT record).
pub(crate) fn txt_check(hostname: &str, token: &str, values: Result<Vec<String>, LookupFailure>) -> Check {
    let name = challenge_name(hostname);
    let values = match values {
        Ok(values) => values,
        Err(failure) => return Check::Failed(lookup_failed(Stage::Dns, hostname, &failure)),
    };
    if values.iter().any(|v| v == token) {
        return Check::Passed;
    }
    let record = txt_record(hostname, token);
    let hint = if values.is_empty() {
        Hint::new(
            "dns_txt_missing",
            Stage::Dns,
            format!("{name} has no TXT record, so control of {hostname} is not proven."),
            format!("Add a TXT record at {name} with the value {}.", record.value),
        )
    } else {
        let mut quoted: Vec<String> = values.iter().take(MAX_QUOTED).map(|v| quote(v)).collect();
        if values.len() > MAX_QUOTED {
            quoted.push(format!("and {} more", values.len() - MAX_QUOTED));
        }
        Hint::new(
            "dns_txt_wrong",
            Stage::Dns,
            format!("{name} has TXT records ({}) but none is the token issued for {hostname}.", quoted.join(", ")),
            format!(
                "Add a TXT record at {name} with the value {} (or change the old token to it; other TXT records may \
                 stay).",
                record.value
            ),
        )
    };
    Check::Failed(hint.with_record(record).for_host(hostname))
}

/// The `dns_lookup_failed` hint: which query failed, why, and that it is retried.
pub(crate) fn lookup_failed(stage: Stage, hostname: &str, failure: &LookupFailure) -> Hint {
    Hint::new(
        "dns_lookup_failed",
        stage,
        format!("The DNS query for {} failed: {}.", failure.query, failure.reason),
        "Nothing to change if the records are right: the check is retried automatically. If this persists, \
         make sure the domain's nameservers answer for that name (SERVFAIL often means unreachable nameservers \
         or broken DNSSEC).",
    )
    .for_host(hostname)
}

/// A found value for a hint: quoted, escaped, and cut if long.
fn quote(value: &str) -> String {
    let escaped: String = value.escape_default().collect();
    if escaped.chars().count() > MAX_QUOTED_LEN {
        format!("\"{}...\"", escaped.chars().take(MAX_QUOTED_LEN).collect::<String>())
    } else {
        format!("\"{escaped}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = "shop.example.test";
    const CANON: &str = "node-demo-acme.relay.test";

    fn failed(check: Check) -> Hint {
        match check {
            Check::Failed(hint) => hint,
            Check::Passed => panic!("expected a failure"),
        }
    }

    #[test]
    fn cname_outcomes() {
        assert_eq!(cname_check(HOST, CANON, Ok(vec!["Node-Demo-Acme.relay.test.".into()])), Check::Passed);
        let missing = failed(cname_check(HOST, CANON, Ok(vec![])));
        assert_eq!(missing.code, "dns_cname_missing");
        assert_eq!(
            missing.record.expect("record").zone_line(),
            "shop.example.test. 300 IN CNAME node-demo-acme.relay.test."
        );
        let wrong = failed(cname_check(HOST, CANON, Ok(vec!["old.example.net".into()])));
        assert_eq!(wrong.code, "dns_cname_wrong");
        assert!(wrong.problem.contains("CNAME to old.example.net., but it must point to node-demo-acme.relay.test"));
        let failure = LookupFailure { query: "CNAME shop.example.test".into(), reason: "request timed out".into() };
        let lookup = failed(cname_check(HOST, CANON, Err(failure)));
        assert_eq!(lookup.code, "dns_lookup_failed");
        assert!(lookup.problem.contains("CNAME shop.example.test failed: request timed out"));
        assert!(lookup.fix.contains("retried"));
    }

    #[test]
    fn txt_outcomes() {
        assert_eq!(txt_check(HOST, "tok", Ok(vec!["other".into(), "tok".into()])), Check::Passed);
        let missing = failed(txt_check(HOST, "tok", Ok(vec![])));
        assert_eq!(missing.code, "dns_txt_missing");
        assert_eq!(missing.record.expect("record").zone_line(), "_svc-challenge.shop.example.test. 300 IN TXT \"tok\"");
        let many: Vec<String> = (0..5).map(|i| format!("old{i}")).collect();
        let wrong = failed(txt_check(HOST, "tok", Ok(many)));
        assert_eq!(wrong.code, "dns_txt_wrong");
        assert!(wrong.problem.contains("(\"old0\", \"old1\", \"old2\", and 2 more)"), "{}", wrong.problem);
        assert_eq!(quote(&"x".repeat(200)).len(), MAX_QUOTED_LEN + 5);
        assert_eq!(quote("a\"b"), "\"a\\\"b\"");
    }
}
