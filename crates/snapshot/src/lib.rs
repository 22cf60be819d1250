//! The campaign snapshot: what an edge serves from, compiled by the manager from the store's
//! [`Catalog`](marquee_model::Catalog), published as a file and over HTTP, and held by the edge
//! in memory as its storage.
//!
//! - [`compile`] / [`compile_with_stats`]: catalog → [`Snapshot`] (pure). Only servable objects
//!   enter, resolved (flight instants, a line item's advertiser) and sorted by id.
//! - [`Snapshot::encode`] / [`Snapshot::decode`]: the checksummed binary file described below.
//! - [`SnapshotDir`]: atomic publish, pruning, finding and loading the latest file.
//!
//! Invariants: a snapshot is immutable once built; every list in it is strictly ascending by id
//! (decode rejects anything else); targeting stays data ([`marquee_model::Targeting`]) for the
//! edge to index at load time.
//!
//! # File format, version 4
//!
//! A file is a 44-byte header followed by the payload. All header integers are little-endian.
//!
//! | offset | size | field |
//! |---:|---:|---|
//! | 0 | 8 | magic: the bytes `4D 51 53 4E 41 50 00 00` (`"MQSNAP\0\0"`) |
//! | 8 | 4 | format version, u32: `6` |
//! | 12 | 4 | flags, u32: `0` (no flags are defined) |
//! | 16 | 8 | snapshot version, u64: grows with every publish; the manager writes the store's change counter × 2³² + its live-statistics revision (see `marquee_manager::live`) |
//! | 24 | 8 | build time, i64: microseconds since 1970-01-01T00:00:00Z |
//! | 32 | 8 | payload length in bytes, u64 |
//! | 40 | 4 | checksum, u32: CRC-32 over bytes 0..40 followed by the payload |
//! | 44 | n | payload |
//!
//! The checksum is CRC-32/ISO-HDLC, the one of zlib, PNG and Ethernet (reflected polynomial
//! `0xEDB88320`, initial value and final XOR `0xFFFFFFFF`; `"123456789"` gives `0xCBF43926`).
//!
//! A reader checks, in this order, and rejects the file on the first failure: at least 44
//! bytes; the magic; the format version (before anything else, because a later version may lay
//! out the rest differently); flags are 0; the build time is a valid instant; the file is
//! exactly 44 + payload length bytes; the checksum; the payload decodes and is consumed
//! exactly; every list is strictly ascending by id. The HTTP ETag is `"v{version}-{checksum as 8
//! lower-case hex digits}"`, quotes included.
//!
//! ## Payload
//!
//! The payload is [`SnapshotData`] in the [postcard 1.x wire
//! format](https://postcard.jamesmunns.com/wire-format): no field names or tags, fields in
//! declaration order. Encodings used:
//!
//! - `u8`: one byte; `bool`: one byte, 0 or 1. `u16`, `u32`, `u64`: unsigned LEB128 varint.
//!   `i64`: zigzag (`(n << 1) ^ (n >> 63)`), then varint. `f64`: 8 bytes IEEE 754 little-endian.
//! - string: varint byte length, then UTF-8. `Vec<T>`: varint count, then the elements.
//!   `Option<T>`: byte `0` (none) or byte `1` then the value. A struct: its fields in order.
//! - enum: varint variant index (from 0, in the order listed here), then the variant's fields
//!   (nothing for a unit variant, the value for a newtype variant, fields in order otherwise).
//! - Every id (`AdvertiserId`, …) is a `u64`. `Micros` is an `i64`. `Currency` is a string of
//!   three ASCII capitals. A frequency-cap window is a string: a whole number then `m`, `h`,
//!   `d` or `w` (such as `30m`, `1d`).
//!
//! Types (`name: type`; `[T]` is a `Vec`, `T?` an `Option`):
//!
//! ```text
//! SnapshotData   = advertisers: [Advertiser], campaigns: [Campaign], line_items: [LineItem],
//!                  creatives: [Creative], publishers: [Publisher], sites: [Site],
//!                  placements: [Placement], assignments: [Assignment]
//! Advertiser     = id: u64, currency: string, domains: [string]
//! Campaign       = id: u64, advertiser_id: u64, frequency_caps: [FrequencyCap],
//!                  categories: [string], app_bundle: string?
//! FrequencyCap   = count: u32, window: string
//! LineItem       = id: u64, campaign_id: u64, advertiser_id: u64, tier: Tier, weight: u32,
//!                  flight_start: i64 (unix seconds), flight_end: i64? (unix seconds, exclusive),
//!                  time_zone: string (IANA), goal: Goal?, pacing: Pacing, price: Price,
//!                  frequency_caps: [FrequencyCap], targeting: Targeting?, rotation: Rotation,
//!                  placements: [u64] (strictly ascending), channels: Channels,
//!                  deals: [string], untokened_clicks: enum { Free, Charged },
//!                  competes_with_programmatic: bool
//! Channels       = direct: bool, exchange: bool
//! Tier           = enum { House, Remnant, Standard, Sponsorship }
//! Goal           = metric: enum { Impressions, Clicks, Spend }, daily: u64?, lifetime: u64?
//! Pacing         = enum { Even, Asap, FrontLoaded }
//! Price          = model: enum { Cpm, Cpc, Flat }, amount_micros: i64, currency: string
//! Rotation       = enum { Even, Weighted, OptimizedCtr }
//! Creative       = id: u64, line_item_id: u64, size: Size?, landing_url: string,
//!                  weight: u32, content: Content, ad_code: AdCode?, format: Format,
//!                  secure: bool, categories: [string]
//! AdCode         = parts: [enum { 0 Text(string), 1 Hole(Hole), 2 KeyValue(key: string) }]
//! Hole           = enum { ClickUrl, ClickUrlEncoded, ImpressionUrl, CacheBuster,
//!                         PlacementId, Timestamp }
//! Content        = enum {
//!                    0 Image { image_url: string, alt: string },
//!                    1 Html { html: string },
//!                    2 ThirdPartyTag { tag: string },
//!                    3 Native(NativeContent),
//!                    4 Vast { xml: string?, url: string?, duration_secs: u32,
//!                             mimes: [string], protocols: [u16] } }
//! NativeContent  = title: string, body: string, sponsored_by: string, image_url: string?,
//!                  icon_url: string?, call_to_action: string?, image_size: Size?,
//!                  icon_size: Size?
//! Assignment     = line_item_id: u64, creative_id: u64, weight: u32,
//!                  start: i64? (unix seconds), end: i64? (unix seconds, exclusive);
//!                  strictly ascending by (line_item_id, creative_id)
//! Publisher      = id: u64
//! Site           = id: u64, publisher_id: u64, domain: string
//! Placement      = id: u64, site_id: u64, sizes: [Size], formats: [Format],
//!                  image_tag: enum { Off, On }, programmatic: Programmatic?
//! Programmatic   = bidders: [string], timeout_ms: u32, floor_micros: i64,
//!                  revenue_share_permille: u32
//! Size           = w: u32, h: u32
//! Format         = enum { Banner, Video, Native, Audio }
//! Targeting      = enum {
//!                    0 All([Targeting]), 1 Any([Targeting]), 2 Not(Targeting),
//!                    3 Placement([u64]), 4 Site([u64]), 5 Domain([string]),
//!                    6 PageUrl([string]), 7 Country([string]), 8 Region([string]),
//!                    9 City([string]), 10 GeoRadius(lat: f64, lon: f64, radius_km: f64),
//!                    11 DeviceType([enum { Desktop, Phone, Tablet, Ctv, Other, Console }]),
//!                    12 Os([string]), 13 Browser([string]), 14 Language([string]),
//!                    15 DayOfWeek([enum { Mon, Tue, Wed, Thu, Fri, Sat, Sun }]),
//!                    16 Hour([from: u8, to: u8]), 17 KeyValue(key: string, values: [string]),
//!                    18 Segment([string]), 19 Ip([IpNet]), 20 Size([Size]),
//!                    21 Format([Format]), 22 Metro([u16]), 23 Postal([string]),
//!                    24 Asn([u32]),
//!                    25 ConnectionType([enum { CableDsl, Cellular, Corporate, Satellite }]) }
//! IpNet          = enum { 0 V4(4 address bytes: u8 each, prefix length: u8),
//!                         1 V6(16 address bytes: u8 each, prefix length: u8) }
//! ```
//!
//! The test `golden_bytes_pin_the_format` pins these bytes: if it fails, the layout changed and
//! [`FORMAT_VERSION`] must change with it. Targeting's variants and those of the enums it holds
//! are only ever appended (`Targeting` 22 to 25, `DeviceType`'s `Console` and `Part`'s
//! `KeyValue` came later, within version 4): every file an earlier build wrote decodes unchanged, and an earlier build refuses
//! only a file that uses a later variant (its edges keep the snapshot they hold).

mod compile;
mod data;
mod dir;
#[cfg(feature = "fixtures")]
pub mod fixtures;
mod format;
mod render;

pub use compile::{CompileStats, compile, compile_live, compile_with_stats};
pub use data::{
    AdvertiserEntry, AssignmentEntry, CampaignEntry, Channels, Content, CreativeEntry,
    LineItemEntry, NativeContent, PlacementEntry, ProgrammaticEntry, PublisherEntry, SiteEntry,
    SnapshotData,
};
pub use dir::{DirError, SnapshotDir};
pub use format::{FORMAT_VERSION, HEADER_LEN, Header, LoadError, MAGIC, Snapshot};
pub use render::{
    AdCode, Hole, LiveTable, LiveValues, Part, ad_code, ad_code_live, escape_html,
    uses_live_statistics,
};
