//! General invalid traffic (GIVT) checks for the edge's hot path, after the MRC's Invalid
//! Traffic Detection and Filtration Guidelines: known crawlers by their user agent, clients in
//! data-centre networks, and clients sending more events a minute than a person does.
//!
//! Every list is compiled once, when it is loaded, into a matcher that answers in well under a
//! microsecond; nothing is scanned entry by entry per request. Pure except for reading list
//! files ([`CrawlerList::load`], [`NetworkList::load`], [`Watched`]); every time is a
//! parameter.
//!
//! - [`CrawlerList`]: regular expressions matched anywhere in the `User-Agent`, case-sensitively
//!   (the shipped list: `lists/crawlers.txt`, derived from the MIT-licensed
//!   crawler-user-agents list).
//! - [`NetworkList`]: a set of IPv4 and IPv6 CIDR blocks. No data-centre list ships (see the
//!   README); [`NetworkList::builtin`] is empty and operators name a file.
//! - [`Watched`]: a list kept from a file and reloaded when the file changes; a bad file keeps
//!   the last good list.
//! - [`RateLimiter`] and [`prefix_key`]: events per client and minute, in bounded memory.
//!
//! ```
//! use std::net::IpAddr;
//! use marquee_traffic::{CrawlerList, NetworkList, RateLimiter, prefix_key};
//!
//! let crawlers = CrawlerList::builtin();
//! assert!(crawlers.is_crawler(b"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"));
//! assert!(!crawlers.is_crawler(
//!     b"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0"
//! ));
//!
//! let datacentres = NetworkList::parse("203.0.113.0/24\n2001:db8::/32\n", "example")?;
//! assert!(datacentres.contains("203.0.113.7".parse::<IpAddr>()?));
//! assert!(datacentres.contains("::ffff:203.0.113.7".parse::<IpAddr>()?));
//! assert!(!datacentres.contains("198.51.100.1".parse::<IpAddr>()?));
//!
//! let rates = RateLimiter::new(100_000);
//! let client = prefix_key("198.51.100.23".parse::<IpAddr>()?);
//! let now = 1_790_000_000;
//! assert!(!rates.over(client, 2, now));
//! assert!(!rates.over(client, 2, now + 1));
//! assert!(rates.over(client, 2, now + 2)); // the third event in one minute
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod crawlers;
mod literals;
mod networks;
mod rate;
mod watch;

use std::fmt;

pub use crawlers::CrawlerList;
pub use networks::{NetworkList, prefix_key};
pub use rate::RateLimiter;
pub use watch::{Loadable, Reload, Watched};

/// Why a list could not be read: the file, the line (1-based; `0` for the file as a whole) and
/// what is wrong. Displays as `FILE:LINE: MESSAGE`, or `FILE: MESSAGE` for line 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl ListError {
    fn new(file: &str, line: usize, message: impl Into<String>) -> ListError {
        ListError {
            file: file.to_owned(),
            line,
            message: message.into(),
        }
    }
}

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        }
    }
}

impl std::error::Error for ListError {}

/// Reads a list file whole; an unreadable file is an error naming it (line 0).
fn read_list(path: &std::path::Path) -> Result<(String, String), ListError> {
    let file = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => Ok((text, file)),
        Err(e) => Err(ListError::new(&file, 0, format!("cannot read: {e}"))),
    }
}
