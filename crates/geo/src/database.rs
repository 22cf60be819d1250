//! Databases opened, checked whole, and looked up.

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use maxminddb::{Reader, WithinOptions};

use crate::GeoError;
use crate::cache::RecordCache;
use crate::location::Location;
use crate::record::{CityRecord, NetworkRecord, Record};

/// Which fields a file is read for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// A City or Country database: country, region, city, metro, postal code, point.
    Location,
    /// An ASN or Connection-Type database: AS number and organisation, connection type.
    Network,
}

impl Role {
    fn expected(self) -> &'static str {
        match self {
            Role::Location => "a City or Country database (country.iso_code, city.names.en, …)",
            Role::Network => {
                "an ASN or Connection-Type database (autonomous_system_number, connection_type)"
            }
        }
    }
}

/// What a database file says about itself, for log lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseInfo {
    /// Where it was read from: the path, or a description for one built in memory.
    pub file: String,
    /// The metadata's `database_type`, e.g. `GeoLite2-City`.
    pub database_type: String,
    /// When it was built, in seconds since the Unix epoch.
    pub build_epoch: u64,
    /// Networks with data, IPv4 and IPv6 counted once each.
    pub networks: usize,
}

/// One file, parsed and checked.
#[derive(Debug)]
pub(crate) struct DatabaseFile {
    reader: Reader<Vec<u8>>,
    info: DatabaseInfo,
}

impl DatabaseFile {
    /// Reads a file whole. The file is read rather than mapped: mapping is unsafe code, which
    /// the workspace forbids, and a mapped file truncated in place would crash the process
    /// where a read one only fails to parse.
    pub(crate) fn read(path: &Path, role: Role) -> Result<DatabaseFile, GeoError> {
        let file = path.display().to_string();
        match std::fs::read(path) {
            Ok(bytes) => DatabaseFile::parse(bytes, file, role),
            Err(source) => Err(GeoError::Read { file, source }),
        }
    }

    /// Parses a database and checks it whole: every network's record must decode in the
    /// layout this crate reads, and at least one must have a field of that layout. Lookups
    /// then never meet a record they cannot read, and a file of the wrong kind (an ASN
    /// database given as the City one) is refused rather than answering nothing.
    pub(crate) fn parse(
        bytes: Vec<u8>,
        file: String,
        role: Role,
    ) -> Result<DatabaseFile, GeoError> {
        let invalid = |source| GeoError::Invalid {
            file: file.clone(),
            source,
        };
        let reader = Reader::from_source(bytes).map_err(invalid)?;
        let metadata = reader.metadata();
        let node_count = usize::try_from(metadata.node_count).unwrap_or(usize::MAX);
        // Every network the walk yields is a leaf of the search tree, and a tree of N nodes has
        // N + 1 leaves. Shared subtrees (the aliases of the IPv4 networks that real databases
        // carry are skipped by the walk) could repeat a subtree exponentially often; beyond
        // this bound the tree is taken as malformed rather than walked for ever.
        let leaf_limit = node_count.saturating_mul(2).saturating_add(2);
        let mut leaves = 0usize;
        let mut networks = 0usize;
        let mut records = HashSet::new();
        let mut with_fields = 0usize;
        let options = WithinOptions::default().include_networks_without_data();
        for network in reader.networks(options).map_err(invalid)? {
            let network = network.map_err(invalid)?;
            leaves += 1;
            if leaves > leaf_limit {
                return Err(GeoError::Unusable {
                    file,
                    reason: format!(
                        "the search tree has more networks than its {node_count} nodes allow"
                    ),
                });
            }
            let Some(offset) = network.offset() else {
                continue;
            };
            networks += 1;
            if !records.insert(offset) {
                continue;
            }
            if decode_record(&network, role, &mut Location::default()).map_err(invalid)? {
                with_fields += 1;
            }
        }
        if with_fields == 0 {
            return Err(GeoError::Unusable {
                file,
                reason: format!(
                    "no record has a field this crate reads; expected {}",
                    role.expected()
                ),
            });
        }
        let info = DatabaseInfo {
            file,
            database_type: metadata.database_type.clone(),
            build_epoch: metadata.build_epoch,
            networks,
        };
        Ok(DatabaseFile { reader, info })
    }

    /// The record for `address`, if the database has one. Not a decoded record: where it
    /// is, for the caller to decode or to find decoded in a cache.
    fn find(&self, address: IpAddr) -> Option<Found<'_>> {
        // An IPv6 address in an IPv4-only database is simply not there (the reader would
        // call it an error). IPv4-mapped addresses were turned into IPv4 by the caller.
        if address.is_ipv6() && self.reader.metadata().ip_version == 4 {
            return None;
        }
        // Every search-tree record was resolved when the file was checked, so a lookup
        // cannot fail; were it to, the address is treated as not in the database.
        let found = self.reader.lookup(address).ok()?;
        found.has_data().then_some(found)
    }
}

type Found<'a> = maxminddb::LookupResult<'a, Vec<u8>>;

/// Decodes the record found into `location`'s fields for `role`; `Ok(true)` if it had any
/// of them.
fn decode_record(
    found: &Found<'_>,
    role: Role,
    location: &mut Location,
) -> Result<bool, maxminddb::MaxMindDbError> {
    fn decode<'a, R: Record<'a>>(
        found: &Found<'a>,
        location: &mut Location,
    ) -> Result<bool, maxminddb::MaxMindDbError> {
        Ok(found
            .decode::<R>()?
            .is_some_and(|record| record.fill(location)))
    }
    match role {
        Role::Location => decode::<CityRecord>(found, location),
        Role::Network => decode::<NetworkRecord>(found, location),
    }
}

/// Decodes the records found into one location. Every record decoded when its file was
/// checked, so decoding cannot fail here; were it to, that record's fields would be left
/// empty.
fn decode_found(location: Option<&Found<'_>>, network: Option<&Found<'_>>) -> Location {
    let mut decoded = Location::default();
    for (found, role) in [(location, Role::Location), (network, Role::Network)] {
        if let Some(found) = found {
            let _ = decode_record(found, role, &mut decoded);
        }
    }
    decoded
}

/// The databases in use: a City or Country database, and optionally an ASN or
/// Connection-Type one. Immutable; a reload builds a new one with a new
/// [`generation`](Self::generation).
#[derive(Debug)]
pub struct GeoDatabase {
    location: Arc<DatabaseFile>,
    network: Option<Arc<DatabaseFile>>,
    generation: u64,
}

/// Generations are unique in the process, not just per source, so that a cache entry can
/// never be mistaken for one of another database, whichever source it came from.
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

impl GeoDatabase {
    /// Opens a City or Country database and, optionally, an ASN or Connection-Type one. Each
    /// file is read into memory and checked whole (see the README for what that costs); an
    /// error names the file at fault.
    pub fn open(location: &Path, network: Option<&Path>) -> Result<GeoDatabase, GeoError> {
        let location = DatabaseFile::read(location, Role::Location)?;
        let network = match network {
            Some(path) => Some(DatabaseFile::read(path, Role::Network)?),
            None => None,
        };
        Ok(GeoDatabase::from_files(
            Arc::new(location),
            network.map(Arc::new),
        ))
    }

    /// The same from bytes already in memory (a generated database, such as
    /// [`demo_database`](crate::demo::demo_database)). Errors name the files as
    /// `location database (in memory)` and `network database (in memory)`.
    pub fn from_bytes(
        location: Vec<u8>,
        network: Option<Vec<u8>>,
    ) -> Result<GeoDatabase, GeoError> {
        let location = DatabaseFile::parse(
            location,
            "location database (in memory)".to_owned(),
            Role::Location,
        )?;
        let network = match network {
            Some(bytes) => Some(DatabaseFile::parse(
                bytes,
                "network database (in memory)".to_owned(),
                Role::Network,
            )?),
            None => None,
        };
        Ok(GeoDatabase::from_files(
            Arc::new(location),
            network.map(Arc::new),
        ))
    }

    pub(crate) fn from_files(
        location: Arc<DatabaseFile>,
        network: Option<Arc<DatabaseFile>>,
    ) -> GeoDatabase {
        GeoDatabase {
            location,
            network,
            generation: NEXT_GENERATION.fetch_add(1, Ordering::Relaxed),
        }
    }

    pub(crate) fn location_file(&self) -> &Arc<DatabaseFile> {
        &self.location
    }

    pub(crate) fn network_file(&self) -> Option<&Arc<DatabaseFile>> {
        self.network.as_ref()
    }

    /// Where `address` is; `None` when neither database has a record for it. IPv4-mapped
    /// IPv6 addresses (`::ffff:a.b.c.d`) are looked up as IPv4.
    pub fn lookup(&self, address: IpAddr) -> Option<Location> {
        let (location, network) = self.find(address)?;
        Some(decode_found(location.as_ref(), network.as_ref()))
    }

    /// The same through a cache of decoded records: addresses whose networks share a
    /// record (a city's many networks, an AS's) share one decoded copy of it, and only the
    /// search trees are walked for all but the first. With one database, or a record in only
    /// one, the cached record is the answer and nothing is allocated.
    pub(crate) fn lookup_in(
        &self,
        address: IpAddr,
        records: &mut RecordCache,
    ) -> Option<Arc<Location>> {
        let (location, network) = self.find(address)?;
        let mut part = |found: Option<Found<'_>>, role: Role| {
            let found = found?;
            // The offset is `Some` for a record found (`find` keeps only those).
            let key = [self.generation, role as u64, found.offset()? as u64];
            if let Some(Some(decoded)) = records.get(key) {
                return Some(Arc::clone(decoded));
            }
            let decoded = Arc::new(match role {
                Role::Location => decode_found(Some(&found), None),
                Role::Network => decode_found(None, Some(&found)),
            });
            records.put(key, Some(Arc::clone(&decoded)));
            Some(decoded)
        };
        let location = part(location, Role::Location);
        let network = part(network, Role::Network);
        match (location, network) {
            (Some(location), Some(network)) => Some(Arc::new(Location {
                asn: network.asn,
                as_org: network.as_org.clone(),
                connection_type: network.connection_type,
                ..Location::clone(&location)
            })),
            (location, network) => location.or(network),
        }
    }

    /// The records for `address` in each database; `None` when neither has one.
    fn find(&self, address: IpAddr) -> Option<(Option<Found<'_>>, Option<Found<'_>>)> {
        let address = address.to_canonical();
        let location = self.location.find(address);
        let network = self.network.as_ref().and_then(|n| n.find(address));
        (location.is_some() || network.is_some()).then_some((location, network))
    }

    /// A number unique to this database in the process, larger for a database opened later:
    /// a reload's database has a larger one than the database it replaces.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// What the City or Country database says about itself.
    pub fn location_info(&self) -> &DatabaseInfo {
        &self.location.info
    }

    /// What the ASN or Connection-Type database says about itself, if there is one.
    pub fn network_info(&self) -> Option<&DatabaseInfo> {
        self.network.as_deref().map(|n| &n.info)
    }
}
