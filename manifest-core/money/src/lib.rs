//! Amounts as people read them: the one formatter every text for people uses (the CLI, both
//! consoles, hints and refusals). JSON keeps the integers; only text goes through here.
//!
//! - Service-credit micros are US dollars: 1,000,000 micros = `USD 1.00`. Always two decimals
//!   (cents), more when the amount needs them (`USD 0.000001`), so a nonzero amount never reads
//!   `USD 0.00`; thousands grouped with commas (`USD 1,234.50`).
//! - Planck are the smallest unit of a token with its own decimals and symbol ([`Token`]):
//!   `12500000000` planck of [`DOT`] (10 decimals) is `1.25 DOT`, by the same rule.
//! - A price per period names the period in words: `USD 0.25 per hour`, `USD 1.00 per 2 days`.
//!
//! Exact integer arithmetic throughout; no floating point.

use std::fmt;

/// Micros in one US dollar of service credit.
pub const MICROS_PER_USD: u128 = 1_000_000;
/// Decimals of the service-credit unit (micros of a dollar).
const USD_DECIMALS: u32 = 6;

/// A token whose smallest unit is the planck: its symbol and how many decimals a whole token
/// has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// What follows the amount (`DOT`).
    pub symbol: &'static str,
    /// Planck in one token, as a power of ten.
    pub decimals: u32,
}

/// The compute network's token (V4 `maxRewardPlanckPerJob`, `maxNativeFeePlanckPerJob`): 10
/// decimals, as the Polkadot relay chain's DOT whose smallest unit the planck is.
pub const DOT: Token = Token { symbol: "DOT", decimals: 10 };

/// Service-credit micros, shown as US dollars: `USD 0.25`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usd(pub u128);

impl fmt::Display for Usd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "USD {}", decimal(self.0, USD_DECIMALS))
    }
}

/// `micros` as US dollars: `USD 0.25`.
pub fn usd(micros: impl Into<u128>) -> String {
    Usd(micros.into()).to_string()
}

/// `planck` of `token`: `1.25 DOT`.
pub fn planck(amount: impl Into<u128>, token: Token) -> String {
    format!("{} {}", decimal(amount.into(), token.decimals), token.symbol)
}

/// A price per period: `USD 0.25 per hour`, `USD 3.00 per 2 days`.
pub fn usd_per(micros: impl Into<u128>, period_secs: u64) -> String {
    format!("{} per {}", usd(micros), period_words(period_secs))
}

/// What `micros` every `period_ms` comes to per day, rounded down (at least 1 when both are
/// nonzero, so a running cost never reads as free); 0 for an empty period.
pub fn per_day(micros: u64, period_ms: u64) -> u64 {
    if micros == 0 || period_ms == 0 {
        return 0;
    }
    let day = u128::from(micros) * 86_400_000 / u128::from(period_ms);
    u64::try_from(day).unwrap_or(u64::MAX).max(1)
}

/// One period in words, for "per ...": `hour`, `day`, `2 days`, `90 seconds`.
pub fn period_words(secs: u64) -> String {
    let (n, unit) = whole_unit(secs);
    if n == 1 { unit.to_owned() } else { format!("{n} {unit}s") }
}

/// A length of time in words: `1 day`, `3 hours`, `90 seconds`.
pub fn duration_words(secs: u64) -> String {
    let (n, unit) = whole_unit(secs);
    if n == 1 { format!("1 {unit}") } else { format!("{n} {unit}s") }
}

/// The largest unit that divides `secs` exactly.
fn whole_unit(secs: u64) -> (u64, &'static str) {
    for (size, unit) in [(86_400, "day"), (3_600, "hour"), (60, "minute")] {
        if secs >= size && secs.is_multiple_of(size) {
            return (secs / size, unit);
        }
    }
    (secs, "second")
}

/// How far `at` is from `now` (both Unix ms), roughly, in the largest whole unit: `in 3 days`,
/// `in 5 hours`, `in 12 minutes`, `in 40 seconds`; `now` within a second; `2 hours ago` past.
pub fn relative(now_ms: i64, at_ms: i64) -> String {
    let delta = i128::from(at_ms) - i128::from(now_ms);
    let secs = u64::try_from(delta.unsigned_abs() / 1000).unwrap_or(u64::MAX);
    if secs == 0 {
        return "now".to_owned();
    }
    let (n, unit) = [(86_400, "day"), (3_600, "hour"), (60, "minute")]
        .into_iter()
        .find(|&(size, _)| secs >= size)
        .map_or((secs, "second"), |(size, unit)| (secs / size, unit));
    let words = if n == 1 { format!("1 {unit}") } else { format!("{n} {unit}s") };
    if delta > 0 { format!("in {words}") } else { format!("{words} ago") }
}

/// `amount` units of 10^-`decimals`, with at least two decimals and as many more as the amount
/// needs (trailing zeros beyond the second dropped), the whole part grouped by thousands.
fn decimal(amount: u128, decimals: u32) -> String {
    let scale = 10u128.checked_pow(decimals);
    let (whole, fraction) = match scale {
        Some(s) => (amount / s, amount % s),
        // More decimals than u128 holds: the whole part is 0.
        None => (0, amount),
    };
    let mut digits =
        if decimals == 0 { String::new() } else { format!("{fraction:0width$}", width = decimals as usize) };
    while digits.len() > 2 && digits.ends_with('0') {
        digits.pop();
    }
    while digits.len() < 2 {
        digits.push('0');
    }
    format!("{}.{digits}", grouped(whole))
}

/// `1234567` as `1,234,567`.
fn grouped(n: u128) -> String {
    let plain = n.to_string();
    let mut out = String::with_capacity(plain.len() + plain.len() / 3);
    for (i, c) in plain.chars().enumerate() {
        if i > 0 && (plain.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_always_show_cents_and_never_round_a_nonzero_amount_to_zero() {
        assert_eq!(usd(0u64), "USD 0.00");
        assert_eq!(usd(1u64), "USD 0.000001");
        assert_eq!(usd(9_999u64), "USD 0.009999");
        assert_eq!(usd(10_000u64), "USD 0.01");
        assert_eq!(usd(15_000u64), "USD 0.015");
        assert_eq!(usd(250_000u64), "USD 0.25");
        assert_eq!(usd(1_000_000u64), "USD 1.00");
        assert_eq!(usd(1_000_001u64), "USD 1.000001");
        assert_eq!(usd(1_234_500_000u64), "USD 1,234.50");
        assert_eq!(usd(100_000_000_000u64), "USD 100,000.00");
        assert_eq!(usd(u64::MAX), "USD 18,446,744,073,709.551615");
        assert_eq!(usd(u128::MAX), "USD 340,282,366,920,938,463,463,374,607,431,768.211455");
        assert_eq!(Usd(250_000).to_string(), "USD 0.25");
    }

    #[test]
    fn planck_take_their_tokens_decimals_and_symbol() {
        assert_eq!(planck(0u64, DOT), "0.00 DOT");
        assert_eq!(planck(1u64, DOT), "0.0000000001 DOT");
        assert_eq!(planck(12_500_000_000u64, DOT), "1.25 DOT");
        assert_eq!(planck(10_000_000_000u64, DOT), "1.00 DOT");
        assert_eq!(planck(u128::MAX, DOT), "34,028,236,692,093,846,346,337,460,743.1768211455 DOT");
        let whole = Token { symbol: "W", decimals: 0 };
        assert_eq!(planck(1_500u64, whole), "1,500.00 W");
        let huge = Token { symbol: "H", decimals: 40 };
        assert_eq!(planck(5u64, huge), "0.0000000000000000000000000000000000000005 H");
    }

    #[test]
    fn prices_name_their_period_in_words() {
        assert_eq!(usd_per(250_000u64, 3_600), "USD 0.25 per hour");
        assert_eq!(usd_per(250_000u64, 86_400), "USD 0.25 per day");
        assert_eq!(usd_per(3_000_000u64, 172_800), "USD 3.00 per 2 days");
        assert_eq!(usd_per(1u64, 90), "USD 0.000001 per 90 seconds");
        assert_eq!(usd_per(1u64, 1), "USD 0.000001 per second");
        assert_eq!(usd_per(1u64, 120), "USD 0.000001 per 2 minutes");
        assert_eq!(duration_words(3_600), "1 hour");
        assert_eq!(duration_words(5_400), "90 minutes");
        assert_eq!(duration_words(0), "0 seconds");
    }

    #[test]
    fn a_price_per_period_is_a_rate_per_day() {
        assert_eq!(per_day(250_000, 3_600_000), 6_000_000);
        assert_eq!(per_day(250_000, 86_400_000), 250_000);
        assert_eq!(per_day(1, 7 * 86_400_000), 1, "a nonzero cost is never free");
        assert_eq!(per_day(0, 3_600_000), 0);
        assert_eq!(per_day(5, 0), 0);
        assert_eq!(per_day(u64::MAX, 1), u64::MAX, "saturates");
    }

    #[test]
    fn times_from_now_in_the_largest_whole_unit() {
        let day = 86_400_000;
        assert_eq!(relative(0, 3 * day + 5), "in 3 days");
        assert_eq!(relative(0, 3_600_000), "in 1 hour");
        assert_eq!(relative(0, 59_999), "in 59 seconds");
        assert_eq!(relative(0, 999), "now");
        assert_eq!(relative(2 * 3_600_000, 0), "2 hours ago");
        assert_eq!(relative(i64::MIN, i64::MAX), format!("in {} days", u64::MAX / 1000 / 86_400));
    }
}
