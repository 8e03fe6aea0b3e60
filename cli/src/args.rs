//! Command-line arguments. Usage errors exit with 2 (clap's convention, and the contract).

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// `svc`: describe a background application as a manifest and run it on attested processors.
#[derive(Debug, Parser)]
#[command(name = "svc", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Work with application manifests offline.
    Manifest {
        /// What to do with the manifest.
        #[command(subcommand)]
        command: ManifestCommand,
    },
}

/// `svc manifest ...`
#[derive(Debug, Subcommand)]
pub enum ManifestCommand {
    /// Validate a manifest (layers 1-2: parse, strict schema, cross-field rules), offline.
    ///
    /// Exit 0: valid (warnings allowed). Exit 1: invalid. Exit 2: usage error or unreadable file.
    Validate {
        /// The manifest (JSON or YAML; V4 is JSON only); `-` reads standard input.
        #[arg(long, value_name = "PATH")]
        file: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
        format: OutputFormat,
    },
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people: each problem in its source line, with a caret.
    Text,
    /// One JSON object: `{valid, schemaVersion, authoredDigest, diagnostics}`.
    Json,
}
