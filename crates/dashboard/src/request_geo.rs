//! Where why-not-served's test request comes from: its IP address looked up in the geo
//! database the edges use, the form's location fields over what the lookup gave, and a
//! targeting miss on a geo attribute told with the request's value beside the targeted ones.

use std::net::IpAddr;

use marquee_engine::Geo;
use marquee_geo::{GeoSource, Location};
use marquee_model::{ConnectionType, Targeting};

/// What looking up the test request's IP address gave.
#[derive(Debug)]
pub enum Lookup {
    /// The dashboard has no geo database: the address, if any, is not looked up.
    NoDatabase(Option<IpAddr>),
    /// No address given.
    NoAddress,
    /// The address is in no network the database knows.
    NotFound(IpAddr),
    Found(IpAddr, Location),
}

impl Lookup {
    /// Looks up `address` (the form's text, trimmed; empty for none) in `geo`'s current
    /// databases. Text that is not an IP address is an error, in words for the form.
    pub fn resolve(geo: Option<&GeoSource>, address: &str) -> Result<Lookup, String> {
        let address = match address {
            "" => None,
            text => Some(text.parse::<IpAddr>().map_err(|_| {
                format!("{text:?} is not an IP address such as 203.0.113.7 or 2001:db8::1")
            })?),
        };
        Ok(match (geo, address) {
            (None, address) => Lookup::NoDatabase(address),
            (Some(_), None) => Lookup::NoAddress,
            (Some(geo), Some(address)) => match geo.load().lookup(address) {
                Some(location) => Lookup::Found(address, location),
                None => Lookup::NotFound(address),
            },
        })
    }

    /// The resolved location in one line, e.g. `10.1.2.3 → DE · DE-BE · Berlin · 10115 ·
    /// 52.52, 13.40`; `None` when no address was given.
    pub fn describe(&self) -> Option<String> {
        Some(match self {
            Lookup::NoAddress | Lookup::NoDatabase(None) => return None,
            Lookup::NoDatabase(Some(address)) => {
                format!("{address} is not looked up — no geo database configured")
            }
            Lookup::NotFound(address) => format!("{address} → not in the geo database"),
            Lookup::Found(address, location) => {
                let parts: Vec<String> = [
                    location.country.map(|c| c.to_string()),
                    location.region.map(|r| r.to_string()),
                    location.city.as_deref().map(str::to_owned),
                    location.metro.map(|m| format!("metro {m}")),
                    location.postal.as_deref().map(str::to_owned),
                    location.point.map(|p| point_text(p.lat, p.lon)),
                    location.asn.map(|asn| match location.as_org.as_deref() {
                        Some(org) => format!("{} ({org})", asn_text(asn)),
                        None => asn_text(asn),
                    }),
                    location
                        .connection_type
                        .map(|kind| connection_label(kind).to_owned()),
                ]
                .into_iter()
                .flatten()
                .collect();
                if parts.is_empty() {
                    format!("{address} → in the geo database, without a location")
                } else {
                    format!("{address} → {}", parts.join(" · "))
                }
            }
        })
    }

    fn location(&self) -> Option<&Location> {
        match self {
            Lookup::Found(_, location) => Some(location),
            Lookup::NoDatabase(_) | Lookup::NoAddress | Lookup::NotFound(_) => None,
        }
    }

    /// Why the request has no value for `attribute`, which the form left empty (or has no
    /// field for: a point comes from the lookup only).
    fn unknown(&self, attribute: &str, typed: bool) -> String {
        match self {
            Lookup::NoDatabase(_) => "no geo database configured".into(),
            Lookup::NoAddress if typed => format!("no IP address or {attribute} given"),
            Lookup::NoAddress => "no IP address given".into(),
            Lookup::NotFound(address) => format!("{address} is not in the geo database"),
            Lookup::Found(address, _) => {
                format!("the geo database has no {attribute} for {address}")
            }
        }
    }
}

/// The test request's location: each field typed in the form, else what the lookup gave.
#[derive(Debug)]
pub struct RequestGeo<'a> {
    pub geo: Geo<'a>,
    lookup: &'a Lookup,
}

impl<'a> RequestGeo<'a> {
    pub fn new(typed: Geo<'a>, lookup: &'a Lookup) -> RequestGeo<'a> {
        let geo = match lookup.location() {
            None => typed,
            Some(found) => Geo {
                country: typed.country.or(found.country.as_ref().map(|c| c.as_str())),
                region: typed.region.or(found.region.as_ref().map(|r| r.as_str())),
                city: typed.city.or(found.city.as_deref()),
                point: typed.point.or(found.point.map(|p| (p.lat, p.lon))),
                metro: typed.metro.or(found.metro),
                postal: typed.postal.or(found.postal.as_deref()),
                asn: typed.asn.or(found.asn),
                connection_type: typed.connection_type.or(found.connection_type),
            },
        };
        RequestGeo { geo, lookup }
    }

    /// A targeting miss the engine blamed on `blamed` (an attribute's JSON key, `not `
    /// before it when a negated leaf matched), in words with the request's value and every
    /// value `targeting` lists for that attribute: `targeting: country — request: US;
    /// targeted: DE, AT`, or `country: unknown — no geo database configured; targeted: DE,
    /// AT`. `None` when the attribute is not a geo one of `targeting`.
    pub fn miss(&self, blamed: &str, targeting: &Targeting) -> Option<String> {
        let attribute = blamed.strip_prefix("not ").unwrap_or(blamed);
        let mut request = None;
        // The form has a field for every geo attribute but the circle's point.
        let mut typed = true;
        let mut targeted: Vec<String> = Vec::new();
        for leaf in targeting.leaves().filter(|l| l.attribute() == attribute) {
            let (value, values) = self.leaf_values(leaf)?;
            request = Some(value);
            typed = !matches!(leaf, Targeting::GeoRadius(_));
            for value in values {
                if !targeted.contains(&value) {
                    targeted.push(value);
                }
            }
        }
        let targeted = targeted.join(", ");
        Some(match request? {
            Some(value) => format!("targeting: {blamed} — request: {value}; targeted: {targeted}"),
            None => format!(
                "{attribute}: unknown — {}; targeted: {targeted}",
                self.lookup.unknown(attribute, typed)
            ),
        })
    }

    /// The request's value of a geo leaf's attribute and the values the leaf lists, as the
    /// page shows them; `None` for a leaf that is not a geo one.
    fn leaf_values(&self, leaf: &Targeting) -> Option<(Option<String>, Vec<String>)> {
        let geo = &self.geo;
        let owned = |value: Option<&str>| value.map(str::to_owned);
        Some(match leaf {
            Targeting::Country(codes) => (owned(geo.country), codes.clone()),
            Targeting::Region(codes) => (owned(geo.region), codes.clone()),
            Targeting::City(names) => (owned(geo.city), names.clone()),
            Targeting::Postal(codes) => (owned(geo.postal), codes.clone()),
            Targeting::Metro(codes) => (
                geo.metro.map(|m| m.to_string()),
                codes.iter().map(u16::to_string).collect(),
            ),
            Targeting::Asn(numbers) => (
                geo.asn.map(asn_text),
                numbers.iter().copied().map(asn_text).collect(),
            ),
            Targeting::ConnectionType(kinds) => (
                geo.connection_type.map(|k| connection_label(k).to_owned()),
                kinds
                    .iter()
                    .map(|&k| connection_label(k).to_owned())
                    .collect(),
            ),
            Targeting::GeoRadius(circle) => (
                geo.point.map(|(lat, lon)| point_text(lat, lon)),
                vec![format!(
                    "within {} km of {}",
                    circle.radius_km,
                    point_text(circle.lat, circle.lon)
                )],
            ),
            _ => return None,
        })
    }
}

/// An AS number as people write it, e.g. `AS3320`.
fn asn_text(asn: u32) -> String {
    format!("AS{asn}")
}

/// Latitude and longitude to two decimals (about a kilometre), with a true minus sign.
fn point_text(lat: f64, lon: f64) -> String {
    format!("{lat:.2}, {lon:.2}").replace('-', "\u{2212}")
}

/// A connection type in words, e.g. `cable/DSL`.
fn connection_label(kind: ConnectionType) -> &'static str {
    match kind {
        ConnectionType::CableDsl => "cable/DSL",
        ConnectionType::Cellular => "cellular",
        ConnectionType::Corporate => "corporate",
        ConnectionType::Satellite => "satellite",
    }
}

/// The database's connection type as targeting names it.
#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use marquee_geo::{CountryCode, Point, RegionCode};
    use marquee_model::GeoCircle;

    use super::*;

    fn new_york() -> Lookup {
        let us = CountryCode::new("US").unwrap();
        Lookup::Found(
            "203.0.113.7".parse().unwrap(),
            Location {
                country: Some(us),
                region: RegionCode::new(us, "NY"),
                city: Some(Arc::from("New York")),
                metro: Some(501),
                postal: Some(Arc::from("10001")),
                point: Point::new(40.7128, -74.0036),
                asn: Some(64500),
                as_org: Some(Arc::from("Example Net")),
                connection_type: Some(ConnectionType::CableDsl),
            },
        )
    }

    #[test]
    fn a_found_address_reads_as_one_line() {
        assert_eq!(
            new_york().describe().unwrap(),
            "203.0.113.7 → US · US-NY · New York · metro 501 · 10001 · 40.71, −74.00 · \
             AS64500 (Example Net) · cable/DSL"
        );
        assert_eq!(Lookup::NoAddress.describe(), None);
        assert_eq!(Lookup::NoDatabase(None).describe(), None);
    }

    #[test]
    fn typed_fields_replace_the_lookups_own() {
        let lookup = new_york();
        let typed = Geo {
            country: Some("DE"),
            asn: Some(3320),
            ..Geo::default()
        };
        let geo = RequestGeo::new(typed, &lookup).geo;
        assert_eq!(geo.country, Some("DE"));
        assert_eq!(geo.asn, Some(3320));
        assert_eq!(geo.region, Some("US-NY"));
        assert_eq!(geo.metro, Some(501));
        assert_eq!(geo.connection_type, Some(ConnectionType::CableDsl));
    }

    #[test]
    fn a_miss_shows_the_request_beside_every_targeted_value() {
        let lookup = new_york();
        let request = RequestGeo::new(Geo::default(), &lookup);
        let targeting = Targeting::All(vec![
            Targeting::Country(vec!["DE".into(), "AT".into()]),
            Targeting::Any(vec![
                Targeting::Country(vec!["CH".into(), "DE".into()]),
                Targeting::Os(vec!["iOS".into()]),
            ]),
            Targeting::Not(Box::new(Targeting::Asn(vec![64500]))),
            Targeting::GeoRadius(GeoCircle {
                lat: 52.52,
                lon: 13.405,
                radius_km: 50.0,
            }),
        ]);
        let miss = |blamed| request.miss(blamed, &targeting);
        assert_eq!(
            miss("country").unwrap(),
            "targeting: country — request: US; targeted: DE, AT, CH"
        );
        assert_eq!(
            miss("not asn").unwrap(),
            "targeting: not asn — request: AS64500; targeted: AS64500"
        );
        assert_eq!(
            miss("geo_radius").unwrap(),
            "targeting: geo_radius — request: 40.71, −74.00; targeted: within 50 km of 52.52, 13.40"
        );
        assert_eq!(miss("os"), None);
        assert_eq!(miss("placement (not linked)"), None);
    }

    #[test]
    fn an_unknown_value_says_why() {
        let targeting = Targeting::All(vec![
            Targeting::Country(vec!["DE".into()]),
            Targeting::Metro(vec![807]),
            Targeting::GeoRadius(GeoCircle {
                lat: 0.0,
                lon: 0.0,
                radius_km: 10.0,
            }),
        ]);
        let cases = [
            (
                Lookup::NoDatabase(None),
                "country",
                "no geo database configured",
            ),
            (
                Lookup::NoAddress,
                "country",
                "no IP address or country given",
            ),
            (Lookup::NoAddress, "geo_radius", "no IP address given"),
            (
                Lookup::NotFound("10.0.0.1".parse().unwrap()),
                "country",
                "10.0.0.1 is not in the geo database",
            ),
            (
                Lookup::Found("10.0.0.1".parse().unwrap(), Location::default()),
                "metro",
                "the geo database has no metro for 10.0.0.1",
            ),
        ];
        for (lookup, attribute, why) in cases {
            let miss = RequestGeo::new(Geo::default(), &lookup)
                .miss(attribute, &targeting)
                .unwrap();
            assert!(
                miss.starts_with(&format!("{attribute}: unknown — {why}; targeted: ")),
                "{miss}"
            );
        }
    }

    #[test]
    fn a_malformed_address_is_refused_in_words() {
        let error = Lookup::resolve(None, "10.0.0.300").unwrap_err();
        assert!(
            error.contains("\"10.0.0.300\" is not an IP address"),
            "{error}"
        );
        assert!(matches!(
            Lookup::resolve(None, "2001:db8::1").unwrap(),
            Lookup::NoDatabase(Some(_))
        ));
    }
}
