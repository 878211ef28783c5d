//! [`ServerSettings`]: the limits and timeouts every protocol applies, and
//! the responses the server sends on its own during a termination
//! ([`ServerSettings::termination_response`]); with the feature `tls`, the
//! certificate (`settings/tls.rs`). The bottom of the crate's layers (see
//! `lib.rs`): it knows nothing of the server; `config.rs` reads it from
//! TOML.

use crate::body::Body;
use http::header::CONNECTION;
use http::{HeaderMap, Response, StatusCode};
use std::time::Duration;

/// The certificate a binding serves HTTPS with (feature `tls`).
#[cfg(feature = "tls")]
pub(crate) mod tls;

/// Limits of the server and the responses it sends on its own during a
/// termination (the defaults suit most services).
#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub(crate) max_head_bytes: usize,
    pub(crate) max_body_bytes: usize,
    /// `None`: twice `max_body_bytes` (see [`ServerSettings::body_budget`]).
    pub(crate) max_body_bytes_per_connection: Option<usize>,
    pub(crate) idle_timeout: Duration,
    pub(crate) header_read_timeout: Duration,
    pub(crate) max_connections: usize,
    pub(crate) linger_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) body_read_timeout: Duration,
    /// The responses sent during termination (their setters below).
    pub(crate) termination: TerminationResponses,
    pub(crate) stream_request_bodies: bool,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<tls::Tls>,
}

impl Default for ServerSettings {
    fn default() -> ServerSettings {
        ServerSettings {
            max_head_bytes: 16 * 1024,
            max_body_bytes: 8 * 1024 * 1024,
            max_body_bytes_per_connection: None,
            idle_timeout: Duration::from_secs(60),
            header_read_timeout: Duration::from_secs(30),
            max_connections: 1024,
            linger_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(20),
            body_read_timeout: Duration::from_secs(60),
            termination: TerminationResponses::default(),
            stream_request_bodies: false,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl ServerSettings {
    /// The largest request head (request line and headers) accepted;
    /// beyond it the answer is 431 and the connection closes. Default
    /// 16 KiB.
    pub fn max_head_bytes(mut self, bytes: usize) -> ServerSettings {
        self.max_head_bytes = bytes;
        self
    }

    /// The largest request body accepted; beyond it the answer is 413 and
    /// the connection closes. Default 8 MiB.
    pub fn max_body_bytes(mut self, bytes: usize) -> ServerSettings {
        self.max_body_bytes = bytes;
        self
    }

    /// The most bytes of request bodies read whole that one connection
    /// holds at once. An HTTP/1.1 connection reads one request at a time,
    /// so `max_body_bytes` bounds it; an HTTP/2 connection reads up to 256
    /// streams at once, and without this bound each could hold
    /// `max_body_bytes` (2 GiB at the default 8 MiB).
    ///
    /// A body counts from its first byte (all of its `Content-Length` at
    /// once when it declares one) until its handler has answered. An
    /// HTTP/2 stream whose body does not fit is answered `503 Service
    /// Unavailable` without calling the handler: at once when its declared
    /// length does not fit, or as soon as its bytes pass the budget (its
    /// bytes so far are dropped). Nothing of it was processed, so the
    /// client may send it again once its other requests are answered.
    ///
    /// Default: twice `max_body_bytes` (so twice whatever it is set to);
    /// never less than `max_body_bytes`, so that a body the server accepts
    /// can always be read when it is the connection's only one. Bodies
    /// streamed to the handler
    /// ([`stream_request_bodies`](Self::stream_request_bodies)) do not
    /// count: the handler holds what it has read, and what waits for it is
    /// bounded by HTTP/2's flow control (1 MiB per connection).
    pub fn max_body_bytes_per_connection(mut self, bytes: usize) -> ServerSettings {
        self.max_body_bytes_per_connection = Some(bytes);
        self
    }

    /// The budget [`max_body_bytes_per_connection`](Self::max_body_bytes_per_connection)
    /// sets, or its default. Only HTTP/2 reads it (an HTTP/1.1 connection
    /// holds one body at a time).
    #[cfg_attr(not(feature = "http2"), allow(dead_code))]
    pub(crate) fn body_budget(&self) -> usize {
        self.max_body_bytes_per_connection
            .unwrap_or(self.max_body_bytes.saturating_mul(2))
            .max(self.max_body_bytes)
    }

    /// How long a connection may stay idle (Akka's
    /// `akka.http.server.idle-timeout`, same default: 60 s): a keep-alive
    /// connection with no byte of a next request for this long is closed;
    /// a read of a request body, or a write of a response the client does
    /// not read, that makes no progress for this long closes the
    /// connection too (a body cut short is answered 408 first).
    /// `Duration::MAX`: never.
    ///
    /// On HTTP/2 the timeout runs while no request is in the server's
    /// hands: no stream is open, or every open one waits on the client
    /// (its response waits for the client's flow-control window, or for a
    /// socket the client does not read). It starts over whenever the
    /// client accepts response content (a DATA frame's payload is
    /// written); control frames (PING, SETTINGS, WINDOW_UPDATE) do not
    /// count. At its end the connection is sent GOAWAY, and
    /// it is closed after one more idle timeout without progress (or as
    /// soon as the client has seen the GOAWAY and no stream is left);
    /// the responses still waiting are dropped with it. A handler still
    /// running, or a streamed response body that has nothing to send yet,
    /// keeps the timeout from running (the request timeout and a
    /// termination's hard deadline bound those).
    pub fn idle_timeout(mut self, timeout: Duration) -> ServerSettings {
        self.idle_timeout = timeout;
        self
    }

    /// How long a request head may take to arrive once its first byte is
    /// in (against slowloris: a client trickling header bytes to hold a
    /// connection); beyond it the answer is 408 and the connection closes.
    /// Akka has no such setting (its idle timeout is reset by each byte).
    /// Default 30 s; `Duration::MAX`: never.
    ///
    /// On HTTP/2 it bounds each request's header block, from its HEADERS
    /// frame's header to the end of the frame that ends the block: beyond
    /// it, the stream not being open yet, the connection is sent GOAWAY
    /// and closed (without a 408).
    pub fn header_read_timeout(mut self, timeout: Duration) -> ServerSettings {
        self.header_read_timeout = timeout;
        self
    }

    /// The most connections served at once (Akka's
    /// `akka.http.server.max-connections`, same default: 1024). At the
    /// limit the server stops accepting: new connections wait in the
    /// listen backlog (or are refused by the kernel once it is full) and
    /// are accepted as open ones close. At least 1.
    pub fn max_connections(mut self, connections: usize) -> ServerSettings {
        self.max_connections = connections.max(1);
        self
    }

    /// How long a connection lingers after its last response (Akka's
    /// `akka.http.server.linger-timeout`, same default: 1 min).
    ///
    /// A response that closes the connection (`Connection: close`: a
    /// refusal such as 400 or 413, the termination response, a handler's
    /// response to a request that asked to close, ...) is followed by a
    /// *lingering close* (RFC 9112 §9.6): the server shuts down its write
    /// half, so the client reads the response and then EOF, and reads and
    /// discards whatever the client still sends (a refused body, pipelined
    /// requests) until the client closes, this timeout passes, or a
    /// termination's hard deadline does. Closing at once instead, with
    /// unread bytes in the socket, would make the kernel send a reset that
    /// can destroy the response before the client has read it (and fails
    /// the client's writes). During a termination, a lingering connection
    /// with nothing to read is closed at once, as an idle one is.
    ///
    /// `Duration::ZERO`: no lingering (close at once); `Duration::MAX`:
    /// linger until the client closes.
    ///
    /// On HTTP/2 the connection lingers after hyper has closed it (the
    /// client saw the GOAWAY, or sent a protocol error); there the
    /// lingering also ends once the client has sent nothing for 2 s (or
    /// for the idle timeout if shorter): what it sent before it saw the
    /// GOAWAY has arrived by then, and a client that keeps its socket open
    /// and silent does not hold the connection for the whole linger
    /// timeout.
    pub fn linger_timeout(mut self, timeout: Duration) -> ServerSettings {
        self.linger_timeout = timeout;
        self
    }

    /// How long the handler may take to produce its response once the
    /// whole request is in (Akka's `akka.http.server.request-timeout`,
    /// same default: 20 s; as in Akka, the timer starts at the end of the
    /// request, so a long upload keeps its time to be processed). Beyond
    /// it the handler's future is dropped and the answer is `503 Service
    /// Unavailable`; the connection goes on. A streamed response body is
    /// not bounded by it once its head is produced (the idle timeout and a
    /// termination's hard deadline bound it). `Duration::MAX`: never.
    pub fn request_timeout(mut self, timeout: Duration) -> ServerSettings {
        self.request_timeout = timeout;
        self
    }

    /// How long a request body may take to arrive once its head is in,
    /// whatever its pace (not Akka's: its idle timeout is reset by each
    /// byte, so a body trickled a byte at a time holds a connection
    /// forever); beyond it the answer is `408 Request Timeout` and the
    /// connection closes. The body-side counterpart of
    /// [`header_read_timeout`](Self::header_read_timeout). Default 60 s
    /// (an 8 MiB body then needs about 140 KB/s); `Duration::MAX`: never.
    pub fn body_read_timeout(mut self, timeout: Duration) -> ServerSettings {
        self.body_read_timeout = timeout;
        self
    }

    /// Whether request bodies stream to the handler (default `false`:
    /// each body is read whole before the handler is called, and
    /// `request.body().as_bytes()` holds it).
    ///
    /// On, a request with a body reaches the handler as soon as its head
    /// is in, its [`Body`] a stream the handler reads as the client sends
    /// ([`Body::next_chunk`], [`Body::read_all`], or as an
    /// `http_body::Body`): an upload can go to disk or to an actor piece
    /// by piece instead of into memory whole. At most 64 KiB wait between
    /// the socket and the handler; past that the server stops reading
    /// until the handler takes some, and the client's sending slows down
    /// with TCP's window. `max_body_bytes`, the body read timeout and the
    /// idle timeout still hold: a body that breaks them ends with an error
    /// the handler reads (and the connection closes after its response),
    /// as does a body whose client left or that is malformed. A handler
    /// that answers before reading the whole body (or drops it) gets its
    /// response sent, then the connection is closed. A body whose
    /// `Content-Length` is over `max_body_bytes` is still answered 413
    /// without calling the handler. During a termination, a request whose
    /// handler runs is in flight: its body is read on until the hard
    /// deadline.
    ///
    /// On HTTP/2 the same holds for each stream.
    pub fn stream_request_bodies(mut self, on: bool) -> ServerSettings {
        self.stream_request_bodies = on;
        self
    }

    /// Serves HTTPS (feature `tls`): every connection of the binding
    /// begins with a TLS handshake (bounded by the header read timeout),
    /// and ALPN chooses HTTP/2 (`h2`, with the `http2` feature) or
    /// HTTP/1.1. Everything else (limits, timeouts, the termination) is
    /// the same as on plain connections. Not a configuration key: the
    /// certificate is the application's to load ([`Tls::from_pem_files`](crate::Tls::from_pem_files)).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, tls: tls::Tls) -> ServerSettings {
        self.tls = Some(tls);
        self
    }
}

/// A response the server sends on its own during a termination: kept as
/// parts, since `Response` is not `Clone` (and a body only as bytes: a
/// stream could be sent once).
#[derive(Debug, Clone)]
pub(crate) struct CannedResponse {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl CannedResponse {
    /// 503 with an empty body (Akka's default for both responses).
    pub(crate) fn unavailable() -> CannedResponse {
        CannedResponse {
            status: StatusCode::SERVICE_UNAVAILABLE,
            headers: HeaderMap::new(),
            body: Vec::new(),
        }
    }

    fn from_response(response: Response<Body>) -> Result<CannedResponse, InvalidResponse> {
        let (parts, body) = response.into_parts();
        if parts.status.is_informational() {
            return Err(InvalidResponse::Informational(parts.status));
        }
        if body.is_stream() {
            return Err(InvalidResponse::Streamed);
        }
        let mut headers = parts.headers;
        // The server sends `Connection: close` itself.
        headers.remove(CONNECTION);
        Ok(CannedResponse {
            status: parts.status,
            headers,
            body: body.into_bytes(),
        })
    }

    /// A fresh copy of the response.
    pub(crate) fn to_response(&self) -> Response<Body> {
        let mut response = Response::new(Body::from(self.body.clone()));
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers.clone();
        response
    }
}

/// A termination response the server cannot send on its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidResponse {
    /// A 1xx status: it would not be a final answer, and the client would
    /// wait for another one.
    #[error("a termination response must have a final status (200 to 599), not {0}")]
    Informational(StatusCode),
    /// A streamed body ([`Body::from_stream`]): a stream can be sent only
    /// once, and the response is sent to every late request.
    #[error("a termination response must have a full body, not a stream")]
    Streamed,
}

/// The responses sent during termination.
#[derive(Debug, Clone)]
pub(crate) struct TerminationResponses {
    /// To a request that arrives on a live connection during termination.
    pub(crate) terminating: CannedResponse,
    /// To a request whose handler missed the hard deadline.
    pub(crate) deadline_exceeded: CannedResponse,
}

impl Default for TerminationResponses {
    fn default() -> TerminationResponses {
        TerminationResponses {
            terminating: CannedResponse::unavailable(),
            deadline_exceeded: CannedResponse::unavailable(),
        }
    }
}

impl ServerSettings {
    /// The response to a request that arrives on a live connection while
    /// the server terminates (Akka: "handles replying to new incoming
    /// requests with (configurable) “terminating” HTTP responses"). Sent
    /// with `Connection: close` (a `Connection` header of its own is
    /// dropped), after which the connection closes; the handler is not
    /// called. Default: `503 Service Unavailable` with an empty body.
    ///
    /// ```
    /// use http::{Response, StatusCode};
    /// use proscenium_http::{Body, ServerSettings};
    ///
    /// let mut goodbye = Response::new(Body::from("shutting down, retry elsewhere"));
    /// *goodbye.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    /// goodbye.headers_mut().insert("retry-after", "5".parse()?);
    /// let settings = ServerSettings::default().termination_response(goodbye)?;
    /// # let _ = settings;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Fails for a 1xx status, which is not a final answer.
    pub fn termination_response(
        mut self,
        response: Response<Body>,
    ) -> Result<ServerSettings, InvalidResponse> {
        self.termination.terminating = CannedResponse::from_response(response)?;
        Ok(self)
    }

    /// The response sent instead of the handler's when the handler has not
    /// answered by the termination's hard deadline (Akka's
    /// `termination-deadline-exceeded-response`), with `Connection: close`
    /// (a `Connection` header of its own is dropped). It is written only if
    /// the socket takes it at once; the connection closes either way.
    /// Default: `503 Service Unavailable` with an empty body.
    ///
    /// Fails for a 1xx status, which is not a final answer.
    pub fn termination_deadline_exceeded_response(
        mut self,
        response: Response<Body>,
    ) -> Result<ServerSettings, InvalidResponse> {
        self.termination.deadline_exceeded = CannedResponse::from_response(response)?;
        Ok(self)
    }
}
