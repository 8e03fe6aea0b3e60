//! `gateway-prep`: parses the command line and runs the library.

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    match gateway_prep::args::Cli::try_parse() {
        Ok(cli) => ExitCode::from(gateway_prep::run(cli)),
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            // Help and version are not errors; usage errors get 64, apart from check's 2.
            ExitCode::from(if usage { gateway_prep::run::EXIT_USAGE } else { 0 })
        }
    }
}
