//! The route feed's sequence, the gateway hosts' reports, redeploys' switches and the hosts
//! lagging behind one (issue 41).

use crate::coordinator::engine::switch::Lagging;
use crate::coordinator::store::StoreError;
use crate::coordinator::store::backend::{FeedRows, RouteSwitch};
use crate::coordinator::store::sql::{Sql, SqlRow, params};
use relay_wire::feed::Report;

fn seq(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn switch_row(r: &SqlRow) -> Result<RouteSwitch, StoreError> {
    Ok(RouteSwitch {
        deployment_id: r.text(0)?,
        revision: r.u32(1)?,
        route_id: r.text(2)?,
        began_at: r.i64(3)?,
        flipped: match (r.opt_u64(4)?, r.opt_i64(5)?) {
            (Some(seq), Some(at)) => Some((seq, at)),
            _ => None,
        },
    })
}

const SWITCH_COLUMNS: &str = "deployment_id, revision, route_id, began_at, flipped_seq, flipped_at";

impl<T: Sql> FeedRows for T {
    fn feed_seq(&mut self) -> Result<u64, StoreError> {
        let row = self.query_opt("SELECT seq FROM feed_sequence WHERE id = 1", &[])?;
        Ok(row.map(|r| r.u64(0)).transpose()?.unwrap_or(0))
    }

    fn bump_feed_seq(&mut self) -> Result<u64, StoreError> {
        self.execute("UPDATE feed_sequence SET seq = seq + 1 WHERE id = 1", &[])?;
        self.feed_seq()
    }

    fn engine_seq(&mut self) -> Result<u64, StoreError> {
        let row = self.query_opt("SELECT seq FROM engine_sequence WHERE id = 1", &[])?;
        Ok(row.map(|r| r.u64(0)).transpose()?.unwrap_or(0))
    }

    fn bump_engine_seq(&mut self) -> Result<(), StoreError> {
        self.execute("UPDATE engine_sequence SET seq = seq + 1 WHERE id = 1", &[])?;
        Ok(())
    }

    fn put_report(&mut self, operator_id: &str, report: &Report, signed_at: i64, now: i64) -> Result<(), StoreError> {
        let agents = serde_json::to_string(&report.agents).map_err(|e| StoreError::Backend(Box::new(e)))?;
        self.execute(
            "INSERT INTO gateway_acks (operator_id, applied_seq, agents, reported_at, signed_at) \
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (operator_id) DO UPDATE SET applied_seq = excluded.applied_seq, \
             agents = excluded.agents, reported_at = excluded.reported_at, signed_at = excluded.signed_at",
            params![operator_id, seq(report.applied), &agents, now, signed_at],
        )?;
        Ok(())
    }

    fn report_signed_at(&mut self, operator_id: &str) -> Result<Option<i64>, StoreError> {
        let row = self.query_opt("SELECT signed_at FROM gateway_acks WHERE operator_id = ?1", params![operator_id])?;
        Ok(row.map(|r| r.i64(0)).transpose()?)
    }

    fn reports(&mut self) -> Result<Vec<(String, Report, i64)>, StoreError> {
        let rows = self.query(
            "SELECT operator_id, applied_seq, agents, reported_at FROM gateway_acks ORDER BY operator_id",
            &[],
        )?;
        rows.iter().map(|r| Ok((r.text(0)?, Report { applied: r.u64(1)?, agents: r.json(2)? }, r.i64(3)?))).collect()
    }

    fn route_switches(&mut self) -> Result<Vec<RouteSwitch>, StoreError> {
        let sql = format!("SELECT {SWITCH_COLUMNS} FROM route_switches ORDER BY deployment_id");
        self.query(&sql, &[])?.iter().map(switch_row).collect()
    }

    fn put_route_switch(&mut self, s: &RouteSwitch) -> Result<(), StoreError> {
        let (flipped_seq, flipped_at) = match s.flipped {
            Some((n, at)) => (Some(seq(n)), Some(at)),
            None => (None, None),
        };
        self.execute(
            "INSERT INTO route_switches (deployment_id, revision, route_id, began_at, flipped_seq, flipped_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (deployment_id) DO UPDATE SET revision = excluded.revision, \
             route_id = excluded.route_id, began_at = excluded.began_at, flipped_seq = excluded.flipped_seq, \
             flipped_at = excluded.flipped_at",
            params![&s.deployment_id, i64::from(s.revision), &s.route_id, s.began_at, flipped_seq, flipped_at],
        )?;
        Ok(())
    }

    fn delete_route_switch(&mut self, deployment_id: &str) -> Result<(), StoreError> {
        self.execute("DELETE FROM route_switches WHERE deployment_id = ?1", params![deployment_id])?;
        Ok(())
    }

    fn lagging_hosts(&mut self) -> Result<Vec<(String, String, String)>, StoreError> {
        let rows = self.query(
            "SELECT deployment_id, operator_id, route_id FROM lagging_hosts ORDER BY deployment_id, operator_id",
            &[],
        )?;
        rows.iter().map(|r| Ok((r.text(0)?, r.text(1)?, r.text(2)?))).collect()
    }

    fn lagging_of(&mut self, operator_id: &str) -> Result<Vec<(String, Lagging)>, StoreError> {
        let rows = self.query(
            "SELECT deployment_id, route_id, min_seq FROM lagging_hosts WHERE operator_id = ?1 ORDER BY deployment_id",
            params![operator_id],
        )?;
        rows.iter().map(|r| Ok((r.text(0)?, Lagging { route_id: r.text(1)?, seq: r.u64(2)? }))).collect()
    }

    fn put_lagging_host(
        &mut self,
        deployment_id: &str,
        operator_id: &str,
        lag: &Lagging,
        now: i64,
    ) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO lagging_hosts (deployment_id, operator_id, route_id, since, min_seq) \
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (deployment_id, operator_id) DO UPDATE SET \
             route_id = excluded.route_id, min_seq = excluded.min_seq",
            params![deployment_id, operator_id, &lag.route_id, now, seq(lag.seq)],
        )?;
        Ok(())
    }

    fn retarget_lagging_hosts(&mut self, deployment_id: &str, lag: &Lagging) -> Result<(), StoreError> {
        self.execute(
            "UPDATE lagging_hosts SET route_id = ?2, min_seq = ?3 WHERE deployment_id = ?1",
            params![deployment_id, &lag.route_id, seq(lag.seq)],
        )?;
        Ok(())
    }

    fn delete_lagging_host(&mut self, deployment_id: &str, operator_id: &str) -> Result<(), StoreError> {
        self.execute(
            "DELETE FROM lagging_hosts WHERE deployment_id = ?1 AND operator_id = ?2",
            params![deployment_id, operator_id],
        )?;
        Ok(())
    }

    fn feed_counter(&mut self, operator_id: &str) -> Result<Option<i64>, StoreError> {
        let row =
            self.query_opt("SELECT last_signed_at FROM feed_counters WHERE operator_id = ?1", params![operator_id])?;
        Ok(row.map(|r| r.i64(0)).transpose()?)
    }

    fn put_feed_counter(&mut self, operator_id: &str, signed_at: i64) -> Result<(), StoreError> {
        self.execute(
            "INSERT INTO feed_counters (operator_id, last_signed_at) VALUES (?1, ?2) \
             ON CONFLICT (operator_id) DO UPDATE SET last_signed_at = excluded.last_signed_at",
            params![operator_id, signed_at],
        )?;
        Ok(())
    }

    fn probe_keys(&mut self) -> Result<Vec<String>, StoreError> {
        let rows = self.query("SELECT public_key FROM probe_keys ORDER BY added_at DESC, public_key", &[])?;
        rows.iter().map(|r| Ok(r.text(0)?)).collect()
    }

    fn put_probe_key(&mut self, public_key: &str, now: i64) -> Result<bool, StoreError> {
        let known =
            self.execute("UPDATE probe_keys SET added_at = ?2 WHERE public_key = ?1", params![public_key, now])?;
        if known > 0 {
            return Ok(false);
        }
        let added = self.execute(
            "INSERT INTO probe_keys (public_key, added_at) VALUES (?1, ?2) ON CONFLICT (public_key) DO NOTHING",
            params![public_key, now],
        )?;
        Ok(added > 0)
    }
}
