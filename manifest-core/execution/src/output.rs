//! Jobs' output on its way to the store (issue 42, point 2). The market keeps each job's last
//! lines in memory only, and forgets them when the job is released; [`Tap`] stands between
//! the scheduler and the market: it takes the lines of a job being released before the market
//! forgets them, and hands every job's new lines, with the time it took them, to whoever
//! collects ([`Tap::collect`]; the publication service's output thread writes each collection
//! as one transaction, [`crate::executor::ExecutionTx::record_output`]). The scheduler never
//! waits for a store write of output: a release only moves lines into memory here.
//!
//! What is held here is bounded ([`HELD_LINES`], [`HELD_BYTES`]): while the store fails, the
//! oldest lines go first, and are counted as lost for their execution.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::clock::{Clock, Millis};
use crate::market::{Exit, JobOrder, JobStatus, Market, Part, Placement, Quote, Refusal, StopMode, Waker};
use crate::plan::Requirements;

/// The most lines held between two collections written (a store that fails for a while).
pub const HELD_LINES: usize = 20_000;

/// The most bytes of lines held between two collections written.
pub const HELD_BYTES: usize = 8 * 1024 * 1024;

/// One line a job printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLine {
    /// The execution whose job printed it.
    pub execution_id: String,
    /// The program or its sidecar.
    pub part: Part,
    /// When it was taken from the market (Unix ms): within a collection's interval of when
    /// it was printed.
    pub at: Millis,
    /// The line, without its newline (at most [`svc_runner::MAX_LINE`] bytes).
    pub line: String,
}

/// What one collection found: lines, oldest first, and per execution how many lines its job
/// printed that are lost (scrolled out of the market's memory before they were taken, or
/// dropped here while the store failed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputBatch {
    /// The lines, oldest first.
    pub lines: Vec<OutputLine>,
    /// Lines lost, by execution ID.
    pub lost: BTreeMap<String, u64>,
}

impl OutputBatch {
    /// Whether there is nothing to record.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.lost.is_empty()
    }
}

/// Lines taken from the market that no collection has handed out yet.
#[derive(Debug, Default)]
struct Held {
    lines: VecDeque<OutputLine>,
    bytes: usize,
    lost: BTreeMap<String, u64>,
    /// A job was released (or [`Tap::wake`] asked) since the last [`Tap::wait`].
    woken: bool,
    /// A job printed ([`Tap::printed`]) since the last wait.
    printed: bool,
}

impl Held {
    fn add(&mut self, lines: impl IntoIterator<Item = OutputLine>) {
        for line in lines {
            self.bytes += line.line.len();
            self.lines.push_back(line);
        }
        while self.lines.len() > HELD_LINES || self.bytes > HELD_BYTES {
            let Some(oldest) = self.lines.pop_front() else { break };
            self.bytes -= oldest.line.len();
            *self.lost.entry(oldest.execution_id).or_default() += 1;
        }
    }

    fn lose(&mut self, execution_id: &str, lost: u64) {
        if lost > 0 {
            *self.lost.entry(execution_id.to_owned()).or_default() += lost;
        }
    }

    fn take_from(&mut self, market: &dyn Market, execution_id: &str, at: Millis) {
        let (lines, lost) = market.take_output_counted(execution_id);
        self.lose(execution_id, lost);
        self.add(lines.into_iter().map(|(part, line)| OutputLine {
            execution_id: execution_id.to_owned(),
            part,
            at,
            line,
        }));
    }
}

/// A market whose jobs' output is kept for the store (see the module's documentation); it
/// does what the market it wraps does.
pub struct Tap {
    market: Arc<dyn Market>,
    clock: Arc<dyn Clock>,
    held: Mutex<Held>,
    woken: Condvar,
}

impl std::fmt::Debug for Tap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tap").finish_non_exhaustive()
    }
}

impl Tap {
    /// A tap on `market`, timing lines by `clock`.
    pub fn new(market: Arc<dyn Market>, clock: Arc<dyn Clock>) -> Tap {
        Tap { market, clock, held: Mutex::default(), woken: Condvar::new() }
    }

    /// The market it wraps.
    pub fn market(&self) -> &Arc<dyn Market> {
        &self.market
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until a job is released (its last lines are held: record them soon, a reader
    /// that saw it end expects them), [`Tap::wake`] is called, or `limit` passes.
    pub fn wait(&self, limit: std::time::Duration) {
        let held = self.held();
        let (mut held, _) =
            self.woken.wait_timeout_while(held, limit, |h| !h.woken).unwrap_or_else(PoisonError::into_inner);
        held.woken = false;
    }

    /// Ends a [`Tap::wait`] now.
    pub fn wake(&self) {
        self.held().woken = true;
        self.woken.notify_all();
    }

    /// For a market that says when a job prints ([`Market::wakes`]): waits until a job
    /// printed ([`Tap::printed`]), then `batch` more for its following lines (one collection,
    /// one transaction, for a burst), unless a job is released or [`Tap::wake`] is called,
    /// which end the wait at once; `idle` at most without either.
    pub fn wait_for_output(&self, idle: std::time::Duration, batch: std::time::Duration) {
        let held = self.held();
        let (mut held, _) = self
            .woken
            .wait_timeout_while(held, idle, |h| !h.woken && !h.printed)
            .unwrap_or_else(PoisonError::into_inner);
        if held.printed && !held.woken {
            held = self.woken.wait_timeout_while(held, batch, |h| !h.woken).unwrap_or_else(PoisonError::into_inner).0;
        }
        held.woken = false;
        held.printed = false;
    }

    /// A job printed: ends a [`Tap::wait_for_output`]'s first wait.
    pub fn printed(&self) {
        self.held().printed = true;
        self.woken.notify_all();
    }

    /// Every job's lines since the last collection, those of jobs released since included,
    /// oldest first per job.
    pub fn collect(&self) -> OutputBatch {
        let at = self.clock.now();
        let mut taken = Held::default();
        for job in self.market.jobs() {
            taken.take_from(self.market.as_ref(), &job.execution_id, at);
        }
        let mut held = self.held();
        let mut lines: Vec<OutputLine> = std::mem::take(&mut held.lines).into();
        let mut lost = std::mem::take(&mut held.lost);
        held.bytes = 0;
        drop(held);
        lines.extend(taken.lines);
        for (id, n) in taken.lost {
            *lost.entry(id).or_default() += n;
        }
        OutputBatch { lines, lost }
    }

    /// Gives back a collection the store could not record: it is held again, before lines
    /// collected since, within the bounds (the oldest beyond them are counted lost).
    pub fn restore(&self, batch: OutputBatch) {
        let mut held = self.held();
        let newer: Vec<OutputLine> = std::mem::take(&mut held.lines).into();
        held.bytes = 0;
        for (id, n) in batch.lost {
            held.lose(&id, n);
        }
        held.add(batch.lines.into_iter().chain(newer));
    }
}

impl Market for Tap {
    fn quote(&self, requirements: &Requirements, avoid: &[String], window_ms: Millis) -> Result<Quote, Refusal> {
        self.market.quote(requirements, avoid, window_ms)
    }
    fn launch(&self, order: &JobOrder) -> Result<Placement, Refusal> {
        self.market.launch(order)
    }
    fn restart(&self, order: &JobOrder, processor_id: &str) -> Result<(), Refusal> {
        self.market.restart(order, processor_id)
    }
    fn stop(&self, execution_id: &str, mode: StopMode) {
        self.market.stop(execution_id, mode);
    }
    fn changes(&self) -> Vec<JobStatus> {
        self.market.changes()
    }
    fn jobs(&self) -> Vec<JobStatus> {
        self.market.jobs()
    }
    /// Takes the job's last lines before the market forgets them.
    fn release(&self, execution_id: &str) {
        let at = self.clock.now();
        self.held().take_from(self.market.as_ref(), execution_id, at);
        self.market.release(execution_id);
        self.wake();
    }
    fn starts_empty(&self) -> bool {
        self.market.starts_empty()
    }
    fn take_output(&self, execution_id: &str) -> Vec<(Part, String)> {
        self.market.take_output(execution_id)
    }
    fn take_output_counted(&self, execution_id: &str) -> (Vec<(Part, String)>, u64) {
        self.market.take_output_counted(execution_id)
    }
    fn ending(&self, execution_id: &str) -> Option<Exit> {
        self.market.ending(execution_id)
    }
    fn processes(&self, execution_id: &str) -> Vec<u32> {
        self.market.processes(execution_id)
    }
    fn wakes(&self) -> bool {
        self.market.wakes()
    }
    fn set_waker(&self, waker: Waker) {
        self.market.set_waker(waker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::market::JobState;

    /// A market holding one job `a` whose output is given by the test.
    #[derive(Default)]
    struct Printing {
        lines: Mutex<Vec<(Part, String)>>,
        lost: Mutex<u64>,
        released: Mutex<bool>,
    }

    impl Market for Printing {
        fn quote(&self, _: &Requirements, _: &[String], _: Millis) -> Result<Quote, Refusal> {
            Err(Refusal::NoProcessor("none".into()))
        }
        fn launch(&self, _: &JobOrder) -> Result<Placement, Refusal> {
            Err(Refusal::NoProcessor("none".into()))
        }
        fn restart(&self, _: &JobOrder, _: &str) -> Result<(), Refusal> {
            Ok(())
        }
        fn stop(&self, _: &str, _: StopMode) {}
        fn changes(&self) -> Vec<JobStatus> {
            Vec::new()
        }
        fn jobs(&self) -> Vec<JobStatus> {
            if *self.released.lock().expect("lock") {
                return Vec::new();
            }
            vec![JobStatus { execution_id: "a".into(), processor_id: "p".into(), state: JobState::Ready }]
        }
        fn release(&self, _: &str) {
            *self.released.lock().expect("lock") = true;
            self.lines.lock().expect("lock").clear();
        }
        fn take_output_counted(&self, _: &str) -> (Vec<(Part, String)>, u64) {
            (
                std::mem::take(&mut *self.lines.lock().expect("lock")),
                std::mem::take(&mut *self.lost.lock().expect("lock")),
            )
        }
    }

    fn print(market: &Printing, lines: &[&str]) {
        market.lines.lock().expect("lock").extend(lines.iter().map(|l| (Part::App, (*l).to_owned())));
    }

    fn texts(batch: &OutputBatch) -> Vec<&str> {
        batch.lines.iter().map(|l| l.line.as_str()).collect()
    }

    #[test]
    fn a_released_jobs_last_lines_are_collected_after_the_market_forgot_them() {
        let market = Arc::new(Printing::default());
        let tap = Tap::new(market.clone(), Arc::new(ManualClock::at(5_000)));
        print(&market, &["one"]);
        let first = tap.collect();
        assert_eq!(texts(&first), ["one"]);
        assert_eq!((first.lines[0].execution_id.as_str(), first.lines[0].at), ("a", 5_000));
        print(&market, &["hello, world"]);
        *market.lost.lock().expect("lock") = 3;
        tap.release("a");
        assert!(market.jobs().is_empty(), "released in the market");
        let last = tap.collect();
        assert_eq!(texts(&last), ["hello, world"]);
        assert_eq!(last.lost, BTreeMap::from([("a".to_owned(), 3)]));
        assert!(tap.collect().is_empty());
    }

    /// A reader who saw a job end expects its last lines: a release ends the output thread's
    /// wait at once.
    #[test]
    fn a_release_ends_a_wait_at_once() {
        let tap = Arc::new(Tap::new(Arc::new(Printing::default()), Arc::new(ManualClock::at(0))));
        let waiter = {
            let tap = Arc::clone(&tap);
            std::thread::spawn(move || {
                let start = std::time::Instant::now();
                tap.wait(std::time::Duration::from_secs(30));
                start.elapsed()
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        tap.release("a");
        let waited = waiter.join().expect("the waiter");
        assert!(waited < std::time::Duration::from_secs(10), "waited {waited:?}");
    }

    #[test]
    fn a_collection_given_back_comes_first_and_what_is_held_stays_bounded() {
        let market = Arc::new(Printing::default());
        let tap = Tap::new(market.clone(), Arc::new(ManualClock::at(0)));
        print(&market, &["old"]);
        let failed = tap.collect();
        print(&market, &["new"]);
        tap.release("a");
        tap.restore(failed);
        assert_eq!(texts(&tap.collect()), ["old", "new"]);

        let flood: Vec<String> = (0..HELD_LINES + 10).map(|n| n.to_string()).collect();
        let mut held = Held::default();
        held.add(flood.iter().map(|l| OutputLine {
            execution_id: "a".into(),
            part: Part::App,
            at: 0,
            line: l.clone(),
        }));
        assert_eq!(held.lines.len(), HELD_LINES);
        assert_eq!(held.lines.front().map(|l| l.line.as_str()), Some("10"), "the newest are kept");
        assert_eq!(held.lost.get("a"), Some(&10));
    }
}
