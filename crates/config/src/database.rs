//! `[database]`: the manager's database.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::value::empty_is_none;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSection {
    /// Empty: SQLite in `data_dir/marquee.db`. `sqlite:PATH` or a plain path: SQLite in that
    /// file. `postgres://user:password@host:port/database` (or `postgresql://`): PostgreSQL.
    #[serde(default, with = "empty_is_none")]
    pub url: Option<DatabaseUrl>,
}

/// A database `database.url` names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum DatabaseUrl {
    Sqlite(PathBuf),
    /// The URL as configured (with its password, if any; see [`Database::describe`]).
    Postgres(String),
}

impl TryFrom<String> for DatabaseUrl {
    type Error = String;
    fn try_from(url: String) -> Result<Self, String> {
        if let Some(rest) = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
        {
            if rest.is_empty() || rest.starts_with(['/', '?']) {
                return Err("names no PostgreSQL host".into());
            }
            return Ok(DatabaseUrl::Postgres(url));
        }
        if let Some((scheme, _)) = url.split_once("://") {
            return Err(format!(
                "has scheme {scheme:?}; use postgres://… for PostgreSQL, or a file path \
                 (or empty) for SQLite"
            ));
        }
        match url.strip_prefix("sqlite:").unwrap_or(&url) {
            "" => Err("is `sqlite:` without a file path".into()),
            path => Ok(DatabaseUrl::Sqlite(PathBuf::from(path))),
        }
    }
}

impl From<DatabaseUrl> for String {
    fn from(url: DatabaseUrl) -> String {
        match url {
            DatabaseUrl::Sqlite(path) => format!("sqlite:{}", path.display()),
            DatabaseUrl::Postgres(url) => url,
        }
    }
}

/// Which database the configuration selects, the default resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    Sqlite(PathBuf),
    /// The URL as configured (with its password, if any; see [`Database::describe`]).
    Postgres(String),
}

impl Database {
    /// The database for messages and logs: the file, or the URL without its password.
    pub fn describe(&self) -> String {
        match self {
            Database::Sqlite(path) => path.display().to_string(),
            Database::Postgres(url) => without_query_password(&without_password(url)),
        }
    }
}

/// `url` with a `password=` query parameter's value, if any, replaced by `***` (libpq accepts
/// the password there too).
fn without_query_password(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let pairs: Vec<&str> = query
        .split('&')
        .map(|pair| {
            if pair.starts_with("password=") {
                "password=***"
            } else {
                pair
            }
        })
        .collect();
    format!("{base}?{}", pairs.join("&"))
}

/// `url` with the password of its user info, if any, replaced by `***`.
pub(crate) fn without_password(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &url[..scheme_end],
            &rest[..colon],
            &rest[at..]
        ),
        None => url.to_owned(),
    }
}
