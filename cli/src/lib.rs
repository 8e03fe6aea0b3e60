//! The customer tool `svc`: command-line arguments, reading inputs, and exit codes. Each
//! command is a thin layer over a library crate (`manifest-core` for manifests).

#![forbid(unsafe_code)]

mod args;
mod manifest;

pub use args::{Cli, Command, FactArgs, ManifestCommand, OutputFormat, SchemaVersion};

use std::process::ExitCode;

/// Runs a parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Manifest { command } => match command {
            ManifestCommand::Validate { file, format } => manifest::validate(&file, format),
            ManifestCommand::Schema { version } => manifest::schema(version),
            ManifestCommand::Policy { file, facts } => manifest::policy(&file, &facts),
            ManifestCommand::Digest { file, facts } => manifest::digest(&file, &facts),
        },
    }
}
