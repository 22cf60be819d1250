//! The event record: a fixed little-endian layout, encoded without allocating.

/// The record format version written by this crate, the first byte of every payload.
pub const RECORD_VERSION: u8 = 2;

/// Payload length of a version-2 record in bytes.
pub const PAYLOAD_LEN: usize = 72;

/// Payload length of a version-1 record: version 2 without the region. Still read, so logs
/// written before an upgrade are aggregated after it.
const PAYLOAD_LEN_V1: usize = 69;

/// What happened. Codes are stable on disk; `0` is never a kind, so a zeroed payload is
/// rejected.
///
/// The enum is `non_exhaustive` so adding kinds is not a breaking change; a reader that meets a
/// code it does not know reports [`DecodeError::UnknownKind`] instead of guessing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[repr(u8)]
pub enum EventKind {
    /// An ad decision was made (a creative chosen for a placement).
    Decision = 1,
    /// The impression beacon fired.
    Impression = 2,
    /// The click redirect was followed.
    Click = 3,
    /// The conversion pixel fired.
    Conversion = 4,
    /// A bid was sent to an exchange; `amount_micros` is the bid price (CPM).
    Bid = 5,
    /// The exchange's win notice arrived; `amount_micros` is the clearing price (CPM).
    Win = 6,
    /// The exchange's billing notice arrived: the one bidder event that spends and counts
    /// towards goals and caps; `amount_micros` is the clearing price (CPM).
    Billing = 7,
    /// The exchange's loss notice arrived; `creative` holds the OpenRTB loss reason code.
    Loss = 8,
    /// A request (an imp of a bid request, or an ad request) got no ad; `line_item` is 0 and
    /// `creative` holds the no-bid reason code.
    NoBid = 9,
    /// An impression judged invalid traffic: logged and reported, never counted, charged,
    /// capped or paced. `amount_micros` holds the [`InvalidReason`] code, not money.
    InvalidImpression = 10,
    /// A click judged invalid traffic; `amount_micros` holds the [`InvalidReason`] code.
    InvalidClick = 11,
    /// A conversion judged invalid traffic; `amount_micros` holds the [`InvalidReason`] code.
    InvalidConversion = 12,
    /// A placement's ad request was auctioned among programmatic demand (the gateway's
    /// bidders): one record per bidder called, in call order (one with `creative` 0 when none
    /// was). `creative` is the bidder's [`bidder_id`], `line_item` the [`auction`] outcome
    /// (flags, and the bidder's bids in the high 32 bits), `amount_micros` the bidder's
    /// winning bid's price net of the revenue share (a CPM in the gateway's currency) on the
    /// winner's record, 0 on the others.
    ProgrammaticAuction = 13,
    /// A winning bid's impression beacon fired: `line_item` is 0, `creative` the bidder's
    /// [`bidder_id`] (0 when the beacon did not name it), `amount_micros` the bid's price net
    /// of the revenue share (a CPM in the gateway's currency): the publisher's revenue, not
    /// any line item's spend.
    ProgrammaticImpression = 14,
    /// Bids counted in memory by [`EventLog::count`](crate::EventLog::count) and written as one
    /// record per shard, minute and row: `amount_micros` is the number of bids (1 or more), not
    /// money; `line_item`, `creative`, `placement`, `country`, `region` and `device` are the
    /// bids'; `time_micros` is the start of their minute; `user` is 0; `event_id` is the first
    /// counted bid's. (Code 15 is the sample record's, [`SAMPLE_KIND`].)
    BidsCounted = 16,
    /// No-bids counted as [`BidsCounted`](EventKind::BidsCounted) counts bids: `amount_micros`
    /// is the number of no-bids, `creative` their reason code, `line_item` 0.
    NoBidsCounted = 17,
}

impl EventKind {
    /// Every kind this version knows, in code order.
    pub const ALL: [EventKind; 16] = [
        EventKind::Decision,
        EventKind::Impression,
        EventKind::Click,
        EventKind::Conversion,
        EventKind::Bid,
        EventKind::Win,
        EventKind::Billing,
        EventKind::Loss,
        EventKind::NoBid,
        EventKind::InvalidImpression,
        EventKind::InvalidClick,
        EventKind::InvalidConversion,
        EventKind::ProgrammaticAuction,
        EventKind::ProgrammaticImpression,
        EventKind::BidsCounted,
        EventKind::NoBidsCounted,
    ];

    /// The on-disk code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The kind with this on-disk code, if this version knows it.
    pub fn from_code(code: u8) -> Option<EventKind> {
        match code {
            1 => Some(EventKind::Decision),
            2 => Some(EventKind::Impression),
            3 => Some(EventKind::Click),
            4 => Some(EventKind::Conversion),
            5 => Some(EventKind::Bid),
            6 => Some(EventKind::Win),
            7 => Some(EventKind::Billing),
            8 => Some(EventKind::Loss),
            9 => Some(EventKind::NoBid),
            10 => Some(EventKind::InvalidImpression),
            11 => Some(EventKind::InvalidClick),
            12 => Some(EventKind::InvalidConversion),
            13 => Some(EventKind::ProgrammaticAuction),
            14 => Some(EventKind::ProgrammaticImpression),
            16 => Some(EventKind::BidsCounted),
            17 => Some(EventKind::NoBidsCounted),
            _ => None,
        }
    }

    /// Whether the event answers an outside callback (a beacon, a redirect, an exchange's
    /// notice) that may arrive more than once, so a reader must deduplicate it by `event_id`.
    /// The others are logged once per request by the edge itself (an invalid event too: each
    /// invalid request is one record, with an id of its own).
    pub fn may_repeat(self) -> bool {
        match self {
            EventKind::Impression
            | EventKind::Click
            | EventKind::Conversion
            | EventKind::Win
            | EventKind::Billing
            | EventKind::Loss
            | EventKind::ProgrammaticImpression => true,
            EventKind::Decision
            | EventKind::ProgrammaticAuction
            | EventKind::Bid
            | EventKind::NoBid
            | EventKind::InvalidImpression
            | EventKind::InvalidClick
            | EventKind::InvalidConversion
            | EventKind::BidsCounted
            | EventKind::NoBidsCounted => false,
        }
    }

    /// Whether money or a goal counts on this event, so that strict durability makes it durable
    /// before the response is sent.
    pub fn is_billing(self) -> bool {
        match self {
            EventKind::Impression
            | EventKind::Click
            | EventKind::Conversion
            | EventKind::Billing
            | EventKind::ProgrammaticImpression => true,
            EventKind::Decision
            | EventKind::ProgrammaticAuction
            | EventKind::Bid
            | EventKind::Win
            | EventKind::Loss
            | EventKind::NoBid
            | EventKind::InvalidImpression
            | EventKind::InvalidClick
            | EventKind::InvalidConversion
            | EventKind::BidsCounted
            | EventKind::NoBidsCounted => false,
        }
    }

    /// The counter kind whose records count events of this kind, for the kinds
    /// [`EventLog::count`](crate::EventLog::count) takes: bids and no-bids, which carry no
    /// money and are only ever counted.
    pub fn counted_as(self) -> Option<EventKind> {
        match self {
            EventKind::Bid => Some(EventKind::BidsCounted),
            EventKind::NoBid => Some(EventKind::NoBidsCounted),
            _ => None,
        }
    }

    /// Whether a record of this kind is a counter: it stands for `amount_micros` events.
    pub fn is_counter(self) -> bool {
        matches!(self, EventKind::BidsCounted | EventKind::NoBidsCounted)
    }

    /// Whether the event is invalid traffic, its reason in `amount_micros`.
    pub fn is_invalid(self) -> bool {
        matches!(
            self,
            EventKind::InvalidImpression | EventKind::InvalidClick | EventKind::InvalidConversion
        )
    }
}

/// The outcome a [`EventKind::ProgrammaticAuction`] record carries in its `line_item`: flags
/// in the low bits, the bids the bidder sent in the high 32.
pub mod auction {
    /// The auction's first record: the one that counts the auction (and its direct outcome).
    pub const AUCTION: u64 = 1;
    /// The bidder did not answer in time.
    pub const TIMED_OUT: u64 = 1 << 1;
    /// The bidder's bid won: its markup served.
    pub const WON: u64 = 1 << 2;
    /// On the auction's first record: no bid won and the direct line item served.
    pub const DIRECT: u64 = 1 << 3;
    /// Where the bid count starts.
    pub const BIDS_SHIFT: u32 = 32;

    /// The outcome of one bidder's record.
    pub fn outcome(flags: u64, bids: u32) -> u64 {
        flags | (u64::from(bids) << BIDS_SHIFT)
    }

    /// The bids a record's outcome counts.
    pub fn bids(outcome: u64) -> u32 {
        u32::try_from(outcome >> BIDS_SHIFT).unwrap_or(u32::MAX)
    }
}

/// The stable id a programmatic record gives a gateway bidder (by its configured name): the
/// 64-bit FNV-1a hash of the name with the top bit cleared (it is stored in a signed 64-bit
/// column) and never 0 (no bidder). Reports name it back from the names they know.
pub fn bidder_id(name: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let hash = name
        .bytes()
        .fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME));
    (hash & (u64::MAX >> 1)).max(1)
}

/// Why an event is invalid traffic: a small closed set, stable on disk (the code sits in an
/// invalid event's `amount_micros`). `0` is never a reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[repr(u8)]
pub enum InvalidReason {
    /// A known crawler or spider by its user agent, or a `HEAD` request.
    Crawler = 1,
    /// A prefetch or prerender the browser made without the visitor seeing anything.
    Prefetch = 2,
    /// A client address in a data-centre or hosting network.
    Datacenter = 3,
    /// More events from one client (user key or address prefix) in a minute than allowed.
    Rate = 4,
    /// A click with no impression served for it (an image tag's click without its image).
    ClickWithoutImpression = 5,
    /// A click sooner after its impression than a person clicks.
    TooFast = 6,
    /// An untokened image-tag request on a placement that does not accept image tags.
    UntokenedDisabled = 7,
    /// A conversion whose token was already counted.
    RepeatConversion = 8,
    /// An image-tag request whose cache buster is missing or an unfilled macro, which many
    /// visitors would share.
    NoCacheBuster = 9,
}

impl InvalidReason {
    /// Every reason this version knows, in code order.
    pub const ALL: [InvalidReason; 9] = [
        InvalidReason::Crawler,
        InvalidReason::Prefetch,
        InvalidReason::Datacenter,
        InvalidReason::Rate,
        InvalidReason::ClickWithoutImpression,
        InvalidReason::TooFast,
        InvalidReason::UntokenedDisabled,
        InvalidReason::RepeatConversion,
        InvalidReason::NoCacheBuster,
    ];

    /// The on-disk code.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The reason with this code, if this version knows it.
    pub fn from_code(code: i64) -> Option<InvalidReason> {
        InvalidReason::ALL
            .into_iter()
            .find(|reason| i64::from(reason.code()) == code)
    }

    /// The reason's name in reports, metrics and docs.
    pub fn label(self) -> &'static str {
        match self {
            InvalidReason::Crawler => "crawler",
            InvalidReason::Prefetch => "prefetch",
            InvalidReason::Datacenter => "datacenter",
            InvalidReason::Rate => "rate",
            InvalidReason::ClickWithoutImpression => "click_without_impression",
            InvalidReason::TooFast => "too_fast",
            InvalidReason::UntokenedDisabled => "untokened_disabled",
            InvalidReason::RepeatConversion => "repeat_conversion",
            InvalidReason::NoCacheBuster => "no_cache_buster",
        }
    }
}

/// One event as the edge saw it. Values are raw: the manager sanitises them in bulk, so
/// nothing here is validated beyond the layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Event {
    pub kind: EventKind,
    /// Microseconds since 1970-01-01T00:00:00Z.
    pub time_micros: i64,
    pub line_item: u64,
    pub creative: u64,
    /// `0` = none.
    pub placement: u64,
    /// A hash of the user's key; `0` = none.
    pub user: u64,
    /// ISO 3166-1 alpha-2 in ASCII, or `[0, 0]` when unknown.
    pub country: [u8; 2],
    /// The ISO 3166-2 subdivision code within `country` (`CA` of `US-CA`): one to three ASCII
    /// letters or digits, left-aligned and padded with `0` bytes; all `0` when unknown.
    pub region: [u8; 3],
    pub device: u8,
    /// Money in micros: the spend for billing events, `0` otherwise.
    pub amount_micros: i64,
    /// The decision id / tracking-token nonce; the manager deduplicates on it.
    pub event_id: u128,
}

/// Why a payload with a valid frame is not an [`Event`] this version can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("empty payload")]
    Empty,
    #[error("record format version {0} is not supported (this reader knows {RECORD_VERSION})")]
    UnsupportedVersion(u8),
    #[error("payload of {actual} bytes, version {version} records have {expected}")]
    Length {
        version: u8,
        actual: usize,
        expected: usize,
    },
    #[error("unknown event kind {0}")]
    UnknownKind(u8),
    /// A sample record ([`SAMPLE_KIND`]): read it with [`Record::decode`].
    #[error("a sample record, not an event")]
    Sample,
}

impl DecodeError {
    /// Whether a later build wrote the record (a higher format version, or a kind added since):
    /// an upgraded reader can count it, so a reader should wait for one rather than drop it.
    pub fn from_newer_writer(&self) -> bool {
        match self {
            DecodeError::UnsupportedVersion(version) => *version > RECORD_VERSION,
            DecodeError::UnknownKind(_) => true,
            DecodeError::Empty | DecodeError::Length { .. } | DecodeError::Sample => false,
        }
    }
}

// Field offsets in a version-2 payload (see the crate docs for the table); version 1 is the
// same up to `EVENT_ID` and ends there.
const VERSION: usize = 0;
const KIND: usize = 1;
const DEVICE: usize = 2;
const COUNTRY: usize = 3;
const TIME: usize = 5;
const LINE_ITEM: usize = 13;
const CREATIVE: usize = 21;
const PLACEMENT: usize = 29;
const USER: usize = 37;
const AMOUNT: usize = 45;
const EVENT_ID: usize = 53;
const REGION: usize = 69;

impl Event {
    /// The version-2 payload.
    pub fn encode(&self) -> [u8; PAYLOAD_LEN] {
        let mut out = [0u8; PAYLOAD_LEN];
        self.encode_into(&mut out);
        out
    }

    /// Writes the version-2 payload into `out`; a fixed array so the offsets cannot overrun.
    pub(crate) fn encode_into(&self, out: &mut [u8; PAYLOAD_LEN]) {
        out[VERSION] = RECORD_VERSION;
        out[KIND] = self.kind.code();
        out[DEVICE] = self.device;
        out[COUNTRY..TIME].copy_from_slice(&self.country);
        out[TIME..LINE_ITEM].copy_from_slice(&self.time_micros.to_le_bytes());
        out[LINE_ITEM..CREATIVE].copy_from_slice(&self.line_item.to_le_bytes());
        out[CREATIVE..PLACEMENT].copy_from_slice(&self.creative.to_le_bytes());
        out[PLACEMENT..USER].copy_from_slice(&self.placement.to_le_bytes());
        out[USER..AMOUNT].copy_from_slice(&self.user.to_le_bytes());
        out[AMOUNT..EVENT_ID].copy_from_slice(&self.amount_micros.to_le_bytes());
        out[EVENT_ID..REGION].copy_from_slice(&self.event_id.to_le_bytes());
        out[REGION..PAYLOAD_LEN].copy_from_slice(&self.region);
    }

    /// How many events the record stands for: a counter's count (its `amount_micros`, 0 if
    /// negative), 1 for any other record.
    pub fn event_count(&self) -> u64 {
        if self.kind.is_counter() {
            u64::try_from(self.amount_micros).unwrap_or(0)
        } else {
            1
        }
    }

    /// Reads a payload of version 2, or of version 1 (whose events have no region). The version
    /// is checked first, because another version may lay out (and size) the rest differently.
    pub fn decode(payload: &[u8]) -> Result<Event, DecodeError> {
        let version = *payload.first().ok_or(DecodeError::Empty)?;
        let expected = match version {
            1 => PAYLOAD_LEN_V1,
            RECORD_VERSION => PAYLOAD_LEN,
            _ => return Err(DecodeError::UnsupportedVersion(version)),
        };
        // Samples have a length of their own: told apart before the length is checked.
        if version == RECORD_VERSION && payload.get(KIND) == Some(&SAMPLE_KIND) {
            return Err(DecodeError::Sample);
        }
        if payload.len() != expected {
            return Err(DecodeError::Length {
                version,
                actual: payload.len(),
                expected,
            });
        }
        // Version 1 is version 2's first bytes: pad it to one layout, the region left unknown.
        let mut p = [0u8; PAYLOAD_LEN];
        p[..expected].copy_from_slice(payload);
        let kind = EventKind::from_code(p[KIND]).ok_or(DecodeError::UnknownKind(p[KIND]))?;
        Ok(Event {
            kind,
            device: p[DEVICE],
            country: [p[COUNTRY], p[COUNTRY + 1]],
            region: array(&p, REGION),
            time_micros: i64::from_le_bytes(array(&p, TIME)),
            line_item: u64::from_le_bytes(array(&p, LINE_ITEM)),
            creative: u64::from_le_bytes(array(&p, CREATIVE)),
            placement: u64::from_le_bytes(array(&p, PLACEMENT)),
            user: u64::from_le_bytes(array(&p, USER)),
            amount_micros: i64::from_le_bytes(array(&p, AMOUNT)),
            event_id: u128::from_le_bytes(array(&p, EVENT_ID)),
        })
    }
}

/// `N` bytes of the payload from `at`. Every call site passes a constant offset with
/// `at + N <= PAYLOAD_LEN`, so the copy cannot go out of bounds.
fn array<const N: usize>(p: &[u8; PAYLOAD_LEN], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&p[at..at + N]);
    out
}

/// The kind code of a *sample record*: an ad request an edge kept for forecasting. Its payload
/// is not an [`Event`]'s but `version (2) | kind (15) | time i64 | body`: the time in
/// microseconds since 1970 (UTC), then a body this crate does not read (the forecast's encoding
/// of the request), 1 to [`MAX_SAMPLE_LEN`] bytes.
pub const SAMPLE_KIND: u8 = 15;

/// Bytes of a sample record's payload before its body.
pub const SAMPLE_HEADER_LEN: usize = 10;

/// The longest body a sample record holds: what fits a frame.
pub const MAX_SAMPLE_LEN: usize = crate::frame::MAX_PAYLOAD_LEN as usize - SAMPLE_HEADER_LEN;

/// One record of the log: an event, or a sample record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    Event(Event),
    Sample { time_micros: i64, body: &'a [u8] },
}

impl Record<'_> {
    /// Reads a payload of either form.
    pub fn decode(payload: &[u8]) -> Result<Record<'_>, DecodeError> {
        match Event::decode(payload) {
            Ok(event) => Ok(Record::Event(event)),
            Err(DecodeError::Sample) => {
                let (header, body) = payload
                    .split_first_chunk::<SAMPLE_HEADER_LEN>()
                    .filter(|(_, body)| !body.is_empty())
                    .ok_or(DecodeError::Length {
                        version: RECORD_VERSION,
                        actual: payload.len(),
                        expected: SAMPLE_HEADER_LEN + 1,
                    })?;
                let mut time = [0u8; 8];
                time.copy_from_slice(&header[2..]);
                Ok(Record::Sample {
                    time_micros: i64::from_le_bytes(time),
                    body,
                })
            }
            Err(error) => Err(error),
        }
    }
}

/// A sample record's payload header.
pub(crate) fn sample_header(time_micros: i64) -> [u8; SAMPLE_HEADER_LEN] {
    let mut header = [0u8; SAMPLE_HEADER_LEN];
    header[VERSION] = RECORD_VERSION;
    header[KIND] = SAMPLE_KIND;
    header[2..].copy_from_slice(&time_micros.to_le_bytes());
    header
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(kind: EventKind) -> Event {
        Event {
            kind,
            time_micros: -1_234_567,
            line_item: u64::MAX,
            creative: 2,
            placement: 0,
            user: 0xDEAD_BEEF_0BAD_F00D,
            country: *b"DE",
            region: *b"BE\0",
            device: 3,
            amount_micros: i64::MIN,
            event_id: u128::MAX - 7,
        }
    }

    #[test]
    fn every_kind_round_trips() {
        for kind in EventKind::ALL {
            let event = sample(kind);
            assert_eq!(Event::decode(&event.encode()), Ok(event));
            assert_eq!(EventKind::from_code(kind.code()), Some(kind));
        }
    }

    #[test]
    fn layout_is_little_endian_at_the_documented_offsets() {
        let bytes = sample(EventKind::Click).encode();
        assert_eq!(bytes[0], 2);
        assert_eq!(bytes[1], 3);
        assert_eq!(bytes[2], 3);
        assert_eq!(&bytes[3..5], b"DE");
        assert_eq!(&bytes[5..13], &(-1_234_567i64).to_le_bytes());
        assert_eq!(&bytes[53..69], &(u128::MAX - 7).to_le_bytes());
        assert_eq!(&bytes[69..72], b"BE\0");
    }

    #[test]
    fn version_1_records_read_with_no_region() {
        let event = sample(EventKind::Impression);
        let mut v1 = event.encode()[..PAYLOAD_LEN_V1].to_vec();
        v1[0] = 1;
        let read = Event::decode(&v1).unwrap();
        assert_eq!(read.region, [0; 3]);
        assert_eq!(
            Event {
                region: [0; 3],
                ..read
            },
            Event {
                region: [0; 3],
                ..event
            }
        );
        assert_eq!(
            Event::decode(&event.encode()[..PAYLOAD_LEN_V1 + 1]),
            Err(DecodeError::Length {
                version: 2,
                actual: 70,
                expected: 72
            })
        );
    }

    #[test]
    fn unknown_kinds_and_versions_are_typed_errors() {
        let mut bytes = sample(EventKind::Decision).encode();
        for code in [0u8, 18, 255] {
            bytes[1] = code;
            assert_eq!(Event::decode(&bytes), Err(DecodeError::UnknownKind(code)));
        }
        bytes[0] = 3;
        assert_eq!(
            Event::decode(&bytes),
            Err(DecodeError::UnsupportedVersion(3))
        );
        assert_eq!(Event::decode(&[]), Err(DecodeError::Empty));
        let good = sample(EventKind::Decision).encode();
        assert_eq!(
            Event::decode(&good[..PAYLOAD_LEN - 1]),
            Err(DecodeError::Length {
                version: 2,
                actual: 71,
                expected: 72
            })
        );
    }

    #[test]
    fn sample_records_are_told_from_events_whatever_their_length() {
        for len in [1, 61, 62, 63, 200] {
            let body = vec![7u8; len];
            let mut payload = sample_header(-5).to_vec();
            payload.extend_from_slice(&body);
            assert_eq!(Event::decode(&payload), Err(DecodeError::Sample));
            assert!(!DecodeError::Sample.from_newer_writer());
            assert_eq!(
                Record::decode(&payload),
                Ok(Record::Sample {
                    time_micros: -5,
                    body: &body
                })
            );
        }
        assert!(matches!(
            Record::decode(&sample_header(1)),
            Err(DecodeError::Length { .. })
        ));
        let event = sample(EventKind::Click);
        assert_eq!(Record::decode(&event.encode()), Ok(Record::Event(event)));
    }

    #[test]
    fn billing_kinds() {
        assert!(!EventKind::Decision.is_billing());
        assert!(EventKind::Impression.is_billing());
        assert!(EventKind::Click.is_billing());
        assert!(EventKind::Conversion.is_billing());
    }

    /// Counter kinds carry counts, not money, are written once by the edge (never repeated
    /// callbacks), and only bids and no-bids are counted.
    #[test]
    fn counter_kinds() {
        for kind in EventKind::ALL {
            assert_eq!(kind.is_counter(), kind.code() >= 16, "{kind:?}");
            assert_ne!(kind.code(), SAMPLE_KIND);
            if kind.is_counter() {
                assert!(!kind.is_billing() && !kind.may_repeat() && !kind.is_invalid());
            }
        }
        assert_eq!(EventKind::Bid.counted_as(), Some(EventKind::BidsCounted));
        assert_eq!(
            EventKind::NoBid.counted_as(),
            Some(EventKind::NoBidsCounted)
        );
        assert_eq!(EventKind::Billing.counted_as(), None);
        let counted = Event {
            amount_micros: 7,
            ..sample(EventKind::BidsCounted)
        };
        assert_eq!(counted.event_count(), 7);
        assert_eq!(sample(EventKind::Bid).event_count(), 1);
        let negative = Event {
            amount_micros: -3,
            ..sample(EventKind::NoBidsCounted)
        };
        assert_eq!(negative.event_count(), 0);
    }

    /// Bidder ids are stable across builds (they are stored), fit a signed 64-bit column and
    /// tell names apart; an outcome keeps its flags and bid count apart.
    #[test]
    fn bidder_ids_and_auction_outcomes() {
        assert_eq!(bidder_id("a"), 0xaf63_dc4c_8601_ec8c & (u64::MAX >> 1));
        assert_eq!(bidder_id(""), 0xcbf2_9ce4_8422_2325 & (u64::MAX >> 1));
        assert_ne!(bidder_id("alpha"), bidder_id("beta"));
        assert!(i64::try_from(bidder_id("zeta-9_x")).is_ok());
        let outcome = auction::outcome(auction::AUCTION | auction::WON, 3);
        assert_eq!(auction::bids(outcome), 3);
        assert_eq!(outcome & 0xff, auction::AUCTION | auction::WON);
        assert_eq!(auction::bids(auction::outcome(auction::TIMED_OUT, 0)), 0);
    }
}
