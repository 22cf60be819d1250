//! Errors, each naming what is wrong.

use jiff::civil::Date;
use marquee_model::LineItemId;

use crate::EdgeId;

/// A traffic profile that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProfileError {
    #[error("traffic count for hour {hour} must be a finite number of at least 0")]
    BadCount { hour: usize },
    #[error("a traffic profile needs some traffic in at least one hour")]
    Empty,
}

/// A line item that cannot be paced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("the line item has no goal: it runs at full speed and needs no lease")]
    NoGoal,
    #[error("unknown time zone {0:?}")]
    UnknownTimeZone(String),
    #[error("the flight cannot be placed in time zone {0:?}")]
    UnplaceableFlight(String),
    #[error("the flight must end after it starts")]
    EndNotAfterStart,
    #[error("the goal needs a daily or a lifetime amount")]
    NoAmount,
    #[error("goal amounts must be greater than 0")]
    ZeroAmount,
    #[error("the daily amount must not exceed the lifetime amount")]
    DailyOverLifetime,
    #[error("the local day {0} cannot be placed in the line item's time zone")]
    TimeOutOfRange(Date),
}

/// A setting outside its allowed range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("pacing setting {field} {rule}")]
pub struct ConfigError {
    pub field: &'static str,
    pub rule: &'static str,
}

impl ConfigError {
    pub(crate) fn new(field: &'static str, rule: &'static str) -> ConfigError {
        ConfigError { field, rule }
    }
}

/// A renewal or release the book cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    #[error("line item {0} has no budget in this period")]
    NoBudget(LineItemId),
    #[error("edge {} holds no lease on line item {line_item}", edge.0)]
    NoLease { edge: EdgeId, line_item: LineItemId },
    #[error(
        "edge {} reported {consumed} consumed on line item {line_item}, less than the {reported} it reported before (a restarted edge needs a new id)",
        edge.0
    )]
    ConsumptionWentBack {
        edge: EdgeId,
        line_item: LineItemId,
        reported: u64,
        consumed: u64,
    },
}
