//! Gateway counters, served in the Prometheus text format on the admin port.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

/// Every counter and gauge of a gateway. Labels are bounded: outcomes are a fixed set and
/// routes are the configured ones.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Public connections by outcome (`routed`, `unknown_sni`, `route_limit`, ...).
    outcomes: Mutex<BTreeMap<&'static str, u64>>,
    /// Per route: connections routed, and open now.
    routes: Mutex<BTreeMap<String, RouteCounters>>,
    /// Tunnel control connections by outcome (`accepted`, `refused`, `lost`).
    tunnels: Mutex<BTreeMap<&'static str, u64>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct RouteCounters {
    routed: u64,
    active: u64,
    agents: u64,
}

fn bump<K: Ord>(map: &Mutex<BTreeMap<K, u64>>, key: K) {
    if let Ok(mut m) = map.lock() {
        *m.entry(key).or_default() += 1;
    }
}

impl Metrics {
    /// Counts a public connection's outcome.
    pub fn outcome(&self, label: &'static str) {
        bump(&self.outcomes, label);
    }

    /// How many public connections ended with `label`.
    pub fn outcome_count(&self, label: &str) -> u64 {
        self.outcomes.lock().map_or(0, |m| m.get(label).copied().unwrap_or(0))
    }

    /// Counts a tunnel control connection's outcome.
    pub fn tunnel(&self, label: &'static str) {
        bump(&self.tunnels, label);
    }

    fn route(&self, route: &str, f: impl FnOnce(&mut RouteCounters)) {
        if let Ok(mut m) = self.routes.lock() {
            f(m.entry(route.to_owned()).or_default());
        }
    }

    /// A connection to `route` opened (`true`) or closed.
    pub fn route_active(&self, route: &str, opened: bool) {
        self.route(route, |c| {
            if opened {
                c.routed += 1;
                c.active += 1;
            } else {
                c.active = c.active.saturating_sub(1);
            }
        });
    }

    /// An agent of `route` connected (`true`) or left.
    pub fn route_agent(&self, route: &str, connected: bool) {
        self.route(route, |c| c.agents = if connected { c.agents + 1 } else { c.agents.saturating_sub(1) });
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out += "# HELP svc_gateway_connections_total Public connections by outcome.\n";
        out += "# TYPE svc_gateway_connections_total counter\n";
        for (label, n) in self.outcomes.lock().map(|m| m.clone()).unwrap_or_default() {
            let _ = writeln!(out, "svc_gateway_connections_total{{outcome=\"{label}\"}} {n}");
        }
        out += "# HELP svc_gateway_tunnels_total Agent control connections by outcome.\n";
        out += "# TYPE svc_gateway_tunnels_total counter\n";
        for (label, n) in self.tunnels.lock().map(|m| m.clone()).unwrap_or_default() {
            let _ = writeln!(out, "svc_gateway_tunnels_total{{outcome=\"{label}\"}} {n}");
        }
        let routes = self.routes.lock().map(|m| m.clone()).unwrap_or_default();
        out += "# HELP svc_gateway_route_connections_total Connections routed to each route.\n";
        out += "# TYPE svc_gateway_route_connections_total counter\n";
        for (route, c) in &routes {
            let _ = writeln!(out, "svc_gateway_route_connections_total{{route=\"{route}\"}} {}", c.routed);
        }
        out += "# HELP svc_gateway_route_active_connections Connections open now, per route.\n";
        out += "# TYPE svc_gateway_route_active_connections gauge\n";
        for (route, c) in &routes {
            let _ = writeln!(out, "svc_gateway_route_active_connections{{route=\"{route}\"}} {}", c.active);
        }
        out += "# HELP svc_gateway_route_agents Agents connected now, per route.\n";
        out += "# TYPE svc_gateway_route_agents gauge\n";
        for (route, c) in &routes {
            let _ = writeln!(out, "svc_gateway_route_agents{{route=\"{route}\"}} {}", c.agents);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_gauges() {
        let m = Metrics::default();
        m.outcome("unknown_sni");
        m.outcome("unknown_sni");
        m.route_active("r1", true);
        m.route_active("r1", true);
        m.route_active("r1", false);
        let text = m.render();
        assert!(text.contains("svc_gateway_connections_total{outcome=\"unknown_sni\"} 2\n"));
        assert!(text.contains("svc_gateway_route_connections_total{route=\"r1\"} 2\n"));
        assert!(text.contains("svc_gateway_route_active_connections{route=\"r1\"} 1\n"));
    }
}
