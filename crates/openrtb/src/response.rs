//! The bid response: small, written by hand without intermediate allocations, with prices held
//! as integer micros and written as exact decimals.
//!
//! Strings are `Cow<'a, str>` so that the edge can borrow creative fields from its snapshot
//! and own only what it builds per bid (URLs, markup); `BidResponse<'static>` is fully owned.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::de;
use crate::decimal;
use crate::enums::{
    ApiFramework, CreativeAttribute, MarkupType, MediaRating, NoBidReason, Protocol,
    SlotPositionInPod,
};
use crate::error::JsonError;
use crate::json;

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct BidResponse<'a> {
    /// The request's id.
    #[serde(borrow, deserialize_with = "de::cow")]
    pub id: Cow<'a, str>,
    #[serde(default, borrow)]
    pub seatbid: Vec<SeatBid<'a>>,
    /// Bidder's id for this response (logging, `${AUCTION_BID_ID}`).
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub bidid: Option<Cow<'a, str>>,
    /// Currency of every price here; absent means USD.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub cur: Option<Cow<'a, str>>,
    /// Why there is no bid.
    #[serde(default)]
    pub nbr: Option<NoBidReason>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct SeatBid<'a> {
    #[serde(default, borrow)]
    pub bid: Vec<Bid<'a>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub seat: Option<Cow<'a, str>>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct Bid<'a> {
    #[serde(borrow, deserialize_with = "de::cow")]
    pub id: Cow<'a, str>,
    #[serde(borrow, deserialize_with = "de::cow")]
    pub impid: Cow<'a, str>,
    /// CPM in micros of the response currency; written as an exact decimal.
    #[serde(rename = "price", deserialize_with = "de::price_micros")]
    pub price_micros: i64,
    /// Markup (HTML, VAST, native JSON). Without it the markup is fetched from `nurl`.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub adm: Option<Cow<'a, str>>,
    /// Win notice.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub nurl: Option<Cow<'a, str>>,
    /// Billing notice.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub burl: Option<Cow<'a, str>>,
    /// Loss notice.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub lurl: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub adid: Option<Cow<'a, str>>,
    /// Advertiser domains (for `badv`).
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub adomain: Vec<Cow<'a, str>>,
    /// App bundle or store id being advertised (for `bapp`).
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub bundle: Option<Cow<'a, str>>,
    /// Sample image for quality checks.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub iurl: Option<Cow<'a, str>>,
    /// Campaign id.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub cid: Option<Cow<'a, str>>,
    /// Creative id.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub crid: Option<Cow<'a, str>>,
    /// Tactic id: the buyer's label for the bid, for reporting to the exchange.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub tactic: Option<Cow<'a, str>>,
    /// Content categories of the creative (for `bcat`).
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub cat: Vec<Cow<'a, str>>,
    #[serde(default)]
    pub attr: Vec<CreativeAttribute>,
    /// (2.6) The APIs the markup supports (VPAID, MRAID, OMID, …); any other is unsupported.
    #[serde(default)]
    pub apis: Vec<ApiFramework>,
    /// The API the markup requires (2.5; deprecated in 2.6 for `apis`, still valid there).
    #[serde(default)]
    pub api: Option<ApiFramework>,
    /// Video or audio response protocol of the markup (VAST version).
    #[serde(default)]
    pub protocol: Option<Protocol>,
    /// The creative's media rating (IQG guidelines).
    #[serde(default)]
    pub qagmediarating: Option<MediaRating>,
    /// Language of the creative, ISO-639-1-alpha-2 (2.5 and 2.6). 2.6 wants only one of this
    /// and `langb`; both are kept as sent.
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub language: Option<Cow<'a, str>>,
    /// (2.6) Language of the creative, IETF BCP 47 (`pt-BR`).
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub langb: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub dealid: Option<Cow<'a, str>>,
    #[serde(default)]
    pub w: Option<u32>,
    #[serde(default)]
    pub h: Option<u32>,
    /// Relative width of the creative when its size is a ratio (flex ads).
    #[serde(default)]
    pub wratio: Option<u32>,
    /// Relative height of the creative when its size is a ratio (flex ads).
    #[serde(default)]
    pub hratio: Option<u32>,
    #[serde(default)]
    pub mtype: Option<MarkupType>,
    /// (2.6) The only position in a video or audio ad pod the bid is eligible for (absent: 0,
    /// any).
    #[serde(default)]
    pub slotinpod: Option<SlotPositionInPod>,
    /// Seconds the bidder is willing to wait between auction and impression.
    #[serde(default)]
    pub exp: Option<u32>,
    /// (2.6) Duration of the video or audio creative, in seconds.
    #[serde(default)]
    pub dur: Option<u32>,
    /// Taxonomy of `cat` (absent: 1, IAB Content Category 1.0).
    #[serde(default)]
    pub cattax: Option<u32>,
    /// The bidder's extensions (such as `dsa`, the DSA transparency an EU caller requires),
    /// kept as written: a gateway passes them on unread.
    #[serde(default, borrow)]
    pub ext: Option<RawJson<'a>>,
}

/// A JSON value kept as its text, borrowed from the body it was parsed from, and written back
/// unchanged.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(transparent)]
pub struct RawJson<'a>(#[serde(borrow)] pub &'a RawValue);

impl RawJson<'_> {
    /// The value's JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }
}

/// `RawValue` has no equality; the same text is the same value here (a parse reads back
/// exactly what was written).
impl PartialEq for RawJson<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl<'a> BidResponse<'a> {
    /// A response without bids that says why (for exchanges that want a body; others take an
    /// HTTP 204).
    pub fn no_bid(request_id: impl Into<Cow<'a, str>>, reason: NoBidReason) -> Self {
        BidResponse {
            id: request_id.into(),
            nbr: Some(reason),
            ..BidResponse::default()
        }
    }

    /// Parses a response body (what a gateway receives, or a test reads back).
    pub fn parse(body: &'a [u8]) -> Result<BidResponse<'a>, JsonError> {
        crate::error::from_slice(body)
    }

    /// Every bid with its seat.
    pub fn bids(&self) -> impl Iterator<Item = (Option<&str>, &Bid<'a>)> {
        self.seatbid
            .iter()
            .flat_map(|s| s.bid.iter().map(move |b| (s.seat.as_deref(), b)))
    }

    /// The response currency (`USD` when absent).
    pub fn currency(&self) -> &str {
        self.cur.as_deref().unwrap_or("USD")
    }

    /// Appends the response as JSON. Absent and empty fields are left out.
    pub fn write_json(&self, out: &mut String) {
        out.push_str("{\"id\":");
        json::write_str(out, &self.id);
        out.push_str(",\"seatbid\":[");
        for (i, seat) in self.seatbid.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            seat.write_json(out);
        }
        out.push(']');
        write_opt_str(out, "bidid", self.bidid.as_deref());
        write_opt_str(out, "cur", self.cur.as_deref());
        if let Some(nbr) = self.nbr {
            out.push_str(",\"nbr\":");
            json::write_i64(out, i64::from(nbr.0));
        }
        out.push('}');
    }

    /// [`Self::write_json`] into a new string.
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(256 + 1024 * self.seatbid.len());
        self.write_json(&mut out);
        out
    }
}

impl SeatBid<'_> {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"bid\":[");
        for (i, bid) in self.bid.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            bid.write_json(out);
        }
        out.push(']');
        write_opt_str(out, "seat", self.seat.as_deref());
        out.push('}');
    }
}

impl Bid<'_> {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"id\":");
        json::write_str(out, &self.id);
        out.push_str(",\"impid\":");
        json::write_str(out, &self.impid);
        out.push_str(",\"price\":");
        decimal::write_micros(self.price_micros, out);
        write_opt_str(out, "adm", self.adm.as_deref());
        write_opt_str(out, "nurl", self.nurl.as_deref());
        write_opt_str(out, "burl", self.burl.as_deref());
        write_opt_str(out, "lurl", self.lurl.as_deref());
        write_opt_str(out, "adid", self.adid.as_deref());
        if !self.adomain.is_empty() {
            out.push_str(",\"adomain\":");
            json::write_str_array(out, self.adomain.iter().map(|d| d.as_ref()));
        }
        write_opt_str(out, "bundle", self.bundle.as_deref());
        write_opt_str(out, "iurl", self.iurl.as_deref());
        write_opt_str(out, "cid", self.cid.as_deref());
        write_opt_str(out, "crid", self.crid.as_deref());
        write_opt_str(out, "tactic", self.tactic.as_deref());
        if !self.cat.is_empty() {
            out.push_str(",\"cat\":");
            json::write_str_array(out, self.cat.iter().map(|c| c.as_ref()));
        }
        write_codes(out, "attr", &self.attr, |a| a.0);
        write_codes(out, "apis", &self.apis, |a| a.0);
        write_opt_int(out, "api", self.api.map(|a| i64::from(a.0)));
        write_opt_int(out, "protocol", self.protocol.map(|p| i64::from(p.0)));
        write_opt_int(
            out,
            "qagmediarating",
            self.qagmediarating.map(|r| i64::from(r.0)),
        );
        write_opt_str(out, "language", self.language.as_deref());
        write_opt_str(out, "langb", self.langb.as_deref());
        write_opt_str(out, "dealid", self.dealid.as_deref());
        write_opt_int(out, "w", self.w.map(i64::from));
        write_opt_int(out, "h", self.h.map(i64::from));
        write_opt_int(out, "wratio", self.wratio.map(i64::from));
        write_opt_int(out, "hratio", self.hratio.map(i64::from));
        write_opt_int(out, "mtype", self.mtype.map(|m| i64::from(m.0)));
        write_opt_int(out, "slotinpod", self.slotinpod.map(|s| i64::from(s.0)));
        write_opt_int(out, "exp", self.exp.map(i64::from));
        write_opt_int(out, "dur", self.dur.map(i64::from));
        write_opt_int(out, "cattax", self.cattax.map(i64::from));
        if let Some(ext) = self.ext {
            out.push_str(",\"ext\":");
            out.push_str(ext.get());
        }
        out.push('}');
    }
}

fn write_opt_str(out: &mut String, key: &str, value: Option<&str>) {
    if let Some(value) = value {
        out.push_str(",\"");
        out.push_str(key);
        out.push_str("\":");
        json::write_str(out, value);
    }
}

fn write_opt_int(out: &mut String, key: &str, value: Option<i64>) {
    if let Some(value) = value {
        out.push_str(",\"");
        out.push_str(key);
        out.push_str("\":");
        json::write_i64(out, value);
    }
}

/// A list of enumeration codes (`attr`, `apis`); nothing when it is empty.
fn write_codes<T: Copy>(out: &mut String, key: &str, values: &[T], code: impl Fn(T) -> i32) {
    if values.is_empty() {
        return;
    }
    out.push_str(",\"");
    out.push_str(key);
    out.push_str("\":[");
    for (i, &value) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json::write_i64(out, i64::from(code(value)));
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_exact_prices_and_reads_them_back() {
        let response = BidResponse {
            id: "req \"1\"".into(),
            seatbid: vec![SeatBid {
                seat: Some("marquee".into()),
                bid: vec![Bid {
                    id: "b1".into(),
                    impid: "1".into(),
                    price_micros: 1_250_000,
                    adm: Some("<div class=\"ad\">\n</div>".into()),
                    nurl: Some("https://x.test/win?p=${AUCTION_PRICE}".into()),
                    adomain: vec!["brand.test".into()],
                    cat: vec!["IAB1".into()],
                    attr: vec![CreativeAttribute::TEXT_ONLY],
                    crid: Some("c9".into()),
                    w: Some(300),
                    h: Some(250),
                    mtype: Some(MarkupType::BANNER),
                    ..Bid::default()
                }],
            }],
            bidid: Some("r1".into()),
            cur: Some("EUR".into()),
            nbr: None,
        };
        let text = response.to_json();
        assert!(text.contains("\"price\":1.25,"), "{text}");
        let back = BidResponse::parse(text.as_bytes());
        assert_eq!(back, Ok(response));
    }

    #[test]
    fn a_bids_ext_and_cattax_are_written_back_as_read() {
        let text = r#"{"id":"r","seatbid":[{"bid":[{"id":"b","impid":"1","price":1,"cattax":2,"ext":{"dsa": {"behalf":"X","paid":"Y"}}}]}]}"#;
        let response = BidResponse::parse(text.as_bytes()).unwrap();
        let (_, bid) = response.bids().next().unwrap();
        assert_eq!(bid.cattax, Some(2));
        assert_eq!(response.to_json(), text);
        // Without them, nothing is written.
        let plain = r#"{"id":"r","seatbid":[{"bid":[{"id":"b","impid":"1","price":1}]}]}"#;
        assert_eq!(
            BidResponse::parse(plain.as_bytes()).unwrap().to_json(),
            plain
        );
    }

    /// A bid with every member, in the order they are written.
    const EVERY_MEMBER: &str = r#"{"id":"r","seatbid":[{"bid":[{"id":"b","impid":"1","price":2.5,"adm":"<VAST version=\"4.2\"/>","nurl":"https://x.test/w","burl":"https://x.test/b","lurl":"https://x.test/l","adid":"a","adomain":["brand.test"],"bundle":"com.brand","iurl":"https://x.test/i.png","cid":"c","crid":"cr","tactic":"t-\u00e9","cat":["IAB1"],"attr":[6],"apis":[2,7],"api":2,"protocol":7,"qagmediarating":2,"language":"pt","langb":"pt-BR","dealid":"d","w":640,"h":360,"wratio":16,"hratio":9,"mtype":2,"slotinpod":-1,"exp":300,"dur":15,"cattax":2,"ext":{"dsa":{}}}],"seat":"s"}],"cur":"EUR"}"#;

    #[test]
    fn every_bid_member_is_read_and_written_back() {
        let response = BidResponse::parse(EVERY_MEMBER.as_bytes()).unwrap();
        let (_, bid) = response.bids().next().unwrap();
        assert_eq!(bid.tactic.as_deref(), Some("t-\u{e9}"));
        assert_eq!(bid.apis, [ApiFramework::VPAID_2, ApiFramework::OMID_1]);
        assert_eq!(bid.api, Some(ApiFramework::VPAID_2));
        assert_eq!(bid.protocol, Some(Protocol::VAST_4));
        assert_eq!(bid.qagmediarating, Some(MediaRating::EVERYONE_OVER_12));
        assert_eq!(bid.language.as_deref(), Some("pt"));
        assert_eq!(bid.langb.as_deref(), Some("pt-BR"));
        assert_eq!((bid.wratio, bid.hratio), (Some(16), Some(9)));
        assert_eq!(bid.slotinpod, Some(SlotPositionInPod::LAST));
        assert_eq!(bid.dur, Some(15));
        let written = response.to_json();
        assert_eq!(BidResponse::parse(written.as_bytes()), Ok(response.clone()));
        // The same text, but for the escape the writer does not need.
        assert_eq!(written, EVERY_MEMBER.replace("\\u00e9", "\u{e9}"));
    }

    /// Values the lists do not name (newer entries, exchange-specific ones from 500) are kept.
    #[test]
    fn unknown_codes_of_a_bid_are_kept() {
        let text = r#"{"id":"r","seatbid":[{"bid":[{"id":"b","impid":"1","price":1,"apis":[7,500],"api":501,"protocol":99,"qagmediarating":9,"slotinpod":-7}]}]}"#;
        let response = BidResponse::parse(text.as_bytes()).unwrap();
        let (_, bid) = response.bids().next().unwrap();
        assert_eq!(bid.apis, [ApiFramework::OMID_1, ApiFramework(500)]);
        assert_eq!(bid.api, Some(ApiFramework(501)));
        assert_eq!(bid.protocol, Some(Protocol(99)));
        assert_eq!(bid.qagmediarating, Some(MediaRating(9)));
        assert_eq!(bid.slotinpod, Some(SlotPositionInPod(-7)));
        assert_eq!(response.to_json(), text);
    }

    #[test]
    fn no_bid_names_the_reason() {
        let text = BidResponse::no_bid("abc", NoBidReason::INSUFFICIENT_AUCTION_TIME).to_json();
        assert_eq!(text, r#"{"id":"abc","seatbid":[],"nbr":15}"#);
    }
}
