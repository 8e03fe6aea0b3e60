//! The command line (clap). `main.rs` parses it and hands it to [`crate::run`].

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Check and prepare a gateway host for an admitted operator.
#[derive(Debug, Parser)]
#[command(name = "gateway-prep", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// `gateway-prep check|init`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the preflight checks. Exit 0 all pass, 1 warnings, 2 failures.
    Check(Box<CheckArgs>),
    /// Generate the operator key, register with the coordinator, write the gateway
    /// configuration and its systemd unit.
    Init(Box<InitArgs>),
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table for people.
    Table,
    /// JSON (docs/gateway-prep.md).
    Json,
}

/// Options both commands take.
#[derive(Debug, Clone, clap::Args)]
pub struct HostArgs {
    /// Read and write the host's files under this directory (tests use a fake root).
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
    /// The gateway's public hostname (default: the registration record's).
    #[arg(long, value_name = "NAME")]
    pub hostname: Option<String>,
    /// The coordinator's base URL (default: the registration record's).
    #[arg(long, value_name = "URL")]
    pub coordinator: Option<String>,
    /// A PEM file of the roots to trust for an https coordinator (default: the system's).
    #[arg(long, value_name = "FILE")]
    pub coordinator_ca: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// `gateway-prep check`.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// The host and output options.
    #[command(flatten)]
    pub host: HostArgs,
    /// An address the hostname must resolve to (repeatable; default: the public listen
    /// address when it is specific, else the address this host reaches the coordinator from).
    #[arg(long = "public-ip", value_name = "IP")]
    pub public_ips: Vec<IpAddr>,
    /// The public TLS address to check (default: the configuration's, else 0.0.0.0:443).
    #[arg(long, value_name = "ADDR")]
    pub public: Option<SocketAddr>,
    /// The tunnel address to check (default: the configuration's, else 0.0.0.0:7443).
    #[arg(long, value_name = "ADDR")]
    pub tunnel: Option<SocketAddr>,
    /// A DNS server to ask (repeatable; default: the system's resolv.conf).
    #[arg(long = "dns", value_name = "ADDR")]
    pub nameservers: Vec<SocketAddr>,
    /// The directory whose file system needs free space.
    #[arg(long, value_name = "DIR", default_value = crate::layout::STATE_DIR)]
    pub data_dir: PathBuf,
    /// Free space needed there, MiB (its bytes must fit in 64 bits).
    #[arg(long, value_name = "MIB", default_value_t = 1024)]
    pub min_free_mib: u64,
}

/// The `LimitNOFILE=` init writes: at least what `check` wants of a process
/// ([`crate::check::system::MIN_PROCESS_NOFILE`]), at most the kernel's ceiling for
/// `fs.nr_open` (which the limit cannot exceed).
pub const LIMIT_NOFILE_RANGE: std::ops::RangeInclusive<u64> = crate::check::system::MIN_PROCESS_NOFILE..=1_073_741_816;

/// The most `--min-free-mib` can be: its bytes must fit in 64 bits.
pub const MAX_MIN_FREE_MIB: u64 = u64::MAX >> 20;

/// A flag the command line parsed but whose value cannot be used: the settings are built
/// from the flags in one step (`TryFrom<&CheckArgs>`, `TryFrom<&InitArgs>`), which refuses
/// such a value instead of clamping it.
#[derive(Debug, thiserror::Error)]
pub enum ArgsError {
    /// A number outside its range.
    #[error("{flag} must be from {} to {}; {value} is outside that range", .range.start(), .range.end())]
    OutOfRange {
        /// The flag, as typed (`--limit-nofile`).
        flag: &'static str,
        /// What it accepts.
        range: std::ops::RangeInclusive<u64>,
        /// What was given.
        value: u64,
    },
}

impl ArgsError {
    /// `value` if `range` holds it, else the error naming `flag`.
    pub fn check(flag: &'static str, range: std::ops::RangeInclusive<u64>, value: u64) -> Result<u64, ArgsError> {
        if range.contains(&value) { Ok(value) } else { Err(ArgsError::OutOfRange { flag, range, value }) }
    }
}

/// `gateway-prep init`.
#[derive(Debug, Clone, clap::Args)]
pub struct InitArgs {
    /// The host and output options (`--coordinator` is required unless already registered).
    #[command(flatten)]
    pub host: HostArgs,
    /// The single-use admission token the service issued (needed only to register).
    #[arg(long, value_name = "TOKEN", env = "SVC_ADMISSION_TOKEN", hide_env_values = true)]
    pub admission_token: Option<String>,
    /// The operator name the token was issued to (checked by the coordinator when given).
    #[arg(long, value_name = "NAME")]
    pub operator: Option<String>,
    /// The gateway's public TLS address (default: the existing configuration's, else
    /// 0.0.0.0:443; a re-run keeps what is configured).
    #[arg(long, value_name = "ADDR")]
    pub public: Option<SocketAddr>,
    /// The tunnel address agents dial (default: the existing configuration's, else
    /// 0.0.0.0:7443).
    #[arg(long, value_name = "ADDR")]
    pub tunnel: Option<SocketAddr>,
    /// The metrics address, kept on loopback (default: the existing configuration's, else
    /// 127.0.0.1:7444).
    #[arg(long, value_name = "ADDR")]
    pub admin: Option<SocketAddr>,
    /// The `svc` binary the unit runs.
    #[arg(long, value_name = "FILE", default_value = crate::layout::SVC_BINARY)]
    pub svc_binary: PathBuf,
    /// The unit's open-files limit (`LimitNOFILE=`), from 65536 to 1073741816.
    #[arg(long, value_name = "N", default_value_t = crate::layout::LIMIT_NOFILE)]
    pub limit_nofile: u64,
    /// Show every file and the registration it would make; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Replace files changed since init wrote them.
    #[arg(long)]
    pub force: bool,
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::check::{CheckError, CheckInputs};
    use crate::init::Settings;

    fn command(args: &[&str]) -> Command {
        Cli::try_parse_from([&["gateway-prep"], args].concat()).expect("parses").command
    }

    #[test]
    fn an_out_of_range_limit_nofile_is_refused_naming_the_flag() {
        let Command::Init(args) = command(&["init", "--root", "/nonexistent", "--limit-nofile", "1024"]) else {
            panic!("not init")
        };
        let e = Settings::try_from(&*args).expect_err("refused");
        assert_eq!(
            e.to_string(),
            "--limit-nofile must be from 65536 to 1073741816; 1024 is outside that range",
            "{e:?}"
        );
        let Command::Init(args) = command(&["init", "--root", "/nonexistent"]) else { panic!("not init") };
        assert_eq!(Settings::try_from(&*args).expect("the default").limit_nofile, crate::layout::LIMIT_NOFILE);
    }

    #[test]
    fn a_min_free_mib_whose_bytes_overflow_is_refused_naming_the_flag() {
        let Command::Check(args) =
            command(&["check", "--root", "/nonexistent", "--min-free-mib", "18446744073709551615"])
        else {
            panic!("not check")
        };
        let Err(CheckError::Flag(e)) = CheckInputs::try_from(&*args) else { panic!("not refused") };
        assert!(e.to_string().starts_with("--min-free-mib must be from 0 to 17592186044415;"), "{e}");
        let Command::Check(args) = command(&["check", "--root", "/nonexistent"]) else { panic!("not check") };
        assert_eq!(CheckInputs::try_from(&*args).expect("the default").min_free_bytes, 1024 << 20);
    }
}
