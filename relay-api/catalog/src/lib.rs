//! Signed service catalogs: the relay coordinator publishes what it offers (admitted
//! gateways, prices, the digests of its route validation procedures, its certificate
//! authorities) as canonical JSON (RFC 8785) signed with Ed25519, with a sequence number and
//! an expiry, so a customer can check it against a pinned key, refuse an expired or replayed
//! one, and follow a key rotation signed by the old key.
//!
//! [`model`] is the format, [`key`] the keys and the signed bytes, [`Verifier`] the
//! customer's checks, and [`Publisher`] the coordinator's files and signing. What a
//! coordinator's configuration puts in its catalog is the coordinator's business
//! (`relay_api::coordinator::catalog_content`): this crate knows nothing of coordinators.

#![forbid(unsafe_code)]

mod error;
pub mod key;
pub mod model;
mod publish;
mod verify;

#[cfg(test)]
mod tests;

pub use error::{CatalogError, human_duration};
pub use key::{CatalogKey, PublicKey, canonical_bytes};
pub use model::{
    CURRENCY, Catalog, CatalogContent, CatalogGateway, CertificateAuthority, GatewayEndpoints, Opened, Prices,
    Rotation, SignedCatalog, ValidatorDigest,
};
pub use publish::{CATALOG_DIR, DEFAULT_VALIDITY, Publisher, rotate_key, signing_key};
pub use verify::{Pin, Seen, VerifiedCatalog, Verifier};
