//! The OpenRTB 2.6 bid request, borrowed from the body, with 2.5 requests moved into 2.6 form.
//!
//! Strings are `Cow<'a, str>`: borrowed from the body unless they contain escapes. `ext`
//! objects stay raw (`&'a RawValue`) for whoever needs them. Unknown fields are skipped. Only
//! what a bidder reads is modelled; the rest of the request is accepted and ignored.
//!
//! The field declarations repeat (the same `#[serde(default, borrow, …)]` lines on many
//! structs, and again on `native.rs`'s asset requests) deliberately: each struct is the
//! specification's object, field by field, and serde needs the attributes on each.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::de;
use crate::enums::{
    AdPosition, AgentType, ApiFramework, AuctionType, BannerAdType, CreativeAttribute, DeviceType,
    Linearity, LocationType, MarkupType, Protocol, StartDelay, VideoPlacement, VideoPlcmt,
};
use crate::error::{JsonError, ParseError, RequestError};
use crate::native::{NativeError, NativeRequest};
use crate::seen::Seen;

/// Largest width or height (pixels) a request may give; anything above is a broken request.
pub const MAX_DIMENSION: u32 = 16_384;

/// A bid request (OpenRTB 2.6 §3.2.1). Build it with [`BidRequest::parse`].
/// `cattax` 1: IAB Content Category Taxonomy 1.0, the default of a request's and a bid's.
const CATTAX_IAB_1_0: u32 = 1;

#[derive(Clone, Debug, Deserialize)]
pub struct BidRequest<'a> {
    #[serde(default, borrow, deserialize_with = "de::cow_or_empty")]
    pub id: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "de::nullable")]
    pub imp: Vec<Imp<'a>>,
    #[serde(default, borrow)]
    pub site: Option<Site<'a>>,
    #[serde(default, borrow)]
    pub app: Option<App<'a>>,
    #[serde(default, borrow)]
    pub device: Option<Device<'a>>,
    #[serde(default, borrow)]
    pub user: Option<User<'a>>,
    /// Auction type; default second price.
    #[serde(default, deserialize_with = "de::nullable")]
    pub at: AuctionType,
    /// Milliseconds the exchange waits for the answer, network included.
    #[serde(default)]
    pub tmax: Option<u32>,
    /// Buyer seats allowed to bid (empty: any).
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub wseat: Vec<Cow<'a, str>>,
    /// Buyer seats blocked.
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub bseat: Vec<Cow<'a, str>>,
    /// The exchange can verify that all imps are offered together.
    #[serde(default, deserialize_with = "de::flag")]
    pub allimps: bool,
    /// Currencies allowed for bids (empty: the exchange's default).
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub cur: Vec<Cow<'a, str>>,
    /// Allowed creative languages (ISO-639-1).
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub wlang: Vec<Cow<'a, str>>,
    /// Blocked advertiser categories.
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub bcat: Vec<Cow<'a, str>>,
    /// (2.6) Taxonomy of `bcat` (absent: 1, IAB Content Category Taxonomy 1.0).
    #[serde(default)]
    pub cattax: Option<u32>,
    /// Blocked advertiser domains.
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub badv: Vec<Cow<'a, str>>,
    /// Blocked app bundles or store ids.
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub bapp: Vec<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub source: Option<Source<'a>>,
    #[serde(default, borrow)]
    pub regs: Option<Regs<'a>>,
    /// Test mode: the exchange will not bill.
    #[serde(default, deserialize_with = "de::flag")]
    pub test: bool,
    #[serde(default, borrow)]
    pub ext: Option<&'a RawValue>,
    /// (2.6) The digital-out-of-home screen, in place of `site` or `app`; kept raw, only to
    /// tell such traffic (whose creatives may be screen-sized) from the web's and apps'.
    #[serde(default, borrow)]
    pub dooh: Option<&'a RawValue>,
    /// The OpenRTB 3.0 envelope, only to say so when one is sent here.
    #[serde(default, rename = "openrtb", borrow)]
    pub(crate) openrtb3: Option<&'a RawValue>,
}

/// An impression offered for sale (§3.2.4).
#[derive(Clone, Debug, Deserialize)]
pub struct Imp<'a> {
    #[serde(default, borrow, deserialize_with = "de::cow_or_empty")]
    pub id: Cow<'a, str>,
    // The media objects are read on their own: a malformed one is dropped from this imp
    // (see `dropped`), the rest of the request stands.
    #[serde(default, borrow, deserialize_with = "de::media")]
    pub banner: Option<Banner<'a>>,
    #[serde(default, borrow, deserialize_with = "de::media")]
    pub video: Option<Video<'a>>,
    #[serde(default, borrow, deserialize_with = "de::media")]
    pub audio: Option<Audio<'a>>,
    #[serde(default, borrow, deserialize_with = "de::media")]
    pub native: Option<Native<'a>>,
    #[serde(default, borrow)]
    pub pmp: Option<Pmp<'a>>,
    /// `bidfloor` in micros of `bidfloorcur` (CPM), read exactly, rounded up past 6 decimals.
    #[serde(default, rename = "bidfloor", deserialize_with = "de::floor_micros")]
    pub bidfloor_micros: i64,
    /// Currency of the floor; default `USD`.
    #[serde(default = "de::usd", borrow, deserialize_with = "de::cow_or_usd")]
    pub bidfloorcur: Cow<'a, str>,
    /// Creative assets and markup must use `https` only.
    #[serde(default, deserialize_with = "de::flag")]
    pub secure: bool,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub tagid: Option<Cow<'a, str>>,
    /// Interstitial or full screen.
    #[serde(default, deserialize_with = "de::flag")]
    pub instl: bool,
    /// Seconds that may pass between the auction and the impression.
    #[serde(default)]
    pub exp: Option<u32>,
    #[serde(default, borrow)]
    pub ext: Option<&'a RawValue>,
    /// Media types left out of this imp because they could not be read or broke a rule (the
    /// field is then `None`); the imp and the request stand if anything usable is left.
    #[serde(skip)]
    pub dropped: Vec<Dropped>,
}

/// A media type left out of an imp, and why (the error names the member, e.g.
/// `imp[1].banner.format[0].w`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    pub media: MarkupType,
    pub error: ParseError,
}

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.error {
            ParseError::Json(e) => write!(f, "malformed, left out: {e}"),
            ParseError::Invalid(e) => write!(f, "invalid, left out: {e}"),
        }
    }
}

/// A size in `banner.format`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Format {
    #[serde(default, deserialize_with = "de::nullable")]
    pub w: u32,
    #[serde(default, deserialize_with = "de::nullable")]
    pub h: u32,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Banner<'a> {
    /// Allowed sizes; when present, `w`/`h` are only the preferred one.
    #[serde(default, deserialize_with = "de::nullable")]
    pub format: Vec<Format>,
    #[serde(default)]
    pub w: Option<u32>,
    #[serde(default)]
    pub h: Option<u32>,
    /// Blocked banner types.
    #[serde(default, deserialize_with = "de::nullable")]
    pub btype: Vec<BannerAdType>,
    /// Blocked creative attributes.
    #[serde(default, deserialize_with = "de::nullable")]
    pub battr: Vec<CreativeAttribute>,
    #[serde(default)]
    pub pos: Option<AdPosition>,
    #[serde(default, deserialize_with = "de::nullable")]
    pub api: Vec<ApiFramework>,
    /// Allowed MIME types (empty: any).
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub mimes: Vec<Cow<'a, str>>,
    #[serde(skip)]
    pub(crate) unreadable: Option<JsonError>,
}

// Video, Audio and native.rs's asset requests repeat fields deliberately (see the module note):
// each is the specification's own object.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Video<'a> {
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub mimes: Vec<Cow<'a, str>>,
    /// Seconds.
    #[serde(default)]
    pub minduration: Option<u32>,
    /// Seconds.
    #[serde(default)]
    pub maxduration: Option<u32>,
    #[serde(default, deserialize_with = "de::nullable")]
    pub protocols: Vec<Protocol>,
    #[serde(default)]
    pub w: Option<u32>,
    #[serde(default)]
    pub h: Option<u32>,
    /// 2.6 placement subtype; filled from `placement` when only that was sent.
    #[serde(default)]
    pub plcmt: Option<VideoPlcmt>,
    /// 2.5 placement type, as sent.
    #[serde(default)]
    pub placement: Option<VideoPlacement>,
    #[serde(default)]
    pub linearity: Option<Linearity>,
    #[serde(default)]
    pub startdelay: Option<StartDelay>,
    #[serde(default, deserialize_with = "de::nullable")]
    pub battr: Vec<CreativeAttribute>,
    #[serde(skip)]
    pub(crate) unreadable: Option<JsonError>,
}

// The same fields as `Video`'s first ones, deliberately: the specification's audio object.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Audio<'a> {
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub mimes: Vec<Cow<'a, str>>,
    #[serde(default)]
    pub minduration: Option<u32>,
    #[serde(default)]
    pub maxduration: Option<u32>,
    #[serde(default, deserialize_with = "de::nullable")]
    pub protocols: Vec<Protocol>,
    #[serde(default, deserialize_with = "de::nullable")]
    pub battr: Vec<CreativeAttribute>,
    #[serde(skip)]
    pub(crate) unreadable: Option<JsonError>,
}

/// `imp.native`: the Native Ads request travels as a JSON string; see
/// [`Native::parse_request`].
#[derive(Clone, Debug, Deserialize)]
pub struct Native<'a> {
    #[serde(borrow, deserialize_with = "de::cow")]
    pub request: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub ver: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "de::nullable")]
    pub battr: Vec<CreativeAttribute>,
    #[serde(skip)]
    pub(crate) unreadable: Option<JsonError>,
}

impl de::Unreadable for Banner<'_> {
    fn unreadable(error: JsonError) -> Self {
        Banner {
            unreadable: Some(error),
            ..Banner::default()
        }
    }
}

impl de::Unreadable for Video<'_> {
    fn unreadable(error: JsonError) -> Self {
        Video {
            unreadable: Some(error),
            ..Video::default()
        }
    }
}

impl de::Unreadable for Audio<'_> {
    fn unreadable(error: JsonError) -> Self {
        Audio {
            unreadable: Some(error),
            ..Audio::default()
        }
    }
}

impl de::Unreadable for Native<'_> {
    fn unreadable(error: JsonError) -> Self {
        Native {
            request: Cow::Borrowed(""),
            ver: None,
            battr: Vec::new(),
            unreadable: Some(error),
        }
    }
}

impl Native<'_> {
    /// Parses the Native 1.0–1.2 request carried in `request`.
    pub fn parse_request(&self) -> Result<NativeRequest<'_>, NativeError> {
        NativeRequest::parse(&self.request)
    }
}

/// Private marketplace (§3.2.11).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Pmp<'a> {
    /// Only bids on the listed deals are accepted.
    #[serde(default, deserialize_with = "de::flag")]
    pub private_auction: bool,
    #[serde(default, borrow, deserialize_with = "de::nullable")]
    pub deals: Vec<Deal<'a>>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Deal<'a> {
    #[serde(default, borrow, deserialize_with = "de::cow_or_empty")]
    pub id: Cow<'a, str>,
    /// Micros of `bidfloorcur`, read like `imp.bidfloor`.
    #[serde(default, rename = "bidfloor", deserialize_with = "de::floor_micros")]
    pub bidfloor_micros: i64,
    #[serde(default = "de::usd", borrow, deserialize_with = "de::cow_or_usd")]
    pub bidfloorcur: Cow<'a, str>,
    /// Overrides the request's `at` for this deal.
    #[serde(default)]
    pub at: Option<AuctionType>,
    /// Seats allowed on this deal (empty: any).
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub wseat: Vec<Cow<'a, str>>,
    /// Advertiser domains allowed on this deal (empty: any).
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub wadomain: Vec<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub ext: Option<&'a RawValue>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Publisher<'a> {
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub id: Option<Cow<'a, str>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Site<'a> {
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub domain: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub page: Option<Cow<'a, str>>,
    #[serde(default, rename = "ref", borrow, deserialize_with = "de::opt_cow")]
    pub referrer: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub cat: Vec<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub publisher: Option<Publisher<'a>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub keywords: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub ext: Option<&'a RawValue>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct App<'a> {
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub bundle: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub domain: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub storeurl: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub cat: Vec<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub publisher: Option<Publisher<'a>>,
    #[serde(default, borrow)]
    pub ext: Option<&'a RawValue>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Geo<'a> {
    /// ISO-3166-1 alpha-3.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub country: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub region: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub city: Option<Cow<'a, str>>,
    #[serde(default)]
    pub lat: Option<f64>,
    #[serde(default)]
    pub lon: Option<f64>,
    /// The metro (Nielsen DMA) code, as text (`"807"`).
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub metro: Option<Cow<'a, str>>,
    /// Postal or ZIP code.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub zip: Option<Cow<'a, str>>,
    #[serde(default, rename = "type")]
    pub location_type: Option<LocationType>,
}

impl<'a> Geo<'a> {
    /// The country as ISO 3166-1 alpha-2, as targeting names countries: OpenRTB's alpha-3
    /// (`USA`, any case) converted; a two-letter value (some exchanges send one) as it is;
    /// `None` for anything else.
    pub fn country_alpha2(&self) -> Option<&str> {
        let country = self.country.as_deref()?;
        if country.len() == 2 && country.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Some(country);
        }
        let code: [u8; 3] = country.as_bytes().try_into().ok()?;
        let code = code.map(|b| b.to_ascii_uppercase());
        let table = alpha3_to_alpha2();
        let at = table
            .binary_search_by_key(&code, |(alpha3, _)| *alpha3)
            .ok()?;
        Some(table[at].1)
    }

    /// The metro code as a number (`"807"` → 807); `None` when absent or not a number.
    pub fn metro_code(&self) -> Option<u16> {
        self.metro.as_deref()?.trim().parse().ok()
    }

    /// The region as ISO 3166-2 (`US-CA`), as targeting names regions: OpenRTB sends the part
    /// after the country (`CA`, a US state's two letters), joined here to `country` (alpha-2)
    /// in `buf` (no allocation per bid; a code is at most six bytes, a longer one is none); a
    /// value with a `-` is taken as a whole code.
    pub fn region_code<'s>(
        &'s self,
        country: Option<&str>,
        buf: &'s mut [u8; 8],
    ) -> Option<&'s str> {
        let region = self.region.as_deref()?;
        if region.contains('-') {
            return Some(region);
        }
        let country = country?;
        let out = buf.get_mut(..country.len() + 1 + region.len())?;
        let (head, tail) = out.split_at_mut(country.len());
        head.copy_from_slice(country.as_bytes());
        let (dash, rest) = tail.split_first_mut()?;
        *dash = b'-';
        rest.copy_from_slice(region.as_bytes());
        std::str::from_utf8(out).ok()
    }
}

/// ISO 3166-1 alpha-3 codes and their alpha-2, sorted by alpha-3 for a binary search; made once
/// from `isocountry`'s list.
fn alpha3_to_alpha2() -> &'static [([u8; 3], &'static str)] {
    static TABLE: std::sync::OnceLock<Vec<([u8; 3], &'static str)>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table: Vec<([u8; 3], &'static str)> = isocountry::CountryCode::iter()
            .filter_map(|code| Some((code.alpha3().as_bytes().try_into().ok()?, code.alpha2())))
            .collect();
        table.sort_unstable();
        table
    })
}

// Optional strings field after field, the same as `Site` and `User`: deliberately one declaration
// per specification field (see the module note).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Device<'a> {
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub ua: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub ip: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub ipv6: Option<Cow<'a, str>>,
    #[serde(default)]
    pub devicetype: Option<DeviceType>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub os: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub osv: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub language: Option<Cow<'a, str>>,
    /// Advertising id of the device (apps).
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub ifa: Option<Cow<'a, str>>,
    /// Do Not Track.
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub dnt: Option<bool>,
    /// Limit Ad Tracking.
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub lmt: Option<bool>,
    #[serde(default, borrow)]
    pub geo: Option<Geo<'a>>,
    #[serde(default, borrow)]
    pub ext: Option<&'a RawValue>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Segment<'a> {
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub id: Option<Cow<'a, str>>,
}

/// `user.data`: a data provider's segments.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Data<'a> {
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::nullable")]
    pub segment: Vec<Segment<'a>>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Uid<'a> {
    #[serde(default, borrow, deserialize_with = "de::cow_or_empty")]
    pub id: Cow<'a, str>,
    #[serde(default)]
    pub atype: Option<AgentType>,
}

/// `user.eids`: ids from one source (2.6; `user.ext.eids` in 2.5).
#[derive(Clone, Debug, Deserialize)]
pub struct Eid<'a> {
    #[serde(default, borrow, deserialize_with = "de::cow_or_empty")]
    pub source: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "de::nullable")]
    pub uids: Vec<Uid<'a>>,
}

// The same shape as `Device`, deliberately (see the module note).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct User<'a> {
    /// The exchange's user id.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub id: Option<Cow<'a, str>>,
    /// Our user id as the exchange mapped it (user sync).
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub buyeruid: Option<Cow<'a, str>>,
    #[serde(default)]
    pub yob: Option<i32>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub gender: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub keywords: Option<Cow<'a, str>>,
    /// TCF consent string (2.6; `user.ext.consent` in 2.5).
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub consent: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::nullable")]
    pub eids: Vec<Eid<'a>>,
    #[serde(default, borrow)]
    pub geo: Option<Geo<'a>>,
    #[serde(default, borrow, deserialize_with = "de::nullable")]
    pub data: Vec<Data<'a>>,
    #[serde(default, borrow)]
    pub ext: Option<&'a RawValue>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct SupplyChainNode<'a> {
    #[serde(default, borrow, deserialize_with = "de::cow_or_empty")]
    pub asi: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "de::cow_or_empty")]
    pub sid: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub rid: Option<Cow<'a, str>>,
    /// The node is involved in the flow of payment.
    #[serde(default, deserialize_with = "de::flag")]
    pub hp: bool,
}

/// `source.schain` (2.6; `source.ext.schain` in 2.5).
#[derive(Clone, Debug, Deserialize)]
pub struct SupplyChain<'a> {
    /// The chain holds every node back to the owner of the site or app.
    #[serde(default, deserialize_with = "de::flag")]
    pub complete: bool,
    #[serde(default, borrow, deserialize_with = "de::cow_or_empty")]
    pub ver: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "de::nullable")]
    pub nodes: Vec<SupplyChainNode<'a>>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Source<'a> {
    /// Transaction id, common to every bidder of this auction.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub tid: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub schain: Option<SupplyChain<'a>>,
    #[serde(default, borrow)]
    pub ext: Option<&'a RawValue>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct Regs<'a> {
    /// Children's Online Privacy Protection Act applies.
    #[serde(default, deserialize_with = "de::flag")]
    pub coppa: bool,
    /// GDPR applies (`None`: unknown). 2.6 place of `regs.ext.gdpr`.
    #[serde(default, deserialize_with = "de::opt_flag")]
    pub gdpr: Option<bool>,
    /// CCPA string. 2.6 place of `regs.ext.us_privacy`.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub us_privacy: Option<Cow<'a, str>>,
    /// Global Privacy Platform string.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub gpp: Option<Cow<'a, str>>,
    /// GPP sections in force.
    #[serde(default, deserialize_with = "de::nullable")]
    pub gpp_sid: Vec<i32>,
    #[serde(default, borrow)]
    pub ext: Option<&'a RawValue>,
}

/// What 2.5 keeps in `regs.ext`.
#[derive(Deserialize)]
struct RegsExt<'a> {
    #[serde(default, deserialize_with = "de::opt_flag")]
    gdpr: Option<bool>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    us_privacy: Option<Cow<'a, str>>,
}

/// What 2.5 keeps in `user.ext`.
#[derive(Deserialize)]
struct UserExt<'a> {
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    consent: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::nullable")]
    eids: Vec<Eid<'a>>,
}

/// What 2.5 keeps in `source.ext`.
#[derive(Deserialize)]
struct SourceExt<'a> {
    #[serde(default, borrow)]
    schain: Option<SupplyChain<'a>>,
}

impl<'a> BidRequest<'a> {
    /// Parses a bid request body (already decoded, see [`crate::decode_body`]): JSON into the
    /// 2.6 shape, 2.5 `ext` fields moved to their 2.6 places, then the structural checks.
    ///
    /// The JSON is read by a hand-written reader (`fast.rs`) when it can vouch for giving
    /// exactly serde's value, by serde_json and the derives otherwise (which also locate
    /// errors).
    pub fn parse(body: &'a [u8]) -> Result<BidRequest<'a>, ParseError> {
        let request = match Self::read_json_fast(body) {
            Some(request) => request,
            None => Self::read_json_serde(body)?,
        };
        request.finish()
    }

    /// [`BidRequest::parse`] with serde alone: the reference the fast reader is measured and
    /// tested against.
    #[doc(hidden)]
    pub fn parse_with_serde(body: &'a [u8]) -> Result<BidRequest<'a>, ParseError> {
        Self::read_json_serde(body)?.finish()
    }

    /// The hand-written reader alone, before the 2.5 moves and checks: `None` when it leaves
    /// the body to serde. For the differential tests and the fuzz target.
    #[doc(hidden)]
    pub fn read_json_fast(body: &'a [u8]) -> Option<BidRequest<'a>> {
        std::str::from_utf8(body)
            .ok()
            .and_then(crate::fast::bid_request)
    }

    /// serde_json and the derives alone, before the 2.5 moves and checks.
    #[doc(hidden)]
    pub fn read_json_serde(body: &'a [u8]) -> Result<BidRequest<'a>, JsonError> {
        crate::error::from_slice(body)
    }

    /// The 2.5 moves, currency normalisation and structural checks after the JSON is read.
    fn finish(mut self) -> Result<BidRequest<'a>, ParseError> {
        self.upgrade_2_5()?;
        self.normalise_currencies();
        self.validate()?;
        Ok(self)
    }

    /// The imp with this id.
    pub fn imp_by_id(&self, id: &str) -> Option<&Imp<'a>> {
        self.imp.iter().find(|imp| imp.id == id)
    }

    /// Whether bids may be made in `currency` (any when the request lists none).
    pub fn allows_currency(&self, currency: &str) -> bool {
        self.cur.is_empty() || self.cur.iter().any(|c| c == currency)
    }

    /// Whether `seat` may bid: listed in `wseat` when that is given, absent from `bseat`.
    pub fn allows_seat(&self, seat: &str) -> bool {
        (self.wseat.is_empty() || self.wseat.iter().any(|s| s == seat))
            && !self.bseat.iter().any(|s| s == seat)
    }

    /// Whether categories of taxonomy `cattax` (absent: 1) can be checked against `bcat`: the
    /// same code means different things in different taxonomies (`IAB1` in 1.0 and 2.x).
    pub fn bcat_taxonomy_is(&self, cattax: Option<u32>) -> bool {
        self.cattax.unwrap_or(CATTAX_IAB_1_0) == cattax.unwrap_or(CATTAX_IAB_1_0)
    }

    /// COPPA applies.
    pub fn coppa(&self) -> bool {
        self.regs.as_ref().is_some_and(|r| r.coppa)
    }

    /// Moves the 2.5 `ext` fields to their 2.6 places; a value already in the 2.6 place wins.
    fn upgrade_2_5(&mut self) -> Result<(), JsonError> {
        if let Some(regs) = &mut self.regs
            && let Some(ext) = regs.ext
        {
            let moved: RegsExt<'a> = parse_ext(ext, "regs.ext")?;
            if regs.gdpr.is_none() {
                regs.gdpr = moved.gdpr;
            }
            if regs.us_privacy.is_none() {
                regs.us_privacy = moved.us_privacy;
            }
        }
        if let Some(user) = &mut self.user
            && let Some(ext) = user.ext
        {
            let moved: UserExt<'a> = parse_ext(ext, "user.ext")?;
            if user.consent.is_none() {
                user.consent = moved.consent;
            }
            if user.eids.is_empty() {
                user.eids = moved.eids;
            }
        }
        if let Some(source) = &mut self.source
            && let Some(ext) = source.ext
            && source.schain.is_none()
        {
            let moved: SourceExt<'a> = parse_ext(ext, "source.ext")?;
            source.schain = moved.schain;
        }
        for imp in &mut self.imp {
            if let Some(video) = &mut imp.video
                && video.plcmt.is_none()
            {
                video.plcmt = video.placement.and_then(VideoPlacement::to_plcmt);
            }
        }
        Ok(())
    }

    /// Currency codes upper-cased, so that comparisons elsewhere can be exact. Allocates only
    /// for a code sent in lower case.
    fn normalise_currencies(&mut self) {
        fn upper(code: &mut Cow<'_, str>) {
            if code.bytes().any(|b| b.is_ascii_lowercase()) {
                *code = Cow::Owned(code.to_ascii_uppercase());
            }
        }
        self.cur.iter_mut().for_each(upper);
        for imp in &mut self.imp {
            upper(&mut imp.bidfloorcur);
            if let Some(pmp) = &mut imp.pmp {
                pmp.deals.iter_mut().for_each(|d| upper(&mut d.bidfloorcur));
            }
        }
    }

    /// The structural checks a bidder relies on. A media type of an imp that breaks one is
    /// left out of the imp (`Imp::dropped`), as is one that could not be read; the request is
    /// refused only when that leaves no imp anything to offer (with the first such error).
    fn validate(&mut self) -> Result<(), ParseError> {
        self.validate_request()?;
        let mut first_drop = None;
        for (index, imp) in self.imp.iter_mut().enumerate() {
            imp.drop_unusable_media(index);
            if first_drop.is_none() {
                first_drop = imp.dropped.first().map(|d| d.error.clone());
            }
        }
        if let Some(error) = first_drop
            && !self.imp.iter().any(Imp::offers_any)
        {
            return Err(error);
        }
        Ok(())
    }

    fn validate_request(&self) -> Result<(), RequestError> {
        if self.openrtb3.is_some() && self.id.is_empty() {
            return Err(RequestError::OpenRtb3);
        }
        if self.id.is_empty() {
            return Err(RequestError::MissingId);
        }
        if self.imp.is_empty() {
            return Err(RequestError::NoImps);
        }
        for (index, code) in self.cur.iter().enumerate() {
            check_currency(code, || format!("cur[{index}]"))?;
        }
        let mut seen = Seen::new();
        for (index, imp) in self.imp.iter().enumerate() {
            if imp.id.is_empty() {
                return Err(RequestError::EmptyImpId { index });
            }
            if !seen.insert(imp.id.as_ref()) {
                return Err(RequestError::DuplicateImpId {
                    index,
                    id: imp.id.to_string(),
                });
            }
            imp.validate(index)?;
        }
        Ok(())
    }
}

impl<'a> Imp<'a> {
    /// Whether the imp offers any media type.
    pub fn offers_any(&self) -> bool {
        self.banner.is_some()
            || self.video.is_some()
            || self.audio.is_some()
            || self.native.is_some()
    }

    /// Whether the imp offers this media type.
    pub fn offers(&self, media: MarkupType) -> bool {
        match media {
            MarkupType::BANNER => self.banner.is_some(),
            MarkupType::VIDEO => self.video.is_some(),
            MarkupType::AUDIO => self.audio.is_some(),
            MarkupType::NATIVE => self.native.is_some(),
            _ => false,
        }
    }

    /// The media type when the imp offers exactly one.
    pub fn single_media(&self) -> Option<MarkupType> {
        let mut offered = [
            MarkupType::BANNER,
            MarkupType::VIDEO,
            MarkupType::AUDIO,
            MarkupType::NATIVE,
        ]
        .into_iter()
        .filter(|&m| self.offers(m));
        match (offered.next(), offered.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    }

    /// Banner sizes a creative may have: every `format` entry with a size, and `w`×`h` when
    /// both are given (a width alone or a height alone is no size). Empty when the banner
    /// names no size (flexible or interstitial).
    pub fn banner_sizes(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let banner = self.banner.as_ref();
        let formats = banner
            .into_iter()
            .flat_map(|b| b.format.iter())
            .filter(|f| f.w > 0 && f.h > 0)
            .map(|f| (f.w, f.h));
        let preferred = banner
            .and_then(|b| Some((b.w?, b.h?)))
            .filter(|&(w, h)| w > 0 && h > 0);
        formats.chain(preferred)
    }

    /// The deal with this id in the imp's marketplace.
    pub fn deal(&self, id: &str) -> Option<&Deal<'a>> {
        self.pmp.as_ref()?.deals.iter().find(|d| d.id == id)
    }

    /// Only deal bids are accepted.
    pub fn is_private_auction(&self) -> bool {
        self.pmp.as_ref().is_some_and(|p| p.private_auction)
    }

    /// The floor that applies to a bid: the deal's when the bid names one of this imp's
    /// deals, the imp's otherwise. `(micros, currency)`.
    pub fn floor_for(&self, deal_id: Option<&str>) -> (i64, &str) {
        match deal_id.and_then(|id| self.deal(id)) {
            Some(deal) => (deal.bidfloor_micros, &deal.bidfloorcur),
            None => (self.bidfloor_micros, &self.bidfloorcur),
        }
    }

    /// Leaves out of the imp each media type that could not be read or breaks a check,
    /// noting why in `dropped`.
    fn drop_unusable_media(&mut self, index: usize) {
        let located = |media: &str, error: JsonError| {
            ParseError::Json(JsonError {
                path: join_path(&format!("imp[{index}].{media}"), &error.path),
                message: error.message,
            })
        };
        let mut dropped = Vec::new();
        if let Some(banner) = &mut self.banner {
            let error = match banner.unreadable.take() {
                Some(error) => Some(located("banner", error)),
                None => banner.check(index).err().map(ParseError::Invalid),
            };
            if let Some(error) = error {
                self.banner = None;
                dropped.push(Dropped {
                    media: MarkupType::BANNER,
                    error,
                });
            }
        }
        if let Some(video) = &mut self.video {
            let error = match video.unreadable.take() {
                Some(error) => Some(located("video", error)),
                None => video.check(index).err().map(ParseError::Invalid),
            };
            if let Some(error) = error {
                self.video = None;
                dropped.push(Dropped {
                    media: MarkupType::VIDEO,
                    error,
                });
            }
        }
        if let Some(audio) = &mut self.audio {
            let error = match audio.unreadable.take() {
                Some(error) => Some(located("audio", error)),
                None => check_durations(audio.minduration, audio.maxduration, || {
                    format!("imp[{index}].audio")
                })
                .err()
                .map(ParseError::Invalid),
            };
            if let Some(error) = error {
                self.audio = None;
                dropped.push(Dropped {
                    media: MarkupType::AUDIO,
                    error,
                });
            }
        }
        if let Some(error) = self.native.as_mut().and_then(|n| n.unreadable.take()) {
            self.native = None;
            dropped.push(Dropped {
                media: MarkupType::NATIVE,
                error: located("native", error),
            });
        }
        self.dropped = dropped;
    }

    fn validate(&self, index: usize) -> Result<(), RequestError> {
        check_currency(&self.bidfloorcur, || format!("imp[{index}].bidfloorcur"))?;
        if let Some(pmp) = &self.pmp {
            let mut seen = Seen::new();
            for (d, deal) in pmp.deals.iter().enumerate() {
                let path = || format!("imp[{index}].pmp.deals[{d}]");
                if deal.id.is_empty() {
                    return Err(RequestError::EmptyDealId { path: path() });
                }
                if !seen.insert(deal.id.as_ref()) {
                    return Err(RequestError::DuplicateDealId {
                        path: path(),
                        id: deal.id.to_string(),
                    });
                }
                check_currency(&deal.bidfloorcur, || format!("{}.bidfloorcur", path()))?;
            }
        }
        Ok(())
    }
}

impl Banner<'_> {
    /// Every size at most [`MAX_DIMENSION`]. A width without a height (or the reverse) is no
    /// size rather than an error: both are optional, and `banner_sizes` skips such a pair.
    fn check(&self, index: usize) -> Result<(), RequestError> {
        check_size(self.w, self.h, || format!("imp[{index}].banner"))?;
        for (f, format) in self.format.iter().enumerate() {
            check_size(Some(format.w), Some(format.h), || {
                format!("imp[{index}].banner.format[{f}]")
            })?;
        }
        Ok(())
    }
}

impl Video<'_> {
    fn check(&self, index: usize) -> Result<(), RequestError> {
        check_size(self.w, self.h, || format!("imp[{index}].video"))?;
        check_durations(self.minduration, self.maxduration, || {
            format!("imp[{index}].video")
        })
    }
}

/// Width and height each at most [`MAX_DIMENSION`]; either may be absent or 0 (flexible).
fn check_size(
    w: Option<u32>,
    h: Option<u32>,
    path: impl Fn() -> String,
) -> Result<(), RequestError> {
    let w = w.unwrap_or(0);
    let h = h.unwrap_or(0);
    if w > MAX_DIMENSION || h > MAX_DIMENSION {
        return Err(RequestError::InvalidSize { path: path(), w, h });
    }
    Ok(())
}

fn check_durations(
    min: Option<u32>,
    max: Option<u32>,
    path: impl Fn() -> String,
) -> Result<(), RequestError> {
    match (min, max) {
        (Some(min), Some(max)) if max > 0 && min > max => Err(RequestError::DurationRange {
            path: path(),
            min,
            max,
        }),
        _ => Ok(()),
    }
}

/// ISO 4217: three letters (upper case after normalisation).
fn check_currency(code: &str, path: impl Fn() -> String) -> Result<(), RequestError> {
    if code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) {
        return Ok(());
    }
    Err(RequestError::InvalidCurrency {
        path: path(),
        code: code.chars().take(16).collect(),
    })
}

/// Parses a raw `ext` object into `T`, errors located under `prefix`.
fn parse_ext<'a, T: Deserialize<'a>>(ext: &'a RawValue, prefix: &str) -> Result<T, JsonError> {
    crate::error::from_slice(ext.get().as_bytes()).map_err(|e| JsonError {
        path: join_path(prefix, &e.path),
        message: e.message,
    })
}

fn join_path(prefix: &str, path: &str) -> String {
    if path == "." {
        prefix.to_owned()
    } else {
        format!("{prefix}.{path}")
    }
}
