use marquee_model::{
    AdvertiserId, CampaignId, CreativeId, Currency, Format, LineItemId, Micros, PacingMode,
    PlacementId, Price, PricingModel, PublisherId, RotationMode, SiteId, Size, Targeting, Tier,
};
use marquee_snapshot::{
    AdCode, AdvertiserEntry, AssignmentEntry, CampaignEntry, Channels, Content, CreativeEntry,
    FORMAT_VERSION, HEADER_LEN, Header, Hole, LineItemEntry, LoadError, MAGIC, Part,
    PlacementEntry, PublisherEntry, SiteEntry, Snapshot, SnapshotData, compile,
};

use crate::fixture::*;

/// Recomputes the checksum after a test edits the bytes, so that a later check is reached.
fn reseal(bytes: &mut [u8]) {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&bytes[..40]);
    hasher.update(&bytes[HEADER_LEN..]);
    let crc = hasher.finalize();
    bytes[40..44].copy_from_slice(&crc.to_le_bytes());
}

/// Replaces the payload, fixing length and checksum.
fn with_payload(bytes: &[u8], payload: &[u8]) -> Vec<u8> {
    let mut out = bytes[..HEADER_LEN].to_vec();
    out[32..40].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    reseal(&mut out);
    out
}

fn encoded() -> Vec<u8> {
    compile(&rich(), now()).encode()
}

#[test]
fn encode_then_decode_gives_the_same_snapshot() {
    let snapshot = compile(&rich(), now());
    assert_eq!(snapshot.data.creatives.len(), 5, "every content type is in");
    let decoded = Snapshot::decode(&snapshot.encode()).expect("decodes");
    assert_eq!(decoded, snapshot);

    let empty = Snapshot {
        version: 0,
        built_at: jiff::Timestamp::UNIX_EPOCH,
        data: SnapshotData::default(),
    };
    assert_eq!(Snapshot::decode(&empty.encode()).expect("decodes"), empty);
}

#[test]
fn the_header_is_laid_out_as_documented() {
    let snapshot = compile(&rich(), now());
    let (header, bytes) = snapshot.encode_with_header();
    assert_eq!(bytes, snapshot.encode(), "encoding is deterministic");
    assert_eq!(&bytes[0..8], b"MQSNAP\0\0");
    assert_eq!(bytes[0..8], MAGIC);
    assert_eq!(bytes[8..12], FORMAT_VERSION.to_le_bytes());
    assert_eq!(bytes[12..16], [0; 4]);
    assert_eq!(bytes[16..24], 7u64.to_le_bytes());
    assert_eq!(bytes[24..32], now().as_microsecond().to_le_bytes());
    assert_eq!(
        bytes[32..40],
        ((bytes.len() - HEADER_LEN) as u64).to_le_bytes()
    );
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&bytes[..40]);
    hasher.update(&bytes[44..]);
    assert_eq!(bytes[40..44], hasher.finalize().to_le_bytes());

    let parsed = Header::parse(&bytes[..HEADER_LEN]).expect("the header alone parses");
    assert_eq!(parsed, header);
    assert_eq!(parsed.version, 7);
    assert_eq!(parsed.built_at, now());
    assert_eq!(parsed.payload_len, (bytes.len() - HEADER_LEN) as u64);
    assert_eq!(parsed.to_bytes()[..], bytes[..HEADER_LEN]);
    assert_eq!(parsed.etag(), format!("\"v7-{:08x}\"", parsed.checksum));
}

#[test]
fn the_checksum_is_the_documented_crc32() {
    assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
}

#[test]
fn a_flipped_payload_byte_fails_the_checksum() {
    let good = encoded();
    let header = Header::parse(&good).expect("parses");
    for at in [HEADER_LEN, good.len() / 2, good.len() - 1] {
        let mut bytes = good.clone();
        bytes[at] ^= 0x01;
        match Snapshot::decode(&bytes) {
            Err(LoadError::Checksum { expected, computed }) => {
                assert_eq!(expected, header.checksum);
                assert_ne!(computed, expected);
            }
            other => panic!("byte {at}: expected a checksum error, got {other:?}"),
        }
    }
}

#[test]
fn a_flipped_snapshot_version_or_build_time_byte_fails_the_checksum() {
    for at in [16, 23, 24] {
        let mut bytes = encoded();
        bytes[at] ^= 0x01;
        assert!(
            matches!(Snapshot::decode(&bytes), Err(LoadError::Checksum { .. })),
            "byte {at}"
        );
    }
}

#[test]
fn a_flipped_format_version_byte_is_an_unsupported_format() {
    // The format version is checked before the checksum: a later format may compute it
    // differently, so "unsupported" is the accurate report.
    let mut bytes = encoded();
    bytes[8] ^= 0x80;
    match Snapshot::decode(&bytes) {
        Err(LoadError::UnsupportedFormat { found, supported }) => {
            assert_eq!(found, FORMAT_VERSION ^ 0x80);
            assert_eq!(supported, FORMAT_VERSION);
        }
        other => panic!("expected an unsupported format, got {other:?}"),
    }
}

#[test]
fn an_unknown_format_version_is_refused_even_with_a_correct_checksum() {
    let mut bytes = encoded();
    let next = FORMAT_VERSION + 1;
    bytes[8..12].copy_from_slice(&next.to_le_bytes());
    reseal(&mut bytes);
    assert!(matches!(
        Header::parse(&bytes),
        Err(LoadError::UnsupportedFormat { found, supported })
            if found == next && supported == FORMAT_VERSION
    ));
    let err = Snapshot::decode(&bytes).expect_err("refused");
    assert!(matches!(
        err,
        LoadError::UnsupportedFormat { found, supported }
            if found == next && supported == FORMAT_VERSION
    ));
    assert!(
        err.to_string()
            .contains(&format!("version {next} is not supported")),
        "{err}"
    );
}

#[test]
fn unknown_flags_are_refused() {
    let mut bytes = encoded();
    bytes[12] = 1;
    reseal(&mut bytes);
    assert!(matches!(
        Snapshot::decode(&bytes),
        Err(LoadError::UnsupportedFlags(1))
    ));
}

#[test]
fn truncated_and_padded_files_are_refused() {
    let good = encoded();
    let payload_len = (good.len() - HEADER_LEN) as u64;
    for len in [0, 1, 8, HEADER_LEN - 1] {
        assert!(
            matches!(Snapshot::decode(&good[..len]), Err(LoadError::TooShort { len: l }) if l == len),
            "{len} bytes"
        );
    }
    for len in [HEADER_LEN, HEADER_LEN + 1, good.len() - 1] {
        match Snapshot::decode(&good[..len]) {
            Err(LoadError::PayloadLength { declared, actual }) => {
                assert_eq!(declared, payload_len);
                assert_eq!(actual, (len - HEADER_LEN) as u64);
            }
            other => panic!("{len} bytes: expected a payload length error, got {other:?}"),
        }
    }
    let mut padded = good.clone();
    padded.push(0);
    assert!(matches!(
        Snapshot::decode(&padded),
        Err(LoadError::PayloadLength { actual, .. }) if actual == payload_len + 1
    ));
}

#[test]
fn other_files_are_not_snapshots() {
    let mut bytes = encoded();
    bytes[..8].copy_from_slice(b"PK\x03\x04\0\0\0\0");
    match Snapshot::decode(&bytes) {
        Err(LoadError::BadMagic { found }) => assert_eq!(&found[..4], b"PK\x03\x04"),
        other => panic!("expected bad magic, got {other:?}"),
    }
    let text = b"<!DOCTYPE html><html><body>502 Bad Gateway</body></html>";
    assert!(matches!(
        Snapshot::decode(text),
        Err(LoadError::BadMagic { .. })
    ));
}

#[test]
fn an_out_of_range_build_time_is_refused() {
    let mut bytes = encoded();
    bytes[24..32].copy_from_slice(&i64::MAX.to_le_bytes());
    reseal(&mut bytes);
    assert!(matches!(
        Snapshot::decode(&bytes),
        Err(LoadError::BuildTime(i64::MAX))
    ));
}

#[test]
fn a_payload_that_does_not_decode_is_refused_after_the_checksum() {
    let good = encoded();
    // Seven lists, the first claiming a billion advertisers that are not there.
    let garbage = with_payload(&good, &[0x80, 0x94, 0xeb, 0xdc, 0x03]);
    assert!(matches!(
        Snapshot::decode(&garbage),
        Err(LoadError::Payload(_))
    ));

    let mut trailing = good[HEADER_LEN..].to_vec();
    trailing.extend_from_slice(&[0, 0]);
    assert!(matches!(
        Snapshot::decode(&with_payload(&good, &trailing)),
        Err(LoadError::TrailingPayload(2))
    ));
}

#[test]
fn unsorted_lists_are_refused() {
    let mut snapshot = compile(&rich(), now());
    snapshot.data.line_items.reverse();
    assert!(matches!(
        Snapshot::decode(&snapshot.encode()),
        Err(LoadError::Unsorted("line_items"))
    ));

    let mut snapshot = compile(&rich(), now());
    snapshot.data.line_items[1].placements.reverse();
    assert!(matches!(
        Snapshot::decode(&snapshot.encode()),
        Err(LoadError::Unsorted("line_items[].placements"))
    ));

    let mut snapshot = compile(&rich(), now());
    let duplicate = snapshot.data.creatives[0].clone();
    snapshot.data.creatives.insert(0, duplicate);
    assert!(matches!(
        Snapshot::decode(&snapshot.encode()),
        Err(LoadError::Unsorted("creatives"))
    ));
}

/// A small snapshot written by hand so that the bytes below depend only on the format.
fn golden_snapshot() -> Snapshot {
    Snapshot {
        version: 300,
        built_at: jiff::Timestamp::from_microsecond(1_000_001).expect("valid"),
        data: SnapshotData {
            advertisers: vec![AdvertiserEntry {
                id: AdvertiserId(1),
                currency: Currency::EUR,
                domains: vec!["a.de".into()],
            }],
            campaigns: vec![CampaignEntry {
                id: CampaignId(2),
                advertiser_id: AdvertiserId(1),
                frequency_caps: vec![cap(3, "1d")],
                categories: vec!["IAB2".into()],
                app_bundle: Some("a.b".into()),
            }],
            line_items: vec![LineItemEntry {
                id: LineItemId(3),
                campaign_id: CampaignId(2),
                advertiser_id: AdvertiserId(1),
                tier: Tier::Sponsorship,
                weight: 100,
                flight_start: -1,
                flight_end: Some(64),
                time_zone: "UTC".into(),
                goal: None,
                pacing: PacingMode::Asap,
                price: Price {
                    model: PricingModel::Cpc,
                    amount_micros: Micros(150),
                    currency: Currency::USD,
                },
                frequency_caps: vec![],
                targeting: Some(Targeting::Not(Box::new(Targeting::Ip(vec![
                    "10.0.0.0/8".parse().expect("valid net"),
                ])))),
                rotation: RotationMode::Weighted,
                placements: vec![PlacementId(6)],
                channels: Channels {
                    direct: true,
                    exchange: true,
                },
                deals: vec!["D1".into()],
                untokened_clicks: Default::default(),
                competes_with_programmatic: false,
            }],
            creatives: vec![CreativeEntry {
                id: CreativeId(4),
                line_item_id: LineItemId(3),
                size: Some(Size { w: 300, h: 250 }),
                landing_url: "h".into(),
                weight: 1,
                content: Content::Html { html: "x".into() },
                ad_code: Some(AdCode {
                    parts: vec![Part::Text("<x>".into()), Part::Hole(Hole::ClickUrl)],
                }),
                format: Format::Banner,
                secure: true,
                categories: vec!["IAB3-1".into()],
            }],
            publishers: vec![PublisherEntry { id: PublisherId(5) }],
            sites: vec![SiteEntry {
                id: SiteId(5),
                publisher_id: PublisherId(5),
                domain: "s.de".into(),
            }],
            placements: vec![PlacementEntry {
                id: PlacementId(6),
                site_id: SiteId(5),
                sizes: vec![],
                formats: vec![Format::Native],
                image_tag: Default::default(),
                programmatic: None,
            }],
            assignments: vec![AssignmentEntry {
                line_item_id: LineItemId(3),
                creative_id: CreativeId(4),
                weight: 7,
                start: Some(-1),
                end: None,
            }],
        },
    }
}

#[test]
fn golden_bytes_pin_the_format() {
    // Annotated payload; if this changes, bump FORMAT_VERSION and update the crate docs.
    let payload: &[&[u8]] = &[
        &[1, 1, 3, b'E', b'U', b'R', 1, 4, b'a', b'.', b'd', b'e'], // advertisers
        &[1, 2, 1, 1, 3, 2, b'1', b'd'],                            // campaigns
        &[1, 4, b'I', b'A', b'B', b'2', 1, 3, b'a', b'.', b'b'],    // categories, app bundle
        &[1, 3, 2, 1],                                              // line item ids
        &[3, 100, 1, 1, 128, 1],      // tier, weight, start -1, end Some(64)
        &[3, b'U', b'T', b'C', 0, 1], // zone, no goal, pacing Asap
        &[1, 172, 2, 3, b'U', b'S', b'D'], // price: Cpc, 150 µ, USD
        &[0, 1, 2, 19, 1, 0, 10, 0, 0, 0, 8], // no caps, Some(Not(Ip([V4 10.0.0.0/8])))
        &[1, 1, 6],                   // rotation Weighted, placements [6]
        &[1, 1, 1, 2, b'D', b'1', 0], // channels direct and exchange, deals ["D1"], clicks free
        &[0],                         // does not compete with programmatic demand
        &[1, 4, 3, 1, 172, 2, 250, 1, 1, b'h', 1, 1, 1, b'x'], // creatives
        &[1, 2, 0, 3, b'<', b'x', b'>', 1, 0], // ad code: Some([Text("<x>"), Hole(ClickUrl)])
        &[0, 1, 1, 6, b'I', b'A', b'B', b'3', b'-', b'1'], // Banner, secure, categories
        &[1, 5],                      // publishers
        &[1, 5, 5, 4, b's', b'.', b'd', b'e'], // sites
        &[1, 6, 5, 0, 1, 2, 0, 0],    // placements (image tag off, no programmatic demand)
        &[1, 3, 4, 7, 1, 1, 0],       // assignments: weight 7, start Some(-1), no end
    ];
    let payload = payload.concat();
    let bytes = golden_snapshot().encode();
    assert_eq!(
        bytes[HEADER_LEN..],
        payload[..],
        "payload changed: {:?}",
        &bytes[HEADER_LEN..]
    );
    assert_eq!(bytes[16..24], 300u64.to_le_bytes());
    assert_eq!(bytes[24..32], 1_000_001i64.to_le_bytes());
    assert_eq!(
        Snapshot::decode(&bytes).expect("decodes"),
        golden_snapshot()
    );
}
