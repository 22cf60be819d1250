#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Budgets that end on their amount: the simulation of `sim` run through the scenarios the
//! multi-process test (`crates/marquee/tests/it/budgets.rs`) measures on real processes — billing
//! events reaching the deciding edge, always another one, or one at random; an edge restarted,
//! an edge cut off and the manager restarted as the goal runs out — and through each pacing
//! mode and goal metric on one to eight edges. Every goal of at least 1,000 impressions (or
//! their spend, or 1,000 clicks) ends within ±0.5% of its amount. Run with `--nocapture` for
//! the table `docs/pacing-and-budgets.md` quotes.

use crate::sim;

use marquee_model::{GoalMetric, PacingMode};
use marquee_pacing::FLIGHT_PERIOD;
use sim::{Charging, Outcome, Routing, Scenario, run};

/// One local day in Berlin (no clock change).
const DAY_START: &str = "2026-10-23T22:00:00Z";
const DAY_END: &str = "2026-10-24T22:00:00Z";
/// The local date of that day, the daily budget's period key.
const DAY: i64 = 20_261_024;
const TOLERANCE: f64 = 0.005;

/// A daily goal of `amount` on `edges` edges sharing the traffic evenly.
fn daily(metric: GoalMetric, mode: PacingMode, edges: usize, amount: u64) -> Scenario {
    let mut scenario = Scenario::new("Europe/Berlin", DAY_START, DAY_END, mode);
    scenario.metric = metric;
    scenario.daily = Some(amount);
    scenario.edge_shares = vec![1.0 / edges as f64; edges];
    scenario.routing = Routing::Random;
    match metric {
        GoalMetric::Impressions => {
            scenario.cost = 1;
        }
        GoalMetric::Spend => {
            // A CPM of 2.00: 2,000 micros an impression.
            scenario.cost = 2_000;
        }
        GoalMetric::Clicks => {
            // Clicks are charged as they come, 2% of ads clicked up to 30 s after.
            scenario.cost = 1;
            scenario.charging = Charging::OnBilling;
            scenario.fill = 0.02;
            scenario.max_billing_delay = 30;
        }
    }
    scenario
}

/// Runs a scenario and prints its line of the table.
fn delivered(name: &str, scenario: &Scenario, period: i64) -> (Outcome, f64) {
    let outcome = run(scenario);
    let ratio = outcome.delivered_ratio(period);
    eprintln!(
        "| {name} | {} | {:.2}% | returned {} |",
        outcome.limits[&period],
        (ratio - 1.0) * 100.0,
        outcome.returned.get(&period).copied().unwrap_or(0)
    );
    (outcome, ratio)
}

fn assert_within(name: &str, ratio: f64, tolerance: f64) {
    assert!(
        (ratio - 1.0).abs() <= tolerance,
        "{name}: delivered {:.3}% of the goal",
        ratio * 100.0
    );
}

/// The second at which an undisturbed run of `scenario` has billed `share` of its daily goal.
fn when_billed(scenario: &Scenario, share: f64) -> i64 {
    let outcome = run(scenario);
    let goal = scenario.daily.unwrap() as f64;
    let minute = outcome
        .minutes
        .iter()
        .position(|m| m.billed_today as f64 >= goal * share)
        .unwrap();
    minute as i64 * 60
}

#[test]
fn billing_events_may_reach_any_edge() {
    for (name, routing) in [
        ("beacons on the deciding edge", Routing::Deciding),
        ("beacons always on another edge", Routing::Other),
        ("beacons on a random edge", Routing::Random),
    ] {
        let mut scenario = daily(GoalMetric::Impressions, PacingMode::Asap, 3, 20_000);
        scenario.routing = routing;
        let (_, ratio) = delivered(name, &scenario, DAY);
        assert_within(name, ratio, TOLERANCE);
    }
}

#[test]
fn faults_as_the_goal_runs_out() {
    let base = daily(GoalMetric::Impressions, PacingMode::Asap, 3, 20_000);
    let at = when_billed(&base, 0.95);

    let mut restarted = base.clone();
    restarted.restarts = vec![(0, at)];
    let name = "an edge restarted as the goal runs out";
    let (outcome, ratio) = delivered(name, &restarted, DAY);
    assert!(outcome.expiries >= 1, "its lease was reclaimed");
    assert_within(name, ratio, TOLERANCE);

    let mut cut_off = base.clone();
    cut_off.partitions = vec![(0, at, at + 120)];
    let name = "an edge cut off for 2 minutes as the goal runs out";
    let (_, ratio) = delivered(name, &cut_off, DAY);
    assert_within(name, ratio, TOLERANCE);

    let mut manager = base.clone();
    manager.manager_restarts = vec![(at, 30)];
    let name = "the manager down 30 s and restarted as the goal runs out";
    let (_, ratio) = delivered(name, &manager, DAY);
    assert_within(name, ratio, TOLERANCE);
}

#[test]
fn every_mode_and_metric_ends_on_its_amount() {
    let metrics = [
        ("impressions", GoalMetric::Impressions, 20_000),
        ("spend", GoalMetric::Spend, 40_000_000),
        ("clicks", GoalMetric::Clicks, 2_000),
    ];
    for (mode_name, mode) in [("asap", PacingMode::Asap), ("even", PacingMode::Even)] {
        for (metric_name, metric, amount) in metrics {
            for edges in [1, 8] {
                let scenario = daily(metric, mode, edges, amount);
                let name = format!("{mode_name}, daily {metric_name}, {edges} edges");
                let (_, ratio) = delivered(&name, &scenario, DAY);
                assert_within(&name, ratio, TOLERANCE);
            }
        }
    }
    // Front-loaded is a lifetime curve: a two-day flight.
    for (metric_name, metric, amount) in metrics {
        let mut scenario = daily(metric, PacingMode::FrontLoaded, 3, amount);
        scenario.end = "2026-10-25T23:00:00Z".parse().unwrap();
        scenario.daily = None;
        scenario.lifetime = Some(2 * amount);
        let name = format!("front-loaded, lifetime {metric_name}, 3 edges");
        let (_, ratio) = delivered(&name, &scenario, FLIGHT_PERIOD);
        assert_within(&name, ratio, TOLERANCE);
    }
}

/// Below 1,000 impressions a few events are more than 0.5%: the bound stated for such goals is
/// ±2 events (the reservations racing for the last unit on two cores), checked here for 100
/// impressions on three edges.
#[test]
fn small_goals_end_within_their_stated_bound() {
    let scenario = daily(GoalMetric::Impressions, PacingMode::Asap, 3, 100);
    let (outcome, _) = delivered("asap, daily 100 impressions, 3 edges", &scenario, DAY);
    let billed = outcome.billed_by_day[&DAY];
    assert!((98..=102).contains(&billed), "{billed}");
}
