//! Expected traffic by local hour of day, and the traffic-weighted measure of a time span that
//! goal curves are drawn against.

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};

use crate::ProfileError;

const HOURS: usize = 24;
const SECONDS_PER_HOUR: i64 = 3_600;
const SECONDS_PER_DAY: i64 = 86_400;
/// No hour weighs less than this share of the mean, so that every span of time has some
/// expected traffic and a curve never divides by zero: a line item is never told that an hour
/// holds nothing to deliver into.
const MIN_HOUR_WEIGHT: f64 = 0.01;

/// A 24-hour traffic profile: how much traffic each local hour of the day carries, relative to
/// the mean hour (the weights average 1). Weighting goal curves by it makes "even" mean an even
/// share of the traffic available, so the throttle stays flat over the day instead of swinging
/// with the daily curve. [`TrafficProfile::UNIFORM`] (every hour alike) is wall-clock time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrafficProfile {
    hourly: [f64; HOURS],
}

impl Default for TrafficProfile {
    fn default() -> Self {
        Self::UNIFORM
    }
}

impl TrafficProfile {
    /// Every hour alike: curves follow wall-clock time.
    pub const UNIFORM: TrafficProfile = TrafficProfile {
        hourly: [1.0; HOURS],
    };

    /// A profile from traffic counted per local hour (index 0 is 00:00–01:00), for example
    /// eligible requests of the line item's placements over the last days. Counts may be in any
    /// unit; they are scaled to a mean of 1, with no hour below 1% of the mean.
    pub fn from_hourly(counts: [f64; HOURS]) -> Result<TrafficProfile, ProfileError> {
        if let Some(hour) = counts.iter().position(|c| !c.is_finite() || *c < 0.0) {
            return Err(ProfileError::BadCount { hour });
        }
        let total: f64 = counts.iter().sum();
        if total <= 0.0 {
            return Err(ProfileError::Empty);
        }
        let mean = total / HOURS as f64;
        let floored = counts.map(|c| (c / mean).max(MIN_HOUR_WEIGHT));
        let scale = HOURS as f64 / floored.iter().sum::<f64>();
        Ok(TrafficProfile {
            hourly: floored.map(|w| w * scale),
        })
    }

    /// Moves this profile towards a newer one by `weight` (0 keeps this one, 1 takes the newer),
    /// the exponential average a learner applies once per day of new counts.
    pub fn blend(&self, newer: &TrafficProfile, weight: f64) -> TrafficProfile {
        let weight = if weight.is_finite() {
            weight.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let mut hourly = self.hourly;
        for (old, new) in hourly.iter_mut().zip(newer.hourly) {
            *old += (new - *old) * weight;
        }
        TrafficProfile { hourly }
    }

    /// The weights, mean 1, index 0 for 00:00–01:00 local time.
    pub fn hourly(&self) -> &[f64; HOURS] {
        &self.hourly
    }

    /// Expected traffic from `from` to `to` (zero if `to` is not later), in seconds at the mean
    /// rate: with the uniform profile this is the real time elapsed. The integral runs over real
    /// time and looks up each instant's local hour, so a day with a daylight-saving change counts
    /// its 23 or 25 hours, and the hour that repeats counts twice.
    pub fn weight(&self, zone: &TimeZone, from: Timestamp, to: Timestamp) -> f64 {
        if to <= from {
            return 0.0;
        }
        let mut total = 0.0;
        let mut cursor = from;
        let mut offset = i64::from(zone.to_offset(from).seconds());
        for transition in zone.following(from) {
            let at = transition.timestamp();
            if at >= to {
                break;
            }
            total += self.local_span(cursor.as_second() + offset, at.as_second() + offset);
            cursor = at;
            offset = i64::from(transition.offset().seconds());
        }
        total + self.local_span(cursor.as_second() + offset, to.as_second() + offset)
    }

    /// Weight of the local wall-clock span `[from, to)`, both in local seconds since the epoch.
    fn local_span(&self, from: i64, to: i64) -> f64 {
        let days = to.div_euclid(SECONDS_PER_DAY) - from.div_euclid(SECONDS_PER_DAY);
        days as f64 * SECONDS_PER_DAY as f64 + self.since_midnight(to.rem_euclid(SECONDS_PER_DAY))
            - self.since_midnight(from.rem_euclid(SECONDS_PER_DAY))
    }

    /// Weight from local midnight to `second` of the day (`0..86_400`, so the hour is `0..24`).
    fn since_midnight(&self, second: i64) -> f64 {
        let hour = (second / SECONDS_PER_HOUR) as usize;
        let whole: f64 = self.hourly[..hour].iter().sum();
        (whole * SECONDS_PER_HOUR as f64) + self.hourly[hour] * (second % SECONDS_PER_HOUR) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn uniform_weight_is_real_time_across_daylight_saving_days() {
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        let uniform = TrafficProfile::UNIFORM;
        // 2026-03-29 has 23 hours in Berlin, 2026-10-25 has 25.
        let spring = uniform.weight(
            &berlin,
            at("2026-03-28T23:00:00Z"),
            at("2026-03-29T22:00:00Z"),
        );
        assert_eq!(spring, 23.0 * 3_600.0);
        let autumn = uniform.weight(
            &berlin,
            at("2026-10-24T22:00:00Z"),
            at("2026-10-25T23:00:00Z"),
        );
        assert_eq!(autumn, 25.0 * 3_600.0);
    }

    #[test]
    fn profile_weight_counts_the_repeated_and_the_skipped_hour() {
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        let mut counts = [1.0; HOURS];
        counts[2] = 13.0; // 02:00-03:00 local weighs 13 of 36: mean 1.5
        let profile = TrafficProfile::from_hourly(counts).unwrap();
        let w2 = profile.hourly()[2];
        let w_other = profile.hourly()[0];
        assert!((w2 / w_other - 13.0).abs() < 1e-9);
        let normal_day = profile.weight(
            &berlin,
            at("2026-06-09T22:00:00Z"),
            at("2026-06-10T22:00:00Z"),
        );
        assert!((normal_day - 86_400.0).abs() < 1e-6);
        // Spring forward skips 02:00-03:00; autumn repeats it (02:00-03:00 happens twice).
        let spring = profile.weight(
            &berlin,
            at("2026-03-28T23:00:00Z"),
            at("2026-03-29T22:00:00Z"),
        );
        assert!((spring - (86_400.0 - w2 * 3_600.0)).abs() < 1e-6);
        let autumn = profile.weight(
            &berlin,
            at("2026-10-24T22:00:00Z"),
            at("2026-10-25T23:00:00Z"),
        );
        assert!((autumn - (86_400.0 + w2 * 3_600.0)).abs() < 1e-6);
    }

    #[test]
    fn partial_hours_and_multi_day_spans_add_up() {
        let zone = TimeZone::get("America/New_York").unwrap();
        let profile = TrafficProfile::from_hourly(std::array::from_fn(|h| h as f64 + 1.0)).unwrap();
        let a = at("2026-05-01T13:17:00Z");
        let b = at("2026-05-03T02:45:30Z");
        let c = at("2026-05-09T08:00:00Z");
        let whole = profile.weight(&zone, a, c);
        let parts = profile.weight(&zone, a, b) + profile.weight(&zone, b, c);
        assert!((whole - parts).abs() < 1e-6);
        assert_eq!(profile.weight(&zone, c, a), 0.0);
    }

    #[test]
    fn hours_are_floored_and_bad_counts_named() {
        let mut counts = [0.0; HOURS];
        counts[12] = 100.0;
        let profile = TrafficProfile::from_hourly(counts).unwrap();
        assert!(profile.hourly().iter().all(|w| *w > 0.0));
        assert!((profile.hourly().iter().sum::<f64>() - 24.0).abs() < 1e-9);
        assert_eq!(
            TrafficProfile::from_hourly([0.0; HOURS]),
            Err(ProfileError::Empty)
        );
        counts[5] = f64::NAN;
        assert_eq!(
            TrafficProfile::from_hourly(counts),
            Err(ProfileError::BadCount { hour: 5 })
        );
    }

    #[test]
    fn blend_moves_towards_the_newer_profile() {
        let mut counts = [1.0; HOURS];
        counts[0] = 3.0;
        let newer = TrafficProfile::from_hourly(counts).unwrap();
        let half = TrafficProfile::UNIFORM.blend(&newer, 0.5);
        let expected = (1.0 + newer.hourly()[0]) / 2.0;
        assert!((half.hourly()[0] - expected).abs() < 1e-12);
        assert_eq!(
            TrafficProfile::UNIFORM.blend(&newer, f64::NAN),
            TrafficProfile::UNIFORM
        );
    }
}
