//! The geo databases' upkeep: reloaded when their files change (off the request threads),
//! and their state in `/metrics`. Per-request lookups are in `visitor.rs`.

use std::fmt::Write;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use marquee_geo::{GeoSource, Reload};

use crate::Edge;

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

/// `marquee_geo_*`: reloads, failed reloads, and when the databases in use were built (to
/// alert on a file that stopped being refreshed).
pub(crate) fn render_metrics(edge: &Edge, out: &mut String) {
    let Some(geo) = &edge.geo else {
        return;
    };
    let _ = writeln!(
        out,
        "# HELP marquee_geo_reloads_total Geo database files reloaded after they changed.\n\
         # TYPE marquee_geo_reloads_total counter\nmarquee_geo_reloads_total {}",
        geo.reloads()
    );
    let _ = writeln!(
        out,
        "# HELP marquee_geo_reload_failures_total Changed geo database files that could not be used (the last good one stays).\n\
         # TYPE marquee_geo_reload_failures_total counter\nmarquee_geo_reload_failures_total {}",
        geo.reload_failures()
    );
    let database = geo.load();
    out.push_str(
        "# HELP marquee_geo_database_build_timestamp_seconds When the geo database in use was built, by its metadata.\n\
         # TYPE marquee_geo_database_build_timestamp_seconds gauge\n",
    );
    let files = [("location", Some(database.location_info()))]
        .into_iter()
        .chain([("network", database.network_info())]);
    for (role, info) in files {
        if let Some(info) = info {
            let _ = writeln!(
                out,
                "marquee_geo_database_build_timestamp_seconds{{database=\"{role}\"}} {}",
                info.build_epoch
            );
        }
    }
}
