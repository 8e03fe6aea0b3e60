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

/// One sign-in attempt, counted as a wrong token from the moment it began, so attempts sent
/// at once cannot all pass the limit before any of them is counted. Dropped without
/// [`Attempt::wrong`] (the token was right, or the store could not say), it is taken back.
#[derive(Debug)]
#[must_use = "an attempt is taken back when dropped"]
pub struct Attempt<'a> {
    attempts: &'a Attempts,
    key: IpAddr,
    began: Instant,
    wrong: bool,
}

impl Attempt<'_> {
    /// The token was wrong: the attempt stays counted.
    pub fn wrong(mut self) {
        self.wrong = true;
    }
}

impl Drop for Attempt<'_> {
    fn drop(&mut self) {
        if !self.wrong {
            let mut windows = self.attempts.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(w) = windows.get_mut(&self.key)
                && w.began == self.began
            {
                w.failures = w.failures.saturating_sub(1);
            }
        }
    }
}

impl Attempts {
    /// No attempt counted.
    pub const fn new() -> Attempts {
        Attempts { windows: Mutex::new(BTreeMap::new()) }
    }

    /// An attempt by `client` at `now`, counted at once; or `Err(wait)` if `client` may not
    /// sign in: it sent [`FAILURES_PER_WINDOW`] wrong tokens in the window that ends in `wait`.
    pub fn begin(&self, client: Option<IpAddr>, now: Instant) -> Result<Attempt<'_>, Duration> {
        let key = key(client);
        let mut windows = self.windows.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let began = match windows.get_mut(&key) {
            Some(w) if now < w.began + WINDOW => {
                if w.failures >= FAILURES_PER_WINDOW {
                    return Err((w.began + WINDOW).saturating_duration_since(now));
                }
                w.failures += 1;
                w.began
            }
            Some(w) => {
                *w = Window { began: now, failures: 1 };
                now
            }
            None => {
                if windows.len() >= ADDRESSES_KEPT {
                    windows.retain(|_, w| now < w.began + WINDOW);
                }
                if windows.len() >= ADDRESSES_KEPT
                    && let Some(oldest) = windows.iter().min_by_key(|(_, w)| w.began).map(|(k, _)| *k)
                {
                    windows.remove(&oldest);
                }
                windows.insert(key, Window { began: now, failures: 1 });
                now
            }
        };
        Ok(Attempt { attempts: self, key, began, wrong: false })
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

    fn wrong(attempts: &Attempts, client: Option<IpAddr>, now: Instant) {
        attempts.begin(client, now).expect("allowed").wrong();
    }

    #[test]
    fn the_twenty_first_wrong_token_in_a_minute_is_refused_until_the_window_passes() {
        let attempts = Attempts::new();
        let t0 = Instant::now();
        for _ in 0..FAILURES_PER_WINDOW {
            wrong(&attempts, ip("192.0.2.7"), t0);
        }
        let later = t0 + Duration::from_secs(15);
        assert_eq!(attempts.begin(ip("192.0.2.7"), later).map(|_| ()), Err(Duration::from_secs(45)), "the 21st");
        assert!(attempts.begin(ip("192.0.2.8"), later).is_ok(), "another address");
        assert_eq!(attempts.begin(ip("::ffff:192.0.2.7"), later).map(|_| ()), Err(Duration::from_secs(45)), "mapped");
        // The window passed: a new one begins.
        wrong(&attempts, ip("192.0.2.7"), t0 + WINDOW);
        assert!(attempts.begin(ip("192.0.2.7"), t0 + WINDOW).is_ok());
    }

    #[test]
    fn attempts_sent_at_once_are_counted_before_any_answer_and_a_right_one_is_taken_back() {
        let attempts = Attempts::new();
        let t0 = Instant::now();
        // Thirty at once, none answered yet: the twenty-first is refused.
        let pending: Vec<_> =
            (0..FAILURES_PER_WINDOW).map(|_| attempts.begin(ip("192.0.2.9"), t0).expect("allowed")).collect();
        assert!(attempts.begin(ip("192.0.2.9"), t0).is_err(), "the 21st, sent before any answer");
        // One was right (or the store could not answer): taken back, so one more may try.
        let mut pending = pending.into_iter();
        drop(pending.next());
        let another = attempts.begin(ip("192.0.2.9"), t0).expect("the one taken back");
        another.wrong();
        pending.for_each(Attempt::wrong);
        assert!(attempts.begin(ip("192.0.2.9"), t0).is_err());
    }

    #[test]
    fn an_ipv6_host_is_counted_by_its_slash_64() {
        let attempts = Attempts::new();
        let t0 = Instant::now();
        for i in 0..FAILURES_PER_WINDOW {
            wrong(&attempts, ip(&format!("2001:db8:1:2::{i:x}")), t0);
        }
        assert!(attempts.begin(ip("2001:db8:1:2:ffff::1"), t0).is_err());
        assert!(attempts.begin(ip("2001:db8:1:3::1"), t0).is_ok());
    }

    #[test]
    fn the_map_is_bounded_and_forgets_the_oldest_window() {
        let attempts = Attempts::new();
        let t0 = Instant::now();
        for _ in 0..FAILURES_PER_WINDOW {
            wrong(&attempts, ip("198.51.100.1"), t0);
        }
        for i in 0..ADDRESSES_KEPT {
            let n = u32::try_from(i).expect("small");
            wrong(&attempts, Some(IpAddr::V4((0x0a00_0000 + n).into())), t0 + Duration::from_millis(1));
        }
        assert_eq!(attempts.len(), ADDRESSES_KEPT);
        assert!(attempts.begin(ip("198.51.100.1"), t0).is_ok(), "the oldest window went");
    }
}
