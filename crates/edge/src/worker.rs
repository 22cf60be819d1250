//! Per worker thread: the engine's scratch memory, a random generator and text buffers, so the
//! hot path allocates little and shares nothing across cores.

use std::cell::RefCell;
use std::hash::{Hash, Hasher};

use jiff::Timestamp;
use marquee_engine::Scratch;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

pub(crate) struct Worker {
    pub(crate) scratch: Scratch,
    pub(crate) rng: Xoshiro256PlusPlus,
    /// The HTML of the ads of the request being answered.
    pub(crate) text: String,
    /// The tracking URLs of the ad being filled (`track::fill_tracked`).
    pub(crate) urls: String,
}

thread_local! {
    pub(crate) static WORKER: RefCell<Worker> = RefCell::new(Worker {
        scratch: Scratch::default(),
        rng: Xoshiro256PlusPlus::seed_from_u64(seed()),
        text: String::with_capacity(8 * 1024),
        urls: String::with_capacity(512),
    });
}

/// A random number from this worker's generator (an event id, a nonce).
#[inline]
pub(crate) fn random_u64() -> u64 {
    WORKER.with(|worker| worker.borrow_mut().rng.next_u64())
}

/// A per-thread seed from the OS, or from the clock and thread if the OS has none to give.
fn seed() -> u64 {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_ok() {
        return u64::from_le_bytes(bytes);
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::thread::current().id().hash(&mut hasher);
    Timestamp::now().as_nanosecond().hash(&mut hasher);
    hasher.finish()
}
