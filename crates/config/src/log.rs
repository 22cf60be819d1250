//! `[log]`: what the process logs, and how.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSection {
    /// A tracing filter: `info`, `debug`, `marquee_store=debug,info`, …
    pub level: LogLevel,
    pub format: LogFormat,
}

impl Default for LogSection {
    fn default() -> Self {
        LogSection {
            level: LogLevel("info".into()),
            format: LogFormat::Text,
        }
    }
}

/// A tracing filter directive; not blank. Its syntax is the logging library's, checked when
/// logging starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LogLevel(String);

impl LogLevel {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for LogLevel {
    type Error = &'static str;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        if text.trim().is_empty() {
            return Err("must not be empty");
        }
        Ok(LogLevel(text))
    }
}

impl From<LogLevel> for String {
    fn from(level: LogLevel) -> String {
        level.0
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Text,
    /// One JSON object per line.
    Json,
}
