//! What is counted per row: one counter per event kind, the invalid traffic by reason, and the
//! money.

use marquee_eventlog::{EventKind, InvalidReason, auction};

/// How many counters a row has: the length of [`COLUMNS`] and [`Counters::values`].
pub const COLUMN_COUNT: usize = 31;

/// Declares [`Counters`], [`COLUMNS`], [`Counters::values`] and [`Counters::from_values`]
/// from one list of fields, so the column order cannot differ between them.
macro_rules! counters {
    (
        $(#[$struct_meta:meta])*
        struct;
        $(#[$columns_meta:meta])*
        columns;
        $($field:ident),+ $(,)?
    ) => {
        $(#[$struct_meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Counters {
            $(pub $field: i64,)+
        }

        $(#[$columns_meta])*
        pub const COLUMNS: [&str; COLUMN_COUNT] = [$(stringify!($field)),+];

        impl Counters {
            /// The counters in [`COLUMNS`] order.
            pub fn values(&self) -> [i64; COLUMN_COUNT] {
                [$(self.$field),+]
            }

            /// The inverse of [`values`](Self::values).
            pub fn from_values(v: [i64; COLUMN_COUNT]) -> Counters {
                let [$($field),+] = v;
                Counters { $($field),+ }
            }
        }
    };
}

counters! {
    /// The counters of one aggregate row. Counts are events; money is in micros of the line
    /// item's currency.
    ///
    /// Spend is kept in two exact sums so that nothing is rounded per event: `cpm_micros` sums the
    /// per-mille amounts (an impression's CPM rate, a billing notice's clearing CPM) and
    /// `cpc_micros` the per-click prices; [`spend_micros`](Self::spend_micros) divides once.
    ///
    /// Invalid traffic (impressions, clicks and conversions the edge judged invalid) is counted
    /// apart: by kind in `invalid_impressions`, `invalid_clicks` and `invalid_conversions`, and the
    /// same events again by reason in the `invalid_<reason>` counters, one per
    /// [`InvalidReason`] (an event whose reason this build does not know counts by kind only).
    /// Invalid events are never impressions, clicks or conversions and carry no money: their
    /// amount is a reason code. So spend, pacing and goals, which read those columns, never see
    /// them.
    ///
    /// Programmatic demand (the unified auction of a placement's ad request among the gateway's
    /// bidders, log kinds 13 and 14) is counted in the `programmatic_` counters of rows with
    /// line item 0 whose creative column holds the bidder's id: auctions (once each, on the
    /// record of the first bidder called), bid requests (one per bidder called), bids,
    /// timeouts, wins, auctions the direct line item won, impressions, and revenue, the
    /// impressions' net CPMs summed in micros of the gateway's currency (divided by 1,000
    /// once: [`programmatic_revenue_micros`](Self::programmatic_revenue_micros)). None of it
    /// is any line item's spend.
    struct;
    /// The counters' column names, in the order of [`Counters::values`]. The store builds its SQL
    /// from these constants. The reason columns are `invalid_` and the reason's
    /// [`label`](InvalidReason::label), in [`InvalidReason::ALL`] order; a reason added to the log
    /// needs a column here and in every stats table (a test fails until it has one).
    columns;
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
    invalid_impressions,
    invalid_clicks,
    invalid_conversions,
    invalid_crawler,
    invalid_prefetch,
    invalid_datacenter,
    invalid_rate,
    invalid_click_without_impression,
    invalid_too_fast,
    invalid_untokened_disabled,
    invalid_repeat_conversion,
    invalid_no_cache_buster,
    programmatic_auctions,
    programmatic_requests,
    programmatic_bids,
    programmatic_timeouts,
    programmatic_wins,
    programmatic_direct_wins,
    programmatic_impressions,
    programmatic_cpm_micros,
}

impl Counters {
    /// Counts one event of `kind` carrying `amount_micros` (already checked non-negative): for
    /// an invalid kind the amount is its [`InvalidReason`] code, counted by reason, not money;
    /// for a counter kind ([`EventKind::is_counter`]) it is the number of bids or no-bids the
    /// record stands for.
    pub fn record(&mut self, kind: EventKind, amount_micros: i64) {
        let add = |counter: &mut i64, by: i64| *counter = counter.saturating_add(by);
        match kind {
            EventKind::Decision => add(&mut self.decisions, 1),
            EventKind::Bid => add(&mut self.bids, 1),
            EventKind::Win => add(&mut self.wins, 1),
            EventKind::Billing => {
                add(&mut self.billings, 1);
                add(&mut self.cpm_micros, amount_micros);
            }
            EventKind::Loss => add(&mut self.losses, 1),
            EventKind::NoBid => add(&mut self.no_bids, 1),
            EventKind::BidsCounted => add(&mut self.bids, amount_micros),
            EventKind::NoBidsCounted => add(&mut self.no_bids, amount_micros),
            EventKind::Impression => {
                add(&mut self.impressions, 1);
                add(&mut self.cpm_micros, amount_micros);
            }
            EventKind::Click => {
                add(&mut self.clicks, 1);
                add(&mut self.cpc_micros, amount_micros);
            }
            EventKind::Conversion => add(&mut self.conversions, 1),
            EventKind::ProgrammaticImpression => {
                add(&mut self.programmatic_impressions, 1);
                add(&mut self.programmatic_cpm_micros, amount_micros);
            }
            EventKind::InvalidImpression
            | EventKind::InvalidClick
            | EventKind::InvalidConversion => {
                let by_kind = match kind {
                    EventKind::InvalidImpression => &mut self.invalid_impressions,
                    EventKind::InvalidClick => &mut self.invalid_clicks,
                    _ => &mut self.invalid_conversions,
                };
                add(by_kind, 1);
                if let Some(by_reason) =
                    InvalidReason::from_code(amount_micros).and_then(|r| self.by_reason_mut(r))
                {
                    add(by_reason, 1);
                }
            }
            // A kind added to the log later is not counted until this crate knows it.
            _ => {}
        }
    }

    /// Counts one programmatic auction record (a [`ProgrammaticAuction`] event): its
    /// `outcome` (the record's `line_item`: [`auction`] flags and bids) and whether it names a
    /// bidder called. Its amount, the winning bid's net CPM, is not money: revenue is counted
    /// on the impression.
    ///
    /// [`ProgrammaticAuction`]: EventKind::ProgrammaticAuction
    pub fn record_auction(&mut self, outcome: u64, called: bool) {
        let add = |counter: &mut i64, yes: bool| *counter = counter.saturating_add(i64::from(yes));
        add(
            &mut self.programmatic_auctions,
            outcome & auction::AUCTION != 0,
        );
        add(&mut self.programmatic_requests, called);
        self.programmatic_bids = self
            .programmatic_bids
            .saturating_add(i64::from(auction::bids(outcome)));
        add(
            &mut self.programmatic_timeouts,
            outcome & auction::TIMED_OUT != 0,
        );
        add(&mut self.programmatic_wins, outcome & auction::WON != 0);
        add(
            &mut self.programmatic_direct_wins,
            outcome & auction::DIRECT != 0,
        );
    }

    /// The counter of invalid events for `reason`; `None` for a reason this build has no
    /// column for.
    fn by_reason_mut(&mut self, reason: InvalidReason) -> Option<&mut i64> {
        Some(match reason {
            InvalidReason::Crawler => &mut self.invalid_crawler,
            InvalidReason::Prefetch => &mut self.invalid_prefetch,
            InvalidReason::Datacenter => &mut self.invalid_datacenter,
            InvalidReason::Rate => &mut self.invalid_rate,
            InvalidReason::ClickWithoutImpression => &mut self.invalid_click_without_impression,
            InvalidReason::TooFast => &mut self.invalid_too_fast,
            InvalidReason::UntokenedDisabled => &mut self.invalid_untokened_disabled,
            InvalidReason::RepeatConversion => &mut self.invalid_repeat_conversion,
            InvalidReason::NoCacheBuster => &mut self.invalid_no_cache_buster,
            _ => return None,
        })
    }

    /// Invalid events (of all three kinds) judged so for `reason`.
    pub fn invalid(&self, reason: InvalidReason) -> i64 {
        let mut copy = *self;
        copy.by_reason_mut(reason).map_or(0, |count| *count)
    }

    /// Every reason with its count of invalid events, in [`InvalidReason::ALL`] order.
    pub fn invalid_by_reason(&self) -> [(InvalidReason, i64); InvalidReason::ALL.len()] {
        InvalidReason::ALL.map(|reason| (reason, self.invalid(reason)))
    }

    /// Invalid events of every kind.
    pub fn invalid_total(&self) -> i64 {
        self.invalid_impressions
            .saturating_add(self.invalid_clicks)
            .saturating_add(self.invalid_conversions)
    }

    /// Adds every counter of `other` (saturating: a sum never wraps).
    pub fn add(&mut self, other: &Counters) {
        let mut values = self.values();
        for (value, more) in values.iter_mut().zip(other.values()) {
            *value = value.saturating_add(more);
        }
        *self = Counters::from_values(values);
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
        shares(parts, Counters::spend_micros, |c| c.cpm_micros)
    }

    /// The programmatic revenue in micros of each of `parts`, shared out as
    /// [`spend_shares`](Self::spend_shares) shares spend: they add up to the revenue of their
    /// sum.
    pub fn revenue_shares<'a>(parts: impl IntoIterator<Item = &'a Counters>) -> Vec<i64> {
        shares(parts, Counters::programmatic_revenue_micros, |c| {
            c.programmatic_cpm_micros
        })
    }

    /// Programmatic revenue in micros of the gateway's currency: the impressions' net CPMs
    /// summed, divided by 1,000 once (rounded down).
    pub fn programmatic_revenue_micros(&self) -> i64 {
        self.programmatic_cpm_micros / 1_000
    }

    /// Ad requests of placements with programmatic demand: the direct decisions (served with
    /// or without an auction), and each auction the direct line item did not win (a bid
    /// served, or nothing did). An ad request that fills nothing without an auction is not
    /// logged, so on rows without auctions this counts decisions only.
    pub fn ad_requests(&self) -> i64 {
        self.decisions
            .saturating_add(self.programmatic_auctions)
            .saturating_sub(self.programmatic_direct_wins)
    }

    /// Ad requests that served an ad (a direct decision or a bid) per ad request, `None` on a
    /// row without auctions, whose unfilled requests the log does not have.
    pub fn fill_rate(&self) -> Option<f64> {
        let requests = self.ad_requests();
        (self.programmatic_auctions > 0 && requests > 0)
            .then(|| self.decisions.saturating_add(self.programmatic_wins) as f64 / requests as f64)
    }

    /// Click-through rate: clicks per impression, `None` without impressions.
    pub fn ctr(&self) -> Option<f64> {
        (self.impressions > 0).then(|| self.clicks as f64 / self.impressions as f64)
    }

    pub fn is_zero(&self) -> bool {
        self.values().iter().all(|&v| v == 0)
    }
}

/// Each part's amount (`whole`: its per-mille sum `per_mille` divided by 1,000, rounded down,
/// plus any whole micros), then one micro more for as many parts as the fractions add up to
/// whole micros, largest fraction first (the earlier part on a tie).
fn shares<'a>(
    parts: impl IntoIterator<Item = &'a Counters>,
    whole: fn(&Counters) -> i64,
    per_mille: fn(&Counters) -> i64,
) -> Vec<i64> {
    let mut shares = Vec::new();
    let mut fractions: Vec<(i64, usize)> = Vec::new();
    let mut fraction_sum: i64 = 0;
    for (index, part) in parts.into_iter().enumerate() {
        shares.push(whole(part));
        // Thousandths of a micro left over by the division; sums are never negative.
        let fraction = (per_mille(part) % 1_000).max(0);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_counts_in_its_own_column_and_spend_is_divided_once() {
        let mut c = Counters::default();
        for _ in 0..3 {
            c.record(EventKind::Impression, 1_500); // a 1.5 CPM: 0.0015 per impression
        }
        c.record(EventKind::Click, 250_000);
        c.record(EventKind::Billing, 2_000_000);
        c.record(EventKind::Decision, 0);
        c.record(EventKind::Bid, 0);
        c.record(EventKind::NoBid, 0);
        assert_eq!(c.impressions, 3);
        assert_eq!(c.cpm_micros, 4_500 + 2_000_000);
        assert_eq!(c.spend_micros(), 4 + 2_000 + 250_000);
        assert_eq!(c.requests(), 3);
        assert_eq!(c.ctr(), Some(1.0 / 3.0));
    }

    /// A counter record adds its count to bids or no-bids, and is never money.
    #[test]
    fn counter_records_add_their_count() {
        let mut c = Counters::default();
        c.record(EventKind::Bid, 1_500_000);
        c.record(EventKind::BidsCounted, 41);
        c.record(EventKind::NoBid, 0);
        c.record(EventKind::NoBidsCounted, 9);
        assert_eq!((c.bids, c.no_bids), (42, 10));
        assert_eq!((c.cpm_micros, c.cpc_micros, c.spend_micros()), (0, 0, 0));
        assert_eq!(c.requests(), 52);
    }

    /// Floored one by one, parts fell short of their sum's spend; shared out, they add up to it
    /// and each stays within a micro of its exact amount.
    #[test]
    fn spend_shares_add_up_to_the_spend_of_the_sum() {
        let impression = |cpm: i64| {
            let mut c = Counters::default();
            c.record(EventKind::Impression, cpm);
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
        clicked.record(EventKind::Click, 250_000);
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

    /// Invalid traffic counts by kind and by reason, never as an impression, click or
    /// conversion, and never as money: its amount is a reason code.
    #[test]
    fn invalid_events_count_by_kind_and_reason_and_spend_nothing() {
        let mut c = Counters::default();
        let code = |reason: InvalidReason| i64::from(reason.code());
        c.record(EventKind::InvalidImpression, code(InvalidReason::Crawler));
        c.record(EventKind::InvalidImpression, code(InvalidReason::Crawler));
        c.record(
            EventKind::InvalidImpression,
            code(InvalidReason::UntokenedDisabled),
        );
        c.record(EventKind::InvalidClick, code(InvalidReason::TooFast));
        c.record(EventKind::InvalidClick, code(InvalidReason::Crawler));
        c.record(
            EventKind::InvalidConversion,
            code(InvalidReason::RepeatConversion),
        );
        // A reason this build does not know: counted by kind only.
        c.record(EventKind::InvalidClick, 99);
        c.record(EventKind::InvalidClick, 0);
        assert_eq!(
            (
                c.invalid_impressions,
                c.invalid_clicks,
                c.invalid_conversions
            ),
            (3, 4, 1)
        );
        assert_eq!(c.invalid_total(), 8);
        assert_eq!(c.invalid_crawler, 3);
        assert_eq!(c.invalid(InvalidReason::Crawler), 3);
        assert_eq!(c.invalid(InvalidReason::UntokenedDisabled), 1);
        assert_eq!(c.invalid(InvalidReason::TooFast), 1);
        assert_eq!(c.invalid(InvalidReason::RepeatConversion), 1);
        assert_eq!(c.invalid(InvalidReason::Prefetch), 0);
        let by_reason: i64 = c.invalid_by_reason().iter().map(|(_, n)| n).sum();
        assert_eq!(by_reason, 6, "two had no reason this build knows");
        assert_eq!(
            (c.impressions, c.clicks, c.conversions, c.requests()),
            (0, 0, 0, 0)
        );
        assert_eq!((c.cpm_micros, c.cpc_micros, c.spend_micros()), (0, 0, 0));
        assert_eq!(c.ctr(), None);
        assert!(!c.is_zero());
    }

    /// Each reason has its column, named after its label, in `InvalidReason::ALL` order after
    /// the kinds' counters; recording the reason moves that column and no other reason's.
    #[test]
    fn every_reason_has_its_own_column() {
        const FIRST_REASON: usize = 14;
        assert_eq!(
            COLUMNS.len(),
            FIRST_REASON + InvalidReason::ALL.len() + PROGRAMMATIC
        );
        for (i, reason) in InvalidReason::ALL.into_iter().enumerate() {
            assert_eq!(
                COLUMNS[FIRST_REASON + i],
                format!("invalid_{}", reason.label())
            );
            let mut c = Counters::default();
            c.record(EventKind::InvalidImpression, i64::from(reason.code()));
            let mut expected = [0; COLUMN_COUNT];
            expected[11] = 1;
            expected[FIRST_REASON + i] = 1;
            assert_eq!(c.values(), expected, "{reason:?}");
            assert_eq!(c.invalid_by_reason()[i], (reason, 1));
        }
        assert_eq!(
            &COLUMNS[11..FIRST_REASON],
            [
                "invalid_impressions",
                "invalid_clicks",
                "invalid_conversions"
            ]
        );
    }

    /// The programmatic counters after the reasons.
    const PROGRAMMATIC: usize = 8;

    /// An auction with two bidders called: one bid and won, one timed out; then its
    /// impression. A second auction the direct line item won, and an auction no one filled.
    #[test]
    fn programmatic_auctions_count_per_bidder_and_fill() {
        let mut c = Counters::default();
        c.record_auction(auction::outcome(auction::AUCTION | auction::WON, 2), true);
        c.record_auction(auction::outcome(auction::TIMED_OUT, 0), true);
        c.record(EventKind::ProgrammaticImpression, 2_700_000);
        c.record_auction(
            auction::outcome(auction::AUCTION | auction::DIRECT, 1),
            true,
        );
        c.record(EventKind::Decision, 0);
        c.record_auction(auction::AUCTION, false);
        // A direct decision without an auction (a sponsorship that does not compete).
        c.record(EventKind::Decision, 0);
        assert_eq!(
            (
                c.programmatic_auctions,
                c.programmatic_requests,
                c.programmatic_bids,
                c.programmatic_timeouts,
                c.programmatic_wins,
                c.programmatic_direct_wins,
                c.programmatic_impressions
            ),
            (3, 3, 3, 1, 1, 1, 1)
        );
        assert_eq!(c.programmatic_revenue_micros(), 2_700);
        assert_eq!((c.spend_micros(), c.impressions), (0, 0), "no line item's");
        // Four ad requests: the sponsorship, the bid's, the direct winner's, the unfilled one.
        assert_eq!(c.ad_requests(), 4);
        assert_eq!(c.fill_rate(), Some(0.75));
        let mut direct_only = Counters::default();
        direct_only.record(EventKind::Decision, 0);
        assert_eq!(direct_only.fill_rate(), None);
    }

    #[test]
    fn values_round_trip_and_add_saturates() {
        let counting: [i64; COLUMN_COUNT] = std::array::from_fn(|i| i as i64 + 1);
        let mut c = Counters::from_values(counting);
        assert_eq!(c.values(), counting);
        c.add(&Counters::from_values([i64::MAX; COLUMN_COUNT]));
        assert_eq!(c.values(), [i64::MAX; COLUMN_COUNT]);
        assert!(Counters::default().is_zero());
        assert_eq!(Counters::default().ctr(), None);
    }
}
