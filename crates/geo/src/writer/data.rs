//! The data section and the metadata: values in the format's encoding.
//!
//! Each value starts with a control byte: the type in the top three bits (0 for an
//! extended type, whose number less 7 follows in the next byte) and the payload size in the
//! low five (29, 30 and 31 say that the size, less 29, 285 or 65,821, follows in one, two or
//! three big-endian bytes). Integers are stored big-endian without leading zero bytes, a
//! boolean's value is its size, and a map's or array's size is its number of entries.

use std::collections::HashMap;

use super::{Value, WriteError};

const POINTER: u8 = 1;
const STRING: u8 = 2;
const DOUBLE: u8 = 3;
const UINT16: u8 = 5;
const UINT32: u8 = 6;
const MAP: u8 = 7;
const UINT64: u8 = 9;
const ARRAY: u8 = 11;
const BOOLEAN: u8 = 14;

/// The largest size a control byte can state.
pub(crate) const MAX_SIZE: usize = 65_821 + (1 << 24) - 1;

/// The data section as it is written. Every string, map and array nested in a record is
/// stored once, where it first occurs in full, and referenced by a pointer wherever it
/// recurs: the names of keys, and whole sub-maps that many records share (a country, a
/// city), take a few bytes each after the first time, as in MaxMind's own databases.
#[derive(Debug, Default)]
pub(crate) struct DataSection {
    bytes: Vec<u8>,
    /// Each value stored, encoded, to its offset.
    stored: HashMap<Box<[u8]>, u32>,
}

impl DataSection {
    /// Stores a record, or finds the same one stored before; returns its offset.
    pub(crate) fn store(&mut self, value: &Value) -> Result<u32, WriteError> {
        let mut encoded = Vec::new();
        self.encode(value, &mut encoded)?;
        self.store_encoded(encoded)
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn store_encoded(&mut self, encoded: Vec<u8>) -> Result<u32, WriteError> {
        if let Some(&offset) = self.stored.get(encoded.as_slice()) {
            return Ok(offset);
        }
        let offset = u32::try_from(self.bytes.len()).map_err(|_| WriteError::DatabaseTooLarge)?;
        self.bytes.extend_from_slice(&encoded);
        self.stored.insert(encoded.into_boxed_slice(), offset);
        Ok(offset)
    }

    /// Encodes `value` into `out`, its nested strings, maps and arrays as pointers.
    fn encode(&mut self, value: &Value, out: &mut Vec<u8>) -> Result<(), WriteError> {
        match value {
            Value::Map(entries) => {
                write_header(out, MAP, entries.len())?;
                for (key, value) in entries {
                    let mut encoded = Vec::new();
                    write_string(&mut encoded, key)?;
                    self.write_shared(encoded, out)?;
                    self.encode_nested(value, out)?;
                }
            }
            Value::Array(items) => {
                write_header(out, ARRAY, items.len())?;
                for item in items {
                    self.encode_nested(item, out)?;
                }
            }
            scalar => write_scalar(scalar, out)?,
        }
        Ok(())
    }

    fn encode_nested(&mut self, value: &Value, out: &mut Vec<u8>) -> Result<(), WriteError> {
        match value {
            Value::String(_) | Value::Map(_) | Value::Array(_) => {
                let mut encoded = Vec::new();
                self.encode(value, &mut encoded)?;
                self.write_shared(encoded, out)
            }
            scalar => write_scalar(scalar, out),
        }
    }

    /// Writes an encoded value as a pointer to its one stored copy, or in place when it is
    /// no longer than the shortest pointer.
    fn write_shared(&mut self, encoded: Vec<u8>, out: &mut Vec<u8>) -> Result<(), WriteError> {
        if encoded.len() <= 2 {
            out.extend_from_slice(&encoded);
            return Ok(());
        }
        let offset = self.store_encoded(encoded)?;
        write_pointer(out, offset);
        Ok(())
    }
}

/// Encodes `value` whole, without pointers: the metadata is decoded on its own, and a
/// pointer there would be read relative to the metadata's start.
pub(crate) fn encode_inline(value: &Value, out: &mut Vec<u8>) -> Result<(), WriteError> {
    match value {
        Value::Map(entries) => {
            write_header(out, MAP, entries.len())?;
            for (key, value) in entries {
                write_string(out, key)?;
                encode_inline(value, out)?;
            }
        }
        Value::Array(items) => {
            write_header(out, ARRAY, items.len())?;
            for item in items {
                encode_inline(item, out)?;
            }
        }
        scalar => write_scalar(scalar, out)?,
    }
    Ok(())
}

fn write_scalar(value: &Value, out: &mut Vec<u8>) -> Result<(), WriteError> {
    match value {
        Value::String(text) => write_string(out, text)?,
        Value::Double(x) => {
            write_header(out, DOUBLE, 8)?;
            out.extend_from_slice(&x.to_be_bytes());
        }
        Value::Uint16(n) => write_unsigned(out, UINT16, &n.to_be_bytes())?,
        Value::Uint32(n) => write_unsigned(out, UINT32, &n.to_be_bytes())?,
        Value::Uint64(n) => write_unsigned(out, UINT64, &n.to_be_bytes())?,
        Value::Boolean(b) => write_header(out, BOOLEAN, usize::from(*b))?,
        // Containers are encoded by the callers; reached only through `encode_inline`'s
        // and `encode`'s own arms, never here.
        Value::Map(_) | Value::Array(_) => encode_inline(value, out)?,
    }
    Ok(())
}

fn write_string(out: &mut Vec<u8>, text: &str) -> Result<(), WriteError> {
    write_header(out, STRING, text.len())?;
    out.extend_from_slice(text.as_bytes());
    Ok(())
}

fn write_unsigned(out: &mut Vec<u8>, type_number: u8, big_endian: &[u8]) -> Result<(), WriteError> {
    let significant = &big_endian[big_endian.iter().take_while(|&&b| b == 0).count()..];
    write_header(out, type_number, significant.len())?;
    out.extend_from_slice(significant);
    Ok(())
}

fn write_header(out: &mut Vec<u8>, type_number: u8, size: usize) -> Result<(), WriteError> {
    let (size_bits, extra, extra_len) = match size {
        0..29 => (size as u8, 0, 0),
        29..285 => (29, size - 29, 1),
        285..65_821 => (30, size - 285, 2),
        65_821..=MAX_SIZE => (31, size - 65_821, 3),
        _ => return Err(WriteError::ValueTooLarge { size }),
    };
    if type_number <= 7 {
        out.push(type_number << 5 | size_bits);
    } else {
        out.push(size_bits);
        out.push(type_number - 7);
    }
    out.extend_from_slice(&extra.to_be_bytes()[size_of::<usize>() - extra_len..]);
    Ok(())
}

/// A pointer to `offset` in the data section, in the shortest of its four forms: 11, 19 and
/// 27 bits (each form starting where the one before ends) or a plain 32-bit offset.
fn write_pointer(out: &mut Vec<u8>, offset: u32) {
    let offset = offset as usize;
    let (form, value, len) = match offset {
        0..2_048 => (0, offset, 1),
        2_048..526_336 => (1, offset - 2_048, 2),
        526_336..134_744_064 => (2, offset - 526_336, 3),
        _ => (3, offset, 4),
    };
    // The forms of one to three bytes keep the value's top three bits in the control byte.
    let top = if form == 3 {
        0
    } else {
        (value >> (8 * len)) as u8 & 0x7
    };
    out.push(POINTER << 5 | form << 3 | top);
    out.extend_from_slice(&value.to_be_bytes()[size_of::<usize>() - len..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(type_number: u8, size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        write_header(&mut out, type_number, size).unwrap();
        out
    }

    fn pointer(offset: u32) -> Vec<u8> {
        let mut out = Vec::new();
        write_pointer(&mut out, offset);
        out
    }

    #[test]
    fn sizes_take_the_shortest_form() {
        assert_eq!(header(STRING, 0), [0x40]);
        assert_eq!(header(STRING, 28), [0x40 | 28]);
        assert_eq!(header(STRING, 29), [0x40 | 29, 0]);
        assert_eq!(header(STRING, 284), [0x40 | 29, 255]);
        assert_eq!(header(STRING, 285), [0x40 | 30, 0, 0]);
        assert_eq!(header(STRING, 65_820), [0x40 | 30, 0xff, 0xff]);
        assert_eq!(header(STRING, 65_821), [0x40 | 31, 0, 0, 0]);
        assert_eq!(header(STRING, MAX_SIZE), [0x40 | 31, 0xff, 0xff, 0xff]);
        assert!(write_header(&mut Vec::new(), STRING, MAX_SIZE + 1).is_err());
    }

    #[test]
    fn extended_types_put_their_number_after_the_control_byte() {
        assert_eq!(header(ARRAY, 3), [3, 4]);
        assert_eq!(header(BOOLEAN, 1), [1, 7]);
        assert_eq!(header(UINT64, 300), [30, 2, 0, 15]);
    }

    #[test]
    fn pointers_take_the_shortest_form() {
        assert_eq!(pointer(0), [0x20, 0]);
        assert_eq!(pointer(2_047), [0x27, 0xff]);
        assert_eq!(pointer(2_048), [0x28, 0, 0]);
        assert_eq!(pointer(526_335), [0x2f, 0xff, 0xff]);
        assert_eq!(pointer(526_336), [0x30, 0, 0, 0]);
        assert_eq!(pointer(134_744_063), [0x37, 0xff, 0xff, 0xff]);
        assert_eq!(pointer(134_744_064), [0x38, 0x08, 0x08, 0x08, 0x00]);
    }

    #[test]
    fn unsigned_integers_drop_leading_zero_bytes() {
        let mut out = Vec::new();
        write_scalar(&Value::Uint32(0), &mut out).unwrap();
        write_scalar(&Value::Uint32(807), &mut out).unwrap();
        write_scalar(&Value::Uint16(u16::MAX), &mut out).unwrap();
        assert_eq!(out, [0xc0, 0xc2, 0x03, 0x27, 0xa2, 0xff, 0xff]);
    }

    #[test]
    fn recurring_values_are_stored_once() {
        let mut data = DataSection::default();
        let country = Value::map([("iso_code", Value::from("DE"))]);
        let first = data
            .store(&Value::map([("country", country.clone())]))
            .unwrap();
        let len = data.bytes().len();
        let again = data
            .store(&Value::map([("country", country.clone())]))
            .unwrap();
        assert_eq!(first, again);
        assert_eq!(data.bytes().len(), len);
        let other = data
            .store(&Value::map([
                ("country", country),
                ("postal", Value::map([("code", Value::from("10115"))])),
            ]))
            .unwrap();
        assert_ne!(other, first);
    }
}
