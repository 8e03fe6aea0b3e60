//! A sealed value: AES-256-GCM under a data key, bound to the row it belongs to.
//!
//! ```text
//! byte 0       format version (1)
//! bytes 1..5   the data key's id (big-endian u32)
//! bytes 5..17  a random 96-bit nonce
//! bytes 17..   ciphertext, then the 16-byte tag
//! ```
//!
//! The additional authenticated data is a label, the data key's id and the row's
//! [`Context`] (its table and key columns, each length-prefixed): a sealed value copied into
//! another tenant's row, or another secret's, does not open there.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce};

use crate::KeyError;

/// A data key's id in its store (1, 2, ...; the highest is current): a sealed value names its
/// data key by it, in four bytes.
pub type DataKeyId = u32;

const VERSION: u8 = 1;
const HEADER: usize = 1 + 4 + NONCE_LEN;
const TAG_LEN: usize = 16;
/// The prefix of a sealed value written as text (for a `TEXT` column).
pub const TEXT_PREFIX: &str = "sealed-v1.";

/// Where a sealed value belongs: its table and the values of its row's key, e.g.
/// `Context::new("provisioned_secrets", &["7", "web", "API_KEY"])`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context(Vec<u8>);

impl Context {
    /// The context of a row of `table` whose key is `parts`.
    pub fn new(table: &str, parts: &[&str]) -> Self {
        let mut bytes = Vec::with_capacity(64);
        for part in std::iter::once(table).chain(parts.iter().copied()) {
            bytes.extend_from_slice(&u32::try_from(part.len()).unwrap_or(u32::MAX).to_be_bytes());
            bytes.extend_from_slice(part.as_bytes());
        }
        Self(bytes)
    }
}

/// The data key a sealed value names, without opening it.
pub fn data_key_id(sealed: &[u8]) -> Result<DataKeyId, KeyError> {
    if sealed.len() < HEADER + TAG_LEN || sealed[0] != VERSION {
        return Err(KeyError::Corrupt { what: "a sealed value" });
    }
    let mut id = [0u8; 4];
    id.copy_from_slice(&sealed[1..5]);
    Ok(u32::from_be_bytes(id))
}

/// `plaintext` sealed under `key` (whose id is `id`) for the row `context`.
pub(crate) fn seal(key: &LessSafeKey, id: DataKeyId, context: &Context, plaintext: &[u8]) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::with_capacity(HEADER + plaintext.len() + TAG_LEN);
    out.push(VERSION);
    out.extend_from_slice(&id.to_be_bytes());
    let mut nonce = [0u8; NONCE_LEN];
    crate::random(&mut nonce)?;
    out.extend_from_slice(&nonce);
    let mut body = plaintext.to_vec();
    key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(aad(id, context)), &mut body)
        .map_err(|_| KeyError::Corrupt { what: "a value to seal" })?;
    out.extend_from_slice(&body);
    zeroize::Zeroize::zeroize(&mut body);
    Ok(out)
}

/// The plaintext of `sealed`, which names data key `id`, under `key`.
pub(crate) fn open(
    key: &LessSafeKey,
    id: DataKeyId,
    context: &Context,
    sealed: &[u8],
) -> Result<zeroize::Zeroizing<Vec<u8>>, KeyError> {
    let corrupt = || KeyError::Corrupt { what: "a sealed value" };
    if data_key_id(sealed)? != id {
        return Err(corrupt());
    }
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&sealed[5..HEADER]);
    let mut body = zeroize::Zeroizing::new(sealed[HEADER..].to_vec());
    let length = key
        .open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(aad(id, context)), &mut body)
        .map_err(|_| corrupt())?
        .len();
    body.truncate(length);
    Ok(body)
}

fn aad(id: DataKeyId, context: &Context) -> Vec<u8> {
    let mut aad = b"svc-sealed-v1\0".to_vec();
    aad.extend_from_slice(&id.to_be_bytes());
    aad.extend_from_slice(&context.0);
    aad
}

/// A sealed value as text, for a `TEXT` column: `sealed-v1.` and base64url.
pub fn to_text(sealed: &[u8]) -> String {
    format!("{TEXT_PREFIX}{}", URL_SAFE_NO_PAD.encode(sealed))
}

/// A sealed value written by [`to_text`]; `None` when `text` is not one (a value stored in
/// clear by an older version, which the store seals at start).
pub fn from_text(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text.strip_prefix(TEXT_PREFIX)?).ok()
}

/// An AES-256-GCM key from 32 bytes.
pub(crate) fn aead_key(bytes: &[u8; 32]) -> LessSafeKey {
    // 32 bytes is AES-256's key length, so this cannot fail.
    #[allow(clippy::expect_used)]
    LessSafeKey::new(ring::aead::UnboundKey::new(&AES_256_GCM, bytes).expect("a 32-byte AES-256-GCM key"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> LessSafeKey {
        aead_key(&[7u8; 32])
    }

    #[test]
    fn a_sealed_value_opens_only_in_its_own_row() {
        let row = Context::new("provisioned_secrets", &["1", "web", "API_KEY"]);
        let sealed = seal(&key(), 3, &row, b"hunter2").expect("sealed");
        assert_eq!(data_key_id(&sealed).expect("id"), 3);
        assert!(!sealed.windows(7).any(|w| w == b"hunter2"), "no plaintext in the sealed bytes");
        assert_eq!(open(&key(), 3, &row, &sealed).expect("opens").as_slice(), b"hunter2");
        let other_tenant = Context::new("provisioned_secrets", &["2", "web", "API_KEY"]);
        assert!(open(&key(), 3, &other_tenant, &sealed).is_err());
        // The parts are length-prefixed: `we` + `bAPI_KEY` is another row than `web` + `API_KEY`.
        let shifted = Context::new("provisioned_secrets", &["1", "we", "bAPI_KEY"]);
        assert!(open(&key(), 3, &shifted, &sealed).is_err());
        let mut flipped = sealed.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(open(&key(), 3, &row, &flipped).is_err());
    }

    #[test]
    fn the_same_value_seals_differently_each_time_and_round_trips_as_text() {
        let row = Context::new("t", &["k"]);
        let a = seal(&key(), 1, &row, b"same").expect("sealed");
        let b = seal(&key(), 1, &row, b"same").expect("sealed");
        assert_ne!(a, b, "a fresh nonce each time");
        assert_eq!(from_text(&to_text(&a)).expect("text"), a);
        assert!(from_text("{\"A\":\"in clear\"}").is_none());
        assert!(data_key_id(b"short").is_err());
    }
}
