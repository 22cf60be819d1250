//! Small hand-made catalogs.

use jiff::Timestamp;
use jiff::civil::DateTime;
use marquee_model::{
    Advertiser, AdvertiserId, Campaign, CampaignId, CapWindow, Catalog, Channel, Creative,
    CreativeContent, Currency, DeviceType, Format, FrequencyCap, GeoCircle, Goal, GoalMetric,
    HourRange, KeyValues, LineItem, LineItemId, Meta, Micros, PacingMode, Placement, PlacementId,
    Price, PricingModel, Publisher, PublisherId, RotationMode, Site, SiteId, Size, Status, Stored,
    Targeting, Tier, Weekday,
};

/// The build time every test compiles at unless it says otherwise.
pub fn now() -> Timestamp {
    "2026-11-21T12:00:00Z".parse().expect("valid timestamp")
}

pub fn civil(s: &str) -> DateTime {
    s.parse().expect("valid civil date-time")
}

pub fn stored<T>(id: u64, object: T) -> Stored<T> {
    Stored {
        meta: Meta {
            id,
            version: 1,
            created_at: now(),
            updated_at: now(),
        },
        object,
    }
}

pub fn advertiser(id: u64) -> Stored<Advertiser> {
    stored(
        id,
        Advertiser {
            name: format!("advertiser {id}"),
            status: Status::Active,
            currency: Currency::EUR,
            time_zone: "Europe/Berlin".into(),
            domains: vec![format!("brand{id}.example.com")],
        },
    )
}

pub fn campaign(id: u64, advertiser: u64) -> Stored<Campaign> {
    stored(
        id,
        Campaign {
            advertiser_id: AdvertiserId(advertiser),
            name: format!("campaign {id}"),
            status: Status::Active,
            frequency_caps: vec![cap(3, "1d")],
            categories: vec!["IAB2".into()],
            app_bundle: None,
        },
    )
}

pub fn cap(count: u32, window: &str) -> FrequencyCap {
    FrequencyCap {
        count,
        window: CapWindow::try_from(window.to_owned()).expect("valid window"),
    }
}

/// A line item flying from 2026-11-01 to 2026-12-01, Berlin time.
pub fn line_item(id: u64, campaign: u64) -> Stored<LineItem> {
    stored(
        id,
        LineItem {
            campaign_id: CampaignId(campaign),
            name: format!("line item {id}"),
            status: Status::Active,
            start: civil("2026-11-01T00:00:00"),
            end: Some(civil("2026-12-01T00:00:00")),
            time_zone: "Europe/Berlin".into(),
            tier: Tier::Standard,
            weight: 100,
            goal: Some(Goal {
                metric: GoalMetric::Impressions,
                daily: Some(10_000),
                lifetime: None,
            }),
            pacing: PacingMode::Even,
            price: Price {
                model: PricingModel::Cpm,
                amount_micros: Micros(2_500_000),
                currency: Currency::EUR,
            },
            frequency_caps: vec![],
            targeting: Some(Targeting::Country(vec!["DE".into()])),
            rotation: RotationMode::Even,
            channels: vec![Channel::Direct],
            deals: Vec::new(),
            untokened_clicks: Default::default(),
            competes_with_programmatic: false,
        },
    )
}

pub fn creative(id: u64, line_item: u64) -> Stored<Creative> {
    stored(
        id,
        Creative {
            line_item_id: LineItemId(line_item),
            name: format!("creative {id}"),
            status: Status::Active,
            size: Some(Size { w: 300, h: 250 }),
            landing_url: "https://brand.example.com/".into(),
            weight: 100,
            content: CreativeContent::Image {
                image_url: format!("https://cdn.example.com/{id}.png"),
                alt: String::new(),
            },
            categories: Vec::new(),
            approval: marquee_model::Approval::Approved,
        },
    )
}

pub fn publisher(id: u64) -> Stored<Publisher> {
    stored(
        id,
        Publisher {
            name: format!("publisher {id}"),
            status: Status::Active,
        },
    )
}

pub fn site(id: u64, publisher: u64) -> Stored<Site> {
    stored(
        id,
        Site {
            publisher_id: PublisherId(publisher),
            name: format!("site {id}"),
            status: Status::Active,
            domain: format!("site{id}.example.com"),
        },
    )
}

pub fn placement(id: u64, site: u64) -> Stored<Placement> {
    stored(
        id,
        Placement {
            site_id: SiteId(site),
            name: format!("placement {id}"),
            status: Status::Active,
            sizes: vec![Size { w: 300, h: 250 }],
            formats: vec![Format::Banner],
            image_tag: Default::default(),
            programmatic: None,
        },
    )
}

pub fn link(line_item: u64, placement: u64) -> (LineItemId, PlacementId) {
    (LineItemId(line_item), PlacementId(placement))
}

/// One complete chain on each side: advertiser 1 → campaign 10 → line item 100 → creative 1000;
/// publisher 1 → site 10 → placement 100; line item 100 linked to placement 100.
pub fn minimal() -> Catalog {
    Catalog {
        version: 7,
        advertisers: vec![advertiser(1)],
        campaigns: vec![campaign(10, 1)],
        line_items: vec![line_item(100, 10)],
        creatives: vec![creative(1000, 100)],
        publishers: vec![publisher(1)],
        sites: vec![site(10, 1)],
        placements: vec![placement(100, 10)],
        links: vec![link(100, 100)],
        assignments: Vec::new(),
    }
}

/// Every content type and targeting attribute, to exercise every part of the encoding.
pub fn rich() -> Catalog {
    let mut catalog = minimal();
    let mut li = line_item(101, 10);
    li.object.end = None;
    li.object.tier = Tier::Sponsorship;
    li.object.pacing = PacingMode::FrontLoaded;
    li.object.rotation = RotationMode::OptimizedCtr;
    li.object.frequency_caps = vec![cap(1, "30m"), cap(5, "2w")];
    li.object.goal = Some(Goal {
        metric: GoalMetric::Spend,
        daily: Some(1_000_000),
        lifetime: Some(30_000_000),
    });
    li.object.price = Price {
        model: PricingModel::Cpc,
        amount_micros: Micros(-1),
        currency: Currency::USD,
    };
    li.object.targeting = Some(Targeting::All(vec![
        Targeting::Any(vec![
            Targeting::Placement(vec![PlacementId(100)]),
            Targeting::Site(vec![SiteId(10)]),
            Targeting::Domain(vec!["news.example.com".into()]),
            Targeting::PageUrl(vec!["https://news.example.com/sport/".into()]),
        ]),
        Targeting::Not(Box::new(Targeting::Region(vec!["DE-BY".into()]))),
        Targeting::City(vec!["Berlin".into(), "Köln".into()]),
        Targeting::GeoRadius(GeoCircle {
            lat: 52.52,
            lon: -13.405,
            radius_km: 50.5,
        }),
        Targeting::DeviceType(vec![DeviceType::Phone, DeviceType::Ctv]),
        Targeting::Os(vec!["iOS".into()]),
        Targeting::Browser(vec!["Firefox".into()]),
        Targeting::Language(vec!["de".into()]),
        Targeting::DayOfWeek(vec![Weekday::Mon, Weekday::Sun]),
        Targeting::Hour(vec![HourRange { from: 8, to: 20 }]),
        Targeting::KeyValue(KeyValues {
            key: "section".into(),
            values: vec!["sport".into()],
        }),
        Targeting::Segment(vec!["s1".into()]),
        Targeting::Ip(vec![
            "10.0.0.0/8".parse().expect("valid net"),
            "2001:db8::/32".parse().expect("valid net"),
        ]),
        Targeting::Size(vec![Size { w: 728, h: 90 }]),
        Targeting::Format(vec![Format::Video, Format::Audio]),
    ]));
    li.object.channels = vec![Channel::Direct, Channel::Exchange];
    li.object.deals = vec!["AB-Agency1-0001".into()];
    catalog.line_items.push(li);
    catalog.campaigns[0].object.app_bundle = Some("com.example.app".into());

    let contents = [
        CreativeContent::Html {
            html: "<a href=\"{{CLICK_URL}}\">ad</a>".into(),
        },
        CreativeContent::ThirdPartyTag {
            tag: "<script src=\"https://ads.example.com/t.js\"></script>".into(),
        },
        CreativeContent::Native {
            title: "Title".into(),
            body: "Body".into(),
            sponsored_by: "Brand".into(),
            image_url: Some("https://cdn.example.com/n.png".into()),
            icon_url: None,
            call_to_action: Some("Buy".into()),
            image_size: Some(Size { w: 1200, h: 627 }),
            icon_size: None,
        },
        CreativeContent::Vast {
            xml: Some("<VAST version=\"4.0\"></VAST>".into()),
            url: None,
            duration_secs: 30,
            mimes: vec!["video/mp4".into()],
            protocols: vec![7, 8],
        },
    ];
    for (i, content) in contents.into_iter().enumerate() {
        let mut c = creative(1001 + i as u64, 101);
        c.object.content = content;
        c.object.size = None;
        c.object.weight = 7;
        if i == 0 {
            c.object.categories = vec!["IAB3-1".into()];
        }
        catalog.creatives.push(c);
    }
    let mut video = placement(101, 10);
    video.object.sizes = vec![];
    video.object.formats = vec![Format::Video, Format::Native];
    catalog.placements.push(video);
    catalog.links.push(link(101, 101));
    catalog.links.push(link(101, 100));
    catalog
}
