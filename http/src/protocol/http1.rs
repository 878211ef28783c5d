//! HTTP/1.1 on the crate's own protocol layer (decisions 0012, 0013). One
//! connection: read a request, call the handler, write the response, in
//! order, until the connection closes (keep-alive and pipelining fall out
//! of the loop: pipelined requests wait in the buffer).
//!
//! A protocol (see `lib.rs`): it imports the bottom layer (`settings.rs`,
//! `handler.rs`, `connection.rs`) and the wire format (`wire.rs`,
//! `feed.rs`), no other protocol. A connection whose first bytes are
//! HTTP/2's preface, or whose handler accepts an upgrade (a WebSocket),
//! ends here and is handed back ([`Served`]) to `dispatch.rs`, which
//! serves it on.

use crate::body::{Body, BoxError, RequestBodyError};
use crate::connection::{ConnectionGuard, Control, Deadline, Transport};
use crate::feed::{self, Feed};
use crate::handler::{request_timeout_response, Handler};
use crate::settings::ServerSettings;
use crate::wire::{self, Delimit, Framed, Framing, Head, Parsed};
use futures_core::Stream;
use http::{Method, Request, Response, StatusCode, Version};
use proscenium::Handle;
use std::future::{poll_fn, Future};
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// How [`serve`] ended: the connection is closed, or it goes on in
/// another protocol.
pub(crate) enum Served<S, U> {
    /// Served to its end; the socket is closed.
    Closed,
    /// The client opened with the HTTP/2 preface: the stream, and the
    /// bytes read so far (the preface first), for HTTP/2.
    #[cfg(feature = "http2")]
    Http2 { stream: S, read: Vec<u8> },
    /// The handler accepted an upgrade: the stream, the bytes read past
    /// the request's head, and the upgrade (its `101` not written yet).
    Upgraded {
        stream: S,
        read: Vec<u8>,
        upgrade: U,
    },
}

/// What a handler's `101 Switching Protocols` may carry: an upgrade the
/// connection is handed over to (a WebSocket's, with the feature
/// `websocket`: `dispatch.rs` implements this for it);
/// [`Infallible`](std::convert::Infallible): none.
pub(crate) trait Upgrade: Send + Sized + 'static {
    /// The upgrade `response` carries (then counted as a response, its
    /// status recorded in `span`), or `None`: not one, and the `101` is
    /// answered 500 as any informational status is.
    fn accept(
        response: &mut Response<Body>,
        span: &tracing::Span,
        control: &Control,
    ) -> Option<Self>;
}

impl Upgrade for std::convert::Infallible {
    fn accept(_: &mut Response<Body>, _: &tracing::Span, _: &Control) -> Option<Self> {
        None
    }
}

/// Serves `stream` until it closes or is handed over ([`Served`]); the
/// caller drops `guard` (the connection's entry in the server) once the
/// socket is closed.
pub(crate) async fn serve<S: Transport, U: Upgrade>(
    stream: S,
    guard: &ConnectionGuard,
    handler: &Handler,
    settings: Arc<ServerSettings>,
    handle: Handle,
) -> Served<S, U> {
    let mut connection = Connection {
        stream,
        first_head: true,
        http2: false,
        control: guard.control(),
        buf: Vec::with_capacity(INITIAL_READ_BUFFER),
        scratch: vec![0; READ_CHUNK].into_boxed_slice(),
        idle: Deadline::new(settings.idle_timeout),
        body_deadline: None,
        out: Vec::new(),
        settings,
        handle,
        #[cfg(feature = "metrics")]
        durations: guard.control().metrics().duration_histogram(),
        upgrade: None,
    };
    if let Err(e) = connection.run(handler).await {
        tracing::debug!(error = %e, "connection failed");
    }
    #[cfg(feature = "http2")]
    if connection.http2 {
        // The client opened with the HTTP/2 preface: hyper's HTTP/2
        // server takes the connection, and the bytes read so far.
        let Connection { stream, buf, .. } = connection;
        return Served::Http2 { stream, read: buf };
    }
    if let Some(upgrade) = connection.upgrade.take() {
        // The upgrade takes the connection (its `101` first), and the
        // bytes read past the request's head.
        let Connection { stream, buf, .. } = connection;
        return Served::Upgraded {
            stream,
            read: buf,
            upgrade,
        };
    }
    drop(connection);
    Served::Closed
}

/// The connection preface of HTTP/2 with prior knowledge (RFC 9113 §3.4):
/// a client that knows the server speaks HTTP/2 sends it first.
const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a connection's first bytes say about the preface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Preface {
    /// They are the HTTP/2 preface.
    Http2,
    /// They begin it (or nothing came yet): read on.
    Maybe,
    /// They are not it: HTTP/1.x.
    No,
}

fn preface(buf: &[u8]) -> Preface {
    if buf.len() >= HTTP2_PREFACE.len() {
        if buf.starts_with(HTTP2_PREFACE) {
            Preface::Http2
        } else {
            Preface::No
        }
    } else if HTTP2_PREFACE.starts_with(buf) {
        Preface::Maybe
    } else {
        Preface::No
    }
}

/// The most one read takes from the socket.
const READ_CHUNK: usize = 8192;

/// The largest output buffer a connection keeps for its next response.
const KEEP_OUT_BUFFER: usize = 16 * 1024;

/// The read buffer a connection starts with.
const INITIAL_READ_BUFFER: usize = 4096;

/// The largest read buffer a connection keeps between requests (a head
/// may take `max_head_bytes` plus one read; a body may take up to
/// `max_body_bytes`): beyond it the buffer goes back to its initial size
/// before the next request.
const KEEP_READ_BUFFER: usize = 4 * READ_CHUNK;

/// Why the loop stopped reading.
#[derive(Debug)]
enum Read {
    /// More bytes are in the buffer.
    Data,
    /// The peer closed, or the server closes this connection (idle while
    /// terminating, or the hard deadline passed).
    Closed,
    /// The read's deadline passed first.
    TimedOut,
    /// The server terminates: the request being read (its body) is not
    /// read further (`Reading::Body` only).
    Terminating,
}

/// What one poll of [`Connection::read_more`] found.
enum Polled {
    Bytes(usize),
    Closed,
    TimedOut,
    Terminating,
}

/// What is being read, which decides what a termination does to the read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// No byte of a next request is in: a termination closes the
    /// connection once nothing is readable.
    Idle,
    /// A request head: a termination lets it complete (the request is then
    /// answered with the termination response).
    Head,
    /// A request body: a termination stops the read at once.
    Body,
    /// A request body streamed to its handler: the request is in flight,
    /// so a termination does not stop the read (the hard deadline does).
    Streamed,
}

/// How reading a request body ended.
enum BodyRead {
    /// All of it is in.
    Body(Body),
    /// Refused with this status (the connection then closes).
    Refused(StatusCode),
    /// The connection closed (the peer, or the hard deadline).
    Closed,
    /// The server terminates: the request gets the termination response.
    Terminating,
}

impl BodyRead {
    /// The outcome of a read that stopped short of the body's end.
    fn ended(read: Read) -> BodyRead {
        match read {
            Read::Data | Read::Closed => BodyRead::Closed,
            Read::TimedOut => BodyRead::Refused(StatusCode::REQUEST_TIMEOUT),
            Read::Terminating => BodyRead::Terminating,
        }
    }
}

/// The outcome of writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wrote {
    /// Everything was written.
    All,
    /// The connection must close now: the hard deadline passed, the
    /// client read nothing for the idle timeout, or a streamed body failed.
    Cut,
    /// Everything was written, and the body ends with the connection (a
    /// streamed body to an HTTP/1.0 client): it must close now.
    AllThenClose,
}

struct Connection<S, U> {
    stream: S,
    /// No request head was read yet: the first bytes may be the HTTP/2
    /// preface.
    first_head: bool,
    /// The first bytes were the HTTP/2 preface (`run` returned without
    /// consuming them): `serve` hands the connection to HTTP/2.
    http2: bool,
    control: Arc<Control>,
    /// Bytes read and not yet consumed (the next, maybe pipelined, requests).
    buf: Vec<u8>,
    /// What a read lands in before `buf` takes the bytes it got (and what
    /// the lingering close discards into): zeroed once per connection, not
    /// once per read, as a local array in the read's future would be (a
    /// `memset` of 8 KiB per request: 2.4 % of the server's CPU under
    /// wrk).
    scratch: Box<[u8]>,
    /// The idle timeout between requests, reused across them (see
    /// [`Deadline`]).
    idle: Deadline,
    /// The body read timeout of the request whose body is being read
    /// (`None` otherwise): not reset by the bytes that come.
    body_deadline: Option<Deadline>,
    /// A full response's bytes, reused from one response to the next.
    out: Vec<u8>,
    settings: Arc<ServerSettings>,
    handle: Handle,
    /// `proscenium_http_request_duration_seconds` of this server (the
    /// `metrics` feature): looked up once per connection, recorded once
    /// per request handed to the handler.
    #[cfg(feature = "metrics")]
    durations: ::metrics::Histogram,
    /// The handler accepted an upgrade (a WebSocket's): `serve` hands the
    /// connection over, whose new protocol writes the `101`.
    upgrade: Option<U>,
}

impl<S: Transport, U: Upgrade> Connection<S, U> {
    async fn run(&mut self, handler: &Handler) -> io::Result<()> {
        loop {
            let head = match self.read_head().await? {
                Some(Ok(head)) => head,
                Some(Err(status)) => return self.refuse(status).await,
                None => return Ok(()),
            };
            // The request's duration runs from its head being in to its
            // response's last byte written (the `metrics` feature).
            #[cfg(feature = "metrics")]
            let started = std::time::Instant::now();
            let head_request = head.method == Method::HEAD;
            // The request's span (a child of the connection's): the
            // handler runs in it; the status is recorded once known.
            let span = tracing::debug_span!(
                "http_request",
                method = %head.method,
                path = head.uri.path(),
                status = tracing::field::Empty,
            );
            // Akka: "During that time incoming requests continue to be
            // served [...] yet no new requests will be delivered to the user
            // handler. All such drained responses will be replied to with an
            // termination response". Answered as soon as the head is in,
            // without waiting for the body: a client waiting for `100
            // Continue` would otherwise wait for nothing (the body it does
            // send is discarded by the lingering close).
            if self.control.signals().terminating {
                return self.answer_terminating(&span, head_request).await;
            }
            let streamed = self.settings.stream_request_bodies && head.has_body();
            let (body, pumping) = if streamed {
                if self.length_too_large(&head) {
                    // No 100 Continue, no handler: the client does not
                    // send the body.
                    return self.refuse(StatusCode::PAYLOAD_TOO_LARGE).await;
                }
                let (body, feed) = feed::channel();
                (body, Some((BodyShape::of(&head), feed)))
            } else {
                let body = match self.read_body(&head).await? {
                    BodyRead::Body(body) => body,
                    BodyRead::Refused(status) => return self.refuse(status).await,
                    BodyRead::Closed => return Ok(()),
                    // The termination came while the body was on its way.
                    BodyRead::Terminating => {
                        return self.answer_terminating(&span, head_request).await
                    }
                };
                if self.control.signals().terminating {
                    return self.answer_terminating(&span, head_request).await;
                }
                (body, None)
            };
            let http_10 = head.version == Version::HTTP_10;
            let keep_alive_10 = http_10 && head.keep_alive;
            let keep_alive = head.keep_alive;
            let request = request(head, body);
            let in_flight = self.control.metrics().request_started();
            let (response, body_whole) = match pumping {
                None => (self.call(handler, request, &span).await, true),
                Some((shape, feed)) => {
                    self.call_streaming(handler, request, &span, shape, feed)
                        .await
                }
            };
            drop(in_flight);
            let response = match response {
                Called::Response(response) => Some(response),
                Called::Forced => None,
                Called::Left => return Ok(()),
            };
            // `mut` for the upgrade's check below (a second binding there
            // would cost a copy of the response per request).
            let Some(mut response) = response else {
                // The hard deadline passed. Akka: "if user code does not
                // reply with a response within the deadline we produce a
                // special [...] terminationDeadlineExceededResponse HTTP
                // response (e.g. 503 Service Unavailable) with a
                // Connection: close header and close connection."
                let response = self.settings.termination.deadline_exceeded.to_response();
                span.record("status", response.status().as_u16());
                self.answer_now_and_close(response, head_request).await;
                #[cfg(feature = "metrics")]
                self.durations.record(started.elapsed());
                return Ok(());
            };
            // With no upgrade to accept (`U` is `Infallible`: no feature
            // `websocket`), `accept` is `None` and an optimised build drops
            // the check.
            if response.status() == StatusCode::SWITCHING_PROTOCOLS {
                if let Some(upgrade) = U::accept(&mut response, &span, &self.control) {
                    // `serve` hands the connection over, and the `101` is
                    // written there (no write here: no await point added
                    // to this future's request path).
                    #[cfg(feature = "metrics")]
                    self.durations.record(started.elapsed());
                    self.upgrade = Some(upgrade);
                    return Ok(());
                }
            }
            let response = final_response(response, &span);
            span.record("status", response.status().as_u16());
            self.control.metrics().response(response.status());
            // Akka: "if user code emits a response within the timeout, then
            // this response is sent to the client with a Connection: close
            // header and connection is closed."
            // A streamed body its handler did not read to the end: the
            // rest of it is not a next request.
            let close = !keep_alive
                || !body_whole
                || wire::response_closes(&response)
                || self.control.signals().terminating;
            let framed = Framed {
                close,
                keep_alive_10,
                head_request,
            };
            let wrote = self.respond(response, framed, http_10).await;
            #[cfg(feature = "metrics")]
            self.durations.record(started.elapsed());
            match wrote? {
                Wrote::All if !close => {}
                Wrote::All | Wrote::AllThenClose => {
                    self.linger().await;
                    return Ok(());
                }
                Wrote::Cut => return self.close(),
            }
        }
    }

    /// Answers the request whose span is `span` with the termination
    /// response, then closes.
    async fn answer_terminating(
        &mut self,
        span: &tracing::Span,
        head_request: bool,
    ) -> io::Result<()> {
        let response = self.settings.termination.terminating.to_response();
        span.record("status", response.status().as_u16());
        self.answer_and_close(response, head_request).await
    }

    /// The next request head; `Some(Err(status))` if it is refused, `None`
    /// if the connection closed first (or stayed idle past the idle
    /// timeout).
    async fn read_head(&mut self) -> io::Result<Option<Result<Head, StatusCode>>> {
        // Armed when a read would block: the idle timeout while no byte of
        // the next request is in, the head timeout (slowloris) from the
        // first byte on.
        self.idle.restart();
        // A large body grew the buffer: an idle connection does not keep
        // that (twenty idle connections past an 8 MiB body each held 8 MiB
        // and more).
        if self.buf.capacity() > KEEP_READ_BUFFER {
            self.buf.shrink_to(INITIAL_READ_BUFFER.max(self.buf.len()));
        }
        let mut head = Deadline::new(self.settings.header_read_timeout);
        loop {
            if self.first_head {
                // Before any parse of the first head (the preface's
                // request line is not HTTP/1.x): `GET` and every other
                // method part ways with it at its first byte.
                match preface(&self.buf) {
                    Preface::No => self.first_head = false,
                    Preface::Http2 if cfg!(feature = "http2") => {
                        self.http2 = true;
                        return Ok(None);
                    }
                    // Without the feature the preface is parsed as
                    // HTTP/1.x, and refused (400).
                    Preface::Http2 => self.first_head = false,
                    Preface::Maybe if self.buf.is_empty() => {}
                    Preface::Maybe => match self.read_more(Reading::Head, &mut head).await? {
                        Read::Data => continue,
                        Read::Closed | Read::Terminating => return Ok(None),
                        Read::TimedOut => return Ok(Some(Err(StatusCode::REQUEST_TIMEOUT))),
                    },
                }
            }
            match wire::parse_head(&self.buf) {
                Parsed::Complete(head) => return Ok(Some(Ok(head))),
                Parsed::Invalid(status) => return Ok(Some(Err(status))),
                Parsed::Partial if self.buf.len() >= self.settings.max_head_bytes => {
                    return Ok(Some(Err(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)));
                }
                Parsed::Partial if self.buf.is_empty() => {
                    // Idle: no byte of the next request yet. Akka: "if a
                    // connection has no “in-flight” request, it is
                    // terminated immediately".
                    // The idle deadline is the connection's (kept armed
                    // from one request to the next); taken out for the
                    // read, which borrows the connection.
                    let mut idle = std::mem::replace(&mut self.idle, Deadline::new(Duration::MAX));
                    let read = self.read_more(Reading::Idle, &mut idle).await;
                    self.idle = idle;
                    match read? {
                        Read::Data => {}
                        Read::Closed | Read::TimedOut | Read::Terminating => return Ok(None),
                    }
                    // From here on the connection is not idle: a
                    // termination lets this request arrive and answers it
                    // (tests wait on this event).
                    tracing::trace!("receiving a request");
                }
                // A termination lets the head arrive: the request is then
                // answered with the termination response.
                Parsed::Partial => match self.read_more(Reading::Head, &mut head).await? {
                    Read::Data => {}
                    Read::Closed | Read::Terminating => return Ok(None),
                    Read::TimedOut => return Ok(Some(Err(StatusCode::REQUEST_TIMEOUT))),
                },
            }
        }
    }

    /// The body of the request `head` heads, consumed from the buffer with
    /// the head. Sends `100 Continue` first if the client waits for it and
    /// the body is acceptable as far as its head tells. A termination stops
    /// the reading (`Terminating`: the request gets the termination
    /// response).
    async fn read_body(&mut self, head: &Head) -> io::Result<BodyRead> {
        if !head.has_body() {
            // Most requests (GET, HEAD): no deadline, no 100 Continue,
            // nothing to wait for.
            self.buf.drain(..head.len);
            return Ok(BodyRead::Body(Body::empty()));
        }
        self.body_deadline = Some(Deadline::new(self.settings.body_read_timeout));
        let read = self.read_framed_body(head).await;
        self.body_deadline = None;
        read
    }

    /// [`read_body`](Self::read_body), under its body read timeout.
    async fn read_framed_body(&mut self, head: &Head) -> io::Result<BodyRead> {
        if self.length_too_large(head) {
            // No 100 Continue: the client does not send the body.
            return Ok(BodyRead::Refused(StatusCode::PAYLOAD_TOO_LARGE));
        }
        if !self
            .continue_if_expected(head.expect_continue, head.len)
            .await?
        {
            return Ok(BodyRead::Closed);
        }
        self.buf.drain(..head.len);
        let mut body = Vec::new();
        Ok(
            match self
                .read_into(head.framing, Reading::Body, &mut body)
                .await?
            {
                Pumped::Whole => BodyRead::Body(Body::from(body)),
                Pumped::Refused(status) => BodyRead::Refused(status),
                Pumped::Ended(read) => BodyRead::ended(read),
                // A `Vec` always takes more.
                Pumped::Abandoned => BodyRead::Closed,
            },
        )
    }

    /// Whether a `Content-Length` body is refused 413 before a byte of it
    /// is read: over `max_body_bytes`, or (with a limit as large as the
    /// caller likes) beyond what the buffer, holding the head, could
    /// address.
    fn length_too_large(&self, head: &Head) -> bool {
        matches!(head.framing, Framing::Length(n)
            if n > self.settings.max_body_bytes || head.len.checked_add(n).is_none())
    }

    /// Sends `100 Continue` if the client waits for it (`expected`; the
    /// caller has checked that the body is acceptable as far as its head
    /// tells) and no byte of the body is in yet (RFC 9110 §10.1.1: a
    /// server may omit the 100 then); not while terminating (the request
    /// is answered 503). False if the connection failed.
    async fn continue_if_expected(&mut self, expected: bool, head_len: usize) -> io::Result<bool> {
        if expected && self.buf.len() == head_len && !self.control.signals().terminating {
            // Counted as every response is, before its first byte.
            self.control.metrics().response(StatusCode::CONTINUE);
            if self.write(wire::CONTINUE).await? != Wrote::All {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Streams the body `shape` describes into `feed` (the handler's
    /// request body) as it comes, under the body read timeout; the feed
    /// ends with the body, or with the error that cut it.
    async fn pump_body(&mut self, shape: BodyShape, mut feed: &Feed) -> io::Result<Pumped> {
        self.body_deadline = Some(Deadline::new(self.settings.body_read_timeout));
        let pumped = match self
            .continue_if_expected(shape.expect_continue, shape.len)
            .await
        {
            Ok(true) => {
                self.buf.drain(..shape.len);
                self.read_into(shape.framing, Reading::Streamed, &mut feed)
                    .await
            }
            Ok(false) => Ok(Pumped::Ended(Read::Closed)),
            Err(e) => Err(e),
        };
        self.body_deadline = None;
        let end = match &pumped {
            Ok(Pumped::Whole) => Ok(()),
            // Nobody reads it.
            Ok(Pumped::Abandoned) => return pumped,
            Ok(Pumped::Refused(StatusCode::PAYLOAD_TOO_LARGE)) => Err(RequestBodyError::TooLarge),
            Ok(Pumped::Refused(_)) => Err(RequestBodyError::Malformed),
            Ok(Pumped::Ended(Read::TimedOut)) => Err(RequestBodyError::TimedOut),
            Ok(Pumped::Ended(_)) | Err(_) => Err(RequestBodyError::ClientLeft),
        };
        feed.finish(end.map_err(Into::into));
        pumped
    }

    /// The body framed as `framing` (RFC 9112 §6.3, §7.1), starting at the
    /// buffer's front, handed to `sink` as it comes: the one decoder of
    /// both a body read whole (`Vec`) and a streamed one (its feed). A
    /// chunk line outside the grammar is 400, a chunk size that would take
    /// the body past `max_body_bytes` 413 before a byte of it is read (a
    /// size has up to 16 hex digits: every sum is checked), trailers are
    /// read and dropped. The buffer keeps at most one read of the body.
    async fn read_into<K: BodySink>(
        &mut self,
        framing: Framing,
        reading: Reading,
        sink: &mut K,
    ) -> io::Result<Pumped> {
        if let Framing::Length(n) = framing {
            return self.read_bytes_into(n, reading, sink).await;
        }
        const MAX_LINE: usize = 4096;
        let mut total: usize = 0;
        loop {
            match httparse::parse_chunk_size(&self.buf) {
                Ok(httparse::Status::Complete((used, size))) => {
                    if !wire::chunk_line_is_valid(&self.buf[..used]) {
                        return Ok(Pumped::Refused(StatusCode::BAD_REQUEST));
                    }
                    // A size beyond the limit, or (with a limit as large as
                    // the caller likes) one whose chunk, with its line and
                    // CRLF, could not be addressed: 413.
                    let max = self.settings.max_body_bytes;
                    let size = usize::try_from(size).ok().filter(|&size| {
                        total.checked_add(size).is_some_and(|t| t <= max)
                            && used
                                .checked_add(size)
                                .and_then(|end| end.checked_add(2))
                                .is_some()
                    });
                    let Some(size) = size else {
                        return Ok(Pumped::Refused(StatusCode::PAYLOAD_TOO_LARGE));
                    };
                    self.buf.drain(..used);
                    if size == 0 {
                        return Ok(match self.read_trailers(reading).await? {
                            Ok(Read::Data) => Pumped::Whole,
                            Ok(other) => Pumped::Ended(other),
                            Err(status) => Pumped::Refused(status),
                        });
                    }
                    total += size;
                    match self.read_bytes_into(size, reading, sink).await? {
                        Pumped::Whole => {}
                        other => return Ok(other),
                    }
                    match self.fill(2, reading).await? {
                        Read::Data => {}
                        other => return Ok(Pumped::Ended(other)),
                    }
                    if &self.buf[..2] != b"\r\n" {
                        return Ok(Pumped::Refused(StatusCode::BAD_REQUEST));
                    }
                    self.buf.drain(..2);
                }
                Ok(httparse::Status::Partial) if self.buf.len() > MAX_LINE => {
                    return Ok(Pumped::Refused(StatusCode::BAD_REQUEST));
                }
                Ok(httparse::Status::Partial) => {
                    let mut deadline = Deadline::new(self.settings.idle_timeout);
                    match self.read_more(reading, &mut deadline).await? {
                        Read::Data => {}
                        other => return Ok(Pumped::Ended(other)),
                    }
                }
                Err(_) => return Ok(Pumped::Refused(StatusCode::BAD_REQUEST)),
            }
        }
    }

    /// Hands the next `n` body bytes to `sink` as they come (the buffer
    /// keeps at most one read), waiting while the sink is full.
    async fn read_bytes_into<K: BodySink>(
        &mut self,
        n: usize,
        reading: Reading,
        sink: &mut K,
    ) -> io::Result<Pumped> {
        let mut left = n;
        while left > 0 {
            if self.buf.is_empty() {
                let mut deadline = Deadline::new(self.settings.idle_timeout);
                match self.read_more(reading, &mut deadline).await? {
                    Read::Data => {}
                    other => return Ok(Pumped::Ended(other)),
                }
            }
            if !poll_fn(|cx| sink.poll_room(cx)).await {
                return Ok(Pumped::Abandoned);
            }
            let take = left.min(self.buf.len());
            sink.put(&self.buf[..take]);
            self.buf.drain(..take);
            left -= take;
        }
        Ok(Pumped::Whole)
    }

    /// Trailer lines until the empty line, consumed from the buffer; 431
    /// if they are longer than a head may be.
    async fn read_trailers(&mut self, reading: Reading) -> io::Result<Result<Read, StatusCode>> {
        let mut pos = 0;
        loop {
            match self.buf[pos..].windows(2).position(|w| w == b"\r\n") {
                Some(0) => {
                    self.buf.drain(..pos + 2);
                    return Ok(Ok(Read::Data));
                }
                Some(i) if !wire::trailer_line_is_valid(&self.buf[pos..pos + i]) => {
                    return Ok(Err(StatusCode::BAD_REQUEST));
                }
                Some(i) => pos += i + 2,
                None if self.buf.len() > self.settings.max_head_bytes => {
                    return Ok(Err(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
                }
                None => {
                    let mut deadline = Deadline::new(self.settings.idle_timeout);
                    match self.read_more(reading, &mut deadline).await? {
                        Read::Data => {}
                        other => return Ok(Ok(other)),
                    }
                }
            }
        }
    }

    /// Reads (as `reading`) until the buffer holds `len` bytes, each read
    /// bounded by the idle timeout; `Data` once it does.
    async fn fill(&mut self, len: usize, reading: Reading) -> io::Result<Read> {
        while self.buf.len() < len {
            let mut deadline = Deadline::new(self.settings.idle_timeout);
            match self.read_more(reading, &mut deadline).await? {
                Read::Data => {}
                other => return Ok(other),
            }
        }
        Ok(Read::Data)
    }

    /// Reads more bytes into the buffer. Closed when the peer closes, at
    /// the hard deadline, or (`Reading::Idle`) once the server terminates
    /// and no byte is readable; Terminating (`Reading::Body`) once the
    /// server terminates; TimedOut if `deadline` passes first.
    ///
    /// At most 8 KiB are read at a time, and only when the request being
    /// read needs more: requests pipelined behind it wait in the socket
    /// (the kernel's buffers, then the client's), never in ours.
    async fn read_more(&mut self, reading: Reading, deadline: &mut Deadline) -> io::Result<Read> {
        let chunk = &mut self.scratch[..];
        let stream = &mut self.stream;
        let control = &self.control;
        let handle = &self.handle;
        let whole = &mut self.body_deadline;
        let polled = poll_fn(|cx| {
            let signals = control.poll_signals(cx);
            if signals.forced {
                return Poll::Ready(Ok(Polled::Closed));
            }
            if signals.terminating && reading == Reading::Body {
                return Poll::Ready(Ok(Polled::Terminating));
            }
            match Pin::new(&mut *stream).poll_read(cx, chunk) {
                Poll::Pending if signals.terminating && reading == Reading::Idle => {
                    control.metrics().idle_closed_on_termination();
                    Poll::Ready(Ok(Polled::Closed))
                }
                Poll::Pending => {
                    // A body's whole time, whatever its pace.
                    if let Some(whole) = whole.as_mut() {
                        if whole.poll(handle, cx).is_ready() {
                            return Poll::Ready(Ok(Polled::TimedOut));
                        }
                    }
                    deadline.poll(handle, cx).map(|()| Ok(Polled::TimedOut))
                }
                Poll::Ready(Ok(0)) => Poll::Ready(Ok(Polled::Closed)),
                Poll::Ready(Ok(n)) => Poll::Ready(Ok(Polled::Bytes(n))),
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            }
        })
        .await?;
        Ok(match polled {
            Polled::Bytes(n) => {
                self.buf.extend_from_slice(&self.scratch[..n]);
                Read::Data
            }
            Polled::Closed => Read::Closed,
            Polled::TimedOut => Read::TimedOut,
            Polled::Terminating => Read::Terminating,
        })
    }

    /// The lingering close (RFC 9112 §9.6; Akka HTTP's `linger-timeout`,
    /// nginx's `lingering_close`), after a final response that closes the
    /// connection: shuts down the write half (the client reads the
    /// response, then EOF), then reads and discards what the client still
    /// sends until it closes, the linger timeout passes, or the hard
    /// deadline does. Closing at once with unread bytes in the socket
    /// would send a reset, which discards the response bytes the kernel
    /// has not sent yet and fails the client's writes (a client sending a
    /// body the server refused never gets to read the refusal).
    ///
    /// During a termination, a lingering connection with nothing to read
    /// is closed at once: it has no request in flight (Akka: "if a
    /// connection has no “in-flight” request, it is terminated
    /// immediately"), and its response is out.
    async fn linger(&mut self) {
        if let Err(e) = self.close() {
            tracing::debug!(error = %e, "shutting down the write half failed");
            return;
        }
        // Tests wait on this event.
        tracing::trace!("lingering after the last response");
        self.buf = Vec::new();
        let after = self.settings.linger_timeout;
        if after.is_zero() {
            return;
        }
        // Armed now: the timeout bounds the whole linger, also for a client
        // that keeps sending.
        let mut deadline = Deadline::new(after);
        let sink = &mut self.scratch[..];
        let stream = &mut self.stream;
        let control = &self.control;
        let handle = &self.handle;
        let discarded = poll_fn(|cx| {
            let signals = control.poll_signals(cx);
            if signals.forced || deadline.poll(handle, cx).is_ready() {
                return Poll::Ready(Ok(false));
            }
            // A bounded number of reads per poll: a client that sends as
            // fast as the worker reads does not keep the worker.
            for _ in 0..16 {
                match Pin::new(&mut *stream).poll_read(cx, sink) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Ok(true)),
                    Poll::Ready(Ok(_)) => {}
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending if signals.terminating => return Poll::Ready(Ok(false)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            cx.waker().wake_by_ref();
            Poll::Pending
        })
        .await;
        match discarded {
            Ok(true) => tracing::trace!("the client closed after the last response"),
            Ok(false) => tracing::trace!("lingering ended before the client closed"),
            Err(e) => tracing::debug!(error = %e, "reading while lingering failed"),
        }
    }

    /// Writes all of `bytes`; Cut if the hard deadline passed first, or the
    /// socket accepted nothing for the idle timeout (a client that does
    /// not read).
    async fn write(&mut self, mut bytes: &[u8]) -> io::Result<Wrote> {
        let stream = &mut self.stream;
        let control = &self.control;
        let handle = &self.handle;
        let mut deadline = Deadline::new(self.settings.idle_timeout);
        while !bytes.is_empty() {
            let written = poll_fn(|cx| {
                if control.poll_signals(cx).forced {
                    return Poll::Ready(Ok(None));
                }
                match Pin::new(&mut *stream).poll_write(cx, bytes) {
                    Poll::Pending => deadline.poll(handle, cx).map(|()| Ok(None)),
                    Poll::Ready(r) => Poll::Ready(r.map(Some)),
                }
            })
            .await?;
            match written {
                None => return Ok(Wrote::Cut),
                Some(0) => return Err(io::ErrorKind::WriteZero.into()),
                Some(n) => {
                    bytes = &bytes[n..];
                    // Progress: the idle timeout starts over.
                    deadline = Deadline::new(self.settings.idle_timeout);
                }
            }
        }
        Ok(Wrote::All)
    }

    /// Writes `response`: a full body with `Content-Length`, a streamed
    /// one chunked (HTTP/1.1) or close-delimited (HTTP/1.0, then `framed`
    /// must close). No body after a HEAD request or on 1xx/204/304; a
    /// streamed body is then dropped unpolled.
    async fn respond(
        &mut self,
        response: Response<Body>,
        mut framed: Framed,
        http_10: bool,
    ) -> io::Result<Wrote> {
        let (parts, body) = response.into_parts();
        let stream = match body.into_kind() {
            Ok(bytes) => {
                let response = Response::from_parts(parts, Body::from(bytes));
                // The connection's output buffer, taken out for the write
                // (which borrows the connection) and put back; a large
                // body's buffer is not kept.
                let mut out = std::mem::take(&mut self.out);
                out.clear();
                wire::encode_into(&mut out, &response, framed);
                drop(response);
                let wrote = self.write(&out).await;
                if out.capacity() <= KEEP_OUT_BUFFER {
                    self.out = out;
                }
                return wrote;
            }
            Err(stream) => stream,
        };
        let bodiless = wire::bodiless_status(parts.status) || framed.head_request;
        let delimit = if http_10 {
            framed.close = true;
            Delimit::Close
        } else {
            Delimit::Chunked
        };
        let mut out = Vec::with_capacity(256);
        wire::encode_head(&mut out, parts.status, &parts.headers, delimit, framed);
        match self.write(&out).await? {
            Wrote::All if bodiless => {
                drop(stream);
                // HTTP/1.0: the head said `Connection: close`.
                Ok(if framed.close {
                    Wrote::AllThenClose
                } else {
                    Wrote::All
                })
            }
            Wrote::All => self.write_stream(stream, delimit).await,
            _ => Ok(Wrote::Cut),
        }
    }

    /// Writes a streamed body, polling the stream for an item only once
    /// the previous one is written: a client that does not read stops the
    /// stream. Cut (no last chunk, the connection closes) if the stream
    /// fails or panics, at the hard deadline, or at the idle timeout.
    async fn write_stream(
        &mut self,
        mut stream: Pin<Box<dyn Stream<Item = Result<Vec<u8>, BoxError>> + Send>>,
        delimit: Delimit,
    ) -> io::Result<Wrote> {
        let mut out = Vec::new();
        loop {
            let control = &self.control;
            let mut watch = Departure {
                stream: &mut self.stream,
                buf: &mut self.buf,
                scratch: &mut self.scratch,
                stopped: false,
            };
            let next = poll_fn(|cx| {
                // Akka: "existing streaming responses must complete before
                // the deadline as well. When the deadline is reached the
                // connection will be terminated regardless of status of the
                // streaming responses."
                if control.poll_signals(cx).forced {
                    return Poll::Ready(Err(()));
                }
                match catch_unwind(AssertUnwindSafe(|| stream.as_mut().poll_next(cx))) {
                    Ok(Poll::Ready(Some(Ok(data)))) => Poll::Ready(Ok(Some(data))),
                    Ok(Poll::Ready(Some(Err(e)))) => {
                        tracing::debug!(error = %e, "a streamed response body failed");
                        Poll::Ready(Err(()))
                    }
                    Ok(Poll::Ready(None)) => Poll::Ready(Ok(None)),
                    // A silent stream (server-sent events between two
                    // events) notices a client that left.
                    Ok(Poll::Pending) => watch.poll_left(cx).map(|()| {
                        tracing::debug!("the client left while its stream was silent");
                        Err(())
                    }),
                    Err(_) => {
                        tracing::debug!("a streamed response body panicked");
                        Poll::Ready(Err(()))
                    }
                }
            })
            .await;
            let data = match next {
                Ok(Some(data)) if data.is_empty() => continue,
                Ok(Some(data)) => data,
                Ok(None) if delimit == Delimit::Chunked => {
                    return self.write(wire::LAST_CHUNK).await
                }
                Ok(None) => return Ok(Wrote::AllThenClose),
                Err(()) => return Ok(Wrote::Cut),
            };
            let wrote = if delimit == Delimit::Chunked {
                out.clear();
                wire::encode_chunk(&mut out, &data);
                drop(data);
                self.write(&out).await?
            } else {
                self.write(&data).await?
            };
            if wrote != Wrote::All {
                return Ok(Wrote::Cut);
            }
        }
    }

    /// Answers `status` with an empty body and `Connection: close`, then
    /// closes.
    async fn refuse(&mut self, status: StatusCode) -> io::Result<()> {
        self.answer_and_close(wire::empty_response(status), false)
            .await
    }

    /// `response` counted and encoded with `Connection: close`. Encoded
    /// and dropped before the caller's first await: a `Body` may hold a
    /// stream that is Send but not Sync, and the connection's future must
    /// stay Send.
    fn closing(&self, response: Response<Body>, head_request: bool) -> Vec<u8> {
        self.control.metrics().response(response.status());
        let framed = Framed {
            close: true,
            keep_alive_10: false,
            head_request,
        };
        wire::encode(&response, framed)
    }

    /// Writes `response` (counted) with `Connection: close`, then closes.
    async fn answer_and_close(
        &mut self,
        response: Response<Body>,
        head_request: bool,
    ) -> io::Result<()> {
        let bytes = self.closing(response, head_request);
        match self.write(&bytes).await? {
            Wrote::All => {
                self.linger().await;
                Ok(())
            }
            _ => self.close(),
        }
    }

    /// Writes as much of `response` (counted) as the socket takes without
    /// waiting, with `Connection: close`, then closes: past the hard
    /// deadline nothing may wait on the client.
    async fn answer_now_and_close(&mut self, response: Response<Body>, head_request: bool) {
        let bytes = self.closing(response, head_request);
        let mut rest = &bytes[..];
        let stream = &mut self.stream;
        poll_fn(|cx| {
            while !rest.is_empty() {
                match Pin::new(&mut *stream).poll_write(cx, rest) {
                    Poll::Ready(Ok(n)) if n > 0 => rest = &rest[n..],
                    // Full (or failed): give up, the connection closes.
                    _ => return Poll::Ready(()),
                }
            }
            Poll::Ready(())
        })
        .await;
        if !rest.is_empty() {
            tracing::debug!(
                unwritten = rest.len(),
                "the deadline-exceeded response did not fit in the socket"
            );
        }
        if let Err(e) = self.close() {
            tracing::debug!(error = %e, "closing after the deadline failed");
        }
    }

    /// Shuts down the write half (the client reads EOF after the last
    /// response); the socket closes when the connection drops. Never
    /// waits: a TCP stream's close is its `shutdown(Write)`, done at once;
    /// a TLS stream's close_notify is written if the socket takes it now,
    /// and otherwise the socket closes without it when the connection
    /// drops (nothing waits on a client that reads nothing).
    fn close(&mut self) -> io::Result<()> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match Pin::new(&mut self.stream).poll_close(&mut cx) {
            Poll::Ready(Err(e)) if e.kind() != io::ErrorKind::NotConnected => Err(e),
            _ => Ok(()),
        }
    }

    /// Runs the handler in `span`; a panic (calling it or polling its
    /// future) answers 500, a handler slower than the request timeout
    /// 503. The handler's future is dropped unfinished if the hard
    /// deadline passes first (`Forced`) or the client leaves (`Left`).
    async fn call(
        &mut self,
        handler: &Handler,
        request: Request<Body>,
        span: &tracing::Span,
    ) -> Called {
        let Some(mut future) = start(handler, request, span) else {
            return Called::Response(internal_error());
        };
        // Armed when the handler first would wait: from the end of the
        // request, as Akka's request-timeout.
        let mut timeout = Deadline::new(self.settings.request_timeout);
        let control = &self.control;
        let handle = &self.handle;
        let mut watch = Departure {
            stream: &mut self.stream,
            buf: &mut self.buf,
            scratch: &mut self.scratch,
            stopped: false,
        };
        poll_fn(|cx| {
            poll_handler(
                cx,
                control,
                handle,
                Some(&mut watch),
                &mut future,
                &mut timeout,
                span,
            )
        })
        .await
    }

    /// [`call`](Self::call) for a request whose body streams to the
    /// handler: the handler runs while the body is read into its feed,
    /// then (once the body is in) as `call` runs it. Also says whether the
    /// body was read to its end (if not, the connection closes after the
    /// response).
    async fn call_streaming(
        &mut self,
        handler: &Handler,
        request: Request<Body>,
        span: &tracing::Span,
        shape: BodyShape,
        feed: Arc<Feed>,
    ) -> (Called, bool) {
        let Some(mut future) = start(handler, request, span) else {
            feed.finish(Err(RequestBodyError::NotRead.into()));
            return (Called::Response(internal_error()), false);
        };
        // From the handler's call: the request is in flight from then on.
        let mut timeout = Deadline::new(self.settings.request_timeout);
        let control = Arc::clone(&self.control);
        let handle = self.handle.clone();
        let mut pumped: Option<io::Result<Pumped>> = None;
        let first = {
            // The pump reads the socket: no departure watch meanwhile.
            let mut pump = std::pin::pin!(self.pump_body(shape, &feed));
            poll_fn(|cx| {
                if pumped.is_none() {
                    if let Poll::Ready(result) = pump.as_mut().poll(cx) {
                        pumped = Some(result);
                    }
                }
                let unwatched: Option<&mut Departure<'_, S>> = None;
                match poll_handler(
                    cx,
                    &control,
                    &handle,
                    unwatched,
                    &mut future,
                    &mut timeout,
                    span,
                ) {
                    Poll::Ready(called) => Poll::Ready(Some(called)),
                    // The body is in (or cut): the handler runs on as any.
                    Poll::Pending if pumped.is_some() => Poll::Ready(None),
                    Poll::Pending => Poll::Pending,
                }
            })
            .await
        };
        // The pump may have been dropped unfinished (the handler answered
        // first, or the hard deadline passed).
        self.body_deadline = None;
        let whole = matches!(pumped, Some(Ok(Pumped::Whole)));
        if pumped.is_none() {
            feed.finish(Err(RequestBodyError::NotRead.into()));
        }
        if let Some(Err(e)) = &pumped {
            tracing::debug!(error = %e, "reading a streamed request body failed");
        }
        let called = match first {
            Some(called) => called,
            None => {
                let mut watch = Departure {
                    stream: &mut self.stream,
                    buf: &mut self.buf,
                    scratch: &mut self.scratch,
                    stopped: false,
                };
                poll_fn(|cx| {
                    poll_handler(
                        cx,
                        &control,
                        &handle,
                        Some(&mut watch),
                        &mut future,
                        &mut timeout,
                        span,
                    )
                })
                .await
            }
        };
        (called, whole)
    }
}

/// One poll of a handler's future (see [`Connection::call`]): its
/// response, 500 if it panics, 503 past the request timeout, `Forced` at
/// the hard deadline, `Left` once its client has left (with a `watch`). A
/// function, not an `async fn`, so that `call` polls the handler without a
/// future between.
fn poll_handler<S: Transport>(
    cx: &mut Context<'_>,
    control: &Control,
    handle: &Handle,
    watch: Option<&mut Departure<'_, S>>,
    future: &mut HandlerFuture,
    timeout: &mut Deadline,
    span: &tracing::Span,
) -> Poll<Called> {
    if control.poll_signals(cx).forced {
        return Poll::Ready(Called::Forced);
    }
    let polled = {
        let _entered = span.enter();
        catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)))
    };
    match polled {
        Ok(Poll::Ready(response)) => return Poll::Ready(Called::Response(response)),
        Ok(Poll::Pending) => {}
        Err(_) => return Poll::Ready(Called::Response(internal_error())),
    }
    if watch.is_some_and(|watch| watch.poll_left(cx).is_ready()) {
        span.in_scope(|| tracing::debug!("the client left while its handler ran"));
        return Poll::Ready(Called::Left);
    }
    if timeout.poll(handle, cx).is_ready() {
        span.in_scope(|| tracing::debug!("the handler missed the request timeout: answered 503"));
        return Poll::Ready(Called::Response(request_timeout_response()));
    }
    Poll::Pending
}

/// A handler's future.
type HandlerFuture = Pin<Box<dyn Future<Output = Response<Body>> + Send>>;

/// Calls the handler in `span`; `None` if the call panicked (answered
/// 500).
fn start(handler: &Handler, request: Request<Body>, span: &tracing::Span) -> Option<HandlerFuture> {
    span.in_scope(|| catch_unwind(AssertUnwindSafe(|| handler(request))))
        .ok()
}

fn internal_error() -> Response<Body> {
    wire::empty_response(StatusCode::INTERNAL_SERVER_ERROR)
}

/// What a streamed body's reading needs of its head.
#[derive(Debug, Clone, Copy)]
struct BodyShape {
    framing: Framing,
    /// The head's length (the body starts after it in the buffer).
    len: usize,
    /// The client waits for `100 Continue`.
    expect_continue: bool,
}

impl BodyShape {
    fn of(head: &Head) -> BodyShape {
        BodyShape {
            framing: head.framing,
            len: head.len,
            expect_continue: head.expect_continue,
        }
    }
}

/// Where a request body's bytes go as [`Connection::read_into`] decodes
/// them.
trait BodySink {
    /// Ready with `true` when it takes more, `false` if nobody reads on.
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<bool>;
    fn put(&mut self, bytes: &[u8]);
}

/// A body read whole before the handler runs.
impl BodySink for Vec<u8> {
    fn poll_room(&mut self, _: &mut Context<'_>) -> Poll<bool> {
        Poll::Ready(true)
    }

    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// A body streamed to its handler.
impl BodySink for &Feed {
    fn poll_room(&mut self, cx: &mut Context<'_>) -> Poll<bool> {
        Feed::poll_room(self, cx)
    }

    fn put(&mut self, bytes: &[u8]) {
        self.push(bytes.to_vec());
    }
}

/// How reading a request body ended ([`Connection::read_into`]).
#[derive(Debug)]
enum Pumped {
    /// To its last byte.
    Whole,
    /// Refused as it came: over the limit (413) or malformed (400, 431).
    Refused(StatusCode),
    /// The client closed, the hard deadline passed, or the body read
    /// timeout did.
    Ended(Read),
    /// The handler dropped the body: nobody reads the rest.
    Abandoned,
}

/// How a handler's call ended.
enum Called {
    /// Its response (or the server's answer for it: 500 after a panic,
    /// 503 past the request timeout).
    Response(Response<Body>),
    /// The hard deadline passed first.
    Forced,
    /// The client left first.
    Left,
}

/// Watches a connection for its client's departure while the server waits
/// on something else (a handler, a silent stream): a read that ends (EOF
/// or an error) means the client left, as hyper takes it (a client that
/// half-closes its writing side to wait for the answer is taken for one
/// that left: HTTP/1.1 clients do not do that). Only while no byte of a
/// next request is in: bytes that come are kept in the buffer (at most one
/// read, 8 KiB) and the watch stops, so pipelined requests still wait in
/// the socket, not in ours.
struct Departure<'a, S> {
    stream: &'a mut S,
    buf: &'a mut Vec<u8>,
    scratch: &'a mut [u8],
    /// The reactor is shutting down (the system terminates): not a
    /// departure, and nothing more to watch.
    stopped: bool,
}

impl<S: Transport> Departure<'_, S> {
    /// Ready once the client has left; registers the read otherwise.
    fn poll_left(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.stopped || !self.buf.is_empty() {
            return Poll::Pending;
        }
        match Pin::new(&mut *self.stream).poll_read(cx, self.scratch) {
            Poll::Ready(Err(e)) if proscenium::net::is_shut_down(&e) => {
                self.stopped = true;
                Poll::Pending
            }
            Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => Poll::Ready(()),
            Poll::Ready(Ok(n)) => {
                self.buf.extend_from_slice(&self.scratch[..n]);
                Poll::Pending
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The handler's `response`, unless its status is informational (1xx):
/// that is not a final response (no framing, and the client would wait
/// for the real one; a `101 Switching Protocols` is served only as a
/// WebSocket's, from `WebSocketUpgrade::on_upgrade` with the feature
/// `websocket`), so it is logged and answered `500 Internal Server Error`.
fn final_response(response: Response<Body>, span: &tracing::Span) -> Response<Body> {
    let status = response.status();
    if !status.is_informational() {
        return response;
    }
    span.in_scope(|| {
        tracing::error!(
            %status,
            "the handler answered with an informational status, which is not a final \
             response: answered 500 instead"
        );
    });
    wire::empty_response(StatusCode::INTERNAL_SERVER_ERROR)
}

fn request(head: Head, body: Body) -> Request<Body> {
    let mut request = Request::new(body);
    *request.method_mut() = head.method;
    *request.uri_mut() = head.uri;
    *request.version_mut() = head.version;
    *request.headers_mut() = head.headers;
    request
}

#[cfg(test)]
mod tests {
    use super::{preface, Preface, HTTP2_PREFACE};

    #[test]
    fn the_preface_is_told_apart_from_http_1_at_the_first_byte_that_differs() {
        assert_eq!(preface(b""), Preface::Maybe);
        assert_eq!(preface(b"PRI * HT"), Preface::Maybe);
        assert_eq!(preface(b"G"), Preface::No);
        assert_eq!(preface(b"PRI * HTTP/1.1\r\n"), Preface::No);
        assert_eq!(preface(HTTP2_PREFACE), Preface::Http2);
        let mut more = HTTP2_PREFACE.to_vec();
        more.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        assert_eq!(preface(&more), Preface::Http2);
        let mut almost = HTTP2_PREFACE.to_vec();
        almost[22] = b'X';
        assert_eq!(preface(&almost), Preface::No);
    }
}
