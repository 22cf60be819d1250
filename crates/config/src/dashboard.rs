//! `[dashboard]`: the web dashboard the manager serves.

use serde::{Deserialize, Serialize};

/// The web dashboard the manager serves.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DashboardSection {
    /// Whether its cookies are `Secure` (sent back over https only): true when browsers reach
    /// the dashboard over https. Unset: in `marquee serve`, whether `edge.public_url` is https
    /// (the dashboard shares the edge's origin); in `marquee manager`, true.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secure_cookies: Option<bool>,
}

impl DashboardSection {
    /// The cookies' `Secure` flag. `shared_origin` is the edge's public URL when the dashboard
    /// is served under it (`marquee serve`), `None` when it has an origin of its own (the
    /// manager's, which the edge's URL says nothing about). Unknown, the flag is on: a
    /// session cookie must not travel over plain http when the dashboard is behind TLS, and a
    /// plain-http dashboard that refuses it fails loudly (sign-in does not stick), not silently.
    pub fn secure_cookies(&self, shared_origin: Option<&str>) -> bool {
        self.secure_cookies
            .unwrap_or_else(|| shared_origin.is_none_or(|url| url.starts_with("https://")))
    }
}
