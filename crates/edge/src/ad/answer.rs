//! The answer to an ad request: its ads as HTML, a script, an image or a click redirect, or
//! all of them in JSON; the fallback when none serves; the user cookie when it is new.

use std::fmt::Write as _;

use bytes::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

use super::{AdRequest, Decided, Served};
use crate::http::{self, Body, response};
use crate::metrics::Outcome;
use crate::query::AdFormat;
use crate::{Edge, Fallback, render, track};

/// The sandbox of a creative's document: scripts and click-through windows, no same origin.
const CREATIVE_SANDBOX_POLICY: &str =
    "sandbox allow-scripts allow-popups allow-popups-to-escape-sandbox";

/// The answer to an ad request: its ads (or the fallback) and the user cookie if one is new.
pub(super) fn finish(
    request: &AdRequest<'_>,
    decided: &Decided<'_>,
    text: &str,
) -> (Response<Body>, Outcome) {
    let edge = request.edge;
    let query = request.query;
    let served = &decided.served;
    let outcome = if served.is_empty() {
        Outcome::Fallback
    } else {
        Outcome::Ok
    };
    let mut answer = if request.json {
        json_answer(served, text)
    } else {
        match served.first() {
            Some(ad) => single_answer(edge, ad, text, query.format, query.element.as_deref()),
            None => fallback(edge, query.format, false),
        }
    };
    if decided.set_cookie
        && let Some(uid) = &decided.user_id
    {
        http::set_user_cookie(edge, &mut answer, uid);
    }
    (answer, outcome)
}

/// An ad request abandoned at its deadline: the fallback.
pub(super) fn late(request: &AdRequest<'_>) -> (Response<Body>, Outcome) {
    let edge = request.edge;
    edge.counters.late.inc();
    let answer = fallback(edge, request.query.format, request.json);
    (answer, Outcome::Late)
}

fn single_answer(
    edge: &Edge,
    ad: &Served<'_>,
    text: &str,
    format: Option<AdFormat>,
    element: Option<&str>,
) -> Response<Body> {
    let html = &text[ad.html.clone()];
    match format.unwrap_or(AdFormat::Html) {
        AdFormat::Html => {
            let mut answer = response(StatusCode::OK, "text/html; charset=utf-8", html.to_owned());
            // The creative is an advertiser's HTML, served from our origin (in `marquee serve`
            // the dashboard's too): the header sandboxes it as the async tag's iframe is, even
            // when the URL is opened on its own, so its scripts run in an opaque origin.
            answer.headers_mut().insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CREATIVE_SANDBOX_POLICY),
            );
            answer
        }
        AdFormat::Js => {
            let js = script(ad, html, element);
            response(StatusCode::OK, "application/javascript; charset=utf-8", js)
        }
        // The image tag cannot fire a beacon: serving the image is the impression, counted by
        // the caller once the answer is made (see `untokened.rs`), as the click is.
        // A bid never answers an image tag (`programmatic::settings`): it has no creative.
        AdFormat::Img => match ad.creative.map(|c| &c.content) {
            Some(marquee_snapshot::Content::Image { image_url, .. }) => http::redirect(image_url),
            _ => http::pixel(),
        },
        AdFormat::Click => match ad.creative {
            Some(creative) => {
                let now = edge.now();
                track::to_landing(edge, &ad.claims, &creative.landing_url, now)
            }
            None => http::not_found(),
        },
    }
}

/// The js tag's answer: a script putting the ad's `html` in a sandboxed iframe, in the element
/// `element` names or before the script itself.
fn script(ad: &Served<'_>, html: &str, element: Option<&str>) -> String {
    let (w, h) = ad.size.map_or((0, 0), |s| (s.w, s.h));
    let mut js = String::with_capacity(html.len() + 512);
    js.push_str("(function(){var h=");
    render::json_string(html, &mut js);
    js.push_str(";var f=document.createElement('iframe');f.setAttribute('sandbox','allow-scripts allow-popups allow-popups-to-escape-sandbox');f.style.border='0';");
    js.push_str(&format!("f.width={w};f.height={h};f.srcdoc=h;var t="));
    match element {
        Some(id) => {
            js.push_str("document.getElementById(");
            render::json_string(id, &mut js);
            js.push_str(");");
        }
        None => js.push_str("null;"),
    }
    js.push_str("var s=document.currentScript;if(t){t.appendChild(f);}else if(s&&s.parentNode){s.parentNode.insertBefore(f,s);}})();");
    js
}

fn json_answer(served: &[Served<'_>], text: &str) -> Response<Body> {
    let mut json = String::with_capacity(text.len() + 128 * served.len() + 16);
    json.push_str("{\"ads\":[");
    for (i, ad) in served.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        let (w, h) = ad.size.map_or((0, 0), |s| (s.w, s.h));
        let _ = write!(
            json,
            "{{\"placement\":{},\"line_item\":{},\"creative\":{},\"width\":{w},\"height\":{h},\"html\":",
            ad.placement, ad.line_item, ad.creative_id
        );
        render::json_string(&text[ad.html.clone()], &mut json);
        json.push('}');
    }
    json.push_str("]}");
    response(StatusCode::OK, "application/json", json)
}

/// What an ad request gets when no ad serves, of the kind it asked for.
pub(super) fn fallback(edge: &Edge, format: Option<AdFormat>, json: bool) -> Response<Body> {
    if json {
        return response(
            StatusCode::OK,
            "application/json",
            Bytes::from_static(b"{\"ads\":[]}"),
        );
    }
    match (&edge.config.fallback, format.unwrap_or(AdFormat::Html)) {
        (Fallback::Passback(url), AdFormat::Html | AdFormat::Img) => http::redirect(url),
        (_, AdFormat::Js) => response(
            StatusCode::OK,
            "application/javascript; charset=utf-8",
            Bytes::new(),
        ),
        (_, AdFormat::Click) => http::not_found(),
        (_, AdFormat::Img) => http::pixel(),
        (Fallback::Empty, AdFormat::Html) => {
            response(StatusCode::OK, "text/html; charset=utf-8", Bytes::new())
        }
    }
}
