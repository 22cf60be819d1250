use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Lifecycle of every object. `Archived` is final: an archived object is read-only and never
/// reaches a snapshot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    #[default]
    Active,
    Paused,
    Archived,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Paused => "paused",
            Status::Archived => "archived",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        [Status::Active, Status::Paused, Status::Archived]
            .into_iter()
            .find(|status| status.as_str() == s)
    }
}

/// Which side of the market an object belongs to; tenants are scoped to one side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Advertiser, campaign, line item, creative.
    Demand,
    /// Publisher, site, placement.
    Supply,
}

/// The kinds of managed object, in parent-before-child order per side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    Advertiser,
    Campaign,
    LineItem,
    Creative,
    Publisher,
    Site,
    Placement,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 7] = [
        ObjectKind::Advertiser,
        ObjectKind::Campaign,
        ObjectKind::LineItem,
        ObjectKind::Creative,
        ObjectKind::Publisher,
        ObjectKind::Site,
        ObjectKind::Placement,
    ];

    pub fn parent(self) -> Option<ObjectKind> {
        match self {
            ObjectKind::Advertiser | ObjectKind::Publisher => None,
            ObjectKind::Campaign => Some(ObjectKind::Advertiser),
            ObjectKind::LineItem => Some(ObjectKind::Campaign),
            ObjectKind::Creative => Some(ObjectKind::LineItem),
            ObjectKind::Site => Some(ObjectKind::Publisher),
            ObjectKind::Placement => Some(ObjectKind::Site),
        }
    }

    pub fn side(self) -> Side {
        match self {
            ObjectKind::Advertiser
            | ObjectKind::Campaign
            | ObjectKind::LineItem
            | ObjectKind::Creative => Side::Demand,
            ObjectKind::Publisher | ObjectKind::Site | ObjectKind::Placement => Side::Supply,
        }
    }

    /// The root kind of this kind's side; a tenant is one object of that kind.
    pub fn root(self) -> ObjectKind {
        match self.side() {
            Side::Demand => ObjectKind::Advertiser,
            Side::Supply => ObjectKind::Publisher,
        }
    }

    /// Singular snake_case name: `line_item`. Also the SQL table stem and the OpenAPI schema stem.
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Advertiser => "advertiser",
            ObjectKind::Campaign => "campaign",
            ObjectKind::LineItem => "line_item",
            ObjectKind::Creative => "creative",
            ObjectKind::Publisher => "publisher",
            ObjectKind::Site => "site",
            ObjectKind::Placement => "placement",
        }
    }

    /// URL collection segment: `line-items`.
    pub fn collection(self) -> &'static str {
        match self {
            ObjectKind::Advertiser => "advertisers",
            ObjectKind::Campaign => "campaigns",
            ObjectKind::LineItem => "line-items",
            ObjectKind::Creative => "creatives",
            ObjectKind::Publisher => "publishers",
            ObjectKind::Site => "sites",
            ObjectKind::Placement => "placements",
        }
    }

    /// The JSON field of a child that names its parent: `campaign_id` for a line item.
    pub fn parent_field(self) -> Option<&'static str> {
        match self {
            ObjectKind::Advertiser | ObjectKind::Publisher => None,
            ObjectKind::Campaign => Some("advertiser_id"),
            ObjectKind::LineItem => Some("campaign_id"),
            ObjectKind::Creative => Some("line_item_id"),
            ObjectKind::Site => Some("publisher_id"),
            ObjectKind::Placement => Some("site_id"),
        }
    }
}

/// What an API token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Everything.
    Admin,
    /// One advertiser's demand-side objects.
    Advertiser,
    /// One publisher's supply-side objects.
    Publisher,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Advertiser => "advertiser",
            Role::Publisher => "publisher",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        [Role::Admin, Role::Advertiser, Role::Publisher]
            .into_iter()
            .find(|role| role.as_str() == s)
    }

    /// The side a tenant role is confined to; `None` for admin.
    pub fn side(self) -> Option<Side> {
        match self {
            Role::Admin => None,
            Role::Advertiser => Some(Side::Demand),
            Role::Publisher => Some(Side::Supply),
        }
    }
}

/// The authenticated caller of the management API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Principal {
    pub token_id: u64,
    pub role: Role,
    /// The advertiser or publisher a tenant role is bound to; `None` for admin.
    pub owner_id: Option<u64>,
}

impl Principal {
    /// The owner a store query must be restricted to, or `None` when the caller sees everything.
    pub fn scope(&self) -> Option<u64> {
        match self.role {
            Role::Admin => None,
            Role::Advertiser | Role::Publisher => self.owner_id,
        }
    }

    /// Whether this principal may see objects of this kind at all.
    pub fn may_access(&self, kind: ObjectKind) -> bool {
        self.role.side().is_none_or(|side| side == kind.side())
    }
}
