//! The limits of a listener, validated in one place, and the connection cap the process's
//! open-file limit allows.

use std::time::Duration;

use crate::intake::IntakeLimits;

/// How long clients may take, and how many connections a listener keeps open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// A connection's first request head (TLS handshake included) must be complete within
    /// this of connecting; a later request's head within this of its first byte.
    pub header_timeout: Duration,
    /// A request's whole body must arrive within this of its head; else 408 and the
    /// connection is closed.
    pub body_timeout: Duration,
    /// A kept-alive connection may wait this long for its next request.
    pub idle_timeout: Duration,
    /// At most this many open connections (lowered to fit `RLIMIT_NOFILE`, see
    /// [`connection_cap`]).
    pub max_connections: usize,
    /// After shutdown begins, requests in flight get this long to finish.
    pub drain_timeout: Duration,
    /// Large request bodies read at once, per tenant and in all ([`crate::Intake`]).
    pub intake: IntakeLimits,
}

impl Settings {
    /// The defaults: header 10 s, body 30 s, idle 60 s, 1,024 connections, a 9 s drain (a
    /// stopped process is gone within 10 s), two large bodies per tenant and eight in all.
    pub const DEFAULT: Settings = Settings {
        header_timeout: Duration::from_secs(10),
        body_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(60),
        max_connections: 1024,
        drain_timeout: Duration::from_secs(9),
        intake: IntakeLimits::DEFAULT,
    };

    /// The longest timeout accepted.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

    /// The most connections accepted.
    pub const MAX_CONNECTIONS: usize = 1_000_000;

    /// Checks every field is in range: timeouts from 1 ms to an hour, 1 to 1,000,000
    /// connections, 1 to 10,000 large bodies in all and per tenant, no more per tenant than in
    /// all.
    pub fn validate(&self) -> Result<(), SettingsError> {
        for (name, value) in [
            ("header timeout", self.header_timeout),
            ("body timeout", self.body_timeout),
            ("idle timeout", self.idle_timeout),
            ("drain timeout", self.drain_timeout),
        ] {
            if value < Duration::from_millis(1) || value > Settings::MAX_TIMEOUT {
                return Err(SettingsError::Timeout { name, value });
            }
        }
        if self.max_connections == 0 || self.max_connections > Settings::MAX_CONNECTIONS {
            return Err(SettingsError::Connections(self.max_connections));
        }
        let IntakeLimits { per_tenant, total } = self.intake;
        if !(1..=IntakeLimits::MAX).contains(&total) || !(1..=total).contains(&per_tenant) {
            return Err(SettingsError::Intake(self.intake));
        }
        Ok(())
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings::DEFAULT
    }
}

/// A setting out of range.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A timeout under 1 ms or over an hour.
    #[error("the {name} must be from 1 ms to 1 hour, not {value:?}")]
    Timeout {
        /// Which timeout.
        name: &'static str,
        /// The value given.
        value: Duration,
    },
    /// A connection limit of 0 or over 1,000,000.
    #[error("the connection limit must be from 1 to 1000000, not {0}")]
    Connections(usize),
    /// Large bodies bounded to none, to more than 10,000, or to more per tenant than in all.
    #[error(
        "large request bodies at once must be from 1 to 10000 in all and from 1 to that per tenant, not {} in all and \
         {} per tenant",
        .0.total,
        .0.per_tenant
    )]
    Intake(IntakeLimits),
}

pub use svc_limits::connection_cap;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_out_of_range_values_are_named() {
        assert!(Settings::default().validate().is_ok());
        let zero = Settings { body_timeout: Duration::ZERO, ..Settings::DEFAULT };
        assert!(zero.validate().is_err_and(|e| e.to_string().contains("body timeout")));
        let none = Settings { max_connections: 0, ..Settings::DEFAULT };
        assert!(matches!(none.validate(), Err(SettingsError::Connections(0))));
        for (per_tenant, total) in [(0, 8), (3, 2), (1, 0), (1, 10_001)] {
            let intake = Settings { intake: IntakeLimits { per_tenant, total }, ..Settings::DEFAULT };
            assert!(matches!(intake.validate(), Err(SettingsError::Intake(_))), "{per_tenant} of {total}");
        }
    }
}
