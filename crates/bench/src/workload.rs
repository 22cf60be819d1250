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
pub enum Kind {
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
    /// GET requests walked from a session model.
    Session(SessionModel),
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
    /// The header lines; the request line is made per request.
    Session {
        model: Box<SessionModel>,
        headers: Vec<u8>,
    },
}

impl Workload {
    /// `host` is the target's authority; `extra` are the user's headers, which win over the
    /// workload's own (such as the OpenRTB content type).
    pub fn new(
        kind: Kind,
        host: HeaderValue,
        extra: &[(HeaderName, HeaderValue)],
        keep_alive: bool,
    ) -> Self {
        let mut map = HeaderMap::new();
        map.insert(HOST, host);
        if !keep_alive {
            map.insert(CONNECTION, HeaderValue::from_static("close"));
        }
        if matches!(kind, Kind::OpenRtb { .. }) {
            map.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            map.insert(
                HeaderName::from_static("x-openrtb-version"),
                HeaderValue::from_static("2.6"),
            );
        }
        for (name, value) in extra {
            map.insert(name.clone(), value.clone());
        }
        let mut headers = Vec::new();
        for (name, value) in &map {
            headers.extend_from_slice(name.as_str().as_bytes());
            headers.extend_from_slice(b": ");
            headers.extend_from_slice(value.as_bytes());
            headers.extend_from_slice(b"\r\n");
        }
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
            Kind::Fixed { method, path, body } => {
                let sends_body = !body.is_empty()
                    || [Method::POST, Method::PUT, Method::PATCH].contains(&method);
                let mut request = head(method.as_str(), &path, sends_body.then_some(body.len()));
                request.extend_from_slice(&body);
                let description = format!("{method} {path} ({} body bytes)", body.len());
                (Prepared::Fixed(Bytes::from(request)), description)
            }
            Kind::OpenRtb { path, templates } => {
                let description = format!("OpenRTB POST {path} ({} templates)", templates.len());
                let prepared = templates
                    .into_iter()
                    .map(|template| (head("POST", &path, Some(template.len())), template))
                    .collect();
                (Prepared::OpenRtb(prepared), description)
            }
            Kind::Session(model) => (
                Prepared::Session {
                    model: Box::new(model),
                    headers,
                },
                "user-session model".into(),
            ),
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
}

/// Builds requests for one connection; each connection has its own, seeded from the run's seed
/// and its index, so a run is reproducible.
#[derive(Debug)]
pub struct Generator {
    workload: Arc<Workload>,
    rng: SmallRng,
    next_template: usize,
    session: SessionCursor,
    scratch: Vec<u8>,
}

#[derive(Debug, Default)]
struct SessionCursor {
    /// The state to visit next; `None` starts a new session with a new user.
    state: Option<State>,
    user: u64,
    placement: usize,
}

impl Generator {
    pub fn new(workload: Arc<Workload>, seed: u64, index: usize) -> Self {
        let rng =
            SmallRng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        Generator {
            workload,
            rng,
            next_template: index,
            session: SessionCursor::default(),
            scratch: Vec::with_capacity(4096),
        }
    }

    /// The next request, whole.
    pub fn next_request(&mut self) -> &[u8] {
        match &self.workload.prepared {
            Prepared::Fixed(request) => request,
            Prepared::OpenRtb(templates) => {
                let (head, template) = &templates[self.next_template % templates.len()];
                self.next_template = self.next_template.wrapping_add(1);
                self.scratch.clear();
                self.scratch.extend_from_slice(head);
                template.fill_into(&mut self.rng, &mut self.scratch);
                &self.scratch
            }
            Prepared::Session { model, headers } => {
                self.scratch.clear();
                self.scratch.extend_from_slice(b"GET ");
                session_path(model, &mut self.session, &mut self.rng, &mut self.scratch);
                self.scratch.extend_from_slice(b" HTTP/1.1\r\n");
                self.scratch.extend_from_slice(headers);
                self.scratch.extend_from_slice(b"\r\n");
                &self.scratch
            }
        }
    }
}

/// Walks the chain to the next state that sends a request and appends its path to `out`.
fn session_path(
    model: &SessionModel,
    cursor: &mut SessionCursor,
    rng: &mut SmallRng,
    out: &mut Vec<u8>,
) {
    loop {
        let state = match cursor.state {
            Some(state) => state,
            None => {
                cursor.user = rng.random();
                model.start()
            }
        };
        if state == State::AdRequest {
            cursor.placement = rng.random_range(0..model.placements().len());
        }
        cursor.state = model.step(state, rng);
        let template = model.path(state);
        if !template.is_empty() {
            let path = expand(
                template,
                &model.placements()[cursor.placement],
                cursor.user,
                rng.random(),
            );
            out.extend_from_slice(path.as_bytes());
            return;
        }
    }
}

fn expand(template: &str, placement: &str, user: u64, cache_buster: u64) -> String {
    template
        .replace("{placement}", placement)
        .replace("{user}", &format!("{user:016x}"))
        .replace("{rand}", &format!("{cache_buster:016x}"))
}

/// A session workload, after checking that every placement makes a valid URI.
pub fn session_workload(model: SessionModel) -> Result<Kind, BenchError> {
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
    Ok(Kind::Session(model))
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
            Kind::Fixed {
                method: Method::POST,
                path: "/bid?x=1".into(),
                body: Bytes::from_static(b"{}"),
            },
            HeaderValue::from_static("127.0.0.1:9"),
            &[(CONTENT_TYPE, HeaderValue::from_static("text/plain"))],
            false,
        ));
        let mut generator = Generator::new(workload, 1, 0);
        let (method, path, headers, body) = parse(generator.next_request());
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
            Kind::OpenRtb {
                path: "/openrtb2/bid".into(),
                templates: vec![template],
            },
            HeaderValue::from_static("localhost"),
            &[],
            true,
        ));
        let mut generator = Generator::new(workload, 1, 0);
        let (_, _, headers, body) = parse(generator.next_request());
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

    #[test]
    fn session_requests_follow_the_model_proportions() {
        let model = SessionModel::default();
        let visits = model.expected_visits().unwrap();
        let workload = Arc::new(Workload::new(
            session_workload(model).unwrap(),
            HeaderValue::from_static("localhost"),
            &[],
            true,
        ));
        let mut generator = Generator::new(workload, 11, 0);
        let (mut ads, mut imps, mut clicks) = (0.0, 0.0, 0.0);
        for _ in 0..100_000 {
            let (method, path, headers, _) = parse(generator.next_request());
            assert_eq!(method, "GET");
            assert_eq!(headers, [("host".to_owned(), "localhost".to_owned())]);
            match path.split('?').next().unwrap() {
                "/ad" => ads += 1.0,
                "/imp" => imps += 1.0,
                "/click" => clicks += 1.0,
                other => panic!("unexpected path {other}"),
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

    #[test]
    fn placements_that_break_paths_are_refused() {
        let model = SessionModel::from_toml("placements = [\"a b\"]").unwrap();
        assert!(session_workload(model).is_err());
    }
}
