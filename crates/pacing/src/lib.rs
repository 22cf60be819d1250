//! Pacing and budget leases.
