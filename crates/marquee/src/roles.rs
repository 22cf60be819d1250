//! The split roles: `marquee manager` (management API, snapshot compiler, aggregation,
//! pacing; no edge endpoints) and `marquee edge --manager URL` (answers ads, tracking and
//! bids from the snapshots it polls, registers by heartbeat, renews leases over HTTP, serves
//! its log). `marquee serve` runs both in one process.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use marquee_config::{Config, Overrides};
use marquee_edge::Edge;
use marquee_edge::pacing::SyncClient;
use marquee_edge::periodic::Schedule;
use marquee_edge::remote::{self, Addresses, IdentityError, ManagerClient};
use marquee_manager::{Manager, ManagerOptions};
use marquee_model::{Clock, MetricsAccess, SystemClock};
use marquee_store::{ManagerLock, Store};

use crate::{
    CommonArgs, EXIT_CONFIG, Failure, ServeArgs, config_error, init_logging, load_config,
    load_demo, open_aggregator, open_edge, open_pacing, open_store, shutdown_signal,
};

#[derive(Debug, Args)]
pub(crate) struct EdgeArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Address to listen on [default: 127.0.0.1:8080]; port 0 picks a free port.
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
    /// The manager's URL, e.g. http://10.0.0.5:8080 [default: `edge.manager_url`].
    #[arg(long, value_name = "URL")]
    manager: Option<String>,
    /// This edge's id [default: `edge.id`, else one kept in the data directory].
    #[arg(long, value_name = "ID")]
    id: Option<String>,
}

/// A stop signal every background task can wait on.
pub(crate) fn stop_channel() -> (
    tokio::sync::watch::Sender<bool>,
    impl Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
) {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let until_stopped = move || {
        let mut stopped = stopped.clone();
        Box::pin(async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        }) as std::pin::Pin<Box<dyn Future<Output = ()> + Send>>
    };
    (stop, until_stopped)
}

/// The edge's background upkeep, the same in the all-in-one process and an edge: the event
/// log's disk limit and the reloads of the traffic lists and the geo databases.
pub(crate) struct EdgeHousekeeping {
    disk_limit: tokio::task::JoinHandle<()>,
    list_reload: tokio::task::JoinHandle<()>,
    geo_reload: Option<tokio::task::JoinHandle<()>>,
}

impl EdgeHousekeeping {
    pub(crate) fn spawn(
        edge: &Arc<Edge>,
        config: &Config,
        until_stopped: &impl Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
    ) -> EdgeHousekeeping {
        let disk_limit = tokio::spawn(marquee_edge::log_service::enforce_disk_limit(
            Arc::clone(&edge.log),
            config.aggregation.log_disk_limit_bytes(),
            Duration::from_secs(10),
            until_stopped(),
        ));
        let list_reload = tokio::spawn(marquee_edge::quality::reload_lists_every(
            Arc::clone(edge),
            config.traffic.reload_interval,
            until_stopped(),
        ));
        let geo_reload = edge.geo.clone().map(|geo| {
            tokio::spawn(marquee_edge::geo::reload_geo_every(
                geo,
                config.geo.reload_interval,
                until_stopped(),
            ))
        });
        EdgeHousekeeping {
            disk_limit,
            list_reload,
            geo_reload,
        }
    }

    /// Waits for the tasks to end (they end when stopped).
    pub(crate) async fn join(self) -> Result<(), tokio::task::JoinError> {
        self.disk_limit.await?;
        self.list_reload.await?;
        if let Some(geo_reload) = self.geo_reload {
            geo_reload.await?;
        }
        Ok(())
    }
}

/// The shared secret split roles need: edges register, sync and serve their logs with it.
fn required_secret(config: &Config, role: &str) -> Result<String, Failure> {
    let Some(token) = &config.aggregation.token else {
        return Err(config_error(format!(
            "`aggregation.token` must be set for `marquee {role}`: edges register, sync and \
             serve their logs with it (the same value on the manager and every edge)"
        )));
    };
    Ok(token.as_str().to_owned())
}

/// Exit status of a manager that lost the manager lock to another (sysexits EX_TEMPFAIL): a
/// supervisor restarts it, and it waits for the lock again.
const EXIT_LOCK_LOST: u8 = 75;
/// How often a manager waiting for the active one to stop tries the lock again.
const LOCK_RETRY: Duration = Duration::from_secs(1);

/// Waits until this process is the database's only active manager (see
/// `marquee_store::ManagerLock`), before anything that aggregates, paces or even listens
/// starts; `None` if the process was told to stop meanwhile.
pub(crate) async fn become_active_manager(
    store: &dyn Store,
    signalled: &mut (impl Future<Output = ()> + Unpin),
) -> Result<Option<Arc<ManagerLock>>, Failure> {
    tokio::select! {
        lock = marquee_store::wait_for_manager_lock(store, LOCK_RETRY) => Ok(Some(Arc::new(lock?))),
        () = signalled => {
            tracing::info!("stopped while waiting for the active manager to stop");
            Ok(None)
        }
    }
}

/// Resolves on the shutdown signal, or when another manager took the lock.
pub(crate) async fn until_stopped_or_lock_lost(
    signalled: impl Future<Output = ()>,
    lock: Arc<ManagerLock>,
) {
    tokio::select! {
        () = signalled => {},
        () = lock.lost() => {
            tracing::error!("another manager took over the database; stopping");
        }
    }
}

/// After the loops stopped: the final aggregation run (what the edges logged up to now, so a
/// graceful stop leaves the least uncounted), unless the lock was lost, when the other
/// manager counts it and this one exits with [`EXIT_LOCK_LOST`].
pub(crate) async fn finish_as_manager(
    aggregator: &marquee_manager::Aggregator,
    lock: &ManagerLock,
) -> Result<(), Failure> {
    if lock.is_lost() {
        return Err(Failure {
            status: EXIT_LOCK_LOST,
            message: "stopped: another manager took the manager lock of this database \
                      (this manager's connection holding it had ended)"
                .into(),
        });
    }
    if let Err(error) = aggregator.drain().await {
        tracing::error!(%error, "final aggregation run failed; the next start counts the rest");
    }
    Ok(())
}

/// The manager of `marquee serve` and `marquee manager`: opened on the snapshot directory,
/// with a first refresh so that edges find a snapshot at once.
pub(crate) async fn open_manager(
    config: &Config,
    store: &Arc<dyn Store>,
) -> Result<Arc<Manager>, Failure> {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let manager = Manager::open(
        Arc::clone(store),
        clock,
        ManagerOptions {
            snapshot_dir: config.data_dir.join("snapshots"),
            keep: config.snapshot.keep,
            compile_interval: config.snapshot.compile_interval,
        },
    )
    .await?;
    manager.set_metrics_access(MetricsAccess::new(config.metrics.token.clone()));
    // Sampling off (a rate of 0) keeps no sample to forecast from: no forecast routes.
    match marquee_manager::forecasts::ForecastService::new(
        Arc::clone(store),
        Arc::clone(manager.clock()),
        config.forecast.sample_rate(),
    ) {
        Ok(forecasts) => manager.attach_forecasts(forecasts),
        Err(error) => tracing::info!(%error, "forecasts are off"),
    }
    manager.set_geo_availability(marquee_api::GeoAvailability {
        // `--demo` without a file locates with the demo database (`geo::open`).
        location: marquee_api::GeoLocationSource::from_sources(
            config.geo.database.is_some() || config.demo,
            config.edge.country_header.is_some(),
        ),
        network: config.geo.asn_database.is_some(),
    });
    manager.refresh().await?;
    Ok(manager)
}

/// Reports the in-process edge of `marquee serve` to the registry every `edge.heartbeat_ms`,
/// so it is listed with the remote ones.
pub(crate) async fn local_heartbeat(
    manager: Arc<Manager>,
    edge: Arc<Edge>,
    public_url: String,
    interval: Duration,
    stop: impl Future<Output = ()>,
) {
    let addresses = Addresses {
        log_url: public_url.clone(),
        public_url,
    };
    let mut schedule = Schedule::new(interval, stop);
    while schedule.next().await {
        let report = remote::report(&edge, marquee_manager::edges::IN_PROCESS_ID, &addresses);
        if let Err(error) = manager.report_edge(report, true).await {
            tracing::warn!(%error, "in-process edge heartbeat failed");
        }
    }
}

/// After the last request was answered: what the edge's leases hold unused goes back to the
/// budget now, not at their expiry.
pub(crate) async fn give_leases_back(edge: &Edge, client: &dyn SyncClient) {
    marquee_sharedstate::drain_at_exit(edge.shared.as_ref()).await;
    match remote::release_leases(edge, client).await {
        Ok(released) => tracing::info!(released, "leases released"),
        Err(error) => {
            tracing::warn!(%error, "leases not released; the manager reclaims them at expiry");
        }
    }
}

/// `marquee manager`: everything of `marquee serve` but the edge.
pub(crate) async fn manager(args: ServeArgs) -> Result<(), Failure> {
    let config = args.config()?;
    let secret = required_secret(&config, "manager")?;
    init_logging(&config)?;
    let mut signalled = Box::pin(shutdown_signal());
    let store = open_store(&config).await?;
    let Some(lock) = become_active_manager(&*store, &mut signalled).await? else {
        return Ok(());
    };
    let demo_token = load_demo(&config, &*store).await?;
    let manager = open_manager(&config, &store).await?;
    // The dashboard's why-not-served locates test requests as the edges do.
    let geo = crate::geo::open(&config)?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|error| format!("cannot listen on {}: {error}", config.listen))?;
    let address = listener.local_addr()?;
    let ad_url = match &config.edge.public_url {
        Some(url) => url.to_string(),
        None => {
            tracing::warn!(
                "edge.public_url is not set: generated ad tags point at the manager, which serves no ads"
            );
            format!("http://{address}")
        }
    };
    let pacing = open_pacing(&config, &store).await?;
    manager.attach_pacing(Arc::clone(&pacing));
    let aggregator = open_aggregator(&config, &store, None);
    manager.attach_aggregator(Arc::clone(&aggregator));
    manager.accept_remote_edges(secret).await?;

    // The first line on stdout is the address, for scripts and tests that start on port 0.
    println!("marquee listening on http://{address}");
    tracing::info!(%address, data_dir = %config.data_dir.display(), "manager serving");
    if let Some(token) = demo_token {
        eprintln!("demo admin token (shown once): {token}");
    }
    let (stop, until_stopped) = stop_channel();
    let compile_loop = tokio::spawn(Arc::clone(&manager).run_compile_loop(until_stopped()));
    let forecast_loop = tokio::spawn(Arc::clone(&manager).run_forecast_loop(until_stopped()));
    let pacing_loop = tokio::spawn(Arc::clone(&pacing).run_loop(until_stopped()));
    let aggregation = tokio::spawn(Arc::clone(&aggregator).run_loop(until_stopped()));
    let geo_reload = geo.clone().map(|geo| {
        tokio::spawn(marquee_edge::geo::reload_geo_every(
            geo,
            config.geo.reload_interval,
            until_stopped(),
        ))
    });
    let app = marquee_manager::router_with(
        &manager,
        &ad_url,
        marquee_api::ApiOptions {
            report_max_rows: config.reports.max_rows(),
            programmatic: crate::programmatic_reports(&config)?,
            ..marquee_api::ApiOptions::default()
        },
    );
    let app = crate::users::with_dashboard(app, &manager, &config, &ad_url, false, geo)?;
    // With the peer's address: `/metrics` without a token and the dashboard's sign-in limits
    // go by it.
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown({
            let lock = Arc::clone(&lock);
            async move {
                until_stopped_or_lock_lost(signalled, lock).await;
                let _ = stop.send(true);
            }
        })
        .await?;
    compile_loop.await?;
    forecast_loop.await?;
    pacing_loop.await?;
    aggregation.await?;
    if let Some(geo_reload) = geo_reload {
        geo_reload.await?;
    }
    finish_as_manager(&aggregator, &lock).await?;
    tracing::info!("manager stopped");
    Ok(())
}

/// `marquee edge`: an edge as its own process, following a manager.
pub(crate) async fn edge(args: EdgeArgs) -> Result<(), Failure> {
    let overrides = Overrides {
        listen: args.listen,
        ..Overrides::default()
    };
    let config = load_config(&args.common, overrides)?;
    let secret = required_secret(&config, "edge")?;
    let Some(manager_url) = args
        .manager
        .clone()
        .filter(|url| !url.is_empty())
        .or_else(|| config.edge.manager_url.as_ref().map(ToString::to_string))
    else {
        return Err(config_error(
            "`marquee edge` needs the manager's URL: `--manager http://…` or `edge.manager_url`"
                .into(),
        ));
    };
    let client = ManagerClient::new(&manager_url, &secret)
        .map_err(|error| config_error(format!("`--manager` / `edge.manager_url`: {error}")))?;
    init_logging(&config)?;
    let signalled = shutdown_signal();
    // `remote::identity` makes and keeps an id when given none (empty).
    let configured_id = args
        .id
        .as_deref()
        .or(config.edge.id.as_deref())
        .unwrap_or_default();
    let edge_dir = config.data_dir.join("edge");
    let id = remote::identity(&edge_dir, configured_id).map_err(|error| Failure {
        status: match error {
            IdentityError::Invalid(_) | IdentityError::Corrupt(..) => EXIT_CONFIG,
            IdentityError::Io { .. } => 1,
        },
        message: error.to_string(),
    })?;

    // Without a URL of its own the edge names its listen address: an unspecified one
    // (0.0.0.0, ::) reaches nothing, so the manager could never read this edge's log and
    // browsers could never reach its tracking links.
    if config.listen.ip().is_unspecified() {
        let unset: Vec<&str> = [
            ("edge.log_url", config.edge.log_url.is_none()),
            ("edge.public_url", config.edge.public_url.is_none()),
        ]
        .into_iter()
        .filter_map(|(key, unset)| unset.then_some(key))
        .collect();
        if !unset.is_empty() {
            return Err(config_error(format!(
                "listening on {} names no reachable host: set {} to the URL others reach this \
                 edge at (e.g. MARQUEE_EDGE__LOG_URL=http://10.0.0.7:8080)",
                config.listen,
                unset.join(" and ")
            )));
        }
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|error| format!("cannot listen on {}: {error}", config.listen))?;
    let address = listener.local_addr()?;
    let listen_url = || format!("http://{address}");
    let addresses = Addresses {
        public_url: config
            .edge
            .public_url
            .as_ref()
            .map_or_else(listen_url, ToString::to_string),
        log_url: config
            .edge
            .log_url
            .as_ref()
            .map_or_else(listen_url, ToString::to_string),
    };
    // `open_edge` serves the log with the shared secret, which `required_secret` checked.
    let edge = Arc::new(open_edge(&config, &addresses.public_url)?);
    // Serve from the copy kept by the last run until the manager answers (it may be away).
    if edge
        .holder
        .install_local_copy(&edge.config.data_dir)
        .is_none()
    {
        tracing::warn!("no snapshot yet: ad requests get the fallback until the manager answers");
    }
    let sync_client: Arc<dyn SyncClient> = Arc::new(client.clone());
    if let Err(error) = marquee_edge::pacing::sync_once(&edge, &*sync_client).await {
        tracing::warn!(%error, "first pacing sync failed; budgeted line items wait for a lease");
    }

    println!("marquee listening on http://{address}");
    tracing::info!(%address, %id, manager = %client.base(), data_dir = %config.data_dir.display(), "edge serving");
    let (stop, until_stopped) = stop_channel();
    let follower = tokio::spawn(marquee_edge::poll::follow(
        Arc::clone(&edge),
        client.base().to_owned(),
        secret.clone(),
        config.edge.poll_interval,
        until_stopped(),
    ));
    let edge_sync = tokio::spawn(marquee_edge::pacing::run_sync(
        Arc::clone(&edge),
        Arc::clone(&sync_client),
        config.pacing.sync_interval,
        until_stopped(),
    ));
    let heartbeat = tokio::spawn(remote::run_heartbeat(
        Arc::clone(&edge),
        client,
        id,
        addresses,
        config.edge.heartbeat,
        until_stopped(),
    ));
    let housekeeping = EdgeHousekeeping::spawn(&edge, &config, &until_stopped);
    let shutdown = Box::pin(async move {
        signalled.await;
        let _ = stop.send(true);
    });
    marquee_edge::serve(listener, Arc::clone(&edge), None, shutdown).await?;
    follower.await?;
    edge_sync.await?;
    heartbeat.await?;
    housekeeping.join().await?;
    edge.log.flush_and_close()?;
    give_leases_back(&edge, &*sync_client).await;
    tracing::info!("edge stopped; event log flushed");
    Ok(())
}
