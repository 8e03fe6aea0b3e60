//! Names people choose that end up inside hostnames (`<project>-<org>.<relay domain>`) and
//! paths: one rule for organization names, checked at every edge that creates one (both
//! admin CLIs, the relay store, the publication store's admin).

/// The rule, as error messages and docs state it.
pub const ORGANIZATION_RULE: &str =
    "1-32 characters of a-z, 0-9 and single hyphens, starting and ending with a letter or digit";

/// The longest organization name.
pub const ORGANIZATION_MAX: usize = 32;

/// An organization name that breaks [`ORGANIZATION_RULE`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("organization name {name:?} is not valid: {ORGANIZATION_RULE}{hint}")]
pub struct OrganizationNameError {
    name: String,
    hint: String,
}

/// Checks `name` against [`ORGANIZATION_RULE`].
pub fn organization(name: &str) -> Result<&str, OrganizationNameError> {
    if follows_rule(name) {
        return Ok(name);
    }
    let lower = name.trim().to_ascii_lowercase();
    let hint = if follows_rule(&lower) { format!("; did you mean \"{lower}\"?") } else { String::new() };
    let shown: String = name.chars().take(ORGANIZATION_MAX + 8).collect();
    Err(OrganizationNameError { name: shown, hint })
}

/// [`organization`] as a `clap` value parser.
pub fn parse_organization(name: &str) -> Result<String, OrganizationNameError> {
    organization(name).map(str::to_owned)
}

fn follows_rule(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=ORGANIZATION_MAX).contains(&bytes.len())
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first() != Some(&b'-')
        && bytes.last() != Some(&b'-')
        && !name.contains("--")
}

/// The rule for a token's name (`--name` of both token commands), as messages state it.
pub const TOKEN_NAME_RULE: &str = "1-64 characters, no control or bidirectional formatting characters, not blank";

/// The longest token name, in characters.
pub const TOKEN_NAME_MAX: usize = 64;

/// A token name that breaks [`TOKEN_NAME_RULE`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("token name {name:?} is not valid: {TOKEN_NAME_RULE}")]
pub struct TokenNameError {
    name: String,
}

/// Checks a token's name (shown in timelines, activity and the consoles' "signed in as"):
/// what people read, so free text, but bounded and on one line.
pub fn token_name(name: &str) -> Result<&str, TokenNameError> {
    let count = name.chars().count();
    if (1..=TOKEN_NAME_MAX).contains(&count)
        && !name.trim().is_empty()
        && !name.chars().any(|c| c.is_control() || is_bidi_formatting(c))
    {
        return Ok(name);
    }
    let shown: String = name.chars().take(TOKEN_NAME_MAX + 8).collect();
    Err(TokenNameError { name: shown })
}

/// A character that reorders the text around it (the marks, embeddings, overrides and
/// isolates of Unicode's bidirectional algorithm): in a name shown inside a sentence
/// ("stopped by NAME (console)"), one would turn the rest of the line around.
fn is_bidi_formatting(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// [`token_name`] as a `clap` value parser.
pub fn parse_token_name(name: &str) -> Result<String, TokenNameError> {
    token_name(name).map(str::to_owned)
}

/// The name of a token issued without `--name`: its role and the first four hex digits of its
/// ID (`tok_6f42...` as `developer-6f42`), what people tell apart at a glance.
pub fn default_token_name(role: &str, token_id: &str) -> String {
    let hex = token_id.strip_prefix("tok_").unwrap_or(token_id);
    let short: String = hex.chars().take(4).collect();
    format!("{role}-{short}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn organization_names_follow_one_slug_rule() {
        for good in ["acme", "b-c", "c", "a1-2b", &"x".repeat(32)] {
            assert_eq!(organization(good), Ok(good), "{good}");
        }
        for bad in ["", "Acme", "a--b", "-a", "a-", "a_b", "a.b", "ácme", " acme", &"x".repeat(33)] {
            assert!(organization(bad).is_err(), "{bad:?} must be refused");
        }
        let err = organization("Acme").expect_err("upper case").to_string();
        assert!(err.contains("did you mean \"acme\"") && err.contains(ORGANIZATION_RULE), "{err}");
        assert!(!organization("a--b").expect_err("double").to_string().contains("did you mean"));
    }

    #[test]
    fn a_token_name_that_reorders_the_text_around_it_is_refused() {
        // "stopped by Ada\u{202e}nimda (console)" would read "stopped by Ada(elosnoc) admin".
        for bad in ["Ada\u{202e}nimda", "a\u{2066}b", "\u{200f}x", "x\u{061c}"] {
            let e = token_name(bad).expect_err("refused");
            assert!(e.to_string().contains("no control or bidirectional formatting characters"), "{e}");
        }
        // Right-to-left letters themselves are names like any other.
        assert_eq!(token_name("مريم"), Ok("مريم"));
    }

    #[test]
    fn token_names_are_one_bounded_line() {
        for good in ["Ada Lovelace", "ci", "déploiement", &"x".repeat(64)] {
            assert_eq!(token_name(good), Ok(good), "{good}");
        }
        for bad in ["", "  ", "a\nb", "a\u{1b}[31m", &"x".repeat(65)] {
            assert!(token_name(bad).is_err(), "{bad:?} must be refused");
        }
        assert_eq!(default_token_name("customer", "tok_6f42aa0011223344"), "customer-6f42");
    }
}
