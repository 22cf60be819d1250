//! Sign-in rate limiting: failed attempts are counted per user name and per client address in
//! a fixed window; past the limit, attempts are refused (429) until the window that began with
//! the first failure ends, without checking the password (so a guesser costs no hashing).
//! Time comes from the caller (the dashboard's injected clock).
//!
//! Memory is bounded: names are at most [`MAX_NAME_BYTES`] (the sign-in page refuses longer
//! ones before asking here), and the table holds at most `MAX_ENTRIES`. When it is full of
//! unexpired entries, new keys go uncounted while the ones already there keep counting. Names
//! may fill only part of it, so a spray of names from many addresses still leaves room to count
//! new addresses.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};

/// Limits of the sign-in limiter.
#[derive(Debug, Clone, Copy)]
pub struct SignInLimits {
    /// Failed attempts allowed per user name within a window.
    pub per_name: u32,
    /// Failed attempts allowed per client address within a window (several users may share
    /// one address, so this is higher).
    pub per_address: u32,
    pub window: SignedDuration,
}

impl Default for SignInLimits {
    fn default() -> Self {
        SignInLimits {
            per_name: 5,
            per_address: 20,
            window: SignedDuration::from_mins(15),
        }
    }
}

/// Longest user name a sign-in is checked for, in bytes.
pub const MAX_NAME_BYTES: usize = 256;

/// Most entries, names and addresses together (about 15 MB with the longest names).
const MAX_ENTRIES: usize = 50_000;

/// Past this many entries no new name is counted, leaving the rest to addresses.
const MAX_ENTRIES_FOR_NAMES: usize = 40_000;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Name(String),
    Address(IpAddr),
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    since: Timestamp,
    count: u32,
}

/// Counts failed sign-ins; see the module documentation.
#[derive(Debug, Default)]
pub struct SignInLimiter {
    limits: SignInLimits,
    failures: Mutex<HashMap<Key, Failures>>,
}

impl SignInLimiter {
    pub fn new(limits: SignInLimits) -> Self {
        SignInLimiter {
            limits,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// `Err(wait)` when `name` or `address` has used up its failures at `now`: the time until
    /// the attempt may be made again.
    pub fn check(
        &self,
        name: &str,
        address: Option<IpAddr>,
        now: Timestamp,
    ) -> Result<(), SignedDuration> {
        let failures = self.lock();
        let mut wait = SignedDuration::ZERO;
        for (key, limit) in self.keys(name, address) {
            if let Some(entry) = failures.get(&key)
                && entry.count >= limit
            {
                let ends = entry.since + self.limits.window;
                if ends > now {
                    wait = wait.max(ends.duration_since(now));
                }
            }
        }
        if wait.is_zero() { Ok(()) } else { Err(wait) }
    }

    /// Counts a failed attempt.
    pub fn failed(&self, name: &str, address: Option<IpAddr>, now: Timestamp) {
        let mut failures = self.lock();
        let window = self.limits.window;
        for (key, _) in self.keys(name, address) {
            let room = match key {
                Key::Name(_) => MAX_ENTRIES_FOR_NAMES,
                Key::Address(_) => MAX_ENTRIES,
            };
            // A full table is swept for expired entries on each new key: cheap next to the
            // password hash every failed attempt costs.
            if failures.len() >= room && !failures.contains_key(&key) {
                failures.retain(|_, entry| entry.since + window > now);
                if failures.len() >= room {
                    continue;
                }
            }
            let entry = failures.entry(key).or_insert(Failures {
                since: now,
                count: 0,
            });
            if entry.since + window <= now {
                *entry = Failures {
                    since: now,
                    count: 0,
                };
            }
            entry.count = entry.count.saturating_add(1);
        }
    }

    /// A successful sign-in forgets the name's failures (the address's stay counted).
    pub fn succeeded(&self, name: &str) {
        self.lock().remove(&Key::Name(name.to_owned()));
    }

    fn keys(&self, name: &str, address: Option<IpAddr>) -> Vec<(Key, u32)> {
        let mut keys = vec![(Key::Name(name.to_owned()), self.limits.per_name)];
        if let Some(address) = address {
            keys.push((Key::Address(address), self.limits.per_address));
        }
        keys
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Failures>> {
        // A panic while holding the lock cannot leave the counts inconsistent (each update is
        // one assignment), so a poisoned lock is still usable.
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: SignInLimits = SignInLimits {
        per_name: 3,
        per_address: 5,
        window: SignedDuration::from_mins(10),
    };

    fn at(minutes: i64) -> Timestamp {
        Timestamp::UNIX_EPOCH + SignedDuration::from_mins(minutes)
    }

    fn address(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([10, 0, 0, last]))
    }

    #[test]
    fn a_name_is_refused_after_its_failures_until_the_window_ends() {
        let limiter = SignInLimiter::new(LIMITS);
        for _ in 0..3 {
            assert_eq!(limiter.check("ann", address(1), at(1)), Ok(()));
            limiter.failed("ann", address(1), at(1));
        }
        // From any address: the name is what is being guessed.
        assert_eq!(
            limiter.check("ann", address(2), at(4)),
            Err(SignedDuration::from_mins(7))
        );
        assert_eq!(limiter.check("bob", address(2), at(4)), Ok(()));
        assert_eq!(limiter.check("ann", address(2), at(11)), Ok(()));
        // A new window starts with the next failure.
        limiter.failed("ann", address(2), at(11));
        assert_eq!(limiter.check("ann", address(2), at(11)), Ok(()));
    }

    #[test]
    fn an_address_is_refused_after_failures_over_many_names() {
        let limiter = SignInLimiter::new(LIMITS);
        for name in ["a", "b", "c", "d", "e"] {
            limiter.failed(name, address(7), at(0));
        }
        assert!(limiter.check("f", address(7), at(9)).is_err());
        assert_eq!(limiter.check("f", address(8), at(9)), Ok(()));
        assert_eq!(limiter.check("f", None, at(9)), Ok(()));
        assert_eq!(limiter.check("f", address(7), at(10)), Ok(()));
    }

    #[test]
    fn success_forgets_the_names_failures_only() {
        let limiter = SignInLimiter::new(LIMITS);
        for _ in 0..2 {
            limiter.failed("ann", address(1), at(0));
        }
        limiter.succeeded("ann");
        for _ in 0..2 {
            limiter.failed("ann", address(1), at(0));
        }
        assert_eq!(limiter.check("ann", address(1), at(0)), Ok(()));
        // The address has 4 failures counted; a fifth closes it.
        limiter.failed("zed", address(1), at(0));
        assert!(limiter.check("bob", address(1), at(0)).is_err());
    }

    fn fill_with_names(limiter: &SignInLimiter) {
        for i in 0..MAX_ENTRIES_FOR_NAMES {
            limiter.failed(&format!("user{i}"), None, at(0));
        }
    }

    #[test]
    fn expired_entries_make_room_when_the_table_is_full() {
        let limiter = SignInLimiter::new(LIMITS);
        fill_with_names(&limiter);
        for _ in 0..LIMITS.per_name {
            limiter.failed("late", None, at(20));
        }
        assert_eq!(limiter.lock().len(), 1);
        assert!(limiter.check("late", None, at(20)).is_err());
    }

    #[test]
    fn a_full_table_counts_no_new_names_and_only_its_size_in_addresses() {
        let limiter = SignInLimiter::new(LIMITS);
        fill_with_names(&limiter);
        // A new name goes uncounted, but its address is counted and closes.
        for _ in 0..LIMITS.per_address {
            limiter.failed("ann", address(1), at(1));
        }
        assert_eq!(limiter.check("ann", address(2), at(1)), Ok(()));
        assert!(limiter.check("bob", address(1), at(1)).is_err());
        // A name already counted keeps counting.
        for _ in 1..LIMITS.per_name {
            limiter.failed("user0", None, at(1));
        }
        assert!(limiter.check("user0", None, at(1)).is_err());
        // New addresses take the rest of the table, and no more.
        for i in 0..=MAX_ENTRIES - MAX_ENTRIES_FOR_NAMES {
            let v6 = u128::try_from(i).unwrap().to_be_bytes();
            limiter.failed("user0", Some(IpAddr::from(v6)), at(1));
        }
        assert_eq!(limiter.lock().len(), MAX_ENTRIES);
    }
}
