//! Reading a User-Agent: one pass splits it into words and looks each up in a small hash table
//! of the words that matter, collecting a bit set; rules over that set then name the device
//! type, the operating system family and the browser family.
//!
//! Words are runs of ASCII letters, digits, `.`, `-` and `_`; any other byte separates them:
//! `Mozilla/5.0 (Linux; Android 14; K) … Chrome/124.0.0.0 Mobile Safari/537.36`
//! reads as `Mozilla`, `5.0`, `Linux`, `Android`, `14`, `K`, …, `Chrome`, `124.0.0.0`, `Mobile`,
//! `Safari`, `537.36`. A word is matched whole, so `Mobile` is not found in `T-Mobile`, and the
//! rules, not the order of the words, decide which one wins (`Edg` over `Chrome` over `Safari`).

use marquee_model::DeviceType;

use crate::families::{browser, os};

/// Bytes of a User-Agent read at most. Browsers send under 300; a longer header is read only
/// this far, which bounds the cost of a hostile one.
pub(crate) const MAX_LEN: usize = 1024;

/// What the User-Agent alone says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FromUa {
    pub device_type: Option<DeviceType>,
    pub os: Option<&'static str>,
    pub browser: Option<&'static str>,
}

pub(crate) fn read(user_agent: &[u8]) -> FromUa {
    let seen = scan(user_agent);
    let (device_type, os) = platform(seen);
    FromUa {
        device_type,
        os,
        browser: browser(seen, os),
    }
}

/// The words found, one bit each (a word may set several).
type Seen = u64;

const IPHONE: Seen = 1 << 0; // iPhone, iPod
const IPAD: Seen = 1 << 1;
const MAC: Seen = 1 << 2; // also in iOS's "like Mac OS X"
const WINDOWS: Seen = 1 << 3;
const LINUX: Seen = 1 << 4;
const ANDROID: Seen = 1 << 5;
const CROS: Seen = 1 << 6;
const TIZEN: Seen = 1 << 7;
const WEBOS: Seen = 1 << 8;
const ROKU: Seen = 1 << 9;
const APPLE_TV: Seen = 1 << 10;
const FIRE_TV: Seen = 1 << 11; // AFT… models
const FIRE_TABLET: Seen = 1 << 12; // KF… models
const PLAYSTATION: Seen = 1 << 13;
const XBOX: Seen = 1 << 14;
const NINTENDO: Seen = 1 << 15;
const MOBILE: Seen = 1 << 16;
const PHONE: Seen = 1 << 17;
const TABLET: Seen = 1 << 18;
const TV: Seen = 1 << 19;
const WEBKIT: Seen = 1 << 20;
const CHROME: Seen = 1 << 21;
const OTHER_CHROMIUM: Seen = 1 << 22;
const FIREFOX: Seen = 1 << 23;
const EDGE: Seen = 1 << 24;
const OPERA: Seen = 1 << 25;
const SAMSUNG: Seen = 1 << 26;
const UC: Seen = 1 << 27;
const YANDEX: Seen = 1 << 28;
const SILK: Seen = 1 << 29;
const VERSION: Seen = 1 << 30;
const SAFARI: Seen = 1 << 31;
const IE: Seen = 1 << 32;
const WV: Seen = 1 << 33; // Android WebView's "; wv)"
const IN_APP: Seen = 1 << 34;
const IOS_APP: Seen = 1 << 35; // a browser that exists only on iOS
const CAST: Seen = 1 << 36; // Chromecast's own system, no family of ours

fn has(seen: Seen, any: Seen) -> bool {
    seen & any != 0
}

fn platform(s: Seen) -> (Option<DeviceType>, Option<&'static str>) {
    use DeviceType::{Console, Ctv, Desktop, Phone, Tablet};
    let (device, family) = if has(s, PLAYSTATION) {
        (Console, Some(os::PLAYSTATION))
    } else if has(s, XBOX) {
        (Console, Some(os::XBOX))
    } else if has(s, NINTENDO) {
        (Console, Some(os::NINTENDO))
    } else if has(s, ROKU) {
        (Ctv, Some(os::ROKU_OS))
    } else if has(s, APPLE_TV) || s & (TV | MAC) == TV | MAC {
        // Apple TV's players say "Apple TV; … like Mac OS X".
        (Ctv, Some(os::TVOS))
    } else if has(s, FIRE_TV) {
        (Ctv, Some(os::FIRE_OS))
    } else if has(s, TV) {
        // A television's Linux or Windows token says nothing useful: no family then.
        let family = if has(s, TIZEN) {
            Some(os::TIZEN)
        } else if has(s, WEBOS) {
            Some(os::WEBOS)
        } else if has(s, ANDROID) && !has(s, CAST) {
            Some(os::ANDROID)
        } else {
            None
        };
        (Ctv, family)
    } else if has(s, WINDOWS) && has(s, PHONE | MOBILE) {
        // Windows Phone also claims Android and "like iPhone OS".
        (Phone, Some(os::WINDOWS))
    } else if has(s, IPAD) {
        (Tablet, Some(os::IOS))
    } else if has(s, IPHONE) {
        (Phone, Some(os::IOS))
    } else if s & (MAC | IOS_APP) == MAC | IOS_APP {
        // iPadOS asks for desktop pages as a Mac; a browser that only exists on iOS gives
        // it away. Safari in the same mode cannot be told from a Mac.
        (Tablet, Some(os::IOS))
    } else if has(s, FIRE_TABLET) || s & (SILK | PLAYSTATION) == SILK {
        // Silk says "Mobile" in its phone-sized view too; the Fire phone is long gone.
        (Tablet, Some(os::FIRE_OS))
    } else if has(s, WEBOS) {
        // Palm's and HP's webOS, before LG bought it for televisions.
        (if has(s, TABLET) { Tablet } else { Phone }, Some(os::WEBOS))
    } else if has(s, TIZEN) {
        return (has(s, MOBILE).then_some(Phone), Some(os::TIZEN));
    } else if has(s, ANDROID) {
        // Android phones' browsers say "Mobile"; tablets' do not.
        (
            if has(s, MOBILE | PHONE) {
                Phone
            } else {
                Tablet
            },
            Some(os::ANDROID),
        )
    } else if has(s, TABLET) && !has(s, WINDOWS) {
        // Windows PCs with a pen say "Tablet PC".
        (Tablet, None)
    } else if has(s, MOBILE | PHONE) {
        (Phone, None)
    } else if has(s, CROS) {
        (Desktop, Some(os::CHROME_OS))
    } else if has(s, MAC) {
        (Desktop, Some(os::MACOS))
    } else if has(s, WINDOWS) {
        (Desktop, Some(os::WINDOWS))
    } else if has(s, LINUX) {
        (Desktop, Some(os::LINUX))
    } else {
        return (None, None);
    };
    (Some(device), family)
}

fn browser(s: Seen, family: Option<&'static str>) -> Option<&'static str> {
    // Most specific first: Edge, Opera, Samsung Internet, … all carry "Chrome" and "Safari".
    let name = if has(s, EDGE) {
        browser::EDGE
    } else if has(s, OPERA) {
        browser::OPERA
    } else if has(s, SAMSUNG) {
        browser::SAMSUNG_INTERNET
    } else if has(s, YANDEX) {
        browser::YANDEX
    } else if has(s, UC) {
        browser::UC_BROWSER
    } else if s & (SILK | PLAYSTATION) == SILK {
        // The PlayStation Vita's browser happens to be called Silk too.
        browser::SILK
    } else if has(s, IE) {
        browser::IE
    } else if has(s, FIREFOX) {
        browser::FIREFOX
    } else if has(s, WV | IN_APP) {
        browser::WEBVIEW
    } else if has(s, OTHER_CHROMIUM) && !has(s, IPHONE | IPAD) {
        // On iOS those browsers are WebKit, and the rules below apply.
        browser::CHROMIUM
    } else if has(s, CHROME) {
        // Android's WebView before "; wv)" said "Version/4.0 … Chrome/…".
        if s & (ANDROID | VERSION) == ANDROID | VERSION {
            browser::WEBVIEW
        } else {
            browser::CHROME
        }
    } else {
        let safari = s & (VERSION | SAFARI) == VERSION | SAFARI;
        match family {
            Some(os::IOS | os::MACOS) if safari => browser::SAFARI,
            // An app's web view on Apple systems: WebKit without "Safari/".
            Some(os::IOS | os::MACOS) if s & (WEBKIT | SAFARI) == WEBKIT => browser::WEBVIEW,
            Some(os::WINDOWS) if safari => browser::SAFARI,
            // Android's old built-in browser was the platform's WebView.
            Some(os::ANDROID | os::FIRE_OS) if s & (VERSION | WEBKIT) == VERSION | WEBKIT => {
                browser::WEBVIEW
            }
            _ => return None,
        }
    };
    Some(name)
}

/// One pass over the User-Agent: every word is looked up once. Separators are found eight
/// bytes at a time, with arithmetic on a `u64` rather than a comparison per byte.
fn scan(user_agent: &[u8]) -> Seen {
    let ua = user_agent.get(..MAX_LEN).unwrap_or(user_agent);
    let mut seen = 0;
    // Nearly every User-Agent opens with this, which says nothing: start after it.
    let opening = if ua.starts_with(b"Mozilla/5.0 (") {
        13
    } else {
        0
    };
    // Where the current word starts, and where the eight bytes read next.
    let mut start = opening;
    let mut base = opening;
    while base <= ua.len() {
        let bytes = match ua.get(base..base + 8) {
            Some(eight) => <[u8; 8]>::try_from(eight).unwrap_or([b' '; 8]),
            // The last bytes, padded with separators: the first of them ends the last word.
            None => {
                let mut padded = [b' '; 8];
                let tail = ua.get(base..).unwrap_or_default();
                padded
                    .get_mut(..tail.len())
                    .unwrap_or_default()
                    .copy_from_slice(tail);
                padded
            }
        };
        let mut separators = separators(u64::from_le_bytes(bytes));
        while separators != 0 {
            let end = base + separators.trailing_zeros() as usize / 8;
            // No word of the table is one byte long or starts with a digit (versions, builds).
            if end > start + 1 && ua.get(start).is_some_and(|b| !b.is_ascii_digit()) {
                seen |= word_at(ua, start, end - start);
            }
            start = end + 1;
            separators &= separators - 1;
        }
        base += 8;
    }
    seen
}

const HIGH: u64 = 0x8080_8080_8080_8080;

const fn splat(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

/// The separators among the eight bytes of `x`: the high bit of each separator's byte set, all
/// else clear. Words are made of ASCII letters and digits, `.`, `-` and `_`; any other byte
/// separates them. Each lane is kept below 0x80 so that no sum carries into the next.
fn separators(x: u64) -> u64 {
    let low = x & !HIGH;
    // Lanes from `lo` to `hi`.
    let within = |v: u64, lo: u8, hi: u8| {
        v.wrapping_add(splat(0x80 - lo)) & !v.wrapping_add(splat(0x7f - hi)) & HIGH
    };
    let equal = |v: u64, b: u8| !(v ^ splat(b)).wrapping_add(splat(0x7f)) & HIGH;
    let letters = within(low | splat(0x20), b'a', b'z');
    // '-', '.', '/' and the digits are adjacent; '/' is not part of a word.
    let digits_dot_dash = within(low, b'-', b'9') & !equal(low, b'/');
    let word = (letters | digits_dot_dash | equal(low, b'_')) & !x;
    !word & HIGH
}

/// Longest word looked up; longer ones (tokens, hashes) cannot be in the table.
const MAX_WORD: usize = 24;

/// What the `len` bytes at `start` of `ua` say. Most words are not in the table: they cost a
/// load, a multiplication and one look at an empty slot.
#[inline]
fn word_at(ua: &[u8], start: usize, len: usize) -> Seen {
    if len > MAX_WORD {
        // Tokens longer than any word of the table.
        return 0;
    }
    let key = key_at(ua, start, len);
    let mut slot = slot(key, len);
    loop {
        let Some(entry) = TABLE.get(slot) else {
            return 0;
        };
        if entry.len == 0 {
            // An empty slot: not a word of the table, maybe one of a family.
            return ua.get(start..start + len).map_or(0, by_prefix);
        }
        if entry.key == key && usize::from(entry.len) == len {
            // The key holds all of a word of up to eight bytes; compare the rest of longer ones.
            if len <= 8 || ua.get(start + 8..start + len) == entry.text.get(8..) {
                return entry.seen;
            }
        }
        slot = (slot + 1) & (SLOTS - 1);
    }
}

/// The first (up to) eight bytes of the word at `start`, as a number: one unaligned load where
/// eight bytes remain, masked to the word.
#[inline]
fn key_at(ua: &[u8], start: usize, len: usize) -> u64 {
    let bytes = match ua.get(start..start + 8) {
        Some(eight) => <[u8; 8]>::try_from(eight).map_or(0, u64::from_le_bytes),
        None => return key(ua.get(start..start + len).unwrap_or_default()),
    };
    if len >= 8 {
        bytes
    } else {
        bytes & ((1u64 << (8 * len)) - 1)
    }
}

/// Words that come in families: device models, and names with a version glued on.
fn by_prefix(word: &[u8]) -> Seen {
    let all_upper = |w: &[u8]| w.iter().all(u8::is_ascii_uppercase);
    // By the first byte, so that the many words of no family cost one comparison.
    match word {
        // Fire TV models: AFTB, AFTM, AFTMM, AFTSS, AFTKA, …
        [b'A', b'F', b'T', rest @ ..] if (1..=5).contains(&rest.len()) && all_upper(rest) => {
            FIRE_TV | TV
        }
        [b'A', ..] if word.starts_with(b"Android") => ANDROID, // "Android-4.0.3"
        // Fire tablets: KFTT, KFOT, KFAPWI, KFTHWI, …
        [b'K', b'F', rest @ ..] if (2..=4).contains(&rest.len()) && all_upper(rest) => FIRE_TABLET,
        [b'B', ..] if word.starts_with(b"BlackBerry") => PHONE, // "BlackBerry9800"
        [b'M', ..] if word.starts_with(b"Maple") => TV,         // Samsung's pre-Tizen televisions
        [b'N', ..] if word.starts_with(b"NetCast") => TV,       // LG's pre-webOS televisions
        [b'R', ..] if word.starts_with(b"Roku") => ROKU,        // "Roku4640X"
        [b'w' | b'W', ..] if word.starts_with(b"webOS.TV") || word.starts_with(b"WEBOS") => {
            WEBOS | TV
        }
        [b'P' | b'p', ..]
            if word
                .get(..11)
                .is_some_and(|w| w.eq_ignore_ascii_case(b"playstation")) =>
        {
            PLAYSTATION // "Playstation2", "PLAYSTATION"
        }
        _ => 0,
    }
}

/// The words that matter, and what each says.
const WORDS: &[(&[u8], Seen)] = &[
    // Systems and devices.
    (b"iPhone", IPHONE),
    (b"iPod", IPHONE),
    (b"iPad", IPAD),
    (b"Macintosh", MAC),
    (b"Mac", MAC),
    (b"Windows", WINDOWS),
    (b"Win64", WINDOWS),
    (b"WinNT", WINDOWS),
    (b"Win98", WINDOWS),
    (b"X11", LINUX),
    (b"Linux", LINUX),
    (b"Ubuntu", LINUX),
    (b"Android", ANDROID),
    (b"CrOS", CROS),
    (b"Tizen", TIZEN),
    (b"Web0S", WEBOS | TV), // LG televisions, with a zero
    (b"webOS", WEBOS),      // Palm's phones and tablets
    (b"hpwOS", WEBOS),
    (b"Roku", ROKU),
    (b"AppleTV", APPLE_TV),
    (b"tvOS", APPLE_TV),
    (b"PlayStation", PLAYSTATION),
    (b"PS3", PLAYSTATION),
    (b"PSP", PLAYSTATION),
    (b"Xbox", XBOX),
    (b"Nintendo", NINTENDO),
    (b"NintendoBrowser", NINTENDO),
    // Form factors.
    (b"Mobile", MOBILE),
    (b"Mobi", MOBILE),
    (b"IEMobile", MOBILE | IE),
    (b"Phone", PHONE),
    (b"BB10", PHONE),
    (b"KaiOS", PHONE),
    (b"Tablet", TABLET),
    (b"hp-tablet", TABLET),
    (b"PlayBook", TABLET),
    (b"Kindle", TABLET),
    (b"TV", TV),
    (b"SMART-TV", TV),
    (b"Smart-TV", TV),
    (b"Smart-Tv", TV),
    (b"SmartTV", TV),
    (b"LGSmartTV", TV),
    (b"SmartHub", TV),
    (b"HbbTV", TV),
    (b"GoogleTV", TV),
    (b"AndroidTV", TV),
    (b"BRAVIA", TV),
    (b"Chromecast", TV),
    (b"CrKey", TV | CAST),
    (b"Large", TV), // "Large Screen"
    (b"DTV", TV),
    (b"InettvBrowser", TV),
    (b"CE-HTML", TV),
    (b"ce-html", TV),
    (b"Espial", TV),
    (b"AppleWebKit", WEBKIT),
    (b"AppleWebkit", WEBKIT),
    // Browsers.
    (b"Chrome", CHROME),
    (b"CrMo", CHROME),
    (b"CriOS", CHROME | IOS_APP),
    (b"Chromium", OTHER_CHROMIUM),
    (b"Vivaldi", OTHER_CHROMIUM),
    (b"Whale", OTHER_CHROMIUM),
    (b"QQBrowser", OTHER_CHROMIUM),
    (b"MQQBrowser", OTHER_CHROMIUM),
    (b"Electron", OTHER_CHROMIUM),
    (b"MiuiBrowser", OTHER_CHROMIUM),
    (b"HuaweiBrowser", OTHER_CHROMIUM),
    (b"HeyTapBrowser", OTHER_CHROMIUM),
    (b"VivoBrowser", OTHER_CHROMIUM),
    (b"Puffin", OTHER_CHROMIUM),
    (b"Maxthon", OTHER_CHROMIUM),
    (b"MetaSr", OTHER_CHROMIUM),
    (b"SogouMobileBrowser", OTHER_CHROMIUM),
    (b"Firefox", FIREFOX),
    (b"FxiOS", FIREFOX | IOS_APP),
    (b"Edg", EDGE),
    (b"EdgA", EDGE),
    (b"Edge", EDGE),
    (b"EdgiOS", EDGE | IOS_APP),
    (b"OPR", OPERA),
    (b"OPT", OPERA),
    (b"Opera", OPERA),
    (b"OPiOS", OPERA | IOS_APP),
    (b"SamsungBrowser", SAMSUNG),
    (b"UCBrowser", UC),
    (b"UCWEB", UC),
    (b"YaBrowser", YANDEX),
    (b"YaSearchBrowser", YANDEX),
    (b"Silk", SILK),
    (b"Version", VERSION),
    (b"Safari", SAFARI),
    (b"MSIE", IE),
    (b"Trident", IE),
    (b"wv", WV),
    // In-app browsers.
    (b"FBAN", IN_APP),
    (b"FBAV", IN_APP),
    (b"FB_IAB", IN_APP),
    (b"Instagram", IN_APP),
    (b"GSA", IN_APP), // the Google app
    (b"MicroMessenger", IN_APP),
    (b"Line", IN_APP),
    (b"WebAppManager", IN_APP), // LG's web app runtime
];

/// Slots of the open-addressing table: a power of two, under a quarter full, so a word not in
/// it nearly always meets an empty slot at once.
const SLOTS: usize = 512;
const SLOT_BITS: u32 = SLOTS.trailing_zeros();

#[derive(Clone, Copy)]
struct Entry {
    key: u64,
    /// 0 for an empty slot.
    len: u8,
    seen: Seen,
    text: &'static [u8],
}

static TABLE: [Entry; SLOTS] = {
    assert!(WORDS.len() * 4 < SLOTS);
    let empty = Entry {
        key: 0,
        len: 0,
        seen: 0,
        text: b"",
    };
    let mut table = [empty; SLOTS];
    let mut i = 0;
    while i < WORDS.len() {
        let (text, seen) = WORDS[i];
        assert!(text.len() > 1 && text.len() <= MAX_WORD && !text[0].is_ascii_digit());
        let key = key(text);
        let mut slot = slot(key, text.len());
        while table[slot].len != 0 {
            slot = (slot + 1) & (SLOTS - 1);
        }
        table[slot] = Entry {
            key,
            len: text.len() as u8,
            seen,
            text,
        };
        i += 1;
    }
    table
};

/// The word's first eight bytes, as a number.
const fn key(word: &[u8]) -> u64 {
    let mut key = 0;
    let mut i = 0;
    while i < word.len() && i < 8 {
        key |= (word[i] as u64) << (8 * i);
        i += 1;
    }
    key
}

/// Fibonacci hashing of the key and the length, to a slot.
const fn slot(key: u64, len: usize) -> usize {
    ((key ^ len as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOT_BITS)) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_of_the_table_is_found() {
        for (text, bits) in WORDS {
            // Alone, and followed by more bytes, as keys are read differently at the end.
            assert_eq!(scan(text), *bits, "{}", String::from_utf8_lossy(text));
            let followed = [text, &b" 1234567890"[..]].concat();
            assert_eq!(scan(&followed), *bits, "{}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn words_are_matched_whole() {
        for word in [
            &b"T-Mobile"[..],
            b"Mobil",
            b"iPhone5",
            b"Chromes",
            b"X",
            b"",
            b"SamsungBrowsers",
            b"SamsungBrowsex",
        ] {
            assert_eq!(scan(word), 0, "{}", String::from_utf8_lossy(word));
        }
    }

    fn is_separator(b: u8) -> bool {
        !(b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_')
    }

    #[test]
    fn separators_are_found_eight_at_a_time_as_one_at_a_time() {
        for b in 0..=255u8 {
            for lane in 0..8 {
                let mut bytes = *b"abcdefgh";
                bytes[lane] = b;
                let expected = if is_separator(b) {
                    0x80 << (8 * lane)
                } else {
                    0
                };
                assert_eq!(
                    separators(u64::from_le_bytes(bytes)),
                    expected,
                    "{b:#x} in {lane}"
                );
            }
        }
    }

    #[test]
    fn model_families() {
        assert_eq!(by_prefix(b"AFTMM"), FIRE_TV | TV);
        assert_eq!(by_prefix(b"AFT"), 0);
        assert_eq!(by_prefix(b"AFTmm"), 0);
        assert_eq!(by_prefix(b"KFTHWI"), FIRE_TABLET);
        assert_eq!(by_prefix(b"KFC"), 0);
        assert_eq!(by_prefix(b"PLAYSTATION"), PLAYSTATION);
        assert_eq!(by_prefix(b"Playstation2"), PLAYSTATION);
        assert_eq!(by_prefix(b"Roku4640X"), ROKU);
    }
}
