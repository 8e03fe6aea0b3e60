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
}
