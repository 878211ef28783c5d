//! One connection: read a request, call the handler, write the response,
//! in order, until the connection closes (keep-alive and pipelining fall
//! out of the loop: pipelined requests wait in the buffer).

use crate::binding::{ConnectionGuard, Control, Handler, ServerSettings};
use crate::body::Body;
use crate::wire::{self, Framed, Framing, Head, Parsed};
use futures_io::{AsyncRead, AsyncWrite};
use http::{Method, Request, Response, StatusCode, Version};
use proscenium::net::TcpStream;
use std::future::poll_fn;
use std::io;
use std::net::Shutdown;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

/// Serves `stream` until it closes; the guard (the connection's entry in
/// the server) is dropped after the socket is closed.
pub(crate) async fn serve(
    stream: TcpStream,
    guard: ConnectionGuard,
    handler: Handler,
    settings: Arc<ServerSettings>,
) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "setting TCP_NODELAY failed");
    }
    let mut connection = Connection {
        stream,
        control: guard.control(),
        buf: Vec::with_capacity(4096),
        settings,
    };
    if let Err(e) = connection.run(&handler).await {
        tracing::debug!(error = %e, "connection failed");
    }
    drop(connection);
    drop(guard);
}

/// Why the loop stopped reading.
enum Read {
    /// `n` more bytes are in the buffer.
    Data,
    /// The peer closed, or the server closes this connection (idle while
    /// terminating, or the hard deadline passed).
    Closed,
}

struct Connection {
    stream: TcpStream,
    control: Arc<Control>,
    /// Bytes read and not yet consumed (the next, maybe pipelined, requests).
    buf: Vec<u8>,
    settings: Arc<ServerSettings>,
}

impl Connection {
    async fn run(&mut self, handler: &Handler) -> io::Result<()> {
        loop {
            let head = match self.read_head().await? {
                Some(Ok(head)) => head,
                Some(Err(status)) => return self.refuse(status).await,
                None => return Ok(()),
            };
            let body = match self.read_body(&head).await? {
                Some(Ok(body)) => body,
                Some(Err(status)) => return self.refuse(status).await,
                None => return Ok(()),
            };
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
            // termination response".
            if self.control.signals().terminating {
                let response = self.settings.termination.terminating.to_response();
                span.record("status", response.status().as_u16());
                return self.answer_and_close(&response, head_request).await;
            }
            let keep_alive_10 = head.version == Version::HTTP_10 && head.keep_alive;
            let keep_alive = head.keep_alive;
            let request = request(head, body);
            let in_flight = self.control.metrics().request_started();
            let response = self.call(handler, request, &span).await;
            drop(in_flight);
            let Some(response) = response else {
                // The hard deadline passed. Akka: "if user code does not
                // reply with a response within the deadline we produce a
                // special [...] terminationDeadlineExceededResponse HTTP
                // response (e.g. 503 Service Unavailable) with a
                // Connection: close header and close connection."
                let response = self.settings.termination.deadline_exceeded.to_response();
                span.record("status", response.status().as_u16());
                self.answer_now_and_close(&response, head_request).await;
                return Ok(());
            };
            span.record("status", response.status().as_u16());
            self.control.metrics().response(response.status());
            // Akka: "if user code emits a response within the timeout, then
            // this response is sent to the client with a Connection: close
            // header and connection is closed."
            let close = !keep_alive
                || wire::response_closes(&response)
                || self.control.signals().terminating;
            let framed = Framed {
                close,
                keep_alive_10,
                head_request,
            };
            if !self.write(&wire::encode(&response, framed)).await? || close {
                return self.close();
            }
        }
    }

    /// The next request head; `Some(Err(status))` if it is refused, `None`
    /// if the connection closed first.
    async fn read_head(&mut self) -> io::Result<Option<Result<Head, StatusCode>>> {
        loop {
            match wire::parse_head(&self.buf) {
                Parsed::Complete(head) => return Ok(Some(Ok(head))),
                Parsed::Invalid(status) => return Ok(Some(Err(status))),
                Parsed::Partial if self.buf.len() >= self.settings.max_head_bytes => {
                    return Ok(Some(Err(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)));
                }
                Parsed::Partial => {
                    // Idle: no byte of the next request yet. Akka: "if a
                    // connection has no “in-flight” request, it is
                    // terminated immediately".
                    let idle = self.buf.is_empty();
                    if let Read::Closed = self.read_more(idle).await? {
                        return Ok(None);
                    }
                    if idle {
                        // From here on the connection is not idle: a
                        // termination lets this request arrive and answers
                        // it (tests wait on this event).
                        tracing::trace!("receiving a request");
                    }
                }
            }
        }
    }

    /// The body of the request `head` heads, consumed from the buffer with
    /// the head.
    async fn read_body(&mut self, head: &Head) -> io::Result<Option<Result<Body, StatusCode>>> {
        match head.framing {
            Framing::Length(n) => {
                if n > self.settings.max_body_bytes {
                    return Ok(Some(Err(StatusCode::PAYLOAD_TOO_LARGE)));
                }
                let end = head.len + n;
                if !self.fill(end).await? {
                    return Ok(None);
                }
                let body = self.buf[head.len..end].to_vec();
                self.buf.drain(..end);
                Ok(Some(Ok(Body::from(body))))
            }
            Framing::Chunked => self.read_chunked(head.len).await,
        }
    }

    /// A chunked body starting at `start` (RFC 9112 §7.1); trailers are
    /// read and dropped.
    async fn read_chunked(&mut self, start: usize) -> io::Result<Option<Result<Body, StatusCode>>> {
        const MAX_LINE: usize = 4096;
        let mut pos = start;
        let mut body = Vec::new();
        loop {
            match httparse::parse_chunk_size(&self.buf[pos..]) {
                Ok(httparse::Status::Complete((used, size))) => {
                    pos += used;
                    if size == 0 {
                        break;
                    }
                    let size = match usize::try_from(size) {
                        Ok(size) if body.len() + size <= self.settings.max_body_bytes => size,
                        _ => return Ok(Some(Err(StatusCode::PAYLOAD_TOO_LARGE))),
                    };
                    if !self.fill(pos + size + 2).await? {
                        return Ok(None);
                    }
                    body.extend_from_slice(&self.buf[pos..pos + size]);
                    if &self.buf[pos + size..pos + size + 2] != b"\r\n" {
                        return Ok(Some(Err(StatusCode::BAD_REQUEST)));
                    }
                    pos += size + 2;
                }
                Ok(httparse::Status::Partial) if self.buf.len() - pos > MAX_LINE => {
                    return Ok(Some(Err(StatusCode::BAD_REQUEST)));
                }
                Ok(httparse::Status::Partial) => {
                    if let Read::Closed = self.read_more(false).await? {
                        return Ok(None);
                    }
                }
                Err(_) => return Ok(Some(Err(StatusCode::BAD_REQUEST))),
            }
        }
        // Trailer lines until the empty line.
        loop {
            match self.buf[pos..].windows(2).position(|w| w == b"\r\n") {
                Some(0) => {
                    pos += 2;
                    break;
                }
                Some(i) => pos += i + 2,
                None if self.buf.len() - pos > self.settings.max_head_bytes => {
                    return Ok(Some(Err(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)));
                }
                None => {
                    if let Read::Closed = self.read_more(false).await? {
                        return Ok(None);
                    }
                }
            }
        }
        self.buf.drain(..pos);
        Ok(Some(Ok(Body::from(body))))
    }

    /// Reads until the buffer holds `len` bytes; false if the connection
    /// closed first.
    async fn fill(&mut self, len: usize) -> io::Result<bool> {
        while self.buf.len() < len {
            if let Read::Closed = self.read_more(false).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Reads more bytes into the buffer. Closed when the peer closes, at
    /// the hard deadline, or (if `idle`) once the server terminates and no
    /// byte is readable.
    async fn read_more(&mut self, idle: bool) -> io::Result<Read> {
        let mut chunk = [0u8; 8192];
        let stream = &mut self.stream;
        let control = &self.control;
        let read = poll_fn(|cx| {
            let signals = control.poll_signals(cx);
            if signals.forced {
                return Poll::Ready(Ok(0));
            }
            match Pin::new(&mut *stream).poll_read(cx, &mut chunk) {
                Poll::Pending if signals.terminating && idle => Poll::Ready(Ok(0)),
                other => other,
            }
        })
        .await?;
        if read == 0 {
            return Ok(Read::Closed);
        }
        self.buf.extend_from_slice(&chunk[..read]);
        Ok(Read::Data)
    }

    /// Writes all of `bytes`; false if the hard deadline passed first.
    async fn write(&mut self, mut bytes: &[u8]) -> io::Result<bool> {
        let stream = &mut self.stream;
        let control = &self.control;
        while !bytes.is_empty() {
            let written = poll_fn(|cx| {
                if control.poll_signals(cx).forced {
                    return Poll::Ready(Ok(None));
                }
                Pin::new(&mut *stream).poll_write(cx, bytes).map_ok(Some)
            })
            .await?;
            match written {
                None => return Ok(false),
                Some(0) => return Err(io::ErrorKind::WriteZero.into()),
                Some(n) => bytes = &bytes[n..],
            }
        }
        Ok(true)
    }

    /// Answers `status` with an empty body and `Connection: close`, then
    /// closes.
    async fn refuse(&mut self, status: StatusCode) -> io::Result<()> {
        self.answer_and_close(&wire::empty_response(status), false)
            .await
    }

    /// Writes `response` (counted) with `Connection: close`, then closes.
    async fn answer_and_close(
        &mut self,
        response: &Response<Body>,
        head_request: bool,
    ) -> io::Result<()> {
        self.control.metrics().response(response.status());
        let framed = Framed {
            close: true,
            keep_alive_10: false,
            head_request,
        };
        self.write(&wire::encode(response, framed)).await?;
        self.close()
    }

    /// Writes as much of `response` (counted) as the socket takes without
    /// waiting, with `Connection: close`, then closes: past the hard
    /// deadline nothing may wait on the client.
    async fn answer_now_and_close(&mut self, response: &Response<Body>, head_request: bool) {
        self.control.metrics().response(response.status());
        let framed = Framed {
            close: true,
            keep_alive_10: false,
            head_request,
        };
        let bytes = wire::encode(response, framed);
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
    /// response); the socket closes when the connection drops.
    fn close(&mut self) -> io::Result<()> {
        match self.stream.shutdown(Shutdown::Write) {
            Err(e) if e.kind() != io::ErrorKind::NotConnected => Err(e),
            _ => Ok(()),
        }
    }

    /// Runs the handler in `span`; a panic (calling it or polling its
    /// future) answers 500. `None` if the hard deadline passed first.
    async fn call(
        &mut self,
        handler: &Handler,
        request: Request<Body>,
        span: &tracing::Span,
    ) -> Option<Response<Body>> {
        let internal_error = || wire::empty_response(StatusCode::INTERNAL_SERVER_ERROR);
        let called = span.in_scope(|| catch_unwind(AssertUnwindSafe(|| handler(request))));
        let mut future = match called {
            Ok(future) => future,
            Err(_) => return Some(internal_error()),
        };
        let control = &self.control;
        poll_fn(|cx| {
            if control.poll_signals(cx).forced {
                return Poll::Ready(None);
            }
            let _entered = span.enter();
            match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
                Ok(Poll::Ready(response)) => Poll::Ready(Some(response)),
                Ok(Poll::Pending) => Poll::Pending,
                Err(_) => Poll::Ready(Some(internal_error())),
            }
        })
        .await
    }
}

fn request(head: Head, body: Body) -> Request<Body> {
    let mut request = Request::new(body);
    *request.method_mut() = head.method;
    *request.uri_mut() = head.uri;
    *request.version_mut() = head.version;
    *request.headers_mut() = head.headers;
    request
}
