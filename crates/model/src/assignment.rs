//! The creative library: a creative used by a line item besides the one it was uploaded under.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::objects::weight_rule;
use crate::{CreativeId, LineItemId, ValidationError, Violations};

/// A line item's use of a creative of its advertiser uploaded under another line item: its
/// share in this line item's rotation and, optionally, the only times it serves here. The line
/// item a creative was uploaded under (`Creative::line_item_id`) uses it without an assignment,
/// with the creative's own weight, as before the library existed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreativeAssignment {
    pub line_item_id: LineItemId,
    pub creative_id: CreativeId,
    /// Share in the line item's weighted rotation, 1 to 1000.
    pub weight: u32,
    /// Serves from this instant; `None`: from the line item's own start.
    pub start: Option<Timestamp>,
    /// Serves until this instant (exclusive); `None`: until the line item's own end.
    pub end: Option<Timestamp>,
}

impl CreativeAssignment {
    /// The weight's range and the flight's order, every problem with its JSON path.
    pub fn validate(&self) -> Result<(), ValidationError> {
        let mut v = Violations::new();
        weight_rule(&mut v, self.weight);
        if let (Some(start), Some(end)) = (self.start, self.end) {
            v.check_field("end", start < end, "must be after start");
        }
        v.into_result()
    }

    /// Whether the assignment lets the creative serve at `now`.
    pub fn serves_at(&self, now: Timestamp) -> bool {
        self.start.is_none_or(|start| start <= now) && self.end.is_none_or(|end| now < end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assignment(weight: u32, start: Option<&str>, end: Option<&str>) -> CreativeAssignment {
        let at = |s: Option<&str>| s.map(|s| s.parse::<Timestamp>().unwrap());
        CreativeAssignment {
            line_item_id: LineItemId(1),
            creative_id: CreativeId(2),
            weight,
            start: at(start),
            end: at(end),
        }
    }

    #[test]
    fn weight_and_flight_are_checked() {
        assert!(assignment(1, None, None).validate().is_ok());
        assert!(assignment(0, None, None).validate().is_err());
        assert!(assignment(1001, None, None).validate().is_err());
        let backwards = assignment(
            5,
            Some("2026-02-01T00:00:00Z"),
            Some("2026-01-01T00:00:00Z"),
        );
        let error = backwards.validate().unwrap_err().to_string();
        assert!(error.contains("end"), "{error}");
    }

    #[test]
    fn serves_only_inside_its_flight() {
        let a = assignment(
            5,
            Some("2026-01-01T00:00:00Z"),
            Some("2026-02-01T00:00:00Z"),
        );
        let at = |s: &str| s.parse::<Timestamp>().unwrap();
        assert!(!a.serves_at(at("2025-12-31T23:59:59Z")));
        assert!(a.serves_at(at("2026-01-01T00:00:00Z")));
        assert!(!a.serves_at(at("2026-02-01T00:00:00Z")));
        assert!(assignment(5, None, None).serves_at(at("2030-01-01T00:00:00Z")));
    }
}
