//! The catalog's checks, each refusal on its own: tampering, a wrong key, expiry, rollback,
//! a reused sequence, rotation (accepted, signed by the wrong key, from an unknown key), and
//! the coordinator's files (key mode, sequence across restarts, re-signing, rotation).

use std::time::Duration;

use serde_json::Value;

use super::*;

const NOW: i64 = 1_750_000_000_000;
const HOUR: i64 = 3_600_000;

fn content(price: u64) -> CatalogContent {
    CatalogContent {
        relay: "relay.test".into(),
        gateways: vec![CatalogGateway {
            operator: "op-one".into(),
            hostname: "gw1.relay.test".into(),
            public_key: "ed25519:gateway".into(),
            endpoints: None,
        }],
        prices: Prices { price_micros: price, period_secs: 3600, currency: model::CURRENCY.into() },
        validators: vec![ValidatorDigest { version: "route-validation/1".into(), digest: "sha256:00".into() }],
        certificate_authorities: vec![CertificateAuthority {
            kind: "development".into(),
            name: "svc development CA".into(),
            caa_identities: Vec::new(),
        }],
    }
}

fn signed(key: &CatalogKey, sequence: u64, price: u64) -> SignedCatalog {
    let catalog = content(price).catalog(sequence, NOW, NOW + 24 * HOUR, key.public_key(), None);
    SignedCatalog::sign(&catalog, key, None).expect("sign")
}

fn key() -> CatalogKey {
    CatalogKey::generate().expect("a key").0
}

fn code(result: Result<VerifiedCatalog, CatalogError>) -> &'static str {
    match result {
        Ok(v) => panic!("accepted sequence {}", v.catalog.sequence),
        Err(e) => e.code(),
    }
}

#[test]
fn first_use_pins_the_key_and_the_sequence() {
    let k = key();
    let mut v = Verifier::first_use();
    let ok = v.verify(&signed(&k, 3, 250_000), NOW).expect("verified");
    assert!(ok.first_use && ok.rotated_from.is_none());
    assert_eq!(ok.catalog.prices.price_micros, 250_000);
    let pin = v.pin().expect("pinned");
    assert_eq!(pin.key, k.public_key());
    assert_eq!(pin.last, Some(Seen { sequence: 3, digest: ok.digest.clone() }));
    // The same catalog again is fine; the digest is of the canonical bytes.
    let again = v.verify(&signed(&k, 3, 250_000), NOW + 1).expect("the same catalog again");
    assert!(!again.first_use);
    let bytes = canonical_bytes(&Value::Object(signed(&k, 3, 250_000).catalog)).expect("canonical");
    assert_eq!(again.digest, manifest_core::sha256(&bytes));
}

#[test]
fn one_changed_byte_breaks_the_signature() {
    let k = key();
    let good = serde_json::to_string(&signed(&k, 1, 250_000)).expect("json");
    // One digit of the price, inside the signed object.
    let tampered = good.replacen("250000", "250001", 1);
    assert_ne!(tampered, good);
    let tampered = SignedCatalog::from_json(tampered.as_bytes()).expect("still a signed catalog");
    let mut v = Verifier::pinned(Pin { key: k.public_key(), last: None });
    let e = v.verify(&tampered, NOW).expect_err("tampered");
    assert_eq!(e.code(), "catalog_signature_invalid");
    assert!(e.to_string().contains(&k.public_key().to_string()), "{e}");
    assert_eq!(v.pin(), Some(&Pin { key: k.public_key(), last: None }), "a refusal leaves the pin alone");
    // Tampering a member's name or adding one breaks it too.
    let renamed = SignedCatalog::from_json(good.replacen("\"relay\"", "\"relaY\"", 1).as_bytes()).expect("json");
    assert_eq!(code(Verifier::first_use().verify(&renamed, NOW)), "catalog_signature_invalid");
    let mut added = signed(&k, 1, 250_000);
    added.catalog.insert("extra".into(), Value::Bool(true));
    assert_eq!(code(Verifier::first_use().verify(&added, NOW)), "catalog_signature_invalid");
}

#[test]
fn a_signature_by_another_key_is_refused() {
    let (k, other) = (key(), key());
    // Names k as its key but is signed by another: the signature does not verify.
    let mut forged = signed(&k, 1, 250_000);
    forged.signature = signed(&other, 1, 250_000).signature;
    assert_eq!(code(Verifier::first_use().verify(&forged, NOW)), "catalog_signature_invalid");
    // Honestly signed by another key: not the pinned one.
    let mut v = Verifier::pinned(Pin { key: k.public_key(), last: None });
    let e = v.verify(&signed(&other, 2, 250_000), NOW).expect_err("another key");
    assert_eq!(e.code(), "catalog_key_unknown");
    let text = e.to_string();
    assert!(text.contains(&other.public_key().to_string()) && text.contains("no rotation statement"), "{text}");
}

#[test]
fn an_expired_catalog_is_refused_saying_how_long_ago() {
    let k = key();
    let s = signed(&k, 1, 250_000);
    let mut v = Verifier::first_use();
    let e = v.verify(&s, NOW + 24 * HOUR + 200_000).expect_err("expired");
    assert_eq!(e.code(), "catalog_expired");
    assert!(e.to_string().contains("expired 3 min 20 s ago"), "{e}");
    assert!(v.pin().is_none(), "nothing pinned from an expired catalog");
    assert_eq!(code(v.verify(&s, NOW + 24 * HOUR)), "catalog_expired", "expiresAt itself is past");
    v.verify(&s, NOW + 24 * HOUR - 1).expect("valid until then");
}

#[test]
fn a_lower_sequence_is_a_rollback_and_a_reused_one_is_refused() {
    let k = key();
    let mut v = Verifier::first_use();
    let old = signed(&k, 4, 250_000);
    v.verify(&old, NOW).expect("4");
    v.verify(&signed(&k, 5, 300_000), NOW).expect("5");
    let e = v.verify(&old, NOW).expect_err("4 again");
    assert_eq!(e.code(), "catalog_rollback");
    assert!(e.to_string().contains("sequence 4 is lower than sequence 5"), "{e}");
    // Sequence 5 with other content.
    let e = v.verify(&signed(&k, 5, 999), NOW).expect_err("5 reused");
    assert_eq!(e.code(), "catalog_sequence_reused");
    assert_eq!(v.pin().and_then(|p| p.last.as_ref()).map(|s| s.sequence), Some(5), "the pin stays at 5");
    v.verify(&signed(&k, 5, 300_000), NOW).expect("5 itself again");
}

/// A catalog signed by `new` carrying `rotation`.
fn rotated(new: &CatalogKey, sequence: u64, rotation: Rotation) -> SignedCatalog {
    let catalog = content(250_000).catalog(sequence, NOW, NOW + 24 * HOUR, new.public_key(), Some(rotation.from));
    SignedCatalog::sign(&catalog, new, Some(rotation)).expect("sign")
}

#[test]
fn a_rotation_signed_by_the_pinned_key_moves_the_pin() {
    let (old, new) = (key(), key());
    let mut v = Verifier::first_use();
    v.verify(&signed(&old, 7, 250_000), NOW).expect("old key");
    let rotation = Rotation::sign(&old, new.public_key(), 8).expect("rotation");
    let ok = v.verify(&rotated(&new, 8, rotation.clone()), NOW).expect("rotated");
    assert_eq!(ok.rotated_from, Some(old.public_key()));
    assert_eq!(v.pin().map(|p| p.key), Some(new.public_key()));
    // Later catalogs of the new key verify, with or without the statement; the old key's no more.
    v.verify(&rotated(&new, 9, rotation), NOW).expect("still carried");
    v.verify(&signed(&new, 10, 250_000), NOW).expect("new key alone");
    assert_eq!(code(v.verify(&signed(&old, 11, 250_000), NOW)), "catalog_key_unknown");
}

#[test]
fn a_rotation_not_signed_by_the_pinned_key_is_refused() {
    let (old, new, stranger) = (key(), key(), key());
    let pinned = Pin { key: old.public_key(), last: Some(Seen { sequence: 7, digest: "sha256:x".into() }) };
    // Claims to be from the pinned key, signed by another.
    let mut forged = Rotation::sign(&old, new.public_key(), 8).expect("rotation");
    forged.signature = Rotation::sign(&stranger, new.public_key(), 8).expect("rotation").signature;
    let e = Verifier::pinned(pinned.clone()).verify(&rotated(&new, 8, forged), NOW).expect_err("forged");
    assert_eq!(e.code(), "catalog_key_unknown");
    assert!(e.to_string().contains("signature does not verify"), "{e}");
    // From a key that is not pinned (a stranger vouching for the new key).
    let e = Verifier::pinned(pinned.clone())
        .verify(&rotated(&new, 8, Rotation::sign(&stranger, new.public_key(), 8).expect("r")), NOW)
        .expect_err("unknown");
    assert_eq!(e.code(), "catalog_key_unknown");
    assert!(e.to_string().contains(&format!("from {}", stranger.public_key())), "{e}");
    // A statement whose own fields were changed after signing.
    let mut moved = Rotation::sign(&old, new.public_key(), 8).expect("rotation");
    moved.sequence = 2;
    assert_eq!(code(Verifier::pinned(pinned.clone()).verify(&rotated(&new, 8, moved), NOW)), "catalog_key_unknown");
    // A catalog before the rotation's first sequence.
    let early = Rotation::sign(&old, new.public_key(), 20).expect("rotation");
    let e = Verifier::pinned(pinned.clone()).verify(&rotated(&new, 8, early), NOW).expect_err("early");
    assert!(e.to_string().contains("at sequence 20"), "{e}");
    // A statement for another key than the one that signed the catalog is malformed.
    let other = Rotation::sign(&old, stranger.public_key(), 8).expect("rotation");
    let catalog = content(1).catalog(8, NOW, NOW + HOUR, new.public_key(), Some(old.public_key()));
    let mismatched = SignedCatalog::sign(&catalog, &new, Some(other));
    assert_eq!(mismatched.map(|_| ()).map_err(|e| e.code()), Err("catalog_malformed"));
}

#[test]
fn unreadable_catalogs_are_malformed() {
    for text in
        ["[]", r#"{"catalog": {}, "signature": ""}"#, r#"{"catalog": {"signingKey": "ed25519:AA"}, "signature": ""}"#]
    {
        let result = SignedCatalog::from_json(text.as_bytes()).and_then(|s| Verifier::first_use().verify(&s, NOW));
        assert_eq!(result.map(|_| ()).map_err(|e| e.code()), Err("catalog_malformed"), "{text}");
    }
    // Validly signed but of another version: this build cannot read it.
    let k = key();
    let mut c = content(1).catalog(1, NOW, NOW + HOUR, k.public_key(), None);
    c.version = 2;
    assert_eq!(SignedCatalog::sign(&c, &k, None).map(|_| ()).map_err(|e| e.code()), Err("catalog_malformed"));
}

fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("svc-catalog-{name}-")).tempdir().expect("a scratch directory")
}

#[test]
fn the_publisher_keeps_its_key_and_sequence_and_resigns_when_needed() {
    let scratch = temp_dir("publisher");
    let dir = scratch.path();
    let validity = Duration::from_secs(3600);
    let p = Publisher::open(dir, validity).expect("open");
    let key_file = dir.join("catalog/signing-key.pk8");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).expect("key file").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the key is private");
    }
    let mut v = Verifier::first_use();
    let first = p.current(content(250_000), NOW).expect("first");
    assert_eq!(v.verify(&first, NOW).expect("verifies").catalog.sequence, 1);
    assert_eq!(p.current(content(250_000), NOW + 1000).expect("again"), first, "unchanged: the same bytes");
    // A restart with a changed price: same key, the next sequence.
    drop(p);
    let p = Publisher::open(dir, validity).expect("reopen");
    let second = p.current(content(300_000), NOW + 2000).expect("changed");
    let ok = v.verify(&second, NOW + 2000).expect("verifies");
    assert_eq!((ok.catalog.sequence, ok.catalog.prices.price_micros), (2, 300_000));
    // Past half its validity: re-signed with a fresh expiry and the next sequence.
    let later = NOW + 2000 + HOUR / 2 + 1;
    let third = p.current(content(300_000), later).expect("refreshed");
    let ok = v.verify(&third, later).expect("verifies");
    assert_eq!((ok.catalog.sequence, ok.catalog.expires_at), (3, later + HOUR));
    // The last catalog changed on disk is not served: a new one is signed.
    let signed_file = dir.join("catalog/signed.json");
    let text = std::fs::read_to_string(&signed_file).expect("signed.json");
    std::fs::write(&signed_file, text.replacen("300000", "1", 1)).expect("tamper");
    let fourth = p.current(content(300_000), later).expect("re-signed");
    assert_eq!(v.verify(&fourth, later).expect("verifies").catalog.sequence, 4);
    // Without the last catalog the sequence file still carries on.
    std::fs::remove_file(&signed_file).expect("rm");
    let fifth = p.current(content(300_000), later).expect("after loss");
    assert_eq!(v.verify(&fifth, later).expect("verifies").catalog.sequence, 5);
    // A shorter validity configured: the longer-lived catalog is replaced at once.
    let p = Publisher::open(dir, Duration::from_secs(60)).expect("reopen");
    let sixth = p.current(content(300_000), later + 1).expect("shorter validity");
    let ok = v.verify(&sixth, later + 1).expect("verifies");
    assert_eq!((ok.catalog.sequence, ok.catalog.expires_at), (6, later + 1 + 60_000));
}

#[test]
fn a_rotated_key_signs_the_next_catalog_and_carries_the_statement() {
    let scratch = temp_dir("rotation");
    let dir = scratch.path();
    let p = Publisher::open(dir, Duration::from_secs(3600)).expect("open");
    let old = p.public_key().expect("key");
    assert_eq!(signing_key(dir).expect("the same key"), old);
    let mut v = Verifier::first_use();
    v.verify(&p.current(content(1), NOW).expect("first"), NOW).expect("first");
    let rotation = rotate_key(dir).expect("rotate");
    assert_eq!((rotation.from, rotation.sequence), (old, 2));
    assert_eq!(p.public_key().expect("key"), rotation.to, "the running publisher uses the new key");
    let next = p.current(content(1), NOW + 10).expect("next");
    assert_eq!(next.rotation.as_ref(), Some(&rotation));
    let ok = v.verify(&next, NOW + 10).expect("follows the rotation");
    assert_eq!((ok.rotated_from, ok.catalog.previous_key), (Some(old), Some(old)));
    assert_eq!(v.pin().map(|p| p.key), Some(rotation.to));
    // Still carried later, so a customer who has not looked since can follow.
    let later = p.current(content(2), NOW + 20).expect("later");
    assert_eq!(later.rotation.as_ref(), Some(&rotation));
    let mut behind = Verifier::pinned(Pin { key: old, last: None });
    behind.verify(&later, NOW + 20).expect("one rotation behind follows");
    // Two rotations behind: the statement is from a key that customer never pinned.
    rotate_key(dir).expect("rotate again");
    let twice = p.current(content(2), NOW + 30).expect("twice");
    assert_eq!(code(Verifier::pinned(Pin { key: old, last: None }).verify(&twice, NOW + 30)), "catalog_key_unknown");
}

#[test]
fn rotation_needs_a_key_to_rotate() {
    let scratch = temp_dir("no-key");
    let dir = scratch.path();
    let e = rotate_key(dir).expect_err("no key yet");
    assert!(e.to_string().contains("no catalog signing key yet"), "{e}");
}
