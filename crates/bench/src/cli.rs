//! `marquee bench …`: the command-line types (clap derive; the binary flattens them in) and the
//! glue from flags to a [`Plan`], a run and its outputs.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use clap::{ArgGroup, Args, Subcommand};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Uri};

use crate::BenchError;
use crate::load::{self, Plan};
use crate::mock_bidder::{MockBidder, MockBidderArgs};
use crate::reference::ReferenceServer;
use crate::report::sweep_table;
use crate::session::SessionModel;
use crate::workload::{BeaconTarget, Workload, WorkloadKind, load_openrtb, session_workload};

/// `marquee bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Send load to an HTTP server and report throughput, latency percentiles and statuses.
    ///
    /// Closed loop by default (each connection sends its next request when the last answer
    /// came); with --rate, open loop at a fixed rate, latency measured from each request's
    /// intended send time so that a stalled server cannot hide its queue. Only loopback
    /// targets unless --allow-remote names the address.
    Run(Box<RunArgs>),
    /// Serve fixed answers: the hello-world reference that ratio runs compare against.
    ///
    /// GET answers --get-bytes bytes; POST reads the whole body and answers --post-bytes
    /// bytes of JSON. The first stdout line is "marquee bench reference listening on
    /// http://ADDR".
    Reference(ReferenceArgs),
    /// Stand in for an external OpenRTB bidder (gateway benchmarks): one banner bid per imp at
    /// a fixed or random price after a delay, or at given rates no bid, an error or no answer.
    ///
    /// The first stdout line is "marquee bench mock-bidder listening on http://ADDR".
    MockBidder(MockBidderArgs),
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("workload").args(["openrtb", "session", "session_config", "body", "body_file"])))]
pub struct RunArgs {
    /// The target, e.g. http://127.0.0.1:8080/ad?placement=1 (the path is used by the fixed
    /// and OpenRTB workloads; user sessions put their paths after it, so give the edge's base
    /// URL, e.g. http://127.0.0.1:8080/).
    #[arg(value_name = "URL")]
    pub url: String,
    /// User sessions: another target besides URL (repeatable, or comma-separated). Each
    /// session fetches all its ads from one target, sessions taking the targets in turn;
    /// --beacon-target says where their beacons and clicks go.
    #[arg(long = "target", value_name = "URL", value_delimiter = ',')]
    pub targets: Vec<String>,
    /// User sessions: where each ad's impression beacon and click go. "same": the target that
    /// served the ad; "other": never that one, the other targets in turn (needs two or more);
    /// "random": any target, uniformly [default: same].
    #[arg(long, value_name = "WHERE", value_enum)]
    pub beacon_target: Option<BeaconTarget>,

    /// Open connections (closed loop: requests in flight).
    #[arg(short = 'c', long, default_value_t = 64, value_name = "N")]
    pub connections: usize,
    /// Worker threads, each with its own single-threaded runtime.
    #[arg(short = 't', long, default_value_t = 1, value_name = "N")]
    pub threads: usize,
    /// Open loop at this many requests per second (across all connections); without it,
    /// closed loop.
    #[arg(short = 'r', long, value_name = "REQ/S", conflicts_with = "sweep")]
    pub rate: Option<f64>,
    /// Open loop at each of these rates in turn (comma-separated, e.g. 20000,40000,80000),
    /// each for the duration or request count; charts throughput and p99 against them.
    #[arg(long, value_name = "RATES", value_delimiter = ',')]
    pub sweep: Vec<f64>,
    /// Pause between sweep steps, so the server drains its queue.
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = parse_duration)]
    pub sweep_pause: Duration,
    /// How long to send (e.g. 8s, 500ms, 2m) [default: 10s unless --requests is given].
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Send exactly this many requests (and stop earlier if --duration runs out).
    #[arg(short = 'n', long, value_name = "N")]
    pub requests: Option<u64>,
    /// Open a new connection for every request and send "Connection: close", as for ad
    /// requests from many browsers.
    #[arg(long)]
    pub no_keep_alive: bool,
    /// A request without a complete answer after this long counts as a timeout error.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Open loop: a request that no connection could send within this long of its intended
    /// time is not sent and counts as unsent, as an exchange skips a bidder whose connections
    /// are all busy instead of queueing for it. Default: every request is sent, however late.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub max_wait: Option<Duration>,
    /// Keep each worker thread polling its sockets instead of sleeping until an answer
    /// arrives. On loopback the server's write wakes a sleeping client and pays for that
    /// wake-up on its own core (an inter-processor interrupt, dear in a VM), so a slower
    /// server, whose client sleeps more, is charged more per request; with this flag the
    /// client never sleeps, as over a real network, where the receiver wakes on its own
    /// machine. Costs the load generator's core(s) in full.
    #[arg(long)]
    pub busy_poll: bool,
    /// Count the answers that took longer than this (from the intended send time in open
    /// loop), e.g. an OpenRTB request's tmax: an exchange drops a bid that comes later.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub deadline: Option<Duration>,
    /// Allow this non-loopback IP address as a target (repeat for several). Load never
    /// leaves the machine otherwise.
    #[arg(long, value_name = "IP")]
    pub allow_remote: Vec<IpAddr>,

    /// HTTP method of the fixed workload [default: GET, or POST with a body].
    #[arg(short = 'X', long, value_name = "METHOD")]
    pub method: Option<String>,
    /// A header for every request, "Name: value" (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// Body of the fixed workload.
    #[arg(long, value_name = "TEXT")]
    pub body: Option<String>,
    /// Body of the fixed workload, read from a file.
    #[arg(long, value_name = "FILE")]
    pub body_file: Option<PathBuf>,
    /// POST OpenRTB bid requests from this JSON file, or from every bid request in this
    /// folder, to the URL; `id` and every `imp[].id` are fresh in each request.
    #[arg(long, value_name = "PATH")]
    pub openrtb: Option<PathBuf>,
    /// Walk user sessions from the built-in model: fetch ads (GET /ad.json?p=PLACEMENT&uid=USER),
    /// then fire each ad's signed impression beacon (/t/i?t=…) and, with the model's click
    /// probability, its click URL (/t/c?t=…, redirect not followed), both taken from the ad
    /// answer's html. Reports ads, empty answers, beacons and clicks, per target.
    #[arg(long)]
    pub session: bool,
    /// Like --session, with probabilities, the ad request path and placements from this TOML
    /// file (template: crates/bench/session.toml; see docs/benchmarks.md).
    #[arg(long, value_name = "FILE")]
    pub session_config: Option<PathBuf>,
    /// Seed of the random ids and session walks [default: from the clock].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// Write the results as JSON.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write an SVG chart: latency percentiles over time, or for --sweep throughput and p99
    /// against the offered rate.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// No progress line.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct ReferenceArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8090", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Size of the answer to GET (the candidate's ad answer: about 5 KB of ad code).
    #[arg(long, default_value_t = 5000, value_name = "N")]
    pub get_bytes: usize,
    /// Size of the JSON answer to POST (the candidate's bid: about 600 bytes).
    #[arg(long, default_value_t = 600, value_name = "N")]
    pub post_bytes: usize,
}

/// Runs a `marquee bench` subcommand.
pub async fn run(command: BenchCommand) -> Result<(), BenchError> {
    match command {
        BenchCommand::Run(args) => run_load(*args).await,
        BenchCommand::MockBidder(args) => {
            let bidder = MockBidder::bind(args).await?;
            let addr = bidder.local_addr()?;
            println!("marquee bench mock-bidder listening on http://{addr}");
            let _ = std::io::stdout().flush();
            bidder.serve().await;
            Ok(())
        }
        BenchCommand::Reference(args) => {
            let server =
                ReferenceServer::bind(args.listen, args.get_bytes, args.post_bytes).await?;
            let addr = server.local_addr()?;
            // The first stdout line is the address, for scripts that start on port 0.
            println!("marquee bench reference listening on http://{addr}");
            let _ = std::io::stdout().flush();
            eprintln!(
                "answering GET with {} bytes, POST with {} bytes of JSON",
                args.get_bytes, args.post_bytes
            );
            server.serve().await;
            Ok(())
        }
    }
}

/// Builds the plan from the flags (checking the targets first: no traffic before that).
pub async fn plan(args: &RunArgs) -> Result<Plan, BenchError> {
    let sessions = args.session || args.session_config.is_some();
    if !sessions && (!args.targets.is_empty() || args.beacon_target.is_some()) {
        return Err(BenchError::Usage(
            "--target and --beacon-target go with --session or --session-config".into(),
        ));
    }
    let beacons = args.beacon_target.unwrap_or_default();
    if beacons == BeaconTarget::Other && args.targets.is_empty() {
        return Err(BenchError::Usage(
            "--beacon-target other needs a second target (--target URL)".into(),
        ));
    }
    let mut targets = Vec::with_capacity(1 + args.targets.len());
    for url in std::iter::once(&args.url).chain(&args.targets) {
        targets.push(crate::target::resolve(url, &args.allow_remote).await?);
    }
    let target = &targets[0];
    let headers = args
        .headers
        .iter()
        .map(|header| parse_header(header))
        .collect::<Result<Vec<_>, _>>()?;
    // The path goes into the request line as it is, so it must be a valid request target.
    let path = target.path.clone();
    path.parse::<Uri>()
        .map_err(|error| BenchError::Usage(format!("bad path {path:?}: {error}")))?;
    let kind = if let Some(file) = &args.openrtb {
        let set = load_openrtb(file)?;
        if !args.quiet {
            for (file, reason) in &set.skipped {
                eprintln!("skipped {}: {reason}", file.display());
            }
        }
        WorkloadKind::OpenRtb {
            path,
            templates: set.templates,
        }
    } else if sessions {
        let model = match &args.session_config {
            Some(file) => SessionModel::from_file(file)?,
            None => SessionModel::default(),
        };
        session_workload(model, beacons, session_bases(&targets)?)?
    } else {
        let body = match (&args.body, &args.body_file) {
            (Some(text), _) => Bytes::from(text.clone()),
            (None, Some(file)) => {
                Bytes::from(std::fs::read(file).map_err(|source| BenchError::Read {
                    path: file.clone(),
                    source,
                })?)
            }
            (None, None) => Bytes::new(),
        };
        let method = match &args.method {
            Some(name) => Method::from_bytes(name.to_ascii_uppercase().as_bytes())
                .map_err(|_| BenchError::Usage(format!("{name:?} is not an HTTP method")))?,
            None if body.is_empty() => Method::GET,
            None => Method::POST,
        };
        WorkloadKind::Fixed { method, path, body }
    };
    let duration = match (args.duration, args.requests) {
        (None, None) => Some(Duration::from_secs(10)),
        (duration, _) => duration,
    };
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos() as u64)
    });
    let keep_alive = !args.no_keep_alive;
    let hosts: Vec<HeaderValue> = targets.iter().map(|target| target.host.clone()).collect();
    Ok(Plan {
        workload: Arc::new(Workload::new(kind, &hosts, &headers, keep_alive)),
        targets,
        connections: args.connections,
        threads: args.threads,
        rate: args.rate,
        duration,
        requests: args.requests,
        keep_alive,
        timeout: args.timeout,
        max_wait: args.max_wait,
        busy_poll: args.busy_poll,
        deadline: args.deadline,
        seed,
        progress: !args.quiet,
    })
}

async fn run_load(args: RunArgs) -> Result<(), BenchError> {
    let plan = plan(&args).await?;
    if args.sweep.is_empty() {
        let report = load::run(&plan).await?;
        println!("{}", report.table());
        if let Some(path) = &args.json {
            write_json(path, &report)?;
        }
        if let Some(path) = &args.svg {
            write_file(path, crate::svg::run_chart(&report).as_bytes())?;
        }
    } else {
        let steps = load::sweep(&plan, &args.sweep, args.sweep_pause).await?;
        println!("{}", sweep_table(&steps));
        if let Some(path) = &args.json {
            write_json(path, &serde_json::json!({ "sweep": steps }))?;
        }
        if let Some(path) = &args.svg {
            write_file(path, crate::svg::sweep_chart(&steps).as_bytes())?;
        }
    }
    Ok(())
}

/// Each target URL's path without its last `/`: what the user sessions' paths are appended to
/// (nothing for `http://host:port/`; `/mq` for an edge behind a proxy at `http://proxy/mq/`).
fn session_bases(targets: &[crate::target::Target]) -> Result<Vec<String>, BenchError> {
    targets
        .iter()
        .map(|target| {
            if target.path.contains('?') {
                return Err(BenchError::Usage(format!(
                    "{}: a user-session target is a base URL, without a query",
                    target.url
                )));
            }
            Ok(target.path.trim_end_matches('/').to_owned())
        })
        .collect()
}

fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), BenchError> {
    let text = serde_json::to_vec_pretty(value).map_err(|error| BenchError::Write {
        path: path.to_owned(),
        source: error.into(),
    })?;
    write_file(path, &text)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), BenchError> {
    std::fs::write(path, bytes).map_err(|source| BenchError::Write {
        path: path.to_owned(),
        source,
    })
}

fn parse_header(text: &str) -> Result<(HeaderName, HeaderValue), BenchError> {
    let bad = || BenchError::Usage(format!("{text:?} is not a header; write \"Name: value\""));
    let (name, value) = text.split_once(':').ok_or_else(bad)?;
    let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| bad())?;
    let value = HeaderValue::from_str(value.trim()).map_err(|_| bad())?;
    Ok((name, value))
}

/// "8s", "500ms", "2m", "1.5s", or a plain number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 8s, 500ms or 2m"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "us" | "µs" => value / 1e6,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "{text:?}: unknown unit {unit:?}; use ms, s, m or h"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|error| format!("{text:?}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("8s"), Ok(Duration::from_secs(8)));
        assert_eq!(parse_duration("8"), Ok(Duration::from_secs(8)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3 days").is_err());
    }

    #[test]
    fn headers_parse() {
        let (name, value) = parse_header("X-Test:  yes ").unwrap();
        assert_eq!(name, "x-test");
        assert_eq!(value, "yes");
        assert!(parse_header("no colon").is_err());
    }
}
