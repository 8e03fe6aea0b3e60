//! The relay's signed catalog: what its customers' CLIs fetch, what the console checks, and
//! what agents check their gateway hosts against.

use super::{Internal, OperationError};
use crate::catalog::{CatalogGateway, GatewayEndpoints, SignedCatalog};
use crate::coordinator::Engine;
use crate::coordinator::store::now_ms;

/// The relay's signed catalog now (signed again when its content changed or half its
/// validity passed), listing the admitted gateways and where each is reachable.
pub(in crate::coordinator) fn signed_catalog(engine: &Engine) -> Result<SignedCatalog, OperationError> {
    let present: std::collections::HashMap<String, relay_wire::feed::Presence> =
        engine.store().gateway_presence()?.into_iter().map(|(id, presence, _)| (id, presence)).collect();
    let gateways = engine
        .store()
        .admitted_gateways()?
        .into_iter()
        .map(|o| {
            let endpoints = present.get(&o.id).map(|p| {
                let (public, tunnel) = p.reachable(&o.hostname);
                GatewayEndpoints { public, tunnel, tunnel_sha256: p.tunnel_sha256.clone() }
            });
            CatalogGateway { operator: o.name, hostname: o.hostname, public_key: o.public_key, endpoints }
        })
        .collect();
    let content = crate::coordinator::catalog_content::coordinator_content(engine.config(), gateways);
    Ok(engine.catalog().current(content, now_ms()).map_err(Internal::Catalog)?)
}
