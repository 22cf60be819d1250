//! The sample of ad requests kept for forecasting (`[forecast]`, `docs/forecasting.md`): each
//! worker thread decides with a [`Sampler`] of its own (a hash and a comparison, no lock) and
//! appends a kept request's [`SampleRecord`] to the event log beside the events, where the
//! manager collects it with them, exactly once.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use marquee_engine::Request;
use marquee_eventlog::MAX_SAMPLE_LEN;
use marquee_forecast::{SampleRecord, Sampler};
use marquee_model::{PlacementId, Size};
use marquee_tracking::KeyRing;

use crate::Edge;

/// An edge's sampling settings; each worker thread builds its sampler from them.
#[derive(Debug, Clone)]
pub struct Sampling {
    /// Tells this edge's samplers from another's in a thread that serves several (tests).
    id: u64,
    rate: f64,
    salt: u64,
    /// A thread's share of the edge's bytes a UTC day.
    thread_bytes: u64,
}

impl Sampling {
    /// Keeps `rate` (0 to 1) of ad requests, at most `max_bytes_per_day` of records a UTC day
    /// over the edge's threads. The salt of user hashes comes from the tracking keys: secret,
    /// the same on every edge signing with the same key (so a user is kept on all of them or
    /// none), new when the signing key changes. `None` when the rate keeps nothing.
    pub fn new(rate: f64, max_bytes_per_day: u64, keys: &KeyRing) -> Option<Sampling> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        let (_, mac) = keys.mac(b"marquee forecast sample salt");
        let mut salt = [0u8; 8];
        salt.copy_from_slice(&mac[..8]);
        // The budget is shared evenly: one worker thread per core.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        // Refused rates (0, or outside (0, 1]) keep nothing.
        Sampler::new(rate, 0, 0, 0).ok()?;
        Some(Sampling {
            id: NEXT_ID.fetch_add(1, Relaxed),
            rate,
            salt: u64::from_le_bytes(salt),
            thread_bytes: max_bytes_per_day / threads,
        })
    }
}

/// A worker thread's samplers (one per edge it serves) and the buffer records are encoded in.
#[derive(Default)]
struct Samplers {
    samplers: Vec<(u64, Sampler)>,
    encoded: Vec<u8>,
}

thread_local! {
    static SAMPLERS: RefCell<Samplers> = RefCell::default();
}

/// Keeps the ad request for `placement` as the engine was asked it, if its user (`user_key`,
/// 0 for none) or the draw is in the sample: `sizes` are the ones the request named. A record
/// the log refuses is counted as a log error, never fails the request.
pub(crate) fn sample(
    edge: &Edge,
    request: &Request<'_>,
    (placement, sizes): (PlacementId, &[Size]),
    user_key: u64,
) {
    let Some(sampling) = &edge.sampling else {
        return;
    };
    SAMPLERS.with(|cell| {
        let Samplers { samplers, encoded } = &mut *cell.borrow_mut();
        let at = match samplers.iter().position(|(id, _)| *id == sampling.id) {
            Some(at) => at,
            None => {
                // Not the worker's generator: an image tag's draws must stay as they were.
                let seed = thread_seed();
                match Sampler::new(sampling.rate, sampling.salt, sampling.thread_bytes, seed) {
                    Ok(sampler) => samplers.push((sampling.id, sampler)),
                    // Checked when the settings were made.
                    Err(_) => return,
                }
                samplers.len() - 1
            }
        };
        let sampler = &mut samplers[at].1;
        if !sampler.keep(user_key) {
            return;
        }
        let record =
            SampleRecord::of_request(request, placement, sizes, sampler.user_hash(user_key));
        encoded.clear();
        record.encode(encoded);
        // A record larger than a log frame (a long URL with many key-values) is left out.
        if encoded.len() > MAX_SAMPLE_LEN || !sampler.admit(record.minute, encoded.len()) {
            return;
        }
        if let Err(error) = edge
            .log
            .append_sample(request.now.as_microsecond(), encoded)
        {
            edge.counters.log_errors.inc();
            tracing::warn!(%error, "sample record not logged");
        }
    });
}

/// A seed for a thread's anonymous draws, from the OS, or from the thread's id if it has none.
fn thread_seed() -> u64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_ok() {
        return u64::from_le_bytes(bytes);
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(&std::thread::current().id(), &mut hasher);
    std::hash::Hasher::finish(&hasher)
}
