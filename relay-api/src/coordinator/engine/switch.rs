//! When a redeploy's route may switch (issue 41): the decision alone, a pure function of what
//! the gateway hosts serving the deployment last reported and of the time, so that a
//! deterministic simulator can drive it ([`may_switch`]).
//!
//! A redeploy's successor, once validated through the coordinator's gateway, switches in two
//! waits, each for every host serving the deployment (the operator's hosts following the
//! feed, or the route's `--gateway-hosts-per-route` of them: `gateway_hosts.rs`):
//!
//! 1. **Have it.** Each host reports, with each signed feed request, the routes with agents in
//!    rotation on it ([`relay_wire::feed::Report`]): the successor's route must have all its
//!    replicas' agents there ([`Want::agents`]; `seq` 0).
//! 2. **Serve it.** The hosts' tables then flip (the successor serves, the predecessor stands
//!    by) at a new feed sequence; each host must report a table applied at that sequence or
//!    later ([`Want::seq`]), the successor's agents still there. Only then is the successor
//!    promoted and the predecessor stopped (it drains), so no host sends a client to a
//!    stopped job.
//!
//! Each wait is bounded ([`SWITCH_BOUND`]): a host that has not acknowledged by then leaves
//! the route's hosts (it is no longer offered for the deployment: its URLs) and the switch
//! goes on without it. A host that reports the table and at least one of the successor's
//! agents, but not all, is not left out at the bound: it serves.
//!
//! A host left out rejoins ([`rejoins`]) only once no switch of the deployment is under way,
//! and its report says it applied a table at its [`Lagging::seq`] or later (one where the
//! route it waits for serves) and has that route's agents: when a switch ends, each host
//! lagging for the deployment is made to wait for the route that serves from then on, at
//! a feed sequence moved on after the switch ended (`store/feed.rs`,
//! `end_route_switch_serving`). A host's report counts only if its request was signed after
//! the one recorded ([`newer_report`]): a request given up and arriving late does not
//! replace a newer report.

use std::time::Duration;

use relay_wire::feed::Report;

/// How long a switch waits for a host, at each of its two steps: agents reconnect within a
/// few hundred milliseconds and a host applies a table within a round trip, so a host not
/// there in 10 s is lagging (frozen, partitioned, or its agents cannot reach it).
pub const SWITCH_BOUND: Duration = Duration::from_secs(10);

/// A gateway host serving the deployment, as it last reported (`None`: it never has).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostAck {
    /// The host's operator ID.
    pub operator_id: String,
    /// Its last report.
    pub report: Option<Report>,
}

/// What every host must have acknowledged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Want {
    /// The successor's route.
    pub route_id: String,
    /// Its agents in rotation on each host: the successor's replicas.
    pub agents: u32,
    /// The least feed sequence of the table each host applied (0: any).
    pub seq: u64,
    /// When the wait began, Unix ms.
    pub since_ms: i64,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Switch {
    /// Wait: these hosts have not acknowledged yet, and the bound is not up.
    Wait {
        /// Their operator IDs.
        waiting: Vec<String>,
    },
    /// Go on: every host acknowledged, or the bound is up and `lagging` leave the route's hosts
    /// first.
    Go {
        /// The hosts left out, by operator ID (empty when every one acknowledged).
        lagging: Vec<String>,
    },
}

/// Whether a redeploy may go on to its next step at `now_ms` (Unix ms), given the hosts
/// serving the deployment and what each last reported: [`Switch::Go`] once each has applied
/// a table at [`Want::seq`] or later with [`Want::agents`] of the successor's agents; at
/// [`SWITCH_BOUND`] after [`Want::since_ms`], [`Switch::Go`] without those that have not
/// applied it or have none of its agents. No host: go at once.
pub fn may_switch(hosts: &[HostAck], want: &Want, now_ms: i64) -> Switch {
    let agents =
        |h: &HostAck| h.report.as_ref().filter(|r| r.applied >= want.seq).map_or(0, |r| r.agents_of(&want.route_id));
    let waiting: Vec<String> =
        hosts.iter().filter(|h| agents(h) < want.agents.max(1)).map(|h| h.operator_id.clone()).collect();
    if waiting.is_empty() {
        return Switch::Go { lagging: Vec::new() };
    }
    let bound = i64::try_from(SWITCH_BOUND.as_millis()).unwrap_or(i64::MAX);
    if now_ms.saturating_sub(want.since_ms) < bound {
        return Switch::Wait { waiting };
    }
    Switch::Go { lagging: hosts.iter().filter(|h| agents(h) == 0).map(|h| h.operator_id.clone()).collect() }
}

/// A gateway host left out of a deployment's switch, as the store records it: not offered
/// for the deployment until [`rejoins`] says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lagging {
    /// The route whose agents it must have: the one serving once the switch ended.
    pub route_id: String,
    /// The least feed sequence of the table it must have applied: a table read at it or
    /// later has [`Lagging::route_id`] serving (0: any, while its switch is under way).
    pub seq: u64,
}

/// Whether a host lagging as `lag` is offered for the deployment again on `report`: only
/// once no switch of the deployment is under way (one under way did not wait for it, and a
/// flipped one would hand it the successor at once), its table is at [`Lagging::seq`] or
/// later (it no longer sends clients to a route stopped since, or to one whose agents never
/// reached it) and it has agents of [`Lagging::route_id`].
pub fn rejoins(lag: &Lagging, report: &Report, switch_under_way: bool) -> bool {
    !switch_under_way && report.applied >= lag.seq && report.agents_of(&lag.route_id) > 0
}

/// Whether a host's report made with a request signed at `signed_at_ms` replaces the one
/// recorded from a request signed at `recorded_at_ms` (`None`: none recorded): only a newer
/// request's does. A request the host gave up may reach the coordinator after a newer one,
/// and a replayed request is an older one; neither replaces what the host said since.
pub fn newer_report(signed_at_ms: i64, recorded_at_ms: Option<i64>) -> bool {
    recorded_at_ms.is_none_or(|recorded| signed_at_ms > recorded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(id: &str, applied: u64, agents: &[(&str, u32)]) -> HostAck {
        HostAck {
            operator_id: id.to_owned(),
            report: Some(Report { applied, agents: agents.iter().map(|(r, n)| ((*r).to_owned(), *n)).collect() }),
        }
    }

    fn want(agents: u32, seq: u64) -> Want {
        Want { route_id: "rt_new".into(), agents, seq, since_ms: 1_000 }
    }

    #[test]
    fn a_switch_goes_at_once_when_every_host_has_the_successors_agents() {
        let hosts = [host("op_a", 3, &[("rt_old", 1), ("rt_new", 2)]), host("op_b", 4, &[("rt_new", 2)])];
        assert_eq!(may_switch(&hosts, &want(2, 0), 1_000), Switch::Go { lagging: vec![] });
        assert_eq!(may_switch(&hosts, &want(2, 3), 1_000), Switch::Go { lagging: vec![] });
        assert_eq!(may_switch(&[], &want(2, 9), 1_000), Switch::Go { lagging: vec![] }, "no host: nothing to wait for");
    }

    #[test]
    fn a_switch_waits_for_a_host_without_all_the_agents_or_the_table() {
        let hosts = [host("op_a", 3, &[("rt_new", 2)]), host("op_b", 4, &[("rt_new", 1)])];
        assert_eq!(may_switch(&hosts, &want(2, 0), 1_500), Switch::Wait { waiting: vec!["op_b".into()] });
        assert_eq!(
            may_switch(&hosts, &want(1, 4), 1_500),
            Switch::Wait { waiting: vec!["op_a".into()] },
            "op_a applied a table from before the flip"
        );
        let silent = [host("op_a", 3, &[("rt_new", 1)]), HostAck { operator_id: "op_c".into(), report: None }];
        assert_eq!(may_switch(&silent, &want(1, 0), 1_500), Switch::Wait { waiting: vec!["op_c".into()] });
        assert_eq!(
            may_switch(&[host("op_a", 3, &[("rt_old", 1)])], &want(0, 0), 1_500),
            Switch::Wait { waiting: vec!["op_a".into()] },
            "at least one agent, whatever the replicas"
        );
    }

    #[test]
    fn a_host_lagging_past_the_bound_is_left_out_and_one_with_an_agent_is_not() {
        let bound = i64::try_from(SWITCH_BOUND.as_millis()).expect("ms");
        let hosts = [
            host("op_a", 5, &[("rt_new", 2)]),
            host("op_b", 5, &[("rt_new", 1)]),
            host("op_c", 5, &[("rt_old", 2)]),
            host("op_d", 4, &[("rt_new", 2)]),
            HostAck { operator_id: "op_e".into(), report: None },
        ];
        let w = want(2, 5);
        assert!(matches!(may_switch(&hosts, &w, w.since_ms + bound - 1), Switch::Wait { .. }), "within the bound");
        assert_eq!(
            may_switch(&hosts, &w, w.since_ms + bound),
            Switch::Go { lagging: vec!["op_c".into(), "op_d".into(), "op_e".into()] },
            "op_b has one of two agents: it serves, so it stays"
        );
    }

    fn report(applied: u64, agents: &[(&str, u32)]) -> Report {
        Report { applied, agents: agents.iter().map(|(r, n)| ((*r).to_owned(), *n)).collect() }
    }

    #[test]
    fn a_lagging_host_rejoins_with_the_serving_routes_agents_and_a_table_where_it_serves() {
        let lag = Lagging { route_id: "rt_4".into(), seq: 17 };
        assert!(rejoins(&lag, &report(17, &[("rt_4", 1)]), false));
        assert!(rejoins(&lag, &report(20, &[("rt_3", 2), ("rt_4", 2)]), false));
        // Seed 28 of the simulator: op_a, left out of rt_4's switch, reports an agent of rt_4
        // while its table (seq 15) still sends clients to rt_3, stopped since.
        assert!(!rejoins(&lag, &report(15, &[("rt_4", 1)]), false), "its table is from before rt_4 served");
        assert!(!rejoins(&lag, &report(17, &[("rt_3", 1)]), false), "the old route's agents do not count");
        assert!(!rejoins(&lag, &report(17, &[("rt_4", 0)]), false));
    }

    #[test]
    fn a_host_lagging_behind_a_route_replaced_since_waits_for_the_one_serving() {
        // Seed 11: op_b lagged behind rt_4; rt_5 switched without it, so its row was made to
        // wait for rt_5 at the sequence after rt_5's promotion. An rt_4 agent is not enough,
        // nor a table from before (rt_5's agents never reached it).
        let lag = Lagging { route_id: "rt_5".into(), seq: 31 };
        assert!(!rejoins(&lag, &report(31, &[("rt_4", 1)]), false));
        assert!(!rejoins(&lag, &report(29, &[("rt_5", 1)]), false));
        assert!(rejoins(&lag, &report(31, &[("rt_5", 1)]), false));
    }

    #[test]
    fn no_host_rejoins_while_a_switch_of_the_deployment_is_under_way() {
        // Seed 61: a host rejoining during a switch that had flipped would be handed the
        // successor's table at once, though the first wait never waited for it.
        let lag = Lagging { route_id: "rt_2".into(), seq: 0 };
        let has_all = report(40, &[("rt_2", 2), ("rt_3", 2)]);
        assert!(!rejoins(&lag, &has_all, true));
        assert!(rejoins(&lag, &has_all, false), "once the switch ended (and its row was made to wait for it)");
    }

    #[test]
    fn only_a_newer_signed_request_replaces_a_hosts_report() {
        assert!(newer_report(5, None));
        assert!(newer_report(1_000, Some(999)));
        // Seed 21532: request 121, given up, arrives 1.7 s after 123 and 124.
        assert!(!newer_report(999, Some(1_000)), "an older request given up, arriving late");
        assert!(!newer_report(1_000, Some(1_000)), "the same request again (replayed)");
    }
}
