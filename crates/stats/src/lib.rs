//! Bulk aggregation of edge events into report rows.
