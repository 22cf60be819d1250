//! Which writes a role may make to managed objects: one rule, asked by the API's handlers and
//! by the dashboard's forms alike, so the two cannot drift apart.

use marquee_model::{ObjectKind, Principal, Role};

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
    "only an admin can {verb} {collection}; {role} accounts read their own {singular} and \
     write only the objects under it",
    verb = change.verb(),
    collection = kind.collection(),
    role = role.as_str(),
    singular = kind.name(),
)]
pub struct WriteRefused {
    pub kind: ObjectKind,
    pub change: Change,
    pub role: Role,
}

/// Whether `principal` may make `change` to objects of `kind`, once its role may access the
/// kind at all (`Principal::may_access`, checked first by the callers).
///
/// Top-level objects (advertisers, publishers) carry what the operator decides for a tenant:
/// its status (a paused advertiser on a credit hold stops spending), its currency, the
/// landing domains exchanges check their block lists against. So only an admin creates,
/// changes or archives them; a tenant's token or user reads its own and writes below it.
pub fn check_write(
    principal: &Principal,
    kind: ObjectKind,
    change: Change,
) -> Result<(), WriteRefused> {
    if kind.parent().is_none() && principal.role != Role::Admin {
        return Err(WriteRefused {
            kind,
            change,
            role: principal.role,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let refused = check_write(&advertiser, ObjectKind::Advertiser, Change::Update).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "only an admin can change advertisers; advertiser accounts read their own \
             advertiser and write only the objects under it"
        );
    }
}
