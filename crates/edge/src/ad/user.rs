//! Who the visitor of an ad request is to us: the user id it brings (`uid`, else our cookie),
//! or a new one where cookies are allowed, and only with consent.

use hyper::header::HeaderMap;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::Edge;
use crate::http::{self, USER_COOKIE};
use crate::query::AdQuery;

/// The user id for this request, and whether a cookie must be set for it.
pub(super) fn identify(
    edge: &Edge,
    query: &AdQuery<'_>,
    headers: &HeaderMap,
    rng: &mut Xoshiro256PlusPlus,
) -> (Option<String>, bool) {
    if !query.may_identify() {
        return (None, false);
    }
    if let Some(uid) = known(query, headers) {
        return (Some(uid.to_owned()), false);
    }
    if !edge.config.cookies {
        return (None, false);
    }
    (Some(http::new_user_id(rng)), true)
}

/// The user id the request brings (`uid`, else the cookie), when it may be used.
pub(super) fn known<'q>(query: &'q AdQuery<'_>, headers: &'q HeaderMap) -> Option<&'q str> {
    if !query.may_identify() {
        return None;
    }
    query
        .user_id
        .as_deref()
        .filter(|u| !u.is_empty() && u.len() <= 128)
        .or_else(|| http::cookie(headers, USER_COOKIE))
}
