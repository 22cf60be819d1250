//! The compiled, resolved objects an edge serves from. Every list is sorted by id, strictly
//! ascending, so lookups binary-search.

use marquee_model::{
    AdvertiserId, CampaignId, Channel, CreativeContent, CreativeId, Currency, Format, FrequencyCap,
    Goal, ImageTag, LineItemId, PacingMode, PlacementId, Price, PublisherId, RotationMode, SiteId,
    Size, Targeting, Tier, UntokenedClicks,
};
use serde::{Deserialize, Serialize};

/// The payload of a snapshot: every object an edge may serve, resolved and sorted by id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SnapshotData {
    pub advertisers: Vec<AdvertiserEntry>,
    pub campaigns: Vec<CampaignEntry>,
    pub line_items: Vec<LineItemEntry>,
    pub creatives: Vec<CreativeEntry>,
    pub publishers: Vec<PublisherEntry>,
    pub sites: Vec<SiteEntry>,
    pub placements: Vec<PlacementEntry>,
    /// Library creatives served under line items besides the one each was uploaded under,
    /// strictly ascending by (line item, creative).
    pub assignments: Vec<AssignmentEntry>,
}

/// A line item's use of a creative uploaded under another line item (the creative library),
/// resolved: both are in the snapshot, and the flight has not ended at build time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssignmentEntry {
    pub line_item_id: LineItemId,
    pub creative_id: CreativeId,
    /// Share in the line item's weighted rotation, in place of the creative's own weight.
    pub weight: u32,
    /// Serves from this instant on (unix seconds); `None`: whenever the line item does.
    pub start: Option<i64>,
    /// Serves before this instant (unix seconds, exclusive); `None`: whenever the line item
    /// does.
    pub end: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdvertiserEntry {
    pub id: AdvertiserId,
    pub currency: Currency,
    /// Landing-page domains (OpenRTB `adomain`).
    pub domains: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CampaignEntry {
    pub id: CampaignId,
    pub advertiser_id: AdvertiserId,
    pub frequency_caps: Vec<FrequencyCap>,
    /// IAB content categories of its creatives that name none of their own.
    pub categories: Vec<String>,
    /// The advertised app's bundle (OpenRTB `bundle`, checked against `bapp`).
    pub app_bundle: Option<String>,
}

// Deliberately the twin of the model's `LineItem`, field for field where nothing needs resolving:
// the edge's copy, with ids, times and links resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineItemEntry {
    pub id: LineItemId,
    pub campaign_id: CampaignId,
    /// The campaign's advertiser, resolved so the edge needs no second lookup.
    pub advertiser_id: AdvertiserId,
    pub tier: Tier,
    pub weight: u32,
    /// Flight start in unix seconds, resolved in `time_zone`.
    pub flight_start: i64,
    /// Flight end (exclusive) in unix seconds; `None` for an open-ended flight.
    pub flight_end: Option<i64>,
    /// IANA name; the engine resolves day-of-week and hour targeting in it.
    pub time_zone: String,
    pub goal: Option<Goal>,
    pub pacing: PacingMode,
    pub price: Price,
    pub frequency_caps: Vec<FrequencyCap>,
    /// Kept as data: the edge builds its targeting index from it at load time.
    pub targeting: Option<Targeting>,
    pub rotation: RotationMode,
    /// Linked placements that are in the snapshot, strictly ascending.
    pub placements: Vec<PlacementId>,
    /// Where it takes part: our placements, exchanges' bid requests, or both.
    pub channels: Channels,
    /// Exchange deal ids it buys; empty for the open auction only.
    pub deals: Vec<String>,
    /// Whether image-tag clicks are charged.
    pub untokened_clicks: UntokenedClicks,
    /// Whether, as a sponsorship or standard line item, it still meets programmatic demand.
    pub competes_with_programmatic: bool,
}

/// The channels of a line item, two flags rather than the model's list: no allocation per
/// line item in a snapshot of many.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Channels {
    pub direct: bool,
    pub exchange: bool,
}

impl Channels {
    pub fn contains(self, channel: Channel) -> bool {
        match channel {
            Channel::Direct => self.direct,
            Channel::Exchange => self.exchange,
        }
    }

    /// The channels set, direct first.
    pub fn iter(self) -> impl Iterator<Item = Channel> {
        [Channel::Direct, Channel::Exchange]
            .into_iter()
            .filter(move |c| self.contains(*c))
    }
}

impl From<&[Channel]> for Channels {
    fn from(list: &[Channel]) -> Channels {
        Channels {
            direct: list.contains(&Channel::Direct),
            exchange: list.contains(&Channel::Exchange),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreativeEntry {
    pub id: CreativeId,
    pub line_item_id: LineItemId,
    pub size: Option<Size>,
    pub landing_url: String,
    pub weight: u32,
    pub content: Content,
    /// The iframe document, prepared for the edge to fill; `None` for video and audio.
    pub ad_code: Option<crate::AdCode>,
    /// What it fills: banner (image, HTML, tag), native, video, or audio (VAST with only
    /// `audio/*` media).
    pub format: Format,
    /// Whether everything it loads or links to is https (see `Creative::https_only`).
    pub secure: bool,
    /// Its own IAB content categories; empty means its campaign's (see
    /// [`SnapshotData::categories_of`]). Not copied here, so compiling allocates nothing for
    /// the common case of categories set per campaign.
    pub categories: Vec<String>,
}

/// What a creative shows. Mirrors [`CreativeContent`], which is internally tagged for JSON and
/// so cannot be read back by a non-self-describing format such as postcard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Content {
    Image {
        image_url: String,
        alt: String,
    },
    Html {
        html: String,
    },
    ThirdPartyTag {
        tag: String,
    },
    /// Boxed: the largest variant by far, it would otherwise size every creative's content.
    Native(Box<NativeContent>),
    Vast {
        xml: Option<String>,
        url: Option<String>,
        duration_secs: u32,
        mimes: Vec<String>,
        protocols: Vec<u16>,
    },
}

/// The assets of a native ad (OpenRTB Native 1.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NativeContent {
    pub title: String,
    /// The description (`data` type 2); may be empty.
    pub body: String,
    /// The sponsor's name (`data` type 1).
    pub sponsored_by: String,
    /// The main image (`img` type 3) and its size.
    pub image_url: Option<String>,
    /// The icon (`img` type 1) and its size.
    pub icon_url: Option<String>,
    /// The call to action (`data` type 12).
    pub call_to_action: Option<String>,
    pub image_size: Option<Size>,
    pub icon_size: Option<Size>,
}

// The field lists repeat the model's `CreativeContent` (and its validation and rendering)
// deliberately: destructured whole, a field added there fails to compile here until it is carried.
impl From<&CreativeContent> for Content {
    fn from(content: &CreativeContent) -> Self {
        match content.clone() {
            CreativeContent::Image { image_url, alt } => Content::Image { image_url, alt },
            CreativeContent::Html { html } => Content::Html { html },
            CreativeContent::ThirdPartyTag { tag } => Content::ThirdPartyTag { tag },
            CreativeContent::Native {
                title,
                body,
                sponsored_by,
                image_url,
                icon_url,
                call_to_action,
                image_size,
                icon_size,
            } => Content::Native(Box::new(NativeContent {
                title,
                body,
                sponsored_by,
                image_url,
                icon_url,
                call_to_action,
                image_size,
                icon_size,
            })),
            // A deliberate twin of the model's field list too (see the note above the impl).
            CreativeContent::Vast {
                xml,
                url,
                duration_secs,
                mimes,
                protocols,
            } => Content::Vast {
                xml,
                url,
                duration_secs,
                mimes,
                protocols,
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublisherEntry {
    pub id: PublisherId,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteEntry {
    pub id: SiteId,
    pub publisher_id: PublisherId,
    pub domain: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementEntry {
    pub id: PlacementId,
    pub site_id: SiteId,
    pub sizes: Vec<Size>,
    pub formats: Vec<Format>,
    /// Whether the untokened image tag is answered.
    pub image_tag: ImageTag,
    /// Programmatic demand, when it is on: the edge's one branch on the ad path.
    pub programmatic: Option<ProgrammaticEntry>,
}

/// A placement's programmatic demand, resolved for the edge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgrammaticEntry {
    /// Gateway bidders asked, by name; empty for all.
    pub bidders: Vec<String>,
    pub timeout_ms: u32,
    /// In micros of the gateway's currency.
    pub floor_micros: i64,
    /// The publisher's cut of a bid, per mille.
    pub revenue_share_permille: u32,
}

/// An entry with an id that its list is sorted by.
pub(crate) trait Keyed {
    type Id: Ord + Copy;
    fn key(&self) -> Self::Id;
}

macro_rules! keyed {
    ($($entry:ty => $id:ty),* $(,)?) => {$(
        impl Keyed for $entry {
            type Id = $id;
            fn key(&self) -> $id {
                self.id
            }
        }
    )*};
}

keyed!(
    AdvertiserEntry => AdvertiserId,
    CampaignEntry => CampaignId,
    LineItemEntry => LineItemId,
    CreativeEntry => CreativeId,
    PublisherEntry => PublisherId,
    SiteEntry => SiteId,
    PlacementEntry => PlacementId,
);

/// Binary search in a list sorted by id.
pub(crate) fn find<E: Keyed>(list: &[E], id: E::Id) -> Option<&E> {
    list.binary_search_by_key(&id, E::key)
        .ok()
        .map(|i| &list[i])
}

/// Whether ids are strictly ascending, which [`find`] relies on.
pub(crate) fn strictly_ascending<T: Ord + Copy>(ids: impl IntoIterator<Item = T>) -> bool {
    let mut ids = ids.into_iter();
    let Some(mut previous) = ids.next() else {
        return true;
    };
    ids.all(|id| {
        let ascending = previous < id;
        previous = id;
        ascending
    })
}

/// One accessor by id per entity list (each list sorted by id, see [`find`]).
macro_rules! by_id {
    ($($list:ident: $name:ident($id:ty) -> $entry:ty;)+) => {
        impl SnapshotData {
            $(
                pub fn $name(&self, id: $id) -> Option<&$entry> {
                    find(&self.$list, id)
                }
            )+
        }
    };
}

by_id! {
    advertisers: advertiser(AdvertiserId) -> AdvertiserEntry;
    campaigns: campaign(CampaignId) -> CampaignEntry;
    line_items: line_item(LineItemId) -> LineItemEntry;
    creatives: creative(CreativeId) -> CreativeEntry;
    publishers: publisher(PublisherId) -> PublisherEntry;
    sites: site(SiteId) -> SiteEntry;
    placements: placement(PlacementId) -> PlacementEntry;
}

impl SnapshotData {
    /// The IAB categories of a creative served under `line_item` (OpenRTB `cat`): its own, or
    /// else the campaign's of the line item serving it, which for a library creative need not
    /// be the one it was uploaded under (the engine checks `bcat` against the same).
    pub fn categories_of<'s>(
        &'s self,
        creative: &'s CreativeEntry,
        line_item: &LineItemEntry,
    ) -> &'s [String] {
        if !creative.categories.is_empty() {
            return &creative.categories;
        }
        self.campaign(line_item.campaign_id)
            .map_or(&[], |campaign| campaign.categories.as_slice())
    }

    /// The name of the first list that is not strictly ascending by id, if any. A reader checks
    /// this because lookups binary-search and would silently miss entries otherwise.
    pub(crate) fn first_unsorted(&self) -> Option<&'static str> {
        fn ids<E: Keyed>(list: &[E]) -> bool {
            strictly_ascending(list.iter().map(E::key))
        }
        let checks = [
            ("advertisers", ids(&self.advertisers)),
            ("campaigns", ids(&self.campaigns)),
            ("line_items", ids(&self.line_items)),
            (
                "line_items[].placements",
                self.line_items
                    .iter()
                    .all(|li| strictly_ascending(li.placements.iter().copied())),
            ),
            ("creatives", ids(&self.creatives)),
            ("publishers", ids(&self.publishers)),
            ("sites", ids(&self.sites)),
            ("placements", ids(&self.placements)),
            (
                "assignments",
                strictly_ascending(
                    self.assignments
                        .iter()
                        .map(|a| (a.line_item_id, a.creative_id)),
                ),
            ),
        ];
        checks
            .into_iter()
            .find(|(_, sorted)| !sorted)
            .map(|(name, _)| name)
    }
}
