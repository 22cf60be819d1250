//! A bid's `adm`: banner code filled with a click redirect and an impression beacon (logged
//! with amount 0: an exchange impression spends on billing), the VAST document of video and
//! audio, the native response for native.

use marquee_model::Size;
use marquee_openrtb::{NativeCreative, NativeImage, NativeRequest};
use marquee_snapshot::{Content, CreativeEntry, NativeContent};
use marquee_tracking::Claims;

use super::Auction;
use super::imp::ImpView;
use crate::track;
use crate::worker::Worker;

/// The `adm` of `creative` for the imp `view` shows; `None` when it has none to give (a native
/// request its assets do not satisfy, a VAST creative with neither document nor URL).
pub(super) fn markup(
    auction: &Auction<'_>,
    creative: &CreativeEntry,
    view: &ImpView<'_>,
    claims: &Claims,
    worker: &mut Worker,
) -> Option<String> {
    let edge = auction.edge;
    // Signed only for the markups that carry them: VAST goes out as stored.
    match &creative.content {
        Content::Native(native) => {
            native_markup(auction, native, view.native.as_ref()?, claims, worker)
        }
        Content::Vast { xml: Some(xml), .. } => Some(xml.clone()),
        Content::Vast { url: Some(url), .. } => Some(vast_wrapper(url)),
        Content::Vast { .. } => None,
        Content::Image { .. } | Content::Html { .. } | Content::ThirdPartyTag { .. } => {
            let code = creative.ad_code.as_ref()?;
            let mut out = String::with_capacity(1024);
            let mut digits = itoa::Buffer::new();
            track::fill_tracked(
                edge,
                code,
                claims,
                0,
                &track::FromRequest {
                    cache_buster: track::cache_buster(None, &mut worker.rng, &mut digits),
                    key_values: &[],
                },
                &mut worker.urls,
                &mut out,
            );
            Some(out)
        }
    }
}

/// The native response to `request` for `native`, with its impression tracker and click.
fn native_markup(
    auction: &Auction<'_>,
    native: &NativeContent,
    request: &NativeRequest<'_>,
    claims: &Claims,
    worker: &mut Worker,
) -> Option<String> {
    let (impression_url, click_url) = track::signed_urls(auction.edge, claims, 0, &mut worker.urls);
    fn image(url: Option<&str>, size: Option<Size>) -> Option<NativeImage<'_>> {
        url.map(|url| NativeImage {
            url,
            w: size.map(|s| s.w),
            h: size.map(|s| s.h),
            mime: None,
        })
    }
    let trackers = [impression_url];
    let native_creative = NativeCreative {
        title: Some(&native.title),
        body: Some(&native.body)
            .filter(|b| !b.is_empty())
            .map(|b| b.as_str()),
        sponsored_by: Some(&native.sponsored_by),
        call_to_action: native.call_to_action.as_deref(),
        image: image(native.image_url.as_deref(), native.image_size),
        icon: image(native.icon_url.as_deref(), native.icon_size),
        link_url: click_url,
        click_trackers: &[],
        impression_trackers: &trackers,
    };
    let mut out = String::with_capacity(1024);
    native_creative.write_response(request, &mut out).ok()?;
    Some(out)
}

/// A VAST wrapper pointing at a creative served by URL.
fn vast_wrapper(url: &str) -> String {
    format!(
        "<VAST version=\"3.0\"><Ad><Wrapper><AdSystem>Marquee</AdSystem>\
         <VASTAdTagURI><![CDATA[{}]]></VASTAdTagURI></Wrapper></Ad></VAST>",
        url.replace("]]>", "]]]]><![CDATA[>")
    )
}
