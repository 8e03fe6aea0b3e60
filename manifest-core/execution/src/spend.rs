//! Spend authority: whether one more launch, at its quote, stays within what the policy
//! authorizes. Every limit is a ceiling on charges recorded in the ledger; a launch that would
//! cross one is not made, and the reason names the limit.

use crate::clock::Millis;
use crate::market::Quote;
use crate::money::{DOT, planck, usd};
use crate::plan::SpendAuthority;
use crate::reason::Reason;
use crate::record::Charge;

/// Why a launch was not made, and when the authority could allow it (a rate window rolls
/// forward), if ever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    /// `spend_authority_exceeded`, with the limit in the message.
    pub reason: Reason,
    /// When the same launch would fit (the oldest charge leaves the rate window), if it can.
    pub retry_at: Option<Millis>,
}

/// Checks a launch of `slot` generation `generation` at `quote`, at `now`, against `authority`
/// and the `charges` already made.
pub fn check(
    authority: &SpendAuthority,
    charges: &[Charge],
    slot: u16,
    generation: u64,
    quote: &Quote,
    now: Millis,
) -> Result<(), Exceeded> {
    let exceeded =
        |message: String| Exceeded { reason: Reason::new("spend_authority_exceeded", message), retry_at: None };
    // SPEC V5 spend.perJob: total exposure for one delivered occurrence.
    if let Some(max) = authority.per_job_micros.filter(|&m| quote.service_credit_micros > m) {
        return Err(exceeded(format!(
            "a job costs {}, above spend.perJob {} ({max} micros)",
            usd(quote.service_credit_micros),
            usd(max)
        )));
    }
    // The organization's guard (capabilities-and-limits: its spend authority per job).
    if let Some(max) = authority.organization_per_job_micros.filter(|&m| quote.service_credit_micros > m) {
        return Err(exceeded(format!(
            "a job costs {}, above the organization's spend authority of {} per job",
            usd(quote.service_credit_micros),
            usd(max)
        )));
    }
    // SPEC V4 spend.maxRewardPlanckPerJob / maxNativeFeePlanckPerJob.
    if let Some(max) = authority.reward_planck_per_job.filter(|&m| quote.reward_planck > m) {
        return Err(exceeded(format!(
            "the processor's reward is {}, above spend.maxRewardPlanckPerJob {} ({max} planck)",
            planck(quote.reward_planck, DOT),
            planck(max, DOT)
        )));
    }
    if let Some(max) = authority.native_fee_planck_per_job.filter(|&m| quote.native_fee_planck > m) {
        return Err(exceeded(format!(
            "the network fee is {}, above spend.maxNativeFeePlanckPerJob {} ({max} planck)",
            planck(quote.native_fee_planck, DOT),
            planck(max, DOT)
        )));
    }
    // SPEC V4 spend.maxServiceCreditMicrosPerGeneration: every launch of this slot generation.
    if let Some(max) = authority.per_generation_micros {
        let spent: u128 = charges
            .iter()
            .filter(|c| c.slot == slot && c.generation == generation)
            .map(|c| c.quote.service_credit_micros)
            .sum();
        if spent.saturating_add(quote.service_credit_micros) > max {
            return Err(exceeded(format!(
                "slot {slot} generation {generation} has been charged {}; {} more would pass \
                 spend.maxServiceCreditMicrosPerGeneration {} ({max} micros)",
                usd(spent),
                usd(quote.service_credit_micros),
                usd(max)
            )));
        }
    }
    // SPEC V5 spend.rate: a lifetime ceiling expressed over a trailing window.
    if let Some(rate) = authority.rate {
        let since = now.saturating_sub(rate.window_ms);
        let mut within: Vec<&Charge> = charges.iter().filter(|c| c.at > since).collect();
        let spent: u128 = within.iter().map(|c| c.quote.service_credit_micros).sum();
        if spent.saturating_add(quote.service_credit_micros) > rate.amount_micros {
            // The launch fits once enough of the oldest charges have left the window.
            within.sort_by_key(|c| c.at);
            let mut left = spent.saturating_add(quote.service_credit_micros);
            let retry_at = if quote.service_credit_micros > rate.amount_micros {
                None
            } else {
                within
                    .iter()
                    .find(|c| {
                        left -= c.quote.service_credit_micros;
                        left <= rate.amount_micros
                    })
                    .map(|c| c.at.saturating_add(rate.window_ms).saturating_add(1))
            };
            return Err(Exceeded {
                reason: Reason::new(
                    "spend_authority_exceeded",
                    format!(
                        "{} was charged in the last {}; {} more would pass spend.rate.amount {} ({} micros)",
                        usd(spent),
                        crate::money::duration_words(rate.window_ms / 1000),
                        usd(quote.service_credit_micros),
                        usd(rate.amount_micros),
                        rate.amount_micros
                    ),
                ),
                retry_at,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Rate;

    fn quote(micros: u128) -> Quote {
        Quote { service_credit_micros: micros, ..Quote::default() }
    }

    fn charge(slot: u16, generation: u64, at: Millis, micros: u128) -> Charge {
        Charge { slot, generation, at, quote: quote(micros) }
    }

    #[test]
    fn per_job_and_planck_maxima_refuse_one_launch() {
        let a = SpendAuthority { per_job_micros: Some(100), ..SpendAuthority::default() };
        assert!(check(&a, &[], 0, 1, &quote(100), 0).is_ok());
        let e = check(&a, &[], 0, 1, &quote(101), 0).expect_err("over perJob");
        assert!(e.reason.message.contains("above spend.perJob USD 0.0001 (100 micros)"), "{}", e.reason.message);
        let a = SpendAuthority { reward_planck_per_job: Some(5), ..SpendAuthority::default() };
        let q = Quote { reward_planck: 6, ..Quote::default() };
        assert!(check(&a, &[], 0, 1, &q, 0).is_err());
    }

    #[test]
    fn per_generation_counts_every_attempt_of_that_generation_only() {
        let a = SpendAuthority { per_generation_micros: Some(250), ..SpendAuthority::default() };
        let charges = [charge(0, 1, 0, 100), charge(0, 1, 5, 100), charge(1, 1, 5, 100), charge(0, 2, 9, 100)];
        assert!(check(&a, &charges, 0, 1, &quote(50), 10).is_ok());
        assert!(check(&a, &charges, 0, 1, &quote(51), 10).is_err());
        assert!(check(&a, &charges, 0, 3, &quote(250), 10).is_ok());
    }

    #[test]
    fn a_rate_refusal_says_when_the_window_frees_enough() {
        let a =
            SpendAuthority { rate: Some(Rate { amount_micros: 300, window_ms: 1_000 }), ..SpendAuthority::default() };
        let charges = [charge(0, 1, 100, 100), charge(0, 2, 200, 100), charge(0, 3, 300, 100)];
        let e = check(&a, &charges, 0, 4, &quote(100), 500).expect_err("rate");
        assert_eq!(e.retry_at, Some(1_101));
        assert!(check(&a, &charges, 0, 4, &quote(100), 1_101).is_ok());
        // A single launch above the ceiling never fits.
        assert_eq!(check(&a, &[], 0, 1, &quote(301), 0).expect_err("never").retry_at, None);
    }
}
