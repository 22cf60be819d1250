#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, SystemTime};

use marquee_traffic::{CrawlerList, Loadable, NetworkList, Reload, Watched};

/// Writes `text` by renaming a complete file over `path`, as operators should, stamping a
/// modification time of its own so that the change shows on any file system's resolution.
fn replace(path: &Path, text: &str, stamp: u64) {
    let staging = path.with_extension("new");
    std::fs::write(&staging, text).unwrap();
    let file = std::fs::File::options().write(true).open(&staging).unwrap();
    file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + stamp))
        .unwrap();
    drop(file);
    std::fs::rename(&staging, path).unwrap();
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn a_changed_file_is_reloaded_and_an_unchanged_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dc.txt");
    replace(&path, "192.0.2.0/24\n", 1);
    let watched = Watched::<NetworkList>::open(&path).unwrap();
    assert_eq!(watched.path(), Some(path.as_path()));
    assert!(watched.current().contains(ip("192.0.2.1")));
    assert_eq!(watched.reload_if_changed(), Reload::Unchanged);

    replace(&path, "198.51.100.0/24\n2001:db8::/32\n", 2);
    assert_eq!(watched.reload_if_changed(), Reload::Reloaded { entries: 2 });
    let current = watched.current();
    assert!(!current.contains(ip("192.0.2.1")));
    assert!(current.contains(ip("198.51.100.1")));
    assert_eq!(watched.reload_if_changed(), Reload::Unchanged);
}

#[test]
fn a_bad_reload_keeps_the_last_good_list_and_is_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crawlers.txt");
    replace(&path, "ExampleBot\n", 1);
    let watched = Watched::<CrawlerList>::open(&path).unwrap();
    let before = watched.current();

    replace(&path, "ExampleBot\nOther(Bot\n", 2);
    match watched.reload_if_changed() {
        Reload::Failed(e) => {
            assert_eq!(e.file, path.display().to_string());
            assert_eq!(e.line, 2);
            assert!(e.message.contains("Other(Bot"), "{e}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    let after = watched.current();
    assert!(after.is_crawler(b"ExampleBot/1"));
    assert_eq!(after.len(), 1);
    assert!(
        std::sync::Arc::ptr_eq(&before, &after),
        "the list was replaced"
    );
    // The same bad file is not reported again.
    assert_eq!(watched.reload_if_changed(), Reload::Unchanged);

    // Fixed: the new list is taken.
    replace(&path, "ExampleBot\nOtherBot\n", 3);
    assert_eq!(watched.reload_if_changed(), Reload::Reloaded { entries: 2 });
    assert!(watched.current().is_crawler(b"OtherBot"));
}

#[test]
fn a_vanished_file_keeps_the_list_until_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dc.txt");
    replace(&path, "192.0.2.0/24\n", 1);
    let watched = Watched::<NetworkList>::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    match watched.reload_if_changed() {
        Reload::Failed(e) => {
            assert_eq!(e.line, 0);
            assert!(e.message.starts_with("cannot read"), "{e}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(watched.reload_if_changed(), Reload::Unchanged);
    assert!(watched.current().contains(ip("192.0.2.1")));
    replace(&path, "203.0.113.0/24\n", 2);
    assert_eq!(watched.reload_if_changed(), Reload::Reloaded { entries: 1 });
    assert!(watched.current().contains(ip("203.0.113.1")));
}

#[test]
fn open_fails_with_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dc.txt");
    replace(&path, "192.0.2.0/24\n192.0.2.0/99\n", 1);
    let e = Watched::<NetworkList>::open(&path).unwrap_err();
    assert_eq!((e.file.clone(), e.line), (path.display().to_string(), 2));
    assert!(
        e.to_string()
            .starts_with(&format!("{}:2: ", path.display()))
    );

    let e = Watched::<CrawlerList>::open(&dir.path().join("missing.txt")).unwrap_err();
    assert_eq!(e.line, 0);
}

#[test]
fn a_builtin_list_never_reloads() {
    let watched = Watched::new(CrawlerList::builtin(), None);
    assert_eq!(watched.path(), None);
    assert_eq!(watched.reload_if_changed(), Reload::Unchanged);
    assert!(watched.current().is_crawler(b"Googlebot/2.1"));
}

#[test]
fn new_with_a_path_loads_it_on_the_first_reload() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dc.txt");
    replace(&path, "192.0.2.0/24\n198.51.100.0/24\n", 1);
    let watched = Watched::new(NetworkList::empty(), Some(path.clone()));
    assert!(!watched.current().contains(ip("192.0.2.1")));
    assert_eq!(watched.reload_if_changed(), Reload::Reloaded { entries: 2 });
    assert!(watched.current().contains(ip("192.0.2.1")));
    assert_eq!(watched.reload_if_changed(), Reload::Unchanged);
}

#[test]
fn readers_keep_reading_while_the_list_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crawlers.txt");
    replace(&path, "FirstBot\n", 1);
    let watched = std::sync::Arc::new(Watched::<CrawlerList>::open(&path).unwrap());
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (watched, stop) = (watched.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let list = watched.current();
                // Either list, never a mix: each has exactly one pattern.
                assert_eq!(list.len(), 1);
                assert!(list.is_crawler(b"FirstBot") != list.is_crawler(b"SecondBot"));
                reads += 1;
            }
            reads
        })
    };
    for round in 0..20u64 {
        let text = if round % 2 == 0 {
            "SecondBot\n"
        } else {
            "FirstBot\n"
        };
        replace(&path, text, 2 + round);
        assert_eq!(watched.reload_if_changed(), Reload::Reloaded { entries: 1 });
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
}

#[test]
fn lists_report_their_entries() {
    assert_eq!(Loadable::entries(&CrawlerList::builtin()), 535);
    assert_eq!(Loadable::entries(&NetworkList::empty()), 0);
}
