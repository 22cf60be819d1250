//! The object forms, described as data: which fields a kind has, how each is shown and how
//! its text becomes JSON. The JSON is then read into the model type and validated by the
//! model's own rules, exactly as the API does, so a form accepts what the API accepts and
//! names the same field paths in its errors.

use std::collections::BTreeMap;

use marquee_api::ApiError;
use marquee_model::{Object, ObjectKind, Violation};
use serde_json::{Map, Value, json};

use crate::form::FormData;
use crate::targeting;

/// How a field is edited and converted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Widget {
    Text,
    /// Empty text leaves the field out (JSON null / default).
    OptText,
    TextArea,
    Number,
    OptNumber,
    /// An amount of money in the advertiser's currency, typed as people write it (`2.50`,
    /// `500`) and read by the API's amount fields (`marquee_api::amounts`).
    Money,
    /// A goal's amount: money in the currency for a spend goal, else a count; empty leaves it
    /// out.
    GoalAmount,
    /// A local date and time (`datetime-local`).
    DateTime,
    OptDateTime,
    Select(&'static [&'static str]),
    /// A select whose empty choice leaves the field out.
    OptSelect(&'static [&'static str]),
    /// Comma-separated strings.
    List,
    /// Several check boxes of the same name.
    Checks(&'static [&'static str]),
    /// Comma-separated `WxH` sizes.
    Sizes,
    /// One optional `WxH` size.
    OptSize,
    /// The id of the parent object, chosen from a list (fixed once created).
    Parent(ObjectKind),
}

/// When a field takes part: always, or only when another field has a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Always,
    Equals(&'static str, &'static str),
    NotEmpty(&'static str),
}

#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The JSON path, dots between objects (`price.amount`); also the form name.
    pub name: &'static str,
    pub label: &'static str,
    pub widget: Widget,
    pub when: When,
    pub help: &'static str,
}

const fn field(name: &'static str, label: &'static str, widget: Widget) -> Field {
    Field {
        name,
        label,
        widget,
        when: When::Always,
        help: "",
    }
}

/// The field naming an object's parent, chosen from the objects of `kind`.
const fn parent(name: &'static str, label: &'static str, kind: ObjectKind) -> Field {
    field(name, label, Widget::Parent(kind))
}

const fn help(mut f: Field, text: &'static str) -> Field {
    f.help = text;
    f
}

const fn when(mut f: Field, condition: When) -> Field {
    f.when = condition;
    f
}

pub const STATUSES: &[&str] = &["active", "paused"];
const TIERS: &[&str] = &["sponsorship", "standard", "remnant", "house"];
const PACING: &[&str] = &["even", "asap", "front_loaded"];
const PRICING: &[&str] = &["cpm", "cpc", "flat"];
const GOAL_METRICS: &[&str] = &["impressions", "clicks", "spend"];
const ROTATION: &[&str] = &["even", "weighted", "optimized_ctr"];
const CHANNELS: &[&str] = &["direct", "exchange"];
const FORMATS: &[&str] = &["banner", "video", "native", "audio"];
const IMAGE_TAG: &[&str] = &["off", "on"];
const UNTOKENED_CLICKS: &[&str] = &["free", "charged"];
/// The creative contents the form edits; native and VAST creatives are edited through the API.
pub const CONTENT_TYPES: &[&str] = &["image", "html", "third_party_tag"];

// The form tables below are data, one entry a field: entries of the same shape (a name, a label,
// a widget, a help text) in every table are deliberate, not logic to share.
const ADVERTISER: &[Field] = &[
    field("name", "Name", Widget::Text),
    field("status", "Status", Widget::Select(STATUSES)),
    help(
        field("currency", "Currency", Widget::Text),
        "ISO 4217 code, such as USD or EUR, of its line items' prices and its reports; \
         fixed once a line item is priced in it",
    ),
    help(
        field("time_zone", "Time zone", Widget::Text),
        "IANA name of its reports' days, such as Europe/Berlin",
    ),
    help(
        field("domains", "Landing domains", Widget::List),
        "comma-separated, such as shop.example",
    ),
];

const CAMPAIGN: &[Field] = &[
    parent("advertiser_id", "Advertiser", ObjectKind::Advertiser),
    field("name", "Name", Widget::Text),
    field("status", "Status", Widget::Select(STATUSES)),
    help(
        field("categories", "IAB categories", Widget::List),
        "comma-separated, such as IAB2-3",
    ),
    field("app_bundle", "Advertised app bundle", Widget::OptText),
];

const LINE_ITEM: &[Field] = &[
    parent("campaign_id", "Campaign", ObjectKind::Campaign),
    field("name", "Name", Widget::Text),
    field("status", "Status", Widget::Select(STATUSES)),
    help(
        field("start", "Start", Widget::DateTime),
        "local time in the time zone below",
    ),
    help(
        field("end", "End", Widget::OptDateTime),
        "exclusive; empty for an open-ended flight",
    ),
    help(
        field("time_zone", "Time zone", Widget::Text),
        "IANA name, such as America/New_York; also the zone of day and hour targeting",
    ),
    field("tier", "Tier", Widget::Select(TIERS)),
    help(
        field("weight", "Weight", Widget::Number),
        "share within the tier, 1 to 1000",
    ),
    field("price.model", "Pricing", Widget::Select(PRICING)),
    help(
        field("price.amount", "Price", Widget::Money),
        "in the price currency, per thousand impressions (CPM), per click (CPC) or for the \
         flight (flat)",
    ),
    help(
        field("price.currency", "Price currency", Widget::Text),
        "the advertiser's currency",
    ),
    help(
        field("goal.metric", "Goal", Widget::OptSelect(GOAL_METRICS)),
        "none: delivers without pacing or budget leases",
    ),
    help(
        when(
            field("goal.daily", "Daily goal", Widget::GoalAmount),
            When::NotEmpty("goal.metric"),
        ),
        "spend: an amount in the price currency, such as 500; impressions or clicks: a count",
    ),
    help(
        when(
            field("goal.lifetime", "Lifetime goal", Widget::GoalAmount),
            When::NotEmpty("goal.metric"),
        ),
        "for the whole flight, in the same unit",
    ),
    // Deliberately the same shape as the other entries and tables: data.
    field("pacing", "Pacing", Widget::Select(PACING)),
    field("rotation", "Creative rotation", Widget::Select(ROTATION)),
    field("channels", "Channels", Widget::Checks(CHANNELS)),
    help(
        field("deals", "Deal ids", Widget::List),
        "comma-separated; only for the exchange channel",
    ),
    help(
        field(
            "untokened_clicks",
            "Image-tag clicks",
            Widget::Select(UNTOKENED_CLICKS),
        ),
        "charged: a CPC price is paid for clicks of the e-mail image tag (unsigned)",
    ),
];

// Same shape as the tables above, deliberately: data, one entry a field.
const CREATIVE: &[Field] = &[
    parent("line_item_id", "Line item", ObjectKind::LineItem),
    field("name", "Name", Widget::Text),
    field("status", "Status", Widget::Select(STATUSES)),
    help(
        field("size", "Size", Widget::OptSize),
        "WxH, such as 300x250",
    ),
    field("landing_url", "Landing URL", Widget::Text),
    help(
        field("weight", "Weight", Widget::Number),
        "share in weighted rotation, 1 to 1000",
    ),
    field("content.type", "Content", Widget::Select(CONTENT_TYPES)),
    help(
        when(
            field("content.image_url", "Image URL", Widget::Text),
            When::Equals("content.type", "image"),
        ),
        "or upload an image below",
    ),
    when(
        field("content.alt", "Alt text", Widget::Text),
        When::Equals("content.type", "image"),
    ),
    when(
        field("content.html", "HTML", Widget::TextArea),
        When::Equals("content.type", "html"),
    ),
    when(
        field("content.tag", "Third-party tag", Widget::TextArea),
        When::Equals("content.type", "third_party_tag"),
    ),
    help(
        field("categories", "IAB categories", Widget::List),
        "comma-separated; empty: the campaign's",
    ),
];

const PUBLISHER: &[Field] = &[
    field("name", "Name", Widget::Text),
    field("status", "Status", Widget::Select(STATUSES)),
];

const SITE: &[Field] = &[
    parent("publisher_id", "Publisher", ObjectKind::Publisher),
    field("name", "Name", Widget::Text),
    field("status", "Status", Widget::Select(STATUSES)),
    field("domain", "Domain", Widget::Text),
];

// Same shape as the tables above, deliberately: data, one entry a field.
const PLACEMENT: &[Field] = &[
    parent("site_id", "Site", ObjectKind::Site),
    field("name", "Name", Widget::Text),
    field("status", "Status", Widget::Select(STATUSES)),
    help(
        field("sizes", "Sizes", Widget::Sizes),
        "comma-separated WxH, such as 300x250, 728x90",
    ),
    field("formats", "Formats", Widget::Checks(FORMATS)),
    help(
        field("image_tag", "Image tag", Widget::Select(IMAGE_TAG)),
        "on: answers the unsigned e-mail image tag, counted under the traffic-quality rules",
    ),
    help(
        field(
            "programmatic.timeout_ms",
            "Programmatic timeout (ms)",
            Widget::OptNumber,
        ),
        "set (such as 300) to auction ad requests among the gateway's bidders; empty: direct \
         line items only",
    ),
    // The programmatic entries: deliberately the same shape as the line item's goal entries.
    when(
        field(
            "programmatic.floor_micros",
            "Programmatic floor",
            Widget::Money,
        ),
        When::NotEmpty("programmatic.timeout_ms"),
    ),
    help(
        when(
            field(
                "programmatic.revenue_share_permille",
                "Revenue share (‰)",
                Widget::OptNumber,
            ),
            When::NotEmpty("programmatic.timeout_ms"),
        ),
        "the publisher's cut of a bid, per mille: 100 is 10 %",
    ),
    help(
        when(
            field("programmatic.bidders", "Bidders", Widget::List),
            When::NotEmpty("programmatic.timeout_ms"),
        ),
        "comma-separated gateway bidder names; empty: all",
    ),
];

/// The form of a kind, and whether it has frequency-cap and targeting rows.
pub fn fields(kind: ObjectKind) -> &'static [Field] {
    match kind {
        ObjectKind::Advertiser => ADVERTISER,
        ObjectKind::Campaign => CAMPAIGN,
        ObjectKind::LineItem => LINE_ITEM,
        ObjectKind::Creative => CREATIVE,
        ObjectKind::Publisher => PUBLISHER,
        ObjectKind::Site => SITE,
        ObjectKind::Placement => PLACEMENT,
    }
}

pub fn has_caps(kind: ObjectKind) -> bool {
    matches!(kind, ObjectKind::Campaign | ObjectKind::LineItem)
}

pub fn has_targeting(kind: ObjectKind) -> bool {
    kind == ObjectKind::LineItem
}

/// Values a new object's form starts with.
pub fn defaults(kind: ObjectKind) -> Value {
    match kind {
        ObjectKind::Advertiser => json!({ "currency": "USD", "time_zone": "UTC" }),
        ObjectKind::LineItem => json!({
            "time_zone": "UTC", "tier": "standard", "weight": 100, "pacing": "even",
            "rotation": "even", "channels": ["direct"], "untokened_clicks": "free",
            "price": { "model": "cpm", "currency": "USD" },
        }),
        ObjectKind::Creative => json!({ "weight": 100, "content": { "type": "image" } }),
        ObjectKind::Placement => json!({ "formats": ["banner"], "image_tag": "off" }),
        ObjectKind::Campaign | ObjectKind::Publisher | ObjectKind::Site => json!({}),
    }
}

/// Error messages by form field name (`$` for the object as a whole).
pub type Errors = BTreeMap<String, Vec<String>>;

pub fn add_error(errors: &mut Errors, field: &str, message: impl Into<String>) {
    errors
        .entry(field.to_owned())
        .or_default()
        .push(message.into());
}

/// The form field a violation's JSON path belongs to: the field with the longest name that
/// is the path or a prefix of it ending at `.` or `[`; then the cap and targeting sections;
/// else the whole object.
pub fn field_of(kind: ObjectKind, path: &str) -> String {
    let covers = |name: &str| {
        path == name
            || path
                .strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    };
    if let Some(best) = fields(kind)
        .iter()
        .map(|f| f.name)
        .filter(|name| covers(name))
        .max_by_key(|name| name.len())
    {
        return best.to_owned();
    }
    // A rule on a whole group (`goal`, `content`, `price`) shows at its first field.
    if let Some(first) = fields(kind).iter().find(|f| {
        f.name
            .strip_prefix(path)
            .is_some_and(|r| r.starts_with('.'))
    }) {
        return first.name.to_owned();
    }
    for section in ["frequency_caps", "targeting", UPLOAD_FIELD] {
        if covers(section) {
            return section.to_owned();
        }
    }
    "$".to_owned()
}

/// The creative form's file input: errors about the uploaded image are filed under it.
pub const UPLOAD_FIELD: &str = "image_file";

/// Files violations under their form fields.
pub fn file_violations(kind: ObjectKind, violations: &[Violation], errors: &mut Errors) {
    for v in violations {
        add_error(errors, &field_of(kind, &v.path), v.message.clone());
    }
}

/// Reads the value at a dotted path.
pub fn get_path<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(value, |v, key| v.get(key))
}

fn set_path(object: &mut Map<String, Value>, path: &str, value: Value) {
    match path.split_once('.') {
        None => {
            object.insert(path.to_owned(), value);
        }
        Some((head, rest)) => {
            let child = object
                .entry(head.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if !child.is_object() {
                *child = Value::Object(Map::new());
            }
            if let Value::Object(child) = child {
                set_path(child, rest, value);
            }
        }
    }
}

/// A size typed as `300x250`, if it is one.
pub fn parse_size_text(text: &str) -> Option<marquee_model::Size> {
    let (w, h) = text.trim().split_once(['x', 'X', '×'])?;
    Some(marquee_model::Size {
        w: w.trim().parse().ok()?,
        h: h.trim().parse().ok()?,
    })
}

fn parse_size(text: &str) -> Result<Value, String> {
    let (w, h) = text
        .trim()
        .split_once(['x', 'X', '×'])
        .ok_or_else(|| format!("{text:?} is not a size such as 300x250"))?;
    let side = |s: &str| {
        s.trim()
            .parse::<u32>()
            .map_err(|_| format!("{text:?} is not a size such as 300x250"))
    };
    Ok(json!({ "w": side(w)?, "h": side(h)? }))
}

fn split_list(text: &str) -> Vec<&str> {
    text.split([',', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

fn condition_holds(condition: When, form: &FormData) -> bool {
    match condition {
        When::Always => true,
        When::Equals(other, value) => form.get(other) == value,
        When::NotEmpty(other) => !form.get(other).is_empty(),
    }
}

/// The JSON object a form describes. Text that cannot become its field's type is filed in
/// `errors` under the field; `fixed_parent` replaces the parent field on an edit (a parent
/// never changes).
pub fn form_to_json(
    kind: ObjectKind,
    form: &FormData,
    fixed_parent: Option<u64>,
    errors: &mut Errors,
) -> Value {
    let mut object = Map::new();
    for f in fields(kind) {
        if !condition_holds(f.when, form) {
            continue;
        }
        let text = form.get(f.name);
        let value = match f.widget {
            Widget::Text | Widget::TextArea | Widget::Select(_) => Ok(Some(json!(text))),
            Widget::OptText | Widget::OptSelect(_) => Ok((!text.is_empty()).then(|| json!(text))),
            Widget::Number | Widget::OptNumber | Widget::Parent(_) => {
                let parent = matches!(f.widget, Widget::Parent(_)).then_some(fixed_parent);
                match (parent.flatten(), text) {
                    (Some(id), _) => Ok(Some(json!(id))),
                    (None, "") if f.widget == Widget::OptNumber => Ok(None),
                    (None, "") => Err("is required".to_owned()),
                    (None, text) => text
                        .parse::<u64>()
                        .map(|n| Some(json!(n)))
                        .map_err(|_| format!("{text:?} is not a whole number")),
                }
            }
            // The API's amount fields read the text in the currency, exactly.
            Widget::Money => match text.trim() {
                "" => Err("is required".to_owned()),
                t => Ok(Some(json!(t))),
            },
            Widget::GoalAmount => Ok((!text.trim().is_empty()).then(|| json!(text.trim()))),
            Widget::DateTime | Widget::OptDateTime => match text {
                "" if f.widget == Widget::OptDateTime => Ok(None),
                "" => Err("is required".to_owned()),
                // `datetime-local` sends minutes only; the model wants seconds.
                t if t.len() == 16 => Ok(Some(json!(format!("{t}:00")))),
                t => Ok(Some(json!(t))),
            },
            Widget::List => Ok(Some(json!(split_list(text)))),
            Widget::Checks(_) => Ok(Some(json!(form.all(f.name)))),
            Widget::Sizes => split_list(text)
                .into_iter()
                .map(parse_size)
                .collect::<Result<Vec<_>, _>>()
                .map(|sizes| Some(Value::Array(sizes))),
            Widget::OptSize => match text {
                "" => Ok(None),
                t => parse_size(t).map(Some),
            },
        };
        match value {
            Ok(Some(value)) => set_path(&mut object, f.name, value),
            Ok(None) => {}
            Err(message) => add_error(errors, f.name, message),
        }
    }
    if kind == ObjectKind::LineItem && form.get("goal.metric").is_empty() {
        object.remove("goal");
    }
    if has_caps(kind) {
        let caps = read_caps(form, errors);
        object.insert("frequency_caps".into(), caps);
    }
    if has_targeting(kind) {
        match targeting::from_rows(&targeting::rows_of_form(form)) {
            Ok(Some(expression)) => {
                object.insert("targeting".into(), expression);
            }
            Ok(None) => {}
            Err(messages) => {
                for message in messages {
                    add_error(errors, "targeting", message);
                }
            }
        }
    }
    Value::Object(object)
}

/// The object a form describes, read and checked in one pass as the API reads a request
/// (`marquee_api::read_object`): every problem at once, the form's own (text that cannot
/// become its field's type, in `errors` already) with the model's, filed under their fields.
pub fn read<T: Object>(
    form: &FormData,
    fixed_parent: Option<u64>,
    mut errors: Errors,
) -> Result<T, Errors> {
    let value = form_to_json(T::KIND, form, fixed_parent, &mut errors);
    let reported = errors
        .iter()
        .flat_map(|(field, messages)| {
            messages.iter().map(|message| Violation {
                path: field.clone(),
                message: message.clone(),
            })
        })
        .collect();
    let violations = match marquee_api::read_object::<T>(value, None, reported) {
        Ok(object) => return Ok(object),
        Err(ApiError::Invalid(error)) => error.violations,
        Err(ApiError::BadRequest { fields, .. }) => fields,
        Err(other) => vec![Violation {
            path: "$".into(),
            message: other.to_string(),
        }],
    };
    let mut errors = Errors::new();
    file_violations(T::KIND, &violations, &mut errors);
    Err(errors)
}

/// Frequency-cap rows: `cap_count` and `cap_window`, blank rows skipped.
fn read_caps(form: &FormData, errors: &mut Errors) -> Value {
    let counts = form.all("cap_count");
    let windows = form.all("cap_window");
    let mut caps = Vec::new();
    for (i, (count, window)) in counts.iter().zip(windows.iter()).enumerate() {
        if count.is_empty() && window.is_empty() {
            continue;
        }
        match count.parse::<u32>() {
            Ok(count) => caps.push(json!({ "count": count, "window": window })),
            Err(_) => add_error(
                errors,
                "frequency_caps",
                format!("row {}: {count:?} is not a whole number", i + 1),
            ),
        }
    }
    Value::Array(caps)
}

/// How a stored value is shown in its field.
pub fn display(widget: Widget, value: Option<&Value>) -> String {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return String::new();
    };
    match (widget, value) {
        (Widget::DateTime | Widget::OptDateTime, Value::String(s)) => {
            // `2026-12-01T00:00:00` → `2026-12-01T00:00` for `datetime-local`.
            s.strip_suffix(":00")
                .filter(|t| t.len() == 16)
                .unwrap_or(s)
                .to_owned()
        }
        (Widget::Sizes, Value::Array(sizes)) => sizes
            .iter()
            .map(|s| display(Widget::OptSize, Some(s)))
            .collect::<Vec<_>>()
            .join(", "),
        (Widget::OptSize, Value::Object(size)) => format!(
            "{}x{}",
            size.get("w").unwrap_or(&Value::Null),
            size.get("h").unwrap_or(&Value::Null)
        ),
        (Widget::List, Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
            .collect::<Vec<_>>()
            .join(", "),
        (_, Value::String(s)) => s.clone(),
        (_, other) => other.to_string(),
    }
}

/// The values of a check-box field.
pub fn checked(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use marquee_model::{LineItem, Micros};

    use super::*;

    fn form(pairs: &[(&str, &str)]) -> FormData {
        FormData {
            fields: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            upload: None,
        }
    }

    fn line_item_form(extra: &[(&str, &str)]) -> FormData {
        let mut pairs = vec![
            ("campaign_id", "4"),
            ("name", "Winter"),
            ("status", "active"),
            ("start", "2026-12-01T00:00"),
            ("end", ""),
            ("time_zone", "Europe/Berlin"),
            ("tier", "standard"),
            ("weight", "100"),
            ("untokened_clicks", "free"),
            ("price.model", "cpm"),
            ("price.amount", "2.5"),
            ("price.currency", "EUR"),
            ("goal.metric", ""),
            ("goal.daily", "5"),
            ("pacing", "even"),
            ("rotation", "even"),
            ("channels", "direct"),
            ("deals", ""),
            ("cap_count", "3"),
            ("cap_window", "1d"),
            ("cap_count", ""),
            ("cap_window", ""),
            ("t_attr", "country"),
            ("t_op", "in"),
            ("t_values", "DE, AT"),
        ];
        pairs.extend_from_slice(extra);
        form(&pairs)
    }

    #[test]
    fn a_line_item_form_becomes_a_valid_line_item() {
        let line_item: LineItem = read(&line_item_form(&[]), None, Errors::new()).unwrap();
        assert_eq!(line_item.price.amount_micros, Micros(2_500_000));
        assert_eq!(line_item.goal, None, "no metric, no goal");
        assert_eq!(line_item.frequency_caps.len(), 1);
        assert_eq!(
            serde_json::to_value(&line_item.targeting).unwrap(),
            json!({ "country": ["DE", "AT"] })
        );
        assert_eq!(line_item.start.to_string(), "2026-12-01T00:00:00");
    }

    #[test]
    fn a_spend_goal_is_typed_in_the_currency() {
        let form = line_item_form(&[])
            .with("goal.metric", "spend")
            .with("goal.daily", "500")
            .with("goal.lifetime", "12000.50");
        let line_item: LineItem = read(&form, None, Errors::new()).unwrap();
        let goal = line_item.goal.unwrap();
        assert_eq!(goal.daily, Some(500_000_000), "500 EUR, not 500 micros");
        assert_eq!(goal.lifetime, Some(12_000_500_000));
        let count = line_item_form(&[])
            .with("goal.metric", "impressions")
            .with("goal.daily", "20000");
        let line_item: LineItem = read(&count, None, Errors::new()).unwrap();
        assert_eq!(line_item.goal.unwrap().daily, Some(20_000));
    }

    #[test]
    fn every_problem_is_found_in_one_pass() {
        let form = line_item_form(&[])
            .with("goal.metric", "spend")
            .with("goal.daily", "12.345")
            .with("weight", "heavy")
            .with("end", "2026-11-01T00:00")
            .with("t_attr", "device_type")
            .with("t_values", "mobile");
        let errors = read::<LineItem>(&form, None, Errors::new()).unwrap_err();
        assert_eq!(errors["weight"], ["\"heavy\" is not a whole number"]);
        assert_eq!(
            errors["goal.daily"],
            ["\"12.345\" has more decimals than EUR has (2)"]
        );
        assert!(
            errors["end"][0].starts_with("must be after start"),
            "{errors:?}"
        );
        assert_eq!(
            errors["targeting"],
            [
                "row 1: Device must be one of: desktop, phone, tablet, ctv, other, console; \
              \"mobile\" is not"
            ]
        );
        assert_eq!(errors.len(), 4, "{errors:?}");
        let text = format!("{errors:?}");
        for serde_words in ["variant", "expected", "`", "u32", "micros"] {
            assert!(!text.contains(serde_words), "{serde_words} in {text}");
        }
    }

    #[test]
    fn model_violations_land_at_their_fields() {
        let errors = read::<LineItem>(
            &line_item_form(&[]).with("price.amount", "-1"),
            None,
            Errors::new(),
        )
        .unwrap_err();
        assert_eq!(errors["price.amount"], ["must not be negative"]);
        assert_eq!(
            field_of(ObjectKind::LineItem, "price.amount"),
            "price.amount"
        );
        assert_eq!(field_of(ObjectKind::LineItem, "goal"), "goal.metric");
        assert_eq!(
            field_of(ObjectKind::LineItem, "frequency_caps[0].count"),
            "frequency_caps"
        );
        assert_eq!(
            field_of(ObjectKind::LineItem, "targeting.all[1]"),
            "targeting"
        );
        assert_eq!(field_of(ObjectKind::Placement, "sizes[0].w"), "sizes");
        assert_eq!(field_of(ObjectKind::Placement, "$"), "$");
    }

    #[test]
    fn conditional_fields_follow_their_switch() {
        let mut errors = Errors::new();
        let value = form_to_json(
            ObjectKind::Creative,
            &form(&[
                ("line_item_id", "9"),
                ("name", "Banner"),
                ("status", "active"),
                ("size", "300x250"),
                ("landing_url", "https://shop.example/"),
                ("weight", "1"),
                ("content.type", "html"),
                ("content.image_url", "https://cdn.example/a.png"),
                ("content.html", "<b>Hi</b>"),
                ("categories", ""),
            ]),
            Some(7),
            &mut errors,
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            value["content"],
            json!({ "type": "html", "html": "<b>Hi</b>" })
        );
        assert_eq!(value["line_item_id"], json!(7), "the fixed parent wins");
        assert_eq!(value["size"], json!({ "w": 300, "h": 250 }));
    }

    #[test]
    fn stored_values_show_as_they_are_typed() {
        let sizes = json!([{ "w": 300, "h": 250 }, { "w": 728, "h": 90 }]);
        assert_eq!(display(Widget::Sizes, Some(&sizes)), "300x250, 728x90");
        assert_eq!(
            display(Widget::DateTime, Some(&json!("2026-12-01T08:30:00"))),
            "2026-12-01T08:30"
        );
        assert_eq!(display(Widget::Money, Some(&json!("1.50"))), "1.50");
        assert_eq!(display(Widget::List, Some(&json!(["a", "b"]))), "a, b");
        assert_eq!(display(Widget::OptText, Some(&Value::Null)), "");
        assert_eq!(display(Widget::Number, Some(&json!(7))), "7");
    }

    impl FormData {
        /// The form with `name` set to `value` (replacing every value it had).
        fn with(mut self, name: &str, value: &str) -> FormData {
            self.fields.retain(|(k, _)| k != name);
            self.fields.push((name.to_owned(), value.to_owned()));
            self
        }
    }
}
