//! Availability, contention and delivery on a small hand-made market: one placement, 4,000
//! sampled requests a day spread evenly over the hours, half from Germany and half from
//! France, at a 1% rate (400,000 requests a day).

use std::sync::Arc;

use jiff::Timestamp;
use marquee_forecast::{Forecaster, Sample, SampleRecord, Status, TrafficModel};
use marquee_model::{
    Goal, GoalMetric, HourRange, LineItemId, PlacementId, PublisherId, SiteId, Size, Targeting,
    Tier,
};
use marquee_pacing::Period;
use marquee_snapshot::{
    LineItemEntry, PlacementEntry, PublisherEntry, SiteEntry, Snapshot, SnapshotData,
};

use crate::workload::{Shape, snapshot_line_item, split};

const PER_DAY: f64 = 400_000.0;

fn shape() -> Shape {
    Shape {
        placements: 1,
        line_items: 0,
        train_days: 28,
        test_days: 0,
        per_day: 4_000.0,
        rate: 0.01,
    }
}

fn sample() -> Sample {
    let mut sample = Sample::new(0.01).unwrap();
    let first = split().as_second() / 60 - 28 * 1_440;
    for i in 0..28 * 4_000u32 {
        let minute = first + i64::from(i) * 28 * 1_440 / (28 * 4_000);
        sample.push(&SampleRecord {
            minute: minute as u32,
            user: u64::from(i % 50_000) + 1,
            placement: PlacementId(1),
            country: Some(if i % 2 == 0 { "DE" } else { "FR" }.to_owned()),
            ..SampleRecord::default()
        });
    }
    sample
}

fn line_item(id: u64, tier: Tier, weight: u32, targeting: Option<Targeting>) -> LineItemEntry {
    LineItemEntry {
        id: LineItemId(id),
        tier,
        weight,
        targeting,
        ..snapshot_line_item(shape())
    }
}

fn germany() -> Option<Targeting> {
    Some(Targeting::Country(vec!["DE".to_owned()]))
}

fn daily(amount: u64) -> Option<Goal> {
    Some(Goal {
        metric: GoalMetric::Impressions,
        daily: Some(amount),
        lifetime: None,
    })
}

fn snapshot(line_items: Vec<LineItemEntry>) -> Arc<Snapshot> {
    Arc::new(Snapshot {
        version: 1,
        built_at: split(),
        data: SnapshotData {
            line_items,
            publishers: vec![PublisherEntry { id: PublisherId(1) }],
            sites: vec![SiteEntry {
                id: SiteId(1),
                publisher_id: PublisherId(1),
                domain: "news.example.com".to_owned(),
            }],
            placements: vec![PlacementEntry {
                id: PlacementId(1),
                site_id: SiteId(1),
                sizes: vec![Size { w: 300, h: 250 }],
                formats: Vec::new(),
                image_tag: Default::default(),
                programmatic: None,
            }],
            ..SnapshotData::default()
        },
    })
}

fn week() -> Period {
    Period {
        start: split(),
        end: Timestamp::from_second(split().as_second() + 7 * 86_400).unwrap(),
    }
}

fn near(got: f64, expected: f64) -> bool {
    (got - expected).abs() <= 0.03 * expected.max(1.0)
}

#[test]
fn a_higher_tier_without_a_goal_leaves_nothing_and_is_named_as_contending() {
    let sample = sample();
    let model = TrafficModel::fit(&sample, split());
    let booked = snapshot(vec![line_item(1, Tier::Sponsorship, 1, germany())]);
    let forecaster = Forecaster::new(&booked, &model);
    let proposal = line_item(9, Tier::Standard, 1, germany());
    let answer = forecaster.availability(&proposal, week()).unwrap();
    assert!(near(answer.matching, 7.0 * PER_DAY / 2.0), "{answer:?}");
    assert!(answer.available < 1.0, "{answer:?}");
    assert_eq!(answer.contending.len(), 1);
    assert_eq!(answer.contending[0].line_item, LineItemId(1));
    assert!(near(answer.contending[0].impressions, answer.matching));
    // France is untouched.
    let france = line_item(
        9,
        Tier::Standard,
        1,
        Some(Targeting::Country(vec!["FR".into()])),
    );
    let answer = forecaster.availability(&france, week()).unwrap();
    assert!(near(answer.available, answer.matching), "{answer:?}");
    assert!(answer.contending.is_empty());
}

#[test]
fn equal_priorities_share_by_weight_and_a_satisfied_goal_leaves_the_rest() {
    let sample = sample();
    let model = TrafficModel::fit(&sample, split());
    let proposal = line_item(9, Tier::Standard, 3, germany());
    let unlimited = snapshot(vec![line_item(1, Tier::Standard, 1, germany())]);
    let answer = Forecaster::new(&unlimited, &model)
        .availability(&proposal, week())
        .unwrap();
    assert!(near(answer.available, 0.75 * answer.matching), "{answer:?}");
    // A booked line item wanting 20,000 a day of Germany's 200,000 leaves the other 180,000.
    let goal = LineItemEntry {
        goal: daily(20_000),
        ..line_item(1, Tier::Standard, 1, germany())
    };
    let answer = Forecaster::new(&snapshot(vec![goal]), &model)
        .availability(&proposal, week())
        .unwrap();
    assert!(
        near(answer.available, answer.matching - 7.0 * 20_000.0),
        "{answer:?}"
    );
}

#[test]
fn booking_a_goal_takes_from_lower_priorities_and_the_impact_says_how_much() {
    let sample = sample();
    let model = TrafficModel::fit(&sample, split());
    let house = line_item(1, Tier::House, 1, None);
    let forecaster = Forecaster::new(&snapshot(vec![house]), &model);
    let proposal = LineItemEntry {
        goal: daily(50_000),
        ..line_item(9, Tier::Standard, 1, germany())
    };
    let answer = forecaster.availability(&proposal, week()).unwrap();
    assert_eq!(answer.goal, Some(7.0 * 50_000.0));
    assert!(answer.probability.unwrap() > 0.99, "{answer:?}");
    assert_eq!(answer.impact.len(), 1);
    assert!(
        near(answer.impact[0].impressions, 7.0 * 50_000.0),
        "{answer:?}"
    );
}

#[test]
fn hour_targeting_matches_its_hours_only() {
    let sample = sample();
    let model = TrafficModel::fit(&sample, split());
    let forecaster = Forecaster::new(&snapshot(Vec::new()), &model);
    let mornings = Targeting::All(vec![
        Targeting::Country(vec!["DE".to_owned()]),
        Targeting::Hour(vec![HourRange { from: 0, to: 6 }]),
    ]);
    let answer = forecaster
        .availability(&line_item(9, Tier::Standard, 1, Some(mornings)), week())
        .unwrap();
    assert!(
        near(answer.matching, 7.0 * PER_DAY / 2.0 / 4.0),
        "{answer:?}"
    );
}

#[test]
fn delivery_outlook_follows_the_goal_against_what_is_available() {
    let sample = sample();
    let model = TrafficModel::fit(&sample, split());
    let small = LineItemEntry {
        goal: daily(50_000),
        ..line_item(1, Tier::Standard, 1, germany())
    };
    let large = LineItemEntry {
        goal: daily(300_000),
        ..line_item(
            2,
            Tier::Standard,
            1,
            Some(Targeting::Country(vec!["FR".into()])),
        )
    };
    let forecaster = Forecaster::new(&snapshot(vec![small, large]), &model);
    let on_track = forecaster.delivery(LineItemId(1), week()).unwrap();
    assert_eq!(on_track.status, Status::OnTrack, "{on_track:?}");
    assert_eq!(on_track.shortfall, 0.0);
    let short = forecaster.delivery(LineItemId(2), week()).unwrap();
    assert_eq!(short.status, Status::Shortfall, "{short:?}");
    assert!(
        near(short.shortfall, 7.0 * (300_000.0 - PER_DAY / 2.0)),
        "{short:?}"
    );
    assert!(forecaster.delivery(LineItemId(7), week()).is_err());
}
