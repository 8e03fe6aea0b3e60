//! Why a catalog was refused or could not be made.

/// Why a catalog was refused or could not be made. [`CatalogError::code`] is the stable name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// Not a signed catalog of a format this build reads.
    #[error("the catalog is not valid: {0}")]
    Malformed(String),
    /// The signature does not verify against the key the catalog names: it was altered
    /// after signing, or signed by another key.
    #[error(
        "the catalog's signature does not verify against its signing key {key}: it was changed after it was signed, \
         or signed by another key"
    )]
    SignatureInvalid {
        /// The key the catalog names.
        key: String,
    },
    /// Signed by a key that is not the pinned one, without a rotation statement by the pinned
    /// key.
    #[error(
        "the catalog is signed by {found}, not by the pinned key {pinned}, and {reason}; if the relay replaced its key, \
         confirm the new key with its operator and pin it"
    )]
    KeyUnknown {
        /// The key that signed it.
        found: String,
        /// The pinned key.
        pinned: String,
        /// Why no rotation applies.
        reason: String,
    },
    /// An older catalog than one already seen: a replay.
    #[error(
        "catalog sequence {got} is lower than sequence {seen}, the last one seen from this relay: an older catalog is \
         being served again (rollback)"
    )]
    Rollback {
        /// The sequence received.
        got: u64,
        /// The highest sequence seen.
        seen: u64,
    },
    /// The sequence already seen, with other content.
    #[error(
        "catalog sequence {sequence} was seen before with other content ({seen_digest}, now {digest}): a relay never \
         reuses a sequence, so one of them is not genuine"
    )]
    SequenceReused {
        /// The sequence.
        sequence: u64,
        /// The digest seen before.
        seen_digest: String,
        /// The digest now.
        digest: String,
    },
    /// Past its expiry.
    #[error("the catalog expired {ago} ago (sequence {sequence}); fetch a fresh one from the relay")]
    Expired {
        /// The catalog's sequence.
        sequence: u64,
        /// When it expired, Unix ms.
        expires_at: i64,
        /// How long ago, for people (`3 min 20 s`).
        ago: String,
    },
    /// A signing key could not be made, read or used.
    #[error("the catalog signing key: {0}")]
    Key(String),
    /// A file of the relay's catalog state could not be read or written.
    #[error("{path}: {reason}")]
    Storage {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

impl CatalogError {
    /// The stable code: `catalog_malformed`, `catalog_signature_invalid`,
    /// `catalog_key_unknown`, `catalog_rollback`, `catalog_sequence_reused`, `catalog_expired`,
    /// `catalog_key_invalid`, `catalog_storage_failed`.
    pub fn code(&self) -> &'static str {
        match self {
            CatalogError::Malformed(_) => "catalog_malformed",
            CatalogError::SignatureInvalid { .. } => "catalog_signature_invalid",
            CatalogError::KeyUnknown { .. } => "catalog_key_unknown",
            CatalogError::Rollback { .. } => "catalog_rollback",
            CatalogError::SequenceReused { .. } => "catalog_sequence_reused",
            CatalogError::Expired { .. } => "catalog_expired",
            CatalogError::Key(_) => "catalog_key_invalid",
            CatalogError::Storage { .. } => "catalog_storage_failed",
        }
    }
}

/// A duration in milliseconds for people: `2 h 5 min`, `3 min 20 s`, `12 s`, `250 ms`.
pub fn human_duration(ms: u64) -> String {
    let secs = ms / 1000;
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match () {
        () if d > 0 => format!("{d} d {h} h"),
        () if h > 0 => format!("{h} h {m} min"),
        () if m > 0 => format!("{m} min {s} s"),
        () if secs > 0 => format!("{s} s"),
        () => format!("{ms} ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(human_duration(250), "250 ms");
        assert_eq!(human_duration(12_400), "12 s");
        assert_eq!(human_duration(200_000), "3 min 20 s");
        assert_eq!(human_duration(7_500_000), "2 h 5 min");
        assert_eq!(human_duration(90_000_000), "1 d 1 h");
    }
}
