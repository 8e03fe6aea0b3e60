//! What a catalog says, and how it travels signed: [`Catalog`] (JSON, camelCase) inside a
//! [`SignedCatalog`] with the signature over the catalog's RFC 8785 canonical bytes, and,
//! after a key rotation, the old key's [`Rotation`] statement beside it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::CatalogError;
use super::key::{CatalogKey, PublicKey, canonical_bytes};

/// `schema` of every catalog.
pub const SCHEMA: &str = "svc.relay-catalog";
/// `version` of this catalog format.
pub const VERSION: u32 = 1;
/// The unit of `prices`.
pub const CURRENCY: &str = "service-credit-micros";
/// What a rotation statement's signature covers besides its fields, so it can never be taken
/// for a catalog signature or the other way round.
pub const ROTATION_SCHEMA: &str = "svc.relay-catalog-rotation";

/// A coordinator's catalog: what it offers and which logic it runs, valid until `expiresAt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Catalog {
    /// [`SCHEMA`].
    pub schema: String,
    /// [`VERSION`].
    pub version: u32,
    /// Increases with every catalog the relay signs; never reused for other content.
    pub sequence: u64,
    /// When it was signed, Unix ms.
    pub issued_at: i64,
    /// When it stops being valid, Unix ms.
    pub expires_at: i64,
    /// The relay's identity: its domain (canonical hostnames are `<project>-<org>.<relay>`).
    pub relay: String,
    /// The key that signed it.
    pub signing_key: PublicKey,
    /// The key it replaced, when the relay rotated its key (the old key's statement travels
    /// beside the catalog as [`SignedCatalog::rotation`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_key: Option<PublicKey>,
    /// The admitted gateways.
    pub gateways: Vec<CatalogGateway>,
    /// What a deployment costs.
    pub prices: Prices,
    /// The route validation procedures this relay runs, with their digests.
    pub validators: Vec<ValidatorDigest>,
    /// Where jobs' certificates come from.
    pub certificate_authorities: Vec<CertificateAuthority>,
}

/// The part of a catalog its relay decides (everything but sequence, times and keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogContent {
    /// [`Catalog::relay`].
    pub relay: String,
    /// [`Catalog::gateways`].
    pub gateways: Vec<CatalogGateway>,
    /// [`Catalog::prices`].
    pub prices: Prices,
    /// [`Catalog::validators`].
    pub validators: Vec<ValidatorDigest>,
    /// [`Catalog::certificate_authorities`].
    pub certificate_authorities: Vec<CertificateAuthority>,
}

impl Catalog {
    /// The content of this catalog.
    pub fn content(&self) -> CatalogContent {
        CatalogContent {
            relay: self.relay.clone(),
            gateways: self.gateways.clone(),
            prices: self.prices.clone(),
            validators: self.validators.clone(),
            certificate_authorities: self.certificate_authorities.clone(),
        }
    }
}

impl CatalogContent {
    /// The catalog of this content with a sequence, a validity and keys.
    pub fn catalog(
        self,
        sequence: u64,
        issued_at: i64,
        expires_at: i64,
        signing_key: PublicKey,
        previous_key: Option<PublicKey>,
    ) -> Catalog {
        Catalog {
            schema: SCHEMA.to_owned(),
            version: VERSION,
            sequence,
            issued_at,
            expires_at,
            relay: self.relay,
            signing_key,
            previous_key,
            gateways: self.gateways,
            prices: self.prices,
            validators: self.validators,
            certificate_authorities: self.certificate_authorities,
        }
    }
}

/// An admitted gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CatalogGateway {
    /// Who operates it.
    pub operator: String,
    /// Its public hostname.
    pub hostname: String,
    /// Its key (the form the operator registered it in).
    pub public_key: String,
    /// Where it listens, as it last announced itself (`svc gateway run` following the route
    /// feed); absent until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<GatewayEndpoints>,
}

/// Where an admitted gateway listens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayEndpoints {
    /// Clients' address, `HOST:PORT`.
    pub public: String,
    /// Agents' tunnel address, `HOST:PORT`.
    pub tunnel: String,
    /// SHA-256 of its tunnel certificate (DER), lowercase hex: what agents pin.
    pub tunnel_sha256: String,
}

/// Prices.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Prices {
    /// Price of one period.
    pub price_micros: u64,
    /// A period, seconds.
    pub period_secs: u64,
    /// [`CURRENCY`].
    pub currency: String,
}

/// A route validation procedure: its version and the `sha256:` digest of its definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidatorDigest {
    /// `route-validation/N`.
    pub version: String,
    /// `sha256:` and 64 hex digits.
    pub digest: String,
}

/// A certificate authority jobs get certificates from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CertificateAuthority {
    /// `development` (the relay's own CA, `.localhost` names) or `acme`.
    pub kind: String,
    /// `svc development CA`, or the ACME directory URL.
    pub name: String,
    /// The CAA issuer domains customer hostnames' CAA records must permit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caa_identities: Vec<String>,
}

/// The old key's statement that a new key replaces it, from catalog `sequence` on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rotation {
    /// The old key (it signed this statement).
    pub from: PublicKey,
    /// The new key.
    pub to: PublicKey,
    /// The first catalog sequence the new key signs.
    pub sequence: u64,
    /// The old key's signature over the canonical bytes of
    /// `{"schema": "svc.relay-catalog-rotation", "from", "to", "sequence"}`, base64url.
    pub signature: String,
}

impl Rotation {
    fn statement(from: PublicKey, to: PublicKey, sequence: u64) -> Result<Vec<u8>, CatalogError> {
        canonical_bytes(&json!({"schema": ROTATION_SCHEMA, "from": from, "to": to, "sequence": sequence}))
    }

    /// `old` states that `to` replaces it from catalog `sequence` on.
    pub fn sign(old: &CatalogKey, to: PublicKey, sequence: u64) -> Result<Rotation, CatalogError> {
        let from = old.public_key();
        let signature = old.sign(&Rotation::statement(from, to, sequence)?);
        Ok(Rotation { from, to, sequence, signature })
    }

    /// Whether `from` signed it.
    pub fn is_signed(&self) -> bool {
        Rotation::statement(self.from, self.to, self.sequence)
            .is_ok_and(|bytes| self.from.verifies(&bytes, &self.signature))
    }
}

/// A catalog as served: the catalog's JSON object, the signature over its canonical bytes,
/// and the latest rotation statement (carried until the next rotation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SignedCatalog {
    /// The [`Catalog`] as its signer wrote it (kept as JSON: the signature covers these
    /// members, whatever a reader makes of them).
    pub catalog: Map<String, Value>,
    /// Ed25519 by `catalog.signingKey` over the RFC 8785 bytes of `catalog`, base64url.
    pub signature: String,
    /// The old key's statement, when `catalog.signingKey` replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation: Option<Rotation>,
}

/// A signed catalog whose signature verifies against the key it names (whether that key is
/// trusted is the [`Verifier`](super::Verifier)'s question).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The catalog.
    pub catalog: Catalog,
    /// `sha256:` of its canonical bytes: what was signed.
    pub digest: String,
}

impl SignedCatalog {
    /// Signs `catalog` with `key` (which must be its `signingKey`).
    pub fn sign(
        catalog: &Catalog,
        key: &CatalogKey,
        rotation: Option<Rotation>,
    ) -> Result<SignedCatalog, CatalogError> {
        if catalog.signing_key != key.public_key() {
            return Err(CatalogError::Key(format!(
                "the catalog names {} as its signing key, but the key at hand is {}",
                catalog.signing_key,
                key.public_key()
            )));
        }
        let Value::Object(members) =
            serde_json::to_value(catalog).map_err(|e| CatalogError::Malformed(e.to_string()))?
        else {
            return Err(CatalogError::Malformed("a catalog is a JSON object".into()));
        };
        let signature = key.sign(&canonical_bytes(&Value::Object(members.clone()))?);
        let signed = SignedCatalog { catalog: members, signature, rotation };
        signed.open()?;
        Ok(signed)
    }

    /// Reads a served catalog (JSON).
    pub fn from_json(bytes: &[u8]) -> Result<SignedCatalog, CatalogError> {
        serde_json::from_slice(bytes).map_err(|e| {
            CatalogError::Malformed(format!("not a signed catalog ({{catalog, signature, rotation?}}): {e}"))
        })
    }

    /// Checks the signature against the catalog's own `signingKey`, then reads the catalog
    /// and checks it is consistent with the rotation statement beside it.
    pub fn open(&self) -> Result<Opened, CatalogError> {
        let value = Value::Object(self.catalog.clone());
        let bytes = canonical_bytes(&value)?;
        let key: PublicKey = match self.catalog.get("signingKey") {
            Some(Value::String(text)) => text.parse()?,
            _ => return Err(CatalogError::Malformed("the catalog has no `signingKey`".into())),
        };
        if !key.verifies(&bytes, &self.signature) {
            return Err(CatalogError::SignatureInvalid { key: key.to_string() });
        }
        let catalog: Catalog =
            serde_json::from_value(value).map_err(|e| CatalogError::Malformed(format!("the signed catalog: {e}")))?;
        if catalog.schema != SCHEMA || catalog.version != VERSION {
            return Err(CatalogError::Malformed(format!(
                "schema \"{}\" version {} is not {SCHEMA} version {VERSION}: this svc cannot read it; update svc",
                catalog.schema, catalog.version
            )));
        }
        if catalog.expires_at <= catalog.issued_at {
            return Err(CatalogError::Malformed(format!(
                "expiresAt {} is not after issuedAt {}",
                catalog.expires_at, catalog.issued_at
            )));
        }
        if let Some(r) = &self.rotation
            && (r.to != catalog.signing_key || Some(r.from) != catalog.previous_key)
        {
            return Err(CatalogError::Malformed(format!(
                "the rotation statement ({} to {}) does not match the catalog's keys (previous {}, signing {})",
                r.from,
                r.to,
                catalog.previous_key.map_or_else(|| "none".to_owned(), |k| k.to_string()),
                catalog.signing_key
            )));
        }
        Ok(Opened { digest: format!("sha256:{}", relay_wire::wire::sha256_hex(&bytes)), catalog })
    }
}
