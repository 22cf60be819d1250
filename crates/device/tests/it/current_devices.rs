//! Current devices and browsers the corpus lacks (its sources' test data predates them): the
//! strings here are written after the formats their makers document (Chromium's reduced
//! User-Agent, Sony's, Microsoft's and Nintendo's consoles, Samsung's and LG's televisions,
//! Amazon's Fire TV), not captured from devices.

use marquee_device::{ClientHints, Device, DeviceType, browser, detect, os};

fn check(cases: &[(&str, DeviceType, Option<&'static str>, Option<&'static str>)]) {
    for (ua, device_type, family, name) in cases {
        assert_eq!(
            detect(ua.as_bytes(), ClientHints::default()),
            Device {
                device_type: Some(*device_type),
                os: *family,
                browser: *name,
            },
            "{ua}"
        );
    }
}

#[test]
fn reduced_user_agents() {
    check(&[
        (
            "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
            DeviceType::Phone,
            Some(os::ANDROID),
            Some(browser::CHROME),
        ),
        (
            "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
            DeviceType::Tablet,
            Some(os::ANDROID),
            Some(browser::CHROME),
        ),
        (
            "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
            DeviceType::Desktop,
            Some(os::MACOS),
            Some(browser::CHROME),
        ),
        (
            "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
            DeviceType::Desktop,
            Some(os::CHROME_OS),
            Some(browser::CHROME),
        ),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.0.0",
            DeviceType::Desktop,
            Some(os::WINDOWS),
            Some(browser::EDGE),
        ),
        (
            "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36",
            DeviceType::Phone,
            Some(os::ANDROID),
            Some(browser::SAMSUNG_INTERNET),
        ),
        (
            "Mozilla/5.0 (Android 14; Mobile; rv:125.0) Gecko/125.0 Firefox/125.0",
            DeviceType::Phone,
            Some(os::ANDROID),
            Some(browser::FIREFOX),
        ),
    ]);
}

#[test]
fn ipados_safari_asking_for_desktop_pages_is_a_mac() {
    // What a User-Agent (and, Safari sending no client hints, a request) can tell.
    check(&[(
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
        DeviceType::Desktop,
        Some(os::MACOS),
        Some(browser::SAFARI),
    )]);
}

#[test]
fn current_consoles() {
    check(&[
        (
            "Mozilla/5.0 (PlayStation; PlayStation 5/2.26) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.0 Safari/605.1.15",
            DeviceType::Console,
            Some(os::PLAYSTATION),
            None,
        ),
        (
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64; Xbox; Xbox Series X) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.0.0",
            DeviceType::Console,
            Some(os::XBOX),
            Some(browser::EDGE),
        ),
        (
            "Mozilla/5.0 (Nintendo Switch; WifiWebAuthApplet) AppleWebKit/606.4 (KHTML, like Gecko) NF/6.0.1.15.4 NintendoBrowser/5.1.0.20393",
            DeviceType::Console,
            Some(os::NINTENDO),
            None,
        ),
    ]);
}

#[test]
fn current_televisions() {
    check(&[
        (
            "Mozilla/5.0 (SMART-TV; LINUX; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) 76.0.3809.146/6.0 TV Safari/537.36",
            DeviceType::Ctv,
            Some(os::TIZEN),
            None,
        ),
        (
            "Mozilla/5.0 (SMART-TV; LINUX; Tizen 5.0) AppleWebKit/537.36 (KHTML, like Gecko) Version/5.0 TV Chrome/63.0.3239.84 Safari/537.36",
            DeviceType::Ctv,
            Some(os::TIZEN),
            Some(browser::CHROME),
        ),
        (
            "Mozilla/5.0 (Web0S; Linux/SmartTV) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/87.0.4280.88 Safari/537.36 WebAppManager",
            DeviceType::Ctv,
            Some(os::WEBOS),
            Some(browser::WEBVIEW),
        ),
        (
            "Mozilla/5.0 (Linux; Android 9; AFTMM Build/PS7652.3564N) AppleWebKit/537.36 (KHTML, like Gecko) Silk/119.2.22 like Chrome/119.0.6045.193 Safari/537.36",
            DeviceType::Ctv,
            Some(os::FIRE_OS),
            Some(browser::SILK),
        ),
        (
            "Mozilla/5.0 (Linux; Android 11; SHIELD Android TV Build/RQ1A.210105.003; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/124.0.0.0 Safari/537.36",
            DeviceType::Ctv,
            Some(os::ANDROID),
            Some(browser::WEBVIEW),
        ),
        (
            "Mozilla/5.0 (Linux; Android 10; BRAVIA 4K VH2 Build/QTG3.200305.006.S292) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
            DeviceType::Ctv,
            Some(os::ANDROID),
            Some(browser::CHROME),
        ),
        (
            "AppleCoreMedia/1.0.0.21K69 (Apple TV; U; CPU OS 17_0 like Mac OS X; en_us)",
            DeviceType::Ctv,
            Some(os::TVOS),
            None,
        ),
        (
            "Roku/DVP-13.0 (13.0.0.4156-46)",
            DeviceType::Ctv,
            Some(os::ROKU_OS),
            None,
        ),
    ]);
}
