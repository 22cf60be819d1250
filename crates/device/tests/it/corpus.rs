//! Every case of `corpus.tsv` (real User-Agents from four parsers' test data, see its header)
//! is detected as expected, but for the misses listed here, each with its reason. A miss that
//! gets fixed fails the test too, so that the list stays true.

use marquee_device::{ClientHints, DeviceType, detect};

use crate::corpus_cases::cases;

/// (User-Agent, field, what is detected instead of the expectation, why).
const KNOWN_MISSES: &[(&str, &str, &str, &str)] = &[(
    "Mozilla/5.0 (Linux; U; Android 4.4.2; de-de; Nexus 7 Build/KOT49H) AppleWebKit/537.16 (KHTML, like Gecko) Version/4.0 Mobile Safari/537.16",
    "device_type",
    "Some(Phone)",
    "this tablet's built-in browser says Mobile, as phones' do; tablets are not known by model",
)];

#[test]
fn the_corpus_is_detected_as_expected() {
    let cases = cases();
    let mut misses = Vec::new();
    for case in &cases {
        let found = detect(case.user_agent.as_bytes(), ClientHints::default());
        let mut check = |field: &'static str, expected: String, detected: String| {
            if expected != detected {
                misses.push((case.line, case.user_agent, field, expected, detected));
            }
        };
        check(
            "device_type",
            format!("{:?}", case.device_type),
            format!("{:?}", found.device_type),
        );
        check("os", format!("{:?}", case.os), format!("{:?}", found.os));
        check(
            "browser",
            format!("{:?}", case.browser),
            format!("{:?}", found.browser),
        );
    }
    let unexpected: Vec<_> = misses
        .iter()
        .filter(|(_, ua, field, _, detected)| {
            !KNOWN_MISSES
                .iter()
                .any(|(known, f, d, _)| known == ua && f == field && d == detected)
        })
        .collect();
    let fixed: Vec<_> = KNOWN_MISSES
        .iter()
        .filter(|(known, f, _, _)| {
            !misses
                .iter()
                .any(|(_, ua, field, _, _)| known == ua && f == field)
        })
        .collect();
    for (line, ua, field, expected, detected) in &unexpected {
        eprintln!("corpus.tsv:{line}: {field}: expected {expected}, detected {detected}: {ua}");
    }
    for (ua, field, _, _) in &fixed {
        eprintln!("no longer a miss ({field}), remove it from KNOWN_MISSES: {ua}");
    }
    assert!(
        unexpected.is_empty() && fixed.is_empty(),
        "{} unexpected misses, {} fixed ones",
        unexpected.len(),
        fixed.len()
    );
}

#[test]
fn the_corpus_covers_every_kind_of_device() {
    let cases = cases();
    assert!(cases.len() >= 150, "{} cases", cases.len());
    for kind in [
        DeviceType::Desktop,
        DeviceType::Phone,
        DeviceType::Tablet,
        DeviceType::Ctv,
        DeviceType::Console,
    ] {
        let count = cases.iter().filter(|c| c.device_type == Some(kind)).count();
        assert!(count >= 10, "{kind:?}: {count} cases");
    }
    let mut seen = std::collections::HashSet::new();
    for case in &cases {
        assert!(
            seen.insert(&case.user_agent),
            "line {}: a duplicate",
            case.line
        );
    }
}
