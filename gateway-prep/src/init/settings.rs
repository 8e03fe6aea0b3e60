//! Init's settings: the flags ([`InitArgs`]) checked and normalized in one step
//! ([`Settings`]), before any file is read. A value that cannot be used is refused naming its
//! flag; a flag that is needed only because the host is not registered yet is refused by the
//! plan (it alone reads the registration record), with the same error type.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::args::{ArgsError, InitArgs, LIMIT_NOFILE_RANGE};
use crate::{Root, layout};

/// A flag whose value cannot be used, or one that is needed and was not given: a usage
/// error (exit 64). Each names its flag ([`SettingsError::flag`]).
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A number outside its range (`--limit-nofile`).
    #[error(transparent)]
    OutOfRange(#[from] ArgsError),
    /// `--hostname` is not a hostname a customer could point at this host.
    #[error("--hostname: {0}")]
    Hostname(#[source] relay_dns::DnsError),
    /// No `--hostname`, and no registration record to take it from.
    #[error("--hostname NAME is needed: the gateway's public hostname")]
    NoHostname,
    /// No `--coordinator`, and no registration record to take it from.
    #[error("--coordinator URL is needed to register")]
    NoCoordinator,
    /// The host is not registered and no admission token was given.
    #[error("--admission-token TOKEN is needed to register this host (or set SVC_ADMISSION_TOKEN)")]
    NoAdmissionToken,
}

impl SettingsError {
    /// The flag at fault, as typed (`--hostname`).
    pub fn flag(&self) -> &'static str {
        match self {
            SettingsError::OutOfRange(ArgsError::OutOfRange { flag, .. }) => flag,
            SettingsError::Hostname(_) | SettingsError::NoHostname => "--hostname",
            SettingsError::NoCoordinator => "--coordinator",
            SettingsError::NoAdmissionToken => "--admission-token",
        }
    }
}

/// What init is asked to do, checked: from the command line by `Settings::try_from`; a
/// library caller (a test) starts from [`Settings::new`] and sets the fields it needs, as
/// the checked flags would give them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Settings {
    /// The host's files.
    pub root: Root,
    /// The gateway's public hostname, checked and without a trailing dot (`None`: the
    /// registration record's).
    pub hostname: Option<String>,
    /// The coordinator's base URL, trimmed and without a trailing `/` (`None`: the record's).
    /// Whether it is a usable URL is the coordinator client's to say (a failure to carry
    /// out, exit 3, as before this step existed).
    pub coordinator: Option<String>,
    /// Roots to trust for an https coordinator.
    pub coordinator_ca: Option<PathBuf>,
    /// The admission token, trimmed (needed only to register).
    pub admission_token: Option<String>,
    /// The operator name the token was issued to, if given.
    pub operator: Option<String>,
    /// The public TLS address (`None`: the existing configuration's, else the default).
    pub public: Option<SocketAddr>,
    /// The tunnel address (`None`: as for `public`).
    pub tunnel: Option<SocketAddr>,
    /// The metrics address (`None`: as for `public`).
    pub admin: Option<SocketAddr>,
    /// The `svc` binary the unit runs.
    pub svc_binary: PathBuf,
    /// The unit's `LimitNOFILE=`, within [`LIMIT_NOFILE_RANGE`].
    pub limit_nofile: u64,
    /// Report only: write nothing, register nothing, refuse nothing.
    pub dry_run: bool,
    /// Replace files changed since init wrote them.
    pub force: bool,
}

impl Settings {
    /// The command line's defaults for a host under `root`: every flag unset.
    pub fn new(root: Root) -> Settings {
        Settings {
            root,
            hostname: None,
            coordinator: None,
            coordinator_ca: None,
            admission_token: None,
            operator: None,
            public: None,
            tunnel: None,
            admin: None,
            svc_binary: PathBuf::from(layout::SVC_BINARY),
            limit_nofile: layout::LIMIT_NOFILE,
            dry_run: false,
            force: false,
        }
    }
}

impl TryFrom<&InitArgs> for Settings {
    type Error = SettingsError;

    /// The settings from the command line, every flag's value checked; reads nothing.
    fn try_from(args: &InitArgs) -> Result<Settings, SettingsError> {
        let hostname = match &args.host.hostname {
            Some(h) => Some(relay_dns::customer_hostname(h.trim()).map_err(SettingsError::Hostname)?),
            None => None,
        };
        Ok(Settings {
            root: Root::new(&args.host.root),
            hostname,
            coordinator: args.host.coordinator.as_deref().map(|c| c.trim().trim_end_matches('/').to_owned()),
            coordinator_ca: args.host.coordinator_ca.clone(),
            admission_token: args.admission_token.as_deref().map(|t| t.trim().to_owned()),
            operator: args.operator.clone(),
            public: args.public,
            tunnel: args.tunnel,
            admin: args.admin,
            svc_binary: args.svc_binary.clone(),
            limit_nofile: ArgsError::check("--limit-nofile", LIMIT_NOFILE_RANGE, args.limit_nofile)?,
            dry_run: args.dry_run,
            force: args.force,
        })
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::args::{Cli, Command};

    fn settings(flags: &[&str]) -> Result<Settings, SettingsError> {
        let line = [&["gateway-prep", "init", "--root", "/nonexistent"], flags].concat();
        let Command::Init(args) = Cli::try_parse_from(line).expect("parses").command else { panic!("not init") };
        Settings::try_from(&*args)
    }

    #[test]
    fn flags_are_normalized_in_one_step() {
        let s = settings(&[
            "--hostname",
            " gw1.example.test. ",
            "--coordinator",
            " https://relay.example.test/ ",
            "--admission-token",
            " adm_1 ",
            "--admin",
            "127.0.0.1:9999",
        ])
        .expect("valid");
        assert_eq!(s.hostname.as_deref(), Some("gw1.example.test"));
        assert_eq!(s.coordinator.as_deref(), Some("https://relay.example.test"));
        assert_eq!(s.admission_token.as_deref(), Some("adm_1"));
        assert_eq!((s.public, s.tunnel), (None, None), "unset addresses are left to the plan");
        assert_eq!(s.admin, Some("127.0.0.1:9999".parse().expect("addr")));
        assert_eq!(s.limit_nofile, layout::LIMIT_NOFILE);
        assert_eq!(s.root, Root::new("/nonexistent"));
        assert!(!s.dry_run && !s.force);
        let bare = settings(&[]).expect("every flag may be left to the record");
        assert_eq!(bare, Settings::new(Root::new("/nonexistent")), "a library caller starts from the same defaults");
        assert_eq!((bare.hostname, bare.coordinator, bare.admission_token), (None, None, None));
    }

    #[test]
    fn a_value_that_cannot_be_used_is_refused_naming_its_flag() {
        let e = settings(&["--hostname", "gw1.example.test", "--limit-nofile", "1024"]).expect_err("out of range");
        assert_eq!(e.flag(), "--limit-nofile");
        assert_eq!(e.to_string(), "--limit-nofile must be from 65536 to 1073741816; 1024 is outside that range");
        for bad in ["localhost", "gw1", "10.0.0.1", "gw_1.example.test"] {
            let e = settings(&["--hostname", bad]).expect_err(bad);
            assert!(matches!(e, SettingsError::Hostname(_)), "{bad}: {e:?}");
            assert_eq!(e.flag(), "--hostname");
            assert!(e.to_string().starts_with("--hostname: invalid hostname `"), "{e}");
        }
    }

    #[test]
    fn the_missing_flag_errors_name_their_flag() {
        assert_eq!(SettingsError::NoHostname.flag(), "--hostname");
        assert_eq!(SettingsError::NoCoordinator.flag(), "--coordinator");
        assert_eq!(SettingsError::NoAdmissionToken.flag(), "--admission-token");
        assert!(SettingsError::NoAdmissionToken.to_string().contains("SVC_ADMISSION_TOKEN"));
    }
}
