//! What a run did, line by line, and how a failed run says so: its seed, the invariant, the
//! last lines of its trace, and the command that replays it.

use std::fmt;

/// Lines of a trace a failure prints (the whole trace is in `--seed`'s replay).
const SHOWN: usize = 40;

/// A run's trace: one line per event, step and fault, stamped with the virtual time.
#[derive(Debug, Default, Clone)]
pub struct Trace {
    lines: Vec<String>,
}

impl Trace {
    /// Adds a line at virtual time `at` (ms from the run's start).
    pub fn push(&mut self, at: u64, line: impl fmt::Display) {
        self.lines.push(format!("{:>6}.{:03}s {line}", at / 1_000, at % 1_000));
    }

    /// Every line.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }
}

/// Invariants known to break on today's code, each with the finding it reports: a run
/// counts them and goes on to the next seed (`--strict` fails on them too). Remove a line
/// once its fix lands. (`charged-again-after-crash`, issue 41's "each service crash charges
/// the customer again", was here until 2d33716e: 2,577 of 10,000 seeds, the first seed 2;
/// `lost-report`, a job's report dropped with a step the store failed, until the executor kept
/// unrecorded reports: 1,604 of 10,000 seeds, the first seed 3; `rejoined-early`, a lagging
/// gateway host offered again on its report of the agents of the route it lagged behind
/// whatever table it served, 371 of 10,000 seeds, seeds 28, 11 and 61, and `stale-report`, a
/// given-up older feed request's report replacing a newer one, seed 21532 of 40,000, until
/// `engine::switch::rejoins` and `newer_report`.)
pub const KNOWN_OPEN: &[(&str, &str)] = &[];

/// Whether `code` is a known open finding.
pub fn known(code: &str) -> bool {
    KNOWN_OPEN.iter().any(|(known, _)| *known == code)
}

/// An invariant a seed broke.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Which part: `exec` (scheduler and executor), `lease` (the relay's engine lease) or
    /// `switch` (a redeploy's route switch through gateway hosts).
    pub part: &'static str,
    /// The seed.
    pub seed: u64,
    /// Which invariant broke (`docs/simulation.md` lists them).
    pub code: &'static str,
    /// What broke, in a sentence.
    pub invariant: String,
    /// The run's trace up to the failure.
    pub trace: Trace,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "seed {} ({}, {}): {}", self.seed, self.part, self.code, self.invariant)?;
        let lines = self.trace.lines();
        let from = lines.len().saturating_sub(SHOWN);
        if from > 0 {
            writeln!(f, "  ... {from} earlier lines (the replay prints them all)")?;
        }
        for line in &lines[from..] {
            writeln!(f, "  {line}")?;
        }
        write!(f, "replay: cargo run -p svc-sim --release -- --seed {}", self.seed)
    }
}
