//! Impression goals held across edges: one `marquee manager` on PostgreSQL and three
//! `marquee edge` processes sharing Redis and one tracking key, driven by the user-session
//! workload of `marquee bench run --session` (the tool users reproduce it with). Each scenario
//! gets a line item of its own (2,000 impressions a day, `asap`, the only thing its placement
//! can serve) and runs its traffic until delivery stops:
//!
//! 1. every beacon goes back to the edge that decided its ad (`--beacon-target same`);
//! 2. every beacon goes to another edge (`other`);
//! 3. beacons go to any edge at random (`random`);
//! 4. an edge is killed (`kill -9`) when about half the goal is reserved, and restarted on its
//!    data directory and port a second later;
//! 5. the manager is killed as the goal runs out (about 90% reserved) and restarted on the same
//!    database two seconds later;
//! 6. Redis is stopped for 10 s mid-flight (a `redis-server` of the test's own, on a private
//!    port, so that no other test loses its server).
//!
//! Scenarios 4 to 6 spread beacons at random. The edge decides an ad by reserving its charge on
//! its own lease; the beacon settles the reservation wherever it lands, and what is reserved
//! and never settled (beacons lost to the killed edge) returns to the budget once its tokens
//! expired (`edge.token_lifetime_secs`, set to its minimum of 60 s here, on the edges and on
//! the manager, which reads the same key) and is served again. Delivery has stopped when the
//! aggregated impressions equal what the lease book counts used and reach the goal, unchanged
//! for a few seconds. Every scenario must then have delivered (aggregated, billed) within
//! ±0.5% of its goal, the edge kill included (what the killed edge decided and settled in its
//! last sync interval the book never heard of: it counts it from the other edges' settlements
//! and from the aggregation); a table `| scenario | goal | delivered | delta % |` is printed.
//!
//! At the end, with everything stopped, the stored aggregates equal a direct count of the three
//! edges' logs (every event once: nothing counted twice through the kills and restarts), and
//! each line item's aggregated impressions equal its distinct impression events in the logs.
//! Impressions answered within the group-commit window before the edge's kill may be missing
//! from its log: they are then missing from both counts, which is the only loss allowed. Each
//! scenario's trace is printed from the logs too: decisions and impressions per edge, decisions
//! never settled, and what the killed edge decided and settled in its last sync interval
//! (reservations and settlements the book never heard of: it counts them as used from the
//! other edges' settlements and from the aggregation, `docs/pacing-and-budgets.md` §6).
//!
//! `MARQUEE_BUDGETS_SCENARIOS=4,6` runs only those scenarios (numbered as above).
//!
//! PostgreSQL is the server `scripts/test-deps.sh` starts (a fresh database on it); Redis is the
//! `redis-server` binary that script installs. The test is ignored by plain `cargo test` and run
//! by `scripts/test.sh` (or `-- --include-ignored`), where it fails naming the script when
//! either is missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{
    BIN, EDGE_SYNC_INTERVAL_MS, Guard, MinuteCheck, RedisServer, Roles, TRACKING_KEY, free_port,
    get_json, logged_events, metric, token_from, try_get_text, wait_for_edges,
};
use marquee_eventlog::EventKind;
use marquee_store::test_postgres::TestDatabase;
use serde_json::{Value, json};

const SECRET: &str = "budgets-test-secret-0123456";
const EDGES: usize = 3;
/// Each scenario's line item: impressions a day.
const GOAL: u64 = 2_000;
/// The band every scenario must end in: ±0.5% of the goal.
const TOLERANCE_PERMILLE: u64 = 5;
/// Tracking tokens' lifetime, on edges and manager: the configuration's minimum.
const TOKEN_LIFETIME_SECS: &str = "60";
/// The workload's open connections (sessions in flight), over all edges.
const CONNECTIONS: &str = "6";
/// How long delivery must stay unchanged, at the goal, to count as stopped.
const SETTLED_FOR: Duration = Duration::from_secs(3);
/// A scenario that has not stopped after this long is reported as it stands. Reservations
/// lost with a killed edge's beacons return a minute of decisions plus the token lifetime
/// later, so up to two minutes after the fault.
const SCENARIO_LIMIT: Duration = Duration::from_secs(200);
/// The edge killed in scenario 4.
const VICTIM: usize = 1;
/// How long Redis is away in scenario 6.
const REDIS_AWAY: Duration = Duration::from_secs(10);

const ROLES: Roles = Roles {
    secret: SECRET,
    tracking_key: TRACKING_KEY,
    common: &[("MARQUEE_EDGE__TOKEN_LIFETIME_SECS", TOKEN_LIFETIME_SECS)],
};

fn start_manager(data: &Path, database: &str, port: u16, demo: bool) -> Guard {
    ROLES.manager(data, database, port, demo, &[])
}

fn start_edge(data: &Path, manager: &str, port: u16, redis: &str) -> Guard {
    let listen = format!("127.0.0.1:{port}");
    let settings = [
        ("MARQUEE_REDIS__URL", redis),
        ("MARQUEE_REDIS__TIMEOUT_MS", "1000"),
    ];
    ROLES.edge(data, manager, &listen, &settings)
}

/// A `marquee bench run --session` process; killed on drop.
struct Bench(Child);

impl Drop for Bench {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What goes wrong during a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// An edge killed when this share (per mille) of the goal is reserved, restarted after 1 s.
    KillEdge(u64),
    /// The manager killed at this share, restarted after 2 s.
    KillManager(u64),
    /// Redis stopped at this share, for [`REDIS_AWAY`].
    StopRedis(u64),
}

impl Fault {
    fn at_permille(self) -> Option<u64> {
        match self {
            Fault::None => None,
            Fault::KillEdge(p) | Fault::KillManager(p) | Fault::StopRedis(p) => Some(p),
        }
    }
}

struct Scenario {
    name: &'static str,
    beacon_target: &'static str,
    fault: Fault,
}

/// What a scenario ended with.
#[derive(Debug)]
struct Outcome {
    name: &'static str,
    line_item: u64,
    delivered: u64,
    used: u64,
    returned: u64,
    unreported: u64,
    stopped: bool,
    took: Duration,
    /// When an edge was killed (microseconds since the epoch).
    killed_at_micros: Option<i64>,
}

impl Outcome {
    fn delta_percent(&self) -> f64 {
        (self.delivered as f64 - GOAL as f64) * 100.0 / GOAL as f64
    }

    fn within_band(&self) -> bool {
        (GOAL - band()..=GOAL + band()).contains(&self.delivered)
    }
}

/// ±0.5% of the goal.
fn band() -> u64 {
    GOAL * TOLERANCE_PERMILLE / 1000
}

/// The manager, three edges, Redis, and what the API needs.
struct Cluster {
    dir: tempfile::TempDir,
    database: TestDatabase,
    manager_port: u16,
    manager_url: String,
    manager: Guard,
    edge_ports: Vec<u16>,
    edge_dirs: Vec<PathBuf>,
    edges: Vec<Guard>,
    redis_port: u16,
    redis: Option<RedisServer>,
    admin: String,
    client: reqwest::Client,
    site: u64,
    campaign: u64,
    killed_at_micros: Option<i64>,
}

impl Cluster {
    fn redis_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.redis_port)
    }

    fn edge_url(&self, edge: usize) -> String {
        format!("http://127.0.0.1:{}", self.edge_ports[edge])
    }

    fn restart_edge(&mut self, edge: usize) {
        let redis = self.redis_url();
        self.edges[edge] = start_edge(
            &self.edge_dirs[edge],
            &self.manager_url,
            self.edge_ports[edge],
            &redis,
        );
    }

    async fn post(&self, path: &str, body: Value) -> u64 {
        common::create_object(
            &self.client,
            self.manager.server(),
            &self.admin,
            path,
            &body,
        )
        .await
    }

    /// A placement of a size nothing else fills, and a line item with the goal linked to it.
    async fn line_item_for(&self, name: &str) -> (u64, u64) {
        let placement = self
            .post(
                "placements",
                json!({ "site_id": self.site, "name": format!("{name} strip"),
                    "sizes": [{ "w": 320, "h": 100 }], "formats": ["banner"] }),
            )
            .await;
        let today = jiff::Timestamp::now()
            .to_zoned(jiff::tz::TimeZone::UTC)
            .date();
        let line_item = self
            .post(
                "line-items",
                json!({
                    "campaign_id": self.campaign, "name": name,
                    "start": format!("{today}T00:00:00"), "time_zone": "UTC",
                    "tier": "sponsorship", "channels": ["direct"], "pacing": "asap",
                    "goal": { "metric": "impressions", "daily": GOAL },
                    "price": { "model": "cpm", "amount_micros": 2_000_000, "currency": "EUR" }
                }),
            )
            .await;
        self.post(
            "creatives",
            json!({ "line_item_id": line_item, "name": name, "size": { "w": 320, "h": 100 },
                "landing_url": "https://budgets.example/",
                "content": { "type": "image", "image_url": "https://cdn.example.com/320x100.png",
                    "alt": name } }),
        )
        .await;
        let url = format!(
            "{}/api/v1/line-items/{line_item}/placements/{placement}",
            self.manager_url
        );
        let linked = self
            .client
            .put(url)
            .bearer_auth(&self.admin)
            .send()
            .await
            .unwrap();
        assert!(
            linked.status().is_success(),
            "{}",
            linked.text().await.unwrap()
        );
        (placement, line_item)
    }

    /// The line item's impressions today as the manager aggregated them (its reports API), or
    /// `None` while the manager does not answer.
    async fn aggregated(&self, line_item: u64) -> Option<u64> {
        let today = jiff::Timestamp::now()
            .to_zoned(jiff::tz::TimeZone::UTC)
            .date();
        let url = format!(
            "{}/api/v1/reports?from={today}&granularity=day&line_item={line_item}&tz=UTC",
            self.manager_url
        );
        let answer: Value = self
            .client
            .get(url)
            .bearer_auth(&self.admin)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        answer["totals"]["impressions"].as_u64()
    }

    /// The lease book's `(used, limit, returned, unreported reclaimed)` for the line item, or
    /// `None` while the manager does not answer or has no budget for it yet.
    async fn book(&self, line_item: u64) -> Option<(u64, u64, u64, u64)> {
        let page = try_get_text(&self.client, &format!("{}/metrics", self.manager_url)).await?;
        let series = |name: &str| {
            metric(&page, &format!("{name}{{line_item=\"{line_item}\"}}")).map(|v| v as u64)
        };
        Some((
            series("marquee_lease_used")?,
            series("marquee_lease_limit")?,
            series("marquee_lease_returned").unwrap_or(0),
            series("marquee_lease_unreported_reclaimed").unwrap_or(0),
        ))
    }

    /// What the running edges have reserved on the line item's leases since they started.
    async fn reserved_on_edges(&self, line_item: u64) -> u64 {
        let mut total = 0.0;
        for edge in 0..EDGES {
            let url = format!("{}/metrics", self.edge_url(edge));
            if let Some(page) = try_get_text(&self.client, &url).await {
                total += metric(
                    &page,
                    &format!("marquee_edge_lease_consumed_total{{line_item=\"{line_item}\"}}"),
                )
                .unwrap_or(0.0);
            }
        }
        total as u64
    }

    /// Starts the session workload on every edge, for the placement only.
    fn bench(&self, placement: u64, beacon_target: &str, seed: u64) -> Bench {
        let model = self.dir.path().join(format!("session-{placement}.toml"));
        // The default model with every ad seen: an ad whose beacon never fires holds its budget
        // until its tokens expire, which the fault scenarios exercise.
        std::fs::write(
            &model,
            format!(
                "start = \"page_view\"\nplacements = [\"{placement}\"]\n\n[paths]\n\
                 page_view = \"\"\nad_request = \"/ad.json?p={{placement}}&uid={{user}}\"\n\n\
                 [transitions.page_view]\nad_request = 1.0\n\n\
                 [transitions.ad_request]\nimpression = 1.0\n\n\
                 [transitions.impression]\nad_request = 0.5\nclick = 0.01\npage_view = 0.39\n\n\
                 [transitions.click]\npage_view = 0.6\n"
            ),
        )
        .unwrap();
        let mut command = Command::new(BIN);
        command
            .args(["bench", "run", "--session-config"])
            .arg(&model)
            .args(["--beacon-target", beacon_target])
            .args(["-c", CONNECTIONS, "-d", "20m", "--timeout", "2s", "-q"])
            .args(["--seed", &seed.to_string()]);
        for edge in 1..EDGES {
            command.args(["--target", &format!("{}/", self.edge_url(edge))]);
        }
        command
            .arg(format!("{}/", self.edge_url(0)))
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Bench(command.spawn().unwrap())
    }

    /// Runs one scenario: its line item, its traffic until delivery stops, its fault.
    async fn run(&mut self, scenario: &Scenario, seed: u64) -> Outcome {
        let started = Instant::now();
        let (placement, line_item) = self.line_item_for(scenario.name).await;
        let bench = self.bench(placement, scenario.beacon_target, seed);
        let mut fault_done = scenario.fault == Fault::None;
        let mut redis_back_at: Option<Instant> = None;
        let mut last = (u64::MAX, u64::MAX);
        let mut unchanged_since = Instant::now();
        let mut figures: (u64, u64, u64, u64);
        let stopped = loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if let Some(at) = redis_back_at
                && Instant::now() >= at
            {
                self.redis = Some(RedisServer::start(self.redis_port));
                redis_back_at = None;
                println!("  {}: Redis back", scenario.name);
            }
            if !fault_done {
                let reserved = self.reserved_on_edges(line_item).await;
                let share = scenario.fault.at_permille().unwrap_or(0);
                if reserved * 1000 >= GOAL * share {
                    fault_done = true;
                    self.inject(scenario, reserved, &mut redis_back_at).await;
                }
            }
            let (Some(delivered), Some((used, limit, returned, unreported))) =
                (self.aggregated(line_item).await, self.book(line_item).await)
            else {
                unchanged_since = Instant::now();
                continue;
            };
            figures = (delivered, used, returned, unreported);
            if (delivered, used) != last {
                last = (delivered, used);
                unchanged_since = Instant::now();
            }
            let settled = fault_done
                && redis_back_at.is_none()
                && delivered == used
                && used >= limit
                && unchanged_since.elapsed() >= SETTLED_FOR;
            if settled {
                break true;
            }
            if started.elapsed() > SCENARIO_LIMIT {
                break false;
            }
        };
        drop(bench);
        if redis_back_at.is_some() {
            self.redis = Some(RedisServer::start(self.redis_port));
        }
        let (delivered, used, returned, unreported) = figures;
        Outcome {
            name: scenario.name,
            line_item,
            delivered,
            used,
            returned,
            unreported,
            stopped,
            took: started.elapsed(),
            killed_at_micros: self.killed_at_micros.take(),
        }
    }

    async fn inject(
        &mut self,
        scenario: &Scenario,
        reserved: u64,
        redis_back_at: &mut Option<Instant>,
    ) {
        match scenario.fault {
            Fault::None => {}
            Fault::KillEdge(_) => {
                self.edges[VICTIM].kill();
                self.killed_at_micros = Some(jiff::Timestamp::now().as_microsecond());
                println!(
                    "  {}: edge {VICTIM} killed at {reserved} reserved",
                    scenario.name
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
                self.restart_edge(VICTIM);
            }
            Fault::KillManager(_) => {
                self.manager.kill();
                println!("  {}: manager killed at {reserved} reserved", scenario.name);
                tokio::time::sleep(Duration::from_secs(2)).await;
                self.manager = start_manager(
                    &self.dir.path().join("manager"),
                    self.database.url(),
                    self.manager_port,
                    false,
                );
            }
            Fault::StopRedis(_) => {
                self.redis = None;
                *redis_back_at = Some(Instant::now() + REDIS_AWAY);
                println!("  {}: Redis stopped at {reserved} reserved", scenario.name);
            }
        }
    }
}

/// Where a scenario's ads were decided and their beacons settled, from the edges' logs:
/// decisions and impressions per edge, decisions never settled, and around an edge's kill
/// what the killed edge logged in the last sync interval before it.
fn trace(outcome: &Outcome, by_edge: &[Vec<marquee_eventlog::Event>]) -> String {
    let ours = |e: &&marquee_eventlog::Event| e.line_item == outcome.line_item;
    let ids = |kind: EventKind| -> Vec<HashSet<u128>> {
        by_edge
            .iter()
            .map(|log| {
                log.iter()
                    .filter(ours)
                    .filter(|e| e.kind == kind)
                    .map(|e| e.event_id)
                    .collect()
            })
            .collect()
    };
    let decided = ids(EventKind::Decision);
    let settled = ids(EventKind::Impression);
    let all_settled: HashSet<u128> = settled.iter().flatten().copied().collect();
    let never: usize = decided
        .iter()
        .map(|d| d.iter().filter(|id| !all_settled.contains(id)).count())
        .sum();
    let mut text = format!(
        "decided {:?}, settled {:?} per edge; {never} decisions never settled",
        decided.iter().map(HashSet::len).collect::<Vec<_>>(),
        settled.iter().map(HashSet::len).collect::<Vec<_>>(),
    );
    if let Some((decided, settled)) = last_interval(outcome, by_edge) {
        text.push_str(&format!(
            "; the killed edge's last sync interval: {decided} decided, {settled} settled"
        ));
    }
    text
}

/// What the killed edge logged for the scenario's line item in its last sync interval before
/// the kill (decisions, impressions): what the lease book cannot have heard of.
fn last_interval(
    outcome: &Outcome,
    by_edge: &[Vec<marquee_eventlog::Event>],
) -> Option<(usize, usize)> {
    let killed = outcome.killed_at_micros?;
    let sync_interval_micros = i64::try_from(EDGE_SYNC_INTERVAL_MS * 1_000).unwrap();
    let count = |kind: EventKind| {
        by_edge[VICTIM]
            .iter()
            .filter(|e| e.line_item == outcome.line_item && e.kind == kind)
            .filter(|e| e.time_micros <= killed && killed - e.time_micros <= sync_interval_micros)
            .count()
    };
    Some((count(EventKind::Decision), count(EventKind::Impression)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and Redis: scripts/test.sh starts them"]
async fn impression_goals_end_within_half_a_percent_wherever_beacons_land_and_through_faults() {
    let _alone = common::ONE_AT_A_TIME.lock().await;
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let (manager_dir, edge_dirs) = common::cluster_dirs(dir.path(), EDGES);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let redis_port = free_port();
    let redis = RedisServer::start(redis_port);
    let database = TestDatabase::create().await;
    let manager_port = free_port();
    let manager_url = format!("http://127.0.0.1:{manager_port}");
    let manager = start_manager(&manager_dir, database.url(), manager_port, true);
    let admin = token_from(&manager.server().stderr_line("demo admin token"));
    let edge_ports: Vec<u16> = (0..EDGES).map(|_| free_port()).collect();
    let redis_url = format!("redis://127.0.0.1:{redis_port}");
    let edges: Vec<Guard> = (0..EDGES)
        .map(|i| start_edge(&edge_dirs[i], &manager_url, edge_ports[i], &redis_url))
        .collect();
    wait_for_edges(
        &client,
        &manager_url,
        SECRET,
        EDGES,
        false,
        Duration::from_secs(30),
    )
    .await;
    let sites = get_json(
        &client,
        &format!("{manager_url}/api/v1/sites"),
        Some(&admin),
    )
    .await;
    let site = sites["items"][0]["id"].as_u64().unwrap();
    let mut cluster = Cluster {
        dir,
        database,
        manager_port,
        manager_url,
        manager,
        edge_ports,
        edge_dirs,
        edges,
        redis_port,
        redis: Some(redis),
        admin,
        client,
        site,
        campaign: 0,
        killed_at_micros: None,
    };
    let advertiser = cluster
        .post(
            "advertisers",
            json!({ "name": "Budgets", "currency": "EUR", "time_zone": "UTC" }),
        )
        .await;
    cluster.campaign = cluster
        .post(
            "campaigns",
            json!({ "advertiser_id": advertiser, "name": "Budgets" }),
        )
        .await;

    let scenarios = [
        Scenario {
            name: "beacons on the deciding edge",
            beacon_target: "same",
            fault: Fault::None,
        },
        Scenario {
            name: "beacons on another edge",
            beacon_target: "other",
            fault: Fault::None,
        },
        Scenario {
            name: "beacons on a random edge",
            beacon_target: "random",
            fault: Fault::None,
        },
        Scenario {
            name: "an edge killed and restarted at 50%",
            beacon_target: "random",
            fault: Fault::KillEdge(500),
        },
        Scenario {
            name: "the manager killed and restarted at 90%",
            beacon_target: "random",
            fault: Fault::KillManager(900),
        },
        Scenario {
            name: "Redis stopped for 10 s at 50%",
            beacon_target: "random",
            fault: Fault::StopRedis(500),
        },
    ];
    // `MARQUEE_BUDGETS_SCENARIOS=4,5` runs only those (numbered from 1).
    let only: Option<Vec<usize>> = std::env::var("MARQUEE_BUDGETS_SCENARIOS").ok().map(|list| {
        list.split(',')
            .filter_map(|n| n.trim().parse().ok())
            .collect()
    });
    let mut outcomes = Vec::new();
    for (i, scenario) in scenarios.iter().enumerate() {
        if only.as_ref().is_some_and(|only| !only.contains(&(i + 1))) {
            continue;
        }
        let outcome = cluster.run(scenario, 1_000 + i as u64).await;
        println!(
            "  {}: {} delivered, {} used, {} returned, {} unreported reclaimed; {} in {:.1} s",
            outcome.name,
            outcome.delivered,
            outcome.used,
            outcome.returned,
            outcome.unreported,
            if outcome.stopped {
                "stopped"
            } else {
                "still moving"
            },
            outcome.took.as_secs_f64()
        );
        outcomes.push(outcome);
    }

    // Everything collected, then everything stopped: the last appends fsynced, then every edge
    // read to its tail.
    tokio::time::sleep(Duration::from_millis(300)).await;
    wait_for_edges(
        &cluster.client,
        &cluster.manager_url,
        SECRET,
        EDGES,
        true,
        Duration::from_secs(30),
    )
    .await;
    cluster.manager.stop();
    for edge in &mut cluster.edges {
        edge.stop();
    }

    // Reports equal the sum of all edges' logs: every (event id, kind) once.
    let mut events = Vec::new();
    let mut by_edge = Vec::new();
    for d in &cluster.edge_dirs {
        let logged = logged_events(d);
        by_edge.push(logged.clone());
        events.extend(logged);
    }
    let minutes = MinuteCheck::of(&events, cluster.database.url()).await;
    let mut impressions_logged: HashMap<u64, HashSet<u128>> = HashMap::new();
    for e in &events {
        if e.kind == EventKind::Impression {
            impressions_logged
                .entry(e.line_item)
                .or_default()
                .insert(e.event_id);
        }
    }

    for o in &outcomes {
        println!("  {}: {}", o.name, trace(o, &by_edge));
    }
    println!("| scenario | goal | delivered | delta % |");
    println!("|---|---|---|---|");
    for o in &outcomes {
        println!(
            "| {} | {GOAL} | {} | {:+.2} |",
            o.name,
            o.delivered,
            o.delta_percent()
        );
    }
    println!(
        "budgets: {} s in all; {} records in {EDGES} logs, {} distinct events, {} counted",
        started.elapsed().as_secs(),
        events.len(),
        minutes.distinct,
        minutes.counted
    );

    let mut failures = Vec::new();
    if !minutes.exact() {
        failures.push(minutes.to_string());
    }
    for o in &outcomes {
        let logged = impressions_logged.get(&o.line_item).map_or(0, HashSet::len) as u64;
        if logged != o.delivered {
            failures.push(format!(
                "{}: {} impressions aggregated, {logged} distinct in the logs",
                o.name, o.delivered
            ));
        }
        if !o.within_band() || !o.stopped {
            failures.push(format!(
                "{}: delivered {} of {GOAL} ({:+.2}%), used {}, returned {}, unreported \
                 reclaimed {}, {} after {:.1} s",
                o.name,
                o.delivered,
                o.delta_percent(),
                o.used,
                o.returned,
                o.unreported,
                if o.stopped { "stopped" } else { "not stopped" },
                o.took.as_secs_f64()
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
