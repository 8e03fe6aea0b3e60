//! The customer tool `svc`: command-line arguments, reading inputs, and exit codes. Each
//! command is a thin layer over a library crate (`manifest-core` for manifests).

#![forbid(unsafe_code)]

mod args;
mod manifest;

pub use args::{Cli, Command, ManifestCommand, OutputFormat};

use std::process::ExitCode;

/// Runs a parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Manifest { command: ManifestCommand::Validate { file, format } } => manifest::validate(&file, format),
    }
}
