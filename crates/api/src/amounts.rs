//! Money as people write it, at the API's edge: every amount of an object is stored as integer
//! micros, and the API (and the dashboard's forms, which go through the same functions) also
//! reads and writes it as decimal text in the advertiser's currency.
//!
//! The fields, on a line item (its currency is `price.currency`, the advertiser's):
//!
//! | plain field (decimal text) | micros field (integer) |
//! |---|---|
//! | `price.amount` | `price.amount_micros` |
//! | `goal.daily` (spend goals) | `goal.daily_micros` |
//! | `goal.lifetime` (spend goals) | `goal.lifetime_micros` |
//!
//! A request may send either field of a pair, or both if they agree. Clients written before
//! the plain fields sent a spend goal's micros as a number in `goal.daily` / `goal.lifetime`:
//! a number there still means micros, a string means currency units. Answers carry both
//! fields of every pair. Counts (impressions and clicks goals) stay numbers; a string of
//! digits is read as the same count.
//!
//! The model keeps one field per amount (`amount_micros`, and a goal's `daily` and
//! `lifetime`, in micros for spend), so [`to_model`] rewrites a request's JSON into the
//! model's before it is read, and [`present`] adds the plain fields to an answer.

use marquee_model::{Currency, Micros, ObjectKind, Violation};
use serde_json::{Map, Value};

/// One amount: the object holding it, its plain and micros field names, and the model's.
struct Amount {
    group: &'static str,
    plain: &'static str,
    micros: &'static str,
    model: &'static str,
}

const PRICE: Amount = Amount {
    group: "price",
    plain: "amount",
    micros: "amount_micros",
    model: "amount_micros",
};

const GOAL: [Amount; 2] = [
    Amount {
        group: "goal",
        plain: "daily",
        micros: "daily_micros",
        model: "daily",
    },
    Amount {
        group: "goal",
        plain: "lifetime",
        micros: "lifetime_micros",
        model: "lifetime",
    },
];

/// The line item's currency as its JSON names it, if it names a valid one.
fn currency_of(object: &Map<String, Value>) -> Option<Currency> {
    let code = object.get("price")?.get("currency")?.as_str()?;
    Currency::try_from(code).ok()
}

fn is_spend_goal(object: &Map<String, Value>) -> bool {
    object
        .get("goal")
        .and_then(|goal| goal.get("metric"))
        .and_then(Value::as_str)
        == Some("spend")
}

fn path(amount: &Amount, field: &str) -> String {
    format!("{}.{field}", amount.group)
}

/// Where a rule the model reports on an amount belongs in the request: the model names its
/// own field (`price.amount_micros`, `goal.daily`), the client may have sent the other one of
/// the pair. Returned by [`to_model`].
#[derive(Debug, Default, Clone)]
pub struct Renames(Vec<(String, String)>);

impl Renames {
    /// The request's path for a path of the model.
    pub fn request_path(&self, model_path: &str) -> String {
        self.0
            .iter()
            .find(|(model, _)| model == model_path)
            .map_or_else(|| model_path.to_owned(), |(_, request)| request.clone())
    }
}

/// Rewrites a request's amounts into the model's fields: decimal text in the currency becomes
/// micros, exactly (more decimals than the currency has is refused). A field that cannot be
/// read is removed from `value` and reported in `violations`, in plain words, so that the rest
/// of the object is still read and checked. Kinds without money are left as they are.
///
/// `stored` is the object an update replaces, in the model's fields: a client that reads an
/// object, edits one field of a pair and writes it back sends the other as it read it, so of
/// two fields that disagree the one still equal to the stored amount is the one not edited.
pub fn to_model(
    kind: ObjectKind,
    value: &mut Value,
    stored: Option<&Value>,
    violations: &mut Vec<Violation>,
) -> Renames {
    let mut renames = Renames::default();
    let stored_amount = |amount: &Amount| {
        stored
            .and_then(|s| s.get(amount.group))
            .and_then(|group| group.get(amount.model))
            .and_then(Value::as_i64)
    };
    let Value::Object(object) = value else {
        return renames;
    };
    if kind != ObjectKind::LineItem {
        return renames;
    }
    let currency = currency_of(object);
    let spend = is_spend_goal(object);
    if let Some(Value::Object(price)) = object.get_mut("price") {
        let stored = stored_amount(&PRICE);
        read_amount(
            &PRICE,
            price,
            currency,
            true,
            stored,
            violations,
            &mut renames,
        );
    }
    if let Some(Value::Object(goal)) = object.get_mut("goal") {
        for amount in &GOAL {
            let stored = stored_amount(amount);
            read_amount(
                amount,
                goal,
                currency,
                spend,
                stored,
                violations,
                &mut renames,
            );
        }
    }
    renames
}

/// Reads one amount pair of `group` into the model's field. `money`: whether the amount is
/// money (a price, a spend goal) or a count (another goal). An amount that cannot be read
/// leaves the model's field out; the model's path then names the field reported, so that the
/// field is not reported again as missing.
fn read_amount(
    amount: &Amount,
    group: &mut Map<String, Value>,
    currency: Option<Currency>,
    money: bool,
    stored: Option<i64>,
    violations: &mut Vec<Violation>,
    renames: &mut Renames,
) {
    let before = violations.len();
    read_pair(amount, group, currency, money, stored, violations, renames);
    if let Some(first) = violations.get(before) {
        renames
            .0
            .push((path(amount, amount.model), first.path.clone()));
    }
}

// The same parameters as `read_amount`, deliberately: that wrapper only notes the rename after
// this, which returns early on each failure.
fn read_pair(
    amount: &Amount,
    group: &mut Map<String, Value>,
    currency: Option<Currency>,
    money: bool,
    stored: Option<i64>,
    violations: &mut Vec<Violation>,
    renames: &mut Renames,
) {
    let plain = group.remove(amount.plain);
    let micros = group.remove(amount.micros);
    let mut fail = |field: &str, message: String| {
        violations.push(Violation {
            path: path(amount, field),
            message,
        });
    };
    if !money {
        if micros.is_some() {
            fail(
                amount.micros,
                "is only for a spend goal; an impressions or clicks goal is a count, in the \
                 plain field"
                    .into(),
            );
        }
        match plain {
            Some(Value::String(text)) => match text.trim().parse::<u64>() {
                Ok(count) => {
                    group.insert(amount.model.into(), count.into());
                }
                Err(_) => fail(
                    amount.plain,
                    format!("{text:?} is not a count: write a whole number, such as 20000"),
                ),
            },
            Some(value) => {
                group.insert(amount.model.into(), value);
            }
            None => {}
        }
        return;
    }
    // A number in the plain field is micros only where clients sent micros before there
    // were plain fields: a goal's `daily` and `lifetime`.
    let legacy_micros = amount.plain == amount.model;
    // An answer's pair read back as it is: an amount stored with more decimals than its
    // currency has (before this rule) shows them, and is kept by its micros.
    let echoed = match (&plain, &micros, currency) {
        (Some(Value::String(text)), Some(Value::Number(number)), Some(currency)) => number
            .as_i64()
            .filter(|m| Micros(*m).plain_in(currency) == text.trim()),
        _ => None,
    };
    let from_plain = match plain {
        None | Some(Value::Null) => None,
        Some(Value::String(_)) if echoed.is_some() => echoed,
        Some(Value::String(text)) => match currency {
            Some(currency) => match Micros::parse_in(&text, currency) {
                Ok(micros) => Some(micros.0),
                Err(error) => {
                    fail(amount.plain, error.to_string());
                    return;
                }
            },
            None => {
                fail(
                    amount.plain,
                    "cannot be read without a valid price.currency, the currency it is in".into(),
                );
                return;
            }
        },
        Some(Value::Number(number)) if legacy_micros => match number.as_i64() {
            Some(micros) => Some(micros),
            None => {
                fail(
                    amount.plain,
                    "as a number is micros (an older client's form): it must be a whole \
                     number; send the amount in the currency as text, such as \"500\""
                        .into(),
                );
                return;
            }
        },
        Some(_) => {
            let example = currency.map_or("2.50", Currency::example);
            fail(
                amount.plain,
                format!("must be an amount as text in the currency, such as \"{example}\""),
            );
            return;
        }
    };
    let from_micros = match micros {
        None | Some(Value::Null) => None,
        Some(Value::Number(number)) if number.as_i64().is_some() => number.as_i64(),
        Some(_) => {
            fail(
                amount.micros,
                "must be a whole number of micros (millionths of the currency unit)".into(),
            );
            return;
        }
    };
    let (from_plain, from_micros) = match (from_plain, from_micros) {
        // Read, one field edited, written back: the edited one is the one that moved.
        (Some(plain), Some(micros)) if plain != micros && stored == Some(plain) => {
            (None, Some(micros))
        }
        (Some(plain), Some(micros)) if plain != micros && stored == Some(micros) => {
            (Some(plain), None)
        }
        pair => pair,
    };
    let value = match (from_plain, from_micros) {
        (Some(plain), Some(micros)) if plain != micros => {
            let shown = |m: i64| currency.map_or_else(|| m.to_string(), |c| c.format(Micros(m)));
            fail(
                amount.plain,
                format!(
                    "says {} but {} says {}: send one of the two, or both alike",
                    shown(plain),
                    path(amount, amount.micros),
                    shown(micros)
                ),
            );
            return;
        }
        (Some(value), _) => {
            renames
                .0
                .push((path(amount, amount.model), path(amount, amount.plain)));
            value
        }
        (None, Some(value)) => {
            renames
                .0
                .push((path(amount, amount.model), path(amount, amount.micros)));
            value
        }
        (None, None) => return,
    };
    group.insert(amount.model.into(), value.into());
}

/// Adds the plain fields to an object's JSON as stored (the model's), for an answer or a form:
/// `price.amount`, and a spend goal's `daily` / `lifetime` as text with their micros in
/// `daily_micros` / `lifetime_micros`.
pub fn present(kind: ObjectKind, value: &mut Value) {
    let Value::Object(object) = value else {
        return;
    };
    if kind != ObjectKind::LineItem {
        return;
    }
    let Some(currency) = currency_of(object) else {
        return;
    };
    let spend = is_spend_goal(object);
    let show = |amount: &Amount, group: &mut Map<String, Value>| {
        if let Some(micros) = group.get(amount.model).and_then(Value::as_i64) {
            group.insert(amount.micros.into(), micros.into());
            group.insert(
                amount.plain.into(),
                Micros(micros).plain_in(currency).into(),
            );
        }
    };
    if let Some(Value::Object(price)) = object.get_mut("price") {
        show(&PRICE, price);
    }
    if spend && let Some(Value::Object(goal)) = object.get_mut("goal") {
        for amount in &GOAL {
            show(amount, goal);
        }
    }
}

/// The plain fields in the OpenAPI schemas of `Price` and `Goal` (derived from the model,
/// which has only the micros).
pub(crate) fn document(definitions: &mut Map<String, Value>) {
    let text = |description: &str| {
        serde_json::json!({
            "type": "string", "pattern": "^-?[0-9]*(\\.[0-9]*)?$", "description": description
        })
    };
    let micros = |description: &str| serde_json::json!({ "type": "integer", "format": "int64", "description": description });
    if let Some(price) = definitions.get_mut("Price") {
        price["properties"]["amount"] = text(
            "The price in the currency, as decimal text with at most the currency's decimals \
             (`\"4.50\"` EUR, `\"500\"` JPY). Send this or `amount_micros`, or both saying the \
             same amount (in an update, of two that differ, the one equal to the stored amount \
             is taken as not edited); answers carry both.",
        );
        price["properties"]["amount_micros"]["description"] =
            "The price in micros of the currency (4500000 = 4.50).".into();
        if let Some(required) = price["required"].as_array_mut() {
            required.retain(|field| field != "amount_micros");
        }
    }
    if let Some(goal) = definitions.get_mut("Goal") {
        for (plain, micros_field) in [("daily", "daily_micros"), ("lifetime", "lifetime_micros")] {
            goal["properties"][plain] = serde_json::json!({
                "oneOf": [
                    { "type": "integer", "format": "int64", "minimum": 0 },
                    text("")
                ],
                "nullable": true,
                "description": "Impressions or clicks goal: a count (a number, or digits as \
                    text). Spend goal: the amount in the advertiser's currency as decimal text \
                    (`\"500\"`); a number is read as micros, as clients before the text form \
                    sent it. Answers give a spend goal's amount as text."
            });
            goal["properties"][micros_field] =
                micros("Spend goal only: the amount in micros; answers carry it beside the text.");
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn line_item(price: Value, goal: Value) -> Value {
        json!({ "name": "x", "price": price, "goal": goal })
    }

    fn read(mut value: Value) -> (Value, Vec<Violation>) {
        let mut violations = Vec::new();
        to_model(ObjectKind::LineItem, &mut value, None, &mut violations);
        (value, violations)
    }

    #[test]
    fn plain_text_and_micros_mean_the_same_amount() {
        let goal =
            json!({ "metric": "spend", "daily": "500", "lifetime_micros": 9_000_000_000_i64 });
        let (value, violations) = read(line_item(
            json!({ "model": "cpm", "amount": "2.50", "currency": "USD" }),
            goal,
        ));
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(
            value["price"],
            json!({ "model": "cpm", "amount_micros": 2_500_000, "currency": "USD" })
        );
        assert_eq!(
            value["goal"],
            json!({ "metric": "spend", "daily": 500_000_000, "lifetime": 9_000_000_000_i64 })
        );
        // An older client's spend goal: a number in `daily` is micros.
        let (value, violations) = read(line_item(
            json!({ "model": "cpm", "amount_micros": 2_500_000, "currency": "USD" }),
            json!({ "metric": "spend", "daily": 500_000_000 }),
        ));
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(value["goal"]["daily"], json!(500_000_000));
    }

    #[test]
    fn amounts_that_cannot_be_read_are_each_reported() {
        let (value, violations) = read(line_item(
            json!({ "model": "cpm", "amount": "2.505", "amount_micros": 1, "currency": "USD" }),
            json!({ "metric": "spend", "daily": "1,5", "lifetime": "9", "lifetime_micros": 1 }),
        ));
        let paths: Vec<&str> = violations.iter().map(|v| v.path.as_str()).collect();
        assert_eq!(paths, ["price.amount", "goal.daily", "goal.lifetime"]);
        assert_eq!(
            violations[0].message,
            "\"2.505\" has more decimals than USD has (2)"
        );
        assert_eq!(
            violations[2].message,
            "says $9.00 but goal.lifetime_micros says $0.000001: send one of the two, or both alike"
        );
        assert_eq!(value["price"].get("amount_micros"), None);
    }

    #[test]
    fn count_goals_stay_counts() {
        let (value, violations) = read(line_item(
            json!({ "model": "cpm", "amount": "3", "currency": "JPY" }),
            json!({ "metric": "impressions", "daily": "20000", "lifetime": 100000 }),
        ));
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(
            value["goal"],
            json!({ "metric": "impressions", "daily": 20000, "lifetime": 100000 })
        );
        let (_, violations) = read(line_item(
            json!({ "model": "cpm", "amount": "3", "currency": "JPY" }),
            json!({ "metric": "clicks", "daily": "2.5", "daily_micros": 5 }),
        ));
        assert_eq!(violations.len(), 2, "{violations:?}");
    }

    #[test]
    fn answers_carry_both_fields() {
        let mut value = json!({
            "price": { "model": "cpm", "amount_micros": 2_500_000, "currency": "JPY" },
            "goal": { "metric": "spend", "daily": 500_000_000 },
        });
        present(ObjectKind::LineItem, &mut value);
        assert_eq!(value["price"]["amount"], json!("2.5"));
        assert_eq!(value["goal"]["daily"], json!("500"));
        assert_eq!(value["goal"]["daily_micros"], json!(500_000_000));
        let (back, violations) = read(value.clone());
        assert!(violations.is_empty(), "{violations:?}");
        assert_eq!(back["goal"]["daily"], json!(500_000_000));
    }
}
