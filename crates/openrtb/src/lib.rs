//! OpenRTB for a bidder: 2.6 bid requests borrowed from the body (2.5 accepted and moved into
//! 2.6 form), request bodies (gzip, size limit), Native 1.2 requests and responses, bid
//! responses written by hand with exact prices, the auction macros, the HMAC-SHA1 price
//! encryption, and the checks a response must pass against its request.
//!
//! Pure: no I/O, no clock, no randomness (an encryption IV is a parameter). Money is integer
//! micros (`i64`, CPM), read from and written to decimal text exactly. See the README for the
//! API overview and the decisions behind it.

mod body;
mod crypto;
mod de;
mod decimal;
mod enums;
mod error;
mod fast;
mod json;
mod macros;
mod native;
mod request;
mod response;
mod seen;
mod validate;

pub use body::{BodyError, decode_body};
pub use crypto::{KeyError, PriceCrypto, PriceError};
pub use decimal::{
    DecimalError, MICROS_PER_UNIT, Rounding, format_micros, parse_micros, write_micros,
};
pub use enums::{
    AdPosition, AgentType, ApiFramework, AuctionType, BannerAdType, ContextType, CreativeAttribute,
    DataAssetType, DeviceType, EventTrackingMethod, EventType, ImageAssetType, Linearity,
    LocationType, LossReason, MarkupType, MediaRating, NativePlacementType, NoBidReason, Protocol,
    SlotPositionInPod, StartDelay, VideoPlacement, VideoPlcmt,
};
pub use error::{JsonError, ParseError, RequestError};
/// The fast request reader's keys per struct, for the tests that hold it to serde's fields.
#[doc(hidden)]
pub use fast::FAST_READER_KEYS;
pub use macros::{AuctionMacros, expand_macros, parse_notice_price};
pub use native::{
    AssetRequest, DataRequest, EventTrackerRequest, ImageRequest, MismatchReason, NativeCreative,
    NativeError, NativeImage, NativeMismatch, NativeRequest, TitleRequest, VideoAssetRequest,
};
pub use request::{
    App, Audio, Banner, BidRequest, Data, Deal, Device, Dropped, Eid, Format, Geo, Imp,
    MAX_DIMENSION, Native, Pmp, Publisher, Regs, Segment, Site, Source, SupplyChain,
    SupplyChainNode, Uid, User, Video,
};
pub use response::{Bid, BidResponse, RawJson, SeatBid};
pub use validate::{
    CurrencyConverter, MAX_ID_BYTES, NoConversion, Rule, Violation, validate_response,
};
