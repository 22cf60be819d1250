//! Reading form posts: `application/x-www-form-urlencoded`, or `multipart/form-data` for the
//! creative form's image upload (a small parser: text parts and at most one file part).

use axum::http::{HeaderMap, header};

/// Most bytes a form post may carry (an uploaded image included).
pub const MAX_FORM_BYTES: usize = 2 << 20;

/// Longest multipart boundary: RFC 2046's limit, which also bounds the cost of searching for it.
const MAX_BOUNDARY_BYTES: usize = 70;

/// A file sent with a form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    pub field: String,
    /// The name the browser gave the file (empty if none), for messages about it.
    pub filename: String,
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// The fields of a posted form, in order; a name may repeat (check boxes, rows).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FormData {
    pub fields: Vec<(String, String)>,
    pub upload: Option<Upload>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormError {
    #[error("the form is larger than {MAX_FORM_BYTES} bytes")]
    TooLarge,
    #[error("the form could not be read: {0}")]
    Malformed(String),
}

impl FormData {
    /// The first value of `name`, trimmed; empty if absent.
    pub fn get(&self, name: &str) -> &str {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map_or("", |(_, value)| value.trim())
    }

    /// Every value of `name`, trimmed, in order.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.fields
            .iter()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.trim())
            .collect()
    }

    pub fn parse(headers: &HeaderMap, body: &[u8]) -> Result<FormData, FormError> {
        if body.len() > MAX_FORM_BYTES {
            return Err(FormError::TooLarge);
        }
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        match boundary(content_type) {
            Some(boundary) => parse_multipart(body, &boundary),
            None => serde_urlencoded::from_bytes::<Vec<(String, String)>>(body)
                .map(|fields| FormData {
                    fields,
                    upload: None,
                })
                .map_err(|e| FormError::Malformed(e.to_string())),
        }
    }
}

fn boundary(content_type: &str) -> Option<String> {
    let mut parts = content_type.split(';');
    if !parts
        .next()?
        .trim()
        .eq_ignore_ascii_case("multipart/form-data")
    {
        return None;
    }
    parts
        .filter_map(|p| p.trim().split_once('='))
        .find(|(k, _)| k.eq_ignore_ascii_case("boundary"))
        .map(|(_, v)| v.trim_matches('"').to_owned())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack, needle)
}

/// A parameter of a `Content-Disposition` header, such as `name="x"`.
fn disposition_param<'a>(disposition: &'a str, param: &str) -> Option<&'a str> {
    disposition
        .split(';')
        .filter_map(|p| p.trim().split_once('='))
        .find(|(k, _)| k.eq_ignore_ascii_case(param))
        .map(|(_, v)| v.trim_matches('"'))
}

fn parse_multipart(body: &[u8], boundary: &str) -> Result<FormData, FormError> {
    let malformed = |what: &str| FormError::Malformed(format!("multipart body: {what}"));
    if !(1..=MAX_BOUNDARY_BYTES).contains(&boundary.len()) {
        return Err(malformed(&format!(
            "the boundary must be 1 to {MAX_BOUNDARY_BYTES} bytes long, not {}",
            boundary.len()
        )));
    }
    let delimiter = format!("--{boundary}");
    let mut rest = &body[find(body, delimiter.as_bytes())
        .ok_or_else(|| malformed("no boundary"))?
        + delimiter.len()..];
    let mut form = FormData::default();
    let next_delimiter = format!("\r\n--{boundary}");
    loop {
        if rest.starts_with(b"--") {
            return Ok(form);
        }
        rest = rest
            .strip_prefix(b"\r\n")
            .ok_or_else(|| malformed("a boundary is not followed by a line break"))?;
        let head_end = find(rest, b"\r\n\r\n").ok_or_else(|| malformed("a part has no headers"))?;
        let head = std::str::from_utf8(&rest[..head_end])
            .map_err(|_| malformed("part headers are not UTF-8"))?;
        let content = &rest[head_end + 4..];
        let end = find(content, next_delimiter.as_bytes())
            .ok_or_else(|| malformed("the last part is not closed"))?;
        let value = &content[..end];
        rest = &content[end + next_delimiter.len()..];

        let mut name = None;
        let mut filename = None;
        let mut content_type = String::from("application/octet-stream");
        for line in head.split("\r\n") {
            let Some((key, v)) = line.split_once(':') else {
                continue;
            };
            if key.eq_ignore_ascii_case("content-disposition") {
                name = disposition_param(v, "name").map(str::to_owned);
                filename = disposition_param(v, "filename").map(str::to_owned);
            } else if key.eq_ignore_ascii_case("content-type") {
                v.trim().clone_into(&mut content_type);
            }
        }
        let name = name.ok_or_else(|| malformed("a part has no name"))?;
        if let Some(filename) = filename {
            if !value.is_empty() {
                form.upload = Some(Upload {
                    field: name,
                    filename,
                    content_type,
                    bytes: value.to_vec(),
                });
            }
            continue;
        }
        let text = String::from_utf8(value.to_vec())
            .map_err(|_| malformed("a text field is not UTF-8"))?;
        form.fields.push((name, text));
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(content_type: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        headers
    }

    #[test]
    fn url_encoded_fields_keep_order_and_repeats() {
        let form = FormData::parse(
            &headers("application/x-www-form-urlencoded"),
            b"a=1&b=x+y&a=%32&c=",
        )
        .unwrap();
        assert_eq!(form.get("b"), "x y");
        assert_eq!(form.all("a"), ["1", "2"]);
        assert_eq!(form.get("c"), "");
        assert_eq!(form.get("missing"), "");
    }

    #[test]
    fn multipart_reads_text_parts_and_one_file() {
        let body = b"--XX\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nBanner\r\n\
--XX\r\nContent-Disposition: form-data; name=\"image_file\"; filename=\"a.png\"\r\n\
Content-Type: image/png\r\n\r\n\x89PNG\r\n\x1a\n\r\n--XX--\r\n";
        let form = FormData::parse(&headers("multipart/form-data; boundary=XX"), body).unwrap();
        assert_eq!(form.get("name"), "Banner");
        let upload = form.upload.unwrap();
        assert_eq!(upload.field, "image_file");
        assert_eq!(upload.content_type, "image/png");
        assert_eq!(upload.bytes, b"\x89PNG\r\n\x1a\n");
    }

    #[test]
    fn an_empty_file_part_is_no_upload_and_broken_bodies_are_errors() {
        let body =
            b"--XX\r\nContent-Disposition: form-data; name=\"f\"; filename=\"\"\r\n\r\n\r\n--XX--";
        let form = FormData::parse(&headers("multipart/form-data; boundary=XX"), body).unwrap();
        assert_eq!(form.upload, None);
        let broken = b"--XX\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nno end";
        assert!(matches!(
            FormData::parse(&headers("multipart/form-data; boundary=XX"), broken),
            Err(FormError::Malformed(_))
        ));
        let big = vec![b'a'; MAX_FORM_BYTES + 1];
        assert_eq!(
            FormData::parse(&headers("application/x-www-form-urlencoded"), &big),
            Err(FormError::TooLarge)
        );
    }

    #[test]
    fn a_boundary_longer_than_70_bytes_is_refused() {
        let part = |boundary: &str| {
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--{boundary}--"
            )
        };
        let multipart = |boundary: &str| {
            let mut headers = HeaderMap::new();
            let value = format!("multipart/form-data; boundary={boundary}");
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_str(&value).unwrap());
            headers
        };
        let longest = "-".repeat(70);
        let form = FormData::parse(&multipart(&longest), part(&longest).as_bytes()).unwrap();
        assert_eq!(form.get("a"), "1");

        let too_long = "-".repeat(71);
        assert_eq!(
            FormData::parse(&multipart(&too_long), part(&too_long).as_bytes()),
            Err(FormError::Malformed(
                "multipart body: the boundary must be 1 to 70 bytes long, not 71".into()
            ))
        );
    }
}
