//! Goal curves: how much of a line item's goal should be delivered by a given instant, per
//! pacing mode, in the line item's time zone.

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;
use marquee_model::{Goal, LineItem, PacingMode};
use serde::{Deserialize, Serialize};

use crate::{Delivery, ScheduleError, TrafficProfile};

/// A span of time `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Period {
    pub start: Timestamp,
    pub end: Timestamp,
}

/// Where delivery should stand at an instant, per goal: cumulative amounts in the goal's metric.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Targets {
    /// Of the daily amount, since the start of the local day (or of the flight, if later).
    pub today: Option<f64>,
    /// Of the lifetime amount, since the start of the flight.
    pub lifetime: Option<f64>,
}

/// The budget leases enforce for the current period: the local day for a daily amount (capped
/// by what is left of a lifetime amount), the whole flight for a lifetime amount alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetPeriod {
    /// Names the period: the local date as `yyyymmdd` for a day, 0 for the flight.
    pub key: i64,
    /// Most the period may deliver, in the goal's metric.
    pub limit: u64,
    /// When the period started: the start of the local day, or of the flight.
    pub starts_at: Timestamp,
    /// When the period ends: the end of the local day, or of the flight (`None` if it has none).
    pub ends_at: Option<Timestamp>,
    /// What the delivery the budget was computed from shows delivered in this period already:
    /// today's for a day, the lifetime's for the flight. The lease book counts it as used
    /// ([`crate::BudgetSpec::delivered`]), so that a budget made while the line item has
    /// already delivered does not grant the whole `limit` again.
    pub delivered: u64,
}

/// The key of a whole-flight budget period.
pub const FLIGHT_PERIOD: i64 = 0;

/// One line item's pacing plan: flight, time zone, mode and goal, resolved once so that each
/// controller round only does arithmetic.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    zone: TimeZone,
    start: Timestamp,
    end: Option<Timestamp>,
    mode: PacingMode,
    goal: Goal,
}

impl Schedule {
    /// A plan for a flight given as instants; `time_zone` (IANA) decides where days begin.
    pub fn new(
        time_zone: &str,
        start: Timestamp,
        end: Option<Timestamp>,
        mode: PacingMode,
        goal: Goal,
    ) -> Result<Schedule, ScheduleError> {
        let zone = TimeZone::get(time_zone)
            .map_err(|_| ScheduleError::UnknownTimeZone(time_zone.to_owned()))?;
        if end.is_some_and(|end| end <= start) {
            return Err(ScheduleError::EndNotAfterStart);
        }
        match (goal.daily, goal.lifetime) {
            (None, None) => return Err(ScheduleError::NoAmount),
            (Some(0), _) | (_, Some(0)) => return Err(ScheduleError::ZeroAmount),
            (Some(daily), Some(lifetime)) if daily > lifetime => {
                return Err(ScheduleError::DailyOverLifetime);
            }
            _ => {}
        }
        Ok(Schedule {
            zone,
            start,
            end,
            mode,
            goal,
        })
    }

    /// The plan of a line item; an error if it has no goal (nothing to pace: it runs at full
    /// speed and needs no lease) or a flight that cannot be placed in its zone.
    pub fn for_line_item(line_item: &LineItem) -> Result<Schedule, ScheduleError> {
        let goal = line_item.goal.ok_or(ScheduleError::NoGoal)?;
        let (start, end) = line_item
            .flight()
            .ok_or_else(|| ScheduleError::UnplaceableFlight(line_item.time_zone.clone()))?;
        Schedule::new(&line_item.time_zone, start, end, line_item.pacing, goal)
    }

    pub fn goal(&self) -> Goal {
        self.goal
    }

    pub fn mode(&self) -> PacingMode {
        self.mode
    }

    pub fn zone(&self) -> &TimeZone {
        &self.zone
    }

    /// Whether `at` lies inside the flight.
    pub fn in_flight(&self, at: Timestamp) -> bool {
        at >= self.start && self.end.is_none_or(|end| at < end)
    }

    /// The local calendar day holding `at` (23 or 25 hours long on a daylight-saving day),
    /// clipped to the flight.
    pub fn day(&self, at: Timestamp) -> Result<Period, ScheduleError> {
        let date = at.to_zoned(self.zone.clone()).date();
        let (start, end) = self.day_bounds(date)?;
        Ok(Period {
            start: start.max(self.start),
            end: self.end.map_or(end, |flight_end| end.min(flight_end)),
        })
    }

    fn day_bounds(&self, date: Date) -> Result<(Timestamp, Timestamp), ScheduleError> {
        let out_of_range = || ScheduleError::TimeOutOfRange(date);
        let start = date
            .to_zoned(self.zone.clone())
            .map_err(|_| out_of_range())?;
        let end = date
            .tomorrow()
            .and_then(|next| next.to_zoned(self.zone.clone()))
            .map_err(|_| out_of_range())?;
        Ok((start.timestamp(), end.timestamp()))
    }

    /// The share of a period's amount that the mode plans to have delivered by `at`, from 0 at
    /// the period's start to 1 at its end, measured in expected traffic:
    /// - even: the share of the period's traffic gone by, `u`;
    /// - front-loaded: `1.5u − 0.5u²`, a delivery rate falling linearly from 150% of even at
    ///   the start to 50% at the end (62.5% delivered at mid-period);
    /// - ASAP: 1 from the start (deliver as fast as traffic allows).
    pub fn planned_share(&self, period: Period, at: Timestamp, profile: &TrafficProfile) -> f64 {
        if self.mode == PacingMode::Asap || at >= period.end {
            return 1.0;
        }
        let whole = profile.weight(&self.zone, period.start, period.end);
        if whole <= 0.0 {
            return 1.0;
        }
        let u = (profile.weight(&self.zone, period.start, at) / whole).clamp(0.0, 1.0);
        match self.mode {
            PacingMode::Even => u,
            PacingMode::FrontLoaded => 1.5 * u - 0.5 * u * u,
            PacingMode::Asap => 1.0,
        }
    }

    /// The lifetime amount's period: the flight, if it ends. A lifetime amount without an end
    /// has no horizon to spread over, so it is a cap only (delivered as soon as traffic allows).
    pub(crate) fn flight_period(&self) -> Option<Period> {
        self.end.map(|end| Period {
            start: self.start,
            end,
        })
    }

    /// Where delivery should stand at `at` for each of the goal's amounts. The daily amount
    /// applies in full to every local day of the flight, a partial first or last day included.
    pub fn targets(
        &self,
        at: Timestamp,
        profile: &TrafficProfile,
    ) -> Result<Targets, ScheduleError> {
        let today = match self.goal.daily {
            Some(daily) => {
                let day = self.day(at)?;
                Some(daily as f64 * self.planned_share(day, at, profile))
            }
            None => None,
        };
        let lifetime = self.goal.lifetime.map(|lifetime| {
            let share = self
                .flight_period()
                .map_or(1.0, |flight| self.planned_share(flight, at, profile));
            lifetime as f64 * share
        });
        Ok(Targets { today, lifetime })
    }

    /// The budget leases enforce at `delivery.at`: per local day if the goal has a daily
    /// amount (the lesser of it and what the lifetime amount has left, counting deliveries
    /// before today), else the lifetime amount over the flight. `None` outside the flight.
    /// The period's own delivery so far (today's, or the lifetime's) is not taken from the
    /// limit but reported as [`BudgetPeriod::delivered`]: the book counts the period's use
    /// from it and from edges' reports together, each delivery once.
    pub fn budget(&self, delivery: &Delivery) -> Result<Option<BudgetPeriod>, ScheduleError> {
        if !self.in_flight(delivery.at) {
            return Ok(None);
        }
        let Some(daily) = self.goal.daily else {
            return Ok(self.goal.lifetime.map(|lifetime| BudgetPeriod {
                key: FLIGHT_PERIOD,
                limit: lifetime,
                starts_at: self.start,
                ends_at: self.end,
                delivered: delivery.lifetime,
            }));
        };
        let before_today = delivery.lifetime.saturating_sub(delivery.today);
        let limit = self.goal.lifetime.map_or(daily, |lifetime| {
            daily.min(lifetime.saturating_sub(before_today))
        });
        let date = delivery.at.to_zoned(self.zone.clone()).date();
        let key =
            i64::from(date.year()) * 10_000 + i64::from(date.month()) * 100 + i64::from(date.day());
        let day = self.day(delivery.at)?;
        Ok(Some(BudgetPeriod {
            key,
            limit,
            starts_at: day.start,
            ends_at: Some(day.end),
            delivered: delivery.today,
        }))
    }
}

#[cfg(test)]
mod tests {
    use marquee_model::GoalMetric;

    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn goal(daily: Option<u64>, lifetime: Option<u64>) -> Goal {
        Goal {
            metric: GoalMetric::Impressions,
            daily,
            lifetime,
        }
    }

    fn berlin(mode: PacingMode, goal: Goal) -> Schedule {
        Schedule::new(
            "Europe/Berlin",
            at("2026-10-23T22:00:00Z"),
            Some(at("2026-10-27T23:00:00Z")),
            mode,
            goal,
        )
        .unwrap()
    }

    #[test]
    fn days_follow_the_zone_with_23_and_25_hours() {
        let schedule = berlin(PacingMode::Even, goal(Some(100), None));
        let autumn = schedule.day(at("2026-10-25T12:00:00Z")).unwrap();
        assert_eq!(autumn.start, at("2026-10-24T22:00:00Z"));
        assert_eq!(autumn.end, at("2026-10-25T23:00:00Z"));
        let spring = Schedule::new(
            "Europe/Berlin",
            at("2026-01-01T00:00:00Z"),
            None,
            PacingMode::Even,
            goal(Some(100), None),
        )
        .unwrap()
        .day(at("2026-03-29T12:00:00Z"))
        .unwrap();
        assert_eq!(spring.end.duration_since(spring.start).as_hours(), 23);
    }

    #[test]
    fn days_are_clipped_to_the_flight() {
        let schedule = Schedule::new(
            "Europe/Berlin",
            at("2026-06-10T10:00:00Z"),
            Some(at("2026-06-12T08:00:00Z")),
            PacingMode::Even,
            goal(Some(100), None),
        )
        .unwrap();
        let first = schedule.day(at("2026-06-10T12:00:00Z")).unwrap();
        assert_eq!(first.start, at("2026-06-10T10:00:00Z"));
        assert_eq!(first.end, at("2026-06-10T22:00:00Z"));
        let last = schedule.day(at("2026-06-12T07:00:00Z")).unwrap();
        assert_eq!(last.end, at("2026-06-12T08:00:00Z"));
    }

    #[test]
    fn even_front_loaded_and_asap_shapes() {
        let flight = Period {
            start: at("2026-06-01T00:00:00Z"),
            end: at("2026-06-03T00:00:00Z"),
        };
        let middle = at("2026-06-02T00:00:00Z");
        let quarter = at("2026-06-01T12:00:00Z");
        let uniform = TrafficProfile::UNIFORM;
        let share = |mode, t| {
            Schedule::new(
                "UTC",
                flight.start,
                Some(flight.end),
                mode,
                goal(None, Some(10)),
            )
            .unwrap()
            .planned_share(flight, t, &uniform)
        };
        assert!((share(PacingMode::Even, middle) - 0.5).abs() < 1e-12);
        assert!((share(PacingMode::FrontLoaded, middle) - 0.625).abs() < 1e-12);
        assert!((share(PacingMode::FrontLoaded, quarter) - 0.34375).abs() < 1e-12);
        assert_eq!(share(PacingMode::Asap, flight.start), 1.0);
        assert_eq!(share(PacingMode::Even, flight.end), 1.0);
    }

    #[test]
    fn even_against_traffic_follows_the_profile() {
        // Half of the day's traffic comes between 18:00 and 24:00 local time.
        let mut counts = [1.0; 24];
        for count in &mut counts[18..] {
            *count = 3.0;
        }
        let profile = TrafficProfile::from_hourly(counts).unwrap();
        let schedule = Schedule::new(
            "UTC",
            at("2026-06-01T00:00:00Z"),
            None,
            PacingMode::Even,
            goal(Some(1_000), None),
        )
        .unwrap();
        let targets = schedule
            .targets(at("2026-06-01T18:00:00Z"), &profile)
            .unwrap();
        assert!((targets.today.unwrap() - 500.0).abs() < 1e-6);
        assert_eq!(targets.lifetime, None);
    }

    #[test]
    fn a_lifetime_amount_without_an_end_is_a_cap() {
        let schedule = Schedule::new(
            "UTC",
            at("2026-06-01T00:00:00Z"),
            None,
            PacingMode::Even,
            goal(None, Some(5_000)),
        )
        .unwrap();
        let targets = schedule
            .targets(at("2026-06-01T00:00:01Z"), &TrafficProfile::UNIFORM)
            .unwrap();
        assert_eq!(targets.lifetime, Some(5_000.0));
    }

    #[test]
    fn budget_periods_take_the_lesser_of_daily_and_what_lifetime_has_left() {
        let schedule = berlin(PacingMode::Even, goal(Some(1_000), Some(2_500)));
        let delivery = Delivery {
            at: at("2026-10-26T10:00:00Z"),
            today: 300,
            lifetime: 2_000,
        };
        let budget = schedule.budget(&delivery).unwrap().unwrap();
        assert_eq!(budget.key, 20_261_026);
        assert_eq!(budget.limit, 800);
        assert_eq!(budget.starts_at, at("2026-10-25T23:00:00Z"));
        assert_eq!(budget.ends_at, Some(at("2026-10-26T23:00:00Z")));
        assert_eq!(budget.delivered, 300, "today's, counted by the book");
        let lifetime_only = berlin(PacingMode::Even, goal(None, Some(2_500)));
        assert_eq!(
            lifetime_only.budget(&delivery).unwrap(),
            Some(BudgetPeriod {
                key: FLIGHT_PERIOD,
                limit: 2_500,
                starts_at: at("2026-10-23T22:00:00Z"),
                ends_at: Some(at("2026-10-27T23:00:00Z")),
                delivered: 2_000,
            })
        );
        let after = Delivery {
            at: at("2026-10-28T00:00:00Z"),
            ..delivery
        };
        assert_eq!(schedule.budget(&after).unwrap(), None);
    }

    #[test]
    fn bad_plans_are_named() {
        let start = at("2026-06-01T00:00:00Z");
        let new = |zone, end, goal| Schedule::new(zone, start, end, PacingMode::Even, goal);
        assert_eq!(
            new("Mars/Olympus", None, goal(Some(1), None)),
            Err(ScheduleError::UnknownTimeZone("Mars/Olympus".into()))
        );
        assert_eq!(
            new("UTC", Some(start), goal(Some(1), None)),
            Err(ScheduleError::EndNotAfterStart)
        );
        assert_eq!(
            new("UTC", None, goal(None, None)),
            Err(ScheduleError::NoAmount)
        );
        assert_eq!(
            new("UTC", None, goal(Some(0), None)),
            Err(ScheduleError::ZeroAmount)
        );
        assert_eq!(
            new("UTC", None, goal(Some(5), Some(4))),
            Err(ScheduleError::DailyOverLifetime)
        );
    }
}
