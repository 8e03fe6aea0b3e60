//! What the route feed records for a redeploy to switch after every gateway host has the
//! successor (issue 41): the feed's sequence, each host's last report, the switches under
//! way and the hosts lagging behind one. In the store, so that every coordinator on the
//! database answers the feed, and the lease holder's engine switches, from the same records.

use relay_wire::feed::{Presence, Report};

use super::{RelayStore, RouteSwitch, StoreError};

impl RelayStore {
    /// The route feed's sequence now: one row read.
    pub fn feed_seq(&self) -> Result<u64, StoreError> {
        self.read(|tx| tx.feed_seq())
    }

    /// Moves the route feed's sequence on (a gateway host's table may have changed); the new
    /// sequence.
    pub fn bump_feed_seq(&self) -> Result<u64, StoreError> {
        self.write(|tx| tx.bump_feed_seq())
    }

    /// Records what a gateway host's signed feed request says, at `now`, in one transaction:
    /// where it is, and its report; a host that reports agents of a route it was lagging
    /// behind is offered for that deployment again.
    pub fn record_feed_request(
        &self,
        operator_id: &str,
        presence: Option<&Presence>,
        report: Option<&Report>,
        now: i64,
    ) -> Result<(), StoreError> {
        self.write(|tx| {
            if let Some(presence) = presence {
                tx.put_presence(operator_id, presence, now)?;
            }
            if let Some(report) = report {
                tx.put_report(operator_id, report, now)?;
                for (deployment_id, operator, route_id) in tx.lagging_hosts()? {
                    if operator == operator_id && report.agents_of(&route_id) > 0 {
                        tx.delete_lagging_host(&deployment_id, operator_id)?;
                    }
                }
            }
            Ok(())
        })
    }

    /// Each gateway host's last report and when (Unix ms), by operator ID.
    pub fn gateway_reports(&self) -> Result<Vec<(String, Report, i64)>, StoreError> {
        self.read(|tx| tx.reports())
    }

    /// The switch under way of deployment `deployment_id`, if any.
    pub fn route_switch(&self, deployment_id: &str) -> Result<Option<RouteSwitch>, StoreError> {
        Ok(self.read(|tx| tx.route_switches())?.into_iter().find(|s| s.deployment_id == deployment_id))
    }

    /// Records a switch's beginning (its successor validated).
    pub fn begin_route_switch(&self, switch: &RouteSwitch) -> Result<(), StoreError> {
        self.write(|tx| tx.put_route_switch(switch))
    }

    /// Flips the hosts' tables of a deployment's switch to its successor at `now`, in one
    /// transaction with a new feed sequence, which it returns: a table read at it or later
    /// has the successor serving.
    pub fn flip_route_switch(&self, deployment_id: &str, now: i64) -> Result<Option<u64>, StoreError> {
        self.write(|tx| {
            let Some(mut switch) = tx.route_switches()?.into_iter().find(|s| s.deployment_id == deployment_id) else {
                return Ok(None);
            };
            let seq = tx.bump_feed_seq()?;
            switch.flipped = Some((seq, now));
            tx.put_route_switch(&switch)?;
            Ok(Some(seq))
        })
    }

    /// Forgets a deployment's switch (done, or its successor gone).
    pub fn end_route_switch(&self, deployment_id: &str) -> Result<(), StoreError> {
        self.write(|tx| tx.delete_route_switch(deployment_id))
    }

    /// Marks gateway hosts `operator_ids` lagging for deployment `deployment_id`: not offered
    /// for it until each reports agents of `route_id`.
    pub fn mark_lagging(
        &self,
        deployment_id: &str,
        operator_ids: &[String],
        route_id: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        if operator_ids.is_empty() {
            return Ok(());
        }
        self.write(|tx| {
            for operator_id in operator_ids {
                tx.put_lagging_host(deployment_id, operator_id, route_id, now)?;
            }
            Ok(())
        })
    }

    /// The operators whose hosts lag for deployment `deployment_id`.
    pub fn lagging_for(&self, deployment_id: &str) -> Result<Vec<String>, StoreError> {
        Ok(self
            .read(|tx| tx.lagging_hosts())?
            .into_iter()
            .filter(|(d, _, _)| d == deployment_id)
            .map(|(_, operator, _)| operator)
            .collect())
    }
}
