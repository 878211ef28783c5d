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

/// The lowest status code (`http::StatusCode` holds 100 to 999).
const FIRST_STATUS: u16 = 100;
/// Status codes counted, one counter each: every code a `StatusCode` can
/// hold, so none is lumped with another.
const STATUSES: usize = 900;

/// The live counters of one binding, shared by the accept loop and every
/// connection.
#[derive(Debug)]
pub(crate) struct Metrics {
    connections_accepted: AtomicU64,
    open_connections: AtomicUsize,
    in_flight_requests: AtomicUsize,
    requests: AtomicU64,
    /// Responses by status code: index `code - 100`. 7.2 KB per binding;
    /// counting a response is one `fetch_add` on its code's counter (the
    /// classes are summed at snapshot time).
    responses: [AtomicU64; STATUSES],
    idle_closed_by_termination: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            connections_accepted: AtomicU64::new(0),
            open_connections: AtomicUsize::new(0),
            in_flight_requests: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            responses: std::array::from_fn(|_| AtomicU64::new(0)),
            idle_closed_by_termination: AtomicU64::new(0),
        }
    }
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

    /// A response with `status` is about to be written (an interim
    /// `100 Continue` included).
    pub(crate) fn response(&self, status: StatusCode) {
        let index = usize::from(status.as_u16().saturating_sub(FIRST_STATUS));
        if let Some(counter) = self.responses.get(index) {
            // Relaxed: a statistic (see the module doc).
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A termination closed a connection that had no byte of a request in.
    pub(crate) fn idle_closed_on_termination(&self) {
        // Relaxed: a statistic (see the module doc).
        self.idle_closed_by_termination
            .fetch_add(1, Ordering::Relaxed);
    }

    /// A snapshot of the counters.
    pub(crate) fn snapshot(&self) -> ServerMetrics {
        // The codes with a response, and their classes' sums from the same
        // loads (so the two views of one snapshot agree).
        let mut by_status = Vec::new();
        let mut classes = [0u64; 5];
        for (code, counter) in (FIRST_STATUS..).zip(&self.responses) {
            // Relaxed: a statistic (see the module doc).
            let n = counter.load(Ordering::Relaxed);
            if n > 0 {
                by_status.push((code, n));
                // 1xx to 5xx; the non-standard 6xx to 9xx count as 5xx.
                classes[usize::from(code / 100).min(5) - 1] += n;
            }
        }
        ServerMetrics {
            connections_accepted: self.connections_accepted.load(Ordering::Relaxed),
            open_connections: self.open_connections.load(Ordering::Relaxed),
            in_flight_requests: self.in_flight_requests.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            responses: ResponsesByClass {
                informational: classes[0],
                success: classes[1],
                redirection: classes[2],
                client_error: classes[3],
                server_error: classes[4],
            },
            by_status,
            // Relaxed: a statistic (see the module doc).
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
/// assert_eq!(metrics.responses_with(http::StatusCode::OK), 1);
/// assert_eq!(metrics.in_flight_requests, 0);
/// system.terminate().wait();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
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
    /// 413, 503 during termination, ...) and interim `100 Continue`
    /// responses included. By exact status:
    /// [`responses_with`](Self::responses_with) and
    /// [`responses_by_status`](Self::responses_by_status).
    pub responses: ResponsesByClass,
    /// `(code, count)` of every status with at least one response, in code
    /// order.
    by_status: Vec<(u16, u64)>,
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

impl ServerMetrics {
    /// Responses written with `status` (as counted in
    /// [`responses`](Self::responses)).
    pub fn responses_with(&self, status: StatusCode) -> u64 {
        let code = status.as_u16();
        self.by_status
            .binary_search_by_key(&code, |&(c, _)| c)
            .map_or(0, |i| self.by_status[i].1)
    }

    /// Every status with at least one response, and its count, in code
    /// order.
    pub fn responses_by_status(&self) -> impl Iterator<Item = (StatusCode, u64)> + '_ {
        self.by_status.iter().filter_map(|&(code, n)| {
            // Every code counted came from a `StatusCode`.
            StatusCode::from_u16(code).ok().map(|status| (status, n))
        })
    }
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
