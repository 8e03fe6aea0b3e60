//! A customer's side: a [`Verifier`] holds the pinned key and the last catalog seen, and
//! accepts a catalog only if it is signed by that key (or by the key a rotation statement of
//! that key names), not older than the last one seen, and not expired.

use serde::{Deserialize, Serialize};

use super::CatalogError;
use super::error::human_duration;
use super::key::PublicKey;
use super::model::{Catalog, SignedCatalog};

/// What a customer trusts about one relay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Pin {
    /// The key catalogs must be signed by.
    pub key: PublicKey,
    /// The newest catalog accepted so far (none yet for a key configured by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<Seen>,
}

/// The newest catalog accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Seen {
    /// Its sequence.
    pub sequence: u64,
    /// `sha256:` of its canonical bytes.
    pub digest: String,
}

/// An accepted catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedCatalog {
    /// The catalog.
    pub catalog: Catalog,
    /// `sha256:` of its canonical bytes.
    pub digest: String,
    /// No key was pinned: this catalog's key is now (trust on first use).
    pub first_use: bool,
    /// The pinned key it replaced by a rotation statement, if it did.
    pub rotated_from: Option<PublicKey>,
}

/// Checks catalogs against a pin and moves the pin forward on success only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verifier {
    pin: Option<Pin>,
}

impl Verifier {
    /// Nothing pinned: the first catalog's key is trusted (and should be checked out of band).
    pub fn first_use() -> Verifier {
        Verifier { pin: None }
    }

    /// A pinned key and what was seen under it.
    pub fn pinned(pin: Pin) -> Verifier {
        Verifier { pin: Some(pin) }
    }

    /// The pin (after a successful [`Verifier::verify`], the new one).
    pub fn pin(&self) -> Option<&Pin> {
        self.pin.as_ref()
    }

    /// Accepts `signed` at `now_ms` (Unix ms), or says why not. The checks, in order: the
    /// signature against the key the catalog names; that key is the pinned one, or a
    /// rotation statement signed by the pinned key names it; the sequence is not lower than
    /// the last seen (and, equal, the content is the same); the catalog has not expired. On
    /// success the pin holds the catalog's key and sequence; on failure it is unchanged.
    pub fn verify(&mut self, signed: &SignedCatalog, now_ms: i64) -> Result<VerifiedCatalog, CatalogError> {
        let opened = signed.open()?;
        let catalog = opened.catalog;
        let key = catalog.signing_key;
        let mut rotated_from = None;
        if let Some(pin) = &self.pin
            && pin.key != key
        {
            let refuse = |reason: String| CatalogError::KeyUnknown {
                found: key.to_string(),
                pinned: pin.key.to_string(),
                reason,
            };
            let Some(r) = &signed.rotation else {
                return Err(refuse("it carries no rotation statement".into()));
            };
            if r.from != pin.key {
                return Err(refuse(format!("its rotation statement is from {}, not from the pinned key", r.from)));
            }
            if !r.is_signed() {
                return Err(refuse("its rotation statement's signature does not verify against the pinned key".into()));
            }
            if catalog.sequence < r.sequence {
                return Err(refuse(format!(
                    "the rotation takes effect at sequence {}, after this catalog's {}",
                    r.sequence, catalog.sequence
                )));
            }
            rotated_from = Some(pin.key);
        }
        if let Some(seen) = self.pin.as_ref().and_then(|p| p.last.as_ref()) {
            if catalog.sequence < seen.sequence {
                return Err(CatalogError::Rollback { got: catalog.sequence, seen: seen.sequence });
            }
            if catalog.sequence == seen.sequence && opened.digest != seen.digest {
                return Err(CatalogError::SequenceReused {
                    sequence: catalog.sequence,
                    seen_digest: seen.digest.clone(),
                    digest: opened.digest,
                });
            }
        }
        if now_ms >= catalog.expires_at {
            let ago = u64::try_from(now_ms.saturating_sub(catalog.expires_at)).unwrap_or(0);
            return Err(CatalogError::Expired {
                sequence: catalog.sequence,
                expires_at: catalog.expires_at,
                ago: human_duration(ago),
            });
        }
        let first_use = self.pin.is_none();
        self.pin = Some(Pin { key, last: Some(Seen { sequence: catalog.sequence, digest: opened.digest.clone() }) });
        Ok(VerifiedCatalog { catalog, digest: opened.digest, first_use, rotated_from })
    }
}
