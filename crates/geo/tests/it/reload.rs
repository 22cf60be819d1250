#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use marquee_geo::{ConnectionType, GeoDatabase, GeoError, GeoPaths, GeoSource, Location, Reload};
use support::{city, city_database, network, network_database, replace, with_bad_record_size};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn berlin() -> Location {
    city("DE", "BE", "Berlin", "10115", 52.52, 13.405)
}

fn paris() -> Location {
    city("FR", "IDF", "Paris", "75001", 48.8566, 2.3522)
}

fn city_name(source: &GeoSource, address: &str) -> Option<String> {
    source
        .load()
        .lookup(ip(address))
        .and_then(|l| l.city.as_deref().map(str::to_owned))
}

/// A source over a City file mapping 10/8 to Berlin, and the file's path.
fn berlin_source(dir: &Path) -> (GeoSource, PathBuf) {
    let path = dir.join("city.mmdb");
    replace(&path, &city_database(&[("10.0.0.0/8", &berlin())]));
    let source = GeoSource::open(GeoPaths {
        location: path.clone(),
        network: None,
    })
    .unwrap();
    (source, path)
}

/// The broken files a reload or an open meets: not a database at all, a database cut short
/// (its metadata gone), one whose data section is cut short (its metadata intact), and one
/// whose metadata is wrong.
fn broken_files() -> Vec<(&'static str, Vec<u8>)> {
    let good = city_database(&[("10.0.0.0/8", &paris()), ("2001:db8::/32", &paris())]);
    let marker = b"\xAB\xCD\xEFMaxMind.com";
    let metadata_at = good
        .windows(marker.len())
        .rposition(|w| w == marker)
        .unwrap();
    let mut short_data = good[..metadata_at - 20].to_vec();
    short_data.extend_from_slice(&good[metadata_at..]);
    vec![
        (
            "garbage",
            b"this is not a MaxMind DB file at all\n".repeat(100),
        ),
        ("empty", Vec::new()),
        ("truncated", good[..good.len() / 2].to_vec()),
        ("data cut short", short_data),
        ("bad metadata", with_bad_record_size(&good)),
    ]
}

#[test]
fn an_unchanged_file_is_not_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let (source, _) = berlin_source(dir.path());
    let generation = source.load().generation();
    assert!(matches!(source.reload_if_changed(), Reload::Unchanged));
    assert!(matches!(source.reload_if_changed(), Reload::Unchanged));
    assert_eq!(source.load().generation(), generation);
    assert_eq!((source.reloads(), source.reload_failures()), (0, 0));
}

#[test]
fn a_changed_file_is_swapped_in() {
    let dir = tempfile::tempdir().unwrap();
    let (source, path) = berlin_source(dir.path());
    let before = std::sync::Arc::clone(&source.load());
    assert_eq!(city_name(&source, "10.1.1.1").as_deref(), Some("Berlin"));

    replace(
        &path,
        &city_database(&[("10.0.0.0/8", &paris()), ("192.0.2.0/24", &berlin())]),
    );
    let Reload::Reloaded { generation } = source.reload_if_changed() else {
        panic!("not reloaded")
    };
    assert!(generation > before.generation());
    assert_eq!(source.load().generation(), generation);
    assert_eq!(city_name(&source, "10.1.1.1").as_deref(), Some("Paris"));
    assert_eq!(city_name(&source, "192.0.2.1").as_deref(), Some("Berlin"));
    assert_eq!((source.reloads(), source.reload_failures()), (1, 0));
    // A reader holding the old databases keeps them whole.
    assert_eq!(
        before.lookup(ip("10.1.1.1")).unwrap().city.as_deref(),
        Some("Berlin")
    );
    assert!(matches!(source.reload_if_changed(), Reload::Unchanged));
}

#[test]
fn a_bad_file_keeps_the_last_good_one_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (source, path) = berlin_source(dir.path());
    let generation = source.load().generation();
    let mut failures = 0;
    for (what, bytes) in broken_files() {
        replace(&path, &bytes);
        let Reload::Failed {
            errors,
            generation: swapped,
        } = source.reload_if_changed()
        else {
            panic!("{what}: not a failure")
        };
        failures += 1;
        assert_eq!(errors.len(), 1, "{what}");
        assert_eq!(swapped, None, "{what}");
        assert_eq!(errors[0].file(), path.display().to_string(), "{what}");
        assert!(
            matches!(errors[0], GeoError::Invalid { .. }),
            "{what}: {}",
            errors[0]
        );
        assert!(
            errors[0]
                .to_string()
                .starts_with(&path.display().to_string()),
            "{what}: {}",
            errors[0]
        );
        assert_eq!(source.reload_failures(), failures, "{what}");
        assert_eq!(source.load().generation(), generation, "{what}");
        assert_eq!(
            city_name(&source, "10.1.1.1").as_deref(),
            Some("Berlin"),
            "{what}"
        );
        // Reported once: until the file changes again, nothing is read.
        assert!(
            matches!(source.reload_if_changed(), Reload::Unchanged),
            "{what}"
        );
        assert_eq!(source.reload_failures(), failures, "{what}");
    }
    assert_eq!(source.reloads(), 0);

    replace(&path, &city_database(&[("10.0.0.0/8", &paris())]));
    assert!(matches!(
        source.reload_if_changed(),
        Reload::Reloaded { .. }
    ));
    assert_eq!(city_name(&source, "10.1.1.1").as_deref(), Some("Paris"));
    assert_eq!(source.reloads(), 1);
}

#[test]
fn a_removed_file_keeps_the_last_good_one_until_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let (source, path) = berlin_source(dir.path());
    std::fs::remove_file(&path).unwrap();
    let Reload::Failed { errors, .. } = source.reload_if_changed() else {
        panic!("not a failure")
    };
    assert!(matches!(errors[0], GeoError::Read { .. }), "{}", errors[0]);
    assert_eq!(city_name(&source, "10.1.1.1").as_deref(), Some("Berlin"));
    assert!(matches!(source.reload_if_changed(), Reload::Unchanged));

    replace(&path, &city_database(&[("10.0.0.0/8", &paris())]));
    assert!(matches!(
        source.reload_if_changed(),
        Reload::Reloaded { .. }
    ));
    assert_eq!(city_name(&source, "10.1.1.1").as_deref(), Some("Paris"));
}

#[test]
fn the_two_files_reload_each_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let location = dir.path().join("city.mmdb");
    let network_path = dir.path().join("asn.mmdb");
    replace(&location, &city_database(&[("10.0.0.0/8", &berlin())]));
    replace(
        &network_path,
        &network_database(&[("10.0.0.0/8", &network(64496, "First", None))]),
    );
    let source = GeoSource::open(GeoPaths {
        location: location.clone(),
        network: Some(network_path.clone()),
    })
    .unwrap();
    let found = source.load().lookup(ip("10.0.0.1")).unwrap();
    assert_eq!(
        (found.city.as_deref(), found.asn),
        (Some("Berlin"), Some(64496))
    );

    // The network file alone.
    replace(
        &network_path,
        &network_database(&[(
            "10.0.0.0/8",
            &network(64497, "Second", Some(ConnectionType::Corporate)),
        )]),
    );
    assert!(matches!(
        source.reload_if_changed(),
        Reload::Reloaded { .. }
    ));
    let found = source.load().lookup(ip("10.0.0.1")).unwrap();
    assert_eq!(
        (found.city.as_deref(), found.asn),
        (Some("Berlin"), Some(64497))
    );
    assert_eq!(found.connection_type, Some(ConnectionType::Corporate));

    // Both change; the location file is bad, the network file good: the good one is used.
    replace(&location, b"garbage");
    replace(
        &network_path,
        &network_database(&[("10.0.0.0/8", &network(64498, "Third", None))]),
    );
    let Reload::Failed { errors, generation } = source.reload_if_changed() else {
        panic!("not a failure")
    };
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].file(), location.display().to_string());
    assert_eq!(generation, Some(source.load().generation()));
    let found = source.load().lookup(ip("10.0.0.1")).unwrap();
    assert_eq!(
        (found.city.as_deref(), found.asn),
        (Some("Berlin"), Some(64498))
    );
    assert_eq!((source.reloads(), source.reload_failures()), (2, 1));

    // Both bad: both reported, nothing swapped.
    replace(&location, b"still garbage");
    replace(&network_path, b"garbage too");
    let Reload::Failed { errors, generation } = source.reload_if_changed() else {
        panic!("not a failure")
    };
    assert_eq!(errors.len(), 2);
    assert_eq!(generation, None);
    assert_eq!((source.reloads(), source.reload_failures()), (2, 3));
    assert_eq!(
        source.load().lookup(ip("10.0.0.1")).unwrap().asn,
        Some(64498)
    );
}

#[test]
fn a_bad_file_at_open_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.mmdb");
    replace(&good, &city_database(&[("10.0.0.0/8", &berlin())]));
    for (what, bytes) in broken_files() {
        let path = dir.path().join(format!("{}.mmdb", what.replace(' ', "-")));
        replace(&path, &bytes);
        let err = GeoSource::open(GeoPaths {
            location: path.clone(),
            network: None,
        })
        .unwrap_err();
        assert_eq!(err.file(), path.display().to_string(), "{what}");
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{what}: {err}"
        );
        // As the network file, the same.
        let err = GeoDatabase::open(&good, Some(&path)).unwrap_err();
        assert_eq!(err.file(), path.display().to_string(), "{what}");
    }
    let missing = dir.path().join("missing.mmdb");
    let err = GeoDatabase::open(&missing, None).unwrap_err();
    assert!(matches!(err, GeoError::Read { .. }));
    assert!(
        err.to_string().starts_with(&missing.display().to_string()),
        "{err}"
    );
}

#[test]
fn a_fixed_source_never_reloads() {
    let source = GeoSource::fixed(
        GeoDatabase::from_bytes(city_database(&[("10.0.0.0/8", &berlin())]), None).unwrap(),
    );
    assert!(source.paths().is_none());
    assert!(matches!(source.reload_if_changed(), Reload::Unchanged));
    assert_eq!(city_name(&source, "10.0.0.1").as_deref(), Some("Berlin"));
}
