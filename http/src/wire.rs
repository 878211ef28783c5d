//! The HTTP/1.1 wire format: parsing a request head (with `httparse`) and
//! writing a response. A helper at the bottom of the crate's layers (see
//! `lib.rs`): HTTP/1.1 (`protocol/http1.rs`) is written on it, and its
//! empty responses serve everyone.

use crate::body::Body;
use crate::date;
use http::header::{CONNECTION, CONTENT_LENGTH, DATE, EXPECT, HOST, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode, Uri, Version};

/// Headers per request beyond which the head is refused with 431.
pub(crate) const MAX_HEADERS: usize = 64;

/// How the request body is framed (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// `Content-Length` bytes (0 without the header).
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A parsed request head.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) method: Method,
    pub(crate) uri: Uri,
    pub(crate) version: Version,
    pub(crate) headers: HeaderMap,
    /// Bytes of the head, including the empty line.
    pub(crate) len: usize,
    pub(crate) framing: Framing,
    /// Whether the connection stays open after the response (HTTP/1.1:
    /// unless `Connection: close`; HTTP/1.0: only with `keep-alive`).
    pub(crate) keep_alive: bool,
    /// `Expect: 100-continue` on an HTTP/1.1 request (RFC 9110 §10.1.1:
    /// ignored on HTTP/1.0).
    pub(crate) expect_continue: bool,
}

impl Head {
    /// Whether a body follows the head.
    pub(crate) fn has_body(&self) -> bool {
        match self.framing {
            Framing::Length(n) => n > 0,
            Framing::Chunked => true,
        }
    }
}

/// The outcome of parsing the buffered bytes.
// Returned once per parse and matched at once: boxing the head would cost
// an allocation per request for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Parsed {
    Complete(Head),
    Partial,
    /// Refused with this status, and the connection closes.
    Invalid(StatusCode),
}

/// Parses a request head from the start of `buf`.
pub(crate) fn parse_head(buf: &[u8]) -> Parsed {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut slots);
    let len = match request.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(httparse::Error::TooManyHeaders) => {
            return Parsed::Invalid(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        }
        Err(_) => return Parsed::Invalid(StatusCode::BAD_REQUEST),
    };
    match head(&request, len) {
        Ok(head) => Parsed::Complete(head),
        Err(status) => Parsed::Invalid(status),
    }
}

fn head(request: &httparse::Request<'_, '_>, len: usize) -> Result<Head, StatusCode> {
    let bad = StatusCode::BAD_REQUEST;
    let method = request
        .method
        .and_then(|m| Method::from_bytes(m.as_bytes()).ok())
        .ok_or(bad)?;
    let uri = request
        .path
        .and_then(|p| p.parse::<Uri>().ok())
        .ok_or(bad)?;
    let version = match request.version {
        Some(0) => Version::HTTP_10,
        Some(1) => Version::HTTP_11,
        _ => return Err(StatusCode::HTTP_VERSION_NOT_SUPPORTED),
    };
    let mut headers = HeaderMap::with_capacity(request.headers.len());
    for header in request.headers.iter() {
        let name = HeaderName::from_bytes(header.name.as_bytes()).map_err(|_| bad)?;
        let value = HeaderValue::from_bytes(header.value).map_err(|_| bad)?;
        headers.append(name, value);
    }
    let framing = framing(&headers)?;
    let keep_alive = match version {
        // RFC 9112 §6.1: "A server or client that receives an HTTP/1.0
        // message containing a Transfer-Encoding header field MUST treat
        // the message as if the framing is faulty [...] and close the
        // connection after processing the message."
        Version::HTTP_10 => framing != Framing::Chunked && has_token(&headers, "keep-alive"),
        _ => !has_token(&headers, "close"),
    };
    // RFC 9110 §10.1.1: an expectation other than 100-continue may be
    // answered 417.
    let mut expect_continue = false;
    for value in headers.get_all(EXPECT) {
        if value.as_bytes().eq_ignore_ascii_case(b"100-continue") {
            expect_continue = version == Version::HTTP_11;
        } else {
            return Err(StatusCode::EXPECTATION_FAILED);
        }
    }
    // RFC 9110 §9.3.6: a 2xx answer to CONNECT makes the connection a
    // tunnel, which this server does not have: refused before the handler.
    if method == Method::CONNECT {
        return Err(StatusCode::NOT_IMPLEMENTED);
    }
    reconcile_host(&mut headers, &uri, version)?;
    Ok(Head {
        method,
        uri,
        version,
        headers,
        len,
        framing,
        keep_alive,
        expect_continue,
    })
}

/// RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status
/// code to any HTTP/1.1 request message that lacks a Host header field and
/// to any request message that contains more than one Host header field
/// line or a Host header field with an invalid field value." §3.2.2: with
/// an absolute-form target, "the origin server MUST ignore the received
/// Host header field (if any) and instead use the host information of the
/// request-target": the handler sees the target's host as `Host`.
fn reconcile_host(headers: &mut HeaderMap, uri: &Uri, version: Version) -> Result<(), StatusCode> {
    let bad = StatusCode::BAD_REQUEST;
    let mut hosts = headers.get_all(HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => return Err(bad),
        (None, None) if version != Version::HTTP_10 => return Err(bad),
        (None, _) => {}
        (Some(value), None) => {
            // `Host = uri-host [ ":" port ]`, empty when the target has no
            // authority; no userinfo.
            let value = value.as_bytes();
            if !value.is_empty() {
                let authority = http::uri::Authority::try_from(value).map_err(|_| bad)?;
                if authority.as_str().contains('@') {
                    return Err(bad);
                }
            }
        }
    }
    if let Some(authority) = uri.authority() {
        let host = match authority.port() {
            Some(port) => format!("{}:{}", authority.host(), port),
            None => authority.host().to_owned(),
        };
        headers.insert(HOST, HeaderValue::from_str(&host).map_err(|_| bad)?);
    }
    Ok(())
}

/// Whether a chunk-size line (with its CRLF, as `httparse::parse_chunk_size`
/// took it) follows RFC 9112 §7.1's grammar: `chunk-size [ chunk-ext ]
/// CRLF`, `chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS
/// chunk-ext-val ] )`, names tokens, values tokens or quoted strings.
/// httparse takes any octet up to the CRLF in an extension, a bare LF
/// included: a front end that ends lines at LF would frame the body
/// differently from this server (request smuggling).
pub(crate) fn chunk_line_is_valid(line: &[u8]) -> bool {
    let Some(mut rest) = line.strip_suffix(b"\r\n") else {
        return false;
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return false;
    }
    rest = &rest[digits..];
    let skip_bws = |rest: &mut &[u8]| {
        while let [b' ' | b'\t', tail @ ..] = *rest {
            *rest = tail;
        }
    };
    let token = |rest: &mut &[u8]| {
        let n = rest.iter().take_while(|&&b| is_tchar(b)).count();
        *rest = &rest[n..];
        n > 0
    };
    loop {
        skip_bws(&mut rest);
        match rest {
            [] => return true,
            [b';', tail @ ..] => rest = tail,
            _ => return false,
        }
        skip_bws(&mut rest);
        if !token(&mut rest) {
            return false;
        }
        let mut peek = rest;
        skip_bws(&mut peek);
        let [b'=', tail @ ..] = peek else {
            continue;
        };
        rest = tail;
        skip_bws(&mut rest);
        if let [b'"', tail @ ..] = rest {
            rest = tail;
            loop {
                match rest {
                    [b'"', tail @ ..] => {
                        rest = tail;
                        break;
                    }
                    [b'\\', q, tail @ ..] if is_qdtext(*q) || *q == b'"' || *q == b'\\' => {
                        rest = tail
                    }
                    [b, tail @ ..] if is_qdtext(*b) => rest = tail,
                    _ => return false,
                }
            }
        } else if !token(&mut rest) {
            return false;
        }
    }
}

/// RFC 9110 §5.6.2's `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// RFC 9110 §5.6.4's `qdtext` (and `obs-text`), HTAB and visible octets
/// but `"` and `\`.
fn is_qdtext(b: u8) -> bool {
    b == b'\t' || b == b' ' || ((0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\') || b >= 0x80
}

/// Whether a trailer line (without its CRLF) holds only what a field line
/// may (RFC 9110 §5.5: no CR, LF, NUL nor other control but HTAB): a bare
/// LF there would end the trailer section early for a front end that ends
/// lines at LF (request smuggling, as in a chunk extension).
pub(crate) fn trailer_line_is_valid(line: &[u8]) -> bool {
    line.iter().all(|&b| b == b'\t' || !b.is_ascii_control())
}

/// RFC 9112 §6.3: chunked if the final transfer coding is `chunked` (and
/// only then; other codings are not implemented: 501); a request with both
/// `Transfer-Encoding` and `Content-Length` is refused (request smuggling);
/// several `Content-Length` values must agree.
fn framing(headers: &HeaderMap) -> Result<Framing, StatusCode> {
    let bad = StatusCode::BAD_REQUEST;
    if headers.contains_key(TRANSFER_ENCODING) {
        if headers.contains_key(CONTENT_LENGTH) {
            return Err(bad);
        }
        let mut codings = Vec::new();
        for value in headers.get_all(TRANSFER_ENCODING) {
            let value = value.to_str().map_err(|_| bad)?;
            codings.extend(value.split(',').map(|c| c.trim().to_ascii_lowercase()));
        }
        return if codings.len() == 1 && codings[0] == "chunked" {
            Ok(Framing::Chunked)
        } else {
            Err(StatusCode::NOT_IMPLEMENTED)
        };
    }
    let mut length = None;
    for value in headers.get_all(CONTENT_LENGTH) {
        let value = value.to_str().map_err(|_| bad)?;
        for part in value.split(',') {
            let part = part.trim();
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad);
            }
            let n: usize = part.parse().map_err(|_| StatusCode::PAYLOAD_TOO_LARGE)?;
            if length.is_some_and(|l| l != n) {
                return Err(bad);
            }
            length = Some(n);
        }
    }
    Ok(Framing::Length(length.unwrap_or(0)))
}

fn has_token(headers: &HeaderMap, token: &str) -> bool {
    headers.get_all(CONNECTION).iter().any(|value| {
        value
            .to_str()
            .map(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
            .unwrap_or(false)
    })
}

/// Whether the handler's response asks to close the connection.
pub(crate) fn response_closes(response: &Response<Body>) -> bool {
    has_token(response.headers(), "close")
}

/// How a response is written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Framed {
    /// `Connection: close` is sent and the connection closes after it.
    pub(crate) close: bool,
    /// HTTP/1.0 with keep-alive: `Connection: keep-alive` is sent.
    pub(crate) keep_alive_10: bool,
    /// A HEAD request: the length is sent, the body is not.
    pub(crate) head_request: bool,
}

/// How a response's body is delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delimit {
    /// `Content-Length: n`.
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// No framing header: the body ends when the connection closes (a
    /// streamed body to an HTTP/1.0 client).
    Close,
}

/// Whether a response with `status` has no body (RFC 9110 §6.4.1: 1xx,
/// 204 and 304 never carry content).
pub(crate) fn bodiless_status(status: StatusCode) -> bool {
    status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
}

/// Appends the head of a response to `out`: status line, the handler's
/// headers (but its `Content-Length`, `Transfer-Encoding` and
/// `Connection`, which the server sets), a `Date` unless the handler set
/// one, the framing header and the empty line.
pub(crate) fn encode_head(
    out: &mut Vec<u8>,
    status: StatusCode,
    headers: &HeaderMap,
    delimit: Delimit,
    framed: Framed,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("Unknown").as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        if name == CONTENT_LENGTH || name == TRANSFER_ENCODING || name == CONNECTION {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !headers.contains_key(DATE) {
        out.extend_from_slice(b"date: ");
        date::append_now(out);
        out.extend_from_slice(b"\r\n");
    }
    // RFC 9110 §8.6, RFC 9112 §6.1: no Content-Length nor
    // Transfer-Encoding on 1xx and 204; none on 304 either (its length
    // would be the 200's, which we do not know).
    if !bodiless_status(status) {
        match delimit {
            Delimit::Length(n) => {
                out.extend_from_slice(b"content-length: ");
                out.extend_from_slice(n.to_string().as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Delimit::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
            Delimit::Close => {}
        }
    }
    if framed.close {
        out.extend_from_slice(b"connection: close\r\n");
    } else if framed.keep_alive_10 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// The bytes of a response with a full body: its head with
/// `Content-Length`, and the body unless the request was HEAD or the
/// status has none.
pub(crate) fn encode(response: &Response<Body>, framed: Framed) -> Vec<u8> {
    let mut out = Vec::with_capacity(160 + response.body().as_bytes().len());
    encode_into(&mut out, response, framed);
    out
}

/// [`encode`], appended to `out` (a connection reuses one buffer for its
/// responses: one allocation fewer per response).
pub(crate) fn encode_into(out: &mut Vec<u8>, response: &Response<Body>, framed: Framed) {
    let status = response.status();
    let body = response.body().as_bytes();
    out.reserve(160 + body.len());
    // RFC 9110 §8.6: a HEAD response's Content-Length is the length a GET
    // would have got, which the handler may know without producing the
    // body: its own value is kept when it gives no body.
    let length = match response.headers().get(CONTENT_LENGTH) {
        Some(value) if framed.head_request && body.is_empty() => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0),
        _ => body.len(),
    };
    encode_head(
        out,
        status,
        response.headers(),
        Delimit::Length(length),
        framed,
    );
    if !bodiless_status(status) && !framed.head_request {
        out.extend_from_slice(body);
    }
}

/// Appends one chunk of a chunked body (RFC 9112 §7.1): its size in hex,
/// the data, CRLF. `data` must not be empty (an empty chunk ends the body).
pub(crate) fn encode_chunk(out: &mut Vec<u8>, data: &[u8]) {
    debug_assert!(!data.is_empty());
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// The last chunk and the end of a chunked body (no trailers).
pub(crate) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// The interim response to `Expect: 100-continue`.
pub(crate) const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// A response with `status` and an empty body.
pub(crate) fn empty_response(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use proptest::sample::Index;

    /// A well-formed request with some headers and a framed body.
    pub(crate) fn request() -> impl Strategy<Value = Vec<u8>> {
        let method = prop::sample::select(vec!["GET", "POST", "PUT", "DELETE", "OPTIONS"]);
        let header = ("[A-Za-z][A-Za-z0-9-]{0,11}", "[ -~]{0,24}");
        (
            method,
            "/[a-z0-9/?=&%.]{0,24}",
            prop::bool::ANY,
            prop::collection::vec(header, 0..6),
            0..3u8,
            prop::collection::vec(any::<u8>(), 0..64),
        )
            .prop_map(|(method, path, http_11, headers, framing, body)| {
                let version = if http_11 { "1.1" } else { "1.0" };
                let mut out = format!("{method} {path} HTTP/{version}\r\nHost: x\r\n");
                for (name, value) in headers {
                    out.push_str(&format!("{name}: {value}\r\n"));
                }
                let mut out = out.into_bytes();
                match framing {
                    0 => out.extend_from_slice(b"\r\n"),
                    1 => {
                        out.extend_from_slice(
                            format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(),
                        );
                        out.extend_from_slice(&body);
                    }
                    _ => {
                        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                        for chunk in body.chunks(7) {
                            encode_chunk(&mut out, chunk);
                        }
                        out.extend_from_slice(LAST_CHUNK);
                    }
                }
                out
            })
    }

    /// `bytes` with a few bytes flipped, inserted or deleted.
    pub(crate) fn mutate(mut bytes: Vec<u8>, edits: &[(Index, u8, u8)]) -> Vec<u8> {
        for (at, kind, byte) in edits {
            if bytes.is_empty() {
                bytes.push(*byte);
                continue;
            }
            let i = at.index(bytes.len());
            match kind % 3 {
                0 => bytes[i] = *byte,
                1 => bytes.insert(i, *byte),
                _ => {
                    bytes.remove(i);
                }
            }
        }
        bytes
    }

    fn edits() -> impl Strategy<Value = Vec<(Index, u8, u8)>> {
        prop::collection::vec((any::<Index>(), any::<u8>(), any::<u8>()), 0..4)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Any bytes: a head, more bytes needed, or a refusal; never a
        /// panic, and a head never claims more bytes than there are.
        #[test]
        fn parse_head_takes_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            if let Parsed::Complete(head) = parse_head(&bytes) {
                prop_assert!(head.len <= bytes.len());
            }
        }

        /// A well-formed request parses, and so does its head alone; each
        /// strict prefix of its head is Partial.
        #[test]
        fn parse_head_parses_well_formed_requests(bytes in request()) {
            let head = match parse_head(&bytes) {
                Parsed::Complete(head) => head,
                other => return Err(TestCaseError::fail(format!("{other:?}"))),
            };
            prop_assert!(matches!(parse_head(&bytes[..head.len]), Parsed::Complete(_)));
            for end in 0..head.len {
                prop_assert!(matches!(parse_head(&bytes[..end]), Parsed::Partial), "prefix {end}");
            }
        }

        /// Mutated requests: never a panic, and the framing of a parsed
        /// head is one of the two.
        #[test]
        fn parse_head_takes_mutated_requests(bytes in request(), edits in edits()) {
            let bytes = mutate(bytes, &edits);
            if let Parsed::Complete(head) = parse_head(&bytes) {
                prop_assert!(head.len <= bytes.len());
                prop_assert!(matches!(head.framing, Framing::Length(_) | Framing::Chunked));
            }
        }
    }

    #[test]
    fn chunk_lines_follow_the_grammar() {
        for good in [
            &b"0\r\n"[..],
            b"1a\r\n",
            b"2;name\r\n",
            b"2 ; name = value ;x=\"q \\\" d\"\r\n",
            b"2;a=b;c\r\n",
        ] {
            assert!(
                chunk_line_is_valid(good),
                "{:?}",
                String::from_utf8_lossy(good)
            );
        }
        for bad in [
            &b"2;\nxx\r\n"[..],
            b"2;a\rb\r\n",
            b"2;a\x01\r\n",
            b"2;\r\n",
            b"2;a=\r\n",
            b"2;a=\"open\r\n",
            b";a\r\n",
            b"2x\r\n",
            b"2",
        ] {
            assert!(
                !chunk_line_is_valid(bad),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn smuggling_and_unknown_codings_are_refused() {
        let both = b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(matches!(
            parse_head(both),
            Parsed::Invalid(StatusCode::BAD_REQUEST)
        ));
        let gzip = b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        assert!(matches!(
            parse_head(gzip),
            Parsed::Invalid(StatusCode::NOT_IMPLEMENTED)
        ));
        let disagree = b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n";
        assert!(matches!(
            parse_head(disagree),
            Parsed::Invalid(StatusCode::BAD_REQUEST)
        ));
        let huge = b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n";
        assert!(matches!(
            parse_head(huge),
            Parsed::Invalid(StatusCode::PAYLOAD_TOO_LARGE)
        ));
    }
}
