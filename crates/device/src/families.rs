//! The closed sets of family names [`crate::detect`] answers with. Targeting compares these
//! strings as they are, so a name never changes once shipped; new families may be added.

/// Operating system families.
pub mod os {
    pub const ANDROID: &str = "Android";
    pub const CHROME_OS: &str = "ChromeOS";
    /// Amazon's Android-based system on Fire TV devices and Fire tablets.
    pub const FIRE_OS: &str = "Fire OS";
    /// iPhone, iPod touch and iPad (iPadOS included).
    pub const IOS: &str = "iOS";
    /// Desktop Linux (not Android, not a television's Linux).
    pub const LINUX: &str = "Linux";
    pub const MACOS: &str = "macOS";
    pub const NINTENDO: &str = "Nintendo";
    pub const PLAYSTATION: &str = "PlayStation";
    pub const ROKU_OS: &str = "Roku OS";
    /// Samsung's televisions since 2015 (and its few Tizen phones).
    pub const TIZEN: &str = "Tizen";
    /// Apple TV.
    pub const TVOS: &str = "tvOS";
    /// LG's televisions.
    pub const WEBOS: &str = "webOS";
    /// Windows on PCs (and the discontinued Windows Phone).
    pub const WINDOWS: &str = "Windows";
    pub const XBOX: &str = "Xbox";

    /// Every operating system family, in alphabetical order.
    pub const ALL: [&str; 14] = [
        ANDROID,
        CHROME_OS,
        FIRE_OS,
        IOS,
        LINUX,
        MACOS,
        NINTENDO,
        PLAYSTATION,
        ROKU_OS,
        TIZEN,
        TVOS,
        WEBOS,
        WINDOWS,
        XBOX,
    ];
}

/// Browser families.
pub mod browser {
    pub const CHROME: &str = "Chrome";
    /// Other browsers built on Chromium: Chromium itself, Vivaldi, Brave, Whale, QQ Browser,
    /// MIUI Browser, Electron apps, …
    pub const CHROMIUM: &str = "Chromium";
    pub const EDGE: &str = "Edge";
    /// Firefox on every system (on iOS, `FxiOS`).
    pub const FIREFOX: &str = "Firefox";
    /// Internet Explorer.
    pub const IE: &str = "IE";
    pub const OPERA: &str = "Opera";
    /// Safari on macOS and iOS (and the old Safari for Windows).
    pub const SAFARI: &str = "Safari";
    pub const SAMSUNG_INTERNET: &str = "Samsung Internet";
    /// Amazon's browser on Fire TV and Fire tablets.
    pub const SILK: &str = "Silk";
    pub const UC_BROWSER: &str = "UC Browser";
    /// A page shown inside an app rather than a browser: Android's WebView, iOS's WKWebView
    /// (Facebook, Instagram, the Google app, …), LG's web app runtime.
    pub const WEBVIEW: &str = "WebView";
    pub const YANDEX: &str = "Yandex";

    /// Every browser family, in alphabetical order.
    pub const ALL: [&str; 12] = [
        CHROME,
        CHROMIUM,
        EDGE,
        FIREFOX,
        IE,
        OPERA,
        SAFARI,
        SAMSUNG_INTERNET,
        SILK,
        UC_BROWSER,
        WEBVIEW,
        YANDEX,
    ];
}
