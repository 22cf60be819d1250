//! Backtests: forecast from the days before a split, compare with what the days after it held.

use std::sync::Arc;

use jiff::Timestamp;
use marquee_model::LineItemId;
use marquee_pacing::Period;
use marquee_snapshot::Snapshot;

use crate::forecast::Observed;
use crate::{ForecastError, Forecaster, Sample, TrafficModel};

/// How far the forecast of each booked line item was from the test days.
#[derive(Debug, Clone, PartialEq)]
pub struct Backtest {
    pub line_items: Vec<LineItemError>,
    /// Mean over line items of their errors over the test range (mean absolute percentage
    /// error), matching and available.
    pub matching_mape: f64,
    pub available_mape: f64,
}

/// One line item's errors, as |forecast − actual| / actual.
#[derive(Debug, Clone, PartialEq)]
pub struct LineItemError {
    pub line_item: LineItemId,
    /// Matching and available impressions the test days actually held, all days together.
    pub matching: f64,
    pub available: f64,
    /// Errors of the totals over the test range.
    pub matching_error: f64,
    pub available_error: f64,
    /// Mean of the errors of each test day (days whose actual is 0 left out): these include
    /// the sampling noise of a day's actual, which for a line item matching 1% of a 1% sample
    /// of a million requests a day is about 10%.
    pub daily_matching_mape: f64,
    pub daily_available_mape: f64,
}

/// Fits the model to the sample's days before `split` (with every representative, so the
/// errors are the model's, not those of [`crate::MAX_REPRESENTATIVES`]'s thinning), forecasts every booked line item of the
/// snapshot for `[split, end)` (whole UTC hours), and compares with the same allocation run on
/// the sampled requests of `[split, end)`. Line items that matched nothing in the test days
/// are left out.
pub fn backtest(
    sample: &Sample,
    snapshot: &Arc<Snapshot>,
    split: Timestamp,
    end: Timestamp,
) -> Result<Backtest, ForecastError> {
    let model = TrafficModel::fit(sample, split);
    // Every representative: the test days' actual must count every sampled request, and
    // profiles first seen after the split have no weight to be thinned by.
    let forecaster = Forecaster::with_representatives(snapshot, &model, usize::MAX);
    let range = Period { start: split, end };
    let observed = Observed::new(&forecaster, range)?;
    let mut line_items = Vec::new();
    for li in &forecaster.snapshot_data().line_items {
        let (forecast, actual) = observed.forecast(&forecaster, li);
        if actual.matching <= 0.0 {
            continue;
        }
        let error = |f: f64, a: f64| if a > 0.0 { (f - a).abs() / a } else { 0.0 };
        let mape = |f: fn(&crate::Day) -> f64| {
            let errors: Vec<f64> = forecast
                .daily
                .iter()
                .zip(&actual.daily)
                .filter(|(_, a)| f(a) > 0.0)
                .map(|(p, a)| (f(p) - f(a)).abs() / f(a))
                .collect();
            errors.iter().sum::<f64>() / errors.len().max(1) as f64
        };
        line_items.push(LineItemError {
            line_item: li.id,
            matching: actual.matching,
            available: actual.available,
            matching_error: error(forecast.matching, actual.matching),
            available_error: error(forecast.available, actual.available),
            daily_matching_mape: mape(|d| d.matching),
            daily_available_mape: mape(|d| d.available),
        });
    }
    let n = line_items.len().max(1) as f64;
    Ok(Backtest {
        matching_mape: line_items.iter().map(|l| l.matching_error).sum::<f64>() / n,
        available_mape: line_items.iter().map(|l| l.available_error).sum::<f64>() / n,
        line_items,
    })
}
