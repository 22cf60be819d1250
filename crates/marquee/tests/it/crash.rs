//! Crash tests: `kill -9` the server while clients fetch ads and fire their impression beacons
//! and others send bid requests, restart it on the same data directory (recovery runs), stop it
//! gracefully, and compare the impressions in the event log with the beacons the clients were
//! answered (200 and the GIF), and the bids and no-bids its counter records count with those
//! answered.
//!
//! - `strict`: every answered impression is in the log (none lost), and none is there twice.
//! - `group`: impressions answered shortly before the kill may be lost, but only those answered
//!   within the commit interval plus the flushes' own time (see [`group_bound`]); none is there
//!   twice.
//! - Both modes: bids and no-bids are counted, not logged one by one, and never made durable
//!   before the answer (they carry no money), so in either mode the counts may fall short of
//!   the answers by at most those answered within [`group_bound`] of the kill, and never exceed
//!   the answers by more than the requests in flight at the kill (nothing counted twice).
//!
//! Each round kills at a random moment drawn from a seed, printed with the figures; set
//! `CRASH_TEST_SEED` to replay a seed's choices. `CRASH_TEST_ROUNDS` sets the rounds per
//! mode and `CRASH_TEST_GROUP_COMMIT_MS` the commit interval; `bench/crash.sh` is the long
//! version (release build, more rounds, the default 5 ms window as well).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{
    Guard, Rng, Server, env_or, impression_token, logged_events, now_secs, openrtb_sample,
    serve_and_fire, tracking_keys, try_get_text, wait_for_ad,
};
use marquee_eventlog::EventKind;
use marquee_tracking::{KeyRing, TokenKind};
use serde_json::Value;

/// Concurrent clients, each fetching an ad and then firing its beacon, in a loop.
const CLIENTS: usize = 4;
/// Concurrent clients sending bid requests (of one imp each), in a loop.
const BID_CLIENTS: usize = 2;
/// Rounds per durability mode unless `CRASH_TEST_ROUNDS` says otherwise.
const ROUNDS: usize = 3;
/// The kill comes this long after the clients start: a seeded draw in this range.
const KILL_AFTER_MS: std::ops::Range<u64> = 250..900;
/// The clients stop by themselves after this, if the kill never came.
const CLIENT_LIMIT: Duration = Duration::from_secs(5);
/// And after this many ad + beacon cycles each.
const CLIENT_MAX_CYCLES: usize = 20_000;
/// Commit interval (`events.group_commit_ms`) of the rounds unless `CRASH_TEST_GROUP_COMMIT_MS`
/// says otherwise. The default is 5 ms; a longer window makes the loss in `group` mode, and so
/// the bound, clearly visible.
const GROUP_COMMIT_MS: u64 = 20;
/// Allowance for scheduling the flusher and the clients on a busy two-core machine: see
/// [`group_bound`].
const SCHEDULING_ALLOWANCE: Duration = Duration::from_millis(50);
/// The GIF answered by beacons starts with this.
const GIF: &[u8] = b"GIF89a";

/// How long before the kill an impression may have been answered and still be lost in `group`
/// mode (and a counted bid or no-bid in either mode). The flusher fsyncs every interval; an
/// event appended just after it took its buffer waits for that buffer's write and fsync, one
/// more interval, and its own write and fsync. So
/// the bound is the interval, plus twice the slowest fsync seen on the same file system around
/// the kill (measured by [`FsyncProbe`]: they take about 0.2 ms here, but up to 100 ms and more
/// while other processes write heavily), plus [`SCHEDULING_ALLOWANCE`]. Ages are measured from
/// when the client had its answer, which is after the append: so a failure is always a real
/// excess, and an excess smaller than the answer's own latency could go unnoticed.
fn group_bound(slowest_fsync: Duration) -> Duration {
    Duration::from_millis(group_commit_ms()) + 2 * slowest_fsync + SCHEDULING_ALLOWANCE
}

/// Measures fsync latency on the data directory's file system while a round runs: writes a
/// record-sized chunk to a file of its own and `fdatasync`s it every 5 ms.
struct FsyncProbe {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Vec<(Instant, Duration)>>,
}

impl FsyncProbe {
    fn start(dir: &Path) -> FsyncProbe {
        let stop = Arc::new(AtomicBool::new(false));
        let mut file = std::fs::File::create(dir.join("fsync-probe")).unwrap();
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut samples = Vec::new();
            // Bounded: 10,000 samples are 50 s, far more than a round.
            for _ in 0..10_000 {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                let started = Instant::now();
                file.write_all(&[0x5a; 77]).unwrap();
                file.sync_data().unwrap();
                samples.push((started, started.elapsed()));
                std::thread::sleep(Duration::from_millis(5));
            }
            samples
        });
        FsyncProbe { stop, thread }
    }

    /// Stops, and returns the slowest fsync that started before `before`.
    fn slowest_before(self, before: Instant) -> Duration {
        self.stop.store(true, Ordering::Relaxed);
        let samples = self.thread.join().unwrap();
        samples
            .iter()
            .filter(|(started, _)| *started <= before)
            .map(|(_, took)| *took)
            .max()
            .unwrap_or_default()
    }
}

fn group_commit_ms() -> u64 {
    env_or("CRASH_TEST_GROUP_COMMIT_MS", GROUP_COMMIT_MS)
}

/// `CRASH_TEST_SEED`, or one from the clock (printed, so a run can be replayed).
fn seed() -> u64 {
    let clock = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    env_or("CRASH_TEST_SEED", clock)
}

/// Starts the demo in `mode`; logs at `level` without colours.
fn start(data: &Path, mode: &str, level: &str) -> Guard {
    let interval = group_commit_ms().to_string();
    Guard::new(Server::start_with(
        data,
        &["--demo"],
        &[
            ("MARQUEE_EVENTS__DURABILITY", mode),
            ("MARQUEE_EVENTS__GROUP_COMMIT_MS", &interval),
            ("MARQUEE_LOG__LEVEL", level),
            ("NO_COLOR", "1"),
        ],
    ))
}

/// The bytes recovery cut from torn tails, from the restarted server's "event log open" line.
fn truncated_bytes(server: &Server) -> u64 {
    let line = server.stderr_line("event log open");
    line.split_whitespace()
        .find_map(|field| field.strip_prefix("truncated_bytes="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no truncated_bytes in {line:?}"))
}

/// One beacon fired and answered with 200 and the GIF.
struct Answered {
    nonce: u64,
    at: Instant,
}

#[derive(Default)]
struct ClientReport {
    answered: Vec<Answered>,
    /// Beacons fired a second time (must still be logged once).
    repeats: usize,
    cycles: usize,
}

/// Fetches an ad, fires its beacon, and records the beacon if it was answered; once in a
/// while fires the same beacon again. Stops at the first failure (the server is gone), after
/// [`CLIENT_MAX_CYCLES`] or [`CLIENT_LIMIT`].
async fn client_loop(
    client: reqwest::Client,
    base: String,
    ring: Arc<KeyRing>,
    id: usize,
) -> ClientReport {
    let mut report = ClientReport::default();
    let deadline = Instant::now() + CLIENT_LIMIT;
    for cycle in 0..CLIENT_MAX_CYCLES {
        if Instant::now() >= deadline {
            break;
        }
        report.cycles = cycle + 1;
        let placement = 1 + (cycle + id) % 2;
        let url = format!("{base}/ad?placement={placement}&format=html");
        let Some(html) = try_get_text(&client, &url).await else {
            break;
        };
        let token = impression_token(&html)
            .unwrap_or_else(|| panic!("no impression URL in the ad: {html:?}"))
            .to_owned();
        let nonce = ring
            .verify_kind(&token, TokenKind::Impression, now_secs())
            .unwrap()
            .nonce;
        let fires = if cycle % 8 == id % 8 { 2 } else { 1 };
        for fire in 0..fires {
            let Ok(response) = client.get(format!("{base}/t/i?t={token}")).send().await else {
                return report;
            };
            let status = response.status();
            let Ok(body) = response.bytes().await else {
                return report;
            };
            if status == reqwest::StatusCode::OK && body.starts_with(GIF) {
                report.answered.push(Answered {
                    nonce,
                    at: Instant::now(),
                });
                report.repeats += fire;
            }
        }
    }
    report
}

/// One bid request answered (200 with bids, or 204): when, and its imps with and without a bid.
struct BidAnswer {
    at: Instant,
    bids: u64,
    no_bids: u64,
}

/// Sends the simple banner sample (one imp) to `/openrtb2/bid` until the first failure (the
/// server is gone), [`CLIENT_MAX_CYCLES`] or [`CLIENT_LIMIT`]; returns the answers.
async fn bid_loop(client: reqwest::Client, base: String) -> Vec<BidAnswer> {
    let request = openrtb_sample("iab-2.6/iab-2.6-req-1-simple-banner.json");
    let imps = request["imp"].as_array().map_or(0, Vec::len) as u64;
    let mut answers = Vec::new();
    let deadline = Instant::now() + CLIENT_LIMIT;
    for _ in 0..CLIENT_MAX_CYCLES {
        if Instant::now() >= deadline {
            break;
        }
        let sent = client
            .post(format!("{base}/openrtb2/bid"))
            .json(&request)
            .send()
            .await;
        let Ok(response) = sent else { break };
        let status = response.status();
        let Ok(body) = response.bytes().await else {
            break;
        };
        let bids = match status {
            reqwest::StatusCode::NO_CONTENT => 0,
            reqwest::StatusCode::OK => {
                let answer: Value = serde_json::from_slice(&body).unwrap();
                answer["seatbid"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|seat| seat["bid"].as_array().map_or(0, Vec::len) as u64)
                    .sum()
            }
            other => panic!("bid request answered {other}: {body:?}"),
        };
        answers.push(BidAnswer {
            at: Instant::now(),
            bids,
            no_bids: imps.saturating_sub(bids),
        });
    }
    answers
}

/// Counted events of one kind (bids or no-bids) against what the clients were answered.
#[derive(Debug, Default, Clone, Copy)]
struct CountCheck {
    answered: u64,
    /// In the log's counter records (not counting any after the restart).
    counted: u64,
    /// Answered within the bound before the kill: the most a crash may lose.
    recent: u64,
    /// Rounds where more were missing than `recent`.
    over_bound: usize,
    /// Rounds where the log counted more than were answered and in flight.
    excess: usize,
}

impl CountCheck {
    /// `answered`: when each answer came and how many events of the kind it had; `in_flight`:
    /// the most events of the kind requests unanswered at the kill may have counted.
    fn of(
        answered: impl Iterator<Item = (Instant, u64)>,
        counted: u64,
        killed_at: Instant,
        bound: Duration,
        in_flight: u64,
    ) -> CountCheck {
        let mut check = CountCheck {
            counted,
            ..CountCheck::default()
        };
        for (at, n) in answered {
            check.answered += n;
            if killed_at.saturating_duration_since(at) <= bound {
                check.recent += n;
            }
        }
        check.over_bound = usize::from(check.answered.saturating_sub(counted) > check.recent);
        check.excess = usize::from(counted > check.answered + in_flight);
        check
    }

    fn add(&mut self, other: &CountCheck) {
        self.answered += other.answered;
        self.counted += other.counted;
        self.recent += other.recent;
        self.over_bound += other.over_bound;
        self.excess += other.excess;
    }
}

#[derive(Debug, Default)]
struct Figures {
    rounds: usize,
    /// Distinct impressions answered (200 GIF) before the kill.
    answered: usize,
    /// Beacons answered a second time for the same impression.
    repeats: usize,
    /// Distinct impressions in the log (not counting the one after the restart).
    logged: usize,
    /// In the log but never answered: beacons in flight at the kill.
    unanswered_logged: usize,
    lost: usize,
    doubled: usize,
    /// The oldest lost impression: how long before the kill it was answered.
    max_lost_age: Duration,
    /// Bytes of torn tails that recovery cut at the restart, and in how many rounds.
    truncated_bytes: u64,
    torn_rounds: usize,
    /// `group` mode: the slowest fsync of the probe before the kill.
    slowest_fsync: Duration,
    /// `group` mode: rounds where an impression older than [`group_bound`] was lost.
    over_bound: usize,
    bids: CountCheck,
    no_bids: CountCheck,
}

impl Figures {
    // Deliberately field by field, in the same shape as the aggregator's shard totals: other
    // figures, nothing to share.
    fn add(&mut self, other: &Figures) {
        self.rounds += other.rounds;
        self.answered += other.answered;
        self.repeats += other.repeats;
        self.logged += other.logged;
        self.unanswered_logged += other.unanswered_logged;
        self.lost += other.lost;
        self.doubled += other.doubled;
        self.max_lost_age = self.max_lost_age.max(other.max_lost_age);
        self.slowest_fsync = self.slowest_fsync.max(other.slowest_fsync);
        self.truncated_bytes += other.truncated_bytes;
        self.torn_rounds += other.torn_rounds;
        self.over_bound += other.over_bound;
        self.bids.add(&other.bids);
        self.no_bids.add(&other.no_bids);
    }

    fn line(&self) -> String {
        let mut lost = self.lost.to_string();
        if self.lost > 0 {
            lost += &format!(
                " (the oldest answered {} ms before the kill)",
                self.max_lost_age.as_millis()
            );
        }
        let mut line = format!(
            "answered {}, logged {} ({} in flight at the kill, never answered), lost {lost}, \
             doubled {}, repeats answered {}; torn tails cut in {} round(s), {} bytes",
            self.answered,
            self.logged,
            self.unanswered_logged,
            self.doubled,
            self.repeats,
            self.torn_rounds,
            self.truncated_bytes,
        );
        for (what, check) in [("bids", &self.bids), ("no-bids", &self.no_bids)] {
            line += &format!(
                "; {what} answered {}, counted {} ({} answered within the bound)",
                check.answered, check.counted, check.recent
            );
        }
        if self.slowest_fsync > Duration::ZERO {
            line += &format!(
                "; slowest probe fsync {:.1} ms",
                self.slowest_fsync.as_secs_f64() * 1e3
            );
        }
        line
    }
}

async fn crash_round(mode: &str, rng: &mut Rng) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();

    let mut server = start(data, mode, "warn");
    let base = server.server().base.clone();
    wait_for_ad(&client, &base).await;
    let ring = Arc::new(tracking_keys(data));
    // In both modes: counted bids are bounded by the group commit window in either.
    let probe = FsyncProbe::start(data);

    let clients: Vec<_> = (0..CLIENTS)
        .map(|id| {
            tokio::spawn(client_loop(
                client.clone(),
                base.clone(),
                Arc::clone(&ring),
                id,
            ))
        })
        .collect();
    let bidders: Vec<_> = (0..BID_CLIENTS)
        .map(|_| tokio::spawn(bid_loop(client.clone(), base.clone())))
        .collect();
    let kill_after = Duration::from_millis(rng.in_range(KILL_AFTER_MS));
    tokio::time::sleep(kill_after).await;
    let killed_at = Instant::now();
    server.kill();
    let mut answered: HashMap<u64, Instant> = HashMap::new();
    let mut repeats = 0;
    let mut cycles = 0;
    for handle in clients {
        let report = tokio::time::timeout(Duration::from_secs(10), handle)
            .await
            .expect("clients stop once the server is gone")
            .unwrap();
        for a in report.answered {
            // The first answer is the one that counts.
            answered.entry(a.nonce).or_insert(a.at);
        }
        repeats += report.repeats;
        cycles += report.cycles;
    }
    assert!(
        cycles >= CLIENTS,
        "the clients did not get going before the kill"
    );
    let mut bid_answers = Vec::new();
    for handle in bidders {
        let answers = tokio::time::timeout(Duration::from_secs(10), handle)
            .await
            .expect("bid clients stop once the server is gone")
            .unwrap();
        bid_answers.extend(answers);
    }
    assert!(
        !bid_answers.is_empty(),
        "the bid clients did not get going before the kill"
    );
    let slowest_fsync = probe.slowest_before(killed_at);

    // Restart on the same data: recovery cuts torn tails. One more impression after it, which
    // the graceful stop must flush whatever the mode.
    let mut server = start(data, mode, "info");
    let truncated = truncated_bytes(server.server());
    let base = server.server().base.clone();
    wait_for_ad(&client, &base).await;
    let after = one_impression(&client, &base, &ring).await;
    server.stop();

    let mut logged: HashMap<u64, usize> = HashMap::new();
    let (mut bids_counted, mut no_bids_counted) = (0, 0);
    for event in logged_events(data) {
        match event.kind {
            EventKind::Impression => {
                let nonce =
                    u64::try_from(event.event_id).expect("event ids of impressions are nonces");
                *logged.entry(nonce).or_default() += 1;
            }
            EventKind::BidsCounted => bids_counted += event.event_count(),
            EventKind::NoBidsCounted => no_bids_counted += event.event_count(),
            EventKind::Bid | EventKind::NoBid => {
                panic!("bids and no-bids are counted, not logged one by one: {event:?}")
            }
            _ => {}
        }
    }
    assert_eq!(
        logged.get(&after),
        Some(&1),
        "the impression answered after the restart, before a graceful stop, must be logged once"
    );
    logged.remove(&after);
    let lost: Vec<Duration> = answered
        .iter()
        .filter(|(nonce, _)| !logged.contains_key(nonce))
        .map(|(_, at)| killed_at.saturating_duration_since(*at))
        .collect();
    let max_lost_age = lost.iter().copied().max().unwrap_or_default();
    let bound = group_bound(slowest_fsync);
    // Each bid client has at most one request (of one imp) unanswered at the kill.
    let in_flight = BID_CLIENTS as u64;
    let bids = CountCheck::of(
        bid_answers.iter().map(|a| (a.at, a.bids)),
        bids_counted,
        killed_at,
        bound,
        in_flight,
    );
    let no_bids = CountCheck::of(
        bid_answers.iter().map(|a| (a.at, a.no_bids)),
        no_bids_counted,
        killed_at,
        bound,
        in_flight,
    );
    let figures = Figures {
        rounds: 1,
        answered: answered.len(),
        repeats,
        logged: logged.len(),
        unanswered_logged: logged.keys().filter(|n| !answered.contains_key(n)).count(),
        lost: lost.len(),
        doubled: logged.values().filter(|&&n| n > 1).count(),
        max_lost_age,
        truncated_bytes: truncated,
        torn_rounds: usize::from(truncated > 0),
        slowest_fsync,
        over_bound: usize::from(mode == "group" && max_lost_age > bound),
        bids,
        no_bids,
    };
    let bound_text = format!(" (bound {} ms)", bound.as_millis());
    println!(
        "crash {mode}: kill after {} ms: {}{bound_text}",
        kill_after.as_millis(),
        figures.line()
    );
    figures
}

/// One ad and its beacon, which must be answered.
async fn one_impression(client: &reqwest::Client, base: &str, ring: &KeyRing) -> u64 {
    let (token, response) = serve_and_fire(client, base, 2).await;
    assert!(response.bytes().await.unwrap().starts_with(GIF));
    ring.verify_kind(&token, TokenKind::Impression, now_secs())
        .unwrap()
        .nonce
}

async fn crash_rounds(mode: &str) -> Figures {
    let seed = seed();
    let mut rng = Rng(seed);
    let mut total = Figures::default();
    for _ in 0..env_or("CRASH_TEST_ROUNDS", ROUNDS) {
        total.add(&crash_round(mode, &mut rng).await);
    }
    println!(
        "crash {mode} (seed {seed}, {CLIENTS} clients, group commit {} ms): {} rounds, {}",
        group_commit_ms(),
        total.rounds,
        total.line()
    );
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_in_strict_mode_loses_no_answered_impression() {
    let _alone = common::ONE_AT_A_TIME.lock().await;
    let figures = crash_rounds("strict").await;
    assert!(
        figures.answered > figures.rounds,
        "too few impressions to judge: {figures:?}"
    );
    assert_eq!(
        figures.lost, 0,
        "answered impressions missing from the log: {figures:?}"
    );
    assert_eq!(figures.doubled, 0, "impressions logged twice: {figures:?}");
    assert_counts_within_the_commit_window(&figures);
}

/// The counted bids and no-bids of every round: short of the answers by at most those answered
/// within [`group_bound`] of the kill, over them by at most the requests in flight.
fn assert_counts_within_the_commit_window(figures: &Figures) {
    assert!(
        figures.bids.answered > 0,
        "no bid answered: the bid clients judge nothing: {figures:?}"
    );
    for (what, check) in [("bids", figures.bids), ("no-bids", figures.no_bids)] {
        assert_eq!(
            check.over_bound, 0,
            "in {} round(s) more {what} were missing from the counter records than were \
             answered within the bound of the kill (see the round lines above): {figures:?}",
            check.over_bound
        );
        assert_eq!(
            check.excess, 0,
            "in {} round(s) the counter records counted more {what} than were answered and in \
             flight: {figures:?}",
            check.excess
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_in_group_mode_loses_at_most_the_commit_window() {
    let _alone = common::ONE_AT_A_TIME.lock().await;
    let figures = crash_rounds("group").await;
    assert!(
        figures.answered > figures.rounds,
        "too few impressions to judge: {figures:?}"
    );
    assert_eq!(
        figures.over_bound,
        0,
        "in {} round(s) an impression answered longer before the kill than the bound was lost \
         (group commit {} ms + 2 x the slowest fsync + {} ms; see the round lines above): \
         {figures:?}",
        figures.over_bound,
        group_commit_ms(),
        SCHEDULING_ALLOWANCE.as_millis(),
    );
    assert_eq!(figures.doubled, 0, "impressions logged twice: {figures:?}");
    assert_counts_within_the_commit_window(&figures);
}
