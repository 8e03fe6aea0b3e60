//! CAA (RFC 8659): may one of our CAs issue for a hostname? [`climb`] lists the names whose
//! CAA RRsets are looked up, closest first; [`evaluate`] decides over the first non-empty
//! RRset, parsed by hickory into [`CAA`] values.
//!
//! Rules applied (RFC 8659 §4): a property whose flags have the issuer-critical bit (128) and
//! whose tag is not understood forbids issuance; only `issue` properties count for a
//! non-wildcard name (`issuewild` ones, when present, for a wildcard name); an RRset with no
//! such property does not restrict issuance; otherwise a CA may issue only if one property's
//! issuer domain (the value before any `;` parameters, trimmed, case-insensitive) is one of
//! its identities. `issue ";"` names no CA. A property whose `validationmethods` parameter
//! (RFC 8657) leaves out `tls-alpn-01`, the only ACME challenge the agents answer, does not
//! authorize us either.

use hickory_resolver::proto::rr::rdata::CAA;

use crate::hint::{DnsRecord, Hint, Stage};

/// The property tags this check understands (RFC 8659 §4).
const KNOWN_TAGS: [&str; 3] = ["issue", "issuewild", "iodef"];
/// The ACME challenge the agents answer (see `docs/ingress.md`, "ACME certificates").
const ACME_METHOD: &str = "tls-alpn-01";

/// What the relevant CAA RRset says about issuance by the configured CAs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaaVerdict {
    /// A configured CA may issue (or nothing in the RRset restricts issuance).
    Permitted,
    /// No configured CA may issue.
    Forbidden(Forbidden),
}

/// Why no configured CA may issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forbidden {
    /// A property with the issuer-critical flag and a tag this check does not understand.
    UnknownCritical {
        /// The property as a zone file would write it (`128 tbs "x"`).
        property: String,
    },
    /// Our CA is named, but only with `validationmethods` that leave out `tls-alpn-01`.
    ChallengeExcluded {
        /// The property as a zone file would write it.
        property: String,
    },
    /// The `issue` (`issuewild`) properties authorize only other CAs, or none (`issue ";"`).
    OtherIssuers {
        /// The issuer domains they authorize (empty when they authorize no CA at all).
        allowed: Vec<String>,
    },
}

/// The names whose CAA RRsets are consulted for `hostname`, closest first, up to but not
/// including the root (RFC 8659 §3): `shop.example.test`, `example.test`, `test`.
///
/// The climb is over the hostname's own parents even when it is a CNAME: a CAA query for an
/// alias returns the alias target's RRset (the resolver follows the CNAME), but the target's
/// parents are never consulted. RFC 6844 climbed the target's parents too; RFC 8659 dropped it.
pub fn climb(hostname: &str) -> Vec<String> {
    let name = hostname.trim_end_matches('.');
    let mut names = Vec::new();
    let mut rest = name;
    while !rest.is_empty() {
        names.push(rest.to_owned());
        rest = rest.split_once('.').map_or("", |(_, parent)| parent);
    }
    names
}

/// Decides over the relevant (non-empty) CAA RRset for a name, given our CAs' identities
/// (issuer domains like `letsencrypt.org`, lowercase). `wildcard` selects `issuewild`.
pub fn evaluate(rrset: &[CAA], identities: &[String], wildcard: bool) -> CaaVerdict {
    if let Some(critical) = rrset.iter().find(|c| c.issuer_critical && !is_known(&c.tag)) {
        return CaaVerdict::Forbidden(Forbidden::UnknownCritical { property: zone_value(critical) });
    }
    let tagged = |tag: &str| rrset.iter().filter(|c| c.tag.eq_ignore_ascii_case(tag)).collect::<Vec<_>>();
    let mut relevant = if wildcard { tagged("issuewild") } else { Vec::new() };
    if relevant.is_empty() {
        relevant = tagged("issue");
    }
    if relevant.is_empty() {
        // Only iodef or unknown non-critical tags: CAA does not restrict issuance (§3).
        return CaaVerdict::Permitted;
    }
    let issuers: Vec<Issuer> = relevant.iter().map(|c| Issuer::parse(&c.value)).collect();
    let ours = |i: &Issuer| identities.iter().any(|id| id.eq_ignore_ascii_case(&i.domain));
    if issuers.iter().any(|i| ours(i) && i.allows_acme_method()) {
        return CaaVerdict::Permitted;
    }
    if let Some(excluded) = relevant.iter().zip(&issuers).find(|(_, i)| ours(i)) {
        return CaaVerdict::Forbidden(Forbidden::ChallengeExcluded { property: zone_value(excluded.0) });
    }
    let mut allowed: Vec<String> = Vec::new();
    for issuer in issuers.iter().filter(|i| !i.domain.is_empty()) {
        if !allowed.contains(&issuer.domain) {
            allowed.push(issuer.domain.clone());
        }
    }
    CaaVerdict::Forbidden(Forbidden::OtherIssuers { allowed })
}

/// The `caa_forbids_ca` hint: the RRset found by the climb at `queried` (owned by `owner`,
/// which differs when `queried` is an alias), what it allows, and the record to add.
pub(crate) fn forbids_hint(
    hostname: &str,
    queried: &str,
    owner: &str,
    why: &Forbidden,
    identities: &[String],
    wildcard: bool,
) -> Hint {
    let tag = if wildcard { "issuewild" } else { "issue" };
    let first = identities.first().map_or("", String::as_str);
    let cas = identities.join(", ");
    let at = if owner == queried {
        format!("The CAA records at {owner}")
    } else {
        format!("The CAA records at {owner} (the CNAME target of {queried})")
    };
    let closest =
        if queried == hostname { String::new() } else { format!(", the closest to {hostname} that has any,") };
    let record = DnsRecord { name: owner.to_owned(), kind: "CAA".into(), value: format!("0 {tag} \"{first}\"") };
    let hint = match why {
        Forbidden::UnknownCritical { property } => Hint::new(
            "caa_forbids_ca",
            Stage::Caa,
            format!(
                "{at}{closest} include `{property}`, a critical property no CA understands, so no CA may issue \
                 a certificate for {hostname}."
            ),
            format!("Remove that record at {owner}, or clear its critical flag (128) if you need it."),
        ),
        Forbidden::ChallengeExcluded { property } => Hint::new(
            "caa_forbids_ca",
            Stage::Caa,
            format!(
                "{at}{closest} allow {cas} only through `{property}`, whose validationmethods leave out \
                 {ACME_METHOD}, the only challenge the relay answers."
            ),
            format!(
                "Add {ACME_METHOD} to that record's validationmethods, or add the CAA record `{}` at {owner}.",
                record.value
            ),
        )
        .with_record(record),
        Forbidden::OtherIssuers { allowed } => {
            let allows = if allowed.is_empty() {
                "allow no CA at all".to_owned()
            } else {
                format!("allow only {}", allowed.join(", "))
            };
            Hint::new(
                "caa_forbids_ca",
                Stage::Caa,
                format!("{at}{closest} {allows}, not {cas}, so no certificate can be issued for {hostname}."),
                format!(
                    "Add the CAA record `{}` at {owner} (keep the existing ones for the CAs you still use), or \
                     remove all CAA records there.",
                    record.value
                ),
            )
            .with_record(record)
        }
    };
    hint.for_host(hostname)
}

fn is_known(tag: &str) -> bool {
    KNOWN_TAGS.iter().any(|k| k.eq_ignore_ascii_case(tag))
}

/// A property as a zone file writes it: `0 issue "letsencrypt.org"`.
fn zone_value(caa: &CAA) -> String {
    format!("{} {} \"{}\"", caa.flags(), caa.tag, String::from_utf8_lossy(&caa.value).escape_default())
}

/// An `issue`/`issuewild` value: the issuer domain and its parameters.
struct Issuer {
    /// Lowercase, without a trailing dot; empty for `;` (no CA).
    domain: String,
    /// `key=value` parameters, keys lowercased.
    parameters: Vec<(String, String)>,
}

impl Issuer {
    fn parse(value: &[u8]) -> Issuer {
        let text = String::from_utf8_lossy(value);
        let (domain, rest) = text.split_once(';').unwrap_or((&text, ""));
        let domain = domain.trim().trim_end_matches('.').to_ascii_lowercase();
        let parameters = rest
            .split(';')
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        Issuer { domain, parameters }
    }

    /// RFC 8657: `validationmethods=a,b` restricts the ACME challenge types the CA may use.
    fn allows_acme_method(&self) -> bool {
        self.parameters
            .iter()
            .filter(|(k, _)| k == "validationmethods")
            .all(|(_, v)| v.split(',').any(|m| m.trim().eq_ignore_ascii_case(ACME_METHOD)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_resolver::proto::rr::rdata::caa::KeyValue;
    use hickory_resolver::proto::rr::{Name, RData, RecordType};
    use hickory_resolver::proto::serialize::binary::{BinDecoder, Restrict};

    /// Decodes CAA RDATA from its wire form (flags, tag length, tag, value), the way the
    /// resolver does for a real answer.
    fn caa(flags: u8, tag: &str, value: &str) -> CAA {
        let mut wire = vec![flags, tag.len() as u8];
        wire.extend_from_slice(tag.as_bytes());
        wire.extend_from_slice(value.as_bytes());
        let mut decoder = BinDecoder::new(&wire);
        match RData::read(&mut decoder, RecordType::CAA, Restrict::new(wire.len() as u16)).expect("CAA rdata") {
            RData::CAA(caa) => caa,
            other => panic!("not CAA: {other:?}"),
        }
    }

    fn le() -> Vec<String> {
        vec!["letsencrypt.org".to_owned()]
    }

    fn others(allowed: &[&str]) -> CaaVerdict {
        CaaVerdict::Forbidden(Forbidden::OtherIssuers { allowed: allowed.iter().map(|s| s.to_string()).collect() })
    }

    #[test]
    fn climbs_from_the_name_to_its_top_level_label() {
        assert_eq!(climb("shop.example.test"), ["shop.example.test", "example.test", "test"]);
        assert_eq!(climb("a.b.c.d."), ["a.b.c.d", "b.c.d", "c.d", "d"]);
    }

    #[test]
    fn an_issue_property_for_one_of_our_cas_permits() {
        assert_eq!(evaluate(&[caa(0, "issue", "letsencrypt.org")], &le(), false), CaaVerdict::Permitted);
        // Trimmed, case-insensitive, trailing dot ignored, parameters ignored.
        let rrset = [caa(0, "issue", " LetsEncrypt.org. ; accounturi=https://acme/acct/1")];
        assert_eq!(evaluate(&rrset, &le(), false), CaaVerdict::Permitted);
        // One of several identities, one of several properties (they are additive).
        let rrset = [caa(0, "issue", "other-ca.example"), caa(0, "issue", "pki.goog")];
        assert_eq!(evaluate(&rrset, &["letsencrypt.org".into(), "pki.goog".into()], false), CaaVerdict::Permitted);
        // Hickory's own constructor gives the same value as the wire form.
        let built = CAA::new_issue(false, Some(Name::from_ascii("letsencrypt.org").expect("name")), vec![]);
        assert_eq!(evaluate(&[built], &le(), false), CaaVerdict::Permitted);
    }

    #[test]
    fn other_cas_or_no_ca_forbid_and_say_what_is_allowed() {
        assert_eq!(evaluate(&[caa(0, "issue", "other-ca.example")], &le(), false), others(&["other-ca.example"]));
        assert_eq!(evaluate(&[caa(0, "issue", ";")], &le(), false), others(&[]));
        // `issue ";"` next to our CA: the grants are additive (RFC 8659 §4.2), so it permits.
        let rrset = [caa(0, "issue", ";"), caa(0, "issue", "letsencrypt.org")];
        assert_eq!(evaluate(&rrset, &le(), false), CaaVerdict::Permitted);
        // A lookalike is not our CA.
        assert_eq!(
            evaluate(&[caa(0, "issue", "letsencrypt.org.evil.example")], &le(), false),
            others(&["letsencrypt.org.evil.example"])
        );
        let built = CAA::new_issue(false, None, vec![KeyValue::new("k", "v")]);
        assert_eq!(evaluate(&[built], &le(), false), others(&[]));
    }

    #[test]
    fn issuewild_counts_only_for_wildcards_and_then_overrides_issue() {
        // For a non-wildcard name, issuewild is ignored: here it leaves nothing that restricts.
        assert_eq!(evaluate(&[caa(0, "issuewild", ";")], &le(), false), CaaVerdict::Permitted);
        let rrset = [caa(0, "issue", "letsencrypt.org"), caa(0, "issuewild", ";")];
        assert_eq!(evaluate(&rrset, &le(), false), CaaVerdict::Permitted);
        assert_eq!(evaluate(&rrset, &le(), true), others(&[]));
        // With no issuewild property, a wildcard falls back to issue.
        assert_eq!(evaluate(&[caa(0, "issue", "other-ca.example")], &le(), true), others(&["other-ca.example"]));
        assert_eq!(evaluate(&[caa(0, "issuewild", "letsencrypt.org")], &le(), true), CaaVerdict::Permitted);
    }

    #[test]
    fn an_unknown_critical_property_forbids_and_an_unknown_plain_one_does_not() {
        let rrset = [caa(0, "issue", "letsencrypt.org"), caa(128, "tbs", "unknown")];
        assert_eq!(
            evaluate(&rrset, &le(), false),
            CaaVerdict::Forbidden(Forbidden::UnknownCritical { property: "128 tbs \"unknown\"".into() })
        );
        assert_eq!(evaluate(&[caa(0, "tbs", "unknown")], &le(), false), CaaVerdict::Permitted);
        // Critical but understood: an ordinary issue property.
        assert_eq!(evaluate(&[caa(128, "issue", "letsencrypt.org")], &le(), false), CaaVerdict::Permitted);
        // Only iodef: nothing restricts issuance.
        assert_eq!(evaluate(&[caa(0, "iodef", "mailto:security@example.test")], &le(), false), CaaVerdict::Permitted);
        // Tags compare case-insensitively.
        assert_eq!(evaluate(&[caa(0, "ISSUE", "other-ca.example")], &le(), false), others(&["other-ca.example"]));
    }

    #[test]
    fn validation_methods_without_tls_alpn_exclude_our_challenge() {
        let rrset = [caa(0, "issue", "letsencrypt.org; validationmethods=dns-01,http-01")];
        let property = "0 issue \"letsencrypt.org; validationmethods=dns-01,http-01\"".to_owned();
        assert_eq!(evaluate(&rrset, &le(), false), CaaVerdict::Forbidden(Forbidden::ChallengeExcluded { property }));
        let rrset = [caa(0, "issue", "letsencrypt.org; validationmethods=dns-01,tls-alpn-01")];
        assert_eq!(evaluate(&rrset, &le(), false), CaaVerdict::Permitted);
    }

    #[test]
    fn the_hint_names_the_owner_what_it_allows_and_the_record_to_add() {
        let why = Forbidden::OtherIssuers { allowed: vec!["other-ca.example".into()] };
        let hint = forbids_hint("shop.example.test", "example.test", "example.test", &why, &le(), false);
        assert_eq!(hint.code, "caa_forbids_ca");
        assert_eq!(hint.stage, Stage::Caa);
        assert_eq!(hint.hostname.as_deref(), Some("shop.example.test"));
        assert!(hint.problem.contains("at example.test, the closest to shop.example.test"), "{}", hint.problem);
        assert!(hint.problem.contains("allow only other-ca.example, not letsencrypt.org"), "{}", hint.problem);
        let record = hint.record.expect("a record to add");
        assert_eq!(record.zone_line(), "example.test. 300 IN CAA 0 issue \"letsencrypt.org\"");

        let alias = forbids_hint("shop.example.test", "shop.example.test", "a.relay.test", &why, &le(), false);
        assert!(alias.problem.contains("at a.relay.test (the CNAME target of shop.example.test)"), "{}", alias.problem);

        let critical = Forbidden::UnknownCritical { property: "128 tbs \"x\"".into() };
        let hint = forbids_hint("shop.example.test", "example.test", "example.test", &critical, &le(), false);
        assert!(hint.record.is_none());
        assert!(hint.fix.contains("critical flag"), "{}", hint.fix);
    }
}
