//! Runs a parsed command line: the runtime, the command, its output and exit code.

use crate::args::{Cli, Command, Format};
use crate::check::{CheckInputs, run_checks};
use crate::init::{Settings, execute, files::Action};

/// Exit code when the tool could not run (bad options, no runtime).
pub const EXIT_USAGE: u8 = 64;

/// Runs the command; returns the process's exit code. `check`: 0 pass, 1 warnings, 2
/// failures. `init`: 0 done (or nothing to do), 2 refused (a changed file, the
/// coordinator's refusal, a host registered elsewhere), 3 failed, 64 usage.
pub fn run(cli: Cli) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gateway-prep: cannot start the runtime: {e}");
            return 3;
        }
    };
    match cli.command {
        Command::Check(args) => {
            let inputs = match CheckInputs::try_from(&*args) {
                Ok(i) => i,
                Err(e) => return fail("check", args.host.format, "usage", &e, EXIT_USAGE),
            };
            let report = runtime.block_on(run_checks(&inputs));
            match args.host.format {
                Format::Table => print!("{}", report.table()),
                Format::Json => println!("{}", report.json()),
            }
            report.exit_code()
        }
        Command::Init(args) => {
            let settings = match Settings::try_from(&*args) {
                Ok(s) => s,
                Err(e) => return fail("init", args.host.format, "usage", &e, EXIT_USAGE),
            };
            match runtime.block_on(execute(&settings)) {
                Ok(report) => {
                    match args.host.format {
                        Format::Table => print!("{}", report.text()),
                        Format::Json => println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default()),
                    }
                    for warning in &report.warnings {
                        eprintln!("gateway-prep init: warning: {warning}");
                    }
                    let changed: Vec<&str> =
                        report.files.iter().filter(|f| f.action == Action::Changed).map(|f| f.path.as_str()).collect();
                    if changed.is_empty() {
                        0
                    } else {
                        eprintln!(
                            "gateway-prep init: {} changed since init wrote it; a real run would refuse without --force",
                            changed.join(", ")
                        );
                        2
                    }
                }
                Err(e) => fail("init", args.host.format, e.code(), &e, e.exit_code()),
            }
        }
    }
}

/// A failure of `gateway-prep COMMAND`: the message on standard error and, with `--format
/// json`, the shared envelope (with `exitCode`) on standard output too. Returns `exit`.
fn fail(command: &str, format: Format, code: &str, e: &dyn std::fmt::Display, exit: u8) -> u8 {
    if format == Format::Json {
        let body = relay_wire::envelope::ErrorBody::new(code, e.to_string()).with("exitCode", exit);
        println!("{}", serde_json::to_string_pretty(&body).unwrap_or_default());
    }
    eprintln!("gateway-prep {command}: {e}");
    exit
}
