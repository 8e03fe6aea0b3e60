//! What the route feed records for a redeploy to switch after every gateway host has the
//! successor (issue 41): the feed's sequence, each host's last report, the switches under
//! way and the hosts lagging behind one. In the store, so that every coordinator on the
//! database answers the feed, and the lease holder's engine switches, from the same records.

use relay_wire::feed::{Presence, Report};

use super::{RelayStore, RouteSwitch, StoreError};
use crate::coordinator::engine::switch::{Lagging, newer_report, rejoins};

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

    /// The engine's sequence now: one row read. It moves on with each operation that wakes the
    /// engine, on whichever coordinator answered it; the lease holder's engine looks at it.
    pub fn engine_seq(&self) -> Result<u64, StoreError> {
        self.read(|tx| tx.engine_seq())
    }

    /// Moves the engine's sequence on: the lease holder's engine steps every deployment again.
    pub fn bump_engine_seq(&self) -> Result<(), StoreError> {
        self.write(|tx| tx.bump_engine_seq())
    }

    /// Accepts a feed request of operator `operator_id` signed at `signed_at` (Unix ms) if it
    /// was signed after every one accepted before from that operator, and records it as the
    /// latest (issue 40): `Err` with the latest accepted time otherwise (a replayed request,
    /// on this coordinator or another on the database). One write of one row.
    pub fn accept_feed_request(&self, operator_id: &str, signed_at: i64) -> Result<Result<(), i64>, StoreError> {
        self.write(|tx| {
            if let Some(last) = tx.feed_counter(operator_id)?
                && signed_at <= last
            {
                return Ok(Err(last));
            }
            tx.put_feed_counter(operator_id, signed_at)?;
            Ok(Ok(()))
        })
    }

    /// The coordinators' probe keys (public halves, hex), newest first: what every gateway
    /// checks a probe token against.
    pub fn probe_keys(&self) -> Result<Vec<String>, StoreError> {
        self.read(|tx| tx.probe_keys())
    }

    /// Records a coordinator's probe key (public half, hex) as registered at `now` (a key
    /// known already is dated `now` again: a feed carries the newest
    /// [`relay_wire::alpn::MAX_PROBE_KEYS`], so a coordinator that starts again is among them
    /// whatever started since it first did), and moves the feed's sequence on so that every
    /// gateway host is given the keys at once. Whether the key was new.
    pub fn register_probe_key(&self, public_key: &str, now: i64) -> Result<bool, StoreError> {
        self.write(|tx| {
            let added = tx.put_probe_key(public_key, now)?;
            tx.bump_feed_seq()?;
            Ok(added)
        })
    }

    /// Records what a gateway host's signed feed request says, at `now`, in one transaction:
    /// where it is, and its report, if the request was signed (`signed_at`, the signature's
    /// time) after the one whose report is recorded ([`newer_report`]: one given up and
    /// arriving late, or replayed, does not replace a newer report). A host lagging behind a
    /// deployment is offered for it again when its report says so ([`rejoins`]: no switch of
    /// the deployment under way, a table where the awaited route serves, agents of it).
    /// Whether the report was recorded.
    pub fn record_feed_request(
        &self,
        operator_id: &str,
        presence: Option<&Presence>,
        report: Option<&Report>,
        signed_at: i64,
        now: i64,
    ) -> Result<bool, StoreError> {
        self.write(|tx| {
            if let Some(presence) = presence {
                tx.put_presence(operator_id, presence, now)?;
            }
            let Some(report) = report else { return Ok(false) };
            if !newer_report(signed_at, tx.report_signed_at(operator_id)?) {
                return Ok(false);
            }
            tx.put_report(operator_id, report, signed_at, now)?;
            let lagging = tx.lagging_of(operator_id)?;
            if !lagging.is_empty() {
                let switches = tx.route_switches()?;
                for (deployment_id, lag) in lagging {
                    let under_way = switches.iter().any(|s| s.deployment_id == deployment_id);
                    if rejoins(&lag, report, under_way) {
                        tx.delete_lagging_host(&deployment_id, operator_id)?;
                    }
                }
            }
            Ok(true)
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

    /// Forgets a deployment's switch (its successor gone with a coordinator's restart).
    pub fn end_route_switch(&self, deployment_id: &str) -> Result<(), StoreError> {
        self.write(|tx| tx.delete_route_switch(deployment_id))
    }

    /// Forgets a deployment's switch, done or failed, `route_id` serving the deployment from
    /// now on (the successor promoted, or the revision that kept serving), in one transaction
    /// with a new feed sequence, which it returns: every host lagging for the deployment now
    /// rejoins only with a table read at that sequence or later (read after this, so
    /// `route_id` serves in it: not the predecessor stopped since, nor a successor that
    /// failed) and `route_id`'s agents. Call it once what serves has changed in the store.
    pub fn end_route_switch_serving(&self, deployment_id: &str, route_id: &str) -> Result<u64, StoreError> {
        self.write(|tx| {
            tx.delete_route_switch(deployment_id)?;
            let seq = tx.bump_feed_seq()?;
            tx.retarget_lagging_hosts(deployment_id, &Lagging { route_id: route_id.to_owned(), seq })?;
            Ok(seq)
        })
    }

    /// Marks gateway hosts `operator_ids` lagging for deployment `deployment_id`, behind the
    /// switch to `route_id`: not offered for it while the switch is under way, nor after
    /// until each has what [`RelayStore::end_route_switch_serving`] asks for (until then,
    /// `route_id`'s agents and a table at the feed sequence now or later).
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
            let lag = Lagging { route_id: route_id.to_owned(), seq: tx.feed_seq()? };
            for operator_id in operator_ids {
                tx.put_lagging_host(deployment_id, operator_id, &lag, now)?;
            }
            Ok(())
        })
    }

    /// Where gateway host `operator_id` lags: by deployment, what it must have to rejoin.
    pub fn lagging_of(&self, operator_id: &str) -> Result<Vec<(String, Lagging)>, StoreError> {
        self.read(|tx| tx.lagging_of(operator_id))
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
