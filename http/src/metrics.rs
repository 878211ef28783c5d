//! The server's counters ([`ServerMetrics`], read with
//! [`ServerBinding::metrics`](crate::ServerBinding::metrics)).
//!
//! One set of atomics per binding, updated with `Relaxed` read-modify-writes
//! on the request path: a counter is a statistic, no other memory is
//! published through it, so no ordering with anything else is needed. A
//! snapshot reads each counter on its own: it is not a consistent cut of
//! all of them (a request may be counted in `requests` and not yet in
//! `in_flight_requests`), but each value is one the counter really had.
//!
//! The server updates a counter *before* the event it counts becomes
//! visible to a client (a response is counted before its first byte is
//! written; a request leaves `in_flight_requests` before its response is
//! written; a connection is counted before it is served). A client that
//! has read a response therefore sees the counters include it: the
//! counter's store and the socket write are ordered on the server's thread
//! and the socket's own locking orders the write before the client's read.

use http::StatusCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// The live counters of one binding, shared by the accept loop and every
/// connection.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    connections_accepted: AtomicU64,
    open_connections: AtomicUsize,
    in_flight_requests: AtomicUsize,
    requests: AtomicU64,
    /// Responses by class: index 0 is 1xx, ..., 4 is 5xx.
    responses: [AtomicU64; 5],
    idle_closed_by_termination: AtomicU64,
}

impl Metrics {
    /// A connection was accepted and is now served.
    pub(crate) fn connection_opened(&self) {
        // Relaxed: a statistic (see the module doc).
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
        // Relaxed: a statistic (see the module doc).
        self.open_connections.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection's socket is closed.
    pub(crate) fn connection_closed(&self) {
        // Relaxed: a statistic. Called before the connection leaves the
        // server's table under its lock, so whoever sees the table empty
        // (the termination, through that lock) also sees this decrement.
        self.open_connections.fetch_sub(1, Ordering::Relaxed);
    }

    /// A request is handed to the handler; the returned guard keeps it in
    /// `in_flight_requests` until it is dropped (when the handler has
    /// answered, or the connection dropped it).
    pub(crate) fn request_started(self: &Arc<Self>) -> InFlight {
        // Relaxed: a statistic (see the module doc).
        self.requests.fetch_add(1, Ordering::Relaxed);
        // Relaxed: a statistic (see the module doc).
        self.in_flight_requests.fetch_add(1, Ordering::Relaxed);
        InFlight {
            metrics: Arc::clone(self),
        }
    }

    /// A response with `status` is about to be written.
    pub(crate) fn response(&self, status: StatusCode) {
        let class = usize::from(status.as_u16() / 100).clamp(1, 5) - 1;
        // Relaxed: a statistic (see the module doc).
        self.responses[class].fetch_add(1, Ordering::Relaxed);
    }

    /// A snapshot of the counters.
    /// A termination closed a connection that had no byte of a request in.
    pub(crate) fn idle_closed_on_termination(&self) {
        // Relaxed: a statistic (see the module doc).
        self.idle_closed_by_termination
            .fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> ServerMetrics {
        // Relaxed loads: statistics (see the module doc).
        let responses = |i: usize| self.responses[i].load(Ordering::Relaxed);
        ServerMetrics {
            connections_accepted: self.connections_accepted.load(Ordering::Relaxed),
            open_connections: self.open_connections.load(Ordering::Relaxed),
            in_flight_requests: self.in_flight_requests.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            responses: ResponsesByClass {
                informational: responses(0),
                success: responses(1),
                redirection: responses(2),
                client_error: responses(3),
                server_error: responses(4),
            },
            idle_closed_by_termination: self.idle_closed_by_termination.load(Ordering::Relaxed),
        }
    }
}

/// A request in the handler's hands (see [`Metrics::request_started`]).
#[derive(Debug)]
pub(crate) struct InFlight {
    metrics: Arc<Metrics>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Relaxed: a statistic (see the module doc).
        self.metrics
            .in_flight_requests
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// A snapshot of a server's counters, from
/// [`ServerBinding::metrics`](crate::ServerBinding::metrics).
///
/// Each value is read on its own (the snapshot is not a consistent cut
/// across them), and each is updated before the event it counts is
/// visible to a client: once a client has read a response, the counters
/// include that response and its request.
///
/// ```
/// use http::{Request, Response};
/// use proscenium::ActorSystem;
/// use proscenium_http::{Body, Http};
/// use std::io::{Read, Write};
///
/// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
/// let binding = Http::bind(&system, "127.0.0.1:0".parse()?, |_: Request<Body>| async {
///     Response::new(Body::from("hi"))
/// })?;
/// let mut client = std::net::TcpStream::connect(binding.local_addr())?;
/// client.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
/// client.read_to_end(&mut Vec::new())?;
///
/// let metrics = binding.metrics();
/// assert_eq!(metrics.requests, 1);
/// assert_eq!(metrics.responses.success, 1);
/// assert_eq!(metrics.in_flight_requests, 0);
/// system.terminate().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ServerMetrics {
    /// Connections accepted since the server was bound (each one served;
    /// those refused during termination are not counted).
    pub connections_accepted: u64,
    /// Connections open now.
    pub open_connections: usize,
    /// Requests handed to the handler whose handler has not answered yet.
    pub in_flight_requests: usize,
    /// Requests handed to the handler since the server was bound (not the
    /// ones the server answered itself: malformed or too large requests,
    /// and requests refused during termination).
    pub requests: u64,
    /// Responses written, by status class, the server's own answers (400,
    /// 413, 503 during termination, ...) included.
    pub responses: ResponsesByClass,
    /// Connections a termination closed because they were idle: no byte
    /// of a next request was in when the server looked (Akka: "if a
    /// connection has no “in-flight” request, it is terminated
    /// immediately"). A keep-alive client whose next request was already
    /// on its way sees such a close as a connection closed without a
    /// response (HTTP/1.1's keep-alive race: RFC 9112 §9.3.1 lets it retry
    /// an idempotent request); load generators such as wrk count it as a
    /// read error.
    pub idle_closed_by_termination: u64,
}

/// Responses by status class (see [`ServerMetrics::responses`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ResponsesByClass {
    /// 1xx.
    pub informational: u64,
    /// 2xx.
    pub success: u64,
    /// 3xx.
    pub redirection: u64,
    /// 4xx.
    pub client_error: u64,
    /// 5xx (and the non-standard 6xx to 9xx).
    pub server_error: u64,
}

impl ResponsesByClass {
    /// Every response, of any class.
    pub fn total(&self) -> u64 {
        self.informational + self.success + self.redirection + self.client_error + self.server_error
    }

    /// The count for `status`'s class.
    pub fn of_class(&self, status: StatusCode) -> u64 {
        match status.as_u16() / 100 {
            1 => self.informational,
            2 => self.success,
            3 => self.redirection,
            4 => self.client_error,
            _ => self.server_error,
        }
    }
}
