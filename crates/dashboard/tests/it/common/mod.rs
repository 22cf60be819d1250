//! Setup the dashboard's test modules share: the clock, the manager under the dashboard, the
//! dashboard's options and the users' password.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use marquee_dashboard::{DashboardOptions, hash_password};
use marquee_manager::{Manager, ManagerOptions};
use marquee_model::{ManualClock, Role};
use marquee_store::{NewUser, Store};

/// Every test user's password.
pub const PASSWORD: &str = "correct horse battery";

/// The clock the tests start at, 2026-11-18T08:26:40Z.
pub fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(
        Timestamp::from_second(1_795_000_000).unwrap(),
    ))
}

/// The manager over `store`, its snapshots in `dir`.
pub async fn manager(store: &Arc<dyn Store>, clock: &Arc<ManualClock>, dir: &Path) -> Arc<Manager> {
    Manager::open(
        Arc::clone(store),
        clock.clone(),
        ManagerOptions {
            snapshot_dir: dir.join("snapshots"),
            keep: 2,
            compile_interval: Duration::from_secs(1),
        },
    )
    .await
    .unwrap()
}

/// The dashboard's options with the edges at `public_url` and uploads in `uploads_dir`.
pub fn options(public_url: &str, uploads_dir: &Path, secure_cookies: bool) -> DashboardOptions {
    DashboardOptions {
        public_url: public_url.into(),
        session_lifetime: SignedDuration::from_hours(12),
        uploads_dir: uploads_dir.to_owned(),
        report_max_rows: 10_000,
        secure_cookies,
    }
}

/// Adds the user `name` with [`PASSWORD`].
pub async fn add_user(store: &dyn Store, name: &str, role: Role, owner_id: Option<u64>) {
    store
        .create_user(
            NewUser {
                name: name.into(),
                role,
                owner_id,
                password_hash: hash_password(PASSWORD).unwrap(),
            },
            &marquee_store::Actor::cli(),
        )
        .await
        .unwrap();
}
