//! `docs/configuration.md` against the types: every key the configuration accepts is in its
//! table, every key in the table is accepted, and a default written there as a single value is
//! the one `Config::default()` has.
//!
//! The keys are read from the types: a deserializer that has no values walks `Config` as serde
//! does, recording each struct's fields. It stops at each value it cannot give (a leaf), so it
//! walks again, skipping what it knows, until every struct has been walked.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use figment::value::Value;
use marquee_config::Config;
use serde::de::{self, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};

/// The table's name for any map key (an exchange's, a bidder's).
const ANY: &str = "NAME";

#[derive(Default)]
struct Walk {
    leaves: BTreeSet<String>,
    /// Structs and maps walked to their end.
    done: BTreeSet<String>,
    maps: BTreeSet<String>,
}

impl Walk {
    fn known(&self, path: &str) -> bool {
        self.leaves.contains(path) || self.done.contains(path)
    }
}

#[derive(Debug)]
struct Stop(String);

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Stop {}

impl de::Error for Stop {
    fn custom<T: std::fmt::Display>(message: T) -> Self {
        Stop(message.to_string())
    }
}

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

struct Probe<'a> {
    path: String,
    walk: &'a RefCell<Walk>,
}

impl<'de> Deserializer<'de> for Probe<'_> {
    type Error = Stop;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
        self.walk.borrow_mut().leaves.insert(self.path.clone());
        Err(Stop(format!("{} is a leaf", self.path)))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Stop> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Stop> {
        visitor.visit_map(Fields {
            path: self.path,
            walk: self.walk,
            fields: fields.iter(),
            current: String::new(),
        })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        self.walk.borrow_mut().maps.insert(self.path.clone());
        visitor.visit_map(Entries {
            path: self.path,
            walk: self.walk,
            given: false,
        })
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct enum identifier ignored_any
    }
}

struct Fields<'a> {
    path: String,
    walk: &'a RefCell<Walk>,
    fields: std::slice::Iter<'static, &'static str>,
    current: String,
}

impl<'de> MapAccess<'de> for Fields<'_> {
    type Error = Stop;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Stop> {
        for field in self.fields.by_ref() {
            let path = child(&self.path, field);
            if !self.walk.borrow().known(&path) {
                self.current = path;
                return seed.deserialize(field.into_deserializer()).map(Some);
            }
        }
        self.walk.borrow_mut().done.insert(self.path.clone());
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Stop> {
        seed.deserialize(Probe {
            path: self.current.clone(),
            walk: self.walk,
        })
    }
}

/// A map given one entry, keyed [`ANY`].
struct Entries<'a> {
    path: String,
    walk: &'a RefCell<Walk>,
    given: bool,
}

impl<'de> MapAccess<'de> for Entries<'_> {
    type Error = Stop;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Stop> {
        if self.given || self.walk.borrow().known(&child(&self.path, ANY)) {
            self.walk.borrow_mut().done.insert(self.path.clone());
            return Ok(None);
        }
        self.given = true;
        seed.deserialize(ANY.into_deserializer()).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Stop> {
        seed.deserialize(Probe {
            path: child(&self.path, ANY),
            walk: self.walk,
        })
    }
}

/// Every key `Config` accepts, as the table names them: a map of plain values is one key
/// (`currency.rates`), a map of sections has its sections' keys under `NAME`.
fn accepted_keys() -> BTreeSet<String> {
    let walk = RefCell::new(Walk::default());
    while !walk.borrow().done.contains("") {
        let before = {
            let walk = walk.borrow();
            walk.leaves.len() + walk.done.len()
        };
        let _ = <Config as serde::Deserialize>::deserialize(Probe {
            path: String::new(),
            walk: &walk,
        });
        let walk = walk.borrow();
        assert!(
            walk.leaves.len() + walk.done.len() > before,
            "the walk of the types is stuck"
        );
    }
    let walk = walk.into_inner();
    walk.leaves
        .iter()
        .map(|leaf| match leaf.strip_suffix(&format!(".{ANY}")) {
            Some(map) if walk.maps.contains(map) => map.to_owned(),
            _ => leaf.clone(),
        })
        .collect()
}

/// The table of `docs/configuration.md`: each key of a row's first cell, with the row's
/// default cell.
fn documented() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/configuration.md"
    ))
    .unwrap_or_else(|error| panic!("cannot read docs/configuration.md: {error}"));
    let mut keys = BTreeMap::new();
    for row in text.lines().filter(|line| line.starts_with("| `")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        let (names, default) = (cells[0].trim_start_matches("| "), cells[1]);
        for name in names.split('`').skip(1).step_by(2) {
            keys.insert(name.to_owned(), default.to_owned());
        }
    }
    keys
}

/// `exchanges.NAME.*` stands for every key under `exchanges.NAME.`.
fn covers(documented: &str, key: &str) -> bool {
    documented == key
        || documented
            .strip_suffix('*')
            .is_some_and(|prefix| key.starts_with(prefix))
}

#[test]
fn every_accepted_key_is_documented_and_every_documented_key_accepted() {
    let accepted = accepted_keys();
    let documented = documented();
    assert!(accepted.contains("listen") && accepted.contains("gateway.bidders.NAME.endpoint"));
    let undocumented: Vec<&String> = accepted
        .iter()
        .filter(|key| !documented.keys().any(|doc| covers(doc, key)))
        .collect();
    assert!(
        undocumented.is_empty(),
        "keys missing from docs/configuration.md: {undocumented:?}"
    );
    let unknown: Vec<&String> = documented
        .keys()
        .filter(|doc| !accepted.iter().any(|key| covers(doc, key)))
        .collect();
    assert!(
        unknown.is_empty(),
        "docs/configuration.md documents keys the configuration refuses: {unknown:?}"
    );
    // An exchange takes exactly the bidder's keys.
    for key in accepted
        .iter()
        .filter_map(|key| key.strip_prefix("exchanges.NAME."))
    {
        assert!(
            accepted.contains(&format!("bidder.{key}")),
            "exchanges.NAME.{key}"
        );
    }
}

/// A default cell that is one value in backticks names the default exactly.
#[test]
fn documented_defaults_are_the_defaults() {
    let defaults =
        figment::Figment::from(figment::providers::Serialized::defaults(Config::default()));
    let mut checked = 0;
    for (key, cell) in documented() {
        let Some(written) = cell
            .strip_prefix('`')
            .and_then(|cell| cell.strip_suffix('`'))
            .filter(|written| !written.contains('`'))
        else {
            continue;
        };
        // Map entries have no default (none exist by default).
        if key.contains(ANY) {
            continue;
        }
        let value: Value = defaults
            .find_value(&key)
            .unwrap_or_else(|_| panic!("`{key}` has no default, the docs say {written}"));
        let actual = match &value {
            Value::String(_, text) => text.clone(),
            Value::Bool(_, flag) => flag.to_string(),
            Value::Num(_, number) => number
                .to_u128()
                .map_or_else(|| format!("{number:?}"), |n| n.to_string()),
            Value::Array(_, items) if items.is_empty() => "[]".into(),
            Value::Dict(_, entries) if entries.is_empty() => "{}".into(),
            other => format!("{other:?}"),
        };
        assert_eq!(written, actual, "the default of `{key}`");
        checked += 1;
    }
    assert!(checked > 50, "only {checked} defaults checked");
}
