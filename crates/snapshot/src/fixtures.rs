//! Plain entries for the tests and benchmarks of the crates that read snapshots (the engine,
//! the edge, forecasting), behind the `fixtures` feature that only their dev-dependencies turn
//! on: production builds never compile it. Each builder gives the most ordinary object of its
//! kind; a test states what it cares about with struct-update syntax
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
