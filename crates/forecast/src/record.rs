//! One sampled ad request and its binary encoding.
//!
//! # Encoding, version 1
//!
//! Little-endian; `varint` is unsigned LEB128 (at most 10 bytes); a string is a varint byte
//! length then UTF-8.
//!
//! | field | encoding |
//! |---|---|
//! | version | u8: `1` |
//! | minute | u32: minutes since 1970-01-01T00:00Z |
//! | user | u64: salted user hash, `0` for none |
//! | placement | varint |
//! | present | u16: bit n set when optional field n below is present |
//! | 0 device type, 1 connection type | u8 code each (see [`device_code`], [`connection_code`]) |
//! | 2 metro | u16 |
//! | 3 asn | varint (fits u32) |
//! | 4 point | i32 latitude, i32 longitude, in hundredths of a degree |
//! | 5 country … 12 page URL | string each: country, region, city, postal, os, browser, language, page URL |
//! | sizes | varint count, then `w`, `h` as varints |
//! | key-values | varint count, then key and value strings |
//! | segments | varint count, then strings |
//!
//! A decoder rejects, with a [`DecodeError`]: another version, a record cut short, unknown
//! bits or codes, a point outside ±90/±180 degrees, a string that is not UTF-8 or longer than
//! [`MAX_TEXT`] (or [`MAX_URL`] for the page URL), lists longer than their limits.

use marquee_engine::Request;
use marquee_model::{ConnectionType, DeviceType, PlacementId, Size};

/// The encoding's version byte.
pub const VERSION: u8 = 1;
/// Longest string kept, in bytes (the page URL has its own limit).
pub const MAX_TEXT: usize = 256;
/// Longest page URL kept, in bytes.
pub const MAX_URL: usize = 1024;
/// Most sizes, key-values and segments kept per record.
pub const MAX_SIZES: usize = 16;
pub const MAX_KEY_VALUES: usize = 64;
pub const MAX_SEGMENTS: usize = 128;

/// One sampled ad request: what the engine's targeting reads, its minute and a salted hash of
/// its user (for frequency caps). No IP address and no user id: the location is what the geo
/// database made of the address, the point is rounded to about a kilometre.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRecord {
    /// Minutes since 1970-01-01T00:00Z.
    pub minute: u32,
    /// A salted hash of the user id (the salt stays on the edge and changes as the operator
    /// decides), `0` when the request had none.
    pub user: u64,
    pub placement: PlacementId,
    /// The sizes the request named; empty when it took the placement's.
    pub sizes: Vec<Size>,
    /// Without query string and fragment: a prefix target rarely needs them, and they carry
    /// personal data.
    pub page_url: Option<String>,
    pub device_type: Option<DeviceType>,
    pub os: Option<String>,
    pub browser: Option<String>,
    pub language: Option<String>,
    pub country: Option<String>,
    pub region: Option<String>,
    pub city: Option<String>,
    pub postal: Option<String>,
    pub metro: Option<u16>,
    pub asn: Option<u32>,
    pub connection_type: Option<ConnectionType>,
    /// Latitude and longitude in hundredths of a degree.
    pub point: Option<(i32, i32)>,
    pub key_values: Vec<(String, String)>,
    pub segments: Vec<String>,
}

impl Default for SampleRecord {
    /// Placement 0 (no placement), nothing else known.
    fn default() -> Self {
        SampleRecord {
            minute: 0,
            user: 0,
            placement: PlacementId(0),
            sizes: Vec::new(),
            page_url: None,
            device_type: None,
            os: None,
            browser: None,
            language: None,
            country: None,
            region: None,
            city: None,
            postal: None,
            metro: None,
            asn: None,
            connection_type: None,
            point: None,
            key_values: Vec::new(),
            segments: Vec::new(),
        }
    }
}

/// Why bytes are not a record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("record version {0} is not known (this build reads version {VERSION})")]
    Version(u8),
    #[error("the record ends before its {0}")]
    Truncated(&'static str),
    #[error("the record's {0} is not valid")]
    Invalid(&'static str),
    #[error("the record's {0} is longer than allowed")]
    TooLong(&'static str),
}

/// Code of a device type in the encoding.
pub fn device_code(device: DeviceType) -> u8 {
    match device {
        DeviceType::Desktop => 0,
        DeviceType::Phone => 1,
        DeviceType::Tablet => 2,
        DeviceType::Ctv => 3,
        DeviceType::Other => 4,
        DeviceType::Console => 5,
    }
}

fn device_of(code: u8) -> Option<DeviceType> {
    Some(match code {
        0 => DeviceType::Desktop,
        1 => DeviceType::Phone,
        2 => DeviceType::Tablet,
        3 => DeviceType::Ctv,
        4 => DeviceType::Other,
        5 => DeviceType::Console,
        _ => return None,
    })
}

/// Code of a connection type in the encoding.
pub fn connection_code(connection: ConnectionType) -> u8 {
    match connection {
        ConnectionType::CableDsl => 0,
        ConnectionType::Cellular => 1,
        ConnectionType::Corporate => 2,
        ConnectionType::Satellite => 3,
    }
}

fn connection_of(code: u8) -> Option<ConnectionType> {
    Some(match code {
        0 => ConnectionType::CableDsl,
        1 => ConnectionType::Cellular,
        2 => ConnectionType::Corporate,
        3 => ConnectionType::Satellite,
        _ => return None,
    })
}

const FIELDS: u16 = (1 << 13) - 1;

impl SampleRecord {
    /// Appends the record's encoding to `out`. Strings and lists past their limits are cut
    /// (strings at a character boundary), so that what is written always decodes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(VERSION);
        out.extend_from_slice(&self.minute.to_le_bytes());
        out.extend_from_slice(&self.user.to_le_bytes());
        varint(out, self.placement.0);
        let texts = self.texts();
        let mut present = 0u16;
        let flags = [
            self.device_type.is_some(),
            self.connection_type.is_some(),
            self.metro.is_some(),
            self.asn.is_some(),
            self.point.is_some(),
        ];
        for (bit, set) in flags
            .into_iter()
            .chain(texts.iter().map(|t| t.is_some()))
            .enumerate()
        {
            if set {
                present |= 1 << bit;
            }
        }
        out.extend_from_slice(&present.to_le_bytes());
        if let Some(device) = self.device_type {
            out.push(device_code(device));
        }
        if let Some(connection) = self.connection_type {
            out.push(connection_code(connection));
        }
        if let Some(metro) = self.metro {
            out.extend_from_slice(&metro.to_le_bytes());
        }
        if let Some(asn) = self.asn {
            varint(out, u64::from(asn));
        }
        if let Some((lat, lon)) = self.point {
            out.extend_from_slice(&lat.clamp(-9_000, 9_000).to_le_bytes());
            out.extend_from_slice(&lon.clamp(-18_000, 18_000).to_le_bytes());
        }
        for (i, text) in texts.iter().enumerate() {
            if let Some(text) = text {
                string(out, text, if i == 7 { MAX_URL } else { MAX_TEXT });
            }
        }
        let sizes = &self.sizes[..self.sizes.len().min(MAX_SIZES)];
        varint(out, sizes.len() as u64);
        for size in sizes {
            varint(out, u64::from(size.w));
            varint(out, u64::from(size.h));
        }
        let pairs = &self.key_values[..self.key_values.len().min(MAX_KEY_VALUES)];
        varint(out, pairs.len() as u64);
        for (key, value) in pairs {
            string(out, key, MAX_TEXT);
            string(out, value, MAX_TEXT);
        }
        let segments = &self.segments[..self.segments.len().min(MAX_SEGMENTS)];
        varint(out, segments.len() as u64);
        for segment in segments {
            string(out, segment, MAX_TEXT);
        }
    }

    /// The record of an ad request for one placement as the engine was asked it: `sizes` the
    /// ones the request named (empty when it took the placement's), `user` the salted hash
    /// ([`crate::Sampler::user_hash`]). What the engine never needs to be shown again is left
    /// out: the IP address and user id, the page URL's query string and fragment; the point is
    /// rounded to hundredths of a degree.
    pub fn of_request(
        request: &Request<'_>,
        placement: PlacementId,
        sizes: &[Size],
        user: u64,
    ) -> SampleRecord {
        let owned = |text: Option<&str>| text.map(str::to_owned);
        let geo = &request.geo;
        SampleRecord {
            // Minutes since 1970 fit a u32 until the year 10,136.
            minute: u32::try_from(request.now.as_second().div_euclid(60)).unwrap_or(0),
            user,
            placement,
            sizes: sizes.iter().take(MAX_SIZES).copied().collect(),
            page_url: request
                .page_url
                .map(|url| url.split(['?', '#']).next().unwrap_or(url).to_owned()),
            device_type: request.device.device_type,
            os: owned(request.device.os),
            browser: owned(request.device.browser),
            language: owned(request.device.language),
            country: owned(geo.country),
            region: owned(geo.region),
            city: owned(geo.city),
            postal: owned(geo.postal),
            metro: geo.metro,
            asn: geo.asn,
            connection_type: geo.connection_type,
            // Rounded, then clamped to the encoding's bounds; a NaN reads as 0.
            point: geo.point.map(|(lat, lon)| {
                let hundredths = |degrees: f64, bound: f64| {
                    (degrees * 100.0)
                        .round()
                        .clamp(-bound * 100.0, bound * 100.0) as i32
                };
                (hundredths(lat, 90.0), hundredths(lon, 180.0))
            }),
            key_values: request
                .key_values
                .iter()
                .take(MAX_KEY_VALUES)
                .map(|&(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            segments: request
                .user
                .segments
                .iter()
                .take(MAX_SEGMENTS)
                .map(|&s| s.to_owned())
                .collect(),
        }
    }

    /// The string fields in the encoding's order (bits 5 to 12).
    fn texts(&self) -> [Option<&str>; 8] {
        [
            self.country.as_deref(),
            self.region.as_deref(),
            self.city.as_deref(),
            self.postal.as_deref(),
            self.os.as_deref(),
            self.browser.as_deref(),
            self.language.as_deref(),
            self.page_url.as_deref(),
        ]
    }

    /// Reads one record from the start of `bytes`; the record and the bytes it took.
    pub fn decode(bytes: &[u8]) -> Result<(SampleRecord, usize), DecodeError> {
        let mut r = Reader { bytes, at: 0 };
        let version = r.byte("version")?;
        if version != VERSION {
            return Err(DecodeError::Version(version));
        }
        let minute = u32::from_le_bytes(r.array("minute")?);
        let user = u64::from_le_bytes(r.array("user")?);
        let placement = PlacementId(r.varint("placement")?);
        let present = u16::from_le_bytes(r.array("field flags")?);
        if present & !FIELDS != 0 {
            return Err(DecodeError::Invalid("field flags"));
        }
        let has = |bit: u16| present & (1 << bit) != 0;
        let mut record = SampleRecord {
            minute,
            user,
            placement,
            ..SampleRecord::default()
        };
        if has(0) {
            let code = r.byte("device type")?;
            record.device_type = Some(device_of(code).ok_or(DecodeError::Invalid("device type"))?);
        }
        if has(1) {
            let code = r.byte("connection type")?;
            record.connection_type =
                Some(connection_of(code).ok_or(DecodeError::Invalid("connection type"))?);
        }
        if has(2) {
            record.metro = Some(u16::from_le_bytes(r.array("metro")?));
        }
        if has(3) {
            let asn = r.varint("asn")?;
            record.asn = Some(u32::try_from(asn).map_err(|_| DecodeError::Invalid("asn"))?);
        }
        if has(4) {
            let lat = i32::from_le_bytes(r.array("point")?);
            let lon = i32::from_le_bytes(r.array("point")?);
            if !(-9_000..=9_000).contains(&lat) || !(-18_000..=18_000).contains(&lon) {
                return Err(DecodeError::Invalid("point"));
            }
            record.point = Some((lat, lon));
        }
        const NAMES: [&str; 8] = [
            "country", "region", "city", "postal", "os", "browser", "language", "page URL",
        ];
        let mut texts: [Option<String>; 8] = Default::default();
        for (i, (slot, name)) in texts.iter_mut().zip(NAMES).enumerate() {
            if has(5 + i as u16) {
                *slot = Some(r.string(name, if i == 7 { MAX_URL } else { MAX_TEXT })?);
            }
        }
        let [
            country,
            region,
            city,
            postal,
            os,
            browser,
            language,
            page_url,
        ] = texts;
        record.country = country;
        record.region = region;
        record.city = city;
        record.postal = postal;
        record.os = os;
        record.browser = browser;
        record.language = language;
        record.page_url = page_url;
        let sizes = r.count("sizes", MAX_SIZES)?;
        for _ in 0..sizes {
            let w = u32::try_from(r.varint("size")?).map_err(|_| DecodeError::Invalid("size"))?;
            let h = u32::try_from(r.varint("size")?).map_err(|_| DecodeError::Invalid("size"))?;
            record.sizes.push(Size { w, h });
        }
        let pairs = r.count("key-values", MAX_KEY_VALUES)?;
        for _ in 0..pairs {
            let key = r.string("key-value", MAX_TEXT)?;
            let value = r.string("key-value", MAX_TEXT)?;
            record.key_values.push((key, value));
        }
        let segments = r.count("segments", MAX_SEGMENTS)?;
        for _ in 0..segments {
            record.segments.push(r.string("segment", MAX_TEXT)?);
        }
        Ok((record, r.at))
    }

    /// Every record of `bytes`, which must hold whole records only.
    pub fn decode_all(mut bytes: &[u8]) -> Result<Vec<SampleRecord>, DecodeError> {
        let mut records = Vec::new();
        while !bytes.is_empty() {
            let (record, used) = SampleRecord::decode(bytes)?;
            records.push(record);
            bytes = &bytes[used..];
        }
        Ok(records)
    }
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn string(out: &mut Vec<u8>, text: &str, max: usize) {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    varint(out, end as u64);
    out.extend_from_slice(&text.as_bytes()[..end]);
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&[u8], DecodeError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(DecodeError::Truncated(what))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    fn byte(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let mut array = [0; N];
        array.copy_from_slice(self.take(N, what)?);
        Ok(array)
    }

    fn varint(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.byte(what)?;
            let bits = u64::from(byte & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(DecodeError::Invalid(what));
            }
            n |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(DecodeError::Invalid(what))
    }

    fn count(&mut self, what: &'static str, max: usize) -> Result<usize, DecodeError> {
        let n = self.varint(what)?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= max)
            .ok_or(DecodeError::TooLong(what))
    }

    fn string(&mut self, what: &'static str, max: usize) -> Result<String, DecodeError> {
        let len = self.count(what, max)?;
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::Invalid(what))
    }
}

#[cfg(test)]
mod tests {
    use rand::{RngExt, SeedableRng};

    use super::*;

    #[test]
    fn a_request_keeps_what_targeting_reads_and_nothing_that_identifies() {
        let key_values = [("section", "sport")];
        let segments = ["s1"];
        let mut request = Request::at(jiff::Timestamp::from_second(1_800_000_000).unwrap());
        request.page_url = Some("https://news.example.com/sport/?user=ann#top");
        request.device = marquee_engine::Device {
            device_type: Some(DeviceType::Phone),
            os: Some("iOS"),
            browser: None,
            language: Some("de"),
            ip: Some(std::net::IpAddr::from([192, 0, 2, 7])),
        };
        request.geo.country = Some("DE");
        request.geo.region = Some("DE-BY");
        request.geo.point = Some((48.137_4, 11.575_5));
        request.user = marquee_engine::User {
            id: Some("ann"),
            segments: &segments,
        };
        request.key_values = &key_values;
        let sizes = [Size { w: 300, h: 250 }];
        let record = SampleRecord::of_request(&request, PlacementId(9), &sizes, 77);
        assert_eq!(record.minute, 30_000_000);
        assert_eq!(record.user, 77);
        assert_eq!(record.placement, PlacementId(9));
        assert_eq!(record.sizes, sizes);
        assert_eq!(
            record.page_url.as_deref(),
            Some("https://news.example.com/sport/")
        );
        assert_eq!(record.point, Some((4_814, 1_158)));
        assert_eq!(
            (record.country.as_deref(), record.region.as_deref()),
            (Some("DE"), Some("DE-BY"))
        );
        assert_eq!(
            record.key_values,
            [("section".to_owned(), "sport".to_owned())]
        );
        assert_eq!(record.segments, ["s1".to_owned()]);
        let mut bytes = Vec::new();
        record.encode(&mut bytes);
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("ann") && !text.contains("192"), "{text}");
        assert_eq!(SampleRecord::decode(&bytes).unwrap().0, record);
    }

    fn full() -> SampleRecord {
        SampleRecord {
            minute: 29_000_000,
            user: 0xdead_beef_0123_4567,
            placement: PlacementId(300),
            sizes: vec![Size { w: 300, h: 250 }, Size { w: 728, h: 90 }],
            page_url: Some("https://news.example.com/sport/".to_owned()),
            device_type: Some(DeviceType::Console),
            os: Some("Android".to_owned()),
            browser: Some("Chrome".to_owned()),
            language: Some("de".to_owned()),
            country: Some("DE".to_owned()),
            region: Some("DE-BY".to_owned()),
            city: Some("München".to_owned()),
            postal: Some("80331".to_owned()),
            metro: Some(807),
            asn: Some(3320),
            connection_type: Some(ConnectionType::Satellite),
            point: Some((4_814, 1_158)),
            key_values: vec![("section".to_owned(), "sport".to_owned())],
            segments: vec!["autos".to_owned(), "travel".to_owned()],
        }
    }

    #[test]
    fn records_round_trip_one_after_another() {
        let records = [full(), SampleRecord::default(), full()];
        let mut bytes = Vec::new();
        for record in &records {
            record.encode(&mut bytes);
        }
        assert_eq!(SampleRecord::decode_all(&bytes).unwrap(), records);
    }

    #[test]
    fn a_record_without_optional_fields_takes_nineteen_bytes() {
        let mut bytes = Vec::new();
        SampleRecord {
            placement: PlacementId(5),
            ..SampleRecord::default()
        }
        .encode(&mut bytes);
        assert_eq!(bytes.len(), 1 + 4 + 8 + 1 + 2 + 3);
    }

    #[test]
    fn long_strings_are_cut_at_a_character_boundary_and_still_decode() {
        let record = SampleRecord {
            city: Some("ü".repeat(MAX_TEXT)),
            page_url: Some(format!("https://example.com/{}", "a".repeat(MAX_URL))),
            ..SampleRecord::default()
        };
        let mut bytes = Vec::new();
        record.encode(&mut bytes);
        let (decoded, _) = SampleRecord::decode(&bytes).unwrap();
        assert_eq!(decoded.city.unwrap().len(), MAX_TEXT);
        assert_eq!(decoded.page_url.unwrap().len(), MAX_URL);
    }

    #[test]
    fn bad_input_is_a_typed_error() {
        let mut bytes = Vec::new();
        full().encode(&mut bytes);
        assert_eq!(
            SampleRecord::decode(&[2]).unwrap_err(),
            DecodeError::Version(2)
        );
        for cut in 0..bytes.len() {
            assert!(
                matches!(
                    SampleRecord::decode(&bytes[..cut]),
                    Err(DecodeError::Truncated(_))
                ),
                "cut at {cut}"
            );
        }
        let mut unknown_field = bytes.clone();
        unknown_field[15..17].copy_from_slice(&0xffffu16.to_le_bytes());
        assert_eq!(
            SampleRecord::decode(&unknown_field).unwrap_err(),
            DecodeError::Invalid("field flags")
        );
        let mut bad_device = bytes.clone();
        bad_device[17] = 9;
        assert_eq!(
            SampleRecord::decode(&bad_device).unwrap_err(),
            DecodeError::Invalid("device type")
        );
    }

    /// Random bytes, and records with random bytes flipped, never panic the decoder.
    #[test]
    fn random_bytes_never_panic() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let mut valid = Vec::new();
        full().encode(&mut valid);
        for round in 0..20_000 {
            let bytes: Vec<u8> = if round % 2 == 0 {
                let len = rng.random_range(0..200);
                (0..len).map(|_| rng.random()).collect()
            } else {
                let mut bytes = valid.clone();
                for _ in 0..rng.random_range(1..4) {
                    let at = rng.random_range(0..bytes.len());
                    bytes[at] = rng.random();
                }
                bytes
            };
            if let Ok((_, used)) = SampleRecord::decode(&bytes) {
                assert!(used <= bytes.len());
            }
            let _ = SampleRecord::decode_all(&bytes);
        }
    }
}
