//! The service's clock, as its records carry it: activity times and Unix milliseconds. The
//! store, the publication and the handlers all stamp with it.

/// The current time, RFC 3339 UTC, for activity.
pub(crate) fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Now, in Unix milliseconds.
pub(crate) fn now_ms() -> u64 {
    svc_execution::Clock::now(&svc_execution::SystemClock)
}
