//! User profiles: a user id's segments and attributes, uploaded in bulk (JSON or CSV), checked
//! row by row with a report of the rows refused (a bounded few in detail, all counted), and
//! held in edge memory ([`MemoryProfiles`]) or in Redis (see `SharedState::put_profiles` and
//! `SharedState::profile`).
//!
//! The engine targets on them with the leaves it already has: segments with `segment`, each
//! attribute `name = value` as the key-value `u_<name>` (`key_value`), so a line item targets
//! `{"key_value": {"key": "u_tier", "values": ["gold"]}}`.

use std::ops::Deref;
use std::sync::Arc;

use arc_swap::ArcSwap;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// The most segments and attributes one user may have.
pub const MAX_SEGMENTS: usize = 100;
pub const MAX_ATTRIBUTES: usize = 50;
/// The longest user id, segment or attribute value (characters).
pub const MAX_TEXT: usize = 256;
pub const MAX_USER_ID: usize = 128;
/// Prefix of the key-values attributes become (page key-values with it are not trusted).
pub const ATTRIBUTE_PREFIX: &str = "u_";
/// The most refused rows an upload reports in detail; the rest are only counted, so a body of
/// bad lines cannot make a report many times its size.
pub const MAX_REJECTED_SHOWN: usize = 1_000;

/// What is known about one user.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub segments: Vec<String>,
    /// Attributes as the key-values the engine matches: (`u_<name>`, value), sorted by key.
    pub key_values: Vec<(String, String)>,
}

/// One row of an upload, as sent.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileRow {
    pub user: String,
    #[serde(default)]
    pub segments: Vec<String>,
    #[serde(default)]
    pub attributes: std::collections::BTreeMap<String, String>,
}

/// A JSON upload: `{"profiles": [{"user": "u1", "segments": ["s1"], "attributes": {"tier": "gold"}}]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonUpload {
    profiles: Vec<serde_json::Value>,
}

/// A refused row: where it is (`line 7` of a CSV, `profiles[3]` of JSON) and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejected {
    pub at: String,
    pub reason: String,
}

/// The refused rows of an upload: the first [`MAX_REJECTED_SHOWN`] in detail (what it derefs
/// to), and how many in all.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rejections {
    shown: Vec<Rejected>,
    total: usize,
}

impl Rejections {
    fn push(&mut self, rejected: Rejected) {
        self.total += 1;
        if self.shown.len() < MAX_REJECTED_SHOWN {
            self.shown.push(rejected);
        }
    }

    /// Every refused row, those not shown included.
    pub fn total(&self) -> usize {
        self.total
    }
}

impl Deref for Rejections {
    type Target = [Rejected];

    fn deref(&self) -> &[Rejected] {
        &self.shown
    }
}

/// The rows an upload holds: the valid ones (user id, profile) and the refused ones.
#[derive(Debug, Default)]
pub struct Parsed {
    pub profiles: Vec<(String, Profile)>,
    pub rejected: Rejections,
}

/// An upload that cannot be read at all (as opposed to refused rows).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UploadError {
    #[error("body is not JSON of the form {{\"profiles\": [...]}}: {0}")]
    Json(String),
    #[error("CSV header must be `user,segments,attributes` (found {0:?})")]
    CsvHeader(String),
    #[error("body is not UTF-8")]
    NotUtf8,
}

fn printable(text: &str) -> bool {
    !text.chars().any(char::is_control)
}

/// Checks one row and makes its profile; the error names the field and what is wrong.
pub fn check_row(row: ProfileRow) -> Result<(String, Profile), String> {
    let user = row.user;
    if user.is_empty() || user.chars().count() > MAX_USER_ID || !printable(&user) {
        return Err(format!(
            "user {user:?} must be 1 to {MAX_USER_ID} characters without control characters"
        ));
    }
    if row.segments.len() > MAX_SEGMENTS {
        return Err(format!(
            "segments: {} given, at most {MAX_SEGMENTS}",
            row.segments.len()
        ));
    }
    let mut segments = Vec::with_capacity(row.segments.len());
    for (i, segment) in row.segments.into_iter().enumerate() {
        if segment.is_empty() || segment.chars().count() > MAX_TEXT || !printable(&segment) {
            return Err(format!(
                "segments[{i}] {segment:?} must be 1 to {MAX_TEXT} characters without control characters"
            ));
        }
        if !segments.contains(&segment) {
            segments.push(segment);
        }
    }
    if row.attributes.len() > MAX_ATTRIBUTES {
        return Err(format!(
            "attributes: {} given, at most {MAX_ATTRIBUTES}",
            row.attributes.len()
        ));
    }
    let mut key_values = Vec::with_capacity(row.attributes.len());
    for (name, value) in row.attributes {
        let name_ok = !name.is_empty()
            && name.len() <= 64 - ATTRIBUTE_PREFIX.len()
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !name_ok {
            return Err(format!(
                "attribute name {name:?} must be 1 to 62 lower-case letters, digits or _"
            ));
        }
        if value.is_empty() || value.chars().count() > MAX_TEXT || !printable(&value) {
            return Err(format!(
                "attributes.{name} {value:?} must be 1 to {MAX_TEXT} characters without control characters"
            ));
        }
        key_values.push((format!("{ATTRIBUTE_PREFIX}{name}"), value));
    }
    Ok((
        user,
        Profile {
            segments,
            key_values,
        },
    ))
}

/// Keeps the first row of each user; later ones are refused naming it.
fn refuse_repeats(parsed: &mut Parsed, at: Vec<String>) {
    let mut first: FxHashMap<String, String> = FxHashMap::default();
    let mut kept = Vec::with_capacity(parsed.profiles.len());
    for ((user, profile), at) in parsed.profiles.drain(..).zip(at) {
        if let Some(earlier) = first.get(&user) {
            parsed.rejected.push(Rejected {
                at,
                reason: format!("user {user:?} is already at {earlier}"),
            });
            continue;
        }
        first.insert(user.clone(), at);
        kept.push((user, profile));
    }
    parsed.profiles = kept;
}

/// Checks each row read, named by where it was: those that pass are kept, the rest refused
/// with their reason; then repeated users are refused.
fn check_rows(rows: impl Iterator<Item = (String, Result<ProfileRow, String>)>) -> Parsed {
    let mut parsed = Parsed::default();
    let mut at_of_kept = Vec::new();
    for (at, row) in rows {
        match row.and_then(check_row) {
            Ok(profile) => {
                parsed.profiles.push(profile);
                at_of_kept.push(at);
            }
            Err(reason) => parsed.rejected.push(Rejected { at, reason }),
        }
    }
    refuse_repeats(&mut parsed, at_of_kept);
    parsed
}

/// Reads a JSON upload.
pub fn parse_json(body: &[u8]) -> Result<Parsed, UploadError> {
    let upload: JsonUpload =
        serde_json::from_slice(body).map_err(|e| UploadError::Json(e.to_string()))?;
    let rows = upload.profiles.into_iter().enumerate().map(|(i, value)| {
        let row = serde_json::from_value::<ProfileRow>(value).map_err(|e| e.to_string());
        (format!("profiles[{i}]"), row)
    });
    Ok(check_rows(rows))
}

/// Reads a CSV upload: a header `user,segments,attributes`, then one user per line; segments
/// separated by `|`, attributes as `name=value` separated by `|`; fields may be quoted (`""`
/// inside quotes is one `"`). Blank lines are skipped.
pub fn parse_csv(body: &[u8]) -> Result<Parsed, UploadError> {
    let text = std::str::from_utf8(body).map_err(|_| UploadError::NotUtf8)?;
    let mut lines = text.lines().enumerate();
    let header = lines
        .next()
        .map_or("", |(_, l)| l.trim_start_matches('\u{feff}'));
    let columns: Vec<String> = split_csv(header)
        .unwrap_or_default()
        .iter()
        .map(|c| c.trim().to_ascii_lowercase())
        .collect();
    if columns != ["user", "segments", "attributes"] {
        return Err(UploadError::CsvHeader(header.to_owned()));
    }
    let rows = lines
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(index, line)| (format!("line {}", index + 1), csv_row(line)));
    Ok(check_rows(rows))
}

fn csv_row(line: &str) -> Result<ProfileRow, String> {
    let fields = split_csv(line)?;
    let [user, segments, attributes] = <[String; 3]>::try_from(fields)
        .map_err(|f| format!("{} fields, expected 3 (user,segments,attributes)", f.len()))?;
    let segments = segments
        .split('|')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let mut map = std::collections::BTreeMap::new();
    for pair in attributes.split('|').filter(|p| !p.is_empty()) {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("attribute {pair:?} is not name=value"))?;
        if map.insert(name.to_owned(), value.to_owned()).is_some() {
            return Err(format!("attribute {name:?} is given twice"));
        }
    }
    Ok(ProfileRow {
        user,
        segments,
        attributes: map,
    })
}

/// Splits one CSV line into fields (RFC 4180 quoting, within one line).
fn split_csv(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') if field.is_empty() && !was_quoted => {
                quoted = true;
                was_quoted = true;
            }
            (false, ',') => {
                fields.push(std::mem::take(&mut field));
                was_quoted = false;
            }
            (false, '"') => return Err("a quote inside an unquoted field".into()),
            (false, c) => field.push(c),
        }
    }
    if quoted {
        return Err("a quoted field is not closed".into());
    }
    fields.push(field);
    Ok(fields)
}

/// Profiles in this process's memory, by user key: read with one atomic load per lookup, an
/// upload copies the map and swaps it in (uploads are rare, lookups are every request).
#[derive(Debug, Default)]
pub struct MemoryProfiles {
    map: ArcSwap<FxHashMap<u64, Arc<Profile>>>,
}

impl MemoryProfiles {
    pub fn get(&self, user: u64) -> Option<Arc<Profile>> {
        self.map.load().get(&user).cloned()
    }

    /// Adds or replaces the profiles of these user keys.
    pub fn insert(&self, profiles: impl IntoIterator<Item = (u64, Profile)>) {
        let profiles: Vec<(u64, Profile)> = profiles.into_iter().collect();
        self.map.rcu(|current| {
            let mut next = FxHashMap::clone(current);
            for (user, profile) in &profiles {
                next.insert(*user, Arc::new(profile.clone()));
            }
            next
        });
    }

    pub fn len(&self) -> usize {
        self.map.load().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_are_checked_one_by_one_and_refusals_name_the_line() {
        let body = "user,segments,attributes\n\
                    alice,sports|news|sports,tier=gold|age=25-34\n\
                    \n\
                    \"bob, jr\",,\"note=a \"\"quoted\"\" value\"\n\
                    ,s1,\n\
                    carol,s1,Tier=gold\n\
                    dave,s1\n\
                    alice,s2,\n\
                    erin,s1,tier\n";
        let parsed = parse_csv(body.as_bytes()).unwrap();
        let users: Vec<&str> = parsed.profiles.iter().map(|(u, _)| u.as_str()).collect();
        assert_eq!(users, ["alice", "bob, jr"]);
        assert_eq!(
            parsed.profiles[0].1,
            Profile {
                segments: vec!["sports".into(), "news".into()],
                key_values: vec![
                    ("u_age".into(), "25-34".into()),
                    ("u_tier".into(), "gold".into())
                ],
            }
        );
        assert_eq!(
            parsed.profiles[1].1.key_values,
            [("u_note".to_owned(), "a \"quoted\" value".to_owned())]
        );
        let refused: Vec<(&str, &str)> = parsed
            .rejected
            .iter()
            .map(|r| (r.at.as_str(), r.reason.as_str()))
            .collect();
        assert_eq!(refused.len(), 5, "{refused:?}");
        assert!(refused[0].0 == "line 5" && refused[0].1.starts_with("user \"\""));
        assert!(refused[1].0 == "line 6" && refused[1].1.contains("\"Tier\""));
        assert!(refused[2].0 == "line 7" && refused[2].1.contains("2 fields"));
        assert!(refused[3].0 == "line 9" && refused[3].1.contains("not name=value"));
        assert_eq!(
            refused[4],
            ("line 8", "user \"alice\" is already at line 2")
        );
    }

    #[test]
    fn refusals_past_the_cap_are_counted_not_kept() {
        let bad = MAX_REJECTED_SHOWN + 500;
        let mut body = String::from("user,segments,attributes\n");
        for _ in 0..bad {
            body.push_str(",s1,\n");
        }
        body.push_str("alice,s1,\nalice,s2,\n");
        let parsed = parse_csv(body.as_bytes()).unwrap();
        assert_eq!(parsed.profiles.len(), 1);
        assert_eq!(parsed.rejected.len(), MAX_REJECTED_SHOWN);
        assert_eq!(parsed.rejected.total(), bad + 1, "the repeated alice too");
        assert_eq!(parsed.rejected[0].at, "line 2");
        assert_eq!(
            parsed.rejected[MAX_REJECTED_SHOWN - 1].at,
            format!("line {}", MAX_REJECTED_SHOWN + 1)
        );
    }

    #[test]
    fn a_csv_without_its_header_is_refused_whole() {
        assert_eq!(
            parse_csv(b"alice,s1,\n").unwrap_err(),
            UploadError::CsvHeader("alice,s1,".into())
        );
        assert_eq!(parse_csv(&[0xff, 0xfe]).unwrap_err(), UploadError::NotUtf8);
    }

    #[test]
    fn json_rows_are_checked_and_refusals_name_the_index() {
        let body = br#"{"profiles": [
            {"user": "u1", "segments": ["s1"], "attributes": {"tier": "gold"}},
            {"user": "u2", "segments": "s1"},
            {"user": "u3", "attributes": {"tier": ""}},
            {"user": "u4", "extra": 1},
            {"user": "u1"}
        ]}"#;
        let parsed = parse_json(body).unwrap();
        assert_eq!(parsed.profiles.len(), 1);
        let at: Vec<&str> = parsed.rejected.iter().map(|r| r.at.as_str()).collect();
        assert_eq!(
            at,
            ["profiles[1]", "profiles[2]", "profiles[3]", "profiles[4]"]
        );
        assert!(parsed.rejected[1].reason.contains("attributes.tier"));
        assert!(parsed.rejected[3].reason.contains("already at profiles[0]"));
        assert!(matches!(parse_json(b"[1]"), Err(UploadError::Json(_))));
    }

    #[test]
    fn limits_are_enforced() {
        let many = ProfileRow {
            user: "u".into(),
            segments: (0..=MAX_SEGMENTS).map(|i| i.to_string()).collect(),
            attributes: Default::default(),
        };
        assert!(check_row(many).unwrap_err().contains("at most 100"));
        let long = ProfileRow {
            user: "x".repeat(MAX_USER_ID + 1),
            segments: Vec::new(),
            attributes: Default::default(),
        };
        assert!(check_row(long).is_err());
    }

    #[test]
    fn memory_profiles_replace_by_user() {
        let profiles = MemoryProfiles::default();
        let gold = Profile {
            segments: vec!["s".into()],
            key_values: Vec::new(),
        };
        profiles.insert([(1, gold.clone()), (2, Profile::default())]);
        profiles.insert([(2, gold.clone())]);
        assert_eq!(profiles.len(), 2);
        assert_eq!(profiles.get(2).as_deref(), Some(&gold));
        assert!(profiles.get(3).is_none());
    }
}
