//! `svc-sim`: explores seeds (`--seeds N`, from `--from S`; `--strict` fails on known open
//! findings too) or replays one seed with its whole trace (`--seed N`). Exits 1 at the
//! first failing seed, which it prints with the command that replays it.

use std::process::ExitCode;
use std::time::Instant;

fn usage() -> ExitCode {
    eprintln!("usage: svc-sim [--seeds N] [--from S] [--strict] | --seed N");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| -> Option<Result<u64, ()>> {
        let at = args.iter().position(|a| a == flag)?;
        Some(args.get(at + 1).and_then(|v| v.parse().ok()).ok_or(()))
    };
    if let Some(seed) = value("--seed") {
        let Ok(seed) = seed else { return usage() };
        return replay(seed);
    }
    let Ok(seeds) = value("--seeds").unwrap_or(Ok(10_000)) else { return usage() };
    let Ok(from) = value("--from").unwrap_or(Ok(0)) else { return usage() };
    let strict = args.iter().any(|a| a == "--strict");
    let started = Instant::now();
    // In chunks, to say how far it got on a long run.
    let mut done = 0;
    let mut known = std::collections::BTreeMap::new();
    while done < seeds {
        let chunk = (seeds - done).min(100_000);
        let found = svc_sim::explore(from + done, chunk, strict);
        for (code, (n, first)) in found.known {
            let entry = known.entry(code).or_insert((0, first));
            entry.0 += n;
        }
        if let Some(failure) = found.failure {
            eprintln!("{failure}");
            return ExitCode::FAILURE;
        }
        done += chunk;
        if done < seeds {
            eprintln!("{done} seeds in {:.1} s", started.elapsed().as_secs_f64());
        }
    }
    println!("{seeds} seeds from {from} in {:.1} s: every invariant held", started.elapsed().as_secs_f64());
    for (code, (n, first)) in known {
        let why = svc_sim::KNOWN_OPEN.iter().find(|(c, _)| *c == code).map_or("", |(_, why)| why);
        println!("known open finding {code}: {n} seeds (first: --seed {first}): {why}");
    }
    ExitCode::SUCCESS
}

fn replay(seed: u64) -> ExitCode {
    let (trace, outcome) = svc_sim::exec::replay(seed);
    println!("exec, seed {seed}:");
    for line in trace.lines() {
        println!("  {line}");
    }
    let (lease_trace, lease) = svc_sim::lease::replay(seed);
    println!("lease, seed {seed}:");
    for line in lease_trace.lines() {
        println!("  {line}");
    }
    let (switch_trace, switch) = svc_sim::switch::replay(seed);
    println!("switch, seed {seed}:");
    for line in switch_trace.lines() {
        println!("  {line}");
    }
    let mut failed = false;
    for failure in [outcome.err(), lease.err(), switch.err()].into_iter().flatten() {
        println!("seed {seed} ({}, {}): {}", failure.part, failure.code, failure.invariant);
        failed = true;
    }
    if failed {
        return ExitCode::FAILURE;
    }
    println!("seed {seed}: every invariant held");
    ExitCode::SUCCESS
}
