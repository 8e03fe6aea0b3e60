//! A job's output, bounded (issue 39, point 4): every pipe of a job (its app's and its agent's
//! standard output and error) draws on one [`Budget`] of [`OUTPUT_BYTES_PER_SEC`], with a
//! burst of [`OUTPUT_BURST`] (a start-up's messages). Each line costs its bytes plus
//! [`LINE_COST`], so a flood of empty lines is bounded too. Lines over the budget are dropped
//! and counted; when the budget comes back, the pipe that dropped them first sends one line
//! saying how many bytes it dropped ([`notice`]).
//!
//! What a job over its budget costs the service matters as much as what is kept: a pipe over
//! budget is not read line by line at full speed, but drained, one read of at most
//! [`DRAIN_READ`] bytes every [`DRAIN_EVERY`], the bytes discarded and counted. A job printing
//! faster than that waits on its full pipe (back-pressure), so a job printing as fast as it
//! can costs the service about ten reads a second per pipe.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{MAX_LINE, Part};

/// The bytes of output per second a job may print, every pipe of it together; beyond it (and
/// its burst) lines are dropped.
pub const OUTPUT_BYTES_PER_SEC: u64 = 64 * 1024;

/// The bytes a job may print at once, at its start or after a quiet while, before the rate
/// applies.
pub const OUTPUT_BURST: u64 = 1024 * 1024;

/// What a line costs beyond its bytes: what keeping a line costs whatever its length (a
/// message through a channel, a row in a store), so printing empty lines is bounded too.
pub const LINE_COST: u64 = 512;

/// How often a pipe over budget is read.
const DRAIN_EVERY: Duration = Duration::from_millis(100);

/// The most read from a pipe over budget at once (a pipe holds 64 KiB unless the job makes it
/// larger).
const DRAIN_READ: usize = 1024 * 1024;

/// The budget a pipe over budget waits for before it reads lines again: a second of output,
/// so a job printing too fast for ever gets a notice about once a second, not one per line.
const RESUME: u64 = OUTPUT_BYTES_PER_SEC;

/// What one line of `bytes` bytes costs.
pub(crate) fn cost(bytes: usize) -> u64 {
    u64::try_from(bytes).unwrap_or(u64::MAX).saturating_add(LINE_COST)
}

/// The line that stands for `dropped` bytes a job printed over its budget of `rate` bytes a
/// second.
pub(crate) fn notice(dropped: u64, rate: u64) -> String {
    format!("[svc: {dropped} bytes of output dropped: the job printed faster than {} KiB/s]", rate / 1024)
}

/// A token bucket of bytes: `rate` a second, at most `burst` held. Time is passed in, so
/// tests run it on a virtual clock.
#[derive(Debug)]
pub(crate) struct Bucket {
    rate: u64,
    burst: u64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A full bucket at `now`.
    pub(crate) fn new(rate: u64, burst: u64, now: Instant) -> Bucket {
        Bucket { rate, burst, tokens: burst as f64, at: now }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at);
        self.tokens = (self.tokens + elapsed.as_secs_f64() * self.rate as f64).min(self.burst as f64);
        self.at = self.at.max(now);
    }

    /// Takes `cost` if the bucket holds it at `now`; otherwise takes nothing.
    pub(crate) fn take(&mut self, cost: u64, now: Instant) -> bool {
        self.refill(now);
        let enough = self.tokens >= cost as f64;
        if enough {
            self.tokens -= cost as f64;
        }
        enough
    }

    /// Whether the bucket holds `cost` at `now` (taking nothing).
    pub(crate) fn holds(&mut self, cost: u64, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= cost as f64
    }
}

/// One job's output budget, shared by its pipes (clones share it).
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    bucket: Arc<Mutex<Bucket>>,
    rate: u64,
}

impl Budget {
    /// A job's budget: [`OUTPUT_BYTES_PER_SEC`] with a burst of [`OUTPUT_BURST`], full now.
    pub(crate) fn new() -> Budget {
        Budget::with(OUTPUT_BYTES_PER_SEC, OUTPUT_BURST, Instant::now())
    }

    pub(crate) fn with(rate: u64, burst: u64, now: Instant) -> Budget {
        Budget { bucket: Arc::new(Mutex::new(Bucket::new(rate, burst, now))), rate }
    }

    fn bucket(&self) -> std::sync::MutexGuard<'_, Bucket> {
        // A bucket is never left half-updated: a panic elsewhere does not spoil it.
        self.bucket.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take(&self, cost: u64) -> bool {
        self.bucket().take(cost, Instant::now())
    }

    fn holds(&self, cost: u64) -> bool {
        self.bucket().holds(cost, Instant::now())
    }
}

/// Sends `stream`'s lines (cut at [`MAX_LINE`] bytes) within `budget` until it ends or nobody
/// listens. Lines over budget are dropped, the pipe drained ([`drain`]) until the budget
/// holds [`RESUME`] again; the first line sent after that, or the end of the stream, is
/// preceded by the [`notice`] of what was dropped.
pub(crate) async fn read_lines(
    part: Part,
    stream: impl AsyncRead + Unpin,
    lines: mpsc::Sender<(Part, String)>,
    budget: Budget,
) {
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    let mut dropped: u64 = 0;
    loop {
        buf.clear();
        let read = (&mut reader).take(MAX_LINE as u64).read_until(b'\n', &mut buf).await;
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if budget.take(cost(buf.len())) {
            if dropped > 0 && lines.send((part, notice(dropped, budget.rate))).await.is_err() {
                return;
            }
            dropped = 0;
            let line = String::from_utf8_lossy(&buf).trim_end_matches(['\n', '\r']).to_owned();
            if lines.send((part, line)).await.is_err() {
                return;
            }
        } else {
            dropped += buf.len() as u64;
            let mid_line = buf.last() != Some(&b'\n');
            let (drained, ended) = drain(&mut reader, &budget, mid_line).await;
            dropped += drained;
            if ended {
                break;
            }
        }
    }
    if dropped > 0 {
        let _ = lines.send((part, notice(dropped, budget.rate))).await;
    }
}

/// Reads and discards what `reader` holds and then one read of at most [`DRAIN_READ`] bytes
/// every [`DRAIN_EVERY`], until `budget` holds [`RESUME`]; then the rest of a line cut short
/// (`mid_line`: the last byte dropped was not a newline), so reading resumes at a line's
/// start. Returns the bytes discarded and whether the stream ended.
async fn drain<R: AsyncRead + Unpin>(reader: &mut BufReader<R>, budget: &Budget, mut mid_line: bool) -> (u64, bool) {
    let mut dropped = 0;
    let held = reader.buffer();
    if let Some(last) = held.last() {
        mid_line = *last != b'\n';
        let held = held.len();
        dropped += held as u64;
        reader.consume(held);
    }
    let mut chunk = vec![0; DRAIN_READ];
    loop {
        tokio::time::sleep(DRAIN_EVERY).await;
        if budget.holds(RESUME) {
            break;
        }
        // The reader's buffer is empty and `chunk` larger: this reads the pipe directly. A
        // pipe gone quiet is not waited on past the next look at the budget: its next line
        // may fit (a job's last line after a flood was dropped here: issue 42). A read is
        // cancel-safe: nothing it would have read is lost.
        match tokio::time::timeout(DRAIN_EVERY, reader.read(&mut chunk)).await {
            Err(_quiet) => {}
            Ok(Ok(0) | Err(_)) => return (dropped, true),
            Ok(Ok(n)) => {
                dropped += n as u64;
                mid_line = chunk[n - 1] != b'\n';
            }
        }
    }
    if mid_line {
        let mut rest = Vec::new();
        match reader.take(MAX_LINE as u64).read_until(b'\n', &mut rest).await {
            Ok(0) | Err(_) => return (dropped, true),
            Ok(n) => dropped += n as u64,
        }
    }
    (dropped, false)
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    const KIB: u64 = 1024;

    #[test]
    fn the_bucket_gives_its_burst_then_its_rate() {
        let start = Instant::now();
        let mut bucket = Bucket::new(64 * KIB, 1024 * KIB, start);
        // The burst at once: 64 lines of 16 KiB (with their cost) and not one more.
        let line = cost(16 * 1024);
        let mut taken = 0;
        while bucket.take(line, start) {
            taken += 1;
        }
        assert_eq!(taken, 1024 * KIB / line, "the burst");
        // Then the rate: after 10 s, 10 x 64 KiB more, not the burst again.
        let later = start + Duration::from_secs(10);
        let mut bytes = 0;
        while bucket.take(line, later) {
            bytes += line;
        }
        assert!((9 * 64 * KIB..=10 * 64 * KIB + line).contains(&bytes), "{bytes} bytes in 10 s");
        // A refused take takes nothing: what the bucket holds is still there.
        assert!(!bucket.take(64 * KIB, later));
        assert!(bucket.take(1, later));
        // A long quiet fills it to its burst, no more.
        let quiet = later + Duration::from_secs(3600);
        assert!(bucket.holds(1024 * KIB, quiet));
        assert!(!bucket.holds(1024 * KIB + 1, quiet));
    }

    #[test]
    fn empty_lines_cost_too() {
        let start = Instant::now();
        let mut bucket = Bucket::new(64 * KIB, 1024 * KIB, start);
        let mut lines = 0;
        while bucket.take(cost(0), start) {
            lines += 1;
        }
        assert_eq!(lines, 2048, "a burst of empty lines is 1 MiB / {LINE_COST}");
    }

    #[test]
    fn the_notice_says_how_many_bytes_and_why() {
        assert_eq!(
            notice(123_456, OUTPUT_BYTES_PER_SEC),
            "[svc: 123456 bytes of output dropped: the job printed faster than 64 KiB/s]"
        );
    }

    /// What a job printing 16 KiB lines as fast as it can for 10 s (virtual time) gets
    /// through: its burst and its rate, the rest dropped and said so, and the reader reading
    /// little more than that (the job waits on its full pipe).
    #[tokio::test(start_paused = true)]
    async fn a_job_printing_as_fast_as_it_can_gets_its_rate_and_a_notice() {
        const WINDOW: Duration = Duration::from_secs(10);
        const PIPE: usize = 64 * 1024;
        let (mut job, pipe) = tokio::io::duplex(PIPE);
        let (sender, mut received) = mpsc::channel(1 << 16);
        let reader = tokio::spawn(read_lines(Part::App, pipe, sender, Budget::new()));
        let start = Instant::now();
        let line = format!("{}\n", "x".repeat(16 * 1024 - 1));
        let mut written: u64 = 0;
        // A bound in case the reader reads at full speed (time stands still then).
        while start.elapsed() < WINDOW && written < 256 * 1024 * 1024 {
            job.write_all(line.as_bytes()).await.expect("write");
            written += line.len() as u64;
        }
        drop(job);
        reader.await.expect("the reader");
        let (mut kept, mut dropped, mut notices) = (0u64, 0u64, 0);
        while let Ok((part, text)) = received.try_recv() {
            assert_eq!(part, Part::App);
            if text.starts_with("[svc: ") {
                notices += 1;
                let bytes = text.trim_start_matches("[svc: ").split(' ').next().expect("a number");
                dropped += bytes.parse::<u64>().expect("bytes");
                assert!(text.ends_with("bytes of output dropped: the job printed faster than 64 KiB/s]"), "{text}");
            } else {
                assert_eq!(text.len(), 16 * 1024 - 1, "whole lines only");
                kept += text.len() as u64 + 1;
            }
        }
        let allowed = OUTPUT_BURST + OUTPUT_BYTES_PER_SEC * WINDOW.as_secs();
        assert!(kept <= allowed, "{kept} bytes kept, {allowed} allowed");
        assert!(kept >= allowed / 2, "{kept} bytes kept: the rate is given");
        assert!((1..=2 * WINDOW.as_secs()).contains(&notices), "{notices} notices");
        assert_eq!(kept + dropped, written, "every byte is kept or counted");
        // Ten reads a second of at most a pipe's worth each, beyond what was kept.
        let read_at_most = kept + 10 * WINDOW.as_secs() * (PIPE as u64 + 16 * KIB) + OUTPUT_BURST;
        assert!(written <= read_at_most, "{written} bytes read, {read_at_most} at most");
    }

    /// A job that floods its output, goes quiet, then prints its last line: the line is
    /// kept, after the notice (it was read while the pipe waited for its budget, and
    /// dropped: found by the output of `svc app logs`, issue 42).
    #[tokio::test(start_paused = true)]
    async fn a_line_after_a_flood_and_a_quiet_while_is_kept() {
        let (mut job, pipe) = tokio::io::duplex(64 * 1024);
        let (sender, mut received) = mpsc::channel(1 << 16);
        let reader = tokio::spawn(read_lines(Part::App, pipe, sender, Budget::new()));
        let flood = "flood\n".repeat(20_000);
        job.write_all(flood.as_bytes()).await.expect("write");
        tokio::time::sleep(Duration::from_secs(5)).await;
        job.write_all(b"the end\n").await.expect("write");
        drop(job);
        reader.await.expect("the reader");
        let mut lines = Vec::new();
        while let Ok((_, text)) = received.try_recv() {
            lines.push(text);
        }
        let last: Vec<&str> = lines.iter().rev().take(2).rev().map(String::as_str).collect();
        assert!(last[0].starts_with("[svc: "), "{last:?}");
        assert_eq!(last[1], "the end", "{last:?}");
    }

    /// Two pipes of one job share its budget; each notice names what its own pipe dropped.
    #[tokio::test(start_paused = true)]
    async fn a_jobs_pipes_share_one_budget() {
        let budget = Budget::new();
        let (sender, mut received) = mpsc::channel(1 << 16);
        let mut readers = Vec::new();
        let mut jobs = Vec::new();
        for part in [Part::App, Part::Agent] {
            let (job, pipe) = tokio::io::duplex(64 * 1024);
            jobs.push(job);
            readers.push(tokio::spawn(read_lines(part, pipe, sender.clone(), budget.clone())));
        }
        drop(sender);
        // 2 MiB from each at once: twice the burst, from two pipes.
        let chunk = format!("{}\n", "y".repeat(1023)).repeat(2 * 1024);
        let writers: Vec<_> = jobs
            .into_iter()
            .map(|mut job| {
                let chunk = chunk.clone();
                tokio::spawn(async move {
                    job.write_all(chunk.as_bytes()).await.expect("write");
                })
            })
            .collect();
        let start = Instant::now();
        for task in writers.into_iter().chain(readers) {
            task.await.expect("a task");
        }
        let refilled = OUTPUT_BYTES_PER_SEC * start.elapsed().as_millis() as u64 / 1000;
        let mut kept = 0;
        let mut dropped = [0u64; 2];
        while let Some((part, text)) = received.recv().await {
            if let Some(rest) = text.strip_prefix("[svc: ") {
                dropped[usize::from(part == Part::Agent)] +=
                    rest.split(' ').next().and_then(|n| n.parse::<u64>().ok()).expect("bytes");
            } else {
                kept += cost(text.len() + 1);
            }
        }
        assert!(kept <= OUTPUT_BURST + refilled, "{kept}: one budget for both pipes");
        assert!(dropped.iter().all(|d| *d > 0), "each pipe says what it dropped: {dropped:?}");
    }
}
