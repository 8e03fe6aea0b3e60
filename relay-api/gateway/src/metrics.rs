//! Gateway counters, served in the Prometheus text format on the admin port.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

use super::accounting::RouteRow;
use super::replicas::ReplicaRow;

/// The gateway's counters. Labels are bounded: outcomes and listeners are fixed sets, and the
/// per-route series come from the route accounting (configured routes, and removed ones
/// while they still have connections or agents).
#[derive(Debug, Default)]
pub struct Metrics {
    /// Public connections by outcome (`routed`, `unknown_sni`, `route_limit`, ...).
    outcomes: Mutex<BTreeMap<&'static str, u64>>,
    /// Tunnel connections by outcome (`accepted`, `refused`, `heartbeat_lost`,
    /// `pending_limit`, `evicted`, ...).
    tunnels: Mutex<BTreeMap<&'static str, u64>>,
    /// Failed accepts by listener (`public`, `tunnel`).
    accept_errors: Mutex<BTreeMap<&'static str, u64>>,
    /// Connections closed to make room, by reason (`route_full`, `pending_cap`).
    evictions: Mutex<BTreeMap<&'static str, u64>>,
    /// Looks into a replica's pool of pre-dialed data connections (`hit`, `miss`), and held
    /// connections found dead there (`dead`).
    pool: Mutex<BTreeMap<&'static str, u64>>,
}

/// The pending connections (not yet routed or authenticated), as the gauges show them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingRow {
    /// Pending now.
    pub open: usize,
    /// The most at once.
    pub cap: usize,
}

fn bump<K: Ord>(map: &Mutex<BTreeMap<K, u64>>, key: K) {
    if let Ok(mut m) = map.lock() {
        *m.entry(key).or_default() += 1;
    }
}

fn counts(map: &Mutex<BTreeMap<&'static str, u64>>) -> BTreeMap<&'static str, u64> {
    map.lock().map(|m| m.clone()).unwrap_or_default()
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

    /// Every public connection outcome and its count.
    pub fn outcome_counts(&self) -> BTreeMap<&'static str, u64> {
        counts(&self.outcomes)
    }

    /// Counts a tunnel control connection's outcome.
    pub fn tunnel(&self, label: &'static str) {
        bump(&self.tunnels, label);
    }

    /// Every tunnel connection outcome and its count.
    pub fn tunnel_counts(&self) -> BTreeMap<&'static str, u64> {
        counts(&self.tunnels)
    }

    /// Counts a failed accept on `listener`.
    pub fn accept_error(&self, listener: &'static str) {
        bump(&self.accept_errors, listener);
    }

    /// How many tunnel connections ended with `label`.
    pub fn tunnel_count(&self, label: &str) -> u64 {
        self.tunnels.lock().map_or(0, |m| m.get(label).copied().unwrap_or(0))
    }

    /// Counts a connection closed to make room, for `reason`: `route_full` (a routed
    /// connection of a full route's largest holder, for a smaller client's newcomer) or
    /// `pending_cap` (the oldest pending connection, for a newer one).
    pub fn evicted(&self, reason: &'static str) {
        bump(&self.evictions, reason);
    }

    /// How many connections were closed to make room for `reason`.
    pub fn eviction_count(&self, reason: &str) -> u64 {
        self.evictions.lock().map_or(0, |m| m.get(reason).copied().unwrap_or(0))
    }

    /// Counts a look into a replica's pool: `hit` (a live pre-dialed connection taken) or
    /// `miss` (none held: asked for on demand).
    pub fn pool(&self, label: &'static str) {
        bump(&self.pool, label);
    }

    /// Counts `n` pre-dialed connections found dead when taken.
    pub fn pool_dead(&self, n: u64) {
        if n > 0
            && let Ok(mut m) = self.pool.lock()
        {
            *m.entry("dead").or_default() += n;
        }
    }

    /// How many pool looks ended with `label` (`hit`, `miss`, `dead`).
    pub fn pool_count(&self, label: &str) -> u64 {
        self.pool.lock().map_or(0, |m| m.get(label).copied().unwrap_or(0))
    }

    /// The Prometheus text exposition, with the per-route series of `routes` and the
    /// pending-connection gauges of `pending`.
    pub fn render(&self, routes: &[RouteRow], pending: PendingRow) -> String {
        let mut out = String::new();
        out += "# HELP svc_gateway_connections_total Public connections by outcome.\n";
        out += "# TYPE svc_gateway_connections_total counter\n";
        for (label, n) in counts(&self.outcomes) {
            let _ = writeln!(out, "svc_gateway_connections_total{{outcome=\"{label}\"}} {n}");
        }
        out += "# HELP svc_gateway_tunnels_total Agent control connections by outcome.\n";
        out += "# TYPE svc_gateway_tunnels_total counter\n";
        for (label, n) in counts(&self.tunnels) {
            let _ = writeln!(out, "svc_gateway_tunnels_total{{outcome=\"{label}\"}} {n}");
        }
        out += "# HELP svc_gateway_accept_errors_total Failed accepts by listener (each waits before the next).\n";
        out += "# TYPE svc_gateway_accept_errors_total counter\n";
        for (label, n) in counts(&self.accept_errors) {
            let _ = writeln!(out, "svc_gateway_accept_errors_total{{listener=\"{label}\"}} {n}");
        }
        out += "# HELP svc_gateway_evictions_total Connections closed to make room for a newer one, by reason.\n";
        out += "# TYPE svc_gateway_evictions_total counter\n";
        for (label, n) in counts(&self.evictions) {
            let _ = writeln!(out, "svc_gateway_evictions_total{{reason=\"{label}\"}} {n}");
        }
        out += "# HELP svc_gateway_pending_connections Connections not yet routed or authenticated, both ports.\n";
        out += "# TYPE svc_gateway_pending_connections gauge\n";
        let _ = writeln!(out, "svc_gateway_pending_connections {}", pending.open);
        out += "# HELP svc_gateway_pending_connections_cap The most pending connections at once (the oldest is closed beyond).\n";
        out += "# TYPE svc_gateway_pending_connections_cap gauge\n";
        let _ = writeln!(out, "svc_gateway_pending_connections_cap {}", pending.cap);
        out += "# HELP svc_gateway_route_connections_total Connections routed to each route.\n";
        out += "# TYPE svc_gateway_route_connections_total counter\n";
        for r in routes {
            let _ = writeln!(out, "svc_gateway_route_connections_total{{route=\"{}\"}} {}", r.route_id, r.routed);
        }
        out += "# HELP svc_gateway_route_active_connections Connections holding a slot of each route now.\n";
        out += "# TYPE svc_gateway_route_active_connections gauge\n";
        for r in routes {
            let _ = writeln!(out, "svc_gateway_route_active_connections{{route=\"{}\"}} {}", r.route_id, r.active);
        }
        out += "# HELP svc_gateway_route_agents Agents connected now, per route.\n";
        out += "# TYPE svc_gateway_route_agents gauge\n";
        for r in routes {
            let _ = writeln!(out, "svc_gateway_route_agents{{route=\"{}\"}} {}", r.route_id, r.agents);
        }
        out
    }
}

/// The per-route replica series: sessions in and out of rotation, and connections routed to
/// each replica (by the name from its `Hello`; `""` for a route's one unnamed agent).
pub(super) fn render_replicas(out: &mut String, rows: &[ReplicaRow]) {
    *out += "# HELP svc_gateway_route_replicas Agent sessions of each route now, in or out of rotation.\n";
    *out += "# TYPE svc_gateway_route_replicas gauge\n";
    for r in rows {
        let route = &r.route_id;
        let _ =
            writeln!(out, "svc_gateway_route_replicas{{route=\"{route}\",state=\"in_rotation\"}} {}", r.in_rotation);
        let _ = writeln!(
            out,
            "svc_gateway_route_replicas{{route=\"{route}\",state=\"out_of_rotation\"}} {}",
            r.out_of_rotation
        );
    }
    *out += "# HELP svc_gateway_replica_connections_total Connections routed to each replica of each route.\n";
    *out += "# TYPE svc_gateway_replica_connections_total counter\n";
    for r in rows {
        for (replica, n) in &r.routed {
            let _ = writeln!(
                out,
                "svc_gateway_replica_connections_total{{route=\"{}\",replica=\"{replica}\"}} {n}",
                r.route_id
            );
        }
    }
}

/// Connections each route's guards refused, by reason (`client_not_allowed`,
/// `rate_limited`).
pub(super) fn render_refused(out: &mut String, refused: &BTreeMap<String, BTreeMap<&'static str, u64>>) {
    *out += "# HELP svc_gateway_route_refused_total Connections a route's guards refused, by reason.\n";
    *out += "# TYPE svc_gateway_route_refused_total counter\n";
    for (route, reasons) in refused {
        for (reason, n) in reasons {
            let _ = writeln!(out, "svc_gateway_route_refused_total{{route=\"{route}\",reason=\"{reason}\"}} {n}");
        }
    }
}

/// The pool series: looks into replicas' pools by outcome, and the pre-dialed connections
/// held or asked for now (`total`).
pub(super) fn render_pool(out: &mut String, metrics: &Metrics, total: usize) {
    *out += "# HELP svc_gateway_pool_total Pre-dialed data connections: taken (hit), none held (miss), found dead.\n";
    *out += "# TYPE svc_gateway_pool_total counter\n";
    for (label, n) in counts(&metrics.pool) {
        let _ = writeln!(out, "svc_gateway_pool_total{{outcome=\"{label}\"}} {n}");
    }
    *out += "# HELP svc_gateway_pool_connections Pre-dialed data connections held or asked for now.\n";
    *out += "# TYPE svc_gateway_pool_connections gauge\n";
    let _ = writeln!(out, "svc_gateway_pool_connections {total}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_gauges() {
        let m = Metrics::default();
        m.outcome("unknown_sni");
        m.outcome("unknown_sni");
        m.accept_error("public");
        m.evicted("pending_cap");
        let routes = [RouteRow { route_id: "r1".into(), routed: 2, active: 1, agents: 1 }];
        let text = m.render(&routes, PendingRow { open: 3, cap: 384 });
        assert!(text.contains("svc_gateway_connections_total{outcome=\"unknown_sni\"} 2\n"));
        assert!(text.contains("svc_gateway_accept_errors_total{listener=\"public\"} 1\n"));
        assert!(text.contains("svc_gateway_evictions_total{reason=\"pending_cap\"} 1\n"));
        assert!(text.contains("svc_gateway_pending_connections 3\n"));
        assert!(text.contains("svc_gateway_pending_connections_cap 384\n"));
        assert!(text.contains("svc_gateway_route_connections_total{route=\"r1\"} 2\n"));
        assert!(text.contains("svc_gateway_route_active_connections{route=\"r1\"} 1\n"));
        assert!(text.contains("svc_gateway_route_agents{route=\"r1\"} 1\n"));
    }

    #[test]
    fn renders_replicas_in_and_out_of_rotation_and_where_connections_went() {
        let row = ReplicaRow {
            route_id: "r1".into(),
            in_rotation: 2,
            out_of_rotation: 1,
            routed: [("a".to_owned(), 5), ("b".to_owned(), 7)].into_iter().collect(),
        };
        let mut text = String::new();
        render_replicas(&mut text, &[row]);
        assert!(text.contains("svc_gateway_route_replicas{route=\"r1\",state=\"in_rotation\"} 2\n"), "{text}");
        assert!(text.contains("svc_gateway_route_replicas{route=\"r1\",state=\"out_of_rotation\"} 1\n"));
        assert!(text.contains("svc_gateway_replica_connections_total{route=\"r1\",replica=\"a\"} 5\n"));
        assert!(text.contains("svc_gateway_replica_connections_total{route=\"r1\",replica=\"b\"} 7\n"));
    }
}
