//! An [`ExecutionStore`] in memory, for tests: a transaction works on a copy, made at its
//! first write (most transactions only read), and commit swaps it in, so an uncommitted
//! transaction leaves nothing. [`MemoryStore::crash`] makes
//! every later commit fail, which is how tests stop the executor at a random moment.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::clock::Millis;
use crate::executor::{ExecutionStore, ExecutionTx, StoreFailure};
use crate::market::Workload;
use crate::plan::Plan;
use crate::reason::Reason;
use crate::record::{AppKey, AppStatus, AppView, Charge, ExecKey, ExecState, Execution};

/// One application in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryApp {
    /// Identity.
    pub uid: String,
    /// Publication status.
    pub status: AppStatus,
    /// Why nothing of it may run now ([`AppView::halt`]).
    pub halt: Option<Reason>,
    /// Settled (`once`).
    pub settled: bool,
    /// When it settled.
    pub settled_at: Option<Millis>,
    /// The version that re-armed it (0: never).
    pub rearmed_version: u64,
    /// Its active plan.
    pub plan: Option<Plan>,
    /// The version the scheduler activated, and when.
    pub activated: (u64, Millis),
    /// When it is due next.
    pub next_at: Option<Millis>,
    /// Why it is blocked.
    pub blocked: Option<Reason>,
    /// What its jobs run (every version alike).
    pub workload: Workload,
}

/// Everything committed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryState {
    /// Applications by key.
    pub apps: BTreeMap<AppKey, MemoryApp>,
    /// Executions by key, with their application.
    pub executions: BTreeMap<ExecKey, (AppKey, Execution)>,
    /// The ledger: charges (positive) and refunds, by application. A launch charged nothing
    /// (a relaunch its window's charge covers) makes no entry.
    pub ledger: Vec<(AppKey, ExecKey, Charge, bool)>,
    /// Refunds of time a paid window went unserved ([`ExecutionTx::refund_unserved`]), each
    /// also in `ledger`: by (charged execution, gap start), the gap's end.
    pub unserved: BTreeMap<(ExecKey, Millis), Millis>,
    /// The executor's last heartbeat ([`ExecutionTx::heartbeat`]).
    pub alive_at: Option<Millis>,
    /// Every transition: execution, from, to.
    pub transitions: Vec<(ExecKey, ExecState, ExecState)>,
}

/// The store.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<MemoryState>,
    crashed: Arc<AtomicBool>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> MemoryStore {
        MemoryStore::default()
    }

    fn lock(&self) -> MutexGuard<'_, MemoryState> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A copy of what is committed.
    pub fn snapshot(&self) -> MemoryState {
        self.lock().clone()
    }

    /// Reads what is committed in place, without a copy (the simulator checks its invariants
    /// after every step: a copy of the whole store each time was most of its run).
    pub fn read<T>(&self, f: impl FnOnce(&MemoryState) -> T) -> T {
        f(&self.lock())
    }

    /// Changes committed state directly (what the publication service does in its own
    /// transactions: publish, pause, resume).
    pub fn edit<T>(&self, f: impl FnOnce(&mut MemoryState) -> T) -> T {
        f(&mut self.lock())
    }

    /// An empty store whose commits fail while `crashed` is set (shared with a test's market,
    /// so both die together).
    pub fn with_crash_flag(crashed: Arc<AtomicBool>) -> MemoryStore {
        MemoryStore { state: Mutex::default(), crashed }
    }

    /// From now on every commit fails (the process died); [`MemoryStore::restart`] undoes it.
    pub fn crash(&self) {
        self.crashed.store(true, Ordering::SeqCst);
    }

    /// The shared crash flag.
    pub fn crash_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.crashed)
    }

    /// The process is back: commits work again.
    pub fn restart(&self) {
        self.crashed.store(false, Ordering::SeqCst);
    }
}

struct MemoryTx<'a> {
    guard: MutexGuard<'a, MemoryState>,
    /// The copy the transaction changes, made at its first write.
    work: Option<MemoryState>,
    /// A heartbeat of this transaction, kept apart: a step that only beats copies nothing.
    alive_at: Option<Millis>,
    crashed: &'a AtomicBool,
}

impl MemoryTx<'_> {
    /// What the transaction sees: its copy once it wrote, the committed state before.
    fn state(&self) -> &MemoryState {
        self.work.as_ref().unwrap_or(&self.guard)
    }

    /// The transaction's copy, made now if it has none yet.
    fn state_mut(&mut self) -> &mut MemoryState {
        let guard = &self.guard;
        self.work.get_or_insert_with(|| (**guard).clone())
    }
}

fn failure(message: &str) -> StoreFailure {
    StoreFailure(message.to_owned().into())
}

impl ExecutionStore for MemoryStore {
    fn begin(&self) -> Result<Box<dyn ExecutionTx + '_>, StoreFailure> {
        if self.crashed.load(Ordering::SeqCst) {
            return Err(failure("the store is down"));
        }
        Ok(Box::new(MemoryTx { guard: self.lock(), work: None, alive_at: None, crashed: &self.crashed }))
    }
}

impl ExecutionTx for MemoryTx<'_> {
    fn due(&mut self, now: Millis, limit: usize) -> Result<Vec<AppKey>, StoreFailure> {
        let state = self.state();
        let mut due: Vec<(Millis, AppKey)> =
            state.apps.iter().filter_map(|(k, a)| a.next_at.filter(|&t| t <= now).map(|t| (t, *k))).collect();
        due.sort_unstable();
        Ok(due.into_iter().take(limit).map(|(_, k)| k).collect())
    }

    fn next_due(&mut self) -> Result<Option<Millis>, StoreFailure> {
        let state = self.state();
        Ok(state.apps.values().filter_map(|a| a.next_at).min())
    }

    fn app(&mut self, app: AppKey) -> Result<Option<AppView>, StoreFailure> {
        let state = self.state();
        let Some(a) = state.apps.get(&app) else { return Ok(None) };
        let mine: Vec<&Execution> = state.executions.values().filter(|(k, _)| *k == app).map(|(_, e)| e).collect();
        let mut newest: BTreeMap<u16, u64> = BTreeMap::new();
        for e in &mine {
            let g = newest.entry(e.slot).or_default();
            *g = (*g).max(e.generation);
        }
        let executions = mine
            .into_iter()
            .filter(|e| e.state.is_live() || newest.get(&e.slot) == Some(&e.generation))
            .cloned()
            .collect();
        // Each charge net of its execution's refunds (a refused launch's refunds it all; a gap's,
        // part of it).
        let charges = state
            .ledger
            .iter()
            .filter(|(k, _, _, refund)| *k == app && !refund)
            .filter_map(|(_, exec, c, _)| {
                let mut net = *c;
                for (_, _, r, _) in state.ledger.iter().filter(|(_, x, _, r)| *r && x == exec) {
                    net.quote = net.quote.less(&r.quote);
                }
                (net.quote != crate::market::Quote::default()).then_some(net)
            })
            .collect();
        Ok(Some(AppView {
            key: app,
            uid: a.uid.clone(),
            status: a.status,
            halt: a.halt.clone(),
            settled: a.settled,
            rearmed_version: a.rearmed_version,
            plan: a.plan.clone(),
            activated_version: a.activated.0,
            activated_at: a.activated.1,
            executions,
            charges,
        }))
    }

    fn find(&mut self, execution_id: &str) -> Result<Option<(AppKey, Execution)>, StoreFailure> {
        let state = self.state();
        Ok(state.executions.values().find(|(_, e)| e.execution_id == execution_id).cloned())
    }

    fn live(&mut self) -> Result<Vec<(AppKey, Execution)>, StoreFailure> {
        let state = self.state();
        Ok(state.executions.values().filter(|(_, e)| e.state.is_live()).cloned().collect())
    }

    fn workload(&mut self, app: AppKey, _policy_version: u64) -> Result<Workload, StoreFailure> {
        let state = self.state();
        Ok(state.apps.get(&app).map(|a| a.workload.clone()).unwrap_or_default())
    }

    fn insert(&mut self, app: AppKey, execution: &Execution) -> Result<ExecKey, StoreFailure> {
        let work = self.state_mut();
        if work.executions.values().any(|(_, e)| e.execution_id == execution.execution_id) {
            return Err(failure("execution ID already recorded"));
        }
        let key = work.executions.keys().next_back().copied().unwrap_or(0) + 1;
        let mut e = execution.clone();
        e.key = key;
        if e.state == ExecState::Launching && e.charged != crate::market::Quote::default() {
            let charge = Charge { slot: e.slot, generation: e.generation, at: e.created_at, quote: e.charged };
            work.ledger.push((app, key, charge, false));
        }
        work.executions.insert(key, (app, e));
        Ok(key)
    }

    fn transition(&mut self, app: AppKey, execution: &Execution, from: ExecState) -> Result<(), StoreFailure> {
        let work = self.state_mut();
        let Some(slot) = work.executions.get_mut(&execution.key) else {
            return Err(failure("no such execution"));
        };
        *slot = (app, execution.clone());
        work.transitions.push((execution.key, from, execution.state));
        Ok(())
    }

    fn refund(&mut self, app: AppKey, execution: &Execution, at: Millis) -> Result<(), StoreFailure> {
        let work = self.state_mut();
        let refunded = work
            .ledger
            .iter()
            .filter(|(a, key, _, refund)| *a == app && *key == execution.key && *refund)
            .map(|(_, _, c, _)| c.quote);
        let remaining = refunded.fold(execution.charged, |left, q| left.less(&q));
        if remaining == crate::market::Quote::default() {
            return Ok(());
        }
        let charge = Charge { slot: execution.slot, generation: execution.generation, at, quote: remaining };
        work.ledger.push((app, execution.key, charge, true));
        Ok(())
    }

    fn refund_unserved(
        &mut self,
        app: AppKey,
        paid: &Execution,
        from: Millis,
        to: Millis,
        amount: &crate::market::Quote,
        at: Millis,
    ) -> Result<(), StoreFailure> {
        let work = self.state_mut();
        if work.unserved.contains_key(&(paid.key, from)) {
            return Ok(());
        }
        work.unserved.insert((paid.key, from), to);
        let charge = Charge { slot: paid.slot, generation: paid.generation, at, quote: *amount };
        work.ledger.push((app, paid.key, charge, true));
        Ok(())
    }

    fn heartbeat(&mut self, at: Millis) -> Result<(), StoreFailure> {
        self.alive_at = Some(self.alive_at.map_or(at, |a| a.max(at)));
        Ok(())
    }

    fn last_alive(&mut self) -> Result<Option<Millis>, StoreFailure> {
        Ok(self.state().alive_at.max(self.alive_at))
    }

    fn schedule(&mut self, app: AppKey, next_at: Option<Millis>, blocked: Option<&Reason>) -> Result<(), StoreFailure> {
        // Most steps schedule an application as it already is: no copy for that.
        if self.state().apps.get(&app).is_none_or(|a| a.next_at == next_at && a.blocked.as_ref() == blocked) {
            return Ok(());
        }
        let work = self.state_mut();
        if let Some(a) = work.apps.get_mut(&app) {
            a.next_at = next_at;
            a.blocked = blocked.cloned();
        }
        Ok(())
    }

    fn activate(&mut self, app: AppKey, version: u64, at: Millis) -> Result<(), StoreFailure> {
        let work = self.state_mut();
        if let Some(a) = work.apps.get_mut(&app) {
            a.activated = (version, at);
        }
        Ok(())
    }

    fn settle(&mut self, app: AppKey, at: Millis) -> Result<(), StoreFailure> {
        let work = self.state_mut();
        if let Some(a) = work.apps.get_mut(&app) {
            a.settled = true;
            a.settled_at = Some(at);
        }
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreFailure> {
        if self.crashed.load(Ordering::SeqCst) {
            return Err(failure("the store is down"));
        }
        if let Some(work) = self.work.take() {
            *self.guard = work;
        }
        if let Some(at) = self.alive_at {
            self.guard.alive_at = Some(self.guard.alive_at.map_or(at, |a| a.max(at)));
        }
        Ok(())
    }
}
