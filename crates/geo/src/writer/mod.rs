//! A MaxMind DB writer, for databases made by the program itself: the demo database, and
//! databases for tests and benchmarks.
//!
//! The file is the search tree, 16 zero bytes, the data section, then
//! `\xAB\xCD\xEFMaxMind.com` and the metadata (a map). The tree is always IPv6
//! (`ip_version` 6), IPv4 networks under `::/96` where readers look IPv4 addresses up, and
//! `::ffff:0:0/96` leading there too; records are 24, 28 or 32 bits, the narrowest that
//! addresses the tree and data section.
//!
//! ```
//! use marquee_geo::writer::{DatabaseWriter, city_record};
//! use marquee_geo::{CountryCode, GeoDatabase, Location};
//!
//! let mut writer = DatabaseWriter::new("Example-City", "An example");
//! writer.language("en");
//! let germany = Location { country: CountryCode::new("DE"), ..Location::default() };
//! writer.insert("198.51.100.0/24".parse()?, &city_record(&germany))?;
//! let database = GeoDatabase::from_bytes(writer.to_bytes()?, None)?;
//! let found = database.lookup("198.51.100.7".parse()?).unwrap();
//! assert_eq!(found.country.unwrap().as_str(), "DE");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod data;
mod records;
mod tree;

use std::time::{SystemTime, UNIX_EPOCH};

use ipnet::IpNet;

use data::DataSection;
use tree::{RecordSize, Tree};

pub use records::{asn_record, city_record, connection_type_record};

/// A value in a record, of the format's types that the databases read here use.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    String(Box<str>),
    Double(f64),
    Uint16(u16),
    Uint32(u32),
    Uint64(u64),
    Boolean(bool),
    Array(Vec<Value>),
    /// Keys in the order given; a key should appear once.
    Map(Vec<(Box<str>, Value)>),
}

impl Value {
    /// A map of these entries, in this order.
    pub fn map<'k>(entries: impl IntoIterator<Item = (&'k str, Value)>) -> Value {
        Value::Map(entries.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }
}

impl From<&str> for Value {
    fn from(text: &str) -> Value {
        Value::String(text.into())
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Value {
        Value::Double(x)
    }
}

impl From<u16> for Value {
    fn from(n: u16) -> Value {
        Value::Uint16(n)
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Value {
        Value::Uint32(n)
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Uint64(n)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Boolean(b)
    }
}

/// Why a database could not be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    #[error(
        "a string of {size} bytes, or a map or array of {size} entries, is larger than the format allows"
    )]
    ValueTooLarge { size: usize },
    #[error("the search tree and data section are larger than 32-bit records address")]
    DatabaseTooLarge,
}

/// Builds a database in memory: networks and their records in, the file's bytes out.
#[derive(Debug)]
pub struct DatabaseWriter {
    database_type: String,
    languages: Vec<String>,
    descriptions: Vec<(String, String)>,
    build_epoch: u64,
    data: DataSection,
    /// Each network inserted: its bits as an IPv6 address, its prefix length in the IPv6
    /// tree, and its record's offset in the data section.
    networks: Vec<(u128, u8, u32)>,
}

impl DatabaseWriter {
    /// An empty database of this `database_type` (e.g. `Marquee-Demo-City`) with this
    /// description in English (readers show it, and strict ones refuse a database without
    /// one), built now.
    pub fn new(database_type: &str, description: &str) -> DatabaseWriter {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        DatabaseWriter {
            database_type: database_type.to_owned(),
            languages: Vec::new(),
            descriptions: vec![("en".to_owned(), description.to_owned())],
            build_epoch: now,
            data: DataSection::default(),
            networks: Vec::new(),
        }
    }

    /// Adds a description in another language (e.g. `de`).
    pub fn description(&mut self, language: &str, text: &str) -> &mut DatabaseWriter {
        self.descriptions
            .push((language.to_owned(), text.to_owned()));
        self
    }

    /// Adds a language that the records' `names` maps have (e.g. `en`).
    pub fn language(&mut self, language: &str) -> &mut DatabaseWriter {
        self.languages.push(language.to_owned());
        self
    }

    /// Sets the build time, in seconds since the Unix epoch (for output that does not
    /// change from one run to the next).
    pub fn build_epoch(&mut self, seconds: u64) -> &mut DatabaseWriter {
        self.build_epoch = seconds;
        self
    }

    /// Points every address of `network` at `record`. A more specific network wins over a
    /// broader one, whatever the order they are inserted in; the same network inserted
    /// again takes the later record. Host bits below the prefix are ignored. A record
    /// equal to one inserted before is stored once.
    pub fn insert(&mut self, network: IpNet, record: &Value) -> Result<(), WriteError> {
        let offset = self.data.store(record)?;
        let (bits, prefix_len) = match network {
            IpNet::V4(v4) => (u128::from(v4.network().to_bits()), 96 + v4.prefix_len()),
            IpNet::V6(v6) => (v6.network().to_bits(), v6.prefix_len()),
        };
        self.networks.push((bits, prefix_len, offset));
        Ok(())
    }

    /// The database file.
    pub fn to_bytes(&self) -> Result<Vec<u8>, WriteError> {
        self.to_bytes_with_records(RecordSize::Bits24)
    }

    /// The database file, with records no narrower than `narrowest` (tests write every
    /// width with small databases).
    fn to_bytes_with_records(&self, narrowest: RecordSize) -> Result<Vec<u8>, WriteError> {
        let mut networks = self.networks.clone();
        // Broadest first, and stable: the later of two equal networks is painted last.
        networks.sort_by_key(|&(_, prefix_len, _)| prefix_len);
        let mut tree = Tree::new();
        for (bits, prefix_len, offset) in networks {
            tree.insert(bits, prefix_len, offset)?;
        }
        tree.alias_ipv4_mapped()?;

        let node_count = tree.node_count() as u64;
        let data = self.data.bytes();
        // A data record's value is the node count, plus the 16-byte separator, plus the
        // offset; the empty record's is the node count. Every value is below this bound.
        let data_base = node_count + 16;
        let record_size = RecordSize::fitting(data_base + data.len() as u64)
            .ok_or(WriteError::DatabaseTooLarge)?
            .max(narrowest);
        let node_count = u32::try_from(node_count).map_err(|_| WriteError::DatabaseTooLarge)?;

        let mut out = Vec::with_capacity(
            tree.node_count() * usize::from(record_size.bits()) / 4 + 16 + data.len() + 512,
        );
        tree.write(record_size, data_base, &mut out);
        out.extend_from_slice(&[0; 16]);
        out.extend_from_slice(data);
        out.extend_from_slice(b"\xAB\xCD\xEFMaxMind.com");
        let metadata = Value::map([
            ("node_count", Value::Uint32(node_count)),
            ("record_size", Value::Uint16(record_size.bits())),
            ("ip_version", Value::Uint16(6)),
            ("database_type", Value::from(self.database_type.as_str())),
            (
                "languages",
                Value::Array(
                    self.languages
                        .iter()
                        .map(|l| Value::from(l.as_str()))
                        .collect(),
                ),
            ),
            ("binary_format_major_version", Value::Uint16(2)),
            ("binary_format_minor_version", Value::Uint16(0)),
            ("build_epoch", Value::Uint64(self.build_epoch)),
            (
                "description",
                Value::map(
                    self.descriptions
                        .iter()
                        .map(|(language, text)| (language.as_str(), Value::from(text.as_str()))),
                ),
            ),
        ]);
        data::encode_inline(&metadata, &mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    /// Each record width, read back by the `maxminddb` reader: a network of each family, a
    /// more specific one inside a broader one, and an address in no network.
    #[test]
    fn every_record_width_reads_back() {
        let mut writer = DatabaseWriter::new("Test", "test");
        writer.language("en");
        let record = |n: u32| Value::map([("n", Value::Uint32(n))]);
        writer
            .insert("10.0.0.0/8".parse().unwrap(), &record(1))
            .unwrap();
        writer
            .insert("10.1.0.0/16".parse().unwrap(), &record(2))
            .unwrap();
        writer
            .insert("2001:db8::/32".parse().unwrap(), &record(3))
            .unwrap();
        for (width, bits) in [
            (RecordSize::Bits24, 24),
            (RecordSize::Bits28, 28),
            (RecordSize::Bits32, 32),
        ] {
            let bytes = writer.to_bytes_with_records(width).unwrap();
            let reader = maxminddb::Reader::from_source(bytes).unwrap();
            assert_eq!(reader.metadata().record_size, bits);
            reader.verify().unwrap();
            let n = |address: &str| -> Option<u32> {
                let address: IpAddr = address.parse().unwrap();
                reader
                    .lookup(address)
                    .unwrap()
                    .decode_path(&[maxminddb::PathElement::Key("n")])
                    .unwrap()
            };
            assert_eq!(n("10.2.3.4"), Some(1), "{bits}");
            assert_eq!(n("10.1.3.4"), Some(2), "{bits}");
            assert_eq!(n("2001:db8:1::1"), Some(3), "{bits}");
            assert_eq!(n("11.0.0.1"), None, "{bits}");
            assert_eq!(n("2001:db9::1"), None, "{bits}");
        }
    }

    #[test]
    fn the_narrowest_width_that_fits_is_chosen() {
        assert_eq!(RecordSize::fitting(0), Some(RecordSize::Bits24));
        assert_eq!(RecordSize::fitting(1 << 24), Some(RecordSize::Bits24));
        assert_eq!(RecordSize::fitting((1 << 24) + 1), Some(RecordSize::Bits28));
        assert_eq!(RecordSize::fitting(1 << 28), Some(RecordSize::Bits28));
        assert_eq!(RecordSize::fitting((1 << 28) + 1), Some(RecordSize::Bits32));
        assert_eq!(RecordSize::fitting(1 << 32), Some(RecordSize::Bits32));
        assert_eq!(RecordSize::fitting((1 << 32) + 1), None);
    }
}
