//! Crawler user agents: a list of regular expressions compiled into one prefiltered matcher.
//!
//! Matching every pattern against every user agent is what costs: one regular expression made
//! of the whole alternation, or an Aho–Corasick automaton over all the literals, is a state
//! machine too large for the L1 cache and costs about 2 ns per byte. Instead, each pattern is
//! reduced to literals every match of it must contain ([`crate::literals`]), and the user agent
//! is scanned for 4-byte pieces ("anchors") of those literals at every `STRIDE`-th position,
//! each a hash and a bit test in a 16 KiB bitmap. A set bit is a lead: the literal is compared
//! in place, and a pattern that is not a plain literal is then run as a regular expression on
//! that user agent. Literals too short to hold anchors at every alignment are searched for with
//! a SIMD searcher (Teddy, from `aho-corasick`'s packed module) instead, and patterns with no
//! usable literal go to one regular expression run on every user agent (the shipped list has
//! none).
//!
//! The answer is exactly that of the patterns' alternation as a `regex::bytes::Regex` with
//! Unicode off (ASCII classes, byte-wise `.`); the prefilter only decides where to look.

use std::collections::HashSet;
use std::fmt;
use std::path::Path;

use aho_corasick::{AhoCorasick, Input, MatchKind, Span, packed};
use regex::bytes::{Regex, RegexBuilder};

use crate::literals::{Literals, analyse};
use crate::{ListError, read_list};

/// The shipped list (see its header for source and licence).
const BUILTIN: &str = include_str!("../lists/crawlers.txt");
const BUILTIN_NAME: &str = "crawlers.txt (builtin)";

/// Bytes hashed per lookup.
const GRAM: usize = 4;
/// Every `STRIDE`-th position of the user agent is looked up. A literal of at least
/// `GRAM + STRIDE - 1` bytes then has a looked-up window inside it wherever it occurs, so it
/// gets `STRIDE` anchors, one per alignment.
const STRIDE: usize = 2;
const MIN_ANCHORED: usize = GRAM + STRIDE - 1;
/// 2^17 bits: with the shipped list's ~1,100 anchors about 1% are set, so a browser's user
/// agent (~60 lookups) meets a false lead about every other time.
const BITMAP_BITS: u32 = 17;
const BITMAP_WORDS: usize = 1 << (BITMAP_BITS - 6);

/// Fragments of browsers' user agents: anchors are taken elsewhere in a literal when they can,
/// so that common text (`Chrome/` in `Chrome-Lighthouse`) is not a lead on every request.
const COMMON_TEXT: &[&str] = &[
    "Mozilla/5.0 (",
    "Windows NT 10.0; Win64; x64",
    "Macintosh; Intel Mac OS X 10_15_7",
    "X11; Linux x86_64",
    "Linux; Android 14; K",
    "iPhone; CPU iPhone OS 17_4 like Mac OS X",
    "iPad; CPU OS 17_4 like Mac OS X",
    ") AppleWebKit/537.36 (KHTML, like Gecko) ",
    ") AppleWebKit/605.1.15 (KHTML, like Gecko) ",
    "Chrome/124.0.0.0 ",
    "Mobile Safari/537.36",
    "Safari/537.36",
    "Safari/604.1",
    "Version/17.4 Mobile/15E148 ",
    "Gecko/20100101 Firefox/125.0",
    "Edg/124.0.0.0",
    "SamsungBrowser/24.0 ",
    "OPR/109.0.0.0",
    "CriOS/124.0.0.0 ",
    "FxiOS/125.0 ",
    "Build/",
    "; wv)",
];

/// A compiled list of crawler user-agent patterns.
///
/// Patterns are regular expressions (Rust `regex` syntax, Unicode off: byte-wise, ASCII
/// classes) matched case-sensitively anywhere in the `User-Agent` header's bytes.
pub struct CrawlerList {
    patterns: usize,
    bitmap: Box<[u64; BITMAP_WORDS]>,
    /// Sorted by window: (4 bytes as a little-endian `u32`, member, offset of the window in
    /// the member's literal).
    anchors: Box<[(u32, u32, u32)]>,
    /// Literals, each with the pattern it stands for.
    members: Box<[Member]>,
    /// Per pattern: the regular expression to confirm a lead with, or `None` when finding the
    /// literal is the match.
    confirm: Box<[Option<Regex>]>,
    /// Literals shorter than `MIN_ANCHORED` (members listed in `short_members`).
    short: Option<Short>,
    short_members: Box<[u32]>,
    /// Patterns with no usable literal, as one alternation.
    always: Option<Regex>,
}

struct Member {
    literal: Box<[u8]>,
    pattern: u32,
}

impl fmt::Debug for CrawlerList {
    // Sizes only: the tables are large and unreadable.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CrawlerList")
            .field("patterns", &self.patterns)
            .field("anchors", &self.anchors.len())
            .field("short_literals", &self.short_members.len())
            .field("unprefiltered", &self.always.is_some())
            .finish_non_exhaustive()
    }
}

impl CrawlerList {
    /// The shipped list, `lists/crawlers.txt`.
    ///
    /// # Panics
    ///
    /// Never: the shipped list is compiled in the crate's tests.
    pub fn builtin() -> CrawlerList {
        match CrawlerList::parse(BUILTIN, BUILTIN_NAME) {
            Ok(list) => list,
            Err(e) => panic!("the shipped crawler list does not compile: {e}"),
        }
    }

    /// Compiles a list: one pattern per line, surrounding whitespace trimmed (write a space at
    /// either end as `\x20`), lines whose first non-blank character is `#` and blank lines
    /// ignored. An error names `file` and the line: a pattern that does not parse, one that
    /// matches the empty string (it would match every user agent), or a list with no pattern
    /// (more likely a truncated file than an intent; turn the check off in configuration
    /// instead).
    pub fn parse(text: &str, file: &str) -> Result<CrawlerList, ListError> {
        let mut syntax = regex_syntax::ParserBuilder::new();
        syntax.unicode(false).utf8(false);
        let mut builder = Builder::default();
        for (index, line) in text.lines().enumerate() {
            let pattern = line.trim();
            if pattern.is_empty() || pattern.starts_with('#') {
                continue;
            }
            let line = index + 1;
            // One parser per pattern: regex-syntax 0.8 panics when a parser is used twice.
            let hir = syntax
                .build()
                .parse(pattern)
                .map_err(|e| ListError::new(file, line, syntax_error(pattern, &e)))?;
            if hir.properties().minimum_len() == Some(0) {
                return Err(ListError::new(
                    file,
                    line,
                    format!("`{pattern}` matches the empty string, so every user agent"),
                ));
            }
            builder
                .add(pattern, analyse(&hir))
                .map_err(|message| ListError::new(file, line, message))?;
        }
        if builder.patterns == 0 {
            return Err(ListError::new(file, 0, "no patterns"));
        }
        builder
            .finish()
            .map_err(|message| ListError::new(file, 0, message))
    }

    /// Reads and compiles a list file; an unreadable file is an error naming it (line 0).
    pub fn load(path: &Path) -> Result<CrawlerList, ListError> {
        let (text, file) = read_list(path)?;
        CrawlerList::parse(&text, &file)
    }

    /// Whether any pattern matches `user_agent`. An empty user agent is not a crawler by this
    /// list (whether to treat a missing one as invalid is the caller's rule).
    pub fn is_crawler(&self, user_agent: &[u8]) -> bool {
        if user_agent.is_empty() {
            return false;
        }
        self.scan_anchors(user_agent)
            || self.scan_short(user_agent)
            || self
                .always
                .as_ref()
                .is_some_and(|re| re.is_match(user_agent))
    }

    /// Patterns in the list.
    pub fn len(&self) -> usize {
        self.patterns
    }

    /// Never true for a parsed list (an empty file is an error); here for completeness.
    pub fn is_empty(&self) -> bool {
        self.patterns == 0
    }

    fn scan_anchors(&self, ua: &[u8]) -> bool {
        let mut at = 0;
        // Eight bytes at a time hold the windows at offsets 0, STRIDE, … up to 8 - GRAM.
        while at + 8 <= ua.len() {
            let Ok(bytes) = <[u8; 8]>::try_from(&ua[at..at + 8]) else {
                break;
            };
            let eight = u64::from_le_bytes(bytes);
            let mut k = 0;
            while k + GRAM <= 8 {
                let window = (eight >> (8 * k)) as u32;
                if self.lead(window) && self.follow(window, at + k, ua) {
                    return true;
                }
                k += STRIDE;
            }
            at += k;
        }
        while at + GRAM <= ua.len() {
            let window = u32::from_le_bytes([ua[at], ua[at + 1], ua[at + 2], ua[at + 3]]);
            if self.lead(window) && self.follow(window, at, ua) {
                return true;
            }
            at += STRIDE;
        }
        false
    }

    #[inline(always)]
    fn lead(&self, window: u32) -> bool {
        let bit = bitmap_index(window);
        (self.bitmap[bit >> 6] >> (bit & 63)) & 1 != 0
    }

    /// Checks every anchor with this window, at `at` in the user agent.
    #[cold]
    fn follow(&self, window: u32, at: usize, ua: &[u8]) -> bool {
        let first = self.anchors.partition_point(|a| a.0 < window);
        self.anchors[first..]
            .iter()
            .take_while(|a| a.0 == window)
            .any(|&(_, member, offset)| {
                let Some(start) = at.checked_sub(offset as usize) else {
                    return false;
                };
                let member = &self.members[member as usize];
                ua.get(start..start + member.literal.len()) == Some(&member.literal[..])
                    && self.confirmed(member.pattern, ua)
            })
    }

    /// Every position where a short literal starts is checked against every short literal:
    /// the searcher reports one literal per position, and the one it reports may belong to a
    /// pattern whose regular expression then fails.
    fn scan_short(&self, ua: &[u8]) -> bool {
        let Some(short) = &self.short else {
            return false;
        };
        let mut from = 0;
        while let Some(at) = short.find_from(ua, from) {
            let rest = &ua[at..];
            let found = self.short_members.iter().any(|&m| {
                let member = &self.members[m as usize];
                rest.starts_with(&member.literal) && self.confirmed(member.pattern, ua)
            });
            if found {
                return true;
            }
            from = at + 1;
        }
        false
    }

    fn confirmed(&self, pattern: u32, ua: &[u8]) -> bool {
        match &self.confirm[pattern as usize] {
            None => true,
            Some(re) => re.is_match(ua),
        }
    }
}

/// Finds the short literals. Teddy is some ten times faster here than an automaton, whose
/// own prefilter is off for the overlapping search exact answers would otherwise need; the
/// automaton stays for machines without SIMD and for lists with more short literals than
/// Teddy takes.
enum Short {
    Packed(packed::Searcher),
    Automaton(AhoCorasick),
}

impl Short {
    fn new(literals: &[&[u8]]) -> Result<Short, String> {
        if let Some(searcher) = packed::Searcher::new(literals) {
            return Ok(Short::Packed(searcher));
        }
        AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(literals)
            .map(Short::Automaton)
            .map_err(|e| format!("cannot build the short-literal matcher: {e}"))
    }

    /// Where the first short literal at or after `from` starts.
    fn find_from(&self, ua: &[u8], from: usize) -> Option<usize> {
        if from >= ua.len() {
            return None;
        }
        match self {
            Short::Packed(searcher) => searcher
                .find_in(ua, Span::from(from..ua.len()))
                .map(|m| m.start()),
            Short::Automaton(automaton) => automaton
                .find(Input::new(ua).span(from..ua.len()))
                .map(|m| m.start()),
        }
    }
}

#[inline(always)]
fn bitmap_index(window: u32) -> usize {
    // Fibonacci hashing: the top bits of the product mix all four bytes.
    (window.wrapping_mul(0x9E37_79B1) >> (32 - BITMAP_BITS)) as usize
}

#[derive(Default)]
struct Builder {
    patterns: usize,
    members: Vec<Member>,
    confirm: Vec<Option<Regex>>,
    anchors: Vec<(u32, u32, u32)>,
    short_members: Vec<u32>,
    unprefiltered: Vec<String>,
    common: Option<HashSet<u32>>,
}

impl Builder {
    fn add(&mut self, pattern: &str, literals: Literals) -> Result<(), String> {
        let id = self.patterns as u32;
        self.patterns += 1;
        if literals.set.is_empty() {
            self.unprefiltered.push(pattern.to_owned());
            self.confirm.push(None);
            return Ok(());
        }
        self.confirm.push(if literals.exact {
            None
        } else {
            Some(compile(pattern)?)
        });
        for literal in literals.set {
            let member = self.members.len() as u32;
            if literal.len() >= MIN_ANCHORED {
                let offset = self.anchor_offset(&literal);
                for o in offset..offset + STRIDE {
                    let window = u32::from_le_bytes([
                        literal[o],
                        literal[o + 1],
                        literal[o + 2],
                        literal[o + 3],
                    ]);
                    self.anchors.push((window, member, o as u32));
                }
            } else {
                self.short_members.push(member);
            }
            self.members.push(Member {
                literal: literal.into_boxed_slice(),
                pattern: id,
            });
        }
        Ok(())
    }

    /// Where the literal's `STRIDE` consecutive windows are least common in browsers' user
    /// agents (the first such place).
    fn anchor_offset(&mut self, literal: &[u8]) -> usize {
        let common = self.common.get_or_insert_with(|| {
            COMMON_TEXT
                .iter()
                .flat_map(|text| {
                    text.as_bytes()
                        .windows(GRAM)
                        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                })
                .collect()
        });
        (0..=literal.len() - MIN_ANCHORED)
            .min_by_key(|&offset| {
                literal[offset..offset + MIN_ANCHORED]
                    .windows(GRAM)
                    .filter(|w| common.contains(&u32::from_le_bytes([w[0], w[1], w[2], w[3]])))
                    .count()
            })
            .unwrap_or(0)
    }

    fn finish(mut self) -> Result<CrawlerList, String> {
        let mut bitmap = Box::new([0u64; BITMAP_WORDS]);
        for &(window, _, _) in &self.anchors {
            let bit = bitmap_index(window);
            bitmap[bit >> 6] |= 1 << (bit & 63);
        }
        self.anchors.sort_unstable();
        let short = if self.short_members.is_empty() {
            None
        } else {
            let literals: Vec<&[u8]> = self
                .short_members
                .iter()
                .map(|&m| &self.members[m as usize].literal[..])
                .collect();
            Some(Short::new(&literals)?)
        };
        let always = if self.unprefiltered.is_empty() {
            None
        } else {
            let alternation = self
                .unprefiltered
                .iter()
                .map(|p| format!("(?:{p})"))
                .collect::<Vec<_>>()
                .join("|");
            Some(compile(&alternation)?)
        };
        Ok(CrawlerList {
            patterns: self.patterns,
            bitmap,
            anchors: self.anchors.into_boxed_slice(),
            members: self.members.into_boxed_slice(),
            confirm: self.confirm.into_boxed_slice(),
            short,
            short_members: self.short_members.into_boxed_slice(),
            always,
        })
    }
}

fn compile(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(pattern)
        .unicode(false)
        .build()
        .map_err(|e| format!("cannot compile `{pattern}`: {e}"))
}

/// One line for a syntax error (the library's own text spans several, with a caret).
fn syntax_error(pattern: &str, error: &regex_syntax::Error) -> String {
    let (kind, column) = match error {
        regex_syntax::Error::Parse(e) => (e.kind().to_string(), e.span().start.column),
        regex_syntax::Error::Translate(e) => (e.kind().to_string(), e.span().start.column),
        other => (other.to_string().replace('\n', " "), 0),
    };
    if column == 0 {
        format!("bad regular expression `{pattern}`: {kind}")
    } else {
        format!("bad regular expression `{pattern}`: {kind} (column {column})")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn builtin_compiles_and_uses_the_prefilter() {
        let list = CrawlerList::parse(BUILTIN, BUILTIN_NAME).unwrap();
        assert!(list.len() > 500, "{}", list.len());
        // Every shipped pattern has a literal: none runs on every request.
        assert!(list.always.is_none());
        // Few enough anchors for the bitmap to stay sparse (see BITMAP_BITS).
        let set: usize = list.bitmap.iter().map(|w| w.count_ones() as usize).sum();
        assert!(set * 50 < BITMAP_WORDS * 64, "{set} bits set");
    }

    #[test]
    fn a_literal_spanning_the_eight_byte_step_is_found() {
        let list = CrawlerList::parse("abcdefgh", "t").unwrap();
        for prefix in 0..20 {
            let ua = format!("{}abcdefgh{}", "x".repeat(prefix), "y".repeat(prefix % 7));
            assert!(list.is_crawler(ua.as_bytes()), "{ua}");
            let near = format!("{}abcdefgX", "x".repeat(prefix));
            assert!(!list.is_crawler(near.as_bytes()), "{near}");
        }
    }
}
