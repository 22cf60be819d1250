//! GDPR consent: the one rule for whether a request's user may be identified (a first-party id
//! stored or read, a user key for frequency caps, user sync matches, profile segments), shared
//! by the ad path (`gdpr`, `gdpr_consent`) and the OpenRTB bidder (`regs.gdpr`, `user.consent`).
//!
//! Where the GDPR applies, identifying a user needs the IAB TCF v2 consent string (TC string) to
//! record consent to Purpose 1, "store and/or access information on a device". Only what that
//! takes is read from the string's core segment, without allocating: its version and its
//! `PurposesConsent` bits. The core segment (IAB Tech Lab, "Transparency and Consent String
//! with Global Vendor & CMP List Formats", v2) is base64url without padding, read as big-endian
//! bits numbered from the left; its fixed part is:
//!
//! | bits | field |
//! |---|---|
//! | 0–5 | Version (2) |
//! | 6–41, 42–77 | Created, LastUpdated |
//! | 78–89, 90–101, 102–107 | CmpId, CmpVersion, ConsentScreen |
//! | 108–119, 120–131, 132–137 | ConsentLanguage, VendorListVersion, TcfPolicyVersion |
//! | 138, 139 | IsServiceSpecific, UseNonStandardTexts |
//! | 140–151 | SpecialFeatureOptIns |
//! | 152–175 | PurposesConsent (bit 152 is Purpose 1) |
//! | 176–199 | PurposesLITransparency |
//! | 200, 201–212 | PurposeOneTreatment, PublisherCC |
//! | 213–228, 229 | MaxVendorId, IsRangeEncoding (the vendor section follows) |
//!
//! A string is taken as well formed when its core segment (up to the first `.`) is base64url,
//! says version 2 and holds at least that fixed part; anything else is no consent. Vendor
//! consents are not read (Marquee has no Global Vendor List id), nor are legitimate interests
//! (Purpose 1 cannot rest on one), nor `PurposeOneTreatment`: a string whose Purpose 1 bit is 0
//! is no consent, whatever the reason.

/// The version this decoder reads.
const VERSION: u8 = 2;
/// The first bit of `PurposesConsent`.
const PURPOSES_CONSENT: usize = 152;
/// Bits of the core segment's fixed part, through `IsRangeEncoding`.
const CORE_FIXED_BITS: usize = 230;

/// Why a consent string is not a TCF v2 string this decoder reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TcfError {
    #[error("the consent string is empty")]
    Empty,
    #[error("the core segment is not base64url (byte {at})")]
    NotBase64Url { at: usize },
    #[error("TC string version {0}, only version 2 is read")]
    Version(u8),
    #[error("the core segment holds {bits} bits, its fixed part alone takes {CORE_FIXED_BITS}")]
    TooShort { bits: usize },
}

/// The part of a TCF v2 core segment Marquee reads: the purposes consented to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcfCore {
    /// `PurposesConsent`, Purpose 1 in bit 23 down to Purpose 24 in bit 0.
    purposes: u32,
}

impl TcfCore {
    /// Reads the core segment of `text`, a TC string as a CMP writes it.
    pub fn parse(text: &str) -> Result<Self, TcfError> {
        let core = text
            .split_once('.')
            .map_or(text, |(core, _)| core)
            .as_bytes();
        if core.is_empty() {
            return Err(TcfError::Empty);
        }
        if let Some(at) = core.iter().position(|&b| sextet(b).is_none()) {
            return Err(TcfError::NotBase64Url { at });
        }
        let version = bits(core, 0, 6) as u8;
        if version != VERSION {
            return Err(TcfError::Version(version));
        }
        if core.len() * 6 < CORE_FIXED_BITS {
            return Err(TcfError::TooShort {
                bits: core.len() * 6,
            });
        }
        Ok(Self {
            purposes: bits(core, PURPOSES_CONSENT, 24) as u32,
        })
    }

    /// Whether the user consented to `purpose` (1 to 24; any other number is `false`).
    pub fn purpose_consent(&self, purpose: u8) -> bool {
        (1..=24).contains(&purpose) && self.purposes & (1 << (24 - u32::from(purpose))) != 0
    }
}

/// Whether `consent` is a well-formed TCF v2 string recording consent to Purpose 1 (store
/// and/or access information on a device).
pub fn tcf_device_storage_consent(consent: &str) -> bool {
    TcfCore::parse(consent).is_ok_and(|core| core.purpose_consent(1))
}

/// Whether a request's user may be identified, from its GDPR signals: `gdpr` (`Some(true)`:
/// the GDPR applies, `Some(false)`: it does not, `None`: not said) and its consent string.
///
/// - GDPR applies: only with a consent string recording consent to Purpose 1.
/// - GDPR does not apply: yes.
/// - Not said: yes, unless a non-empty consent string came anyway, which then decides as if
///   the GDPR applied (a string recording a refusal is not overruled by a missing flag).
pub fn may_identify(gdpr: Option<bool>, consent: Option<&str>) -> bool {
    let consent = consent.filter(|c| !c.is_empty());
    match gdpr {
        Some(false) => true,
        Some(true) => consent.is_some_and(tcf_device_storage_consent),
        None => consent.is_none_or(tcf_device_storage_consent),
    }
}

/// The 6-bit value of a base64url character.
fn sextet(byte: u8) -> Option<u8> {
    match byte {
        b'A'..=b'Z' => Some(byte - b'A'),
        b'a'..=b'z' => Some(byte - b'a' + 26),
        b'0'..=b'9' => Some(byte - b'0' + 52),
        b'-' => Some(62),
        b'_' => Some(63),
        _ => None,
    }
}

/// Bits `start..start + len` (`len` ≤ 32) of base64url text already checked, big-endian.
fn bits(text: &[u8], start: usize, len: usize) -> u64 {
    let (first, last) = (start / 6, (start + len - 1) / 6);
    let mut value = 0u64;
    for &byte in &text[first..=last] {
        value = value << 6 | u64::from(sextet(byte).unwrap_or(0));
    }
    let below = (last + 1) * 6 - (start + len);
    (value >> below) & ((1 << len) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The service-specific example of the IAB specification (core and publisher TC segments):
    /// CMP 21, consent to purposes 1, 3, 9 and 10.
    const SPEC_EXAMPLE: &str = "CLcVDxRMWfGmWAVAHCENAXCkAKDAADnAABRgA5mdfCKZuYJez-NQm0TBMYA4oCAAGQYIAAAAAAEAIAEgAA.argAC0gAAAAAAAAAAAA";
    /// The core segment of the specification's four-segment example: no purpose consented to.
    const SPEC_NO_PURPOSES: &str = "COw4XqLOw4XqLAAAAAENAXCAAAAAAAAAAAAAAAAAAAAA";
    /// A CMP's "reject all": version 2, DE, every purpose and vendor refused.
    const REJECT_ALL: &str = "CPXxRfAPXxRfAAfKABENB-CgAAAAAAAAAAYgAAAAAAAA";

    /// A core segment of `len` characters, version `version`, consenting to `purposes`.
    fn core(version: u8, purposes: &[u8], len: usize) -> String {
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut bits = vec![false; len * 6];
        for (i, bit) in bits.iter_mut().take(6).enumerate() {
            *bit = version >> (5 - i) & 1 == 1;
        }
        for &purpose in purposes {
            bits[PURPOSES_CONSENT + usize::from(purpose) - 1] = true;
        }
        bits.chunks(6)
            .map(|c| {
                let v = c.iter().fold(0usize, |v, &b| v << 1 | usize::from(b));
                char::from(ALPHABET[v])
            })
            .collect()
    }

    #[test]
    fn reads_the_specifications_example() {
        let core = TcfCore::parse(SPEC_EXAMPLE).expect("well formed");
        let consented: Vec<u8> = (1..=24).filter(|&p| core.purpose_consent(p)).collect();
        assert_eq!(consented, [1, 3, 9, 10]);
        assert!(tcf_device_storage_consent(SPEC_EXAMPLE));
        // The core segment alone says the same.
        assert!(tcf_device_storage_consent(
            SPEC_EXAMPLE.split('.').next().expect("core")
        ));
    }

    #[test]
    fn purpose_one_refused_is_no_consent() {
        for refused in [SPEC_NO_PURPOSES, REJECT_ALL] {
            let core = TcfCore::parse(refused).expect(refused);
            assert!((1..=24).all(|p| !core.purpose_consent(p)), "{refused}");
            assert!(!tcf_device_storage_consent(refused), "{refused}");
        }
        // Every other purpose consented to, Purpose 1 not.
        let all_but_one: Vec<u8> = (2..=24).collect();
        let text = core(2, &all_but_one, 40);
        let parsed = TcfCore::parse(&text).expect("well formed");
        assert!(!parsed.purpose_consent(1) && parsed.purpose_consent(2));
        assert!(parsed.purpose_consent(24) && !parsed.purpose_consent(25));
        assert!(!parsed.purpose_consent(0));
        assert!(!tcf_device_storage_consent(&text));
        // Purpose 1 alone.
        let only_one = core(2, &[1], 40);
        assert!(tcf_device_storage_consent(&only_one));
        assert!(!TcfCore::parse(&only_one).expect("ok").purpose_consent(2));
    }

    #[test]
    fn malformed_strings_are_no_consent() {
        let good = core(2, &[1], 40);
        for (text, error) in [
            ("", TcfError::Empty),
            (".abc", TcfError::Empty),
            ("[GDPR_CONSENT]", TcfError::NotBase64Url { at: 0 }),
            ("${GDPR_CONSENT_123}", TcfError::NotBase64Url { at: 0 }),
            (&format!("{good}="), TcfError::NotBase64Url { at: 40 }),
            (
                &format!("{}+{}", &good[..20], &good[21..]),
                TcfError::NotBase64Url { at: 20 },
            ),
            (
                &format!("{} ", &good[..39]),
                TcfError::NotBase64Url { at: 39 },
            ),
        ] {
            assert_eq!(TcfCore::parse(text), Err(error), "{text:?}");
            assert!(!tcf_device_storage_consent(text), "{text:?}");
        }
        // Later segments are not read: the core decides.
        assert!(tcf_device_storage_consent(&format!("{good}.!!")));
    }

    #[test]
    fn other_versions_are_no_consent() {
        // A TCF v1 string ("BO…"): version 1.
        let v1 = "BOEFEAyOEFEAyAHABDENAI4AAAB9vABAASA";
        assert_eq!(TcfCore::parse(v1), Err(TcfError::Version(1)));
        assert!(!tcf_device_storage_consent(v1));
        for version in [0, 1, 3, 63] {
            let text = core(version, &[1], 40);
            assert_eq!(TcfCore::parse(&text), Err(TcfError::Version(version)));
        }
    }

    #[test]
    fn too_short_is_no_consent() {
        // 38 characters are 228 bits: the purposes are there, not the whole fixed part.
        let short = core(2, &[1], 38);
        assert_eq!(
            TcfCore::parse(&short),
            Err(TcfError::TooShort { bits: 228 })
        );
        assert!(!tcf_device_storage_consent(&short));
        assert!(!tcf_device_storage_consent("C"));
        assert!(!tcf_device_storage_consent(&SPEC_EXAMPLE[..30]));
        // 39 characters hold it.
        assert!(tcf_device_storage_consent(&core(2, &[1], 39)));
    }

    #[test]
    fn the_rule_by_gdpr_flag() {
        let accept = Some(SPEC_EXAMPLE);
        let reject = Some(REJECT_ALL);
        // GDPR applies: consent to Purpose 1 needed.
        assert!(may_identify(Some(true), accept));
        assert!(!may_identify(Some(true), reject));
        assert!(!may_identify(Some(true), Some("")));
        assert!(!may_identify(Some(true), Some("not-a-tc-string")));
        assert!(!may_identify(Some(true), None));
        // Does not apply.
        assert!(may_identify(Some(false), reject));
        assert!(may_identify(Some(false), None));
        // Not said: a string sent anyway decides.
        assert!(may_identify(None, None));
        assert!(may_identify(None, Some("")));
        assert!(may_identify(None, accept));
        assert!(!may_identify(None, reject));
        assert!(!may_identify(None, Some("garbage")));
    }
}
