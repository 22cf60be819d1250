//! Embedded SQLite store. Placeholder; implemented by the store work item.
