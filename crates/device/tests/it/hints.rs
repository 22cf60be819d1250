//! Client hints: where they win over the User-Agent, where they do not, and that a value that
//! does not parse leaves the answer to the User-Agent.

use marquee_device::{ClientHints, Device, DeviceType, browser, detect, os};

/// Chrome on Android since User-Agent reduction: the model is always "K", the version "10".
const CHROME_ANDROID_PHONE: &str = "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36";
/// Chrome on a large Android tablet, which asks for desktop pages as Linux.
const CHROME_DESKTOP_MODE: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";
const CHROME_WINDOWS: &str = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36";
const FIRE_TV: &str = "Mozilla/5.0 (Linux; Android 9; AFTMM Build/PS7233; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/124.0.0.0 Mobile Safari/537.36";

const CHROME_BRANDS: &str = r#""Chromium";v="124", "Google Chrome";v="124", "Not-A.Brand";v="99""#;

fn hints<'a>(
    mobile: Option<&'a str>,
    platform: Option<&'a str>,
    brands: Option<&'a str>,
) -> ClientHints<'a> {
    ClientHints {
        mobile,
        platform,
        brands,
    }
}

fn brands(value: &str) -> Option<&'static str> {
    detect(b"", hints(None, None, Some(value))).browser
}

#[test]
fn hints_agree_with_the_user_agent_of_chrome_on_android() {
    let found = detect(
        CHROME_ANDROID_PHONE.as_bytes(),
        hints(Some("?1"), Some("\"Android\""), Some(CHROME_BRANDS)),
    );
    assert_eq!(
        found,
        Device {
            device_type: Some(DeviceType::Phone),
            os: Some(os::ANDROID),
            browser: Some(browser::CHROME),
        }
    );
}

#[test]
fn a_tablet_asking_for_desktop_pages_is_told_by_its_hints() {
    let ua_only = detect(CHROME_DESKTOP_MODE.as_bytes(), ClientHints::default());
    assert_eq!(ua_only.device_type, Some(DeviceType::Desktop));
    assert_eq!(ua_only.os, Some(os::LINUX));

    let found = detect(
        CHROME_DESKTOP_MODE.as_bytes(),
        hints(Some("?0"), Some("\"Android\""), Some(CHROME_BRANDS)),
    );
    assert_eq!(found.device_type, Some(DeviceType::Tablet));
    assert_eq!(found.os, Some(os::ANDROID));
}

#[test]
fn the_mobile_hint_makes_a_phone_and_a_desktop_platform_a_desktop() {
    let phone = detect(
        CHROME_DESKTOP_MODE.as_bytes(),
        hints(Some("?1"), None, None),
    );
    assert_eq!(phone.device_type, Some(DeviceType::Phone));
    let desktop = detect(
        CHROME_WINDOWS.as_bytes(),
        hints(Some("?0"), Some("\"Windows\""), None),
    );
    assert_eq!(desktop.device_type, Some(DeviceType::Desktop));
    assert_eq!(desktop.os, Some(os::WINDOWS));
    // "Not mobile" alone says nothing about which kind of larger device.
    let unknown = detect(
        CHROME_ANDROID_PHONE.as_bytes(),
        hints(Some("?0"), None, None),
    );
    assert_eq!(unknown.device_type, Some(DeviceType::Phone));
}

#[test]
fn the_platform_hint_names_the_system() {
    for (platform, family) in [
        ("\"Windows\"", os::WINDOWS),
        ("\"macOS\"", os::MACOS),
        ("\"Linux\"", os::LINUX),
        ("\"Chrome OS\"", os::CHROME_OS),
        ("\"Chromium OS\"", os::CHROME_OS),
        ("\"Android\"", os::ANDROID),
        ("\"iOS\"", os::IOS),
    ] {
        let found = detect(CHROME_WINDOWS.as_bytes(), hints(None, Some(platform), None));
        assert_eq!(found.os, Some(family), "{platform}");
    }
}

#[test]
fn televisions_keep_what_their_user_agent_says_but_for_the_browser() {
    let found = detect(
        FIRE_TV.as_bytes(),
        hints(Some("?0"), Some("\"Android\""), Some(CHROME_BRANDS)),
    );
    assert_eq!(
        found,
        Device {
            device_type: Some(DeviceType::Ctv),
            os: Some(os::FIRE_OS),
            browser: Some(browser::CHROME),
        }
    );
}

#[test]
fn fire_os_is_more_precise_than_the_android_it_hints() {
    let silk = "Mozilla/5.0 (Linux; Android 9; KFTRWI) AppleWebKit/537.36 (KHTML, like Gecko) Silk/124.1.1 like Chrome/124.0.0.0 Safari/537.36";
    let found = detect(
        silk.as_bytes(),
        hints(
            Some("?0"),
            Some("\"Android\""),
            Some(r#""Chromium";v="124""#),
        ),
    );
    assert_eq!(
        found,
        Device {
            device_type: Some(DeviceType::Tablet),
            os: Some(os::FIRE_OS),
            // "Chromium" alone is less precise than the User-Agent's Silk.
            browser: Some(browser::SILK),
        }
    );
}

#[test]
fn a_specific_brand_wins_over_chrome_and_chromium_in_any_order() {
    for (list, expected) in [
        (CHROME_BRANDS, browser::CHROME),
        (
            r#""Microsoft Edge";v="124", "Chromium";v="124", "Not-A.Brand";v="99""#,
            browser::EDGE,
        ),
        (
            r#""Not)A;Brand";v="99", "Opera";v="110", "Chromium";v="124""#,
            browser::OPERA,
        ),
        (
            r#""Chromium";v="124", "Samsung Internet";v="25", "Not A(Brand";v="8""#,
            browser::SAMSUNG_INTERNET,
        ),
        (
            r#""Google Chrome";v="124", "Chromium";v="124", "YaBrowser";v="24""#,
            browser::YANDEX,
        ),
        (
            r#""Android WebView";v="124", "Chromium";v="124", "Not-A.Brand";v="99""#,
            browser::WEBVIEW,
        ),
        // Brave, Vivaldi and Chromium itself list no brand of their own we know.
        (
            r#""Brave";v="124", "Chromium";v="124", "Not-A.Brand";v="99""#,
            browser::CHROMIUM,
        ),
    ] {
        assert_eq!(brands(list), Some(expected), "{list}");
    }
}

#[test]
fn grease_brands_are_ignored_whatever_their_punctuation() {
    for grease in [
        "Not-A.Brand",
        "Not)A;Brand",
        "Not A(Brand",
        "Not/A)Brand",
        "Not_A Brand",
        "Not;A=Brand",
        "Not.A/Brand",
        "Not:A-Brand",
        "Not?A_Brand",
        "Not,A Brand",
    ] {
        let list = format!(r#""{grease}";v="8", "Chromium";v="124", "Google Chrome";v="124""#);
        assert_eq!(brands(&list), Some(browser::CHROME), "{list}");
        let alone = format!(r#""{grease}";v="99""#);
        assert_eq!(brands(&alone), None, "{alone}");
    }
}

#[test]
fn structured_header_details_are_read_as_specified() {
    // No spaces, tabs, extra parameters, a parameter without a value, escapes in a GREASE name.
    for list in [
        r#""Google Chrome";v="124","Chromium";v="124""#,
        "\"Google Chrome\";v=\"124\",\t\"Chromium\";v=\"124\"",
        r#""Google Chrome";v="124";x=1;y, "Chromium";v="124""#,
        r#""Not\"A\\Brand";v="99", "Google Chrome";v="124""#,
        r#"  "Google Chrome";v="124"  "#,
    ] {
        assert_eq!(brands(list), Some(browser::CHROME), "{list}");
    }
}

#[test]
fn malformed_hints_are_ignored_and_the_user_agent_answers() {
    // Each would say Edge, Windows or phone if it were read leniently.
    let samsung = "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Safari/537.36";
    let from_ua = detect(samsung.as_bytes(), ClientHints::default());
    assert_eq!(
        from_ua,
        Device {
            device_type: Some(DeviceType::Tablet),
            os: Some(os::ANDROID),
            browser: Some(browser::SAMSUNG_INTERNET),
        }
    );
    let lists = [
        "",
        ",",
        "\"",
        "Microsoft Edge",
        "(\"Microsoft Edge\")",
        "\"Microsoft Edge",
        "\"Microsoft Edge\";v=\"124",
        "\"Microsoft Edge\";v=\"124\",",
        "\"Microsoft Edge\";v=\"124\", Chromium",
        "\"Microsoft Edge\";v=\"124\", \"Chromium",
        "\"Microsoft Edge\";v=\"124\", \"Bad \\escape\";v=\"1\"",
        "\u{0}\u{1}\u{7f}\"Microsoft Edge\"",
        "ü\"Microsoft Edge\"",
    ];
    let platforms = [
        "",
        "Windows",
        "\"Windows",
        "Windows\"",
        "'Windows'",
        "\"windows\"",
        "\"Fuchsia\"",
        "\"\"",
    ];
    let mobiles = ["", "?", "1", "?2", "?11", "yes", "\"?1\""];
    for brands in lists {
        for platform in platforms {
            for mobile in mobiles {
                let found = detect(
                    samsung.as_bytes(),
                    hints(Some(mobile), Some(platform), Some(brands)),
                );
                assert_eq!(found, from_ua, "{mobile:?} {platform:?} {brands:?}");
            }
        }
    }
    let long = format!("{}\"Microsoft Edge\";v=\"124\"", " ".repeat(2000));
    assert_eq!(brands(&long), None);
}

#[test]
fn hints_alone_still_say_what_they_know() {
    let found = detect(
        b"",
        hints(Some("?0"), Some("\"macOS\""), Some(CHROME_BRANDS)),
    );
    assert_eq!(
        found,
        Device {
            device_type: Some(DeviceType::Desktop),
            os: Some(os::MACOS),
            browser: Some(browser::CHROME),
        }
    );
    assert_eq!(detect(b"", ClientHints::default()), Device::default());
}
