//! What detection costs per request, against a maintained parser (Woothee) on the same
//! strings: the whole corpus of `tests/corpus.tsv` per iteration (divide by its size for one
//! User-Agent), and single common requests with and without client hints. Before measuring,
//! prints how often each answers as the corpus expects, Woothee's answers mapped to this
//! crate's names where it has an equivalent.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use marquee_device::{ClientHints, DeviceType, browser, detect, os};
use woothee::parser::{Parser, WootheeResult};

// Shared with the tests, which use more of it.
#[allow(dead_code)]
#[path = "../tests/support/corpus.rs"]
mod corpus;

const CHROME_ANDROID: &str = "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36";
const SAFARI_IPHONE: &str = "Mozilla/5.0 (iPhone; CPU iPhone OS 18_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.6 Mobile/15E148 Safari/604.1";

fn corpus(c: &mut Criterion) {
    let cases = corpus::cases();
    report_accuracy(&cases);
    let user_agents: Vec<&str> = cases.iter().map(|case| case.user_agent).collect();
    let parser = Parser::new();

    let mut group = c.benchmark_group("corpus");
    group.throughput(Throughput::Elements(user_agents.len() as u64));
    group.bench_function("marquee-device", |b| {
        b.iter(|| {
            for ua in &user_agents {
                black_box(detect(black_box(ua.as_bytes()), ClientHints::default()));
            }
        })
    });
    group.bench_function("woothee", |b| {
        b.iter(|| {
            for ua in &user_agents {
                black_box(parser.parse(black_box(ua)));
            }
        })
    });
    group.finish();
}

fn single(c: &mut Criterion) {
    let hints = ClientHints {
        mobile: Some("?1"),
        platform: Some("\"Android\""),
        brands: Some(
            "\"Chromium\";v=\"124\", \"Google Chrome\";v=\"124\", \"Not-A.Brand\";v=\"99\"",
        ),
    };
    let parser = Parser::new();
    c.bench_function("Chrome on Android, with client hints", |b| {
        b.iter(|| detect(black_box(CHROME_ANDROID.as_bytes()), black_box(hints)))
    });
    c.bench_function("Chrome on Android, User-Agent only", |b| {
        b.iter(|| detect(black_box(CHROME_ANDROID.as_bytes()), ClientHints::default()))
    });
    c.bench_function("Safari on iPhone", |b| {
        b.iter(|| detect(black_box(SAFARI_IPHONE.as_bytes()), ClientHints::default()))
    });
    c.bench_function("woothee: Chrome on Android", |b| {
        b.iter(|| parser.parse(black_box(CHROME_ANDROID)))
    });
}

/// Share of the corpus each parser answers as expected, field by field.
fn report_accuracy(cases: &[corpus::Case]) {
    let parser = Parser::new();
    let mut ours = [0usize; 3];
    let mut theirs = [0usize; 3];
    for case in cases {
        let found = detect(case.user_agent.as_bytes(), ClientHints::default());
        let expected = (case.device_type, case.os, case.browser);
        tally(
            &mut ours,
            expected,
            (found.device_type, found.os, found.browser),
        );
        let other = parser
            .parse(case.user_agent)
            .map(|r| {
                (
                    woothee_device(&r),
                    woothee_os(r.os),
                    woothee_browser(r.name),
                )
            })
            .unwrap_or_default();
        tally(&mut theirs, expected, other);
    }
    let share = |n: usize| 100.0 * n as f64 / cases.len() as f64;
    for (name, hits) in [("marquee-device", ours), ("woothee", theirs)] {
        eprintln!(
            "{name}: of {} cases, device type {:.1}%, OS {:.1}%, browser {:.1}%",
            cases.len(),
            share(hits[0]),
            share(hits[1]),
            share(hits[2])
        );
    }
}

type Answer = (
    Option<DeviceType>,
    Option<&'static str>,
    Option<&'static str>,
);

fn tally(hits: &mut [usize; 3], expected: Answer, found: Answer) {
    hits[0] += usize::from(expected.0 == found.0);
    hits[1] += usize::from(expected.1 == found.1);
    hits[2] += usize::from(expected.2 == found.2);
}

/// Woothee's categories have no tablet: iPads and Android tablets are "smartphone".
fn woothee_device(result: &WootheeResult) -> Option<DeviceType> {
    Some(match result.category {
        "pc" => DeviceType::Desktop,
        "smartphone" | "mobilephone" => DeviceType::Phone,
        "appliance" if woothee_os(result.os).is_some() => DeviceType::Console,
        "appliance" => DeviceType::Ctv,
        _ => return None,
    })
}

fn woothee_os(name: &str) -> Option<&'static str> {
    Some(match name {
        "Windows Phone OS" => os::WINDOWS,
        "Mac OSX" => os::MACOS,
        "iPhone" | "iPad" | "iPod" | "iOS" => os::IOS,
        "Android" => os::ANDROID,
        "Linux" => os::LINUX,
        "ChromeOS" => os::CHROME_OS,
        "Xbox 360" | "Xbox One" => os::XBOX,
        _ if name.starts_with("Windows") => os::WINDOWS,
        _ if name.starts_with("PlayStation") => os::PLAYSTATION,
        _ if name.starts_with("Nintendo") => os::NINTENDO,
        _ => return None,
    })
}

fn woothee_browser(name: &str) -> Option<&'static str> {
    Some(match name {
        "Chrome" => browser::CHROME,
        "Safari" => browser::SAFARI,
        "Firefox" => browser::FIREFOX,
        "Edge" => browser::EDGE,
        "Opera" => browser::OPERA,
        "Internet Explorer" => browser::IE,
        "UCBrowser" => browser::UC_BROWSER,
        "Yandex Browser" => browser::YANDEX,
        "SamsungBrowser" => browser::SAMSUNG_INTERNET,
        "Vivaldi" => browser::CHROMIUM,
        "Webview" => browser::WEBVIEW,
        _ => return None,
    })
}

criterion_group!(benches, corpus, single);
criterion_main!(benches);
