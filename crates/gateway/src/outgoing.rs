//! The request each bidder gets: the incoming JSON with its top-level members kept as raw
//! text, `tmax` set to the bidder's own time, `at` to the gateway's own auction type, `imp` cut
//! down to the imps it takes, and for a 2.5 bidder the members 2.6 moved out of `ext` put back
//! there. Nothing else is re-encoded: a member passes through as the bytes the caller sent.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::config::{AuctionKind, OpenRtbVersion};

/// An object's members, in order, values unparsed.
#[derive(Debug)]
pub(crate) struct RawObject<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

/// The incoming request, split once per auction.
#[derive(Debug)]
pub(crate) struct RawRequest<'a> {
    members: RawObject<'a>,
    imps: Vec<&'a RawValue>,
}

/// 2.6 members and the 2.5 `ext` they came from, per object.
const MOVED_TO_EXT: [(&str, &[&str]); 3] = [
    ("regs", &["gdpr", "us_privacy"]),
    ("user", &["consent", "eids"]),
    ("source", &["schain"]),
];

impl<'a> RawRequest<'a> {
    /// Splits `json`, which [`marquee_openrtb::BidRequest::parse`] already accepted.
    pub(crate) fn parse(json: &'a [u8]) -> Result<RawRequest<'a>, serde_json::Error> {
        let members: RawObject<'a> = serde_json::from_slice(json)?;
        let imps = match members.get("imp") {
            Some(imp) => serde_json::from_str::<Vec<&'a RawValue>>(imp.get())?,
            None => Vec::new(),
        };
        Ok(RawRequest { members, imps })
    }

    /// The body for one bidder: imps whose index `takes` allows, `tmax` in milliseconds, `at`
    /// the gateway's `auction`.
    pub(crate) fn write_for(
        &self,
        takes: impl Fn(usize) -> bool,
        tmax_ms: u64,
        auction: AuctionKind,
        version: OpenRtbVersion,
        out: &mut String,
    ) {
        out.push('{');
        let mut first = true;
        let mut member = |out: &mut String, key: &str| {
            if !first {
                out.push(',');
            }
            first = false;
            write_key(out, key);
        };
        member(out, "tmax");
        out.push_str(&tmax_ms.to_string());
        // The caller's `at` says how it clears our answer; a bidder is charged by the gateway's
        // clearing, so that is the type it must hear (absent, 2.6 means second price).
        member(out, "at");
        out.push(match auction {
            AuctionKind::FirstPrice => '1',
            AuctionKind::SecondPrice { .. } => '2',
        });
        for (key, value) in &self.members.0 {
            match key.as_ref() {
                "tmax" | "at" => {}
                "imp" => {
                    member(out, key);
                    out.push('[');
                    let mut first_imp = true;
                    for (_, imp) in self.imps.iter().enumerate().filter(|(i, _)| takes(*i)) {
                        if !first_imp {
                            out.push(',');
                        }
                        first_imp = false;
                        out.push_str(imp.get());
                    }
                    out.push(']');
                }
                name => {
                    member(out, key);
                    let moved = MOVED_TO_EXT
                        .iter()
                        .find(|(object, _)| *object == name)
                        .map(|(_, fields)| *fields);
                    match (version, moved) {
                        (OpenRtbVersion::V25, Some(fields)) => write_with_ext(value, fields, out),
                        _ => out.push_str(value.get()),
                    }
                }
            }
        }
        out.push('}');
    }
}

impl<'a> RawObject<'a> {
    fn get(&self, key: &str) -> Option<&'a RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

/// `value` (an object) with `fields` moved into its `ext`, replacing an `ext` member of the same
/// name: the 2.6 place is the current one (our own parser reads it first too), and a stale
/// `ext.gdpr: 0` beside `gdpr: 1` must not tell a 2.5 bidder that GDPR does not apply. Anything
/// not shaped as expected passes through as it came.
fn write_with_ext(value: &RawValue, fields: &[&str], out: &mut String) {
    let Ok(object) = serde_json::from_str::<RawObject<'_>>(value.get()) else {
        out.push_str(value.get());
        return;
    };
    let ext = match object.get("ext") {
        Some(ext) => match serde_json::from_str::<RawObject<'_>>(ext.get()) {
            Ok(ext) => ext,
            Err(_) => {
                out.push_str(value.get());
                return;
            }
        },
        None => RawObject(Vec::new()),
    };
    let moving: Vec<(&str, &RawValue)> = object
        .0
        .iter()
        .filter(|(k, _)| fields.contains(&k.as_ref()))
        .map(|(k, v)| (k.as_ref(), *v))
        .collect();
    if moving.is_empty() {
        out.push_str(value.get());
        return;
    }
    out.push('{');
    let mut first = true;
    for (key, member) in &object.0 {
        if key == "ext" || fields.contains(&key.as_ref()) {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        write_key(out, key);
        out.push_str(member.get());
    }
    if !first {
        out.push(',');
    }
    write_key(out, "ext");
    out.push('{');
    for (i, (key, member)) in ext
        .0
        .iter()
        .map(|(k, v)| (k.as_ref(), *v))
        .filter(|(k, _)| !moving.iter().any(|(moved, _)| moved == k))
        .chain(moving.iter().copied())
        .enumerate()
    {
        if i > 0 {
            out.push(',');
        }
        write_key(out, key);
        out.push_str(member.get());
    }
    out.push_str("}}");
}

fn write_key(out: &mut String, key: &str) {
    let plain = key.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\');
    if plain {
        out.push('"');
        out.push_str(key);
        out.push('"');
    } else {
        // A key that had escapes (rare): serde_json escapes it again.
        match serde_json::to_string(key) {
            Ok(quoted) => out.push_str(&quoted),
            Err(_) => out.push_str("\"\""),
        }
    }
    out.push(':');
}

impl<'de> de::Deserialize<'de> for RawObject<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = RawObject<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
                let mut members = Vec::with_capacity(16);
                while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
                    let value: &'de RawValue = map.next_value()?;
                    members.push((key, value));
                }
                Ok(RawObject(members))
            }
        }
        deserializer.deserialize_map(ObjectVisitor)
    }
}

/// A member name, borrowed unless it had escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(text: &str) -> serde_json::Value {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    const REQUEST: &str = r#"{"id":"a1","imp":[{"id":"1","banner":{"w":300,"h":250}},{"id":"2","video":{"mimes":["video/mp4"]}}],"tmax":120,"regs":{"gdpr":1,"us_privacy":"1YNN","ext":{"x":1}},"user":{"id":"u","consent":"CO"},"source":{"tid":"t"}}"#;

    #[test]
    fn cuts_imps_and_sets_tmax_leaving_the_rest_as_sent() {
        let raw = RawRequest::parse(REQUEST.as_bytes()).unwrap();
        let mut out = String::new();
        raw.write_for(
            |i| i == 1,
            80,
            AuctionKind::FirstPrice,
            OpenRtbVersion::V26,
            &mut out,
        );
        let sent = value(&out);
        let mut expected = value(REQUEST);
        expected["tmax"] = 80.into();
        expected["at"] = 1.into();
        expected["imp"] = value(r#"[{"id":"2","video":{"mimes":["video/mp4"]}}]"#);
        assert_eq!(sent, expected);
    }

    #[test]
    fn a_2_5_bidder_gets_the_moved_members_back_in_ext() {
        let raw = RawRequest::parse(REQUEST.as_bytes()).unwrap();
        let mut out = String::new();
        raw.write_for(
            |_| true,
            80,
            AuctionKind::FirstPrice,
            OpenRtbVersion::V25,
            &mut out,
        );
        let sent = value(&out);
        assert_eq!(
            sent["regs"],
            value(r#"{"ext":{"x":1,"gdpr":1,"us_privacy":"1YNN"}}"#)
        );
        assert_eq!(sent["user"], value(r#"{"id":"u","ext":{"consent":"CO"}}"#));
        assert_eq!(sent["source"], value(r#"{"tid":"t"}"#), "nothing to move");
        assert_eq!(sent["imp"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn the_2_6_value_overwrites_a_stale_one_in_ext() {
        // GDPR applies (2.6 place); a stale `ext.gdpr: 0` must not tell a 2.5 bidder it does not.
        let json = r#"{"id":"a","imp":[],"regs":{"gdpr":1,"ext":{"gdpr":0,"x":2}}}"#;
        let raw = RawRequest::parse(json.as_bytes()).unwrap();
        let mut out = String::new();
        raw.write_for(
            |_| true,
            50,
            AuctionKind::FirstPrice,
            OpenRtbVersion::V25,
            &mut out,
        );
        assert_eq!(value(&out)["regs"], value(r#"{"ext":{"x":2,"gdpr":1}}"#));
    }

    #[test]
    fn bidders_hear_the_gateways_auction_type_whatever_the_caller_said() {
        let raw = RawRequest::parse(br#"{"id":"a","at":1,"imp":[]}"#).unwrap();
        let second = AuctionKind::SecondPrice {
            increment_micros: 0,
        };
        let mut out = String::new();
        raw.write_for(|_| true, 50, second, OpenRtbVersion::V26, &mut out);
        assert_eq!(
            value(&out),
            value(r#"{"tmax":50,"at":2,"id":"a","imp":[]}"#)
        );
        // Without `at` the caller means second price; a first-price gateway says so.
        let raw = RawRequest::parse(br#"{"id":"a","imp":[]}"#).unwrap();
        out.clear();
        raw.write_for(
            |_| true,
            50,
            AuctionKind::FirstPrice,
            OpenRtbVersion::V26,
            &mut out,
        );
        assert_eq!(value(&out)["at"], 1);
    }
}
