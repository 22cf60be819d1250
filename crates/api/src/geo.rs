//! Whether a line item's geo targeting can match where the edges learn a request's location,
//! and the warning that says so when it cannot. The API's answers and the dashboard's line item
//! page both word it here.

use std::any::Any;

use marquee_model::{Channel, LineItem, Object, Targeting};

/// Where the edges learn the location of an ad request (`/ad`, `/ad.json`), and so which geo
/// attributes ([`Targeting::is_geo`]) can match one. Bid requests are not judged by it: they
/// carry the location the exchange sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GeoAvailability {
    /// Where the place comes from: country, region, city, metro, postal code, point.
    pub location: GeoLocationSource,
    /// Whether a network database (`geo.asn_database`) gives the autonomous system and the
    /// connection type.
    pub network: bool,
}

/// Where the edges learn the place an ad request comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GeoLocationSource {
    /// Nowhere: no place attribute can match.
    #[default]
    None,
    /// The country only, from the header a CDN or load balancer sets (`edge.country_header`).
    CountryHeaderOnly,
    /// A geo database (`geo.database`) resolves the client's address: every place attribute
    /// can match.
    Configured,
}

impl GeoLocationSource {
    /// The source of an installation with a geo database configured or not, and a country
    /// header configured or not. The database gives everything the header gives.
    pub fn from_sources(database: bool, country_header: bool) -> GeoLocationSource {
        match (database, country_header) {
            (true, _) => GeoLocationSource::Configured,
            (false, true) => GeoLocationSource::CountryHeaderOnly,
            (false, false) => GeoLocationSource::None,
        }
    }
}

/// Why a geo leaf cannot match ad requests, in words; `None` when it can.
fn unresolved(geo: GeoAvailability, leaf: &Targeting) -> Option<&'static str> {
    match leaf {
        Targeting::Asn(_) | Targeting::ConnectionType(_) => (!geo.network)
            .then_some("no ASN or connection-type database is configured (geo.asn_database)"),
        _ => match geo.location {
            GeoLocationSource::Configured => None,
            GeoLocationSource::CountryHeaderOnly if matches!(leaf, Targeting::Country(_)) => None,
            GeoLocationSource::CountryHeaderOnly => Some(
                "no geo database is configured (geo.database), and the country header \
                 (edge.country_header) gives the country only",
            ),
            GeoLocationSource::None => Some(
                "no geo database is configured (geo.database) and no country header \
                 (edge.country_header)",
            ),
        },
    }
}

impl GeoAvailability {
    /// The warnings for a line item that takes ad requests (channel `direct`) and targets geo
    /// attributes ad requests cannot carry: one per missing source, naming the attributes it
    /// would give (each once, in the order written). Empty when there is nothing to warn about.
    pub fn line_item_warnings(self, line_item: &LineItem) -> Vec<String> {
        if !line_item.channels.contains(&Channel::Direct) {
            return Vec::new();
        }
        // Each reason with the attributes it keeps from matching.
        let mut missing: Vec<(&str, Vec<&str>)> = Vec::new();
        let leaves = line_item.targeting.iter().flat_map(Targeting::leaves);
        for leaf in leaves.filter(|leaf| leaf.is_geo()) {
            let Some(reason) = unresolved(self, leaf) else {
                continue;
            };
            let name = leaf.attribute();
            match missing.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, names)) if names.contains(&name) => {}
                Some((_, names)) => names.push(name),
                None => missing.push((reason, vec![name])),
            }
        }
        missing
            .into_iter()
            .map(|(reason, names)| {
                format!(
                    "geo targeting ({}) cannot match ad requests: {reason}",
                    names.join(", ")
                )
            })
            .collect()
    }
}

/// The warnings an object's answers carry: a line item's geo warnings; none for other kinds.
pub(crate) fn warnings<T: Object>(object: &T, geo: GeoAvailability) -> Vec<String> {
    (object as &dyn Any)
        .downcast_ref::<LineItem>()
        .map(|line_item| geo.line_item_warnings(line_item))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line_item(targeting: serde_json::Value, channels: &[&str]) -> LineItem {
        serde_json::from_value(json!({
            "campaign_id": 1,
            "name": "Boots",
            "start": "2026-12-01T00:00:00",
            "time_zone": "Europe/Berlin",
            "price": { "model": "cpm", "amount_micros": 2500000, "currency": "EUR" },
            "targeting": targeting,
            "channels": channels,
        }))
        .expect("a line item")
    }

    fn geo(location: GeoLocationSource, network: bool) -> GeoAvailability {
        GeoAvailability { location, network }
    }

    #[test]
    fn the_sources_decide_where_the_place_comes_from() {
        use GeoLocationSource as L;
        assert_eq!(L::from_sources(true, true), L::Configured);
        assert_eq!(L::from_sources(true, false), L::Configured);
        assert_eq!(L::from_sources(false, true), L::CountryHeaderOnly);
        assert_eq!(L::from_sources(false, false), L::None);
        assert_eq!(GeoAvailability::default(), geo(L::None, false));
    }

    #[test]
    fn each_missing_source_is_a_warning_naming_its_attributes_once() {
        let li = line_item(
            json!({ "all": [
                { "country": ["DE"] },
                { "any": [{ "metro": [807] }, { "not": { "postal": ["10115"] } }] },
                { "os": ["iOS"] },
                { "metro": [501] },
                { "connection_type": ["cellular"] },
                { "asn": [3320] }
            ]}),
            &["direct"],
        );
        let none = "no geo database is configured (geo.database) and no country header \
                    (edge.country_header)";
        let network = "geo targeting (connection_type, asn) cannot match ad requests: no ASN or \
                       connection-type database is configured (geo.asn_database)";
        assert_eq!(
            geo(GeoLocationSource::None, false).line_item_warnings(&li),
            [
                format!("geo targeting (country, metro, postal) cannot match ad requests: {none}"),
                network.to_owned()
            ]
        );
        assert_eq!(
            geo(GeoLocationSource::CountryHeaderOnly, true).line_item_warnings(&li),
            [
                "geo targeting (metro, postal) cannot match ad requests: no geo database is \
                 configured (geo.database), and the country header (edge.country_header) gives \
                 the country only"
            ]
        );
        assert_eq!(
            geo(GeoLocationSource::Configured, false).line_item_warnings(&li),
            [network]
        );
        assert!(
            geo(GeoLocationSource::Configured, true)
                .line_item_warnings(&li)
                .is_empty()
        );
    }

    #[test]
    fn nothing_to_warn_about_without_geo_or_without_ad_requests() {
        let nowhere = GeoAvailability::default();
        let header = geo(GeoLocationSource::CountryHeaderOnly, false);
        let country = line_item(json!({ "country": ["DE"] }), &["direct"]);
        assert!(header.line_item_warnings(&country).is_empty());
        let no_geo = line_item(json!({ "ip": ["10.0.0.0/8"] }), &["direct"]);
        assert!(nowhere.line_item_warnings(&no_geo).is_empty());
        let untargeted = line_item(serde_json::Value::Null, &["direct"]);
        assert!(nowhere.line_item_warnings(&untargeted).is_empty());
        // Bid requests carry the location the exchange sends.
        let exchange = line_item(json!({ "region": ["DE-BY"] }), &["exchange"]);
        assert!(nowhere.line_item_warnings(&exchange).is_empty());
        let both = line_item(json!({ "region": ["DE-BY"] }), &["direct", "exchange"]);
        assert_eq!(nowhere.line_item_warnings(&both).len(), 1);
    }

    #[test]
    fn only_line_items_carry_warnings() {
        let li = line_item(json!({ "region": ["DE-BY"] }), &["direct"]);
        assert_eq!(warnings(&li, GeoAvailability::default()).len(), 1);
        let everything = geo(GeoLocationSource::Configured, true);
        assert!(warnings(&li, everything).is_empty());
        let campaign: marquee_model::Campaign =
            serde_json::from_value(json!({ "advertiser_id": 1, "name": "Winter" }))
                .expect("a campaign");
        assert!(warnings(&campaign, GeoAvailability::default()).is_empty());
    }
}
