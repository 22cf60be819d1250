//! Sign-in rate limiting: failed attempts are counted per user name and per client address in
//! a fixed window; past the limit, attempts are refused (429) until the window that began with
//! the first failure ends, without checking the password (so a guesser costs no hashing).
//! Time comes from the caller (the dashboard's injected clock).
//!
//! An attempt is counted as failed *before* its password is checked ([`SignInLimiter::reserve`],
//! checked and counted under one lock), and given back when it succeeds: checking first and
//! counting after the hash would let any number of concurrent guesses at one name through
//! while the first ones are still hashing.
//!
//! Anyone may lock a user name out this way, by failing on it: the user then waits for the
//! window to end (the form says how long). The counts live in this process's memory only, so
//! restarting the manager clears them too. API tokens are not affected.
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

/// An attempt counted as failed by [`SignInLimiter::reserve`]; dropped, it stays counted.
#[derive(Debug)]
#[must_use = "a reservation is given back only through `SignInLimiter::succeeded`"]
pub struct Reservation {
    name: String,
    /// The address counted, with the start of the window it was counted in; `None` when there
    /// was no address or no room for it.
    address: Option<(IpAddr, Timestamp)>,
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

    /// Counts an attempt at `name` from `address` as failed until [`SignInLimiter::succeeded`]
    /// says otherwise; `Err(wait)`, counting nothing, when either has used up its failures at
    /// `now`: the time until an attempt may be made again.
    pub fn reserve(
        &self,
        name: &str,
        address: Option<IpAddr>,
        now: Timestamp,
    ) -> Result<Reservation, SignedDuration> {
        let mut failures = self.lock();
        let window = self.limits.window;
        let keys = self.keys(name, address);
        let mut wait = SignedDuration::ZERO;
        for (key, limit) in &keys {
            if let Some(entry) = failures.get(key)
                && entry.count >= *limit
            {
                let ends = entry.since + window;
                if ends > now {
                    wait = wait.max(ends.duration_since(now));
                }
            }
        }
        if !wait.is_zero() {
            return Err(wait);
        }
        let mut reservation = Reservation {
            name: name.to_owned(),
            address: None,
        };
        for (key, _) in keys {
            let room = match key {
                Key::Name(_) => MAX_ENTRIES_FOR_NAMES,
                Key::Address(_) => MAX_ENTRIES,
            };
            // A full table is swept for expired entries on each new key: cheap next to the
            // password hash every attempt costs.
            if failures.len() >= room && !failures.contains_key(&key) {
                failures.retain(|_, entry| entry.since + window > now);
                if failures.len() >= room {
                    continue;
                }
            }
            let entry = failures.entry(key.clone()).or_insert(Failures {
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
            if let Key::Address(address) = key {
                reservation.address = Some((address, entry.since));
            }
        }
        Ok(reservation)
    }

    /// A reserved attempt succeeded: the name's failures are forgotten, and the address gets
    /// its attempt back (its other failures stay counted).
    pub fn succeeded(&self, reservation: Reservation) {
        let mut failures = self.lock();
        failures.remove(&Key::Name(reservation.name));
        if let Some((address, since)) = reservation.address
            && let Some(entry) = failures.get_mut(&Key::Address(address))
            // Only in the window it was counted in: a later window never counted it.
            && entry.since == since
        {
            entry.count = entry.count.saturating_sub(1);
        }
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

    /// An attempt that was reserved and then failed.
    fn fail(limiter: &SignInLimiter, name: &str, address: Option<IpAddr>, now: Timestamp) {
        let reserved = limiter.reserve(name, address, now);
        assert!(reserved.is_ok(), "{name} refused at {now}");
    }

    #[test]
    fn a_name_is_refused_after_its_failures_until_the_window_ends() {
        let limiter = SignInLimiter::new(LIMITS);
        for _ in 0..3 {
            fail(&limiter, "ann", address(1), at(1));
        }
        // From any address: the name is what is being guessed.
        assert_eq!(
            limiter.reserve("ann", address(2), at(4)).unwrap_err(),
            SignedDuration::from_mins(7)
        );
        fail(&limiter, "bob", address(2), at(4));
        // A new window starts with the next attempt.
        fail(&limiter, "ann", address(2), at(11));
        fail(&limiter, "ann", address(2), at(11));
    }

    #[test]
    fn an_address_is_refused_after_failures_over_many_names() {
        let limiter = SignInLimiter::new(LIMITS);
        for name in ["a", "b", "c", "d", "e"] {
            fail(&limiter, name, address(7), at(0));
        }
        assert!(limiter.reserve("f", address(7), at(9)).is_err());
        fail(&limiter, "f", address(8), at(9));
        fail(&limiter, "f", None, at(9));
        fail(&limiter, "f", address(7), at(10));
    }

    #[test]
    fn attempts_still_being_checked_count_already() {
        let limiter = SignInLimiter::new(LIMITS);
        // As many concurrent attempts at one name as it may fail, none decided yet.
        let mut pending: Vec<Reservation> = (1..=3)
            .map(|last| limiter.reserve("ann", address(last), at(0)).unwrap())
            .collect();
        assert!(limiter.reserve("ann", address(9), at(0)).is_err());
        // One of them was the right password: the name's slate is clean again.
        limiter.succeeded(pending.pop().unwrap());
        fail(&limiter, "ann", address(9), at(0));
    }

    #[test]
    fn success_forgets_the_names_failures_and_gives_the_address_its_attempt_back() {
        let limiter = SignInLimiter::new(LIMITS);
        for round in 0..2 {
            for _ in 0..2 {
                fail(&limiter, "ann", address(1), at(round));
            }
            limiter.succeeded(limiter.reserve("ann", address(1), at(round)).unwrap());
        }
        // The address has 4 failures counted; a fifth closes it.
        fail(&limiter, "zed", address(1), at(2));
        assert!(limiter.reserve("bob", address(1), at(2)).is_err());
    }

    #[test]
    fn a_success_gives_back_only_in_the_window_it_was_counted_in() {
        let limiter = SignInLimiter::new(LIMITS);
        let early = limiter.reserve("ann", address(1), at(0)).unwrap();
        // The window ends while the attempt is checked; a new one begins with 5 failures.
        for name in ["a", "b", "c", "d", "e"] {
            fail(&limiter, name, address(1), at(10));
        }
        limiter.succeeded(early);
        assert!(limiter.reserve("f", address(1), at(10)).is_err());
    }

    fn fill_with_names(limiter: &SignInLimiter) {
        for i in 0..MAX_ENTRIES_FOR_NAMES {
            fail(limiter, &format!("user{i}"), None, at(0));
        }
    }

    #[test]
    fn expired_entries_make_room_when_the_table_is_full() {
        let limiter = SignInLimiter::new(LIMITS);
        fill_with_names(&limiter);
        for _ in 0..LIMITS.per_name {
            fail(&limiter, "late", None, at(20));
        }
        assert_eq!(limiter.lock().len(), 1);
        assert!(limiter.reserve("late", None, at(20)).is_err());
    }

    #[test]
    fn a_full_table_counts_no_new_names_and_only_its_size_in_addresses() {
        let limiter = SignInLimiter::new(LIMITS);
        fill_with_names(&limiter);
        // A new name goes uncounted, but its address is counted and closes.
        for _ in 0..LIMITS.per_address {
            fail(&limiter, "ann", address(1), at(1));
        }
        fail(&limiter, "ann", address(2), at(1));
        assert!(limiter.reserve("bob", address(1), at(1)).is_err());
        // A name already counted keeps counting.
        for _ in 1..LIMITS.per_name {
            fail(&limiter, "user0", None, at(1));
        }
        assert!(limiter.reserve("user0", None, at(1)).is_err());
        // New addresses take the rest of the table, and no more.
        for i in 0..=MAX_ENTRIES - MAX_ENTRIES_FOR_NAMES {
            let v6 = u128::try_from(i).unwrap().to_be_bytes();
            fail(&limiter, "ann", Some(IpAddr::from(v6)), at(1));
        }
        assert_eq!(limiter.lock().len(), MAX_ENTRIES);
    }
}
