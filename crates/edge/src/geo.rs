//! The geo databases' upkeep: reloaded when their files change (off the request threads),
//! and their state in `/metrics`. Per-request lookups are in `visitor.rs`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use marquee_geo::{GeoSource, Reload};
use marquee_metrics::{Def, ObservedBy, ObservedCounter, Registry, Unit};

/// Looks at the geo database files every `every` and reloads those that changed (`[geo]`
/// `reload_interval_secs`); a file that fails keeps the last good one, and says so in the log
/// and `marquee_geo_reload_failures_total`. Returns at once without files to watch.
pub async fn reload_geo_every(
    geo: Arc<GeoSource>,
    every: Duration,
    stop: impl Future<Output = ()>,
) {
    if geo.paths().is_none() {
        return;
    }
    let mut schedule = crate::periodic::Schedule::new(every, stop);
    // The first tick is at once: the files were just read.
    if !schedule.next().await {
        return;
    }
    while schedule.next().await {
        let geo = Arc::clone(&geo);
        // Reading and checking a changed file takes a while: not on a worker.
        let _ = tokio::task::spawn_blocking(move || reload(&geo)).await;
    }
}

fn reload(geo: &GeoSource) {
    match geo.reload_if_changed() {
        Reload::Unchanged => {}
        Reload::Reloaded { generation } => {
            let database = geo.load();
            let info = database.location_info();
            tracing::info!(
                generation,
                file = %info.file,
                database_type = %info.database_type,
                build_epoch = info.build_epoch,
                "geo database reloaded"
            );
        }
        Reload::Failed { errors, .. } => {
            for error in errors {
                tracing::error!(%error, "geo database not reloaded; the last good one stays");
            }
        }
    }
}

const RELOADS: Def = Def::new(
    "marquee_geo_reloads",
    "Geo database files reloaded after they changed.",
);
const RELOAD_FAILURES: Def = Def::new(
    "marquee_geo_reload_failures",
    "Changed geo database files that could not be used (the last good one stays).",
);
const BUILT: Def = Def::new(
    "marquee_geo_database_build_timestamp",
    "When the geo database in use was built, by its metadata.",
)
.with_unit(Unit::Seconds);

/// `marquee_geo_*`: reloads, failed reloads, and when the databases in use were built (to
/// alert on a file that stopped being refreshed).
pub(crate) fn register_metrics(registry: &mut Registry, geo: &Arc<GeoSource>) {
    let source = Arc::clone(geo);
    RELOADS.register(registry, ObservedCounter::new(move || source.reloads()));
    let source = Arc::clone(geo);
    let failures = move || source.reload_failures();
    RELOAD_FAILURES.register(registry, ObservedCounter::new(failures));
    let source = Arc::clone(geo);
    let built = move || {
        let database = source.load();
        let files = [("location", Some(database.location_info()))]
            .into_iter()
            .chain([("network", database.network_info())]);
        files
            .filter_map(|(role, info)| Some((role.to_owned(), info?.build_epoch)))
            .collect::<Vec<_>>()
    };
    BUILT.register(registry, ObservedBy::new("database", built));
}
