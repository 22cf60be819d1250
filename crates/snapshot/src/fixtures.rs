//! Plain entries and catalogs for the tests and benchmarks of the crates that read snapshots
//! (the engine, the edge, the manager, forecasting), behind the `fixtures` feature that only
//! their dev-dependencies turn on: production builds never compile it. Each builder gives the
//! most ordinary object of its kind; a test states what it cares about with struct-update syntax
//! (`LineItemEntry { tier: Tier::Remnant, ..fixtures::line_item(7) }`).

use jiff::Timestamp;
use marquee_model::{
    AdvertiserId, CampaignId, Channel, CreativeId, Currency, Format, LineItemId, Micros,
    PacingMode, Price, PricingModel, RotationMode, Tier,
};

use crate::{
    AdvertiserEntry, CampaignEntry, Channels, Content, CreativeEntry, LineItemEntry, Snapshot,
    SnapshotData,
};

/// A standard-tier line item of campaign 1 (advertiser 1), direct only, flying since the
/// epoch without end, as fast as it can, at a 1.00 USD CPM, with no goal, caps or targeting.
pub fn line_item(id: u64) -> LineItemEntry {
    LineItemEntry {
        id: LineItemId(id),
        campaign_id: CampaignId(1),
        advertiser_id: AdvertiserId(1),
        tier: Tier::Standard,
        weight: 100,
        flight_start: 0,
        flight_end: None,
        time_zone: "UTC".into(),
        goal: None,
        pacing: PacingMode::Asap,
        price: cpm(1_000_000),
        frequency_caps: Vec::new(),
        targeting: None,
        rotation: RotationMode::Weighted,
        placements: Vec::new(),
        channels: Channels::from(&[Channel::Direct][..]),
        deals: Vec::new(),
        untokened_clicks: Default::default(),
        competes_with_programmatic: false,
    }
}

/// A CPM price of `micros` US dollars.
pub fn cpm(micros: i64) -> Price {
    Price {
        model: PricingModel::Cpm,
        amount_micros: Micros(micros),
        currency: Currency::USD,
    }
}

/// A sizeless HTML banner of `line_item` linking to `https://shop.example.com/`, its markup
/// one link through the click macro.
pub fn html_creative(id: u64, line_item: u64) -> CreativeEntry {
    CreativeEntry {
        id: CreativeId(id),
        line_item_id: LineItemId(line_item),
        size: None,
        landing_url: "https://shop.example.com/".into(),
        weight: 100,
        content: Content::Html {
            html: "<a href=\"{{CLICK_URL}}\">ad</a>".into(),
        },
        ad_code: None,
        format: Format::Banner,
        secure: true,
        categories: Vec::new(),
    }
}

/// A campaign of `advertiser` without caps, categories or app.
pub fn campaign(id: u64, advertiser: u64) -> CampaignEntry {
    CampaignEntry {
        id: CampaignId(id),
        advertiser_id: AdvertiserId(advertiser),
        frequency_caps: Vec::new(),
        categories: Vec::new(),
        app_bundle: None,
    }
}

/// An advertiser paying in US dollars, without landing domains.
pub fn advertiser(id: u64) -> AdvertiserEntry {
    AdvertiserEntry {
        id: AdvertiserId(id),
        currency: Currency::USD,
        domains: Vec::new(),
    }
}

/// A snapshot of version 1 built at `built_at` holding `line_items` and `creatives`, with
/// advertiser 1 and its campaign 1 that they belong to.
pub fn snapshot(
    built_at: Timestamp,
    line_items: Vec<LineItemEntry>,
    creatives: Vec<CreativeEntry>,
) -> Snapshot {
    Snapshot {
        version: 1,
        built_at,
        data: SnapshotData {
            advertisers: vec![advertiser(1)],
            campaigns: vec![campaign(1, 1)],
            line_items,
            creatives,
            ..SnapshotData::default()
        },
    }
}

// The catalogs below are, deliberately for now, twins of this crate's own test fixtures
// (`tests/it/fixture.rs`, richer, not behind the feature) and of the demo's line items
// (`marquee_manager::demo`, production data): one set of model-level builders for all of them
// would mean turning this feature on for the crate's own tests.

/// `object` stored as `id`, version 1, made now.
pub fn stored<T>(id: u64, object: T) -> marquee_model::Stored<T> {
    let now = Timestamp::now();
    marquee_model::Stored {
        meta: marquee_model::Meta {
            id,
            version: 1,
            created_at: now,
            updated_at: now,
        },
        object,
    }
}

/// A catalog of supply only: publisher 1, its site 2 (`news.example`) and the site's 300×250
/// banner placement `placement`.
pub fn supply_catalog(placement: u64) -> marquee_model::Catalog {
    use marquee_model::{Placement, Publisher, PublisherId, Site, SiteId, Size, Status};
    marquee_model::Catalog {
        version: 1,
        publishers: vec![stored(
            1,
            Publisher {
                name: "p".into(),
                status: Status::Active,
            },
        )],
        sites: vec![stored(
            2,
            Site {
                publisher_id: PublisherId(1),
                name: "s".into(),
                status: Status::Active,
                domain: "news.example".into(),
            },
        )],
        placements: vec![stored(
            placement,
            Placement {
                site_id: SiteId(2),
                name: "top".into(),
                status: Status::Active,
                sizes: vec![Size { w: 300, h: 250 }],
                formats: vec![Format::Banner],
                image_tag: Default::default(),
                programmatic: None,
            },
        )],
        ..marquee_model::Catalog::default()
    }
}

/// [`supply_catalog`] and one USD line item 20 of `tier` at a 2.00 CPM, direct only, flying
/// since 2020 without end or goal, of campaign 10 of advertiser 1 (`brand.example`), with one
/// 300×250 HTML creative 30 showing `html`, linked to `placement`.
pub fn catalog(placement: u64, tier: Tier, html: &str) -> marquee_model::Catalog {
    use marquee_model::{
        Advertiser, Campaign, Creative, CreativeContent, LineItem, PlacementId, Size, Status,
    };
    marquee_model::Catalog {
        advertisers: vec![stored(
            1,
            Advertiser {
                name: "a".into(),
                status: Status::Active,
                currency: Currency::USD,
                time_zone: "UTC".into(),
                domains: vec!["brand.example".into()],
            },
        )],
        campaigns: vec![stored(
            10,
            Campaign {
                advertiser_id: AdvertiserId(1),
                name: "c".into(),
                status: Status::Active,
                frequency_caps: Vec::new(),
                categories: Vec::new(),
                app_bundle: None,
            },
        )],
        line_items: vec![stored(
            20,
            LineItem {
                campaign_id: CampaignId(10),
                name: "li".into(),
                status: Status::Active,
                start: jiff::civil::date(2020, 1, 1).at(0, 0, 0, 0),
                end: None,
                time_zone: "UTC".into(),
                tier,
                weight: 100,
                goal: None,
                pacing: PacingMode::Asap,
                price: Price {
                    model: PricingModel::Cpm,
                    amount_micros: Micros(2_000_000),
                    currency: Currency::USD,
                },
                frequency_caps: Vec::new(),
                targeting: None,
                rotation: RotationMode::Even,
                channels: vec![Channel::Direct],
                deals: Vec::new(),
                untokened_clicks: Default::default(),
                competes_with_programmatic: false,
            },
        )],
        creatives: vec![stored(
            30,
            Creative {
                line_item_id: LineItemId(20),
                name: "cr".into(),
                status: Status::Active,
                size: Some(Size { w: 300, h: 250 }),
                landing_url: "https://brand.example/".into(),
                weight: 100,
                content: CreativeContent::Html { html: html.into() },
                categories: Vec::new(),
                approval: marquee_model::Approval::Approved,
            },
        )],
        links: vec![(LineItemId(20), PlacementId(placement))],
        ..supply_catalog(placement)
    }
}
