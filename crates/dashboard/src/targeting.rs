//! Targeting edited as rows: each row is "attribute is one of / is none of these values", and
//! the rows all have to hold (`all`). Expressions rows cannot show (`any`, nesting, a geo
//! circle) are edited as JSON instead, so nothing the API can store is lost by the form.

use marquee_model::Targeting;
use serde_json::{Value, json};

use crate::form::FormData;

/// The attributes a row can target, with how their values are written.
pub const ATTRIBUTES: &[(&str, &str)] = &[
    ("country", "Country (DE, US)"),
    ("region", "Region (DE-BY)"),
    ("city", "City"),
    ("metro", "Metro (Nielsen DMA code: 807)"),
    ("postal", "Postal code"),
    ("asn", "Network (AS number: 3320)"),
    (
        "connection_type",
        "Connection (cable_dsl, cellular, corporate, satellite)",
    ),
    (
        "device_type",
        "Device (desktop, phone, tablet, ctv, console, other)",
    ),
    ("os", "Operating system"),
    ("browser", "Browser"),
    ("language", "Language (de, en)"),
    ("day_of_week", "Day of week (mon … sun)"),
    ("hour", "Hours (9-17, 20-24)"),
    ("key_value", "Key-value (section=sport, news)"),
    ("segment", "Segment"),
    ("domain", "Domain"),
    ("page_url", "Page URL prefix"),
    ("placement", "Placement id"),
    ("site", "Site id"),
    ("ip", "IP network (CIDR)"),
    ("size", "Slot size (300x250)"),
    ("format", "Slot format (banner, video, native, audio)"),
];

/// Attributes whose values are a fixed set: each row offers them as a multiple select
/// (`t_choice_{row}`, rows counted from 0), whose selection takes the place of the row's text.
pub const CHOICES: &[(&str, &[&str])] = &[("connection_type", CONNECTION_TYPES)];

/// The connection types ([`marquee_model::ConnectionType`]) by their JSON names.
pub const CONNECTION_TYPES: &[&str] = &["cable_dsl", "cellular", "corporate", "satellite"];

/// One row of the form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Row {
    pub attribute: String,
    /// Excluding: "is none of".
    pub exclude: bool,
    pub values: String,
}

/// What the targeting section of a form shows.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Editor {
    pub rows: Vec<Row>,
    /// Set when the expression cannot be shown as rows: its JSON.
    pub json: Option<String>,
}

/// The rows posted with a form (`t_attr`, `t_op`, `t_values`), or the JSON text.
pub fn rows_of_form(form: &FormData) -> Editor {
    let json = form.get("targeting_json");
    if !json.is_empty() {
        return Editor {
            rows: Vec::new(),
            json: Some(json.to_owned()),
        };
    }
    let attributes = form.all("t_attr");
    let ops = form.all("t_op");
    let values = form.all("t_values");
    let rows = attributes
        .iter()
        .enumerate()
        .map(|(i, attribute)| {
            let chosen = form.all(&format!("t_choice_{i}"));
            let values = if choices_of(attribute).is_some() && !chosen.is_empty() {
                chosen.join(", ")
            } else {
                values.get(i).copied().unwrap_or("").to_owned()
            };
            Row {
                attribute: (*attribute).to_owned(),
                exclude: ops.get(i) == Some(&"not_in"),
                values,
            }
        })
        .collect();
    Editor { rows, json: None }
}

/// The fixed values of an attribute, if it has them ([`CHOICES`]).
fn choices_of(attribute: &str) -> Option<&'static [&'static str]> {
    CHOICES
        .iter()
        .find(|(name, _)| *name == attribute)
        .map(|(_, values)| *values)
}

/// A row's select of fixed values, as the form shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChoiceSelect {
    pub attribute: &'static str,
    /// Each value with whether it is selected.
    pub options: Vec<(&'static str, bool)>,
    /// Shown: the row targets this attribute.
    pub shown: bool,
}

impl Row {
    /// The selects of fixed values the row offers, and the text its input shows: a row whose
    /// values are all among its attribute's choices shows them selected and no text.
    pub fn choice_selects(&self) -> (Vec<ChoiceSelect>, String) {
        let values: Vec<&str> = split(&self.values).collect();
        let selected = choices_of(&self.attribute)
            .filter(|choices| !values.is_empty() && values.iter().all(|v| choices.contains(v)));
        let selects = CHOICES
            .iter()
            .map(|&(attribute, choices)| {
                let shown = attribute == self.attribute;
                ChoiceSelect {
                    attribute,
                    options: choices
                        .iter()
                        .map(|&c| (c, shown && selected.is_some() && values.contains(&c)))
                        .collect(),
                    shown,
                }
            })
            .collect();
        let text = if selected.is_some() {
            String::new()
        } else {
            self.values.clone()
        };
        (selects, text)
    }
}

fn split(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty())
}

fn number(text: &str, what: &str) -> Result<Value, String> {
    text.parse::<u64>()
        .map(|n| json!(n))
        .map_err(|_| format!("{text:?} is not {what}"))
}

/// The JSON of one row's leaf.
fn leaf(row: &Row) -> Result<Value, String> {
    let attribute = row.attribute.as_str();
    let values: Vec<&str> = split(&row.values).collect();
    let list = match attribute {
        "placement" | "site" => values
            .iter()
            .map(|v| number(v, "an id"))
            .collect::<Result<Vec<_>, _>>()?,
        "metro" => values
            .iter()
            .map(|v| number(v, "a DMA code"))
            .collect::<Result<Vec<_>, _>>()?,
        "asn" => values
            .iter()
            .map(|v| number(v.trim_start_matches("AS"), "an AS number"))
            .collect::<Result<Vec<_>, _>>()?,
        "hour" => values
            .iter()
            .map(|v| {
                let (from, to) = v
                    .split_once('-')
                    .ok_or_else(|| format!("{v:?} is not an hour range such as 9-17"))?;
                Ok(json!({
                    "from": number(from.trim(), "an hour")?,
                    "to": number(to.trim(), "an hour")?,
                }))
            })
            .collect::<Result<Vec<_>, String>>()?,
        "size" => values
            .iter()
            .map(|v| {
                let (w, h) = v
                    .split_once('x')
                    .ok_or_else(|| format!("{v:?} is not a size such as 300x250"))?;
                Ok(json!({ "w": number(w.trim(), "a width")?, "h": number(h.trim(), "a height")? }))
            })
            .collect::<Result<Vec<_>, String>>()?,
        "key_value" => {
            let (key, first) = row
                .values
                .split_once('=')
                .ok_or("write a key-value as key=value1, value2")?;
            let values: Vec<&str> = split(first).collect();
            return Ok(json!({ "key_value": { "key": key.trim(), "values": values } }));
        }
        "device_type" | "day_of_week" | "format" | "connection_type" => values
            .iter()
            .map(|v| json!(v.to_ascii_lowercase()))
            .collect(),
        _ => values.iter().map(|v| json!(v)).collect(),
    };
    Ok(json!({ attribute: list }))
}

/// The expression the rows describe (`None` for no targeting), checked against the model's
/// type; an error names the row.
pub fn from_rows(editor: &Editor) -> Result<Option<Value>, Vec<String>> {
    if let Some(text) = &editor.json {
        let value: Value =
            serde_json::from_str(text).map_err(|e| vec![format!("targeting JSON: {e}")])?;
        serde_json::from_value::<Targeting>(value.clone()).map_err(|e| {
            vec![format!(
                "targeting JSON: {}",
                marquee_api::plain_message(&e.to_string())
            )]
        })?;
        return Ok(Some(value));
    }
    // Every row is read, so that every bad one is named at once; the good ones are kept.
    let mut leaves = Vec::new();
    let mut errors = Vec::new();
    for (i, row) in editor.rows.iter().enumerate() {
        if row.attribute.is_empty() || row.values.trim().is_empty() {
            continue;
        }
        let label = ATTRIBUTES
            .iter()
            .find(|(name, _)| *name == row.attribute)
            .map_or(row.attribute.as_str(), |(_, label)| {
                label.split(" (").next().unwrap_or(label)
            });
        let value = match leaf(row) {
            Ok(value) => value,
            Err(e) => {
                errors.push(format!("row {}: {e}", i + 1));
                continue;
            }
        };
        if let Err(e) = serde_json::from_value::<Targeting>(value.clone()) {
            errors.push(format!(
                "row {}: {label} {}",
                i + 1,
                marquee_api::plain_message(&e.to_string())
            ));
            continue;
        }
        leaves.push(if row.exclude {
            json!({ "not": value })
        } else {
            value
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(match leaves.len() {
        0 => None,
        1 => leaves.pop(),
        _ => Some(json!({ "all": leaves })),
    })
}

/// Writes a leaf's values back as row text; `None` if a row cannot show it.
fn row_of_leaf(value: &Value, exclude: bool) -> Option<Row> {
    let (attribute, values) = value.as_object()?.iter().next()?;
    if !ATTRIBUTES.iter().any(|(name, _)| name == attribute) {
        return None;
    }
    let text = match (attribute.as_str(), values) {
        ("key_value", Value::Object(kv)) => {
            let key = kv.get("key")?.as_str()?;
            let values: Vec<&str> = kv
                .get("values")?
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            format!("{key}={}", values.join(", "))
        }
        (attribute, Value::Array(items)) => items
            .iter()
            .map(|item| match (attribute, item) {
                ("hour", Value::Object(r)) => Some(format!("{}-{}", r.get("from")?, r.get("to")?)),
                ("size", Value::Object(s)) => Some(format!("{}x{}", s.get("w")?, s.get("h")?)),
                (_, Value::String(s)) => Some(s.clone()),
                (_, Value::Number(n)) => Some(n.to_string()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?
            .join(", "),
        _ => return None,
    };
    Some(Row {
        attribute: attribute.clone(),
        exclude,
        values: text,
    })
}

fn row_of(value: &Value) -> Option<Row> {
    match value.get("not") {
        Some(inner) => row_of_leaf(inner, true),
        None => row_of_leaf(value, false),
    }
}

/// The editor for a stored expression: rows when they can show it, else its JSON.
pub fn editor_for(targeting: Option<&Value>) -> Editor {
    let Some(value) = targeting.filter(|v| !v.is_null()) else {
        return Editor::default();
    };
    let rows = match value.get("all").and_then(Value::as_array) {
        Some(items) => items.iter().map(row_of).collect::<Option<Vec<_>>>(),
        None => row_of(value).map(|row| vec![row]),
    };
    match rows {
        Some(rows) => Editor { rows, json: None },
        None => Editor {
            rows: Vec::new(),
            json: Some(serde_json::to_string_pretty(value).unwrap_or_default()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(attribute: &str, exclude: bool, values: &str) -> Row {
        Row {
            attribute: attribute.into(),
            exclude,
            values: values.into(),
        }
    }

    #[test]
    fn rows_become_a_conjunction_and_back() {
        let editor = Editor {
            rows: vec![
                row("country", false, "DE, AT"),
                row("device_type", true, "Tablet"),
                row("key_value", false, "section=sport, news"),
                row("hour", false, "9-17"),
                row("placement", false, "3, 4"),
                row("os", false, ""),
            ],
            json: None,
        };
        let value = from_rows(&editor).unwrap().unwrap();
        assert_eq!(
            value,
            json!({ "all": [
                { "country": ["DE", "AT"] },
                { "not": { "device_type": ["tablet"] } },
                { "key_value": { "key": "section", "values": ["sport", "news"] } },
                { "hour": [{ "from": 9, "to": 17 }] },
                { "placement": [3, 4] },
            ]})
        );
        let back = editor_for(Some(&value));
        assert_eq!(back.json, None);
        assert_eq!(back.rows[0], row("country", false, "DE, AT"));
        assert_eq!(back.rows[1], row("device_type", true, "tablet"));
        assert_eq!(back.rows[2], row("key_value", false, "section=sport, news"));
        assert_eq!(back.rows[3], row("hour", false, "9-17"));
        assert_eq!(back.rows[4], row("placement", false, "3, 4"));
    }

    #[test]
    fn geo_and_network_rows_become_leaves_and_back() {
        let editor = Editor {
            rows: vec![
                row("metro", false, "807, 501"),
                row("postal", true, "10115, SW1A 1AA"),
                row("asn", false, "AS3320, 6805"),
                row("connection_type", false, "Cellular, satellite"),
            ],
            json: None,
        };
        let value = from_rows(&editor).unwrap().unwrap();
        assert_eq!(
            value,
            json!({ "all": [
                { "metro": [807, 501] },
                { "not": { "postal": ["10115", "SW1A 1AA"] } },
                { "asn": [3320, 6805] },
                { "connection_type": ["cellular", "satellite"] },
            ]})
        );
        let back = editor_for(Some(&value));
        assert_eq!(
            back.rows,
            [
                row("metro", false, "807, 501"),
                row("postal", true, "10115, SW1A 1AA"),
                row("asn", false, "3320, 6805"),
                row("connection_type", false, "cellular, satellite"),
            ]
        );
        for (attribute, values) in [("metro", "DMA 807"), ("asn", "3320x"), ("metro", "70000")] {
            let bad = Editor {
                rows: vec![row(attribute, false, values)],
                json: None,
            };
            assert!(
                from_rows(&bad).unwrap_err()[0].starts_with("row 1:"),
                "{values}"
            );
        }
    }

    fn form(fields: &[(&str, &str)]) -> FormData {
        FormData {
            fields: fields
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            upload: None,
        }
    }

    #[test]
    fn a_rows_choices_replace_its_text() {
        let posted = form(&[
            ("t_attr", "country"),
            ("t_op", "in"),
            ("t_values", "DE"),
            ("t_choice_0", "cellular"),
            ("t_attr", "connection_type"),
            ("t_op", "not_in"),
            ("t_values", "corporate"),
            ("t_choice_1", "cellular"),
            ("t_choice_1", "satellite"),
            ("t_attr", "connection_type"),
            ("t_op", "in"),
            ("t_values", "cable_dsl"),
        ]);
        let editor = rows_of_form(&posted);
        assert_eq!(
            editor.rows,
            [
                // Only attributes with choices read them.
                row("country", false, "DE"),
                row("connection_type", true, "cellular, satellite"),
                // Nothing chosen: the text counts.
                row("connection_type", false, "cable_dsl"),
            ]
        );
    }

    #[test]
    fn a_row_of_choices_shows_them_selected_and_no_text() {
        let (selects, text) = row("connection_type", false, "cellular, satellite").choice_selects();
        assert_eq!(text, "");
        assert_eq!(
            selects,
            [ChoiceSelect {
                attribute: "connection_type",
                options: vec![
                    ("cable_dsl", false),
                    ("cellular", true),
                    ("corporate", false),
                    ("satellite", true)
                ],
                shown: true,
            }]
        );
        // A value outside the choices stays as text, so that the row's error can be read.
        let (selects, text) = row("connection_type", false, "cellular, dialup").choice_selects();
        assert_eq!(text, "cellular, dialup");
        assert!(selects[0].shown && selects[0].options.iter().all(|(_, s)| !s));
        // Other attributes keep their text; their rows offer the select hidden.
        let (selects, text) = row("os", false, "iOS").choice_selects();
        assert_eq!(text, "iOS");
        assert!(!selects[0].shown);
    }

    #[test]
    fn the_choices_are_the_models_values() {
        for &(attribute, choices) in CHOICES {
            for choice in choices {
                let leaf = json!({ attribute: [choice] });
                assert!(
                    serde_json::from_value::<Targeting>(leaf.clone()).is_ok(),
                    "{leaf}"
                );
            }
        }
        let all: Vec<marquee_model::ConnectionType> =
            serde_json::from_value(json!(CONNECTION_TYPES)).unwrap();
        assert_eq!(all.len(), 4);
    }

    #[test]
    fn one_row_is_a_bare_leaf_and_no_rows_no_targeting() {
        let one = Editor {
            rows: vec![row("country", false, "DE")],
            json: None,
        };
        assert_eq!(from_rows(&one).unwrap(), Some(json!({ "country": ["DE"] })));
        assert_eq!(from_rows(&Editor::default()).unwrap(), None);
    }

    #[test]
    fn bad_values_name_their_row() {
        let editor = Editor {
            rows: vec![
                row("country", false, "DE"),
                row("device_type", false, "toaster"),
            ],
            json: None,
        };
        let errors = from_rows(&editor).unwrap_err();
        assert_eq!(
            errors,
            [
                "row 2: Device must be one of: desktop, phone, tablet, ctv, other, console; \
                 \"toaster\" is not"
            ]
        );
        let hour = Editor {
            rows: vec![row("hour", false, "nine")],
            json: None,
        };
        assert!(from_rows(&hour).unwrap_err()[0].contains("hour range"));
    }

    #[test]
    fn expressions_rows_cannot_show_are_edited_as_json() {
        let any = json!({ "any": [{ "country": ["DE"] }, { "os": ["iOS"] }] });
        let editor = editor_for(Some(&any));
        assert!(editor.rows.is_empty());
        let text = editor.json.clone().unwrap();
        assert_eq!(from_rows(&editor).unwrap(), Some(any));
        let broken = Editor {
            rows: Vec::new(),
            json: Some(text.replace("country", "planet")),
        };
        assert!(from_rows(&broken).unwrap_err()[0].starts_with("targeting JSON"));
    }
}
