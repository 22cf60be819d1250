//! The pacing controller: per line item, from delivery so far and the goal curve, a throttle
//! (share of eligible requests to take) and a bid multiplier.
//!
//! Method: an estimate-and-invert rate controller with feedback on the cumulative error. The
//! plant is "delivery per unit of expected traffic is `c × throttle`", `c` unknown and
//! drifting. Each round the controller
//! 1. estimates `c` as a ratio of exponentially forgotten sums (deliveries ÷ throttle × traffic
//!    weight), which stays sound at small counts where a mean of per-round ratios would not (a
//!    round with no delivery is evidence, not a division by zero);
//! 2. computes the delivery per traffic unit the goal curve asks for: the curve's own slope over
//!    the next 15 minutes (feed-forward) plus the gap between the curve and delivery so far,
//!    spread over the catch-up horizon. Correcting the cumulative gap, not a rate error, is the
//!    integral action, and the gap is a measured quantity, so there is no integrator to wind up;
//! 3. sets throttle = asked ÷ `c`, rising by at most `max_step_up` per round.
//!
//! When even full throttle is not enough, the bid multiplier (1 upward, to `max_bid_permille`)
//! integrates the remaining ratio by at most `bid_step` per round; it moves only while the
//! throttle is saturated (conditional integration, the anti-windup), and comes back down before
//! the throttle is lowered again.

use jiff::{SignedDuration, Timestamp};
use marquee_model::PacingMode;
use serde::{Deserialize, Serialize};

use crate::schedule::Period;
use crate::{ConfigError, Schedule, ScheduleError, TrafficProfile};

/// Delivery of one line item so far, in its goal's metric (impressions, clicks or spend in
/// micros), counted by the aggregation up to `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    /// The instant the counts are complete up to (the aggregation's watermark).
    pub at: Timestamp,
    /// Since the start of the local day holding `at` ([`Schedule::day`]).
    pub today: u64,
    /// Since the start of the flight.
    pub lifetime: u64,
}

/// Tuning of the controller. The defaults suit a round every 10 to 60 seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PacerConfig {
    /// How far ahead a daily curve's shortfall (or lead) is spread. Longer is smoother; it must
    /// stay several times the round interval plus the aggregation lag (see the README).
    pub catch_up_daily: SignedDuration,
    /// The same for a lifetime curve.
    pub catch_up_lifetime: SignedDuration,
    /// Time constant over which the estimate of available delivery forgets the past.
    pub estimate_window: SignedDuration,
    /// Throttle of a line item with no measurements yet.
    pub initial_throttle: f64,
    /// Most the throttle may grow in one round (a factor); falling is not limited.
    pub max_step_up: f64,
    /// Ceiling of the bid multiplier, per mille (1000 = the line item's price; 1000 turns bid
    /// pacing off).
    pub max_bid_permille: u32,
    /// Most the bid multiplier may change in one round (a factor).
    pub bid_step: f64,
}

impl Default for PacerConfig {
    fn default() -> Self {
        PacerConfig {
            catch_up_daily: SignedDuration::from_hours(2),
            catch_up_lifetime: SignedDuration::from_hours(24),
            estimate_window: SignedDuration::from_mins(15),
            initial_throttle: 0.05,
            max_step_up: 4.0,
            max_bid_permille: 1_200,
            bid_step: 1.05,
        }
    }
}

/// What the controller remembers about one line item between rounds: plain data, to persist
/// with the manager's state or keep in memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PacingState {
    last: Option<Delivery>,
    /// Forgotten sum of deliveries.
    delivered: f64,
    /// Forgotten sum of throttle × expected traffic that produced them.
    exposure: f64,
    /// Throttle of the last output (0 while stopped or paused).
    throttle: f64,
    /// Bid multiplier of the last output, 1 or more.
    bid: f64,
}

/// Why the output is what it is; for the dashboard and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PacingStatus {
    NotStarted,
    Ended,
    /// The daily or lifetime amount is delivered.
    GoalReached,
    /// ASAP, or a lifetime cap without an end: full speed.
    FullSpeed,
    OnPace,
    /// Ahead of the curve by more than the catch-up horizon plans: paused.
    Ahead,
    /// Behind even at full throttle.
    Behind,
}

/// The controller's decision for one line item, in plain integers the wiring copies into the
/// engine's `Control` and the control message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacingOutput {
    pub status: PacingStatus,
    /// Stop outright: outside the flight or goal reached.
    pub stopped: bool,
    /// Share of eligible requests to take part in, parts per million.
    pub throttle_ppm: u32,
    /// Multiplier of the line item's bid, per mille (1000 = its price).
    pub bid_multiplier_permille: u32,
}

/// A throttle in parts per million as the engine's probability.
pub(crate) fn throttle_from_ppm(throttle_ppm: u32) -> f32 {
    (f64::from(throttle_ppm) / PacingOutput::PPM) as f32
}

impl PacingOutput {
    const PPM: f64 = 1_000_000.0;
    const PERMILLE: f64 = 1_000.0;

    /// The throttle as the engine's probability.
    pub fn throttle(&self) -> f32 {
        throttle_from_ppm(self.throttle_ppm)
    }

    fn new(status: PacingStatus, throttle: f64, bid: f64) -> PacingOutput {
        PacingOutput {
            status,
            stopped: matches!(
                status,
                PacingStatus::NotStarted | PacingStatus::Ended | PacingStatus::GoalReached
            ),
            throttle_ppm: (throttle.clamp(0.0, 1.0) * Self::PPM).round() as u32,
            bid_multiplier_permille: (bid.max(1.0) * Self::PERMILLE).round() as u32,
        }
    }
}

/// The controller, stateless itself: one per manager, applied to each line item's
/// [`PacingState`] every round.
#[derive(Debug, Clone)]
pub struct Pacer {
    config: PacerConfig,
    max_bid: f64,
}

/// Delivery per unit of expected traffic that the curves ask for over the next horizon.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Need {
    /// No curve binds: deliver as fast as traffic allows.
    Unbounded,
    PerTraffic(f64),
}

impl Need {
    fn min(self, other: Need) -> Need {
        match (self, other) {
            (Need::Unbounded, need) | (need, Need::Unbounded) => need,
            (Need::PerTraffic(a), Need::PerTraffic(b)) => Need::PerTraffic(a.min(b)),
        }
    }
}

impl Pacer {
    pub fn new(config: PacerConfig) -> Result<Pacer, ConfigError> {
        let positive = |field, value: SignedDuration| {
            if value.is_positive() {
                Ok(())
            } else {
                Err(ConfigError::new(field, "must be longer than zero"))
            }
        };
        positive("catch_up_daily", config.catch_up_daily)?;
        positive("catch_up_lifetime", config.catch_up_lifetime)?;
        positive("estimate_window", config.estimate_window)?;
        if !(config.initial_throttle > 0.0 && config.initial_throttle <= 1.0) {
            return Err(ConfigError::new("initial_throttle", "must be in (0, 1]"));
        }
        if !(config.max_step_up.is_finite() && config.max_step_up > 1.0) {
            return Err(ConfigError::new("max_step_up", "must be a factor above 1"));
        }
        if !(config.bid_step.is_finite() && config.bid_step > 1.0) {
            return Err(ConfigError::new("bid_step", "must be a factor above 1"));
        }
        if config.max_bid_permille < 1_000 {
            return Err(ConfigError::new(
                "max_bid_permille",
                "must be at least 1000",
            ));
        }
        Ok(Pacer {
            max_bid: f64::from(config.max_bid_permille) / PacingOutput::PERMILLE,
            config,
        })
    }

    pub fn config(&self) -> &PacerConfig {
        &self.config
    }

    /// The state of a line item not yet measured.
    pub fn start(&self) -> PacingState {
        PacingState {
            last: None,
            delivered: 0.0,
            exposure: 0.0,
            throttle: self.config.initial_throttle,
            bid: 1.0,
        }
    }

    /// One round for one line item: learns from the delivery since the last round, then decides.
    /// Call it every round with the aggregation's counts; time comes only from `delivery.at`.
    pub fn update(
        &self,
        schedule: &Schedule,
        profile: &TrafficProfile,
        state: &mut PacingState,
        delivery: Delivery,
    ) -> Result<PacingOutput, ScheduleError> {
        self.learn(schedule, profile, state, delivery);
        let output = self.decide(schedule, profile, state, delivery)?;
        state.throttle = if output.stopped {
            0.0
        } else {
            f64::from(output.throttle_ppm) / PacingOutput::PPM
        };
        state.bid = f64::from(output.bid_multiplier_permille) / PacingOutput::PERMILLE;
        Ok(output)
    }

    /// Adds the deliveries since the last round, and the traffic the last throttle exposed the
    /// line item to, to the forgotten sums.
    fn learn(
        &self,
        schedule: &Schedule,
        profile: &TrafficProfile,
        state: &mut PacingState,
        delivery: Delivery,
    ) {
        let last = state.last.replace(delivery);
        let Some(last) = last else {
            return;
        };
        if delivery.at <= last.at {
            state.last = Some(last);
            return;
        }
        let elapsed = delivery.at.duration_since(last.at).as_secs_f64();
        let keep = (-elapsed / self.config.estimate_window.as_secs_f64()).exp();
        let delivered = delivery.lifetime.saturating_sub(last.lifetime) as f64;
        let traffic = profile.weight(schedule.zone(), last.at, delivery.at);
        state.delivered = state.delivered * keep + delivered;
        state.exposure = state.exposure * keep + state.throttle * traffic;
    }

    fn decide(
        &self,
        schedule: &Schedule,
        profile: &TrafficProfile,
        state: &PacingState,
        delivery: Delivery,
    ) -> Result<PacingOutput, ScheduleError> {
        let at = delivery.at;
        if !schedule.in_flight(at) {
            let status = if schedule.flight_period().is_some_and(|f| at >= f.end) {
                PacingStatus::Ended
            } else {
                PacingStatus::NotStarted
            };
            return Ok(PacingOutput::new(status, 0.0, 1.0));
        }
        let goal = schedule.goal();
        let reached = goal.daily.is_some_and(|daily| delivery.today >= daily)
            || goal
                .lifetime
                .is_some_and(|lifetime| delivery.lifetime >= lifetime);
        if reached {
            return Ok(PacingOutput::new(PacingStatus::GoalReached, 0.0, 1.0));
        }
        let need = self.need(schedule, profile, delivery)?;
        let Need::PerTraffic(need) = need else {
            return Ok(PacingOutput::new(PacingStatus::FullSpeed, 1.0, 1.0));
        };
        if need <= 0.0 {
            return Ok(PacingOutput::new(PacingStatus::Ahead, 0.0, 1.0));
        }
        // Full-throttle delivery per traffic unit; none seen yet means "more than needed".
        let wanted = if state.delivered > 0.0 && state.exposure > 0.0 {
            need / (state.delivered / state.exposure)
        } else {
            f64::INFINITY
        };
        let ceiling =
            (state.throttle.max(self.config.initial_throttle) * self.config.max_step_up).min(1.0);
        if wanted > 1.0 {
            let bid = if state.throttle >= 1.0 {
                (state.bid * wanted.min(self.config.bid_step)).min(self.max_bid)
            } else {
                state.bid
            };
            return Ok(PacingOutput::new(PacingStatus::Behind, ceiling, bid));
        }
        if state.bid > 1.0 {
            let bid = state.bid * wanted.max(1.0 / self.config.bid_step);
            if bid > 1.0 {
                return Ok(PacingOutput::new(PacingStatus::OnPace, 1.0, bid));
            }
        }
        Ok(PacingOutput::new(
            PacingStatus::OnPace,
            wanted.min(ceiling),
            1.0,
        ))
    }

    /// The stricter of what the daily and the lifetime curves ask for.
    fn need(
        &self,
        schedule: &Schedule,
        profile: &TrafficProfile,
        delivery: Delivery,
    ) -> Result<Need, ScheduleError> {
        if schedule.mode() == PacingMode::Asap {
            return Ok(Need::Unbounded);
        }
        let goal = schedule.goal();
        let daily = match goal.daily {
            Some(amount) => {
                let day = schedule.day(delivery.at)?;
                let horizon = self.config.catch_up_daily;
                curve_need(
                    schedule,
                    profile,
                    day,
                    amount,
                    delivery.today,
                    delivery.at,
                    horizon,
                )
            }
            None => Need::Unbounded,
        };
        let lifetime = match (goal.lifetime, schedule.flight_period()) {
            (Some(amount), Some(flight)) => curve_need(
                schedule,
                profile,
                flight,
                amount,
                delivery.lifetime,
                delivery.at,
                self.config.catch_up_lifetime,
            ),
            _ => Need::Unbounded,
        };
        Ok(daily.min(lifetime))
    }
}

/// Span over which the curve's slope is read: short enough to follow a curved (front-loaded)
/// plan, long enough to average over the rounds.
const SLOPE_SPAN: SignedDuration = SignedDuration::from_mins(15);

/// Delivery per traffic unit the curve of `amount` over `period` asks for at `at`: the curve's
/// own rate over the next [`SLOPE_SPAN`], plus the gap between the curve and `delivered` spread
/// over the catch-up `horizon` (both cut at the period's end). Negative means ahead: pause.
fn curve_need(
    schedule: &Schedule,
    profile: &TrafficProfile,
    period: Period,
    amount: u64,
    delivered: u64,
    at: Timestamp,
    horizon: SignedDuration,
) -> Need {
    let until = |span: SignedDuration| {
        at.checked_add(span)
            .map_or(period.end, |t| t.min(period.end))
    };
    let (slope_end, catch_up_end) = (until(SLOPE_SPAN), until(horizon));
    let slope_traffic = profile.weight(schedule.zone(), at, slope_end);
    let catch_up_traffic = profile.weight(schedule.zone(), at, catch_up_end);
    if slope_traffic <= 0.0 || catch_up_traffic <= 0.0 {
        return Need::Unbounded;
    }
    let planned = |t| amount as f64 * schedule.planned_share(period, t, profile);
    let planned_now = planned(at);
    let slope = (planned(slope_end) - planned_now) / slope_traffic;
    Need::PerTraffic(slope + (planned_now - delivered as f64) / catch_up_traffic)
}

#[cfg(test)]
mod tests {
    use marquee_model::{Goal, GoalMetric};

    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn daily_even(daily: u64) -> Schedule {
        Schedule::new(
            "UTC",
            at("2026-06-01T00:00:00Z"),
            Some(at("2026-06-08T00:00:00Z")),
            PacingMode::Even,
            Goal {
                metric: GoalMetric::Impressions,
                daily: Some(daily),
                lifetime: None,
            },
        )
        .unwrap()
    }

    /// A noiseless plant: `available` deliveries per second at full throttle (and bid 1; more
    /// bid does not help), rounds of `step` seconds, from the flight start for `rounds` rounds.
    /// Returns the last output and delivery.
    fn run(
        pacer: &Pacer,
        schedule: &Schedule,
        available: f64,
        rounds: usize,
    ) -> (PacingOutput, Delivery, PacingState) {
        let mut state = pacer.start();
        let mut delivery = Delivery {
            at: at("2026-06-01T00:00:00Z"),
            today: 0,
            lifetime: 0,
        };
        let mut carry = 0.0;
        let mut output = pacer
            .update(schedule, &TrafficProfile::UNIFORM, &mut state, delivery)
            .unwrap();
        for _ in 0..rounds {
            let throttle = if output.stopped {
                0.0
            } else {
                f64::from(output.throttle())
            };
            carry += available * throttle * 60.0;
            let whole = carry.floor();
            carry -= whole;
            delivery.at += SignedDuration::from_secs(60);
            delivery.today += whole as u64;
            delivery.lifetime += whole as u64;
            output = pacer
                .update(schedule, &TrafficProfile::UNIFORM, &mut state, delivery)
                .unwrap();
        }
        (output, delivery, state)
    }

    #[test]
    fn the_throttle_settles_at_the_share_the_goal_needs() {
        let pacer = Pacer::new(PacerConfig::default()).unwrap();
        // 10 per second available, 86,400 a day wanted: a throttle of 0.1.
        let (output, delivery, _) = run(&pacer, &daily_even(86_400), 10.0, 6 * 60);
        assert_eq!(output.status, PacingStatus::OnPace);
        assert!(
            (f64::from(output.throttle()) - 0.1).abs() < 0.005,
            "{output:?}"
        );
        assert_eq!(output.bid_multiplier_permille, 1_000);
        let expected = 6.0 * 3_600.0;
        assert!(
            (delivery.today as f64 - expected).abs() / expected < 0.01,
            "{delivery:?}"
        );
    }

    #[test]
    fn the_bid_multiplier_rises_only_at_full_throttle_and_stays_bounded() {
        let pacer = Pacer::new(PacerConfig::default()).unwrap();
        // Twice what traffic allows: full throttle, and the multiplier climbs to its ceiling.
        let (output, _, state) = run(&pacer, &daily_even(86_400), 0.5, 3 * 60);
        assert_eq!(output.status, PacingStatus::Behind);
        assert_eq!(output.throttle_ppm, 1_000_000);
        assert_eq!(output.bid_multiplier_permille, 1_200);
        assert_eq!(state.bid, 1.2);
    }

    #[test]
    fn after_a_shortfall_the_multiplier_comes_down_before_the_throttle() {
        let pacer = Pacer::new(PacerConfig::default()).unwrap();
        let schedule = daily_even(86_400);
        let mut state = pacer.start();
        state.throttle = 1.0;
        state.bid = 1.2;
        state.delivered = 1_000.0;
        state.exposure = 10.0; // 100 per traffic-second: far more than the 1 needed
        let delivery = Delivery {
            at: at("2026-06-01T06:00:00Z"),
            today: 21_600,
            lifetime: 21_600,
        };
        state.last = Some(delivery);
        let mut bids = Vec::new();
        let mut output = pacer
            .update(&schedule, &TrafficProfile::UNIFORM, &mut state, delivery)
            .unwrap();
        while output.bid_multiplier_permille > 1_000 {
            assert_eq!(output.throttle_ppm, 1_000_000);
            bids.push(output.bid_multiplier_permille);
            output = pacer
                .update(&schedule, &TrafficProfile::UNIFORM, &mut state, delivery)
                .unwrap();
        }
        assert!(bids.windows(2).all(|w| w[1] < w[0]), "{bids:?}");
        // ln(1.2) / ln(1.05) ≈ 3.7 rounds at most.
        assert!(bids.len() <= 4, "{bids:?}");
        assert!(output.throttle_ppm < 1_000_000);
    }

    #[test]
    fn ahead_of_the_curve_pauses_and_goal_reached_stops() {
        let pacer = Pacer::new(PacerConfig::default()).unwrap();
        let schedule = daily_even(1_000);
        let mut state = pacer.start();
        let ahead = Delivery {
            at: at("2026-06-01T01:00:00Z"),
            today: 500,
            lifetime: 500,
        };
        let output = pacer
            .update(&schedule, &TrafficProfile::UNIFORM, &mut state, ahead)
            .unwrap();
        assert_eq!(output.status, PacingStatus::Ahead);
        assert_eq!((output.stopped, output.throttle_ppm), (false, 0));
        let done = Delivery {
            at: at("2026-06-01T20:00:00Z"),
            today: 1_000,
            lifetime: 1_000,
        };
        let output = pacer
            .update(&schedule, &TrafficProfile::UNIFORM, &mut state, done)
            .unwrap();
        assert_eq!(output.status, PacingStatus::GoalReached);
        assert!(output.stopped);
        // The next day starts again.
        let tomorrow = Delivery {
            at: at("2026-06-02T00:10:00Z"),
            today: 0,
            lifetime: 1_000,
        };
        let output = pacer
            .update(&schedule, &TrafficProfile::UNIFORM, &mut state, tomorrow)
            .unwrap();
        assert!(!output.stopped);
    }

    #[test]
    fn asap_runs_at_full_speed_and_flights_bound_it() {
        let pacer = Pacer::new(PacerConfig::default()).unwrap();
        let schedule = Schedule::new(
            "UTC",
            at("2026-06-01T00:00:00Z"),
            Some(at("2026-06-02T00:00:00Z")),
            PacingMode::Asap,
            Goal {
                metric: GoalMetric::Spend,
                daily: None,
                lifetime: Some(1_000_000),
            },
        )
        .unwrap();
        let mut state = pacer.start();
        let mut update = |time: &str| {
            let delivery = Delivery {
                at: at(time),
                today: 0,
                lifetime: 0,
            };
            pacer
                .update(&schedule, &TrafficProfile::UNIFORM, &mut state, delivery)
                .unwrap()
        };
        assert_eq!(
            update("2026-05-31T23:00:00Z").status,
            PacingStatus::NotStarted
        );
        let running = update("2026-06-01T10:00:00Z");
        assert_eq!(running.status, PacingStatus::FullSpeed);
        assert_eq!(running.throttle_ppm, 1_000_000);
        let ended = update("2026-06-02T00:00:00Z");
        assert_eq!(ended.status, PacingStatus::Ended);
        assert!(ended.stopped);
    }

    #[test]
    fn configuration_errors_name_the_field() {
        let bad = PacerConfig {
            max_bid_permille: 900,
            ..PacerConfig::default()
        };
        let error = Pacer::new(bad).unwrap_err();
        assert_eq!(error.field, "max_bid_permille");
        let bad = PacerConfig {
            estimate_window: SignedDuration::ZERO,
            ..PacerConfig::default()
        };
        assert_eq!(Pacer::new(bad).unwrap_err().field, "estimate_window");
    }

    #[test]
    fn state_is_plain_data() {
        let pacer = Pacer::new(PacerConfig::default()).unwrap();
        let (_, _, state) = run(&pacer, &daily_even(86_400), 10.0, 5);
        let text = serde_json::to_string(&state).unwrap();
        let back: PacingState = serde_json::from_str(&text).unwrap();
        assert_eq!(back, state);
    }
}
