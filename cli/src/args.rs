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
    /// Print a JSON Schema (draft 2020-12), byte-identical to what the service serves.
    Schema {
        /// `4` and `5` for the authored manifests, `policy` for the effective Policy V4.
        #[arg(long, value_enum)]
        version: SchemaVersion,
    },
    /// Print the effective Policy V4 of a V4 manifest, and nothing else.
    Policy {
        /// The manifest (JSON); `-` reads standard input.
        #[arg(long, value_name = "PATH")]
        file: PathBuf,
        /// Server facts.
        #[command(flatten)]
        facts: FactArgs,
    },
    /// Print the authored digest, and for V4 with server facts the policy digest.
    Digest {
        /// The manifest (JSON or YAML); `-` reads standard input.
        #[arg(long, value_name = "PATH")]
        file: PathBuf,
        /// Server facts (for the policy digest).
        #[command(flatten)]
        facts: FactArgs,
    },
}

/// Which schema `svc manifest schema` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchemaVersion {
    /// Manifest V4.
    #[value(name = "4")]
    V4,
    /// Manifest V5.
    #[value(name = "5")]
    V5,
    /// Effective Policy V4.
    Policy,
}

/// Server facts given on the command line (the service resolves them itself).
#[derive(Debug, Clone, clap::Args)]
pub struct FactArgs {
    /// The target application's immutable identity.
    #[arg(long, value_name = "UID")]
    pub application_uid: Option<String>,
    /// For a build release: the accepted artifact version's CID (`ipfs://...`).
    #[arg(long, value_name = "IPFS_URI", requires = "artifact_digest")]
    pub artifact_cid: Option<String>,
    /// For a build release: the accepted artifact version's digest (`sha256:...`).
    #[arg(long, value_name = "SHA256", requires = "artifact_cid")]
    pub artifact_digest: Option<String>,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people: each problem in its source line, with a caret.
    Text,
    /// One JSON object: `{valid, schemaVersion, authoredDigest, diagnostics}`.
    Json,
}
