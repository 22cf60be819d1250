use std::fs;
use std::path::Path;

use marquee_snapshot::{DirError, Header, LoadError, Snapshot, SnapshotDir, compile};

use crate::fixture::*;

fn snapshot(version: u64) -> Snapshot {
    let mut catalog = minimal();
    catalog.version = version;
    compile(&catalog, now())
}

fn publish(dir: &SnapshotDir, version: u64) -> std::path::PathBuf {
    let (header, bytes) = snapshot(version).encode_with_header();
    dir.publish(&bytes, &header).expect("publishes")
}

fn names(path: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(path)
        .expect("lists")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn name(version: u64) -> String {
    format!("snapshot-{version:020}.bin")
}

#[test]
fn publish_then_latest_then_load_round_trips() {
    let root = tempfile::tempdir().expect("tempdir");
    // A directory that does not exist yet: nothing to load, and publish creates it.
    let dir = SnapshotDir::new(root.path().join("snapshots"));
    assert!(dir.latest().expect("lists").is_none());
    assert!(dir.load_latest().expect("lists").is_none());

    let original = snapshot(42);
    let (header, bytes) = original.encode_with_header();
    let path = dir.publish(&bytes, &header).expect("publishes");
    assert_eq!(path, dir.path().join("snapshot-00000000000000000042.bin"));
    assert_eq!(fs::read(&path).expect("reads"), bytes);
    assert_eq!(names(dir.path()), [name(42)], "no temporary file is left");

    let (latest, latest_header) = dir.latest().expect("lists").expect("found");
    assert_eq!(latest, path);
    assert_eq!(latest_header, header);
    assert_eq!(SnapshotDir::load(&latest).expect("loads"), original);
    assert_eq!(dir.load_latest().expect("loads"), Some(original));

    // Republishing a version replaces its file.
    publish(&dir, 42);
    assert_eq!(names(dir.path()), [name(42)]);
}

#[test]
fn publish_keeps_the_newest_few() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = SnapshotDir::new(root.path());
    for version in 1..=5 {
        publish(&dir, version);
    }
    assert_eq!(
        names(root.path()),
        [name(3), name(4), name(5)],
        "default keep is 3"
    );

    let dir = dir.with_keep(1);
    publish(&dir, 6);
    assert_eq!(names(root.path()), [name(6)]);
    // An older version published late is kept: it is the one just written.
    publish(&dir, 2);
    assert_eq!(names(root.path()), [name(2), name(6)]);
    assert_eq!(
        dir.latest().expect("lists").map(|(_, h)| h.version),
        Some(6)
    );

    // A keep of 0 would delete what was just published; it means 1.
    let dir = dir.with_keep(0);
    publish(&dir, 7);
    assert_eq!(names(root.path()), [name(7)]);
}

#[test]
fn temporary_leftovers_are_ignored_and_stale_ones_removed() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = SnapshotDir::new(root.path());
    publish(&dir, 5);
    let stale = root.path().join("snapshot-00000000000000000004.bin.tmp");
    let newer = root.path().join("snapshot-00000000000000000009.bin.tmp");
    fs::write(&stale, b"half a snapshot").expect("writes");
    fs::write(&newer, b"half a snapshot").expect("writes");
    fs::write(root.path().join("README"), b"not ours").expect("writes");

    let (path, header) = dir.latest().expect("lists").expect("found");
    assert_eq!(header.version, 5);
    assert_eq!(path, root.path().join(name(5)));
    assert!(
        !stale.exists(),
        "a leftover older than the newest snapshot is deleted"
    );
    assert!(newer.exists(), "a newer one may still be in flight");
    assert_eq!(
        dir.load_latest().expect("loads").map(|s| s.version),
        Some(5)
    );

    // Publishing a newer version overwrites or outdates it.
    publish(&dir, 10);
    assert!(!newer.exists());
    assert_eq!(names(root.path()), ["README".to_owned(), name(5), name(10)]);
}

#[test]
fn a_file_whose_header_does_not_parse_is_skipped_by_latest() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = SnapshotDir::new(root.path());
    publish(&dir, 3);
    fs::write(root.path().join(name(8)), b"MQSNAP").expect("writes"); // too short
    fs::write(root.path().join(name(9)), snapshot(1).encode()).expect("writes"); // wrong version
    assert_eq!(
        dir.latest().expect("lists").map(|(_, h)| h.version),
        Some(3)
    );
}

#[test]
fn a_corrupted_file_gives_a_load_error_naming_it_and_load_latest_falls_back() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = SnapshotDir::new(root.path());
    publish(&dir, 1);
    let newest = publish(&dir, 2);
    let mut bytes = fs::read(&newest).expect("reads");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(&newest, &bytes).expect("writes");

    // The header still parses, so latest() names it; loading it fails clearly.
    assert_eq!(
        dir.latest().expect("lists").map(|(p, _)| p),
        Some(newest.clone())
    );
    let err = SnapshotDir::load(&newest).expect_err("corrupted");
    assert!(
        matches!(&err, DirError::Load { path, source: LoadError::Checksum { .. } } if *path == newest),
        "{err:?}"
    );
    assert!(err.to_string().contains(&name(2)), "{err}");
    assert!(err.to_string().contains("checksum mismatch"), "{err}");

    assert_eq!(
        dir.load_latest().expect("falls back").map(|s| s.version),
        Some(1)
    );
    fs::remove_file(root.path().join(name(1))).expect("removes");
    assert!(matches!(
        dir.load_latest(),
        Err(DirError::Load {
            source: LoadError::Checksum { .. },
            ..
        })
    ));
}

#[test]
fn io_errors_name_the_path() {
    let root = tempfile::tempdir().expect("tempdir");
    let missing = root.path().join("missing.bin");
    let err = SnapshotDir::load(&missing).expect_err("missing");
    assert!(
        matches!(&err, DirError::Io { path, .. } if *path == missing),
        "{err:?}"
    );
    assert!(err.to_string().contains("missing.bin"), "{err}");

    // A file where the directory should be.
    let blocker = root.path().join("file");
    fs::write(&blocker, b"").expect("writes");
    let (header, bytes) = snapshot(1).encode_with_header();
    let err = SnapshotDir::new(&blocker)
        .publish(&bytes, &header)
        .expect_err("not a directory");
    assert!(
        matches!(&err, DirError::Io { path, .. } if *path == blocker),
        "{err:?}"
    );
}

#[test]
fn publish_refuses_a_header_that_does_not_describe_the_bytes() {
    let root = tempfile::tempdir().expect("tempdir");
    let dir = SnapshotDir::new(root.path());
    let (_, bytes) = snapshot(1).encode_with_header();
    let (other, _) = snapshot(2).encode_with_header();
    assert!(matches!(
        dir.publish(&bytes, &other),
        Err(DirError::HeaderMismatch { version: 2 })
    ));
    let (header, bytes) = snapshot(1).encode_with_header();
    assert!(matches!(
        dir.publish(&bytes[..bytes.len() - 1], &header),
        Err(DirError::HeaderMismatch { version: 1 })
    ));
    let parsed = Header::parse(&bytes).expect("parses");
    assert_eq!(parsed, header);
    assert!(names(root.path()).is_empty(), "nothing was written");
}
