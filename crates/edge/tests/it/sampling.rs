//! The forecast's sample through the edge's server: with every request kept, each ad request
//! leaves one sample record in the event log, beside the events, holding what targeting reads
//! of it; with none kept, none.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use jiff::Timestamp;
use marquee_edge::Limits;
use marquee_edge::sampling::Sampling;
use marquee_eventlog::{Budget, EventLog, Record, parse_frame};
use marquee_forecast::SampleRecord;
use marquee_model::{PlacementId, Size};
use marquee_tracking::KeyRing;

use crate::common;

const PLACEMENT: u64 = 100;

/// Serves `requests` ad requests with `rate` of them sampled; the sample records the log holds
/// once closed.
async fn sampled(rate: f64, requests: usize) -> Vec<SampleRecord> {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(common::log(dir.path()));
    let keys = KeyRing::new(1, [(1u8, &[9u8; 32][..])]).unwrap();
    let edge = common::edge_with_log(dir.path(), Limits::default(), Arc::clone(&log))
        .with_sampling(Sampling::new(rate, u64::MAX, &keys));
    let edge = Arc::new(edge);
    let snapshot = marquee_snapshot::compile(
        &marquee_snapshot::fixtures::supply_catalog(PLACEMENT),
        Timestamp::now(),
    );
    edge.holder.install(&snapshot.encode()).unwrap();
    let address = common::serve(&edge).await;
    for i in 0..requests {
        let path = format!(
            "/ad?placement={PLACEMENT}&size=728x90&url=https%3A%2F%2Fnews.example%2Fa%3Fq%3D{i}&kv=section:sport"
        );
        let (status, body) = common::send(address, "GET", &path, "", "").await;
        assert_eq!(status, 200, "{body}");
    }
    log.flush_and_close().unwrap();
    records(&log)
}

/// Every sample record of the log, decoded.
fn records(log: &EventLog) -> Vec<SampleRecord> {
    let mut records = Vec::new();
    for shard in 0..log.shards() {
        for segment in log.segments(shard).unwrap() {
            let batch = log
                .read_frames(shard, segment.id, 0, Budget::default())
                .unwrap();
            let mut at = 0;
            while at < batch.frames.len() {
                let (payload, len) = parse_frame(&batch.frames[at..]).unwrap();
                if let Record::Sample { time_micros, body } = Record::decode(payload).unwrap() {
                    let (record, used) = SampleRecord::decode(body).unwrap();
                    assert_eq!(used, body.len());
                    assert_eq!(i64::from(record.minute), time_micros / 60_000_000);
                    records.push(record);
                }
                at += len;
            }
        }
    }
    records
}

#[tokio::test]
async fn every_ad_request_is_one_record_at_a_rate_of_one_and_none_at_zero() {
    let before = Timestamp::now().as_second() / 60;
    let records = sampled(1.0, 12).await;
    assert_eq!(records.len(), 12);
    for record in &records {
        assert_eq!(record.placement, PlacementId(PLACEMENT));
        assert_eq!(record.sizes, [Size { w: 728, h: 90 }]);
        // The query string is not kept.
        assert_eq!(record.page_url.as_deref(), Some("https://news.example/a"));
        assert_eq!(
            record.key_values,
            [("section".to_owned(), "sport".to_owned())]
        );
        // No cookie, no user id: nothing to hash.
        assert_eq!(record.user, 0);
        assert!((before..=before + 1).contains(&i64::from(record.minute)));
    }

    assert!(sampled(0.0, 12).await.is_empty());
}
