//! `marquee`: the one binary. It parses the command line and configuration and wires the
//! library crates together; all behaviour lives in those crates.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use marquee_config::{
    AuctionKind, Config, Database, DurabilityMode, LogFormat, MediaType, OpenRtbVersion, Overrides,
};
use marquee_edge::{
    BidderConfig, Edge, EdgeConfig, Exchange, Fallback, Limits, Quality, QualityRules,
};
use marquee_eventlog::{Durability, EventLog};
use marquee_manager::{
    AggregationOptions, Aggregator, HttpLogSource, LocalLogSource, LogSource, demo,
};
use marquee_model::{Clock, MetricsAccess, Role, SystemClock};
use marquee_sharedstate::{SharedConfig, SharedState};
use marquee_store::{NewToken, PostgresStore, SqliteStore, Store};
use marquee_tracking::KeyRing;

mod geo;
mod prebid;
mod roles;
mod users;

/// Exit status for bad configuration or usage (sysexits EX_USAGE).
const EXIT_CONFIG: u8 = 64;

#[derive(Debug, Parser)]
#[command(
    name = "marquee",
    version,
    about = "Marquee: a high-performance ad server and OpenRTB bidder",
    long_about = "Marquee serves ads and answers OpenRTB bid requests from an in-memory campaign \
                  snapshot, and manages campaigns, snapshots and reports from one database.\n\n\
                  Configuration comes from built-in defaults, then the TOML file given with \
                  --config, then MARQUEE_* environment variables (nested keys joined with __, \
                  e.g. MARQUEE_SNAPSHOT__KEEP=5), then command-line flags."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run everything in one process: management API, snapshot compiler and publisher.
    Serve(ServeArgs),
    /// Run the manager alone: management API, compiler, aggregation and pacing; edges run as
    /// `marquee edge` and register with it (needs `aggregation.token`).
    Manager(ServeArgs),
    /// Run an edge alone, following a manager: `marquee edge --manager http://…` (needs
    /// `aggregation.token`, the manager's value).
    Edge(roles::EdgeArgs),
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage dashboard users.
    #[command(subcommand)]
    User(users::UserCommand),
    /// Apply database migrations and exit.
    Migrate(CommonArgs),
    /// Copy a SQLite database (`marquee serve`'s) into a new, empty PostgreSQL database, for a
    /// manager on PostgreSQL: `marquee copy-database --database postgres://…`.
    CopyDatabase(CopyArgs),
    /// Inventory forecasts from the stored sample: `backtest`.
    #[command(subcommand)]
    Forecast(ForecastCommand),
    /// Prebid.js header bidding: make a price-priority line item set (`create-set`).
    #[command(subcommand)]
    Prebid(prebid::PrebidCommand),
    /// Measure: load generator (`run`) and the hello-world reference server (`reference`).
    #[command(subcommand)]
    Bench(marquee_bench::BenchCommand),
}

#[derive(Debug, Args)]
struct CommonArgs {
    /// TOML configuration file.
    #[arg(long, short = 'c', value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory: SQLite database, snapshots, event logs [default: ./data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
    /// The database (`database.url`): a SQLite file [default: DIR/marquee.db], or
    /// postgres://USER:PASSWORD@HOST:PORT/DATABASE for PostgreSQL.
    #[arg(long, value_name = "URL")]
    database: Option<String>,
}

#[derive(Debug, Args)]
struct CopyArgs {
    /// `--database` (or `database.url`) is where the copy goes: PostgreSQL.
    #[command(flatten)]
    common: CommonArgs,
    /// The SQLite database to copy [default: DIR/marquee.db]. Stop `marquee serve` first, so
    /// that its last events are counted before the copy.
    #[arg(long, value_name = "FILE")]
    from: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ServeArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Address to listen on [default: 127.0.0.1:8080]; port 0 picks a free port.
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// Load the demo data set if the database is empty, and print an admin token for it.
    #[arg(long)]
    demo: bool,
}

impl ServeArgs {
    /// The configuration, with what this command line sets over it (`marquee serve` and
    /// `marquee manager` take the same arguments).
    fn config(&self) -> Result<Config, Failure> {
        let overrides = Overrides {
            listen: self.listen,
            demo: self.demo.then_some(true),
            ..Overrides::default()
        };
        load_config(&self.common, overrides)
    }
}

#[derive(Debug, Subcommand)]
enum ForecastCommand {
    /// Fit the forecast on stored days of sample and measure it on the days after them, with
    /// the latest snapshot's line items: the error per line item and overall.
    Backtest(BacktestArgs),
}

#[derive(Debug, Args)]
struct BacktestArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Whole UTC days fitted on, before the test days.
    #[arg(long, value_name = "N", default_value_t = 21)]
    train_days: u32,
    /// Whole UTC days measured, the last of them yesterday.
    #[arg(long, value_name = "M", default_value_t = 7)]
    test_days: u32,
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Create an API token and print it once; only its hash is stored.
    Create(TokenCreateArgs),
    /// List the API tokens: id, role, owner, creation time and label (never the token).
    List(CommonArgs),
    /// Revoke an API token by id (see `marquee token list`): the next API call with it is
    /// refused with 401, also by a manager already running.
    Revoke(TokenRevokeArgs),
}

#[derive(Debug, Args)]
struct TokenRevokeArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The token's id, as `marquee token list` and `marquee token create` show it.
    #[arg(value_name = "ID")]
    id: u64,
}

#[derive(Debug, Args)]
struct TokenCreateArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// What the token may do.
    #[arg(long, value_parser = parse_role)]
    role: Role,
    /// The advertiser id (role advertiser) or publisher id (role publisher) the token is
    /// confined to; not allowed for admin.
    #[arg(long, value_name = "ID")]
    owner: Option<u64>,
    /// A note to recognise the token by.
    #[arg(long, default_value = "")]
    label: String,
}

fn parse_role(text: &str) -> Result<Role, String> {
    Role::parse(text)
        .ok_or_else(|| format!("{text:?} is not a role; use admin, advertiser or publisher"))
}

/// A failure with the exit status it deserves.
struct Failure {
    status: u8,
    message: String,
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(error: E) -> Self {
        Failure {
            status: 1,
            message: error.to_string(),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("marquee: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("marquee: {}", failure.message);
            ExitCode::from(failure.status)
        }
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::Manager(args) => roles::manager(args).await,
        Command::Edge(args) => roles::edge(args).await,
        Command::Token(TokenCommand::Create(args)) => create_token(args).await,
        Command::Token(TokenCommand::List(args)) => list_tokens(args).await,
        Command::Token(TokenCommand::Revoke(args)) => revoke_token(args).await,
        Command::User(command) => users::run(command).await,
        Command::Prebid(command) => prebid::run(command).await,
        Command::Bench(command) => Ok(marquee_bench::run(command).await?),
        Command::CopyDatabase(args) => copy_database(args).await,
        Command::Forecast(ForecastCommand::Backtest(args)) => forecast_backtest(args).await,
        Command::Migrate(args) => {
            let config = load_config(&args, Overrides::default())?;
            init_logging(&config)?;
            open_store(&config).await?;
            println!("migrations applied to {}", config.database().describe());
            Ok(())
        }
    }
}

fn load_config(common: &CommonArgs, mut overrides: Overrides) -> Result<Config, Failure> {
    overrides.data_dir = common.data.clone();
    overrides.database_url = common.database.clone();
    Config::load(common.config.as_deref(), &overrides).map_err(|error| Failure {
        status: EXIT_CONFIG,
        message: error.to_string(),
    })
}

/// Starts logging as `[log]` says; a filter the logging library cannot read is a configuration
/// error.
fn init_logging(config: &Config) -> Result<(), Failure> {
    let filter = tracing_subscriber::EnvFilter::try_new(config.log.level.as_str())
        .map_err(|error| config_error(format!("`log.level`: {error}")))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second initialisation (never in this binary) would only be ignored.
    let _ = match config.log.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    Ok(())
}

/// Opens the database `database.url` selects (SQLite in the data directory by default) and
/// applies pending migrations. Creates the data directory, which every command needs.
/// What an admin command (tokens, users) starts with: its configuration, logging, and the
/// store it changes.
async fn open_admin_store(common: &CommonArgs) -> Result<(Config, Arc<dyn Store>), Failure> {
    let config = load_config(common, Overrides::default())?;
    init_logging(&config)?;
    let store = open_store(&config).await?;
    Ok((config, store))
}

async fn open_store(config: &Config) -> Result<Arc<dyn Store>, Failure> {
    let database = config.database();
    let mut directories = vec![config.data_dir.as_path()];
    if let Database::Sqlite(path) = &database {
        directories.extend(path.parent().filter(|dir| !dir.as_os_str().is_empty()));
    }
    for dir in directories {
        std::fs::create_dir_all(dir)
            .map_err(|error| format!("cannot create directory {}: {error}", dir.display()))?;
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store: Arc<dyn Store> = match database {
        Database::Sqlite(path) => Arc::new(SqliteStore::open(&path, clock)?),
        Database::Postgres(url) => Arc::new(PostgresStore::connect(&url, clock).await?),
    };
    Ok(store)
}

async fn copy_database(args: CopyArgs) -> Result<(), Failure> {
    let config = load_config(&args.common, Overrides::default())?;
    init_logging(&config)?;
    let Database::Postgres(url) = config.database() else {
        return Err(Failure {
            status: EXIT_CONFIG,
            message: "copy-database copies into PostgreSQL: give --database \
                      postgres://USER:PASSWORD@HOST:PORT/DATABASE (or database.url)"
                .into(),
        });
    };
    let from = args.from.unwrap_or_else(|| config.default_sqlite_path());
    if !from.is_file() {
        return Err(format!("no SQLite database at {}", from.display()).into());
    }
    let target = PostgresStore::connect(&url, Arc::new(SystemClock)).await?;
    let summary = marquee_store::copy_sqlite_to_postgres(&from, &target).await?;
    for (table, rows) in &summary.tables {
        eprintln!("{table}: {rows} rows");
    }
    println!(
        "copied {} into {} (change counter {})",
        from.display(),
        config.database().describe(),
        summary.change_counter
    );
    Ok(())
}

/// `marquee forecast backtest`: the latest published snapshot against the stored sample.
async fn forecast_backtest(args: BacktestArgs) -> Result<(), Failure> {
    let (config, store) = open_admin_store(&args.common).await?;
    let days = marquee_manager::forecast::BacktestDays {
        train: args.train_days,
        test: args.test_days,
        rate: config.forecast.sample_rate(),
    };
    let backtest = marquee_manager::forecast::backtest_latest(
        store.as_ref(),
        &config.data_dir.join("snapshots"),
        SystemClock.now(),
        days,
    )
    .await?;
    print!("{}", marquee_manager::forecast::report(&backtest));
    Ok(())
}

async fn create_token(args: TokenCreateArgs) -> Result<(), Failure> {
    let (_, store) = open_admin_store(&args.common).await?;
    let (token, hash) = marquee_api::generate_token()?;
    let record = store
        .create_token(
            NewToken {
                role: args.role,
                owner_id: args.owner,
                hash,
                label: args.label,
            },
            &marquee_store::Actor::cli(),
        )
        .await?;
    eprintln!(
        "created {} token {} (shown once; only its hash is stored)",
        record.role.as_str(),
        record.id
    );
    println!("{token}");
    Ok(())
}

async fn list_tokens(args: CommonArgs) -> Result<(), Failure> {
    let (_, store) = open_admin_store(&args).await?;
    let tokens = store.list_tokens().await?;
    println!(
        "{:<8} {:<11} {:<8} {:<27} LABEL",
        "ID", "ROLE", "OWNER", "CREATED"
    );
    for token in &tokens {
        let owner = token
            .owner_id
            .map_or_else(|| "-".to_owned(), |id| id.to_string());
        println!(
            "{:<8} {:<11} {:<8} {:<27} {}",
            token.id,
            token.role.as_str(),
            owner,
            token.created_at.to_string(),
            token.label
        );
    }
    Ok(())
}

async fn revoke_token(args: TokenRevokeArgs) -> Result<(), Failure> {
    let (config, store) = open_admin_store(&args.common).await?;
    let Some(token) = store
        .revoke_token(args.id, &marquee_store::Actor::cli())
        .await?
    else {
        return Err(format!(
            "no API token with id {} in {}; `marquee token list` shows the tokens",
            args.id,
            config.database().describe()
        )
        .into());
    };
    eprintln!(
        "revoked {} token {} ({:?}); API calls with it are refused from now on",
        token.role.as_str(),
        token.id,
        token.label
    );
    Ok(())
}

async fn serve(args: ServeArgs) -> Result<(), Failure> {
    let config = args.config()?;
    init_logging(&config)?;
    let mut signalled = Box::pin(shutdown_signal());
    let store = open_store(&config).await?;
    // Before the edge opens the event log too: a second `serve` on this data directory waits
    // here for the first to stop.
    let Some(lock) = roles::become_active_manager(&*store, &mut signalled).await? else {
        return Ok(());
    };
    // Listening before the demo is made: a start that cannot listen creates nothing, so the
    // demo's admin token (shown once) is never made and then lost with the failed start.
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|error| format!("cannot listen on {}: {error}", config.listen))?;
    let address = listener.local_addr()?;
    if let Some(token) = load_demo(&config, &*store).await? {
        // At once (on stderr, so stdout's first line stays the address): nothing after this
        // may lose it.
        eprintln!(
            "demo admin token (shown once): {token}\n\
             try: curl -H 'Authorization: Bearer {token}' http://{address}/api/v1/line-items"
        );
    }
    let manager = roles::open_manager(&config, &store).await?;
    let public_url = config
        .edge
        .public_url
        .as_ref()
        .map_or_else(|| format!("http://{address}"), ToString::to_string);
    let edge = Arc::new(open_edge(&config, &public_url)?);
    // Ready before announcing: the published snapshot, or the copy kept from the last run.
    let installed = match manager.latest() {
        Some(latest) => edge.accept_snapshot(&latest.bytes).ok(),
        None => edge.holder.install_local_copy(&edge.config.data_dir),
    };
    if installed.is_none() {
        tracing::warn!("no snapshot yet: ad requests get the fallback until one is published");
    }
    // The first line on stdout is the address, for scripts and tests that start on port 0.
    println!("marquee listening on http://{address}");
    tracing::info!(%address, data_dir = %config.data_dir.display(), "serving");

    let (stop, until_stopped) = roles::stop_channel();
    let compile_loop = tokio::spawn(Arc::clone(&manager).run_compile_loop(until_stopped()));
    let forecast_loop = tokio::spawn(Arc::clone(&manager).run_forecast_loop(until_stopped()));
    let follower = tokio::spawn(follow_snapshots(
        manager.subscribe(),
        Arc::clone(&edge),
        until_stopped(),
    ));
    let pacing = open_pacing(&config, &store).await?;
    manager.attach_pacing(Arc::clone(&pacing));
    let sync_client: Arc<dyn marquee_edge::pacing::SyncClient> =
        Arc::new(InProcessSync(Arc::clone(&pacing)));
    // Controls and leases in place before the first request: a budgeted line item serves
    // from its first grant on.
    if let Err(error) = marquee_edge::pacing::sync_once(&edge, &*sync_client).await {
        tracing::warn!(%error, "first pacing sync failed");
    }
    let pacing_loop = tokio::spawn(Arc::clone(&pacing).run_loop(until_stopped()));
    let edge_sync = tokio::spawn(marquee_edge::pacing::run_sync(
        Arc::clone(&edge),
        Arc::clone(&sync_client),
        config.pacing.sync_interval,
        until_stopped(),
    ));
    let aggregator = open_aggregator(&config, &store, Some(&edge));
    manager.attach_aggregator(Arc::clone(&aggregator));
    if let Some(token) = &config.aggregation.token {
        // Remote edges may join this one (`marquee edge --manager` pointed here).
        manager
            .accept_remote_edges(token.as_str().to_owned())
            .await?;
    }
    let local_heartbeat = tokio::spawn(roles::local_heartbeat(
        Arc::clone(&manager),
        Arc::clone(&edge),
        public_url.clone(),
        config.edge.heartbeat,
        until_stopped(),
    ));
    let aggregation = tokio::spawn(Arc::clone(&aggregator).run_loop(until_stopped()));
    let housekeeping = roles::EdgeHousekeeping::spawn(&edge, &config, &until_stopped);
    let app = marquee_manager::router_with(
        &manager,
        &public_url,
        marquee_api::ApiOptions {
            report_max_rows: config.reports.max_rows(),
            programmatic: programmatic_reports(&config)?,
            ..marquee_api::ApiOptions::default()
        },
    );
    let app = users::with_dashboard(app, &manager, &config, &public_url, true, edge.geo.clone())?;
    let shutdown = Box::pin({
        let lock = Arc::clone(&lock);
        async move {
            roles::until_stopped_or_lock_lost(signalled, lock).await;
            let _ = stop.send(true);
        }
    });
    marquee_edge::serve(listener, Arc::clone(&edge), Some(app), shutdown).await?;
    compile_loop.await?;
    forecast_loop.await?;
    follower.await?;
    aggregation.await?;
    housekeeping.join().await?;
    pacing_loop.await?;
    edge_sync.await?;
    local_heartbeat.await?;
    edge.log.flush_and_close()?;
    roles::give_leases_back(&edge, &*sync_client).await;
    roles::finish_as_manager(&aggregator, &lock).await?;
    tracing::info!("stopped; event log flushed");
    Ok(())
}

/// Installs every snapshot the manager publishes into the in-process edge.
async fn follow_snapshots(
    mut published: tokio::sync::watch::Receiver<Option<Arc<marquee_manager::Published>>>,
    edge: Arc<Edge>,
    stopped: impl Future<Output = ()>,
) {
    tokio::pin!(stopped);
    loop {
        let latest = published.borrow_and_update().clone();
        if let Some(latest) = latest
            && edge.holder.version() != Some(latest.header.version)
        {
            let edge = Arc::clone(&edge);
            // Building the index takes a while for large snapshots: off the async workers.
            let _ = tokio::task::spawn_blocking(move || edge.accept_snapshot(&latest.bytes)).await;
        }
        tokio::select! {
            () = &mut stopped => return,
            changed = published.changed() => if changed.is_err() { return },
        }
    }
}

/// The manager's pacing, restored from the store, after one round (so that the edge's first
/// sync finds budgets).
async fn open_pacing(
    config: &Config,
    store: &Arc<dyn Store>,
) -> Result<Arc<marquee_manager::Pacing>, Failure> {
    let p = &config.pacing;
    // The load bounded every one of these far below `SignedDuration`'s range.
    let signed = |duration: Duration| {
        jiff::SignedDuration::try_from(duration).unwrap_or(jiff::SignedDuration::MAX)
    };
    let options = marquee_manager::PacingOptions {
        interval: p.interval,
        pacer: marquee_pacing::PacerConfig {
            max_bid_permille: p.max_bid_permille,
            initial_throttle: f64::from(p.initial_throttle_ppm) / 1_000_000.0,
            ..marquee_pacing::PacerConfig::default()
        },
        leases: marquee_pacing::LeaseConfig {
            renew_every: signed(p.lease_renew),
            lease_duration: signed(p.lease_duration),
            grace: signed(p.lease_grace),
            in_flight_allowance: signed(p.in_flight_allowance),
            token_lifetime: signed(config.edge.token_lifetime),
            ..marquee_pacing::LeaseConfig::default()
        },
        secret: config
            .aggregation
            .token
            .as_ref()
            .map(|token| token.as_str().to_owned())
            .unwrap_or_default(),
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let pacing = marquee_manager::Pacing::open(Arc::clone(store), clock, options)
        .await
        .map_err(|error| Failure {
            status: match error {
                marquee_manager::PacingError::Config(_) => EXIT_CONFIG,
                _ => 1,
            },
            message: error.to_string(),
        })?;
    if let Err(error) = pacing.round().await {
        tracing::error!(%error, "first pacing round failed");
    }
    Ok(Arc::new(pacing))
}

/// The in-process edge's sync: the manager's code path without HTTP.
struct InProcessSync(Arc<marquee_manager::Pacing>);

impl marquee_edge::pacing::SyncClient for InProcessSync {
    fn sync(
        &self,
        request: marquee_pacing::SyncRequest,
    ) -> std::pin::Pin<
        Box<
            dyn Future<
                    Output = Result<marquee_pacing::SyncResponse, marquee_edge::pacing::SyncError>,
                > + Send
                + '_,
        >,
    > {
        Box::pin(async move {
            self.0
                .sync(request)
                .await
                .map_err(|error| marquee_edge::pacing::SyncError(error.to_string()))
        })
    }
}

/// The aggregation: the in-process edge's log (as `local`, in `marquee serve`) and the remote
/// edges configured (registered ones are added as they report), and the in-process edge's log
/// served to other managers when a secret is set.
fn open_aggregator(
    config: &Config,
    store: &Arc<dyn Store>,
    edge: Option<&Arc<Edge>>,
) -> Arc<Aggregator> {
    let a = &config.aggregation;
    let mut sources: Vec<Arc<dyn LogSource>> = Vec::new();
    if let Some(edge) = edge {
        sources.push(Arc::new(LocalLogSource::new(
            marquee_manager::edges::IN_PROCESS_ID,
            Arc::clone(&edge.log),
        )));
    }
    // The load refused remote edges without a token.
    if let Some(token) = &a.token {
        for remote in &a.edges {
            sources.push(Arc::new(HttpLogSource::new(
                remote.name.as_str(),
                remote.url.as_str(),
                token.as_str(),
            )));
        }
    }
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    Arc::new(Aggregator::new(
        Arc::clone(store),
        clock,
        sources,
        AggregationOptions {
            interval: a.interval,
            max_run_bytes: a.max_run_bytes(),
            max_event_age: a.max_event_age,
            max_clock_skew: a.max_clock_skew,
            token_lifetime: config.edge.token_lifetime,
            minute_retention: a.minute_retention,
            delete_consumed: a.delete_consumed,
            sample_history_days: config.forecast.history_days,
        },
    ))
}

/// The edge of `marquee serve`: its event log, tracking keys and settings.
fn open_edge(config: &Config, public_url: &str) -> Result<Edge, Failure> {
    let events = &config.events;
    let durability = match events.durability {
        DurabilityMode::Group => Durability::Group {
            interval: events.group_commit,
        },
        DurabilityMode::Strict => Durability::Strict {
            interval: events.group_commit,
        },
    };
    let log = EventLog::open(
        config.data_dir.join("events"),
        marquee_eventlog::Config {
            durability,
            segment_max_bytes: events.segment_max_mb * 1024 * 1024,
            segment_max_age: events.segment_max_age,
            ..marquee_eventlog::Config::default()
        },
    )?;
    let keys = tracking_keys(config)?;
    let sampling = marquee_edge::sampling::Sampling::new(
        config.forecast.sample_rate(),
        config.forecast.max_bytes_per_day(),
        &keys,
    );
    let fallback = match &config.edge.fallback {
        marquee_config::Fallback::Empty => Fallback::Empty,
        marquee_config::Fallback::Passback(url) => Fallback::Passback(url.to_string()),
    };
    let edge = Edge::new(
        EdgeConfig {
            public_url: public_url.to_owned(),
            token_lifetime: config.edge.token_lifetime,
            fallback,
            cookies: config.edge.cookies,
            country_header: config.edge.country_header.clone(),
            data_dir: config.data_dir.join("edge"),
            limits: Limits {
                max_in_flight: usize::try_from(config.edge.max_in_flight).unwrap_or(usize::MAX),
                // Zero switches this signal off.
                max_queue_delay: Some(config.edge.max_queue_delay).filter(|delay| !delay.is_zero()),
                deadline: config.edge.deadline,
                header_read_timeout: config.edge.header_read_timeout,
                body_timeout: config.edge.body_timeout,
                max_header_bytes: usize::try_from(config.edge.max_header_bytes)
                    .unwrap_or(usize::MAX),
            },
        },
        Arc::new(log),
        keys,
    )
    .with_replay_capacity(config.tracking.replay_capacity_per_minute)
    .with_sampling(sampling)
    .with_quality(quality(config)?)
    .with_bidder(bidder_config(config)?)
    .with_metrics_access(MetricsAccess::new(config.metrics.token.clone()));
    let edge = match gateway_config(config, &edge.bidder.config.rates)? {
        Some(gateway) => edge.with_gateway(
            marquee_gateway::Gateway::new(gateway)
                .map_err(|e| config_error(format!("`gateway.bidders`: {e}")))?,
        ),
        None => edge,
    };
    // With the shared secret set, the log is served to the manager at `/log/…` (split roles,
    // and remote managers of `marquee serve`).
    let edge = match &config.aggregation.token {
        Some(token) => edge.with_log_access(marquee_edge::log_service::LogAccess {
            token: token.as_str().to_owned(),
        }),
        None => edge,
    };
    let edge = match geo::open(config)? {
        Some(geo) => edge.with_geo(geo),
        None => edge,
    };
    Ok(match shared_state(config)? {
        Some(shared) => edge.with_shared_state(shared),
        None => edge,
    })
}

/// The traffic-quality screen of `[traffic]` and `edge.trusted_proxies`; a list file that
/// cannot be read or parsed fails the start, naming the file and line.
fn quality(config: &Config) -> Result<Quality, Failure> {
    let traffic = &config.traffic;
    let rules = QualityRules {
        events_per_user_per_minute: traffic.events_per_user_per_minute,
        events_per_prefix_per_minute: traffic.events_per_prefix_per_minute,
        image_tags_per_prefix_per_minute: traffic.image_tags_per_prefix_per_minute,
        min_click_delay: traffic.min_click_delay,
        image_click_window: traffic.image_click_window,
        clicks_need_impression: traffic.clicks_need_impression,
        trusted_proxies: config.edge.trusted_proxies.clone(),
    };
    Quality::open(
        rules,
        traffic.crawlers_file.clone(),
        traffic.datacenters_file.clone(),
    )
    .map_err(|error| config_error(format!("traffic-quality list {error}")))
}

/// The Redis shared state of `[redis]`, if a URL is set. Needs the runtime (it starts the
/// write-behind flusher); connects on first use, so Redis may come up after the edge.
fn shared_state(config: &Config) -> Result<Option<SharedState>, Failure> {
    let redis = &config.redis;
    let Some(url) = &redis.url else {
        return Ok(None);
    };
    let shared_config = SharedConfig {
        timeout: redis.timeout,
        cache_entries: usize::try_from(redis.cache_entries).unwrap_or(usize::MAX),
        flush_interval: redis.flush_interval,
        flush_timeout: redis.flush_timeout,
        queue_limit: usize::try_from(redis.queue_limit).unwrap_or(usize::MAX),
        failures_to_open: redis.failures_to_open,
        open_for: redis.open,
        ..SharedConfig::new(url.as_str().to_owned())
    };
    SharedState::new(shared_config, Arc::new(SystemClock))
        .map(Some)
        .map_err(|error| config_error(format!("redis.url: {error}")))
}

fn config_error(message: String) -> Failure {
    Failure {
        status: EXIT_CONFIG,
        message: format!("invalid configuration: {message}"),
    }
}

/// The bidder's settings: `[bidder]`, each `[exchanges.NAME]` over it, `[currency]` rates.
/// Values the config crate cannot check (the keys' base64, the rates' decimals) are checked
/// here, naming the key.
fn bidder_config(config: &Config) -> Result<BidderConfig, Failure> {
    use marquee_model::CurrencyRates;
    let exchange = |name: &str, section: &marquee_config::BidderSection| {
        let key = if name.is_empty() {
            "bidder".to_owned()
        } else {
            format!("exchanges.{name}")
        };
        let crypto = section
            .price_keys()
            .map(|keys| {
                marquee_openrtb::PriceCrypto::from_base64(keys.encryption, keys.integrity)
                    .map_err(|e| config_error(format!("`{key}.price_encryption_key`: {e}")))
            })
            .transpose()?;
        Ok::<_, Failure>(Exchange {
            name: name.to_owned(),
            seat: section.seat.clone(),
            currency: currency(section.currency, &format!("{key}.currency"))?,
            crypto,
            latency_margin: section.latency_margin,
            default_tmax: section.default_tmax,
            max_body_bytes: section.max_body_bytes(),
            no_bid_reason: section.no_bid_reason,
            sync_url: section.sync_url.as_ref().map(ToString::to_string),
            filters_invalid_traffic: section.filters_invalid_traffic,
        })
    };
    // Still accepted so older files load; said once per section that sets it.
    let sampled = std::iter::once(("bidder".to_owned(), config.bidder.log_bids_per_mille)).chain(
        config
            .exchanges
            .iter()
            .map(|(name, section)| (format!("exchanges.{name}"), section.log_bids_per_mille)),
    );
    for (section, _) in sampled.filter(|(_, per_mille)| per_mille.is_some()) {
        tracing::warn!(
            key = %format!("{section}.log_bids_per_mille"),
            "no longer changes anything: every bid is counted in the event log"
        );
    }
    let mut rates = CurrencyRates::new(currency(config.currency.base, "currency.base")?);
    for (code, rate) in &config.currency.rates {
        rates
            .set(currency(*code, "currency.rates")?, rate)
            .map_err(|e| config_error(format!("`currency.rates.{code}`: {e}")))?;
    }
    let exchanges = config
        .exchanges
        .iter()
        .map(|(name, section)| exchange(name, &config.bidder.for_exchange(section)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(BidderConfig {
        default: exchange("", &config.bidder)?,
        exchanges,
        rates,
        ..BidderConfig::default()
    })
}

/// Gateway mode's settings from `[gateway]` and `[gateway.bidders.NAME]` (`None` when it is
/// off); rates are `[currency]`'s. The config crate checked ranges and names.
fn gateway_config(
    config: &Config,
    rates: &marquee_model::CurrencyRates,
) -> Result<Option<marquee_gateway::GatewayConfig>, Failure> {
    use marquee_gateway::{BidderSpec, GatewayConfig, HealthConfig, Media};
    let section = &config.gateway;
    if !section.enabled {
        return Ok(None);
    }
    let auction = match section.auction {
        AuctionKind::FirstPrice => marquee_gateway::AuctionKind::FirstPrice,
        AuctionKind::SecondPrice => marquee_gateway::AuctionKind::SecondPrice {
            increment_micros: marquee_openrtb::parse_micros(
                &section.increment,
                marquee_openrtb::Rounding::Nearest,
            )
            .ok()
            .filter(|m| *m >= 0)
            .ok_or_else(|| {
                config_error(format!(
                    "`gateway.increment` is {:?}; it must be a decimal amount such as 0.01",
                    section.increment
                ))
            })?,
        },
    };
    let bidders = section
        .bidders
        .iter()
        .map(|(name, b)| BidderSpec {
            version: match b.openrtb {
                OpenRtbVersion::V25 => marquee_gateway::OpenRtbVersion::V25,
                OpenRtbVersion::V26 => marquee_gateway::OpenRtbVersion::V26,
            },
            http2: b.http2,
            timeout_percent: b.timeout_percent,
            max_in_flight: usize::try_from(b.max_in_flight).unwrap_or(usize::MAX),
            pool_size: usize::try_from(b.pool_size).unwrap_or(usize::MAX),
            gzip: b.gzip,
            headers: b.headers.clone().into_iter().collect(),
            media: b
                .media
                .iter()
                .map(|media| match media {
                    MediaType::Banner => Media::Banner,
                    MediaType::Video => Media::Video,
                    MediaType::Audio => Media::Audio,
                    MediaType::Native => Media::Native,
                })
                .collect(),
            exchanges: b.exchanges.clone(),
            price_permille: b.price_permille,
            enabled: b.enabled,
            notice_hosts: b
                .notice_hosts
                .iter()
                .map(|h| h.as_str().to_owned())
                .collect(),
            ..BidderSpec::new(name, b.endpoint.as_str())
        })
        .collect();
    Ok(Some(GatewayConfig {
        auction,
        deals_first: section.deals_first,
        currency: currency(section.currency, "gateway.currency")?,
        rates: rates.clone(),
        response_margin: section.response_margin,
        internal_bidder: section.internal_bidder.as_ref().map(ToString::to_string),
        bidders,
        health: HealthConfig {
            throttle_below: section.health_throttle_below,
            probe_interval: section.health_probe_interval,
        },
        max_response_bytes: usize::try_from(section.max_response_bytes).unwrap_or(usize::MAX),
        late_grace: section.late_grace,
        notice_timeout: section.notice_timeout,
        tls_ca_file: section.tls_ca_file.clone(),
        // The gateway serves no registry API without one.
        admin_token: section
            .admin_token
            .as_ref()
            .map(|token| token.as_str().to_owned())
            .unwrap_or_default(),
    }))
}

/// A configured currency as the money library's (both are three upper-case letters).
fn currency(
    code: marquee_config::CurrencyCode,
    key: &str,
) -> Result<marquee_model::Currency, Failure> {
    marquee_model::Currency::try_from(code.as_str())
        .map_err(|e| config_error(format!("`{key}`: {e}")))
}

/// What reports need of `[gateway]` for programmatic demand: its currency and its bidders'
/// names (a split manager's configuration lists the edges' `[gateway.bidders]` to name them).
fn programmatic_reports(config: &Config) -> Result<marquee_api::ProgrammaticReports, Failure> {
    Ok(marquee_api::ProgrammaticReports::new(
        currency(config.gateway.currency, "gateway.currency")?,
        config.gateway.bidders.keys().cloned(),
    ))
}

/// Tracking keys from the configuration, or the data directory's own key (made on first
/// start), so that tracking links stay valid across restarts.
fn tracking_keys(config: &Config) -> Result<KeyRing, Failure> {
    let tracking = &config.tracking;
    // Without configured keys, the data directory's own key (id 1) signs.
    let local;
    let (signing, keys) = if tracking.keys.is_empty() {
        local = marquee_config::TrackingKey::try_from(local_tracking_key(&config.data_dir)?)
            .map_err(|error| config_error(format!("`tracking.keys`: {error}")))?;
        (1, std::slice::from_ref(&local))
    } else {
        (tracking.signing_key, tracking.keys.as_slice())
    };
    KeyRing::from_config(
        signing,
        keys.iter().map(|key| (key.id, key.secret.as_str())),
    )
    .map_err(|error| config_error(format!("`tracking.keys`: {error}")))
}

fn local_tracking_key(data_dir: &Path) -> Result<String, Failure> {
    let path = data_dir.join("tracking.key");
    if let Ok(existing) = std::fs::read_to_string(&path) {
        return Ok(existing.trim().to_owned());
    }
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret)
        .map_err(|error| format!("no randomness for a tracking key: {error}"))?;
    let entry = format!("1:hex:{}", hex::encode(secret));
    write_private(&path, &entry)
        .map_err(|error| format!("cannot write {}: {error}", path.display()))?;
    Ok(entry)
}

/// Writes a file only its owner can read.
fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}

/// Loads the demo into an empty database, when the configuration asks for it, and returns a
/// new admin token for it.
async fn load_demo(config: &Config, store: &dyn Store) -> Result<Option<String>, Failure> {
    if !config.demo {
        return Ok(None);
    }
    if !demo::is_empty(store).await? {
        tracing::info!("database is not empty; demo data not loaded");
        return Ok(None);
    }
    // The wall clock: the demo's flights run around the day it is created.
    let summary = demo::load(store, &SystemClock).await?;
    // A few weeks of sampled traffic, so that "Check availability" answers at once.
    let sampled = demo::load_sample(store, &SystemClock, config.forecast.sample_rate()).await?;
    tracing::info!(records = sampled, "demo traffic sample stored");
    let (token, hash) = marquee_api::generate_token()?;
    store
        .create_token(
            NewToken {
                role: Role::Admin,
                owner_id: None,
                hash,
                label: "demo admin".into(),
            },
            &marquee_store::Actor::cli(),
        )
        .await?;
    users::create_demo_user(store).await?;
    eprintln!(
        "loaded demo data: {} advertisers, {} line items, {} placements; dashboard user {:?}, password {:?}",
        summary.advertisers,
        summary.line_items,
        summary.placements,
        users::DEMO_USER,
        users::DEMO_PASSWORD
    );
    Ok(Some(token))
}

/// Resolves when the registered signal arrives, or never without one.
#[cfg(unix)]
async fn received(signal: Option<&mut tokio::signal::unix::Signal>) {
    match signal {
        Some(signal) => {
            signal.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}

/// Resolves on Ctrl-C or SIGTERM. Registers for both at once, when called, so that a signal
/// arriving while the server starts still stops it gracefully (with its log flushed).
fn shutdown_signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    let mut signals = {
        use tokio::signal::unix::{SignalKind, signal};
        [SignalKind::interrupt(), SignalKind::terminate()].map(|kind| signal(kind).ok())
    };
    async move {
        #[cfg(unix)]
        {
            let [interrupt, terminate] = &mut signals;
            tokio::select! {
                () = received(interrupt.as_mut()) => {},
                () = received(terminate.as_mut()) => {},
            }
        }
        #[cfg(not(unix))]
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
