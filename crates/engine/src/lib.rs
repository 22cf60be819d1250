//! The decision engine: given a snapshot and a request, which line item and creative win.
//!
//! Pure: no I/O, no awaits, no clock (time comes with the request), randomness from a generator
//! the caller passes in. Ad serving and bidding both call [`Engine::decide`].
//!
//! Invariants:
//! - The targeting index and the naive evaluator ([`expr::matches`]) agree on every expression
//!   and request; property tests check it. Correctness never depends on which path ran.
//! - Explain mode runs the same code as the hot path with an observer that records
//!   eliminations; with the silent observer that code compiles away.
//! - A higher tier wins outright: lower tiers are not even matched once a tier has a winner.
//!   Within a tier, at most [`MAX_CANDIDATES_PER_TIER`] matching line items are examined,
//!   starting at a random point of the tier's posting lists.
//! - Money is integer micros throughout: bids, floors and currency conversion
//!   ([`marquee_model::CurrencyRates`]) never go through floats.

mod controls;
pub mod expr;
mod index;
mod request;
mod select;

use std::ops::Range;
use std::sync::Arc;

use marquee_model::{
    Channel, CreativeId, Currency, CurrencyRates, Format, LineItemId, Micros, Size, Tier,
};
use marquee_snapshot::Snapshot;

pub use controls::{
    Control, ControlArray, FrequencyCaps, FullSpeed, LocalCaps, NoCaps, Pacing, user_key,
};
pub use expr::LocalTime;
pub use index::Scratch;
pub use request::{
    Blocked, Deal, Device, Floor, Geo, ImageNeed, MediaRules, NativeNeeds, Request, Slot, TextNeed,
    User,
};
pub use select::{Elimination, MAX_CANDIDATES_PER_TIER, Outcome, Verdict};

use index::{Index, IndexInput, MatchContext};

/// What the engine decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub line_item: LineItemId,
    pub creative: CreativeId,
    pub tier: Tier,
    /// The bid as CPM: the line item's value (its CPM price, or CPC price × expected CTR ×
    /// 1000) times its bid multiplier, converted into `currency` and rounded down.
    pub bid_cpm: Micros,
    /// The request's bid currency, or the line item's price currency when it names none.
    pub currency: Currency,
    /// The deal the bid is for, as a position in `request.slot.deals`; `None` for the open
    /// auction (and for ad requests).
    pub deal: Option<usize>,
    /// What the creative fills (OpenRTB `mtype`: banner 1, video 2, audio 3, native 4).
    pub format: Format,
    /// The creative's size; `None` for creatives without one (native, video, audio).
    pub size: Option<Size>,
}

/// Everything a decision needs besides the request; the caller owns and reuses it.
pub struct Context<'a, R> {
    pub rng: &'a mut R,
    pub caps: &'a dyn FrequencyCaps,
    pub pacing: &'a dyn Pacing,
    /// Converts line items' prices and floors into the bid currency.
    pub rates: &'a CurrencyRates,
    pub scratch: &'a mut Scratch,
}

impl<R> std::fmt::Debug for Context<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

static NEXT_GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// One creative a line item may serve, resolved when the engine is built: the creative's index
/// in the snapshot, its weight in this line item's rotation, and when it may serve here (unix
/// seconds, end exclusive; the whole time for a creative uploaded under the line item).
#[derive(Debug, Clone, Copy)]
struct CreativeUse {
    creative: u32,
    weight: u32,
    start: i64,
    end: i64,
}

/// A snapshot with its targeting index, ready to decide. Immutable; share it behind an `Arc`
/// and build a new one for a new snapshot.
#[derive(Debug)]
pub struct Engine {
    snapshot: Arc<Snapshot>,
    /// Unique per engine in the process (from 1), so that a worker's cached local times, kept
    /// per zone number, are dropped when a new engine numbers its zones anew.
    generation: u64,
    index: Index,
    zones: Vec<jiff::tz::TimeZone>,
    /// Zone index of each line item.
    line_item_zones: Vec<u16>,
    /// Creatives of each line item, as a range of `creatives_by_line_item`.
    creative_ranges: Vec<Range<u32>>,
    /// The creatives each line item may serve, grouped by line item.
    creatives_by_line_item: Vec<CreativeUse>,
    /// Index of each line item's campaign in the snapshot.
    line_item_campaigns: Vec<Option<u32>>,
    /// Index of each line item's advertiser in the snapshot.
    line_item_advertisers: Vec<Option<u32>>,
}

impl Engine {
    /// Builds the index for a snapshot.
    pub fn new(snapshot: Arc<Snapshot>) -> Engine {
        let data = &snapshot.data;
        let mut zones: Vec<jiff::tz::TimeZone> = Vec::new();
        let mut zone_names: Vec<&str> = Vec::new();
        let line_item_zones: Vec<u16> = data
            .line_items
            .iter()
            .map(|li| {
                let position = zone_names.iter().position(|z| *z == li.time_zone);
                let position = position.unwrap_or_else(|| {
                    zone_names.push(&li.time_zone);
                    // The snapshot compiler drops line items whose zone does not resolve.
                    zones.push(
                        jiff::tz::TimeZone::get(&li.time_zone).unwrap_or(jiff::tz::TimeZone::UTC),
                    );
                    zone_names.len() - 1
                });
                u16::try_from(position).unwrap_or(u16::MAX)
            })
            .collect();

        let mut creatives_by_line_item = Vec::with_capacity(data.creatives.len());
        let mut creative_ranges = Vec::with_capacity(data.line_items.len());
        let mut order: Vec<u32> = (0..to_u32(data.creatives.len())).collect();
        order.sort_by_key(|&c| data.creatives[c as usize].line_item_id);
        let mut next = 0;
        let mut next_assignment = 0;
        for line_item in &data.line_items {
            let start = to_u32(creatives_by_line_item.len());
            while next < order.len()
                && data.creatives[order[next] as usize].line_item_id < line_item.id
            {
                next += 1;
            }
            while next < order.len()
                && data.creatives[order[next] as usize].line_item_id == line_item.id
            {
                let creative = order[next];
                creatives_by_line_item.push(CreativeUse {
                    creative,
                    weight: data.creatives[creative as usize].weight,
                    start: i64::MIN,
                    end: i64::MAX,
                });
                next += 1;
            }
            // Then the library creatives assigned to it, with the assignment's weight and
            // flight (the snapshot lists them by line item, both in the snapshot).
            while next_assignment < data.assignments.len()
                && data.assignments[next_assignment].line_item_id < line_item.id
            {
                next_assignment += 1;
            }
            while next_assignment < data.assignments.len()
                && data.assignments[next_assignment].line_item_id == line_item.id
            {
                let a = &data.assignments[next_assignment];
                if let Some(creative) = index_of(&data.creatives, &a.creative_id, |c| c.id) {
                    creatives_by_line_item.push(CreativeUse {
                        creative,
                        weight: a.weight,
                        start: a.start.unwrap_or(i64::MIN),
                        end: a.end.unwrap_or(i64::MAX),
                    });
                }
                next_assignment += 1;
            }
            creative_ranges.push(start..to_u32(creatives_by_line_item.len()));
        }
        let line_item_campaigns = data
            .line_items
            .iter()
            .map(|li| index_of(&data.campaigns, &li.campaign_id, |c| c.id))
            .collect();
        let line_item_advertisers = data
            .line_items
            .iter()
            .map(|li| index_of(&data.advertisers, &li.advertiser_id, |a| a.id))
            .collect();
        let inputs: Vec<IndexInput<'_>> = data
            .line_items
            .iter()
            .zip(&line_item_zones)
            .map(|(li, zone)| IndexInput {
                targeting: li.targeting.as_ref(),
                placements: &li.placements,
                channels: li.channels,
                deals: &li.deals,
                tier: li.tier,
                zone: *zone,
            })
            .collect();
        let index = Index::build(&inputs);
        drop(inputs);
        Engine {
            snapshot,
            generation: NEXT_GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            index,
            zones,
            line_item_zones,
            creative_ranges,
            creatives_by_line_item,
            line_item_campaigns,
            line_item_advertisers,
        }
    }

    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.snapshot
    }

    /// The position of a line item in the snapshot, which [`Pacing`] is indexed by.
    pub fn line_item_index(&self, id: LineItemId) -> Option<usize> {
        self.snapshot
            .data
            .line_items
            .binary_search_by_key(&id, |li| li.id)
            .ok()
    }

    /// Chooses a line item and creative for the request, or `None` if nothing may serve.
    pub fn decide<R: rand::Rng>(
        &self,
        request: &Request<'_>,
        context: &mut Context<'_, R>,
    ) -> Option<Decision> {
        let request = request.on_its_channel();
        select::select(self, &request, context, &mut select::Silent)
    }

    /// The same decision, plus for every line item in the snapshot the first rule that
    /// eliminated it (or that it won). Slower: it evaluates every line item's targeting.
    pub fn explain<R: rand::Rng>(
        &self,
        request: &Request<'_>,
        context: &mut Context<'_, R>,
    ) -> (Option<Decision>, Vec<Verdict>) {
        let request = request.on_its_channel();
        let mut recorder = select::Recorder::new(self, &request);
        let decision = select::select(self, &request, context, &mut recorder);
        (decision, recorder.finish(self, decision.map(|d| d.tier)))
    }

    /// Indices of the line items whose channel, deals, links and targeting accept the request
    /// (all tiers, no candidate cap), through the index; left in `scratch`, returned for
    /// convenience.
    pub fn matching<'s>(&self, request: &Request<'_>, scratch: &'s mut Scratch) -> &'s [u32] {
        let request = request.on_its_channel();
        let ctx = self.match_context(&request);
        self.index.matching(&ctx, scratch);
        &scratch.matched
    }

    /// The same set as [`Engine::matching`], by evaluating every line item naively; for tests
    /// and explain mode.
    pub fn matching_naively(&self, request: &Request<'_>) -> Vec<u32> {
        let request = request.on_its_channel();
        (0..self.snapshot.data.line_items.len())
            .filter(|&i| self.blame(&request, i).is_none())
            .map(to_u32)
            .collect()
    }

    /// Why a line item does not take part in the request (its channels, deals, placement
    /// links or targeting), or `None` if it does. `request` is already on its channel.
    pub(crate) fn blame(&self, request: &Request<'_>, line_item: usize) -> Option<Elimination> {
        let li = &self.snapshot.data.line_items[line_item];
        if !li.channels.contains(request.channel) {
            return Some(Elimination::Channel);
        }
        match request.channel {
            Channel::Direct => {
                if !li.placements.is_empty()
                    && !request
                        .placement
                        .is_some_and(|p| li.placements.contains(&p))
                {
                    return Some(Elimination::Targeting("placement (not linked)".to_owned()));
                }
            }
            Channel::Exchange => {
                let admitted = if li.deals.is_empty() {
                    !request.slot.private_auction
                } else {
                    request
                        .slot
                        .deals
                        .iter()
                        .any(|offered| li.deals.iter().any(|d| d == offered.id))
                };
                if !admitted {
                    return Some(Elimination::Deal);
                }
            }
        }
        let expr = li.targeting.as_ref()?;
        let local = LocalTime::of(
            request.now,
            &self.zones[usize::from(self.line_item_zones[line_item])],
        );
        expr::blame(expr, request, local).map(Elimination::Targeting)
    }

    pub(crate) fn match_context<'e, 'r>(
        &'e self,
        request: &'e Request<'r>,
    ) -> MatchContext<'e, 'r> {
        MatchContext {
            request,
            zones: &self.zones,
            line_item_zones: &self.line_item_zones,
            generation: self.generation,
        }
    }

    /// Bytes of memory the targeting index holds (not counting the snapshot itself).
    pub fn index_heap_bytes(&self) -> usize {
        self.index.heap_bytes()
    }
}

/// Sizes in this crate are bounded by snapshot lengths, which fit in u32 (ids are positions).
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The index of the entry with `key` in `list`, sorted by that key.
fn index_of<T, K: Ord>(list: &[T], key: &K, key_of: impl FnMut(&T) -> K) -> Option<u32> {
    list.binary_search_by_key(key, key_of).ok().map(to_u32)
}
