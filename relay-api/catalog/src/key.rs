//! Ed25519 keys (ring) and the bytes they sign: a catalog's key pair, public keys written
//! `ed25519:<base64url of the 32 bytes>`, signatures as base64url of the 64 bytes, and the
//! RFC 8785 canonical bytes of a JSON value.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::CatalogError;

/// The prefix of a written public key.
const PREFIX: &str = "ed25519:";

/// The largest integer every JSON reader represents exactly (2^53): RFC 8785 writes numbers
/// as ECMAScript does, so only integers up to it have one canonical form everywhere.
const EXACT_INTEGER: u64 = 1 << 53;

/// An Ed25519 public key, written `ed25519:<base64url of the 32 bytes, no padding>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey([u8; 32]);

impl PublicKey {
    /// The 32 bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Whether `signature` (base64url) is this key's signature of `message`.
    pub fn verifies(&self, message: &[u8], signature: &str) -> bool {
        let Ok(bytes) = URL_SAFE_NO_PAD.decode(signature) else { return false };
        bytes.len() == 64 && UnparsedPublicKey::new(&ED25519, &self.0).verify(message, &bytes).is_ok()
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}", URL_SAFE_NO_PAD.encode(self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for PublicKey {
    type Err = CatalogError;

    fn from_str(s: &str) -> Result<PublicKey, CatalogError> {
        let bad = |why: &str| {
            CatalogError::Malformed(format!(
                "\"{s}\" is not an Ed25519 public key ({why}): write `ed25519:` and the base64url of its 32 bytes"
            ))
        };
        let encoded = s.strip_prefix(PREFIX).ok_or_else(|| bad("no `ed25519:` prefix"))?;
        let bytes = URL_SAFE_NO_PAD.decode(encoded).map_err(|_| bad("not base64url without padding"))?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| bad("not 32 bytes"))?;
        Ok(PublicKey(bytes))
    }
}

impl Serialize for PublicKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PublicKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PublicKey, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A signing key: an Ed25519 key pair read from (or generated as) PKCS#8.
pub struct CatalogKey {
    pair: Ed25519KeyPair,
    public: PublicKey,
}

impl fmt::Debug for CatalogKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CatalogKey").field("public", &self.public).finish_non_exhaustive()
    }
}

impl CatalogKey {
    /// A new key and its PKCS#8 document (what to store).
    pub fn generate() -> Result<(CatalogKey, Vec<u8>), CatalogError> {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng)
            .map_err(|_| CatalogError::Key("the random number generator failed".into()))?;
        let key = CatalogKey::from_pkcs8(pkcs8.as_ref())?;
        Ok((key, pkcs8.as_ref().to_vec()))
    }

    /// Reads a PKCS#8 document (v1 or v2, as ring writes them).
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<CatalogKey, CatalogError> {
        let pair = Ed25519KeyPair::from_pkcs8_maybe_unchecked(pkcs8)
            .map_err(|e| CatalogError::Key(format!("not an Ed25519 PKCS#8 key: {e}")))?;
        let bytes: [u8; 32] = pair
            .public_key()
            .as_ref()
            .try_into()
            .map_err(|_| CatalogError::Key("the public key is not 32 bytes".into()))?;
        Ok(CatalogKey { pair, public: PublicKey(bytes) })
    }

    /// The public key.
    pub fn public_key(&self) -> PublicKey {
        self.public
    }

    /// The signature of `message`, base64url.
    pub fn sign(&self, message: &[u8]) -> String {
        URL_SAFE_NO_PAD.encode(self.pair.sign(message).as_ref())
    }
}

/// The RFC 8785 canonical bytes of a JSON value. Integers beyond 2^53 and fractions are
/// refused: nothing in a catalog needs them, and they are where JSON readers disagree.
pub fn canonical_bytes(value: &Value) -> Result<Vec<u8>, CatalogError> {
    check_numbers(value, "")?;
    serde_json_canonicalizer::to_vec(value).map_err(|e| CatalogError::Malformed(format!("not canonical JSON: {e}")))
}

fn check_numbers(value: &Value, pointer: &str) -> Result<(), CatalogError> {
    match value {
        Value::Number(n) => {
            let exact = n
                .as_u64()
                .map(|u| u <= EXACT_INTEGER)
                .or_else(|| n.as_i64().map(|i| i.unsigned_abs() <= EXACT_INTEGER));
            if exact != Some(true) {
                return Err(CatalogError::Malformed(format!(
                    "{pointer}: {n} is not an integer of at most 2^53 (the only numbers a catalog holds)"
                )));
            }
            Ok(())
        }
        Value::Array(items) => {
            items.iter().enumerate().try_for_each(|(i, v)| check_numbers(v, &format!("{pointer}/{i}")))
        }
        Value::Object(members) => members
            .iter()
            .try_for_each(|(k, v)| check_numbers(v, &format!("{pointer}/{}", k.replace('~', "~0").replace('/', "~1")))),
        Value::Null | Value::Bool(_) | Value::String(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_sign() {
        let (key, pkcs8) = CatalogKey::generate().expect("a key");
        let again = CatalogKey::from_pkcs8(&pkcs8).expect("read back");
        assert_eq!(key.public_key(), again.public_key());
        let text = key.public_key().to_string();
        assert!(text.starts_with("ed25519:") && text.len() == 8 + 43, "{text}");
        assert_eq!(text.parse::<PublicKey>().expect("parse"), key.public_key());
        let signature = key.sign(b"message");
        assert!(key.public_key().verifies(b"message", &signature));
        assert!(!key.public_key().verifies(b"messagE", &signature));
        let (other, _) = CatalogKey::generate().expect("a key");
        assert!(!other.public_key().verifies(b"message", &signature));
        assert!(!key.public_key().verifies(b"message", "not base64!"));
    }

    #[test]
    fn bad_public_keys_say_what_is_wrong() {
        for (text, why) in [
            ("AAAA", "prefix"),
            ("ed25519:AAAA", "32 bytes"),
            ("ed25519:+/+/", "base64url"),
            ("ed25519:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", "base64url"),
        ] {
            let e = text.parse::<PublicKey>().expect_err(text).to_string();
            assert!(e.contains(why), "{text}: {e}");
        }
        assert!(CatalogKey::from_pkcs8(b"not a key").is_err());
    }

    #[test]
    fn canonical_bytes_sort_keys_and_refuse_inexact_numbers() {
        let value = serde_json::json!({"b": 1, "a": [true, null, "x"], "c": {"z": 9007199254740992_u64, "y": -3}});
        let bytes = canonical_bytes(&value).expect("canonical");
        assert_eq!(bytes, br#"{"a":[true,null,"x"],"b":1,"c":{"y":-3,"z":9007199254740992}}"#);
        let e = canonical_bytes(&serde_json::json!({"p": {"q": 9007199254740993_u64}})).expect_err("2^53 + 1");
        assert!(e.to_string().contains("/p/q"), "{e}");
        assert!(canonical_bytes(&serde_json::json!([1.5])).is_err());
    }
}
