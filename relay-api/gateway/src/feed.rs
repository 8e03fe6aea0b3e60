//! The route feed as a gateway sees it (issue 20): the coordinator's answer, which `svc
//! gateway run` applies with [`crate::Gateway::set_routes`], and the feed's state, which
//! the metrics show. Whoever follows the feed (`relay_gateway_host::follow`) reports each
//! answer and each failure here; a gateway that follows no coordinator shows no feed series.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::RouteConfig;

/// `GET /api/gateway/routes`: the routes an operator's gateways serve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FeedAnswer {
    /// The operator asked for (`op_...`).
    pub operator: String,
    /// The table's version: the same table has the same version, so a gateway asks for what
    /// comes after the one it serves.
    pub version: String,
    /// The routes.
    pub routes: Vec<RouteConfig>,
    /// The feed sequence the table was read at (issue 41): the gateway reports it back as the
    /// table it applied ([`relay_wire::feed::Report::applied`]). 0 from a coordinator without
    /// one.
    #[serde(default)]
    pub seq: u64,
    /// The public halves of the coordinators' probe keys (64 hex digits each, at most
    /// [`relay_wire::alpn::MAX_PROBE_KEYS`]): the gateway lets through a route's guards a
    /// probe token signed by one of them ([`crate::Gateway::set_probe_keys`]). Part of the
    /// version. Empty from a coordinator without them: no probe token passes.
    #[serde(default)]
    pub probe_keys: Vec<String>,
}

impl FeedAnswer {
    /// The probe keys that read (others are left out).
    pub fn probe_keys(&self) -> Vec<relay_wire::alpn::ProbeKey> {
        self.probe_keys.iter().filter_map(|k| relay_wire::alpn::ProbeKey::parse(k)).collect()
    }
}

/// The feed's state since the gateway started.
#[derive(Debug, Default)]
pub struct FeedState {
    counts: Mutex<Option<FeedCounts>>,
}

/// What [`FeedState`] shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeedCounts {
    /// Whether the last request was answered.
    pub connected: bool,
    /// When a request was last answered, Unix seconds (0: never).
    pub last_answer_secs: u64,
    /// Tables applied (a new version).
    pub updates: u64,
    /// Requests that failed (the coordinator unreachable, or refusing).
    pub failures: u64,
}

impl FeedState {
    /// An answer arrived; `applied` if its table was new and was applied.
    pub fn answered(&self, applied: bool) {
        self.update(|c| {
            c.connected = true;
            c.last_answer_secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
            c.updates += u64::from(applied);
        });
    }

    /// A request failed: the gateway keeps the table it has.
    pub fn failed(&self) {
        self.update(|c| {
            c.connected = false;
            c.failures += 1;
        });
    }

    /// The counts, once the feed is followed.
    pub fn counts(&self) -> Option<FeedCounts> {
        self.counts.lock().ok().and_then(|c| *c)
    }

    fn update(&self, change: impl FnOnce(&mut FeedCounts)) {
        if let Ok(mut counts) = self.counts.lock() {
            change(counts.get_or_insert_with(FeedCounts::default));
        }
    }

    /// The feed's series, if it is followed.
    pub(super) fn render(&self, out: &mut String) {
        let Some(c) = self.counts() else { return };
        *out += "# HELP svc_gateway_feed_connected Whether the coordinator answered the last route feed request (0: the gateway serves its last table).\n";
        *out += "# TYPE svc_gateway_feed_connected gauge\n";
        let _ = writeln!(out, "svc_gateway_feed_connected {}", u8::from(c.connected));
        *out += "# HELP svc_gateway_feed_last_answer_timestamp_seconds When the coordinator last answered a route feed request.\n";
        *out += "# TYPE svc_gateway_feed_last_answer_timestamp_seconds gauge\n";
        let _ = writeln!(out, "svc_gateway_feed_last_answer_timestamp_seconds {}", c.last_answer_secs);
        *out += "# HELP svc_gateway_feed_updates_total Route tables received from the coordinator and applied.\n";
        *out += "# TYPE svc_gateway_feed_updates_total counter\n";
        let _ = writeln!(out, "svc_gateway_feed_updates_total {}", c.updates);
        *out += "# HELP svc_gateway_feed_failures_total Route feed requests that failed.\n";
        *out += "# TYPE svc_gateway_feed_failures_total counter\n";
        let _ = writeln!(out, "svc_gateway_feed_failures_total {}", c.failures);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gateway_following_no_feed_shows_no_feed_series_and_one_that_does_shows_its_state() {
        let state = FeedState::default();
        let mut out = String::new();
        state.render(&mut out);
        assert_eq!(out, "");
        state.answered(true);
        state.answered(false);
        state.failed();
        state.render(&mut out);
        assert!(out.contains("svc_gateway_feed_connected 0\n"), "{out}");
        assert!(out.contains("svc_gateway_feed_updates_total 1\n"), "{out}");
        assert!(out.contains("svc_gateway_feed_failures_total 1\n"), "{out}");
        assert!(!out.contains("svc_gateway_feed_last_answer_timestamp_seconds 0\n"), "{out}");
        state.answered(false);
        assert_eq!(state.counts().map(|c| (c.connected, c.updates, c.failures)), Some((true, 1, 1)));
    }
}
