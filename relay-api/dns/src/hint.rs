//! Recovery hints: what is wrong with a deployment and exactly what to do about it. Every
//! part of the control plane (funding, DNS, CAA, route validation) reports problems as
//! hints, so `svc ingress hints` can rank them by what to fix first.

use serde::{Deserialize, Serialize};

/// Where a problem sits; fix the earlier stages first (later checks depend on them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The project file or an unsupported request.
    Project,
    /// The quote and its funding.
    Funding,
    /// The job's processes (launch, crash).
    Job,
    /// A customer hostname's CNAME and TXT records.
    Dns,
    /// A customer hostname's CAA records.
    Caa,
    /// Reaching the route through the public gateway (address, tunnel, agent).
    Reachability,
    /// The TLS certificate served for the hostname.
    Tls,
    /// The app's `/health`.
    Health,
    /// The agent's challenge answer.
    Challenge,
}

/// A DNS record the customer must add (or change to), exactly as a zone file line would say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DnsRecord {
    /// The owner name, fully qualified without the trailing dot (`shop.example.com`).
    pub name: String,
    /// `CNAME`, `TXT` or `CAA`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The record data as written in a zone file (`abc.relay.example.`, `"token"`,
    /// `0 issue "letsencrypt.org"`).
    pub value: String,
}

impl DnsRecord {
    /// The record as a zone file line (`shop.example.com. 300 IN CNAME abc.relay.example.`).
    pub fn zone_line(&self) -> String {
        format!("{}. 300 IN {} {}", self.name.trim_end_matches('.'), self.kind, self.value)
    }
}

/// One problem and its fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hint {
    /// A stable code (`dns_cname_missing`, `caa_forbids_ca`, `health_failing`, ...).
    pub code: String,
    /// Where the problem sits; hints sort by stage first.
    pub stage: Stage,
    /// The hostname concerned, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// What is wrong, in one sentence.
    pub problem: String,
    /// What to do about it, in one sentence.
    pub fix: String,
    /// The exact DNS record to add, when the fix is a DNS record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<DnsRecord>,
}

impl Hint {
    /// A hint with no hostname and no record.
    pub fn new(code: &str, stage: Stage, problem: impl Into<String>, fix: impl Into<String>) -> Hint {
        Hint { code: code.to_owned(), stage, hostname: None, problem: problem.into(), fix: fix.into(), record: None }
    }

    /// The same hint, about `hostname`.
    pub fn for_host(mut self, hostname: &str) -> Hint {
        self.hostname = Some(hostname.to_owned());
        self
    }

    /// The same hint, fixed by adding `record`.
    pub fn with_record(mut self, record: DnsRecord) -> Hint {
        self.record = Some(record);
        self
    }
}

/// Sorts hints by what to fix first: stage, then hostname, then code.
pub fn rank(hints: &mut [Hint]) {
    hints.sort_by(|a, b| (a.stage, &a.hostname, &a.code).cmp(&(b.stage, &b.hostname, &b.code)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_earlier_stages_first_and_prints_zone_lines() {
        let mut hints = vec![
            Hint::new("health_failing", Stage::Health, "p", "f"),
            Hint::new("quote_unfunded", Stage::Funding, "p", "f"),
            Hint::new("dns_cname_missing", Stage::Dns, "p", "f").for_host("shop.example.com"),
        ];
        rank(&mut hints);
        let codes: Vec<&str> = hints.iter().map(|h| h.code.as_str()).collect();
        assert_eq!(codes, ["quote_unfunded", "dns_cname_missing", "health_failing"]);
        let record = DnsRecord { name: "shop.example.com".into(), kind: "CNAME".into(), value: "a.relay.test.".into() };
        assert_eq!(record.zone_line(), "shop.example.com. 300 IN CNAME a.relay.test.");
        let json = serde_json::to_value(Hint::new("x", Stage::Caa, "p", "f").with_record(record)).expect("json");
        assert_eq!(json["record"]["type"], "CNAME");
        assert_eq!(json["stage"], "caa");
    }

    /// A hint as a person reads it: code, stage and hostname, then problem, fix and record.
    fn text(hint: &Hint) -> String {
        let stage = serde_json::to_value(hint.stage).expect("stage");
        let mut out = format!("{} [{}]", hint.code, stage.as_str().unwrap_or_default());
        if let Some(host) = &hint.hostname {
            out.push_str(&format!(" {host}"));
        }
        out.push_str(&format!("\n  problem: {}\n  fix: {}\n", hint.problem, hint.fix));
        if let Some(record) = &hint.record {
            out.push_str(&format!("  record: {}\n", record.zone_line()));
        }
        out
    }

    /// Every hint the DNS checks give, one of each code and CAA case, in one snapshot
    /// (`snapshots/relay_dns__hint__tests__every_dns_hint_text.snap`): a changed wording is
    /// reviewed there.
    #[test]
    fn every_dns_hint_text() {
        use crate::caa::{Forbidden, forbids_hint};
        use crate::records::{cname_check, lookup_failed, txt_check};
        use crate::{Check, LookupFailure};

        const HOST: &str = "shop.example.test";
        const CANON: &str = "node-demo-acme.relay.test";
        let failed = |check: Check| match check {
            Check::Failed(hint) => hint,
            Check::Passed => panic!("expected a failure"),
        };
        let timeout = || LookupFailure { query: "CNAME shop.example.test".into(), reason: "request timed out".into() };
        let le = vec!["letsencrypt.org".to_owned(), "pki.goog".to_owned()];
        let others = Forbidden::OtherIssuers { allowed: vec!["other-ca.example".into()] };
        let hints = [
            failed(cname_check(HOST, CANON, Ok(vec![]))),
            failed(cname_check(HOST, CANON, Ok(vec!["old.example.net".into()]))),
            failed(cname_check(HOST, CANON, Err(timeout()))),
            failed(txt_check(HOST, "tok-123", Ok(vec![]))),
            failed(txt_check(HOST, "tok-123", Ok((0..5).map(|i| format!("old-token-{i}")).collect()))),
            lookup_failed(
                Stage::Caa,
                HOST,
                &LookupFailure { query: "CAA example.test".into(), reason: "the server answered SERVFAIL".into() },
            ),
            forbids_hint(HOST, "example.test", "example.test", &others, &le, false),
            forbids_hint(HOST, HOST, "a.relay.test", &Forbidden::OtherIssuers { allowed: vec![] }, &le, false),
            forbids_hint(HOST, HOST, HOST, &others, &le, true),
            forbids_hint(
                HOST,
                HOST,
                HOST,
                &Forbidden::ChallengeExcluded {
                    property: "0 issue \"letsencrypt.org; validationmethods=dns-01\"".into(),
                },
                &le,
                false,
            ),
            forbids_hint(
                HOST,
                "example.test",
                "example.test",
                &Forbidden::UnknownCritical { property: "128 tbs \"x\"".into() },
                &le,
                false,
            ),
        ];
        insta::assert_snapshot!(hints.iter().map(text).collect::<Vec<_>>().join("\n"));
    }

    /// Every error a DNS check can refuse with, as the CLI and the API show it.
    #[test]
    fn every_dns_error_text() {
        use crate::DnsError;
        let errors = [
            DnsError::InvalidName {
                role: "hostname",
                input: "Shop_.example".into(),
                reason: "a label has a character other than a-z, 0-9 and -".into(),
            },
            DnsError::InvalidToken { reason: "it holds a double quote".into() },
            DnsError::NoCaIdentities,
            DnsError::Config("no nameserver".into()),
            DnsError::SystemConfig("No such file or directory (os error 2)".into()),
            DnsError::Lookup { query: "A shop.example.com".into(), reason: "request timed out".into() },
        ];
        insta::assert_snapshot!(errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"));
    }
}
