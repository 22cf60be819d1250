//! A deterministic simulation of one line item served by several edges, second by second:
//! synthetic traffic with a daily curve (Poisson arrivals), the edges' throttle draws and lease
//! checks, billing events that arrive a random delay after the decision, a manager that sees
//! billing through an aggregation lag, runs the controller every round, keeps the budget book,
//! and answers renewals. Edges can be cut off from the manager (they keep serving on what they
//! hold, and their logs are collected after) or restart under a new id. A billing event reaches
//! the deciding edge, another one, or one at random ([`Routing`]); it is either reserved at the
//! decision and settled by its beacon (ads on our placements) or charged when it arrives
//! (clicks, exchanges' billing notices) ([`Charging`]). Time is simulated, the generator
//! seeded: a run is a pure function of its scenario.
// Two test binaries share this module, each using a part of it.
#![allow(dead_code)]

use std::collections::BTreeMap;

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use marquee_model::{Goal, GoalMetric, LineItemId, PacingMode};
use marquee_pacing::{
    BudgetSpec, Delivery, EdgeId, Lease, LeaseBook, LeaseConfig, LeaseError, Pacer, PacerConfig,
    PacingOutput, PacingState, PacingStatus, Schedule, Settlement, TrafficProfile,
};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

pub const LINE: LineItemId = LineItemId(1);

/// Relative traffic per local hour: quiet nights, a morning rise, an evening peak.
pub const DAILY_CURVE: [f64; 24] = [
    0.30, 0.20, 0.15, 0.15, 0.20, 0.35, 0.60, 0.90, 1.10, 1.20, 1.25, 1.30, 1.35, 1.30, 1.25, 1.30,
    1.40, 1.50, 1.60, 1.70, 1.60, 1.30, 0.90, 0.50,
];

/// The profile the controller is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Wall-clock time: the controller knows nothing of the daily curve.
    Uniform,
    /// The true daily curve, as a learner would have it after some days.
    Learned,
}

/// Which edge a decision's billing event reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// The edge that decided (a load balancer pinning users to edges).
    Deciding,
    /// Always another edge than the one that decided.
    Other,
    /// Any edge, at random.
    Random,
}

/// When a decision is charged to the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charging {
    /// At the decision, settled by its billing event (impressions of ads on our placements).
    Reserved,
    /// When the billing event arrives (clicks, exchanges' billing notices).
    OnBilling,
}

#[derive(Debug, Clone)]
pub struct Scenario {
    pub zone: &'static str,
    pub start: Timestamp,
    pub end: Timestamp,
    pub mode: PacingMode,
    /// The goal's metric: spend (in micros) or a count of impressions or clicks.
    pub metric: GoalMetric,
    /// The goal, in the metric's unit.
    pub daily: Option<u64>,
    pub lifetime: Option<u64>,
    /// What one billing event costs in the goal's unit: micros for spend, 1 for a count.
    pub cost: u64,
    pub charging: Charging,
    pub routing: Routing,
    /// Eligible requests per second, all edges together, averaged over the day.
    pub requests_per_second: f64,
    /// Each edge's share of the traffic.
    pub edge_shares: Vec<f64>,
    /// Share of decisions that lead to a billing event (the impression's rendering rate, or
    /// the click-through rate for a click goal).
    pub fill: f64,
    /// Billing comes 1 to this many seconds after the decision (uniform).
    pub max_billing_delay: usize,
    /// The manager sees billing this many seconds late.
    pub aggregation_lag: i64,
    /// Seconds between controller rounds.
    pub control_every: i64,
    pub profile: Profile,
    /// (edge, from second, to second): the edge cannot reach the manager.
    pub partitions: Vec<(usize, i64, i64)>,
    /// (edge, second): the edge restarts with a new id and an empty lease.
    pub restarts: Vec<(usize, i64)>,
    /// (second, seconds down): the manager stops, no edge reaches it meanwhile, and it
    /// restarts from its persisted state (what the book keeps in memory only is lost).
    pub manager_restarts: Vec<(i64, i64)>,
    pub seed: u64,
}

impl Scenario {
    pub fn new(zone: &'static str, start: &str, end: &str, mode: PacingMode) -> Scenario {
        Scenario {
            zone,
            start: start.parse().unwrap(),
            end: end.parse().unwrap(),
            mode,
            metric: GoalMetric::Spend,
            daily: None,
            lifetime: None,
            cost: 2_000,
            charging: Charging::Reserved,
            routing: Routing::Deciding,
            requests_per_second: 8.0,
            edge_shares: vec![1.0],
            fill: 0.95,
            max_billing_delay: 5,
            aggregation_lag: 2,
            control_every: 60,
            profile: Profile::Learned,
            partitions: Vec::new(),
            restarts: Vec::new(),
            manager_restarts: Vec::new(),
            seed: 1,
        }
    }

    pub fn schedule(&self) -> Schedule {
        let goal = Goal {
            metric: self.metric,
            daily: self.daily,
            lifetime: self.lifetime,
        };
        Schedule::new(self.zone, self.start, Some(self.end), self.mode, goal).unwrap()
    }

    fn reachable(&self, edge: usize, second: i64) -> bool {
        !self.manager_down(second)
            && !self
                .partitions
                .iter()
                .any(|&(e, from, to)| e == edge && (from..to).contains(&second))
    }

    fn manager_down(&self, second: i64) -> bool {
        self.manager_restarts
            .iter()
            .any(|&(at, down)| (at..at + down).contains(&second))
    }
}

/// One simulated minute.
#[derive(Debug, Clone, Copy)]
pub struct Minute {
    pub start: Timestamp,
    /// Local day of the start (`yyyymmdd`).
    pub day: i64,
    pub eligible: u64,
    pub admitted: u64,
    /// Decisions the lease refused.
    pub refused: u64,
    /// Billed so far in the local day / since the start, at the minute's end (event time).
    pub billed_today: u64,
    pub billed_total: u64,
    pub output: PacingOutput,
}

#[derive(Debug, Default)]
pub struct Outcome {
    /// Billed per local day (`yyyymmdd`), by the billing event's time.
    pub billed_by_day: BTreeMap<i64, u64>,
    pub billed_total: u64,
    /// The last limit the book was given per budget period.
    pub limits: BTreeMap<i64, u64>,
    /// The book's unreported-reclaimed total per period, at its largest.
    pub unreported: BTreeMap<i64, u64>,
    /// Per edge, the most decisions it admitted in one second.
    pub max_rate: Vec<u64>,
    pub max_billing_delay: u64,
    pub cost: u64,
    pub expiries: usize,
    /// The book's returned reservations per period, at their largest.
    pub returned: BTreeMap<i64, u64>,
    pub minutes: Vec<Minute>,
}

impl Outcome {
    /// The stated bound for a period: its limit, plus what was reclaimed from silent edges
    /// without a report, plus each edge's fastest rate × the longest billing delay × the cost
    /// of one billable event.
    pub fn bound(&self, period: i64) -> u64 {
        self.limits[&period]
            + self.unreported.get(&period).copied().unwrap_or(0)
            + self.in_flight_term()
    }

    /// Billed against the limit of a period, as a ratio (1.0: exactly the goal).
    pub fn delivered_ratio(&self, period: i64) -> f64 {
        let billed = if period == marquee_pacing::FLIGHT_PERIOD {
            self.billed_total
        } else {
            self.billed_by_day.get(&period).copied().unwrap_or(0)
        };
        billed as f64 / self.limits[&period] as f64
    }

    pub fn in_flight_term(&self) -> u64 {
        self.max_rate.iter().sum::<u64>() * self.max_billing_delay * self.cost
    }
}

pub fn date_key(date: jiff::civil::Date) -> i64 {
    i64::from(date.year()) * 10_000 + i64::from(date.month()) * 100 + i64::from(date.day())
}

fn poisson(rng: &mut SmallRng, mean: f64) -> u64 {
    let limit = (-mean).exp();
    let mut product: f64 = rng.random();
    let mut count = 0;
    while product > limit {
        product *= rng.random::<f64>();
        count += 1;
    }
    count
}

/// The manager: what the aggregation has collected, the controller, the lease book.
struct Manager {
    zone: TimeZone,
    schedule: Schedule,
    profile: TrafficProfile,
    pacer: Pacer,
    pacing: PacingState,
    book: LeaseBook,
    /// Billing collected from the edges' logs, by local day, and in total.
    collected_by_day: BTreeMap<i64, u64>,
    collected: u64,
    control: Option<PacingOutput>,
    period_end: Option<Timestamp>,
}

impl Manager {
    fn new(scenario: &Scenario) -> Manager {
        let pacer = Pacer::new(PacerConfig::default()).unwrap();
        Manager {
            zone: TimeZone::get(scenario.zone).unwrap(),
            schedule: scenario.schedule(),
            profile: match scenario.profile {
                Profile::Uniform => TrafficProfile::UNIFORM,
                Profile::Learned => TrafficProfile::from_hourly(DAILY_CURVE).unwrap(),
            },
            pacing: pacer.start(),
            pacer,
            book: LeaseBook::new(LeaseConfig::default()).unwrap(),
            collected_by_day: BTreeMap::new(),
            collected: 0,
            control: None,
            period_end: None,
        }
    }

    /// What the aggregation has seen at `at`.
    fn delivery(&self, at: Timestamp) -> Delivery {
        let day = date_key(at.to_zoned(self.zone.clone()).date());
        Delivery {
            at,
            today: self.collected_by_day.get(&day).copied().unwrap_or(0),
            lifetime: self.collected,
        }
    }

    /// Collects the reachable edges' billing up to the aggregation lag, runs the controller
    /// if it is a round, and sets the current period's budget.
    fn round(
        &mut self,
        scenario: &Scenario,
        second: i64,
        edges: &mut [Edge],
        outcome: &mut Outcome,
    ) {
        let as_of = second - scenario.aggregation_lag;
        for (i, edge) in edges.iter_mut().enumerate() {
            if !scenario.reachable(i, second) {
                continue;
            }
            edge.uncollected.retain(|&(at, day, amount)| {
                if at > as_of {
                    return true;
                }
                *self.collected_by_day.entry(day).or_default() += amount;
                self.collected += amount;
                false
            });
        }
        if second % scenario.control_every == 0 && as_of >= 0 {
            let seen = self.delivery(scenario.start + SignedDuration::from_secs(as_of));
            let output = self
                .pacer
                .update(&self.schedule, &self.profile, &mut self.pacing, seen);
            self.control = Some(output.unwrap());
        }
        let now = scenario.start + SignedDuration::from_secs(second);
        if let Some(period) = self.schedule.budget(&self.delivery(now)).unwrap() {
            let spec = BudgetSpec {
                period: period.key,
                limit: period.limit,
                unit: scenario.cost,
                ends_at: period.ends_at,
                delivered: period.delivered,
                starts_at: Some(period.starts_at),
            };
            self.book.set_budget(LINE, spec);
            outcome.limits.insert(period.key, period.limit);
            self.period_end = period.ends_at;
        }
    }
}

/// A billing event on its way: the edge it reaches and the second of its decision.
#[derive(Debug, Clone, Copy)]
struct Due {
    edge: usize,
    decided: i64,
}

struct Edge {
    id: EdgeId,
    lease: Lease,
    control: Option<PacingOutput>,
    next_renewal: i64,
    /// Billed seconds the manager has not collected yet: (second, local day, amount).
    uncollected: Vec<(i64, i64, u64)>,
    max_rate: u64,
}

impl Edge {
    fn new(id: u64) -> Edge {
        Edge {
            id: EdgeId(id),
            lease: Lease::new(LeaseConfig::default().token_lifetime),
            control: None,
            next_renewal: 0,
            uncollected: Vec::new(),
            max_rate: 0,
        }
    }

    /// Sends what changed in the settlement windows, and renews the lease when due; the
    /// latest control rides along with the grant.
    fn sync(&mut self, manager: &mut Manager, second: i64, now: Timestamp, renew_every: i64) {
        self.lease.prepare(now);
        let mut settlements: Vec<Settlement> = Vec::new();
        self.lease.settlements(LINE, &mut settlements);
        manager.book.record(self.id, &settlements);
        if second < self.next_renewal && !self.lease.needs_renewal(now) {
            return;
        }
        match manager.book.renew(&self.lease.renewal(self.id, LINE), now) {
            Ok(grant) => self.lease.apply(&grant),
            Err(LeaseError::NoBudget(_)) => {}
            Err(error) => panic!("{error}"),
        }
        self.control = manager.control;
        self.next_renewal = second + renew_every;
    }

    /// Serves one second of `requests` eligible requests: throttle draw, lease check (and the
    /// reservation), and a billing event later, at the edge the routing picks, for the share
    /// that is filled.
    #[allow(clippy::too_many_arguments)]
    fn serve(
        &mut self,
        me: usize,
        edges: usize,
        scenario: &Scenario,
        rng: &mut SmallRng,
        second: i64,
        now: Timestamp,
        requests: u64,
        wheel: &mut [Vec<Due>],
        minute: &mut Minute,
    ) {
        let Some(output) = self.control.filter(|c| !c.stopped) else {
            return;
        };
        let throttle = f64::from(output.throttle_ppm) / 1_000_000.0;
        let mut admitted = 0;
        for _ in 0..requests {
            minute.eligible += 1;
            if rng.random::<f64>() >= throttle {
                continue;
            }
            if !self.lease.has_room(scenario.cost, now) {
                minute.refused += 1;
                continue;
            }
            admitted += 1;
            if scenario.charging == Charging::Reserved {
                self.lease.reserve(scenario.cost, now);
            }
            if rng.random::<f64>() < scenario.fill {
                let delay = rng.random_range(1..=scenario.max_billing_delay);
                let slot = (second as usize + delay) % wheel.len();
                let edge = match scenario.routing {
                    _ if edges == 1 => me,
                    Routing::Deciding => me,
                    Routing::Other => (me + 1 + rng.random_range(0..edges - 1)) % edges,
                    Routing::Random => rng.random_range(0..edges),
                };
                wheel[slot].push(Due {
                    edge,
                    decided: now.as_second(),
                });
            }
        }
        minute.admitted += admitted;
        self.max_rate = self.max_rate.max(admitted);
    }

    /// One billing event reaching this edge: settled or charged, logged for the manager.
    fn bill(&mut self, scenario: &Scenario, due: Due, second: i64, today: i64) {
        match scenario.charging {
            Charging::Reserved => self.lease.settle(scenario.cost, due.decided),
            Charging::OnBilling => {
                self.lease.spend(scenario.cost);
            }
        }
        match self.uncollected.last_mut() {
            Some((at, _, amount)) if *at == second => *amount += scenario.cost,
            _ => self.uncollected.push((second, today, scenario.cost)),
        }
    }
}

pub fn run(scenario: &Scenario) -> Outcome {
    let mut manager = Manager::new(scenario);
    let renew_every = manager.book.config().renew_every.as_secs();
    let mut rng = SmallRng::seed_from_u64(scenario.seed);
    let curve_mean = DAILY_CURVE.iter().sum::<f64>() / 24.0;
    let mut wheel: Vec<Vec<Due>> = vec![Vec::new(); scenario.max_billing_delay + 1];
    let edge_count = scenario.edge_shares.len();
    let mut edges: Vec<Edge> = (0..edge_count).map(|i| Edge::new(i as u64)).collect();
    let mut next_id = edges.len() as u64;
    let mut outcome = Outcome {
        max_billing_delay: scenario.max_billing_delay as u64,
        cost: scenario.cost,
        ..Outcome::default()
    };
    let flight_seconds = scenario.end.duration_since(scenario.start).as_secs();
    let (mut hour, mut today) = (0, 0);
    let mut minute = None;
    // Past the flight's end, only the billing still on its way is played out.
    for second in 0..=flight_seconds + scenario.max_billing_delay as i64 {
        let now = scenario.start + SignedDuration::from_secs(second);
        let serving = second < flight_seconds;
        // Local hours begin on UTC quarter hours in every zone the simulations use (offsets are
        // whole quarters of an hour), so the local clock is read once per quarter hour.
        if second % 900 == 0 {
            let zoned = now.to_zoned(manager.zone.clone());
            (hour, today) = (zoned.hour() as usize, date_key(zoned.date()));
        }
        for &(at, down) in &scenario.manager_restarts {
            if second == at + down {
                let persisted = serde_json::to_string(manager.book.state()).unwrap();
                let state = serde_json::from_str(&persisted).unwrap();
                manager.book = LeaseBook::restore(LeaseConfig::default(), state).unwrap();
                // Edges see a new manager in its first answer and send every window again.
                for edge in &edges {
                    edge.lease.resend_settlements();
                }
            }
        }
        if scenario.manager_down(second) {
            // Edges serve and bill on what they hold; nothing reaches the manager.
        } else {
            outcome.expiries += manager.book.expire(now).len();
        }
        for &(edge, _) in scenario.restarts.iter().filter(|(_, at)| *at == second) {
            edges[edge] = Edge {
                uncollected: std::mem::take(&mut edges[edge].uncollected),
                max_rate: edges[edge].max_rate,
                ..Edge::new(next_id)
            };
            edges[edge].next_renewal = second;
            next_id += 1;
        }
        let period_over = manager.period_end.is_some_and(|end| now >= end);
        if serving
            && !scenario.manager_down(second)
            && (second % scenario.control_every == 0 || period_over)
        {
            manager.round(scenario, second, &mut edges, &mut outcome);
        }
        if let Some(usage) = manager.book.usage(LINE) {
            let worst = outcome.unreported.entry(usage.period).or_default();
            *worst = (*worst).max(usage.unreported_reclaimed);
            let returned = outcome.returned.entry(usage.period).or_default();
            *returned = (*returned).max(usage.returned);
        }

        let current = minute.get_or_insert(Minute {
            start: now,
            day: today,
            eligible: 0,
            admitted: 0,
            refused: 0,
            billed_today: 0,
            billed_total: 0,
            output: manager.control.unwrap_or(PacingOutput {
                status: PacingStatus::NotStarted,
                stopped: true,
                throttle_ppm: 0,
                bid_multiplier_permille: 1_000,
            }),
        });
        let rate = scenario.requests_per_second * DAILY_CURVE[hour] / curve_mean;
        for (i, edge) in edges.iter_mut().enumerate() {
            if serving {
                if scenario.reachable(i, second) {
                    edge.sync(&mut manager, second, now, renew_every);
                } else {
                    edge.lease.prepare(now);
                }
                let requests = poisson(&mut rng, rate * scenario.edge_shares[i]);
                edge.serve(
                    i, edge_count, scenario, &mut rng, second, now, requests, &mut wheel, current,
                );
            }
        }
        let slot = second as usize % wheel.len();
        for due in std::mem::take(&mut wheel[slot]) {
            edges[due.edge].bill(scenario, due, second, today);
            *outcome.billed_by_day.entry(today).or_default() += scenario.cost;
            outcome.billed_total += scenario.cost;
        }
        if (second + 1) % 60 == 0
            && let Some(mut done) = minute.take()
        {
            done.billed_today = outcome.billed_by_day.get(&today).copied().unwrap_or(0);
            done.billed_total = outcome.billed_total;
            outcome.minutes.push(done);
        }
    }
    outcome.max_rate = edges.iter().map(|e| e.max_rate).collect();
    outcome
}
