//! One imp as the engine sees it: its sizes, formats, deals, media rules and native needs.

use marquee_engine::{Deal, Floor, ImageNeed, MediaRules, NativeNeeds, Slot, TextNeed};
use marquee_model::{Currency, Format, Micros, Size};
use marquee_openrtb::{BidRequest, DataAssetType, ImageAssetType, Imp, MarkupType, NativeRequest};

/// The largest banner a sizeless imp may draw on the web and in apps: the largest IAB display
/// sizes (970×250 billboard, 300×1050 portrait) fit, a screen-sized out-of-home creative
/// (1080×1920) does not.
pub(super) const SIZELESS_MAX: Size = Size { w: 970, h: 1050 };

/// The limit on a sizeless banner's creative: none for out-of-home traffic (a `dooh` object)
/// or an interstitial (the imp asks for the whole screen), [`SIZELESS_MAX`] otherwise.
fn sizeless_max(request: &BidRequest<'_>, imp: &Imp<'_>) -> Option<Size> {
    (request.dooh.is_none() && !imp.instl).then_some(SIZELESS_MAX)
}

/// What the engine needs from one imp, owned here so that [`Slot`] can borrow it.
pub(super) struct ImpView<'r> {
    sizes: Vec<Size>,
    /// When `sizes` is empty, the largest creative the imp takes.
    max_size: Option<Size>,
    pub(super) formats: Vec<Format>,
    pub(super) deals: Vec<Deal<'r>>,
    video_mimes: Vec<&'r str>,
    video_protocols: Vec<u16>,
    audio_mimes: Vec<&'r str>,
    audio_protocols: Vec<u16>,
    pub(super) native: Option<NativeRequest<'r>>,
    native_needs: NativeNeeds,
}

impl<'r> ImpView<'r> {
    pub(super) fn new(request: &BidRequest<'_>, imp: &'r Imp<'_>, seat: &str) -> ImpView<'r> {
        let mut formats = Vec::with_capacity(2);
        if imp.banner.is_some() {
            formats.push(Format::Banner);
        }
        if imp.video.is_some() {
            formats.push(Format::Video);
        }
        if imp.audio.is_some() {
            formats.push(Format::Audio);
        }
        let protocols = |list: &[marquee_openrtb::Protocol]| -> Vec<u16> {
            list.iter()
                .filter_map(|p| u16::try_from(p.0).ok())
                .collect()
        };
        let native = imp
            .native
            .as_ref()
            .and_then(|n| n.parse_request().ok())
            .and_then(|request| Some((native_needs(&request)?, request)));
        let native_needs = native.as_ref().map(|(needs, _)| *needs).unwrap_or_default();
        if native.is_some() {
            formats.push(Format::Native);
        }
        ImpView {
            sizes: imp.banner_sizes().map(|(w, h)| Size { w, h }).collect(),
            max_size: sizeless_max(request, imp),
            formats,
            // A deal whose `wseat` leaves us out is not on offer to us.
            deals: imp
                .pmp
                .iter()
                .flat_map(|p| p.deals.iter())
                .filter(|d| d.wseat.is_empty() || d.wseat.iter().any(|s| s == seat))
                .map(|d| Deal {
                    id: &d.id,
                    floor: floor(d.bidfloor_micros, &d.bidfloorcur),
                })
                .collect(),
            video_mimes: imp
                .video
                .iter()
                .flat_map(|v| v.mimes.iter().map(|m| m.as_ref()))
                .collect(),
            video_protocols: imp
                .video
                .as_ref()
                .map(|v| protocols(&v.protocols))
                .unwrap_or_default(),
            audio_mimes: imp
                .audio
                .iter()
                .flat_map(|a| a.mimes.iter().map(|m| m.as_ref()))
                .collect(),
            audio_protocols: imp
                .audio
                .as_ref()
                .map(|a| protocols(&a.protocols))
                .unwrap_or_default(),
            native: native.map(|(_, request)| request),
            native_needs,
        }
    }

    pub(super) fn slot(&self, imp: &Imp<'_>) -> Slot<'_> {
        let rules = |mimes, protocols, min_duration, max_duration| MediaRules {
            mimes,
            min_duration,
            max_duration,
            durations: &[],
            protocols,
        };
        Slot {
            sizes: &self.sizes,
            max_size: self.max_size,
            formats: &self.formats,
            floor: (imp.bidfloor_micros > 0)
                .then(|| floor(imp.bidfloor_micros, &imp.bidfloorcur))
                .flatten(),
            deals: &self.deals,
            private_auction: imp.is_private_auction(),
            secure: imp.secure,
            video: imp.video.as_ref().map_or_else(MediaRules::default, |v| {
                rules(
                    &self.video_mimes,
                    &self.video_protocols,
                    v.minduration,
                    v.maxduration,
                )
            }),
            audio: imp.audio.as_ref().map_or_else(MediaRules::default, |a| {
                rules(
                    &self.audio_mimes,
                    &self.audio_protocols,
                    a.minduration,
                    a.maxduration,
                )
            }),
            native: self.native_needs,
        }
    }
}

/// The required assets of a native request in the engine's terms; `None` when it requires an
/// asset no creative of ours can fill (a video asset, an unknown data type), so that the imp
/// does not offer native at all.
fn native_needs(request: &NativeRequest<'_>) -> Option<NativeNeeds> {
    let mut needs = NativeNeeds::default();
    let text = |len: Option<u32>| TextNeed {
        max_chars: len.filter(|&l| l > 0),
    };
    for asset in request.assets.iter().filter(|a| a.required) {
        if let Some(title) = &asset.title {
            needs.title = Some(text(Some(title.len)));
        } else if let Some(img) = &asset.img {
            let need = ImageNeed {
                min_w: img.wmin.or(img.w).unwrap_or(0),
                min_h: img.hmin.or(img.h).unwrap_or(0),
            };
            match img.image_type {
                Some(ImageAssetType::ICON) | Some(ImageAssetType::LOGO) => needs.icon = Some(need),
                _ => needs.main_image = Some(need),
            }
        } else if let Some(data) = &asset.data {
            match data.data_type {
                DataAssetType::SPONSORED => needs.sponsored_by = Some(text(data.len)),
                DataAssetType::DESC => needs.body = Some(text(data.len)),
                DataAssetType::CTA_TEXT => needs.call_to_action = Some(text(data.len)),
                _ => return None,
            }
        } else {
            return None;
        }
    }
    Some(needs)
}

fn floor(micros: i64, currency: &str) -> Option<Floor> {
    Some(Floor {
        cpm: Micros(micros),
        currency: Currency::try_from(currency).ok()?,
    })
}

/// The deal id as the imp holds it (the view's copy borrows the same text, with the imp's
/// lifetime here).
pub(super) fn deal_id<'r>(imp: &'r Imp<'_>, id: &str) -> &'r str {
    imp.pmp
        .iter()
        .flat_map(|p| p.deals.iter())
        .find(|d| d.id == id)
        .map_or("", |d| d.id.as_ref())
}

/// The markup type of a creative format.
pub(super) fn mtype(format: Format) -> MarkupType {
    match format {
        Format::Banner => MarkupType::BANNER,
        Format::Video => MarkupType::VIDEO,
        Format::Audio => MarkupType::AUDIO,
        Format::Native => MarkupType::NATIVE,
    }
}
