//! Bearer tokens and member roles. A token is 32 random bytes, shown once; the store keeps
//! only its SHA-256 (a fast hash is enough for a secret of that entropy: there is nothing to
//! guess that a slow hash would protect).

use crate::digest::sha256;

/// A member role, from least to most trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Reads applications, versions, activity and capabilities.
    Viewer,
    /// Also creates applications and publishes.
    Developer,
    /// Administers the organization (reserved for organization settings).
    Admin,
    /// Owns the organization.
    Owner,
}

impl Role {
    /// Every role, least trusted first.
    pub const ALL: [Role; 4] = [Role::Viewer, Role::Developer, Role::Admin, Role::Owner];

    /// The spelling in the store and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Developer => "developer",
            Role::Admin => "admin",
            Role::Owner => "owner",
        }
    }

    /// Reads a spelling.
    pub fn parse(text: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == text)
    }

    /// Whether this role may create applications and publish policy versions.
    pub fn can_publish(self) -> bool {
        self >= Role::Developer
    }
}

/// A freshly issued token: the plaintext (print once) and what the store keeps.
#[derive(Debug, Clone)]
pub struct IssuedToken {
    /// `svc_` and 64 hex digits. Never stored.
    pub plaintext: String,
    /// `tok_` and 16 hex digits; public, names the token in activity.
    pub id: String,
    /// SHA-256 of the plaintext, hex.
    pub hash: String,
}

/// Why randomness was unavailable.
#[derive(Debug, thiserror::Error)]
#[error("the operating system's random number generator failed: {0}")]
pub struct RandomError(String);

/// Issues a new token.
pub fn issue_token() -> Result<IssuedToken, RandomError> {
    let plaintext = format!("svc_{}", random_hex(32)?);
    Ok(IssuedToken { id: format!("tok_{}", random_hex(8)?), hash: hash_token(&plaintext), plaintext })
}

/// The stored form of a token.
pub fn hash_token(plaintext: &str) -> String {
    sha256(plaintext.as_bytes()).trim_start_matches("sha256:").to_owned()
}

/// A new immutable application identity: `app_` and 32 hex digits.
pub fn new_application_uid() -> Result<String, RandomError> {
    Ok(format!("app_{}", random_hex(16)?))
}

fn random_hex(bytes: usize) -> Result<String, RandomError> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).map_err(|e| RandomError(e.to_string()))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// Reads the token from an `Authorization: Bearer ...` header value.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_distinct_and_hash_to_their_stored_form() {
        let (a, b) = (issue_token().expect("random"), issue_token().expect("random"));
        assert_ne!(a.plaintext, b.plaintext);
        assert_eq!(a.plaintext.len(), 4 + 64);
        assert_eq!(hash_token(&a.plaintext), a.hash);
        assert!(!a.hash.contains(&a.plaintext[4..]));
    }

    #[test]
    fn bearer_reads_only_the_bearer_scheme() {
        assert_eq!(bearer("Bearer svc_x"), Some("svc_x"));
        assert_eq!(bearer("bearer  svc_x "), Some("svc_x"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("svc_x"), None);
    }

    #[test]
    fn only_developers_and_above_publish() {
        assert!(!Role::Viewer.can_publish());
        assert!(Role::Developer.can_publish() && Role::Admin.can_publish() && Role::Owner.can_publish());
    }
}
