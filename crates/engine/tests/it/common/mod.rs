//! Builders for snapshots in engine tests.
#![allow(dead_code)]

use std::sync::Arc;

use jiff::Timestamp;
use marquee_engine::{
    Context, Decision, Engine, FrequencyCaps, FullSpeed, NoCaps, Outcome, Pacing, Request, Scratch,
    Verdict,
};
use marquee_model::CurrencyRates;
use marquee_model::{
    Channel, Currency, Format, FrequencyCap, LineItemId, PacingMode, PlacementId, Size, Targeting,
    Tier,
};
use marquee_snapshot::{
    CampaignEntry, Channels, Content, CreativeEntry, LineItemEntry, NativeContent, Snapshot,
    fixtures,
};
use rand::SeedableRng;
use rand::rngs::SmallRng;

pub fn now() -> Timestamp {
    // A Wednesday, 12:00 UTC.
    "2026-11-18T12:00:00Z".parse().expect("valid")
}

/// A direct line item flying a day either side of [`now`], paced evenly.
pub fn line_item(id: u64, tier: Tier, targeting: Option<Targeting>) -> LineItemEntry {
    LineItemEntry {
        tier,
        flight_start: now().as_second() - 86_400,
        flight_end: Some(now().as_second() + 86_400),
        pacing: PacingMode::Even,
        targeting,
        ..fixtures::line_item(id)
    }
}

/// A line item that bids on exchanges only (no placement links apply there).
pub fn exchange_line_item(id: u64, tier: Tier, targeting: Option<Targeting>) -> LineItemEntry {
    LineItemEntry {
        channels: Channels::from(&[Channel::Exchange][..]),
        ..line_item(id, tier, targeting)
    }
}

pub fn banner(id: u64, line_item: u64, w: u32, h: u32) -> CreativeEntry {
    CreativeEntry {
        size: Some(Size { w, h }),
        ..fixtures::html_creative(id, line_item)
    }
}

/// A VAST creative of `duration` seconds; audio when every media type is `audio/*`.
pub fn vast(
    id: u64,
    line_item: u64,
    duration: u32,
    mimes: &[&str],
    protocols: &[u16],
) -> CreativeEntry {
    let audio = mimes.iter().all(|m| m.starts_with("audio/"));
    CreativeEntry {
        content: Content::Vast {
            xml: None,
            url: Some("https://ads.example.com/vast.xml".into()),
            duration_secs: duration,
            mimes: mimes.iter().map(|m| (*m).to_owned()).collect(),
            protocols: protocols.to_vec(),
        },
        format: if audio { Format::Audio } else { Format::Video },
        ..fixtures::html_creative(id, line_item)
    }
}

/// A native creative with every asset: a 40-character title, a body, a sponsor, a 1200×627
/// image and an 80×80 icon, and a call to action.
pub fn native(id: u64, line_item: u64) -> CreativeEntry {
    CreativeEntry {
        content: Content::Native(Box::new(NativeContent {
            title: "Forty characters of title, exactly here.".into(),
            body: "Warm boots for cold days.".into(),
            sponsored_by: "Shop".into(),
            image_url: Some("https://cdn.example.com/main.png".into()),
            icon_url: Some("https://cdn.example.com/icon.png".into()),
            call_to_action: Some("Buy now".into()),
            image_size: Some(Size { w: 1200, h: 627 }),
            icon_size: Some(Size { w: 80, h: 80 }),
        })),
        format: Format::Native,
        ..fixtures::html_creative(id, line_item)
    }
}

/// A snapshot of these line items, each with one 300x250 banner (creative id = 1000 + line
/// item id) unless `creatives` is given, and one campaign with `campaign_caps`.
pub fn snapshot(
    mut line_items: Vec<LineItemEntry>,
    creatives: Option<Vec<CreativeEntry>>,
    campaign_caps: Vec<FrequencyCap>,
) -> Arc<Snapshot> {
    line_items.sort_by_key(|li| li.id);
    let mut creatives = creatives.unwrap_or_else(|| {
        line_items
            .iter()
            .map(|li| banner(1000 + li.id.0, li.id.0, 300, 250))
            .collect()
    });
    creatives.sort_by_key(|c| c.id);
    let mut snapshot = fixtures::snapshot(now(), line_items, creatives);
    snapshot.data.advertisers[0].domains = vec!["shop.example.com".into()];
    snapshot.data.campaigns[0] = CampaignEntry {
        frequency_caps: campaign_caps,
        app_bundle: Some("com.example.shop".into()),
        ..fixtures::campaign(1, 1)
    };
    Arc::new(snapshot)
}

pub const SIZES: [Size; 1] = [Size { w: 300, h: 250 }];

pub fn placement(id: u64) -> PlacementId {
    PlacementId(id)
}

/// The outcome of line item `id` among `verdicts`; every line item has one.
pub fn outcome(verdicts: &[Verdict], id: u64) -> Outcome {
    verdicts
        .iter()
        .find(|v| v.line_item == LineItemId(id))
        .map(|v| v.outcome.clone())
        .expect("every line item has a verdict")
}

/// An engine with everything a decision needs: a seeded generator, scratch and rates (USD
/// only until a test sets more).
pub struct Harness {
    pub engine: Engine,
    pub rng: SmallRng,
    pub scratch: Scratch,
    pub rates: CurrencyRates,
}

impl Harness {
    pub fn new(engine: Engine) -> Harness {
        Harness {
            engine,
            rng: SmallRng::seed_from_u64(7),
            scratch: Scratch::default(),
            rates: CurrencyRates::new(Currency::USD),
        }
    }

    pub fn decide_with(
        &mut self,
        request: &Request<'_>,
        caps: &dyn FrequencyCaps,
        pacing: &dyn Pacing,
    ) -> Option<Decision> {
        let (engine, mut context) = self.context(caps, pacing);
        engine.decide(request, &mut context)
    }

    pub fn decide(&mut self, request: &Request<'_>) -> Option<Decision> {
        self.decide_with(request, &NoCaps, &FullSpeed)
    }

    pub fn explain(
        &mut self,
        request: &Request<'_>,
        caps: &dyn FrequencyCaps,
        pacing: &dyn Pacing,
    ) -> (Option<Decision>, Vec<Verdict>) {
        let (engine, mut context) = self.context(caps, pacing);
        engine.explain(request, &mut context)
    }

    /// The engine and a context of this harness's generator, rates and scratch.
    fn context<'a>(
        &'a mut self,
        caps: &'a dyn FrequencyCaps,
        pacing: &'a dyn Pacing,
    ) -> (&'a Engine, Context<'a, SmallRng>) {
        let context = Context {
            rng: &mut self.rng,
            caps,
            pacing,
            rates: &self.rates,
            scratch: &mut self.scratch,
        };
        (&self.engine, context)
    }
}
