//! A hand-written reader for the bid request: the same [`BidRequest`] the serde derives build,
//! in about half the time, or `None` when it is not sure.
//!
//! serde_json pays per token (a visitor call per key and value, a `Vec` grown element by
//! element, the string scanner set up for every short string); a request is mostly short
//! strings and small integers, so that overhead is most of the parse. This reader walks the
//! bytes once with a cursor and writes each value straight into its field; structs are built
//! in place, and arrays start with one allocation big enough for the usual short lists.
//!
//! **The invariant**: whenever [`bid_request`] returns `Some(v)`, serde_json with the derives
//! would have returned `Ok(v)` with the same value in every field. Anything this reader does
//! not handle exactly as serde_json does (escapes in keys, a modelled key given twice, `null`
//! for a required member or in a list, a fraction or exponent for an integer, a negative
//! unsigned, an overflow, a flag other than `0`/`1`/`true`/`false`, a struct written as an
//! array, unknown values nested deeper than 128, trailing characters…) returns `None`, and the
//! caller runs serde, which gives the value or the located error (or, for a malformed media
//! object of an imp, the imp without it). `null` for an optional member is its default, as
//! in serde's `de` helpers. Bailing out is always
//! correct; only a `Some` that differs from serde's value would be a bug. The differential
//! tests (`tests/it/fast_parse.rs`), a proptest and a fuzz target check this invariant.
//!
//! A field the reader did not know would be skipped as unknown, silently breaking the
//! invariant, so each struct's keys are one list (`fields!`) that generates both the dispatch
//! and [`FAST_READER_KEYS`]; `tests/it/fast_fields.rs` holds that to the field names serde's
//! derives report, so a field added to a request type fails it until the reader reads it.
//!
//! Values are read as serde_json reads them: strings borrowed when they have no escapes and
//! decoded like serde_json otherwise, `f64` through serde_json's own number parser, money
//! through [`decimal::parse_micros`] like `de::micros`, raw `ext` values through serde_json's
//! `&RawValue`, unknown values skipped with the grammar serde_json's `IgnoredAny` accepts.
//!
//! The `fields!` lists look alike from struct to struct deliberately: each is one struct's keys
//! with the reader of each value's type, the counterpart of that struct's serde declaration.

use std::borrow::Cow;

use serde_json::value::RawValue;

use crate::de;
use crate::decimal::{self, Rounding};
use crate::enums::{
    AdPosition, AgentType, ApiFramework, AuctionType, BannerAdType, CreativeAttribute, DeviceType,
    Linearity, LocationType, Protocol, StartDelay, VideoPlacement, VideoPlcmt,
};
use crate::json::escape_mask;
use crate::request::{
    App, Audio, Banner, BidRequest, Data, Deal, Device, Eid, Format, Geo, Imp, Native, Pmp,
    Publisher, Regs, Segment, Site, Source, SupplyChain, SupplyChainNode, Uid, User, Video,
};

/// Deepest nesting [`Cursor::skip_value`] follows before bailing out (serde_json's own
/// recursion limit; its skip has none, so deeper values go to serde, which accepts them).
const MAX_SKIP_DEPTH: u32 = 128;

/// The request in `text`, or `None` when serde must decide (see the module doc).
pub(crate) fn bid_request(text: &str) -> Option<BidRequest<'_>> {
    let mut cursor = Cursor { text, pos: 0 };
    let mut request = BidRequest::empty();
    BidRequest::read_fields(&mut cursor, &mut request)?;
    // serde_json allows trailing whitespace only.
    cursor.peek().is_none().then_some(request)
}

/// A position in the JSON text. Every reader skips the whitespace before its value and stops
/// right after it; `None` from any of them means "bail out".
struct Cursor<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// JSON whitespace: exactly the four characters serde_json skips.
    #[inline]
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.bytes().get(self.pos) {
            self.pos += 1;
        }
    }

    /// The next byte after whitespace, not consumed; `None` at the end.
    #[inline]
    fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.bytes().get(self.pos).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        if self.peek()? != byte {
            return None;
        }
        self.pos += 1;
        Some(())
    }

    /// `true`, `false` or `null`, spelt out in full (the whitespace before is skipped).
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.skip_whitespace();
        if !self.bytes().get(self.pos..)?.starts_with(word) {
            return None;
        }
        self.pos += word.len();
        Some(())
    }

    /// Consumes a `null` if one is next.
    fn null(&mut self) -> bool {
        self.peek() == Some(b'n') && self.literal(b"null").is_some()
    }

    /// `null` as `None` (serde's `Option`), anything else read by `read`.
    fn nullable<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.null() {
            Some(None)
        } else {
            read(self).map(Some)
        }
    }

    /// An object: calls `field` with each key, the cursor on the value (which `field` must
    /// consume). Keys with escapes bail out: serde would match their decoded text.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.pos += 1;
            return Some(());
        }
        loop {
            let key = self.key()?;
            self.eat(b':')?;
            field(self, key)?;
            match self.peek()? {
                b',' => self.pos += 1,
                b'}' => {
                    self.pos += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An array, each element read by `element` (no trailing comma, as in serde_json).
    fn array<T>(&mut self, mut element: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        self.elements(|cursor, items| {
            items.push(element(cursor)?);
            Some(())
        })
    }

    /// An array of objects, each read in place (a request's structs are large: moving them
    /// showed in profiles).
    fn objects<T: FromObject<'a>>(&mut self) -> Option<Vec<T>> {
        self.elements(|cursor, items| {
            items.push(T::empty());
            T::read_fields(cursor, items.last_mut()?)
        })
    }

    /// An optional object (`null` is `None`), read in place.
    fn optional<T: FromObject<'a>>(&mut self, slot: &mut Option<T>) -> Option<()> {
        if self.null() {
            *slot = None;
            Some(())
        } else {
            T::read_fields(self, slot.insert(T::empty()))
        }
    }

    /// `null` as `T::default()`, as serde's `de::nullable` reads an optional member.
    fn or_default<T: Default>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        if self.null() {
            Some(T::default())
        } else {
            read(self)
        }
    }

    /// The frame of an array; `push` reads one element into the vector. `null` is the empty
    /// list: every list of a request is an optional member.
    fn elements<T>(
        &mut self,
        mut push: impl FnMut(&mut Self, &mut Vec<T>) -> Option<()>,
    ) -> Option<Vec<T>> {
        if self.null() {
            return Some(Vec::new());
        }
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.pos += 1;
            return Some(Vec::new());
        }
        // One first allocation of at most 256 bytes: no regrowth for the usual short lists,
        // and no allocation of a kilobyte or more (glibc consolidates its free lists for
        // those, which showed in profiles) for one or two imps.
        let mut items = Vec::with_capacity((256 / size_of::<T>().max(1)).clamp(1, 8));
        loop {
            push(self, &mut items)?;
            match self.peek()? {
                b',' => self.pos += 1,
                b']' => {
                    self.pos += 1;
                    return Some(items);
                }
                _ => return None,
            }
        }
    }

    /// Where the run of string bytes from `from` ends: at the first `"`, `\` or control
    /// character, or at the end of the text. Eight bytes at a time (see `escape_mask`).
    #[inline]
    fn plain_end(&self, from: usize) -> usize {
        let bytes = self.bytes();
        let mut at = from;
        while let Some(word) = bytes.get(at..at + 8) {
            let Ok(word) = <[u8; 8]>::try_from(word) else {
                break;
            };
            let found = escape_mask(u64::from_le_bytes(word));
            if found != 0 {
                // The lowest flag is exact.
                return at + (found.trailing_zeros() / 8) as usize;
            }
            at += 8;
        }
        while let Some(&byte) = bytes.get(at) {
            if byte == b'"' || byte == b'\\' || byte < 0x20 {
                break;
            }
            at += 1;
        }
        at
    }

    /// An object key without escapes, as bytes (compared with the field names as they are).
    /// Inlined into each object's loop: 5% fewer instructions for the whole request.
    #[inline(always)]
    fn key(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.pos;
        let end = self.plain_end(start);
        let bytes = self.bytes();
        if bytes.get(end) != Some(&b'"') {
            return None;
        }
        self.pos = end + 1;
        bytes.get(start..end)
    }

    /// A string: borrowed when it has no escapes, decoded as serde_json decodes it otherwise.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.pos;
        let end = self.plain_end(start);
        match self.bytes().get(end)? {
            b'"' => {
                self.pos = end + 1;
                self.text.get(start..end).map(Cow::Borrowed)
            }
            b'\\' => {
                // Checked to its end first, so that one allocation of the escaped length
                // (never shorter than the decoded text) holds it.
                self.pos = end;
                self.skip_string_rest()?;
                let mut decoded = String::with_capacity(self.pos - start);
                decoded.push_str(self.text.get(start..end)?);
                self.pos = end;
                self.unescape_rest(&mut decoded)?;
                Some(Cow::Owned(decoded))
            }
            // A control character: serde_json refuses it.
            _ => None,
        }
    }

    fn opt_string(&mut self) -> Option<Option<Cow<'a, str>>> {
        self.nullable(Self::string)
    }

    /// `de::cow_or_empty`: `null` is the empty string.
    fn string_or_empty(&mut self) -> Option<Cow<'a, str>> {
        self.or_default(Self::string)
    }

    /// `de::cow_or_usd`: `null` is `USD`.
    fn currency(&mut self) -> Option<Cow<'a, str>> {
        if self.null() {
            Some(de::usd())
        } else {
            self.string()
        }
    }

    fn strings(&mut self) -> Option<Vec<Cow<'a, str>>> {
        self.array(Self::string)
    }

    // `skip_string_rest` below walks the same escapes, a deliberate twin: it only checks them, as
    // serde_json's skip does, and allocates nothing.
    /// The rest of a string with escapes, from the cursor (on a `\`) to past the closing quote.
    /// Stops are ASCII bytes, so every slice boundary is a character boundary.
    fn unescape_rest(&mut self, out: &mut String) -> Option<()> {
        loop {
            match *self.bytes().get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(());
                }
                b'\\' => {
                    let escaped = *self.bytes().get(self.pos + 1)?;
                    self.pos += 2;
                    let plain = match escaped {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return None,
                    };
                    out.push(plain);
                }
                byte if byte < 0x20 => return None,
                _ => {
                    let end = self.plain_end(self.pos);
                    out.push_str(self.text.get(self.pos..end)?);
                    self.pos = end;
                }
            }
        }
    }

    /// The character of a `\uXXXX` escape (the cursor after the `u`): a surrogate pair makes
    /// one character; a lone surrogate, which serde_json refuses in a string, bails out.
    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        match first {
            0xD800..=0xDBFF => {
                if self.bytes().get(self.pos..self.pos + 2)? != b"\\u" {
                    return None;
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return None;
                }
                char::from_u32(0x1_0000 + ((first - 0xD800) << 10) + (second - 0xDC00))
            }
            0xDC00..=0xDFFF => None,
            _ => char::from_u32(first),
        }
    }

    /// Four hex digits (either case).
    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes().get(self.pos..self.pos + 4)?;
        let mut value = 0;
        for &digit in digits {
            value = value << 4 | char::from(digit).to_digit(16)?;
        }
        self.pos += 4;
        Some(value)
    }

    /// Skips the rest of a string (the cursor after the opening quote), checking it as
    /// serde_json's skip does: valid escapes (any four hex digits after `\u`), no control
    /// characters.
    fn skip_string_rest(&mut self) -> Option<()> {
        loop {
            self.pos = self.plain_end(self.pos);
            match *self.bytes().get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(());
                }
                b'\\' => {
                    let escaped = *self.bytes().get(self.pos + 1)?;
                    self.pos += 2;
                    match escaped {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            self.hex4()?;
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            }
        }
    }

    /// A number token in the JSON grammar (no leading zeros, digits after `.` and `e`).
    fn number_token(&mut self) -> Option<&'a str> {
        fn digits_end(bytes: &[u8], mut at: usize) -> usize {
            while bytes.get(at).is_some_and(u8::is_ascii_digit) {
                at += 1;
            }
            at
        }
        self.skip_whitespace();
        let bytes = self.bytes();
        let start = self.pos;
        let mut at = start + usize::from(bytes.get(start) == Some(&b'-'));
        match bytes.get(at)? {
            b'0' => at += 1,
            b'1'..=b'9' => at = digits_end(bytes, at + 1),
            _ => return None,
        }
        if bytes.get(at) == Some(&b'.') {
            let end = digits_end(bytes, at + 1);
            if end == at + 1 {
                return None;
            }
            at = end;
        }
        if let Some(b'e' | b'E') = bytes.get(at) {
            at += 1;
            if let Some(b'+' | b'-') = bytes.get(at) {
                at += 1;
            }
            let end = digits_end(bytes, at);
            if end == at {
                return None;
            }
            at = end;
        }
        // A digit here follows a leading zero, which serde_json refuses.
        if bytes.get(at).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        self.pos = at;
        self.text.get(start..at)
    }

    /// An integer as serde_json gives it to an integer field: `(negative, magnitude)`. Bails
    /// on what serde_json reads as a float, which an integer field refuses: a fraction, an
    /// exponent, `-0`, a magnitude past `u64`; and on leading zeros (an error).
    fn integer(&mut self) -> Option<(bool, u64)> {
        self.skip_whitespace();
        let bytes = self.bytes();
        let negative = bytes.get(self.pos) == Some(&b'-');
        let mut at = self.pos + usize::from(negative);
        let first = *bytes.get(at)?;
        if !first.is_ascii_digit() {
            return None;
        }
        at += 1;
        let mut magnitude = u64::from(first - b'0');
        if first != b'0' {
            while let Some(&digit @ b'0'..=b'9') = bytes.get(at) {
                magnitude = magnitude
                    .checked_mul(10)?
                    .checked_add(u64::from(digit - b'0'))?;
                at += 1;
            }
        }
        if let Some(b'.' | b'e' | b'E' | b'0'..=b'9') = bytes.get(at) {
            return None;
        }
        if negative && magnitude == 0 {
            return None;
        }
        self.pos = at;
        Some((negative, magnitude))
    }

    fn u32(&mut self) -> Option<u32> {
        match self.integer()? {
            (false, magnitude) => u32::try_from(magnitude).ok(),
            (true, _) => None,
        }
    }

    fn opt_u32(&mut self) -> Option<Option<u32>> {
        self.nullable(Self::u32)
    }

    fn i32(&mut self) -> Option<i32> {
        let (negative, magnitude) = self.integer()?;
        let magnitude = i64::try_from(magnitude).ok()?;
        i32::try_from(if negative { -magnitude } else { magnitude }).ok()
    }

    fn opt_i32(&mut self) -> Option<Option<i32>> {
        self.nullable(Self::i32)
    }

    fn i32s(&mut self) -> Option<Vec<i32>> {
        self.array(Self::i32)
    }

    /// `de::flag`: `true`, `false`, `0` or `1`; `null` is `false`.
    fn flag(&mut self) -> Option<bool> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|()| true),
            b'f' => self.literal(b"false").map(|()| false),
            b'n' => self.literal(b"null").map(|()| false),
            _ => match self.integer()? {
                (false, 0) => Some(false),
                (false, 1) => Some(true),
                _ => None,
            },
        }
    }

    fn opt_flag(&mut self) -> Option<Option<bool>> {
        self.nullable(Self::flag)
    }

    /// `de::floor_micros`: the number's text, exact, rounded up; a negative floor bails (serde
    /// gives the error), as does anything but a number.
    fn floor_micros(&mut self) -> Option<i64> {
        if self.null() {
            return Some(0);
        }
        let token = self.number_token()?;
        decimal::parse_micros(token, Rounding::Up)
            .ok()
            .filter(|&micros| micros >= 0)
    }

    /// An `f64` by serde_json's own number parser, so the bits are serde's.
    fn opt_f64(&mut self) -> Option<Option<f64>> {
        self.nullable(|cursor| {
            let token = cursor.number_token()?;
            serde_json::from_str(token).ok()
        })
    }

    /// An optional raw value: its extent found by the validating skip, then borrowed through
    /// serde_json, whose `RawValue` is the value's text without the whitespace around it.
    fn opt_raw(&mut self) -> Option<Option<&'a RawValue>> {
        self.nullable(|cursor| {
            cursor.skip_whitespace();
            let start = cursor.pos;
            cursor.skip_value()?;
            serde_json::from_str(cursor.text.get(start..cursor.pos)?).ok()
        })
    }

    /// Skips any value, accepting exactly what serde_json's `IgnoredAny` accepts, without
    /// recursion (up to [`MAX_SKIP_DEPTH`] containers deep, past which it bails out).
    fn skip_value(&mut self) -> Option<()> {
        // The containers around the cursor, innermost in the low bit: 1 object, 0 array.
        let mut objects: u128 = 0;
        let mut depth: u32 = 0;
        loop {
            // A value starts here.
            let opened = match self.peek()? {
                b'{' => Some(true),
                b'[' => Some(false),
                b'"' => {
                    self.pos += 1;
                    self.skip_string_rest()?;
                    None
                }
                b't' => self.literal(b"true").map(|()| None)?,
                b'f' => self.literal(b"false").map(|()| None)?,
                b'n' => self.literal(b"null").map(|()| None)?,
                b'-' | b'0'..=b'9' => self.number_token().map(|_| None)?,
                _ => return None,
            };
            if let Some(is_object) = opened {
                if depth == MAX_SKIP_DEPTH {
                    return None;
                }
                self.pos += 1;
                depth += 1;
                objects = objects << 1 | u128::from(is_object);
                let close = if is_object { b'}' } else { b']' };
                if self.peek()? != close {
                    if is_object {
                        self.skip_member_key()?;
                    }
                    continue;
                }
                // An empty container: closed by the loop below.
            }
            // A value ended: close containers until one goes on with a comma.
            loop {
                if depth == 0 {
                    return Some(());
                }
                let in_object = objects & 1 == 1;
                match self.peek()? {
                    b',' => {
                        self.pos += 1;
                        if in_object {
                            self.skip_member_key()?;
                        }
                        break;
                    }
                    b'}' if in_object => {}
                    b']' if !in_object => {}
                    _ => return None,
                }
                self.pos += 1;
                depth -= 1;
                objects >>= 1;
            }
        }
    }

    /// A key of a skipped object and its colon (any string, escapes included).
    fn skip_member_key(&mut self) -> Option<()> {
        self.eat(b'"')?;
        self.skip_string_rest()?;
        self.eat(b':')
    }
}

/// Which modelled keys an object has given so far: serde's derive refuses a repeated one.
#[derive(Default)]
struct Seen(u32);

impl Seen {
    /// `None` when `bit` was already set (or is 0: a 33rd key, which must not go unchecked).
    fn first(&mut self, bit: u32) -> Option<()> {
        if bit == 0 || self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(())
    }
}

/// Reads an object: each listed key (exact, case-sensitive) runs its statement, which reads
/// the value into place; other keys' values are skipped. A listed key given twice bails out.
/// Each key gets a bit by its position in the list, so at most 32 keys.
macro_rules! read_object {
    ($cursor:ident, { $($key:literal => $read:expr),* $(,)? }) => {{
        let mut seen = Seen::default();
        $cursor.object(|$cursor, key| {
            let mut bit: u32 = 1;
            $(
                if key == $key.as_bytes() {
                    seen.first(bit)?;
                    $read;
                    return Some(());
                }
                bit <<= 1;
            )*
            let _ = bit;
            $cursor.skip_value()
        })
    }};
}

/// A struct's `KEYS` and `read_fields` from one list of its keys, so that no key can be read
/// without being listed or listed without being read. The dispatch is [`read_object!`]'s.
/// `where … then …` runs a statement before the object and checks it after (a key without a
/// default was given).
macro_rules! fields {
    ($c:ident, $into:ident, { $($key:literal => $read:expr),* $(,)? }) => {
        const KEYS: &'static [&'static str] = &[$($key),*];

        fn read_fields($c: &mut Cursor<'a>, $into: &mut Self) -> Option<()> {
            read_object!($c, { $($key => $read),* })
        }
    };
    (
        $c:ident, $into:ident, { $($key:literal => $read:expr),* $(,)? }
        where $before:stmt; then $after:expr
    ) => {
        const KEYS: &'static [&'static str] = &[$($key),*];

        fn read_fields($c: &mut Cursor<'a>, $into: &mut Self) -> Option<()> {
            $before
            read_object!($c, { $($key => $read),* })?;
            $after
        }
    };
}

/// Every struct the reader builds, by its name (serde's: none is renamed), with the JSON keys
/// it reads. The tests hold this to serde's field names and draw random keys from it.
macro_rules! keys_read {
    ($($name:ident $(<$lt:lifetime>)?),* $(,)?) => {
        &[$((stringify!($name), <$name $(<$lt>)? as FromObject<'static>>::KEYS)),*]
    };
}

/// See [`keys_read!`]; public (hidden) for the integration tests.
pub const FAST_READER_KEYS: &[(&str, &[&str])] = keys_read!(
    BidRequest<'static>,
    Imp<'static>,
    Format,
    Banner<'static>,
    Video<'static>,
    Audio<'static>,
    Native<'static>,
    Pmp<'static>,
    Deal<'static>,
    Publisher<'static>,
    Site<'static>,
    App<'static>,
    Geo<'static>,
    Device<'static>,
    Segment<'static>,
    Data<'static>,
    Uid<'static>,
    Eid<'static>,
    User<'static>,
    SupplyChainNode<'static>,
    SupplyChain<'static>,
    Source<'static>,
    Regs<'static>,
);

/// A struct read from a JSON object, in place. Implemented through [`fields!`], so that the keys
/// it reads and the keys it lists are one list.
trait FromObject<'a>: Sized {
    /// The JSON keys `read_fields` reads: every serde field name of the struct (the test
    /// `tests/it/fast_fields.rs` holds it to the derive's).
    const KEYS: &'static [&'static str];

    /// The value serde's derive starts from: every field at its `#[serde(default…)]`.
    fn empty() -> Self;

    /// Reads an object's fields into `into`, which starts [`FromObject::empty`]. A struct
    /// written as an array of its fields, which serde's derive also reads, bails out.
    fn read_fields(c: &mut Cursor<'a>, into: &mut Self) -> Option<()>;
}

impl<'a> FromObject<'a> for BidRequest<'a> {
    fn empty() -> Self {
        BidRequest {
            id: Cow::default(),
            imp: Vec::new(),
            site: None,
            app: None,
            device: None,
            user: None,
            at: AuctionType::default(),
            tmax: None,
            wseat: Vec::new(),
            bseat: Vec::new(),
            allimps: false,
            cur: Vec::new(),
            wlang: Vec::new(),
            bcat: Vec::new(),
            cattax: None,
            badv: Vec::new(),
            bapp: Vec::new(),
            source: None,
            regs: None,
            test: false,
            ext: None,
            dooh: None,
            openrtb3: None,
        }
    }

    // Deliberately the twin of `BidRequest`'s serde fields, key for key (see the module note).
    fields!(c, request, {
        "id" => request.id = c.string_or_empty()?,
        "imp" => request.imp = c.objects()?,
        "site" => c.optional(&mut request.site)?,
        "app" => c.optional(&mut request.app)?,
        "device" => c.optional(&mut request.device)?,
        "user" => c.optional(&mut request.user)?,
        "at" => request.at = c.or_default(|c| c.i32().map(AuctionType))?,
        "tmax" => request.tmax = c.opt_u32()?,
        "wseat" => request.wseat = c.strings()?,
        "bseat" => request.bseat = c.strings()?,
        "allimps" => request.allimps = c.flag()?,
        "cur" => request.cur = c.strings()?,
        "wlang" => request.wlang = c.strings()?,
        "bcat" => request.bcat = c.strings()?,
        "cattax" => request.cattax = c.opt_u32()?,
        "badv" => request.badv = c.strings()?,
        "bapp" => request.bapp = c.strings()?,
        "source" => c.optional(&mut request.source)?,
        "regs" => c.optional(&mut request.regs)?,
        "test" => request.test = c.flag()?,
        "ext" => request.ext = c.opt_raw()?,
        "dooh" => request.dooh = c.opt_raw()?,
        "openrtb" => request.openrtb3 = c.opt_raw()?,
    });
}

impl<'a> FromObject<'a> for Imp<'a> {
    fn empty() -> Self {
        Imp {
            id: Cow::default(),
            banner: None,
            video: None,
            audio: None,
            native: None,
            pmp: None,
            bidfloor_micros: 0,
            bidfloorcur: de::usd(),
            secure: false,
            tagid: None,
            instl: false,
            exp: None,
            ext: None,
            dropped: Vec::new(),
        }
    }

    fields!(c, imp, {
        "id" => imp.id = c.string_or_empty()?,
        "banner" => c.optional(&mut imp.banner)?,
        "video" => c.optional(&mut imp.video)?,
        "audio" => c.optional(&mut imp.audio)?,
        "native" => c.optional(&mut imp.native)?,
        "pmp" => c.optional(&mut imp.pmp)?,
        "bidfloor" => imp.bidfloor_micros = c.floor_micros()?,
        "bidfloorcur" => imp.bidfloorcur = c.currency()?,
        "secure" => imp.secure = c.flag()?,
        "tagid" => imp.tagid = c.opt_string()?,
        "instl" => imp.instl = c.flag()?,
        "exp" => imp.exp = c.opt_u32()?,
        "ext" => imp.ext = c.opt_raw()?,
    });
}

impl<'a> FromObject<'a> for Format {
    fn empty() -> Self {
        Format::default()
    }

    fields!(c, format, {
        "w" => format.w = c.or_default(Cursor::u32)?,
        "h" => format.h = c.or_default(Cursor::u32)?,
    });
}

/// A list of an enumeration's values.
fn codes<T>(c: &mut Cursor<'_>, wrap: fn(i32) -> T) -> Option<Vec<T>> {
    c.array(|c| c.i32().map(wrap))
}

/// An optional enumeration value.
fn opt_code<T>(c: &mut Cursor<'_>, wrap: fn(i32) -> T) -> Option<Option<T>> {
    c.nullable(|c| c.i32().map(wrap))
}

// Deliberately the twin of `Banner`'s serde fields, key for key (see the module note).
impl<'a> FromObject<'a> for Banner<'a> {
    fn empty() -> Self {
        Banner::default()
    }

    fields!(c, banner, {
        "format" => banner.format = c.objects()?,
        "w" => banner.w = c.opt_u32()?,
        "h" => banner.h = c.opt_u32()?,
        "btype" => banner.btype = codes(c, BannerAdType)?,
        "battr" => banner.battr = codes(c, CreativeAttribute)?,
        "pos" => banner.pos = opt_code(c, AdPosition)?,
        "api" => banner.api = codes(c, ApiFramework)?,
        "mimes" => banner.mimes = c.strings()?,
    });
}

// Deliberately the twin of `Video`'s serde fields, key for key (see the module note).
impl<'a> FromObject<'a> for Video<'a> {
    fn empty() -> Self {
        Video::default()
    }

    fields!(c, video, {
        "mimes" => video.mimes = c.strings()?,
        "minduration" => video.minduration = c.opt_u32()?,
        "maxduration" => video.maxduration = c.opt_u32()?,
        "protocols" => video.protocols = codes(c, Protocol)?,
        "w" => video.w = c.opt_u32()?,
        "h" => video.h = c.opt_u32()?,
        "plcmt" => video.plcmt = opt_code(c, VideoPlcmt)?,
        "placement" => video.placement = opt_code(c, VideoPlacement)?,
        "linearity" => video.linearity = opt_code(c, Linearity)?,
        "startdelay" => video.startdelay = opt_code(c, StartDelay)?,
        "battr" => video.battr = codes(c, CreativeAttribute)?,
    });
}

impl<'a> FromObject<'a> for Audio<'a> {
    fn empty() -> Self {
        Audio::default()
    }

    fields!(c, audio, {
        "mimes" => audio.mimes = c.strings()?,
        "minduration" => audio.minduration = c.opt_u32()?,
        "maxduration" => audio.maxduration = c.opt_u32()?,
        "protocols" => audio.protocols = codes(c, Protocol)?,
        "battr" => audio.battr = codes(c, CreativeAttribute)?,
    });
}

impl<'a> FromObject<'a> for Native<'a> {
    fn empty() -> Self {
        Native {
            request: Cow::default(),
            ver: None,
            battr: Vec::new(),
            unreadable: None,
        }
    }

    // `request` has no default: without it serde errors, so this bails.
    fields!(c, native, {
        "request" => {
            native.request = c.string()?;
            has_request = true;
        },
        "ver" => native.ver = c.opt_string()?,
        "battr" => native.battr = codes(c, CreativeAttribute)?,
    } where let mut has_request = false; then has_request.then_some(()));
}

impl<'a> FromObject<'a> for Pmp<'a> {
    fn empty() -> Self {
        Pmp::default()
    }

    fields!(c, pmp, {
        "private_auction" => pmp.private_auction = c.flag()?,
        "deals" => pmp.deals = c.objects()?,
    });
}

// Deliberately the twin of `Deal`'s serde fields, key for key (see the module note).
impl<'a> FromObject<'a> for Deal<'a> {
    fn empty() -> Self {
        Deal {
            id: Cow::default(),
            bidfloor_micros: 0,
            bidfloorcur: de::usd(),
            at: None,
            wseat: Vec::new(),
            wadomain: Vec::new(),
            ext: None,
        }
    }

    fields!(c, deal, {
        "id" => deal.id = c.string_or_empty()?,
        "bidfloor" => deal.bidfloor_micros = c.floor_micros()?,
        "bidfloorcur" => deal.bidfloorcur = c.currency()?,
        "at" => deal.at = opt_code(c, AuctionType)?,
        "wseat" => deal.wseat = c.strings()?,
        "wadomain" => deal.wadomain = c.strings()?,
        "ext" => deal.ext = c.opt_raw()?,
    });
}

impl<'a> FromObject<'a> for Publisher<'a> {
    fn empty() -> Self {
        Publisher::default()
    }

    fields!(c, publisher, {
        "id" => publisher.id = c.opt_string()?,
    });
}

// Deliberately the twin of `Site`'s serde fields, key for key (see the module note).
impl<'a> FromObject<'a> for Site<'a> {
    fn empty() -> Self {
        Site::default()
    }

    fields!(c, site, {
        "id" => site.id = c.opt_string()?,
        "domain" => site.domain = c.opt_string()?,
        "page" => site.page = c.opt_string()?,
        "ref" => site.referrer = c.opt_string()?,
        "cat" => site.cat = c.strings()?,
        "publisher" => c.optional(&mut site.publisher)?,
        "keywords" => site.keywords = c.opt_string()?,
        "ext" => site.ext = c.opt_raw()?,
    });
}

// Deliberately the twin of `App`'s serde fields, key for key (see the module note).
impl<'a> FromObject<'a> for App<'a> {
    fn empty() -> Self {
        App::default()
    }

    fields!(c, app, {
        "id" => app.id = c.opt_string()?,
        "bundle" => app.bundle = c.opt_string()?,
        "domain" => app.domain = c.opt_string()?,
        "storeurl" => app.storeurl = c.opt_string()?,
        "cat" => app.cat = c.strings()?,
        "publisher" => c.optional(&mut app.publisher)?,
        "ext" => app.ext = c.opt_raw()?,
    });
}

impl<'a> FromObject<'a> for Geo<'a> {
    fn empty() -> Self {
        Geo::default()
    }

    fields!(c, geo, {
        "country" => geo.country = c.opt_string()?,
        "region" => geo.region = c.opt_string()?,
        "city" => geo.city = c.opt_string()?,
        "lat" => geo.lat = c.opt_f64()?,
        "lon" => geo.lon = c.opt_f64()?,
        "metro" => geo.metro = c.opt_string()?,
        "zip" => geo.zip = c.opt_string()?,
        "type" => geo.location_type = opt_code(c, LocationType)?,
    });
}

// Deliberately the twin of `Device`'s serde fields, key for key (see the module note).
impl<'a> FromObject<'a> for Device<'a> {
    fn empty() -> Self {
        Device::default()
    }

    fields!(c, device, {
        "ua" => device.ua = c.opt_string()?,
        "ip" => device.ip = c.opt_string()?,
        "ipv6" => device.ipv6 = c.opt_string()?,
        "devicetype" => device.devicetype = opt_code(c, DeviceType)?,
        "os" => device.os = c.opt_string()?,
        "osv" => device.osv = c.opt_string()?,
        "language" => device.language = c.opt_string()?,
        "ifa" => device.ifa = c.opt_string()?,
        "dnt" => device.dnt = c.opt_flag()?,
        "lmt" => device.lmt = c.opt_flag()?,
        "geo" => c.optional(&mut device.geo)?,
        "ext" => device.ext = c.opt_raw()?,
    });
}

impl<'a> FromObject<'a> for Segment<'a> {
    fn empty() -> Self {
        Segment::default()
    }

    fields!(c, segment, {
        "id" => segment.id = c.opt_string()?,
    });
}

impl<'a> FromObject<'a> for Data<'a> {
    fn empty() -> Self {
        Data::default()
    }

    fields!(c, data, {
        "id" => data.id = c.opt_string()?,
        "segment" => data.segment = c.objects()?,
    });
}

impl<'a> FromObject<'a> for Uid<'a> {
    fn empty() -> Self {
        Uid {
            id: Cow::default(),
            atype: None,
        }
    }

    fields!(c, uid, {
        "id" => uid.id = c.string_or_empty()?,
        "atype" => uid.atype = opt_code(c, AgentType)?,
    });
}

impl<'a> FromObject<'a> for Eid<'a> {
    fn empty() -> Self {
        Eid {
            source: Cow::default(),
            uids: Vec::new(),
        }
    }

    fields!(c, eid, {
        "source" => eid.source = c.string_or_empty()?,
        "uids" => eid.uids = c.objects()?,
    });
}

impl<'a> FromObject<'a> for User<'a> {
    fn empty() -> Self {
        User::default()
    }

    fields!(c, user, {
        "id" => user.id = c.opt_string()?,
        "buyeruid" => user.buyeruid = c.opt_string()?,
        "yob" => user.yob = c.opt_i32()?,
        "gender" => user.gender = c.opt_string()?,
        "keywords" => user.keywords = c.opt_string()?,
        "consent" => user.consent = c.opt_string()?,
        "eids" => user.eids = c.objects()?,
        "geo" => c.optional(&mut user.geo)?,
        "data" => user.data = c.objects()?,
        "ext" => user.ext = c.opt_raw()?,
    });
}

impl<'a> FromObject<'a> for SupplyChainNode<'a> {
    fn empty() -> Self {
        SupplyChainNode {
            asi: Cow::default(),
            sid: Cow::default(),
            rid: None,
            hp: false,
        }
    }

    fields!(c, node, {
        "asi" => node.asi = c.string_or_empty()?,
        "sid" => node.sid = c.string_or_empty()?,
        "rid" => node.rid = c.opt_string()?,
        "hp" => node.hp = c.flag()?,
    });
}

impl<'a> FromObject<'a> for SupplyChain<'a> {
    fn empty() -> Self {
        SupplyChain {
            complete: false,
            ver: Cow::default(),
            nodes: Vec::new(),
        }
    }

    fields!(c, chain, {
        "complete" => chain.complete = c.flag()?,
        "ver" => chain.ver = c.string_or_empty()?,
        "nodes" => chain.nodes = c.objects()?,
    });
}

impl<'a> FromObject<'a> for Source<'a> {
    fn empty() -> Self {
        Source::default()
    }

    fields!(c, source, {
        "tid" => source.tid = c.opt_string()?,
        "schain" => c.optional(&mut source.schain)?,
        "ext" => source.ext = c.opt_raw()?,
    });
}

impl<'a> FromObject<'a> for Regs<'a> {
    fn empty() -> Self {
        Regs::default()
    }

    fields!(c, regs, {
        "coppa" => regs.coppa = c.flag()?,
        "gdpr" => regs.gdpr = c.opt_flag()?,
        "us_privacy" => regs.us_privacy = c.opt_string()?,
        "gpp" => regs.gpp = c.opt_string()?,
        "gpp_sid" => regs.gpp_sid = c.i32s()?,
        "ext" => regs.ext = c.opt_raw()?,
    });
}
