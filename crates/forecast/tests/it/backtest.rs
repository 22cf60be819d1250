//! The backtest on a synthetic publisher with weekly seasonality, growth and a holiday.

use marquee_forecast::backtest;

use crate::workload::{Shape, world};

/// 40 line items of every tier over 30 placements, four weeks of training (one of them with a
/// holiday), one week of test, 1% of a million requests a day: each line item matching at
/// least 1% of the traffic is forecast within 10% (broad: at least 10% of the traffic) or 20%
/// (narrow) over the test week; so is each available amount of at least 1% of the traffic.
#[test]
fn forecasts_of_broad_and_narrow_line_items_are_within_their_error_bounds() {
    let shape = Shape {
        placements: 30,
        line_items: 40,
        train_days: 28,
        test_days: 7,
        per_day: 10_000.0,
        rate: 0.01,
    };
    let world = world(shape, 42);
    let result = backtest(&world.sample, &world.snapshot, world.split, world.end).unwrap();
    let (from, to) = (world.split.as_second() / 60, world.end.as_second() / 60);
    let test_records = world
        .sample
        .minutes()
        .filter(|m| (from..to).contains(&i64::from(*m)))
        .count();
    let total = test_records as f64 / shape.rate;
    let mut checked = 0;
    let mut report = String::new();
    // Bounds by size: within 10% at 10% of the traffic or more, 20% from 1%; smaller ones
    // are not checked (their test week holds too few sampled requests to measure them by).
    let bound = |share: f64| match share {
        s if s >= 0.1 => Some(0.10),
        s if s >= 0.01 => Some(0.20),
        _ => None,
    };
    for li in &result.line_items {
        let share = li.matching / total;
        let available_share = li.available / total;
        report.push_str(&format!(
            "{:?}: share {share:.3} / {available_share:.3}, matching {:.3}, available {:.3}, \
             daily {:.3} {:.3}\n",
            li.line_item,
            li.matching_error,
            li.available_error,
            li.daily_matching_mape,
            li.daily_available_mape
        ));
        if let Some(bound) = bound(share) {
            assert!(li.matching_error <= bound, "{report}");
            checked += 1;
        }
        if let Some(bound) = bound(available_share) {
            assert!(li.available_error <= bound, "{report}");
        }
    }
    println!(
        "{report}overall: matching {:.3}, available {:.3}",
        result.matching_mape, result.available_mape
    );
    assert!(checked >= 20, "{checked} checked\n{report}");
}
