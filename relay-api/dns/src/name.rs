//! Input checks for the names and the token that go into DNS queries and into the records a
//! customer is told to add: a bad input is a clear error, never a malformed query or hint.

use super::DnsError;

/// The longest DNS name in presentation form, without the trailing dot (RFC 1035 §2.3.4).
const MAX_NAME_LEN: usize = 253;
/// The longest label (RFC 1035 §2.3.4).
const MAX_LABEL_LEN: usize = 63;
/// The longest TXT character-string; the token must fit in one (RFC 1035 §3.3).
const MAX_TOKEN_LEN: usize = 255;

/// Checks that `input` is a hostname of lowercase LDH labels (letters, digits, hyphens; RFC
/// 1123) with at least `min_labels` labels, and not an IP address. One trailing dot is allowed
/// and removed. `role` names the input in the error ("hostname", "canonical hostname").
pub(crate) fn hostname(input: &str, role: &'static str, min_labels: usize) -> Result<String, DnsError> {
    let bad = |reason: String| DnsError::InvalidName { role, input: input.to_owned(), reason };
    let name = input.strip_suffix('.').unwrap_or(input);
    if name.is_empty() {
        return Err(bad("it is empty".into()));
    }
    if name.parse::<std::net::IpAddr>().is_ok() || input.contains(':') {
        return Err(bad("it is an IP address; a DNS hostname is needed".into()));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(bad(format!("it is {} characters long; DNS allows at most {MAX_NAME_LEN}", name.len())));
    }
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(bad(format!("use lowercase letters (`{}`)", name.to_ascii_lowercase())));
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        if label.is_empty() {
            return Err(bad("it has an empty label (two dots in a row, or a leading dot)".into()));
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(bad(format!("the label `{label}` is longer than {MAX_LABEL_LEN} characters")));
        }
        if let Some(c) = label.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')) {
            return Err(bad(format!(
                "the label `{label}` contains `{c}`; only letters a-z, digits and hyphens are allowed"
            )));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(bad(format!("the label `{label}` starts or ends with a hyphen")));
        }
    }
    if labels.len() < min_labels {
        return Err(bad(format!("it needs at least {min_labels} labels (like `shop.example.com`)")));
    }
    // RFC 3696 §2: a top-level label is never all-numeric, so `1.2.3.999` is no hostname.
    if labels.last().is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit())) {
        return Err(bad("its last label is all digits, which looks like an IP address".into()));
    }
    Ok(name.to_owned())
}

/// Checks that the verification token fits one TXT character-string and can be written
/// inside double quotes in a zone file without escaping.
pub(crate) fn token(token: &str) -> Result<(), DnsError> {
    let bad = |reason: &str| DnsError::InvalidToken { reason: reason.to_owned() };
    if token.is_empty() {
        return Err(bad("it is empty"));
    }
    if token.len() > MAX_TOKEN_LEN {
        return Err(bad("it is longer than 255 bytes, the most one TXT string holds"));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\') {
        return Err(bad("only printable ASCII without spaces, quotes or backslashes is allowed"));
    }
    Ok(())
}

/// The CA identities, lowercased and checked as domain names (`letsencrypt.org`).
pub(crate) fn ca_identities(identities: &[String]) -> Result<Vec<String>, DnsError> {
    if identities.is_empty() {
        return Err(DnsError::NoCaIdentities);
    }
    identities
        .iter()
        .map(|id| {
            hostname(&id.trim().to_ascii_lowercase(), "CA identity", 1).map_err(|e| match e {
                DnsError::InvalidName { role, reason, .. } => DnsError::InvalidName { role, input: id.clone(), reason },
                other => other,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(input: &str) -> String {
        match hostname(input, "hostname", 2) {
            Err(DnsError::InvalidName { reason, .. }) => reason,
            other => panic!("{input}: expected an invalid-name error, got {other:?}"),
        }
    }

    #[test]
    fn accepts_lowercase_ldh_names_and_drops_one_trailing_dot() {
        assert_eq!(hostname("shop.example.test.", "hostname", 2).expect("valid"), "shop.example.test");
        assert_eq!(hostname("a-1.b2.test", "hostname", 2).expect("valid"), "a-1.b2.test");
        assert_eq!(hostname("localhost", "hostname", 1).expect("valid"), "localhost");
    }

    #[test]
    fn refuses_bad_names_with_the_reason() {
        assert!(reason("").contains("empty"));
        assert!(reason("127.0.0.1").contains("IP address"));
        assert!(reason("::1").contains("IP address"));
        assert!(reason("1.2.3.999").contains("all digits"));
        assert!(reason("Shop.Example.test").contains("`shop.example.test`"));
        assert!(reason("shop..example.test").contains("empty label"));
        assert!(reason("_svc.example.test").contains("`_`"));
        assert!(reason("*.example.test").contains("`*`"));
        assert!(reason("shop example.test").contains("` `"));
        assert!(reason("-shop.example.test").contains("hyphen"));
        assert!(reason("shop").contains("at least 2 labels"));
        assert!(reason(&format!("{}.test", "a".repeat(64))).contains("longer than 63"));
        assert!(reason(&format!("{}test", "abc.".repeat(70))).contains("at most 253"));
        assert!(reason("shöp.example.test").contains("`ö`"));
    }

    #[test]
    fn refuses_tokens_that_do_not_fit_a_quoted_txt_string() {
        assert!(token("abc_DEF-123").is_ok());
        for bad in ["", "with space", "quote\"", "back\\slash", &"x".repeat(256)] {
            assert!(matches!(token(bad), Err(DnsError::InvalidToken { .. })), "{bad:?} must be refused");
        }
    }

    #[test]
    fn lowercases_ca_identities_and_refuses_an_empty_list() {
        let ids = ca_identities(&["LetsEncrypt.org".into(), " pki.goog ".into()]).expect("valid");
        assert_eq!(ids, ["letsencrypt.org", "pki.goog"]);
        assert!(matches!(ca_identities(&[]), Err(DnsError::NoCaIdentities)));
        let err = ca_identities(&["lets encrypt".into()]).expect_err("a space is refused");
        assert!(err.to_string().contains("invalid CA identity `lets encrypt`"), "{err}");
    }
}
