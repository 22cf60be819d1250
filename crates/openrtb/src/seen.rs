//! A set for the few ids of one request or response (imps, deals, native assets, bids), whose
//! duplicates are refused.

use std::collections::HashSet;
use std::hash::Hash;

/// How many ids are kept inline. Requests rarely carry more imps, deals or assets than this.
const INLINE: usize = 8;

/// The first [`INLINE`] ids are kept in an array and compared one by one, so a usual request
/// allocates nothing for its checks; past that, a hash set keeps a request of thousands of
/// imps linear.
#[derive(Debug)]
pub(crate) struct Seen<T> {
    inline: [Option<T>; INLINE],
    len: usize,
    spilled: HashSet<T>,
}

impl<T: Copy + Eq + Hash> Seen<T> {
    pub(crate) fn new() -> Seen<T> {
        Seen {
            inline: [None; INLINE],
            len: 0,
            spilled: HashSet::new(),
        }
    }

    /// Adds `id`; false when it was there already.
    pub(crate) fn insert(&mut self, id: T) -> bool {
        if self.inline[..self.len].contains(&Some(id)) {
            return false;
        }
        if self.len < INLINE {
            self.inline[self.len] = Some(id);
            self.len += 1;
            return true;
        }
        self.spilled.insert(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_found_inline_and_past_it() {
        let mut seen = Seen::new();
        for id in 0..100u32 {
            assert!(seen.insert(id), "{id} is new");
        }
        for id in [0, 3, 7, 8, 50, 99] {
            assert!(!seen.insert(id), "{id} was seen");
        }
        assert!(seen.insert(100));
        let mut names = Seen::new();
        assert!(names.insert("a"));
        assert!(names.insert("b"));
        assert!(!names.insert("a"));
    }
}
