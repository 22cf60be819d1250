//! What is counted per row: one counter per event kind, and the money.

use marquee_eventlog::Kind;

/// The counters of one aggregate row. Counts are events; money is in micros of the line
/// item's currency.
///
/// Spend is kept in two exact sums so that nothing is rounded per event: `cpm_micros` sums the
/// per-mille amounts (an impression's CPM rate, a billing notice's clearing CPM) and
/// `cpc_micros` the per-click prices; [`spend_micros`](Self::spend_micros) divides once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    pub decisions: i64,
    pub bids: i64,
    pub wins: i64,
    pub billings: i64,
    pub losses: i64,
    pub no_bids: i64,
    pub impressions: i64,
    pub clicks: i64,
    pub conversions: i64,
    pub cpm_micros: i64,
    pub cpc_micros: i64,
}

/// The counters' column names, in the order of [`Counters::values`]. The store builds its SQL
/// from these constants.
pub const COLUMNS: [&str; 11] = [
    "decisions",
    "bids",
    "wins",
    "billings",
    "losses",
    "no_bids",
    "impressions",
    "clicks",
    "conversions",
    "cpm_micros",
    "cpc_micros",
];

impl Counters {
    /// Counts one event of `kind` carrying `amount_micros` (already checked non-negative).
    pub fn record(&mut self, kind: Kind, amount_micros: i64) {
        let add = |counter: &mut i64, by: i64| *counter = counter.saturating_add(by);
        match kind {
            Kind::Decision => add(&mut self.decisions, 1),
            Kind::Bid => add(&mut self.bids, 1),
            Kind::Win => add(&mut self.wins, 1),
            Kind::Billing => {
                add(&mut self.billings, 1);
                add(&mut self.cpm_micros, amount_micros);
            }
            Kind::Loss => add(&mut self.losses, 1),
            Kind::NoBid => add(&mut self.no_bids, 1),
            Kind::Impression => {
                add(&mut self.impressions, 1);
                add(&mut self.cpm_micros, amount_micros);
            }
            Kind::Click => {
                add(&mut self.clicks, 1);
                add(&mut self.cpc_micros, amount_micros);
            }
            Kind::Conversion => add(&mut self.conversions, 1),
            // A kind added to the log later is not counted until this crate knows it.
            _ => {}
        }
    }

    /// Adds every counter of `other` (saturating: a sum never wraps).
    pub fn add(&mut self, other: &Counters) {
        let mut values = self.values();
        for (value, more) in values.iter_mut().zip(other.values()) {
            *value = value.saturating_add(more);
        }
        *self = Counters::from_values(values);
    }

    /// The counters in [`COLUMNS`] order.
    pub fn values(&self) -> [i64; 11] {
        [
            self.decisions,
            self.bids,
            self.wins,
            self.billings,
            self.losses,
            self.no_bids,
            self.impressions,
            self.clicks,
            self.conversions,
            self.cpm_micros,
            self.cpc_micros,
        ]
    }

    /// The inverse of [`values`](Self::values).
    pub fn from_values(v: [i64; 11]) -> Counters {
        let [
            decisions,
            bids,
            wins,
            billings,
            losses,
            no_bids,
            impressions,
            clicks,
            conversions,
            cpm_micros,
            cpc_micros,
        ] = v;
        Counters {
            decisions,
            bids,
            wins,
            billings,
            losses,
            no_bids,
            impressions,
            clicks,
            conversions,
            cpm_micros,
            cpc_micros,
        }
    }

    /// Requests: every slot that reached a decision, whatever its answer. One ad-request
    /// placement ends in a decision (an ad) or a no-bid (none), one bid-request imp in a bid
    /// or a no-bid; so requests = decisions + bids + no-bids.
    pub fn requests(&self) -> i64 {
        self.decisions
            .saturating_add(self.bids)
            .saturating_add(self.no_bids)
    }

    /// Spend in micros: the per-mille sum divided by 1,000 once (rounded down), plus the
    /// per-click sum.
    pub fn spend_micros(&self) -> i64 {
        (self.cpm_micros / 1_000).saturating_add(self.cpc_micros)
    }

    /// The spend in micros of each of `parts`, in order, rounded so that they add up to the
    /// spend of their sum: each part's per-mille sum divided by 1,000 and rounded down, then
    /// one micro more for as many parts as the fractions add up to whole micros, largest
    /// fraction first (the earlier part on a tie). Each share is within a micro of the part's
    /// exact spend, rounded down or up; what a part gets can depend on the other parts.
    ///
    /// So report rows, each floored on its own, no longer fall short of their total: three
    /// impressions at a CPM of 1,500 micros (1.5 micros each) in three rows are 2 + 1 + 1
    /// micros against a total of `spend_micros()` = 4.
    pub fn spend_shares<'a>(parts: impl IntoIterator<Item = &'a Counters>) -> Vec<i64> {
        let mut shares = Vec::new();
        let mut fractions: Vec<(i64, usize)> = Vec::new();
        let mut fraction_sum: i64 = 0;
        for (index, part) in parts.into_iter().enumerate() {
            shares.push(part.spend_micros());
            // Thousandths of a micro left over by the division; sums are never negative.
            let fraction = (part.cpm_micros % 1_000).max(0);
            if fraction > 0 {
                fractions.push((fraction, index));
                fraction_sum = fraction_sum.saturating_add(fraction);
            }
        }
        // Fewer than one extra micro per part with a fraction (each is under 1,000).
        let extra = usize::try_from(fraction_sum / 1_000).unwrap_or(0);
        fractions.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for &(_, index) in fractions.iter().take(extra) {
            if let Some(share) = shares.get_mut(index) {
                *share = share.saturating_add(1);
            }
        }
        shares
    }

    /// Click-through rate: clicks per impression, `None` without impressions.
    pub fn ctr(&self) -> Option<f64> {
        (self.impressions > 0).then(|| self.clicks as f64 / self.impressions as f64)
    }

    pub fn is_zero(&self) -> bool {
        self.values().iter().all(|&v| v == 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_counts_in_its_own_column_and_spend_is_divided_once() {
        let mut c = Counters::default();
        for _ in 0..3 {
            c.record(Kind::Impression, 1_500); // a 1.5 CPM: 0.0015 per impression
        }
        c.record(Kind::Click, 250_000);
        c.record(Kind::Billing, 2_000_000);
        c.record(Kind::Decision, 0);
        c.record(Kind::Bid, 0);
        c.record(Kind::NoBid, 0);
        assert_eq!(c.impressions, 3);
        assert_eq!(c.cpm_micros, 4_500 + 2_000_000);
        assert_eq!(c.spend_micros(), 4 + 2_000 + 250_000);
        assert_eq!(c.requests(), 3);
        assert_eq!(c.ctr(), Some(1.0 / 3.0));
    }

    /// Floored one by one, parts fell short of their sum's spend; shared out, they add up to it
    /// and each stays within a micro of its exact amount.
    #[test]
    fn spend_shares_add_up_to_the_spend_of_the_sum() {
        let impression = |cpm: i64| {
            let mut c = Counters::default();
            c.record(Kind::Impression, cpm);
            c
        };
        let parts = [impression(1_500), impression(1_500), impression(1_500)];
        let mut sum = Counters::default();
        for part in &parts {
            sum.add(part);
        }
        assert_eq!(sum.spend_micros(), 4);
        assert_eq!(Counters::spend_shares(&parts), vec![2, 1, 1]);

        // The largest fractions get the extra micros; clicks are never rounded.
        let mut clicked = impression(2_100);
        clicked.record(Kind::Click, 250_000);
        let parts = [
            impression(1_300),
            clicked,
            impression(1_900),
            impression(1_800),
        ];
        let mut sum = Counters::default();
        for part in &parts {
            sum.add(part);
        }
        let shares = Counters::spend_shares(&parts);
        assert_eq!(shares, vec![1, 250_002, 2, 2]);
        assert_eq!(shares.iter().sum::<i64>(), sum.spend_micros());
        for (share, part) in shares.iter().zip(&parts) {
            let exact = part.cpm_micros as f64 / 1_000.0 + part.cpc_micros as f64;
            assert!((*share as f64 - exact).abs() < 1.0, "{share} for {exact}");
        }
        assert!(Counters::spend_shares(&[]).is_empty());
    }

    #[test]
    fn values_round_trip_and_add_saturates() {
        let mut c = Counters::from_values([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        assert_eq!(c.values(), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        c.add(&Counters::from_values([i64::MAX; 11]));
        assert_eq!(c.values(), [i64::MAX; 11]);
        assert!(Counters::default().is_zero());
        assert_eq!(Counters::default().ctr(), None);
    }
}
