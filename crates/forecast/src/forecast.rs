//! Availability and delivery forecasts: representatives of the sampled requests go through the
//! engine's targeting index once per snapshot; each forecast then allocates the expected
//! traffic hour by hour among the line items in the engine's selection order.

use std::sync::{Arc, Mutex};

use jiff::Timestamp;
use jiff::tz::TimeZone;
use marquee_engine::{Control, Engine, Scratch};
use marquee_model::{FrequencyCap, GoalMetric, LineItemId, PricingModel};
use marquee_pacing::{Period, Schedule, TrafficProfile};
use marquee_snapshot::{LineItemEntry, Snapshot, SnapshotData};
use rustc_hash::FxHashMap;

use crate::TrafficModel;
use crate::allocation::{ALWAYS, Book, Lane, Market, Mode, Pair, Pass, Plan};
use crate::profiles::{
    ALL_WEEK, Key, Parts, Vocabulary, WeekMask, has_bit, names_time, relax, request, week_mask,
};
use crate::sample::Entry;
use crate::traffic::{MINUTES_PER_DAY, SECONDS_PER_DAY};

/// Why a forecast cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForecastError {
    #[error("the range must start on a whole UTC hour and end after it")]
    Range,
    #[error("line item {0} is not in the snapshot")]
    UnknownLineItem(LineItemId),
}

/// Days of sample read for frequency caps: the most recent ones before the model's `now`.
const CAP_DAYS: i64 = 14;
/// Sampled requests of identified users read for frequency caps at most, about: beyond, a
/// subset of the users (by their hash) stands for all.
const CAP_REQUESTS: usize = 200_000;
/// Books kept per forecaster, the most recently used ones.
const BOOKS: usize = 4;
/// A goal is met "on track" at this probability, "at risk" at [`AT_RISK`].
const ON_TRACK: f64 = 0.9;
const AT_RISK: f64 = 0.5;
/// Representatives run through the index at most; beyond, they are thinned (see [`thin`]).
pub const MAX_REPRESENTATIVES: usize = 30_000;
/// The class of a profile whose representative was thinned out.
const DROPPED: u32 = u32::MAX;

/// What the forecast says about a line item over a range.
#[derive(Debug, Clone, PartialEq)]
pub struct Availability {
    /// Requests its targeting, links and flight accept, in the range.
    pub matching: f64,
    /// What it would get at its priority with unlimited demand: what higher priorities leave,
    /// shared with its own priority by weight (see [`Forecaster::availability`]).
    pub available: f64,
    /// Its goal over the range, in impressions; `None` without a goal (or a flat price with a
    /// spend goal, which has no price per impression).
    pub goal: Option<f64>,
    /// The probability that what is available reaches the goal.
    pub probability: Option<f64>,
    /// Per UTC day of the range: matching and available.
    pub daily: Vec<Day>,
    /// Booked line items that take impressions it matches, with how many, most first.
    pub contending: Vec<Contender>,
    /// What booking it with its goal takes from each booked line item's expected delivery in
    /// the range, most first (only those that lose anything).
    pub impact: Vec<Contender>,
    /// Share of its matching impressions a frequency cap lets through (1 without caps).
    pub cap_factor: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Day {
    /// Days since 1970-01-01 (UTC).
    pub day: i64,
    pub matching: f64,
    pub available: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Contender {
    pub line_item: LineItemId,
    pub impressions: f64,
}

/// A booked line item's outlook over a range.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryForecast {
    pub status: Status,
    /// Its goal over the range, in impressions.
    pub goal: Option<f64>,
    /// What it is expected to deliver: the goal, or what is available if less.
    pub expected: f64,
    /// Goal less what is available, when positive.
    pub shortfall: f64,
    pub probability: Option<f64>,
    pub availability: Availability,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// At least a 90% chance of meeting the goal, or no goal.
    OnTrack,
    /// Between 50% and 90%.
    AtRisk,
    /// Below 50%: the available impressions fall short of the goal.
    Shortfall,
}

/// Requests alike for every booked line item (same placement, same line items accept them at
/// the same hours), with their share of the placement's traffic.
#[derive(Debug, Clone)]
struct Class {
    placement: Option<usize>,
    members: std::ops::Range<usize>,
}

/// What sets a class apart: its placement (in the model) and its members with their week
/// masks.
type Signature = (Option<usize>, Vec<(u32, u32)>);

/// One line item taking part, by its position in the snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Member {
    lane: u32,
    mask: u32,
}

/// Forecasts against one snapshot and one traffic model.
#[derive(Debug)]
pub struct Forecaster<'m, 's> {
    model: &'m TrafficModel<'s>,
    snapshot: Arc<Snapshot>,
    /// The class of each profile of the sample; [`DROPPED`] for profiles whose representative
    /// was thinned out.
    profile_class: Vec<u32>,
    /// What each profile's weight counts for after thinning (0 when dropped).
    profile_scale: Vec<f32>,
    /// What the booked line items' targeting names; each profile's group of profiles equal
    /// for it, and each group's first profile.
    vocabulary: Vocabulary,
    profile_group: Vec<u32>,
    representative: Vec<u32>,
    classes: Vec<Class>,
    members: Vec<Member>,
    masks: Vec<WeekMask>,
    /// Recency weight of all profiles of each model placement.
    placement_weights: Vec<f64>,
    /// Each class's share of its placement's traffic.
    class_share: Vec<f64>,
    cap_factors: Vec<f64>,
    /// Lifetime delivery before the forecast, per snapshot line item, in its goal's metric.
    delivered: Vec<u64>,
    profile: TrafficProfile,
    /// The booked line items' allocation over recent ranges (see [`Forecaster::prepare`]),
    /// most recent last.
    books: Mutex<Vec<Arc<Book>>>,
}

impl<'m, 's> Forecaster<'m, 's> {
    /// Runs each distinct representative of the sample through the engine's index for every
    /// booked line item of the snapshot (on the direct channel: sampled requests are our ad
    /// requests), and estimates the booked line items' frequency-cap factors.
    pub fn new(snapshot: &Arc<Snapshot>, model: &'m TrafficModel<'s>) -> Forecaster<'m, 's> {
        Forecaster::with_representatives(snapshot, model, MAX_REPRESENTATIVES)
    }

    /// [`Forecaster::new`] with at most `limit` representatives: more are slower to build and
    /// to forecast with, and closer to the whole sample.
    pub fn with_representatives(
        snapshot: &Arc<Snapshot>,
        model: &'m TrafficModel<'s>,
        limit: usize,
    ) -> Forecaster<'m, 's> {
        let sample = model.sample;
        let data = &snapshot.data;
        let time: Vec<bool> = data
            .line_items
            .iter()
            .map(|li| li.targeting.as_ref().is_some_and(names_time))
            .collect();
        let vocabulary = Vocabulary::of(
            sample,
            data.line_items
                .iter()
                .filter_map(|li| li.targeting.as_ref()),
        );
        let engine = Engine::new(Arc::new(Snapshot {
            data: SnapshotData {
                line_items: data
                    .line_items
                    .iter()
                    .map(|li| LineItemEntry {
                        targeting: li.targeting.as_ref().and_then(relax),
                        ..li.clone()
                    })
                    .collect(),
                placements: data.placements.clone(),
                sites: data.sites.clone(),
                publishers: data.publishers.clone(),
                ..SnapshotData::default()
            },
            version: snapshot.version,
            built_at: snapshot.built_at,
        }));
        let mut scratch = Scratch::default();
        let mut urls = FxHashMap::default();
        // Representatives: profiles equal for the booked line items' targeting.
        let mut groups: FxHashMap<Key, u32> = FxHashMap::default();
        let mut representative: Vec<u32> = Vec::new();
        let mut group_weight: Vec<f64> = Vec::new();
        let mut profile_group = Vec::with_capacity(sample.profiles.len());
        for (r, profile) in sample.profiles.iter().enumerate() {
            let key = vocabulary.key(sample, profile, &mut urls);
            let next = representative.len() as u32;
            let group = *groups.entry(key).or_insert(next);
            if group == next {
                representative.push(r as u32);
                group_weight.push(0.0);
            }
            group_weight[group as usize] += model.profile_weights[r];
            profile_group.push(group);
        }
        drop(groups);
        let group_scale = thin(&group_weight, limit);
        let mut signatures: FxHashMap<Signature, u32> = FxHashMap::default();
        let mut mask_ids: FxHashMap<WeekMask, u32> = FxHashMap::default();
        let mut masks = vec![ALL_WEEK];
        let mut group_class: Vec<u32> = vec![DROPPED; representative.len()];
        let mut classes = Vec::new();
        let mut members = Vec::new();
        let mut signature = Vec::new();
        for (group, &r) in representative.iter().enumerate() {
            if group_scale[group] == 0.0 {
                continue;
            }
            let profile = &sample.profiles[r as usize];
            let parts = Parts::of(sample, profile);
            let request = request(sample, data, profile, &parts, model.now());
            signature.clear();
            for &i in engine.matching(&request, &mut scratch) {
                let li = &data.line_items[i as usize];
                let mask = match (time[i as usize], &li.targeting) {
                    (true, Some(targeting)) => {
                        let mask = week_mask(targeting, &request);
                        if mask == [0; 3] {
                            continue;
                        }
                        *mask_ids.entry(mask).or_insert_with(|| {
                            masks.push(mask);
                            masks.len() as u32 - 1
                        })
                    }
                    _ => 0,
                };
                signature.push((i, mask));
            }
            let placement = model.placement_index(profile.placement);
            let class = *signatures
                .entry((placement, signature.clone()))
                .or_insert_with(|| {
                    let start = members.len();
                    members.extend(signature.iter().map(|&(lane, mask)| Member { lane, mask }));
                    classes.push(Class {
                        placement,
                        members: start..members.len(),
                    });
                    classes.len() as u32 - 1
                });
            group_class[group] = class;
        }
        let profile_class: Vec<u32> = profile_group
            .iter()
            .map(|&g| group_class[g as usize])
            .collect();
        let profile_group_kept = profile_group.clone();
        let profile_scale: Vec<f32> = profile_group
            .iter()
            .map(|&g| group_scale[g as usize] as f32)
            .collect();
        let mut placement_weights = vec![0.0; model.placement_count()];
        for (profile, weight) in sample.profiles.iter().zip(&model.profile_weights) {
            if let Some(p) = model.placement_index(profile.placement) {
                placement_weights[p] += weight;
            }
        }
        let mut class_share = vec![0.0; classes.len()];
        for (r, &class) in profile_class.iter().enumerate() {
            let placement = classes.get(class as usize).and_then(|c| c.placement);
            if let Some(p) = placement.filter(|&p| placement_weights[p] > 0.0) {
                class_share[class as usize] +=
                    model.profile_weights[r] * f64::from(profile_scale[r]) / placement_weights[p];
            }
        }
        let mut forecaster = Forecaster {
            model,
            snapshot: Arc::clone(snapshot),
            profile_class,
            profile_scale,
            vocabulary,
            profile_group: profile_group_kept,
            representative,
            classes,
            members,
            masks,
            placement_weights,
            class_share,
            cap_factors: Vec::new(),
            delivered: vec![0; data.line_items.len()],
            profile: TrafficProfile::UNIFORM,
            books: Mutex::new(Vec::new()),
        };
        forecaster.cap_factors = forecaster.booked_cap_factors();
        forecaster
    }

    /// Sets what booked line items delivered in their lifetime before the forecast's range, in
    /// their goal's metric (counts, or micros of spend); unknown ones count as nothing.
    pub fn with_delivered(mut self, delivered: &[(LineItemId, u64)]) -> Self {
        for &(id, amount) in delivered {
            if let Some(i) = self.line_item_index(id) {
                self.delivered[i] = amount;
            }
        }
        self.books = Mutex::new(Vec::new());
        self
    }

    /// Allocates the booked line items over `range` and keeps the result, so that forecasts
    /// over that range answer from it (see [`Forecaster::availability`]). The few most
    /// recently used ranges are kept; a forecast over another range prepares it first.
    pub fn prepare(&self, range: Period) -> Result<(), ForecastError> {
        self.book(range).map(drop)
    }

    fn book(&self, range: Period) -> Result<Arc<Book>, ForecastError> {
        let hours = hours_of(range)?;
        let key = (range.start.as_second(), range.end.as_second());
        if let Some(book) = self.kept_books().iter().rev().find(|b| b.range == key) {
            return Ok(Arc::clone(book));
        }
        // Built without holding the lock: another range's forecast need not wait for it.
        let book = Arc::new(self.build_book(hours, false));
        let mut books = self.kept_books();
        if books.len() >= BOOKS {
            books.remove(0);
        }
        books.push(Arc::clone(&book));
        Ok(book)
    }

    fn kept_books(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Book>>> {
        // The list is only pushed to and trimmed: a panic elsewhere cannot leave it half
        // changed.
        self.books
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The booked line items' allocation over `hours`, of the model's traffic or of the
    /// sample's (`observed`).
    fn build_book(&self, hours: Vec<i64>, observed: bool) -> Book {
        let data = &self.snapshot.data;
        let lanes: Vec<Lane> = data
            .line_items
            .iter()
            .enumerate()
            .map(|(i, li)| self.lane(li, self.cap_factors[i], self.delivered[i], &hours))
            .collect();
        let supply = if observed {
            Supply::observed(self, &self.profile_class, self.classes.len(), &hours)
        } else {
            Supply::model(
                self,
                self.classes.iter().map(|c| c.placement).collect(),
                self.class_share.clone(),
                &hours,
            )
        };
        let mut timed: Vec<(u32, u32)> = self
            .members
            .iter()
            .filter(|m| m.mask != 0)
            .map(|m| (m.lane, m.mask))
            .collect();
        timed.sort_unstable();
        timed.dedup();
        let range = (
            hours.first().copied().unwrap_or(0),
            hours.last().map_or(0, |h| h + 3_600),
        );
        Book::new(
            Plan {
                range,
                hours,
                lanes,
                timed,
            },
            &self.masks,
            |class, pairs| {
                let members = &self.members[self.classes[class].members.clone()];
                pairs.extend(members.iter().map(|m| Pair {
                    unit: class as u32,
                    lane: m.lane,
                    mask: m.mask,
                }));
            },
            self.classes.len(),
            |class, hour| supply.at(class, hour),
        )
    }

    /// Distinct classes of requests the booked line items tell apart.
    pub fn classes(&self) -> usize {
        self.classes.len()
    }

    fn line_item_index(&self, id: LineItemId) -> Option<usize> {
        self.snapshot
            .data
            .line_items
            .binary_search_by_key(&id, |li| li.id)
            .ok()
    }

    /// The forecast for a line item, proposed or booked, over `range` (whole UTC hours): what
    /// its targeting matches, what is available to it and who else wants those impressions.
    ///
    /// Selection follows the engine: tiers one at a time, highest first; in sponsorship and
    /// standard, line items of a tier share a request by weight; in remnant and house the
    /// highest CPM value wins and equal values share by weight. A booked line item takes at
    /// most what its goal and pacing leave for each hour; what it does not take goes to the
    /// others of its priority (shared again by weight), then down. `available` gives this line
    /// item unlimited demand at its priority; a booked line item of the same id is replaced by
    /// it.
    pub fn availability(
        &self,
        line_item: &LineItemEntry,
        range: Period,
    ) -> Result<Availability, ForecastError> {
        let book = self.book(range)?;
        let query = self.query(line_item);
        Ok(self.answer(&query, &book, false))
    }

    /// The outlook of a booked line item over `range`: its [`Forecaster::availability`]
    /// against its goal for the range.
    pub fn delivery(
        &self,
        id: LineItemId,
        range: Period,
    ) -> Result<DeliveryForecast, ForecastError> {
        let i = self
            .line_item_index(id)
            .ok_or(ForecastError::UnknownLineItem(id))?;
        let availability = self.availability(&self.snapshot.data.line_items[i], range)?;
        let goal = availability.goal;
        let expected = goal.map_or(availability.available, |g| g.min(availability.available));
        let shortfall = goal.map_or(0.0, |g| (g - availability.available).max(0.0));
        let status = match availability.probability {
            None => Status::OnTrack,
            Some(p) if p >= ON_TRACK => Status::OnTrack,
            Some(p) if p >= AT_RISK => Status::AtRisk,
            Some(_) => Status::Shortfall,
        };
        Ok(DeliveryForecast {
            status,
            goal,
            expected,
            shortfall,
            probability: availability.probability,
            availability,
        })
    }

    /// Which requests the line item takes part in, as units of supply: each booked class
    /// split by whether (and at which hours) the line item accepts it.
    fn query(&self, line_item: &LineItemEntry) -> Query {
        let sample = self.model.sample;
        let data = &self.snapshot.data;
        let exclude = self.line_item_index(line_item.id);
        let time = line_item.targeting.as_ref().is_some_and(names_time);
        let engine = Engine::new(Arc::new(Snapshot {
            data: SnapshotData {
                line_items: vec![LineItemEntry {
                    targeting: line_item.targeting.as_ref().and_then(relax),
                    ..line_item.clone()
                }],
                placements: data.placements.clone(),
                sites: data.sites.clone(),
                publishers: data.publishers.clone(),
                ..SnapshotData::default()
            },
            version: self.snapshot.version,
            built_at: self.snapshot.built_at,
        }));
        let vocabulary = Vocabulary::of(sample, line_item.targeting.iter());
        let mut scratch = Scratch::default();
        let mut urls = FxHashMap::default();
        let mut answers: FxHashMap<Key, WeekMask> = FxHashMap::default();
        let mut units: FxHashMap<(u32, WeekMask), u32> = FxHashMap::default();
        let mut query = Query {
            line_item: line_item.clone(),
            exclude,
            profile_unit: Vec::with_capacity(sample.profiles.len()),
            unit_class: Vec::new(),
            unit_mask: Vec::new(),
            unit_share: Vec::new(),
            matched_samples: 0,
            cap_factor: 1.0,
        };
        // When every value its targeting names is named by a booked line item too, profiles
        // of one booked group are alike for it: each group is looked at once, not each profile.
        let by_group = self.vocabulary.covers(&vocabulary);
        let items: Vec<usize> = if by_group {
            self.representative.iter().map(|&r| r as usize).collect()
        } else {
            (0..sample.profiles.len()).collect()
        };
        let resolved: Vec<(WeekMask, u32)> = items
            .into_iter()
            .map(|r| {
                let profile = &sample.profiles[r];
                let key = vocabulary.key(sample, profile, &mut urls);
                let mask = *answers.entry(key).or_insert_with(|| {
                    let parts = Parts::of(sample, profile);
                    let request = request(sample, data, profile, &parts, self.model.now());
                    if engine.matching(&request, &mut scratch).is_empty() {
                        return [0; 3];
                    }
                    match (&line_item.targeting, time) {
                        (Some(targeting), true) => week_mask(targeting, &request),
                        _ => ALL_WEEK,
                    }
                });
                let class = self.profile_class[r];
                if class == DROPPED {
                    return (mask, DROPPED);
                }
                let next = query.unit_class.len() as u32;
                let unit = *units.entry((class, mask)).or_insert(next);
                if unit == next {
                    query.unit_class.push(class);
                    query.unit_mask.push(mask);
                    query.unit_share.push(0.0);
                }
                (mask, unit)
            })
            .collect();
        for r in 0..sample.profiles.len() {
            let item = if by_group {
                self.profile_group[r] as usize
            } else {
                r
            };
            let (mask, unit) = resolved[item];
            if mask != [0; 3] {
                query.matched_samples += u64::from(self.model.profile_counts[r]);
            }
            query.profile_unit.push(unit);
            if unit == DROPPED {
                continue;
            }
            let placement = self.classes[query.unit_class[unit as usize] as usize].placement;
            if let Some(p) = placement.filter(|&p| self.placement_weights[p] > 0.0) {
                query.unit_share[unit as usize] += self.model.profile_weights[r]
                    * f64::from(self.profile_scale[r])
                    / self.placement_weights[p];
            }
        }
        let caps = caps_of(data, line_item);
        if !caps.is_empty() {
            let mut counter = CapCounter::new(vec![caps]);
            counter.users = self.recent_entries(|entry| {
                let unit = query.profile_unit[entry.profile as usize];
                if unit != DROPPED && query.unit_mask[unit as usize] != [0; 3] {
                    counter.add(0, entry);
                }
            });
            query.cap_factor = counter.factors()[0];
        }
        query
    }

    /// Calls `f` with each sampled request of the [`CAP_DAYS`] before the model's `now`: every
    /// anonymous one, and those of one user in `users` (the returned number; users by their
    /// hash), so that about [`CAP_REQUESTS`] identified ones are read.
    fn recent_entries(&self, mut f: impl FnMut(&Entry)) -> u64 {
        let today = self.model.now().as_second().div_euclid(SECONDS_PER_DAY);
        let from = (today - CAP_DAYS) * MINUTES_PER_DAY;
        let to = today * MINUTES_PER_DAY;
        let recent = |e: &&Entry| (from..to).contains(&i64::from(e.minute));
        let entries = &self.model.sample.entries;
        let identified = entries
            .iter()
            .filter(recent)
            .filter(|e| e.user != 0)
            .count();
        let users = identified.div_ceil(CAP_REQUESTS).max(1) as u64;
        for entry in entries.iter().filter(recent) {
            if entry.user == 0 || (entry.user >> 17) % users == 0 {
                f(entry);
            }
        }
        users
    }

    fn booked_cap_factors(&self) -> Vec<f64> {
        let data = &self.snapshot.data;
        let mut slots = vec![u32::MAX; data.line_items.len()];
        let mut caps = Vec::new();
        for (i, li) in data.line_items.iter().enumerate() {
            let list = caps_of(data, li);
            if !list.is_empty() {
                slots[i] = caps.len() as u32;
                caps.push(list);
            }
        }
        let mut factors = vec![1.0; data.line_items.len()];
        if caps.is_empty() {
            return factors;
        }
        let mut counter = CapCounter::new(caps);
        // The capped members of each class, found once rather than per sampled request.
        let capped: Vec<Vec<u32>> = self
            .classes
            .iter()
            .map(|class| {
                self.members[class.members.clone()]
                    .iter()
                    .map(|m| slots[m.lane as usize])
                    .filter(|&slot| slot != u32::MAX)
                    .collect()
            })
            .collect();
        counter.users = self.recent_entries(|entry| {
            let class = self.profile_class[entry.profile as usize];
            for &slot in capped.get(class as usize).map_or(&[][..], Vec::as_slice) {
                counter.add(slot as usize, entry);
            }
        });
        let found = counter.factors();
        for (i, &slot) in slots.iter().enumerate() {
            if slot != u32::MAX {
                factors[i] = found[slot as usize];
            }
        }
        factors
    }

    fn lane(&self, li: &LineItemEntry, cap_factor: f64, delivered: u64, hours: &[i64]) -> Lane {
        let zone = TimeZone::get(&li.time_zone).unwrap_or(TimeZone::UTC);
        let goal = impressions_goal(li, delivered);
        let first = hours.first().copied().unwrap_or(0);
        let end = hours.last().map_or(first, |h| h + 3_600);
        let mut days = Vec::with_capacity(hours.len());
        let mut targets = Vec::new();
        let mut day_of_hour = Vec::with_capacity(hours.len());
        let mut current = None;
        for &hour in hours {
            let at = Timestamp::from_second(hour).unwrap_or(Timestamp::UNIX_EPOCH);
            let date = at.to_zoned(zone.clone()).date();
            if current != Some(date) {
                current = Some(date);
                days.push(hour);
            }
            day_of_hour.push((days.len() - 1) as u32);
        }
        // Lifetime targets at the end of each local day of the range, from the pacing crate's
        // goal curves over what is left of the flight.
        if let Some(lifetime) = goal.lifetime {
            let start = Timestamp::from_second(first.max(li.flight_start)).ok();
            let flight_end = li.flight_end.and_then(|e| Timestamp::from_second(e).ok());
            let schedule = start.and_then(|start| {
                Schedule::new(
                    &li.time_zone,
                    start,
                    flight_end.filter(|e| *e > start),
                    li.pacing,
                    marquee_model::Goal {
                        metric: GoalMetric::Impressions,
                        daily: None,
                        lifetime: Some(lifetime.max(1.0) as u64),
                    },
                )
                .ok()
            });
            for (d, _) in days.iter().enumerate() {
                let day_end = days.get(d + 1).copied().unwrap_or(end);
                let share = match (&schedule, start, flight_end) {
                    (Some(schedule), Some(start), Some(flight_end)) if flight_end > start => {
                        let at = Timestamp::from_second(day_end).unwrap_or(flight_end);
                        schedule.planned_share(
                            Period {
                                start,
                                end: flight_end,
                            },
                            at,
                            &self.profile,
                        )
                    }
                    _ => 1.0,
                };
                targets.push(lifetime * share);
            }
        }
        Lane {
            tier: li.tier,
            value: value_cpm(li),
            weight: f64::from(li.weight.max(1)),
            zone,
            flight: (li.flight_start, li.flight_end),
            mode: li.pacing,
            daily: goal.daily,
            targets,
            day_of_hour,
            days: days.len(),
            cap_factor,
            has_goal: goal.daily.is_some() || goal.lifetime.is_some(),
        }
    }

    /// The requests the line item accepts, in the hours it accepts them, with every booked
    /// line item taking part in them and its own lane (last); with each lane's position in the
    /// book.
    fn market<'b>(
        &self,
        query: &Query,
        book: &'b Book,
        forecast: &'b Lane,
        observed: bool,
    ) -> (Market<'b>, Vec<Option<usize>>, f64) {
        let hours = &book.hours;
        let s_len = book.segments.len();
        // The units it accepts at some hour, and their supply in those hours only.
        let local: Vec<usize> = (0..query.unit_class.len())
            .filter(|&u| query.unit_mask[u] != [0; 3])
            .collect();
        let supply = if observed {
            let mut item_of = vec![DROPPED; query.profile_unit.len()];
            let mut position = vec![DROPPED; query.unit_class.len()];
            for (i, &u) in local.iter().enumerate() {
                position[u] = i as u32;
            }
            for (item, &unit) in item_of.iter_mut().zip(&query.profile_unit) {
                if unit != DROPPED {
                    *item = position[unit as usize];
                }
            }
            Supply::observed(self, &item_of, local.len(), hours)
        } else {
            Supply::model(
                self,
                local
                    .iter()
                    .map(|&u| self.classes[query.unit_class[u] as usize].placement)
                    .collect(),
                local.iter().map(|&u| query.unit_share[u]).collect(),
                hours,
            )
        };
        let accepts: Vec<(bool, u8)> = hours
            .iter()
            .map(|&h| (forecast.in_flight(h), forecast.week_bit(h)))
            .collect();
        // Units with the same booked line items at the same hours share their requests alike
        // in every step of the allocation, which is linear in a unit's requests: each is run
        // once, on their sum.
        let mut alike: FxHashMap<&[Member], u32> = FxHashMap::default();
        let mut merged_of = Vec::with_capacity(local.len());
        let mut merged: Vec<usize> = Vec::new();
        for &u in &local {
            let members = &self.members[self.classes[query.unit_class[u] as usize].members.clone()];
            let next = merged.len() as u32;
            let m = *alike.entry(members).or_insert(next);
            if m == next {
                merged.push(u);
            }
            merged_of.push(m as usize);
        }
        let units = merged.len();
        let mut unit_supply = vec![0.0; s_len * units];
        // The variability of its placements' traffic, by their share of its supply.
        let (mut weighted, mut total) = (0.0, 0.0);
        for (i, &u) in local.iter().enumerate() {
            let mask = &query.unit_mask[u];
            let mut whole = 0.0;
            for (s, segment) in book.segments.iter().enumerate() {
                let here: f64 = segment
                    .clone()
                    .filter(|&h| accepts[h].0 && has_bit(mask, accepts[h].1))
                    .map(|h| supply.at(i, h))
                    .sum();
                unit_supply[s * units + merged_of[i]] += here;
                whole += here;
            }
            if let Some(p) = self.classes[query.unit_class[u] as usize].placement {
                weighted += whole * self.model.daily_cv(p);
                total += whole;
            }
        }
        let cv = if total > 0.0 { weighted / total } else { 0.0 };
        let local = merged;
        // Lanes: the booked line items taking part, then the forecast one.
        let mut position = vec![u32::MAX; book.lanes.len()];
        let mut lanes: Vec<(&Lane, Option<u32>)> = Vec::new();
        for &u in &local {
            let class = &self.classes[query.unit_class[u] as usize];
            for member in &self.members[class.members.clone()] {
                let at = &mut position[member.lane as usize];
                if *at == u32::MAX {
                    *at = lanes.len() as u32;
                    lanes.push((&book.lanes[member.lane as usize], Some(member.lane)));
                }
            }
        }
        let forecast_at = lanes.len() as u32;
        lanes.push((forecast, None));
        // Groups: the book's, and the forecast line item's if the book has none like it.
        let key = forecast.key();
        let mut groups: Vec<(Option<u32>, Vec<Pair>)> = (0..book.keys.len())
            .map(|g| (Some(g as u32), Vec::new()))
            .collect();
        let (forecast_group, inserted) = match book.keys.binary_search_by(|g| key.cmp(g)) {
            Ok(g) => (g, false),
            Err(g) => {
                groups.insert(g, (None, Vec::new()));
                (g, true)
            }
        };
        let group_of = |book_group: u32| {
            let g = book_group as usize;
            g + usize::from(inserted && g >= forecast_group)
        };
        for (i, &u) in local.iter().enumerate() {
            let class = &self.classes[query.unit_class[u] as usize];
            for member in &self.members[class.members.clone()] {
                let g = group_of(book.lane_group[member.lane as usize]);
                groups[g].1.push(Pair {
                    unit: i as u32,
                    lane: position[member.lane as usize],
                    mask: member.mask,
                });
            }
            groups[forecast_group].1.push(Pair {
                unit: i as u32,
                lane: forecast_at,
                mask: ALWAYS,
            });
        }
        let mut group_lanes = vec![Vec::new(); groups.len()];
        for (l, &(_, book_lane)) in lanes.iter().enumerate() {
            let g = book_lane.map_or(forecast_group, |b| group_of(book.lane_group[b as usize]));
            group_lanes[g].push(l as u32);
        }
        // Keep only the groups with requests here.
        let (groups, group_lanes): (Vec<_>, Vec<Vec<u32>>) = groups
            .into_iter()
            .zip(group_lanes)
            .filter(|((_, pairs), _)| !pairs.is_empty())
            .unzip();
        let mut lane_group = vec![0; lanes.len()];
        for (g, members) in group_lanes.iter().enumerate() {
            for &l in members {
                lane_group[l as usize] = g as u32;
            }
        }
        let book_days = book.day_matching();
        let mut matching = vec![0.0; lanes.len() * s_len];
        let mut day_matching = Vec::with_capacity(lanes.len());
        for (l, &(lane, book_lane)) in lanes.iter().enumerate() {
            let row = &mut matching[l * s_len..(l + 1) * s_len];
            match book_lane {
                Some(b) => {
                    let b = b as usize;
                    row.copy_from_slice(&book.matching[b * s_len..(b + 1) * s_len]);
                    day_matching.push(book_days[b].clone());
                }
                None => {
                    let mut days = vec![0.0; lane.days];
                    for (s, segment) in book.segments.iter().enumerate() {
                        row[s] = unit_supply[s * units..(s + 1) * units].iter().sum();
                        days[lane.day_of_hour[segment.start] as usize] += row[s];
                    }
                    day_matching.push(days);
                }
            }
        }
        let excluded = query
            .exclude
            .map(|i| position[i])
            .filter(|&at| at != u32::MAX);
        let book_lanes = lanes.iter().map(|l| l.1.map(|b| b as usize)).collect();
        (
            Market {
                lanes,
                groups,
                group_lanes,
                lane_group,
                units,
                supply: unit_supply,
                matching,
                day_matching,
                forecast: Some(forecast_at),
                excluded,
            },
            book_lanes,
            cv,
        )
    }

    fn answer(&self, query: &Query, book: &Book, observed: bool) -> Availability {
        let data = &self.snapshot.data;
        let delivered = query.exclude.map_or(0, |i| self.delivered[i]);
        let lane = self.lane(&query.line_item, query.cap_factor, delivered, &book.hours);
        let (market, book_lanes, cv) = self.market(query, book, &lane, observed);
        let forecast = market.lanes.len() - 1;
        let s_len = book.segments.len();
        // Groups above the forecast line item's (and the replaced one's) take what they took
        // in the book: the passes after the replay start below them, from what they left.
        let first = market.lane_group[forecast].min(
            market
                .excluded
                .map_or(u32::MAX, |x| market.lane_group[x as usize]),
        ) as usize;
        let mut replay = book.run(
            &market,
            &self.masks,
            Pass {
                mode: Mode::Replay,
                reference: None,
                groups: 0..market.groups.len(),
                entry: None,
                keep_entry: Some(first),
            },
            None,
        );
        let offers = std::mem::take(&mut replay.offers);
        let entry = std::mem::take(&mut replay.entry);
        let pass = |mode: Mode, last: usize| Pass {
            mode,
            reference: Some(&offers),
            groups: first..last,
            entry: Some(&entry),
            keep_entry: None,
        };
        let all = market.groups.len();
        let baseline = market
            .excluded
            .map(|_| book.run(&market, &self.masks, pass(Mode::Baseline, all), None));
        // What it gets at its priority does not depend on the groups below it.
        let own = market.lane_group[forecast] as usize + 1;
        let unlimited = book.run(&market, &self.masks, pass(Mode::Unlimited, own), None);
        let mut daily: Vec<Day> = Vec::new();
        for (s, segment) in book.segments.iter().enumerate() {
            let day = book.hours[segment.start].div_euclid(SECONDS_PER_DAY);
            if daily.last().is_none_or(|d| d.day != day) {
                daily.push(Day {
                    day,
                    matching: 0.0,
                    available: 0.0,
                });
            }
            if let Some(d) = daily.last_mut() {
                d.matching += market.matching[forecast * s_len + s];
                d.available += unlimited.by_segment[s];
            }
        }
        let available: f64 = unlimited.by_segment.iter().sum();
        let matching: f64 = daily.iter().map(|d| d.matching).sum();
        let id = |l: usize| book_lanes[l].map(|b| data.line_items[b].id);
        // Booked line items' takes without it: those above the passes' groups as in the book.
        let local: Vec<f64> = match &baseline {
            Some(baseline) => (0..market.lanes.len())
                .map(|l| {
                    if (market.lane_group[l] as usize) < first {
                        replay.local[l]
                    } else {
                        baseline.local[l]
                    }
                })
                .collect(),
            None => replay.local.clone(),
        };
        let mut contending: Vec<Contender> = local
            .iter()
            .enumerate()
            .filter(|(l, t)| **t > 0.0 && *l != forecast)
            .filter_map(|(l, &t)| {
                id(l).map(|line_item| Contender {
                    line_item,
                    impressions: t,
                })
            })
            .collect();
        sort_contenders(&mut contending);
        let goal = lane.goal_in_range(&book.hours);
        let impact = if goal.is_some() {
            let booked = book.run(&market, &self.masks, pass(Mode::Booked, all), None);
            let unchanged = vec![0.0; market.lanes.len()];
            let before = baseline.as_ref().map_or(&unchanged, |b| &b.delta);
            let mut impact: Vec<Contender> = before
                .iter()
                .zip(&booked.delta)
                .enumerate()
                .filter(|(l, (before, after))| *l != forecast && *before - *after > 0.5)
                .filter_map(|(l, (before, after))| {
                    id(l).map(|line_item| Contender {
                        line_item,
                        impressions: before - after,
                    })
                })
                .collect();
            sort_contenders(&mut impact);
            impact
        } else {
            Vec::new()
        };
        let probability = goal.map(|goal| probability(query, cv, available, goal, daily.len()));
        Availability {
            matching,
            available,
            goal,
            probability,
            daily,
            contending,
            impact,
            cap_factor: query.cap_factor,
        }
    }
}

/// The chance that what is available reaches the goal, taking the available impressions as
/// normally distributed around the forecast with a relative standard deviation from two
/// sources: the daily variability of its placements' traffic around the model (`cv`;
/// independent days, so it shrinks with the square root of the days), and the sampling error of
/// the records it matched (one over the square root of their number).
fn probability(query: &Query, cv: f64, available: f64, goal: f64, days: usize) -> f64 {
    if goal <= 0.0 {
        return 1.0;
    }
    if available <= 0.0 || query.matched_samples == 0 {
        return 0.0;
    }
    let sigma = (cv * cv / days.max(1) as f64 + 1.0 / query.matched_samples as f64).sqrt();
    normal_cdf((available - goal) / (sigma * available).max(1e-9))
}

/// Threshold sampling (Duffield, Lund and Thorup): with more than `limit` weights, each is
/// kept with probability `min(1, w / τ)` and then counts as `max(w, τ)`, with `τ` such that
/// about `limit` are kept. Heavy representatives stay exact, light ones are drawn, and every
/// total stays unbiased. Returns each weight's multiplier (0 for dropped). The draw is a hash
/// of the position, so the same sample gives the same representatives.
fn thin(weights: &[f64], limit: usize) -> Vec<f64> {
    if weights.len() <= limit {
        return vec![1.0; weights.len()];
    }
    let kept = |tau: f64| weights.iter().map(|w| (w / tau).min(1.0)).sum::<f64>();
    let (mut low, mut high) = (1e-12, weights.iter().sum::<f64>().max(1e-12));
    for _ in 0..100 {
        let mid = (low * high).sqrt();
        if kept(mid) > limit as f64 {
            low = mid;
        } else {
            high = mid;
        }
    }
    let tau = high;
    weights
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            if w >= tau {
                1.0
            } else if w > 0.0 && unit_hash(i as u64) < w / tau {
                tau / w
            } else {
                0.0
            }
        })
        .collect()
}

/// A uniform number in [0, 1) from a position (SplitMix64's finaliser).
fn unit_hash(i: u64) -> f64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

fn sort_contenders(list: &mut [Contender]) {
    list.sort_by(|a, b| {
        b.impressions
            .total_cmp(&a.impressions)
            .then(a.line_item.cmp(&b.line_item))
    });
}

/// The UTC hours of a range.
fn hours_of(range: Period) -> Result<Vec<i64>, ForecastError> {
    let (start, end) = (range.start.as_second(), range.end.as_second());
    if start.rem_euclid(3_600) != 0 || end <= start || range.start.subsec_nanosecond() != 0 {
        return Err(ForecastError::Range);
    }
    Ok((start..end).step_by(3_600).collect())
}

/// The line item's and its campaign's caps. Campaign caps are applied to each line item
/// alone, an approximation that overestimates delivery when several line items share one.
fn caps_of(data: &SnapshotData, li: &LineItemEntry) -> Vec<FrequencyCap> {
    let mut caps = li.frequency_caps.clone();
    if let Ok(c) = data
        .campaigns
        .binary_search_by_key(&li.campaign_id, |c| c.id)
    {
        caps.extend(data.campaigns[c].frequency_caps.iter().copied());
    }
    caps
}

/// Counts sampled requests per (user, cap window) to estimate the share a cap lets through:
/// for each user and window, at most the cap's count of the requests. Requests without a user
/// are never capped (nor are they by the engine). Windows are fixed, not sliding.
struct CapCounter {
    caps: Vec<Vec<FrequencyCap>>,
    counts: Vec<Vec<FxHashMap<(u64, i64), u32>>>,
    anonymous: Vec<u64>,
    /// One user in this many was counted: their requests stand for this many users'.
    users: u64,
}

impl CapCounter {
    fn new(caps: Vec<Vec<FrequencyCap>>) -> CapCounter {
        let counts = caps
            .iter()
            .map(|list| vec![FxHashMap::default(); list.len()])
            .collect();
        let anonymous = vec![0; caps.len()];
        CapCounter {
            caps,
            counts,
            anonymous,
            users: 1,
        }
    }

    fn add(&mut self, slot: usize, entry: &Entry) {
        if entry.user == 0 {
            self.anonymous[slot] += 1;
            return;
        }
        for (cap, counts) in self.caps[slot].iter().zip(&mut self.counts[slot]) {
            let window = i64::from(entry.minute) * 60 / i64::from(cap.window.seconds().max(60));
            *counts.entry((entry.user, window)).or_insert(0) += 1;
        }
    }

    fn factors(&self) -> Vec<f64> {
        self.caps
            .iter()
            .enumerate()
            .map(|(slot, caps)| {
                caps.iter()
                    .zip(&self.counts[slot])
                    .map(|(cap, counts)| {
                        let anonymous = self.anonymous[slot] as f64;
                        let (mut kept, mut all) = (0.0, 0.0);
                        for &n in counts.values() {
                            kept += f64::from(n.min(cap.count));
                            all += f64::from(n);
                        }
                        let scale = self.users as f64;
                        let (kept, all) = (anonymous + kept * scale, anonymous + all * scale);
                        if all > 0.0 { kept / all } else { 1.0 }
                    })
                    .fold(1.0, f64::min)
            })
            .collect()
    }
}

/// A line item's goal in impressions: clicks at the engine's default CTR, spend at its CPM or
/// CPC price; less what it delivered already.
struct ImpressionGoal {
    daily: Option<f64>,
    lifetime: Option<f64>,
}

fn impressions_goal(li: &LineItemEntry, delivered: u64) -> ImpressionGoal {
    let none = ImpressionGoal {
        daily: None,
        lifetime: None,
    };
    let Some(goal) = li.goal else {
        return none;
    };
    let ctr = f64::from(Control::FULL_SPEED.ctr_ppm) / 1e6;
    let price = li.price.amount_micros.0 as f64;
    let per_unit = match (goal.metric, li.price.model) {
        (GoalMetric::Impressions, _) => 1.0,
        (GoalMetric::Clicks, _) => 1.0 / ctr,
        (GoalMetric::Spend, PricingModel::Cpm) if price > 0.0 => 1_000.0 / price,
        (GoalMetric::Spend, PricingModel::Cpc) if price > 0.0 => 1.0 / (price * ctr),
        (GoalMetric::Spend, _) => return none,
    };
    let left = |amount: u64| (amount.saturating_sub(delivered)) as f64 * per_unit;
    ImpressionGoal {
        daily: goal.daily.map(|d| d as f64 * per_unit),
        lifetime: goal.lifetime.map(left),
    }
}

/// What one impression is worth to a remnant or house line item, as CPM micros in its own
/// currency (currencies are not converted).
fn value_cpm(li: &LineItemEntry) -> i64 {
    let amount = li.price.amount_micros.0;
    match li.price.model {
        PricingModel::Cpm => amount,
        PricingModel::Cpc => amount.saturating_mul(i64::from(Control::FULL_SPEED.ctr_ppm)) / 1_000,
        PricingModel::Flat => 0,
    }
}

/// The standard normal distribution function (Abramowitz and Stegun 7.1.26, error < 1.5e-7).
fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// A line item as the forecast sees it.
struct Query {
    line_item: LineItemEntry,
    exclude: Option<usize>,
    profile_unit: Vec<u32>,
    unit_class: Vec<u32>,
    /// At which local hours of the week the line item accepts the unit; all zero: never.
    unit_mask: Vec<WeekMask>,
    /// Share of its placement's traffic.
    unit_share: Vec<f64>,
    matched_samples: u64,
    cap_factor: f64,
}

/// Expected requests per item (class or unit) and hour.
enum Supply {
    /// From the traffic model: the placement's hourly volume times the item's share.
    Model {
        /// Placement × hour.
        volumes: Vec<f64>,
        hours: usize,
        placement: Vec<Option<usize>>,
        share: Vec<f64>,
    },
    /// Observed: item × hour, already scaled.
    Observed { table: Vec<f64>, hours: usize },
}

impl Supply {
    fn model(
        forecaster: &Forecaster<'_, '_>,
        placement: Vec<Option<usize>>,
        share: Vec<f64>,
        hours: &[i64],
    ) -> Supply {
        let model = forecaster.model;
        let placements = model.placement_count();
        let mut volumes = vec![0.0; placements * hours.len()];
        for p in 0..placements {
            for (h, &hour) in hours.iter().enumerate() {
                volumes[p * hours.len() + h] = model.hourly_at(p, hour);
            }
        }
        Supply::Model {
            volumes,
            hours: hours.len(),
            placement,
            share,
        }
    }

    /// What the sample holds for each item (of each profile: `item_of`) in each hour of the
    /// range, scaled by the rate.
    fn observed(
        forecaster: &Forecaster<'_, '_>,
        item_of: &[u32],
        items: usize,
        hours: &[i64],
    ) -> Supply {
        let sample = forecaster.model.sample;
        let mut table = vec![0.0; items * hours.len()];
        let first = hours.first().copied().unwrap_or(0) / 60;
        let scale = 1.0 / sample.rate();
        for entry in &sample.entries {
            let minute = i64::from(entry.minute);
            let h = (minute - first).div_euclid(60);
            let item = item_of[entry.profile as usize];
            if h >= 0 && (h as usize) < hours.len() && item != DROPPED {
                let scale = scale * f64::from(forecaster.profile_scale[entry.profile as usize]);
                table[item as usize * hours.len() + h as usize] += scale;
            }
        }
        Supply::Observed {
            table,
            hours: hours.len(),
        }
    }

    fn at(&self, item: usize, hour: usize) -> f64 {
        match self {
            Supply::Model {
                volumes,
                hours,
                placement,
                share,
            } => placement[item].map_or(0.0, |p| volumes[p * hours + hour] * share[item]),
            Supply::Observed { table, hours } => table[item * hours + hour],
        }
    }
}

/// Forecasts against the model and against observed traffic, for backtests: the books of
/// both, then one question per line item.
pub(crate) struct Observed {
    predicted: Book,
    actual: Book,
}

impl Observed {
    pub(crate) fn new(
        forecaster: &Forecaster<'_, '_>,
        range: Period,
    ) -> Result<Observed, ForecastError> {
        let hours = hours_of(range)?;
        Ok(Observed {
            predicted: forecaster.build_book(hours.clone(), false),
            actual: forecaster.build_book(hours, true),
        })
    }

    pub(crate) fn forecast(
        &self,
        forecaster: &Forecaster<'_, '_>,
        line_item: &LineItemEntry,
    ) -> (Availability, Availability) {
        let query = forecaster.query(line_item);
        (
            forecaster.answer(&query, &self.predicted, false),
            forecaster.answer(&query, &self.actual, true),
        )
    }
}

impl Forecaster<'_, '_> {
    pub(crate) fn snapshot_data(&self) -> &SnapshotData {
        &self.snapshot.data
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    use crate::workload::{Shape, proposal, world};

    /// A question re-runs only the requests its line item accepts, with the book's offers
    /// elsewhere: what it finds available must be what the whole allocation gives the same
    /// line item booked without a goal (which takes all it can at its priority), and the
    /// impact of booking it with its goal what the whole allocation with it booked takes from
    /// the others.
    #[test]
    fn a_question_answers_as_the_whole_allocation_with_the_line_item_booked() {
        let shape = Shape {
            placements: 10,
            line_items: 200,
            train_days: 14,
            test_days: 0,
            per_day: 4_000.0,
            rate: 0.01,
        };
        let world = world(shape, 5);
        let model = TrafficModel::fit(&world.sample, world.split);
        let range = Period {
            start: world.split,
            end: Timestamp::from_second(world.split.as_second() + 7 * 86_400).unwrap(),
        };
        let forecaster = Forecaster::new(&world.snapshot, &model);
        // Sponsorship (in this market standard and below get little), every request, 20% of
        // them a day: enough to take from the others.
        let proposal = LineItemEntry {
            tier: marquee_model::Tier::Sponsorship,
            targeting: None,
            goal: Some(marquee_model::Goal {
                metric: GoalMetric::Impressions,
                daily: Some(80_000),
                lifetime: None,
            }),
            ..proposal(shape)
        };
        let answer = forecaster.availability(&proposal, range).unwrap();
        let with = |li: LineItemEntry| {
            let mut data = world.snapshot.data.clone();
            data.line_items.push(li);
            let snapshot = Arc::new(Snapshot {
                data,
                version: 2,
                built_at: world.split,
            });
            let forecaster = Forecaster::new(&snapshot, &model);
            let book = forecaster.book(range).unwrap();
            let totals: Vec<f64> = (0..book.lanes.len()).map(|l| book.taken(l)).collect();
            totals
        };
        let unlimited = with(LineItemEntry {
            goal: None,
            ..proposal.clone()
        });
        let whole = unlimited[unlimited.len() - 1];
        assert!(answer.available > 0.01 * answer.matching, "{answer:?}");
        assert!(
            (answer.available - whole).abs() <= 0.02 * whole,
            "{} against {whole}",
            answer.available
        );
        let booked = with(proposal.clone());
        let before = forecaster.book(range).unwrap();
        let taken: f64 = (0..before.lanes.len())
            .map(|l| before.taken(l) - booked[l])
            .sum();
        let impact: f64 = answer.impact.iter().map(|c| c.impressions).sum();
        assert!(taken > 0.0);
        assert!(
            (impact - taken).abs() <= 0.05 * taken,
            "{impact} against {taken}"
        );
    }

    #[test]
    fn the_normal_distribution_function_is_right_where_it_matters() {
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_cdf(1.281_551_6) - 0.9).abs() < 1e-6);
        assert!((normal_cdf(-1.644_853_6) - 0.05).abs() < 1e-6);
    }

    #[test]
    fn ranges_are_whole_hours() {
        let at = |s| Timestamp::from_second(s).unwrap();
        assert_eq!(
            hours_of(Period {
                start: at(3_600),
                end: at(3 * 3_600)
            })
            .unwrap(),
            vec![3_600, 7_200]
        );
        assert!(
            hours_of(Period {
                start: at(3_601),
                end: at(7_200)
            })
            .is_err()
        );
        assert!(
            hours_of(Period {
                start: at(7_200),
                end: at(7_200)
            })
            .is_err()
        );
    }
}
