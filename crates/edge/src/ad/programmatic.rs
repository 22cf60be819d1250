//! Programmatic demand on a publisher's own ad request: a placement with it on (and an edge with
//! a gateway) decides its direct line items as always, then — unless the winner is a
//! sponsorship or standard line item that does not compete — asks the gateway's bidders in an
//! OpenRTB auction bounded by the placement's timeout. The bid serves when its price less the
//! publisher's revenue share beats the direct winner's CPM; else the direct line item does.
//! The direct decision is reserved and logged only once it has won, so a lost auction leaves
//! its line item's caps and pacing as they were.

use std::fmt::Write as _;
use std::num::NonZeroU64;
use std::time::{Duration, Instant};

use marquee_engine::Decision;
use marquee_eventlog::{Event, EventKind, auction, bidder_id};
use marquee_model::{Currency, PlacementId, Rounding, Size, Tier};
use marquee_openrtb::{BidResponse, write_micros};
use marquee_snapshot::{PlacementEntry, ProgrammaticEntry, SnapshotData};
use marquee_tracking::{Claims, TokenKind};
use sha2::{Digest, Sha256};

use super::placement::PageContext;
use super::{Decided, Served};
use crate::query::AdFormat;
use crate::render::json_string;
use crate::{Edge, Loaded, events, track};

/// Per mille: the unit of the revenue share.
const PERMILLE: i64 = 1_000;

/// A placement to auction, once its direct line items decided.
pub(super) struct Auction<'s> {
    pub(super) placement: PlacementId,
    pub(super) entry: &'s PlacementEntry,
    pub(super) settings: &'s ProgrammaticEntry,
    /// The direct winner, filled but not yet reserved nor logged; `None` when no line item
    /// may serve.
    pub(super) direct: Option<Served<'s>>,
    /// The direct winner's CPM in the gateway's currency: what a bid must beat, net.
    pub(super) direct_cpm: i64,
}

/// The placement's programmatic settings when its ad request meets programmatic demand here:
/// it is on, the edge has a gateway, and the answer is markup (not an image tag's image or
/// click, which show a creative's image). The one branch the ad path takes on it.
pub(super) fn settings<'s>(
    page: &PageContext<'_>,
    entry: &'s PlacementEntry,
) -> Option<&'s ProgrammaticEntry> {
    let settings = entry.programmatic.as_ref()?;
    (page.edge.gateway.is_some()
        && !matches!(page.query.format, Some(AdFormat::Img | AdFormat::Click)))
    .then_some(settings)
}

/// Whether the direct `decision` meets the bids: always for the price-priority tiers (remnant,
/// house), and for sponsorship and standard line items only when they opt in.
pub(super) fn competes(data: &SnapshotData, decision: &Decision) -> bool {
    match decision.tier {
        Tier::Remnant | Tier::House => true,
        Tier::Standard | Tier::Sponsorship => data
            .line_item(decision.line_item)
            .is_some_and(|li| li.competes_with_programmatic),
    }
}

/// The direct decision's CPM in the gateway's currency, rounded up (a bid must beat all of it);
/// 0 for none (a house or unpriced line item is beaten by any bid).
pub(super) fn direct_cpm(edge: &Edge, decision: Option<&Decision>) -> i64 {
    let (Some(decision), Some(gateway)) = (decision, edge.gateway.as_ref()) else {
        return 0;
    };
    let to = gateway.config().currency;
    gateway
        .config()
        .rates
        .convert(decision.bid_cpm, decision.currency, to, Rounding::Up)
        .map_or(i64::MAX, |m| m.0)
}

/// Runs the auction of every placement in `auctions` and adds each one's winner to `decided`,
/// the bids' markup appended to `text`.
pub(super) async fn run<'s>(
    loaded: &'s Loaded,
    page: &PageContext<'_>,
    decided: &mut Decided<'s>,
    text: &mut String,
    auctions: Vec<Auction<'s>>,
) {
    let Some(gateway) = page.edge.gateway.as_ref() else {
        return;
    };
    let data = &loaded.engine.snapshot().data;
    let currency = gateway.config().currency;
    // Every deadline is set before the first auction starts: run one after the other, the
    // auctions of a request together still end by the latest of them. The timeout is the
    // placement's budget of its own, on top of the ad request's deadline.
    let started = Instant::now();
    for auction in auctions {
        let json = bid_request(page, data, currency, &auction);
        let deadline = started + Duration::from_millis(u64::from(auction.settings.timeout_ms));
        let won = gateway
            .auction_among(
                json.as_bytes(),
                "",
                move |_| deadline,
                None,
                &auction.settings.bidders,
            )
            .await
            .ok()
            .and_then(|auctioned| best_bid(page, &auction, auctioned));
        match won {
            Some(bid) => decided.served.push(serve_bid(page, &auction, bid, text)),
            None => {
                if let Some(direct) = auction.direct {
                    super::placement::commit(page, loaded, &direct);
                    decided.served.push(direct);
                }
            }
        }
    }
}

/// The OpenRTB 2.6 request for one placement: one banner imp of its sizes, floored at the
/// placement's floor and at the direct winner's CPM grossed up by the revenue share; the page,
/// device and user of the ad request; `tmax` the placement's timeout. Members without a value
/// are left out (OpenRTB's optional members are absent, not null). Written straight into the
/// body: building a `serde_json::Value` tree and dropping it cost about 45,000 instructions an
/// ad request, most of the unified decision's own cost.
fn bid_request(
    page: &PageContext<'_>,
    data: &SnapshotData,
    currency: Currency,
    auction: &Auction<'_>,
) -> String {
    let settings = auction.settings;
    let sizes = if page.query.sizes.is_empty() {
        &auction.entry.sizes[..]
    } else {
        &page.query.sizes[..]
    };
    let floor = settings.floor_micros.max(gross_up(
        auction.direct_cpm,
        settings.revenue_share_permille,
    ));
    let site = data.site(auction.entry.site_id);
    let page_url = page.query.page_url.as_deref();
    let host = page_url
        .and_then(|u| url::Url::parse(u).ok())
        .and_then(|u| u.host_str().map(str::to_owned));
    let domain = host.as_deref().or_else(|| site.map(|s| s.domain.as_str()));
    let geo = page.visitor.geo();
    let point = geo
        .point
        .filter(|(lat, lon)| lat.is_finite() && lon.is_finite());

    let mut out = String::with_capacity(512);
    let mut request = Members::open(&mut out);
    // Writing to a String cannot fail.
    let _ = write!(request.key("id"), "\"{:016x}\"", page.request_id);
    {
        let imps = request.key("imp");
        imps.push('[');
        let mut imp = Members::open(imps);
        imp.str("id", "1");
        let _ = write!(imp.key("tagid"), "\"{}\"", auction.placement);
        let mut banner = Members::open(imp.key("banner"));
        let format = banner.key("format");
        format.push('[');
        for (i, size) in sizes.iter().enumerate() {
            let comma = if i == 0 { "" } else { "," };
            let _ = write!(format, "{comma}{{\"w\":{},\"h\":{}}}", size.w, size.h);
        }
        format.push(']');
        banner.close();
        write_micros(floor, imp.key("bidfloor"));
        imp.str("bidfloorcur", currency.as_str());
        let secure = page_url.is_some_and(|u| u.starts_with("https:"));
        imp.key("secure").push(if secure { '1' } else { '0' });
        imp.close();
        imps.push(']');
    }
    {
        let mut json_site = Members::open(request.key("site"));
        let _ = write!(json_site.key("id"), "\"{}\"", auction.entry.site_id.0);
        json_site.opt_str("domain", domain);
        json_site.opt_str("page", page_url);
        if let Some(site) = site {
            let mut publisher = Members::open(json_site.key("publisher"));
            let _ = write!(publisher.key("id"), "\"{}\"", site.publisher_id.0);
            publisher.close();
        }
        json_site.close();
    }
    {
        let mut device = Members::open(request.key("device"));
        device.opt_str("ua", page.user_agent);
        if let Some(ip) = page.ip {
            let _ = write!(device.key("ip"), "\"{ip}\"");
        }
        if point.is_some() || geo.region.is_some() || geo.city.is_some() {
            let mut json_geo = Members::open(device.key("geo"));
            if let Some((lat, lon)) = point {
                let _ = write!(json_geo.key("lat"), "{lat}");
                let _ = write!(json_geo.key("lon"), "{lon}");
            }
            json_geo.opt_str("region", geo.region);
            json_geo.opt_str("city", geo.city);
            json_geo.close();
        }
        device.close();
    }
    if let Some(user_id) = page.user_id {
        let mut user = Members::open(request.key("user"));
        user.str("id", user_id);
        user.close();
    }
    let _ = write!(request.key("tmax"), "{}", settings.timeout_ms);
    let _ = write!(request.key("cur"), "[\"{}\"]", currency.as_str());
    request.key("at").push('1');
    request.close();
    out
}

/// A JSON object being written: its members, the commas between them.
struct Members<'o> {
    out: &'o mut String,
    empty: bool,
}

impl<'o> Members<'o> {
    fn open(out: &'o mut String) -> Members<'o> {
        out.push('{');
        Members { out, empty: true }
    }

    /// Starts member `key` (plain ASCII, written as is); its value goes into what it returns.
    fn key(&mut self, key: &str) -> &mut String {
        if !self.empty {
            self.out.push(',');
        }
        self.empty = false;
        self.out.push('"');
        self.out.push_str(key);
        self.out.push_str("\":");
        self.out
    }

    fn str(&mut self, key: &str, value: &str) {
        json_string(value, self.key(key));
    }

    fn opt_str(&mut self, key: &str, value: Option<&str>) {
        if let Some(value) = value {
            self.str(key, value);
        }
    }

    fn close(self) {
        self.out.push('}');
    }
}

/// What a bidder must bid for its price net of `share_permille` to reach `net`, rounded up.
fn gross_up(net: i64, share_permille: u32) -> i64 {
    let keep = PERMILLE - i64::from(share_permille);
    if net <= 0 || keep <= 0 {
        return net.max(0);
    }
    let scaled = i128::from(net) * i128::from(PERMILLE);
    let keep = i128::from(keep);
    let gross = (scaled + keep - 1) / keep;
    i64::try_from(gross).unwrap_or(i64::MAX)
}

/// A bid's price net of the publisher's revenue share, rounded down.
fn net_of_share(price: i64, share_permille: u32) -> i64 {
    let keep = PERMILLE - i64::from(share_permille).min(PERMILLE);
    i64::try_from(i128::from(price) * i128::from(keep) / i128::from(PERMILLE)).unwrap_or(0)
}

/// The winning bid of an auction, ready to serve.
struct WonBid {
    adm: String,
    burl: Option<String>,
    bidder: String,
    /// Net of the revenue share, in the gateway's currency.
    net_micros: i64,
    size: Option<Size>,
}

/// The auction's winning bid when it beats the direct winner net of the revenue share (a tie
/// goes to the direct line item); logs the auction either way.
fn best_bid(
    page: &PageContext<'_>,
    auction: &Auction<'_>,
    auctioned: marquee_gateway::Auctioned,
) -> Option<WonBid> {
    let share = auction.settings.revenue_share_permille;
    let response = auctioned
        .response
        .as_deref()
        .and_then(|text| BidResponse::parse(text.as_bytes()).ok());
    let bid = response.as_ref().and_then(|r| {
        r.seatbid
            .iter()
            .flat_map(|s| &s.bid)
            .filter(|b| b.adm.as_deref().is_some_and(|adm| !adm.is_empty()))
            .max_by_key(|b| b.price_micros)
    });
    let won = bid.filter(|b| net_of_share(b.price_micros, share) > auction.direct_cpm);
    let net = won.map_or(0, |b| net_of_share(b.price_micros, share));
    let bidder = won.and_then(|bid| {
        auctioned
            .bidders
            .iter()
            .find(|(id, _)| *id == bid.id)
            .map(|(_, name)| name.as_str())
    });
    let direct = won.is_none() && auction.direct.is_some();
    log_auction(
        page,
        auction.placement,
        &auctioned.called,
        bidder,
        net,
        direct,
    );
    let bid = won?;
    let bidder = bidder.unwrap_or_default().to_owned();
    Some(WonBid {
        adm: bid.adm.as_deref().unwrap_or_default().to_owned(),
        burl: bid
            .burl
            .as_deref()
            .filter(|b| !b.is_empty())
            .map(str::to_owned),
        bidder,
        net_micros: net,
        size: bid.w.zip(bid.h).map(|(w, h)| Size { w, h }),
    })
}

/// Logs one auction of a placement: a record per bidder called, its bids, whether it timed
/// out and, for the winner, its bid's price net of the revenue share; the first record also
/// counts the auction and whether the direct line item served (see
/// `EventKind::ProgrammaticAuction`). One record more per bidder than one per auction: an
/// append is about 90 ns, beside an auction's request written and bidders called.
fn log_auction(
    page: &PageContext<'_>,
    placement: PlacementId,
    called: &[marquee_gateway::Called],
    winner: Option<&str>,
    net_micros: i64,
    direct: bool,
) {
    let Some(gateway) = page.edge.gateway.as_ref() else {
        return;
    };
    let mut first = auction::AUCTION | if direct { auction::DIRECT } else { 0 };
    let mut record = |bidder: u64, flags: u64, bids: u32, amount_micros: i64| {
        let event = Event {
            kind: EventKind::ProgrammaticAuction,
            time_micros: page.now.as_microsecond(),
            line_item: auction::outcome(flags | std::mem::take(&mut first), bids),
            creative: bidder,
            placement: placement.0,
            user: page.user_key,
            country: page.visitor.country_bytes(),
            region: page.visitor.region_bytes(),
            device: page.visitor.device_type().map_or(0, |d| d as u8 + 1),
            amount_micros,
            event_id: 0,
        };
        events::log(page.edge, event);
    };
    for call in called {
        let name = gateway.bidder_name(call.bidder).unwrap_or_default();
        let won = winner == Some(name);
        let flags = if call.timed_out {
            auction::TIMED_OUT
        } else {
            0
        } | if won { auction::WON } else { 0 };
        record(
            bidder_id(name),
            flags,
            call.bids,
            if won { net_micros } else { 0 },
        );
    }
    if called.is_empty() {
        record(0, 0, 0, 0);
    }
}

/// The ad of a winning bid: its markup, then the edge's own impression beacon, whose token
/// says a programmatic impression (line item 0) worth the bid's net price and binds the bid's
/// billing URL and bidder, sent with it in the beacon's URL, fired when the beacon counts.
fn serve_bid<'s>(
    page: &PageContext<'_>,
    auction: &Auction<'s>,
    bid: WonBid,
    text: &mut String,
) -> Served<'s> {
    let burl = bid.burl.as_deref().unwrap_or("");
    let claims = Claims {
        kind: TokenKind::Impression,
        line_item: 0,
        creative: billing_binding(&bid.bidder, burl),
        placement: NonZeroU64::new(auction.placement.0),
        user: page.user_key,
        issued_at: page.now.as_second(),
        lifetime: page.edge.token_lifetime_secs(),
        nonce: page.request_id ^ auction.placement.0.rotate_left(32),
        amount_micros: u64::try_from(bid.net_micros).ok(),
    };
    let start = text.len();
    text.push_str(&bid.adm);
    text.push_str("<img src=\"");
    track::impression_url(page.edge, &claims, text);
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query.append_pair("n", &bid.bidder);
    if !burl.is_empty() {
        query.append_pair("b", burl);
    }
    let _ = write!(text, "&amp;{}", query.finish().replace('&', "&amp;"));
    text.push_str("\" width=\"1\" height=\"1\" alt=\"\" style=\"position:absolute;left:-9999px\">");
    Served {
        placement: auction.placement,
        line_item: 0,
        creative_id: 0,
        creative: None,
        size: bid.size.or_else(|| auction.entry.sizes.first().copied()),
        claims,
        html: start..text.len(),
    }
}

/// The 64 bits of SHA-256 over a billing URL (empty for none) and its bidder that a
/// programmatic impression's token carries (as its creative): the signed token vouches for
/// the name and URL sent beside it.
pub(crate) fn billing_binding(bidder: &str, burl: &str) -> u64 {
    let mut hash = Sha256::new();
    hash.update(bidder.as_bytes());
    hash.update([0]);
    hash.update(burl.as_bytes());
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// What a programmatic impression's beacon names beside its token, once the token's binding
/// vouches for it: the winning bidder and its billing URL (empty for none).
pub(crate) struct Beacon {
    bidder: String,
    burl: String,
}

impl Beacon {
    /// The bidder's id, which the impression's event carries as its creative.
    pub(crate) fn bidder_id(&self) -> u64 {
        bidder_id(&self.bidder)
    }
}

/// The bidder and billing URL beside a programmatic impression's token, when its binding is
/// the one the token carries; a mismatch (an altered URL) counts as an invalid token.
pub(crate) fn beacon(edge: &Edge, claims: &Claims, query_text: &str) -> Option<Beacon> {
    let (mut bidder, mut burl) = (None, None);
    for (key, value) in url::form_urlencoded::parse(query_text.as_bytes()) {
        match key.as_ref() {
            "n" => bidder = Some(value),
            "b" => burl = Some(value),
            _ => {}
        }
    }
    let bidder = bidder?;
    let burl = burl.unwrap_or_default();
    if billing_binding(&bidder, &burl) != claims.creative {
        edge.counters.invalid_tokens.inc();
        return None;
    }
    Some(Beacon {
        bidder: bidder.into_owned(),
        burl: burl.into_owned(),
    })
}

/// A programmatic impression's beacon counted: its billing notice, if it has one, goes to its
/// bidder.
pub(crate) fn bill(edge: &Edge, beacon: &Beacon) {
    if let Some(gateway) = edge.gateway.as_ref()
        && !beacon.burl.is_empty()
    {
        gateway.bill(&beacon.bidder, &beacon.burl);
    }
}

/// Whether a counted impression's claims are a programmatic impression's: an ad request's
/// (a placement) without a line item.
pub(crate) fn is_programmatic(claims: &Claims) -> bool {
    claims.line_item == 0 && claims.placement.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revenue_share_nets_and_grosses_up() {
        // 10 %: a 3.00 bid is worth 2.70 to the publisher; beating 2.00 net takes 2.222223.
        assert_eq!(net_of_share(3_000_000, 100), 2_700_000);
        assert_eq!(gross_up(2_000_000, 100), 2_222_223);
        assert!(net_of_share(gross_up(2_000_000, 100), 100) >= 2_000_000);
        assert_eq!(gross_up(2_000_000, 0), 2_000_000);
        assert_eq!(gross_up(0, 100), 0);
    }

    #[test]
    fn the_binding_covers_bidder_and_url() {
        let bound = billing_binding("a", "http://x/b?p=1");
        assert_eq!(bound, billing_binding("a", "http://x/b?p=1"));
        assert_ne!(bound, billing_binding("a", "http://x/b?p=2"));
        assert_ne!(bound, billing_binding("b", "http://x/b?p=1"));
    }
}
