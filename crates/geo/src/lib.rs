//! IP geolocation for the edge's hot path, from MaxMind DB files: GeoIP2 and GeoLite2 City or
//! Country databases and DB-IP's lite files for the location, and optionally an ASN or
//! Connection-Type database for the network.
//!
//! - [`GeoDatabase`]: the files, read into memory and checked whole when opened;
//!   [`lookup`](GeoDatabase::lookup) gives a [`Location`] (country, ISO 3166-2 region, city,
//!   metro code, postal code, point; AS number and organisation, connection type).
//! - [`GeoSource`]: the databases in use, swapped atomically when a periodic
//!   [`reload_if_changed`](GeoSource::reload_if_changed) finds a file changed and the new
//!   one good; a bad file keeps the last good one and is counted.
//! - [`LookupCache`]: each worker's cache of its last lookups, a hit allocating nothing.
//! - [`anonymize`]: an address truncated to its /24 or /48, for anything stored.
//! - [`writer`]: a MaxMind DB writer, and [`demo`]: a database of made-up locations for
//!   loopback and private addresses.
//!
//! ```
//! use marquee_geo::{GeoDatabase, GeoSource, LookupCache, anonymize, demo::demo_database};
//!
//! let source = GeoSource::fixed(GeoDatabase::from_bytes(demo_database(), None)?);
//! let mut cache = LookupCache::new(4096);
//! let client = "10.1.2.3".parse()?;
//! let location = cache.lookup(&source.load(), client).unwrap();
//! assert_eq!(location.country.unwrap().as_str(), "DE");
//! assert_eq!(location.region.unwrap().as_str(), "DE-BE");
//! assert_eq!(location.city.as_deref(), Some("Berlin"));
//! assert_eq!(anonymize(client).to_string(), "10.1.2.0");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod anonymize;
mod cache;
mod database;
pub mod demo;
mod location;
mod record;
mod source;
pub mod writer;

pub use anonymize::anonymize;
pub use cache::LookupCache;
pub use database::{DatabaseInfo, GeoDatabase};
pub use location::{
    ConnectionType, CountryCode, Location, Point, RegionCode, connection_type_database_name,
    connection_type_from_database_name,
};
pub use source::{GeoPaths, GeoSource, Reload};

/// Why a database could not be used. Each names the file (its path, or what it is for one
/// built in memory), for a log line.
#[derive(Debug, thiserror::Error)]
pub enum GeoError {
    #[error("{file}: cannot read: {source}")]
    Read {
        file: String,
        source: std::io::Error,
    },
    #[error("{file}: not a valid MaxMind DB file: {source}")]
    Invalid {
        file: String,
        source: maxminddb::MaxMindDbError,
    },
    #[error("{file}: {reason}")]
    Unusable { file: String, reason: String },
}

impl GeoError {
    /// The file at fault.
    pub fn file(&self) -> &str {
        match self {
            GeoError::Read { file, .. }
            | GeoError::Invalid { file, .. }
            | GeoError::Unusable { file, .. } => file,
        }
    }
}
