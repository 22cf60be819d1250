use std::fmt;

use serde::Serialize;

/// One broken rule: where (a JSON path such as `frequency_caps[1].window`) and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub path: String,
    pub message: String,
}

/// Every broken rule of one object, so a client can fix them all in one round.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ValidationError {
    pub violations: Vec<Violation>,
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.violations.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", v.path, v.message)?;
        }
        Ok(())
    }
}

impl ValidationError {
    pub fn single(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            violations: vec![Violation {
                path: path.into(),
                message: message.into(),
            }],
        }
    }
}

/// Most violations listed in one error. A hostile document can break a rule once per list item
/// (a million duplicates fit a 2 MB body); past this the rest are only counted.
const MAX_LISTED_VIOLATIONS: usize = 100;

/// Collects violations while walking an object; tracks the current JSON path.
#[derive(Debug, Default)]
pub struct Violations {
    path: Vec<Segment>,
    found: Vec<Violation>,
    unlisted: usize,
}

#[derive(Debug)]
enum Segment {
    Field(&'static str),
    Index(usize),
}

impl Violations {
    pub fn new() -> Self {
        Self::default()
    }

    /// Runs `check` with `field` appended to the path.
    pub fn field(&mut self, field: &'static str, check: impl FnOnce(&mut Self)) {
        self.path.push(Segment::Field(field));
        check(self);
        self.path.pop();
    }

    /// Runs `check` with `[index]` appended to the path.
    pub fn index(&mut self, index: usize, check: impl FnOnce(&mut Self)) {
        self.path.push(Segment::Index(index));
        check(self);
        self.path.pop();
    }

    /// Records a violation at the current path.
    pub fn fail(&mut self, message: impl Into<String>) {
        if self.found.len() >= MAX_LISTED_VIOLATIONS {
            self.unlisted += 1;
            return;
        }
        let path = self.current_path();
        self.found.push(Violation {
            path,
            message: message.into(),
        });
    }

    /// Records a violation at the current path when `ok` is false.
    pub fn check(&mut self, ok: bool, message: impl Into<String>) {
        if !ok {
            self.fail(message);
        }
    }

    /// Records a violation at `field` when `ok` is false.
    pub fn check_field(&mut self, field: &'static str, ok: bool, message: impl Into<String>) {
        if !ok {
            self.field(field, |v| v.fail(message));
        }
    }

    pub fn depth(&self) -> usize {
        self.path.len()
    }

    pub fn into_result(mut self) -> Result<(), ValidationError> {
        if self.found.is_empty() {
            return Ok(());
        }
        if self.unlisted > 0 {
            self.found.push(Violation {
                path: "$".to_owned(),
                message: format!("{} more violations are not listed", self.unlisted),
            });
        }
        Err(ValidationError {
            violations: self.found,
        })
    }

    fn current_path(&self) -> String {
        let mut path = String::new();
        for segment in &self.path {
            match segment {
                Segment::Field(name) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(name);
                }
                Segment::Index(i) => {
                    path.push('[');
                    path.push_str(&i.to_string());
                    path.push(']');
                }
            }
        }
        if path.is_empty() {
            path.push('$');
        }
        path
    }
}

/// Shared field rules used by several objects.
pub(crate) mod rules {
    use std::collections::HashSet;
    use std::hash::Hash;

    use super::Violations;

    pub const MAX_NAME_CHARS: usize = 200;

    pub fn name(v: &mut Violations, name: &str) {
        v.field("name", |v| {
            if name.trim().is_empty() {
                v.fail("must not be empty");
            } else if name.chars().count() > MAX_NAME_CHARS {
                v.fail(format!("must be at most {MAX_NAME_CHARS} characters"));
            } else if name.chars().any(char::is_control) {
                v.fail("must not contain control characters");
            }
        });
    }

    /// A DNS host name such as `news.example.com`: lower-case labels of letters, digits and
    /// hyphens, at least two labels.
    pub fn is_domain(s: &str) -> bool {
        let labels: Vec<&str> = s.split('.').collect();
        s.len() <= 253
            && labels.len() >= 2
            // An IP address is not a host name: the top-level label has a letter.
            && labels
                .last()
                .is_some_and(|tld| tld.bytes().any(|b| b.is_ascii_lowercase()))
            && labels.iter().all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && !label.starts_with('-')
                    && !label.ends_with('-')
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            })
    }

    pub fn domain(v: &mut Violations, s: &str) {
        v.check(
            is_domain(s),
            format!("{s:?} is not a lower-case host name such as news.example.com"),
        );
    }

    /// An absolute `http` or `https` URL with a host.
    pub fn http_url(v: &mut Violations, s: &str) {
        match url::Url::parse(s) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
            Ok(_) => v.fail(format!("{s:?} must be an http or https URL")),
            Err(e) => v.fail(format!("{s:?} is not a valid URL: {e}")),
        }
    }

    pub fn time_zone(v: &mut Violations, zone: &str) {
        v.field("time_zone", |v| {
            if jiff::tz::TimeZone::get(zone).is_err() {
                v.fail(format!(
                    "{zone:?} is not an IANA time zone such as Europe/Berlin"
                ));
            }
        });
    }

    /// An IAB content category of taxonomy 1.0, OpenRTB's default: `IAB1` to `IAB26`, or a
    /// subcategory such as `IAB2-3`.
    pub fn is_iab_category(s: &str) -> bool {
        let Some(code) = s.strip_prefix("IAB") else {
            return false;
        };
        let number = |part: &str, max: u32| {
            !part.is_empty()
                && part.len() <= 2
                && !part.starts_with('0')
                && part.bytes().all(|b| b.is_ascii_digit())
                && part.parse::<u32>().is_ok_and(|n| (1..=max).contains(&n))
        };
        match code.split_once('-') {
            Some((tier1, tier2)) => number(tier1, 26) && number(tier2, 99),
            None => number(code, 26),
        }
    }

    pub fn iab_category(v: &mut Violations, s: &str) {
        v.check(
            is_iab_category(s),
            format!("{s:?} is not an IAB content category such as IAB2 or IAB2-3"),
        );
    }

    /// An exchange's deal id: 1 to 128 visible ASCII characters.
    pub fn deal_id(v: &mut Violations, s: &str) {
        v.check(
            (1..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_graphic()),
            format!("{s:?} must be 1 to 128 visible ASCII characters (no spaces)"),
        );
    }

    /// An app store bundle or id, such as `com.example.game` or `628677149`.
    pub fn app_bundle(v: &mut Violations, s: &str) {
        v.check(
            (1..=255).contains(&s.len())
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')),
            format!(
                "{s:?} must be an app bundle or store id: 1 to 255 letters, digits, '.', '_' or '-'"
            ),
        );
    }

    /// A media type such as `video/mp4`: lower-case `type/subtype`.
    pub fn mime(v: &mut Violations, s: &str) {
        let part = |p: &str| {
            !p.is_empty()
                && p.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'+' | b'-')
                })
        };
        v.check(
            s.len() <= 100
                && s.split_once('/')
                    .is_some_and(|(t, sub)| part(t) && part(sub)),
            format!("{s:?} is not a lower-case media type such as video/mp4"),
        );
    }

    /// Fails, and returns false, when `items` has more than `max` entries, `what` naming them
    /// (`"domains"`). Callers then skip the list's other checks, whose cost and output would
    /// grow with it.
    pub fn at_most<T>(v: &mut Violations, items: &[T], max: usize, what: &str) -> bool {
        if items.len() > max {
            v.fail(format!("at most {max} {what} are allowed"));
            return false;
        }
        true
    }

    /// Fails on the second and later occurrence of a value in `items`. Linear time: lists come
    /// from clients, so comparing every pair would let one request cost minutes.
    pub fn unique<T: Eq + Hash + std::fmt::Debug>(v: &mut Violations, items: &[T]) {
        let mut seen = HashSet::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            if !seen.insert(item) {
                v.index(i, |v| v.fail(format!("duplicate value {item:?}")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_join_fields_and_indices() {
        let mut v = Violations::new();
        v.field("targeting", |v| {
            v.field("all", |v| v.index(2, |v| v.fail("bad")));
        });
        v.fail("top");
        let err = v.into_result().unwrap_err();
        assert_eq!(err.violations[0].path, "targeting.all[2]");
        assert_eq!(err.violations[1].path, "$");
    }

    #[test]
    fn every_repeat_of_a_value_is_a_duplicate() {
        let mut v = Violations::new();
        v.field("sizes", |v| rules::unique(v, &[3, 1, 3, 2, 1, 3]));
        let paths: Vec<String> = v
            .into_result()
            .unwrap_err()
            .violations
            .into_iter()
            .map(|v| v.path)
            .collect();
        assert_eq!(paths, ["sizes[2]", "sizes[4]", "sizes[5]"]);
    }

    #[test]
    fn past_the_listed_maximum_violations_are_only_counted() {
        let mut v = Violations::new();
        v.field("protocols", |v| rules::unique(v, &vec![7; 1_000]));
        let violations = v.into_result().unwrap_err().violations;
        assert_eq!(violations.len(), MAX_LISTED_VIOLATIONS + 1);
        assert_eq!(violations[MAX_LISTED_VIOLATIONS - 1].path, "protocols[100]");
        assert_eq!(
            violations[MAX_LISTED_VIOLATIONS],
            Violation {
                path: "$".into(),
                message: "899 more violations are not listed".into()
            }
        );
    }

    #[test]
    fn domains() {
        assert!(rules::is_domain("news.example.com"));
        for bad in [
            "example",
            "Example.com",
            "-a.com",
            "a..com",
            "a_b.com",
            "",
            "192.168.0.1",
        ] {
            assert!(!rules::is_domain(bad), "{bad}");
        }
    }
}
