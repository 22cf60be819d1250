//! Gateway mode (issue 10): fan-out to external bidders, auction, notices.
