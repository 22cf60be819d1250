//! Integration tests of the dashboard router.

mod dashboard;
mod sign_in_token;
