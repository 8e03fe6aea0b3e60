//! Runs a parsed command line: the runtime, the command, its output and exit code.

use crate::args::{Cli, Command, Format};
use crate::check::{CheckInputs, run_checks};
use crate::init::{InitOptions, files::Action, init};

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
                Err(e) => {
                    if args.host.format == Format::Json {
                        let body =
                            relay_wire::envelope::ErrorBody::new("usage", e.to_string()).with("exitCode", EXIT_USAGE);
                        println!("{}", serde_json::to_string_pretty(&body).unwrap_or_default());
                    }
                    eprintln!("gateway-prep check: {e}");
                    return EXIT_USAGE;
                }
            };
            let report = runtime.block_on(run_checks(&inputs));
            match args.host.format {
                Format::Table => print!("{}", report.table()),
                Format::Json => println!("{}", report.json()),
            }
            report.exit_code()
        }
        Command::Init(args) => {
            let opts = match InitOptions::try_from(&*args) {
                Ok(o) => o,
                Err(e) => {
                    if args.host.format == Format::Json {
                        let body =
                            relay_wire::envelope::ErrorBody::new("usage", e.to_string()).with("exitCode", EXIT_USAGE);
                        println!("{}", serde_json::to_string_pretty(&body).unwrap_or_default());
                    }
                    eprintln!("gateway-prep init: {e}");
                    return EXIT_USAGE;
                }
            };
            match runtime.block_on(init(&opts)) {
                Ok(report) => {
                    match args.host.format {
                        Format::Table => print!("{}", report.text()),
                        Format::Json => println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default()),
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
                Err(e) => {
                    // With --format json a failure is the shared envelope on stdout too.
                    if args.host.format == Format::Json {
                        let body = relay_wire::envelope::ErrorBody::new(e.code(), e.to_string())
                            .with("exitCode", e.exit_code());
                        println!("{}", serde_json::to_string_pretty(&body).unwrap_or_default());
                    }
                    eprintln!("gateway-prep init: {e}");
                    e.exit_code()
                }
            }
        }
    }
}
