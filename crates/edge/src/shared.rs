//! The edge's use of state shared through Redis (`[redis]`, see `marquee_sharedstate`).
//! Without it nothing here runs and caps are the process's own ([`LocalCaps`]).
//!
//! With it, an ad decision whose line item or campaign has frequency caps is counted in Redis
//! before it is answered: one atomic check-and-count within the request's deadline. Refused
//! (another edge filled the cap meanwhile), the placement gets no ad; Redis unavailable, local
//! state has already decided (the engine consulted it) and the count is queued for Redis (the
//! decision's own count, which the check may have applied already: it is applied once). The
//! engine itself never waits: it sees [`EdgeCaps`], local caps plus the caps Redis reported
//! full, a cache read. Deliveries that happen without a decision here (an exchange's billing
//! notice) are queued for Redis as they come, and budget charges are added to the line item's
//! shared counter the same way.

use std::time::Instant;

use jiff::Timestamp;
use marquee_engine::{FrequencyCaps, LocalCaps, user_key};
use marquee_model::{CampaignId, FrequencyCap, LineItemId};
use marquee_sharedstate::{CapAnswer, CapRule, Scope, SharedState};
use marquee_snapshot::SnapshotData;

use crate::{Edge, Loaded};

/// What the engine asks about caps: the local ones, and those Redis reported full.
#[derive(Debug)]
pub(crate) struct EdgeCaps<'a> {
    pub(crate) local: &'a LocalCaps,
    pub(crate) shared: Option<&'a SharedState>,
    /// The line items (and their campaigns) this request has already decided for its other
    /// placements or imps: they count against the local caps too, so that one request cannot
    /// put a line item capped at one in each of its slots.
    pub(crate) decided: &'a [(LineItemId, CampaignId)],
}

impl FrequencyCaps for EdgeCaps<'_> {
    fn allows(
        &self,
        user: &str,
        line_item: (LineItemId, &[FrequencyCap]),
        campaign: (CampaignId, &[FrequencyCap]),
        now: Timestamp,
    ) -> bool {
        let pending = (
            self.decided.iter().filter(|d| d.0 == line_item.0).count(),
            self.decided.iter().filter(|d| d.1 == campaign.0).count(),
        );
        if !self
            .local
            .allows_beside(user, line_item, campaign, now, pending)
        {
            return false;
        }
        let Some(shared) = self.shared else {
            return true;
        };
        let user = user_key(user);
        let full = |scope: Scope, caps: &[FrequencyCap]| {
            caps.iter()
                .any(|cap| shared.known_full(user, &[rule(scope, cap)]))
        };
        !full(Scope::LineItem(line_item.0.0), line_item.1)
            && !full(Scope::Campaign(campaign.0.0), campaign.1)
    }
}

fn rule(scope: Scope, cap: &FrequencyCap) -> CapRule {
    CapRule {
        scope,
        window_seconds: cap.window.seconds(),
        limit: cap.count,
    }
}

/// The caps of a line item and of its campaign, as shared-state rules; empty when it has none
/// or is not in the snapshot.
pub(crate) fn rules(data: &SnapshotData, line_item: u64) -> Vec<CapRule> {
    let Some(li) = data.line_item(LineItemId(line_item)) else {
        return Vec::new();
    };
    let campaign_caps = data
        .campaign(li.campaign_id)
        .map_or(&[][..], |c| &c.frequency_caps[..]);
    li.frequency_caps
        .iter()
        .map(|cap| rule(Scope::LineItem(li.id.0), cap))
        .chain(
            campaign_caps
                .iter()
                .map(|cap| rule(Scope::Campaign(li.campaign_id.0), cap)),
        )
        .collect()
}

/// Adds a decision for `line_item` to its request's `decided` list, which the caps of the
/// request's later slots count; only a request of more than one slot (`slots`) needs the list.
#[inline]
pub(crate) fn note_decision(
    decided: &mut Vec<(LineItemId, CampaignId)>,
    slots: usize,
    data: &SnapshotData,
    line_item: LineItemId,
) {
    if slots > 1
        && let Some(li) = data.line_item(line_item)
    {
        decided.push((li.id, li.campaign_id));
    }
}

/// Whether a decision for `line_item` needs counting in Redis before it is answered.
pub(crate) fn needs_count(data: &SnapshotData, user: u64, line_item: u64) -> bool {
    user != 0
        && data.line_item(LineItemId(line_item)).is_some_and(|li| {
            !li.frequency_caps.is_empty()
                || data
                    .campaign(li.campaign_id)
                    .is_some_and(|c| !c.frequency_caps.is_empty())
        })
}

/// Counts a decision in Redis before it is answered. `false`: a cap is full, do not serve it.
/// Unavailable Redis leaves the decision to local state (already taken) and queues the count:
/// the same count the check sent (one drawn per decision), because a check that timed out may
/// have counted in Redis all the same, and the queued count must then add nothing.
pub(crate) async fn count_decision(
    shared: &SharedState,
    data: &SnapshotData,
    user: u64,
    line_item: u64,
    deadline: Instant,
) -> bool {
    let rules = rules(data, line_item);
    let count = shared.cap_count();
    match shared.check_and_count(user, &rules, count, deadline).await {
        CapAnswer::Allowed => true,
        CapAnswer::Refused => false,
        CapAnswer::Unavailable(_) => {
            shared.count_later(user, &rules, count);
            true
        }
    }
}

/// Queues a delivery that happened without a counted decision (an exchange's billing notice).
pub(crate) fn count_delivery(edge: &Edge, loaded: &Loaded, user: u64, line_item: u64) {
    let Some(shared) = &edge.shared else {
        return;
    };
    if user == 0 {
        return;
    }
    // No decision counted it: a count of its own.
    shared.count_later(
        user,
        &rules(&loaded.engine.snapshot().data, line_item),
        shared.cap_count(),
    );
}

/// Adds what a billing event charged to the line item's lease to its shared budget counter.
pub(crate) fn charge(edge: &Edge, line_item: u64, charged: Option<u64>) {
    if let (Some(shared), Some(amount)) = (&edge.shared, charged) {
        shared.charge_later(line_item, amount);
    }
}

#[cfg(test)]
mod tests {
    use marquee_model::CapWindow;

    use super::*;

    /// A line item capped at two a day, and its campaign at three: what one request already
    /// decided for its other slots counts as seen, so one request cannot fill a slot per cap.
    #[test]
    fn decisions_of_the_same_request_count_against_the_caps() {
        let local = LocalCaps::default();
        let day = CapWindow::from_seconds(86_400).unwrap();
        let li_caps = [FrequencyCap {
            count: 2,
            window: day,
        }];
        let campaign_caps = [FrequencyCap {
            count: 3,
            window: day,
        }];
        let (li, other, campaign) = (LineItemId(1), LineItemId(2), CampaignId(9));
        let now = Timestamp::now();
        let allows = |decided: &[(LineItemId, CampaignId)], line_item: LineItemId| {
            EdgeCaps {
                local: &local,
                shared: None,
                decided,
            }
            .allows(
                "u1",
                (line_item, &li_caps[..]),
                (campaign, &campaign_caps[..]),
                now,
            )
        };
        assert!(allows(&[], li));
        assert!(allows(&[(li, campaign)], li));
        assert!(
            !allows(&[(li, campaign), (li, campaign)], li),
            "line item cap"
        );
        assert!(
            !allows(&[(li, campaign), (other, campaign), (other, campaign)], li),
            "campaign cap"
        );
        // Recorded impressions and pending ones add up.
        local.record(
            user_key("u1"),
            (li, &li_caps[..]),
            (campaign, &campaign_caps[..]),
            now,
        );
        assert!(allows(&[], li));
        assert!(!allows(&[(li, campaign)], li));
    }
}
