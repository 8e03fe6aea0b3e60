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
}
