//! What a lookup costs on a database of realistic size and layout: uncached (the City
//! database alone, and with an ASN database), a cache hit, and a mix of returning and new
//! clients through the per-worker cache; and what opening (each reload) costs.
//!
//! The databases are generated: 300,000 IPv4 and 50,000 IPv6 networks over 20,000 cities
//! in 200 countries, each record in GeoLite2 City's full layout (names in eight languages,
//! continent, registered country, time zone, accuracy radius, geoname ids), so that a
//! lookup skips as much as it does in the real file; and 80,000 ASN networks.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use marquee_geo::writer::{DatabaseWriter, Value};
use marquee_geo::{GeoDatabase, LookupCache};

// A deliberate copy of the SplitMix64 in the other crates' benches and tests: no dev-only
// crate serves them all, and a production crate must not carry test helpers.
/// SplitMix64: a small generator whose outputs are fixed by its definition, so that every
/// run measures the same databases and addresses.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const LANGUAGES: [&str; 8] = ["de", "en", "es", "fr", "ja", "pt-BR", "ru", "zh-CN"];

fn names(base: &str) -> Value {
    Value::map(LANGUAGES.map(|language| {
        (
            language,
            Value::from(format!("{base} ({language})").as_str()),
        )
    }))
}

fn country(i: u64) -> Value {
    let code = [b'A' + (i / 26) as u8 % 26, b'A' + (i % 26) as u8];
    let code = std::str::from_utf8(&code).unwrap_or("ZZ").to_owned();
    Value::map([
        ("geoname_id", Value::Uint32(6_000_000 + i as u32)),
        ("iso_code", Value::from(code.as_str())),
        ("names", names(&format!("Country {code}"))),
    ])
}

fn city_record(random: &mut Random, i: u64) -> Value {
    let country_index = i % 200;
    let continent = Value::map([
        ("code", Value::from("EU")),
        ("geoname_id", Value::Uint32(6_255_148)),
        ("names", names("Europe")),
    ]);
    Value::map([
        (
            "city",
            Value::map([
                ("geoname_id", Value::Uint32(2_000_000 + i as u32)),
                ("names", names(&format!("City {i}"))),
            ]),
        ),
        ("continent", continent),
        ("country", country(country_index)),
        (
            "location",
            Value::map([
                ("accuracy_radius", Value::Uint16(20)),
                ("latitude", Value::Double(random.unit() * 140.0 - 70.0)),
                ("longitude", Value::Double(random.unit() * 360.0 - 180.0)),
                ("metro_code", Value::Uint16(500 + (i % 300) as u16)),
                ("time_zone", Value::from("Europe/Berlin")),
            ]),
        ),
        (
            "postal",
            Value::map([("code", Value::from(format!("{:05}", i % 100_000).as_str()))]),
        ),
        ("registered_country", country(country_index)),
        (
            "subdivisions",
            Value::Array(vec![Value::map([
                ("geoname_id", Value::Uint32(3_000_000 + (i % 4_000) as u32)),
                ("iso_code", Value::from(format!("S{}", i % 50).as_str())),
                ("names", names(&format!("Subdivision {}", i % 4_000))),
            ])]),
        ),
    ])
}

/// A random IPv4 network of /16 to /24, most of them /22 to /24 as in the real files.
fn ipv4_network(random: &mut Random) -> Ipv4Net {
    let prefix = [16, 18, 20, 21, 22, 22, 23, 23, 24, 24, 24, 24][random.below(12) as usize];
    let address = Ipv4Addr::from_bits(random.next() as u32 & !(u32::MAX >> prefix));
    Ipv4Net::new(address, prefix).unwrap_or_default()
}

/// A random IPv6 network of /32 to /48 in 2000::/3.
fn ipv6_network(random: &mut Random) -> Ipv6Net {
    let prefix = [32, 36, 40, 44, 48, 48][random.below(6) as usize];
    let bits = (u128::from(random.next()) << 64 | u128::from(random.next())) >> 3 | 1 << 125;
    let address = Ipv6Addr::from_bits(bits & !(u128::MAX >> prefix));
    Ipv6Net::new(address, prefix).unwrap_or_default()
}

struct Setup {
    city: Vec<u8>,
    asn: Vec<u8>,
    /// Addresses inside the networks (a few fall where a later network left a gap).
    addresses: Vec<IpAddr>,
}

fn setup() -> Setup {
    let started = Instant::now();
    let mut random = Random(0x5EED);
    let cities: Vec<Value> = (0..20_000).map(|i| city_record(&mut random, i)).collect();
    let mut writer = DatabaseWriter::new("Benchmark-City", "Generated for benchmarks");
    writer.build_epoch(0);
    for language in LANGUAGES {
        writer.language(language);
    }
    let mut addresses = Vec::new();
    for i in 0..350_000 {
        let network = if i % 7 == 6 {
            IpNet::V6(ipv6_network(&mut random))
        } else {
            IpNet::V4(ipv4_network(&mut random))
        };
        // Skewed: a few cities have many networks, as large cities do.
        let city = (random.unit().powi(3) * cities.len() as f64) as usize;
        if writer.insert(network, &cities[city]).is_err() {
            unreachable!("generated records are small");
        }
        if addresses.len() < 100_000 {
            let host = random.next();
            addresses.push(match network {
                IpNet::V4(n) => IpAddr::V4(Ipv4Addr::from_bits(
                    n.network().to_bits() | (host as u32 & !n.netmask().to_bits()),
                )),
                IpNet::V6(n) => IpAddr::V6(Ipv6Addr::from_bits(
                    n.network().to_bits() | (u128::from(host) & !n.netmask().to_bits()),
                )),
            });
        }
    }
    let city = writer.to_bytes().unwrap_or_default();

    let mut writer = DatabaseWriter::new("Benchmark-ASN", "Generated for benchmarks");
    writer.build_epoch(0);
    for i in 0..80_000u32 {
        let network = if i % 7 == 6 {
            IpNet::V6(ipv6_network(&mut random))
        } else {
            let v4 = ipv4_network(&mut random);
            IpNet::V4(v4.supernet().and_then(|n| n.supernet()).unwrap_or(v4))
        };
        let asn = 1_000 + random.below(5_000) as u32;
        let record = Value::map([
            ("autonomous_system_number", Value::Uint32(asn)),
            (
                "autonomous_system_organization",
                Value::from(format!("Network Operator {asn}").as_str()),
            ),
        ]);
        if writer.insert(network, &record).is_err() {
            unreachable!("generated records are small");
        }
    }
    let asn = writer.to_bytes().unwrap_or_default();
    eprintln!(
        "generated: City {:.1} MB, ASN {:.1} MB, in {:.1} s",
        city.len() as f64 / 1e6,
        asn.len() as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    Setup {
        city,
        asn,
        addresses,
    }
}

fn lookups(c: &mut Criterion) {
    let Setup {
        city,
        asn,
        addresses,
    } = setup();
    let city_only = GeoDatabase::from_bytes(city.clone(), None).unwrap_or_else(|e| panic!("{e}"));
    let with_asn =
        GeoDatabase::from_bytes(city.clone(), Some(asn.clone())).unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "networks: City {}, ASN {}",
        city_only.location_info().networks,
        with_asn.network_info().map_or(0, |i| i.networks)
    );
    let found = addresses
        .iter()
        .filter(|a| city_only.lookup(**a).is_some())
        .count();
    eprintln!("{found} of {} addresses found", addresses.len());

    // One iteration looks 1,000 addresses up: divide by 1,000 for the cost of one.
    let mut next = 0;
    let mut batch = move || {
        next = (next + 1_000) % (addresses.len() - 1_000);
        addresses[next..next + 1_000].to_vec()
    };
    let batches: Vec<Vec<IpAddr>> = (0..64).map(|_| batch()).collect();

    let mut round = 0;
    c.bench_function("lookup x1000, uncached, City", |b| {
        b.iter(|| {
            round = (round + 1) % batches.len();
            for address in &batches[round] {
                black_box(city_only.lookup(black_box(*address)));
            }
        })
    });
    c.bench_function("lookup x1000, uncached, City + ASN", |b| {
        b.iter(|| {
            round = (round + 1) % batches.len();
            for address in &batches[round] {
                black_box(with_asn.lookup(black_box(*address)));
            }
        })
    });

    // The capacity the README suggests for a worker.
    let capacity = 8_192;
    let mut cache = LookupCache::new(capacity);
    let hot = &batches[0];
    for address in hot {
        cache.lookup(&with_asn, *address);
    }
    let (hits, misses) = (cache.hits(), cache.misses());
    c.bench_function("lookup x1000, cached hit", |b| {
        b.iter(|| {
            for address in hot {
                black_box(cache.lookup(&with_asn, black_box(*address)));
            }
        })
    });
    eprintln!("cached hit: {}", hit_rate(&cache, hits, misses));

    // A worker's traffic: four requests in five from 2,000 returning clients (the page
    // view, its ad requests and beacons), one in five from a client not seen recently
    // (62,000 of them in turn, so never in the cache).
    let returning: Vec<IpAddr> = batches.iter().take(2).flatten().copied().collect();
    let new_clients: Vec<IpAddr> = batches.iter().skip(2).flatten().copied().collect();
    let mut random = Random(7);
    let mix: Vec<IpAddr> = (0..100_000)
        .map(|i| {
            if random.below(5) == 0 {
                new_clients[i % new_clients.len()]
            } else {
                returning[random.below(returning.len() as u64) as usize]
            }
        })
        .collect();
    let mut cache = LookupCache::new(capacity);
    let mut at = 0;
    c.bench_function("lookup x1000, mix through the cache", |b| {
        b.iter(|| {
            at = (at + 1_000) % mix.len();
            for address in &mix[at..at + 1_000] {
                black_box(cache.lookup(&with_asn, black_box(*address)));
            }
        })
    });
    eprintln!("mix: {}", hit_rate(&cache, 0, 0));

    // The same mix, each lookup timed on its own for the distribution of a request's cost,
    // through a cache already warm; the clock's own cost is measured alike and shown.
    let mut clock: Vec<u64> = mix
        .iter()
        .map(|address| {
            let started = Instant::now();
            black_box(address);
            started.elapsed().as_nanos() as u64
        })
        .collect();
    clock.sort_unstable();
    let mut took: Vec<u64> = mix
        .iter()
        .map(|address| {
            let started = Instant::now();
            black_box(cache.lookup(&with_asn, black_box(*address)));
            started.elapsed().as_nanos() as u64
        })
        .collect();
    took.sort_unstable();
    let at = |q: f64| took[((took.len() - 1) as f64 * q) as usize];
    eprintln!(
        "mix, per lookup: p50 {} ns, p75 {} ns, p80 {} ns, p90 {} ns, p99 {} ns (the clock alone: p50 {} ns)",
        at(0.5),
        at(0.75),
        at(0.8),
        at(0.9),
        at(0.99),
        clock[clock.len() / 2]
    );

    let mut group = c.benchmark_group("open");
    group.sample_size(10);
    group.bench_function("open and check, City", |b| {
        b.iter(|| black_box(GeoDatabase::from_bytes(city.clone(), None).is_ok()))
    });
    group.bench_function("open and check, City + ASN", |b| {
        b.iter(|| black_box(GeoDatabase::from_bytes(city.clone(), Some(asn.clone())).is_ok()))
    });
    group.finish();
}

/// The share of lookups answered by address since `hits` and `misses` were read.
fn hit_rate(cache: &LookupCache, hits: u64, misses: u64) -> String {
    let (hits, misses) = (cache.hits() - hits, cache.misses() - misses);
    format!(
        "{:.1}% hits",
        100.0 * hits as f64 / (hits + misses).max(1) as f64
    )
}

criterion_group!(benches, lookups);
criterion_main!(benches);
