//! Forecasts from the stored sample (`docs/forecasting.md`): the backtest that
//! `marquee forecast backtest` runs, fitting on the stored days before a split and measuring
//! against the days after it.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use jiff::Timestamp;
use marquee_forecast::{Backtest, DecodeError, ForecastError, Sample, SampleError, SampleRecord};
use marquee_snapshot::{DirError, Snapshot, SnapshotDir};
use marquee_stats::DAY;
use marquee_store::{StatsStore, StoreError};

/// Which stored days a backtest reads, and the rate they were sampled at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BacktestDays {
    /// Whole UTC days fitted on, before the test days.
    pub train: u32,
    /// Whole UTC days measured, ending with yesterday (today is not whole yet).
    pub test: u32,
    /// The share of ad requests the edges kept (`forecast.sample_rate_ppm`).
    pub rate: f64,
}

#[derive(Debug, thiserror::Error)]
pub enum BacktestError {
    #[error("train and test days must each be at least 1, and together at most 56")]
    Days,
    #[error(transparent)]
    Rate(#[from] SampleError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Snapshot(#[from] DirError),
    #[error("no snapshot published yet in {0}")]
    NoSnapshot(String),
    #[error("the stored sample of day {day} (days since 1970) is damaged: {error}")]
    Record { day: i32, error: DecodeError },
    #[error("the stored sample holds no request of the test days")]
    NoTestDays,
    #[error(transparent)]
    Forecast(#[from] ForecastError),
}

/// Backtests every line item of `snapshot` on the stored sample: the model fitted on
/// `days.train` whole UTC days, measured on the `days.test` days after them, the last of which
/// is the day before `now`'s.
pub async fn backtest(
    store: &dyn StatsStore,
    snapshot: &Arc<Snapshot>,
    now: Timestamp,
    days: BacktestDays,
) -> Result<Backtest, BacktestError> {
    if days.train == 0 || days.test == 0 || days.train + days.test > 56 {
        return Err(BacktestError::Days);
    }
    let today = now.as_second().div_euclid(DAY);
    let split_day = today - i64::from(days.test);
    let first_day = split_day - i64::from(days.train);
    let day_number = |day: i64| i32::try_from(day).unwrap_or(i32::MAX);
    let mut sample = Sample::new(days.rate)?;
    let mut tested = false;
    for (day, records) in store
        .samples(day_number(first_day), day_number(today - 1))
        .await?
    {
        let records = SampleRecord::decode_all(&records)
            .map_err(|error| BacktestError::Record { day, error })?;
        tested |= i64::from(day) >= split_day && !records.is_empty();
        for record in &records {
            sample.push(record);
        }
    }
    if !tested {
        return Err(BacktestError::NoTestDays);
    }
    let at = |day: i64| Timestamp::from_second(day * DAY).unwrap_or(Timestamp::UNIX_EPOCH);
    Ok(marquee_forecast::backtest(
        &sample,
        snapshot,
        at(split_day),
        at(today),
    )?)
}

/// [`backtest`] with the latest snapshot published in `snapshots` (a manager's directory).
pub async fn backtest_latest(
    store: &dyn StatsStore,
    snapshots: &Path,
    now: Timestamp,
    days: BacktestDays,
) -> Result<Backtest, BacktestError> {
    let snapshot = SnapshotDir::new(snapshots)
        .load_latest()?
        .ok_or_else(|| BacktestError::NoSnapshot(snapshots.display().to_string()))?;
    backtest(store, &Arc::new(snapshot), now, days).await
}

/// The backtest as a table for people: a line per line item, then the mean errors.
pub fn report(backtest: &Backtest) -> String {
    let percent = |error: f64| format!("{:.1}%", error * 100.0);
    let mut out = String::from(
        "line_item\tmatching\tmatching_error\tdaily_matching_error\tavailable\tavailable_error\tdaily_available_error\n",
    );
    for li in &backtest.line_items {
        let _ = writeln!(
            out,
            "{}\t{:.0}\t{}\t{}\t{:.0}\t{}\t{}",
            li.line_item.0,
            li.matching,
            percent(li.matching_error),
            percent(li.daily_matching_mape),
            li.available,
            percent(li.available_error),
            percent(li.daily_available_mape),
        );
    }
    let _ = writeln!(
        out,
        "overall ({} line items): matching error {}, available error {}",
        backtest.line_items.len(),
        percent(backtest.matching_mape),
        percent(backtest.available_mape),
    );
    out
}
