//! Live statistics in prepared ad code, after the seed paper's ranking banners: a creative's
//! markup may show `{{STAT:NAME}}` values ([`marquee_model::LIVE_STATISTICS`]); the manager
//! reads them from the stats store, renders them as text into the snapshot's ad code and
//! publishes a new snapshot when one changed. The edge only serves the prepared text.
//!
//! # When a creative is re-rendered
//!
//! Each creative with live statistics has its own next render time. At a render its values are
//! read again, and the next one is set `requests_per_render` requests of traffic later at the
//! rate its placements saw in the last hour:
//!
//! ```text
//! interval = clamp(requests_per_render × 3600 s / requests in the last hour, min, max)
//! ```
//!
//! where requests are the decisions and bids logged on the placements its line item is linked
//! to (all line items together), or, for a line item without links, its own. A banner on a
//! placement with 100 requests a second is re-rendered every `min_interval`; one on a placement
//! with 48 visitors a day every `max_interval`. With the defaults (100 requests, 2 s, 10 min) a
//! placement at 10 requests a second gives 10 s.
//!
//! # Batching and versions
//!
//! Renders happen in [`Manager::refresh`](crate::Manager::refresh), one pass per compile tick:
//! every creative due is read in the same few queries, and if any value changed the snapshot is
//! compiled once, from the catalog kept in memory since the last catalog compile. So there is at
//! most one compile per tick, and none when no value changed.
//!
//! An edge accepts only a snapshot with a higher version, and a live re-render does not move the
//! store's change counter. So the manager's snapshot version is `counter × 2³² + revision`
//! ([`version`]): a catalog compile starts revision 0, each live re-render adds one. The edge
//! compares versions as before; the manager compares the counter it last compiled at with the
//! store's (after a start, [`catalog_version`] of the snapshot adopted from disk).
//!
//! That natural version is raised when it would not be above every version published or
//! served already: the counter can go back (the database restored from a backup) and the
//! snapshot directory can be lost while edges keep what they had, and an edge refuses every
//! version up to its own. See [`Manager::refresh`](crate::Manager::refresh).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use marquee_model::Catalog;
use marquee_snapshot::{LiveTable, LiveValues, uses_live_statistics};
use marquee_stats::{Counters, Granularity, RowQuery};
use marquee_store::{Store, StoreError};

/// Bits of a snapshot version below the catalog's change counter.
const REVISION_BITS: u32 = 32;

/// The snapshot version of catalog `counter` at live-statistics `revision`.
pub fn version(counter: u64, revision: u32) -> u64 {
    (counter << REVISION_BITS) | u64::from(revision)
}

/// The store change counter a snapshot version was compiled at.
pub fn catalog_version(version: u64) -> u64 {
    version >> REVISION_BITS
}

/// The live-statistics revision of a snapshot version.
pub fn revision(version: u64) -> u32 {
    // The mask keeps the low 32 bits, so the conversion cannot fail.
    u32::try_from(version & u64::from(u32::MAX)).unwrap_or(u32::MAX)
}

/// How often creatives with live statistics are re-rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveOptions {
    /// The shortest interval between two renders of a creative (busy placements).
    pub min_interval: Duration,
    /// The longest (quiet placements, or none logged in the last hour).
    pub max_interval: Duration,
    /// Requests on a creative's placements between two of its renders.
    pub requests_per_render: u64,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            min_interval: Duration::from_secs(2),
            max_interval: Duration::from_secs(600),
            requests_per_render: 100,
        }
    }
}

impl LiveOptions {
    /// The interval after a render, for `requests` logged on the placements in the last hour.
    pub fn interval(&self, requests_last_hour: u64) -> Duration {
        if requests_last_hour == 0 {
            return self.max_interval;
        }
        let millis =
            u128::from(self.requests_per_render) * 3_600_000 / u128::from(requests_last_hour);
        let interval = Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX));
        interval.clamp(self.min_interval, self.max_interval.max(self.min_interval))
    }
}

/// A creative with live statistics, as of the last catalog compile.
#[derive(Debug, Clone)]
struct LiveCreative {
    id: u64,
    line_item: u64,
}

/// What a line item contributes to renders: its campaign (for the rank), its day (time zone)
/// and the placements whose traffic sets its creatives' intervals.
#[derive(Debug, Clone)]
struct LineItemPlan {
    campaign: u64,
    zone: TimeZone,
    placements: Vec<u64>,
}

/// The state of the renders: the catalog they compile from, the values rendered into the
/// latest snapshot, and when each creative is due.
#[derive(Debug, Default)]
pub(crate) struct LiveState {
    catalog: Option<Arc<Catalog>>,
    creatives: Vec<LiveCreative>,
    line_items: HashMap<u64, LineItemPlan>,
    campaigns: HashMap<u64, Vec<u64>>,
    values: LiveTable,
    due: HashMap<u64, Timestamp>,
    renders: HashMap<u64, u64>,
    compiles: u64,
    /// A value changed that no published snapshot shows yet (a failed compile or publish
    /// leaves it set, so the next refresh tries again).
    unpublished: bool,
    /// The store change counter the published snapshot was compiled at, once this process
    /// published one (or found its compile equal to the published bytes). A raised version
    /// does not carry it, so it is kept here.
    compiled_counter: Option<u64>,
    /// The version was raised above its natural value and that was logged; cleared when a
    /// natural version is published again, so each episode warns once.
    raised: bool,
}

/// One creative's live state, for tests and operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveStatus {
    /// The values in the latest compiled ad code.
    pub values: LiveValues,
    /// When it is read again.
    pub next_render: Timestamp,
    /// How often it has been read since the manager started.
    pub renders: u64,
}

impl LiveState {
    pub(crate) fn catalog(&self) -> Option<&Arc<Catalog>> {
        self.catalog.as_ref()
    }

    pub(crate) fn values(&self) -> &LiveTable {
        &self.values
    }

    pub(crate) fn count_compile(&mut self) {
        self.compiles += 1;
    }

    /// The values are in the latest snapshot, compiled from the catalog at `counter`.
    pub(crate) fn mark_published(&mut self, counter: u64) {
        self.unpublished = false;
        self.compiled_counter = Some(counter);
    }

    pub(crate) fn compiled_counter(&self) -> Option<u64> {
        self.compiled_counter
    }

    /// Notes whether the version about to be published is raised; true the first time of an
    /// episode, when it is to be logged.
    pub(crate) fn note_raised(&mut self, raised: bool) -> bool {
        let first = raised && !self.raised;
        self.raised = raised;
        first
    }

    pub(crate) fn compiles(&self) -> u64 {
        self.compiles
    }

    pub(crate) fn status(&self, creative: u64) -> Option<LiveStatus> {
        Some(LiveStatus {
            values: *self.values.get(&creative)?,
            next_render: *self.due.get(&creative)?,
            renders: self.renders.get(&creative).copied().unwrap_or(0),
        })
    }

    /// Adopts a newly read catalog: creatives that remain keep their values and render times;
    /// new ones are due at once, so their first snapshot already shows real values.
    pub(crate) fn set_catalog(&mut self, catalog: Arc<Catalog>) {
        let mut line_items: HashMap<u64, LineItemPlan> = catalog
            .line_items
            .iter()
            .map(|li| {
                let zone = TimeZone::get(&li.object.time_zone).unwrap_or(TimeZone::UTC);
                let plan = LineItemPlan {
                    campaign: li.object.campaign_id.0,
                    zone,
                    placements: Vec::new(),
                };
                (li.meta.id, plan)
            })
            .collect();
        for (line_item, placement) in &catalog.links {
            if let Some(plan) = line_items.get_mut(&line_item.0) {
                plan.placements.push(placement.0);
            }
        }
        let mut campaigns: HashMap<u64, Vec<u64>> = HashMap::new();
        for (&id, plan) in &line_items {
            campaigns.entry(plan.campaign).or_default().push(id);
        }
        self.creatives = catalog
            .creatives
            .iter()
            .filter(|c| uses_live_statistics(&c.object))
            .filter(|c| line_items.contains_key(&c.object.line_item_id.0))
            .map(|c| LiveCreative {
                id: c.meta.id,
                line_item: c.object.line_item_id.0,
            })
            .collect();
        let kept: HashSet<u64> = self.creatives.iter().map(|c| c.id).collect();
        self.values.retain(|id, _| kept.contains(id));
        self.due.retain(|id, _| kept.contains(id));
        self.renders.retain(|id, _| kept.contains(id));
        self.line_items = line_items;
        self.campaigns = campaigns;
        self.catalog = Some(catalog);
    }

    /// Reads the values of every creative due at `now` and sets its next render time. Returns
    /// whether a value changed (or a creative got its first values) since the latest published
    /// snapshot, that is whether the snapshot must be compiled again.
    pub(crate) async fn render_due(
        &mut self,
        store: &dyn Store,
        options: &LiveOptions,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let due: Vec<LiveCreative> = self
            .creatives
            .iter()
            .filter(|c| self.due.get(&c.id).is_none_or(|at| *at <= now))
            .cloned()
            .collect();
        if due.is_empty() {
            return Ok(self.unpublished);
        }
        let today = self.today(store, &due, now).await?;
        let traffic = self.traffic(store, &due, now).await?;
        let mut changed = false;
        for creative in &due {
            let values = self.values_of(creative.line_item, &today);
            changed |= self.values.insert(creative.id, values) != Some(values);
            let requests = traffic.get(&creative.line_item).copied().unwrap_or(0);
            let interval =
                SignedDuration::try_from(options.interval(requests)).unwrap_or(SignedDuration::MAX);
            self.due
                .insert(creative.id, now.saturating_add(interval).unwrap_or(now));
            *self.renders.entry(creative.id).or_default() += 1;
        }
        self.unpublished |= changed;
        Ok(self.unpublished)
    }

    /// Today's delivery (each line item's day in its time zone) of every line item ranked
    /// with a due creative's: one query per distinct local midnight.
    async fn today(
        &self,
        store: &dyn Store,
        due: &[LiveCreative],
        now: Timestamp,
    ) -> Result<HashMap<u64, Counters>, StoreError> {
        let mut by_midnight: HashMap<Timestamp, Vec<u64>> = HashMap::new();
        let campaigns: HashSet<u64> = due
            .iter()
            .filter_map(|c| self.line_items.get(&c.line_item))
            .map(|plan| plan.campaign)
            .collect();
        for campaign in campaigns {
            for &line_item in self.campaigns.get(&campaign).into_iter().flatten() {
                let Some(plan) = self.line_items.get(&line_item) else {
                    continue;
                };
                let midnight = now
                    .to_zoned(plan.zone.clone())
                    .start_of_day()
                    .map_or(now, |start| start.timestamp());
                by_midnight.entry(midnight).or_default().push(line_item);
            }
        }
        let mut today = HashMap::new();
        for (midnight, line_items) in by_midnight {
            today.extend(store.delivery(Some(line_items), midnight, now).await?);
        }
        Ok(today)
    }

    /// Requests in the last hour per due creative's line item: the decisions and bids on its
    /// linked placements, or its own for a line item without links.
    async fn traffic(
        &self,
        store: &dyn Store,
        due: &[LiveCreative],
        now: Timestamp,
    ) -> Result<HashMap<u64, u64>, StoreError> {
        let requests =
            |c: &Counters| u64::try_from(c.decisions.saturating_add(c.bids)).unwrap_or(0);
        let hour_ago = now
            .saturating_sub(SignedDuration::from_hours(1))
            .unwrap_or(now);
        let mut placements: Vec<u64> = Vec::new();
        let mut unlinked: Vec<u64> = Vec::new();
        for creative in due {
            match self.line_items.get(&creative.line_item) {
                Some(plan) if !plan.placements.is_empty() => placements.extend(&plan.placements),
                _ => unlinked.push(creative.line_item),
            }
        }
        placements.sort_unstable();
        placements.dedup();
        unlinked.sort_unstable();
        unlinked.dedup();

        let mut per_placement: HashMap<u64, u64> = HashMap::new();
        if !placements.is_empty() {
            let from = hour_ago.as_second() - hour_ago.as_second().rem_euclid(60);
            let rows = store
                .report_rows(RowQuery {
                    table: Granularity::Minute,
                    from,
                    to: now.as_second() + 1,
                    line_items: None,
                    placements: Some(placements),
                    countries: None,
                    regions: None,
                    devices: None,
                    by_line_item: false,
                    by_creative: false,
                    by_placement: true,
                    by_country: false,
                    by_region: false,
                    by_device: false,
                })
                .await?;
            for row in rows {
                *per_placement.entry(row.placement).or_default() += requests(&row.counters);
            }
        }
        let own = if unlinked.is_empty() {
            HashMap::new()
        } else {
            store.delivery(Some(unlinked), hour_ago, now).await?
        };

        let mut traffic = HashMap::new();
        for creative in due {
            let line_item = creative.line_item;
            let total = match self.line_items.get(&line_item) {
                Some(plan) if !plan.placements.is_empty() => plan
                    .placements
                    .iter()
                    .map(|p| per_placement.get(p).copied().unwrap_or(0))
                    .sum(),
                _ => own.get(&line_item).map_or(0, requests),
            };
            traffic.insert(line_item, total);
        }
        Ok(traffic)
    }

    /// The values of a line item's creatives from today's delivery of its campaign.
    fn values_of(&self, line_item: u64, today: &HashMap<u64, Counters>) -> LiveValues {
        let count = |c: Option<&Counters>, f: fn(&Counters) -> i64| {
            c.map_or(0, |c| u64::try_from(f(c)).unwrap_or(0))
        };
        let own = today.get(&line_item);
        let impressions = count(own, |c| c.impressions);
        let clicks = count(own, |c| c.clicks);
        let ctr = clicks
            .saturating_mul(10_000)
            .checked_div(impressions)
            .unwrap_or(0);
        let mut ranked: Vec<(u64, u64, u64)> = self
            .line_items
            .get(&line_item)
            .and_then(|plan| self.campaigns.get(&plan.campaign))
            .into_iter()
            .flatten()
            .map(|&id| {
                let c = today.get(&id);
                (count(c, |c| c.clicks), count(c, |c| c.impressions), id)
            })
            .collect();
        // Most clicks first, then most impressions, then the lower id.
        ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        let position = ranked.iter().position(|&(_, _, id)| id == line_item);
        LiveValues {
            impressions_today: impressions,
            clicks_today: clicks,
            ctr_today_basis_points: ctr,
            rank: position.map_or(0, |p| u32::try_from(p + 1).unwrap_or(u32::MAX)),
            rank_of: u32::try_from(ranked.len()).unwrap_or(u32::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_keep_the_counter_above_the_revision() {
        let v = version(5, 3);
        assert_eq!((catalog_version(v), revision(v)), (5, 3));
        assert!(version(5, u32::MAX) < version(6, 0));
        assert!(version(5, 1) > version(5, 0));
    }

    #[test]
    fn the_interval_follows_traffic_within_bounds() {
        let options = LiveOptions::default();
        // 100 requests a second: clamped to the minimum.
        assert_eq!(options.interval(360_000), Duration::from_secs(2));
        // 10 a second: 100 requests take 10 s.
        assert_eq!(options.interval(36_000), Duration::from_secs(10));
        // 48 a day, or none: the maximum.
        assert_eq!(options.interval(2), Duration::from_secs(600));
        assert_eq!(options.interval(0), Duration::from_secs(600));
    }
}
