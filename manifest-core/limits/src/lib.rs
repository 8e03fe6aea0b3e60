//! How many connections a listener may keep under the process's open-file limit: the rule
//! the relay API's, the publication API's and the gateway's listeners share.
//!
//! A crate of its own below the serving library (`svc-http`) and the relay's wire types
//! (`relay_wire::limits`, which the gateway uses), so neither depends on the other for it.

#![forbid(unsafe_code)]

/// File descriptors kept for everything but this listener's connections (the store and its
/// journal, logs, the job files, another listener in the same process): a quarter of the
/// open-file limit, and at least this many.
const MIN_RESERVE: u64 = 64;

/// The connection cap for `max_connections` under this process's open-file limit
/// (`RLIMIT_NOFILE`, its soft value): `max_connections`, or the limit less a reserve of a
/// quarter (at least 64) if that is lower. `Err(needed)` when the limit leaves no room: the
/// limit to raise it to. Public so that the gateway bounds its own connections by the same
/// rule.
pub fn connection_cap(max_connections: usize) -> Result<usize, u64> {
    match open_file_limit() {
        None => Ok(max_connections),
        Some(limit) => cap_under(max_connections, limit),
    }
}

fn cap_under(max_connections: usize, limit: u64) -> Result<usize, u64> {
    let reserve = (limit / 4).max(MIN_RESERVE);
    match limit.checked_sub(reserve) {
        Some(room) if room >= 1 => Ok(usize::try_from(room).map_or(max_connections, |room| room.min(max_connections))),
        _ => Err(2 * MIN_RESERVE),
    }
}

/// The soft open-file limit, if there is one.
#[cfg(unix)]
fn open_file_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

#[cfg(not(unix))]
fn open_file_limit() -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_a_quarter_of_the_open_file_limit() {
        assert_eq!(cap_under(1024, 1024), Ok(768));
        assert_eq!(cap_under(1024, 20_000), Ok(1024));
        assert_eq!(cap_under(1024, 200), Ok(136));
        assert_eq!(cap_under(1024, 64), Err(128));
        assert!(connection_cap(10).is_ok_and(|cap| (1..=10).contains(&cap)));
    }
}
