//! Throwaway PostgreSQL databases for tests (feature `test-suite`): each [`TestDatabase`] is a
//! new, empty database on the test server, dropped again when the value is dropped, so tests
//! run in parallel without seeing each other's rows or migrations.
//!
//! The server is the one `scripts/test-deps.sh` starts, at [`DEFAULT_URL`], unless
//! `MARQUEE_TEST_POSTGRES_URL` names another (a URL whose user may create databases). Tests
//! that use it carry `#[ignore = "needs PostgreSQL: scripts/test.sh starts it"]`: plain
//! `cargo test` leaves them out, `scripts/test.sh` runs them. When the server cannot be
//! reached, [`TestDatabase::create`] panics with a message naming `scripts/test-deps.sh`: a
//! test that runs without PostgreSQL fails, it does not pass quietly.

// Test support: a panic is how a test using it fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use marquee_model::Clock;
use tokio_postgres::NoTls;

use crate::{PostgresStore, SqliteStore, Store};

/// The server `scripts/test-deps.sh` starts.
pub const DEFAULT_URL: &str = "postgres://marquee@127.0.0.1:25432/postgres";
/// The environment variable naming another server.
pub const URL_VARIABLE: &str = "MARQUEE_TEST_POSTGRES_URL";

/// The URL of the test server's maintenance database (where databases are created from).
pub fn server_url() -> String {
    std::env::var(URL_VARIABLE)
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| DEFAULT_URL.to_owned())
}

/// The store a test of another crate runs on: on `postgres` when given, or else on SQLite in
/// the file `sqlite`.
pub async fn store_on(
    postgres: Option<&TestDatabase>,
    sqlite: &Path,
    clock: Arc<dyn Clock>,
) -> Arc<dyn Store> {
    match postgres {
        Some(db) => Arc::new(PostgresStore::connect(db.url(), clock).await.unwrap()),
        None => Arc::new(SqliteStore::open(sqlite, clock).unwrap()),
    }
}

/// A new empty database, dropped (connections and all) when this value is dropped.
#[derive(Debug)]
pub struct TestDatabase {
    name: String,
    url: String,
    server: String,
}

impl TestDatabase {
    /// Creates a database with a name unique to this process and call.
    pub async fn create() -> TestDatabase {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let server = server_url();
        let name = format!(
            "marquee_test_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let client = connect(&server).await;
        static SWEPT: AtomicBool = AtomicBool::new(false);
        if !SWEPT.swap(true, Ordering::Relaxed) && is_loopback(&server) {
            drop_orphans(&client).await;
        }
        // A database left by an earlier process of the same id goes first.
        for sql in [
            format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            format!("CREATE DATABASE {name}"),
        ] {
            client.batch_execute(&sql).await.unwrap_or_else(|e| {
                panic!("cannot create test database {name} on {server}: {e:?}")
            });
        }
        let url = with_database(&server, &name);
        TestDatabase { name, url, server }
    }

    /// The database's URL, for `PostgresStore::connect` or `--database`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let server = self.server.clone();
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // A runtime of its own on a thread of its own: the drop may run inside or outside a
        // runtime, and must finish before the test ends.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async { connect(&server).await.batch_execute(&sql).await })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("test database {} not dropped: {e:?}", self.name);
        }
    }
}

/// Drops the test databases of processes that no longer run (killed before their databases
/// were dropped), so that they do not pile up on the test server.
async fn drop_orphans(client: &tokio_postgres::Client) {
    let Ok(rows) = client
        .query(
            "SELECT datname::text FROM pg_database WHERE datname LIKE 'marquee\\_test\\_%'",
            &[],
        )
        .await
    else {
        return;
    };
    for row in rows {
        let name: String = row.get(0);
        let pid = name.split('_').nth(2).unwrap_or_default();
        if !pid.is_empty() && !std::path::Path::new("/proc").join(pid).exists() {
            // Another process may be dropping it at the same moment; either way it goes.
            let _ = client
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await;
        }
    }
}

/// Whether the server is on this machine (so a database's process id can be checked here).
fn is_loopback(url: &str) -> bool {
    url.parse::<tokio_postgres::Config>().is_ok_and(|config| {
        config.get_hosts().iter().all(|host| match host {
            tokio_postgres::config::Host::Tcp(host) => {
                host == "localhost"
                    || host
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback())
            }
            tokio_postgres::config::Host::Unix(_) => true,
        })
    })
}

/// A client of `url`, its connection driven by a task on the current runtime.
async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot reach the test PostgreSQL server at {url} ({e}: {}); run \
                 scripts/test-deps.sh to install and start it, or set {URL_VARIABLE}",
                std::error::Error::source(&e).map_or(String::new(), |s| s.to_string())
            )
        });
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// `url` with its database (the path after the host) replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let scheme_end = url
        .find("://")
        .unwrap_or_else(|| panic!("{URL_VARIABLE} must be a postgres:// URL, not {url:?}"))
        + 3;
    let rest = &url[scheme_end..];
    let host_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let query = rest[host_end..]
        .find('?')
        .map_or("", |q| &rest[host_end + q..]);
    format!("{}{}/{name}{query}", &url[..scheme_end], &rest[..host_end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_of_a_url_is_replaced() {
        assert_eq!(
            with_database("postgres://marquee@127.0.0.1:25432/postgres", "t1"),
            "postgres://marquee@127.0.0.1:25432/t1"
        );
        assert_eq!(
            with_database("postgresql://u:p@h/db?sslmode=disable", "t2"),
            "postgresql://u:p@h/t2?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h:1", "t3"), "postgres://h:1/t3");
        assert_eq!(
            with_database("postgres://h?application_name=x", "t4"),
            "postgres://h/t4?application_name=x"
        );
    }
}
