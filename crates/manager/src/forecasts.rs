//! The forecasting service behind the API's and the dashboard's forecasts
//! (`docs/forecasting.md`): a traffic model fitted to the stored sample and a forecaster for
//! the latest published snapshot, built off the request path and rebuilt when a snapshot is
//! published or a UTC day ends; and the delivery status of every booked line item with a goal
//! over the standard range, computed in the background for the line item list.
//!
//! The forecaster borrows its model, which borrows the sample: both are kept together with
//! their owner ([`self_cell`]), so a question borrows the service's current forecaster and the
//! allocation it keeps per range (see `Forecaster::prepare`) serves every question over that
//! range.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use jiff::Timestamp;
use marquee_api::forecasts::{
    Availability as AvailabilityAnswer, BoxFuture, Contending, DailyForecast, Delivery,
    ForecastFailure, Forecasts, MAX_CONTENDING, Outcome, Proposal, Range,
};
use marquee_forecast::{
    Availability, DecodeError, Forecaster, Sample, SampleError, SampleRecord, Status, TrafficModel,
};
use marquee_model::{
    Advertiser, AdvertiserId, Campaign, Catalog, Clock, GoalMetric, LineItemId, Meta, Stored,
    ValidationError,
};
use marquee_pacing::Period;
use marquee_snapshot::{LineItemEntry, Snapshot};
use marquee_stats::DAY;
use marquee_store::{Store, StoreError};

use crate::Manager;

/// Whole days of sample a forecast needs: a week shows the weekly pattern once.
pub const MIN_SAMPLE_DAYS: usize = 7;
/// Days of the standard range: delivery outlooks and the line item list's statuses.
pub const STATUS_DAYS: i64 = 30;
/// How often the service looks for a new UTC day (a new snapshot wakes it at once).
const DAY_CHECK: Duration = Duration::from_secs(60);
/// The least time between two builds after the first: a desk publishing a change every few
/// seconds would otherwise keep a core fitting and replaying the sample (seconds each on a big
/// sample). Meanwhile the last build answers.
const MIN_REBUILD: Duration = Duration::from_secs(300);

type Model<'s> = TrafficModel<'s>;
type Booked<'m> = Forecaster<'m, 'm>;

self_cell::self_cell!(
    /// A sample and the traffic model fitted to it.
    struct Fitted {
        owner: Sample,
        #[covariant]
        dependent: Model,
    }
    impl {Debug}
);

self_cell::self_cell!(
    /// A fitted model and the forecaster of one snapshot over it.
    struct Ready {
        owner: Fitted,
        #[covariant]
        dependent: Booked,
    }
    impl {Debug}
);

/// What the service forecasts with: one snapshot, one day's model.
#[derive(Debug)]
struct Current {
    key: Key,
    snapshot: Arc<Snapshot>,
    /// The supply a proposal is compiled with.
    catalog: Arc<Catalog>,
    /// Each line item's name and advertiser, for contending line items.
    names: HashMap<LineItemId, (String, AdvertiserId)>,
    /// Whole days of sample the model was fitted to.
    days: usize,
    /// `None` with fewer than [`MIN_SAMPLE_DAYS`] days.
    ready: Option<Ready>,
    /// What line items with lifetime goals delivered before today, in their goal's metric.
    delivered: HashMap<LineItemId, u64>,
}

/// What a forecaster is built for: a snapshot version and the UTC day (the model fits the
/// whole days before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub version: u64,
    pub day: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Rate(#[from] SampleError),
    #[error("the stored sample of day {day} (days since 1970) is damaged: {error}")]
    Record { day: i32, error: DecodeError },
    #[error("snapshot: {0}")]
    Snapshot(#[from] marquee_snapshot::LoadError),
    #[error("forecast task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// The delivery status of a booked line item, for lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    OnTrack,
    AtRisk,
    Shortfall,
}

impl DeliveryStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::OnTrack => "on_track",
            DeliveryStatus::AtRisk => "at_risk",
            DeliveryStatus::Shortfall => "shortfall",
        }
    }
}

impl From<Status> for DeliveryStatus {
    fn from(status: Status) -> Self {
        match status {
            Status::OnTrack => DeliveryStatus::OnTrack,
            Status::AtRisk => DeliveryStatus::AtRisk,
            Status::Shortfall => DeliveryStatus::Shortfall,
        }
    }
}

#[derive(Debug)]
pub struct ForecastService {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// The share of ad requests the edges keep (`forecast.sample_rate_ppm`).
    rate: f64,
    current: RwLock<Option<Arc<Current>>>,
    /// Statuses of the current forecaster's booked line items, as far as computed.
    statuses: RwLock<(Option<Key>, HashMap<LineItemId, DeliveryStatus>)>,
}

/// Poisoning cannot leave these half-written: each is replaced whole.
fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ForecastService {
    /// `rate`: the edges' `forecast.sample_rate_ppm` as a share.
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        rate: f64,
    ) -> Result<Arc<ForecastService>, ServiceError> {
        Sample::new(rate)?;
        Ok(Arc::new(ForecastService {
            store,
            clock,
            rate,
            current: RwLock::new(None),
            statuses: RwLock::new((None, HashMap::new())),
        }))
    }

    /// The key of the forecaster in use, once one is built.
    pub fn key(&self) -> Option<Key> {
        read(&self.current).as_ref().map(|c| c.key)
    }

    fn current(&self) -> Option<Arc<Current>> {
        read(&self.current).clone()
    }

    /// The delivery status of a booked line item, once computed for the current forecaster.
    pub fn status(&self, line_item: LineItemId) -> Option<DeliveryStatus> {
        read(&self.statuses).1.get(&line_item).copied()
    }

    /// The standard range of delivery outlooks and statuses, from today.
    pub fn status_range(&self) -> Range {
        Range::days_from(self.clock.now(), STATUS_DAYS)
    }

    /// Builds the forecaster for `snapshot` and today unless the current one is for them.
    /// Whether it built one.
    pub async fn refresh(&self, snapshot: &Arc<Snapshot>) -> Result<bool, ServiceError> {
        let now = self.clock.now();
        let today = now.as_second().div_euclid(DAY);
        let key = Key {
            version: snapshot.version,
            day: today,
        };
        if self.key() == Some(key) {
            return Ok(false);
        }
        let day_number = |day: i64| i32::try_from(day).unwrap_or(i32::MAX);
        let first = today - marquee_forecast::MAX_DAYS;
        let stored = self
            .store
            .samples(day_number(first), day_number(today - 1))
            .await?;
        let catalog = Arc::new(self.store.catalog().await?);
        let advertisers: HashMap<u64, AdvertiserId> = catalog
            .campaigns
            .iter()
            .map(|c| (c.meta.id, c.object.advertiser_id))
            .collect();
        let names = catalog
            .line_items
            .iter()
            .filter_map(|li| {
                let advertiser = advertisers.get(&li.object.campaign_id.0)?;
                Some((
                    LineItemId(li.meta.id),
                    (li.object.name.clone(), *advertiser),
                ))
            })
            .collect();
        let range = self.status_range();
        let delivered = self.delivered(snapshot, range.start).await?;
        let rate = self.rate;
        let built_for = Arc::clone(snapshot);
        let delivered_list: Vec<(LineItemId, u64)> = delivered
            .iter()
            .map(|(&id, &amount)| (id, amount))
            .collect();
        // Fitting and running the sample through the index take seconds: off the async workers.
        let (days, ready) = tokio::task::spawn_blocking(move || {
            let mut sample = Sample::new(rate)?;
            for (day, records) in &stored {
                let records = SampleRecord::decode_all(records)
                    .map_err(|error| ServiceError::Record { day: *day, error })?;
                for record in &records {
                    sample.push(record);
                }
            }
            let fitted = Fitted::new(sample, |sample| TrafficModel::fit(sample, now));
            let days = fitted.borrow_dependent().days();
            if days < MIN_SAMPLE_DAYS {
                return Ok::<_, ServiceError>((days, None));
            }
            let ready = Ready::new(fitted, |fitted| {
                Forecaster::new(&built_for, fitted.borrow_dependent())
                    .with_delivered(&delivered_list)
            });
            // The standard range's allocation, so that the first outlook is quick too. Its
            // only refusal, a range not of whole hours, cannot happen to whole days.
            let _ = ready.borrow_dependent().prepare(period(range));
            Ok((days, Some(ready)))
        })
        .await??;
        tracing::info!(
            snapshot = key.version,
            sample_days = days,
            ready = ready.is_some(),
            "forecaster built"
        );
        *write(&self.current) = Some(Arc::new(Current {
            key,
            snapshot: Arc::clone(snapshot),
            catalog,
            names,
            days,
            ready,
            delivered,
        }));
        Ok(true)
    }

    /// What each booked line item with a lifetime goal delivered from its flight's start to
    /// `until`: one query per distinct start.
    async fn delivered(
        &self,
        snapshot: &Snapshot,
        until: Timestamp,
    ) -> Result<HashMap<LineItemId, u64>, ServiceError> {
        let mut by_start: BTreeMap<i64, Vec<(u64, GoalMetric)>> = BTreeMap::new();
        for li in &snapshot.data.line_items {
            if let Some(goal) = li.goal.filter(|g| g.lifetime.is_some()) {
                by_start
                    .entry(li.flight_start)
                    .or_default()
                    .push((li.id.0, goal.metric));
            }
        }
        let mut delivered = HashMap::new();
        for (start, items) in by_start {
            let Ok(since) = Timestamp::from_second(start) else {
                continue;
            };
            if since >= until {
                continue;
            }
            let ids = items.iter().map(|&(id, _)| id).collect();
            let rows = self.store.delivery(Some(ids), since, until).await?;
            for (id, metric) in items {
                if let Some(counters) = rows.get(&id) {
                    delivered.insert(LineItemId(id), crate::pacing::delivered(metric, counters));
                }
            }
        }
        Ok(delivered)
    }

    /// Computes the status of every booked line item with a goal over the standard range,
    /// publishing each as it comes; stops when another forecaster replaces the one it started
    /// with.
    pub async fn compute_statuses(self: &Arc<Self>) -> Result<(), ServiceError> {
        let Some(current) = self.current() else {
            return Ok(());
        };
        {
            let mut statuses = write(&self.statuses);
            if statuses.0 == Some(current.key) {
                return Ok(());
            }
            *statuses = (Some(current.key), HashMap::new());
        }
        let service = Arc::clone(self);
        let range = period(self.status_range());
        tokio::task::spawn_blocking(move || {
            let Some(ready) = &current.ready else {
                return;
            };
            let forecaster = ready.borrow_dependent();
            for li in &current.snapshot.data.line_items {
                if li.goal.is_none() {
                    continue;
                }
                if service.key() != Some(current.key) {
                    return;
                }
                if let Ok(outlook) = forecaster.delivery(li.id, range) {
                    let mut statuses = write(&service.statuses);
                    if statuses.0 == Some(current.key) {
                        statuses.1.insert(li.id, outlook.status.into());
                    }
                }
            }
        })
        .await?;
        Ok(())
    }

    /// Rebuilds on a publish or a new UTC day, at most once every [`MIN_REBUILD`], then
    /// computes the statuses, until `shutdown`. Errors are logged; the last forecaster keeps answering.
    pub async fn run(self: Arc<Self>, manager: Arc<Manager>, shutdown: impl Future<Output = ()>) {
        let mut published = manager.subscribe();
        let mut tick = tokio::time::interval(DAY_CHECK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        let mut built_at: Option<tokio::time::Instant> = None;
        loop {
            if let Some(wait) = built_at.map(|at| MIN_REBUILD.saturating_sub(at.elapsed())) {
                tokio::select! {
                    () = &mut shutdown => return,
                    () = tokio::time::sleep(wait) => {}
                }
            }
            let latest = published.borrow_and_update().clone();
            if let Some(latest) = latest {
                match self.refresh_from(&latest.bytes).await {
                    Err(error) => tracing::error!(
                        %error,
                        "forecaster not rebuilt; the last one keeps answering"
                    ),
                    // Beside the loop: a snapshot published meanwhile is not kept waiting,
                    // and the statuses stop once another forecaster replaces this one.
                    Ok(true) => {
                        built_at = Some(tokio::time::Instant::now());
                        let service = Arc::clone(&self);
                        tokio::spawn(async move {
                            if let Err(error) = service.compute_statuses().await {
                                tracing::error!(%error, "delivery statuses not computed");
                            }
                        });
                    }
                    Ok(false) => {}
                }
            }
            tokio::select! {
                () = &mut shutdown => return,
                _ = tick.tick() => {}
                changed = published.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    }

    async fn refresh_from(&self, bytes: &[u8]) -> Result<bool, ServiceError> {
        let version = marquee_snapshot::Header::parse(bytes)?.version;
        let today = self.clock.now().as_second().div_euclid(DAY);
        if self.key()
            == Some(Key {
                version,
                day: today,
            })
        {
            return Ok(false);
        }
        let snapshot = Arc::new(Snapshot::decode(bytes)?);
        self.refresh(&snapshot).await
    }

    /// Compiles a proposal as the snapshot compiler compiles a line item: with its campaign,
    /// advertiser and the placements it names, among the catalog's supply.
    async fn compile(
        &self,
        proposal: &Proposal,
        catalog: &Catalog,
    ) -> Result<LineItemEntry, ForecastFailure> {
        let internal = |e: StoreError| ForecastFailure::Internal(e.to_string());
        let campaign = self
            .store
            .get_object::<Campaign>(proposal.line_item.campaign_id.0, None)
            .await
            .map_err(internal)?;
        let advertiser = self
            .store
            .get_object::<Advertiser>(campaign.object.advertiser_id.0, None)
            .await
            .map_err(internal)?;
        let now = self.clock.now();
        let id = proposal.replaces.unwrap_or(PROPOSED);
        let meta = |id: u64| Meta {
            id,
            version: 1,
            created_at: now,
            updated_at: now,
        };
        let mini = Catalog {
            version: 0,
            advertisers: vec![advertiser],
            campaigns: vec![campaign],
            line_items: vec![Stored {
                meta: meta(id.0),
                object: proposal.line_item.clone(),
            }],
            creatives: Vec::new(),
            publishers: catalog.publishers.clone(),
            sites: catalog.sites.clone(),
            placements: catalog.placements.clone(),
            links: proposal.placements.iter().map(|&p| (id, p)).collect(),
        };
        let (mut snapshot, stats) = marquee_snapshot::compile_with_stats(&mini, now);
        match snapshot.data.line_items.pop() {
            Some(entry) => Ok(entry),
            None if stats.line_items_ended > 0 => Err(ForecastFailure::Invalid(
                ValidationError::single("end", "the flight has ended: nothing to forecast"),
            )),
            None => Err(ForecastFailure::Invalid(ValidationError::single(
                "time_zone",
                "the flight cannot be placed in this time zone",
            ))),
        }
    }

    /// The answer in the API's terms: whole impressions, contending line items named.
    fn answer(&self, availability: &Availability, current: &Current) -> AvailabilityAnswer {
        let whole = |x: f64| x.max(0.0).round() as u64;
        let serving_days = availability
            .daily
            .iter()
            .filter(|d| d.matching > 0.0)
            .count()
            .max(1);
        let requested_daily = availability.goal.map(|g| g / serving_days as f64);
        let daily = availability
            .daily
            .iter()
            .map(|d| DailyForecast {
                date: Timestamp::from_second(d.day * DAY)
                    .map(|t| t.strftime("%Y-%m-%d").to_string())
                    .unwrap_or_default(),
                matching: whole(d.matching),
                available: whole(d.available),
                requested: requested_daily
                    .filter(|_| d.matching > 0.0)
                    .map(whole)
                    .or(requested_daily.map(|_| 0)),
            })
            .collect();
        let contending = availability
            .contending
            .iter()
            .take(MAX_CONTENDING)
            .map(|c| {
                let named = current.names.get(&c.line_item);
                Contending {
                    line_item_id: Some(c.line_item.0),
                    name: named.map(|(name, _)| name.clone()),
                    advertiser: named.map_or(AdvertiserId(0), |&(_, advertiser)| advertiser),
                    other_advertiser: false,
                    impressions: whole(c.impressions),
                }
            })
            .collect();
        AvailabilityAnswer {
            matching: whole(availability.matching),
            available: whole(availability.available),
            requested: availability.goal.map(whole),
            probability: availability.probability,
            daily,
            contending,
            sample_days: current.days,
        }
    }

    /// The current forecaster's outcome shape before any question: not built, too little
    /// sample, or ready.
    fn ready(&self) -> Result<Arc<Current>, Outcome<()>> {
        let current = self.current().ok_or(Outcome::NotReady)?;
        if current.ready.is_none() {
            return Err(Outcome::NotEnoughSample {
                days: current.days,
                needed: MIN_SAMPLE_DAYS,
            });
        }
        Ok(current)
    }

    async fn availability_of(
        self: Arc<Self>,
        proposal: Proposal,
    ) -> Result<Outcome<AvailabilityAnswer>, ForecastFailure> {
        let current = match self.ready() {
            Ok(current) => current,
            Err(outcome) => return Ok(retype(outcome)),
        };
        let entry = self.compile(&proposal, &current.catalog).await?;
        let range = period(proposal.range);
        let service = Arc::clone(&self);
        tokio::task::spawn_blocking(move || {
            let Some(ready) = &current.ready else {
                return Ok(Outcome::NotReady);
            };
            let availability = ready
                .borrow_dependent()
                .availability(&entry, range)
                .map_err(|e| ForecastFailure::Internal(e.to_string()))?;
            Ok(Outcome::Ready(service.answer(&availability, &current)))
        })
        .await
        .map_err(|e| ForecastFailure::Internal(e.to_string()))?
    }

    async fn delivery_of(
        self: Arc<Self>,
        line_item: LineItemId,
    ) -> Result<Outcome<Delivery>, ForecastFailure> {
        let current = match self.ready() {
            Ok(current) => current,
            Err(outcome) => return Ok(retype(outcome)),
        };
        let range = period(self.status_range());
        let service = Arc::clone(&self);
        tokio::task::spawn_blocking(move || {
            let Some(ready) = &current.ready else {
                return Ok(Outcome::NotReady);
            };
            let outlook = match ready.borrow_dependent().delivery(line_item, range) {
                Ok(outlook) => outlook,
                Err(marquee_forecast::ForecastError::UnknownLineItem(_)) => {
                    return Ok(Outcome::NotServing);
                }
                Err(e) => return Err(ForecastFailure::Internal(e.to_string())),
            };
            let status = DeliveryStatus::from(outlook.status);
            let whole = |x: f64| x.max(0.0).round() as u64;
            let metric = current
                .snapshot
                .data
                .line_item(line_item)
                .and_then(|li| li.goal)
                .map(|g| g.metric);
            Ok(Outcome::Ready(Delivery {
                status: status.as_str(),
                goal: outlook.goal.map(whole),
                expected: whole(outlook.expected),
                shortfall: whole(outlook.shortfall),
                probability: outlook.probability,
                // Spend would be money in micros: the API states delivery in counts only.
                delivered: current
                    .delivered
                    .get(&line_item)
                    .copied()
                    .filter(|_| metric != Some(GoalMetric::Spend)),
                availability: service.answer(&outlook.availability, &current),
            }))
        })
        .await
        .map_err(|e| ForecastFailure::Internal(e.to_string()))?
    }
}

/// The id a proposal is compiled under when it replaces no booked line item: above every
/// stored id.
const PROPOSED: LineItemId = LineItemId(u64::MAX);

fn period(range: Range) -> Period {
    Period {
        start: range.start,
        end: range.end,
    }
}

fn retype<T>(outcome: Outcome<()>) -> Outcome<T> {
    match outcome {
        Outcome::Ready(()) | Outcome::NotReady => Outcome::NotReady,
        Outcome::NotEnoughSample { days, needed } => Outcome::NotEnoughSample { days, needed },
        Outcome::NotServing => Outcome::NotServing,
    }
}

/// The API's handle: each call holds the service for as long as it runs.
#[derive(Debug, Clone)]
pub struct ForecastsApi(pub Arc<ForecastService>);

impl Forecasts for ForecastsApi {
    fn now(&self) -> Timestamp {
        self.0.clock.now()
    }

    fn availability(
        &self,
        proposal: Proposal,
    ) -> BoxFuture<'_, Result<Outcome<AvailabilityAnswer>, ForecastFailure>> {
        Box::pin(Arc::clone(&self.0).availability_of(proposal))
    }

    fn delivery(
        &self,
        line_item: LineItemId,
    ) -> BoxFuture<'_, Result<(Range, Outcome<Delivery>), ForecastFailure>> {
        let range = self.0.status_range();
        let service = Arc::clone(&self.0);
        Box::pin(async move { Ok((range, service.delivery_of(line_item).await?)) })
    }
}
