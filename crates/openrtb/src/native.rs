//! OpenRTB Native Ads 1.2: the request carried in `imp.native.request`, whether a creative's
//! assets can satisfy it, and the native response that goes in `bid.adm`.
//!
//! Requests come in the 1.2 form (the object itself) or the 1.0/1.1 form wrapped in
//! `{"native": {...}}`; a response is wrapped the same way as its request was.
//!
//! Its serde structs repeat `request.rs`'s field declarations deliberately: each is the
//! specification's object, field by field, with the attributes serde needs on each.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::de;
use crate::enums::{
    ContextType, DataAssetType, EventTrackingMethod, EventType, ImageAssetType,
    NativePlacementType, Protocol,
};
use crate::error::JsonError;
use crate::json;
use crate::seen::Seen;

/// A native ad request (Native 1.2 §4.1).
#[derive(Clone, Debug, Deserialize)]
pub struct NativeRequest<'a> {
    #[serde(default, borrow, deserialize_with = "de::opt_cow")]
    pub ver: Option<Cow<'a, str>>,
    #[serde(default)]
    pub context: Option<ContextType>,
    #[serde(default)]
    pub contextsubtype: Option<i32>,
    #[serde(default)]
    pub plcmttype: Option<NativePlacementType>,
    /// Identical placements in this imp; default 1.
    #[serde(default = "one", deserialize_with = "count_or_one")]
    pub plcmtcnt: u32,
    #[serde(default, borrow, deserialize_with = "de::nullable")]
    pub assets: Vec<AssetRequest<'a>>,
    #[serde(default, deserialize_with = "de::nullable")]
    pub eventtrackers: Vec<EventTrackerRequest>,
    /// The placement renders its own privacy notice link.
    #[serde(default, deserialize_with = "de::flag")]
    pub privacy: bool,
    /// The request came in the 1.0/1.1 `{"native": …}` wrapper.
    #[serde(skip)]
    pub wrapped: bool,
}

fn one() -> u32 {
    1
}

/// `plcmtcnt`, `null` being the default 1 as when absent.
fn count_or_one<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    Option::<u32>::deserialize(deserializer).map(|n| n.unwrap_or(1))
}

/// One asset the placement shows; exactly one of `title`, `img`, `video`, `data`.
#[derive(Clone, Debug, Deserialize)]
pub struct AssetRequest<'a> {
    pub id: u32,
    #[serde(default, deserialize_with = "de::flag")]
    pub required: bool,
    #[serde(default)]
    pub title: Option<TitleRequest>,
    #[serde(default, borrow)]
    pub img: Option<ImageRequest<'a>>,
    #[serde(default, borrow)]
    pub video: Option<VideoAssetRequest<'a>>,
    #[serde(default)]
    pub data: Option<DataRequest>,
}

#[derive(Clone, Copy, Debug, Deserialize)]
pub struct TitleRequest {
    /// Maximum characters (0: no limit given).
    #[serde(default, deserialize_with = "de::nullable")]
    pub len: u32,
}

// Image and video asset requests share fields with request.rs's `Banner` and `Video` deliberately:
// each is the Native specification's own object (see request.rs's module note).
/// An image asset. A dimension with only `w`/`h` is exact; with `wmin`/`hmin` a minimum.
#[derive(Clone, Debug, Deserialize)]
pub struct ImageRequest<'a> {
    #[serde(default, rename = "type")]
    pub image_type: Option<ImageAssetType>,
    #[serde(default)]
    pub w: Option<u32>,
    #[serde(default)]
    pub h: Option<u32>,
    #[serde(default)]
    pub wmin: Option<u32>,
    #[serde(default)]
    pub hmin: Option<u32>,
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub mimes: Vec<Cow<'a, str>>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct VideoAssetRequest<'a> {
    #[serde(default, borrow, deserialize_with = "de::cow_vec")]
    pub mimes: Vec<Cow<'a, str>>,
    #[serde(default)]
    pub minduration: Option<u32>,
    #[serde(default)]
    pub maxduration: Option<u32>,
    #[serde(default, deserialize_with = "de::nullable")]
    pub protocols: Vec<Protocol>,
}

#[derive(Clone, Copy, Debug, Deserialize)]
pub struct DataRequest {
    #[serde(rename = "type")]
    pub data_type: DataAssetType,
    /// Maximum characters (0 or absent: no limit).
    #[serde(default)]
    pub len: Option<u32>,
}

/// An event the placement can track, and how.
#[derive(Clone, Debug, Deserialize)]
pub struct EventTrackerRequest {
    pub event: EventType,
    #[serde(default, deserialize_with = "de::nullable")]
    pub methods: Vec<EventTrackingMethod>,
}

/// Why a native request string was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NativeError {
    #[error("malformed native request: {0}")]
    Json(#[from] JsonError),
    #[error("native request has no assets")]
    NoAssets,
    #[error("native asset id {0} is used twice")]
    DuplicateAssetId(u32),
    #[error("native asset {0} needs exactly one of title, img, video, data")]
    AssetKind(u32),
}

impl<'a> NativeRequest<'a> {
    /// Parses a native request string, 1.2 or wrapped 1.0/1.1.
    pub fn parse(text: &'a str) -> Result<NativeRequest<'a>, NativeError> {
        #[derive(Deserialize)]
        struct Envelope<'a> {
            #[serde(default, borrow)]
            native: Option<&'a RawValue>,
        }
        let envelope: Envelope<'a> = crate::error::from_slice(text.as_bytes())?;
        let mut request: NativeRequest<'a> = match envelope.native {
            Some(inner) => {
                crate::error::from_slice(inner.get().as_bytes()).map_err(|e| JsonError {
                    path: if e.path == "." {
                        "native".to_owned()
                    } else {
                        format!("native.{}", e.path)
                    },
                    message: e.message,
                })?
            }
            None => crate::error::from_slice(text.as_bytes())?,
        };
        request.wrapped = envelope.native.is_some();
        request.validate()?;
        Ok(request)
    }

    fn validate(&self) -> Result<(), NativeError> {
        if self.assets.is_empty() {
            return Err(NativeError::NoAssets);
        }
        let mut seen = Seen::new();
        for asset in &self.assets {
            if !seen.insert(asset.id) {
                return Err(NativeError::DuplicateAssetId(asset.id));
            }
            let kinds = usize::from(asset.title.is_some())
                + usize::from(asset.img.is_some())
                + usize::from(asset.video.is_some())
                + usize::from(asset.data.is_some());
            if kinds != 1 {
                return Err(NativeError::AssetKind(asset.id));
            }
        }
        Ok(())
    }

    /// Whether impression trackers can go in `eventtrackers` (the placement declared an
    /// image-pixel impression tracker); otherwise they go in the older `imptrackers`.
    fn takes_impression_event_trackers(&self) -> bool {
        self.eventtrackers.iter().any(|t| {
            t.event == EventType::IMPRESSION && t.methods.contains(&EventTrackingMethod::IMG)
        })
    }
}

/// An image of a native creative. Unknown sizes or type are taken to fit (they cannot be
/// checked); give them to have the request's limits applied.
#[derive(Clone, Copy, Debug, Default)]
pub struct NativeImage<'c> {
    pub url: &'c str,
    pub w: Option<u32>,
    pub h: Option<u32>,
    pub mime: Option<&'c str>,
}

// Borrowed optional texts field after field, the same shape as macros.rs's `AuctionMacros` by
// coincidence of purpose (values filled in when known), deliberately not merged.
/// What a native creative can show, borrowed from wherever the creative lives.
#[derive(Clone, Copy, Debug, Default)]
pub struct NativeCreative<'c> {
    pub title: Option<&'c str>,
    /// Body text: data asset `desc` (2).
    pub body: Option<&'c str>,
    /// Data asset `sponsored` (1).
    pub sponsored_by: Option<&'c str>,
    /// Data asset `ctatext` (12).
    pub call_to_action: Option<&'c str>,
    /// Image asset `main` (3).
    pub image: Option<NativeImage<'c>>,
    /// Image asset `icon` (1), also used for the deprecated `logo` (2).
    pub icon: Option<NativeImage<'c>>,
    /// Where a click goes.
    pub link_url: &'c str,
    pub click_trackers: &'c [&'c str],
    /// Image-pixel impression trackers.
    pub impression_trackers: &'c [&'c str],
}

/// A required asset the creative cannot fill.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("native asset {asset_id}: {reason}")]
pub struct NativeMismatch {
    pub asset_id: u32,
    pub reason: MismatchReason,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MismatchReason {
    NoTitle,
    TitleTooLong { chars: usize, max: u32 },
    NoImage(ImageAssetType),
    ImageSize { w: u32, h: u32 },
    ImageMime,
    NoData(DataAssetType),
    DataTooLong { chars: usize, max: u32 },
    VideoAsset,
}

impl fmt::Display for MismatchReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoTitle => f.write_str("the creative has no title"),
            Self::TitleTooLong { chars, max } => {
                write!(f, "title has {chars} characters, at most {max} allowed")
            }
            Self::NoImage(kind) => write!(f, "the creative has no image of type {}", kind.0),
            Self::ImageSize { w, h } => write!(f, "image {w}x{h} does not fit the asset's size"),
            Self::ImageMime => f.write_str("image type not among the asset's mimes"),
            Self::NoData(kind) => write!(f, "the creative has no data of type {}", kind.0),
            Self::DataTooLong { chars, max } => {
                write!(f, "data has {chars} characters, at most {max} allowed")
            }
            Self::VideoAsset => f.write_str("video assets are not supported"),
        }
    }
}

/// The creative's content for one asset.
enum Fill<'c> {
    Title(&'c str),
    Image(NativeImage<'c>),
    Data(&'c str),
}

impl<'c> NativeCreative<'c> {
    /// Whether the creative can fill every required asset of `request`.
    pub fn satisfies(&self, request: &NativeRequest<'_>) -> Result<(), NativeMismatch> {
        for asset in &request.assets {
            if let Err(reason) = self.fill(asset)
                && asset.required
            {
                return Err(NativeMismatch {
                    asset_id: asset.id,
                    reason,
                });
            }
        }
        Ok(())
    }

    /// Writes the native response for `request` (the string for `bid.adm`): every required
    /// asset, and every optional one the creative can fill.
    pub fn write_response(
        &self,
        request: &NativeRequest<'_>,
        out: &mut String,
    ) -> Result<(), NativeMismatch> {
        self.satisfies(request)?;
        if request.wrapped {
            out.push_str("{\"native\":");
        }
        out.push_str("{\"ver\":");
        json::write_str(out, request.ver.as_deref().unwrap_or("1.2"));
        out.push_str(",\"assets\":[");
        let mut first = true;
        for asset in &request.assets {
            let Ok(fill) = self.fill(asset) else { continue };
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str("{\"id\":");
            json::write_u64(out, u64::from(asset.id));
            if asset.required {
                out.push_str(",\"required\":1");
            }
            match fill {
                Fill::Title(text) => {
                    out.push_str(",\"title\":{\"text\":");
                    json::write_str(out, text);
                }
                Fill::Image(image) => {
                    out.push_str(",\"img\":{\"url\":");
                    json::write_str(out, image.url);
                    if let (Some(w), Some(h)) = (image.w, image.h) {
                        out.push_str(",\"w\":");
                        json::write_u64(out, u64::from(w));
                        out.push_str(",\"h\":");
                        json::write_u64(out, u64::from(h));
                    }
                }
                Fill::Data(value) => {
                    out.push_str(",\"data\":{\"value\":");
                    json::write_str(out, value);
                }
            }
            out.push_str("}}");
        }
        out.push_str("],\"link\":{\"url\":");
        json::write_str(out, self.link_url);
        if !self.click_trackers.is_empty() {
            out.push_str(",\"clicktrackers\":");
            json::write_str_array(out, self.click_trackers.iter().copied());
        }
        out.push('}');
        if !self.impression_trackers.is_empty() {
            if request.takes_impression_event_trackers() {
                out.push_str(",\"eventtrackers\":[");
                for (i, url) in self.impression_trackers.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str("{\"event\":1,\"method\":1,\"url\":");
                    json::write_str(out, url);
                    out.push('}');
                }
                out.push(']');
            } else {
                out.push_str(",\"imptrackers\":");
                json::write_str_array(out, self.impression_trackers.iter().copied());
            }
        }
        out.push('}');
        if request.wrapped {
            out.push('}');
        }
        Ok(())
    }

    /// [`Self::write_response`] into a new string.
    pub fn to_response(&self, request: &NativeRequest<'_>) -> Result<String, NativeMismatch> {
        let mut out = String::with_capacity(512);
        self.write_response(request, &mut out)?;
        Ok(out)
    }

    fn fill(&self, asset: &AssetRequest<'_>) -> Result<Fill<'c>, MismatchReason> {
        if let Some(title) = &asset.title {
            let text = self.title.ok_or(MismatchReason::NoTitle)?;
            check_len(text, Some(title.len))
                .map_err(|(chars, max)| MismatchReason::TitleTooLong { chars, max })?;
            return Ok(Fill::Title(text));
        }
        if let Some(img) = &asset.img {
            let kind = img.image_type.unwrap_or(ImageAssetType::MAIN);
            let image = match kind {
                ImageAssetType::ICON | ImageAssetType::LOGO => self.icon,
                _ => self.image,
            }
            .ok_or(MismatchReason::NoImage(kind))?;
            check_image(img, &image)?;
            return Ok(Fill::Image(image));
        }
        if let Some(data) = &asset.data {
            let value = match data.data_type {
                DataAssetType::SPONSORED => self.sponsored_by,
                DataAssetType::DESC => self.body,
                DataAssetType::CTA_TEXT => self.call_to_action,
                _ => None,
            }
            .ok_or(MismatchReason::NoData(data.data_type))?;
            check_len(value, data.len)
                .map_err(|(chars, max)| MismatchReason::DataTooLong { chars, max })?;
            return Ok(Fill::Data(value));
        }
        Err(MismatchReason::VideoAsset)
    }
}

/// `(chars, max)` when `text` is longer than a nonzero `max`.
fn check_len(text: &str, max: Option<u32>) -> Result<(), (usize, u32)> {
    let Some(max) = max.filter(|&m| m > 0) else {
        return Ok(());
    };
    let chars = text.chars().count();
    if chars > max as usize {
        return Err((chars, max));
    }
    Ok(())
}

fn check_image(request: &ImageRequest<'_>, image: &NativeImage<'_>) -> Result<(), MismatchReason> {
    let fits = |actual: Option<u32>, exact: Option<u32>, min: Option<u32>| match actual {
        None => true,
        Some(actual) => match (min.filter(|&m| m > 0), exact.filter(|&e| e > 0)) {
            (Some(min), _) => actual >= min,
            (None, Some(exact)) => actual == exact,
            (None, None) => true,
        },
    };
    if !fits(image.w, request.w, request.wmin) || !fits(image.h, request.h, request.hmin) {
        return Err(MismatchReason::ImageSize {
            w: image.w.unwrap_or(0),
            h: image.h.unwrap_or(0),
        });
    }
    if let Some(mime) = image.mime
        && !request.mimes.is_empty()
        && !request.mimes.iter().any(|m| m.eq_ignore_ascii_case(mime))
    {
        return Err(MismatchReason::ImageMime);
    }
    Ok(())
}
