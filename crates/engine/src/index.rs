//! The targeting index: a conjunction index in the manner of Whang et al., "Indexing Boolean
//! Expressions" (VLDB 2009), so that matching a request reads only the posting lists of the
//! request's own attribute values.
//!
//! Build: each line item's expression (conjoined with "placement is one of the linked ones"
//! when it has links) is put in disjunctive normal form. Every literal "attribute ∈ values" or
//! "attribute ∉ values" over an indexable attribute becomes a list of term ids (one term per
//! attribute and value; day and hour per time zone; each key-value key an attribute of its
//! own). Literals the index cannot take (URL prefixes, IP networks, geo radius) stay residuals,
//! checked with the naive evaluator. Each conjunction is posted under the terms of ONE of its ∈
//! literals, the one least likely to hold (naming the smallest share of its attribute's values);
//! a conjunction without ∈ literals goes to a list read for every request.
//!
//! Channels and deals are literals too: a conjunction for our own placements carries
//! "placement ∈ links" or, without links, "access is direct"; one for exchanges carries "deal ∈
//! the line item's deals" or, without deals, "access is open auction", a term an exchange
//! request has only when its imp is not a private auction. Exchange requests never carry our
//! placement or site (the engine clears them), so a link admits ad requests only. Deal literals are always the anchor: a deal id
//! appears only in the requests that offer it.
//!
//! Each anchor list is laid out by tier, highest first, with a checkpoint every
//! [`MARK_STRIDE`] programs, so that selection can match one tier at a time and stop early.
//!
//! Match: mark the request's terms, read the posting lists of those terms only, and verify
//! each conjunction found: every ∈ literal has a marked term, no ∉ literal has one, every
//! residual holds. An expression too large for DNF becomes one conjunction whose whole
//! expression is a residual, so correctness never depends on the index. Matching one tier may
//! stop after a number of matches (the candidate cap); it then starts at a random checkpoint
//! of the tier's lists and wraps around, so that the line items cut off differ from request
//! to request.
//!
//! Whang et al. count matched ∈ literals per conjunction over K-partitioned lists instead of
//! verifying; built that way here first, the traversal walked the dense lists (a device type
//! every line item names, a popular country) and cost 312 µs per request at 100,000 line items
//! against 8 µs at 1,000 (perf: 57% in cursor skipping). Anchoring on the most selective
//! literal reads only short lists where targeting is selective.

use marquee_model::{Channel, Format, Targeting, Tier};
use rustc_hash::FxHashMap;

use crate::expr::{LocalSpan, LocalTime, leaf_matches};
use crate::request::{Request, domain_suffixes};

/// A DNF with more conjunctions than this is not expanded (see module docs).
const MAX_CONJUNCTIONS: usize = 64;
const MAX_LITERALS: usize = 32;
/// Programs between two checkpoints of a list: where a capped scan may start.
pub(crate) const MARK_STRIDE: u32 = 8;
/// Tiers, each a part of every list.
pub(crate) const TIER_COUNT: usize = 4;

/// The part of every list that holds a tier's conjunctions: 0 for sponsorship, 3 for house.
pub(crate) fn tier_slot(tier: Tier) -> usize {
    match tier {
        Tier::Sponsorship => 0,
        Tier::Standard => 1,
        Tier::Remnant => 2,
        Tier::House => 3,
    }
}

/// Values of [`Attr::Access`].
const DIRECT: u64 = 0;
const OPEN_AUCTION: u64 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Attr {
    /// How the request may be bought: our tags ([`DIRECT`]) or an exchange's open auction
    /// ([`OPEN_AUCTION`]).
    Access,
    /// A deal an exchange offers.
    Deal,
    Placement,
    Site,
    Domain,
    Country,
    Region,
    City,
    Metro,
    Postal,
    Asn,
    ConnectionType,
    DeviceType,
    Os,
    Browser,
    Language,
    Segment,
    Size,
    Format,
    Hour(u16),
    DayOfWeek(u16),
    KeyValue(u32),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Value<'t> {
    Int(u64),
    Str(&'t str),
}

/// A residual literal of one conjunction: evaluated naively after retrieval.
#[derive(Debug)]
struct Residual {
    expr: Targeting,
    positive: bool,
}

/// One line item as the index sees it.
#[derive(Debug)]
pub(crate) struct IndexInput<'s> {
    pub targeting: Option<&'s Targeting>,
    pub placements: &'s [marquee_model::PlacementId],
    pub channels: marquee_snapshot::Channels,
    pub deals: &'s [String],
    pub tier: Tier,
    /// Index of the line item's zone in the engine's zone list.
    pub zone: u16,
}

/// A tier's part of one list: its programs, and its checkpoints in `Index::marks`.
#[derive(Debug, Clone, Copy, Default)]
struct Segment {
    start: u32,
    end: u32,
    first_mark: u32,
    marks: u32,
}

#[derive(Debug, Default)]
pub(crate) struct Index {
    /// The conjunctions posted under each term (its anchor list), per tier.
    lists: Vec<[Segment; TIER_COUNT]>,
    /// Conjunctions with no ∈ literal, verified for every request, per tier.
    unanchored: [Segment; TIER_COUNT],
    /// Offsets in `programs` of every `MARK_STRIDE`-th program of each segment.
    marks: Vec<u32>,
    /// Conjunctions as small programs, each anchor list's one after another, so that reading
    /// a list is one sequential scan (a conjunction anchored on several terms is copied under
    /// each). A program is: its length, line item, first residual, residual count, literal
    /// count, then per literal a header (bit 31: positive; low bits: term count) and its terms.
    programs: Vec<u32>,
    residuals: Vec<Residual>,
    attr_ids: FxHashMap<Attr, u32>,
    int_terms: FxHashMap<(u32, u64), u32>,
    str_terms: FxHashMap<u32, FxHashMap<Box<str>, u32>>,
    key_attrs: FxHashMap<Box<str>, u32>,
    /// Zones with day or hour literals in the index: (zone, hour attr, day attr).
    zone_attrs: Vec<(u16, Option<u32>, Option<u32>)>,
    term_count: u32,
}

const POSITIVE: u32 = 1 << 31;

/// Per-request working memory, reused across requests by one worker.
#[derive(Debug, Default)]
pub struct Scratch {
    /// The request's terms.
    terms: Vec<u32>,
    /// `term_stamp[t] == epoch` when the request has term `t`.
    term_stamp: Vec<u32>,
    /// `line_item_stamp[i] == epoch` when line item `i` matched already.
    line_item_stamp: Vec<u32>,
    epoch: u32,
    pub(crate) matched: Vec<u32>,
    pub(crate) survivors: Vec<(u32, crate::select::Bid)>,
    /// A tier's candidates in the order they are drawn from: by bid, best first, in tiers
    /// that go to the highest bid; all at zero in reserved tiers.
    pub(crate) ranked: Vec<(crate::select::Rank, u32)>,
    /// Local times per zone, kept across requests while they hold, for the engine of
    /// generation `zone_generation` (another engine numbers its zones differently).
    zone_times: Vec<Option<LocalSpan>>,
    zone_generation: u64,
    /// Per tier, the non-empty segments of the request's lists, which its scan reads.
    segments: [Vec<Segment>; TIER_COUNT],
    /// What this request's blocks decided per advertiser and campaign, worked out once.
    pub(crate) blocks: crate::select::BlockMemo,
}

impl Scratch {
    /// Starts a request: a new epoch invalidates every stamp at once.
    fn begin(&mut self, terms: usize, line_items: usize) {
        if self.term_stamp.len() < terms {
            self.term_stamp.resize(terms, 0);
        }
        if self.line_item_stamp.len() < line_items {
            self.line_item_stamp.resize(line_items, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.term_stamp.iter_mut().for_each(|s| *s = 0);
            self.line_item_stamp.iter_mut().for_each(|s| *s = 0);
            self.blocks.clear();
            self.epoch = 1;
        }
    }

    /// The current request's stamp: never 0 once a request has begun.
    pub(crate) fn epoch(&self) -> u32 {
        self.epoch
    }
}

/// A literal during building.
#[derive(Clone, Copy)]
struct Literal<'s> {
    expr: &'s Targeting,
    positive: bool,
}

struct BuiltConj<'s> {
    line_item: u32,
    tier: usize,
    literals: Vec<(bool, Attr, Vec<Value<'s>>)>,
    residuals: Vec<Residual>,
}

impl Index {
    pub(crate) fn build(inputs: &[IndexInput<'_>]) -> Index {
        let mut conjs = Vec::new();
        let mut keys = Keys::default();
        for (line_item, input) in inputs.iter().enumerate() {
            let line_item = u32::try_from(line_item).unwrap_or(u32::MAX);
            add_line_item(&mut conjs, &mut keys, line_item, input);
        }
        let mut index = Index::default();
        // Each literal as (positive, attribute id, term ids).
        let conj_terms: Vec<Vec<(bool, u32, Vec<u32>)>> = conjs
            .iter()
            .map(|conj| {
                conj.literals
                    .iter()
                    .map(|(positive, attr, values)| {
                        let terms = values
                            .iter()
                            .map(|value| index.term(*attr, value.clone()))
                            .collect();
                        (*positive, index.attr(*attr), terms)
                    })
                    .collect()
            })
            .collect();
        // How many values each attribute takes in the index: a literal naming v of n values is
        // estimated to hold for a share v / n of requests.
        let mut values_per_attr: FxHashMap<u32, u32> = FxHashMap::default();
        for &(attr, _) in index.int_terms.keys() {
            *values_per_attr.entry(attr).or_default() += 1;
        }
        for (attr, terms) in &index.str_terms {
            *values_per_attr.entry(*attr).or_default() += to_u32(terms.len());
        }
        for (key, number) in keys {
            if let Some(attr) = index.attr_ids.get(&Attr::KeyValue(number)) {
                index.key_attrs.insert(key.into(), *attr);
            }
        }
        let mut anchored: Vec<Vec<u32>> = vec![Vec::new(); index.term_count as usize];
        let mut unanchored = Vec::new();
        // Every program once, back to back, before they are laid out per anchor list.
        let mut programs: Vec<u32> = Vec::new();
        let mut starts: Vec<u32> = Vec::with_capacity(conj_terms.len());
        let mut tiers: Vec<usize> = Vec::with_capacity(conj_terms.len());
        let deal_attr = index.attr_ids.get(&Attr::Deal).copied();
        let access_attr = index.attr_ids.get(&Attr::Access).copied();
        for (conj, literals) in conjs.into_iter().zip(conj_terms) {
            let id = to_u32(starts.len());
            starts.push(to_u32(programs.len()));
            tiers.push(conj.tier);
            // Post under the ∈ literal least likely to hold, so few requests retrieve it. A
            // deal is offered by few requests whatever the number of deals; access holds for
            // every request of its channel.
            let share = |attr: &u32, terms: &Vec<u32>| {
                if Some(*attr) == deal_attr {
                    return 0.0;
                }
                if Some(*attr) == access_attr {
                    return 1.0;
                }
                terms.len() as f64
                    / f64::from(values_per_attr.get(attr).copied().unwrap_or(1).max(1))
            };
            let anchor = literals
                .iter()
                .filter(|(positive, _, _)| *positive)
                .min_by(|a, b| share(&a.1, &a.2).total_cmp(&share(&b.1, &b.2)));
            match anchor {
                Some((_, _, terms)) => {
                    for &term in terms {
                        anchored[term as usize].push(id);
                    }
                }
                None => unanchored.push(id),
            }
            let residual_first = to_u32(index.residuals.len());
            let residual_count = to_u32(conj.residuals.len());
            index.residuals.extend(conj.residuals);
            let start = programs.len();
            programs.extend([
                0,
                conj.line_item,
                residual_first,
                residual_count,
                to_u32(literals.len()),
            ]);
            for (positive, _, terms) in literals {
                programs.push(to_u32(terms.len()) | if positive { POSITIVE } else { 0 });
                programs.extend(terms);
            }
            programs[start] = to_u32(programs.len() - start);
        }
        let lay_out = |index: &mut Index, ids: &mut Vec<u32>| {
            // A conjunction is posted once per term even if a value repeats.
            ids.dedup();
            // Highest tier first; within a tier, in line item order.
            ids.sort_by_key(|&id| tiers[id as usize]);
            let mut segments = [Segment::default(); TIER_COUNT];
            let mut ids = ids.iter().peekable();
            for (slot, segment) in segments.iter_mut().enumerate() {
                segment.start = to_u32(index.programs.len());
                segment.first_mark = to_u32(index.marks.len());
                let mut count = 0;
                while let Some(&&id) = ids.peek() {
                    if tiers[id as usize] != slot {
                        break;
                    }
                    ids.next();
                    if count % MARK_STRIDE == 0 {
                        index.marks.push(to_u32(index.programs.len()));
                    }
                    count += 1;
                    let start = starts[id as usize] as usize;
                    let program = &programs[start..start + programs[start] as usize];
                    index.programs.extend_from_slice(program);
                }
                segment.end = to_u32(index.programs.len());
                segment.marks = to_u32(index.marks.len()) - segment.first_mark;
            }
            segments
        };
        index.unanchored = lay_out(&mut index, &mut unanchored);
        for mut ids in anchored {
            let segments = lay_out(&mut index, &mut ids);
            index.lists.push(segments);
        }
        index.programs.shrink_to_fit();
        index.marks.shrink_to_fit();
        index
    }

    fn attr(&mut self, attr: Attr) -> u32 {
        let next = u32::try_from(self.attr_ids.len()).unwrap_or(u32::MAX);
        let id = *self.attr_ids.entry(attr).or_insert(next);
        if id == next
            && let Attr::Hour(zone) | Attr::DayOfWeek(zone) = attr
        {
            let slot = match self.zone_attrs.iter().position(|z| z.0 == zone) {
                Some(slot) => slot,
                None => {
                    self.zone_attrs.push((zone, None, None));
                    self.zone_attrs.len() - 1
                }
            };
            match attr {
                Attr::Hour(_) => self.zone_attrs[slot].1 = Some(id),
                _ => self.zone_attrs[slot].2 = Some(id),
            }
        }
        id
    }

    fn term(&mut self, attr: Attr, value: Value<'_>) -> u32 {
        let attr = self.attr(attr);
        let next = self.term_count;
        let term = match value {
            Value::Int(v) => *self.int_terms.entry((attr, v)).or_insert(next),
            Value::Str(s) => *self
                .str_terms
                .entry(attr)
                .or_default()
                .entry(s.into())
                .or_insert(next),
        };
        if term == next {
            self.term_count += 1;
        }
        term
    }

    fn find_int(&self, attr: Attr, value: u64) -> Option<u32> {
        let attr = *self.attr_ids.get(&attr)?;
        self.int_terms.get(&(attr, value)).copied()
    }

    fn find_str(&self, attr: Attr, value: &str) -> Option<u32> {
        let attr = *self.attr_ids.get(&attr)?;
        self.find_str_in(attr, value)
    }

    fn find_str_in(&self, attr: u32, value: &str) -> Option<u32> {
        self.str_terms.get(&attr)?.get(value).copied()
    }

    /// Starts a request: marks its terms. Every line item counts as unmatched until a
    /// `match_tier` of this request finds it.
    pub(crate) fn begin(&self, ctx: &MatchContext<'_, '_>, scratch: &mut Scratch) {
        scratch.matched.clear();
        if scratch.zone_generation != ctx.generation || scratch.zone_times.len() != ctx.zones.len()
        {
            scratch.zone_times.clear();
            scratch.zone_times.resize(ctx.zones.len(), None);
            scratch.zone_generation = ctx.generation;
        }
        scratch.begin(self.term_count as usize, ctx.line_item_zones.len());
        self.request_terms(ctx, scratch);
        // Most terms have nothing in a given tier: one pass sorts out what each tier reads.
        for segments in &mut scratch.segments {
            segments.clear();
        }
        let lists = std::iter::once(&self.unanchored)
            .chain(scratch.terms.iter().map(|&t| &self.lists[t as usize]));
        for list in lists {
            for (slot, segment) in list.iter().enumerate() {
                if segment.marks > 0 {
                    scratch.segments[slot].push(*segment);
                }
            }
        }
    }

    /// Fills `scratch.matched` with the indices of the line items whose expression matches,
    /// each once, in no particular order.
    pub(crate) fn matching(&self, ctx: &MatchContext<'_, '_>, scratch: &mut Scratch) {
        self.begin(ctx, scratch);
        for slot in 0..TIER_COUNT {
            self.match_tier(ctx, scratch, slot, usize::MAX, 0);
        }
    }

    /// Appends to `scratch.matched` the line items of one tier (by [`tier_slot`]) that match
    /// the request begun, until `scratch.matched` holds `cap` of them. The scan starts at the
    /// checkpoint `draw` picks among all of the tier's checkpoints in the request's lists (the
    /// non-empty segments `begin` collected), and wraps around; with a cap no smaller than the
    /// matches, it finds them all.
    pub(crate) fn match_tier(
        &self,
        ctx: &MatchContext<'_, '_>,
        scratch: &mut Scratch,
        slot: usize,
        cap: usize,
        draw: u64,
    ) {
        let segments = std::mem::take(&mut scratch.segments[slot]);
        let total: u64 = segments.iter().map(|s| u64::from(s.marks)).sum();
        if total > 0 {
            let mut pick = draw % total;
            let first = segments
                .iter()
                .position(|s| {
                    let marks = u64::from(s.marks);
                    if pick < marks {
                        return true;
                    }
                    pick -= marks;
                    false
                })
                .unwrap_or(0);
            let start = segments[first];
            let resume = self.marks[(u64::from(start.first_mark) + pick) as usize];
            let others = segments[first + 1..]
                .iter()
                .chain(&segments[..first])
                .map(|s| (s.start, s.end));
            let ranges = std::iter::once((resume, start.end))
                .chain(others)
                .chain(std::iter::once((start.start, resume)));
            for (from, to) in ranges {
                if !self.scan(ctx, scratch, from, to, cap) {
                    break;
                }
            }
        }
        scratch.segments[slot] = segments;
    }

    /// Verifies the programs from offset `from` to `to`; false once `cap` matches are in.
    fn scan(
        &self,
        ctx: &MatchContext<'_, '_>,
        scratch: &mut Scratch,
        from: u32,
        to: u32,
        cap: usize,
    ) -> bool {
        let (mut at, end) = (from as usize, to as usize);
        while at < end {
            if scratch.matched.len() >= cap {
                return false;
            }
            let program = &self.programs[at..at + self.programs[at] as usize];
            self.verify(ctx, scratch, program);
            at += program.len();
        }
        scratch.matched.len() < cap
    }

    /// Collects and marks the request's terms.
    fn request_terms(&self, ctx: &MatchContext<'_, '_>, scratch: &mut Scratch) {
        let r = ctx.request;
        let mut terms = std::mem::take(&mut scratch.terms);
        terms.clear();
        let mut add = |found: Option<u32>| {
            if let Some(term) = found {
                terms.push(term);
            }
        };
        match r.channel {
            Channel::Direct => add(self.find_int(Attr::Access, DIRECT)),
            Channel::Exchange => {
                if !r.slot.private_auction {
                    add(self.find_int(Attr::Access, OPEN_AUCTION));
                }
                for deal in r.slot.deals {
                    add(self.find_str(Attr::Deal, deal.id));
                }
            }
        }
        add(r
            .placement
            .and_then(|p| self.find_int(Attr::Placement, p.0)));
        add(r.site.and_then(|s| self.find_int(Attr::Site, s.0)));
        if let Some(host) = r.domain {
            for suffix in domain_suffixes(host) {
                add(self.find_str(Attr::Domain, suffix));
            }
        }
        for (attr, value) in [
            (Attr::Country, r.geo.country),
            (Attr::Region, r.geo.region),
            (Attr::City, r.geo.city),
            (Attr::Postal, r.geo.postal),
            (Attr::Os, r.device.os),
            (Attr::Browser, r.device.browser),
            (Attr::Language, r.device.language),
        ] {
            add(value.and_then(|v| self.find_str(attr, v)));
        }
        for (attr, value) in [
            (Attr::Metro, r.geo.metro.map(u64::from)),
            (Attr::Asn, r.geo.asn.map(u64::from)),
            (
                Attr::ConnectionType,
                r.geo.connection_type.map(|t| t as u64),
            ),
            (Attr::DeviceType, r.device.device_type.map(|t| t as u64)),
        ] {
            add(value.and_then(|v| self.find_int(attr, v)));
        }
        for segment in r.user.segments {
            add(self.find_str(Attr::Segment, segment));
        }
        for size in r.slot.sizes {
            add(self.find_int(Attr::Size, size_key(size)));
        }
        for format in r.formats() {
            add(self.find_int(Attr::Format, format_key(*format)));
        }
        for (key, value) in r.key_values {
            if let Some(attr) = self.key_attrs.get(*key) {
                add(self.find_str_in(*attr, value));
            }
        }
        for &(zone, hour_attr, day_attr) in &self.zone_attrs {
            let local = ctx.local_time(zone, scratch);
            if let Some(attr) = hour_attr {
                add(self.int_terms.get(&(attr, u64::from(local.hour))).copied());
            }
            if let Some(attr) = day_attr {
                add(self.int_terms.get(&(attr, local.weekday as u64)).copied());
            }
        }
        terms.sort_unstable();
        terms.dedup();
        for &term in &terms {
            scratch.term_stamp[term as usize] = scratch.epoch;
        }
        scratch.terms = terms;
    }

    /// Checks one conjunction's program against the request; records its line item once.
    fn verify(&self, ctx: &MatchContext<'_, '_>, scratch: &mut Scratch, program: &[u32]) {
        let line_item = program[1] as usize;
        let (residual_first, residual_count) = (program[2] as usize, program[3] as usize);
        let mut at = 5;
        for _ in 0..program[4] {
            let header = program[at];
            let count = (header & !POSITIVE) as usize;
            let present = program[at + 1..at + 1 + count]
                .iter()
                .any(|&t| scratch.term_stamp[t as usize] == scratch.epoch);
            if present != (header & POSITIVE != 0) {
                return;
            }
            at += 1 + count;
        }
        if residual_count > 0 {
            let local = ctx.local_time(ctx.line_item_zones[line_item], scratch);
            let residuals = &self.residuals[residual_first..residual_first + residual_count];
            let holds = residuals.iter().all(|residual| {
                leaf_matches(&residual.expr, ctx.request, local) == residual.positive
            });
            if !holds {
                return;
            }
        }
        // Checked last: the stamp array is large and most conjunctions fail before this.
        if scratch.line_item_stamp[line_item] == scratch.epoch {
            return;
        }
        scratch.line_item_stamp[line_item] = scratch.epoch;
        scratch.matched.push(line_item as u32);
    }

    /// Bytes held by the index, for the benchmarks' memory figures.
    pub(crate) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.lists.capacity() * size_of::<[Segment; TIER_COUNT]>()
            + self.marks.capacity() * size_of::<u32>()
            + self.programs.capacity() * size_of::<u32>()
            + self.residuals.capacity() * size_of::<Residual>()
            + self.int_terms.capacity() * (size_of::<(u32, u64)>() + size_of::<u32>())
            + self
                .str_terms
                .values()
                .flat_map(|m| m.keys())
                .map(|k| k.len() + size_of::<Box<str>>() + size_of::<u32>())
                .sum::<usize>()
    }
}

/// What matching needs besides the index: the request and time zones.
pub(crate) struct MatchContext<'e, 'r> {
    pub request: &'e Request<'r>,
    pub zones: &'e [jiff::tz::TimeZone],
    /// Zone index of each line item.
    pub line_item_zones: &'e [u16],
    /// The engine's generation ([`crate::Engine`]): unique per engine in the process.
    pub generation: u64,
}

impl MatchContext<'_, '_> {
    /// The request's local time in a zone, converted once per zone while it holds (a local
    /// hour at most) and reused by the worker's later requests.
    pub(crate) fn local_time(&self, zone: u16, scratch: &mut Scratch) -> LocalTime {
        let second = self.request.now.as_second();
        let slot = usize::from(zone);
        if let Some(Some(span)) = scratch.zone_times.get(slot)
            && span.holds_at(second)
        {
            return span.local;
        }
        let span = LocalSpan::of(self.request.now, &self.zones[slot]);
        if let Some(cached) = scratch.zone_times.get_mut(slot) {
            *cached = Some(span);
        }
        span.local
    }
}

fn size_key(size: &marquee_model::Size) -> u64 {
    (u64::from(size.w) << 32) | u64::from(size.h)
}

fn format_key(format: Format) -> u64 {
    format as u64
}

/// Adds the conjunctions of one line item.
fn add_line_item<'s>(
    conjs: &mut Vec<BuiltConj<'s>>,
    keys: &mut Keys<'s>,
    line_item: u32,
    input: &IndexInput<'s>,
) {
    let dnf = match input.targeting {
        None => Some(vec![Vec::new()]),
        Some(expr) => dnf(expr, true),
    };
    let tier = tier_slot(input.tier);
    for channel in input.channels.iter() {
        let start = || {
            let mut conj = BuiltConj {
                line_item,
                tier,
                literals: Vec::new(),
                residuals: Vec::new(),
            };
            conj.literals.extend(channel_literals(channel, input));
            conj
        };
        let Some(dnf) = &dnf else {
            // Too large to expand: one conjunction, retrieved through its channel literals
            // and evaluated whole.
            let mut conj = start();
            if let Some(expr) = input.targeting {
                conj.residuals.push(Residual {
                    expr: expr.clone(),
                    positive: true,
                });
            }
            conjs.push(conj);
            continue;
        };
        for literals in dnf {
            let mut conj = start();
            for literal in literals {
                conj.add(*literal, input.zone, keys);
            }
            conjs.push(conj);
        }
    }
}

/// The literals that let a line item into a channel: for our tags, the placement is linked
/// (or, without links, access is direct); for exchanges, one of its deals is offered, or
/// without deals, the imp is open to all bidders.
fn channel_literals<'s>(
    channel: Channel,
    input: &IndexInput<'s>,
) -> Vec<(bool, Attr, Vec<Value<'s>>)> {
    match channel {
        // Exchange requests have no placement of ours, so a link says "direct" already.
        Channel::Direct if input.placements.is_empty() => {
            vec![(true, Attr::Access, vec![Value::Int(DIRECT)])]
        }
        Channel::Direct => {
            let linked = input.placements.iter().map(|p| Value::Int(p.0)).collect();
            vec![(true, Attr::Placement, linked)]
        }
        Channel::Exchange if input.deals.is_empty() => {
            vec![(true, Attr::Access, vec![Value::Int(OPEN_AUCTION)])]
        }
        Channel::Exchange => {
            let deals = input.deals.iter().map(|d| Value::Str(d)).collect();
            vec![(true, Attr::Deal, deals)]
        }
    }
}

impl<'s> BuiltConj<'s> {
    fn add(&mut self, literal: Literal<'s>, zone: u16, keys: &mut Keys<'s>) {
        let Some((attr, values)) = indexable(literal.expr, zone, keys) else {
            self.residuals.push(Residual {
                expr: literal.expr.clone(),
                positive: literal.positive,
            });
            return;
        };
        self.literals.push((literal.positive, attr, values));
    }
}

/// Key-value keys seen while building, numbered so that each key is an attribute of its own.
type Keys<'s> = FxHashMap<&'s str, u32>;

/// The attribute and values of a leaf the index can take.
fn indexable<'s>(
    leaf: &'s Targeting,
    zone: u16,
    keys: &mut Keys<'s>,
) -> Option<(Attr, Vec<Value<'s>>)> {
    let strs = |attr, list: &'s [String]| -> Option<(Attr, Vec<Value<'s>>)> {
        Some((attr, list.iter().map(|s| Value::Str(s)).collect()))
    };
    match leaf {
        Targeting::Placement(ids) => Some((
            Attr::Placement,
            ids.iter().map(|i| Value::Int(i.0)).collect(),
        )),
        Targeting::Site(ids) => Some((Attr::Site, ids.iter().map(|i| Value::Int(i.0)).collect())),
        Targeting::Domain(list) => strs(Attr::Domain, list),
        Targeting::Country(list) => strs(Attr::Country, list),
        Targeting::Region(list) => strs(Attr::Region, list),
        Targeting::City(list) => strs(Attr::City, list),
        Targeting::Postal(list) => strs(Attr::Postal, list),
        Targeting::Metro(codes) => Some((
            Attr::Metro,
            codes.iter().map(|c| Value::Int(u64::from(*c))).collect(),
        )),
        Targeting::Asn(numbers) => Some((
            Attr::Asn,
            numbers.iter().map(|n| Value::Int(u64::from(*n))).collect(),
        )),
        Targeting::ConnectionType(types) => Some((
            Attr::ConnectionType,
            types.iter().map(|t| Value::Int(*t as u64)).collect(),
        )),
        Targeting::Os(list) => strs(Attr::Os, list),
        Targeting::Browser(list) => strs(Attr::Browser, list),
        Targeting::Language(list) => strs(Attr::Language, list),
        Targeting::Segment(list) => strs(Attr::Segment, list),
        Targeting::DeviceType(types) => Some((
            Attr::DeviceType,
            types.iter().map(|t| Value::Int(*t as u64)).collect(),
        )),
        Targeting::Size(sizes) => Some((
            Attr::Size,
            sizes.iter().map(|s| Value::Int(size_key(s))).collect(),
        )),
        Targeting::Format(formats) => Some((
            Attr::Format,
            formats.iter().map(|f| Value::Int(format_key(*f))).collect(),
        )),
        Targeting::DayOfWeek(days) => Some((
            Attr::DayOfWeek(zone),
            days.iter().map(|d| Value::Int(*d as u64)).collect(),
        )),
        Targeting::Hour(ranges) => {
            let mut hours = [false; 24];
            for range in ranges {
                for hour in range.from..range.to.min(24) {
                    hours[usize::from(hour)] = true;
                }
            }
            let values = (0..24u64)
                .filter(|h| hours[*h as usize])
                .map(Value::Int)
                .collect();
            Some((Attr::Hour(zone), values))
        }
        Targeting::KeyValue(kv) => {
            let next = u32::try_from(keys.len()).unwrap_or(u32::MAX);
            let key = *keys.entry(kv.key.as_str()).or_insert(next);
            strs(Attr::KeyValue(key), &kv.values)
        }
        Targeting::PageUrl(_)
        | Targeting::GeoRadius(_)
        | Targeting::Ip(_)
        | Targeting::All(_)
        | Targeting::Any(_)
        | Targeting::Not(_) => None,
    }
}

/// Disjunctive normal form of `expr` (negated when `positive` is false), or `None` when it
/// would exceed the size limits.
fn dnf(expr: &Targeting, positive: bool) -> Option<Vec<Vec<Literal<'_>>>> {
    match (expr, positive) {
        (Targeting::Not(child), _) => dnf(child, !positive),
        (Targeting::Any(children), true) | (Targeting::All(children), false) => {
            let mut out = Vec::new();
            for child in children {
                out.extend(dnf(child, positive)?);
                if out.len() > MAX_CONJUNCTIONS {
                    return None;
                }
            }
            Some(out)
        }
        (Targeting::All(children), true) | (Targeting::Any(children), false) => {
            let mut out = vec![Vec::new()];
            for child in children {
                let parts = dnf(child, positive)?;
                let mut product = Vec::with_capacity(out.len() * parts.len());
                for left in &out {
                    for right in &parts {
                        let mut conj: Vec<Literal<'_>> =
                            Vec::with_capacity(left.len() + right.len());
                        conj.extend(left.iter().copied());
                        conj.extend(right.iter().copied());
                        if conj.len() > MAX_LITERALS {
                            return None;
                        }
                        product.push(conj);
                    }
                }
                if product.len() > MAX_CONJUNCTIONS {
                    return None;
                }
                out = product;
            }
            Some(out)
        }
        (leaf, positive) => Some(vec![vec![Literal {
            expr: leaf,
            positive,
        }]]),
    }
}

/// Counts in this index are bounded by snapshot sizes, far below u32::MAX.
fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
