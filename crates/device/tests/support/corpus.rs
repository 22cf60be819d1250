//! Reading `tests/corpus.tsv` (its header describes the format), for the tests and the bench.

use marquee_device::{DeviceType, browser, os};

pub struct Case {
    pub line: usize,
    pub device_type: Option<DeviceType>,
    pub os: Option<&'static str>,
    pub browser: Option<&'static str>,
    pub user_agent: &'static str,
}

pub fn cases() -> Vec<Case> {
    let text = include_str!("../corpus.tsv");
    let mut cases = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&'static str> = line.splitn(5, '\t').collect();
        assert_eq!(fields.len(), 5, "line {}: five tab-separated fields", i + 1);
        cases.push(Case {
            line: i + 1,
            device_type: device_type(fields[0], i + 1),
            os: family(fields[1], &os::ALL, i + 1),
            browser: family(fields[2], &browser::ALL, i + 1),
            user_agent: fields[4],
        });
    }
    cases
}

fn family(value: &str, set: &[&'static str], line: usize) -> Option<&'static str> {
    (value != "-").then(|| {
        *set.iter()
            .find(|known| **known == value)
            .unwrap_or_else(|| panic!("line {line}: {value:?} is not a family"))
    })
}

fn device_type(value: &str, line: usize) -> Option<DeviceType> {
    Some(match value {
        "-" => return None,
        "desktop" => DeviceType::Desktop,
        "phone" => DeviceType::Phone,
        "tablet" => DeviceType::Tablet,
        "ctv" => DeviceType::Ctv,
        "console" => DeviceType::Console,
        "other" => DeviceType::Other,
        _ => panic!("line {line}: {value:?} is not a device type"),
    })
}
