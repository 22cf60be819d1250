use jiff::Timestamp;
use serde::Serialize;

use crate::{
    Advertiser, Campaign, Creative, CreativeAssignment, LineItem, LineItemId, Placement,
    PlacementId, Publisher, Site,
};

/// Bookkeeping every stored object carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Meta {
    pub id: u64,
    /// Starts at 1; every update adds 1. Updates name the version they read.
    pub version: u64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A model object as stored: its bookkeeping plus the object itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored<T> {
    pub meta: Meta,
    pub object: T,
}

/// Every object whose own status is active (an active child of a paused parent is included;
/// the snapshot compiler drops it), every line item–placement link and every creative
/// assignment (in line item, then creative order), as of change counter `version`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    pub version: u64,
    pub advertisers: Vec<Stored<Advertiser>>,
    pub campaigns: Vec<Stored<Campaign>>,
    pub line_items: Vec<Stored<LineItem>>,
    pub creatives: Vec<Stored<Creative>>,
    pub publishers: Vec<Stored<Publisher>>,
    pub sites: Vec<Stored<Site>>,
    pub placements: Vec<Stored<Placement>>,
    pub links: Vec<(LineItemId, PlacementId)>,
    pub assignments: Vec<CreativeAssignment>,
}
