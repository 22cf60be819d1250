//! OpenRTB enumerations as integers with named constants.
//!
//! The spec requires accepting values it does not list (new list entries, exchange-specific
//! values from 500 up), so each list is an open newtype over `i32`, not a Rust `enum`: any
//! integer parses, the constants name the known ones.

/// Declares an open integer enumeration: a `Copy` newtype with a constant per known value.
macro_rules! int_enum {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$value_meta:meta])* $constant:ident = $value:expr ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Deserialize, serde::Serialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub i32);

        impl $name {
            $( $(#[$value_meta])* pub const $constant: Self = Self($value); )*
        }
    };
}

int_enum! {
    /// `at`: auction type (2.6 §3.2.1; 500+ exchange-specific). Default second price.
    AuctionType {
        FIRST_PRICE = 1,
        SECOND_PRICE = 2,
    }
}

impl Default for AuctionType {
    fn default() -> Self {
        Self::SECOND_PRICE
    }
}

int_enum! {
    /// `device.devicetype` (AdCOM Device Types).
    DeviceType {
        MOBILE_TABLET = 1,
        PERSONAL_COMPUTER = 2,
        CONNECTED_TV = 3,
        PHONE = 4,
        TABLET = 5,
        CONNECTED_DEVICE = 6,
        SET_TOP_BOX = 7,
        OOH_DEVICE = 8,
    }
}

int_enum! {
    /// `banner.btype`: banner ad types the publisher blocks.
    BannerAdType {
        XHTML_TEXT = 1,
        XHTML_BANNER = 2,
        JAVASCRIPT = 3,
        IFRAME = 4,
    }
}

int_enum! {
    /// `battr` / `bid.attr`: creative attributes (AdCOM Creative Attributes).
    CreativeAttribute {
        AUDIO_AUTO_PLAY = 1,
        AUDIO_USER_INITIATED = 2,
        EXPANDABLE_AUTOMATIC = 3,
        EXPANDABLE_CLICK = 4,
        EXPANDABLE_ROLLOVER = 5,
        VIDEO_AUTO_PLAY = 6,
        VIDEO_USER_INITIATED = 7,
        POP = 8,
        PROVOCATIVE = 9,
        SHAKY_FLASHING = 10,
        SURVEYS = 11,
        TEXT_ONLY = 12,
        USER_INTERACTIVE = 13,
        DIALOG_OR_ALERT = 14,
        AUDIO_ON_OFF_BUTTON = 15,
        SKIP_BUTTON = 16,
        FLASH = 17,
        RESPONSIVE = 18,
    }
}

int_enum! {
    /// `pos`: placement position on screen.
    AdPosition {
        UNKNOWN = 0,
        ABOVE_THE_FOLD = 1,
        LOCKED = 2,
        BELOW_THE_FOLD = 3,
        HEADER = 4,
        FOOTER = 5,
        SIDEBAR = 6,
        FULL_SCREEN = 7,
    }
}

int_enum! {
    /// `api`: API frameworks the placement supports.
    ApiFramework {
        VPAID_1 = 1,
        VPAID_2 = 2,
        MRAID_1 = 3,
        ORMMA = 4,
        MRAID_2 = 5,
        MRAID_3 = 6,
        OMID_1 = 7,
        SIMID_1 = 8,
        SIMID_1_1 = 9,
    }
}

int_enum! {
    /// `protocols`: video and audio ad protocols (VAST, DAAST).
    Protocol {
        VAST_1 = 1,
        VAST_2 = 2,
        VAST_3 = 3,
        VAST_1_WRAPPER = 4,
        VAST_2_WRAPPER = 5,
        VAST_3_WRAPPER = 6,
        VAST_4 = 7,
        VAST_4_WRAPPER = 8,
        DAAST_1 = 9,
        DAAST_1_WRAPPER = 10,
        VAST_4_1 = 11,
        VAST_4_1_WRAPPER = 12,
        VAST_4_2 = 13,
        VAST_4_2_WRAPPER = 14,
    }
}

int_enum! {
    /// `qagmediarating`: the creative's media rating by the IQG guidelines (AdCOM Media
    /// Ratings).
    MediaRating {
        ALL_AUDIENCES = 1,
        EVERYONE_OVER_12 = 2,
        MATURE_AUDIENCES = 3,
    }
}

int_enum! {
    /// `slotinpod` (2.6): the position in a video or audio ad pod (AdCOM Slot Position in
    /// Pod); in a bid, the only position it is eligible for.
    SlotPositionInPod {
        LAST = -1,
        ANY = 0,
        FIRST = 1,
        FIRST_OR_LAST = 2,
    }
}

int_enum! {
    /// `video.plcmt` (2.6): placement subtype after the updated IAB video guidelines.
    VideoPlcmt {
        INSTREAM = 1,
        ACCOMPANYING_CONTENT = 2,
        INTERSTITIAL = 3,
        NO_CONTENT_STANDALONE = 4,
    }
}

int_enum! {
    /// `video.placement` (2.5, deprecated in 2.6 for `plcmt`).
    VideoPlacement {
        IN_STREAM = 1,
        IN_BANNER = 2,
        IN_ARTICLE = 3,
        IN_FEED = 4,
        INTERSTITIAL_SLIDER_FLOATING = 5,
    }
}

impl VideoPlacement {
    /// The 2.6 `plcmt` closest to this 2.5 placement; used when a request sends only the old
    /// field. In-stream stays in-stream; interstitial, slider and floating players become
    /// interstitial; in-banner, in-article and in-feed players play without video content
    /// around them, which 2.6 calls no-content / standalone. Unknown values map to nothing.
    pub fn to_plcmt(self) -> Option<VideoPlcmt> {
        match self {
            Self::IN_STREAM => Some(VideoPlcmt::INSTREAM),
            Self::INTERSTITIAL_SLIDER_FLOATING => Some(VideoPlcmt::INTERSTITIAL),
            Self::IN_BANNER | Self::IN_ARTICLE | Self::IN_FEED => {
                Some(VideoPlcmt::NO_CONTENT_STANDALONE)
            }
            _ => None,
        }
    }
}

int_enum! {
    /// `video.linearity`.
    Linearity {
        LINEAR = 1,
        NON_LINEAR = 2,
    }
}

int_enum! {
    /// `startdelay`: seconds into the content for a mid-roll, or one of the generic positions.
    StartDelay {
        PRE_ROLL = 0,
        GENERIC_MID_ROLL = -1,
        GENERIC_POST_ROLL = -2,
    }
}

int_enum! {
    /// `geo.type`: where the location came from.
    LocationType {
        GPS = 1,
        IP = 2,
        USER_PROVIDED = 3,
    }
}

int_enum! {
    /// `uids[].atype`: what an extended id identifies.
    AgentType {
        DEVICE = 1,
        PERSON = 3,
    }
}

int_enum! {
    /// `bid.mtype` (2.6): the markup's media type.
    MarkupType {
        BANNER = 1,
        VIDEO = 2,
        AUDIO = 3,
        NATIVE = 4,
    }
}

int_enum! {
    /// `nbr`: why a bidder did not bid (OpenRTB 3.0 list, which 2.6 uses).
    NoBidReason {
        UNKNOWN_ERROR = 0,
        TECHNICAL_ERROR = 1,
        INVALID_REQUEST = 2,
        KNOWN_WEB_CRAWLER = 3,
        SUSPECTED_NON_HUMAN_TRAFFIC = 4,
        CLOUD_DATA_CENTER_OR_PROXY_IP = 5,
        UNSUPPORTED_DEVICE = 6,
        BLOCKED_PUBLISHER_OR_SITE = 7,
        UNMATCHED_USER = 8,
        DAILY_USER_CAP_MET = 9,
        DAILY_DOMAIN_CAP_MET = 10,
        ADS_TXT_AUTHORIZATION_UNAVAILABLE = 11,
        ADS_TXT_AUTHORIZATION_VIOLATION = 12,
        ADS_CERT_AUTHENTICATION_UNAVAILABLE = 13,
        ADS_CERT_AUTHENTICATION_VIOLATION = 14,
        INSUFFICIENT_AUCTION_TIME = 15,
        INCOMPLETE_SUPPLY_CHAIN = 16,
        BLOCKED_SUPPLY_CHAIN_NODE = 17,
    }
}

int_enum! {
    /// `${AUCTION_LOSS}`: why a bid lost (OpenRTB 3.0 list, which 2.6 uses).
    LossReason {
        BID_WON = 0,
        INTERNAL_ERROR = 1,
        IMPRESSION_OPPORTUNITY_EXPIRED = 2,
        INVALID_BID_RESPONSE = 3,
        INVALID_DEAL_ID = 4,
        INVALID_AUCTION_ID = 5,
        INVALID_ADVERTISER_DOMAIN = 6,
        MISSING_MARKUP = 7,
        MISSING_CREATIVE_ID = 8,
        MISSING_BID_PRICE = 9,
        MISSING_MINIMUM_CREATIVE_APPROVAL_DATA = 10,
        BELOW_AUCTION_FLOOR = 100,
        BELOW_DEAL_FLOOR = 101,
        LOST_TO_HIGHER_BID = 102,
        LOST_TO_DEAL_BID = 103,
        BUYER_SEAT_BLOCKED = 104,
        CREATIVE_FILTERED_GENERAL = 200,
        CREATIVE_FILTERED_PENDING = 201,
        CREATIVE_FILTERED_DISAPPROVED = 202,
        CREATIVE_FILTERED_SIZE = 203,
        CREATIVE_FILTERED_FORMAT = 204,
        CREATIVE_FILTERED_ADVERTISER = 205,
        CREATIVE_FILTERED_STORE_ID = 206,
        CREATIVE_FILTERED_NOT_SECURE = 207,
        CREATIVE_FILTERED_LANGUAGE = 208,
        CREATIVE_FILTERED_CATEGORY = 209,
        CREATIVE_FILTERED_ATTRIBUTE = 210,
        CREATIVE_FILTERED_AD_TYPE = 211,
        CREATIVE_FILTERED_ANIMATION_TOO_LONG = 212,
        CREATIVE_FILTERED_NOT_ALLOWED_IN_DEAL = 213,
        CREATIVE_FILTERED_INVALID_SKADNETWORK = 214,
        CREATIVE_FILTERED_APP_BUNDLE = 215,
    }
}

int_enum! {
    /// Native `context`.
    ContextType {
        CONTENT = 1,
        SOCIAL = 2,
        PRODUCT = 3,
    }
}

int_enum! {
    /// Native `plcmttype`.
    NativePlacementType {
        IN_FEED = 1,
        ATOMIC_UNIT = 2,
        OUTSIDE_CORE_CONTENT = 3,
        RECOMMENDATION_WIDGET = 4,
    }
}

int_enum! {
    /// Native `img.type`.
    ImageAssetType {
        ICON = 1,
        /// Deprecated in 1.2; treated like an icon.
        LOGO = 2,
        MAIN = 3,
    }
}

int_enum! {
    /// Native `data.type`.
    DataAssetType {
        SPONSORED = 1,
        DESC = 2,
        RATING = 3,
        LIKES = 4,
        DOWNLOADS = 5,
        PRICE = 6,
        SALE_PRICE = 7,
        PHONE = 8,
        ADDRESS = 9,
        DESC2 = 10,
        DISPLAY_URL = 11,
        CTA_TEXT = 12,
    }
}

int_enum! {
    /// Native `eventtrackers[].event`.
    EventType {
        IMPRESSION = 1,
        VIEWABLE_MRC50 = 2,
        VIEWABLE_MRC100 = 3,
        VIEWABLE_VIDEO50 = 4,
    }
}

int_enum! {
    /// Native `eventtrackers[].methods`.
    EventTrackingMethod {
        IMG = 1,
        JS = 2,
    }
}
