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
//! - A higher tier wins outright: lower tiers are not even checked once a tier has a winner.

mod controls;
pub mod expr;
mod index;
mod request;
mod select;

use std::ops::Range;
use std::sync::Arc;

use marquee_model::{CreativeId, LineItemId, Micros, Tier};
use marquee_snapshot::Snapshot;

pub use controls::{
    Control, ControlArray, FrequencyCaps, FullSpeed, LocalCaps, NoCaps, Pacing, user_key,
};
pub use expr::LocalTime;
pub use index::Scratch;
pub use request::{Device, Floor, Geo, Request, Slot, User};
pub use select::{Elimination, Outcome, Verdict};

use index::{Index, IndexInput, MatchContext};

/// What the engine decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub line_item: LineItemId,
    pub creative: CreativeId,
    pub tier: Tier,
    /// The line item's value as CPM, times its bid multiplier, in its price currency.
    pub bid_cpm: Micros,
}

/// Everything a decision needs besides the request; the caller owns and reuses it.
pub struct Context<'a, R> {
    pub rng: &'a mut R,
    pub caps: &'a dyn FrequencyCaps,
    pub pacing: &'a dyn Pacing,
    pub scratch: &'a mut Scratch,
}

impl<R> std::fmt::Debug for Context<'_, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").finish_non_exhaustive()
    }
}

/// A snapshot with its targeting index, ready to decide. Immutable; share it behind an `Arc`
/// and build a new one for a new snapshot.
#[derive(Debug)]
pub struct Engine {
    snapshot: Arc<Snapshot>,
    index: Index,
    zones: Vec<jiff::tz::TimeZone>,
    /// Zone index of each line item.
    line_item_zones: Vec<u16>,
    /// Creatives of each line item, as a range of `creatives_by_line_item`.
    creative_ranges: Vec<Range<u32>>,
    /// Indices into the snapshot's creatives, grouped by line item.
    creatives_by_line_item: Vec<u32>,
    /// Index of each line item's campaign in the snapshot.
    line_item_campaigns: Vec<Option<u32>>,
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
                creatives_by_line_item.push(order[next]);
                next += 1;
            }
            creative_ranges.push(start..to_u32(creatives_by_line_item.len()));
        }
        let line_item_campaigns = data
            .line_items
            .iter()
            .map(|li| {
                data.campaigns
                    .binary_search_by_key(&li.campaign_id, |c| c.id)
                    .ok()
                    .map(to_u32)
            })
            .collect();
        let inputs: Vec<IndexInput<'_>> = data
            .line_items
            .iter()
            .zip(&line_item_zones)
            .map(|(li, zone)| IndexInput {
                targeting: li.targeting.as_ref(),
                placements: &li.placements,
                zone: *zone,
            })
            .collect();
        let index = Index::build(&inputs);
        drop(inputs);
        Engine {
            snapshot,
            index,
            zones,
            line_item_zones,
            creative_ranges,
            creatives_by_line_item,
            line_item_campaigns,
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
        self.matching(request, context.scratch);
        select::select(self, request, context, &mut select::Silent)
    }

    /// The same decision, plus for every line item in the snapshot the first rule that
    /// eliminated it (or that it won). Slower: it evaluates every line item's targeting.
    pub fn explain<R: rand::Rng>(
        &self,
        request: &Request<'_>,
        context: &mut Context<'_, R>,
    ) -> (Option<Decision>, Vec<Verdict>) {
        self.matching(request, context.scratch);
        let mut recorder = select::Recorder::new(self, request, context.scratch);
        let decision = select::select(self, request, context, &mut recorder);
        (decision, recorder.finish(self))
    }

    /// Indices of the line items whose targeting (and placement links) match, through the
    /// index; left in `scratch`, returned for convenience.
    pub fn matching<'s>(&self, request: &Request<'_>, scratch: &'s mut Scratch) -> &'s [u32] {
        let ctx = self.match_context(request);
        self.index.matching(&ctx, scratch);
        &scratch.matched
    }

    /// The same set as [`Engine::matching`], by evaluating every line item naively; for tests
    /// and explain mode.
    pub fn matching_naively(&self, request: &Request<'_>) -> Vec<u32> {
        (0..self.snapshot.data.line_items.len())
            .filter(|&i| self.targeting_blame(request, i).is_none())
            .map(to_u32)
            .collect()
    }

    /// Why a line item's targeting or links reject the request, or `None` if they accept it.
    pub(crate) fn targeting_blame(
        &self,
        request: &Request<'_>,
        line_item: usize,
    ) -> Option<String> {
        let li = &self.snapshot.data.line_items[line_item];
        if !li.placements.is_empty()
            && !request
                .placement
                .is_some_and(|p| li.placements.contains(&p))
        {
            return Some("placement (not linked)".to_owned());
        }
        let expr = li.targeting.as_ref()?;
        let local = LocalTime::of(
            request.now,
            &self.zones[usize::from(self.line_item_zones[line_item])],
        );
        expr::blame(expr, request, local)
    }

    fn match_context<'e, 'r>(&'e self, request: &'e Request<'r>) -> MatchContext<'e, 'r> {
        MatchContext {
            request,
            zones: &self.zones,
            line_item_zones: &self.line_item_zones,
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
