use marquee_model::{
    AdvertiserId, CampaignId, Catalog, Channel, CreativeId, Format, LineItemId, PlacementId,
    PublisherId, SiteId,
};
use marquee_snapshot::{CompileStats, Content, Snapshot, compile, compile_with_stats};

use crate::fixture::*;

fn ts(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>()
        .expect("valid timestamp")
        .as_second()
}

fn line_item_ids(snapshot: &Snapshot) -> Vec<u64> {
    snapshot.data.line_items.iter().map(|li| li.id.0).collect()
}

#[test]
fn a_complete_catalog_compiles_resolved() {
    let (snapshot, stats) = compile_with_stats(&minimal(), now());
    assert_eq!(stats, CompileStats::default());
    assert_eq!(snapshot.version, 7);
    assert_eq!(snapshot.built_at, now());
    let data = &snapshot.data;

    let advertiser = data.advertiser(AdvertiserId(1)).expect("advertiser kept");
    assert_eq!(advertiser.domains, vec!["brand1.example.com".to_owned()]);
    let campaign = data.campaign(CampaignId(10)).expect("campaign kept");
    assert_eq!(campaign.frequency_caps, vec![cap(3, "1d")]);

    let li = data.line_item(LineItemId(100)).expect("line item kept");
    assert_eq!(li.campaign_id, CampaignId(10));
    assert_eq!(li.advertiser_id, AdvertiserId(1));
    // Berlin is UTC+1 in November.
    assert_eq!(li.flight_start, ts("2026-10-31T23:00:00Z"));
    assert_eq!(li.flight_end, Some(ts("2026-11-30T23:00:00Z")));
    assert_eq!(li.time_zone, "Europe/Berlin");
    assert_eq!(li.placements, vec![PlacementId(100)]);
    assert_eq!(li.targeting, minimal().line_items[0].object.targeting);

    let creative = data.creative(CreativeId(1000)).expect("creative kept");
    assert_eq!(creative.line_item_id, LineItemId(100));
    assert!(matches!(&creative.content, Content::Image { image_url, .. }
        if image_url == "https://cdn.example.com/1000.png"));

    assert!(data.publisher(PublisherId(1)).is_some());
    assert_eq!(
        data.site(SiteId(10)).map(|s| s.domain.as_str()),
        Some("site10.example.com")
    );
    assert_eq!(
        data.placement(PlacementId(100)).map(|p| p.site_id),
        Some(SiteId(10))
    );
}

#[test]
fn flights_resolve_in_the_line_items_zone() {
    let mut catalog = minimal();
    let mut new_york = line_item(101, 10);
    new_york.object.time_zone = "America/New_York".into();
    new_york.object.end = None;
    // 02:30 does not exist in Berlin on 2027-03-28 (clocks jump 02:00 → 03:00); jiff's
    // compatible disambiguation moves it forward by the gap.
    let mut gap = line_item(102, 10);
    gap.object.start = civil("2027-03-28T02:30:00");
    gap.object.end = None;
    catalog.line_items.extend([new_york, gap]);

    let snapshot = compile(&catalog, now());
    let new_york = snapshot.data.line_item(LineItemId(101)).expect("kept");
    assert_eq!(new_york.flight_start, ts("2026-11-01T04:00:00Z"));
    assert_eq!(new_york.flight_end, None);
    assert_eq!(new_york.time_zone, "America/New_York");
    let gap = snapshot.data.line_item(LineItemId(102)).expect("kept");
    assert_eq!(gap.flight_start, ts("2027-03-28T01:30:00Z"));
}

#[test]
fn every_list_is_sorted_by_id_whatever_the_catalog_order() {
    let mut catalog = Catalog {
        version: 1,
        ..Catalog::default()
    };
    for id in [3, 1, 2] {
        catalog.advertisers.push(advertiser(id));
        catalog.campaigns.push(campaign(id * 10, id));
        catalog.line_items.push(line_item(id * 100, id * 10));
        catalog.creatives.push(creative(id * 1000 + 1, id * 100));
        catalog.creatives.push(creative(id * 1000, id * 100));
        catalog.publishers.push(publisher(id));
        catalog.sites.push(site(id * 10, id));
        catalog.placements.push(placement(id * 100, id * 10));
    }
    catalog.links = vec![
        link(100, 300),
        link(100, 100),
        link(100, 200),
        link(100, 300),
    ];

    let (snapshot, stats) = compile_with_stats(&catalog, now());
    assert_eq!(
        stats,
        CompileStats::default(),
        "a duplicate link is not a drop"
    );
    let data = &snapshot.data;
    let ids = |list: Vec<u64>| {
        let mut sorted = list.clone();
        sorted.sort_unstable();
        assert_eq!(list, sorted);
        list
    };
    assert_eq!(
        ids(data.advertisers.iter().map(|e| e.id.0).collect()),
        [1, 2, 3]
    );
    assert_eq!(
        ids(data.campaigns.iter().map(|e| e.id.0).collect()),
        [10, 20, 30]
    );
    assert_eq!(ids(line_item_ids(&snapshot)), [100, 200, 300]);
    assert_eq!(
        ids(data.creatives.iter().map(|e| e.id.0).collect()),
        [1000, 1001, 2000, 2001, 3000, 3001]
    );
    assert_eq!(
        ids(data.publishers.iter().map(|e| e.id.0).collect()),
        [1, 2, 3]
    );
    assert_eq!(
        ids(data.sites.iter().map(|e| e.id.0).collect()),
        [10, 20, 30]
    );
    assert_eq!(
        ids(data.placements.iter().map(|e| e.id.0).collect()),
        [100, 200, 300]
    );
    assert_eq!(
        data.line_items[0].placements,
        [PlacementId(100), PlacementId(200), PlacementId(300)],
        "sorted and deduplicated"
    );
    for id in [1, 2, 3] {
        assert_eq!(
            data.line_item(LineItemId(id * 100)).map(|li| li.id.0),
            Some(id * 100)
        );
    }
    assert!(data.line_item(LineItemId(150)).is_none());
}

#[test]
fn a_campaign_without_its_advertiser_takes_its_descendants_with_it() {
    let mut catalog = minimal();
    catalog.advertisers.clear(); // Paused or archived: not in the catalog.
    let (snapshot, stats) = compile_with_stats(&catalog, now());
    assert!(snapshot.data.campaigns.is_empty());
    assert!(snapshot.data.line_items.is_empty());
    assert!(snapshot.data.creatives.is_empty());
    assert_eq!(
        snapshot.data.placements.len(),
        1,
        "the supply side is unaffected"
    );
    assert_eq!(
        stats,
        CompileStats {
            campaigns_orphaned: 1,
            line_items_orphaned: 1,
            creatives_orphaned: 1,
            links_dropped: 1,
            ..CompileStats::default()
        }
    );
    assert_eq!(stats.total(), 4);
}

#[test]
fn a_line_item_without_its_campaign_is_dropped() {
    let mut catalog = minimal();
    catalog.line_items.push(line_item(101, 11));
    catalog.creatives.push(creative(1001, 101));
    catalog.links.push(link(101, 100));
    let (snapshot, stats) = compile_with_stats(&catalog, now());
    assert_eq!(line_item_ids(&snapshot), [100]);
    assert_eq!(snapshot.data.creatives.len(), 1);
    assert_eq!(stats.line_items_orphaned, 1);
    assert_eq!(stats.creatives_orphaned, 1);
    assert_eq!(stats.links_dropped, 1);
}

#[test]
fn line_items_whose_flight_ended_at_or_before_the_build_time_are_dropped() {
    let mut catalog = minimal();
    // now() is 2026-11-21T12:00:00Z, 13:00 in Berlin.
    let ends = [
        (101, Some("2026-11-21T13:00:00")), // exactly now: ended
        (102, Some("2026-11-21T12:59:59")), // a second before: ended
        (103, Some("2026-11-21T13:00:01")), // a second after: serving
        (104, None),                        // open-ended: serving
    ];
    for (id, end) in ends {
        let mut li = line_item(id, 10);
        li.object.end = end.map(civil);
        catalog.line_items.push(li);
        catalog.creatives.push(creative(id * 10, id));
        catalog.links.push(link(id, 100));
    }
    let mut future = line_item(105, 10);
    future.object.start = civil("2027-01-01T00:00:00");
    future.object.end = Some(civil("2027-02-01T00:00:00"));
    catalog.line_items.push(future);

    let (snapshot, stats) = compile_with_stats(&catalog, now());
    assert_eq!(
        line_item_ids(&snapshot),
        [100, 103, 104, 105],
        "not-yet-started is kept"
    );
    assert_eq!(stats.line_items_ended, 2);
    assert_eq!(
        stats.creatives_orphaned, 2,
        "creatives of ended line items go too"
    );
    assert_eq!(stats.links_dropped, 2);
    let creatives: Vec<u64> = snapshot.data.creatives.iter().map(|c| c.id.0).collect();
    assert_eq!(creatives, [1000, 1030, 1040]);
}

#[test]
fn line_items_whose_time_zone_cannot_be_resolved_are_dropped() {
    let mut catalog = minimal();
    let mut bad = line_item(101, 10);
    bad.object.time_zone = "Mars/Olympus_Mons".into();
    catalog.line_items.push(bad);
    catalog.creatives.push(creative(1001, 101));
    catalog.links.push(link(101, 100));
    let (snapshot, stats) = compile_with_stats(&catalog, now());
    assert_eq!(line_item_ids(&snapshot), [100]);
    assert_eq!(
        stats,
        CompileStats {
            line_items_bad_time_zone: 1,
            creatives_orphaned: 1,
            links_dropped: 1,
            ..CompileStats::default()
        }
    );
}

#[test]
fn supply_objects_need_all_their_ancestors() {
    let mut catalog = minimal();
    catalog.sites.push(site(11, 2)); // publisher 2 is not active
    catalog.placements.push(placement(101, 11)); // its site is dropped
    catalog.placements.push(placement(102, 12)); // site 12 is not active
    catalog.links.extend([link(100, 101), link(100, 102)]);
    let (snapshot, stats) = compile_with_stats(&catalog, now());
    let placements: Vec<u64> = snapshot.data.placements.iter().map(|p| p.id.0).collect();
    assert_eq!(placements, [100]);
    assert_eq!(snapshot.data.sites.len(), 1);
    assert_eq!(snapshot.data.line_items[0].placements, [PlacementId(100)]);
    assert_eq!(
        stats,
        CompileStats {
            sites_orphaned: 1,
            placements_orphaned: 2,
            links_dropped: 2,
            ..CompileStats::default()
        }
    );
}

/// A line item linked only to a placement that is not served now (here its site is inactive;
/// a paused placement is the same) serves on none of ours: without the link it would serve on
/// every placement, as a line item without links does.
#[test]
fn a_line_item_whose_placements_are_all_out_serves_on_none() {
    let mut catalog = minimal();
    catalog.placements.push(placement(102, 12)); // site 12 is not active
    catalog.links = vec![link(100, 102)];
    let (snapshot, stats) = compile_with_stats(&catalog, now());
    let li = &snapshot.data.line_items[0];
    assert!(li.placements.is_empty());
    assert!(!li.channels.contains(Channel::Direct), "{:?}", li.channels);
    assert_eq!(stats.line_items_unplaced, 1);
    // Without any link it serves everywhere, as before.
    catalog.links.clear();
    let snapshot = compile(&catalog, now());
    assert!(
        snapshot.data.line_items[0]
            .channels
            .contains(Channel::Direct)
    );
}

#[test]
fn links_to_objects_not_in_the_catalog_are_dropped() {
    let mut catalog = minimal();
    catalog.links.extend([link(999, 100), link(100, 999)]);
    let (snapshot, stats) = compile_with_stats(&catalog, now());
    assert_eq!(snapshot.data.line_items[0].placements, [PlacementId(100)]);
    assert_eq!(stats.links_dropped, 2);
}

#[test]
fn build_time_is_kept_to_the_microsecond() {
    let built_at = jiff::Timestamp::from_nanosecond(1_700_000_000_123_456_789).expect("valid");
    let snapshot = compile(&minimal(), built_at);
    assert_eq!(snapshot.built_at.as_nanosecond(), 1_700_000_000_123_456_000);
}

#[test]
fn bidder_fields_are_carried_and_resolved() {
    let snapshot = compile(&rich(), now());
    let data = &snapshot.data;
    let campaign = data.campaign(CampaignId(10)).expect("kept");
    assert_eq!(campaign.categories, vec!["IAB2".to_owned()]);
    assert_eq!(campaign.app_bundle.as_deref(), Some("com.example.app"));

    let li = data.line_item(LineItemId(101)).expect("kept");
    assert_eq!(
        li.channels.iter().collect::<Vec<_>>(),
        [Channel::Direct, Channel::Exchange]
    );
    let direct = data.line_item(LineItemId(100)).expect("kept").channels;
    assert!(direct.contains(Channel::Direct) && !direct.contains(Channel::Exchange));
    assert_eq!(li.deals, vec!["AB-Agency1-0001".to_owned()]);

    let creative = |id| data.creative(CreativeId(id)).expect("kept");
    // A creative's own categories win; one without inherits its campaign's.
    let under = |id| data.line_item(creative(id).line_item_id).expect("kept");
    assert_eq!(data.categories_of(creative(1001), under(1001)), ["IAB3-1"]);
    assert!(creative(1002).categories.is_empty());
    assert_eq!(data.categories_of(creative(1002), under(1002)), ["IAB2"]);
    let formats: Vec<Format> = (1000..=1004).map(|id| creative(id).format).collect();
    assert_eq!(
        formats,
        [
            Format::Banner,
            Format::Banner,
            Format::Banner,
            Format::Native,
            Format::Video
        ]
    );
    assert!(matches!(&creative(1003).content,
        Content::Native(native) if native.image_size.is_some_and(|s| s.w == 1200)));
    assert!(matches!(&creative(1004).content,
        Content::Vast { mimes, protocols, .. } if mimes == &["video/mp4"] && protocols == &[7, 8]));
    // The image, tag and native creatives load only https; the HTML one's markup has no
    // URL at all, and the landing page is https.
    assert!((1000..=1004).all(|id| creative(id).secure));
}

#[test]
fn secure_is_computed_from_every_url_the_creative_uses() {
    let mut catalog = minimal();
    let mut insecure_image = creative(1001, 100);
    insecure_image.object.content = marquee_model::CreativeContent::Image {
        image_url: "http://cdn.example.com/a.png".into(),
        alt: String::new(),
    };
    let mut insecure_landing = creative(1002, 100);
    insecure_landing.object.landing_url = "http://brand.example.com/".into();
    let mut insecure_tag = creative(1003, 100);
    insecure_tag.object.content = marquee_model::CreativeContent::ThirdPartyTag {
        tag: "<script src=\"HTTP://ads.example.com/t.js\"></script>".into(),
    };
    catalog
        .creatives
        .extend([insecure_image, insecure_landing, insecure_tag]);
    let snapshot = compile(&catalog, now());
    let secure: Vec<bool> = snapshot.data.creatives.iter().map(|c| c.secure).collect();
    assert_eq!(secure, [true, false, false, false]);
}

fn assignment(
    line_item: u64,
    creative: u64,
    weight: u32,
    end: Option<&str>,
) -> marquee_model::CreativeAssignment {
    marquee_model::CreativeAssignment {
        line_item_id: LineItemId(line_item),
        creative_id: CreativeId(creative),
        weight,
        start: Some(now()),
        end: end.map(|e| e.parse().expect("valid timestamp")),
    }
}

#[test]
fn library_creatives_are_resolved_per_line_item() {
    let mut catalog = minimal();
    catalog.line_items.push(line_item(101, 10));
    catalog.creatives.push(creative(1001, 100));
    catalog.assignments = vec![
        assignment(100, 1000, 5, None), // its own line item
        assignment(101, 999, 5, None),  // no such creative
        assignment(101, 1000, 40, Some("2027-01-01T00:00:00Z")), // kept
        assignment(101, 1001, 5, Some("2026-11-21T11:00:00Z")), // ended before the build
    ];
    let (snapshot, stats) = compile_with_stats(&catalog, now());
    assert_eq!(stats.assignments_dropped, 3);
    assert_eq!(
        snapshot.data.assignments,
        [marquee_snapshot::AssignmentEntry {
            line_item_id: LineItemId(101),
            creative_id: CreativeId(1000),
            weight: 40,
            start: Some(now().as_second()),
            end: Some(ts("2027-01-01T00:00:00Z")),
        }]
    );

    // The line item it was uploaded under stops (paused, out of the catalog): the creative
    // still serves where the library put it; its unassigned sibling goes.
    catalog.line_items.retain(|li| li.meta.id != 100);
    let (snapshot, stats) = compile_with_stats(&catalog, now());
    let creatives: Vec<u64> = snapshot.data.creatives.iter().map(|c| c.id.0).collect();
    assert_eq!(creatives, [1000]);
    assert_eq!(stats.creatives_orphaned, 1);
    assert_eq!(snapshot.data.assignments.len(), 1);
}

#[test]
fn a_creative_the_publisher_has_not_approved_does_not_serve() {
    let mut catalog = minimal();
    let mut pending = creative(1001, 100);
    pending.object.approval = marquee_model::Approval::Pending;
    let mut rejected = creative(1002, 100);
    rejected.object.approval = marquee_model::Approval::Rejected {
        reason: "the landing page is down".into(),
    };
    catalog.creatives.extend([pending, rejected]);
    // Another line item using the pending one from the library does not serve it either.
    catalog.line_items.push(line_item(101, 10));
    catalog.assignments = vec![assignment(101, 1001, 5, None)];
    let (snapshot, stats) = compile_with_stats(&catalog, now());
    let served: Vec<u64> = snapshot.data.creatives.iter().map(|c| c.id.0).collect();
    assert_eq!(
        served,
        [1000],
        "only the approved creative is in the snapshot"
    );
    assert!(snapshot.data.assignments.is_empty());
    assert_eq!(
        stats,
        CompileStats {
            creatives_unapproved: 2,
            assignments_dropped: 1,
            ..CompileStats::default()
        }
    );
}
