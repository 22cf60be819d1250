//! The device type, operating system family and browser family of an ad request, from its
//! `User-Agent` and the User-Agent Client Hints a Chromium-based browser sends with it.
//!
//! Built for the edge's hot path: [`detect`] reads each header once, allocates nothing and
//! answers with `&'static str` names from closed sets ([`os::ALL`], [`browser::ALL`]).
//!
//! Client hints win where they say something: `Sec-CH-UA-Platform` names the system,
//! `Sec-CH-UA` the browser, `Sec-CH-UA-Mobile` whether it is a phone. The User-Agent answers the
//! rest, and all of it for televisions and consoles, which the hints cannot describe.
//!
//! What a User-Agent cannot tell: iPadOS's Safari asks for desktop pages as a Mac by default
//! and sends no client hints, so an iPad in Safari is a `Desktop` running `macOS` here (the
//! honest answer from what it sends); other browsers on the iPad give themselves away.

mod families;
mod hints;
mod ua;

pub use families::{browser, os};
pub use marquee_model::DeviceType;

/// The `Accept-CH` response header value asking for the client hints [`detect`] reads. These
/// three are low-entropy hints that Chromium sends on every request anyway; the header states
/// the intent and keeps them coming should a browser start sending them only on request.
/// `Critical-CH` is not needed: no hint this crate reads is held back from a first request.
pub const ACCEPT_CH: &str = "Sec-CH-UA, Sec-CH-UA-Mobile, Sec-CH-UA-Platform";

/// What [`detect`] found; `None` where it could not tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Device {
    pub device_type: Option<DeviceType>,
    /// One of [`os::ALL`].
    pub os: Option<&'static str>,
    /// One of [`browser::ALL`].
    pub browser: Option<&'static str>,
}

/// The client hint header values of a request, as received (`None` when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientHints<'a> {
    /// `Sec-CH-UA-Mobile`: `?1` or `?0`.
    pub mobile: Option<&'a str>,
    /// `Sec-CH-UA-Platform`: a quoted name such as `"Android"`.
    pub platform: Option<&'a str>,
    /// `Sec-CH-UA`: brands such as `"Chromium";v="124", "Google Chrome";v="124",
    /// "Not-A.Brand";v="99"`.
    pub brands: Option<&'a str>,
}

/// Detects the device of a request from its `User-Agent` (any bytes; empty when absent) and its
/// client hints. Never panics, whatever the input; reads at most the first kilobyte of the
/// User-Agent.
pub fn detect(user_agent: &[u8], hints: ClientHints<'_>) -> Device {
    let from_ua = ua::read(user_agent);
    if matches!(
        from_ua.device_type,
        Some(DeviceType::Ctv | DeviceType::Console)
    ) {
        // A television's or console's browser may send hints, but they only say "Android" or
        // "Windows" and "not mobile": the User-Agent knows better, except for the browser.
        return Device {
            browser: hinted_browser(hints, from_ua.browser),
            ..Device::from(from_ua)
        };
    }
    let mobile = hints.mobile.and_then(hints::mobile);
    let platform = hints.platform.and_then(hints::platform);
    let device_type = match (mobile, platform) {
        (Some(true), _) => Some(DeviceType::Phone),
        (Some(false), Some(os::ANDROID)) => Some(DeviceType::Tablet),
        (Some(false), Some(os::WINDOWS | os::MACOS | os::LINUX | os::CHROME_OS)) => {
            Some(DeviceType::Desktop)
        }
        _ => from_ua.device_type,
    };
    let os = match (platform, from_ua.os) {
        // Fire OS is Android underneath, and says so in its hints.
        (Some(os::ANDROID), Some(os::FIRE_OS)) => Some(os::FIRE_OS),
        (Some(hinted), _) => Some(hinted),
        (None, from_ua) => from_ua,
    };
    Device {
        device_type,
        os,
        browser: hinted_browser(hints, from_ua.browser),
    }
}

/// The brands' browser, unless they only say "Chromium" and the User-Agent names a browser
/// built on it (Silk, Samsung Internet, …), which is more precise.
fn hinted_browser(hints: ClientHints<'_>, from_ua: Option<&'static str>) -> Option<&'static str> {
    match (hints.brands.and_then(hints::brands), from_ua) {
        (Some(browser::CHROMIUM), Some(named)) if named != browser::CHROME => Some(named),
        (Some(hinted), _) => Some(hinted),
        (None, from_ua) => from_ua,
    }
}

impl From<ua::FromUa> for Device {
    fn from(found: ua::FromUa) -> Self {
        Device {
            device_type: found.device_type,
            os: found.os,
            browser: found.browser,
        }
    }
}
