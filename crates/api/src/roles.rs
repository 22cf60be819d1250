//! Which writes a role may make to managed objects: one rule, asked by the API's handlers and
//! by the dashboard's forms alike, so the two cannot drift apart.

use marquee_model::{Approval, Object, ObjectKind, Principal, Role, Violation};
use serde_json::Value;

/// A write to a managed object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Create,
    /// Replacing a stored object (`PUT`, the dashboard's Save).
    Update,
    Archive,
}

impl Change {
    fn verb(self) -> &'static str {
        match self {
            Change::Create => "create",
            Change::Update => "change",
            Change::Archive => "archive",
        }
    }
}

/// A write the principal's role may not make.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "only an admin can {verb} {collection}; {why}",
    verb = change.verb(),
    collection = kind.collection(),
    why = why(*kind, *role),
)]
pub struct WriteRefused {
    pub kind: ObjectKind,
    pub change: Change,
    pub role: Role,
}

fn why(kind: ObjectKind, role: Role) -> String {
    if kind == ObjectKind::LineItem {
        return "a line item is the publisher's booking (its tier, price and goal): \
                advertiser accounts edit their line items' other fields and propose creatives"
            .to_owned();
    }
    format!(
        "{role} accounts read their own {singular} and write only the objects under it",
        role = role.as_str(),
        singular = kind.name(),
    )
}

/// Whether `principal` may make `change` to objects of `kind`, once its role may access the
/// kind at all (`Principal::may_access`, checked first by the callers).
///
/// Top-level objects (advertisers, publishers) carry what the operator decides for a tenant:
/// its status (a paused advertiser on a credit hold stops spending), its currency, the
/// landing domains exchanges check their block lists against. So only an admin creates,
/// changes or archives them; a tenant's token or user reads its own and writes below it.
///
/// A line item is what the publisher sold: only an admin books (creates) or cancels
/// (archives) one. An advertiser changes its line items' other fields ([`check_fields`]) and
/// proposes creatives under them.
pub fn check_write(
    principal: &Principal,
    kind: ObjectKind,
    change: Change,
) -> Result<(), WriteRefused> {
    let booking = kind == ObjectKind::LineItem && change != Change::Update;
    if principal.role != Role::Admin && (kind.parent().is_none() || booking) {
        return Err(WriteRefused {
            kind,
            change,
            role: principal.role,
        });
    }
    Ok(())
}

/// The fields of `kind` that only an admin sets: a line item's tier and weight (its
/// priority), price, goal and pacing are what the publisher sold. (Its placement links are
/// admin-only too, in `links.rs`.)
pub fn admin_fields(kind: ObjectKind) -> &'static [&'static str] {
    match kind {
        ObjectKind::LineItem => &["tier", "weight", "price", "goal", "pacing"],
        _ => &[],
    }
}

/// A write that sets fields the principal's role may not change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "only an admin can change a {singular}'s {list}: the publisher decides them",
    singular = kind.name(),
    list = fields.join(", "),
)]
pub struct FieldsRefused {
    pub kind: ObjectKind,
    /// The fields the write changed, in [`admin_fields`] order.
    pub fields: Vec<&'static str>,
}

impl FieldsRefused {
    /// One violation per refused field, for the error's `fields` (and a form's inputs).
    pub fn violations(&self) -> Vec<Violation> {
        self.fields
            .iter()
            .map(|field| Violation {
                path: (*field).to_owned(),
                message: "is the publisher's decision: only an admin can change it".to_owned(),
            })
            .collect()
    }
}

/// A write's object with the server's rules applied, or why it is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuleError {
    #[error(transparent)]
    Fields(#[from] FieldsRefused),
    /// The object did not convert to or from JSON (a bug, not the caller's mistake).
    #[error("{0}")]
    Json(String),
}

/// Applies the role rules that depend on an object's fields to a write by `principal`:
/// `before` is the stored object (none for a create), `after` what the write makes of it.
///
/// - A non-admin may not change [`admin_fields`]; values equal to the stored ones pass, so a
///   client that sends back the whole object it read still works.
/// - A creative's approval is the server's, never the body's: an admin's new creative is
///   approved, anyone else's pending; an update keeps the stored state, except that a
///   non-admin's change to the content or landing URL sends it back to pending.
pub fn govern_write<T: Object>(
    principal: &Principal,
    before: Option<&T>,
    after: T,
) -> Result<T, RuleError> {
    let admin = principal.role == Role::Admin;
    let kind = T::KIND;
    if admin && kind != ObjectKind::Creative {
        return Ok(after);
    }
    let json =
        |object: &T| serde_json::to_value(object).map_err(|e| RuleError::Json(e.to_string()));
    let before = before.map(json).transpose()?;
    let mut after_json = json(&after)?;
    let stored = |field: &str| before.as_ref().and_then(|b| b.get(field));
    if !admin {
        let fields: Vec<&'static str> = admin_fields(kind)
            .iter()
            .copied()
            .filter(|field| stored(field) != after_json.get(*field))
            .collect();
        if !fields.is_empty() {
            return Err(FieldsRefused { kind, fields }.into());
        }
    }
    if kind != ObjectKind::Creative {
        return Ok(after);
    }
    let edited = ["content", "landing_url"]
        .into_iter()
        .any(|field| stored(field) != after_json.get(field));
    let approval = match &before {
        None if admin => Approval::Approved,
        None => Approval::Pending,
        Some(_) if !admin && edited => Approval::Pending,
        Some(_) => match stored("approval") {
            Some(state) => {
                serde_json::from_value(state.clone()).map_err(|e| RuleError::Json(e.to_string()))?
            }
            None => Approval::default(),
        },
    };
    if let Value::Object(fields) = &mut after_json {
        fields.insert(
            "approval".to_owned(),
            serde_json::to_value(approval).map_err(|e| RuleError::Json(e.to_string()))?,
        );
    }
    serde_json::from_value(after_json).map_err(|e| RuleError::Json(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use marquee_model::{Creative, LineItem, Tier};

    fn principal(role: Role, owner_id: Option<u64>) -> Principal {
        Principal {
            token_id: 1,
            role,
            owner_id,
        }
    }

    #[test]
    fn only_an_admin_writes_top_level_objects() {
        let changes = [Change::Create, Change::Update, Change::Archive];
        let admin = principal(Role::Admin, None);
        let advertiser = principal(Role::Advertiser, Some(3));
        let publisher = principal(Role::Publisher, Some(4));
        for change in changes {
            for kind in ObjectKind::ALL {
                assert_eq!(check_write(&admin, kind, change), Ok(()));
            }
            assert!(check_write(&advertiser, ObjectKind::Advertiser, change).is_err());
            assert!(check_write(&publisher, ObjectKind::Publisher, change).is_err());
            assert_eq!(
                check_write(&advertiser, ObjectKind::Campaign, change),
                Ok(())
            );
            assert_eq!(
                check_write(&publisher, ObjectKind::Placement, change),
                Ok(())
            );
        }
        for change in [Change::Create, Change::Archive] {
            assert!(check_write(&advertiser, ObjectKind::LineItem, change).is_err());
        }
        assert_eq!(
            check_write(&advertiser, ObjectKind::LineItem, Change::Update),
            Ok(())
        );
        let refused = check_write(&advertiser, ObjectKind::Advertiser, Change::Update).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "only an admin can change advertisers; advertiser accounts read their own \
             advertiser and write only the objects under it"
        );
    }

    fn read<T: Object>(value: Value) -> T {
        crate::read_object(value, None, Vec::new()).unwrap()
    }

    #[test]
    fn an_advertiser_may_not_change_what_the_publisher_sold_but_may_send_it_back() {
        let advertiser = principal(Role::Advertiser, Some(3));
        let stored: LineItem = read(crate::example(ObjectKind::LineItem));
        let mut renamed = stored.clone();
        renamed.name = "Boots, renamed".into();
        assert_eq!(
            govern_write(&advertiser, Some(&stored), renamed.clone()),
            Ok(renamed)
        );
        let mut raised = stored.clone();
        raised.tier = Tier::Sponsorship;
        raised.price.amount_micros.0 += 1;
        let Err(RuleError::Fields(refused)) =
            govern_write(&advertiser, Some(&stored), raised.clone())
        else {
            panic!("a raised tier and price pass");
        };
        assert_eq!(refused.fields, ["tier", "price"]);
        assert_eq!(
            refused.to_string(),
            "only an admin can change a line_item's tier, price: the publisher decides them"
        );
        let admin = principal(Role::Admin, None);
        assert_eq!(
            govern_write(&admin, Some(&stored), raised.clone()),
            Ok(raised)
        );
    }

    #[test]
    fn a_creative_is_approved_by_an_admin_and_an_advertisers_edit_sends_it_back() {
        let admin = principal(Role::Admin, None);
        let advertiser = principal(Role::Advertiser, Some(3));
        let mut proposed: Creative = read(crate::example(ObjectKind::Creative));
        // The body's claim is ignored.
        proposed.approval = Approval::Approved;
        let pending = govern_write(&advertiser, None, proposed.clone()).unwrap();
        assert_eq!(pending.approval, Approval::Pending);
        let made = govern_write(&admin, None, pending.clone()).unwrap();
        assert_eq!(made.approval, Approval::Approved);
        // Renaming keeps the state; a new landing URL needs a new review.
        let mut renamed = made.clone();
        renamed.name = "Renamed".into();
        assert_eq!(
            govern_write(&advertiser, Some(&made), renamed.clone())
                .unwrap()
                .approval,
            Approval::Approved
        );
        let mut moved = made.clone();
        moved.landing_url = "https://acme.example/elsewhere".into();
        assert_eq!(
            govern_write(&advertiser, Some(&made), moved.clone())
                .unwrap()
                .approval,
            Approval::Pending
        );
        assert_eq!(
            govern_write(&admin, Some(&made), moved).unwrap().approval,
            Approval::Approved
        );
    }
}
