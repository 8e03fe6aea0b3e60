//! Why a listener could not start.

use std::net::SocketAddr;

use crate::settings::SettingsError;

/// Why a [`Server`](crate::Server) could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A setting is out of range.
    #[error("invalid listener settings: {0}")]
    Settings(#[from] SettingsError),
    /// Plain HTTP was asked for on an address other hosts can reach.
    #[error(
        "refusing to serve plain HTTP on {addr}: it is not a loopback address, so bearer tokens would cross the \
         network in clear; give a certificate (--tls-cert FILE --tls-key FILE, or --dev-tls for one from the \
         development CA) or listen on 127.0.0.1"
    )]
    PlainOffLoopback {
        /// The address.
        addr: SocketAddr,
    },
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The process's open-file limit leaves no room for connections.
    #[error(
        "the open-file limit (RLIMIT_NOFILE) is too low to serve connections: raise it to at least {needed} \
         (`ulimit -n {needed}`, or LimitNOFILE= in a systemd unit)"
    )]
    FileLimit {
        /// The limit to raise it to.
        needed: u64,
    },
}
