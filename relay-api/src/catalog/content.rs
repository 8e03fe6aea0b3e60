//! What a coordinator's catalog says, from its configuration: prices, the route validation
//! procedures this build runs, the certificate authority, and the admitted gateways given.

use super::model::{CURRENCY, CatalogContent, CatalogGateway, CertificateAuthority, Prices, ValidatorDigest};
use crate::coordinator::{AgentCertificates, CoordinatorConfig};
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
