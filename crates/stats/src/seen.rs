//! Which events were already counted: the manager's dedupe by event id.
//!
//! The edge's replay guard lives in memory, so after an edge restart (or on another edge, or
//! for an image tag fetched twice) a repeated beacon is logged again with the same event id.
//! The manager counts an id once per kind. It keeps, per event id, the set of kinds counted and
//! the latest event time among them, in memory, for as long as a repeat can still arrive: a
//! repeat needs a tracking token that has not expired, so an id can be forgotten once every
//! source's log has moved a token lifetime (plus clock skew) past its latest event (see the
//! manager's watermark).
//!
//! Each run's new or changed entries are written to the database in the run's transaction as
//! one BLOB ([`encode_entries`]), so the set survives restarts: the manager rebuilds it at
//! start by reading those BLOBs back in run order. Memory is about 40 bytes per id within the
//! retention window.

use rustc_hash::FxHashMap;

use marquee_eventlog::EventKind;

/// What is remembered of one event id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Entry {
    /// Bit `code` set for each kind counted.
    pub kinds: u16,
    /// The latest event time (seconds since the epoch) of the kinds counted.
    pub last_secs: i64,
}

/// Bytes of one entry in the stored form: id u128, kinds u16, last_secs i64, little-endian.
pub const ENTRY_LEN: usize = 26;

fn bit(kind: EventKind) -> u16 {
    // EventKind codes are 1..=9: the shift stays inside a u16.
    1 << (kind.code() & 15)
}

/// How far the cutoff moves before the set is pruned again, in seconds. Pruning walks every
/// entry (millions within a token lifetime on a busy server), so it runs once per minute of
/// cutoff rather than every run; an id kept up to a minute longer only ever counts a repeat as
/// seen, and a repeat that old carries an expired token anyway.
pub const PRUNE_STEP_SECS: i64 = 60;

/// The ids counted so far and the kinds counted for each.
#[derive(Debug, Clone)]
pub struct Seen {
    entries: FxHashMap<u128, Entry>,
    /// The cutoff of the last prune.
    pruned_to: i64,
}

impl Default for Seen {
    fn default() -> Seen {
        Seen {
            entries: FxHashMap::default(),
            pruned_to: i64::MIN,
        }
    }
}

/// Entries added or changed by one run, not yet committed: checked together with [`Seen`],
/// applied to it only once the run's transaction committed.
#[derive(Debug, Clone, Default)]
pub struct Pending {
    entries: FxHashMap<u128, Entry>,
}

impl Seen {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `(id, kind)` was counted before (committed or earlier in this run); if not,
    /// records it in `pending` and returns `false`.
    pub fn check_and_add(
        &self,
        pending: &mut Pending,
        id: u128,
        kind: EventKind,
        time_secs: i64,
    ) -> bool {
        let bit = bit(kind);
        let entry = match pending.entries.get_mut(&id) {
            Some(entry) => entry,
            None => {
                let committed = self.entries.get(&id).copied().unwrap_or_default();
                if committed.kinds & bit != 0 {
                    return true;
                }
                pending.entries.entry(id).or_insert(committed)
            }
        };
        if entry.kinds & bit != 0 {
            return true;
        }
        entry.kinds |= bit;
        entry.last_secs = entry.last_secs.max(time_secs);
        false
    }

    /// Makes a committed run's entries part of the set.
    pub fn apply(&mut self, pending: Pending) {
        self.entries.extend(pending.entries);
    }

    /// Merges stored entries (loaded in run order at start).
    pub fn load(&mut self, stored: &[u8]) -> Result<(), SeenError> {
        for (id, entry) in decode_entries(stored)? {
            let known = self.entries.entry(id).or_default();
            known.kinds |= entry.kinds;
            known.last_secs = known.last_secs.max(entry.last_secs);
        }
        Ok(())
    }

    /// Forgets ids whose latest event is older than `cutoff_secs` once the cutoff has moved
    /// [`PRUNE_STEP_SECS`] past the last prune; returns how many.
    pub fn prune(&mut self, cutoff_secs: i64) -> usize {
        if cutoff_secs < self.pruned_to.saturating_add(PRUNE_STEP_SECS) {
            return 0;
        }
        self.pruned_to = cutoff_secs;
        let before = self.entries.len();
        self.entries.retain(|_, e| e.last_secs >= cutoff_secs);
        before - self.entries.len()
    }
}

impl Pending {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The stored form of the run's entries, and their latest event time.
    pub fn encode(&self) -> (Vec<u8>, i64) {
        let mut out = Vec::with_capacity(self.entries.len() * ENTRY_LEN);
        let mut latest = i64::MIN;
        for (id, entry) in &self.entries {
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&entry.kinds.to_le_bytes());
            out.extend_from_slice(&entry.last_secs.to_le_bytes());
            latest = latest.max(entry.last_secs);
        }
        (out, latest)
    }
}

/// Stored entries are not whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stored dedupe entries of {0} bytes are not a multiple of {ENTRY_LEN}")]
pub struct SeenError(pub usize);

/// Reads the stored form written by [`Pending::encode`].
pub fn decode_entries(bytes: &[u8]) -> Result<impl Iterator<Item = (u128, Entry)> + '_, SeenError> {
    if !bytes.len().is_multiple_of(ENTRY_LEN) {
        return Err(SeenError(bytes.len()));
    }
    Ok(bytes.chunks_exact(ENTRY_LEN).map(|chunk| {
        let mut id = [0u8; 16];
        id.copy_from_slice(&chunk[..16]);
        let mut last = [0u8; 8];
        last.copy_from_slice(&chunk[18..]);
        (
            u128::from_le_bytes(id),
            Entry {
                kinds: u16::from_le_bytes([chunk[16], chunk[17]]),
                last_secs: i64::from_le_bytes(last),
            },
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_an_id_counts_once_across_runs() {
        let mut seen = Seen::default();
        let mut run = Pending::default();
        assert!(!seen.check_and_add(&mut run, 7, EventKind::Decision, 100));
        assert!(!seen.check_and_add(&mut run, 7, EventKind::Impression, 130));
        assert!(seen.check_and_add(&mut run, 7, EventKind::Impression, 140));
        // Not applied yet: another run's view does not see it.
        assert!(!seen.check_and_add(&mut Pending::default(), 7, EventKind::Impression, 1));
        seen.apply(run);

        let mut next = Pending::default();
        assert!(seen.check_and_add(&mut next, 7, EventKind::Impression, 150));
        assert!(!seen.check_and_add(&mut next, 7, EventKind::Click, 200));
        assert!(
            next.entries[&7].kinds & bit(EventKind::Decision) != 0,
            "merged"
        );
        assert_eq!(next.entries[&7].last_secs, 200);
    }

    #[test]
    fn stored_runs_rebuild_the_set_and_pruning_forgets_old_ids() {
        let seen = Seen::default();
        let mut first = Pending::default();
        seen.check_and_add(&mut first, 1, EventKind::Impression, 100);
        seen.check_and_add(&mut first, 2, EventKind::Impression, 500);
        let (bytes, latest) = first.encode();
        assert_eq!(bytes.len(), 2 * ENTRY_LEN);
        assert_eq!(latest, 500);

        let mut rebuilt = Seen::default();
        rebuilt.load(&bytes).unwrap();
        assert!(rebuilt.check_and_add(&mut Pending::default(), 1, EventKind::Impression, 0));
        assert_eq!(rebuilt.prune(200), 1);
        assert!(!rebuilt.check_and_add(&mut Pending::default(), 1, EventKind::Impression, 0));
        assert!(rebuilt.check_and_add(&mut Pending::default(), 2, EventKind::Impression, 0));
        assert_eq!(rebuilt.load(&bytes[1..]), Err(SeenError(2 * ENTRY_LEN - 1)));
    }

    #[test]
    fn pruning_waits_for_the_cutoff_to_move_a_step() {
        let mut seen = Seen::default();
        let mut run = Pending::default();
        for (id, secs) in [(1, 100), (2, 150), (3, 300)] {
            seen.check_and_add(&mut run, id, EventKind::Click, secs);
        }
        seen.apply(run);
        assert_eq!(seen.prune(120), 1, "the first prune runs at once");
        assert_eq!(seen.prune(120 + PRUNE_STEP_SECS - 1), 0, "within a step");
        assert_eq!(seen.len(), 2);
        assert_eq!(seen.prune(120 + PRUNE_STEP_SECS), 1, "a step on");
        assert!(seen.check_and_add(&mut Pending::default(), 3, EventKind::Click, 0));
    }
}
