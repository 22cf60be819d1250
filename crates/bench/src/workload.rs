//! What the load generator sends, as whole HTTP/1.1 requests in bytes. Everything that can be
//! prepared once is (request line, headers, body, the OpenRTB templates split around their
//! ids), so that making a request costs nothing for a fixed request and one buffer fill for the
//! others.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use hyper::Method;
use hyper::header::{CONNECTION, CONTENT_TYPE, HOST, HeaderMap, HeaderName, HeaderValue};
use rand::rngs::SmallRng;
use rand::{RngExt, SeedableRng};

use crate::BenchError;
use crate::session::{SessionModel, State};

/// Stands in for every id while a template is serialised; the text between two of them is a
/// template segment.
const ID_MARK: &str = "@@marquee-bench-id@@";

/// What to send, before preparation.
#[derive(Debug, Clone)]
pub enum WorkloadKind {
    /// The same request every time.
    Fixed {
        method: Method,
        path: String,
        body: Bytes,
    },
    /// OpenRTB bid requests POSTed to `path`, round-robin over the templates, with a fresh
    /// request id and fresh `imp[].id`s each time.
    OpenRtb {
        path: String,
        templates: Vec<RtbTemplate>,
    },
    /// GET requests walked from a session model: ad requests, then the beacons and clicks
    /// their answers carry.
    Session {
        model: Box<SessionModel>,
        beacons: BeaconTarget,
        /// Per target, the path every request's path is appended to (the target URL's path
        /// without its last `/`; usually empty).
        bases: Vec<String>,
    },
}

/// A workload, prepared.
#[derive(Debug)]
pub struct Workload {
    prepared: Prepared,
    description: String,
}

#[derive(Debug)]
enum Prepared {
    /// The whole request.
    Fixed(Bytes),
    /// Per template: request line and headers including `Content-Length` (ids have a fixed
    /// width, so the length is too), then the template.
    OpenRtb(Vec<(Vec<u8>, RtbTemplate)>),
    /// The header lines per target; the request line is made per request.
    Session {
        model: Box<SessionModel>,
        beacons: BeaconTarget,
        bases: Vec<String>,
        headers: Vec<Vec<u8>>,
    },
}

impl Workload {
    /// `hosts` are the targets' authorities (the fixed and OpenRTB workloads use the first);
    /// `extra` are the user's headers, which win over the workload's own (such as the OpenRTB
    /// content type).
    pub fn new(
        kind: WorkloadKind,
        hosts: &[HeaderValue],
        extra: &[(HeaderName, HeaderValue)],
        keep_alive: bool,
    ) -> Self {
        let openrtb = matches!(kind, WorkloadKind::OpenRtb { .. });
        let header_lines = |host: Option<&HeaderValue>| {
            let mut map = HeaderMap::new();
            if let Some(host) = host {
                map.insert(HOST, host.clone());
            }
            if !keep_alive {
                map.insert(CONNECTION, HeaderValue::from_static("close"));
            }
            if openrtb {
                map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                map.insert(
                    HeaderName::from_static("x-openrtb-version"),
                    HeaderValue::from_static("2.6"),
                );
            }
            for (name, value) in extra {
                map.insert(name.clone(), value.clone());
            }
            let mut lines = Vec::new();
            for (name, value) in &map {
                lines.extend_from_slice(name.as_str().as_bytes());
                lines.extend_from_slice(b": ");
                lines.extend_from_slice(value.as_bytes());
                lines.extend_from_slice(b"\r\n");
            }
            lines
        };
        let headers = header_lines(hosts.first());
        let head = |method: &str, path: &str, length: Option<usize>| {
            let mut head = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
            head.extend_from_slice(&headers);
            if let Some(length) = length {
                head.extend_from_slice(format!("content-length: {length}\r\n").as_bytes());
            }
            head.extend_from_slice(b"\r\n");
            head
        };
        let (prepared, description) = match kind {
            WorkloadKind::Fixed { method, path, body } => {
                let sends_body = !body.is_empty()
                    || [Method::POST, Method::PUT, Method::PATCH].contains(&method);
                let mut request = head(method.as_str(), &path, sends_body.then_some(body.len()));
                request.extend_from_slice(&body);
                let description = format!("{method} {path} ({} body bytes)", body.len());
                (Prepared::Fixed(Bytes::from(request)), description)
            }
            WorkloadKind::OpenRtb { path, templates } => {
                let description = format!("OpenRTB POST {path} ({} templates)", templates.len());
                let prepared = templates
                    .into_iter()
                    .map(|template| (head("POST", &path, Some(template.len())), template))
                    .collect();
                (Prepared::OpenRtb(prepared), description)
            }
            WorkloadKind::Session {
                model,
                beacons,
                bases,
            } => {
                let description = format!(
                    "user sessions: ads from {}, beacons and clicks to the {} target",
                    model.path(State::AdRequest),
                    beacons.name()
                );
                let headers = if hosts.is_empty() {
                    vec![header_lines(None)]
                } else {
                    hosts.iter().map(|host| header_lines(Some(host))).collect()
                };
                (
                    Prepared::Session {
                        model,
                        beacons,
                        bases,
                        headers,
                    },
                    description,
                )
            }
        };
        Workload {
            prepared,
            description,
        }
    }

    /// A short description for reports.
    pub fn describe(&self) -> &str {
        &self.description
    }

    /// Where the user-session workload sends beacons; `None` for the other workloads.
    pub fn beacons(&self) -> Option<BeaconTarget> {
        match &self.prepared {
            Prepared::Session { beacons, .. } => Some(*beacons),
            _ => None,
        }
    }
}

/// Where impression beacons and clicks go when there are several targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum BeaconTarget {
    /// The target that served the ad.
    #[default]
    Same,
    /// Never the target that served the ad: the others in turn.
    Other,
    /// Any target, uniformly at random.
    Random,
}

impl BeaconTarget {
    pub fn name(self) -> &'static str {
        match self {
            BeaconTarget::Same => "same",
            BeaconTarget::Other => "other",
            BeaconTarget::Random => "random",
        }
    }
}

/// The next request of a connection.
#[derive(Debug)]
pub struct Next<'a> {
    /// The whole request.
    pub bytes: &'a [u8],
    /// Index of the target it goes to (always 0 but for the user-session workload).
    pub target: usize,
    /// User-session workload: what the request is.
    pub kind: Option<State>,
    /// User-session workload: impression and click visits passed over on the way to this
    /// request because there was no ad to track.
    pub skipped: u64,
    /// Whether this is the first request of a new session.
    pub new_session: bool,
}

/// What an ad request's answer held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdOutcome {
    /// An ad with its impression beacon URL.
    Ad,
    /// An `ads` list without any ad.
    Empty,
    /// Anything else: another status, not the ad answer's JSON, no beacon URL.
    Unreadable,
}

/// Builds requests for one connection; each connection has its own, seeded from the run's seed
/// and its index, so a run is reproducible.
#[derive(Debug)]
pub struct Generator {
    workload: Arc<Workload>,
    rng: SmallRng,
    /// Picks beacon targets; separate from `rng` so that the sessions walked are the same
    /// whatever `--beacon-target` says.
    route_rng: SmallRng,
    index: usize,
    next_template: usize,
    session: SessionCursor,
    scratch: Vec<u8>,
    /// A session request's path, written before its target (and so its base) is known.
    path: Vec<u8>,
}

#[derive(Debug, Default)]
struct SessionCursor {
    /// The state to visit next; `None` starts a new session with a new user.
    state: Option<State>,
    user: u64,
    placement: usize,
    /// Sessions started by this generator, which pins each to a target in turn.
    sessions: u64,
    /// The session's target: where its page views and ad requests go.
    target: usize,
    /// The tracking URLs of the session's last ad answer, if it had an ad.
    ad: Option<Tracking>,
    /// Turns of `--beacon-target other` over the targets other than the ad's.
    other_turn: usize,
}

/// The path and query of an ad's tracking URLs, and the target that served it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tracking {
    impression: String,
    click: Option<String>,
    served_by: usize,
}

impl Generator {
    pub fn new(workload: Arc<Workload>, seed: u64, index: usize) -> Self {
        let mixed = seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Generator {
            workload,
            rng: SmallRng::seed_from_u64(mixed),
            route_rng: SmallRng::seed_from_u64(mixed ^ 0x5851_F42D_4C95_7F2D),
            index,
            next_template: index,
            session: SessionCursor::default(),
            scratch: Vec::with_capacity(4096),
            path: Vec::with_capacity(256),
        }
    }

    /// Whether answers to this kind of request must be read into a buffer and handed to
    /// [`Generator::answered`] (ad requests, whose tracking URLs the session needs).
    pub fn wants_body(kind: Option<State>) -> bool {
        kind == Some(State::AdRequest)
    }

    /// The next request, whole.
    pub fn next_request(&mut self) -> Next<'_> {
        match &self.workload.prepared {
            Prepared::Fixed(request) => Next {
                bytes: request,
                target: 0,
                kind: None,
                skipped: 0,
                new_session: false,
            },
            Prepared::OpenRtb(templates) => {
                let (head, template) = &templates[self.next_template % templates.len()];
                self.next_template = self.next_template.wrapping_add(1);
                self.scratch.clear();
                self.scratch.extend_from_slice(head);
                template.fill_into(&mut self.rng, &mut self.scratch);
                Next {
                    bytes: &self.scratch,
                    target: 0,
                    kind: None,
                    skipped: 0,
                    new_session: false,
                }
            }
            Prepared::Session {
                model,
                beacons,
                bases,
                headers,
            } => {
                self.scratch.clear();
                self.path.clear();
                let mut walk = Walk {
                    model,
                    beacons: *beacons,
                    targets: headers.len(),
                    index: self.index,
                    cursor: &mut self.session,
                    rng: &mut self.rng,
                    route_rng: &mut self.route_rng,
                };
                let step = walk.next(&mut self.path);
                self.scratch.extend_from_slice(b"GET ");
                if let Some(base) = bases.get(step.target) {
                    self.scratch.extend_from_slice(base.as_bytes());
                }
                self.scratch.extend_from_slice(&self.path);
                self.scratch.extend_from_slice(b" HTTP/1.1\r\n");
                self.scratch.extend_from_slice(&headers[step.target]);
                self.scratch.extend_from_slice(b"\r\n");
                Next {
                    bytes: &self.scratch,
                    target: step.target,
                    kind: Some(step.state),
                    skipped: step.skipped,
                    new_session: step.new_session,
                }
            }
        }
    }

    /// Takes in the answer to an ad request from `target`: its status and body, or `None` when
    /// there was no answer. The session's next impression and click fire this ad's URLs; a
    /// failed or empty answer leaves them nothing to fire.
    pub fn answered(&mut self, target: usize, answer: Option<(u16, &[u8])>) -> AdOutcome {
        let read = match answer {
            Some((200, body)) => read_ad_answer(body),
            _ => Err(AdOutcome::Unreadable),
        };
        match read {
            Ok((impression, click)) => {
                self.session.ad = Some(Tracking {
                    impression,
                    click,
                    served_by: target,
                });
                AdOutcome::Ad
            }
            Err(outcome) => {
                self.session.ad = None;
                outcome
            }
        }
    }
}

/// One step of a session walk, with what it needs borrowed from the generator.
struct Walk<'a> {
    model: &'a SessionModel,
    beacons: BeaconTarget,
    targets: usize,
    index: usize,
    cursor: &'a mut SessionCursor,
    rng: &'a mut SmallRng,
    route_rng: &'a mut SmallRng,
}

/// Where a walk stopped: the state whose request it wrote.
struct Step {
    state: State,
    target: usize,
    skipped: u64,
    new_session: bool,
}

impl Walk<'_> {
    /// Walks the chain to the next state that sends a request and appends its path to `out`.
    fn next(&mut self, out: &mut Vec<u8>) -> Step {
        let (model, cursor) = (self.model, &mut *self.cursor);
        let (mut skipped, mut new_session) = (0, false);
        loop {
            let state = match cursor.state {
                Some(state) => state,
                None => {
                    cursor.user = self.rng.random();
                    // Pinned: a user's ads all come from one target, as a browser keeps to the
                    // edge its DNS gave it; sessions take the targets in turn.
                    cursor.target = usize::try_from(
                        (self.index as u64).wrapping_add(cursor.sessions) % self.targets as u64,
                    )
                    .unwrap_or(0);
                    cursor.sessions += 1;
                    cursor.ad = None;
                    new_session = true;
                    model.start()
                }
            };
            if state == State::AdRequest {
                cursor.placement = self.rng.random_range(0..model.placements().len());
            }
            cursor.state = model.step(state, self.rng);
            match state {
                State::PageView | State::AdRequest => {
                    let template = model.path(state);
                    if template.is_empty() {
                        continue;
                    }
                    let path = expand(
                        template,
                        &model.placements()[cursor.placement],
                        cursor.user,
                        self.rng.random(),
                    );
                    out.extend_from_slice(path.as_bytes());
                    return Step {
                        state,
                        target: cursor.target,
                        skipped,
                        new_session,
                    };
                }
                State::Impression | State::Click => {
                    let Some(ad) = &cursor.ad else {
                        skipped += 1;
                        continue;
                    };
                    let url = if state == State::Impression {
                        Some(&ad.impression)
                    } else {
                        ad.click.as_ref()
                    };
                    let Some(url) = url else {
                        skipped += 1;
                        continue;
                    };
                    out.extend_from_slice(url.as_bytes());
                    let served_by = ad.served_by;
                    let target = match self.beacons {
                        BeaconTarget::Same => served_by,
                        BeaconTarget::Random => self.route_rng.random_range(0..self.targets),
                        BeaconTarget::Other => {
                            // The plan refuses `other` with one target; stay safe anyway.
                            let others = self.targets.saturating_sub(1).max(1);
                            let turn = cursor.other_turn % others;
                            cursor.other_turn = cursor.other_turn.wrapping_add(1);
                            if turn >= served_by && self.targets > 1 {
                                turn + 1
                            } else {
                                turn
                            }
                        }
                    };
                    return Step {
                        state,
                        target,
                        skipped,
                        new_session,
                    };
                }
            }
        }
    }
}

/// The ad answer's first ad's impression beacon and click URLs (path and query), or why there
/// are none.
fn read_ad_answer(body: &[u8]) -> Result<(String, Option<String>), AdOutcome> {
    #[derive(serde::Deserialize)]
    struct Answer {
        ads: Vec<Ad>,
    }
    #[derive(serde::Deserialize)]
    struct Ad {
        html: String,
    }
    let answer: Answer = serde_json::from_slice(body).map_err(|_| AdOutcome::Unreadable)?;
    let ad = answer.ads.first().ok_or(AdOutcome::Empty)?;
    let impression = tracking_path(&ad.html, "/t/i?t=").ok_or(AdOutcome::Unreadable)?;
    Ok((impression, tracking_path(&ad.html, "/t/c?t=")))
}

/// The edge's path and query of the first tracking URL in `html` with `marker` (`/t/i?t=`),
/// up to the quote that ends its attribute. The edge writes it as `{public URL}/t/i?t=TOKEN`;
/// the public URL (everything before the marker, a path prefix of a proxy in front included)
/// is replaced by the target the request goes to, so only the part from the marker on is kept.
fn tracking_path(html: &str, marker: &str) -> Option<String> {
    let at = html.find(marker)?;
    let end = at + html[at..].find(['"', '\''])?;
    let path = &html[at..end];
    // It goes into the request line as it is: anything else would break the request.
    path.bytes()
        .all(|b| b.is_ascii_graphic())
        .then(|| path.to_owned())
}

fn expand(template: &str, placement: &str, user: u64, cache_buster: u64) -> String {
    template
        .replace("{placement}", placement)
        .replace("{user}", &format!("{user:016x}"))
        .replace("{rand}", &format!("{cache_buster:016x}"))
}

/// A session workload, after checking that every placement makes a valid URI. `bases` are the
/// targets' paths that every request path is appended to.
pub fn session_workload(
    model: SessionModel,
    beacons: BeaconTarget,
    bases: Vec<String>,
) -> Result<WorkloadKind, BenchError> {
    for state in State::ALL {
        let template = model.path(state);
        if template.is_empty() {
            continue;
        }
        for placement in model.placements() {
            let path = expand(template, placement, 0, 0);
            if let Err(error) = hyper::Uri::try_from(path.as_str()) {
                return Err(BenchError::Session(format!(
                    "paths.{} with placement {placement:?} gives {path:?}, not a valid path: {error}",
                    state.name()
                )));
            }
        }
    }
    Ok(WorkloadKind::Session {
        model: Box::new(model),
        beacons,
        bases,
    })
}

/// An OpenRTB request split around its ids: `segments[0] id segments[1] id …`.
#[derive(Debug, Clone)]
pub struct RtbTemplate {
    segments: Vec<Bytes>,
    len: usize,
}

impl RtbTemplate {
    /// Prepares one bid request; fails unless it is a JSON object with an `imp` array of
    /// objects.
    pub fn from_json(text: &[u8]) -> Result<Self, String> {
        let mut value: serde_json::Value =
            serde_json::from_slice(text).map_err(|error| format!("not JSON: {error}"))?;
        let object = value
            .as_object_mut()
            .ok_or("not a JSON object, so not a bid request")?;
        object.insert("id".into(), ID_MARK.into());
        let imps = object
            .get_mut("imp")
            .and_then(|imp| imp.as_array_mut())
            .ok_or("no imp array, so not a bid request")?;
        for imp in imps.iter_mut() {
            let imp = imp.as_object_mut().ok_or("imp[] holds a non-object")?;
            imp.insert("id".into(), ID_MARK.into());
        }
        let ids = imps.len() + 1;
        let text = serde_json::to_string(&value).map_err(|error| error.to_string())?;
        let segments: Vec<Bytes> = text
            .split(ID_MARK)
            .map(|segment| Bytes::copy_from_slice(segment.as_bytes()))
            .collect();
        if segments.len() != ids + 1 {
            return Err(format!("the request already contains {ID_MARK:?}"));
        }
        let len = segments.iter().map(Bytes::len).sum::<usize>() + ids * 16;
        Ok(RtbTemplate { segments, len })
    }

    /// Appends the request with fresh 16-hex-digit ids to `out`.
    pub fn fill_into(&self, rng: &mut SmallRng, out: &mut Vec<u8>) {
        for (i, segment) in self.segments.iter().enumerate() {
            if i > 0 {
                // Writing into a Vec cannot fail.
                let _ = write!(out, "{:016x}", rng.random::<u64>());
            }
            out.extend_from_slice(segment);
        }
    }

    /// Body size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// OpenRTB templates read from a file or a folder.
#[derive(Debug)]
pub struct RtbSet {
    pub templates: Vec<RtbTemplate>,
    /// Files of a folder that were not bid requests, with the reason.
    pub skipped: Vec<(PathBuf, String)>,
}

/// Reads one bid request from a file, or every `*.json` bid request of a folder (other files,
/// such as responses in a samples folder, are skipped and listed).
pub fn load_openrtb(path: &Path) -> Result<RtbSet, BenchError> {
    let read = |file: &Path| {
        std::fs::read(file).map_err(|source| BenchError::Read {
            path: file.to_owned(),
            source,
        })
    };
    if !path.is_dir() {
        let template =
            RtbTemplate::from_json(&read(path)?).map_err(|message| BenchError::Input {
                path: path.to_owned(),
                message,
            })?;
        return Ok(RtbSet {
            templates: vec![template],
            skipped: Vec::new(),
        });
    }
    let entries = std::fs::read_dir(path).map_err(|source| BenchError::Read {
        path: path.to_owned(),
        source,
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| BenchError::Read {
            path: path.to_owned(),
            source,
        })?;
        let file = entry.path();
        if file.extension().is_some_and(|ext| ext == "json") && file.is_file() {
            files.push(file);
        }
    }
    files.sort();
    let mut set = RtbSet {
        templates: Vec::new(),
        skipped: Vec::new(),
    };
    for file in files {
        match RtbTemplate::from_json(&read(&file)?) {
            Ok(template) => set.templates.push(template),
            Err(reason) => set.skipped.push((file, reason)),
        }
    }
    if set.templates.is_empty() {
        return Err(BenchError::Input {
            path: path.to_owned(),
            message: "no *.json file in this folder is a bid request".into(),
        });
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(template: &RtbTemplate, rng: &mut SmallRng) -> Vec<u8> {
        let mut out = Vec::new();
        template.fill_into(rng, &mut out);
        out
    }

    /// Method, path, headers and body of a prepared request.
    fn parse(bytes: &[u8]) -> (String, String, Vec<(String, String)>, Vec<u8>) {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut request = httparse::Request::new(&mut headers);
        let httparse::Status::Complete(len) = request.parse(bytes).unwrap() else {
            panic!("incomplete request");
        };
        let headers = request
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_owned(),
                    String::from_utf8(h.value.to_vec()).unwrap(),
                )
            })
            .collect();
        (
            request.method.unwrap().to_owned(),
            request.path.unwrap().to_owned(),
            headers,
            bytes[len..].to_vec(),
        )
    }

    #[test]
    fn fixed_requests_are_prepared_once_with_their_headers() {
        let workload = Arc::new(Workload::new(
            WorkloadKind::Fixed {
                method: Method::POST,
                path: "/bid?x=1".into(),
                body: Bytes::from_static(b"{}"),
            },
            &[HeaderValue::from_static("127.0.0.1:9")],
            &[(CONTENT_TYPE, HeaderValue::from_static("text/plain"))],
            false,
        ));
        let mut generator = Generator::new(workload, 1, 0);
        let (method, path, headers, body) = parse(generator.next_request().bytes);
        assert_eq!((method.as_str(), path.as_str()), ("POST", "/bid?x=1"));
        assert_eq!(body, b"{}");
        for expected in [
            ("host", "127.0.0.1:9"),
            ("connection", "close"),
            ("content-type", "text/plain"),
            ("content-length", "2"),
        ] {
            assert!(
                headers
                    .iter()
                    .any(|(n, v)| (n.as_str(), v.as_str()) == expected),
                "{expected:?} missing in {headers:?}"
            );
        }
    }

    #[test]
    fn openrtb_requests_carry_their_length() {
        let template = RtbTemplate::from_json(br#"{"id":"a","imp":[{"id":"1"}]}"#).unwrap();
        let workload = Arc::new(Workload::new(
            WorkloadKind::OpenRtb {
                path: "/openrtb2/bid".into(),
                templates: vec![template],
            },
            &[HeaderValue::from_static("localhost")],
            &[],
            true,
        ));
        let mut generator = Generator::new(workload, 1, 0);
        let (_, _, headers, body) = parse(generator.next_request().bytes);
        let length = headers.iter().find(|(n, _)| n == "content-length").unwrap();
        assert_eq!(length.1, body.len().to_string());
        assert!(
            headers
                .iter()
                .any(|(n, v)| n == "x-openrtb-version" && v == "2.6")
        );
        serde_json::from_slice::<serde_json::Value>(&body).unwrap();
    }

    #[test]
    fn templates_get_fresh_ids_and_keep_everything_else() {
        let original =
            br#"{"id":"abc","imp":[{"id":"1","banner":{"w":300}},{"id":"2"}],"tmax":120}"#;
        let template = RtbTemplate::from_json(original).unwrap();
        let mut rng = SmallRng::seed_from_u64(3);
        let first: serde_json::Value = serde_json::from_slice(&fill(&template, &mut rng)).unwrap();
        let second: serde_json::Value = serde_json::from_slice(&fill(&template, &mut rng)).unwrap();
        assert_ne!(first["id"], "abc");
        assert_ne!(first["id"], second["id"]);
        assert_ne!(first["imp"][0]["id"], first["imp"][1]["id"]);
        assert_eq!(first["imp"][0]["banner"]["w"], 300);
        assert_eq!(first["tmax"], 120);
        assert_eq!(fill(&template, &mut rng).len(), template.len());
    }

    #[test]
    fn non_requests_are_refused() {
        assert!(RtbTemplate::from_json(br#"{"seatbid":[]}"#).is_err());
        assert!(RtbTemplate::from_json(b"[1]").is_err());
        assert!(RtbTemplate::from_json(b"{").is_err());
    }

    /// An `/ad.json` answer as the edge writes it: the tracking URLs carry the edge's public
    /// URL, quoted with `'` in the click's script and `"` elsewhere.
    fn ad_answer(token: &str) -> Vec<u8> {
        let html = format!(
            "<a href=\"https://ads.example/mq/t/c?t=C{token}\"><img src=\"x.png\"></a>\
             <script src='https://ads.example/x?c=https%3A%2F%2Fads.example%2Fmq%2Ft%2Fc%3Ft%3DC{token}'></script>\
             <img src='https://ads.example/mq/t/i?t=I{token}' width=1 height=1>"
        );
        serde_json::to_vec(&serde_json::json!({"ads": [{
            "placement": 1, "line_item": 2, "creative": 3, "width": 300, "height": 250,
            "html": html,
        }]}))
        .unwrap()
    }

    fn session_generator(
        model: SessionModel,
        beacons: BeaconTarget,
        targets: usize,
        seed: u64,
    ) -> Generator {
        let hosts: Vec<HeaderValue> = (0..targets)
            .map(|t| HeaderValue::from_str(&format!("edge{t}:80")).unwrap())
            .collect();
        let kind = session_workload(model, beacons, vec![String::new(); targets]).unwrap();
        Generator::new(Arc::new(Workload::new(kind, &hosts, &[], true)), seed, 0)
    }

    #[test]
    fn tracking_urls_come_from_the_ad_answer() {
        let (impression, click) = read_ad_answer(&ad_answer("7")).unwrap();
        assert_eq!(impression, "/t/i?t=I7");
        assert_eq!(click.as_deref(), Some("/t/c?t=C7"));
        assert_eq!(read_ad_answer(br#"{"ads":[]}"#), Err(AdOutcome::Empty));
        assert_eq!(read_ad_answer(b"<html>"), Err(AdOutcome::Unreadable));
        assert_eq!(
            read_ad_answer(br#"{"ads":[{"html":"<b>no beacon</b>"}]}"#),
            Err(AdOutcome::Unreadable)
        );
        assert_eq!(
            tracking_path("<img src=\"/t/i?t=X\">", "/t/i?t="),
            Some("/t/i?t=X".into())
        );
        assert_eq!(tracking_path("src=\"http://e/t/i?t=a b\"", "/t/i?t="), None);
    }

    /// Every ad request answered with an ad: impressions and clicks follow the chain's
    /// proportions, and each fires the URLs of the ad answered just before.
    #[test]
    fn session_requests_follow_the_model_proportions() {
        let model = SessionModel::default();
        let visits = model.expected_visits().unwrap();
        let mut generator = session_generator(model, BeaconTarget::Same, 1, 11);
        let (mut ads, mut imps, mut clicks) = (0.0, 0.0, 0.0);
        let mut last_token = None;
        for n in 0..100_000 {
            let next = generator.next_request();
            assert_eq!(next.target, 0);
            let kind = next.kind.unwrap();
            let (method, path, headers, _) = parse(next.bytes);
            assert_eq!(method, "GET");
            assert_eq!(headers, [("host".to_owned(), "edge0:80".to_owned())]);
            match kind {
                State::AdRequest => {
                    assert!(path.starts_with("/ad.json?p="), "{path}");
                    assert!(path.contains("&uid="), "{path}");
                    ads += 1.0;
                    let token = n.to_string();
                    generator.answered(0, Some((200, &ad_answer(&token))));
                    last_token = Some(token);
                }
                State::Impression => {
                    assert_eq!(path, format!("/t/i?t=I{}", last_token.clone().unwrap()));
                    imps += 1.0;
                }
                State::Click => {
                    assert_eq!(path, format!("/t/c?t=C{}", last_token.clone().unwrap()));
                    clicks += 1.0;
                }
                State::PageView => panic!("page views send nothing by default"),
            }
        }
        let total = ads + imps + clicks;
        let sends = visits[1] + visits[2] + visits[3];
        for (measured, expected) in [(ads, visits[1]), (imps, visits[2]), (clicks, visits[3])] {
            let (measured, expected) = (measured / total, expected / sends);
            assert!(
                (measured - expected).abs() < 0.01 + 0.05 * expected,
                "share {measured:.4}, expected {expected:.4}"
            );
        }
    }

    /// Without an ad in hand (empty, failed or unreadable answer) impressions and clicks send
    /// nothing and are counted as skipped; the walk carries on.
    #[test]
    fn no_ad_means_no_beacon() {
        let mut generator = session_generator(SessionModel::default(), BeaconTarget::Same, 1, 3);
        let mut skipped = 0;
        for n in 0..5_000 {
            let next = generator.next_request();
            assert_eq!(next.kind, Some(State::AdRequest));
            skipped += next.skipped;
            let answer: Option<(u16, &[u8])> = match n % 3 {
                0 => Some((200, br#"{"ads":[]}"#)),
                1 => Some((503, b"busy")),
                _ => None,
            };
            let outcome = generator.answered(0, answer);
            assert_ne!(outcome, AdOutcome::Ad);
        }
        assert!(skipped > 3_000, "skipped {skipped}");
    }

    /// Sessions take the targets in turn for their ads; beacons go to the ad's target, never
    /// to it, or anywhere, as asked.
    #[test]
    fn beacons_go_to_the_target_asked_for() {
        let targets = 3;
        for beacons in [
            BeaconTarget::Same,
            BeaconTarget::Other,
            BeaconTarget::Random,
        ] {
            let mut generator = session_generator(SessionModel::default(), beacons, targets, 5);
            let mut ads_at = vec![0u32; targets];
            let mut beacons_at = vec![vec![0u32; targets]; targets];
            let mut session_target = None;
            let mut served_by = 0;
            for _ in 0..30_000 {
                let next = generator.next_request();
                let (target, kind, new_session) = (next.target, next.kind, next.new_session);
                let (_, _, headers, _) = parse(next.bytes);
                assert_eq!(headers[0].1, format!("edge{target}:80"));
                match kind.unwrap() {
                    State::AdRequest => {
                        if !new_session {
                            assert_eq!(Some(target), session_target, "a session keeps its target");
                        }
                        session_target = Some(target);
                        ads_at[target] += 1;
                        served_by = target;
                        generator.answered(target, Some((200, &ad_answer("1"))));
                    }
                    _ => beacons_at[served_by][target] += 1,
                }
            }
            for count in &ads_at {
                assert!(*count > 2_000, "{beacons:?}: ads per target {ads_at:?}");
            }
            for (from, row) in beacons_at.iter().enumerate() {
                let total: u32 = row.iter().sum();
                for (to, &count) in row.iter().enumerate() {
                    let share = f64::from(count) / f64::from(total);
                    let expected = match beacons {
                        BeaconTarget::Same => f64::from(u8::from(from == to)),
                        BeaconTarget::Other if from == to => 0.0,
                        BeaconTarget::Other => 0.5,
                        BeaconTarget::Random => 1.0 / 3.0,
                    };
                    assert!(
                        (share - expected).abs() < 0.03,
                        "{beacons:?}: from {from} to {to}: {share:.3}, expected {expected:.3}"
                    );
                }
            }
        }
    }

    /// A target's path goes before every request's path, the beacon's included (its public URL
    /// replaced by the target).
    #[test]
    fn target_paths_prefix_every_request() {
        let hosts = [HeaderValue::from_static("proxy")];
        let kind = session_workload(
            SessionModel::default(),
            BeaconTarget::Same,
            vec!["/edge".into()],
        )
        .unwrap();
        let mut generator = Generator::new(Arc::new(Workload::new(kind, &hosts, &[], true)), 1, 0);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let next = generator.next_request();
            let kind = next.kind.unwrap();
            let (_, path, _, _) = parse(next.bytes);
            let prefix = if kind == State::AdRequest {
                "/edge/ad.json?p="
            } else {
                "/edge/t/"
            };
            assert!(path.starts_with(prefix), "{path}");
            seen.insert(kind);
            if kind == State::AdRequest {
                generator.answered(0, Some((200, &ad_answer("1"))));
            }
        }
        assert!(seen.contains(&State::Impression));
    }

    #[test]
    fn placements_that_break_paths_are_refused() {
        let model = SessionModel::from_toml("placements = [\"a b\"]").unwrap();
        assert!(session_workload(model, BeaconTarget::Same, vec![String::new()]).is_err());
    }
}
