//! The literals a pattern's matches must contain, found in its parsed form (HIR): the crawler
//! matcher looks for these first and runs a pattern's regular expression only where one of them
//! occurs.

use regex_syntax::hir::{Class, Hir, HirKind};

/// Most strings a set may hold. Larger sets (case-insensitive words, wide classes) are given up
/// or cut, which only costs prefilter precision, never correctness.
const MAX_SET: usize = 16;

/// Widest character class still expanded into literals (`[wW]`, `[eE]`).
const MAX_CLASS: usize = 4;

/// What the prefilter knows of one pattern.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Literals {
    /// The pattern matches exactly the strings of `set` (anywhere, no anchors): finding one is
    /// a match, with no regular expression to run.
    pub(crate) exact: bool,
    /// Every match contains at least one of these, none empty. Empty when no such set was found:
    /// the pattern is then run on every user agent.
    pub(crate) set: Vec<Vec<u8>>,
}

pub(crate) fn analyse(hir: &Hir) -> Literals {
    if let Some(set) = exact(hir)
        && set.iter().all(|s| !s.is_empty())
    {
        return Literals { exact: true, set };
    }
    let set = required(hir)
        .filter(|set| set.iter().all(|s| !s.is_empty()))
        .unwrap_or_default();
    Literals { exact: false, set }
}

/// The finite set of strings `hir` matches, when small.
fn exact(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    match hir.kind() {
        HirKind::Empty => Some(vec![Vec::new()]),
        HirKind::Literal(literal) => Some(vec![literal.0.to_vec()]),
        HirKind::Class(class) => class_strings(class),
        HirKind::Capture(capture) => exact(&capture.sub),
        HirKind::Concat(children) => {
            let mut strings = vec![Vec::new()];
            for child in children {
                strings = product(&strings, &exact(child)?)?;
            }
            Some(strings)
        }
        HirKind::Alternation(branches) => {
            let mut strings = Vec::new();
            for branch in branches {
                strings.extend(exact(branch)?);
                if strings.len() > MAX_SET {
                    return None;
                }
            }
            strings.sort();
            strings.dedup();
            Some(strings)
        }
        // Assertions depend on context, and repetitions rarely expand to few strings.
        HirKind::Look(_) | HirKind::Repetition(_) => None,
    }
}

/// A small set of which every match of `hir` contains at least one.
fn required(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    if let Some(strings) = exact(hir) {
        return Some(strings);
    }
    match hir.kind() {
        HirKind::Capture(capture) => required(&capture.sub),
        HirKind::Repetition(repetition) if repetition.min >= 1 => required(&repetition.sub),
        HirKind::Alternation(branches) => {
            let mut strings = Vec::new();
            for branch in branches {
                strings.extend(required(branch)?);
                if strings.len() > MAX_SET {
                    return None;
                }
            }
            Some(strings)
        }
        HirKind::Concat(children) => {
            // Consecutive exact children join into runs (their product); every match contains
            // one string of each run and of each child's own required set. Keep the best.
            let mut best = None;
            let mut run: Option<Vec<Vec<u8>>> = None;
            for child in children {
                match exact(child) {
                    Some(strings) => {
                        run = Some(match run.take() {
                            None => strings,
                            Some(before) => match product(&before, &strings) {
                                Some(joined) => joined,
                                None => {
                                    consider(&mut best, before);
                                    strings
                                }
                            },
                        });
                    }
                    None => {
                        if let Some(before) = run.take() {
                            consider(&mut best, before);
                        }
                        if let Some(strings) = required(child) {
                            consider(&mut best, strings);
                        }
                    }
                }
            }
            if let Some(before) = run {
                consider(&mut best, before);
            }
            best
        }
        _ => None,
    }
}

/// Keeps the set whose shortest string is longest (fewer strings on a tie): long literals are
/// rare in browsers' user agents, so they give the fewest false leads.
fn consider(best: &mut Option<Vec<Vec<u8>>>, candidate: Vec<Vec<u8>>) {
    let score = |set: &Vec<Vec<u8>>| {
        let shortest = set.iter().map(Vec::len).min().unwrap_or(0);
        (shortest, std::cmp::Reverse(set.len()))
    };
    if score(&candidate).0 == 0 {
        return;
    }
    if best.as_ref().is_none_or(|b| score(&candidate) > score(b)) {
        *best = Some(candidate);
    }
}

fn product(left: &[Vec<u8>], right: &[Vec<u8>]) -> Option<Vec<Vec<u8>>> {
    if left.len().saturating_mul(right.len()) > MAX_SET {
        return None;
    }
    let mut out = Vec::with_capacity(left.len() * right.len());
    for l in left {
        for r in right {
            let mut joined = l.clone();
            joined.extend_from_slice(r);
            out.push(joined);
        }
    }
    Some(out)
}

fn class_strings(class: &Class) -> Option<Vec<Vec<u8>>> {
    let mut strings = Vec::new();
    match class {
        Class::Bytes(bytes) => {
            for range in bytes.ranges() {
                for byte in range.start()..=range.end() {
                    strings.push(vec![byte]);
                    if strings.len() > MAX_CLASS {
                        return None;
                    }
                }
            }
        }
        Class::Unicode(chars) => {
            for range in chars.ranges() {
                for c in range.start()..=range.end() {
                    strings.push(c.to_string().into_bytes());
                    if strings.len() > MAX_CLASS {
                        return None;
                    }
                }
            }
        }
    }
    Some(strings)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn lits(pattern: &str) -> Literals {
        let hir = regex_syntax::ParserBuilder::new()
            .unicode(false)
            .utf8(false)
            .build()
            .parse(pattern)
            .unwrap();
        analyse(&hir)
    }

    fn set(strings: &[&str]) -> Vec<Vec<u8>> {
        strings.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    #[test]
    fn plain_and_escaped_literals_are_exact() {
        assert_eq!(
            lits(r"Googlebot\/"),
            Literals {
                exact: true,
                set: set(&["Googlebot/"])
            }
        );
        assert_eq!(lits(r"webmon\x20").set, set(&["webmon "]));
        assert!(lits(r"webmon\x20").exact);
    }

    #[test]
    fn small_classes_and_alternations_expand() {
        let l = lits("S[eE][mM]rushBot");
        assert!(l.exact);
        assert_eq!(l.set.len(), 4);
        assert!(l.set.contains(&b"SEMrushBot".to_vec()));
        let l = lits("Ahrefs(Bot|SiteAudit)");
        assert!(l.exact);
        assert_eq!(l.set, set(&["AhrefsBot", "AhrefsSiteAudit"]));
    }

    #[test]
    fn anchors_and_wildcards_need_the_regex() {
        assert_eq!(
            lits("^curl"),
            Literals {
                exact: false,
                set: set(&["curl"])
            }
        );
        assert_eq!(lits(r"(^| )sentry\/").set, set(&["sentry/"]));
        assert_eq!(lits("AdsBot-Google([^-]|$)").set, set(&["AdsBot-Google"]));
        assert_eq!(lits("Mail.RU_Bot").set, set(&["RU_Bot"]));
        assert_eq!(
            lits(r"BlogTraffic\/\d\.\d+ Feed-Fetcher").set,
            set(&[" Feed-Fetcher"])
        );
        assert!(!lits("grub.org").exact);
    }

    #[test]
    fn patterns_without_a_literal_have_an_empty_set() {
        assert_eq!(
            lits(r"\d+x?"),
            Literals {
                exact: false,
                set: Vec::new()
            }
        );
        // A wide case-insensitive word is cut into runs, not given up.
        let l = lits("(?i)crawler");
        assert!(!l.exact);
        assert!(!l.set.is_empty());
    }
}
