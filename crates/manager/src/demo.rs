//! The demo data set: enough for a new user to click through every kind of object, targeting
//! rule and cap. Loaded through the same validation, checks across objects (amounts in their
//! advertiser's currency) and store calls as the API.
//!
//! The geo demo comes last: "Bay Area city breaks (geo demo)", a remnant line item of Globex
//! Travel targeting metro 807 (San Francisco-Oakland-San Jose) on the News sidebar rectangle.
//! Without `geo.database`, `marquee serve --demo` locates loopback addresses there (the demo
//! geo database, `marquee_geo::demo`), so a page opened on the server's own machine shows it in
//! the sidebar; a visitor located elsewhere, or one a country header places elsewhere, gets
//! what the sidebar served before. Objects are only ever added at the end of the data set, so
//! the ids of the ones before stay what the README and the tests use.

use jiff::civil::{DateTime, date};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use marquee_api::{CurrencyRuleError, ObjectWrite, check_currency};
use marquee_model::{
    Advertiser, AdvertiserId, Campaign, CampaignId, CapWindow, Channel, Clock, Creative,
    CreativeContent, Currency, DeviceType, Format, FrequencyCap, Goal, GoalMetric, HourRange,
    ImageTag, KeyValues, LineItem, LineItemId, Micros, Object, PacingMode, Placement, PlacementId,
    Price, PricingModel, Publisher, PublisherId, RotationMode, Site, SiteId, Size, Status,
    Targeting, Tier, UntokenedClicks, Weekday,
};
use marquee_store::{Actor, ListQuery, RunWrite, Store, StoreError};

/// What the demo created, for the start-up message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DemoSummary {
    pub advertisers: usize,
    pub line_items: usize,
    pub placements: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("demo object {name:?} is invalid: {error}")]
    Invalid {
        name: String,
        error: marquee_model::ValidationError,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Whether the database holds no advertiser and no publisher at all (archived ones count).
pub async fn is_empty(store: &dyn Store) -> Result<bool, StoreError> {
    let one = ListQuery {
        limit: 1,
        ..ListQuery::default()
    };
    Ok(store
        .list(marquee_model::ObjectKind::Advertiser, &one)
        .await?
        .is_empty()
        && store
            .list(marquee_model::ObjectKind::Publisher, &one)
            .await?
            .is_empty())
}

async fn add<T: Object>(store: &dyn Store, object: T) -> Result<u64, DemoError> {
    let invalid = |error| DemoError::Invalid {
        name: object.name().to_owned(),
        error,
    };
    object.validate().map_err(invalid)?;
    match check_currency(store, &object, ObjectWrite::Create, None).await {
        Ok(()) => {}
        Err(CurrencyRuleError::Broken(error)) => return Err(invalid(error)),
        Err(CurrencyRuleError::Store(error)) => return Err(error.into()),
    }
    Ok(store
        .create_object(&object, None, &Actor::cli())
        .await?
        .meta
        .id)
}

fn cap(count: u32, window: &str) -> Result<FrequencyCap, DemoError> {
    let window = CapWindow::try_from(window.to_owned()).map_err(|e| DemoError::Invalid {
        name: format!("cap window {window}"),
        error: marquee_model::ValidationError::single("window", e.to_string()),
    })?;
    Ok(FrequencyCap { count, window })
}

/// An active advertiser with one domain.
fn advertiser(name: &str, currency: Currency, time_zone: &str, domain: &str) -> Advertiser {
    Advertiser {
        name: name.into(),
        status: Status::Active,
        currency,
        time_zone: time_zone.into(),
        domains: vec![domain.into()],
    }
}

fn cpm(micros: i64, currency: Currency) -> Price {
    Price {
        model: PricingModel::Cpm,
        amount_micros: Micros(micros),
        currency,
    }
}

fn image(line_item: u64, name: &str, w: u32, h: u32, landing: &str) -> Creative {
    let content = CreativeContent::Image {
        image_url: format!("https://cdn.example.com/demo/{w}x{h}.png"),
        alt: name.into(),
    };
    creative(line_item, name, Some(Size { w, h }), landing, content)
}

fn html(line_item: u64, name: &str, w: u32, h: u32, landing: &str, headline: &str) -> Creative {
    let content = CreativeContent::Html {
        html: format!(
            "<a href=\"{{{{CLICK_URL}}}}\" target=\"_blank\" style=\"display:block;width:{w}px;height:{h}px;\
             background:#1d4ed8;color:#fff;font:bold 20px sans-serif;text-align:center;line-height:{h}px\">\
             {headline}</a><img src=\"{{{{IMPRESSION_URL}}}}\" width=\"1\" height=\"1\" alt=\"\">"
        ),
    };
    creative(line_item, name, Some(Size { w, h }), landing, content)
}

/// An active creative of `size` (none: it fits any) showing `content`.
fn creative(
    line_item: u64,
    name: impl Into<String>,
    size: Option<Size>,
    landing: &str,
    content: CreativeContent,
) -> Creative {
    Creative {
        line_item_id: LineItemId(line_item),
        name: name.into(),
        status: Status::Active,
        size,
        landing_url: landing.into(),
        weight: 100,
        content,
        categories: Vec::new(),
        approval: marquee_model::Approval::Approved,
    }
}

/// When every demo line item flies: civil times, read in each line item's own zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Flight {
    start: DateTime,
    end: DateTime,
}

impl Flight {
    /// From the first day of the year of `now` to the last day of the next year: a demo
    /// created on any day serves at once and until the end of the next year (fixed dates
    /// would make a demo created after them serve nothing).
    fn around(now: Timestamp) -> Flight {
        // The year of the day before, in UTC: on New Year's morning (UTC) Chicago and New York
        // are still in the old year, and their line items must be in flight too.
        let year = now
            .to_zoned(TimeZone::UTC)
            .date()
            .saturating_sub(SignedDuration::from_hours(24))
            .year();
        Flight {
            start: date(year, 1, 1).at(0, 0, 0, 0),
            // Capped at the last year a civil date holds.
            end: date(year.saturating_add(1).min(9999), 12, 31).at(0, 0, 0, 0),
        }
    }
}

// A struct literal names every field: the same as the edge tests' line items by necessity (a
// deliberate twin, not shared code).
fn line_item(campaign: u64, name: &str, tier: Tier, price: Price, flight: Flight) -> LineItem {
    LineItem {
        campaign_id: CampaignId(campaign),
        name: name.into(),
        status: Status::Active,
        start: flight.start,
        end: Some(flight.end),
        time_zone: "Europe/Berlin".into(),
        tier,
        weight: 100,
        goal: None,
        pacing: PacingMode::Even,
        price,
        frequency_caps: Vec::new(),
        targeting: None,
        rotation: RotationMode::Even,
        channels: vec![Channel::Direct],
        deals: Vec::new(),
        untokened_clicks: Default::default(),
        competes_with_programmatic: false,
    }
}

/// Loads the demo data set, its flights around the time `clock` tells. Call only on an empty
/// database.
///
/// The body is data: one `add` of a helper's object per row of the catalog, so its calls look
/// alike on purpose.
pub async fn load(store: &dyn Store, clock: &dyn Clock) -> Result<DemoSummary, DemoError> {
    let flight = Flight::around(clock.now());
    let eur = Currency::EUR;
    let usd = Currency::USD;

    // Supply: one publisher, two sites, five placements.
    let planet = add(
        store,
        Publisher {
            name: "Daily Planet Media".into(),
            status: Status::Active,
        },
    )
    .await?;
    let news = add(
        store,
        Site {
            publisher_id: PublisherId(planet),
            name: "Daily Planet News".into(),
            status: Status::Active,
            domain: "news.dailyplanet.example".into(),
        },
    )
    .await?;
    let sports = add(
        store,
        Site {
            publisher_id: PublisherId(planet),
            name: "Daily Planet Sports".into(),
            status: Status::Active,
            domain: "sports.dailyplanet.example".into(),
        },
    )
    .await?;
    let placement = |site: u64, name: &str, sizes: &[(u32, u32)], formats: &[Format]| Placement {
        site_id: SiteId(site),
        name: name.into(),
        status: Status::Active,
        sizes: sizes.iter().map(|&(w, h)| Size { w, h }).collect(),
        formats: formats.to_vec(),
        image_tag: Default::default(),
        programmatic: None,
    };
    let news_top = add(
        store,
        placement(
            news,
            "News leaderboard",
            &[(728, 90), (970, 90)],
            &[Format::Banner],
        ),
    )
    .await?;
    let news_side = add(
        store,
        placement(
            news,
            "News sidebar rectangle",
            &[(300, 250)],
            &[Format::Banner],
        ),
    )
    .await?;
    let news_mobile = add(
        store,
        placement(news, "News mobile banner", &[(320, 50)], &[Format::Banner]),
    )
    .await?;
    let sports_top = add(
        store,
        placement(
            sports,
            "Sports leaderboard",
            &[(728, 90)],
            &[Format::Banner],
        ),
    )
    .await?;
    let sports_side = add(
        store,
        placement(
            sports,
            "Sports rectangle and native",
            &[(300, 250)],
            &[Format::Banner, Format::Native],
        ),
    )
    .await?;
    // The newsletter's slot takes the image tag (an email can run no script): untokened, so
    // turned on here and only here.
    let mut newsletter = placement(
        news,
        "Newsletter rectangle (image tag)",
        &[(300, 250)],
        &[Format::Banner],
    );
    newsletter.image_tag = ImageTag::On;
    let newsletter = add(store, newsletter).await?;
    let placements = [
        news_top,
        news_side,
        news_mobile,
        sports_top,
        sports_side,
        newsletter,
    ];

    // Demand: three advertisers on our own placements (the fourth, buying on exchanges, is
    // `load_exchange_demand`).
    let acme = add(
        store,
        advertiser("Acme Outdoor", eur, "Europe/Berlin", "acme-outdoor.example"),
    )
    .await?;
    let globex = add(
        store,
        advertiser(
            "Globex Travel",
            usd,
            "America/New_York",
            "globex-travel.example",
        ),
    )
    .await?;
    let house = add(
        store,
        advertiser(
            "Daily Planet (house)",
            eur,
            "Europe/Berlin",
            "dailyplanet.example",
        ),
    )
    .await?;

    let campaign = |advertiser: u64, name: &str, caps: Vec<FrequencyCap>| Campaign {
        advertiser_id: AdvertiserId(advertiser),
        name: name.into(),
        status: Status::Active,
        frequency_caps: caps,
        categories: Vec::new(),
        app_bundle: None,
    };
    let winter = add(
        store,
        campaign(acme, "Winter boots 2026", vec![cap(10, "1w")?]),
    )
    .await?;
    let getaways = add(store, campaign(globex, "City getaways", vec![])).await?;
    let promos = add(store, campaign(house, "House promotions", vec![])).await?;

    // Standard line item: DACH, phones and tablets, capped per day and per week.
    let mut boots_mobile = line_item(
        winter,
        "Boots DACH mobile",
        Tier::Standard,
        cpm(4_500_000, eur),
        flight,
    );
    boots_mobile.goal = Some(Goal {
        metric: GoalMetric::Impressions,
        daily: Some(20_000),
        lifetime: Some(1_000_000),
    });
    boots_mobile.frequency_caps = vec![cap(3, "1d")?, cap(8, "1w")?];
    boots_mobile.rotation = RotationMode::Weighted;
    boots_mobile.targeting = Some(Targeting::All(vec![
        Targeting::Country(vec!["DE".into(), "AT".into(), "CH".into()]),
        Targeting::DeviceType(vec![DeviceType::Phone, DeviceType::Tablet]),
    ]));
    let boots_mobile = add(store, boots_mobile).await?;

    // Sponsorship: sports section on weekends, spend goal, front-loaded.
    let mut boots_sports = line_item(
        winter,
        "Boots sports weekend takeover",
        Tier::Sponsorship,
        cpm(9_000_000, eur),
        flight,
    );
    boots_sports.goal = Some(Goal {
        metric: GoalMetric::Spend,
        daily: Some(500_000_000),
        lifetime: None,
    });
    boots_sports.pacing = PacingMode::FrontLoaded;
    boots_sports.targeting = Some(Targeting::All(vec![
        Targeting::Site(vec![SiteId(sports)]),
        Targeting::DayOfWeek(vec![Weekday::Sat, Weekday::Sun]),
    ]));
    let boots_sports = add(store, boots_sports).await?;

    // Standard, CPC: evening travel readers by key-value, outside the EU, one per hour.
    let mut trips = line_item(
        getaways,
        "Evening travel readers",
        Tier::Standard,
        Price {
            model: PricingModel::Cpc,
            amount_micros: Micros(350_000),
            currency: usd,
        },
        flight,
    );
    trips.time_zone = "America/New_York".into();
    trips.goal = Some(Goal {
        metric: GoalMetric::Clicks,
        daily: Some(500),
        lifetime: Some(20_000),
    });
    trips.frequency_caps = vec![cap(1, "1h")?, cap(5, "1w")?];
    trips.rotation = RotationMode::OptimizedCtr;
    trips.targeting = Some(Targeting::All(vec![
        Targeting::Any(vec![
            Targeting::KeyValue(KeyValues {
                key: "section".into(),
                values: vec!["travel".into(), "lifestyle".into()],
            }),
            Targeting::Segment(vec!["frequent-flyer".into()]),
        ]),
        Targeting::Hour(vec![HourRange { from: 18, to: 23 }]),
        Targeting::Not(Box::new(Targeting::Country(vec!["FR".into(), "IT".into()]))),
    ]));
    let trips = add(store, trips).await?;

    // Remnant: ASAP, near Berlin only.
    let mut berlin = line_item(
        getaways,
        "Berlin weekend deals",
        Tier::Remnant,
        cpm(800_000, usd),
        flight,
    );
    berlin.pacing = PacingMode::Asap;
    berlin.targeting = Some(Targeting::GeoRadius(marquee_model::GeoCircle {
        lat: 52.52,
        lon: 13.405,
        radius_km: 50.0,
    }));
    let berlin = add(store, berlin).await?;

    // Standard, CPC: newsletter readers through the image tag; the advertiser accepted being
    // charged for its clicks, which count only after their image was served.
    let mut newsletter_readers = line_item(
        winter,
        "Boots newsletter readers",
        Tier::Standard,
        Price {
            model: PricingModel::Cpc,
            amount_micros: Micros(1_000_000),
            currency: eur,
        },
        flight,
    );
    newsletter_readers.untokened_clicks = UntokenedClicks::Charged;
    let newsletter_readers = add(store, newsletter_readers).await?;

    // House: fills whatever is left, no targeting.
    let house_promo = add(
        store,
        line_item(
            promos,
            "Subscribe to the Daily Planet",
            Tier::House,
            cpm(0, eur),
            flight,
        ),
    )
    .await?;

    let boots_landing = "https://acme-outdoor.example/winter-boots";
    let trips_landing = "https://globex-travel.example/evening-deals";
    let house_landing = "https://news.dailyplanet.example/subscribe";
    let mut creatives = vec![
        image(boots_mobile, "Boots mobile banner", 320, 50, boots_landing),
        html(
            boots_mobile,
            "Boots rectangle (HTML)",
            300,
            250,
            boots_landing,
            "Warm feet, all winter",
        ),
        image(boots_sports, "Boots leaderboard", 728, 90, boots_landing),
        html(
            boots_sports,
            "Boots sports rectangle (HTML)",
            300,
            250,
            boots_landing,
            "Built for the stands",
        ),
        image(trips, "Travel rectangle", 300, 250, trips_landing),
        html(
            trips,
            "Travel leaderboard (HTML)",
            728,
            90,
            trips_landing,
            "Tonight only: city breaks",
        ),
        image(
            newsletter_readers,
            "Boots newsletter rectangle",
            300,
            250,
            boots_landing,
        ),
        image(
            berlin,
            "Berlin rectangle",
            300,
            250,
            "https://globex-travel.example/berlin",
        ),
        html(
            house_promo,
            "Subscribe leaderboard (HTML)",
            728,
            90,
            house_landing,
            "Subscribe for 1 EUR",
        ),
        image(house_promo, "Subscribe rectangle", 300, 250, house_landing),
    ];
    creatives[0].weight = 300;
    for creative in creatives {
        add(store, creative).await?;
    }

    let links: [(u64, &[u64]); 6] = [
        (boots_mobile, &[news_mobile, news_side]),
        (newsletter_readers, &[newsletter]),
        (boots_sports, &[sports_top, sports_side]),
        (trips, &[news_top, news_side, sports_side]),
        (berlin, &[news_side]),
        (house_promo, &placements),
    ];
    for (line_item, placements) in links {
        for placement in placements {
            store
                .link(
                    LineItemId(line_item),
                    PlacementId(*placement),
                    &Actor::cli(),
                )
                .await?;
        }
    }
    let exchange_line_items = load_exchange_demand(store, flight).await?;
    let geo_line_items = load_geo_demo(store, flight, getaways, news_side).await?;
    Ok(DemoSummary {
        advertisers: 4,
        line_items: 6 + exchange_line_items + geo_line_items,
        placements: placements.len(),
    })
}

/// The name of the geo demo's line item.
pub const GEO_DEMO_LINE_ITEM: &str = "Bay Area city breaks (geo demo)";

/// Days of synthetic sampled traffic [`load_sample`] stores: four weeks, what the forecast's
/// traffic model fits best.
pub const SAMPLE_DAYS: i64 = 28;

/// Ad requests a day each demo placement gets, before the weekly pattern, by position in the
/// order [`load`] creates them (leaderboard, sidebar, mobile, sports leaderboard, sports
/// rectangle, newsletter).
const DAILY_REQUESTS: [f64; 6] = [120_000.0, 90_000.0, 80_000.0, 50_000.0, 40_000.0, 8_000.0];
/// Monday to Sunday: quieter weekends.
const WEEKDAY_FACTOR: [f64; 7] = [1.0, 1.03, 1.04, 1.0, 0.94, 0.72, 0.66];

/// A reproducible stream of pseudo-random numbers (SplitMix64): the demo's history is the
/// same on every machine.
struct Stream(u64);

impl Stream {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// One of `choices` by weight.
    fn pick<T: Copy>(&mut self, choices: &[(T, f64)]) -> T {
        let total: f64 = choices.iter().map(|c| c.1).sum();
        let mut x = self.unit() * total;
        for &(choice, weight) in choices {
            if x < weight {
                return choice;
            }
            x -= weight;
        }
        choices[choices.len() - 1].0
    }
}

/// Stores [`SAMPLE_DAYS`] whole UTC days of synthetic sampled ad requests for the demo's
/// placements, before `clock`'s day, as the aggregation stores what edges sample (one row per
/// day in `forecast_sample`): a weekly pattern (quieter weekends, busy afternoons and evenings
/// UTC), slow growth, a little day-to-day noise, and the countries, devices, sections and
/// segments the demo's line items target. `rate` is the share the edges keep
/// (`forecast.sample_rate_ppm`), so that forecasts read the volumes above. The number of
/// records stored.
pub async fn load_sample(
    store: &dyn Store,
    clock: &dyn Clock,
    rate: f64,
) -> Result<usize, DemoError> {
    let query = ListQuery {
        limit: 100,
        ..ListQuery::default()
    };
    let mut placements = store.list_objects::<Placement>(&query).await?;
    placements.sort_by_key(|p| p.meta.id);
    let mut sites = std::collections::HashMap::new();
    for placement in &placements {
        let site_id = placement.object.site_id.0;
        if let std::collections::hash_map::Entry::Vacant(entry) = sites.entry(site_id) {
            entry.insert(store.get_object::<Site>(site_id, None).await?.object.domain);
        }
    }
    let today = clock.now().as_second().div_euclid(86_400);
    let mut stream = Stream(0x5EED_DA7A);
    let countries: [(&str, f64); 7] = [
        ("DE", 30.0),
        ("US", 25.0),
        ("GB", 10.0),
        ("FR", 10.0),
        ("IT", 9.0),
        ("AT", 8.0),
        ("CH", 8.0),
    ];
    let devices = [
        (DeviceType::Desktop, 50.0),
        (DeviceType::Phone, 40.0),
        (DeviceType::Tablet, 10.0),
    ];
    let mut runs = Vec::new();
    let mut stored = 0;
    for day in today - SAMPLE_DAYS..today {
        let weekday = (day + 3).rem_euclid(7) as usize;
        let growth = 1.0 + 0.002 * (day - today + SAMPLE_DAYS) as f64;
        let mut bytes = Vec::new();
        for (p, placement) in placements.iter().enumerate() {
            let base = DAILY_REQUESTS.get(p).copied().unwrap_or(10_000.0);
            let noise = 0.95 + 0.1 * stream.unit();
            let expected = base * WEEKDAY_FACTOR[weekday] * growth * noise * rate;
            let count = (expected + stream.unit()).floor() as u32;
            let domain = sites
                .get(&placement.object.site_id.0)
                .cloned()
                .unwrap_or_default();
            let sports = domain.starts_with("sports");
            // A pool of readers per day, each coming back a few times (for frequency caps).
            let readers = u64::from(count / 3).max(1);
            for _ in 0..count {
                // Afternoon and evening (UTC) carry most of the traffic.
                let hour = loop {
                    let hour = (stream.next() % 24) as i64;
                    let weight = 0.25
                        + 0.75
                            * (((hour as f64 - 15.0) / 24.0 * std::f64::consts::TAU).cos() + 1.0)
                            / 2.0;
                    if stream.unit() < weight {
                        break hour;
                    }
                };
                let minute = day * 1_440 + hour * 60 + (stream.next() % 60) as i64;
                let country = stream.pick(&countries);
                let section = if sports {
                    "sports"
                } else {
                    stream.pick(&[("news", 60.0), ("travel", 25.0), ("lifestyle", 15.0)])
                };
                let device = if p == 2 {
                    DeviceType::Phone
                } else {
                    stream.pick(&devices)
                };
                let record = marquee_forecast::SampleRecord {
                    minute: u32::try_from(minute).unwrap_or(0),
                    user: 1 + (day as u64).wrapping_mul(1_000_003) + stream.next() % readers,
                    placement: PlacementId(placement.meta.id),
                    page_url: Some(format!("https://{domain}/{section}/")),
                    device_type: Some(device),
                    country: Some(country.into()),
                    // Around Berlin, for the geo-radius line item.
                    point: (country == "DE" && stream.unit() < 0.3).then_some((5_252, 1_340)),
                    key_values: vec![("section".into(), section.into())],
                    segments: if stream.unit() < 0.1 {
                        vec!["frequent-flyer".into()]
                    } else {
                        Vec::new()
                    },
                    ..marquee_forecast::SampleRecord::default()
                };
                record.encode(&mut bytes);
                stored += 1;
            }
        }
        runs.push((i32::try_from(day).unwrap_or(i32::MAX), bytes));
    }
    store
        .commit_run(RunWrite {
            samples: runs,
            now: clock.now(),
            ..RunWrite::default()
        })
        .await?;
    Ok(stored)
}

/// The geo demo: a line item of `campaign` (Globex Travel's "City getaways") for visitors in
/// metro 807, the San Francisco Bay Area, on `placement` (the News sidebar rectangle), with a
/// creative of its size. Remnant: it outranks only the house promotion, so the sidebar's
/// standard line items still come first where they match, and the sidebar's other remnant line
/// item ("Berlin weekend deals", a radius around Berlin) never matches the same visitor.
/// Returns the number of line items.
async fn load_geo_demo(
    store: &dyn Store,
    flight: Flight,
    campaign: u64,
    placement: u64,
) -> Result<usize, DemoError> {
    let usd = Currency::USD;
    let mut bay_area = line_item(
        campaign,
        GEO_DEMO_LINE_ITEM,
        Tier::Remnant,
        cpm(1_500_000, usd),
        flight,
    );
    bay_area.time_zone = "America/New_York".into();
    bay_area.pacing = PacingMode::Asap;
    bay_area.targeting = Some(Targeting::Metro(vec![807]));
    let bay_area = add(store, bay_area).await?;
    add(
        store,
        html(
            bay_area,
            "Bay Area rectangle (HTML, geo demo)",
            300,
            250,
            "https://globex-travel.example/bay-area",
            "Bay Area city breaks",
        ),
    )
    .await?;
    store
        .link(LineItemId(bay_area), PlacementId(placement), &Actor::cli())
        .await?;
    Ok(1)
}

/// An advertiser that buys on exchanges only: line items and creatives that bid on the
/// OpenRTB samples in `openrtb/testdata/` (banners of the usual and DOOH sizes, VAST video of 20
/// and 30 seconds, DAAST audio, a native ad with the assets the Native 1.2 samples require, and
/// deals the samples offer). Every URL is https, so secure imps take them too. Returns the
/// number of line items.
async fn load_exchange_demand(store: &dyn Store, flight: Flight) -> Result<usize, DemoError> {
    let usd = Currency::USD;
    let northwind = add(
        store,
        advertiser(
            "Northwind Gadgets",
            usd,
            "America/Chicago",
            "northwind-gadgets.example",
        ),
    )
    .await?;
    let exchange_campaign = |name: &str, categories: &[&str], app: Option<&str>| Campaign {
        advertiser_id: AdvertiserId(northwind),
        name: name.into(),
        status: Status::Active,
        frequency_caps: Vec::new(),
        categories: categories.iter().map(|c| (*c).to_owned()).collect(),
        app_bundle: app.map(str::to_owned),
    };
    // Technology & Computing: none of the samples' bcat lists name it.
    let always_on = add(
        store,
        exchange_campaign("Exchange always-on", &["IAB19"], None),
    )
    .await?;
    let app_install = add(
        store,
        exchange_campaign(
            "Northwind app installs",
            &["IAB19-6"],
            Some("com.northwind.gadgets"),
        ),
    )
    .await?;

    // Open auctions go to the highest bid (remnant); deals come first (standard).
    let add_bidder =
        async |campaign: u64, name: &str, tier: Tier, cpm_micros: i64, deals: &[&str]| {
            let mut li = line_item(campaign, name, tier, cpm(cpm_micros, usd), flight);
            li.time_zone = "America/Chicago".into();
            li.channels = vec![Channel::Exchange];
            li.deals = deals.iter().map(|d| (*d).to_owned()).collect();
            add(store, li).await
        };
    let banners = add_bidder(
        always_on,
        "Open exchange banners",
        Tier::Remnant,
        1_200_000,
        &[],
    )
    .await?;
    let screens = add_bidder(always_on, "DOOH screens", Tier::Remnant, 8_000_000, &[]).await?;
    let video = add_bidder(always_on, "Video pre-roll", Tier::Remnant, 6_000_000, &[]).await?;
    let video_deals = add_bidder(
        always_on,
        "Video deals",
        Tier::Standard,
        7_000_000,
        &["V123", "1452f.eadb4.7aaa"],
    )
    .await?;
    let audio = add_bidder(always_on, "Audio spots", Tier::Remnant, 3_000_000, &[]).await?;
    let banner_deals = add_bidder(
        always_on,
        "Agency private marketplace",
        Tier::Standard,
        3_000_000,
        &["AB-Agency1-0001", "XY-Agency2-0001"],
    )
    .await?;
    let native = add_bidder(
        app_install,
        "Native app installs",
        Tier::Remnant,
        2_500_000,
        &[],
    )
    .await?;

    let landing = "https://northwind-gadgets.example/spring";
    let mut creatives = Vec::new();
    for (w, h) in [(300, 250), (728, 90), (320, 50), (160, 600)] {
        creatives.push(image(banners, &format!("Northwind {w}x{h}"), w, h, landing));
    }
    for (w, h) in [(1080, 1920), (720, 1366)] {
        creatives.push(image(
            screens,
            &format!("Northwind screen {w}x{h}"),
            w,
            h,
            landing,
        ));
    }
    for line_item in [video, video_deals] {
        for seconds in [20, 30] {
            creatives.push(vast_video(line_item, seconds, landing));
        }
    }
    creatives.push(daast_audio(audio, 30, landing));
    creatives.push(image(
        banner_deals,
        "Northwind deal rectangle",
        300,
        250,
        landing,
    ));
    creatives.push(creative(
        native,
        "Northwind app native",
        None,
        "https://northwind-gadgets.example/app",
        CreativeContent::Native {
            title: "The Northwind app: every gadget, one tap away".into(),
            body: "Track orders, get deals first and pay in one tap. Free on iOS and Android."
                .into(),
            sponsored_by: "Northwind Gadgets".into(),
            image_url: Some("https://cdn.example.com/demo/northwind-app-1200x627.png".into()),
            icon_url: Some("https://cdn.example.com/demo/northwind-icon-80x80.png".into()),
            call_to_action: Some("Install".into()),
            image_size: Some(Size { w: 1200, h: 627 }),
            icon_size: Some(Size { w: 80, h: 80 }),
        },
    ));
    for creative in creatives {
        add(store, creative).await?;
    }
    Ok(7)
}

/// An inline VAST 3.0 video ad with one MP4 file.
fn vast_video(line_item: u64, seconds: u32, landing: &str) -> Creative {
    let xml = format!(
        "<VAST version=\"3.0\"><Ad id=\"northwind-{seconds}s\"><InLine>\
         <AdSystem>Marquee demo</AdSystem><AdTitle>Northwind {seconds} s</AdTitle>\
         <Creatives><Creative><Linear><Duration>00:00:{seconds:02}</Duration>\
         <VideoClicks><ClickThrough><![CDATA[{landing}]]></ClickThrough></VideoClicks>\
         <MediaFiles><MediaFile delivery=\"progressive\" type=\"video/mp4\" width=\"1280\" \
         height=\"720\"><![CDATA[https://cdn.example.com/demo/northwind-{seconds}s.mp4]]>\
         </MediaFile></MediaFiles></Linear></Creative></Creatives></InLine></Ad></VAST>"
    );
    let name = format!("Northwind video {seconds} s");
    inline_linear(line_item, name, landing, xml, seconds, "video/mp4", 3)
}

/// An inline DAAST 1.0 audio ad with one MP4 audio file.
fn daast_audio(line_item: u64, seconds: u32, landing: &str) -> Creative {
    let xml = format!(
        "<DAAST version=\"1.0\"><Ad id=\"northwind-audio-{seconds}s\"><InLine>\
         <AdSystem>Marquee demo</AdSystem><AdTitle>Northwind audio {seconds} s</AdTitle>\
         <Category>IAB19</Category><Creatives><Creative><Linear>\
         <Duration>00:00:{seconds:02}</Duration><AudioInteractions><ClickThrough>\
         <![CDATA[{landing}]]></ClickThrough></AudioInteractions><MediaFiles>\
         <MediaFile delivery=\"progressive\" type=\"audio/mp4\" bitrate=\"128\">\
         <![CDATA[https://cdn.example.com/demo/northwind-{seconds}s.m4a]]></MediaFile>\
         </MediaFiles></Linear></Creative></Creatives></InLine></Ad></DAAST>"
    );
    let name = format!("Northwind audio {seconds} s");
    inline_linear(line_item, name, landing, xml, seconds, "audio/mp4", 9)
}

/// A creative carrying inline VAST-family XML (VAST video or DAAST audio) of one media file.
fn inline_linear(
    line_item: u64,
    name: String,
    landing: &str,
    xml: String,
    seconds: u32,
    mime: &str,
    protocol: u16,
) -> Creative {
    let content = CreativeContent::Vast {
        xml: Some(xml),
        url: None,
        duration_secs: seconds,
        mimes: vec![mime.to_owned()],
        protocols: vec![protocol],
    };
    creative(line_item, name, None, landing, content)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use marquee_model::ManualClock;
    use marquee_store::SqliteStore;

    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn at_the_manager_tests_clock_the_flight_is_the_one_the_demo_always_had() {
        // The manager's tests load the demo at 2026-12-01; their figures assume these dates.
        assert_eq!(
            Flight::around(at("2026-12-01T12:00:00Z")),
            Flight {
                start: date(2026, 1, 1).at(0, 0, 0, 0),
                end: date(2027, 12, 31).at(0, 0, 0, 0),
            }
        );
    }

    #[test]
    fn from_any_hour_every_zone_of_the_demo_is_in_flight_for_most_of_a_year() {
        let zones = ["Europe/Berlin", "America/New_York", "America/Chicago"]
            .map(|name| TimeZone::get(name).unwrap());
        let mut now = at("2025-12-29T00:00:00Z");
        while now < at("2034-01-04T00:00:00Z") {
            let flight = Flight::around(now);
            for zone in &zones {
                let start = flight.start.to_zoned(zone.clone()).unwrap().timestamp();
                let end = flight.end.to_zoned(zone.clone()).unwrap().timestamp();
                assert!(start <= now, "{now}: {flight:?} not begun in {zone:?}");
                assert!(
                    end.duration_since(now) >= SignedDuration::from_hours(363 * 24),
                    "{now}: {flight:?} ends too soon in {zone:?}"
                );
            }
            now += SignedDuration::from_hours(1);
        }
    }

    /// The geo demo is the last line item and the last creative, so every object of the data
    /// set before it kept its id; it targets metro 807 only, on the News sidebar rectangle only.
    #[tokio::test]
    async fn the_geo_demo_comes_last_targeting_metro_807_on_the_news_sidebar() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(at("2026-12-01T12:00:00Z")));
        let store = SqliteStore::open(&dir.path().join("m.db"), clock.clone()).unwrap();
        let summary = load(&store, &*clock).await.unwrap();
        let catalog = store.catalog().await.unwrap();
        assert_eq!(summary.line_items, 14);

        let geo = catalog
            .line_items
            .iter()
            .max_by_key(|li| li.meta.id)
            .unwrap();
        assert_eq!(
            (geo.meta.id, geo.object.name.as_str()),
            (14, GEO_DEMO_LINE_ITEM)
        );
        assert_eq!(geo.object.tier, Tier::Remnant);
        assert_eq!(geo.object.channels, [Channel::Direct]);
        assert_eq!(geo.object.targeting, Some(Targeting::Metro(vec![807])));
        let advertiser = |campaign: CampaignId| {
            let campaign = catalog
                .campaigns
                .iter()
                .find(|c| c.meta.id == campaign.0)
                .unwrap();
            catalog
                .advertisers
                .iter()
                .find(|a| a.meta.id == campaign.object.advertiser_id.0)
                .unwrap()
        };
        let globex = advertiser(geo.object.campaign_id);
        assert_eq!(globex.object.name, "Globex Travel");
        assert_eq!(globex.object.currency, Currency::USD);

        let last = catalog.creatives.iter().max_by_key(|c| c.meta.id).unwrap();
        assert_eq!(last.object.line_item_id, LineItemId(geo.meta.id));
        assert_eq!(last.object.size, Some(Size { w: 300, h: 250 }));
        assert_eq!(
            catalog
                .creatives
                .iter()
                .filter(|c| c.object.line_item_id == LineItemId(geo.meta.id))
                .count(),
            1
        );

        let sidebar = catalog
            .placements
            .iter()
            .find(|p| p.object.name == "News sidebar rectangle")
            .unwrap();
        let linked: Vec<u64> = catalog
            .links
            .iter()
            .filter(|(li, _)| li.0 == geo.meta.id)
            .map(|(_, p)| p.0)
            .collect();
        assert_eq!(linked, [sidebar.meta.id]);
        assert!(sidebar.object.sizes.contains(&Size { w: 300, h: 250 }));
    }

    #[tokio::test]
    async fn a_demo_loaded_years_later_flies_around_its_clock() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Arc::new(ManualClock::new(at("2031-06-15T08:00:00Z")));
        let store = SqliteStore::open(&dir.path().join("m.db"), clock.clone()).unwrap();
        let summary = load(&store, &*clock).await.unwrap();
        let catalog = store.catalog().await.unwrap();
        assert_eq!(catalog.line_items.len(), summary.line_items);
        for li in &catalog.line_items {
            assert_eq!(li.object.start, date(2031, 1, 1).at(0, 0, 0, 0));
            assert_eq!(li.object.end, Some(date(2032, 12, 31).at(0, 0, 0, 0)));
        }
    }
}
