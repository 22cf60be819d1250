//! The conformance suite every [`Store`] implementation runs, so that backends agree on
//! semantics, not just signatures.
//!
//! ```text
//! async fn fresh_store() -> (Arc<dyn Store>, Arc<ManualClock>, TempDir) { ... }
//! marquee_store::store_suite!(fresh_store());
//! ```
//!
//! The argument is an expression evaluating to a future of `(store, clock, guard)`; it is
//! evaluated afresh in every test, so each case gets an empty store. The store must take its
//! time from `clock`; `guard` is kept alive until the case ends (a temporary directory, a
//! server). The calling crate needs `tokio` with the `macros` and `rt` features.
//!
//! Attributes after the expression go on every generated test, as for a backend that needs a
//! server: `store_suite!(fresh_store(), #[ignore = "needs PostgreSQL: ..."])`.

// Test code: a panic is how a case fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use jiff::{SignedDuration, civil};
use marquee_model::{
    Advertiser, AdvertiserId, Campaign, CampaignId, CapWindow, Channel, Clock as _, Creative,
    CreativeAssignment, CreativeContent, CreativeId, Currency, DeviceType, Format, FrequencyCap,
    Goal, GoalMetric, LineItem, LineItemId, ManualClock, Micros, Object, ObjectKind, PacingMode,
    Placement, PlacementId, Price, PricingModel, Principal, Publisher, PublisherId, Role,
    RotationMode, Site, SiteId, Size, Status, Stored, Targeting, Tier,
};

use crate::{
    Actor, AuditAction, AuditEntry, AuditKind, AuditQuery, DeletedUser, Draft, ListQuery,
    LockAttempt, MAX_PAGE, NewSession, NewToken, NewUser, Store, StoreError,
};

/// Expands into one `#[tokio::test]` per conformance case; see the [module docs](self).
#[macro_export]
macro_rules! store_suite {
    (@cases $attrs:tt ($factory:expr) $($case:ident),* $(,)?) => {
        $(
            $crate::store_suite!(@case $attrs ($factory) $case);
        )*
    };
    (@case {$(#[$attr:meta])*} ($factory:expr) $case:ident) => {
        #[tokio::test]
        $(#[$attr])*
        async fn $case() {
            let (store, clock, _guard) = $factory.await;
            $crate::suite::$case(store, clock).await;
        }
    };
    ($factory:expr $(, #[$attr:meta])* $(,)?) => {
        $crate::store_suite!(@cases {$(#[$attr])*} ($factory)
            round_trip_every_kind,
            owner_is_derived_from_the_root,
            missing_objects_are_not_found,
            scopes_isolate_tenants,
            stale_version_conflicts,
            archived_objects_are_final,
            children_need_a_live_parent,
            parent_is_immutable,
            list_filters_and_pages,
            list_limit_is_clamped,
            timestamps_come_from_the_clock,
            links_connect_live_line_items_and_placements,
            tokens_resolve_to_principals,
            tokens_are_listed_and_revoked,
            users_are_found_by_name,
            sessions_resolve_to_their_user,
            deleting_a_user_deletes_its_sessions,
            one_manager_holds_the_lock_at_a_time,
            change_counter_counts_only_mutations,
            catalog_holds_active_rows_and_all_links,
            audit_records_each_change_with_its_fields,
            audit_filters_scopes_and_pages,
            failed_changes_leave_no_audit_entry,
            assignments_share_creatives_within_an_advertiser,
            copying_a_line_item_shares_its_links_and_creatives,
            accounts_are_audited_without_secrets,
        );
    };
}

/// Fails the case unless `$result` is an error matching `$pattern`.
macro_rules! assert_err {
    ($result:expr, $pattern:pat $(if $guard:expr)?) => {
        match $result {
            Err($pattern) $(if $guard)? => {}
            other => panic!("expected {}, got {other:?}", stringify!($pattern)),
        }
    };
}

type Db = Arc<dyn Store>;

// Realistic, valid objects of every kind.

fn advertiser(name: &str) -> Advertiser {
    Advertiser {
        name: name.to_owned(),
        status: Status::Active,
        currency: Currency::EUR,
        time_zone: "Europe/Berlin".to_owned(),
        domains: vec!["shop.example.com".to_owned()],
    }
}

fn campaign(advertiser: u64, name: &str) -> Campaign {
    Campaign {
        advertiser_id: AdvertiserId(advertiser),
        name: name.to_owned(),
        status: Status::Active,
        frequency_caps: vec![FrequencyCap {
            count: 3,
            window: CapWindow::from_seconds(86_400).unwrap(),
        }],
        categories: Vec::new(),
        app_bundle: None,
    }
}

fn line_item(campaign: u64, name: &str) -> LineItem {
    LineItem {
        campaign_id: CampaignId(campaign),
        name: name.to_owned(),
        status: Status::Active,
        start: civil::date(2026, 12, 1).at(0, 0, 0, 0),
        end: Some(civil::date(2027, 1, 1).at(0, 0, 0, 0)),
        time_zone: "Europe/Berlin".to_owned(),
        tier: Tier::Standard,
        weight: 100,
        goal: Some(Goal {
            metric: GoalMetric::Impressions,
            daily: Some(10_000),
            lifetime: Some(250_000),
        }),
        pacing: PacingMode::Even,
        price: Price {
            model: PricingModel::Cpm,
            amount_micros: Micros(2_500_000),
            currency: Currency::EUR,
        },
        frequency_caps: Vec::new(),
        targeting: Some(Targeting::All(vec![
            Targeting::Country(vec!["DE".to_owned(), "AT".to_owned()]),
            Targeting::DeviceType(vec![DeviceType::Phone, DeviceType::Tablet]),
        ])),
        rotation: RotationMode::Weighted,
        channels: vec![Channel::Direct],
        deals: Vec::new(),
        untokened_clicks: Default::default(),
        competes_with_programmatic: false,
    }
}

fn creative(line_item: u64, name: &str) -> Creative {
    Creative {
        line_item_id: LineItemId(line_item),
        name: name.to_owned(),
        status: Status::Active,
        size: Some(Size { w: 300, h: 250 }),
        landing_url: "https://shop.example.com/winter".to_owned(),
        weight: 100,
        content: CreativeContent::Image {
            image_url: "https://cdn.example.com/winter-300x250.png".to_owned(),
            alt: "Winter sale".to_owned(),
        },
        categories: Vec::new(),
        approval: marquee_model::Approval::Approved,
    }
}

fn publisher(name: &str) -> Publisher {
    Publisher {
        name: name.to_owned(),
        status: Status::Active,
    }
}

fn site(publisher: u64, name: &str) -> Site {
    Site {
        publisher_id: PublisherId(publisher),
        name: name.to_owned(),
        status: Status::Active,
        domain: "news.example.org".to_owned(),
    }
}

fn placement(site: u64, name: &str) -> Placement {
    Placement {
        site_id: SiteId(site),
        name: name.to_owned(),
        status: Status::Active,
        sizes: vec![Size { w: 300, h: 250 }],
        formats: vec![Format::Banner],
        image_tag: Default::default(),
        programmatic: None,
    }
}

fn with_status<T: Object>(mut object: T, status: Status) -> T {
    object.set_status(status);
    object
}

fn page(limit: u32) -> ListQuery {
    ListQuery {
        limit,
        ..ListQuery::default()
    }
}

async fn create<T: Object>(store: &Db, object: T) -> Stored<T> {
    store
        .create_object(&object, None, &Actor::cli())
        .await
        .unwrap()
}

/// One object of every demand kind, each the child of the one before.
struct Demand {
    advertiser: Stored<Advertiser>,
    campaign: Stored<Campaign>,
    line_item: Stored<LineItem>,
    creative: Stored<Creative>,
}

async fn demand(store: &Db, name: &str) -> Demand {
    let advertiser = create(store, advertiser(name)).await;
    let campaign = create(store, campaign(advertiser.meta.id, name)).await;
    let line_item = create(store, line_item(campaign.meta.id, name)).await;
    let creative = create(store, creative(line_item.meta.id, name)).await;
    Demand {
        advertiser,
        campaign,
        line_item,
        creative,
    }
}

impl Demand {
    fn ids(&self) -> [(ObjectKind, u64); 4] {
        [
            (ObjectKind::Advertiser, self.advertiser.meta.id),
            (ObjectKind::Campaign, self.campaign.meta.id),
            (ObjectKind::LineItem, self.line_item.meta.id),
            (ObjectKind::Creative, self.creative.meta.id),
        ]
    }
}

/// One object of every supply kind, each the child of the one before.
struct Supply {
    publisher: Stored<Publisher>,
    site: Stored<Site>,
    placement: Stored<Placement>,
}

async fn supply(store: &Db, name: &str) -> Supply {
    let publisher = create(store, publisher(name)).await;
    let site = create(store, site(publisher.meta.id, name)).await;
    let placement = create(store, placement(site.meta.id, name)).await;
    Supply {
        publisher,
        site,
        placement,
    }
}

impl Supply {
    fn ids(&self) -> [(ObjectKind, u64); 3] {
        [
            (ObjectKind::Publisher, self.publisher.meta.id),
            (ObjectKind::Site, self.site.meta.id),
            (ObjectKind::Placement, self.placement.meta.id),
        ]
    }
}

/// Creates `object`, then checks that get and list return exactly what was created.
async fn round_trip<T: Object + PartialEq>(store: &Db, clock: &ManualClock, object: T) -> u64 {
    object.validate().unwrap();
    let created = store
        .create_object(&object, None, &Actor::cli())
        .await
        .unwrap();
    assert_eq!(created.object, object);
    assert_eq!(created.meta.version, 1);
    assert_eq!(created.meta.created_at, clock.now());
    assert_eq!(created.meta.updated_at, clock.now());

    let id = created.meta.id;
    assert_eq!(store.get_object::<T>(id, None).await.unwrap(), created);
    let record = store.get(T::KIND, id, None).await.unwrap();
    assert_eq!(record.kind, T::KIND);
    assert_eq!(record.parent_id, object.parent_id());
    assert_eq!(record.name, object.name());
    assert_eq!(record.status, object.status());
    assert_eq!(
        store.list_objects::<T>(&page(MAX_PAGE)).await.unwrap(),
        vec![created]
    );
    id
}

/// Every kind survives create, get and list unchanged; ids start at 1 in every table.
pub async fn round_trip_every_kind(store: Db, clock: Arc<ManualClock>) {
    let advertiser = round_trip(&store, &clock, advertiser("Acme Outdoor")).await;
    let campaign = round_trip(&store, &clock, campaign(advertiser, "Winter 2026")).await;
    let line_item = round_trip(&store, &clock, line_item(campaign, "DE mobile")).await;
    let creative = round_trip(&store, &clock, creative(line_item, "MPU winter")).await;
    let publisher = round_trip(&store, &clock, publisher("Daily News")).await;
    let site = round_trip(&store, &clock, site(publisher, "Daily News web")).await;
    let placement = round_trip(&store, &clock, placement(site, "Article MPU")).await;
    assert_eq!(
        [
            advertiser, campaign, line_item, creative, publisher, site, placement
        ],
        [1; 7]
    );
}

/// Every object is owned by the root of its side, whatever its depth.
pub async fn owner_is_derived_from_the_root(store: Db, _clock: Arc<ManualClock>) {
    // A first tree and spare rows shift the ids, so that an owner taken from the parent (or
    // any id other than the root's) shows.
    demand(&store, "First").await;
    create(&store, campaign(1, "Spare")).await;
    create(&store, campaign(1, "Spare")).await;
    create(&store, line_item(1, "Spare")).await;
    let second = demand(&store, "Second").await;
    supply(&store, "First").await;
    create(&store, site(1, "Spare")).await;
    create(&store, site(1, "Spare")).await;
    let supply = supply(&store, "Second").await;
    assert_eq!(
        second.ids().map(|(_, id)| id),
        [2, 4, 3, 2],
        "ids count per table"
    );

    for (kind, id) in second.ids() {
        let record = store.get(kind, id, None).await.unwrap();
        assert_eq!(record.owner_id, second.advertiser.meta.id, "{kind:?} {id}");
    }
    for (kind, id) in supply.ids() {
        let record = store.get(kind, id, None).await.unwrap();
        assert_eq!(record.owner_id, supply.publisher.meta.id, "{kind:?} {id}");
    }
}

/// Unknown ids, including ones too large for any database, are `NotFound`.
pub async fn missing_objects_are_not_found(store: Db, _clock: Arc<ManualClock>) {
    let demand = demand(&store, "Acme").await;
    let draft = Draft::of(&demand.campaign.object).unwrap();
    for kind in ObjectKind::ALL {
        for id in [999, u64::MAX] {
            assert_err!(store.get(kind, id, None).await, StoreError::NotFound { kind: k, id: i } if k == kind && i == id);
            assert_err!(store.archive(kind, id, None, &Actor::cli()).await, StoreError::NotFound { kind: k, id: i } if k == kind && i == id);
        }
    }
    assert_err!(
        store
            .update(ObjectKind::Campaign, 999, 1, draft, None, &Actor::cli())
            .await,
        StoreError::NotFound {
            kind: ObjectKind::Campaign,
            id: 999
        }
    );
    for query in [
        ListQuery {
            after: Some(u64::MAX),
            ..page(10)
        },
        ListQuery {
            scope: Some(u64::MAX),
            ..page(10)
        },
        ListQuery {
            parent_id: Some(u64::MAX),
            ..page(10)
        },
    ] {
        assert!(
            store
                .list(ObjectKind::Campaign, &query)
                .await
                .unwrap()
                .is_empty()
        );
    }
}

/// A tenant sees and touches only its own objects; everything else looks missing.
pub async fn scopes_isolate_tenants(store: Db, _clock: Arc<ManualClock>) {
    let a = demand(&store, "Tenant A").await;
    let b = demand(&store, "Tenant B").await;
    let x = supply(&store, "Tenant X").await;
    let y = supply(&store, "Tenant Y").await;
    let scope_a = Some(a.advertiser.meta.id);
    let scope_x = Some(x.publisher.meta.id);

    for (kind, id) in a.ids() {
        assert_eq!(store.get(kind, id, scope_a).await.unwrap().meta.id, id);
    }
    for (kind, id) in b.ids() {
        assert_err!(store.get(kind, id, scope_a).await, StoreError::NotFound { kind: k, id: i } if k == kind && i == id);
        assert_err!(store.archive(kind, id, scope_a, &Actor::cli()).await, StoreError::NotFound { kind: k, id: i } if k == kind && i == id);
        let query = ListQuery {
            scope: scope_a,
            ..page(MAX_PAGE)
        };
        let listed = store.list(kind, &query).await.unwrap();
        let owners: Vec<u64> = listed.iter().map(|record| record.owner_id).collect();
        assert_eq!(owners, vec![a.advertiser.meta.id], "{kind:?}");
    }
    for (kind, id) in y.ids() {
        assert_err!(
            store.get(kind, id, scope_x).await,
            StoreError::NotFound { .. }
        );
    }

    let b_campaign = b.campaign.meta.id;
    let renamed = Campaign {
        name: "Taken over".to_owned(),
        ..b.campaign.object.clone()
    };
    assert_err!(
        store.update_object(b_campaign, 1, &renamed, scope_a, &Actor::cli()).await,
        StoreError::NotFound { kind: ObjectKind::Campaign, id } if id == b_campaign
    );
    let untouched = store
        .get_object::<Campaign>(b_campaign, None)
        .await
        .unwrap();
    assert_eq!(untouched, b.campaign);

    assert_err!(
        store.create_object(&campaign(b.advertiser.meta.id, "Intruder"), scope_a, &Actor::cli()).await,
        StoreError::ParentNotFound { kind: ObjectKind::Advertiser, id } if id == b.advertiser.meta.id
    );
    assert_err!(
        store.create_object(&creative(b.line_item.meta.id, "Intruder"), scope_a, &Actor::cli()).await,
        StoreError::ParentNotFound { kind: ObjectKind::LineItem, id } if id == b.line_item.meta.id
    );
    assert_err!(
        store
            .create_object(&advertiser("Another tenant"), scope_a, &Actor::cli())
            .await,
        StoreError::ParentNotFound {
            kind: ObjectKind::Advertiser,
            ..
        }
    );
    assert_err!(
        store.placements_of(LineItemId(b.line_item.meta.id), scope_a).await,
        StoreError::NotFound { kind: ObjectKind::LineItem, id } if id == b.line_item.meta.id
    );
    // Creating in one's own scope works.
    let own = campaign(a.advertiser.meta.id, "Own");
    let created = store
        .create_object(&own, scope_a, &Actor::cli())
        .await
        .unwrap();
    assert_eq!(created.object, own);
}

/// An update naming a version other than the stored one is refused with the current version.
pub async fn stale_version_conflicts(store: Db, _clock: Arc<ManualClock>) {
    let demand = demand(&store, "Acme").await;
    let id = demand.campaign.meta.id;
    let first = Campaign {
        name: "Renamed once".to_owned(),
        ..demand.campaign.object.clone()
    };
    let updated = store
        .update_object(id, 1, &first, None, &Actor::cli())
        .await
        .unwrap();
    assert_eq!(updated.meta.version, 2);
    assert_eq!(updated.object, first);

    let second = Campaign {
        name: "Renamed twice".to_owned(),
        ..first.clone()
    };
    for stale in [1, 3] {
        assert_err!(
            store.update_object(id, stale, &second, None, &Actor::cli()).await,
            StoreError::VersionConflict { kind: ObjectKind::Campaign, id: i, expected, current: 2 }
                if i == id && expected == stale
        );
    }
    assert_eq!(
        store.get_object::<Campaign>(id, None).await.unwrap(),
        updated
    );
    let record = store.get(ObjectKind::Campaign, id, None).await.unwrap();
    assert_eq!(record.name, "Renamed once");

    let third = store
        .update_object(id, 2, &second, None, &Actor::cli())
        .await
        .unwrap();
    assert_eq!(third.meta.version, 3);
}

/// Archiving is idempotent and final: the status (column and body) says archived, and updates
/// are refused.
pub async fn archived_objects_are_final(store: Db, clock: Arc<ManualClock>) {
    let demand = demand(&store, "Acme").await;
    let id = demand.campaign.meta.id;
    clock.advance(SignedDuration::from_secs(60));
    let archived = store
        .archive(ObjectKind::Campaign, id, None, &Actor::cli())
        .await
        .unwrap();
    assert_eq!(archived.status, Status::Archived);
    assert_eq!(archived.meta.version, 2);
    assert_eq!(archived.meta.updated_at, clock.now());
    let decoded = archived.decode::<Campaign>().unwrap();
    assert_eq!(decoded.object.status, Status::Archived);
    assert_eq!(
        store.get_object::<Campaign>(id, None).await.unwrap(),
        decoded
    );

    clock.advance(SignedDuration::from_secs(60));
    let again = store
        .archive(ObjectKind::Campaign, id, None, &Actor::cli())
        .await
        .unwrap();
    assert_eq!(again, archived);

    let revived = with_status(demand.campaign.object.clone(), Status::Active);
    assert_err!(
        store.update_object(id, 2, &revived, None, &Actor::cli()).await,
        StoreError::Archived { kind: ObjectKind::Campaign, id: i } if i == id
    );
    // Archiving a parent leaves its children as they are; the snapshot drops them.
    let child = store
        .get(ObjectKind::LineItem, demand.line_item.meta.id, None)
        .await
        .unwrap();
    assert_eq!(child.status, Status::Active);
}

/// A child needs a parent that exists and is not archived; a paused parent is fine.
pub async fn children_need_a_live_parent(store: Db, _clock: Arc<ManualClock>) {
    assert_err!(
        store
            .create_object(&campaign(999, "Orphan"), None, &Actor::cli())
            .await,
        StoreError::ParentNotFound {
            kind: ObjectKind::Advertiser,
            id: 999
        }
    );
    let orphan = Draft {
        parent_id: None,
        ..Draft::of(&campaign(1, "Orphan")).unwrap()
    };
    assert_err!(
        store
            .create(ObjectKind::Campaign, orphan, None, &Actor::cli())
            .await,
        StoreError::ParentNotFound {
            kind: ObjectKind::Advertiser,
            ..
        }
    );

    let paused = create(&store, with_status(publisher("Paused"), Status::Paused)).await;
    create(&store, site(paused.meta.id, "Under paused")).await;

    let demand = demand(&store, "Acme").await;
    store
        .archive(
            ObjectKind::LineItem,
            demand.line_item.meta.id,
            None,
            &Actor::cli(),
        )
        .await
        .unwrap();
    assert_err!(
        store.create_object(&creative(demand.line_item.meta.id, "Late"), None, &Actor::cli()).await,
        StoreError::ParentArchived { kind: ObjectKind::LineItem, id } if id == demand.line_item.meta.id
    );
    let count = store
        .list(ObjectKind::Creative, &page(MAX_PAGE))
        .await
        .unwrap();
    assert_eq!(count.len(), 1);
}

/// An update cannot move an object to another parent.
pub async fn parent_is_immutable(store: Db, _clock: Arc<ManualClock>) {
    let a = demand(&store, "Acme").await;
    let b = demand(&store, "Globex").await;
    let moved = Campaign {
        advertiser_id: AdvertiserId(b.advertiser.meta.id),
        ..a.campaign.object.clone()
    };
    let id = a.campaign.meta.id;
    assert_err!(
        store.update_object(id, 1, &moved, None, &Actor::cli()).await,
        StoreError::ParentImmutable { kind: ObjectKind::Campaign, id: i } if i == id
    );
    assert_eq!(
        store.get_object::<Campaign>(id, None).await.unwrap(),
        a.campaign
    );
}

async fn names(store: &Db, query: ListQuery) -> Vec<String> {
    store
        .list(ObjectKind::Campaign, &query)
        .await
        .unwrap()
        .into_iter()
        .map(|record| record.name)
        .collect()
}

/// Status, parent and name filters combine; paging walks the rows in id order.
pub async fn list_filters_and_pages(store: Db, _clock: Arc<ManualClock>) {
    let a = create(&store, advertiser("Acme")).await.meta.id;
    let b = create(&store, advertiser("Globex")).await.meta.id;
    for (parent, name, status) in [
        (a, "Summer 50% off", Status::Active),
        (a, "Summer 500 deals", Status::Paused),
        (b, "SUMMER brand", Status::Active),
        (a, "winter_sale", Status::Active),
        (a, "winterXsale", Status::Active),
    ] {
        create(&store, with_status(campaign(parent, name), status)).await;
    }
    let all = names(&store, page(MAX_PAGE)).await;
    assert_eq!(
        all,
        [
            "Summer 50% off",
            "Summer 500 deals",
            "SUMMER brand",
            "winter_sale",
            "winterXsale"
        ]
    );

    let status = |status| ListQuery {
        status: Some(status),
        ..page(MAX_PAGE)
    };
    assert_eq!(
        names(&store, status(Status::Paused)).await,
        ["Summer 500 deals"]
    );
    assert!(names(&store, status(Status::Archived)).await.is_empty());

    let parent = |id| ListQuery {
        parent_id: Some(id),
        ..page(MAX_PAGE)
    };
    assert_eq!(names(&store, parent(b)).await, ["SUMMER brand"]);
    assert_eq!(names(&store, parent(a)).await.len(), 4);
    let roots = ListQuery {
        parent_id: Some(a),
        ..page(MAX_PAGE)
    };
    assert!(
        store
            .list(ObjectKind::Advertiser, &roots)
            .await
            .unwrap()
            .is_empty()
    );

    let named = |needle: &str| ListQuery {
        name_contains: Some(needle.to_owned()),
        ..page(MAX_PAGE)
    };
    assert_eq!(
        names(&store, named("summer")).await,
        ["Summer 50% off", "Summer 500 deals", "SUMMER brand"]
    );
    // `%` and `_` are literal characters, not wildcards.
    assert_eq!(names(&store, named("50%")).await, ["Summer 50% off"]);
    assert_eq!(names(&store, named("r_s")).await, ["winter_sale"]);
    assert!(names(&store, named("%%")).await.is_empty());
    assert_eq!(names(&store, named("")).await.len(), 5);

    let combined = ListQuery {
        parent_id: Some(a),
        status: Some(Status::Active),
        name_contains: Some("SALE".to_owned()),
        ..page(MAX_PAGE)
    };
    assert_eq!(
        names(&store, combined).await,
        ["winter_sale", "winterXsale"]
    );

    let mut after = None;
    let mut pages = Vec::new();
    loop {
        let query = ListQuery { after, ..page(2) };
        let rows = store.list(ObjectKind::Campaign, &query).await.unwrap();
        let Some(last) = rows.last() else { break };
        after = Some(last.meta.id);
        pages.push(rows.into_iter().map(|r| r.meta.id).collect::<Vec<_>>());
    }
    assert_eq!(pages, [vec![1, 2], vec![3, 4], vec![5]]);

    let zero = store.list(ObjectKind::Campaign, &page(0)).await.unwrap();
    assert_eq!(zero.len(), 1, "a limit of 0 is raised to 1");
}

/// A list returns at most `MAX_PAGE` rows however many are asked for.
pub async fn list_limit_is_clamped(store: Db, _clock: Arc<ManualClock>) {
    for i in 0..=MAX_PAGE {
        create(&store, publisher(&format!("Publisher {i}"))).await;
    }
    for limit in [MAX_PAGE + 1, u32::MAX] {
        let rows = store
            .list(ObjectKind::Publisher, &page(limit))
            .await
            .unwrap();
        assert_eq!(rows.len(), MAX_PAGE as usize);
        assert_eq!(rows.last().unwrap().meta.id, u64::from(MAX_PAGE));
    }
}

/// Timestamps come from the injected clock, to the microsecond: `created_at` stays put,
/// `updated_at` follows every write.
pub async fn timestamps_come_from_the_clock(store: Db, clock: Arc<ManualClock>) {
    let start = clock.now();
    let created = create(&store, publisher("Daily News")).await;
    assert_eq!(created.meta.created_at, start);
    assert_eq!(created.meta.updated_at, start);

    clock.advance(SignedDuration::from_micros(1_500_001));
    let renamed = Publisher {
        name: "Daily News Online".to_owned(),
        ..created.object.clone()
    };
    let id = created.meta.id;
    let updated = store
        .update_object(id, 1, &renamed, None, &Actor::cli())
        .await
        .unwrap();
    assert_eq!(updated.meta.created_at, start);
    assert_eq!(updated.meta.updated_at, clock.now());
    assert_ne!(updated.meta.updated_at, start);

    clock.advance(SignedDuration::from_secs(3_600));
    let archived = store
        .archive(ObjectKind::Publisher, id, None, &Actor::cli())
        .await
        .unwrap();
    assert_eq!(archived.meta.created_at, start);
    assert_eq!(archived.meta.updated_at, clock.now());
    let stored = store.get(ObjectKind::Publisher, id, None).await.unwrap();
    assert_eq!(stored.meta, archived.meta);
}

/// Links join live line items and placements, once each; `placements_of` lists them in id
/// order.
pub async fn links_connect_live_line_items_and_placements(store: Db, _clock: Arc<ManualClock>) {
    let demand = demand(&store, "Acme").await;
    let supply = supply(&store, "Daily News").await;
    let site = supply.site.meta.id;
    let second = create(&store, placement(site, "Sidebar")).await.meta.id;
    let archived = create(&store, placement(site, "Retired")).await.meta.id;
    store
        .archive(ObjectKind::Placement, archived, None, &Actor::cli())
        .await
        .unwrap();
    let li = LineItemId(demand.line_item.meta.id);
    let first = PlacementId(supply.placement.meta.id);
    let second = PlacementId(second);

    assert!(store.link(li, second, &Actor::cli()).await.unwrap());
    assert!(store.link(li, first, &Actor::cli()).await.unwrap());
    assert!(
        !store.link(li, first, &Actor::cli()).await.unwrap(),
        "a second link is no new link"
    );
    assert_eq!(
        store.placements_of(li, None).await.unwrap(),
        [first, second]
    );
    let owner = Some(demand.advertiser.meta.id);
    assert_eq!(
        store.placements_of(li, owner).await.unwrap(),
        [first, second]
    );

    assert!(store.unlink(li, first, &Actor::cli()).await.unwrap());
    assert!(!store.unlink(li, first, &Actor::cli()).await.unwrap());
    assert_eq!(store.placements_of(li, None).await.unwrap(), [second]);

    assert_err!(
        store.link(li, PlacementId(999), &Actor::cli()).await,
        StoreError::NotFound {
            kind: ObjectKind::Placement,
            id: 999
        }
    );
    assert_err!(
        store.link(LineItemId(999), first, &Actor::cli()).await,
        StoreError::NotFound {
            kind: ObjectKind::LineItem,
            id: 999
        }
    );
    assert_err!(
        store.link(li, PlacementId(archived), &Actor::cli()).await,
        StoreError::NotFound { kind: ObjectKind::Placement, id } if id == archived
    );
    assert_err!(
        store.placements_of(LineItemId(999), None).await,
        StoreError::NotFound {
            kind: ObjectKind::LineItem,
            id: 999
        }
    );

    store
        .archive(ObjectKind::LineItem, li.0, None, &Actor::cli())
        .await
        .unwrap();
    assert_err!(
        store.link(li, first, &Actor::cli()).await,
        StoreError::NotFound { kind: ObjectKind::LineItem, id } if id == li.0
    );
    // An archived line item still reports its links.
    assert_eq!(store.placements_of(li, None).await.unwrap(), [second]);
}

fn token(role: Role, owner_id: Option<u64>, seed: u8) -> NewToken {
    NewToken {
        role,
        owner_id,
        hash: [seed; 32],
        label: format!("{} token {seed}", role.as_str()),
    }
}

/// Tokens of every role resolve to their principal by hash; owners must match the role.
pub async fn tokens_resolve_to_principals(store: Db, clock: Arc<ManualClock>) {
    let advertiser = create(&store, advertiser("Acme")).await.meta.id;
    // Two publishers, so that the second's id names no advertiser.
    create(&store, publisher("Daily News")).await;
    let publisher = create(&store, publisher("Evening Post")).await.meta.id;

    let mut ids = Vec::new();
    for (role, owner_id, seed) in [
        (Role::Admin, None, 1),
        (Role::Advertiser, Some(advertiser), 2),
        (Role::Publisher, Some(publisher), 3),
    ] {
        let new = token(role, owner_id, seed);
        let record = store
            .create_token(new.clone(), &Actor::cli())
            .await
            .unwrap();
        assert_eq!(record.role, role);
        assert_eq!(record.owner_id, owner_id);
        assert_eq!(record.label, new.label);
        assert_eq!(record.created_at, clock.now());
        let principal = store.find_token(&new.hash).await.unwrap();
        assert_eq!(
            principal,
            Some(Principal {
                token_id: record.id,
                role,
                owner_id
            })
        );
        ids.push(record.id);
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3, "token ids are distinct");

    for (role, owner) in [
        (Role::Admin, Some(advertiser)),
        (Role::Advertiser, None),
        (Role::Advertiser, Some(publisher)),
        (Role::Publisher, None),
        (Role::Publisher, Some(999)),
        (Role::Publisher, Some(u64::MAX)),
    ] {
        assert_err!(
            store.create_token(token(role, owner, 9), &Actor::cli()).await,
            StoreError::BadTokenOwner { role: r, owner: o } if r == role && o == owner
        );
    }
    assert_eq!(store.find_token(&[9; 32]).await.unwrap(), None);
    assert_eq!(store.find_token(&[0; 32]).await.unwrap(), None);
}

/// Tokens are listed in id order without their hashes; a revoked token no longer resolves
/// (others do), and revoking an id no token has finds nothing. Tokens change no snapshot.
pub async fn tokens_are_listed_and_revoked(store: Db, clock: Arc<ManualClock>) {
    let advertiser = create(&store, advertiser("Acme")).await.meta.id;
    let counter = store.change_counter().await.unwrap();
    assert_eq!(store.list_tokens().await.unwrap(), []);
    let admin = store
        .create_token(token(Role::Admin, None, 1), &Actor::cli())
        .await
        .unwrap();
    clock.advance(SignedDuration::from_secs(60));
    let tenant = store
        .create_token(token(Role::Advertiser, Some(advertiser), 2), &Actor::cli())
        .await
        .unwrap();
    assert_eq!(
        store.list_tokens().await.unwrap(),
        [admin.clone(), tenant.clone()]
    );

    assert_eq!(
        store.revoke_token(tenant.id, &Actor::cli()).await.unwrap(),
        Some(tenant.clone())
    );
    assert_eq!(store.find_token(&[2; 32]).await.unwrap(), None);
    assert!(store.find_token(&[1; 32]).await.unwrap().is_some());
    assert_eq!(
        store.list_tokens().await.unwrap(),
        std::slice::from_ref(&admin)
    );
    for unknown in [tenant.id, admin.id + 100, u64::MAX] {
        assert_eq!(
            store.revoke_token(unknown, &Actor::cli()).await.unwrap(),
            None,
            "{unknown}"
        );
    }
    assert_eq!(store.list_tokens().await.unwrap(), [admin]);
    assert_eq!(store.change_counter().await.unwrap(), counter);
}

fn user(name: &str, role: Role, owner_id: Option<u64>) -> NewUser {
    NewUser {
        name: name.to_owned(),
        role,
        owner_id,
        password_hash: format!("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA${name}"),
    }
}

/// Users of every role are stored and found by their exact name; names are unique and owners
/// must match the role, as for tokens. Users change nothing a snapshot depends on.
pub async fn users_are_found_by_name(store: Db, clock: Arc<ManualClock>) {
    let advertiser = create(&store, advertiser("Acme")).await.meta.id;
    create(&store, publisher("Daily News")).await;
    let publisher = create(&store, publisher("Evening Post")).await.meta.id;
    let counter = store.change_counter().await.unwrap();

    let mut ids = Vec::new();
    for new in [
        user("root", Role::Admin, None),
        user("acme-ops", Role::Advertiser, Some(advertiser)),
        user("post-ops", Role::Publisher, Some(publisher)),
    ] {
        let record = store.create_user(new.clone(), &Actor::cli()).await.unwrap();
        assert_eq!(
            (record.name.as_str(), record.role, record.owner_id),
            (new.name.as_str(), new.role, new.owner_id)
        );
        assert_eq!(record.password_hash, new.password_hash);
        assert_eq!(record.created_at, clock.now());
        assert_eq!(
            store.find_user(&new.name).await.unwrap(),
            Some(record.clone())
        );
        ids.push(record.id);
    }
    ids.dedup();
    assert_eq!(ids.len(), 3, "user ids are distinct");
    assert_eq!(
        store.find_user("ROOT").await.unwrap(),
        None,
        "names are exact"
    );
    assert_eq!(store.find_user("nobody").await.unwrap(), None);

    assert_err!(
        store.create_user(user("root", Role::Admin, None), &Actor::cli()).await,
        StoreError::UserNameTaken { name } if name == "root"
    );
    for (role, owner) in [
        (Role::Admin, Some(advertiser)),
        (Role::Advertiser, None),
        (Role::Advertiser, Some(publisher)),
        (Role::Publisher, Some(999)),
    ] {
        assert_err!(
            store.create_user(user("someone", role, owner), &Actor::cli()).await,
            StoreError::BadUserOwner { role: r, owner: o } if r == role && o == owner
        );
    }
    assert_eq!(store.find_user("someone").await.unwrap(), None);
    assert_eq!(store.change_counter().await.unwrap(), counter);
}

/// A session resolves to its user with its CSRF token and times until it is deleted; creating
/// one clears sessions that expired; a session needs an existing user.
pub async fn sessions_resolve_to_their_user(store: Db, clock: Arc<ManualClock>) {
    let advertiser = create(&store, advertiser("Acme")).await.meta.id;
    let alice = store
        .create_user(
            user("alice", Role::Advertiser, Some(advertiser)),
            &Actor::cli(),
        )
        .await
        .unwrap();
    let started = clock.now();
    let hour = SignedDuration::from_hours(1);
    let first = NewSession {
        hash: [1; 32],
        user_id: alice.id,
        csrf_token: "csrf-one".to_owned(),
        expires_at: started + hour,
    };
    store.create_session(first.clone()).await.unwrap();
    let found = store.find_session(&[1; 32]).await.unwrap().unwrap();
    assert_eq!(found.user, alice);
    assert_eq!(found.csrf_token, "csrf-one");
    assert_eq!(found.created_at, started);
    assert_eq!(found.expires_at, started + hour);
    assert_eq!(store.find_session(&[2; 32]).await.unwrap(), None);

    // Past its expiry the session is still returned (the caller judges expiry) until another
    // session is created, which removes it.
    clock.advance(hour * 2);
    assert!(store.find_session(&[1; 32]).await.unwrap().is_some());
    store
        .create_session(NewSession {
            hash: [2; 32],
            csrf_token: "csrf-two".to_owned(),
            expires_at: clock.now() + hour,
            ..first.clone()
        })
        .await
        .unwrap();
    assert_eq!(store.find_session(&[1; 32]).await.unwrap(), None);

    assert!(store.delete_session(&[2; 32]).await.unwrap());
    assert!(!store.delete_session(&[2; 32]).await.unwrap());
    assert_eq!(store.find_session(&[2; 32]).await.unwrap(), None);

    assert_err!(
        store
            .create_session(NewSession {
                hash: [3; 32],
                user_id: alice.id + 100,
                ..first
            })
            .await,
        StoreError::UnknownUser { id } if id == alice.id + 100
    );
}

/// Deleting a user removes every session of theirs with it (and no one else's); the name is
/// free again afterwards; an unknown name deletes nothing.
pub async fn deleting_a_user_deletes_its_sessions(store: Db, clock: Arc<ManualClock>) {
    let alice = store
        .create_user(user("alice", Role::Admin, None), &Actor::cli())
        .await
        .unwrap();
    let bob = store
        .create_user(user("bob", Role::Admin, None), &Actor::cli())
        .await
        .unwrap();
    let expires_at = clock.now() + SignedDuration::from_hours(1);
    for (seed, user_id) in [(1, alice.id), (2, alice.id), (3, bob.id)] {
        store
            .create_session(NewSession {
                hash: [seed; 32],
                user_id,
                csrf_token: format!("csrf-{seed}"),
                expires_at,
            })
            .await
            .unwrap();
    }

    assert_eq!(
        store.delete_user("alice", &Actor::cli()).await.unwrap(),
        Some(DeletedUser {
            user: alice,
            sessions: 2
        })
    );
    assert_eq!(store.find_user("alice").await.unwrap(), None);
    for seed in [1, 2] {
        assert_eq!(store.find_session(&[seed; 32]).await.unwrap(), None);
    }
    assert_eq!(
        store.find_session(&[3; 32]).await.unwrap().unwrap().user,
        bob
    );
    assert_eq!(
        store.delete_user("alice", &Actor::cli()).await.unwrap(),
        None
    );
    assert_eq!(
        store.delete_user("BOB", &Actor::cli()).await.unwrap(),
        None,
        "names are exact"
    );
    store
        .create_user(user("alice", Role::Admin, None), &Actor::cli())
        .await
        .unwrap();
}

/// While one holder has the manager lock every other attempt finds it held (and says by
/// whom); once the holder drops it, the next attempt takes it.
pub async fn one_manager_holds_the_lock_at_a_time(store: Db, _clock: Arc<ManualClock>) {
    let LockAttempt::Acquired(first) = store.try_lock_manager().await.unwrap() else {
        panic!("a free lock is taken");
    };
    for _ in 0..2 {
        match store.try_lock_manager().await.unwrap() {
            LockAttempt::HeldBy(holder) => assert!(!holder.is_empty()),
            LockAttempt::Acquired(_) => panic!("two holders of the manager lock"),
        }
    }
    assert!(!first.is_lost());
    drop(first);
    // PostgreSQL releases the lock when the holder's session has closed, a moment later.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match store.try_lock_manager().await.unwrap() {
            LockAttempt::Acquired(_) => break,
            LockAttempt::HeldBy(holder) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "still held by {holder} after the holder dropped it"
                );
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
}

/// Every effective change to objects or links bumps the counter once; reads, tokens, failed
/// writes and no-op writes do not.
pub async fn change_counter_counts_only_mutations(store: Db, _clock: Arc<ManualClock>) {
    let mut expected = store.change_counter().await.unwrap();
    let check = async |expected: u64, what: &str| {
        assert_eq!(store.change_counter().await.unwrap(), expected, "{what}");
    };

    let advertiser = create(&store, advertiser("Acme")).await;
    expected += 1;
    check(expected, "create").await;
    let winter = create(&store, campaign(advertiser.meta.id, "Winter")).await;
    let line_item = create(&store, line_item(winter.meta.id, "DE")).await;
    let supply = supply(&store, "Daily News").await;
    expected += 5;
    check(expected, "creates").await;

    let li = LineItemId(line_item.meta.id);
    let pl = PlacementId(supply.placement.meta.id);
    store
        .get(ObjectKind::Campaign, winter.meta.id, None)
        .await
        .unwrap();
    store.list(ObjectKind::Campaign, &page(10)).await.unwrap();
    store.placements_of(li, None).await.unwrap();
    store.catalog().await.unwrap();
    store
        .create_token(token(Role::Admin, None, 1), &Actor::cli())
        .await
        .unwrap();
    store.find_token(&[1; 32]).await.unwrap();
    check(expected, "reads and tokens").await;

    let renamed = Campaign {
        name: "Winter sale".to_owned(),
        ..winter.object.clone()
    };
    store
        .update_object(winter.meta.id, 1, &renamed, None, &Actor::cli())
        .await
        .unwrap();
    expected += 1;
    check(expected, "update").await;

    assert!(
        store
            .update_object(winter.meta.id, 1, &renamed, None, &Actor::cli())
            .await
            .is_err()
    );
    assert!(
        store
            .create_object(&campaign(999, "Orphan"), None, &Actor::cli())
            .await
            .is_err()
    );
    check(expected, "failed writes").await;

    assert!(store.link(li, pl, &Actor::cli()).await.unwrap());
    expected += 1;
    check(expected, "link").await;
    assert!(!store.link(li, pl, &Actor::cli()).await.unwrap());
    check(expected, "duplicate link").await;
    assert!(store.unlink(li, pl, &Actor::cli()).await.unwrap());
    expected += 1;
    check(expected, "unlink").await;
    assert!(!store.unlink(li, pl, &Actor::cli()).await.unwrap());
    check(expected, "unlink of no link").await;

    store
        .archive(ObjectKind::Campaign, winter.meta.id, None, &Actor::cli())
        .await
        .unwrap();
    expected += 1;
    check(expected, "archive").await;
    store
        .archive(ObjectKind::Campaign, winter.meta.id, None, &Actor::cli())
        .await
        .unwrap();
    check(expected, "archive of an archived object").await;
}

/// The catalog holds exactly the active objects of every kind in id order, every link, and
/// the change counter it was read at.
pub async fn catalog_holds_active_rows_and_all_links(store: Db, _clock: Arc<ManualClock>) {
    let empty = store.catalog().await.unwrap();
    assert_eq!(empty.version, store.change_counter().await.unwrap());
    assert!(empty.advertisers.is_empty() && empty.links.is_empty());

    let demand = demand(&store, "Acme").await;
    let supply = supply(&store, "Daily News").await;
    let advertiser = demand.advertiser.meta.id;
    let paused = create(
        &store,
        with_status(campaign(advertiser, "Paused"), Status::Paused),
    )
    .await;
    let second = create(&store, campaign(advertiser, "Second")).await;
    let archived = create(&store, line_item(demand.campaign.meta.id, "Gone")).await;
    store
        .archive(ObjectKind::LineItem, archived.meta.id, None, &Actor::cli())
        .await
        .unwrap();
    let site = supply.site.meta.id;
    let paused_placement = create(
        &store,
        with_status(placement(site, "Paused slot"), Status::Paused),
    )
    .await;
    let li = LineItemId(demand.line_item.meta.id);
    store
        .link(li, PlacementId(paused_placement.meta.id), &Actor::cli())
        .await
        .unwrap();
    store
        .link(li, PlacementId(supply.placement.meta.id), &Actor::cli())
        .await
        .unwrap();

    let catalog = store.catalog().await.unwrap();
    assert_eq!(catalog.version, store.change_counter().await.unwrap());
    assert_eq!(catalog.advertisers, [demand.advertiser]);
    assert_eq!(catalog.campaigns, [demand.campaign, second]);
    assert_eq!(catalog.line_items, [demand.line_item]);
    assert_eq!(catalog.creatives, [demand.creative]);
    assert_eq!(catalog.publishers, [supply.publisher]);
    assert_eq!(catalog.sites, [supply.site]);
    let placement = PlacementId(supply.placement.meta.id);
    assert_eq!(catalog.placements, [supply.placement]);
    assert_eq!(
        catalog.links,
        [(li, placement), (li, PlacementId(paused_placement.meta.id)),]
    );
    assert!(
        !catalog
            .campaigns
            .iter()
            .any(|c| c.meta.id == paused.meta.id)
    );
}

fn audit_page(limit: u32) -> AuditQuery {
    AuditQuery {
        limit,
        ..AuditQuery::default()
    }
}

async fn audit_of(store: &Db, kind: ObjectKind, id: u64) -> Vec<AuditEntry> {
    let query = AuditQuery {
        object_kind: Some(kind.into()),
        object_id: Some(id),
        ..audit_page(MAX_PAGE)
    };
    store.audit(&query).await.unwrap()
}

pub async fn audit_records_each_change_with_its_fields(store: Db, clock: Arc<ManualClock>) {
    let alice = Actor::user("alice", Role::Admin);
    let created_at = clock.now();
    let created = store
        .create_object(&advertiser("Acme"), None, &alice)
        .await
        .unwrap();
    let id = created.meta.id;
    clock.advance(SignedDuration::from_secs(60));
    let mut renamed = created.object.clone();
    renamed.name = "Acme Corp".to_owned();
    let token = Actor::token(&Principal {
        token_id: 7,
        role: Role::Admin,
        owner_id: None,
    });
    store
        .update_object(id, 1, &renamed, None, &token)
        .await
        .unwrap();
    clock.advance(SignedDuration::from_secs(60));
    store
        .archive(ObjectKind::Advertiser, id, None, &Actor::cli())
        .await
        .unwrap();
    // Archiving again changes nothing, so it records nothing.
    store
        .archive(ObjectKind::Advertiser, id, None, &Actor::cli())
        .await
        .unwrap();

    let entries = audit_of(&store, ObjectKind::Advertiser, id).await;
    let actions: Vec<_> = entries.iter().map(|e| e.action).collect();
    assert_eq!(
        actions,
        [
            AuditAction::Archive,
            AuditAction::Update,
            AuditAction::Create
        ],
        "newest first"
    );
    let [archive, update, create] = &entries[..] else {
        unreachable!()
    };
    assert_eq!(create.principal, "user:alice");
    assert_eq!(create.role, Role::Admin);
    assert_eq!(create.at, created_at);
    assert_eq!(create.object_name, "Acme");
    assert_eq!(create.owner_id, id);
    assert_eq!(create.changes["name"]["before"], serde_json::Value::Null);
    assert_eq!(create.changes["name"]["after"], "Acme");

    assert_eq!(update.principal, "token:7");
    assert_eq!(update.at, created_at + SignedDuration::from_secs(60));
    assert_eq!(update.object_name, "Acme Corp");
    assert_eq!(
        update.changes,
        serde_json::json!({"name": {"before": "Acme", "after": "Acme Corp"}}),
        "only the changed field"
    );

    assert_eq!(archive.principal, "cli");
    assert_eq!(
        archive.changes,
        serde_json::json!({"status": {"before": "active", "after": "archived"}})
    );

    // Links are recorded on the line item, and only when they change something.
    let demand = demand(&store, "Linked").await;
    let supply = supply(&store, "Linked").await;
    let (li, pl) = (
        LineItemId(demand.line_item.meta.id),
        PlacementId(supply.placement.meta.id),
    );
    assert!(store.link(li, pl, &alice).await.unwrap());
    assert!(!store.link(li, pl, &alice).await.unwrap());
    assert!(store.unlink(li, pl, &alice).await.unwrap());
    let entries = audit_of(&store, ObjectKind::LineItem, li.0).await;
    let actions: Vec<_> = entries.iter().map(|e| e.action).collect();
    assert_eq!(
        actions,
        [AuditAction::Unlink, AuditAction::Link, AuditAction::Create]
    );
    assert_eq!(
        entries[1].changes,
        serde_json::json!({"placement_id": {"before": null, "after": pl.0}})
    );
    assert_eq!(entries[1].owner_id, demand.advertiser.meta.id);
}

pub async fn audit_filters_scopes_and_pages(store: Db, clock: Arc<ManualClock>) {
    let start = clock.now();
    let a = demand(&store, "A").await;
    clock.advance(SignedDuration::from_secs(3600));
    let b = demand(&store, "B").await;
    let bob = Actor::user("bob", Role::Admin);
    let mut renamed = b.campaign.object.clone();
    renamed.name = "B renamed".to_owned();
    store
        .update_object(b.campaign.meta.id, 1, &renamed, None, &bob)
        .await
        .unwrap();
    let s = supply(&store, "S").await;

    let all = store.audit(&audit_page(MAX_PAGE)).await.unwrap();
    assert_eq!(all.len(), 4 + 4 + 1 + 3);
    assert!(all.windows(2).all(|w| w[0].id > w[1].id), "newest first");

    let by_bob = AuditQuery {
        principal: Some("user:bob".to_owned()),
        ..audit_page(MAX_PAGE)
    };
    let by_bob = store.audit(&by_bob).await.unwrap();
    assert_eq!(by_bob.len(), 1);
    assert_eq!(by_bob[0].object_id, b.campaign.meta.id);

    let campaigns = AuditQuery {
        object_kind: Some(ObjectKind::Campaign.into()),
        ..audit_page(MAX_PAGE)
    };
    let campaigns = store.audit(&campaigns).await.unwrap();
    assert_eq!(campaigns.len(), 3);
    assert!(
        campaigns
            .iter()
            .all(|e| e.object_kind == ObjectKind::Campaign.into())
    );

    let first_hour = AuditQuery {
        since: Some(start),
        until: Some(start + SignedDuration::from_secs(3600)),
        ..audit_page(MAX_PAGE)
    };
    let first_hour = store.audit(&first_hour).await.unwrap();
    assert_eq!(first_hour.len(), 4);
    assert!(
        first_hour
            .iter()
            .all(|e| e.owner_id == a.advertiser.meta.id)
    );

    // A tenant sees only its own side's objects under its owner id.
    let tenant = AuditQuery {
        scope: Some((ObjectKind::Advertiser.side(), a.advertiser.meta.id)),
        ..audit_page(MAX_PAGE)
    };
    let tenant = store.audit(&tenant).await.unwrap();
    let ids: Vec<_> = tenant
        .iter()
        .map(|e| (e.object_kind, e.object_id))
        .collect();
    let mut expected: Vec<_> = a
        .ids()
        .iter()
        .map(|(k, id)| (AuditKind::from(*k), *id))
        .collect();
    expected.reverse();
    assert_eq!(ids, expected);
    let supply_side = AuditQuery {
        scope: Some((ObjectKind::Publisher.side(), s.publisher.meta.id)),
        ..audit_page(MAX_PAGE)
    };
    assert_eq!(store.audit(&supply_side).await.unwrap().len(), 3);

    // Keyset paging walks every entry once.
    let mut seen = Vec::new();
    let mut before_id = None;
    loop {
        let query = AuditQuery {
            before_id,
            ..audit_page(5)
        };
        let page = store.audit(&query).await.unwrap();
        let Some(last) = page.last() else { break };
        before_id = Some(last.id);
        seen.extend(page.iter().map(|e| e.id));
    }
    assert_eq!(seen, all.iter().map(|e| e.id).collect::<Vec<_>>());
    assert_eq!(
        store.audit(&audit_page(0)).await.unwrap().len(),
        1,
        "clamped"
    );
}

pub async fn failed_changes_leave_no_audit_entry(store: Db, _clock: Arc<ManualClock>) {
    let d = demand(&store, "Kept").await;
    let before = store.audit(&audit_page(MAX_PAGE)).await.unwrap();
    let mut renamed = d.campaign.object.clone();
    renamed.name = "Never".to_owned();
    // Each fails inside its write transaction, after reading the current row.
    assert_err!(
        store
            .update_object(d.campaign.meta.id, 9, &renamed, None, &Actor::cli())
            .await,
        StoreError::VersionConflict { .. }
    );
    assert_err!(
        store
            .create_object(&campaign(999, "Orphan"), None, &Actor::cli())
            .await,
        StoreError::ParentNotFound { .. }
    );
    store
        .archive(
            ObjectKind::Campaign,
            d.campaign.meta.id,
            None,
            &Actor::cli(),
        )
        .await
        .unwrap();
    assert_err!(
        store
            .create_object(&line_item(d.campaign.meta.id, "Late"), None, &Actor::cli())
            .await,
        StoreError::ParentArchived { .. }
    );
    assert_err!(
        store
            .link(
                LineItemId(d.line_item.meta.id),
                PlacementId(999),
                &Actor::cli()
            )
            .await,
        StoreError::NotFound { .. }
    );
    let after = store.audit(&audit_page(MAX_PAGE)).await.unwrap();
    assert_eq!(after.len(), before.len() + 1, "only the archive");
    assert_eq!(after[0].action, AuditAction::Archive);
    assert_eq!(&after[1..], &before[..]);
}

fn assignment(line_item: u64, creative: u64, weight: u32) -> CreativeAssignment {
    CreativeAssignment {
        line_item_id: LineItemId(line_item),
        creative_id: CreativeId(creative),
        weight,
        start: None,
        end: None,
    }
}

pub async fn assignments_share_creatives_within_an_advertiser(store: Db, clock: Arc<ManualClock>) {
    let acme = demand(&store, "Acme").await;
    let globex = demand(&store, "Globex").await;
    let second = create(&store, line_item(acme.campaign.meta.id, "Acme retargeting")).await;
    let (li, creative) = (second.meta.id, acme.creative.meta.id);
    let owner = Some(acme.advertiser.meta.id);
    let alice = Actor::user("alice", Role::Admin);
    let counter = store.change_counter().await.unwrap();

    let mut use_ = assignment(li, creative, 7);
    use_.start = Some(clock.now());
    use_.end = Some(clock.now() + SignedDuration::from_hours(48));
    assert!(store.assign(use_.clone(), owner, &alice).await.unwrap());
    assert!(
        !store.assign(use_.clone(), owner, &alice).await.unwrap(),
        "the same assignment again is no new one"
    );
    assert_eq!(store.change_counter().await.unwrap(), counter + 1);
    let changed = CreativeAssignment {
        weight: 9,
        end: None,
        ..use_.clone()
    };
    assert!(!store.assign(changed.clone(), None, &alice).await.unwrap());
    assert_eq!(store.change_counter().await.unwrap(), counter + 2);
    assert_eq!(
        store.assignments_of(LineItemId(li), owner).await.unwrap(),
        std::slice::from_ref(&changed)
    );
    assert_eq!(
        store
            .assignments_to(CreativeId(creative), owner)
            .await
            .unwrap(),
        std::slice::from_ref(&changed)
    );
    assert_eq!(
        store.catalog().await.unwrap().assignments,
        std::slice::from_ref(&changed)
    );
    // The line item it was uploaded under uses it without an assignment.
    assert!(
        store
            .assignments_of(LineItemId(acme.line_item.meta.id), None)
            .await
            .unwrap()
            .is_empty()
    );

    assert_err!(
        store
            .assign(
                assignment(acme.line_item.meta.id, creative, 5),
                None,
                &alice
            )
            .await,
        StoreError::UploadedUnder { .. }
    );
    assert_err!(
        store
            .assign(assignment(globex.line_item.meta.id, creative, 5), None, &alice)
            .await,
        StoreError::OtherAdvertiser { creative: c, line_item: l }
            if c == creative && l == globex.line_item.meta.id
    );
    // Another tenant sees neither end.
    let globex_scope = Some(globex.advertiser.meta.id);
    assert_err!(
        store
            .assign(assignment(li, creative, 5), globex_scope, &alice)
            .await,
        StoreError::NotFound { .. }
    );
    assert_err!(
        store.assignments_of(LineItemId(li), globex_scope).await,
        StoreError::NotFound { .. }
    );

    let entries = audit_of(&store, ObjectKind::LineItem, li).await;
    let actions: Vec<AuditAction> = entries.iter().map(|e| e.action).collect();
    assert_eq!(
        actions,
        [
            AuditAction::Assign,
            AuditAction::Assign,
            AuditAction::Create
        ]
    );
    assert_eq!(entries[0].principal, "user:alice");
    assert_eq!(entries[0].changes["weight"]["before"], 7);
    assert_eq!(entries[0].changes["weight"]["after"], 9);
    assert_eq!(entries[0].changes["creative_id"]["after"], creative);
    assert!(entries[0].changes["end"]["before"].is_string());
    assert!(entries[0].changes["end"]["after"].is_null());

    assert!(
        store
            .unassign(LineItemId(li), CreativeId(creative), owner, &alice)
            .await
            .unwrap()
    );
    assert!(
        !store
            .unassign(LineItemId(li), CreativeId(creative), owner, &alice)
            .await
            .unwrap()
    );
    assert!(store.catalog().await.unwrap().assignments.is_empty());
    let entries = audit_of(&store, ObjectKind::LineItem, li).await;
    assert_eq!(entries.len(), 4, "one entry per change");
    assert_eq!(entries[0].action, AuditAction::Unassign);
    assert_eq!(entries[0].changes["creative_id"]["before"], creative);
    assert!(entries[0].changes["creative_id"]["after"].is_null());

    store
        .archive(ObjectKind::Creative, creative, None, &alice)
        .await
        .unwrap();
    assert_err!(
        store
            .assign(assignment(li, creative, 5), None, &alice)
            .await,
        StoreError::Archived {
            kind: ObjectKind::Creative,
            ..
        }
    );
}

pub async fn copying_a_line_item_shares_its_links_and_creatives(
    store: Db,
    _clock: Arc<ManualClock>,
) {
    let acme = demand(&store, "Acme").await;
    let supply = supply(&store, "Daily News").await;
    let alice = Actor::user("alice", Role::Admin);
    let li = acme.line_item.meta.id;
    let placement = PlacementId(supply.placement.meta.id);
    store.link(LineItemId(li), placement, &alice).await.unwrap();
    let other = create(&store, line_item(acme.campaign.meta.id, "Other")).await;
    let shared = create(&store, creative(other.meta.id, "Shared")).await;
    store
        .assign(assignment(li, shared.meta.id, 5), None, &alice)
        .await
        .unwrap();
    let retired = create(&store, creative(li, "Retired")).await;
    store
        .archive(ObjectKind::Creative, retired.meta.id, None, &alice)
        .await
        .unwrap();
    let owner = Some(acme.advertiser.meta.id);

    let copy = store
        .copy_line_item(LineItemId(li), None, owner, &alice)
        .await
        .unwrap();
    assert_eq!(copy.name, "Copy of Acme");
    assert_eq!(copy.status, Status::Paused);
    assert_eq!(copy.parent_id, Some(acme.campaign.meta.id));
    let decoded: Stored<LineItem> = copy.decode().unwrap();
    assert_eq!(
        decoded.object,
        LineItem {
            name: "Copy of Acme".to_owned(),
            status: Status::Paused,
            ..acme.line_item.object.clone()
        }
    );
    let copy_id = LineItemId(copy.meta.id);
    assert_eq!(
        store.placements_of(copy_id, None).await.unwrap(),
        [placement]
    );
    assert_eq!(
        store.assignments_of(copy_id, None).await.unwrap(),
        [
            assignment(copy.meta.id, acme.creative.meta.id, 100),
            assignment(copy.meta.id, shared.meta.id, 5),
        ],
        "the original's own creatives and its assignments, not the archived one"
    );
    let actions: Vec<AuditAction> = audit_of(&store, ObjectKind::LineItem, copy.meta.id)
        .await
        .iter()
        .map(|e| e.action)
        .collect();
    assert_eq!(
        actions,
        [
            AuditAction::Assign,
            AuditAction::Assign,
            AuditAction::Link,
            AuditAction::Create
        ]
    );

    let named = store
        .copy_line_item(LineItemId(li), Some("Holiday".to_owned()), None, &alice)
        .await
        .unwrap();
    assert_eq!(named.name, "Holiday");
    assert_err!(
        store
            .copy_line_item(
                LineItemId(li),
                None,
                Some(supply.publisher.meta.id + 1000),
                &alice
            )
            .await,
        StoreError::NotFound { .. }
    );
    store
        .archive(ObjectKind::LineItem, li, None, &alice)
        .await
        .unwrap();
    assert_err!(
        store
            .copy_line_item(LineItemId(li), None, None, &alice)
            .await,
        StoreError::Archived { .. }
    );
}

/// Creating and revoking tokens, creating and deleting users, are audited with who did it and
/// the account's role, owner and label or name, never its hash; a failed one leaves no entry;
/// tenants never read accounts' entries.
pub async fn accounts_are_audited_without_secrets(store: Db, clock: Arc<ManualClock>) {
    let advertiser = create(&store, advertiser("Acme")).await.meta.id;
    let root = Actor::user("root", Role::Admin);
    let made = store
        .create_token(token(Role::Advertiser, Some(advertiser), 2), &root)
        .await
        .unwrap();
    assert_err!(
        store
            .create_token(token(Role::Advertiser, None, 3), &root)
            .await,
        StoreError::BadTokenOwner { .. }
    );
    clock.advance(SignedDuration::from_secs(60));
    store.revoke_token(made.id, &Actor::cli()).await.unwrap();
    let user = store
        .create_user(user("acme-ops", Role::Advertiser, Some(advertiser)), &root)
        .await
        .unwrap();
    store.delete_user("acme-ops", &root).await.unwrap();
    assert_eq!(store.delete_user("acme-ops", &root).await.unwrap(), None);

    let of = |kind: AuditKind| AuditQuery {
        object_kind: Some(kind),
        ..audit_page(MAX_PAGE)
    };
    let tokens = store.audit(&of(AuditKind::Token)).await.unwrap();
    let summary: Vec<_> = tokens
        .iter()
        .map(|e| {
            (
                e.action,
                e.principal.as_str(),
                e.object_id,
                e.object_name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (AuditAction::Revoke, "cli", made.id, "advertiser token 2"),
            (
                AuditAction::Create,
                "user:root",
                made.id,
                "advertiser token 2"
            ),
        ]
    );
    assert_eq!(
        tokens[1].changes,
        serde_json::json!({
            "role": { "before": null, "after": "advertiser" },
            "owner_id": { "before": null, "after": advertiser },
            "label": { "before": null, "after": "advertiser token 2" },
        })
    );
    assert_eq!(tokens[0].changes["role"]["before"], "advertiser");
    assert_eq!(tokens[0].at, clock.now());
    let users = store.audit(&of(AuditKind::User)).await.unwrap();
    let actions: Vec<_> = users.iter().map(|e| (e.action, e.object_id)).collect();
    assert_eq!(
        actions,
        [
            (AuditAction::Delete, user.id),
            (AuditAction::Create, user.id)
        ]
    );
    assert_eq!(users[1].changes["name"]["after"], "acme-ops");
    let everything = store.audit(&audit_page(MAX_PAGE)).await.unwrap();
    let text =
        serde_json::to_string(&everything.iter().map(|e| &e.changes).collect::<Vec<_>>()).unwrap();
    assert!(!text.contains("argon2") && !text.contains("hash"), "{text}");
    // The advertiser's own scope holds its object, not the accounts bound to it.
    let tenant = AuditQuery {
        scope: Some((ObjectKind::Advertiser.side(), advertiser)),
        ..audit_page(MAX_PAGE)
    };
    let kinds: Vec<_> = store
        .audit(&tenant)
        .await
        .unwrap()
        .iter()
        .map(|e| e.object_kind)
        .collect();
    assert_eq!(kinds, [AuditKind::Object(ObjectKind::Advertiser)]);
}
