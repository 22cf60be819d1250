//! The index must retrieve exactly the line items the naive evaluator accepts, for random
//! expressions, links and requests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::net::IpAddr;
use std::sync::Arc;

use jiff::Timestamp;
use marquee_engine::{Blocked, Deal, Device, Engine, Geo, Request, Scratch, Slot, User};
use marquee_model::{
    Channel, ConnectionType, DeviceType, Format, GeoCircle, HourRange, KeyValues, PlacementId,
    SiteId, Size, Targeting, Tier, Weekday,
};
use proptest::prelude::*;
use proptest::sample::{select, subsequence};

const COUNTRIES: [&str; 4] = ["DE", "AT", "US", "FR"];
const REGIONS: [&str; 3] = ["DE-BY", "US-CA", "FR-IDF"];
const CITIES: [&str; 2] = ["Berlin", "Paris"];
const METROS: [u16; 3] = [501, 803, 807];
const POSTALS: [&str; 3] = ["10115", "75001", "SW1A 1AA"];
const ASNS: [u32; 3] = [3320, 6805, 4_200_000_000];
const CONNECTIONS: [ConnectionType; 4] = [
    ConnectionType::CableDsl,
    ConnectionType::Cellular,
    ConnectionType::Corporate,
    ConnectionType::Satellite,
];
const OSES: [&str; 2] = ["iOS", "Android"];
const BROWSERS: [&str; 2] = ["Chrome", "Safari"];
const LANGUAGES: [&str; 2] = ["de", "en"];
const SEGMENTS: [&str; 4] = ["s1", "s2", "s3", "s4"];
const KEYS: [&str; 2] = ["section", "topic"];
const VALUES: [&str; 3] = ["a", "b", "c"];
const DOMAINS: [&str; 4] = [
    "example.com",
    "news.example.com",
    "other.org",
    "www.other.org",
];
const URLS: [&str; 3] = [
    "https://example.com/",
    "https://example.com/sport/",
    "https://other.org/",
];
const NETS: [&str; 3] = ["10.0.0.0/8", "192.168.1.0/24", "2001:db8::/32"];
const IPS: [&str; 4] = ["10.1.2.3", "192.168.1.7", "8.8.8.8", "2001:db8::1"];
const SIZES: [Size; 3] = [
    Size { w: 300, h: 250 },
    Size { w: 728, h: 90 },
    Size { w: 320, h: 50 },
];
const FORMATS: [Format; 3] = [Format::Banner, Format::Video, Format::Native];
const DEVICES: [DeviceType; 5] = [
    DeviceType::Desktop,
    DeviceType::Phone,
    DeviceType::Tablet,
    DeviceType::Ctv,
    DeviceType::Console,
];
const WEEKDAYS: [Weekday; 7] = Weekday::ALL;
const ZONES: [&str; 4] = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"];
const DEALS: [&str; 3] = ["D1", "D2", "D3"];
const TIERS: [Tier; 4] = [
    Tier::Sponsorship,
    Tier::Standard,
    Tier::Remnant,
    Tier::House,
];
const CHANNELS: [&[Channel]; 3] = [
    &[Channel::Direct],
    &[Channel::Exchange],
    &[Channel::Direct, Channel::Exchange],
];
const POINTS: [(f64, f64); 3] = [(52.52, 13.40), (48.86, 2.35), (40.71, -74.0)];

fn strings(values: &'static [&'static str]) -> impl Strategy<Value = Vec<String>> {
    subsequence(values, 1..=values.len().min(3))
        .prop_map(|v| v.into_iter().map(str::to_owned).collect())
}

fn leaf() -> impl Strategy<Value = Targeting> {
    prop_oneof![
        subsequence(vec![1u64, 2, 3, 4], 1..=2)
            .prop_map(|ids| Targeting::Placement(ids.into_iter().map(PlacementId).collect())),
        subsequence(vec![1u64, 2], 1..=2)
            .prop_map(|ids| Targeting::Site(ids.into_iter().map(SiteId).collect())),
        strings(&DOMAINS).prop_map(Targeting::Domain),
        strings(&URLS).prop_map(Targeting::PageUrl),
        strings(&COUNTRIES).prop_map(Targeting::Country),
        strings(&REGIONS).prop_map(Targeting::Region),
        strings(&CITIES).prop_map(Targeting::City),
        subsequence(&METROS[..], 1..=2).prop_map(Targeting::Metro),
        strings(&POSTALS).prop_map(Targeting::Postal),
        subsequence(&ASNS[..], 1..=2).prop_map(Targeting::Asn),
        subsequence(&CONNECTIONS[..], 1..=2).prop_map(Targeting::ConnectionType),
        (select(&POINTS[..]), 1.0f64..1500.0).prop_map(|((lat, lon), radius_km)| {
            Targeting::GeoRadius(GeoCircle {
                lat,
                lon,
                radius_km,
            })
        }),
        subsequence(&DEVICES[..], 1..=2).prop_map(Targeting::DeviceType),
        strings(&OSES).prop_map(Targeting::Os),
        strings(&BROWSERS).prop_map(Targeting::Browser),
        strings(&LANGUAGES).prop_map(Targeting::Language),
        subsequence(&WEEKDAYS[..], 1..=3).prop_map(Targeting::DayOfWeek),
        prop::collection::vec((0u8..24, 1u8..=24), 1..=2).prop_map(|ranges| {
            Targeting::Hour(
                ranges
                    .into_iter()
                    .map(|(a, b)| HourRange {
                        from: a.min(b.saturating_sub(1)),
                        to: b.max(a + 1),
                    })
                    .collect(),
            )
        }),
        (select(&KEYS[..]), strings(&VALUES)).prop_map(|(key, values)| {
            Targeting::KeyValue(KeyValues {
                key: key.to_owned(),
                values,
            })
        }),
        strings(&SEGMENTS).prop_map(Targeting::Segment),
        subsequence(&NETS[..], 1..=2)
            .prop_map(|nets| Targeting::Ip(nets.iter().map(|n| n.parse().expect("net")).collect())),
        subsequence(&SIZES[..], 1..=2).prop_map(Targeting::Size),
        subsequence(&FORMATS[..], 1..=2).prop_map(Targeting::Format),
    ]
}

fn expression() -> impl Strategy<Value = Targeting> {
    leaf().prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 1..=4).prop_map(Targeting::All),
            prop::collection::vec(inner.clone(), 1..=4).prop_map(Targeting::Any),
            inner.prop_map(|t| Targeting::Not(Box::new(t))),
        ]
    })
}

#[derive(Debug, Clone)]
struct LineItemSpec {
    targeting: Option<Targeting>,
    zone: &'static str,
    links: Vec<u64>,
    tier: Tier,
    channels: &'static [Channel],
    deals: Vec<&'static str>,
}

fn line_item_spec() -> impl Strategy<Value = LineItemSpec> {
    (
        prop::option::weighted(0.9, expression()),
        select(&ZONES[..]),
        prop_oneof![
            3 => Just(Vec::new()),
            1 => subsequence(vec![1u64, 2, 3, 4], 1..=3),
        ],
        select(&TIERS[..]),
        select(&CHANNELS[..]),
        prop_oneof![
            2 => Just(Vec::new()),
            1 => subsequence(&DEALS[..], 1..=2),
        ],
    )
        .prop_map(
            |(targeting, zone, links, tier, channels, deals)| LineItemSpec {
                targeting,
                zone,
                links,
                tier,
                channels,
                deals,
            },
        )
}

/// Owned request data; `Request` borrows from it.
#[derive(Debug, Clone)]
struct RequestSpec {
    channel: Channel,
    private_auction: bool,
    deals: Vec<Deal<'static>>,
    now: i64,
    placement: Option<u64>,
    site: Option<u64>,
    domain: Option<&'static str>,
    url: Option<String>,
    country: Option<&'static str>,
    region: Option<&'static str>,
    city: Option<&'static str>,
    point: Option<(f64, f64)>,
    metro: Option<u16>,
    postal: Option<&'static str>,
    asn: Option<u32>,
    connection_type: Option<ConnectionType>,
    device: Option<DeviceType>,
    os: Option<&'static str>,
    browser: Option<&'static str>,
    language: Option<&'static str>,
    ip: Option<IpAddr>,
    segments: Vec<&'static str>,
    key_values: Vec<(&'static str, &'static str)>,
    sizes: Vec<Size>,
    formats: Vec<Format>,
}

fn maybe<T: Clone + std::fmt::Debug + 'static>(
    values: &'static [T],
) -> impl Strategy<Value = Option<T>> {
    prop::option::weighted(0.8, select(values))
}

fn request_spec() -> impl Strategy<Value = RequestSpec> {
    let a = (
        0i64..14 * 86_400,
        prop::option::weighted(0.8, 1u64..=5),
        prop::option::weighted(0.8, 1u64..=3),
        maybe(&[
            "a.news.example.com",
            "example.com",
            "www.other.org",
            "elsewhere.net",
        ]),
        maybe(&[
            "https://example.com/sport/x",
            "https://example.com/",
            "https://other.org/a",
            "https://nowhere.net/",
        ]),
        maybe(&["DE", "AT", "US", "FR", "JP"]),
        maybe(&REGIONS),
        maybe(&CITIES),
    );
    let b = (
        prop::option::weighted(0.8, (select(&POINTS[..]), -3.0f64..3.0)),
        maybe(&DEVICES),
        maybe(&OSES),
        maybe(&BROWSERS),
        maybe(&LANGUAGES),
        maybe(&IPS),
        subsequence(&SEGMENTS[..], 0..=3),
        prop::collection::vec((select(&KEYS[..]), select(&VALUES[..])), 0..=3),
        subsequence(&SIZES[..], 0..=2),
        subsequence(&FORMATS[..], 0..=2),
    );
    let c = (
        select(&[Channel::Direct, Channel::Exchange][..]),
        any::<bool>(),
        subsequence(&DEALS[..], 0..=2),
    );
    // One value of each outside the line items' lists too, and often none.
    let geo = (
        maybe(&[501, 803, 807, 602]),
        maybe(&["10115", "75001", "SW1A 1AA", "99999"]),
        maybe(&[3320, 6805, 4_200_000_000, 15169]),
        maybe(&CONNECTIONS),
    );
    (a, b, c, geo).prop_map(
        |(
            (offset, placement, site, domain, url, country, region, city),
            (point, device, os, browser, language, ip, segments, key_values, sizes, formats),
            (channel, private_auction, deals),
            (metro, postal, asn, connection_type),
        )| RequestSpec {
            channel,
            private_auction,
            deals: deals
                .into_iter()
                .map(|id| Deal { id, floor: None })
                .collect(),
            now: 1_767_225_600 + offset,
            placement,
            site,
            domain,
            url: url.map(str::to_owned),
            country,
            region,
            city,
            point: point.map(|((lat, lon), jitter)| (lat + jitter, lon + jitter)),
            metro,
            postal,
            asn,
            connection_type,
            device,
            os,
            browser,
            language,
            ip: ip.map(|ip| ip.parse().expect("ip")),
            segments,
            key_values,
            sizes,
            formats,
        },
    )
}

fn engine_of(specs: &[LineItemSpec]) -> Engine {
    let line_items = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let mut li = common::line_item(i as u64 + 1, spec.tier, spec.targeting.clone());
            li.time_zone = spec.zone.to_owned();
            li.placements = spec.links.iter().copied().map(PlacementId).collect();
            li.channels = spec.channels.into();
            li.deals = spec.deals.iter().map(|d| (*d).to_owned()).collect();
            li
        })
        .collect();
    Engine::new(common::snapshot(line_items, None, Vec::new()))
}

fn request_of(spec: &RequestSpec) -> Request<'_> {
    Request {
        now: Timestamp::from_second(spec.now).expect("valid"),
        channel: spec.channel,
        placement: spec.placement.map(PlacementId),
        site: spec.site.map(SiteId),
        slot: Slot {
            sizes: &spec.sizes,
            formats: &spec.formats,
            deals: &spec.deals,
            private_auction: spec.private_auction,
            ..Slot::default()
        },
        domain: spec.domain,
        page_url: spec.url.as_deref(),
        device: Device {
            device_type: spec.device,
            os: spec.os,
            browser: spec.browser,
            language: spec.language,
            ip: spec.ip,
        },
        geo: Geo {
            country: spec.country,
            region: spec.region,
            city: spec.city,
            point: spec.point,
            metro: spec.metro,
            postal: spec.postal,
            asn: spec.asn,
            connection_type: spec.connection_type,
        },
        user: User {
            id: None,
            segments: &spec.segments,
        },
        key_values: &spec.key_values,
        blocked: Blocked::default(),
        bid_currency: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1_000, ..ProptestConfig::default() })]

    #[test]
    fn index_agrees_with_the_naive_evaluator(
        line_items in prop::collection::vec(line_item_spec(), 1..40),
        requests in prop::collection::vec(request_spec(), 1..12),
    ) {
        let engine = engine_of(&line_items);
        let mut scratch = Scratch::default();
        for spec in &requests {
            let request = request_of(spec);
            let mut indexed = engine.matching(&request, &mut scratch).to_vec();
            indexed.sort_unstable();
            let naive = engine.matching_naively(&request);
            prop_assert_eq!(indexed, naive, "request {:?}", spec);
        }
    }
}

/// Unix seconds shortly before the 2026 clock changes of the zones above: the United States in
/// March and November, the European Union in March and October.
const CLOCK_CHANGES: [i64; 4] = [
    1_772_942_400, // 2026-03-08T04:00:00Z
    1_774_742_400, // 2026-03-29T00:00:00Z
    1_792_886_400, // 2026-10-25T00:00:00Z
    1_793_512_800, // 2026-11-01T05:00:00Z
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The same across clock changes, with the requests a few hours apart at most, so that a
    /// worker's cached local times are reused, outlived and invalidated by a change within one
    /// case (and the requests' times go backwards as often as forwards).
    #[test]
    fn index_agrees_with_the_naive_evaluator_across_clock_changes(
        line_items in prop::collection::vec(line_item_spec(), 1..40),
        requests in prop::collection::vec((request_spec(), 0..CLOCK_CHANGES.len(), 0i64..4 * 3_600), 1..24),
    ) {
        let engine = engine_of(&line_items);
        let mut scratch = Scratch::default();
        for (spec, change, offset) in &requests {
            let spec = RequestSpec { now: CLOCK_CHANGES[*change] + offset, ..spec.clone() };
            let request = request_of(&spec);
            let mut indexed = engine.matching(&request, &mut scratch).to_vec();
            indexed.sort_unstable();
            let naive = engine.matching_naively(&request);
            prop_assert_eq!(indexed, naive, "request {:?}", spec);
        }
    }
}

/// A worker keeps local times per zone number across requests; an engine for another snapshot
/// numbers its zones anew, so what the worker kept for the last engine must not carry over.
#[test]
fn a_worker_moving_to_another_engine_converts_its_times_again() {
    let noon_in = |zone| LineItemSpec {
        targeting: Some(Targeting::Hour(vec![HourRange { from: 12, to: 13 }])),
        zone,
        links: Vec::new(),
        tier: Tier::Standard,
        channels: &[Channel::Direct],
        deals: Vec::new(),
    };
    // 12:00 UTC is 17:30 in Kolkata: only the UTC line item is at its noon hour.
    let kolkata_first = engine_of(&[noon_in("Asia/Kolkata"), noon_in("UTC")]);
    let utc_first = engine_of(&[noon_in("UTC"), noon_in("Asia/Kolkata")]);
    let request = Request::at(common::now());
    let mut scratch = Scratch::default();
    for _ in 0..2 {
        assert_eq!(kolkata_first.matching(&request, &mut scratch), &[1]);
        assert_eq!(utc_first.matching(&request, &mut scratch), &[0]);
    }
}

#[test]
fn a_huge_expression_falls_back_to_whole_evaluation() {
    // 5^5 conjunctions in DNF: far past the expansion limit.
    let any = |k: usize| {
        Targeting::Any(
            (0..5)
                .map(|v| Targeting::Segment(vec![format!("k{k}v{v}")]))
                .collect(),
        )
    };
    let expr = Targeting::All((0..5).map(any).collect());
    let engine = engine_of(&[LineItemSpec {
        targeting: Some(expr),
        zone: "UTC",
        links: vec![2],
        tier: Tier::Standard,
        channels: &[Channel::Direct],
        deals: Vec::new(),
    }]);
    let mut scratch = Scratch::default();
    let segments_hit: Vec<String> = (0..5).map(|k| format!("k{k}v3")).collect();
    let hit: Vec<&str> = segments_hit.iter().map(String::as_str).collect();
    let mut request = Request::at(common::now());
    request.placement = Some(PlacementId(2));
    request.user.segments = &hit;
    assert_eq!(engine.matching(&request, &mut scratch), &[0]);
    request.user.segments = &hit[..4];
    assert!(engine.matching(&request, &mut scratch).is_empty());
    request.user.segments = &hit;
    request.placement = Some(PlacementId(3));
    assert!(engine.matching(&request, &mut scratch).is_empty());
    let _ = Arc::clone(engine.snapshot());
}
