#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The fast request reader reads exactly the fields serde's derives read: for every struct a
//! request is built from, the keys `src/fast.rs` dispatches on (`FAST_READER_KEYS`, generated
//! from the same lists as the dispatch) are the derive's field names. A field added to a
//! request type and not to the fast reader fails here; without this test the fast reader would
//! skip it as unknown and give a value serde would not (the invariant of `src/fast.rs`).
//!
//! serde's field names are read from the derives themselves: a recording `Deserializer` is
//! handed to `BidRequest::deserialize`, and every `deserialize_struct` call gives the struct's
//! name and its field names (renames applied). Fed a value for each field, the derive goes on
//! into the nested structs (through `Option`, `Vec` and newtypes), so the walk reaches every
//! struct of a request.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use marquee_openrtb::{Audio, Banner, BidRequest, FAST_READER_KEYS, Native, Video};
use serde::Deserialize;
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Each struct's serde field names, as the derives give them.
type StructFields = BTreeMap<&'static str, BTreeSet<&'static str>>;

/// Why a walk stopped, and whether the failing field was already noted (only the innermost
/// field of a failure is skipped in the next walk, so that the structs around it are still
/// explored).
#[derive(Debug)]
struct Stop {
    message: String,
    noted: bool,
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: fmt::Display>(message: T) -> Self {
        Stop {
            message: message.to_string(),
            noted: false,
        }
    }
}

/// What the walks share: the structs seen, and the fields (struct, key) whose value could not
/// be made up (a raw `ext`, say), which later walks leave out.
#[derive(Default)]
struct Notes {
    structs: RefCell<StructFields>,
    skip: RefCell<BTreeSet<(&'static str, &'static str)>>,
}

/// A deserializer that records every struct it is asked for and makes up a value for every
/// leaf: an empty string, 1, `true`; one element for a sequence, `Some` for an option.
#[derive(Clone, Copy)]
struct Recorder<'n>(&'n Notes);

impl<'de, 'n> Deserializer<'de> for Recorder<'n> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_u64(1)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_bool(true)
    }

    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_i32(1)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_i64(1)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_f64(1.0)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_borrowed_str("")
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_borrowed_str("")
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Stop> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_seq(One {
            recorder: self,
            given: false,
        })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Stop> {
        let mut structs = self.0.structs.borrow_mut();
        let known = structs.entry(name).or_default();
        known.extend(fields.iter().copied());
        drop(structs);
        let skip = self.0.skip.borrow();
        let keys = fields
            .iter()
            .copied()
            .filter(|key| !skip.contains(&(name, *key)))
            .collect();
        drop(skip);
        visitor.visit_map(Members {
            recorder: self,
            name,
            keys,
            next: 0,
        })
    }

    serde::forward_to_deserialize_any! {
        i8 i16 u8 u16 u32 u64 i128 u128 f32 char bytes byte_buf unit unit_struct tuple
        tuple_struct map enum identifier ignored_any
    }
}

/// A sequence of one made-up element.
struct One<'n> {
    recorder: Recorder<'n>,
    given: bool,
}

impl<'de> SeqAccess<'de> for One<'_> {
    type Error = Stop;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Stop> {
        if std::mem::replace(&mut self.given, true) {
            return Ok(None);
        }
        seed.deserialize(self.recorder).map(Some)
    }
}

/// A struct's members: each of its keys (but those skipped) with a made-up value.
struct Members<'n> {
    recorder: Recorder<'n>,
    name: &'static str,
    keys: Vec<&'static str>,
    next: usize,
}

// The same shape as `One`'s `SeqAccess` above, deliberately: serde's two access traits each need
// their own impl.
impl<'de> MapAccess<'de> for Members<'_> {
    type Error = Stop;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Stop> {
        let Some(&key) = self.keys.get(self.next) else {
            return Ok(None);
        };
        seed.deserialize(BorrowedStrDeserializer::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Stop> {
        let key = self.keys[self.next];
        self.next += 1;
        seed.deserialize(self.recorder).map_err(|mut stop| {
            if !stop.noted {
                self.recorder.0.skip.borrow_mut().insert((self.name, key));
                stop.noted = true;
            }
            stop
        })
    }
}

/// Walks `T`'s derive again and again, leaving out the fields that stopped a walk, until a
/// walk stops on no new field.
fn walk<'de, T: Deserialize<'de>>(notes: &Notes) {
    loop {
        let skipped = notes.skip.borrow().len();
        let walk = T::deserialize(Recorder(notes));
        if walk.is_ok() || notes.skip.borrow().len() == skipped {
            break;
        }
    }
}

/// Every struct `BidRequest`'s derive reaches, with its field names. An imp's media objects
/// are read through a raw value first (a malformed one is dropped from its imp alone), which
/// the recorder cannot make up: their derives are walked from their own types.
fn serde_fields() -> StructFields {
    let notes = Notes::default();
    walk::<BidRequest>(&notes);
    walk::<Banner>(&notes);
    walk::<Video>(&notes);
    walk::<Audio>(&notes);
    walk::<Native>(&notes);
    notes.structs.into_inner()
}

#[test]
fn the_fast_reader_reads_every_serde_field_of_every_request_struct() {
    let serde = serde_fields();
    let mut fast: StructFields = BTreeMap::new();
    for (name, keys) in FAST_READER_KEYS {
        let set: BTreeSet<&str> = keys.iter().copied().collect();
        assert_eq!(set.len(), keys.len(), "{name}: a key listed twice");
        assert!(fast.insert(name, set).is_none(), "{name} listed twice");
    }
    let mut problems = Vec::new();
    for (name, fields) in &serde {
        let Some(keys) = fast.get(name) else {
            problems.push(format!(
                "serde reads struct {name} (fields {fields:?}); the fast reader has no `fields!` \
                 list for it in FAST_READER_KEYS"
            ));
            continue;
        };
        for field in fields.difference(keys) {
            problems.push(format!(
                "serde reads {name}.{field}; the fast reader's `fields!` list for {name} does not \
                 (it would skip it as unknown)"
            ));
        }
        for key in keys.difference(fields) {
            problems.push(format!(
                "the fast reader reads {name}.{key}; serde's derive has no such field"
            ));
        }
    }
    for name in fast.keys().filter(|name| !serde.contains_key(*name)) {
        problems.push(format!(
            "the fast reader lists {name}, which serde never reaches from BidRequest"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_walk_reaches_the_deepest_structs() {
    // A walk that stopped early would make the comparison above vacuous for what it missed.
    let serde = serde_fields();
    for name in [
        "SupplyChainNode",
        "Uid",
        "Segment",
        "Deal",
        "Format",
        "Geo",
        "Publisher",
    ] {
        assert!(serde.contains_key(name), "{name} not reached: {serde:?}");
    }
    assert!(
        serde["BidRequest"].contains("openrtb"),
        "renames are serde's"
    );
}
