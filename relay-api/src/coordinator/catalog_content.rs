//! What a coordinator's catalog says, from its configuration: prices, the route validation
//! procedures this build runs, the certificate authority, and the admitted gateways given.
//! (The coordinator's side of the catalog: [`crate::catalog`] knows nothing of coordinators.)

use super::{AgentCertificates, CoordinatorConfig};
use crate::catalog::{CURRENCY, CatalogContent, CatalogGateway, CertificateAuthority, Prices, ValidatorDigest};
use crate::validation::procedure;

/// The name of the development CA in catalogs.
pub const DEVELOPMENT_CA: &str = "svc development CA";

/// The catalog content of a coordinator with this configuration and these admitted gateways.
pub fn coordinator_content(config: &CoordinatorConfig, gateways: Vec<CatalogGateway>) -> CatalogContent {
    let certificate_authority = match &config.certificates {
        AgentCertificates::DevCa => {
            CertificateAuthority { kind: "development".into(), name: DEVELOPMENT_CA.into(), caa_identities: Vec::new() }
        }
        AgentCertificates::Acme { directory_url, .. } => CertificateAuthority {
            kind: "acme".into(),
            name: directory_url.clone(),
            caa_identities: config.caa_identities.clone(),
        },
    };
    CatalogContent {
        relay: config.relay_domain.clone(),
        gateways,
        prices: Prices {
            price_micros: config.price_micros,
            period_secs: config.period.as_secs().max(1),
            currency: CURRENCY.into(),
        },
        validators: procedure::all()
            .iter()
            .map(|p| ValidatorDigest { version: p.version.to_owned(), digest: p.digest.clone() })
            .collect(),
        certificate_authorities: vec![certificate_authority],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coordinator_content_lists_its_procedures_and_ca() {
        let mut config = CoordinatorConfig::new(
            "/nonexistent".into(),
            ([127, 0, 0, 1], 0).into(),
            ([127, 0, 0, 1], 0).into(),
            Vec::new(),
        );
        let c = coordinator_content(&config, Vec::new());
        assert_eq!(
            c.prices,
            Prices { price_micros: 250_000, period_secs: 3600, currency: "service-credit-micros".into() }
        );
        let current = procedure::current();
        assert!(c.validators.iter().any(|v| v.version == current.version && v.digest == current.digest));
        assert_eq!(c.certificate_authorities[0].name, DEVELOPMENT_CA);
        config.certificates = AgentCertificates::Acme {
            directory_url: "https://acme.test/dir".into(),
            directory_ca: None,
            roots: "/roots.pem".into(),
        };
        config.caa_identities = vec!["pebble.test".into()];
        let c = coordinator_content(&config, Vec::new());
        assert_eq!(
            c.certificate_authorities,
            [CertificateAuthority {
                kind: "acme".into(),
                name: "https://acme.test/dir".into(),
                caa_identities: vec!["pebble.test".into()]
            }]
        );
    }
}
