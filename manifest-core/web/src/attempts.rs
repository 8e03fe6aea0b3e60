//! Sign-in attempts limited per client address: [`FAILURES_PER_WINDOW`] wrong tokens in a
//! [`WINDOW`] from one address (an IPv6 address's /64, which one host holds whole), and the
//! address's sign-ins are refused until the window passes, a correct token's included (or
//! the limit would tell which guess was right). Successful sign-ins do not count. Kept in
//! memory, in a map of at most [`ADDRESSES_KEPT`] addresses (a full map forgets the address
//! whose window began first), so each instance of a service counts its own.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Wrong tokens one address may send in a window.
pub const FAILURES_PER_WINDOW: u32 = 20;

/// The window: from an address's first wrong token, a minute.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Addresses counted at most.
pub const ADDRESSES_KEPT: usize = 10_000;

/// One address's window: when its first wrong token came, and how many came since.
#[derive(Debug, Clone, Copy)]
struct Window {
    began: Instant,
    failures: u32,
}

/// The sign-in attempts of one console.
#[derive(Debug)]
pub struct Attempts {
    windows: Mutex<BTreeMap<IpAddr, Window>>,
}

impl Default for Attempts {
    fn default() -> Attempts {
        Attempts::new()
    }
}

/// The address an attempt is counted under: an IPv4 address (an IPv4-mapped IPv6 one read as
/// IPv4), or an IPv6 address's /64; no address (a caller that is no TCP peer) is one.
fn key(client: Option<IpAddr>) -> IpAddr {
    match client.map(|ip| ip.to_canonical()) {
        Some(IpAddr::V6(v6)) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(prefix.into())
        }
        Some(v4) => v4,
        None => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
    }
}

impl Attempts {
    /// No attempt counted.
    pub const fn new() -> Attempts {
        Attempts { windows: Mutex::new(BTreeMap::new()) }
    }

    /// `Err(wait)` if `client` may not sign in at `now`: it sent [`FAILURES_PER_WINDOW`] wrong
    /// tokens in the window that ends in `wait`.
    pub fn check(&self, client: Option<IpAddr>, now: Instant) -> Result<(), Duration> {
        let windows = self.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match windows.get(&key(client)) {
            Some(w) if w.failures >= FAILURES_PER_WINDOW && now < w.began + WINDOW => {
                Err((w.began + WINDOW).saturating_duration_since(now))
            }
            _ => Ok(()),
        }
    }

    /// Counts a wrong token from `client` at `now`.
    pub fn failed(&self, client: Option<IpAddr>, now: Instant) {
        let key = key(client);
        let mut windows = self.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(w) = windows.get_mut(&key) {
            if now < w.began + WINDOW {
                w.failures = w.failures.saturating_add(1);
            } else {
                *w = Window { began: now, failures: 1 };
            }
            return;
        }
        if windows.len() >= ADDRESSES_KEPT {
            windows.retain(|_, w| now < w.began + WINDOW);
        }
        if windows.len() >= ADDRESSES_KEPT
            && let Some(oldest) = windows.iter().min_by_key(|(_, w)| w.began).map(|(k, _)| *k)
        {
            windows.remove(&oldest);
        }
        windows.insert(key, Window { began: now, failures: 1 });
    }

    /// Addresses counted now (for tests).
    pub fn len(&self) -> usize {
        self.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Whether no address is counted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> Option<IpAddr> {
        Some(text.parse().expect("an address"))
    }

    #[test]
    fn the_twenty_first_wrong_token_in_a_minute_is_refused_until_the_window_passes() {
        let attempts = Attempts::new();
        let t0 = Instant::now();
        for i in 0..FAILURES_PER_WINDOW {
            assert_eq!(attempts.check(ip("192.0.2.7"), t0), Ok(()), "attempt {}", i + 1);
            attempts.failed(ip("192.0.2.7"), t0);
        }
        let later = t0 + Duration::from_secs(15);
        assert_eq!(attempts.check(ip("192.0.2.7"), later), Err(Duration::from_secs(45)), "the 21st");
        assert_eq!(attempts.check(ip("192.0.2.8"), later), Ok(()), "another address");
        assert_eq!(attempts.check(ip("::ffff:192.0.2.7"), later), Err(Duration::from_secs(45)), "mapped");
        assert_eq!(attempts.check(ip("192.0.2.7"), t0 + WINDOW), Ok(()), "the window passed");
        // A new window after it.
        attempts.failed(ip("192.0.2.7"), t0 + WINDOW);
        assert_eq!(attempts.check(ip("192.0.2.7"), t0 + WINDOW), Ok(()));
    }

    #[test]
    fn an_ipv6_host_is_counted_by_its_slash_64() {
        let attempts = Attempts::new();
        let t0 = Instant::now();
        for i in 0..FAILURES_PER_WINDOW {
            attempts.failed(ip(&format!("2001:db8:1:2::{i:x}")), t0);
        }
        assert!(attempts.check(ip("2001:db8:1:2:ffff::1"), t0).is_err());
        assert_eq!(attempts.check(ip("2001:db8:1:3::1"), t0), Ok(()));
    }

    #[test]
    fn the_map_is_bounded_and_forgets_the_oldest_window() {
        let attempts = Attempts::new();
        let t0 = Instant::now();
        for _ in 0..FAILURES_PER_WINDOW {
            attempts.failed(ip("198.51.100.1"), t0);
        }
        for i in 0..ADDRESSES_KEPT {
            let n = u32::try_from(i).expect("small");
            attempts.failed(Some(IpAddr::V4((0x0a00_0000 + n).into())), t0 + Duration::from_millis(1));
        }
        assert_eq!(attempts.len(), ADDRESSES_KEPT);
        assert_eq!(attempts.check(ip("198.51.100.1"), t0), Ok(()), "the oldest window went");
    }
}
