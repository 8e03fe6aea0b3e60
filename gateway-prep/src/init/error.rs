//! Why init stopped, its exit code and the code of its JSON error envelope.

use crate::coordinator::ClientError;
use crate::init::settings::SettingsError;
use crate::key::KeyError;

/// Why init stopped. Nothing was written when it stops before writing (every refusal).
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// A flag whose value cannot be used, or one that is needed (it names the flag).
    #[error(transparent)]
    Usage(#[from] SettingsError),
    /// Files changed since init wrote them.
    #[error(
        "{} changed since gateway-prep init wrote it; nothing was written: undo the change, or run again with --force to replace it (the change is lost)",
        .0.join(", ")
    )]
    Changed(Vec<String>),
    /// The host's state does not fit this run (another hostname, coordinator or key).
    #[error("{0}")]
    Conflict(String),
    /// The coordinator refused the registration.
    #[error("registration refused: {0}")]
    Refused(ClientError),
    /// The coordinator could not be asked.
    #[error(transparent)]
    Client(ClientError),
    /// A key could not be made.
    #[error(transparent)]
    Key(#[from] KeyError),
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The host path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
}

impl InitError {
    /// The exit code: 2 for refusals (changed files, admission, conflicts), 64 for usage, 3
    /// for failures to carry out.
    pub fn exit_code(&self) -> u8 {
        match self {
            InitError::Usage(_) => 64,
            InitError::Changed(_) | InitError::Conflict(_) | InitError::Refused(_) => 2,
            InitError::Client(_) | InitError::Key(_) | InitError::Io { .. } => 3,
        }
    }

    /// The stable code of the JSON error envelope: the coordinator's own when it refused.
    pub fn code(&self) -> &str {
        match self {
            InitError::Usage(_) => "usage",
            InitError::Changed(_) => "files_changed",
            InitError::Conflict(_) => "host_conflict",
            InitError::Refused(_) => self.refusal_code().unwrap_or("registration_refused"),
            InitError::Client(_) => "coordinator_unreachable",
            InitError::Key(_) => "key_failed",
            InitError::Io { .. } => "write_failed",
        }
    }

    /// The coordinator's refusal code (`admission_token_unknown`, ...), if it refused.
    pub fn refusal_code(&self) -> Option<&str> {
        match self {
            InitError::Refused(ClientError::Refused { code, .. }) => Some(code),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stop_has_its_exit_code_and_envelope_code() {
        let refused = |code: &str| {
            InitError::Refused(ClientError::Refused { status: 403, code: code.into(), message: "no".into() })
        };
        let io = InitError::Io { path: "/etc/x".into(), source: std::io::Error::other("full") };
        let cases = [
            (InitError::Usage(SettingsError::NoHostname), 64, "usage"),
            (InitError::Changed(vec!["/etc/x".into()]), 2, "files_changed"),
            (InitError::Conflict("elsewhere".into()), 2, "host_conflict"),
            (refused("admission_token_used"), 2, "admission_token_used"),
            (InitError::Client(ClientError::BadUrl("x".into())), 3, "coordinator_unreachable"),
            (io, 3, "write_failed"),
        ];
        for (e, exit, code) in cases {
            assert_eq!((e.exit_code(), e.code()), (exit, code), "{e:?}");
        }
        assert_eq!(refused("admission_token_used").refusal_code(), Some("admission_token_used"));
        assert_eq!(
            InitError::Usage(SettingsError::NoCoordinator).to_string(),
            "--coordinator URL is needed to register"
        );
        assert_eq!(
            InitError::Changed(vec!["/etc/a".into(), "/etc/b".into()]).to_string(),
            "/etc/a, /etc/b changed since gateway-prep init wrote it; nothing was written: undo the change, or run \
             again with --force to replace it (the change is lost)"
        );
    }
}
