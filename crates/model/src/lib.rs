//! The domain model of Marquee: ids, money, the demand side (advertiser → campaign → line item →
//! creative), the supply side (publisher → site → placement), targeting expressions, and the
//! validation rules every write goes through; and the GDPR consent rule the edge's ad path and
//! bidder share ([`may_identify`], reading a TCF v2 consent string's Purpose 1).
//!
//! Invariants: this crate does no I/O and reads no clock except through [`Clock`]; money is
//! integer micros ([`Micros`]) everywhere; targeting is data ([`Targeting`]), never code.

mod approval;
mod assignment;
mod clock;
mod consent;
mod ids;
mod kind;
mod markup;
mod metrics_access;
mod money;
mod objects;
pub mod prebid;
mod rates;
mod secret;
mod stored;
mod targeting;
mod validate;

pub use approval::{Approval, MAX_REJECTION_REASON_CHARS};
pub use assignment::CreativeAssignment;
pub use clock::{Clock, ManualClock, SystemClock};
pub use consent::{TcfCore, TcfError, may_identify, tcf_device_storage_consent};
pub use ids::{AdvertiserId, CampaignId, CreativeId, LineItemId, PlacementId, PublisherId, SiteId};
pub use kind::{ObjectKind, Principal, Role, Side, Status};
pub use markup::has_insecure_url;
pub use metrics_access::{MetricsAccess, MetricsRefusal};
pub use money::{
    AmountError, Currency, CurrencyError, MAX_AMOUNT_MICROS, MAX_PRICE_MICROS,
    MAX_SPEND_GOAL_MICROS, Micros,
};
pub use objects::{
    Advertiser, Campaign, CapWindow, CapWindowError, Channel, Creative, CreativeContent, Format,
    FrequencyCap, Goal, GoalMetric, HTML_MACROS, ImageTag, KEY_VALUE_MACRO_PREFIX,
    LIVE_STATISTIC_PREFIX, LIVE_STATISTICS, LineItem, MAX_PROGRAMMATIC_TIMEOUT_MS,
    MIN_PROGRAMMATIC_TIMEOUT_MS, Object, PacingMode, Placement, Price, PricingModel, Programmatic,
    Publisher, RotationMode, Site, Size, Tier, UntokenedClicks, is_key_value_key,
};
pub use rates::{CurrencyRates, RateError, Rounding};
pub use secret::same_secret;
pub use stored::{Catalog, Meta, Stored};
pub use targeting::{
    ConnectionType, DeviceType, GeoCircle, HourRange, KeyValues, Leaves, Targeting, Weekday,
    is_region_code,
};
pub use validate::{ValidationError, Violation, Violations};
