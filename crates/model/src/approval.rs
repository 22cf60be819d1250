//! The publisher's review of a creative: an advertiser proposes creatives, the publisher
//! (an admin) approves or rejects them, and only approved creatives serve.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validate::Violations;

/// Longest rejection reason, in characters: a sentence for the advertiser, not a document.
pub const MAX_REJECTION_REASON_CHARS: usize = 500;

/// A creative's approval state. Stored in the creative's body; a body written before approval
/// existed has none and reads as approved, because those creatives were serving.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case", deny_unknown_fields)]
pub enum Approval {
    #[default]
    Approved,
    /// Proposed or changed by the advertiser, waiting for the publisher.
    Pending,
    /// Refused by the publisher; the advertiser reads why.
    Rejected { reason: String },
}

impl Approval {
    pub const STATES: [&'static str; 3] = ["approved", "pending", "rejected"];

    pub fn is_approved(&self) -> bool {
        matches!(self, Approval::Approved)
    }

    /// `approved`, `pending` or `rejected`.
    pub fn state(&self) -> &'static str {
        match self {
            Approval::Approved => "approved",
            Approval::Pending => "pending",
            Approval::Rejected { .. } => "rejected",
        }
    }

    /// The state named `state`, with `reason` for a rejection (ignored otherwise).
    pub fn parse(state: &str, reason: &str) -> Option<Approval> {
        match state {
            "approved" => Some(Approval::Approved),
            "pending" => Some(Approval::Pending),
            "rejected" => Some(Approval::Rejected {
                reason: reason.trim().to_owned(),
            }),
            _ => None,
        }
    }

    pub(crate) fn check(&self, v: &mut Violations) {
        if let Approval::Rejected { reason } = self {
            v.field("reason", |v| {
                v.check(
                    !reason.trim().is_empty(),
                    "is required: tell the advertiser what to change",
                );
                v.check(
                    reason.chars().count() <= MAX_REJECTION_REASON_CHARS,
                    format!("must be at most {MAX_REJECTION_REASON_CHARS} characters"),
                );
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_without_approval_reads_as_approved_and_states_round_trip() {
        #[derive(Deserialize)]
        struct Body {
            #[serde(default)]
            approval: Approval,
        }
        let old: Body = serde_json::from_str("{}").unwrap();
        assert_eq!(old.approval, Approval::Approved);
        let rejected = Approval::Rejected {
            reason: "landing page is down".into(),
        };
        let json = serde_json::to_value(&rejected).unwrap();
        assert_eq!(
            json,
            serde_json::json!({ "state": "rejected", "reason": "landing page is down" })
        );
        assert_eq!(serde_json::from_value::<Approval>(json).unwrap(), rejected);
        assert_eq!(
            serde_json::to_value(Approval::Pending).unwrap(),
            serde_json::json!({ "state": "pending" })
        );
    }

    #[test]
    fn a_rejection_needs_a_reason() {
        let mut v = Violations::new();
        Approval::parse("rejected", "  ").unwrap().check(&mut v);
        assert!(v.into_result().is_err());
        let mut v = Violations::new();
        Approval::parse("rejected", "blurry").unwrap().check(&mut v);
        assert!(v.into_result().is_ok());
        assert_eq!(Approval::parse("maybe", ""), None);
    }
}
