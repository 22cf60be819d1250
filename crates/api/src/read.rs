//! Reading an object from JSON in one pass: every field that cannot be read and every rule it
//! breaks, at once and in plain words, so that a client (or the dashboard's user) fixes them
//! all in one round.
//!
//! serde stops at the first field it cannot read. So the reader reads, and on an error notes
//! the field, takes it out of the document and reads again: a field with a default then reads
//! as its default, and a required one gets a stand-in from a valid example object of its kind
//! ([`example`]), so that the fields after it are read too. Once the object reads, its rules
//! are checked, and every rule about a field that was taken out (or stood in for) is dropped:
//! it would be about the stand-in, not about what was sent. A rule across fields (an end
//! after the start) is kept only if it breaks with two different stand-ins alike.

use marquee_model::{Object, ObjectKind, Status, ValidationError, Violation};
use serde_json::{Value, json};

use crate::ApiError;
use crate::amounts::{self, Renames};

/// Most fields taken out of one document before the reader gives up on the rest.
const MAX_UNREADABLE: usize = 50;

/// A valid object of each kind: the stand-in for a required field that could not be read, and
/// the request example of the OpenAPI document.
pub fn example(kind: ObjectKind) -> Value {
    match kind {
        ObjectKind::Advertiser => json!({
            "name": "Acme Outdoor", "currency": "EUR", "time_zone": "Europe/Berlin",
            "domains": ["acme.example"],
        }),
        ObjectKind::Campaign => json!({ "advertiser_id": 1, "name": "Winter 2026" }),
        ObjectKind::LineItem => json!({
            "campaign_id": 1,
            "name": "Boots DACH mobile",
            "start": "2026-12-01T00:00:00",
            "end": "2027-01-01T00:00:00",
            "time_zone": "Europe/Berlin",
            "tier": "standard",
            "weight": 100,
            "goal": { "metric": "spend", "daily": "500", "lifetime": "12000" },
            "pacing": "even",
            "price": { "model": "cpm", "amount": "4.50", "currency": "EUR" },
            "frequency_caps": [{ "count": 3, "window": "1d" }],
            "targeting": { "all": [
                { "country": ["DE", "AT", "CH"] },
                { "not": { "device_type": ["tablet"] } }
            ]},
            "rotation": "weighted",
        }),
        ObjectKind::Creative => json!({
            "line_item_id": 1, "name": "Boots 300x250", "size": { "w": 300, "h": 250 },
            "landing_url": "https://acme.example/boots",
            "content": { "type": "image", "image_url": "https://cdn.acme.example/boots.png" },
        }),
        ObjectKind::Publisher => json!({ "name": "Daily News" }),
        ObjectKind::Site => {
            json!({ "publisher_id": 1, "name": "Daily News", "domain": "news.example" })
        }
        ObjectKind::Placement => json!({
            "site_id": 1, "name": "Sidebar", "sizes": [{ "w": 300, "h": 250 }],
            "formats": ["banner"],
        }),
    }
}

/// One step of a path into a JSON document.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

fn path_text(steps: &[Step]) -> String {
    let mut text = String::new();
    for step in steps {
        match step {
            Step::Key(key) => {
                if !text.is_empty() {
                    text.push('.');
                }
                text.push_str(key);
            }
            Step::Index(i) => text.push_str(&format!("[{i}]")),
        }
    }
    if text.is_empty() {
        "$".to_owned()
    } else {
        text
    }
}

/// The steps of serde's path into `document`: an enum's variant is a key when the document
/// has it (`{"device_type": [...]}`), and nothing otherwise (a tag inside the object).
fn steps_of(path: &serde_path_to_error::Path, document: &Value) -> Vec<Step> {
    use serde_path_to_error::Segment;
    let mut steps = Vec::new();
    let mut at = Some(document);
    for segment in path.iter() {
        let step = match segment {
            Segment::Seq { index } => Step::Index(*index),
            Segment::Map { key } => Step::Key(key.clone()),
            Segment::Enum { variant } => {
                if at.and_then(|v| v.get(variant)).is_some() {
                    Step::Key(variant.clone())
                } else {
                    continue;
                }
            }
            Segment::Unknown => break,
        };
        at = at.and_then(|v| match &step {
            Step::Key(key) => v.get(key),
            Step::Index(i) => v.get(i),
        });
        steps.push(step);
    }
    steps
}

fn get_mut<'v>(document: &'v mut Value, steps: &[Step]) -> Option<&'v mut Value> {
    steps.iter().try_fold(document, |v, step| match step {
        Step::Key(key) => v.get_mut(key),
        Step::Index(i) => v.get_mut(*i),
    })
}

fn get<'v>(document: &'v Value, steps: &[Step]) -> Option<&'v Value> {
    steps.iter().try_fold(document, |v, step| match step {
        Step::Key(key) => v.get(key),
        Step::Index(i) => v.get(*i),
    })
}

/// Takes the value at `steps` out of the document; whether there was one.
fn remove(document: &mut Value, steps: &[Step]) -> bool {
    let Some((last, parent)) = steps.split_last() else {
        return false;
    };
    match (get_mut(document, parent), last) {
        (Some(Value::Object(map)), Step::Key(key)) => map.remove(key).is_some(),
        (Some(Value::Array(items)), Step::Index(i)) if *i < items.len() => {
            items.remove(*i);
            true
        }
        _ => false,
    }
}

fn insert(document: &mut Value, steps: &[Step], value: Value) -> bool {
    let Some((Step::Key(key), parent)) = steps.split_last() else {
        return false;
    };
    match get_mut(document, parent) {
        Some(Value::Object(map)) => {
            map.insert(key.clone(), value);
            true
        }
        _ => false,
    }
}

/// Another valid object: where a required field stood in, the rules are checked with the
/// example's value and with this one, and only what both break is reported, since a rule
/// that only one breaks depends on the stand-in (a start the client never sent, before its
/// end). It differs from the example where rules compare fields: a flight's start (the
/// earliest year a flight may have) and time zone.
fn alternative(kind: ObjectKind) -> Value {
    let mut other = example(kind);
    if kind == ObjectKind::LineItem {
        other["start"] = json!("2000-01-01T00:00:00");
        other["time_zone"] = json!("UTC");
    }
    other
}

/// The value at `steps` (in the model's fields) of `example`, list items standing in by the
/// example's first one.
fn stand_in(kind: ObjectKind, mut example: Value, steps: &[Step]) -> Option<Value> {
    amounts::to_model(kind, &mut example, None, &mut Vec::new());
    let steps: Vec<Step> = steps
        .iter()
        .map(|step| match step {
            Step::Index(_) => Step::Index(0),
            key => key.clone(),
        })
        .collect();
    get(&example, &steps).cloned()
}

/// Text between the first pair of backticks after `after`.
fn quoted<'m>(message: &'m str, after: &str) -> Option<&'m str> {
    let rest = message.strip_prefix(after)?;
    let rest = rest.strip_prefix('`')?;
    rest.split_once('`').map(|(name, _)| name)
}

/// The names serde lists after `expected one of` (or `expected` for one or two).
fn expected_names(message: &str) -> Vec<&str> {
    let Some((_, list)) = message.split_once("expected ") else {
        return Vec::new();
    };
    list.split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| !name.is_empty())
        .collect()
}

/// What serde found, without its type words: `string "heavy"` → `"heavy"`, `map` → `an
/// object`.
fn found_text(found: &str) -> String {
    for prefix in [
        "string ",
        "integer ",
        "floating point ",
        "boolean ",
        "char ",
    ] {
        if let Some(value) = found.strip_prefix(prefix) {
            return value.replace('`', "");
        }
    }
    match found {
        "map" => "an object".to_owned(),
        "sequence" => "a list".to_owned(),
        "unit value" | "null" => "null".to_owned(),
        other => other.replace('`', ""),
    }
}

/// What serde expected, in plain words.
fn expected_kind(expected: &str) -> &'static str {
    let expected = expected.trim();
    if [
        "u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64", "usize",
    ]
    .contains(&expected)
        || expected.starts_with("an integer")
    {
        "a whole number"
    } else if expected.starts_with("f32") || expected.starts_with("f64") {
        "a number"
    } else if expected.starts_with("a string") || expected.starts_with("a borrowed string") {
        "text"
    } else if expected.starts_with("a sequence") || expected.starts_with("a list") {
        "a list"
    } else if expected.starts_with("a boolean") {
        "true or false"
    } else if expected.starts_with("struct") || expected.starts_with("a map") {
        "an object"
    } else {
        "a value of another type"
    }
}

/// serde's message for a field that cannot be read, in plain words: no type names, no
/// backticks. Messages of the model's own types (a currency code, a cap window, a date) are
/// already plain and pass as they are.
pub fn plain_message(message: &str) -> String {
    if let Some(variant) = quoted(message, "unknown variant ") {
        let names = expected_names(message);
        return format!(
            "must be one of: {}; {variant:?} is not",
            names.join(", ").replace('_', " ")
        );
    }
    if let Some(field) = quoted(message, "unknown field ") {
        let names = expected_names(message);
        return if names.is_empty() {
            format!("{field:?} is not a field here")
        } else {
            format!(
                "{field:?} is not a field here; the fields are: {}",
                names.join(", ")
            )
        };
    }
    if quoted(message, "missing field ").is_some() {
        return "is required".to_owned();
    }
    if let Some(rest) = message.strip_prefix("invalid type: ") {
        let (found, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        return format!(
            "must be {}, not {}",
            expected_kind(expected),
            found_text(found)
        );
    }
    if let Some(rest) = message.strip_prefix("invalid value: ") {
        let (found, expected) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let kind = expected_kind(expected);
        return if kind == "a whole number" {
            format!(
                "must be a whole number in range (not negative, not too large), not {}",
                found_text(found)
            )
        } else {
            format!("must be {kind}, not {}", found_text(found))
        };
    }
    if message.starts_with("invalid length") {
        return "has the wrong number of items".to_owned();
    }
    if message.starts_with("failed to parse") || message.contains("parsing") {
        // jiff's messages on a local date and time.
        return "must be a date and time such as 2026-12-01T00:00:00".to_owned();
    }
    message.replace('`', "")
}

/// The path of an error in the document as sent: list items taken out before shift the
/// indices serde sees, so they are counted back in.
fn original_index(removed: &[(Vec<Step>, usize)], list: &[Step], index: usize) -> usize {
    let mut taken: Vec<usize> = removed
        .iter()
        .filter(|(at, _)| at.as_slice() == list)
        .map(|(_, i)| *i)
        .collect();
    taken.sort_unstable();
    let mut original = index;
    for i in taken {
        if i <= original {
            original += 1;
        }
    }
    original
}

fn related(a: &str, b: &str) -> bool {
    let under = |inner: &str, outer: &str| {
        inner == outer
            || inner
                .strip_prefix(outer)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    };
    under(a, b) || under(b, a)
}

/// Reads an object of kind `T` from a request's JSON and checks its rules, reporting every
/// problem at once: fields that cannot be read (`400`, with the rules the rest breaks) or,
/// when all can, every rule broken (`422`). `reported` are problems found before (the
/// dashboard's form fields that could not be read), whose fields are already out of `value`.
/// `stored`: the object an update replaces (see [`amounts::to_model`]).
pub fn read_object<T: Object>(
    mut value: Value,
    stored: Option<&T>,
    reported: Vec<Violation>,
) -> Result<T, ApiError> {
    let mut unreadable = reported;
    let stored = stored.and_then(|object| serde_json::to_value(object).ok());
    let renames: Renames = amounts::to_model(T::KIND, &mut value, stored.as_ref(), &mut unreadable);
    let mut touched: Vec<String> = unreadable.iter().map(|v| v.path.clone()).collect();
    // List items taken out, by list and index as sent.
    let mut removed: Vec<(Vec<Step>, usize)> = Vec::new();
    let mut object = None;
    // Where a required field got the example's value.
    let mut stood_in: Vec<Vec<Step>> = Vec::new();
    while unreadable.len() <= MAX_UNREADABLE {
        let error = match serde_path_to_error::deserialize::<_, T>(&value) {
            Ok(read) => {
                object = Some(read);
                break;
            }
            Err(error) => error,
        };
        let message = error.inner().to_string();
        let mut steps = steps_of(error.path(), &value);
        if let Some(field) = quoted(&message, "missing field ") {
            steps.push(Step::Key(field.to_owned()));
            let path = renames.request_path(&path_text(&steps));
            if !touched.contains(&path) {
                unreadable.push(Violation {
                    path: path.clone(),
                    message: "is required".into(),
                });
                touched.push(path);
            }
            let placed = stand_in(T::KIND, example(T::KIND), &steps)
                .is_some_and(|stand_in| insert(&mut value, &steps, stand_in));
            if placed {
                stood_in.push(steps);
                continue;
            }
            break;
        }
        if let Some(field) = quoted(&message, "unknown field ")
            && steps.last() != Some(&Step::Key(field.to_owned()))
        {
            steps.push(Step::Key(field.to_owned()));
        }
        let mut sent = steps.clone();
        if let Some((Step::Index(i), list)) = steps.split_last() {
            let original = original_index(&removed, list, *i);
            sent = list.to_vec();
            sent.push(Step::Index(original));
            removed.push((list.to_vec(), original));
        }
        let path = renames.request_path(&path_text(&sent));
        if touched.contains(&path) || !remove(&mut value, &steps) {
            // The same field again, or one that cannot be taken out: report it and stop.
            if !touched.contains(&path) {
                unreadable.push(Violation {
                    path,
                    message: plain_message(&message),
                });
            }
            break;
        }
        unreadable.push(Violation {
            path: path.clone(),
            message: plain_message(&message),
        });
        touched.push(path);
    }
    let mut broken = Vec::new();
    if let Some(object) = &object {
        if object.status() == Status::Archived {
            broken.push(Violation {
                path: "status".into(),
                message: "cannot be set to archived here; archive with DELETE".into(),
            });
        }
        let mut rules = object
            .validate()
            .err()
            .map(|e| e.violations)
            .unwrap_or_default();
        if !rules.is_empty() && !stood_in.is_empty() {
            let mut other = value.clone();
            for steps in &stood_in {
                if let Some(stand_in) = stand_in(T::KIND, alternative(T::KIND), steps) {
                    insert(&mut other, steps, stand_in);
                }
            }
            let also = serde_json::from_value::<T>(other)
                .ok()
                .and_then(|other| other.validate().err())
                .map(|e| e.violations)
                .unwrap_or_default();
            rules.retain(|rule| also.contains(rule));
        }
        broken.extend(
            rules
                .into_iter()
                .map(|v| Violation {
                    path: renames.request_path(&v.path),
                    message: v.message,
                })
                .filter(|v| !touched.iter().any(|t| related(t, &v.path))),
        );
    }
    match (object, unreadable.is_empty()) {
        (Some(object), true) if broken.is_empty() => Ok(object),
        (_, true) => Err(ApiError::Invalid(ValidationError { violations: broken })),
        (_, false) => {
            unreadable.extend(broken);
            let error = ValidationError {
                violations: unreadable,
            };
            Err(ApiError::BadRequest {
                message: format!("{} invalid field(s): {error}", error.violations.len()),
                fields: error.violations,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serde_wording_becomes_plain_words() {
        for (serde, plain) in [
            (
                "unknown variant `gold`, expected one of `sponsorship`, `standard`",
                "must be one of: sponsorship, standard; \"gold\" is not",
            ),
            (
                "unknown variant `x`, expected `free` or `charged`",
                "must be one of: free, charged; \"x\" is not",
            ),
            (
                "unknown field `colour`, expected `name` or `status`",
                "\"colour\" is not a field here; the fields are: name, status",
            ),
            ("missing field `start`", "is required"),
            (
                "invalid type: string \"heavy\", expected u32",
                "must be a whole number, not \"heavy\"",
            ),
            (
                "invalid type: map, expected a sequence",
                "must be a list, not an object",
            ),
            (
                "invalid value: integer `-1`, expected u32",
                "must be a whole number in range (not negative, not too large), not -1",
            ),
        ] {
            assert_eq!(plain_message(serde), plain, "{serde}");
        }
    }

    #[test]
    fn list_items_taken_out_keep_their_place_as_sent() {
        let list = [Step::Key("sizes".into())];
        // Items 1 and 3 of the list as sent were taken out: serde's item 1 is now item 2,
        // its item 2 item 4.
        let removed = vec![(list.to_vec(), 1), (list.to_vec(), 3)];
        assert_eq!(original_index(&removed, &list, 0), 0);
        assert_eq!(original_index(&removed, &list, 1), 2);
        assert_eq!(original_index(&removed, &list, 2), 4);
    }
}
