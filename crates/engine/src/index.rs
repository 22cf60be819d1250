//! The targeting index: the conjunction algorithm of Whang et al., "Indexing Boolean
//! Expressions" (VLDB 2009), so that matching a request reads only the posting lists of the
//! request's own attribute values.
//!
//! Build: each line item's expression (conjoined with "placement is one of the linked ones"
//! when it has links) is put in disjunctive normal form. Each conjunction keeps at most one
//! positive ("∈") literal per attribute in the index; its size K is the number of those. Every
//! negative ("∉") literal is indexed too. Literals the index cannot take (URL prefixes, IP
//! networks, geo radius, a second positive literal on an attribute, day/hour outside the
//! line item's zone) stay as residuals, checked after retrieval with the naive evaluator.
//! Conjunction ids are assigned in order of K, so each posting list (sorted by id, ∉ before ∈)
//! holds each K as one contiguous run.
//!
//! Match: for each K, one cursor per request attribute (the union of its values' lists; a
//! multi-valued attribute such as segments counts once per conjunction). A conjunction matches
//! when K cursors stand on it with ∈ entries and none with ∉. K = 0 conjunctions carry an ∈
//! entry in the always-present list Z. An expression too large for DNF becomes one conjunction
//! in Z whose whole expression is a residual, so correctness never depends on the index.

use std::ops::Range;

use marquee_model::{Format, Targeting};
use rustc_hash::FxHashMap;

use crate::expr::{LocalTime, leaf_matches};
use crate::request::{Request, domain_suffixes};

/// A DNF with more conjunctions than this is not expanded (see module docs).
const MAX_CONJUNCTIONS: usize = 64;
const MAX_LITERALS: usize = 32;
/// Marks the end of a posting list.
const END: u64 = u64::MAX;

/// Attributes with fixed ids; day/hour per zone and key-values per key get ids after these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Attr {
    Z,
    Placement,
    Site,
    Domain,
    Country,
    Region,
    City,
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
    /// Index of the line item's zone in the engine's zone list.
    pub zone: u16,
}

#[derive(Debug, Default)]
pub(crate) struct Index {
    /// Posting entries `(conjunction id << 1) | (1 for ∈, 0 for ∉)`, one list per term.
    postings: Vec<u64>,
    lists: Vec<Range<usize>>,
    /// First conjunction id of each K, plus one past the last.
    k_start: Vec<u32>,
    conj_line_item: Vec<u32>,
    conj_residuals: Vec<Range<u32>>,
    residuals: Vec<Residual>,
    attr_ids: FxHashMap<Attr, u32>,
    int_terms: FxHashMap<(u32, u64), u32>,
    str_terms: FxHashMap<u32, FxHashMap<Box<str>, u32>>,
    key_attrs: FxHashMap<Box<str>, u32>,
    /// Zones with day or hour literals in the index: (zone, hour attr, day attr).
    zone_attrs: Vec<(u16, Option<u32>, Option<u32>)>,
    z_term: u32,
    term_count: u32,
}

/// Per-request working memory, reused across requests by one worker.
#[derive(Debug, Default)]
pub struct Scratch {
    terms: Vec<(u32, u32)>,
    parts: Vec<Part>,
    cursors: Vec<Cursor>,
    pub(crate) matched: Vec<u32>,
    pub(crate) survivors: Vec<(u32, marquee_model::Micros)>,
    stamp: Vec<u32>,
    epoch: u32,
    pub(crate) zone_local: Vec<Option<LocalTime>>,
}

#[derive(Debug, Clone, Copy)]
struct Part {
    pos: usize,
    end: usize,
}

#[derive(Debug, Clone)]
struct Cursor {
    parts: Range<usize>,
    current: u64,
}

/// A literal during building.
#[derive(Clone, Copy)]
struct Literal<'s> {
    expr: &'s Targeting,
    positive: bool,
}

struct BuiltConj<'s> {
    line_item: u32,
    positives: Vec<(Attr, Vec<Value<'s>>)>,
    negatives: Vec<(Attr, Vec<Value<'s>>)>,
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
        // Ids in order of K, so each K is one run in every posting list.
        conjs.sort_by_key(|c: &BuiltConj<'_>| c.positives.len());
        let mut index = Index::default();
        index.z_term = index.term(Attr::Z, Value::Int(0));
        let mut entries: Vec<Vec<u64>> = vec![Vec::new()];
        let max_k = conjs.last().map_or(0, |c| c.positives.len());
        index.k_start = vec![0; max_k + 2];
        for (id, conj) in conjs.into_iter().enumerate() {
            let id = u32::try_from(id).unwrap_or(u32::MAX);
            let k = conj.positives.len();
            for start in &mut index.k_start[k + 1..] {
                *start = id + 1;
            }
            let mut push = |index: &mut Index, attr: Attr, value: Value<'_>, positive: bool| {
                let term = index.term(attr, value) as usize;
                if entries.len() <= term {
                    entries.resize_with(term + 1, Vec::new);
                }
                entries[term].push((u64::from(id) << 1) | u64::from(positive));
            };
            if k == 0 {
                push(&mut index, Attr::Z, Value::Int(0), true);
            }
            for (attr, values) in conj.positives {
                for value in values {
                    push(&mut index, attr, value, true);
                }
            }
            for (attr, values) in conj.negatives {
                for value in values {
                    push(&mut index, attr, value, false);
                }
            }
            index.conj_line_item.push(conj.line_item);
            let first = u32::try_from(index.residuals.len()).unwrap_or(u32::MAX);
            index.residuals.extend(conj.residuals);
            let last = u32::try_from(index.residuals.len()).unwrap_or(u32::MAX);
            index.conj_residuals.push(first..last);
        }
        for (key, number) in keys {
            if let Some(attr) = index.attr_ids.get(&Attr::KeyValue(number)) {
                index.key_attrs.insert(key.into(), *attr);
            }
        }
        entries.resize_with(index.term_count as usize, Vec::new);
        for mut list in entries {
            list.sort_unstable();
            list.dedup();
            let start = index.postings.len();
            index.postings.extend(list);
            index.lists.push(start..index.postings.len());
        }
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

    fn find_int(&self, attr: Attr, value: u64) -> Option<(u32, u32)> {
        let attr = *self.attr_ids.get(&attr)?;
        self.int_terms.get(&(attr, value)).map(|t| (attr, *t))
    }

    fn find_str(&self, attr: Attr, value: &str) -> Option<(u32, u32)> {
        let attr = *self.attr_ids.get(&attr)?;
        self.find_str_in(attr, value)
    }

    fn find_str_in(&self, attr: u32, value: &str) -> Option<(u32, u32)> {
        self.str_terms.get(&attr)?.get(value).map(|t| (attr, *t))
    }

    /// Fills `scratch.matched` with the indices of the line items whose expression matches,
    /// each once, in no particular order.
    pub(crate) fn matching(&self, ctx: &MatchContext<'_, '_>, scratch: &mut Scratch) {
        scratch.matched.clear();
        scratch.zone_local.clear();
        scratch.zone_local.resize(ctx.zones.len(), None);
        self.request_terms(ctx, scratch);
        if scratch.stamp.len() < ctx.line_item_zones.len() {
            scratch.stamp.resize(ctx.line_item_zones.len(), 0);
        }
        scratch.epoch = scratch.epoch.wrapping_add(1);
        if scratch.epoch == 0 {
            scratch.stamp.iter_mut().for_each(|s| *s = 0);
            scratch.epoch = 1;
        }
        for k in (0..self.k_start.len().saturating_sub(1)).rev() {
            let ids = self.k_start[k]..self.k_start[k + 1];
            if ids.is_empty() {
                continue;
            }
            self.open_cursors(scratch, &ids);
            self.run_partition(ctx, scratch, k.max(1));
        }
    }

    /// The request's (attribute, term) pairs, sorted by attribute.
    fn request_terms(&self, ctx: &MatchContext<'_, '_>, scratch: &mut Scratch) {
        let r = ctx.request;
        let mut terms = std::mem::take(&mut scratch.terms);
        terms.clear();
        let mut add = |found: Option<(u32, u32)>| {
            if let Some(pair) = found {
                terms.push(pair);
            }
        };
        add(self.find_int(Attr::Z, 0));
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
            (Attr::Os, r.device.os),
            (Attr::Browser, r.device.browser),
            (Attr::Language, r.device.language),
        ] {
            add(value.and_then(|v| self.find_str(attr, v)));
        }
        add(r
            .device
            .device_type
            .and_then(|t| self.find_int(Attr::DeviceType, t as u64)));
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
                add(self
                    .int_terms
                    .get(&(attr, u64::from(local.hour)))
                    .map(|t| (attr, *t)));
            }
            if let Some(attr) = day_attr {
                add(self
                    .int_terms
                    .get(&(attr, local.weekday as u64))
                    .map(|t| (attr, *t)));
            }
        }
        terms.sort_unstable();
        terms.dedup();
        scratch.terms = terms;
    }

    /// One cursor per request attribute over the partition's id range.
    fn open_cursors(&self, scratch: &mut Scratch, ids: &Range<u32>) {
        scratch.parts.clear();
        scratch.cursors.clear();
        let low = u64::from(ids.start) << 1;
        let high = u64::from(ids.end) << 1;
        let mut i = 0;
        while i < scratch.terms.len() {
            let attr = scratch.terms[i].0;
            let first_part = scratch.parts.len();
            while i < scratch.terms.len() && scratch.terms[i].0 == attr {
                let list = self.lists[scratch.terms[i].1 as usize].clone();
                let slice = &self.postings[list.clone()];
                let pos = list.start + slice.partition_point(|&e| e < low);
                let end = list.start + slice.partition_point(|&e| e < high);
                if pos < end {
                    scratch.parts.push(Part { pos, end });
                }
                i += 1;
            }
            if scratch.parts.len() > first_part {
                let mut cursor = Cursor {
                    parts: first_part..scratch.parts.len(),
                    current: END,
                };
                cursor.current = self.head(&scratch.parts, &cursor);
                scratch.cursors.push(cursor);
            }
        }
    }

    fn head(&self, parts: &[Part], cursor: &Cursor) -> u64 {
        parts[cursor.parts.clone()]
            .iter()
            .filter(|p| p.pos < p.end)
            .map(|p| self.postings[p.pos])
            .min()
            .unwrap_or(END)
    }

    /// Moves cursor `c` to its first entry at or after `key`.
    fn skip_to(&self, scratch: &mut Scratch, c: usize, key: u64) {
        let mut cursor = scratch.cursors[c].clone();
        if cursor.current >= key {
            return;
        }
        for part in &mut scratch.parts[cursor.parts.clone()] {
            if part.pos < part.end && self.postings[part.pos] < key {
                part.pos = gallop(&self.postings, part.pos, part.end, key);
            }
        }
        cursor.current = self.head(&scratch.parts, &cursor);
        scratch.cursors[c] = cursor;
    }

    fn run_partition(&self, ctx: &MatchContext<'_, '_>, scratch: &mut Scratch, need: usize) {
        if scratch.cursors.len() < need {
            return;
        }
        loop {
            scratch.cursors.sort_unstable_by_key(|c| c.current);
            let kth = scratch.cursors[need - 1].current;
            if kth == END {
                return;
            }
            let first = scratch.cursors[0].current;
            let next = if first >> 1 == kth >> 1 {
                if first & 1 == 0 {
                    // The request has a value this conjunction excludes.
                    let key = ((first >> 1) + 1) << 1;
                    for c in 0..scratch.cursors.len() {
                        if scratch.cursors[c].current >> 1 == first >> 1 {
                            self.skip_to(scratch, c, key);
                        }
                    }
                    continue;
                }
                self.accept(ctx, scratch, kth >> 1);
                ((kth >> 1) + 1) << 1
            } else {
                kth & !1
            };
            for c in 0..need {
                self.skip_to(scratch, c, next);
            }
        }
    }

    /// Checks a retrieved conjunction's residuals and records its line item once.
    fn accept(&self, ctx: &MatchContext<'_, '_>, scratch: &mut Scratch, conj: u64) {
        let conj = conj as usize;
        let line_item = self.conj_line_item[conj] as usize;
        if scratch.stamp[line_item] == scratch.epoch {
            return;
        }
        let range = &self.conj_residuals[conj];
        let residuals = &self.residuals[range.start as usize..range.end as usize];
        if !residuals.is_empty() {
            let local = ctx.local_time(ctx.line_item_zones[line_item], scratch);
            let holds = residuals.iter().all(|residual| {
                leaf_matches(&residual.expr, ctx.request, local) == residual.positive
            });
            if !holds {
                return;
            }
        }
        scratch.stamp[line_item] = scratch.epoch;
        scratch.matched.push(line_item as u32);
    }

    /// Bytes held by the index, for the benchmarks' memory figures.
    pub(crate) fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.postings.capacity() * size_of::<u64>()
            + self.lists.capacity() * size_of::<Range<usize>>()
            + self.conj_line_item.capacity() * size_of::<u32>()
            + self.conj_residuals.capacity() * size_of::<Range<u32>>()
            + self.residuals.capacity() * size_of::<Residual>()
            + (self.int_terms.capacity() * (size_of::<(u32, u64)>() + size_of::<u32>()))
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
}

impl MatchContext<'_, '_> {
    /// The request's local time in a zone, computed once per request.
    pub(crate) fn local_time(&self, zone: u16, scratch: &mut Scratch) -> LocalTime {
        if let Some(Some(local)) = scratch.zone_local.get(zone as usize) {
            return *local;
        }
        let local = LocalTime::of(self.request.now, &self.zones[zone as usize]);
        if let Some(slot) = scratch.zone_local.get_mut(zone as usize) {
            *slot = Some(local);
        }
        local
    }
}

/// First position in `list[pos..end]` whose entry is at least `key`, by exponential search.
fn gallop(list: &[u64], pos: usize, end: usize, key: u64) -> usize {
    let mut step = 1;
    let mut low = pos;
    let mut high = pos + 1;
    while high < end && list[high] < key {
        low = high;
        high = (high + step).min(end);
        step *= 2;
    }
    let high = high.min(end);
    low + list[low..high].partition_point(|&e| e < key)
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
    let link = (!input.placements.is_empty()).then_some(input.placements);
    let dnf = match input.targeting {
        None => Some(vec![Vec::new()]),
        Some(expr) => dnf(expr, true),
    };
    let Some(dnf) = dnf else {
        // Too large to expand: one conjunction, retrieved through Z (or the links) and
        // evaluated whole.
        let mut conj = BuiltConj::new(line_item);
        if let Some(placements) = link {
            conj.positives
                .push((Attr::Placement, placement_values(placements)));
        }
        if let Some(expr) = input.targeting {
            conj.residuals.push(Residual {
                expr: expr.clone(),
                positive: true,
            });
        }
        conjs.push(conj);
        return;
    };
    for literals in dnf {
        let mut conj = BuiltConj::new(line_item);
        if let Some(placements) = link {
            conj.positives
                .push((Attr::Placement, placement_values(placements)));
        }
        for literal in literals {
            conj.add(literal, input.zone, keys);
        }
        conjs.push(conj);
    }
}

fn placement_values<'s>(placements: &[marquee_model::PlacementId]) -> Vec<Value<'s>> {
    placements.iter().map(|p| Value::Int(p.0)).collect()
}

impl<'s> BuiltConj<'s> {
    fn new(line_item: u32) -> Self {
        BuiltConj {
            line_item,
            positives: Vec::new(),
            negatives: Vec::new(),
            residuals: Vec::new(),
        }
    }

    fn add(&mut self, literal: Literal<'s>, zone: u16, keys: &mut Keys<'s>) {
        let Some((attr, values)) = indexable(literal.expr, zone, keys) else {
            self.residuals.push(Residual {
                expr: literal.expr.clone(),
                positive: literal.positive,
            });
            return;
        };
        if !literal.positive {
            self.negatives.push((attr, values));
            return;
        }
        // One positive literal per attribute is indexed; a second is checked after retrieval
        // (for a multi-valued attribute both must hold, which one posting cursor cannot say).
        if self.positives.iter().any(|(a, _)| *a == attr) {
            self.residuals.push(Residual {
                expr: literal.expr.clone(),
                positive: true,
            });
            return;
        }
        self.positives.push((attr, values));
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
