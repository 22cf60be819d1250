//! The line item form's "Check availability": the line item as typed, forecast by the
//! manager's forecasting service over its flight (from today, at most 90 days), shown beside
//! the form as a chart of daily available and requested impressions and the contending line
//! items by name (another advertiser's unnamed for an advertiser's user, as in the API).

use jiff::{SignedDuration, Timestamp};
use marquee_api::Forecasts;
use marquee_api::forecasts::{MAX_RANGE_DAYS, Outcome, Proposal, Range, for_caller};
use marquee_manager::forecasts::ForecastsApi;
use marquee_model::{LineItem, LineItemId};

use crate::chart::{self, Series};
use crate::guard::grouped;
use crate::{Dashboard, PageError, SignedIn};

/// Days forecast for a line item without an end.
const OPEN_ENDED_DAYS: i64 = 30;

/// The answer as the form's side column shows it.
pub struct ForecastView {
    /// Why there are no figures (too little sample, not ready); none when there are.
    pub message: Option<String>,
    /// `2026-12-01 – 2026-12-31 (UTC)`.
    pub range: String,
    /// Label and value: matching, available, requested, chance of meeting the goal.
    pub facts: Vec<(&'static str, String)>,
    pub chart: Option<String>,
    /// Name (or "another advertiser's line item") and impressions it takes.
    pub contending: Vec<(String, String)>,
}

impl ForecastView {
    fn message(range: String, message: impl Into<String>) -> ForecastView {
        ForecastView {
            message: Some(message.into()),
            range,
            facts: Vec::new(),
            chart: None,
            contending: Vec::new(),
        }
    }
}

/// The range a line item is checked over: its flight from today, `OPEN_ENDED_DAYS` when it
/// has no end, at most `MAX_RANGE_DAYS`.
fn range_of(line_item: &LineItem, now: Timestamp) -> Result<Range, String> {
    let (start, end) = line_item
        .flight()
        .ok_or("the flight cannot be placed in its time zone")?;
    let start = start.max(now);
    let days = |n: i64| SignedDuration::from_hours(24 * n);
    let end = end
        .unwrap_or_else(|| start.saturating_add(days(OPEN_ENDED_DAYS)).unwrap_or(start))
        // Widened to whole days below, a start within a day takes one day more.
        .min(
            start
                .saturating_add(days(MAX_RANGE_DAYS - 1))
                .unwrap_or(start),
        );
    Range::whole_days(start, end, now).map_err(|_| "the flight has ended".to_owned())
}

fn day_text(at: Timestamp) -> String {
    at.strftime("%Y-%m-%d").to_string()
}

/// Forecasts `line_item` as typed (`replaces`: the stored line item it edits, whose links it
/// keeps).
pub async fn availability(
    dashboard: &Dashboard,
    user: &SignedIn,
    replaces: Option<u64>,
    line_item: LineItem,
) -> Result<ForecastView, PageError> {
    let Some(service) = dashboard.manager.forecasts() else {
        return Ok(ForecastView::message(
            String::new(),
            "Forecasts are not served by this process.",
        ));
    };
    let api = ForecastsApi(std::sync::Arc::clone(service));
    let range = match range_of(&line_item, api.now()) {
        Ok(range) => range,
        Err(why) => {
            return Ok(ForecastView::message(
                String::new(),
                format!("Nothing to forecast: {why}."),
            ));
        }
    };
    let last_day = range
        .end
        .checked_sub(SignedDuration::from_hours(24))
        .unwrap_or(range.end);
    let range_text = format!("{} – {} (UTC)", day_text(range.start), day_text(last_day));
    let principal = user.principal();
    let placements = match replaces {
        Some(id) => {
            dashboard
                .store
                .placements_of(LineItemId(id), principal.scope())
                .await?
        }
        None => Vec::new(),
    };
    let proposal = Proposal {
        line_item,
        replaces: replaces.map(LineItemId),
        placements,
        range,
    };
    let answer = match api.availability(proposal).await {
        Ok(Outcome::Ready(answer)) => for_caller(answer, &principal),
        Ok(Outcome::NotEnoughSample { days, needed }) => {
            return Ok(ForecastView::message(
                range_text,
                format!(
                    "Not enough traffic history yet: forecasts need {needed} whole days of sampled ad requests, {days} are stored. Check again in {} days.",
                    needed.saturating_sub(days)
                ),
            ));
        }
        Ok(Outcome::NotReady | Outcome::NotServing) => {
            return Ok(ForecastView::message(
                range_text,
                "The forecaster for the latest changes is being built; check again in a minute.",
            ));
        }
        Err(error) => {
            return Ok(ForecastView::message(range_text, error.to_string()));
        }
    };
    let mut facts = vec![
        ("Matching", grouped(answer.matching)),
        ("Available", grouped(answer.available)),
    ];
    if let Some(requested) = answer.requested {
        facts.push(("Requested", grouped(requested)));
    }
    if let Some(p) = answer.probability {
        facts.push(("Chance of meeting the goal", format!("{:.0}%", p * 100.0)));
    }
    let labels: Vec<String> = answer
        .daily
        .iter()
        .map(|d| d.date.get(5..).unwrap_or(&d.date).to_owned())
        .collect();
    let mut series = vec![Series {
        label: "Available".into(),
        values: answer.daily.iter().map(|d| d.available as f64).collect(),
        dashed: false,
    }];
    if answer.requested.is_some() {
        series.push(Series {
            label: "Requested".into(),
            values: answer
                .daily
                .iter()
                .map(|d| d.requested.unwrap_or(0) as f64)
                .collect(),
            dashed: true,
        });
    }
    let chart = chart::line_chart(
        "Daily available and requested impressions",
        &labels,
        &series,
        "",
    );
    let contending = answer
        .contending
        .iter()
        .map(|c| {
            let name = match (&c.name, c.line_item_id) {
                (Some(name), Some(id)) => format!("{name} (#{id})"),
                (None, Some(id)) => format!("#{id}"),
                _ => "Another advertiser's line item".to_owned(),
            };
            (name, grouped(c.impressions))
        })
        .collect();
    Ok(ForecastView {
        message: None,
        range: range_text,
        facts,
        chart: Some(chart),
        contending,
    })
}
