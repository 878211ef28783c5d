//! The server's counters ([`ServerMetrics`], read with
//! [`ServerBinding::metrics`](crate::ServerBinding::metrics)). At the
//! bottom of the crate's layers (see `lib.rs`): it imports no other
//! module.
//!
//! One set of atomics per binding for the connections, and for the
//! requests one set per scheduler worker (plus one for other threads),
//! summed when read: every worker counts the requests it serves on lines
//! no other worker writes, so the counters cost the request path no
//! cache line shared between cores (with one set, the four updates per
//! request were four read-modify-writes of lines every worker wrote:
//! docs/decisions/0024-per-core-scaling.md). Updated with `Relaxed`
//! read-modify-writes: a counter is a statistic, no other memory is
//! published through it, so no ordering with anything else is needed. A
//! snapshot reads each counter on its own: it is not a consistent cut of
//! all of them (a request may be counted in `requests` and not yet in
//! `in_flight_requests`). A monotonic counter's sum is a value that
//! counter really had (it grows by one at a time, and each part is read
//! between the snapshot's start and end); `in_flight_requests` is counted
//! up and down in the part of the worker where the request started, so
//! each part and the sum are never negative, but the sum of parts read
//! at slightly different times is only close to a value it had.
//!
//! The server updates a counter *before* the event it counts becomes
//! visible to a client (a response is counted before its first byte is
//! written; a request leaves `in_flight_requests` before its response is
//! written; a connection is counted before it is served). A client that
//! has read a response therefore sees the counters include it: the
//! counter's store and the socket write are ordered on the server's thread
//! and the socket's own locking orders the write before the client's read.

use crossbeam_utils::CachePadded;
use http::StatusCode;
use std::net::SocketAddr;
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
    /// Per connection, not per request: one set.
    connections: CachePadded<ConnectionCounters>,
    /// One per worker of the server's scheduler, by worker index, then
    /// one for every other thread (see [`Metrics::part`]).
    requests: Box<[CachePadded<RequestCounters>]>,
    /// The `address` label of the `metrics` feature's metrics: the
    /// address the server listens on.
    #[cfg(feature = "metrics")]
    address: ::metrics::SharedString,
}

#[derive(Debug, Default)]
struct ConnectionCounters {
    accepted: AtomicU64,
    open: AtomicUsize,
    idle_closed_by_termination: AtomicU64,
    /// Open WebSockets (feature `websocket`): written by their connections'
    /// tasks.
    websockets: AtomicUsize,
}

#[derive(Debug)]
struct RequestCounters {
    requests: AtomicU64,
    /// Requests that started on this part's worker and are in the
    /// handler's hands (decremented here wherever they end).
    in_flight: AtomicUsize,
    /// Responses by status code: index `code - 100`. 7.2 KB per part;
    /// counting a response is one `fetch_add` on its code's counter (the
    /// classes are summed at snapshot time).
    responses: [AtomicU64; STATUSES],
}

impl RequestCounters {
    fn new() -> RequestCounters {
        RequestCounters {
            requests: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            responses: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Metrics {
    /// Counters for a server listening on `address` whose connections run
    /// on `workers` workers.
    pub(crate) fn new(workers: usize, address: SocketAddr) -> Metrics {
        #[cfg(not(feature = "metrics"))]
        let _ = address;
        Metrics {
            connections: CachePadded::default(),
            requests: (0..workers.max(1) + 1)
                .map(|_| CachePadded::new(RequestCounters::new()))
                .collect(),
            #[cfg(feature = "metrics")]
            address: address.to_string().into(),
        }
    }

    /// The part of the request counters the calling thread writes: its
    /// worker's, or the last one for any other thread (a worker of another
    /// scheduler included).
    fn part(&self) -> usize {
        let workers = self.requests.len() - 1;
        match proscenium_scheduler::current_worker() {
            Some(worker) if worker.index() < workers => worker.index(),
            _ => workers,
        }
    }

    /// A connection was accepted and is now served.
    pub(crate) fn connection_opened(&self) {
        // Relaxed: a statistic (see the module doc).
        self.connections.accepted.fetch_add(1, Ordering::Relaxed);
        // Relaxed: a statistic (see the module doc).
        self.connections.open.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection's socket is closed.
    pub(crate) fn connection_closed(&self) {
        // Relaxed: a statistic. Called before the connection leaves the
        // server's table under its lock, so whoever sees the table empty
        // (the termination, through that lock) also sees this decrement.
        self.connections.open.fetch_sub(1, Ordering::Relaxed);
    }

    /// A connection became a WebSocket (feature `websocket`).
    #[cfg(feature = "websocket")]
    pub(crate) fn websocket_opened(&self) {
        // Relaxed: a statistic (see the module doc).
        self.connections.websockets.fetch_add(1, Ordering::Relaxed);
    }

    /// A WebSocket's socket is closed (before its connection leaves the
    /// server's table, as `connection_closed`).
    #[cfg(feature = "websocket")]
    pub(crate) fn websocket_closed(&self) {
        // Relaxed: a statistic (see `connection_closed`).
        self.connections.websockets.fetch_sub(1, Ordering::Relaxed);
    }

    /// The WebSockets open now.
    pub(crate) fn open_websockets(&self) -> usize {
        // Relaxed: a statistic (see the module doc).
        self.connections.websockets.load(Ordering::Relaxed)
    }

    /// A request is handed to the handler; the returned guard keeps it in
    /// `in_flight_requests` until it is dropped (when the handler has
    /// answered, or the connection dropped it).
    pub(crate) fn request_started(self: &Arc<Self>) -> InFlight {
        let part = self.part();
        let counters = &self.requests[part];
        // Relaxed: a statistic (see the module doc).
        counters.requests.fetch_add(1, Ordering::Relaxed);
        // Relaxed: a statistic (see the module doc).
        counters.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight {
            metrics: Arc::clone(self),
            part,
        }
    }

    /// A response with `status` is about to be written (an interim
    /// `100 Continue` included).
    pub(crate) fn response(&self, status: StatusCode) {
        let index = usize::from(status.as_u16().saturating_sub(FIRST_STATUS));
        if let Some(counter) = self.requests[self.part()].responses.get(index) {
            // Relaxed: a statistic (see the module doc).
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A termination closed a connection that had no byte of a request in.
    pub(crate) fn idle_closed_on_termination(&self) {
        // Relaxed: a statistic (see the module doc).
        self.connections
            .idle_closed_by_termination
            .fetch_add(1, Ordering::Relaxed);
    }

    /// A snapshot of the counters.
    pub(crate) fn snapshot(&self) -> ServerMetrics {
        // The codes with a response, and their classes' sums from the same
        // loads (so the two views of one snapshot agree).
        let mut by_status = Vec::new();
        let mut classes = [0u64; 5];
        for (i, code) in (FIRST_STATUS..).take(STATUSES).enumerate() {
            let n: u64 = self
                .requests
                .iter()
                // Relaxed: a statistic (see the module doc).
                .map(|part| part.responses[i].load(Ordering::Relaxed))
                .sum();
            if n > 0 {
                by_status.push((code, n));
                // 1xx to 5xx; the non-standard 6xx to 9xx count as 5xx.
                classes[usize::from(code / 100).min(5) - 1] += n;
            }
        }
        // Relaxed: statistics (see the module doc).
        let requests = self
            .requests
            .iter()
            .map(|part| part.requests.load(Ordering::Relaxed))
            .sum();
        // Relaxed: as above.
        let in_flight_requests = self
            .requests
            .iter()
            .map(|part| part.in_flight.load(Ordering::Relaxed))
            .sum();
        ServerMetrics {
            // Relaxed: as above.
            connections_accepted: self.connections.accepted.load(Ordering::Relaxed),
            open_connections: self.connections.open.load(Ordering::Relaxed),
            open_websockets: self.open_websockets(),
            in_flight_requests,
            requests,
            responses: ResponsesByClass {
                informational: classes[0],
                success: classes[1],
                redirection: classes[2],
                client_error: classes[3],
                server_error: classes[4],
            },
            by_status,
            // Relaxed: as above.
            idle_closed_by_termination: self
                .connections
                .idle_closed_by_termination
                .load(Ordering::Relaxed),
        }
    }
}

/// The `metrics` feature: the counters through the facade.
#[cfg(feature = "metrics")]
impl Metrics {
    /// The server's request-duration histogram in the current recorder
    /// (one lookup; a connection keeps it and records each request).
    pub(crate) fn duration_histogram(&self) -> ::metrics::Histogram {
        ::metrics::histogram!(DURATIONS, "address" => self.address.clone())
    }

    /// Publishes a snapshot through the `metrics` facade's recorder (the
    /// system's `publish_metrics` calls it, through the source the binding
    /// added): absolute counters and gauges, each with the label
    /// `address`. Runs on the publishing thread; the request path only
    /// keeps its counters, as without the feature.
    pub(crate) fn publish(&self) {
        use ::metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        let address = || vec![::metrics::Label::new("address", self.address.clone())];
        let snapshot = self.snapshot();
        describe_histogram!(
            DURATIONS,
            Unit::Seconds,
            "Requests handed to the handler: from the head read to the last byte of the response."
        );
        let counters = [
            (
                "proscenium_http_connections_accepted_total",
                "Connections accepted and served.",
                snapshot.connections_accepted,
            ),
            (
                "proscenium_http_handler_requests_total",
                "Requests handed to the handler.",
                snapshot.requests,
            ),
            (
                "proscenium_http_idle_closed_by_termination_total",
                "Idle connections a termination closed.",
                snapshot.idle_closed_by_termination,
            ),
        ];
        for (name, help, value) in counters {
            describe_counter!(name, Unit::Count, help);
            ::metrics::counter!(name, address()).absolute(value);
        }
        describe_counter!(
            REQUESTS,
            Unit::Count,
            "Responses written, by status code (the server's own answers and 100 Continue included)."
        );
        for (status, n) in &snapshot.by_status {
            let mut labels = address();
            labels.push(::metrics::Label::new("status", status.to_string()));
            ::metrics::counter!(REQUESTS, labels).absolute(*n);
        }
        let gauges = [
            (
                "proscenium_http_open_connections",
                "Connections open now.",
                snapshot.open_connections,
            ),
            (
                "proscenium_http_in_flight_requests",
                "Requests in the handler's hands now.",
                snapshot.in_flight_requests,
            ),
        ];
        for (name, help, value) in gauges {
            describe_gauge!(name, Unit::Count, help);
            // Far below 2^53: exact as an f64.
            ::metrics::gauge!(name, address()).set(value as f64);
        }
    }
}

/// The name of the request-duration histogram.
#[cfg(feature = "metrics")]
const DURATIONS: &str = "proscenium_http_request_duration_seconds";
/// The name of the responses-by-status counters.
#[cfg(feature = "metrics")]
const REQUESTS: &str = "proscenium_http_requests_total";

/// A request in the handler's hands (see [`Metrics::request_started`]).
#[derive(Debug)]
pub(crate) struct InFlight {
    metrics: Arc<Metrics>,
    /// The part it was counted in.
    part: usize,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        // Relaxed: a statistic (see the module doc).
        self.metrics.requests[self.part]
            .in_flight
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
    /// Connections upgraded to WebSockets and open (feature `websocket`;
    /// counted in `open_connections` too).
    pub open_websockets: usize,
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
