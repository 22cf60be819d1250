//! The catalog as aggregation and reports see it: which ids exist (whatever their status: a
//! paused line item's outstanding tracking links still count), their parents, each
//! advertiser's time zone, and every object's name (reports show it beside the id).

use jiff::tz::TimeZone;
use rustc_hash::FxHashMap;

use crate::Dimension;

/// A line item's ancestry and the index of its advertiser's time zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineItemDim {
    pub campaign: u64,
    pub advertiser: u64,
    /// Index into [`Dimensions::zone`].
    pub zone: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacementDim {
    pub site: u64,
    pub publisher: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdvertiserDim {
    pub zone: u16,
    /// ISO 4217 code of the advertiser's money.
    pub currency: String,
}

/// Every object id with its parents; built with [`DimensionsBuilder`].
#[derive(Debug, Clone, Default)]
pub struct Dimensions {
    advertisers: FxHashMap<u64, AdvertiserDim>,
    campaigns: FxHashMap<u64, u64>,
    line_items: FxHashMap<u64, LineItemDim>,
    creatives: FxHashMap<u64, u64>,
    placements: FxHashMap<u64, PlacementDim>,
    /// Sites by id, with their publisher.
    sites: FxHashMap<u64, u64>,
    zones: Vec<TimeZone>,
    zone_names: Vec<String>,
    /// Names by the dimension whose values are the object's ids.
    names: FxHashMap<(Dimension, u64), String>,
}

impl Dimensions {
    pub fn builder() -> DimensionsBuilder {
        DimensionsBuilder::default()
    }

    pub fn line_item(&self, id: u64) -> Option<&LineItemDim> {
        self.line_items.get(&id)
    }

    /// The line item a creative belongs to.
    pub fn creative(&self, id: u64) -> Option<u64> {
        self.creatives.get(&id).copied()
    }

    pub fn placement(&self, id: u64) -> Option<&PlacementDim> {
        self.placements.get(&id)
    }

    /// The publisher a site belongs to.
    pub fn site(&self, id: u64) -> Option<u64> {
        self.sites.get(&id).copied()
    }

    pub fn advertiser(&self, id: u64) -> Option<&AdvertiserDim> {
        self.advertisers.get(&id)
    }

    /// The advertiser a campaign belongs to.
    pub fn campaign(&self, id: u64) -> Option<u64> {
        self.campaigns.get(&id).copied()
    }

    /// A zone by index; UTC for an index no line item or advertiser uses.
    pub fn zone(&self, index: u16) -> &TimeZone {
        static UTC: TimeZone = TimeZone::UTC;
        self.zones.get(usize::from(index)).unwrap_or(&UTC)
    }

    /// The IANA name of a zone by index.
    pub fn zone_name(&self, index: u16) -> &str {
        self.zone_names
            .get(usize::from(index))
            .map_or("UTC", String::as_str)
    }

    /// Line items of an advertiser, ascending.
    pub fn line_items_of(&self, advertiser: u64) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .line_items
            .iter()
            .filter(|(_, li)| li.advertiser == advertiser)
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Placements of a publisher, ascending.
    pub fn placements_of(&self, publisher: u64) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .placements
            .iter()
            .filter(|(_, p)| p.publisher == publisher)
            .map(|(&id, _)| id)
            .collect();
        ids.sort_unstable();
        ids
    }

    pub fn line_item_count(&self) -> usize {
        self.line_items.len()
    }

    /// The name of the object `id` is in `dimension` (advertiser, campaign, line item,
    /// creative, publisher, site or placement).
    pub fn name(&self, dimension: Dimension, id: u64) -> Option<&str> {
        self.names.get(&(dimension, id)).map(String::as_str)
    }

    /// Ids of the objects of `dimension` named `name`, ascending: compared whole, ignoring
    /// case and surrounding spaces (names are not unique: two campaigns may each have a
    /// "Run of site" line item).
    pub fn named(&self, dimension: Dimension, name: &str) -> Vec<u64> {
        let name = name.trim();
        let mut ids: Vec<u64> = self
            .names
            .iter()
            .filter(|((d, _), n)| *d == dimension && n.trim().eq_ignore_ascii_case(name))
            .map(|(&(_, id), _)| id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Every named object of `dimension`, by ascending id.
    pub fn names(&self, dimension: Dimension) -> Vec<(u64, &str)> {
        let mut names: Vec<(u64, &str)> = self
            .names
            .iter()
            .filter(|((d, _), _)| *d == dimension)
            .map(|(&(_, id), name)| (id, name.as_str()))
            .collect();
        names.sort_unstable();
        names
    }
}

/// Collects rows (in any order) and resolves ancestry in [`build`](Self::build).
#[derive(Debug, Default)]
pub struct DimensionsBuilder {
    advertisers: Vec<(u64, String, String)>,
    campaigns: Vec<(u64, u64)>,
    line_items: Vec<(u64, u64)>,
    creatives: Vec<(u64, u64)>,
    sites: Vec<(u64, u64)>,
    placements: Vec<(u64, u64)>,
    names: Vec<(Dimension, u64, String)>,
}

impl DimensionsBuilder {
    /// An advertiser with its IANA time zone name and currency code. An unknown zone (which
    /// validation never lets in) is read as UTC.
    pub fn advertiser(&mut self, id: u64, time_zone: &str, currency: &str) -> &mut Self {
        self.advertisers
            .push((id, time_zone.to_owned(), currency.to_owned()));
        self
    }

    pub fn campaign(&mut self, id: u64, advertiser: u64) -> &mut Self {
        self.campaigns.push((id, advertiser));
        self
    }

    pub fn line_item(&mut self, id: u64, campaign: u64) -> &mut Self {
        self.line_items.push((id, campaign));
        self
    }

    pub fn creative(&mut self, id: u64, line_item: u64) -> &mut Self {
        self.creatives.push((id, line_item));
        self
    }

    pub fn site(&mut self, id: u64, publisher: u64) -> &mut Self {
        self.sites.push((id, publisher));
        self
    }

    pub fn placement(&mut self, id: u64, site: u64) -> &mut Self {
        self.placements.push((id, site));
        self
    }

    /// The name of an object, by the dimension its id is a value of.
    pub fn name(&mut self, dimension: Dimension, id: u64, name: &str) -> &mut Self {
        self.names.push((dimension, id, name.to_owned()));
        self
    }

    /// Resolves every row's ancestry; a row whose parent is missing is left out.
    pub fn build(&self) -> Dimensions {
        let mut dims = Dimensions {
            names: self
                .names
                .iter()
                .map(|(dimension, id, name)| ((*dimension, *id), name.clone()))
                .collect(),
            ..Dimensions::default()
        };
        let mut zone_index: FxHashMap<String, u16> = FxHashMap::default();
        for (id, zone_name, currency) in &self.advertisers {
            let zone = match zone_index.get(zone_name) {
                Some(&index) => index,
                None => {
                    let zone = TimeZone::get(zone_name).unwrap_or(TimeZone::UTC);
                    // More than 65,535 distinct zones do not exist (the tz database has ~600).
                    let index = u16::try_from(dims.zones.len()).unwrap_or(u16::MAX);
                    dims.zones.push(zone);
                    dims.zone_names.push(zone_name.clone());
                    zone_index.insert(zone_name.clone(), index);
                    index
                }
            };
            dims.advertisers.insert(
                *id,
                AdvertiserDim {
                    zone,
                    currency: currency.clone(),
                },
            );
        }
        for &(id, advertiser) in &self.campaigns {
            if dims.advertisers.contains_key(&advertiser) {
                dims.campaigns.insert(id, advertiser);
            }
        }
        for &(id, campaign) in &self.line_items {
            let Some(&advertiser) = dims.campaigns.get(&campaign) else {
                continue;
            };
            let zone = dims.advertisers.get(&advertiser).map_or(0, |a| a.zone);
            dims.line_items.insert(
                id,
                LineItemDim {
                    campaign,
                    advertiser,
                    zone,
                },
            );
        }
        for &(id, line_item) in &self.creatives {
            if dims.line_items.contains_key(&line_item) {
                dims.creatives.insert(id, line_item);
            }
        }
        dims.sites = self.sites.iter().copied().collect();
        for &(id, site) in &self.placements {
            if let Some(&publisher) = dims.sites.get(&site) {
                dims.placements.insert(id, PlacementDim { site, publisher });
            }
        }
        dims
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestry_and_zones_resolve() {
        let dims = Dimensions::builder()
            .advertiser(1, "Europe/Berlin", "EUR")
            .advertiser(2, "America/New_York", "USD")
            .advertiser(3, "Europe/Berlin", "EUR")
            .advertiser(4, "Mars/Olympus", "USD")
            .campaign(10, 1)
            .campaign(20, 2)
            .line_item(100, 10)
            .line_item(200, 20)
            .line_item(999, 77)
            .creative(1000, 100)
            .creative(1001, 999)
            .site(5, 50)
            .placement(7, 5)
            .placement(8, 6)
            .build();
        let li = dims.line_item(100).unwrap();
        assert_eq!((li.campaign, li.advertiser), (10, 1));
        assert_eq!(dims.zone_name(li.zone), "Europe/Berlin");
        assert_eq!(
            dims.advertiser(3).unwrap().zone,
            li.zone,
            "zones are shared"
        );
        assert_eq!(
            dims.zone(dims.advertiser(4).unwrap().zone),
            &TimeZone::UTC,
            "an unknown zone reads as UTC"
        );
        assert!(dims.line_item(999).is_none(), "orphans are left out");
        assert_eq!(dims.creative(1000), Some(100));
        assert_eq!(dims.creative(1001), None);
        assert_eq!(
            dims.placement(7),
            Some(&PlacementDim {
                site: 5,
                publisher: 50
            })
        );
        assert!(dims.placement(8).is_none());
        assert_eq!(dims.line_items_of(2), vec![200]);
        assert_eq!(dims.placements_of(50), vec![7]);
        assert_eq!(dims.site(5), Some(50));
    }

    #[test]
    fn names_are_kept_by_dimension_and_found_ignoring_case() {
        let dims = Dimensions::builder()
            .name(Dimension::LineItem, 1, "Run of site")
            .name(Dimension::LineItem, 2, "Homepage takeover")
            .name(Dimension::LineItem, 3, "run of site ")
            .name(Dimension::Campaign, 4, "Run of site")
            .build();
        assert_eq!(dims.name(Dimension::LineItem, 2), Some("Homepage takeover"));
        assert_eq!(dims.name(Dimension::Campaign, 2), None);
        assert_eq!(dims.named(Dimension::LineItem, " RUN OF SITE"), vec![1, 3]);
        assert_eq!(dims.named(Dimension::Campaign, "Run of site"), vec![4]);
        assert!(dims.named(Dimension::LineItem, "Run").is_empty());
        assert_eq!(
            dims.names(Dimension::LineItem),
            vec![
                (1, "Run of site"),
                (2, "Homepage takeover"),
                (3, "run of site ")
            ]
        );
    }
}
