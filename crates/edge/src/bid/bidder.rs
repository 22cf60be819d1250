//! The bidder's state on one edge: its settings, user matches, counters, and the replay guards
//! of its notices.

use std::sync::Arc;

use marquee_tracking::{ReplayConfig, ReplayGuard};

use super::config::{BidderConfig, Exchange};
use super::counters::BidCounters;
use crate::notice::{self, NoticeKind};
use crate::sync::UserSyncs;

/// The bidder's state on one edge.
#[derive(Debug)]
pub struct Bidder {
    pub config: BidderConfig,
    pub syncs: Arc<UserSyncs>,
    pub counters: BidCounters,
    notices_seen: NoticesSeen,
}

impl Bidder {
    pub fn new(config: BidderConfig) -> Bidder {
        Bidder::with_replay(config, ReplayConfig::default())
    }

    /// [`Bidder::new`] with its notices' replay guards sized by `replay`.
    pub(crate) fn with_replay(config: BidderConfig, replay: ReplayConfig) -> Bidder {
        Bidder {
            syncs: Arc::new(UserSyncs::new(config.sync_capacity)),
            config,
            counters: BidCounters::default(),
            notices_seen: NoticesSeen::new(replay),
        }
    }

    /// Replaces the notices' replay guards with empty ones sized by `replay` (before serving).
    pub(crate) fn set_replay(&mut self, replay: ReplayConfig) {
        self.notices_seen = NoticesSeen::new(replay);
    }

    /// The replay guard of a notice kind.
    pub(crate) fn replay_guard(&self, kind: NoticeKind) -> &ReplayGuard {
        let seen = &self.notices_seen;
        match kind {
            NoticeKind::Win => &seen.wins,
            NoticeKind::Billing => &seen.billings,
            NoticeKind::Loss => &seen.losses,
        }
    }

    /// The notices' replay guards with their kinds, as labelled in metrics.
    pub(crate) fn replay_guards(&self) -> [(&'static str, &Arc<ReplayGuard>); 3] {
        let seen = &self.notices_seen;
        [
            ("win", &seen.wins),
            ("billing", &seen.billings),
            ("loss", &seen.losses),
        ]
    }

    /// The settings for `/openrtb2/bid` (`None`) or `/openrtb2/bid/{name}`.
    pub fn exchange(&self, name: Option<&str>) -> Option<&Exchange> {
        match name {
            None => Some(&self.config.default),
            Some(name) => self.config.exchanges.iter().find(|e| e.name == name),
        }
    }

    /// The exchange whose name a notice token's digest names.
    pub(crate) fn by_digest(&self, digest: u32) -> Option<&Exchange> {
        if digest == 0 {
            return Some(&self.config.default);
        }
        self.config
            .exchanges
            .iter()
            .find(|e| notice::exchange_digest(&e.name) == digest)
    }
}

/// The replay guards of notices, one per kind, sized alike.
#[derive(Debug)]
struct NoticesSeen {
    wins: Arc<ReplayGuard>,
    billings: Arc<ReplayGuard>,
    losses: Arc<ReplayGuard>,
}

impl NoticesSeen {
    fn new(replay: ReplayConfig) -> NoticesSeen {
        NoticesSeen {
            wins: Arc::new(ReplayGuard::new(replay)),
            billings: Arc::new(ReplayGuard::new(replay)),
            losses: Arc::new(ReplayGuard::new(replay)),
        }
    }
}
