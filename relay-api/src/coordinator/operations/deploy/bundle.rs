//! A deploy's app files as they are read: decoded one at a time straight from the request's
//! base64 text as it is parsed (`http::deploy`). No copy of a file's text is made (a map of
//! strings read whole held one of every file's), and a file over the bound is never decoded:
//! a deploy costs the coordinator its body and its decoded files (at most
//! [`BUNDLE_MAX_BYTES`]), and the body is let go once they are decoded.
//!
//! The bundle's bounds and checks are the ones a bundle read whole had, refused in the same
//! order ([`Bundle::files`]): more than [`BUNDLE_MAX_FILES`] files, then a path that is not one,
//! then a file that is not base64 or the bytes over [`BUNDLE_MAX_BYTES`], whichever came first.
//! Once a bundle is refused nothing more of it is decoded, and what was decoded is let go; its
//! paths are still read, so the refusal is the one the whole bundle earns.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use base64::Engine as _;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, Visitor};

use crate::coordinator::api::{BUNDLE_MAX_BYTES, BUNDLE_MAX_FILES};
use crate::coordinator::files::check_bundle_path;
use crate::coordinator::operations::{BundleProblem, OperationError, Oversize};

/// The app's files as they were read: decoded, unless the bundle was refused on the way.
#[derive(Debug, Default)]
pub(in crate::coordinator) struct Bundle {
    /// Each path with its bytes (empty once the bundle is refused).
    files: BTreeMap<String, Vec<u8>>,
    /// The bytes decoded so far.
    decoded: u64,
    /// The first file the bundle was refused at, after which nothing was decoded.
    refused: Option<Refused>,
}

/// A file a bundle is refused at.
#[derive(Debug)]
enum Refused {
    /// Its content is not base64.
    NotBase64 { path: String, why: base64::DecodeError },
    /// The bundle's decoded bytes go over [`BUNDLE_MAX_BYTES`] with it.
    Bytes { at: String },
}

impl Bundle {
    /// The files, in path order, or why the bundle is refused: over [`BUNDLE_MAX_FILES`] files
    /// (413), a path that is not a plain, bounded relative path inside the app directory or a
    /// file that another path needs as a directory (400), a file that is not base64 (400) or
    /// over [`BUNDLE_MAX_BYTES`] bytes (413).
    pub(in crate::coordinator) fn files(self) -> Result<Vec<(String, Vec<u8>)>, OperationError> {
        let bad = OperationError::InvalidBundle;
        if self.files.len() > BUNDLE_MAX_FILES {
            return Err(OperationError::BundleTooLarge(Oversize::Files(self.files.len())));
        }
        for path in self.files.keys() {
            check_bundle_path(path).map_err(|why| bad(BundleProblem::Path { path: path.clone(), why }))?;
        }
        // Every directory the files need; none may be a file too.
        let dirs: BTreeSet<&str> =
            self.files.keys().flat_map(|p| p.match_indices('/').map(move |(at, _)| &p[..at])).collect();
        if let Some(both) = dirs.iter().find(|d| self.files.contains_key(**d)) {
            return Err(bad(BundleProblem::FileAndDirectory((*both).to_owned())));
        }
        match self.refused {
            Some(Refused::NotBase64 { path, why }) => Err(bad(BundleProblem::NotBase64 { path, why })),
            Some(Refused::Bytes { at }) => Err(OperationError::BundleTooLarge(Oversize::Bytes { at })),
            None => Ok(self.files.into_iter().collect()),
        }
    }

    /// How much more may be decoded, or `None` once the bundle is refused (more than
    /// [`BUNDLE_MAX_FILES`] files, or a file refused).
    fn room(&self) -> Option<u64> {
        (self.refused.is_none() && self.files.len() < BUNDLE_MAX_FILES)
            .then(|| BUNDLE_MAX_BYTES.saturating_sub(self.decoded))
    }

    fn add(&mut self, path: String, content: Content) {
        let bytes = match content {
            Content::Decoded(bytes) => bytes,
            Content::Skipped => Vec::new(),
            Content::NotBase64(why) => {
                self.refuse(Refused::NotBase64 { path: path.clone(), why });
                Vec::new()
            }
            Content::OverRoom => {
                self.refuse(Refused::Bytes { at: path.clone() });
                Vec::new()
            }
        };
        self.decoded += bytes.len() as u64;
        // A path given twice keeps its last content, as a map read whole did.
        if let Some(earlier) = self.files.insert(path, bytes) {
            self.decoded = self.decoded.saturating_sub(earlier.len() as u64);
        }
        if self.files.len() > BUNDLE_MAX_FILES {
            self.let_go();
        }
    }

    fn refuse(&mut self, refused: Refused) {
        self.refused = Some(refused);
        self.let_go();
    }

    /// The bundle will be refused: its decoded bytes are not kept while the rest is read.
    fn let_go(&mut self) {
        for bytes in self.files.values_mut() {
            *bytes = Vec::new();
        }
        self.decoded = 0;
    }
}

impl<'de> serde::Deserialize<'de> for Bundle {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Bundle, D::Error> {
        deserializer.deserialize_map(BundleVisitor)
    }
}

struct BundleVisitor;

impl<'de> Visitor<'de> for BundleVisitor {
    type Value = Bundle;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // What a map of strings read whole said.
        f.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Bundle, A::Error> {
        let mut bundle = Bundle::default();
        while let Some(path) = map.next_key::<String>()? {
            let content = map.next_value_seed(File { room: bundle.room() })?;
            bundle.add(path, content);
        }
        Ok(bundle)
    }
}

/// One file's content as it is read.
enum Content {
    /// Its bytes.
    Decoded(Vec<u8>),
    /// Not decoded: the bundle is refused already.
    Skipped,
    /// Not base64.
    NotBase64(base64::DecodeError),
    /// More bytes than the bundle has room for.
    OverRoom,
}

/// A file's base64 text, decoded if there is `room` for it.
struct File {
    room: Option<u64>,
}

impl<'de> DeserializeSeed<'de> for File {
    type Value = Content;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Content, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for File {
    type Value = Content;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Content, E> {
        let Some(room) = self.room else { return Ok(Content::Skipped) };
        // Measured before decoding: a file over the bound is never allocated.
        if decoded_len(text) > room {
            return Ok(Content::OverRoom);
        }
        // One allocation of (about) the decoded size.
        Ok(match base64::engine::general_purpose::STANDARD.decode(text) {
            Ok(bytes) => Content::Decoded(bytes),
            Err(why) => Content::NotBase64(why),
        })
    }
}

/// The bytes padded base64 `text` decodes to (three for every four characters, less the
/// padding); what it would be if it decodes at all.
fn decoded_len(text: &str) -> u64 {
    let padding = text.bytes().rev().take(2).take_while(|&b| b == b'=').count();
    (text.len() / 4 * 3).saturating_sub(padding) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// The bundle of a body read as the API reads it.
    fn bundle(files: Vec<(&str, String)>) -> Bundle {
        let map: serde_json::Map<String, serde_json::Value> =
            files.into_iter().map(|(p, c)| (p.to_owned(), serde_json::Value::from(c))).collect();
        let text = serde_json::to_vec(&map).expect("json");
        let mut de = serde_json::Deserializer::from_slice(&text);
        serde_path_to_error::deserialize(&mut de).expect("read")
    }

    /// Which refusal (the API's code for it) and its message.
    fn refusal(files: Result<Vec<(String, Vec<u8>)>, OperationError>) -> (&'static str, String) {
        let e = files.expect_err("refused");
        let code = match &e {
            OperationError::BundleTooLarge(_) => "bundle_too_large",
            OperationError::InvalidBundle(_) => "invalid_bundle",
            _ => "other",
        };
        (code, e.to_string())
    }

    #[test]
    fn the_bounds_hold_exactly_and_a_refused_bundle_keeps_nothing_decoded() {
        let max = BUNDLE_MAX_BYTES as usize;
        let exact = bundle(vec![("a", b64(&vec![1; max - 1])), ("b", b64(b"x"))]);
        assert_eq!(exact.files().expect("exactly the bound").len(), 2);
        let over = bundle(vec![("a", b64(&vec![1; max - 1])), ("b", b64(b"xy")), ("c", b64(b"z"))]);
        assert!(over.refused.is_some() && over.files.values().all(Vec::is_empty), "let go once refused");
        let (code, message) = refusal(over.files());
        assert_eq!(code, "bundle_too_large");
        assert!(message.contains("(at \"b\")"), "{message}");
        // Not base64 at one file; a bad path anywhere comes first, as it did.
        let (code, message) = refusal(bundle(vec![("a", "!!".to_owned()), ("b", b64(b"x"))]).files());
        assert_eq!(code, "invalid_bundle");
        assert!(message.starts_with("\"a\" is not base64"), "{message}");
        let (code, message) = refusal(bundle(vec![("a", "!!".to_owned()), ("../b", b64(b"x"))]).files());
        assert_eq!(code, "invalid_bundle");
        assert!(message.starts_with("\"../b\""), "{message}");
        let many: Vec<(String, String)> = (0..=BUNDLE_MAX_FILES).map(|i| (format!("f{i}"), b64(b"x"))).collect();
        let many = bundle(many.iter().map(|(p, c)| (p.as_str(), c.clone())).collect());
        assert!(many.files.values().all(Vec::is_empty), "let go past the count");
        let (code, message) = refusal(many.files());
        assert_eq!(code, "bundle_too_large");
        assert!(message.contains("2001 files"), "{message}");
    }

    #[test]
    fn the_decoded_length_is_exact_for_padded_base64() {
        for len in 0..40 {
            let text = b64(&vec![7; len]);
            assert_eq!(decoded_len(&text), len as u64, "{text}");
        }
    }
}
