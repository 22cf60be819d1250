//! State shared by edges through Redis (issue 9): frequency caps and budget counters.
