//! Wiring of `[geo]`: the databases an edge locates visitors with, and what it says at start
//! when it has none.

use std::sync::Arc;

use marquee_config::Config;
use marquee_geo::{GeoDatabase, GeoPaths, GeoSource};

use crate::{Failure, config_error};

/// The geo databases of `geo.database` (and `geo.asn_database`), read and checked now: a file
/// that cannot be used fails the start, naming it. Without one, `--demo` gets the demo
/// database (made-up locations for loopback and private addresses, so that the demo's
/// geo-targeted line items serve on this machine); otherwise the start says what geo targeting
/// then matches.
pub(crate) fn open(config: &Config) -> Result<Option<Arc<GeoSource>>, Failure> {
    let geo = &config.geo;
    // The load refused `geo.asn_database` without `geo.database`.
    let Some(location) = geo.database.clone() else {
        return Ok(if config.demo {
            demo().map(Some)?
        } else {
            warn_without_database(config);
            None
        });
    };
    let source = GeoSource::open(GeoPaths {
        location,
        network: geo.asn_database.clone(),
    })
    .map_err(|error| config_error(format!("`geo.database`: {error}")))?;
    let database = source.load();
    let info = database.location_info();
    tracing::info!(
        file = %info.file,
        database_type = %info.database_type,
        build_epoch = info.build_epoch,
        networks = info.networks,
        network_database = database.network_info().map(|n| n.database_type.as_str()),
        "geo database loaded"
    );
    drop(database);
    Ok(Some(Arc::new(source)))
}

fn demo() -> Result<Arc<GeoSource>, Failure> {
    let database = GeoDatabase::from_bytes(marquee_geo::demo::demo_database(), None)
        .map_err(|error| config_error(format!("the demo geo database: {error}")))?;
    tracing::warn!(
        "geo: the demo database (made-up locations for loopback and private addresses, not \
         real geolocation); set `geo.database` to a GeoLite2 or DB-IP file for live traffic"
    );
    Ok(Arc::new(GeoSource::fixed(database)))
}

fn warn_without_database(config: &Config) {
    let Some(header) = &config.edge.country_header else {
        tracing::warn!(
            "no geo database (`geo.database`) and no country header (`edge.country_header`): \
             line items targeting a country, region, city, metro, postal code, radius, AS \
             number or connection type will not serve on ad requests; see docs/geo-and-device.md"
        );
        return;
    };
    tracing::warn!(
        header = %header,
        "no geo database (`geo.database`): ad requests carry a country from the header \
         only; region, city, metro, postal code, radius, AS number and connection type \
         targeting will not serve on them; see docs/geo-and-device.md"
    );
}
