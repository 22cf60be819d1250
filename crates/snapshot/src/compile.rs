//! Catalog → snapshot: keep what an edge may serve, resolve it, sort it.

use jiff::Timestamp;
use marquee_model::{
    AdvertiserId, CampaignId, Catalog, CreativeId, LineItemId, PlacementId, PublisherId, SiteId,
};

use crate::Snapshot;
use crate::data::{
    AdvertiserEntry, AssignmentEntry, CampaignEntry, Channels, Content, CreativeEntry, Keyed,
    LineItemEntry, PlacementEntry, ProgrammaticEntry, PublisherEntry, SiteEntry, SnapshotData,
    find,
};
use crate::render::LiveTable;

/// What [`compile_with_stats`] left out, and why, for the manager to log.
///
/// "Orphaned" means the parent is not in the snapshot: absent from the catalog (not active) or
/// itself dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompileStats {
    pub campaigns_orphaned: usize,
    pub line_items_orphaned: usize,
    /// Flight end at or before the build time.
    pub line_items_ended: usize,
    /// Time zone unknown, or the flight's local times cannot be placed in it.
    pub line_items_bad_time_zone: usize,
    pub creatives_orphaned: usize,
    /// Pending or rejected by the publisher: only approved creatives serve.
    pub creatives_unapproved: usize,
    pub sites_orphaned: usize,
    pub placements_orphaned: usize,
    /// Links whose line item or placement is not in the snapshot.
    pub links_dropped: usize,
    /// Creative assignments whose line item or creative is not in the snapshot, whose flight
    /// ended at or before the build time, or that name the creative's own line item.
    pub assignments_dropped: usize,
    /// Line items whose every linked placement is out of the snapshot: their direct channel
    /// is off (they still bid on exchanges if they may); not counted in [`total`](Self::total).
    pub line_items_unplaced: usize,
}

impl CompileStats {
    /// Objects and links dropped for any reason.
    pub fn total(&self) -> usize {
        self.campaigns_orphaned
            + self.line_items_orphaned
            + self.line_items_ended
            + self.line_items_bad_time_zone
            + self.creatives_orphaned
            + self.creatives_unapproved
            + self.sites_orphaned
            + self.placements_orphaned
            + self.links_dropped
            + self.assignments_dropped
    }
}

/// Compiles the objects of `catalog` an edge may serve at or after `built_at`. Pure: no I/O, no
/// clock. See [`compile_live`] for the rules.
pub fn compile(catalog: &Catalog, built_at: Timestamp) -> Snapshot {
    compile_with_stats(catalog, built_at).0
}

/// Compiles `catalog` and reports what it dropped. Live statistics render as zero; see
/// [`compile_live`].
pub fn compile_with_stats(catalog: &Catalog, built_at: Timestamp) -> (Snapshot, CompileStats) {
    compile_live(catalog, built_at, &LiveTable::new())
}

/// Compiles `catalog` with each creative's live statistics rendered from `live` (by creative
/// id; a creative missing from it renders zeros), and reports what it dropped.
///
/// An object enters only if it and all its ancestors are in the catalog (which holds only
/// objects whose own status is active). Line items whose flight ended at or before `built_at`
/// are dropped, as are those whose time zone cannot be resolved; creatives of dropped line items
/// are dropped unless a kept assignment uses them elsewhere, and so are creatives the publisher
/// has not approved; links to dropped line items or placements are dropped, as are assignments
/// to dropped line items or creatives and those whose flight has ended. Line items that have not
/// started yet are kept: the edge checks the flight per request. The snapshot version is
/// `catalog.version`; `built_at` is kept to the microsecond, the header's precision.
pub fn compile_live(
    catalog: &Catalog,
    built_at: Timestamp,
    live: &LiveTable,
) -> (Snapshot, CompileStats) {
    let mut stats = CompileStats::default();

    let advertisers = sorted(catalog.advertisers.iter().map(|s| AdvertiserEntry {
        id: AdvertiserId(s.meta.id),
        currency: s.object.currency,
        domains: s.object.domains.clone(),
    }));

    let campaigns = sorted(catalog.campaigns.iter().filter_map(|s| {
        if find(&advertisers, s.object.advertiser_id).is_none() {
            stats.campaigns_orphaned += 1;
            return None;
        }
        Some(CampaignEntry {
            id: CampaignId(s.meta.id),
            advertiser_id: s.object.advertiser_id,
            frequency_caps: s.object.frequency_caps.clone(),
            categories: s.object.categories.clone(),
            app_bundle: s.object.app_bundle.clone(),
        })
    }));

    let publishers = sorted(catalog.publishers.iter().map(|s| PublisherEntry {
        id: PublisherId(s.meta.id),
    }));

    let sites = sorted(catalog.sites.iter().filter_map(|s| {
        if find(&publishers, s.object.publisher_id).is_none() {
            stats.sites_orphaned += 1;
            return None;
        }
        Some(SiteEntry {
            id: SiteId(s.meta.id),
            publisher_id: s.object.publisher_id,
            domain: s.object.domain.clone(),
        })
    }));

    let placements = sorted(catalog.placements.iter().filter_map(|s| {
        if find(&sites, s.object.site_id).is_none() {
            stats.placements_orphaned += 1;
            return None;
        }
        Some(PlacementEntry {
            id: PlacementId(s.meta.id),
            site_id: s.object.site_id,
            sizes: s.object.sizes.clone(),
            formats: s.object.formats.clone(),
            image_tag: s.object.image_tag,
            programmatic: s
                .object
                .programmatic
                .as_ref()
                .filter(|p| p.enabled)
                .map(|p| ProgrammaticEntry {
                    bidders: p.bidders.clone(),
                    timeout_ms: p.timeout_ms,
                    floor_micros: p.floor_micros.0,
                    revenue_share_permille: p.revenue_share_permille,
                }),
        })
    }));

    let mut line_items = sorted(catalog.line_items.iter().filter_map(|s| {
        let li = &s.object;
        let Some(campaign) = find(&campaigns, li.campaign_id) else {
            stats.line_items_orphaned += 1;
            return None;
        };
        let Some((start, end)) = li.flight() else {
            stats.line_items_bad_time_zone += 1;
            return None;
        };
        if end.is_some_and(|end| end <= built_at) {
            stats.line_items_ended += 1;
            return None;
        }
        Some(LineItemEntry {
            id: LineItemId(s.meta.id),
            campaign_id: li.campaign_id,
            advertiser_id: campaign.advertiser_id,
            tier: li.tier,
            weight: li.weight,
            flight_start: start.as_second(),
            flight_end: end.map(Timestamp::as_second),
            time_zone: li.time_zone.clone(),
            goal: li.goal,
            pacing: li.pacing,
            price: li.price,
            frequency_caps: li.frequency_caps.clone(),
            targeting: li.targeting.clone(),
            rotation: li.rotation,
            placements: Vec::new(),
            channels: Channels::from(li.channels.as_slice()),
            deals: li.deals.clone(),
            untokened_clicks: li.untokened_clicks,
            competes_with_programmatic: li.competes_with_programmatic,
        })
    }));

    // Line items the catalog links to some placement, kept or not.
    let mut linked = vec![false; line_items.len()];
    for &(line_item, placement) in &catalog.links {
        let index = line_items.binary_search_by_key(&line_item, LineItemEntry::key);
        if let Ok(i) = index {
            linked[i] = true;
        }
        match index {
            Ok(i) if find(&placements, placement).is_some() => {
                line_items[i].placements.push(placement)
            }
            _ => stats.links_dropped += 1,
        }
    }
    for (li, linked) in line_items.iter_mut().zip(linked) {
        li.placements.sort_unstable();
        // The store keeps links unique; dedup anyway since readers require strict order.
        li.placements.dedup();
        // Linked only to placements not served now (paused, or their site or publisher): it
        // serves on none of ours, where a line item without links serves on every one.
        if linked && li.placements.is_empty() && li.channels.direct {
            li.channels.direct = false;
            stats.line_items_unplaced += 1;
        }
    }

    // Each active, approved creative with the line item it was uploaded under, by creative id:
    // an assignment of any other would name a creative the snapshot leaves out.
    let mut active_creatives: Vec<(CreativeId, LineItemId)> = catalog
        .creatives
        .iter()
        .filter(|s| s.object.approval.is_approved())
        .map(|s| (CreativeId(s.meta.id), s.object.line_item_id))
        .collect();
    active_creatives.sort_unstable();
    let mut assignments: Vec<AssignmentEntry> = catalog
        .assignments
        .iter()
        .filter(|a| {
            let kept = find(&line_items, a.line_item_id).is_some()
                && active_creatives
                    .binary_search_by_key(&a.creative_id, |&(id, _)| id)
                    .is_ok_and(|i| active_creatives[i].1 != a.line_item_id)
                && a.end.is_none_or(|end| end > built_at);
            if !kept {
                stats.assignments_dropped += 1;
            }
            kept
        })
        .map(|a| AssignmentEntry {
            line_item_id: a.line_item_id,
            creative_id: a.creative_id,
            weight: a.weight,
            start: a.start.map(Timestamp::as_second),
            end: a.end.map(Timestamp::as_second),
        })
        .collect();
    assignments.sort_unstable_by_key(|a| (a.line_item_id, a.creative_id));
    assignments.dedup_by_key(|a| (a.line_item_id, a.creative_id));
    // Creatives some kept line item uses from the library, uploaded under any line item.
    let mut assigned: Vec<CreativeId> = assignments.iter().map(|a| a.creative_id).collect();
    assigned.sort_unstable();
    assigned.dedup();

    let creatives = sorted(catalog.creatives.iter().filter_map(|s| {
        let c = &s.object;
        if find(&line_items, c.line_item_id).is_none()
            && assigned.binary_search(&CreativeId(s.meta.id)).is_err()
        {
            stats.creatives_orphaned += 1;
            return None;
        }
        if !c.approval.is_approved() {
            stats.creatives_unapproved += 1;
            return None;
        }
        Some(CreativeEntry {
            id: CreativeId(s.meta.id),
            line_item_id: c.line_item_id,
            size: c.size,
            landing_url: c.landing_url.clone(),
            weight: c.weight,
            content: Content::from(&c.content),
            ad_code: crate::render::ad_code_live(
                s.meta.id,
                c,
                live.get(&s.meta.id).copied().unwrap_or_default(),
            ),
            format: c.content.format(),
            secure: c.https_only(),
            categories: c.categories.clone(),
        })
    }));

    let snapshot = Snapshot {
        version: catalog.version,
        // Truncating to whole microseconds always yields a representable instant; the fallback
        // is unreachable.
        built_at: Timestamp::from_microsecond(built_at.as_microsecond()).unwrap_or(built_at),
        data: SnapshotData {
            advertisers,
            campaigns,
            line_items,
            creatives,
            publishers,
            sites,
            placements,
            assignments,
        },
    };
    (snapshot, stats)
}

/// Collects entries sorted strictly by id. The store's ids are unique; should a catalog repeat
/// one, the first occurrence wins so that readers' strict-order check still holds.
fn sorted<E: Keyed>(entries: impl Iterator<Item = E>) -> Vec<E> {
    let mut list: Vec<E> = entries.collect();
    list.sort_by_key(E::key);
    list.dedup_by_key(|e| e.key());
    list
}
