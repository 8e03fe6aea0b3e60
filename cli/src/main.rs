//! `svc`: parses arguments and hands over to the library.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    svc_cli::run(svc_cli::Cli::parse())
}
