//! What the per-request checks cost: a crawler check on browsers' and bots' user agents (and,
//! for comparison, the same patterns as one regular expression), a network lookup, a prefix
//! key and a rate count; and what compiling the shipped crawler list costs (each reload).

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use criterion::{Criterion, criterion_group, criterion_main};
use marquee_traffic::{CrawlerList, NetworkList, RateLimiter, prefix_key};
use regex::bytes::RegexBuilder;

// Shared with the tests, which use more of it.
#[allow(dead_code)]
#[path = "../tests/support/user_agents.rs"]
mod user_agents;

use user_agents::{BROWSERS, CRAWLERS};

fn crawlers(c: &mut Criterion) {
    let list = CrawlerList::builtin();
    let browsers: Vec<&[u8]> = BROWSERS.iter().map(|s| s.as_bytes()).collect();
    let bots: Vec<&[u8]> = CRAWLERS.iter().map(|s| s.as_bytes()).collect();
    assert!(browsers.iter().all(|ua| !list.is_crawler(ua)));
    assert!(bots.iter().all(|ua| list.is_crawler(ua)));

    // One iteration checks all ten: divide by ten for the cost of one call.
    c.bench_function("is_crawler x10 browser UAs", |b| {
        b.iter(|| {
            for ua in &browsers {
                black_box(list.is_crawler(black_box(ua)));
            }
        })
    });
    c.bench_function("is_crawler x10 crawler UAs", |b| {
        b.iter(|| {
            for ua in &bots {
                black_box(list.is_crawler(black_box(ua)));
            }
        })
    });

    let alternation = include_str!("../lists/crawlers.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|p| format!("(?:{p})"))
        .collect::<Vec<_>>()
        .join("|");
    let one_regex = RegexBuilder::new(&alternation)
        .unicode(false)
        .build()
        .unwrap_or_else(|e| panic!("alternation: {e}"));
    c.bench_function("reference: one regex x10 browser UAs", |b| {
        b.iter(|| {
            for ua in &browsers {
                black_box(one_regex.is_match(black_box(ua)));
            }
        })
    });

    c.bench_function("compile the builtin crawler list", |b| {
        b.iter(CrawlerList::builtin)
    });
}

/// A deterministic list of 3,000 IPv4 and 1,000 IPv6 blocks, the size of a data-centre list.
fn network_list() -> NetworkList {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut text = String::new();
    for _ in 0..3_000 {
        let prefix = 12 + (next() % 13) as u32;
        let network = (next() as u32) & !(u32::MAX >> prefix);
        text.push_str(&format!("{}/{prefix}\n", Ipv4Addr::from(network)));
    }
    for _ in 0..1_000 {
        let prefix = 24 + (next() % 25) as u32;
        let network = (u128::from(next()) << 64) & !(u128::MAX >> prefix) | (1 << 125);
        text.push_str(&format!("{}/{prefix}\n", Ipv6Addr::from(network)));
    }
    NetworkList::parse(&text, "bench").unwrap_or_else(|e| panic!("{e}"))
}

fn networks(c: &mut Criterion) {
    let list = network_list();
    let probes: Vec<IpAddr> = [
        "192.0.2.1",
        "198.51.100.77",
        "203.0.113.200",
        "8.8.8.8",
        "100.64.1.2",
        "2001:db8::1",
        "2a00:1450:4001:80b::200e",
        "::ffff:192.0.2.1",
    ]
    .iter()
    .map(|s| s.parse().unwrap_or_else(|e| panic!("{s}: {e}")))
    .collect();
    // One iteration looks up all eight: divide by eight for one lookup.
    c.bench_function("NetworkList::contains x8 (4,000 blocks)", |b| {
        b.iter(|| {
            for &ip in &probes {
                black_box(list.contains(black_box(ip)));
            }
        })
    });
    c.bench_function("prefix_key x8", |b| {
        b.iter(|| {
            for &ip in &probes {
                black_box(prefix_key(black_box(ip)));
            }
        })
    });
}

fn rates(c: &mut Criterion) {
    let rates = RateLimiter::new(1 << 20);
    let now = 1_790_000_000;
    // Pre-fill with 100,000 clients so counts hit populated maps.
    for key in 0..100_000u64 {
        rates.over(key, 60, now);
    }
    let mut key = 0u64;
    c.bench_function("RateLimiter::over (100,000 keys this minute)", |b| {
        b.iter(|| {
            key = (key + 7_919) % 100_000;
            rates.over(black_box(key), 60, now)
        })
    });
}

criterion_group!(benches, crawlers, networks, rates);
criterion_main!(benches);
