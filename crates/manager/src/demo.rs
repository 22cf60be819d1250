//! The demo data set: enough for a new user to click through every kind of object, targeting
//! rule and cap. Loaded through the same validation and store calls as the API.

use jiff::civil::date;
use marquee_model::{
    Advertiser, AdvertiserId, Campaign, CampaignId, CapWindow, Channel, Creative, CreativeContent,
    Currency, DeviceType, Format, FrequencyCap, Goal, GoalMetric, HourRange, KeyValues, LineItem,
    LineItemId, Micros, Object, PacingMode, Placement, PlacementId, Price, PricingModel, Publisher,
    PublisherId, RotationMode, Site, SiteId, Size, Status, Targeting, Tier, Weekday,
};
use marquee_store::{ListQuery, Store, StoreError};

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
        .list(marquee_model::Kind::Advertiser, &one)
        .await?
        .is_empty()
        && store
            .list(marquee_model::Kind::Publisher, &one)
            .await?
            .is_empty())
}

async fn add<T: Object>(store: &dyn Store, object: T) -> Result<u64, DemoError> {
    object.validate().map_err(|error| DemoError::Invalid {
        name: object.name().to_owned(),
        error,
    })?;
    Ok(store.create_object(&object, None).await?.meta.id)
}

fn cap(count: u32, window: &str) -> Result<FrequencyCap, DemoError> {
    let window = CapWindow::try_from(window.to_owned()).map_err(|e| DemoError::Invalid {
        name: format!("cap window {window}"),
        error: marquee_model::ValidationError::single("window", e.to_string()),
    })?;
    Ok(FrequencyCap { count, window })
}

fn cpm(micros: i64, currency: Currency) -> Price {
    Price {
        model: PricingModel::Cpm,
        amount_micros: Micros(micros),
        currency,
    }
}

fn image(line_item: u64, name: &str, w: u32, h: u32, landing: &str) -> Creative {
    Creative {
        line_item_id: LineItemId(line_item),
        name: name.into(),
        status: Status::Active,
        size: Some(Size { w, h }),
        landing_url: landing.into(),
        weight: 100,
        content: CreativeContent::Image {
            image_url: format!("https://cdn.example.com/demo/{w}x{h}.png"),
            alt: name.into(),
        },
        categories: Vec::new(),
    }
}

fn html(line_item: u64, name: &str, w: u32, h: u32, landing: &str, headline: &str) -> Creative {
    Creative {
        line_item_id: LineItemId(line_item),
        name: name.into(),
        status: Status::Active,
        size: Some(Size { w, h }),
        landing_url: landing.into(),
        weight: 100,
        content: CreativeContent::Html {
            html: format!(
                "<a href=\"{{{{CLICK_URL}}}}\" target=\"_blank\" style=\"display:block;width:{w}px;height:{h}px;\
                 background:#1d4ed8;color:#fff;font:bold 20px sans-serif;text-align:center;line-height:{h}px\">\
                 {headline}</a><img src=\"{{{{IMPRESSION_URL}}}}\" width=\"1\" height=\"1\" alt=\"\">"
            ),
        },
        categories: Vec::new(),
    }
}

fn line_item(campaign: u64, name: &str, tier: Tier, price: Price) -> LineItem {
    LineItem {
        campaign_id: CampaignId(campaign),
        name: name.into(),
        status: Status::Active,
        start: date(2026, 1, 1).at(0, 0, 0, 0),
        end: Some(date(2027, 12, 31).at(0, 0, 0, 0)),
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
    }
}

/// Loads the demo data set. Call only on an empty database.
pub async fn load(store: &dyn Store) -> Result<DemoSummary, DemoError> {
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
    let placements = [news_top, news_side, news_mobile, sports_top, sports_side];

    // Demand: three advertisers.
    let acme = add(
        store,
        Advertiser {
            name: "Acme Outdoor".into(),
            status: Status::Active,
            currency: eur,
            time_zone: "Europe/Berlin".into(),
            domains: vec!["acme-outdoor.example".into()],
        },
    )
    .await?;
    let globex = add(
        store,
        Advertiser {
            name: "Globex Travel".into(),
            status: Status::Active,
            currency: usd,
            time_zone: "America/New_York".into(),
            domains: vec!["globex-travel.example".into()],
        },
    )
    .await?;
    let house = add(
        store,
        Advertiser {
            name: "Daily Planet (house)".into(),
            status: Status::Active,
            currency: eur,
            time_zone: "Europe/Berlin".into(),
            domains: vec!["dailyplanet.example".into()],
        },
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
    );
    berlin.pacing = PacingMode::Asap;
    berlin.targeting = Some(Targeting::GeoRadius(marquee_model::GeoCircle {
        lat: 52.52,
        lon: 13.405,
        radius_km: 50.0,
    }));
    let berlin = add(store, berlin).await?;

    // House: fills whatever is left, no targeting.
    let house_promo = add(
        store,
        line_item(
            promos,
            "Subscribe to the Daily Planet",
            Tier::House,
            cpm(0, eur),
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

    let links: [(u64, &[u64]); 5] = [
        (boots_mobile, &[news_mobile, news_side]),
        (boots_sports, &[sports_top, sports_side]),
        (trips, &[news_top, news_side, sports_side]),
        (berlin, &[news_side]),
        (house_promo, &placements),
    ];
    for (line_item, placements) in links {
        for placement in placements {
            store
                .link(LineItemId(line_item), PlacementId(*placement))
                .await?;
        }
    }
    Ok(DemoSummary {
        advertisers: 3,
        line_items: 5,
        placements: placements.len(),
    })
}
