//! The shared state against a real Redis: the instance scripts/test-deps.sh starts
//! (redis://127.0.0.1:26379, or MARQUEE_TEST_REDIS_URL), and for the outage tests servers of
//! their own started from the same `redis-server` binary, paused and stopped at will. The tests
//! that need either are ignored by plain `cargo test` and run by `scripts/test.sh`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use marquee_model::{ManualClock, SystemClock};
use marquee_sharedstate::keys::{self, key_slot};
use marquee_sharedstate::{
    BreakerState, BudgetAnswer, CapAnswer, CapRule, Fallback, Profile, Scope, SharedConfig,
    SharedState,
};

fn redis_url() -> String {
    std::env::var("MARQUEE_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:26379".into())
}

/// A plain connection to the test server, for looking at what the scripts wrote.
async fn inspect() -> redis::aio::MultiplexedConnection {
    connect(&redis_url()).await
}

/// A connection to the Redis at `url`, to look at what the shared state wrote there.
async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(url).unwrap();
    match tokio::time::timeout(
        Duration::from_secs(5),
        client.get_multiplexed_async_connection(),
    )
    .await
    {
        Ok(Ok(connection)) => connection,
        _ => panic!(
            "Redis is unreachable at {url}: run scripts/test-deps.sh, which installs and starts it"
        ),
    }
}

/// A user key no other test run uses.
fn fresh_user() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(Timestamp::now().as_nanosecond() as u128);
    hasher.finish()
}

fn patient(url: &str) -> SharedConfig {
    SharedConfig {
        timeout: Duration::from_secs(2),
        ..SharedConfig::new(url)
    }
}

/// An edge's shared state on the test Redis, [`patient`], on the system clock.
fn patient_edge() -> SharedState {
    SharedState::new(patient(&redis_url()), Arc::new(SystemClock)).unwrap()
}

/// [`patient_edge`] whose queue is sent only when a test calls `flush`.
fn flushed_by_hand() -> SharedState {
    let config = SharedConfig {
        flush_interval: Duration::from_secs(3600),
        ..patient(&redis_url())
    };
    SharedState::new(config, Arc::new(SystemClock)).unwrap()
}

fn later(by: Duration) -> Instant {
    Instant::now() + by
}

fn rule(line_item: u64, window_seconds: u32, limit: u32) -> CapRule {
    CapRule {
        scope: Scope::LineItem(line_item),
        window_seconds,
        limit,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn two_edges_racing_on_one_cap_let_exactly_the_limit_through() {
    inspect().await;
    let edges = [patient_edge(), patient_edge()];
    let user = fresh_user();
    let rules = [
        rule(11, 3600, 7),
        CapRule {
            scope: Scope::Campaign(5),
            window_seconds: 86_400,
            limit: 50,
        },
    ];
    let mut tasks = Vec::new();
    for i in 0..200 {
        let edge = edges[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            edge.check_and_count(
                user,
                &rules,
                edge.cap_count(),
                later(Duration::from_secs(5)),
            )
            .await
        }));
    }
    let mut allowed = 0;
    for task in tasks {
        match task.await.unwrap() {
            CapAnswer::Allowed => allowed += 1,
            CapAnswer::Refused => {}
            CapAnswer::Unavailable(why) => panic!("Redis did not decide: {why:?}"),
        }
    }
    assert_eq!(allowed, 7);
    // The campaign cap counted only the allowed ones: a refused call counts nowhere.
    let mut redis = inspect().await;
    let campaign: u64 = redis::cmd("ZCARD")
        .arg(keys::cap_key(user, Scope::Campaign(5), 86_400))
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(campaign, 7);
}

#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn one_users_keys_share_a_cluster_slot_and_expire_with_their_window() {
    let mut redis = inspect().await;
    let shared = patient_edge();
    let user = fresh_user();
    let rules = [
        rule(21, 60, 3),
        rule(21, 3600, 10),
        CapRule {
            scope: Scope::Campaign(9),
            window_seconds: 86_400,
            limit: 20,
        },
    ];
    let answer = shared
        .check_and_count(
            user,
            &rules,
            shared.cap_count(),
            later(Duration::from_secs(5)),
        )
        .await;
    assert_eq!(answer, CapAnswer::Allowed);
    let pattern = format!("mq:{{u:{user:016x}}}:*");
    let mut found: Vec<String> = redis::cmd("KEYS")
        .arg(&pattern)
        .query_async(&mut redis)
        .await
        .unwrap();
    found.sort();
    let mut expected = vec![
        format!("mq:{{u:{user:016x}}}:cap:li:21:60"),
        format!("mq:{{u:{user:016x}}}:cap:li:21:3600"),
        format!("mq:{{u:{user:016x}}}:cap:ca:9:86400"),
    ];
    expected.sort();
    assert_eq!(found, expected);
    let slot = key_slot(&found[0]);
    assert!(found.iter().all(|k| key_slot(k) == slot));
    for (key, window) in [
        (&expected[0], 86_400),
        (&expected[1], 3600),
        (&expected[2], 60),
    ] {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut redis)
            .await
            .unwrap();
        assert!(
            ttl > 0 && ttl <= window * 1000,
            "{key}: TTL {ttl} ms, window {window} s"
        );
    }
}

#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn windows_slide_on_the_injected_clock() {
    inspect().await;
    let clock = Arc::new(ManualClock::new(Timestamp::now()));
    let shared = SharedState::new(patient(&redis_url()), clock.clone()).unwrap();
    let user = fresh_user();
    let rules = [rule(31, 60, 2)];
    let check = || {
        shared.check_and_count(
            user,
            &rules,
            shared.cap_count(),
            later(Duration::from_secs(5)),
        )
    };
    assert_eq!(check().await, CapAnswer::Allowed);
    clock.advance(SignedDuration::from_secs(20));
    assert_eq!(check().await, CapAnswer::Allowed);
    assert_eq!(check().await, CapAnswer::Refused);
    assert!(shared.known_full(user, &rules), "the refusal is cached");
    // 59 s after the first count it is still in the window; at 60 s it has left it.
    clock.advance(SignedDuration::from_secs(39));
    assert!(shared.known_full(user, &rules));
    assert_eq!(check().await, CapAnswer::Refused);
    clock.advance(SignedDuration::from_secs(1));
    assert!(!shared.known_full(user, &rules));
    assert_eq!(check().await, CapAnswer::Allowed);
    assert_eq!(
        check().await,
        CapAnswer::Refused,
        "the second count is still in"
    );
    clock.advance(SignedDuration::from_secs(61));
    assert_eq!(check().await, CapAnswer::Allowed);
}

#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn queued_counts_and_charges_reach_redis_in_one_flush() {
    let mut redis = inspect().await;
    // Only the explicit flush below sends.
    let shared = flushed_by_hand();
    let user = fresh_user();
    let line_item = fresh_user();
    let rules = [rule(41, 3600, 2)];
    for _ in 0..3 {
        shared.count_later(user, &rules, shared.cap_count());
    }
    shared.charge_later(line_item, 250);
    shared.charge_later(line_item, 750);
    assert_eq!(shared.queued(), 4);
    assert_eq!(shared.spent(line_item), Some(1000), "queued charges count");
    assert!(shared.flush().await);
    assert_eq!(shared.queued(), 0);
    let counted: u64 = redis::cmd("ZCARD")
        .arg(keys::cap_key(user, Scope::LineItem(41), 3600))
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(
        counted, 3,
        "forced counts pass the limit: they already happened"
    );
    assert!(
        shared.known_full(user, &rules),
        "the flush taught the cache"
    );
    assert_eq!(shared.spent(line_item), Some(1000));
    let metrics = metrics(&shared);
    assert!(metrics.contains(&format!(
        "marquee_redis_budget_spent{{line_item=\"{line_item}\"}} 1000\n"
    )));
    assert!(metrics.contains("marquee_redis_write_behind_total{stage=\"flushed\"} 3\n"));
    let deadline = later(Duration::from_secs(5));
    assert_eq!(
        shared.charge_within(line_item, 500, 1200, deadline).await,
        BudgetAnswer::Refused(1000)
    );
    assert_eq!(
        shared.charge_within(line_item, 200, 1200, deadline).await,
        BudgetAnswer::Charged(1200)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn budget_charges_race_within_their_limit() {
    inspect().await;
    let edges = [patient_edge(), patient_edge()];
    let line_item = fresh_user();
    let mut tasks = Vec::new();
    for i in 0..100 {
        let edge = edges[i % 2].clone();
        tasks.push(tokio::spawn(async move {
            edge.charge_within(line_item, 3, 100, later(Duration::from_secs(5)))
                .await
        }));
    }
    let mut charged = 0;
    for task in tasks {
        match task.await.unwrap() {
            BudgetAnswer::Charged(_) => charged += 1,
            BudgetAnswer::Refused(total) => assert!(total + 3 > 100),
            BudgetAnswer::Unavailable(why) => panic!("Redis did not decide: {why:?}"),
        }
    }
    assert_eq!(charged, 33);
}

/// A `redis-server` of the test's own on a free loopback port, without persistence.
struct OwnServer {
    child: Child,
    port: u16,
}

// The same start as the marquee tests' `RedisServer`, deliberately: this crate's tests do not
// depend on that crate's.
impl OwnServer {
    fn start_on(port: u16) -> OwnServer {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server is missing: run scripts/test-deps.sh, which installs it");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not start on port {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        OwnServer { child, port }
    }

    fn start() -> OwnServer {
        OwnServer::start_on(free_port())
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn stop(mut self) -> u16 {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.port
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn impatient(url: &str) -> SharedConfig {
    SharedConfig {
        timeout: Duration::from_millis(50),
        failures_to_open: 2,
        open_for: Duration::from_millis(300),
        flush_interval: Duration::from_secs(3600),
        ..SharedConfig::new(url)
    }
}

/// Calls until the answer is not `Unavailable`, for at most `within`.
/// A fresh user and `rule`, after the first check Redis answered (allowed).
async fn first_allowed(shared: &SharedState, rule: CapRule) -> (u64, [CapRule; 1]) {
    let user = fresh_user();
    let rules = [rule];
    assert_eq!(
        until_redis_decides(shared, user, &rules, Duration::from_secs(5)).await,
        CapAnswer::Allowed
    );
    (user, rules)
}

async fn until_redis_decides(
    shared: &SharedState,
    user: u64,
    rules: &[CapRule],
    within: Duration,
) -> CapAnswer {
    let started = Instant::now();
    loop {
        let answer = shared
            .check_and_count(
                user,
                rules,
                shared.cap_count(),
                later(Duration::from_millis(100)),
            )
            .await;
        if !matches!(answer, CapAnswer::Unavailable(_)) || started.elapsed() > within {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn nothing_listening_opens_the_breaker_and_every_answer_comes_in_time() {
    let shared = SharedState::new(
        impatient(&format!("redis://127.0.0.1:{}", free_port())),
        Arc::new(SystemClock),
    )
    .unwrap();
    let rules = [rule(51, 60, 1)];
    let mut reasons = Vec::new();
    for _ in 0..4 {
        let started = Instant::now();
        let answer = shared
            .check_and_count(
                1,
                &rules,
                shared.cap_count(),
                later(Duration::from_millis(40)),
            )
            .await;
        assert!(
            started.elapsed() < Duration::from_millis(40 + 200),
            "answered after {:?}",
            started.elapsed()
        );
        let CapAnswer::Unavailable(reason) = answer else {
            panic!("nothing listens, yet {answer:?}");
        };
        reasons.push(reason);
    }
    assert!(matches!(reasons[0], Fallback::Error | Fallback::Timeout));
    assert_eq!(reasons[2..], [Fallback::BreakerOpen, Fallback::BreakerOpen]);
    assert_eq!(shared.breaker_state(), BreakerState::Open);
    let metrics = metrics(&shared);
    assert!(
        metrics.contains("marquee_redis_breaker_state 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("marquee_redis_fallbacks_total{reason=\"breaker_open\"} 2\n"));
}

#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn a_paused_server_opens_the_breaker_and_its_return_closes_it() {
    let server = OwnServer::start();
    let shared = SharedState::new(impatient(&server.url()), Arc::new(SystemClock)).unwrap();
    let (user, rules) = first_allowed(&shared, rule(61, 3600, 5)).await;
    server.signal("-STOP");
    for _ in 0..3 {
        let started = Instant::now();
        let count = shared.cap_count();
        let answer = shared
            .check_and_count(user, &rules, count, later(Duration::from_millis(30)))
            .await;
        assert!(matches!(answer, CapAnswer::Unavailable(_)), "{answer:?}");
        assert!(
            started.elapsed() < Duration::from_millis(30 + 200),
            "the deadline was 30 ms, the answer took {:?}",
            started.elapsed()
        );
        // Local state served it: its count waits for Redis (the two that timed out run there
        // on its return, and their queued counts add nothing).
        shared.count_later(user, &rules, count);
    }
    assert_eq!(shared.breaker_state(), BreakerState::Open);
    assert!(
        !shared.flush().await,
        "nothing is sent while the server is paused"
    );
    assert_eq!(shared.queued(), 3);
    server.signal("-CONT");
    assert_eq!(
        until_redis_decides(&shared, user, &rules, Duration::from_secs(5)).await,
        CapAnswer::Allowed
    );
    assert_eq!(shared.breaker_state(), BreakerState::Closed);
    assert!(shared.flush().await);
    assert_eq!(shared.queued(), 0);
    // Two counted directly, three while paused: the cap of five is full.
    let mut redis = connect(&server.url()).await;
    assert_eq!(
        zcard(&mut redis, keys::cap_key(user, Scope::LineItem(61), 3600)).await,
        5
    );
    assert_eq!(
        shared
            .check_and_count(
                user,
                &rules,
                shared.cap_count(),
                later(Duration::from_secs(1))
            )
            .await,
        CapAnswer::Refused
    );
}

#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn a_restarted_server_is_found_again_and_gets_the_script_back() {
    let server = OwnServer::start();
    let shared = SharedState::new(impatient(&server.url()), Arc::new(SystemClock)).unwrap();
    let rules = [rule(71, 3600, 5)];
    assert_eq!(
        until_redis_decides(&shared, 1, &rules, Duration::from_secs(5)).await,
        CapAnswer::Allowed
    );
    let port = server.stop();
    for _ in 0..3 {
        let answer = shared
            .check_and_count(
                1,
                &rules,
                shared.cap_count(),
                later(Duration::from_millis(100)),
            )
            .await;
        assert!(matches!(answer, CapAnswer::Unavailable(_)), "{answer:?}");
    }
    assert_eq!(shared.breaker_state(), BreakerState::Open);
    // A new process: empty, and without the script, which EVALSHA must load again.
    let _server = OwnServer::start_on(port);
    assert_eq!(
        until_redis_decides(&shared, 1, &rules, Duration::from_secs(10)).await,
        CapAnswer::Allowed
    );
    assert_eq!(shared.breaker_state(), BreakerState::Closed);
}

#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn a_spent_deadline_gets_an_answer_without_a_round_trip() {
    inspect().await;
    let shared = patient_edge();
    let answer = shared
        .check_and_count(
            fresh_user(),
            &[rule(81, 60, 1)],
            shared.cap_count(),
            Instant::now(),
        )
        .await;
    assert_eq!(answer, CapAnswer::Unavailable(Fallback::NoTime));
    assert_eq!(shared.breaker_state(), BreakerState::Closed);
}

#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn profiles_reach_every_edge_and_are_cached_for_a_while() {
    let mut redis = inspect().await;
    let edges = [patient_edge(), patient_edge()];
    let user = fresh_user();
    let deadline = later(Duration::from_secs(5));
    assert_eq!(edges[0].profile(user, deadline).await, Ok(None));
    let gold = Profile {
        segments: vec!["vip".into()],
        key_values: vec![("u_tier".into(), "gold".into())],
    };
    assert_eq!(
        edges[1]
            .put_profiles(&[(user, gold.clone())], deadline)
            .await,
        Ok(1)
    );
    let read = edges[1].profile(user, deadline).await.unwrap();
    assert_eq!(read.as_deref(), Some(&gold));
    // The first edge cached the absence: it learns the profile once its cache entry expires
    // (30 s by default), not at once.
    assert_eq!(edges[0].profile(user, deadline).await, Ok(None));
    let key = keys::profile_key(user);
    assert_eq!(
        key_slot(&key),
        key_slot(&keys::cap_key(user, Scope::LineItem(1), 60))
    );
    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut redis)
        .await
        .unwrap();
    // Cached: answered without a round trip, even with no time left.
    let cached = edges[1].profile(user, Instant::now()).await.unwrap();
    assert_eq!(cached.as_deref(), Some(&gold));
    let fresh = patient_edge();
    assert_eq!(
        fresh.profile(user, Instant::now()).await,
        Err(Fallback::NoTime)
    );
}

/// The `marquee_redis_*` metrics as a scrape reads them.
fn metrics(shared: &SharedState) -> String {
    let mut registry = marquee_metrics::Registry::default();
    shared.register_metrics(&mut registry);
    marquee_metrics::encode(&registry, marquee_metrics::Format::Text)
}

/// The round trips completed so far, from the metrics.
fn round_trips(shared: &SharedState) -> u64 {
    let text = metrics(shared);
    text.lines()
        .find_map(|line| line.strip_prefix("marquee_redis_round_trips_total "))
        .and_then(|n| n.parse().ok())
        .expect("marquee_redis_round_trips_total in the metrics")
}

/// Bid requests look profiles up without waiting: the first of a user goes without, one fetch
/// in the background serves the rest, however many arrive while it runs.
#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn a_user_unknown_to_the_cache_is_fetched_once_in_the_background() {
    inspect().await;
    let writer = patient_edge();
    let user = fresh_user();
    let gold = Profile {
        segments: vec!["vip".into()],
        key_values: vec![("u_tier".into(), "gold".into())],
    };
    let deadline = later(Duration::from_secs(5));
    assert_eq!(
        writer.put_profiles(&[(user, gold.clone())], deadline).await,
        Ok(1)
    );
    let edge = patient_edge();
    let before = round_trips(&edge);
    for _ in 0..50 {
        assert_eq!(edge.profile_now(user), None);
    }
    let mut read = None;
    for _ in 0..500 {
        read = edge.profile_now(user);
        if read.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(read.as_deref(), Some(&gold));
    assert_eq!(round_trips(&edge) - before, 1, "one GET for 50 lookups");

    // A user without a profile is remembered as such: one GET, then answers from the cache.
    let nobody = fresh_user();
    let before = round_trips(&edge);
    assert_eq!(edge.profile_now(nobody), None);
    for _ in 0..500 {
        if round_trips(&edge) > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for _ in 0..50 {
        assert_eq!(edge.profile_now(nobody), None);
    }
    assert_eq!(round_trips(&edge) - before, 1);
}

/// A bad URL is refused with the key named and without repeating the URL, which may carry a
/// password (secrets never reach logs).
#[tokio::test]
async fn a_bad_url_is_refused_without_its_password() {
    let error = SharedState::new(
        SharedConfig::new("rediss+x://:s3cret-pass@host:port/zz"),
        Arc::new(SystemClock),
    )
    .expect_err("an unusable URL");
    let text = error.to_string();
    assert!(text.starts_with("redis.url: "), "{text}");
    assert!(!text.contains("s3cret-pass"), "{text}");
}

/// The cap keys' member counts, by key.
async fn zcard(redis: &mut redis::aio::MultiplexedConnection, key: String) -> u64 {
    redis::cmd("ZCARD")
        .arg(key)
        .query_async(redis)
        .await
        .unwrap()
}

/// A flush that timed out may have run in Redis all the same (here it waits in the paused
/// server's socket and runs on its return); sending it again must not count it again.
#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn a_flush_sent_again_after_a_timeout_counts_each_count_and_charge_once() {
    let server = OwnServer::start();
    let config = SharedConfig {
        flush_timeout: Duration::from_millis(200),
        ..impatient(&server.url())
    };
    let shared = SharedState::new(config, Arc::new(SystemClock)).unwrap();
    // Connected before the pause, so that the flush's pipeline reaches the server's socket.
    let warm_up = [rule(91, 60, 5)];
    assert_eq!(
        until_redis_decides(&shared, fresh_user(), &warm_up, Duration::from_secs(5)).await,
        CapAnswer::Allowed
    );
    let user = fresh_user();
    let line_item = 17;
    let rules = [rule(92, 3600, 5)];
    shared.count_later(user, &rules, shared.cap_count());
    shared.charge_later(line_item, 300);
    server.signal("-STOP");
    assert!(!shared.flush().await, "a paused server answers nothing");
    shared.charge_later(line_item, 50);
    server.signal("-CONT");
    // The first pipeline runs now; this one follows it on the same connection and repeats it.
    assert!(shared.flush().await);
    // The 50 waited for the 300 to be confirmed; it goes now.
    assert_eq!(shared.queued(), 1);
    assert!(shared.flush().await);
    assert_eq!(shared.queued(), 0);
    let mut redis = connect(&server.url()).await;
    assert_eq!(
        zcard(&mut redis, keys::cap_key(user, Scope::LineItem(92), 3600)).await,
        1
    );
    let spent: u64 = redis::cmd("GET")
        .arg(keys::budget_key(line_item))
        .query_async(&mut redis)
        .await
        .unwrap();
    assert_eq!(spent, 350);
    assert_eq!(shared.spent(line_item), Some(350));
}

/// A chunk that fails goes back to the queue, alone: the chunks before it were counted, and
/// the commands of it that Redis ran are not counted twice when it is sent again.
#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn only_the_chunk_that_failed_is_sent_again() {
    let mut redis = inspect().await;
    let shared = flushed_by_hand();
    let user = fresh_user();
    let poisoned = fresh_user();
    let rules = [rule(93, 3600, 1)];
    let poisoned_key = keys::cap_key(poisoned, Scope::LineItem(93), 3600);
    // Not a sorted set: the script fails on it, and with it the pipeline it is in.
    let _: () = redis::cmd("SET")
        .arg(&poisoned_key)
        .arg("x")
        .query_async(&mut redis)
        .await
        .unwrap();
    // Chunks of 500: the first is user's alone, the second holds the poisoned count.
    for _ in 0..550 {
        shared.count_later(user, &rules, shared.cap_count());
    }
    shared.count_later(poisoned, &rules, shared.cap_count());
    for _ in 0..49 {
        shared.count_later(user, &rules, shared.cap_count());
    }
    assert!(!shared.flush().await);
    assert_eq!(shared.queued(), 100, "the second chunk, not the first");
    let _: () = redis::cmd("DEL")
        .arg(&poisoned_key)
        .query_async(&mut redis)
        .await
        .unwrap();
    assert!(shared.flush().await);
    assert_eq!(shared.queued(), 0);
    let user_key = keys::cap_key(user, Scope::LineItem(93), 3600);
    assert_eq!(zcard(&mut redis, user_key).await, 599);
    assert_eq!(zcard(&mut redis, poisoned_key).await, 1);
}

/// A long queue (Redis was away) drains in one flush, in chunks each within the flush timeout,
/// however short the requests' timeout is.
#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn a_queue_of_many_chunks_drains_under_the_short_request_timeout() {
    let mut redis = inspect().await;
    let config = SharedConfig {
        timeout: Duration::from_millis(10),
        flush_timeout: Duration::from_secs(5),
        flush_interval: Duration::from_secs(3600),
        ..SharedConfig::new(redis_url())
    };
    let shared = SharedState::new(config, Arc::new(SystemClock)).unwrap();
    let user = fresh_user();
    let line_item = fresh_user();
    let rules = [rule(94, 3600, 1)];
    for _ in 0..20_000 {
        shared.count_later(user, &rules, shared.cap_count());
    }
    shared.charge_later(line_item, 5);
    assert!(shared.flush().await);
    assert_eq!(shared.queued(), 0);
    assert_eq!(
        zcard(&mut redis, keys::cap_key(user, Scope::LineItem(94), 3600)).await,
        20_000
    );
    assert_eq!(shared.spent(line_item), Some(5));
}

/// The breaker protects requests; a flush is not one: its failures leave the breaker alone.
#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn a_flush_that_times_out_does_not_open_the_breaker() {
    let server = OwnServer::start();
    let config = SharedConfig {
        failures_to_open: 1,
        flush_timeout: Duration::from_millis(200),
        ..impatient(&server.url())
    };
    let shared = SharedState::new(config, Arc::new(SystemClock)).unwrap();
    let (user, rules) = first_allowed(&shared, rule(95, 3600, 5)).await;
    shared.count_later(user, &rules, shared.cap_count());
    server.signal("-STOP");
    assert!(!shared.flush().await);
    assert_eq!(shared.breaker_state(), BreakerState::Closed);
    let metrics = metrics(&shared);
    assert!(
        metrics.contains("marquee_redis_errors_total{kind=\"timeout\"} 1\n"),
        "{metrics}"
    );
    assert_eq!(shared.queued(), 1);
}

/// A stopping edge sends what is queued even while the breaker is open, which a regular flush
/// waits out.
#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn a_drain_sends_the_queue_whatever_the_breaker_says() {
    let server = OwnServer::start();
    let config = SharedConfig {
        failures_to_open: 1,
        open_for: Duration::from_secs(3600),
        ..impatient(&server.url())
    };
    let shared = SharedState::new(config, Arc::new(SystemClock)).unwrap();
    let (user, rules) = first_allowed(&shared, rule(96, 3600, 5)).await;
    server.signal("-STOP");
    // Another user's: this check runs in Redis on its return, though it was given up on.
    let answer = shared
        .check_and_count(
            fresh_user(),
            &rules,
            shared.cap_count(),
            later(Duration::from_millis(30)),
        )
        .await;
    assert!(matches!(answer, CapAnswer::Unavailable(_)), "{answer:?}");
    shared.count_later(user, &rules, shared.cap_count());
    server.signal("-CONT");
    assert_eq!(shared.breaker_state(), BreakerState::Open);
    assert!(!shared.flush().await, "the flusher waits for the breaker");
    assert!(shared.drain(Duration::from_secs(5)).await);
    assert_eq!(shared.queued(), 0);
    let mut redis = connect(&server.url()).await;
    assert_eq!(
        zcard(&mut redis, keys::cap_key(user, Scope::LineItem(96), 3600)).await,
        2
    );
}

/// Ad ops raise a cap: a user the cache knows full at the old limit is allowed at the new one
/// at once, not when the old window ends.
#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn a_raised_limit_is_not_refused_from_the_cache() {
    inspect().await;
    let shared = patient_edge();
    let user = fresh_user();
    let once_a_day = [rule(97, 86_400, 1)];
    let deadline = later(Duration::from_secs(5));
    assert_eq!(
        shared
            .check_and_count(user, &once_a_day, shared.cap_count(), deadline)
            .await,
        CapAnswer::Allowed
    );
    assert_eq!(
        shared
            .check_and_count(user, &once_a_day, shared.cap_count(), deadline)
            .await,
        CapAnswer::Refused
    );
    assert!(shared.known_full(user, &once_a_day));
    let five_a_day = [rule(97, 86_400, 5)];
    assert!(!shared.known_full(user, &five_a_day));
    assert_eq!(
        shared
            .check_and_count(user, &five_a_day, shared.cap_count(), deadline)
            .await,
        CapAnswer::Allowed
    );
}

/// A check that timed out may have counted in Redis all the same (here it waits in the paused
/// server's socket and runs on its return). The edge served that decision from local state
/// and queued its count: sent, the queued count must not count the decision again.
#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn a_check_that_timed_out_after_redis_counted_it_counts_once_when_queued() {
    let server = OwnServer::start();
    let shared = SharedState::new(impatient(&server.url()), Arc::new(SystemClock)).unwrap();
    // Connected before the pause, so that the check reaches the server's socket.
    let warm_up = [rule(98, 60, 5)];
    assert_eq!(
        until_redis_decides(&shared, fresh_user(), &warm_up, Duration::from_secs(5)).await,
        CapAnswer::Allowed
    );
    let user = fresh_user();
    let rules = [rule(99, 3600, 5)];
    let key = keys::cap_key(user, Scope::LineItem(99), 3600);
    server.signal("-STOP");
    // The edge draws one count per decision and carries it through.
    let count = shared.cap_count();
    let answer = shared
        .check_and_count(user, &rules, count, later(Duration::from_millis(30)))
        .await;
    assert_eq!(answer, CapAnswer::Unavailable(Fallback::Timeout));
    // What the edge does with that answer: local state decided, the same count is queued.
    shared.count_later(user, &rules, count);
    server.signal("-CONT");
    let mut redis = connect(&server.url()).await;
    // The check given up on runs now: Redis counted the decision before the queue is sent.
    let started = Instant::now();
    while zcard(&mut redis, key.clone()).await == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the timed-out check never ran"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(shared.breaker_state(), BreakerState::Closed);
    assert!(shared.flush().await);
    assert_eq!(shared.queued(), 0);
    assert_eq!(
        zcard(&mut redis, key).await,
        1,
        "one decision, one count against the cap"
    );
}

/// The shared budget figure stays true on an edge that stopped charging: it reads the counter
/// back every second, so another edge's charges show there too.
#[tokio::test]
#[ignore = "needs Redis: scripts/test.sh starts it"]
async fn the_shared_budget_figure_follows_other_edges_charges() {
    let config = || SharedConfig {
        flush_interval: Duration::from_millis(50),
        ..patient(&redis_url())
    };
    let charging = SharedState::new(config(), Arc::new(SystemClock)).unwrap();
    let stopped = SharedState::new(config(), Arc::new(SystemClock)).unwrap();
    let line_item = fresh_user();
    stopped.charge_later(line_item, 100);
    assert!(stopped.flush().await);
    assert_eq!(stopped.spent(line_item), Some(100));
    charging.charge_later(line_item, 400);
    assert!(charging.flush().await);
    let deadline = later(Duration::from_secs(10));
    while stopped.spent(line_item) != Some(500) {
        assert!(
            Instant::now() < deadline,
            "still {:?}",
            stopped.spent(line_item)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = metrics(&stopped);
    assert!(metrics.contains(&format!(
        "marquee_redis_budget_spent{{line_item=\"{line_item}\"}} 500\n"
    )));
}
