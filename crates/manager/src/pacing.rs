//! Pacing and budgets, the manager's side: every round (`interval`, and as soon as a budget
//! period ends) each line item with a goal gets a controller update from its delivery in the
//! stats store and its budget in the [`LeaseBook`]; edges call [`Pacing::sync`] (in process, or
//! `POST /internal/v1/sync`) to renew their leases and fetch the controls.
//!
//! Invariants:
//! - Time comes from the injected clock only.
//! - The book is persisted (with the controller states) before a sync that changed it is
//!   answered, so a restarted manager never forgets a ceiling it granted.
//! - Only line items with a goal have a control, a budget, or a metric series.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use marquee_metrics::{Counter, Def, Observed, ObservedBy, Registry};
use marquee_model::{Catalog, Clock, GoalMetric, LineItemId};
use marquee_pacing::{
    BookState, BudgetSpec, Charge, ControlEntry, Delivery, LeaseBook, LeaseConfig, LeaseError,
    Pacer, PacerConfig, PacingState, Schedule, SyncRequest, SyncResponse, TrafficProfile,
};
use marquee_stats::{Counters, hour_start};
use marquee_store::{Store, StoreError};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

/// The name the state is stored under in the store's pacing table.
const STATE_NAME: &str = "manager";

/// Shortest wait between rounds, so that a period ending now cannot make the loop spin.
const MIN_WAIT: Duration = Duration::from_millis(50);

#[derive(Debug, Clone)]
pub struct PacingOptions {
    /// Time between controller rounds.
    pub interval: Duration,
    pub pacer: PacerConfig,
    pub leases: LeaseConfig,
    /// What remote edges send as `Authorization: Bearer` to `/internal/v1/sync`; empty turns
    /// the HTTP endpoint off (the in-process edge needs no secret).
    pub secret: String,
}

impl Default for PacingOptions {
    fn default() -> Self {
        PacingOptions {
            interval: Duration::from_secs(10),
            pacer: PacerConfig::default(),
            leases: LeaseConfig::default(),
            secret: String::new(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PacingError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("pacing settings: {0}")]
    Config(#[from] marquee_pacing::ConfigError),
    #[error("pacing state: {0}")]
    State(#[from] serde_json::Error),
}

/// What is persisted, as one JSON document.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Persisted {
    book: BookState,
    states: BTreeMap<LineItemId, PacingState>,
    controls: BTreeMap<LineItemId, ControlEntry>,
    control_version: u64,
}

/// A line item with a goal, resolved once per catalog version.
#[derive(Debug)]
struct Goaled {
    id: LineItemId,
    schedule: Schedule,
    /// Where its lifetime delivery is counted from: its flight's start, back to the UTC hour.
    /// Nothing was delivered before the flight, so this is exact; and a start inside an hour
    /// (a flight from midnight in Kolkata starts at :30 UTC) would read its first part from
    /// minute rows, which are pruned after `aggregation.minute_retention`: the lifetime would
    /// then lose what was delivered there.
    counted_from: Timestamp,
    metric: GoalMetric,
    /// `None` for spend goals of flat-priced line items: paced, but no lease.
    charge: Option<Charge>,
}

#[derive(Debug)]
struct State {
    book: LeaseBook,
    states: BTreeMap<LineItemId, PacingState>,
    controls: BTreeMap<LineItemId, ControlEntry>,
    control_version: u64,
    goals: Vec<Goaled>,
    /// The catalog version `goals` was read at.
    catalog_version: Option<u64>,
}

impl State {
    fn persisted(&self) -> Persisted {
        Persisted {
            book: self.book.state().clone(),
            states: self.states.clone(),
            controls: self.controls.clone(),
            control_version: self.control_version,
        }
    }
}

/// What one round did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundReport {
    /// Line items with a goal.
    pub paced: usize,
    /// Of those, with a budget now.
    pub budgeted: usize,
    pub control_version: u64,
    /// The earliest end of a budget period, when the next round must run at the latest.
    pub next_period_end: Option<Timestamp>,
}

#[derive(Debug, Default)]
struct Counts {
    rounds: Counter,
    round_errors: Counter,
    syncs: Counter,
    grants: Counter,
    unbudgeted: Counter,
    expiries: Counter,
}

/// The per line item state the metrics show, as of the last [`Pacing::publish_metrics`]:
/// the state lives behind an async lock that a scrape's encoder cannot wait for.
#[derive(Debug, Default)]
struct Published {
    control_version: u64,
    controls: Vec<ControlEntry>,
    usages: Vec<(LineItemId, marquee_pacing::BudgetUsage)>,
}

// The store and clock fields are the same as `Manager`'s, deliberately: each service holds its own
// handles.
/// The pacing loop and the lease book behind the sync endpoint.
#[derive(Debug)]
pub struct Pacing {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    pacer: Pacer,
    options: PacingOptions,
    state: Mutex<State>,
    counts: Counts,
    published: Arc<std::sync::Mutex<Published>>,
    /// Names this process to the edges ([`SyncResponse::manager`]): its start instant, in
    /// nanoseconds.
    instance: u64,
}

impl Pacing {
    /// Restores the book and the controller states from the store (fresh ones the first time).
    pub async fn open(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        options: PacingOptions,
    ) -> Result<Pacing, PacingError> {
        let pacer = Pacer::new(options.pacer.clone())?;
        let persisted: Persisted = match store.pacing_state(STATE_NAME).await? {
            Some(body) => serde_json::from_str(&body)?,
            None => Persisted::default(),
        };
        let book = LeaseBook::restore(options.leases.clone(), persisted.book)?;
        let instance = u64::try_from(clock.now().as_nanosecond()).unwrap_or(0) | 1;
        Ok(Pacing {
            instance,
            store,
            clock,
            pacer,
            options,
            state: Mutex::new(State {
                book,
                states: persisted.states,
                controls: persisted.controls,
                control_version: persisted.control_version,
                goals: Vec::new(),
                catalog_version: None,
            }),
            counts: Counts::default(),
            published: Arc::default(),
        })
    }

    pub fn options(&self) -> &PacingOptions {
        &self.options
    }

    /// One round: controller update and budget for every line item with a goal, reclaiming
    /// silent edges' leases, then the state persisted.
    pub async fn round(&self) -> Result<RoundReport, PacingError> {
        let result = self.try_round().await;
        self.counts.rounds.inc();
        if result.is_err() {
            self.counts.round_errors.inc();
        }
        result
    }

    async fn try_round(&self) -> Result<RoundReport, PacingError> {
        let mut state = self.state.lock().await;
        self.refresh_goals(&mut state).await?;
        let now = self.clock.now();
        let deliveries = self.deliveries(&state.goals, now).await?;
        let state = &mut *state;
        let mut controls = BTreeMap::new();
        let mut next_period_end: Option<Timestamp> = None;
        let mut budgeted = 0;
        for goaled in &state.goals {
            let id = goaled.id;
            let delivery = deliveries.get(&id).copied().unwrap_or(Delivery {
                at: now,
                today: 0,
                lifetime: 0,
            });
            let pacing_state = state.states.entry(id).or_insert_with(|| self.pacer.start());
            match self.pacer.update(
                &goaled.schedule,
                &TrafficProfile::UNIFORM,
                pacing_state,
                delivery,
            ) {
                Ok(output) => {
                    controls.insert(id, ControlEntry::new(id, &output));
                }
                Err(error) => tracing::warn!(line_item = id.0, %error, "cannot pace line item"),
            }
            let period = goaled.schedule.budget(&delivery).ok().flatten();
            match (period, goaled.charge) {
                (Some(period), Some(charge)) => {
                    state.book.set_budget(
                        id,
                        BudgetSpec {
                            period: period.key,
                            limit: period.limit,
                            unit: charge.amount,
                            ends_at: period.ends_at,
                            delivered: period.delivered,
                            starts_at: Some(period.starts_at),
                        },
                    );
                    budgeted += 1;
                    if let Some(end) = period.ends_at {
                        next_period_end = Some(next_period_end.map_or(end, |e| e.min(end)));
                    }
                }
                _ => {
                    state.book.remove_budget(id);
                }
            }
        }
        // Line items that lost their goal or left the served ones (paused or archived, or
        // their campaign or advertiser paused): no state or control; their budget is
        // suspended, not dropped, so a pause keeps the period's baselines (see
        // `LeaseBook::suspend`).
        let goaled: HashSet<LineItemId> = state.goals.iter().map(|g| g.id).collect();
        let gone: Vec<LineItemId> = state
            .states
            .keys()
            .filter(|id| !goaled.contains(id))
            .copied()
            .collect();
        for id in gone {
            state.states.remove(&id);
            state.book.suspend(id, now);
        }
        for expiry in state.book.expire(now) {
            self.counts.expiries.inc();
            tracing::info!(
                line_item = expiry.line_item.0,
                edge = expiry.edge.0,
                unreported = expiry.unreported,
                "lease of a silent edge reclaimed"
            );
        }
        if controls != state.controls {
            state.controls = controls;
            state.control_version += 1;
        }
        self.persist(state).await?;
        Ok(RoundReport {
            paced: state.goals.len(),
            budgeted,
            control_version: state.control_version,
            next_period_end,
        })
    }

    /// Re-reads the line items with a goal when the catalog changed: those the snapshot
    /// compiler keeps, whose campaign and advertiser are active too (the catalog holds every
    /// object whose own status is active). A line item under a paused campaign or advertiser
    /// is served by no edge, so it leaves the goals as a paused line item does (its budget
    /// suspended, its controller state dropped) rather than being paced as behind.
    async fn refresh_goals(&self, state: &mut State) -> Result<(), PacingError> {
        let counter = self.store.change_counter().await?;
        if state.catalog_version == Some(counter) {
            return Ok(());
        }
        let Catalog {
            version,
            advertisers,
            campaigns,
            line_items,
            ..
        } = self.store.catalog().await?;
        // Only the demand side's ancestry decides whether a line item enters a snapshot;
        // creatives and the supply side are left out, which spares rendering ad code. Built at
        // the earliest instant so that no line item is left out for its flight: the schedule
        // decides what a flight allows (a budget only inside it, a stopped control outside).
        let demand = Catalog {
            version,
            advertisers,
            campaigns,
            line_items,
            ..Catalog::default()
        };
        let served: HashSet<LineItemId> = marquee_snapshot::compile(&demand, Timestamp::MIN)
            .data
            .line_items
            .iter()
            .map(|entry| entry.id)
            .collect();
        state.goals = demand
            .line_items
            .iter()
            .filter(|stored| served.contains(&LineItemId(stored.meta.id)))
            .filter_map(|stored| {
                let line_item = &stored.object;
                let goal = line_item.goal?;
                let id = LineItemId(stored.meta.id);
                let (flight_start, _) = line_item.flight()?;
                match Schedule::for_line_item(line_item) {
                    Ok(schedule) => Some(Goaled {
                        id,
                        schedule,
                        counted_from: hour_start(flight_start),
                        metric: goal.metric,
                        charge: Charge::for_goal(goal.metric, &line_item.price),
                    }),
                    Err(error) => {
                        tracing::warn!(line_item = id.0, %error, "line item not paced");
                        None
                    }
                }
            })
            .collect();
        state.catalog_version = Some(version);
        Ok(())
    }

    /// Delivery of each line item today (its local day) and over its flight, up to `now`: one
    /// query per distinct start instant (line items sharing a zone share their day's start).
    async fn deliveries(
        &self,
        goals: &[Goaled],
        now: Timestamp,
    ) -> Result<HashMap<LineItemId, Delivery>, PacingError> {
        let mut by_since: BTreeMap<Timestamp, Vec<u64>> = BTreeMap::new();
        for goaled in goals {
            if let Ok(day) = goaled.schedule.day(now) {
                by_since.entry(day.start).or_default().push(goaled.id.0);
            }
            by_since
                .entry(goaled.counted_from)
                .or_default()
                .push(goaled.id.0);
        }
        let mut counted: HashMap<(Timestamp, u64), Counters> = HashMap::new();
        for (since, ids) in by_since {
            if since >= now {
                continue;
            }
            let rows = self.store.delivery(Some(ids), since, now).await?;
            counted.extend(rows.into_iter().map(|(id, c)| ((since, id), c)));
        }
        let amount = |metric, since, id: LineItemId| {
            counted
                .get(&(since, id.0))
                .map_or(0, |c| delivered(metric, c))
        };
        Ok(goals
            .iter()
            .map(|g| {
                let today = g
                    .schedule
                    .day(now)
                    .map_or(0, |day| amount(g.metric, day.start, g.id));
                let delivery = Delivery {
                    at: now,
                    today,
                    lifetime: amount(g.metric, g.counted_from, g.id),
                };
                (g.id, delivery)
            })
            .collect())
    }

    async fn persist(&self, state: &State) -> Result<(), PacingError> {
        let body = serde_json::to_string(&state.persisted())?;
        self.store.save_pacing_state(STATE_NAME, body).await?;
        Ok(())
    }

    /// Answers an edge: releases, then renewals (each renewal is taken as the requesting
    /// edge's), persisting the book before answering; the control set if the edge's differs.
    pub async fn sync(&self, request: SyncRequest) -> Result<SyncResponse, PacingError> {
        self.counts.syncs.inc();
        let mut state = self.state.lock().await;
        let now = self.clock.now();
        let edge = request.edge;
        let mut changed = false;
        for release in &request.releases {
            let release = marquee_pacing::Renewal { edge, ..*release };
            match state.book.release(&release, now) {
                Ok(()) => changed = true,
                Err(error) => tracing::debug!(%error, "lease release ignored"),
            }
        }
        // Persisted with the next round's state, not before answering: a restarted manager
        // gets the counts since from its edges again (`SyncResponse::manager`).
        state.book.record(edge, &request.settlements);
        let mut response = SyncResponse {
            manager: self.instance,
            control_version: state.control_version,
            ..SyncResponse::default()
        };
        for renewal in &request.renewals {
            let renewal = marquee_pacing::Renewal { edge, ..*renewal };
            match state.book.renew(&renewal, now) {
                Ok(grant) => {
                    changed = true;
                    response.grants.push(grant);
                }
                Err(error) => {
                    if !matches!(error, LeaseError::NoBudget(_)) {
                        tracing::warn!(%error, "lease renewal refused");
                    }
                    response.unbudgeted.push(renewal.line_item);
                }
            }
        }
        if changed {
            self.persist(&state).await?;
        }
        self.counts.grants.inc_by(response.grants.len() as u64);
        self.counts
            .unbudgeted
            .inc_by(response.unbudgeted.len() as u64);
        if request.control_version != state.control_version {
            response.controls = Some(state.controls.values().copied().collect());
        }
        Ok(response)
    }

    /// Rounds every `interval`, and as soon as a budget period ends, until `shutdown`.
    pub async fn run_loop(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            let next_end = match self.round().await {
                Ok(report) => report.next_period_end,
                Err(error) => {
                    tracing::error!(%error, "pacing round failed; edges keep the last controls");
                    None
                }
            };
            let now = self.clock.now();
            let until_end = next_end
                .and_then(|end| Duration::try_from(now.duration_until(end)).ok())
                .unwrap_or(self.options.interval);
            let wait = until_end.min(self.options.interval).max(MIN_WAIT);
            tokio::select! {
                () = &mut shutdown => return,
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One line item's pacing as it stands: the control edges apply (none for a line item
    /// without a goal) and its lease book's usage of the current budget period (none before
    /// the first round or outside the flight). For the dashboard's pacing view.
    pub async fn line_item_state(
        &self,
        line_item: LineItemId,
    ) -> (Option<ControlEntry>, Option<marquee_pacing::BudgetUsage>) {
        let state = self.state.lock().await;
        (
            state.controls.get(&line_item).copied(),
            state.book.usage(line_item),
        )
    }

    /// Copies the per line item state for the metrics (a scrape calls it before encoding):
    /// each line item with a goal, its control and its lease book's usage.
    pub async fn publish_metrics(&self) {
        let state = self.state.lock().await;
        let published = Published {
            control_version: state.control_version,
            controls: state.controls.values().copied().collect(),
            usages: state
                .goals
                .iter()
                .filter_map(|g| Some((g.id, state.book.usage(g.id)?)))
                .collect(),
        };
        drop(state);
        if let Ok(mut shown) = self.published.lock() {
            *shown = published;
        }
    }

    /// Registers the `marquee_pacing_*` and `marquee_lease_*` families into `registry`: the
    /// loop's counters, and per line item with a goal its control and lease state as of the
    /// last [`Pacing::publish_metrics`].
    pub fn register_metrics(&self, registry: &mut Registry) {
        let c = &self.counts;
        for (def, counter) in [
            (ROUNDS, &c.rounds),
            (ROUND_ERRORS, &c.round_errors),
            (SYNCS, &c.syncs),
            (GRANTS, &c.grants),
            (UNBUDGETED, &c.unbudgeted),
            (EXPIRIES, &c.expiries),
        ] {
            def.register(registry, counter.clone());
        }
        let published = Arc::clone(&self.published);
        let version =
            Observed::new(move || published.lock().map_or(0, |p| gauge(p.control_version)));
        CONTROL_VERSION.register(registry, version);
        for (def, value) in CONTROL_SERIES {
            let published = Arc::clone(&self.published);
            let series = ObservedBy::new("line_item", move || {
                published.lock().map_or_else(
                    |_| Vec::new(),
                    |p| {
                        let controls = p.controls.iter();
                        controls
                            .map(|c| (c.line_item.to_string(), gauge(value(c))))
                            .collect()
                    },
                )
            });
            def.register(registry, series);
        }
        for (def, value) in LEASE_SERIES {
            let published = Arc::clone(&self.published);
            let series = ObservedBy::new("line_item", move || {
                published.lock().map_or_else(
                    |_| Vec::new(),
                    |p| {
                        let usages = p.usages.iter();
                        usages
                            .map(|(id, usage)| (id.to_string(), gauge(value(usage))))
                            .collect()
                    },
                )
            });
            def.register(registry, series);
        }
    }
}

/// A count as a gauge's value.
fn gauge(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

const ROUNDS: Def = Def::new("marquee_pacing_rounds", "Pacing rounds run.");
const ROUND_ERRORS: Def = Def::new("marquee_pacing_round_errors", "Pacing rounds that failed.");
const SYNCS: Def = Def::new("marquee_pacing_syncs", "Edge sync calls answered.");
const GRANTS: Def = Def::new("marquee_lease_grants", "Lease grants handed to edges.");
const UNBUDGETED: Def = Def::new(
    "marquee_lease_unbudgeted",
    "Renewals answered without a grant (no budget now).",
);
const EXPIRIES: Def = Def::new(
    "marquee_lease_expiries",
    "Leases reclaimed from silent edges.",
);
const CONTROL_VERSION: Def = Def::new(
    "marquee_pacing_control_version",
    "Version of the control set edges fetch.",
);

/// A per line item family and its value.
type Series<T> = (Def, fn(&T) -> u64);

const CONTROL_SERIES: [Series<ControlEntry>; 3] = [
    (
        Def::new(
            "marquee_pacing_throttle_ppm",
            "Share of eligible requests a line item takes part in, per million.",
        ),
        |c| u64::from(c.throttle_ppm),
    ),
    (
        Def::new(
            "marquee_pacing_bid_multiplier_permille",
            "Bid multiplier of a line item, per mille.",
        ),
        |c| u64::from(c.bid_multiplier_permille),
    ),
    (
        Def::new(
            "marquee_pacing_stopped",
            "1 when a line item is stopped (outside its flight or goal reached).",
        ),
        |c| u64::from(c.stopped),
    ),
];

const LEASE_SERIES: [Series<marquee_pacing::BudgetUsage>; 6] = [
    (
        Def::new(
            "marquee_lease_limit",
            "Budget of the current period, in the goal's metric.",
        ),
        |u| u.limit,
    ),
    (
        Def::new(
            "marquee_lease_used",
            "Charged in the current period as edges reported it (reserved at decisions or \
             charged on billing events, less reservations returned), or as aggregated if more.",
        ),
        |u| u.used,
    ),
    (
        Def::new(
            "marquee_lease_returned",
            "Reservations of the current period whose tokens expired unsettled, returned to it.",
        ),
        |u| u.returned,
    ),
    (
        Def::new(
            "marquee_lease_committed",
            "Used plus outstanding slices: what edges may bill without renewing.",
        ),
        |u| u.committed,
    ),
    (
        Def::new(
            "marquee_lease_unreported_reclaimed",
            "Unreported parts of leases reclaimed from silent edges this period.",
        ),
        |u| u.unreported_reclaimed,
    ),
    (
        Def::new("marquee_lease_live_edges", "Edges holding a live lease."),
        |u| u.live_edges as u64,
    ),
];

/// Delivery in a goal's metric, as the leases charge it (spend: Σ CPM ÷ 1000 + CPC).
pub(crate) fn delivered(metric: GoalMetric, counters: &Counters) -> u64 {
    let amount = match metric {
        GoalMetric::Impressions => counters.impressions,
        GoalMetric::Clicks => counters.clicks,
        GoalMetric::Spend => counters.spend_micros(),
    };
    u64::try_from(amount).unwrap_or(0)
}
