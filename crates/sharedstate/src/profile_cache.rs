//! User profiles in Redis (one JSON string per user, see [`crate::keys::profile_key`]) and the
//! cache in front of them: [`SharedState::profile`] within a deadline,
//! [`SharedState::profile_now`] without waiting, [`SharedState::put_profiles`] for uploads.
//! What a profile is, and the upload formats, are in [`crate::profiles`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Pipeline;
use rustc_hash::FxHashMap;

use crate::keys;
use crate::profiles::Profile;
use crate::round_trip::Fallback;
use crate::shards::Shards;
use crate::state::SharedState;

/// How long a background profile fetch ([`SharedState::profile_now`]) may take; until then no
/// other starts for the same user. Redis's own timeout applies within it.
const PREFETCH_WITHIN: Duration = Duration::from_secs(1);

/// Profiles per `SET` pipeline of an upload.
const PUT_CHUNK: usize = 1_000;

impl SharedState {
    /// The profile of `user` (a user key) without waiting, for requests whose deadline leaves
    /// no room for a round trip: from the local cache while fresh. Otherwise `None` this once,
    /// and one `GET` in the background (on the current Tokio runtime) caches it for the user's
    /// next request. While that fetch runs, and for a second after one that failed,
    /// calls for the same user start no other: an exchange sends one user many times a second,
    /// and each would otherwise send Redis its own `GET`.
    pub fn profile_now(&self, user: u64) -> Option<Arc<Profile>> {
        let now = Instant::now();
        match self
            .inner
            .profiles
            .get_or_claim(user, now, now + PREFETCH_WITHIN)
        {
            Claim::Known(profile) => return profile,
            Claim::Fetching => return None,
            Claim::Claimed => {}
        }
        let started = self.in_background(move |state| async move {
            // A failure is counted with the round trips; the claim lapses and a later request
            // tries again.
            let _ = state.profile(user, Instant::now() + PREFETCH_WITHIN).await;
        });
        if !started {
            self.inner.profiles.forget(user);
        }
        None
    }

    /// The profile of `user` (a user key): from the local cache while fresh, else one `GET`
    /// within `deadline`. `Err` when Redis did not answer in time: the request goes on without
    /// a profile.
    pub async fn profile(
        &self,
        user: u64,
        deadline: Instant,
    ) -> Result<Option<Arc<Profile>>, Fallback> {
        let now = Instant::now();
        if let Some(cached) = self.inner.profiles.get(user, now) {
            return Ok(cached);
        }
        let answer = self
            .inner
            .get_bytes(keys::profile_key(user), deadline)
            .await?;
        // A value that is not a profile's JSON counts as no profile.
        let profile = answer
            .and_then(|bytes| serde_json::from_slice::<Profile>(&bytes).ok())
            .map(Arc::new);
        self.inner.profiles.put(
            user,
            profile.clone(),
            now + self.inner.config.profile_cache_for,
        );
        Ok(profile)
    }

    /// Stores profiles by user key, replacing what each user had: pipelines of 1,000 `SET`s,
    /// each within `deadline`. Returns how many were stored before a failure, if one came.
    pub async fn put_profiles(
        &self,
        profiles: &[(u64, Profile)],
        deadline: Instant,
    ) -> Result<usize, (usize, Fallback)> {
        let mut stored = 0;
        for chunk in profiles.chunks(PUT_CHUNK) {
            let pipe = put_pipeline(chunk);
            let mut connection = self.inner.connection.clone();
            let sent: Result<(), Fallback> = self
                .inner
                .round_trip(deadline, pipe.query_async(&mut connection))
                .await;
            sent.map_err(|fallback| (stored, fallback))?;
            for (user, _) in chunk {
                self.inner.profiles.forget(*user);
            }
            stored += chunk.len();
        }
        Ok(stored)
    }
}

/// One `SET` per profile, their answers ignored.
fn put_pipeline(chunk: &[(u64, Profile)]) -> Pipeline {
    let mut pipe = redis::pipe();
    for (user, profile) in chunk {
        // A profile is strings only: it always serializes.
        let json = serde_json::to_vec(profile).unwrap_or_default();
        pipe.cmd("SET")
            .arg(keys::profile_key(*user))
            .arg(json)
            .ignore();
    }
    pipe
}

/// A user's profile (or its absence) as read, or a fetch of it under way.
#[derive(Debug)]
enum CachedProfile {
    /// Read from Redis (`None`: the user has no profile), good until `until`.
    Read {
        profile: Option<Arc<Profile>>,
        until: Instant,
    },
    /// A background fetch was started; none other starts before `until`.
    Fetching { until: Instant },
}

/// What [`ProfileCache::get_or_claim`] found.
enum Claim {
    Known(Option<Arc<Profile>>),
    Fetching,
    /// Nothing fresh: the caller fetches, and others wait for it.
    Claimed,
}

type ProfileShard = FxHashMap<u64, CachedProfile>;

/// Profiles (or their absence) read from Redis, until a time, by user key; sharded, bounded: a
/// full shard starts over.
#[derive(Debug)]
pub(crate) struct ProfileCache {
    shards: Shards<u64, CachedProfile>,
}

impl ProfileCache {
    pub(crate) fn new(capacity: usize) -> ProfileCache {
        ProfileCache {
            shards: Shards::new(capacity),
        }
    }

    /// The profile read for `user`, while fresh.
    fn get(&self, user: u64, now: Instant) -> Option<Option<Arc<Profile>>> {
        let shard = self.shards.of(user).lock().ok()?;
        match shard.get(&user)? {
            CachedProfile::Read { profile, until } if *until > now => Some(profile.clone()),
            _ => None,
        }
    }

    /// The profile read for `user` while fresh; else whether a fetch is running, and if none
    /// is, a claim to start one, held until `until` or until [`ProfileCache::put`].
    fn get_or_claim(&self, user: u64, now: Instant, until: Instant) -> Claim {
        // A poisoned shard caches nothing (as `get` answers nothing): no fetch to start.
        let Ok(mut shard) = self.shards.of(user).lock() else {
            return Claim::Fetching;
        };
        match shard.get(&user) {
            Some(CachedProfile::Read { profile, until }) if *until > now => {
                return Claim::Known(profile.clone());
            }
            Some(CachedProfile::Fetching { until }) if *until > now => return Claim::Fetching,
            _ => {}
        }
        self.insert(&mut shard, user, CachedProfile::Fetching { until });
        Claim::Claimed
    }

    fn put(&self, user: u64, profile: Option<Arc<Profile>>, until: Instant) {
        if let Ok(mut shard) = self.shards.of(user).lock() {
            self.insert(&mut shard, user, CachedProfile::Read { profile, until });
        }
    }

    fn insert(&self, shard: &mut ProfileShard, user: u64, entry: CachedProfile) {
        if shard.len() >= self.shards.per_shard() && !shard.contains_key(&user) {
            shard.clear();
        }
        shard.insert(user, entry);
    }

    fn forget(&self, user: u64) {
        if let Ok(mut shard) = self.shards.of(user).lock() {
            shard.remove(&user);
        }
    }
}
