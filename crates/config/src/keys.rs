//! The keys the types accept, read from the types themselves: serde's derive hands a
//! struct's field names (renames applied) to `deserialize_struct`, and this deserializer only
//! records them.

use std::cell::Cell;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// The field names of the struct `T` as the configuration spells them; empty for anything
/// else.
pub(crate) fn field_names<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    let names = Cell::new(&[][..]);
    // It always fails: it has no values to give, only the names to take.
    let _ = T::deserialize(Names(&names));
    names.get()
}

struct Names<'a>(&'a Cell<&'static [&'static str]>);

impl<'de> Deserializer<'de> for Names<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.set(fields);
        Err(de::Error::custom("names taken"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}
