//! Which gateway hosts the agent may tunnel to. The route refresh names them (address and
//! tunnel certificate digest), but that answer comes over the agent API, which need not be a
//! trusted channel; decrypted traffic would follow a tunnel to a host someone slipped in. So
//! when the agent was launched with the relay's catalog key, a named host is taken only if
//! the relay's signed service catalog, sent with the answer, lists an admitted gateway at
//! that tunnel address with that certificate digest. The catalog is checked as a customer
//! checks it ([`relay_catalog::Verifier`]): signed by the pinned key (or a key it rotated
//! to), not older than the last one seen, not expired.

use relay_catalog::{PublicKey, SignedCatalog, Verifier};

use crate::config::PinnedGateway;

/// Why a route refresh's gateway hosts were not taken (the agent keeps the ones it has).
#[derive(Debug, thiserror::Error)]
pub enum GatewaysError {
    /// The agent checks hosts against the catalog, and the answer carried none.
    #[error("the route refresh named gateway hosts without the relay's signed catalog")]
    NoCatalog,
    /// The catalog did not pass the checks.
    #[error("the relay's signed catalog: {0}")]
    Catalog(#[source] relay_catalog::CatalogError),
}

/// The gateway hosts a refresh named, split by whether the catalog vouches for them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Vouched {
    /// Listed in the catalog: tunnel to these.
    pub taken: Vec<PinnedGateway>,
    /// Not listed (or listed with another certificate): refused.
    pub refused: Vec<PinnedGateway>,
}

/// The agent's check of the gateway hosts it is told of.
#[derive(Debug)]
pub struct GatewayCheck {
    /// `None`: launched without a catalog key, every named host is taken (a coordinator
    /// from before the check).
    verifier: Option<Verifier>,
}

impl GatewayCheck {
    /// Checking against catalogs signed by `key`, if given.
    pub fn new(key: Option<PublicKey>) -> GatewayCheck {
        GatewayCheck { verifier: key.map(|key| Verifier::pinned(relay_catalog::Pin { key, last: None })) }
    }

    /// The hosts of `named` that `catalog` lists, checked at `now_ms` (Unix ms); an error,
    /// and nothing taken, when the catalog is missing or fails its checks.
    pub fn vouch(
        &mut self,
        named: Vec<PinnedGateway>,
        catalog: Option<&SignedCatalog>,
        now_ms: i64,
    ) -> Result<Vouched, GatewaysError> {
        let Some(verifier) = &mut self.verifier else { return Ok(Vouched { taken: named, refused: Vec::new() }) };
        if named.is_empty() {
            return Ok(Vouched::default());
        }
        let catalog = catalog.ok_or(GatewaysError::NoCatalog)?;
        let verified = verifier.verify(catalog, now_ms).map_err(GatewaysError::Catalog)?;
        let listed = |g: &PinnedGateway| {
            verified.catalog.gateways.iter().filter_map(|c| c.endpoints.as_ref()).any(|e| {
                e.tunnel.eq_ignore_ascii_case(&g.address) && e.tunnel_sha256.eq_ignore_ascii_case(&g.tunnel_sha256)
            })
        };
        let (taken, refused) = named.into_iter().partition(listed);
        Ok(Vouched { taken, refused })
    }
}

/// Now, Unix ms (what catalogs' times are in).
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use relay_catalog::{CatalogContent, CatalogGateway, CatalogKey, GatewayEndpoints, Prices};

    fn key() -> CatalogKey {
        CatalogKey::generate().expect("a key").0
    }

    const NOW: i64 = 1_800_000_000_000;

    fn gateway(address: &str, digest: char) -> PinnedGateway {
        PinnedGateway { address: address.to_owned(), tunnel_sha256: digest.to_string().repeat(64) }
    }

    /// A catalog signed by `key` at `sequence`, listing `gateways`, valid for an hour from NOW.
    fn catalog(key: &CatalogKey, sequence: u64, gateways: &[PinnedGateway]) -> SignedCatalog {
        let content = CatalogContent {
            relay: "relay.test".to_owned(),
            gateways: gateways
                .iter()
                .enumerate()
                .map(|(i, g)| CatalogGateway {
                    operator: "local".to_owned(),
                    hostname: format!("gw{i}.test"),
                    public_key: "AAAA".to_owned(),
                    endpoints: Some(GatewayEndpoints {
                        public: "127.0.0.1:443".to_owned(),
                        tunnel: g.address.clone(),
                        tunnel_sha256: g.tunnel_sha256.clone(),
                    }),
                })
                .collect(),
            prices: Prices { price_micros: 1, period_secs: 3600, currency: relay_catalog::CURRENCY.to_owned() },
            validators: Vec::new(),
            certificate_authorities: Vec::new(),
        };
        let catalog = content.catalog(sequence, NOW, NOW + 3_600_000, key.public_key(), None);
        SignedCatalog::sign(&catalog, key, None).expect("signed")
    }

    #[test]
    fn only_hosts_the_signed_catalog_lists_with_their_certificate_are_taken() {
        let key = key();
        let (a, b) = (gateway("127.0.0.1:7001", 'a'), gateway("127.0.0.1:7002", 'b'));
        let mut check = GatewayCheck::new(Some(key.public_key()));
        let signed = catalog(&key, 1, std::slice::from_ref(&a));
        // b is not listed; a at its address with another certificate is not a.
        let impostor = gateway("127.0.0.1:7001", 'c');
        let vouched = check.vouch(vec![a.clone(), b.clone(), impostor.clone()], Some(&signed), NOW).expect("checked");
        assert_eq!(vouched, Vouched { taken: vec![a.clone()], refused: vec![b.clone(), impostor] });
        // A newer catalog listing b too takes both.
        let newer = catalog(&key, 2, &[a.clone(), b.clone()]);
        assert_eq!(check.vouch(vec![a.clone(), b.clone()], Some(&newer), NOW).expect("checked").taken, vec![a, b]);
    }

    #[test]
    fn a_catalog_missing_forged_replayed_or_expired_takes_nothing() {
        let key = key();
        let a = gateway("127.0.0.1:7001", 'a');
        let mut check = GatewayCheck::new(Some(key.public_key()));
        assert!(matches!(check.vouch(vec![a.clone()], None, NOW), Err(GatewaysError::NoCatalog)));
        let forged = catalog(&self::key(), 9, std::slice::from_ref(&a));
        assert!(matches!(check.vouch(vec![a.clone()], Some(&forged), NOW), Err(GatewaysError::Catalog(_))));
        let newer = catalog(&key, 5, std::slice::from_ref(&a));
        check.vouch(vec![a.clone()], Some(&newer), NOW).expect("the genuine one");
        let older = catalog(&key, 4, std::slice::from_ref(&a));
        assert!(matches!(check.vouch(vec![a.clone()], Some(&older), NOW), Err(GatewaysError::Catalog(_))), "replayed");
        let late = NOW + 3_600_001;
        assert!(matches!(check.vouch(vec![a], Some(&newer), late), Err(GatewaysError::Catalog(_))), "expired");
    }

    #[test]
    fn without_a_catalog_key_every_named_host_is_taken() {
        let a = gateway("127.0.0.1:7001", 'a');
        let vouched = GatewayCheck::new(None).vouch(vec![a.clone()], None, NOW).expect("taken");
        assert_eq!(vouched.taken, vec![a]);
    }
}
