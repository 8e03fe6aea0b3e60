//! The engine's agenda (issue 44, point 5: idle costs nothing): which deployments the leader's
//! next tick steps. A deployment in motion (launching, validating, degraded, restarting, a
//! redeploy or a switch under way, a replica not validated yet) is hot, stepped at every tick
//! as before; a settled live one is stepped only when it is due (its next validation, the end
//! of its period) or on an event. Every deployment is stepped (a full tick: [`Engine::tick`])
//! when the engine is woken (an operation on this coordinator, or on another one through the
//! store's engine sequence), when the scheduler recorded or decided anything, and at least
//! every [`FULL_EVERY`], so that a missed event costs at most that.
//!
//! [`Engine::tick`]: super::Engine::tick

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// At least this often every deployment is stepped, whatever its due time.
pub(super) const FULL_EVERY: Duration = Duration::from_secs(30);

/// At least this often the gateway's routes are read and set again while nothing changed
/// (a gateway host's presence running out, the agents' catalog growing old).
pub(super) const SYNC_EVERY: Duration = Duration::from_secs(30);

/// What a deployment's step left it as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Pace {
    /// In motion: stepped at every tick.
    Hot,
    /// Settled: stepped at this time, or on an event.
    At(Instant),
    /// Waiting for an event (funds): stepped on one, or at a full tick.
    OnEvent,
}

/// What the next tick steps.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Plan {
    /// Every active deployment.
    All,
    /// These deployments (hot, due, or woken one by one).
    These(Vec<String>),
}

/// The agenda: each active deployment's pace, as its last step left it.
#[derive(Debug)]
pub(super) struct Agenda {
    /// Every deployment is stepped at the next tick.
    all: bool,
    /// Deployments woken one by one since the last tick.
    dirty: HashSet<String>,
    /// Each active deployment's pace and serving revision.
    pace: HashMap<String, (Pace, u32)>,
    /// When the next full tick is due at the latest.
    full_at: Option<Instant>,
    /// When the routes are next set again at the latest.
    sync_at: Option<Instant>,
    /// The store's engine sequence when last looked at.
    seq: Option<u64>,
}

impl Default for Agenda {
    fn default() -> Agenda {
        Agenda { all: true, dirty: HashSet::new(), pace: HashMap::new(), full_at: None, sync_at: None, seq: None }
    }
}

impl Agenda {
    /// Every deployment is stepped at the next tick.
    pub(super) fn wake_all(&mut self) {
        self.all = true;
    }

    /// Deployment `id` is stepped at the next tick.
    pub(super) fn wake_for(&mut self, id: &str) {
        self.dirty.insert(id.to_owned());
    }

    /// The store's engine sequence is `seq`: every deployment is stepped if it moved (an
    /// operation answered here or by another coordinator).
    pub(super) fn seq_seen(&mut self, seq: u64) {
        if self.seq.is_some_and(|known| known != seq) {
            self.all = true;
        }
        self.seq = Some(seq);
    }

    /// What the tick at `now` steps.
    pub(super) fn take(&mut self, now: Instant) -> Plan {
        if self.all || self.full_at.is_none_or(|at| at <= now) {
            self.all = false;
            self.dirty.clear();
            self.full_at = Some(now + FULL_EVERY);
            return Plan::All;
        }
        let mut these: Vec<String> = self.dirty.drain().collect();
        for (id, (pace, _)) in &self.pace {
            let due = match pace {
                Pace::Hot => true,
                Pace::At(at) => *at <= now,
                Pace::OnEvent => false,
            };
            if due && !these.contains(id) {
                these.push(id.clone());
            }
        }
        these.sort();
        Plan::These(these)
    }

    /// The pace of deployment `id` (serving `revision`) after its step.
    pub(super) fn place(&mut self, id: &str, revision: u32, pace: Pace) {
        self.pace.insert(id.to_owned(), (pace, revision));
    }

    /// Deployment `id` is no longer active.
    pub(super) fn forget(&mut self, id: &str) {
        self.pace.remove(id);
    }

    /// Keeps only the deployments `active` (after a full tick read them).
    pub(super) fn keep_only(&mut self, active: &HashSet<&str>) {
        self.pace.retain(|id, _| active.contains(id.as_str()));
    }

    /// Whether the deployment was settled at a due time before this step (a step of it that
    /// leaves it settled changes no route).
    pub(super) fn settled(&self, id: &str) -> bool {
        matches!(self.pace.get(id), Some((Pace::At(_), _)))
    }

    /// Each active deployment's serving revision, as last stepped.
    pub(super) fn serving(&self) -> HashMap<String, u32> {
        self.pace.iter().map(|(id, (_, revision))| (id.clone(), *revision)).collect()
    }

    /// Whether the routes are set at this tick: when they may have `changed`, else at most
    /// `every` after they were last.
    pub(super) fn sync_due(&mut self, now: Instant, changed: bool, every: Duration) -> bool {
        if changed || self.sync_at.is_none_or(|at| at <= now) {
            self.sync_at = Some(now + every);
            return true;
        }
        false
    }

    /// Deployment `id`'s pace, as its last step left it (None before its first).
    pub(super) fn pace_of(&self, id: &str) -> Option<Pace> {
        self.pace.get(id).map(|(pace, _)| *pace)
    }

    /// Forgets everything (the engine stepped down): the next leader's first tick is full.
    pub(super) fn clear(&mut self) {
        *self = Agenda::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settled_deployment_is_stepped_only_once_due_and_a_woken_one_at_once() {
        let mut agenda = Agenda::default();
        let now = Instant::now();
        assert_eq!(agenda.take(now), Plan::All, "the first tick is full");
        agenda.place("hot", 1, Pace::Hot);
        agenda.place("later", 1, Pace::At(now + Duration::from_secs(10)));
        agenda.place("waiting", 1, Pace::OnEvent);
        assert_eq!(agenda.take(now), Plan::These(vec!["hot".into()]));
        agenda.wake_for("waiting");
        assert_eq!(agenda.take(now), Plan::These(vec!["hot".into(), "waiting".into()]));
        let later = now + Duration::from_secs(10);
        assert_eq!(agenda.take(later), Plan::These(vec!["hot".into(), "later".into()]));
        assert_eq!(agenda.take(now + FULL_EVERY), Plan::All, "a full tick at least every {FULL_EVERY:?}");
    }

    #[test]
    fn a_moved_engine_sequence_steps_everything() {
        let mut agenda = Agenda::default();
        let now = Instant::now();
        agenda.seq_seen(4);
        assert_eq!(agenda.take(now), Plan::All);
        agenda.seq_seen(4);
        assert_eq!(agenda.take(now), Plan::These(Vec::new()));
        agenda.seq_seen(5);
        assert_eq!(agenda.take(now), Plan::All, "another coordinator's operation");
        agenda.wake_all();
        assert_eq!(agenda.take(now), Plan::All);
    }

    #[test]
    fn routes_are_set_on_a_change_and_at_most_every_interval_otherwise() {
        let mut agenda = Agenda::default();
        let now = Instant::now();
        let every = Duration::from_secs(30);
        assert!(agenda.sync_due(now, false, every), "the first time");
        assert!(!agenda.sync_due(now + Duration::from_secs(1), false, every));
        assert!(agenda.sync_due(now + Duration::from_secs(1), true, every));
        assert!(agenda.sync_due(now + Duration::from_secs(31), false, every));
    }
}
