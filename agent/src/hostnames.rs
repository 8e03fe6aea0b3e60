//! The route's hostnames: its canonical name first, then the customer hostnames the
//! coordinator has added to the route. With a coordinator configured the agent asks for them
//! (`POST {coordinator}/api/agent/route` with the route's ID and credential, answered with
//! `{"hostnames": [...]}`, canonical first); the certificate covers all of them, and the
//! challenge proves these names and no others. The answer also lists the gateway hosts
//! serving the route (`gateways`), which the agent tunnels to ([`crate::tunnel::Tunnels`]).
//!
//! Names are kept as certificates and SNI carry them: lower case, without a trailing dot.

use std::sync::{Arc, RwLock};

use serde::Deserialize;

use crate::config::AgentConfig;

/// At most this many names on one certificate (a public CA's limit: Let's Encrypt's is 100).
pub const MAX_HOSTNAMES: usize = 100;

/// The route's current hostnames, shared by the certificate keeper (which refreshes them)
/// and every connection (which proves only these).
#[derive(Debug)]
pub struct Hostnames {
    names: RwLock<Arc<[String]>>,
}

impl Hostnames {
    /// A route with only its canonical name (as configured; normalised here).
    pub fn new(canonical: &str) -> Hostnames {
        let canonical = normalize(canonical).unwrap_or_else(|_| canonical.to_ascii_lowercase());
        Hostnames { names: RwLock::new(Arc::from(vec![canonical])) }
    }

    /// The names, canonical first.
    pub fn current(&self) -> Arc<[String]> {
        self.names.read().map(|n| n.clone()).unwrap_or_else(|poisoned| poisoned.into_inner().clone())
    }

    /// Replaces the names; whether the set changed (order aside).
    pub fn replace(&self, names: Vec<String>) -> bool {
        let Ok(mut current) = self.names.write() else { return false };
        let changed = !same_set(&current, &names);
        *current = Arc::from(names);
        changed
    }

    /// The route's own spelling of `asked` (any case, trailing dot allowed), if it is one of
    /// the route's names.
    pub fn find(&self, asked: &str) -> Option<String> {
        let asked = asked.trim_end_matches('.');
        self.current().iter().find(|n| n.eq_ignore_ascii_case(asked)).cloned()
    }
}

/// Whether `a` and `b` hold the same names, in any order.
pub fn same_set(a: &[String], b: &[String]) -> bool {
    let sorted = |names: &[String]| {
        let mut v = names.to_vec();
        v.sort();
        v.dedup();
        v
    };
    sorted(a) == sorted(b)
}

/// Why the route's hostnames could not be had.
#[derive(Debug, thiserror::Error)]
pub enum HostnamesError {
    /// A configured name is not a hostname.
    #[error("{0:?} is not a DNS hostname")]
    NotHostname(String),
    /// The coordinator listed a name that is not a hostname.
    #[error("the coordinator listed {0:?}, which is not a DNS hostname")]
    ListedNotHostname(String),
    /// The coordinator listed more than a certificate holds.
    #[error("the coordinator listed {0} hostnames; a certificate holds at most {MAX_HOSTNAMES}")]
    TooMany(usize),
    /// The coordinator could not be asked.
    #[error(transparent)]
    Call(#[from] crate::http::CallError),
    /// It answered something else.
    #[error("{url}: not a hostnames answer ({source}): {text}")]
    Answer {
        /// Base and path.
        url: String,
        /// What serde found.
        #[source]
        source: serde_json::Error,
        /// The answer's first 200 characters (it may carry a whole catalog).
        text: String,
    },
}

/// A hostname as certificates carry it (lower case, no trailing dot), or why it is not one.
pub fn normalize(name: &str) -> Result<String, HostnamesError> {
    let lowered = name.trim_end_matches('.').to_ascii_lowercase();
    // rustls's own parser decides: it refuses wildcards, IP addresses and bad labels.
    match rustls::pki_types::DnsName::try_from(lowered.as_str()) {
        Ok(_) => Ok(lowered),
        Err(_) => Err(HostnamesError::NotHostname(name.to_owned())),
    }
}

/// The route's names from the coordinator's list: the canonical name first (the route
/// always has it), then the others in the coordinator's order, normalised, without repeats.
pub fn route_set(canonical: &str, listed: &[String]) -> Result<Vec<String>, HostnamesError> {
    let mut names = vec![normalize(canonical)?];
    for name in listed {
        let name = normalize(name).map_err(|_| HostnamesError::ListedNotHostname(name.clone()))?;
        if !names.contains(&name) {
            names.push(name);
        }
    }
    if names.len() > MAX_HOSTNAMES {
        return Err(HostnamesError::TooMany(names.len()));
    }
    Ok(names)
}

#[derive(Deserialize)]
struct RouteAnswer {
    hostnames: Vec<String>,
    /// The gateway hosts serving the route (a coordinator that predates them sends none).
    #[serde(default)]
    gateways: Option<Vec<crate::config::PinnedGateway>>,
    /// The relay's signed catalog, which vouches for the gateway hosts.
    #[serde(default)]
    catalog: Option<relay_catalog::SignedCatalog>,
}

/// What the coordinator says of the route: its hostnames, canonical first and normalised, and
/// the gateway hosts serving it, if it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteInfo {
    /// The hostnames.
    pub names: Vec<String>,
    /// The gateway hosts to tunnel to, besides the coordinator's gateway.
    pub gateways: Option<Vec<crate::config::PinnedGateway>>,
    /// The relay's signed catalog, if sent ([`crate::gateways`] checks the hosts against it).
    pub catalog: Option<relay_catalog::SignedCatalog>,
}

/// Asks the coordinator for the route's hostnames and gateway hosts. `None` when no
/// coordinator is configured.
pub async fn fetch(config: &AgentConfig) -> Option<Result<RouteInfo, HostnamesError>> {
    let base = config.coordinator.as_deref()?;
    let body = serde_json::json!({"routeId": config.route_id, "credential": config.credential});
    let answer =
        crate::http::post_json(base, "/api/agent/route", &body).await.map_err(HostnamesError::from).and_then(|text| {
            serde_json::from_str::<RouteAnswer>(&text).map_err(|source| HostnamesError::Answer {
                url: format!("{base}/api/agent/route"),
                source,
                text: text.chars().take(200).collect(),
            })
        });
    Some(answer.and_then(|a| {
        Ok(RouteInfo { names: route_set(&config.hostname, &a.hostnames)?, gateways: a.gateways, catalog: a.catalog })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_canonical_name_comes_first_and_names_are_normalised() {
        let set = route_set("App.localhost.", &names(&["shop.localhost", "app.localhost", "SHOP.localhost."]))
            .expect("valid names");
        assert_eq!(set, ["app.localhost", "shop.localhost"]);
        assert!(route_set("app.localhost", &names(&["*.localhost"])).is_err());
        assert!(route_set("app.localhost", &names(&["127.0.0.1"])).is_err());
        assert!(route_set("app.localhost", &names(&["bad name.localhost"])).is_err());
        let many: Vec<String> = (0..MAX_HOSTNAMES).map(|i| format!("h{i}.localhost")).collect();
        let err = route_set("app.localhost", &many).expect_err("over the limit");
        assert!(err.to_string().contains("at most 100"), "{err}");
    }

    #[test]
    fn only_the_routes_names_are_found_and_sets_compare_without_order() {
        let hostnames = Hostnames::new("App.localhost");
        assert_eq!(hostnames.find("APP.localhost."), Some("app.localhost".to_owned()));
        assert_eq!(hostnames.find("shop.localhost"), None);
        assert!(hostnames.replace(names(&["app.localhost", "shop.localhost"])));
        assert_eq!(hostnames.find("Shop.Localhost"), Some("shop.localhost".to_owned()));
        assert!(!hostnames.replace(names(&["shop.localhost", "app.localhost"])), "the same set, reordered");
        assert!(hostnames.replace(names(&["app.localhost"])));
        assert_eq!(hostnames.find("shop.localhost"), None, "a removed name is no longer proved");
    }
}
