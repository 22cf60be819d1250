//! The allocation of expected traffic among line items, in the engine's selection order.
//!
//! A [`Book`] allocates the booked line items over a range once, in spans of hours where
//! nothing changes (segments), and records per line item, segment and round of sharing what it
//! was offered and what it took. A question about one line item then re-runs only the
//! requests that line item accepts (a [`Market`]), with each booked line item's offers outside
//! them taken from the book: its share of the proposal's requests is computed afresh, and its
//! acceptance ratio (what its goal lets it take of what it is offered) follows from the book's
//! offers elsewhere plus the new ones there. The cost of a question so grows with the requests
//! it matches, not with the whole book.

use std::ops::Range;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use marquee_model::{PacingMode, Tier};

use crate::profiles::{WeekMask, has_bit};
use crate::traffic::SECONDS_PER_DAY;

/// Rounds of proportional sharing among line items of equal priority in a segment.
pub(crate) const ROUNDS: usize = 4;
/// Below this, a line item wants nothing more.
const NOTHING: f64 = 1e-9;
/// Below this share of a unit's requests, what is left of them after a round is rounding.
const RESIDUE: f64 = 1e-9;
/// A pair's mask for the forecast line item: its supply is already limited to its hours.
pub(crate) const ALWAYS: u32 = u32::MAX;

#[derive(Debug)]
pub(crate) struct Lane {
    pub(crate) tier: Tier,
    pub(crate) value: i64,
    pub(crate) weight: f64,
    pub(crate) zone: TimeZone,
    pub(crate) flight: (i64, Option<i64>),
    pub(crate) mode: PacingMode,
    pub(crate) daily: Option<f64>,
    /// Lifetime target at the end of each local day of the range.
    pub(crate) targets: Vec<f64>,
    pub(crate) day_of_hour: Vec<u32>,
    pub(crate) days: usize,
    pub(crate) cap_factor: f64,
    pub(crate) has_goal: bool,
}

impl Lane {
    /// The priority group's key: tier, then (remnant, house) value; higher sorts first.
    pub(crate) fn key(&self) -> (Tier, i64) {
        let value = if matches!(self.tier, Tier::Remnant | Tier::House) {
            self.value
        } else {
            0
        };
        (self.tier, value)
    }

    pub(crate) fn in_flight(&self, hour_start: i64) -> bool {
        hour_start + 3_600 > self.flight.0 && self.flight.1.is_none_or(|end| hour_start < end)
    }

    /// Its local hour of the week (bit of a [`WeekMask`]) at an hour's start.
    pub(crate) fn week_bit(&self, hour_start: i64) -> u8 {
        let at = Timestamp::from_second(hour_start).unwrap_or(Timestamp::UNIX_EPOCH);
        let local = self.zone.to_datetime(at);
        let day = local.weekday().to_monday_zero_offset() as usize;
        (day * 24 + local.hour() as usize) as u8
    }

    /// Its goal over the range, in impressions.
    pub(crate) fn goal_in_range(&self, hours: &[i64]) -> Option<f64> {
        if !self.has_goal {
            return None;
        }
        let mut days = vec![false; self.days];
        for (h, &start) in hours.iter().enumerate() {
            if self.in_flight(start) {
                days[self.day_of_hour[h] as usize] = true;
            }
        }
        let daily = self
            .daily
            .map(|d| d * days.iter().filter(|d| **d).count() as f64);
        let lifetime = self.targets.last().copied();
        match (daily, lifetime) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// What it may still take in a segment starting at hour `h`: its day's amount (the daily
    /// goal, and what the lifetime curve plans by the day's end) spread over the day in
    /// proportion to its matching traffic (ASAP: all at once), less what it took today.
    fn allowance(
        &self,
        h: usize,
        before_today: f64,
        today: f64,
        matched_today: f64,
        day_matching: &[f64],
    ) -> f64 {
        let day = self.day_of_hour[h] as usize;
        let mut amount = f64::INFINITY;
        if let Some(daily) = self.daily {
            amount = daily;
        }
        if let Some(target) = self.targets.get(day) {
            amount = amount.min(target - before_today);
        }
        if !amount.is_finite() {
            return f64::INFINITY;
        }
        let share = match self.mode {
            PacingMode::Asap => 1.0,
            PacingMode::Even | PacingMode::FrontLoaded => {
                let whole = day_matching[day];
                if whole > 0.0 {
                    (matched_today / whole).min(1.0)
                } else {
                    1.0
                }
            }
        };
        (amount.max(0.0) * share - today).max(0.0)
    }
}

/// One line item in one unit of supply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pair {
    pub(crate) unit: u32,
    /// The lane's position in its [`Market`].
    pub(crate) lane: u32,
    /// Its week mask (0: every hour), or [`ALWAYS`].
    pub(crate) mask: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The book as it is: the forecast line item takes nothing, the one it replaces takes
    /// part.
    Replay,
    /// The forecast line item takes nothing, the one it replaces neither.
    Baseline,
    /// The forecast line item takes all it can at its priority.
    Unlimited,
    /// It takes its goal, paced.
    Booked,
}

/// What the book's run recorded, per lane (in the book), segment and round.
#[derive(Debug)]
pub(crate) struct Record {
    /// Per lane, segment and round: the requests it was offered (its weight's share of each
    /// request it took part in, over all of them).
    offers: Vec<f64>,
    /// Per lane and segment: what it took; what it had delivered before its local day and
    /// within it, at the segment's start.
    taken: Vec<f64>,
    before: Vec<f64>,
    today: Vec<f64>,
    /// Per group and segment: the rounds run.
    rounds: Vec<u8>,
}

/// The booked line items' allocation over one range: see the module.
#[derive(Debug)]
pub(crate) struct Book {
    pub(crate) range: (i64, i64),
    pub(crate) hours: Vec<i64>,
    pub(crate) lanes: Vec<Lane>,
    /// Priority groups' keys, highest first, and each group's lanes.
    pub(crate) keys: Vec<(Tier, i64)>,
    group_sizes: Vec<u32>,
    pub(crate) lane_group: Vec<u32>,
    pub(crate) segments: Vec<Range<usize>>,
    /// Per lane and segment: in flight; its local hour of the week.
    flight: Vec<bool>,
    bits: Vec<u8>,
    /// Per lane and segment: the requests it matches.
    pub(crate) matching: Vec<f64>,
    record: Record,
}

/// What a book is made for: the range (its first hour's start and its end), its hours, the
/// booked line items, and the (lane, week mask) pairs with hour targeting.
pub(crate) struct Plan {
    pub(crate) range: (i64, i64),
    pub(crate) hours: Vec<i64>,
    pub(crate) lanes: Vec<Lane>,
    pub(crate) timed: Vec<(u32, u32)>,
}

/// The requests one allocation runs over, with the lanes taking part in them.
pub(crate) struct Market<'a> {
    /// Each lane and its position in the book (`None`: the forecast line item).
    pub(crate) lanes: Vec<(&'a Lane, Option<u32>)>,
    /// The market's groups: the book's group (`None`: one the book does not have) and pairs
    /// sorted by unit.
    pub(crate) groups: Vec<(Option<u32>, Vec<Pair>)>,
    pub(crate) group_lanes: Vec<Vec<u32>>,
    /// Per lane: its group.
    pub(crate) lane_group: Vec<u32>,
    pub(crate) units: usize,
    /// Per segment and unit.
    pub(crate) supply: Vec<f64>,
    /// Per lane and segment.
    pub(crate) matching: Vec<f64>,
    /// Per lane: what it matches on each of its local days.
    pub(crate) day_matching: Vec<Vec<f64>>,
    /// The lane of the forecast line item, and of the booked one it replaces.
    pub(crate) forecast: Option<u32>,
    pub(crate) excluded: Option<u32>,
}

/// Which part of a market one allocation runs.
pub(crate) struct Pass<'r> {
    pub(crate) mode: Mode,
    /// The market's own offers in the book, from a [`Mode::Replay`] run (`None` for that run
    /// and for the book's own).
    pub(crate) reference: Option<&'r [f64]>,
    /// The market's groups run: those above take what they took in the book, and are left
    /// out; those below are left out when nothing read depends on them.
    pub(crate) groups: Range<usize>,
    /// Per segment and unit: the requests left when the first group run starts (from a
    /// [`Mode::Replay`] run's [`Outcome::entry`]).
    pub(crate) entry: Option<&'r [f64]>,
    /// Keep the requests left when this group starts.
    pub(crate) keep_entry: Option<usize>,
}

/// What one allocation gave.
pub(crate) struct Outcome {
    /// Per lane of the market: what it took over the range, less what it took in the book.
    pub(crate) delta: Vec<f64>,
    /// The forecast line item's take, per segment.
    pub(crate) by_segment: Vec<f64>,
    /// Per lane: what it took of the market's requests.
    pub(crate) local: Vec<f64>,
    /// Per lane, segment and round: what it was offered in the market ([`Mode::Replay`]).
    pub(crate) offers: Vec<f64>,
    /// Per segment and unit: the requests left when [`Pass::keep_entry`]'s group starts.
    pub(crate) entry: Vec<f64>,
}

impl Book {
    /// Cuts the range into segments, sums the supply of `units` (the pairs of each from
    /// `unit_pairs`, lanes by their position in the book) and allocates it.
    pub(crate) fn new(
        plan: Plan,
        masks: &[WeekMask],
        unit_pairs: impl Fn(usize, &mut Vec<Pair>),
        units: usize,
        supply_at: impl Fn(usize, usize) -> f64,
    ) -> Book {
        let Plan {
            range,
            hours,
            lanes,
            timed,
        } = plan;
        let mut keys: Vec<(Tier, i64)> = lanes.iter().map(Lane::key).collect();
        keys.sort_by(|a, b| b.cmp(a));
        keys.dedup();
        let lane_group: Vec<u32> = lanes
            .iter()
            .map(|l| {
                let key = l.key();
                keys.binary_search_by(|g| key.cmp(g)).unwrap_or(0) as u32
            })
            .collect();
        let mut group_sizes = vec![0u32; keys.len()];
        for &g in &lane_group {
            group_sizes[g as usize] += 1;
        }
        let bits: Vec<Vec<u8>> = lanes
            .iter()
            .map(|lane| hours.iter().map(|&h| lane.week_bit(h)).collect())
            .collect();
        let segments = cut_segments(&hours, &lanes, &bits, masks, &timed);
        let s_len = segments.len();
        let mut flight = vec![false; lanes.len() * s_len];
        let mut seg_bits = vec![0u8; lanes.len() * s_len];
        for (l, lane) in lanes.iter().enumerate() {
            for (s, segment) in segments.iter().enumerate() {
                flight[l * s_len + s] = lane.in_flight(hours[segment.start]);
                seg_bits[l * s_len + s] = bits[l][segment.start];
            }
        }
        let mut book = Book {
            range,
            hours,
            lanes,
            keys,
            group_sizes,
            lane_group,
            segments,
            flight,
            bits: seg_bits,
            matching: Vec::new(),
            record: Record {
                offers: Vec::new(),
                taken: Vec::new(),
                before: Vec::new(),
                today: Vec::new(),
                rounds: Vec::new(),
            },
        };
        let mut supply = vec![0.0; s_len * units];
        for (s, segment) in book.segments.iter().enumerate() {
            for (u, total) in supply[s * units..(s + 1) * units].iter_mut().enumerate() {
                *total = segment.clone().map(|h| supply_at(u, h)).sum();
            }
        }
        let mut groups: Vec<(Option<u32>, Vec<Pair>)> = (0..book.keys.len())
            .map(|g| (Some(g as u32), Vec::new()))
            .collect();
        let mut pairs = Vec::new();
        let mut matching = vec![0.0; book.lanes.len() * s_len];
        for u in 0..units {
            pairs.clear();
            unit_pairs(u, &mut pairs);
            for pair in &pairs {
                groups[book.lane_group[pair.lane as usize] as usize]
                    .1
                    .push(*pair);
                for s in 0..s_len {
                    if book.active(pair, pair.lane, s, masks) {
                        matching[pair.lane as usize * s_len + s] += supply[s * units + u];
                    }
                }
            }
        }
        book.matching = matching;
        let mut group_lanes = vec![Vec::new(); book.keys.len()];
        for (l, &g) in book.lane_group.iter().enumerate() {
            group_lanes[g as usize].push(l as u32);
        }
        let day_matching = book.day_matching();
        let market = Market {
            lane_group: book.lane_group.clone(),
            lanes: book
                .lanes
                .iter()
                .enumerate()
                .map(|(l, lane)| (lane, Some(l as u32)))
                .collect(),
            groups,
            group_lanes,
            units,
            supply,
            matching: book.matching.clone(),
            day_matching,
            forecast: None,
            excluded: None,
        };
        let mut record = Record {
            offers: vec![0.0; book.lanes.len() * s_len * ROUNDS],
            taken: vec![0.0; book.lanes.len() * s_len],
            before: vec![0.0; book.lanes.len() * s_len],
            today: vec![0.0; book.lanes.len() * s_len],
            rounds: vec![0; book.keys.len() * s_len],
        };
        let all = Pass {
            mode: Mode::Replay,
            reference: None,
            groups: 0..market.groups.len(),
            entry: None,
            keep_entry: None,
        };
        book.run(&market, masks, all, Some(&mut record));
        book.record = record;
        book
    }

    /// What a lane took over the range.
    #[cfg(test)]
    pub(crate) fn taken(&self, lane: usize) -> f64 {
        let s_len = self.segments.len();
        self.record.taken[lane * s_len..(lane + 1) * s_len]
            .iter()
            .sum()
    }

    /// Each book lane's matching per local day.
    pub(crate) fn day_matching(&self) -> Vec<Vec<f64>> {
        let s_len = self.segments.len();
        self.lanes
            .iter()
            .enumerate()
            .map(|(l, lane)| {
                let mut days = vec![0.0; lane.days];
                for (s, segment) in self.segments.iter().enumerate() {
                    days[lane.day_of_hour[segment.start] as usize] += self.matching[l * s_len + s];
                }
                days
            })
            .collect()
    }

    /// Whether a pair takes part in segment `s` (flight, days and hours); `book_lane` is the
    /// pair's lane in the book.
    fn active(&self, pair: &Pair, book_lane: u32, s: usize, masks: &[WeekMask]) -> bool {
        if pair.mask == ALWAYS {
            return true;
        }
        let at = book_lane as usize * self.segments.len() + s;
        self.flight[at] && (pair.mask == 0 || has_bit(&masks[pair.mask as usize], self.bits[at]))
    }

    /// Per group of the market and segment: whether a pair's taking part differs from the
    /// segment before (flight, days and hours), by the distinct (lane, mask) of each group.
    fn changes(&self, market: &Market<'_>, masks: &[WeekMask]) -> Vec<bool> {
        let s_len = self.segments.len();
        let mut changes = vec![false; market.groups.len() * s_len];
        let mut kinds: Vec<Pair> = Vec::new();
        for (g, (_, pairs)) in market.groups.iter().enumerate() {
            kinds.clear();
            kinds.extend(pairs.iter().map(|p| Pair { unit: 0, ..*p }));
            kinds.sort_unstable_by_key(|p| (p.lane, p.mask));
            kinds.dedup_by_key(|p| (p.lane, p.mask));
            for kind in &kinds {
                let book_lane = market.lanes[kind.lane as usize].1.unwrap_or(0);
                for s in 1..s_len {
                    if self.active(kind, book_lane, s, masks)
                        != self.active(kind, book_lane, s - 1, masks)
                    {
                        changes[g * s_len + s] = true;
                    }
                }
            }
        }
        changes
    }

    /// Allocates a market's supply segment by segment, group by group (highest first),
    /// sharing each group's requests by weight in rounds. Without a reference this is the
    /// book's own run, and it fills `record`; with one, each book lane's offers outside the
    /// market come from the book (`reference`: the market's own offers in the book, from a
    /// [`Mode::Replay`] run).
    pub(crate) fn run(
        &self,
        market: &Market<'_>,
        masks: &[WeekMask],
        pass: Pass<'_>,
        mut record: Option<&mut Record>,
    ) -> Outcome {
        let s_len = self.segments.len();
        let n = market.lanes.len();
        let units = market.units;
        let Pass {
            mode,
            reference,
            groups: run_groups,
            entry,
            keep_entry,
        } = pass;
        let replay = mode == Mode::Replay;
        let mut outcome = Outcome {
            delta: vec![0.0; n],
            by_segment: vec![0.0; s_len],
            local: vec![0.0; n],
            offers: if replay && reference.is_none() && record.is_none() {
                vec![0.0; n * s_len * ROUNDS]
            } else {
                Vec::new()
            },
            entry: if keep_entry.is_some() {
                vec![0.0; s_len * units]
            } else {
                Vec::new()
            },
        };
        // Per lane: delivered before its local day and within it (as a change from the book
        // when there is one), and its matching requests today.
        let mut before = vec![0.0; n];
        let mut today = vec![0.0; n];
        let mut matched_today = vec![0.0; n];
        let mut left = vec![0.0; n];
        let mut offers = vec![0.0; n];
        let mut ratio = vec![0.0; n];
        let mut took = vec![0.0; n];
        let weight: Vec<f64> = market.lanes.iter().map(|(lane, _)| lane.weight).collect();
        // Per unit: requests per unit of weight in the current round.
        let mut share = vec![0.0; units];
        let mut supply = vec![0.0; units];
        let mut on: Vec<(u32, u32)> = Vec::new();
        // Per lane: its weight while it wants requests in the segment, then 0.
        let mut live = vec![0.0; n];
        let with_book = record.is_none();
        let changes = self.changes(market, masks);
        let mut taking_part: Vec<Vec<(u32, u32)>> = vec![Vec::new(); market.groups.len()];
        let mut in_flight = vec![false; n];
        let mut week_bit = vec![0u8; n];
        // Per unit whose requests some lane wants in the round: its pairs' range.
        let mut runs: Vec<(u32, u32, u32)> = Vec::new();
        for (s, segment) in self.segments.iter().enumerate() {
            let mut lanes_read = false;
            let h = segment.start;
            let previous = s.checked_sub(1).map(|p| self.segments[p].start);
            for (i, &(lane, book_lane)) in market.lanes.iter().enumerate() {
                if previous.is_some_and(|p| lane.day_of_hour[h] != lane.day_of_hour[p]) {
                    before[i] += today[i];
                    today[i] = 0.0;
                    matched_today[i] = 0.0;
                }
                let matching = market.matching[i * s_len + s];
                matched_today[i] += matching;
                let most = lane.cap_factor * matching;
                let (base_before, base_today) = match book_lane {
                    Some(b) if with_book => {
                        let at = b as usize * s_len + s;
                        (self.record.before[at], self.record.today[at])
                    }
                    _ => (0.0, 0.0),
                };
                let forecast = market.forecast == Some(i as u32);
                left[i] = if (market.excluded == Some(i as u32) && !replay)
                    || (forecast && matches!(mode, Mode::Replay | Mode::Baseline))
                {
                    0.0
                } else if (forecast && mode == Mode::Unlimited) || !lane.has_goal {
                    most
                } else {
                    lane.allowance(
                        h,
                        base_before + before[i],
                        base_today + today[i],
                        matched_today[i],
                        &market.day_matching[i],
                    )
                    .min(most)
                };
                if let (Some(record), Some(b)) = (record.as_deref_mut(), book_lane) {
                    record.before[b as usize * s_len + s] = before[i];
                    record.today[b as usize * s_len + s] = today[i];
                }
                took[i] = 0.0;
            }
            let at = s * units..(s + 1) * units;
            supply.copy_from_slice(&entry.unwrap_or(&market.supply)[at.clone()]);
            for (g, ((book_group, pairs), lanes)) in
                market.groups.iter().zip(&market.group_lanes).enumerate()
            {
                if keep_entry == Some(g) {
                    outcome.entry[at.clone()].copy_from_slice(&supply);
                }
                if !run_groups.contains(&g) {
                    continue;
                }
                let book_rounds = match (book_group, with_book) {
                    (Some(g), true) => usize::from(self.record.rounds[*g as usize * s_len + s]),
                    _ => 0,
                };
                // Lanes of the group in the allocation: the book's, with the forecast line item
                // and without the one it replaces (except when replaying the book).
                let mut count = book_group.map_or(0, |g| self.group_sizes[g as usize] as usize);
                if !with_book {
                    count = lanes.len();
                } else if !replay {
                    count += usize::from(lanes.iter().any(|&l| market.forecast == Some(l)));
                    count -= usize::from(lanes.iter().any(|&l| market.excluded == Some(l)));
                }
                let rounds = if count > 1 { ROUNDS } else { 1 };
                // The pairs taking part in this segment, still in unit order: found again
                // only where one of the group's line items starts or stops taking part.
                if s == 0 || changes[g * s_len + s] {
                    if !lanes_read {
                        // Each lane's flight and hour of the week here, read once per segment.
                        // (The forecast line item's pairs take part always.)
                        for (i, &(_, book_lane)) in market.lanes.iter().enumerate() {
                            if let Some(b) = book_lane {
                                let at = b as usize * s_len + s;
                                in_flight[i] = self.flight[at];
                                week_bit[i] = self.bits[at];
                            }
                        }
                        lanes_read = true;
                    }
                    taking_part[g].clear();
                    taking_part[g].extend(
                        pairs
                            .iter()
                            .filter(|pair| {
                                let l = pair.lane as usize;
                                match pair.mask {
                                    ALWAYS => true,
                                    0 => in_flight[l],
                                    mask => {
                                        in_flight[l] && has_bit(&masks[mask as usize], week_bit[l])
                                    }
                                }
                            })
                            .map(|pair| (pair.unit, pair.lane)),
                    );
                }
                // The round's pairs: those taking part. A lane that wants nothing more (in
                // this segment it never does again) shares with a weight of 0; once a quarter
                // of the group's lanes are such, their pairs are dropped (copied once).
                let mut filtered = false;
                let mut dropped = 0;
                for k in 0..rounds {
                    if with_book && replay && k >= book_rounds {
                        break;
                    }
                    let mut done = 0;
                    for &lane in lanes {
                        let l = lane as usize;
                        offers[l] = 0.0;
                        let wants = left[l] > NOTHING;
                        live[l] = if wants { weight[l] } else { 0.0 };
                        done += usize::from(!wants);
                    }
                    if done > dropped && done * 4 > lanes.len() {
                        dropped = done;
                        let wants = |&&(_, lane): &&(u32, u32)| left[lane as usize] > NOTHING;
                        if filtered {
                            on.retain(|pair| wants(&pair));
                        } else {
                            on.clear();
                            on.extend(taking_part[g].iter().filter(wants));
                            filtered = true;
                        }
                    }
                    let pairs: &[(u32, u32)] = if filtered { &on } else { &taking_part[g] };
                    // Each unit shared by weight among those lanes (`share` 0: none wants it).
                    runs.clear();
                    let mut p = 0;
                    while p < pairs.len() {
                        let unit = pairs[p].0 as usize;
                        let start = p;
                        let mut total = 0.0;
                        while p < pairs.len() && pairs[p].0 as usize == unit {
                            total += live[pairs[p].1 as usize];
                            p += 1;
                        }
                        if total <= 0.0 {
                            continue;
                        }
                        runs.push((unit as u32, start as u32, p as u32));
                        let per_weight = supply[unit] / total;
                        share[unit] = per_weight;
                        for &(_, lane) in &pairs[start..p] {
                            offers[lane as usize] += per_weight * live[lane as usize];
                        }
                    }
                    let any = !runs.is_empty();
                    if !any && (!with_book || k >= book_rounds) {
                        break;
                    }
                    let mut saturated = false;
                    for &lane in lanes {
                        let i = lane as usize;
                        let here = offers[i];
                        let mut offer = here;
                        if left[i] <= NOTHING {
                            offer = 0.0;
                        } else if let (Some(b), true) = (market.lanes[i].1, with_book)
                            && k < book_rounds
                        {
                            let at = (b as usize * s_len + s) * ROUNDS + k;
                            let in_book = self.record.offers[at];
                            offer = match reference {
                                None => in_book,
                                Some(base) => here + in_book - base[(i * s_len + s) * ROUNDS + k],
                            };
                        }
                        if replay && !outcome.offers.is_empty() {
                            outcome.offers[(i * s_len + s) * ROUNDS + k] = here;
                        }
                        if let (Some(record), Some(b)) = (record.as_deref_mut(), market.lanes[i].1)
                        {
                            record.offers[(b as usize * s_len + s) * ROUNDS + k] = offer;
                        }
                        ratio[i] = if offer > left[i] {
                            saturated = true;
                            left[i] / offer
                        } else {
                            1.0
                        };
                        let take = offer * ratio[i];
                        took[i] += take;
                        if market.forecast == Some(lane) {
                            outcome.by_segment[s] += take;
                        }
                        left[i] = (left[i] - take).max(0.0);
                        // Its share of each of the market's units, at its ratio.
                        outcome.local[i] += here * ratio[i];
                    }
                    for &(unit, start, end) in &runs {
                        let unit = unit as usize;
                        // Every lane at a ratio of 1 takes its units whole.
                        let taken = if saturated {
                            pairs[start as usize..end as usize]
                                .iter()
                                .map(|&(_, lane)| {
                                    share[unit] * live[lane as usize] * ratio[lane as usize]
                                })
                                .sum()
                        } else {
                            supply[unit]
                        };
                        // What rounding leaves of a unit taken whole is nothing, not a few
                        // billionths for the next group to find.
                        let rest = supply[unit] - taken;
                        supply[unit] = if rest > RESIDUE * supply[unit] {
                            rest
                        } else {
                            0.0
                        };
                    }
                    if let (Some(record), Some(g)) = (record.as_deref_mut(), book_group) {
                        record.rounds[*g as usize * s_len + s] = (k + 1) as u8;
                    }
                    if !saturated && (!with_book || k + 1 >= book_rounds) {
                        break;
                    }
                }
            }
            for (i, &(_, book_lane)) in market.lanes.iter().enumerate() {
                if !run_groups.contains(&(market.lane_group[i] as usize)) {
                    continue;
                }
                let in_book = match book_lane {
                    Some(b) if with_book => self.record.taken[b as usize * s_len + s],
                    _ => 0.0,
                };
                if let (Some(record), Some(b)) = (record.as_deref_mut(), book_lane) {
                    record.taken[b as usize * s_len + s] = took[i];
                }
                let change = took[i] - in_book;
                today[i] += change;
                outcome.delta[i] += change;
            }
        }
        outcome
    }
}

/// Spans of hours in which no line item starts or stops taking part (flight, days and hours)
/// and no local or UTC day begins: each is allocated at once.
fn cut_segments(
    hours: &[i64],
    lanes: &[Lane],
    bits: &[Vec<u8>],
    masks: &[WeekMask],
    timed: &[(u32, u32)],
) -> Vec<Range<usize>> {
    let mut starts = vec![0];
    for h in 1..hours.len() {
        let cut = hours[h].rem_euclid(SECONDS_PER_DAY) == 0
            || lanes.iter().any(|lane| {
                lane.day_of_hour[h] != lane.day_of_hour[h - 1]
                    || lane.in_flight(hours[h]) != lane.in_flight(hours[h - 1])
            })
            || timed.iter().any(|&(lane, mask)| {
                let bits = &bits[lane as usize];
                let mask = &masks[mask as usize];
                has_bit(mask, bits[h]) != has_bit(mask, bits[h - 1])
            });
        if cut {
            starts.push(h);
        }
    }
    let mut segments: Vec<Range<usize>> = starts.windows(2).map(|w| w[0]..w[1]).collect();
    if let Some(&last) = starts.last() {
        segments.push(last..hours.len());
    }
    segments
}
