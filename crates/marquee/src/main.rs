//! `marquee`: the one binary. It parses the command line and configuration and wires the
//! library crates together; all behaviour lives in those crates.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use marquee_config::{Config, LogFormat, Overrides};
use marquee_manager::{Manager, ManagerOptions, demo};
use marquee_model::{Clock, Role, SystemClock};
use marquee_store::{NewToken, SqliteStore, Store};

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
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Apply database migrations and exit.
    Migrate(CommonArgs),
}

#[derive(Debug, Args)]
struct CommonArgs {
    /// TOML configuration file.
    #[arg(long, short = 'c', value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory: SQLite database, snapshots, event logs [default: ./data].
    #[arg(long, value_name = "DIR")]
    data: Option<PathBuf>,
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

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Create an API token and print it once; only its hash is stored.
    Create(TokenCreateArgs),
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
        Command::Token(TokenCommand::Create(args)) => create_token(args).await,
        Command::Migrate(args) => {
            let config = load_config(&args, Overrides::default())?;
            init_logging(&config);
            open_store(&config.data_dir).await?;
            println!(
                "migrations applied to {}",
                database_path(&config.data_dir).display()
            );
            Ok(())
        }
    }
}

fn load_config(common: &CommonArgs, mut overrides: Overrides) -> Result<Config, Failure> {
    overrides.data_dir = common.data.clone();
    Config::load(common.config.as_deref(), &overrides).map_err(|error| Failure {
        status: EXIT_CONFIG,
        message: error.to_string(),
    })
}

fn init_logging(config: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log.level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second initialisation (never in this binary) would only be ignored.
    let _ = match config.log.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

fn database_path(data_dir: &Path) -> PathBuf {
    data_dir.join("marquee.db")
}

async fn open_store(data_dir: &Path) -> Result<Arc<dyn Store>, Failure> {
    std::fs::create_dir_all(data_dir).map_err(|error| {
        format!(
            "cannot create data directory {}: {error}",
            data_dir.display()
        )
    })?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = SqliteStore::open(&database_path(data_dir), clock)?;
    Ok(Arc::new(store))
}

async fn create_token(args: TokenCreateArgs) -> Result<(), Failure> {
    let config = load_config(&args.common, Overrides::default())?;
    init_logging(&config);
    let store = open_store(&config.data_dir).await?;
    let (token, hash) = marquee_api::generate_token()?;
    let record = store
        .create_token(NewToken {
            role: args.role,
            owner_id: args.owner,
            hash,
            label: args.label,
        })
        .await?;
    eprintln!(
        "created {} token {} (shown once; only its hash is stored)",
        record.role.as_str(),
        record.id
    );
    println!("{token}");
    Ok(())
}

async fn serve(args: ServeArgs) -> Result<(), Failure> {
    let overrides = Overrides {
        listen: args.listen,
        demo: args.demo.then_some(true),
        ..Overrides::default()
    };
    let config = load_config(&args.common, overrides)?;
    init_logging(&config);
    let store = open_store(&config.data_dir).await?;
    let demo_token = if config.demo {
        load_demo(&*store).await?
    } else {
        None
    };
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let manager = Manager::open(
        Arc::clone(&store),
        clock,
        ManagerOptions {
            snapshot_dir: config.data_dir.join("snapshots"),
            keep: config.snapshot.keep,
            compile_interval: Duration::from_millis(config.snapshot.compile_interval_ms),
        },
    )
    .await?;
    manager.refresh().await?;

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|error| format!("cannot listen on {}: {error}", config.listen))?;
    let address = listener.local_addr()?;
    // The first line on stdout is the address, for scripts and tests that start on port 0.
    println!("marquee listening on http://{address}");
    tracing::info!(%address, data_dir = %config.data_dir.display(), "serving");
    if let Some(token) = demo_token {
        eprintln!(
            "demo admin token (shown once): {token}\n\
             try: curl -H 'Authorization: Bearer {token}' http://{address}/api/v1/line-items"
        );
    }

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let compile_loop = tokio::spawn(Arc::clone(&manager).run_compile_loop({
        let mut stopped = stopped.clone();
        async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        }
    }));
    let app = marquee_manager::router(&manager);
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            let _ = stop.send(true);
        })
        .await?;
    compile_loop.await?;
    tracing::info!("stopped");
    Ok(())
}

/// Loads the demo into an empty database and returns a new admin token for it.
async fn load_demo(store: &dyn Store) -> Result<Option<String>, Failure> {
    if !demo::is_empty(store).await? {
        tracing::info!("database is not empty; demo data not loaded");
        return Ok(None);
    }
    let summary = demo::load(store).await?;
    let (token, hash) = marquee_api::generate_token()?;
    store
        .create_token(NewToken {
            role: Role::Admin,
            owner_id: None,
            hash,
            label: "demo admin".into(),
        })
        .await?;
    eprintln!(
        "loaded demo data: {} advertisers, {} line items, {} placements",
        summary.advertisers, summary.line_items, summary.placements
    );
    Ok(Some(token))
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
