//! The traffic model: expected requests per placement and hour, from the sample's whole days
//! before `now`.
//!
//! Per placement, the daily counts are fitted as `ln(count) = level + slope × day +
//! weekday factor`, by least squares weighted by recency (a day's weight halves every
//! [`HALF_LIFE_DAYS`]). A day whose residual is more than 3.5 robust standard deviations
//! (1.4826 × the median absolute deviation, and at least 15%) from the median residual is an
//! outlier, a holiday or an outage: it is left out of the level, the trend, the weekday
//! factors and the hourly shape, and the fit is repeated. The shape of each weekday over its 24
//! UTC hours is the recency-weighted share of that weekday's traffic in each hour, shrunk
//! towards the shape of all placements together when a placement has few samples. Counts are
//! divided by the sample rate. The trend is capped at ±[`MAX_SLOPE`] a day and extrapolated at
//! most [`MAX_HORIZON_DAYS`] ahead.

use jiff::Timestamp;
use marquee_model::PlacementId;
use rustc_hash::FxHashMap;

use crate::Sample;

/// A day's weight halves every this many days back.
pub const HALF_LIFE_DAYS: f64 = 14.0;
/// Days of sample the model reads at most.
pub const MAX_DAYS: i64 = 56;
/// Largest trend, as a change of the logarithm per day (about ±3% a day).
pub const MAX_SLOPE: f64 = 0.03;
/// The trend is not extrapolated further than this.
pub const MAX_HORIZON_DAYS: f64 = 90.0;
/// Weight, in recency-weighted samples, of the pooled hourly shape in a placement's shape.
const SHAPE_PRIOR: f64 = 200.0;
const HOURS_PER_WEEK: usize = 168;

pub(crate) const SECONDS_PER_DAY: i64 = 86_400;
pub(crate) const MINUTES_PER_DAY: i64 = 1_440;

/// Monday 0 … Sunday 6 of a UTC day number (day 0, 1970-01-01, was a Thursday).
pub(crate) fn weekday(day: i64) -> usize {
    (day + 3).rem_euclid(7) as usize
}

/// Expected requests per placement and hour, with the daily variability it saw.
#[derive(Debug)]
pub struct TrafficModel<'s> {
    pub(crate) sample: &'s Sample,
    now: Timestamp,
    /// The UTC day holding `now`; the model's level is this day's.
    today: i64,
    placements: FxHashMap<PlacementId, usize>,
    fits: Vec<Fit>,
    /// Recency weight of each profile of the sample (its records in the days read).
    pub(crate) profile_weights: Vec<f64>,
    /// Records of each profile in the days read.
    pub(crate) profile_counts: Vec<u32>,
    days_used: usize,
}

#[derive(Debug, Clone)]
struct Fit {
    /// ln of sampled requests on `today`, before the weekday factor.
    level: f64,
    slope: f64,
    /// ln of each weekday's factor (mean 0 over the week).
    weekday: [f64; 7],
    /// Share of each weekday's traffic in each UTC hour, `weekday × 24 + hour`.
    shape: [f64; HOURS_PER_WEEK],
    /// Standard deviation of a day's ln count around the fit, outliers left out.
    cv: f64,
    /// Days the fit treated as outliers.
    outliers: usize,
}

/// Daily and hourly counts of one placement.
struct Counts {
    daily: Vec<f64>,
    hourly: Vec<[f64; 24]>,
}

impl<'s> TrafficModel<'s> {
    /// Fits the model to the whole UTC days of `sample` before `now` (at most [`MAX_DAYS`]).
    pub fn fit(sample: &'s Sample, now: Timestamp) -> TrafficModel<'s> {
        let today = now.as_second().div_euclid(SECONDS_PER_DAY);
        let first = today - MAX_DAYS;
        let span = MAX_DAYS as usize;
        let mut placements: FxHashMap<PlacementId, usize> = FxHashMap::default();
        let mut counts: Vec<Counts> = Vec::new();
        let mut seen = vec![false; span];
        let mut profile_weights = vec![0.0; sample.profiles.len()];
        let mut profile_counts = vec![0u32; sample.profiles.len()];
        let recency = |day: i64| 0.5f64.powf((today - 1 - day) as f64 / HALF_LIFE_DAYS);
        let weights: Vec<f64> = (first..today).map(recency).collect();
        for entry in &sample.entries {
            let day = i64::from(entry.minute).div_euclid(MINUTES_PER_DAY);
            if day < first || day >= today {
                continue;
            }
            let slot = (day - first) as usize;
            seen[slot] = true;
            let placement = sample.profiles[entry.profile as usize].placement;
            let index = *placements.entry(placement).or_insert_with(|| {
                counts.push(Counts {
                    daily: vec![0.0; span],
                    hourly: vec![[0.0; 24]; span],
                });
                counts.len() - 1
            });
            let hour = (i64::from(entry.minute).rem_euclid(MINUTES_PER_DAY) / 60) as usize;
            counts[index].daily[slot] += 1.0;
            counts[index].hourly[slot][hour] += 1.0;
            profile_weights[entry.profile as usize] += weights[slot];
            profile_counts[entry.profile as usize] += 1;
        }
        let days: Vec<usize> = (0..span).filter(|&s| seen[s]).collect();
        let mut fits: Vec<(Fit, Vec<bool>)> = counts
            .iter()
            .map(|c| fit_days(c, &days, first, today, &weights))
            .collect();
        let mut pooled = [[0.0; 24]; 7];
        for (c, (_, kept)) in counts.iter().zip(&fits) {
            for (&slot, _) in days.iter().zip(kept).filter(|(_, k)| **k) {
                let w = weekday(first + slot as i64);
                for (hour, n) in c.hourly[slot].iter().enumerate() {
                    pooled[w][hour] += weights[slot] * n;
                }
            }
        }
        for (c, (fit, kept)) in counts.iter().zip(&mut fits) {
            fit.shape = shape(c, &days, kept, first, &weights, &pooled);
        }
        TrafficModel {
            sample,
            now,
            today,
            placements,
            fits: fits.into_iter().map(|(fit, _)| fit).collect(),
            profile_weights,
            profile_counts,
            days_used: days.len(),
        }
    }

    pub fn now(&self) -> Timestamp {
        self.now
    }

    pub fn sample(&self) -> &'s Sample {
        self.sample
    }

    /// Whole days of sample the model was fitted to.
    pub fn days(&self) -> usize {
        self.days_used
    }

    /// Days of a placement the fit left out as outliers.
    pub fn outlier_days(&self, placement: PlacementId) -> usize {
        self.placements
            .get(&placement)
            .map_or(0, |&i| self.fits[i].outliers)
    }

    /// Expected requests of `placement` in the UTC hour starting at `hour` (unix seconds; a
    /// second inside the hour counts as the hour).
    pub fn hourly(&self, placement: PlacementId, hour: i64) -> f64 {
        self.placements
            .get(&placement)
            .map_or(0.0, |&i| self.hourly_at(i, hour))
    }

    pub(crate) fn placement_index(&self, placement: PlacementId) -> Option<usize> {
        self.placements.get(&placement).copied()
    }

    pub(crate) fn placement_count(&self) -> usize {
        self.fits.len()
    }

    pub(crate) fn hourly_at(&self, placement: usize, hour: i64) -> f64 {
        let fit = &self.fits[placement];
        let day = hour.div_euclid(SECONDS_PER_DAY);
        let ahead = ((day - self.today) as f64).min(MAX_HORIZON_DAYS);
        let w = weekday(day);
        let h = (hour.rem_euclid(SECONDS_PER_DAY) / 3_600) as usize;
        (fit.level + fit.slope * ahead + fit.weekday[w]).exp() * fit.shape[w * 24 + h]
            / self.sample.rate()
    }

    /// Expected requests of `placement` over the UTC day `day` (days since 1970-01-01).
    pub fn daily(&self, placement: PlacementId, day: i64) -> f64 {
        (0..24)
            .map(|h| self.hourly(placement, day * SECONDS_PER_DAY + h * 3_600))
            .sum()
    }

    /// How far a placement's day strays from the model, as the standard deviation of its
    /// logarithm (about the relative error of a day's forecast).
    pub(crate) fn daily_cv(&self, placement: usize) -> f64 {
        self.fits[placement].cv
    }
}

/// Fits level, trend and weekday factors of one placement; the fit and which of `days` it
/// kept (not outliers).
fn fit_days(
    counts: &Counts,
    days: &[usize],
    first: i64,
    today: i64,
    weights: &[f64],
) -> (Fit, Vec<bool>) {
    let ln: Vec<f64> = days.iter().map(|&s| (counts.daily[s] + 0.5).ln()).collect();
    let x: Vec<f64> = days
        .iter()
        .map(|&s| (first + s as i64 - today) as f64)
        .collect();
    let wd: Vec<usize> = days.iter().map(|&s| weekday(first + s as i64)).collect();
    let w: Vec<f64> = days.iter().map(|&s| weights[s]).collect();
    let mut kept = vec![true; days.len()];
    let mut factors = [0.0; 7];
    let mut line;
    for _ in 0..3 {
        line = regress(&ln, &x, &wd, &w, &kept, &factors);
        // Weekday factors: the mean residual of each weekday, centred.
        let mut sums = [(0.0, 0.0); 7];
        for i in 0..days.len() {
            if kept[i] {
                sums[wd[i]].0 += w[i] * (ln[i] - line.0 - line.1 * x[i]);
                sums[wd[i]].1 += w[i];
            }
        }
        factors = sums.map(|(s, n)| if n > 0.0 { s / n } else { 0.0 });
        let present = sums.iter().filter(|(_, n)| *n > 0.0).count().max(1);
        let mean = factors.iter().sum::<f64>() / present as f64;
        for (f, (_, n)) in factors.iter_mut().zip(sums) {
            *f = if n > 0.0 { *f - mean } else { 0.0 };
        }
        line = regress(&ln, &x, &wd, &w, &kept, &factors);
        let residuals: Vec<f64> = (0..days.len())
            .map(|i| ln[i] - factors[wd[i]] - line.0 - line.1 * x[i])
            .collect();
        let median = median(residuals.clone());
        let mad = median_abs(&residuals, median);
        let limit = (3.5 * 1.4826 * mad).max(0.15);
        kept = residuals
            .iter()
            .map(|r| (r - median).abs() <= limit)
            .collect();
    }
    line = regress(&ln, &x, &wd, &w, &kept, &factors);
    let (mut squares, mut total) = (0.0, 0.0);
    for i in 0..days.len() {
        if kept[i] {
            let r = ln[i] - factors[wd[i]] - line.0 - line.1 * x[i];
            squares += w[i] * r * r;
            total += w[i];
        }
    }
    let fit = Fit {
        level: line.0,
        slope: line.1,
        weekday: factors,
        shape: [1.0 / 24.0; HOURS_PER_WEEK],
        cv: if total > 0.0 {
            (squares / total).sqrt()
        } else {
            0.0
        },
        outliers: kept.iter().filter(|k| !**k).count(),
    };
    (fit, kept)
}

/// Weighted least squares of `ln − factor` on `x` over the kept days: (level at x = 0, slope).
/// Fewer than seven days give no trend.
fn regress(
    ln: &[f64],
    x: &[f64],
    wd: &[usize],
    w: &[f64],
    kept: &[bool],
    factors: &[f64; 7],
) -> (f64, f64) {
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy, mut n) = (0.0, 0.0, 0.0, 0.0, 0.0, 0);
    for i in 0..ln.len() {
        if !kept[i] {
            continue;
        }
        let y = ln[i] - factors[wd[i]];
        sw += w[i];
        sx += w[i] * x[i];
        sy += w[i] * y;
        sxx += w[i] * x[i] * x[i];
        sxy += w[i] * x[i] * y;
        n += 1;
    }
    if sw <= 0.0 {
        return (f64::NEG_INFINITY, 0.0);
    }
    let (mx, my) = (sx / sw, sy / sw);
    let var = sxx / sw - mx * mx;
    let slope = if n >= 7 && var > 1e-9 {
        ((sxy / sw - mx * my) / var).clamp(-MAX_SLOPE, MAX_SLOPE)
    } else {
        0.0
    };
    (my - slope * mx, slope)
}

fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

fn median_abs(values: &[f64], center: f64) -> f64 {
    median(values.iter().map(|v| (v - center).abs()).collect())
}

/// Share of each weekday's traffic per UTC hour, from the kept days, shrunk to `pooled`.
fn shape(
    counts: &Counts,
    days: &[usize],
    kept: &[bool],
    first: i64,
    weights: &[f64],
    pooled: &[[f64; 24]; 7],
) -> [f64; HOURS_PER_WEEK] {
    let mut sums = [[0.0; 24]; 7];
    for (&slot, _) in days.iter().zip(kept).filter(|(_, k)| **k) {
        let w = weekday(first + slot as i64);
        for (hour, n) in counts.hourly[slot].iter().enumerate() {
            sums[w][hour] += weights[slot] * n;
        }
    }
    let mut shape = [0.0; HOURS_PER_WEEK];
    for w in 0..7 {
        let pooled_total: f64 = pooled[w].iter().sum();
        let total: f64 = sums[w].iter().sum();
        for hour in 0..24 {
            let prior = if pooled_total > 0.0 {
                pooled[w][hour] / pooled_total
            } else {
                1.0 / 24.0
            };
            shape[w * 24 + hour] = (sums[w][hour] + SHAPE_PRIOR * prior) / (total + SHAPE_PRIOR);
        }
    }
    shape
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SampleRecord;

    /// 1,000 sampled requests a day at placement 1, twice as many on Saturdays, all in hour
    /// 12, with one holiday (a tenth of the traffic) a week before now.
    #[test]
    fn weekly_pattern_and_level_are_learnt_and_a_holiday_is_left_out() {
        let mut sample = Sample::new(0.5).unwrap();
        let today = 20_000i64; // a Monday? weekday() says which
        for day in today - 28..today {
            let mut n = if weekday(day) == 5 { 2_000 } else { 1_000 };
            if day == today - 7 {
                n /= 10;
            }
            for i in 0..n {
                sample.push(&SampleRecord {
                    minute: (day * MINUTES_PER_DAY + 12 * 60 + i % 60) as u32,
                    placement: PlacementId(1),
                    ..SampleRecord::default()
                });
            }
        }
        let now = Timestamp::from_second(today * SECONDS_PER_DAY + 3_600).unwrap();
        let model = TrafficModel::fit(&sample, now);
        assert_eq!(model.days(), 28);
        assert_eq!(model.outlier_days(PlacementId(1)), 1);
        for day in today..today + 7 {
            let expected = if weekday(day) == 5 { 4_000.0 } else { 2_000.0 };
            let got = model.daily(PlacementId(1), day);
            assert!(
                (got / expected - 1.0).abs() < 0.05,
                "day {day}: {got} against {expected}"
            );
        }
        let noon = today * SECONDS_PER_DAY + 12 * 3_600;
        assert!(model.hourly(PlacementId(1), noon) > 0.8 * model.daily(PlacementId(1), today));
        assert_eq!(model.hourly(PlacementId(2), noon), 0.0);
    }
}
