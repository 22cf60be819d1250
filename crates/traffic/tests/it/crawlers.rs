#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::Rng;
use crate::support;

use marquee_traffic::CrawlerList;
use regex::bytes::RegexBuilder;
use support::user_agents::{BROWSERS, CRAWLERS, MORE_BROWSERS, MORE_CRAWLERS};

const SHIPPED: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lists/crawlers.txt"));

fn shipped_patterns() -> Vec<&'static str> {
    SHIPPED
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

#[test]
fn the_builtin_list_compiles_whole() {
    let list = CrawlerList::builtin();
    assert_eq!(list.len(), shipped_patterns().len());
    assert_eq!(list.len(), 535);
    assert!(!list.is_empty());
}

#[test]
fn browsers_are_not_crawlers() {
    let list = CrawlerList::builtin();
    for ua in BROWSERS.iter().chain(MORE_BROWSERS) {
        assert!(!list.is_crawler(ua.as_bytes()), "taken for a crawler: {ua}");
    }
}

#[test]
fn well_known_bots_are_crawlers() {
    let list = CrawlerList::builtin();
    for ua in CRAWLERS.iter().chain(MORE_CRAWLERS) {
        assert!(
            list.is_crawler(ua.as_bytes()),
            "not taken for a crawler: {ua}"
        );
    }
}

#[test]
fn an_empty_user_agent_is_not_a_crawler() {
    assert!(!CrawlerList::builtin().is_crawler(b""));
}

#[test]
fn matching_is_case_sensitive_and_anywhere() {
    let list = CrawlerList::parse("ExampleBot\n", "t").unwrap();
    assert!(list.is_crawler(b"ExampleBot"));
    assert!(list.is_crawler(b"Mozilla/5.0 (compatible; ExampleBot/1.0)"));
    assert!(!list.is_crawler(b"Mozilla/5.0 (compatible; examplebot/1.0)"));
    assert!(!list.is_crawler(b"ExampleBo"));
}

#[test]
fn anchors_and_alternatives_keep_their_meaning() {
    let list = CrawlerList::parse("^curl\n(^| )sentry\\/\nAdsBot-Google([^-]|$)\n", "t").unwrap();
    assert!(list.is_crawler(b"curl/8.5.0"));
    assert!(!list.is_crawler(b"libcurl-agent/1.0 curl/8"));
    assert!(list.is_crawler(b"sentry/8.22.0"));
    assert!(list.is_crawler(b"x sentry/8.22.0"));
    assert!(!list.is_crawler(b"xsentry/8.22.0"));
    assert!(list.is_crawler(b"AdsBot-Google"));
    assert!(list.is_crawler(b"AdsBot-Google (+http://www.google.com/adsbot.html)"));
    assert!(!list.is_crawler(b"AdsBot-Google-Mobile"));
}

#[test]
fn patterns_are_trimmed_and_comments_and_blank_lines_skipped() {
    let text = "# a comment\r\n\r\n   webmon\\x20  \r\n\t# indented comment\n  Yeti\n";
    let list = CrawlerList::parse(text, "t").unwrap();
    assert_eq!(list.len(), 2);
    assert!(list.is_crawler(b"x webmon y"));
    assert!(!list.is_crawler(b"webmonitor"));
    assert!(list.is_crawler(b"Yeti/1.1"));
    assert!(!list.is_crawler(b"# a comment"));
}

#[test]
fn short_and_literal_free_patterns_are_still_matched() {
    // "Y!J" is too short for the anchor scan; `\d{3}x` has no literal of its own.
    let list = CrawlerList::parse("Y!J\n[0-9]{3}x\nab\n", "t").unwrap();
    assert!(list.is_crawler(b"Y!J-ASR/0.1"));
    assert!(list.is_crawler(b"build 123x"));
    assert!(list.is_crawler(b"ab"));
    assert!(!list.is_crawler(b"Y!j 12x a b"));
}

/// The prefilter decides only where to look: answers must equal those of all patterns as one
/// regular expression.
#[test]
fn answers_equal_the_patterns_as_one_regular_expression() {
    let patterns = shipped_patterns();
    let reference = RegexBuilder::new(
        &patterns
            .iter()
            .map(|p| format!("(?:{p})"))
            .collect::<Vec<_>>()
            .join("|"),
    )
    .unicode(false)
    .size_limit(1 << 26)
    .build()
    .unwrap();
    let list = CrawlerList::builtin();
    // Each pattern written out as plainly as it goes (escapes undone, anchors dropped), to be
    // planted in browsers' user agents at every alignment.
    let plain: Vec<String> = patterns
        .iter()
        .map(|p| {
            p.replace("\\x20", " ")
                .replace(['\\', '^'], "")
                .replace("([^-]|$)", "")
        })
        .collect();
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut checked = 0;
    let mut crawlers = 0;
    let mut check = |ua: &[u8]| {
        let expected = reference.is_match(ua);
        assert_eq!(
            list.is_crawler(ua),
            expected,
            "{:?}",
            String::from_utf8_lossy(ua)
        );
        checked += 1;
        crawlers += usize::from(expected);
    };
    for ua in BROWSERS
        .iter()
        .chain(MORE_BROWSERS)
        .chain(CRAWLERS)
        .chain(MORE_CRAWLERS)
    {
        check(ua.as_bytes());
    }
    for (i, literal) in plain.iter().enumerate() {
        let browser = BROWSERS[i % BROWSERS.len()].as_bytes();
        for _ in 0..6 {
            let at = rng.below(browser.len() + 1);
            let mut ua = browser[..at].to_vec();
            ua.extend_from_slice(literal.as_bytes());
            ua.extend_from_slice(&browser[at..]);
            check(&ua);
            // Cut short by one byte at either end: mostly not a match any more.
            if literal.len() > 1 {
                check(&ua[..at + literal.len() - 1]);
                check(&ua[at + 1..]);
            }
        }
        // Alone, and at each alignment of the eight-byte step.
        for pad in 0..9 {
            let mut ua = "x".repeat(pad).into_bytes();
            ua.extend_from_slice(literal.as_bytes());
            check(&ua);
        }
    }
    // Random splices of browsers and bots.
    let all: Vec<&str> = BROWSERS
        .iter()
        .chain(MORE_BROWSERS)
        .chain(CRAWLERS)
        .chain(MORE_CRAWLERS)
        .copied()
        .collect();
    for _ in 0..5_000 {
        let a = all[rng.below(all.len())].as_bytes();
        let b = all[rng.below(all.len())].as_bytes();
        let (i, j) = (rng.below(a.len()), rng.below(b.len()));
        let mut ua = a[..i].to_vec();
        ua.extend_from_slice(&b[j..]);
        check(&ua);
    }
    assert!(checked > 15_000, "{checked}");
    assert!(crawlers > checked / 4, "{crawlers} of {checked}");
}

#[test]
fn a_bad_regular_expression_names_file_and_line() {
    let e = CrawlerList::parse("# list\nGooglebot\n\nBad(Bot\n", "lists/crawlers.txt").unwrap_err();
    assert_eq!(e.file, "lists/crawlers.txt");
    assert_eq!(e.line, 4);
    assert!(e.message.contains("`Bad(Bot`"), "{}", e.message);
    assert!(e.message.contains("unclosed group"), "{}", e.message);
    assert!(
        e.to_string()
            .starts_with("lists/crawlers.txt:4: bad regular expression `Bad(Bot`"),
        "{e}"
    );
    let e = CrawlerList::parse("Googlebot\n[z-a]bot\n", "f").unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("f", 2));
}

#[test]
fn a_pattern_matching_the_empty_string_is_refused() {
    let e = CrawlerList::parse("Googlebot\nbot?|x*\n", "f").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.message.contains("empty string"), "{e}");
}

// Deliberately the twin of `networks.rs`'s empty-list test: each list names its own error.
#[test]
fn a_list_without_patterns_is_refused() {
    let e = CrawlerList::parse("# only comments\n\n", "empty.txt").unwrap_err();
    assert_eq!((e.file.as_str(), e.line), ("empty.txt", 0));
    assert_eq!(e.to_string(), "empty.txt: no patterns");
}

#[test]
fn load_reads_a_file_and_names_an_unreadable_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crawlers.txt");
    std::fs::write(&path, "# mine\nExampleBot\nOtherBot\n").unwrap();
    let list = CrawlerList::load(&path).unwrap();
    assert_eq!(list.len(), 2);
    assert!(list.is_crawler(b"OtherBot/2"));

    std::fs::write(&path, "ExampleBot\n(\n").unwrap();
    let e = CrawlerList::load(&path).unwrap_err();
    assert_eq!(
        (e.file.as_str(), e.line),
        (path.display().to_string().as_str(), 2)
    );

    let missing = dir.path().join("missing.txt");
    let e = CrawlerList::load(&missing).unwrap_err();
    assert_eq!(e.file, missing.display().to_string());
    assert_eq!(e.line, 0);
    assert!(e.message.starts_with("cannot read"), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("{}: cannot read", missing.display()))
    );
}
