//! The managed objects and their validation rules.

use std::fmt::Debug;

use jiff::civil;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::validate::{ValidationError, Violations, rules};
use crate::{
    AdvertiserId, Approval, CampaignId, Currency, LineItemId, MAX_PRICE_MICROS,
    MAX_SPEND_GOAL_MICROS, Micros, ObjectKind, PublisherId, SiteId, Status, Targeting,
    has_insecure_url,
};

/// What every managed object offers the store and the API, whatever its kind.
pub trait Object:
    Serialize + DeserializeOwned + JsonSchema + Clone + Debug + Send + Sync + 'static
{
    const KIND: ObjectKind;
    fn name(&self) -> &str;
    fn status(&self) -> Status;
    fn set_status(&mut self, status: Status);
    /// Id of the parent object; `None` for advertisers and publishers.
    fn parent_id(&self) -> Option<u64>;
    /// Checks every rule and reports all violations at once.
    fn validate(&self) -> Result<(), ValidationError> {
        let mut v = Violations::new();
        rules::name(&mut v, self.name());
        self.validate_fields(&mut v);
        v.into_result()
    }
    /// The rules particular to this kind (the name rule is common to all).
    fn validate_fields(&self, v: &mut Violations);
    /// The currency of this object's money amounts, with the JSON path that names it: an
    /// advertiser's own currency; a line item's price currency, which its spend goal and the
    /// spend its events carry are in too. `None` for kinds without money. Every amount under an
    /// advertiser is in the advertiser's currency, so that its reports and budgets sum like
    /// with like: a rule across objects, which the API checks on every write
    /// (`marquee_api::check_currency`).
    fn currency(&self) -> Option<(&'static str, Currency)>;
}

macro_rules! object {
    ($ty:ty, $kind:expr, |$s:ident| $parent:expr) => {
        object!($ty, $kind, |$s| $parent, currency: |_c| None);
    };
    ($ty:ty, $kind:expr, |$s:ident| $parent:expr, currency: |$c:ident| $currency:expr) => {
        impl Object for $ty {
            const KIND: ObjectKind = $kind;
            fn name(&self) -> &str {
                &self.name
            }
            fn status(&self) -> Status {
                self.status
            }
            fn set_status(&mut self, status: Status) {
                self.status = status;
            }
            fn parent_id(&self) -> Option<u64> {
                let $s = self;
                $parent
            }
            fn validate_fields(&self, v: &mut Violations) {
                self.check(v);
            }
            fn currency(&self) -> Option<(&'static str, Currency)> {
                let $c = self;
                $currency
            }
        }
    };
}

fn default_weight() -> u32 {
    100
}

const MAX_WEIGHT: u32 = 1_000;
const MAX_FREQUENCY_CAPS: usize = 8;
const MAX_MARKUP_BYTES: usize = 100_000;
const MAX_DEALS: usize = 100;
const MAX_CATEGORIES: usize = 20;
const MAX_MIMES: usize = 20;
const MAX_DOMAINS: usize = 1_000;
const MAX_SIZES: usize = 100;
/// OpenRTB (AdCOM) creative subtypes for audio and video: 1 VAST 1.0 … 14 VAST 4.2 Wrapper.
const PROTOCOLS: std::ops::RangeInclusive<u16> = 1..=14;
/// Years a flight may start and end in.
const FLIGHT_YEARS: std::ops::RangeInclusive<i16> = 2000..=2200;

pub(crate) fn weight_rule(v: &mut Violations, weight: u32) {
    v.check_field(
        "weight",
        (1..=MAX_WEIGHT).contains(&weight),
        format!("must be between 1 and {MAX_WEIGHT}"),
    );
}

fn categories_rule(v: &mut Violations, categories: &[String]) {
    v.field("categories", |v| {
        if !rules::at_most(v, categories, MAX_CATEGORIES, "categories") {
            return;
        }
        rules::unique(v, categories);
        for (i, category) in categories.iter().enumerate() {
            v.index(i, |v| rules::iab_category(v, category));
        }
    });
}

fn caps_rule(v: &mut Violations, caps: &[FrequencyCap]) {
    v.field("frequency_caps", |v| {
        // The window check below compares every pair, so only a short list gets it.
        if !rules::at_most(v, caps, MAX_FREQUENCY_CAPS, "caps") {
            return;
        }
        let windows: Vec<CapWindow> = caps.iter().map(|cap| cap.window).collect();
        for (i, cap) in caps.iter().enumerate() {
            v.index(i, |v| {
                v.check_field("count", cap.count >= 1, "must be at least 1");
                if windows[..i].contains(&cap.window) {
                    v.field("window", |v| {
                        v.fail(format!("another cap already uses window {}", cap.window))
                    });
                }
            });
        }
    });
}

/// Width and height in CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Size {
    pub w: u32,
    pub h: u32,
}

impl Size {
    pub const MAX_SIDE: u32 = 10_000;

    pub(crate) fn validate(v: &mut Violations, size: &Size) {
        for (field, side) in [("w", size.w), ("h", size.h)] {
            v.check_field(
                field,
                (1..=Self::MAX_SIDE).contains(&side),
                format!("must be between 1 and {}", Self::MAX_SIDE),
            );
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    Banner,
    Video,
    Native,
    Audio,
}

// The same derive list as `Money`'s, deliberately: both are small ordered values; a macro for a
// derive list would hide what the type is.
/// Priority tier: a higher tier wins outright over every lower one.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    House,
    Remnant,
    #[default]
    Standard,
    Sponsorship,
}

/// Where a line item's demand comes from: our own placements or exchanges' auctions.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    /// Ad requests from Marquee's own tags, for the placements the line item is linked to (or
    /// every placement when it has no links).
    Direct,
    /// OpenRTB bid requests from exchanges, where the line item bids its price.
    Exchange,
}

fn default_channels() -> Vec<Channel> {
    vec![Channel::Direct]
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PacingMode {
    /// Spread delivery evenly over the flight.
    #[default]
    Even,
    /// Deliver as fast as demand allows.
    Asap,
    /// Deliver ahead of an even curve early in the flight.
    FrontLoaded,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RotationMode {
    /// Every creative equally often.
    #[default]
    Even,
    /// In proportion to each creative's weight.
    Weighted,
    /// Favour the creatives with the best click-through rate.
    OptimizedCtr,
}

/// Whether a placement answers the image tag (`/ad?format=img` and `format=click`), whose
/// requests carry no signed token: anyone can make them, so they are counted only under the
/// traffic-quality rules, and only where the publisher turned them on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ImageTag {
    /// Image-tag requests get the fallback and are logged as invalid.
    #[default]
    Off,
    /// Image-tag requests are served; each image counts once per cache buster.
    On,
}

/// Whether a CPC line item is charged for clicks of the image tag, which carry no signed
/// token: such a click counts only after its image was served, but its proof is weaker than a
/// signed click's, so charging it is the advertiser's choice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UntokenedClicks {
    /// Counted as clicks, charged nothing.
    #[default]
    Free,
    /// Counted and charged at the line item's CPC price.
    Charged,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GoalMetric {
    Impressions,
    Clicks,
    /// Spend in micros of the line item's price currency (its advertiser's).
    Spend,
}

/// A delivery goal. Counts for impressions and clicks, micros for spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Goal {
    pub metric: GoalMetric,
    #[serde(default)]
    pub daily: Option<u64>,
    #[serde(default)]
    pub lifetime: Option<u64>,
}

impl Goal {
    fn check(&self, v: &mut Violations) {
        v.field("goal", |v| {
            if self.daily.is_none() && self.lifetime.is_none() {
                v.fail("needs a daily or a lifetime amount");
            }
            v.check_field("daily", self.daily != Some(0), "must be greater than 0");
            v.check_field(
                "lifetime",
                self.lifetime != Some(0),
                "must be greater than 0",
            );
            if let (Some(daily), Some(lifetime)) = (self.daily, self.lifetime) {
                v.check_field(
                    "daily",
                    daily <= lifetime,
                    "must not exceed the lifetime amount",
                );
            }
            // What the aggregation can count: spend as per-mille sums, counts as `i64`.
            let (most, what) = match self.metric {
                GoalMetric::Spend => (
                    MAX_SPEND_GOAL_MICROS,
                    format!(
                        " micros ({} in the currency), the most spend the aggregation counts",
                        Micros(i64::try_from(MAX_SPEND_GOAL_MICROS).unwrap_or(i64::MAX))
                    ),
                ),
                GoalMetric::Impressions | GoalMetric::Clicks => (
                    i64::MAX.unsigned_abs(),
                    ", the most the aggregation counts".to_owned(),
                ),
            };
            for (field, amount) in [("daily", self.daily), ("lifetime", self.lifetime)] {
                v.check_field(
                    field,
                    amount.is_none_or(|amount| amount <= most),
                    format!("must be at most {most}{what}"),
                );
            }
        });
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PricingModel {
    /// Per thousand impressions.
    Cpm,
    /// Per click.
    Cpc,
    /// One amount for the whole flight.
    Flat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub model: PricingModel,
    /// Per thousand impressions, per click, or for the flight. A CPM or CPC price is at most
    /// 10,000,000 currency units (`MAX_PRICE_MICROS`), within what one event may carry.
    pub amount_micros: Micros,
    /// Must be the advertiser's currency (checked on write, against the campaign's advertiser).
    pub currency: Currency,
}

/// A frequency-cap window, written `30m`, `6h`, `1d` or `2w`; from one minute to 366 days.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CapWindow {
    seconds: u32,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "window {0:?} must be a whole number followed by m, h, d or w (such as 30m, 1d, 2w), between 1m and 366d"
)]
pub struct CapWindowError(pub String);

impl CapWindow {
    const UNITS: [(char, u32); 4] = [('w', 604_800), ('d', 86_400), ('h', 3_600), ('m', 60)];
    const MAX_SECONDS: u32 = 366 * 86_400;

    pub fn from_seconds(seconds: u32) -> Result<Self, CapWindowError> {
        if !(60..=Self::MAX_SECONDS).contains(&seconds) || !seconds.is_multiple_of(60) {
            return Err(CapWindowError(format!("{seconds}s")));
        }
        Ok(Self { seconds })
    }

    pub fn seconds(self) -> u32 {
        self.seconds
    }
}

impl TryFrom<String> for CapWindow {
    type Error = CapWindowError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        let bad = || CapWindowError(text.clone());
        let unit = text.chars().last().ok_or_else(bad)?;
        let number = &text[..text.len() - unit.len_utf8()];
        let per_unit = Self::UNITS
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|(_, s)| *s)
            .ok_or_else(bad)?;
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let count: u32 = number.parse().map_err(|_| bad())?;
        let seconds = count.checked_mul(per_unit).ok_or_else(bad)?;
        Self::from_seconds(seconds).map_err(|_| bad())
    }
}

impl From<CapWindow> for String {
    fn from(window: CapWindow) -> String {
        window.to_string()
    }
}

impl std::fmt::Display for CapWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (unit, per_unit) = Self::UNITS
            .iter()
            .find(|(_, s)| self.seconds.is_multiple_of(*s))
            .copied()
            .unwrap_or(('m', 60));
        write!(f, "{}{unit}", self.seconds / per_unit)
    }
}

impl JsonSchema for CapWindow {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "CapWindow".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^[0-9]+[mhdw]$",
            "description": "a window such as 30m, 6h, 1d or 2w; from 1m to 366d"
        })
    }
}

/// At most `count` impressions per user in any `window`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FrequencyCap {
    pub count: u32,
    pub window: CapWindow,
}

/// A buyer of advertising: the root of the demand side and the tenant of an advertiser token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Advertiser {
    pub name: String,
    #[serde(default)]
    pub status: Status,
    /// Currency of every money amount under the advertiser (its line items' prices and spend
    /// goals) and so of its reports' spend; it cannot change while a line item is priced in
    /// another.
    pub currency: Currency,
    /// Time zone of the advertiser's reports (IANA name).
    pub time_zone: String,
    /// The advertiser's landing-page domains (OpenRTB `adomain`), at most 1,000.
    #[serde(default)]
    pub domains: Vec<String>,
}
object!(Advertiser, ObjectKind::Advertiser, |_s| None, currency: |s| Some(("currency", s.currency)));

impl Advertiser {
    fn check(&self, v: &mut Violations) {
        rules::time_zone(v, &self.time_zone);
        v.field("domains", |v| {
            if !rules::at_most(v, &self.domains, MAX_DOMAINS, "domains") {
                return;
            }
            rules::unique(v, &self.domains);
            for (i, domain) in self.domains.iter().enumerate() {
                v.index(i, |v| rules::domain(v, domain));
            }
        });
    }
}

/// An order: groups line items of one advertiser and may cap frequency across them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Campaign {
    pub advertiser_id: AdvertiserId,
    pub name: String,
    #[serde(default)]
    pub status: Status,
    #[serde(default)]
    pub frequency_caps: Vec<FrequencyCap>,
    /// IAB content categories of what the campaign advertises (OpenRTB `cat`), such as
    /// `IAB2-3`; a creative may name its own instead.
    #[serde(default)]
    pub categories: Vec<String>,
    /// The app the campaign advertises, by its store bundle or id (matched against OpenRTB
    /// `bapp`, sent as the bid's `bundle`).
    #[serde(default)]
    pub app_bundle: Option<String>,
}
object!(Campaign, ObjectKind::Campaign, |s| Some(s.advertiser_id.0));

impl Campaign {
    fn check(&self, v: &mut Violations) {
        caps_rule(v, &self.frequency_caps);
        categories_rule(v, &self.categories);
        if let Some(bundle) = &self.app_bundle {
            v.field("app_bundle", |v| rules::app_bundle(v, bundle));
        }
    }
}

/// A flight: what to deliver, where, when, how fast and at what price.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LineItem {
    pub campaign_id: CampaignId,
    pub name: String,
    #[serde(default)]
    pub status: Status,
    /// Local start of the flight in `time_zone`, e.g. `2026-12-01T00:00:00`.
    pub start: civil::DateTime,
    /// Local end (exclusive) in `time_zone`; none for an open-ended flight.
    #[serde(default)]
    pub end: Option<civil::DateTime>,
    /// IANA time zone of `start`, `end` and of day/hour targeting.
    pub time_zone: String,
    #[serde(default)]
    pub tier: Tier,
    /// Share within the tier, 1 to 1000.
    #[serde(default = "default_weight")]
    pub weight: u32,
    #[serde(default)]
    pub goal: Option<Goal>,
    #[serde(default)]
    pub pacing: PacingMode,
    pub price: Price,
    #[serde(default)]
    pub frequency_caps: Vec<FrequencyCap>,
    /// Where and to whom it may serve; none means everywhere it is linked.
    #[serde(default)]
    pub targeting: Option<Targeting>,
    #[serde(default)]
    pub rotation: RotationMode,
    /// Where it takes part: `direct` (our placements), `exchange` (bid requests), or both.
    #[serde(default = "default_channels")]
    pub channels: Vec<Channel>,
    /// Exchange deal ids it buys. With deals, it bids only into impressions that offer one of
    /// them (and the bid names that deal); without, only in open auctions.
    #[serde(default)]
    pub deals: Vec<String>,
    /// Whether image-tag clicks (untokened) are charged: `free` (the default) or `charged`.
    #[serde(default)]
    pub untokened_clicks: UntokenedClicks,
    /// Whether a sponsorship or standard (guaranteed) line item that wins a placement with
    /// programmatic demand still meets the bids there, at its price; off (the default), it is
    /// served without an auction. Price-priority tiers (remnant, house) always compete.
    #[serde(default)]
    pub competes_with_programmatic: bool,
}
object!(LineItem, ObjectKind::LineItem, |s| Some(s.campaign_id.0), currency: |s| {
    Some(("price.currency", s.price.currency))
});

impl LineItem {
    fn check(&self, v: &mut Violations) {
        rules::time_zone(v, &self.time_zone);
        self.check_flight(v);
        if self.price.model == PricingModel::Flat {
            v.check_field(
                "end",
                self.end.is_some(),
                "is required with flat pricing, which is spread over the flight",
            );
        }
        weight_rule(v, self.weight);
        if let Some(goal) = &self.goal {
            goal.check(v);
            if goal.metric == GoalMetric::Spend && self.price.model == PricingModel::Flat {
                v.field("goal", |v| {
                    v.field("metric", |v| {
                        v.fail(
                            "cannot be spend with flat pricing: a flat price is paid for the \
                             flight, so no impression or click spends anything and a spend goal \
                             would never be reached; use an impressions or clicks goal",
                        )
                    })
                });
            }
        }
        v.field("price", |v| {
            v.check_field(
                "amount_micros",
                self.price.amount_micros >= Micros::ZERO,
                "must not be negative",
            );
            // Every event of a CPM or CPC line item carries its price (or a bid or clearing
            // price derived from it); a flat price is carried by none.
            if self.price.model != PricingModel::Flat {
                v.check_field(
                    "amount_micros",
                    self.price.amount_micros <= Micros(MAX_PRICE_MICROS),
                    format!(
                        "must be at most {MAX_PRICE_MICROS} ({} in the currency): what one \
                         impression or click may carry, with room for the largest bid \
                         multiplier, for reports to count it",
                        Micros(MAX_PRICE_MICROS)
                    ),
                );
            }
        });
        caps_rule(v, &self.frequency_caps);
        if let Some(targeting) = &self.targeting {
            v.field("targeting", |v| targeting.validate(v));
        }
        self.check_channels(v);
    }

    fn check_channels(&self, v: &mut Violations) {
        let on_exchange = self.channels.contains(&Channel::Exchange);
        v.field("channels", |v| {
            v.check(!self.channels.is_empty(), "must list at least one channel");
            rules::unique(v, &self.channels);
            if on_exchange && self.price.model == PricingModel::Flat {
                v.fail("exchange bids need a CPM or CPC price; flat pricing has no price per impression");
            }
        });
        v.field("deals", |v| {
            let within = rules::at_most(v, &self.deals, MAX_DEALS, "deals");
            v.check(
                self.deals.is_empty() || on_exchange,
                "deals are bought on exchanges: add exchange to channels",
            );
            if !within {
                return;
            }
            rules::unique(v, &self.deals);
            for (i, deal) in self.deals.iter().enumerate() {
                v.index(i, |v| rules::deal_id(v, deal));
            }
        });
    }

    /// Flights must lie in years the whole system handles, and be checked as instants: a local
    /// start inside a daylight-saving gap moves forward, past an end that looks later locally.
    fn check_flight(&self, v: &mut Violations) {
        let mut in_range = true;
        for (field, time) in [("start", Some(self.start)), ("end", self.end)] {
            if let Some(time) = time
                && !FLIGHT_YEARS.contains(&time.year())
            {
                in_range = false;
                v.field(field, |v| {
                    v.fail(format!(
                        "must be in the years {} to {}",
                        FLIGHT_YEARS.start(),
                        FLIGHT_YEARS.end()
                    ))
                });
            }
        }
        if !in_range {
            return;
        }
        if jiff::tz::TimeZone::get(&self.time_zone).is_err() {
            // The zone rule already failed; still compare the local times.
            if let Some(end) = self.end {
                v.check_field("end", end > self.start, "must be after start");
            }
            return;
        }
        match self.flight() {
            Some((start, Some(end))) => v.check_field(
                "end",
                end > start,
                format!(
                    "must be after start (in {}, the flight resolves to {start} – {end})",
                    self.time_zone
                ),
            ),
            Some((_, None)) => {}
            None => v.field("start", |v| {
                v.fail(format!("cannot be placed in time zone {}", self.time_zone))
            }),
        }
    }

    /// Start and end as instants, resolved in the line item's time zone (a local time in a
    /// daylight-saving gap moves forward; an ambiguous one takes the earlier instant). `None` if
    /// the zone is unknown or a time is out of range, both of which validation rejects on write.
    pub fn flight(&self) -> Option<(jiff::Timestamp, Option<jiff::Timestamp>)> {
        let zone = jiff::tz::TimeZone::get(&self.time_zone).ok()?;
        let start = zone.to_timestamp(self.start).ok()?;
        let end = match self.end {
            Some(end) => Some(zone.to_timestamp(end).ok()?),
            None => None,
        };
        Some((start, end))
    }
}

/// Macros an HTML creative or third-party tag may use, written `{{NAME}}`. The edge replaces
/// them per request.
pub const HTML_MACROS: &[&str] = &[
    "CLICK_URL",
    "CLICK_URL_ENC",
    "CACHE_BUSTER",
    "CREATIVE_ID",
    "LINE_ITEM_ID",
    "PLACEMENT_ID",
    "IMPRESSION_URL",
    "TIMESTAMP",
];

/// Live statistics an HTML creative or third-party tag may show, written `{{STAT:NAME}}`. The
/// manager renders their current values (whole numbers, or a percentage with two decimals)
/// into the prepared ad code and re-renders them as they change; the edge never computes them.
/// "Today" is the line item's day in its time zone.
pub const LIVE_STATISTICS: &[&str] = &[
    // The creative's line item's impressions today.
    "IMPRESSIONS_TODAY",
    // Its clicks today.
    "CLICKS_TODAY",
    // Clicks per impression today, in percent with two decimals (`1.25`).
    "CTR_TODAY",
    // The line item's place (1 = first) among the line items of its campaign by clicks today,
    // ties broken by impressions today, then by the lower id.
    "RANK",
    // How many line items that ranking has.
    "RANK_OF",
];

/// The prefix of a live statistic's name in markup: `{{STAT:IMPRESSIONS_TODAY}}`.
pub const LIVE_STATISTIC_PREFIX: &str = "STAT:";

/// The prefix of a key-value macro in markup: `{{KV:hb_adid}}` is the value of the ad request's
/// key-value `hb_adid` (`kv=hb_adid:…` on the tag), percent-encoded outside letters, digits and
/// `-._~` so that it is safe in HTML, in a quoted attribute and in a JavaScript string; empty
/// when the request has none (a bid request never has any). The key follows the rule of a
/// `key_value` targeting key.
pub const KEY_VALUE_MACRO_PREFIX: &str = "KV:";

/// Whether `key` may name a key-value (in targeting and in `{{KV:key}}`): 1 to 64 lower-case
/// letters, digits or `_`.
pub fn is_key_value_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 64
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// What a creative shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum CreativeContent {
    Image {
        image_url: String,
        #[serde(default)]
        alt: String,
    },
    /// HTML served in a sandboxed iframe; may use the macros in [`HTML_MACROS`], the live
    /// statistics in [`LIVE_STATISTICS`] and the ad request's key-values
    /// ([`KEY_VALUE_MACRO_PREFIX`]).
    Html { html: String },
    /// Markup from an outside ad server; may use the same macros.
    ThirdPartyTag { tag: String },
    /// Assets of an OpenRTB Native 1.2 ad.
    Native {
        title: String,
        #[serde(default)]
        body: String,
        sponsored_by: String,
        #[serde(default)]
        image_url: Option<String>,
        #[serde(default)]
        icon_url: Option<String>,
        #[serde(default)]
        call_to_action: Option<String>,
        /// Pixel size of the main image, so that an exchange's minimum sizes can be checked.
        #[serde(default)]
        image_size: Option<Size>,
        /// Pixel size of the icon.
        #[serde(default)]
        icon_size: Option<Size>,
    },
    /// A VAST video ad, or an audio ad (VAST or DAAST whose media files are all `audio/*`):
    /// inline XML or a wrapper URL (exactly one).
    Vast {
        #[serde(default)]
        xml: Option<String>,
        #[serde(default)]
        url: Option<String>,
        duration_secs: u32,
        /// MIME types of its media files, such as `video/mp4` or `audio/mpeg`.
        #[serde(default)]
        mimes: Vec<String>,
        /// OpenRTB protocols the markup conforms to: 2 VAST 2.0, 3 VAST 3.0, 5 VAST 2.0 Wrapper,
        /// 6 VAST 3.0 Wrapper, 7 VAST 4.0, 8 VAST 4.0 Wrapper, 9 DAAST 1.0, 11–14 VAST 4.1–4.2
        /// (AdCOM "Creative Subtypes - Audio/Video").
        #[serde(default)]
        protocols: Vec<u16>,
    },
}

impl CreativeContent {
    /// The kind of slot this content fills: HTML, images and tags are banners; VAST is video,
    /// or audio when it names media types and all of them are `audio/*`.
    pub fn format(&self) -> Format {
        match self {
            CreativeContent::Image { .. }
            | CreativeContent::Html { .. }
            | CreativeContent::ThirdPartyTag { .. } => Format::Banner,
            CreativeContent::Native { .. } => Format::Native,
            CreativeContent::Vast { mimes, .. } => {
                if !mimes.is_empty() && mimes.iter().all(|m| is_audio_mime(m)) {
                    Format::Audio
                } else {
                    Format::Video
                }
            }
        }
    }
}

fn is_audio_mime(mime: &str) -> bool {
    mime.starts_with("audio/")
}

/// An ad: belongs to one line item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Creative {
    pub line_item_id: LineItemId,
    pub name: String,
    #[serde(default)]
    pub status: Status,
    /// Required for image, HTML and third-party creatives.
    #[serde(default)]
    pub size: Option<Size>,
    /// Where a click goes; the click redirect goes nowhere else.
    pub landing_url: String,
    /// Share in weighted rotation, 1 to 1000.
    #[serde(default = "default_weight")]
    pub weight: u32,
    pub content: CreativeContent,
    /// IAB content categories of this creative (OpenRTB `cat`); empty means the campaign's.
    #[serde(default)]
    pub categories: Vec<String>,
    /// The publisher's review; only an approved creative serves. Set by the server, never from
    /// a write's body (see the API's roles).
    #[serde(default)]
    pub approval: Approval,
}
object!(Creative, ObjectKind::Creative, |s| Some(s.line_item_id.0));

impl Creative {
    fn check(&self, v: &mut Violations) {
        v.field("landing_url", |v| rules::http_url(v, &self.landing_url));
        weight_rule(v, self.weight);
        let needs_size = matches!(
            self.content,
            CreativeContent::Image { .. }
                | CreativeContent::Html { .. }
                | CreativeContent::ThirdPartyTag { .. }
        );
        match &self.size {
            Some(size) => v.field("size", |v| Size::validate(v, size)),
            None if needs_size => v.field("size", |v| v.fail("is required for this type")),
            None => {}
        }
        v.field("content", |v| self.content.check(v));
        categories_rule(v, &self.categories);
        v.field("approval", |v| self.approval.check(v));
    }

    /// Whether everything the creative loads or links to is https, as far as a simple scan can
    /// tell: the landing, image, icon and VAST URLs must be https, and markup (HTML, tags, VAST
    /// XML) must contain no `http:` outside `xmlns` attributes (namespace names, never fetched).
    /// Conservative: text that merely mentions `http:` makes a creative not secure.
    pub fn https_only(&self) -> bool {
        let https = |url: &str| {
            url.get(..8)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"))
        };
        if !https(&self.landing_url) {
            return false;
        }
        match &self.content {
            CreativeContent::Image { image_url, .. } => https(image_url),
            CreativeContent::Html { html } => !has_insecure_url(html),
            CreativeContent::ThirdPartyTag { tag } => !has_insecure_url(tag),
            CreativeContent::Native {
                image_url,
                icon_url,
                ..
            } => [image_url, icon_url]
                .into_iter()
                .flatten()
                .all(|url| https(url)),
            CreativeContent::Vast { xml, url, .. } => {
                xml.as_deref().is_none_or(|xml| !has_insecure_url(xml))
                    && url.as_deref().is_none_or(https)
            }
        }
    }
}

impl CreativeContent {
    fn check(&self, v: &mut Violations) {
        match self {
            CreativeContent::Image { image_url, .. } => {
                v.field("image_url", |v| rules::http_url(v, image_url))
            }
            CreativeContent::Html { html } => v.field("html", |v| markup_rule(v, html)),
            CreativeContent::ThirdPartyTag { tag } => v.field("tag", |v| markup_rule(v, tag)),
            CreativeContent::Native {
                title,
                sponsored_by,
                image_url,
                icon_url,
                image_size,
                icon_size,
                ..
            } => {
                v.check_field(
                    "title",
                    !title.trim().is_empty() && title.chars().count() <= 90,
                    "must be 1 to 90 characters",
                );
                v.check_field(
                    "sponsored_by",
                    !sponsored_by.trim().is_empty(),
                    "must not be empty",
                );
                for (field, url) in [("image_url", image_url), ("icon_url", icon_url)] {
                    if let Some(url) = url {
                        v.field(field, |v| rules::http_url(v, url));
                    }
                }
                for (field, size, url, url_field) in [
                    ("image_size", image_size, image_url, "image_url"),
                    ("icon_size", icon_size, icon_url, "icon_url"),
                ] {
                    if let Some(size) = size {
                        v.field(field, |v| {
                            Size::validate(v, size);
                            if url.is_none() {
                                v.fail(format!("is the size of {url_field}, which is not set"));
                            }
                        });
                    }
                }
            }
            CreativeContent::Vast {
                xml,
                url,
                duration_secs,
                mimes,
                protocols,
            } => {
                match (xml, url) {
                    (Some(xml), None) => v.check_field(
                        "xml",
                        xml.len() <= MAX_MARKUP_BYTES
                            && (xml.contains("<VAST") || xml.contains("<DAAST")),
                        format!(
                            "must be a VAST or DAAST document of at most {MAX_MARKUP_BYTES} bytes"
                        ),
                    ),
                    (None, Some(url)) => v.field("url", |v| rules::http_url(v, url)),
                    _ => v.fail("needs exactly one of xml and url"),
                }
                v.check_field(
                    "duration_secs",
                    (1..=3_600).contains(duration_secs),
                    "must be between 1 and 3600",
                );
                v.field("mimes", |v| {
                    if !(1..=MAX_MIMES).contains(&mimes.len()) {
                        v.fail(format!(
                            "must list 1 to {MAX_MIMES} media types, such as video/mp4"
                        ));
                        return;
                    }
                    rules::unique(v, mimes);
                    for (i, mime) in mimes.iter().enumerate() {
                        v.index(i, |v| rules::mime(v, mime));
                    }
                    let audio = mimes.iter().filter(|m| is_audio_mime(m)).count();
                    v.check(
                        audio == 0 || audio == mimes.len(),
                        "must be all audio/* (an audio ad) or none (a video ad)",
                    );
                });
                v.field("protocols", |v| {
                    v.check(
                        !protocols.is_empty(),
                        "must list at least one OpenRTB protocol, such as 3 (VAST 3.0) or 7 (VAST 4.0)",
                    );
                    rules::unique(v, protocols);
                    for (i, protocol) in protocols.iter().enumerate() {
                        v.index(i, |v| {
                            v.check(
                                PROTOCOLS.contains(protocol),
                                format!(
                                    "{protocol} is not an OpenRTB audio/video protocol ({} to {})",
                                    PROTOCOLS.start(),
                                    PROTOCOLS.end()
                                ),
                            )
                        });
                    }
                });
            }
        }
    }
}

/// Markup must be non-empty, bounded, and use only known `{{MACROS}}`, `{{STAT:NAMES}}` and
/// `{{KV:keys}}` with a valid key.
fn markup_rule(v: &mut Violations, markup: &str) {
    if markup.trim().is_empty() {
        v.fail("must not be empty");
        return;
    }
    if markup.len() > MAX_MARKUP_BYTES {
        v.fail(format!("must be at most {MAX_MARKUP_BYTES} bytes"));
        return;
    }
    let mut rest = markup;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            v.fail("has a {{ without a closing }}");
            return;
        };
        let name = &after[..close];
        if let Some(statistic) = name.strip_prefix(LIVE_STATISTIC_PREFIX) {
            if !LIVE_STATISTICS.contains(&statistic) {
                v.fail(format!(
                    "uses unknown live statistic {{{{{name}}}}}; known: {}",
                    LIVE_STATISTICS
                        .iter()
                        .map(|s| format!("{LIVE_STATISTIC_PREFIX}{s}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        } else if let Some(key) = name.strip_prefix(KEY_VALUE_MACRO_PREFIX) {
            v.check(
                is_key_value_key(key),
                format!(
                    "uses {{{{{name}}}}}, whose key {key:?} is not 1 to 64 lower-case letters, \
                     digits or _"
                ),
            );
        } else if !HTML_MACROS.contains(&name) {
            v.fail(format!(
                "uses unknown macro {{{{{name}}}}}; known: {}, and {KEY_VALUE_MACRO_PREFIX}key \
                 for a key-value of the ad request",
                HTML_MACROS.join(", ")
            ));
        }
        rest = &after[close + 2..];
    }
}

/// A seller of inventory: the root of the supply side and the tenant of a publisher token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Publisher {
    pub name: String,
    #[serde(default)]
    pub status: Status,
}
object!(Publisher, ObjectKind::Publisher, |_s| None);

impl Publisher {
    fn check(&self, _: &mut Violations) {}
}

/// A web site (or app) of a publisher.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Site {
    pub publisher_id: PublisherId,
    pub name: String,
    #[serde(default)]
    pub status: Status,
    pub domain: String,
}
object!(Site, ObjectKind::Site, |s| Some(s.publisher_id.0));

impl Site {
    fn check(&self, v: &mut Violations) {
        v.field("domain", |v| rules::domain(v, &self.domain));
    }
}

/// A slot on a site's pages (a zone): which sizes and formats it takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    pub site_id: SiteId,
    pub name: String,
    #[serde(default)]
    pub status: Status,
    /// Sizes the slot takes, at most 100; a banner placement needs one.
    #[serde(default)]
    pub sizes: Vec<Size>,
    pub formats: Vec<Format>,
    /// Whether the untokened image tag is answered: `off` (the default) or `on`.
    #[serde(default)]
    pub image_tag: ImageTag,
    /// Programmatic demand: the gateway's bidders meet the direct line items on this
    /// placement's ad requests. None (the default): direct line items only.
    #[serde(default)]
    pub programmatic: Option<Programmatic>,
}
object!(Placement, ObjectKind::Placement, |s| Some(s.site_id.0));

/// How a placement's ad requests meet programmatic demand (the edge's gateway bidders).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Programmatic {
    /// Whether the auction runs; off keeps the settings without using them.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The gateway bidders asked, by name; empty (the default) asks every one.
    #[serde(default)]
    pub bidders: Vec<String>,
    /// How long the auction may take, from 10 to 5,000 ms (default 300): the answer leaves
    /// then with the bids that have arrived.
    #[serde(default = "default_programmatic_timeout")]
    pub timeout_ms: u32,
    /// The lowest CPM a bid may have, in micros of the gateway's currency (default 0).
    #[serde(default)]
    pub floor_micros: Micros,
    /// The publisher's cut of a bid, in per mille (100 = 10 %, default 0): a bid competes
    /// with the direct line items at its price less this share.
    #[serde(default)]
    pub revenue_share_permille: u32,
}

/// The longest a placement's auction may take, in milliseconds.
pub const MAX_PROGRAMMATIC_TIMEOUT_MS: u32 = 5_000;
/// The shortest a placement's auction may take, in milliseconds.
pub const MIN_PROGRAMMATIC_TIMEOUT_MS: u32 = 10;
/// The most gateway bidders a placement may name.
const MAX_PROGRAMMATIC_BIDDERS: usize = 100;

fn default_true() -> bool {
    true
}

fn default_programmatic_timeout() -> u32 {
    300
}

impl Programmatic {
    fn check(&self, v: &mut Violations) {
        v.check_field(
            "timeout_ms",
            (MIN_PROGRAMMATIC_TIMEOUT_MS..=MAX_PROGRAMMATIC_TIMEOUT_MS).contains(&self.timeout_ms),
            format!(
                "must be from {MIN_PROGRAMMATIC_TIMEOUT_MS} to {MAX_PROGRAMMATIC_TIMEOUT_MS} \
                 milliseconds"
            ),
        );
        v.check_field(
            "floor_micros",
            (Micros::ZERO..=Micros(MAX_PRICE_MICROS)).contains(&self.floor_micros),
            format!("must be from 0 to {MAX_PRICE_MICROS}"),
        );
        v.check_field(
            "revenue_share_permille",
            self.revenue_share_permille < 1_000,
            "must be below 1000 (100 %): the publisher's cut leaves the bidder's price a share",
        );
        v.field("bidders", |v| {
            if !rules::at_most(v, &self.bidders, MAX_PROGRAMMATIC_BIDDERS, "bidders") {
                return;
            }
            rules::unique(v, &self.bidders);
            for (i, name) in self.bidders.iter().enumerate() {
                v.index(i, |v| {
                    v.check(
                        !name.is_empty() && name.len() <= 64,
                        "must be a gateway bidder's name, 1 to 64 characters",
                    );
                });
            }
        });
    }
}

impl Placement {
    fn check(&self, v: &mut Violations) {
        v.field("formats", |v| {
            v.check(!self.formats.is_empty(), "must list at least one format");
            rules::unique(v, &self.formats);
        });
        v.field("sizes", |v| {
            if self.formats.contains(&Format::Banner) {
                v.check(!self.sizes.is_empty(), "banner placements need a size");
            }
            if !rules::at_most(v, &self.sizes, MAX_SIZES, "sizes") {
                return;
            }
            rules::unique(v, &self.sizes);
            for (i, size) in self.sizes.iter().enumerate() {
                v.index(i, |v| Size::validate(v, size));
            }
        });
        if let Some(programmatic) = &self.programmatic {
            v.field("programmatic", |v| programmatic.check(v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creative(landing_url: &str, content: CreativeContent) -> Creative {
        Creative {
            line_item_id: LineItemId(1),
            name: "c".into(),
            status: Status::Active,
            size: Some(Size { w: 300, h: 250 }),
            landing_url: landing_url.into(),
            weight: 100,
            content,
            categories: Vec::new(),
            approval: crate::Approval::Approved,
        }
    }

    fn html(markup: &str) -> Creative {
        creative(
            "https://shop.example.com/",
            CreativeContent::Html {
                html: markup.into(),
            },
        )
    }

    fn vast(xml: &str, mimes: &[&str]) -> CreativeContent {
        CreativeContent::Vast {
            xml: Some(xml.into()),
            url: None,
            duration_secs: 15,
            mimes: mimes.iter().map(|m| (*m).to_owned()).collect(),
            protocols: vec![7],
        }
    }

    #[test]
    fn https_only_needs_every_url_to_be_https() {
        let image = |landing: &str, image: &str| {
            creative(
                landing,
                CreativeContent::Image {
                    image_url: image.into(),
                    alt: String::new(),
                },
            )
        };
        assert!(image("https://a.example/", "HTTPS://cdn.example/x.png").https_only());
        assert!(!image("http://a.example/", "https://cdn.example/x.png").https_only());
        assert!(!image("https://a.example/", "http://cdn.example/x.png").https_only());

        assert!(
            html("<a href=\"{{CLICK_URL}}\"><img src=\"https://cdn.example/b.png\"></a>")
                .https_only()
        );
        assert!(
            html("<img src=\"//cdn.example/b.png\">").https_only(),
            "protocol-relative"
        );
        assert!(!html("<img src=\"http://cdn.example/b.png\">").https_only());
        assert!(!html("<script>load('HTTP://cdn.example/t.js')</script>").https_only());
        assert!(!html("<script>var u = \"http:\\/\\/cdn.example\";</script>").https_only());

        let native = |icon: Option<&str>| {
            creative(
                "https://a.example/",
                CreativeContent::Native {
                    title: "T".into(),
                    body: String::new(),
                    sponsored_by: "S".into(),
                    image_url: Some("https://cdn.example/n.png".into()),
                    icon_url: icon.map(str::to_owned),
                    call_to_action: None,
                    image_size: None,
                    icon_size: None,
                },
            )
        };
        assert!(native(None).https_only());
        assert!(!native(Some("http://cdn.example/i.png")).https_only());
    }

    #[test]
    fn namespace_names_do_not_make_vast_insecure() {
        let secure = r#"<VAST version="4.2" xmlns="http://www.iab.com/VAST"
            xmlns:xsi='http://www.w3.org/2001/XMLSchema-instance'><Ad><InLine>
            <MediaFile type="video/mp4"><![CDATA[https://cdn.example/v.mp4]]></MediaFile>
            </InLine></Ad></VAST>"#;
        let doc = creative("https://a.example/", vast(secure, &["video/mp4"]));
        assert!(doc.https_only());
        let insecure = secure.replace("https://cdn", "http://cdn");
        let doc = creative("https://a.example/", vast(&insecure, &["video/mp4"]));
        assert!(!doc.https_only());
        // An attribute that merely ends in "xmlns" is not a namespace declaration.
        let doc = creative(
            "https://a.example/",
            vast(
                r#"<VAST notxmlns="http://x.example/"></VAST>"#,
                &["video/mp4"],
            ),
        );
        assert!(!doc.https_only());
        let wrapper = creative(
            "https://a.example/",
            CreativeContent::Vast {
                xml: None,
                url: Some("http://ads.example/v.xml".into()),
                duration_secs: 15,
                mimes: vec!["video/mp4".into()],
                protocols: vec![3],
            },
        );
        assert!(!wrapper.https_only());
    }

    #[test]
    fn vast_with_only_audio_media_is_audio() {
        assert_eq!(
            vast("<VAST/>", &["audio/mp4", "audio/mpeg"]).format(),
            Format::Audio
        );
        assert_eq!(vast("<VAST/>", &["video/mp4"]).format(), Format::Video);
        assert_eq!(vast("<VAST/>", &[]).format(), Format::Video);
        assert_eq!(
            CreativeContent::Html { html: "x".into() }.format(),
            Format::Banner
        );
    }
}
