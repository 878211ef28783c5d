//! A connection that opened with the HTTP/2 preface (h2c, prior
//! knowledge) or chose `h2` by ALPN, served by hyper's HTTP/2 server
//! (feature `http2`), with the server's own rules in the service layer
//! ([`answer`]): the head and body limits and timeouts, CONNECT, the
//! request timeout, the termination responses and the counters. HTTP/1.1
//! stays on the hand-written layer (`http1.rs`), which hands a connection
//! back to `dispatch.rs`, and so over here, when its first bytes are the
//! preface (decision 0029).
//!
//! A protocol (see `lib.rs`): it imports the bottom layer and no other
//! protocol; hyper's runtime on the scheduler (`http2/hyper_rt.rs`) and
//! the frame boundaries it times the connection on (`http2/frames.rs`)
//! are its own.
//!
//! Termination: the connection task watches the connection's signals
//! (`Control`) and passes them to the streams in flight ([`Broadcast`]),
//! each a task of its own. At the termination signal it calls hyper's
//! `graceful_shutdown`: GOAWAY (h2 first sends one with the largest stream
//! id and a PING, then, once the PING's answer shows the client has seen
//! it, the last stream id it will take); the streams in flight finish, a
//! stream that reaches the service meanwhile gets the termination
//! response, and the client opens no more (those above the last id are
//! refused by h2). At the hard deadline a handler still running is
//! answered the deadline-exceeded response, the connection is polled until
//! those responses are handed to hyper (100 ms at most) and dropped.
//!
//! What a client cannot stall or inflate (issue 34): the idle timeout runs
//! while every stream in flight waits on the client (its response is
//! hyper's, waiting for the client's flow-control window or socket) and
//! starts over at each write of response content (a DATA frame's payload,
//! found by `frames.rs` in the bytes written): a client that never opens
//! its window is sent GOAWAY, then cut, and the responses it held are
//! dropped with hyper's connection. The header read timeout runs while
//! the client has a request's header block open. Bodies read whole hold a
//! share of the connection's budget ([`BodyBudget`]) until their handler
//! answers; one that does not fit is answered 503. After hyper's close
//! (GOAWAY seen, or a protocol error) the lingering close also ends once
//! the client is quiet ([`LINGER_QUIET`]).

/// Where HTTP/2 frames begin and end in the bytes a connection reads and
/// writes.
mod frames;
/// hyper's runtime traits on the engine's scheduler.
mod hyper_rt;

use crate::body::{Body, BoxError, RequestBodyError};
use crate::connection::{ConnectionGuard, Control, Deadline, Transport};
use crate::handler::{request_timeout_response, Handler};
use crate::metrics::InFlight;
use crate::protocol::http2::hyper_rt::{Io, Prefixed, SchedulerExecutor, SchedulerTimer};
use crate::settings::ServerSettings;
use crate::wire;
use futures_core::Stream;
use http::header::{CONNECTION, CONTENT_LENGTH};
use http::{Method, Request, Response, StatusCode};
use http_body::Body as _;
use hyper::body::Incoming;
use hyper::server::conn::http2;
use proscenium::{Handle, Sleep};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::{poll_fn, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// The most one read of the lingering close takes.
const LINGER_CHUNK: usize = 8192;

/// How long the lingering close after HTTP/2's GOAWAY waits for a client
/// that sends nothing (at most; the idle timeout if shorter): enough for
/// the frames it sent before it saw the GOAWAY to arrive (see [`linger`]).
const LINGER_QUIET: Duration = Duration::from_secs(2);

/// Serves `stream`, whose first bytes `read` (the HTTP/2 preface and what
/// came with it) were read by the hand-written layer, with hyper's HTTP/2
/// server until it closes; the guard (the connection's entry in the
/// server) is dropped after the socket is closed.
pub(crate) async fn serve<S: Transport>(
    stream: S,
    read: Vec<u8>,
    guard: ConnectionGuard,
    handler: Handler,
    settings: Arc<ServerSettings>,
    handle: Handle,
) {
    tracing::trace!("serving HTTP/2");
    let control = guard.control();
    let io = Io::new(stream);
    let shared = Arc::new(Shared {
        handler,
        settings: Arc::clone(&settings),
        control: Arc::clone(&control),
        handle: handle.clone(),
        broadcast: Broadcast::default(),
        streams: AtomicU64::new(0),
        bodies: BodyBudget {
            limit: settings.body_budget(),
            held: AtomicUsize::new(0),
        },
        #[cfg(feature = "metrics")]
        durations: control.metrics().duration_histogram(),
    });
    let mut builder = http2::Builder::new(SchedulerExecutor(handle.clone()));
    builder
        .timer(SchedulerTimer(handle.clone()))
        // The head bound the hand-written layer applies (h2 answers a
        // larger header list 431 itself; the service checks it again).
        .max_header_list_size(u32::try_from(settings.max_head_bytes).unwrap_or(u32::MAX))
        // Streams open at once per connection (each a task).
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS);
    let service = RequestService(Arc::clone(&shared));
    let mut conn = Box::pin(builder.serve_connection(Prefixed::new(io.clone(), read), service));
    let mut shutting_down = false;
    // The idle timeout: runs while every stream in flight waits on the
    // client (or none is in flight), started over by each write that
    // carries response content.
    let mut idle = Watch::new(settings.idle_timeout);
    // The header read timeout: runs while the client has a request's
    // header block open.
    let mut head = Watch::new(settings.header_read_timeout);
    let mut grace: Option<Sleep> = None;
    let mut closing: Option<Sleep> = None;
    let ended = poll_fn(|cx| {
        let signals = control.poll_signals(cx);
        shared
            .broadcast
            .publish(signals.terminating, signals.forced, cx.waker());
        let in_flight = shared.streams().in_flight;
        if signals.forced {
            // The handlers still running answer the deadline-exceeded
            // response (an HTTP/2 stream's in its own task): the
            // connection is polled until they are handed to hyper and
            // written as far as the socket takes them, for a short grace
            // at most (past the deadline nothing waits on the client).
            let grace = grace.get_or_insert_with(|| handle.sleep(FORCED_GRACE));
            let _ = conn.as_mut().poll(cx);
            if in_flight == 0 || Pin::new(grace).poll(cx).is_ready() {
                return Poll::Ready(Ended::Cut);
            }
            return Poll::Pending;
        }
        if signals.terminating && !shutting_down {
            // Akka: "if a connection has no “in-flight” request, it is
            // terminated immediately"; otherwise its streams in flight
            // finish (GOAWAY).
            shutting_down = true;
            if in_flight == 0 {
                control.metrics().idle_closed_on_termination();
            }
            conn.as_mut().graceful_shutdown();
        }
        match conn.as_mut().poll(cx) {
            Poll::Ready(Ok(())) => return Poll::Ready(Ended::Closed),
            Poll::Ready(Err(e)) if handle.is_shut_down() || shut_down(&e) => {
                // The system terminates under the server: its tasks are
                // dropped, and the termination's futures fail with
                // `SystemTerminated` (not an orderly close).
                tracing::debug!(error = %e, "the scheduler shut down under the connection");
                return Poll::Pending;
            }
            Poll::Ready(Err(e)) => {
                // A protocol error (h2 sent GOAWAY with its code) or an
                // I/O failure.
                tracing::debug!(error = %e, "connection failed");
                return Poll::Ready(Ended::Closed);
            }
            Poll::Pending => {}
        }
        if let Some(closing) = &mut closing {
            return match Pin::new(closing).poll(cx) {
                Poll::Ready(()) => Poll::Ready(Ended::Cut),
                Poll::Pending => Poll::Pending,
            };
        }
        if head.poll(&handle, cx, io.open_block()).is_ready() {
            // A request head that takes longer than the header read
            // timeout (a slowloris: a HEADERS frame whose header block
            // comes an octet at a time; h2 itself refuses a block in more
            // than a few CONTINUATION frames). Its stream does not exist
            // yet, so there is no 408 to send: GOAWAY (written in a short
            // grace), then the close, as HTTP/1.1 closes after its 408.
            tracing::debug!("a request head took longer than the header read timeout");
            if !shutting_down {
                shutting_down = true;
                conn.as_mut().graceful_shutdown();
            }
            closing = Some(handle.sleep(FORCED_GRACE));
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let streams = shared.streams();
        let waiting_on_client = streams.waiting == streams.in_flight;
        let progress = waiting_on_client.then(|| io.content_sent());
        if idle.poll(&handle, cx, progress).is_ready() {
            if shutting_down {
                // Still no progress since the GOAWAY (a client that does
                // not answer h2's PING, or whose streams still wait on
                // its window): cut.
                return Poll::Ready(Ended::Cut);
            }
            // RFC 9113 §9.1: "An endpoint that wishes to close the
            // connection SHOULD send a GOAWAY frame"; hyper closes once the
            // client has seen it and the streams in flight have ended. One
            // more idle timeout without progress bounds that wait.
            tracing::debug!(in_flight = streams.in_flight, "idle: GOAWAY");
            shutting_down = true;
            conn.as_mut().graceful_shutdown();
            idle.restart();
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    })
    .await;
    drop(conn);
    if ended == Ended::Closed {
        linger(&io, &control, &settings, &handle).await;
    }
    drop(io);
    drop(guard);
}

/// Whether `error` comes from the reactor shutting down (the system
/// terminates).
fn shut_down(error: &hyper::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if proscenium::net::is_shut_down(io) {
                return true;
            }
        }
        source = e.source();
    }
    false
}

/// The most streams a client may have open at once on one connection
/// (RFC 9113 §6.5.2 advises no fewer than 100).
const MAX_CONCURRENT_STREAMS: u32 = 256;

/// How long, past the hard deadline, the connection is polled for the
/// deadline-exceeded responses to be handed to hyper and written.
const FORCED_GRACE: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// hyper finished the connection: the client closed, or the server
    /// did after a response that closes it (then linger).
    Closed,
    /// Cut: the hard deadline, or the idle timeout.
    Cut,
}

/// A timeout that runs while it watches a count, and starts over whenever
/// the count changes (or it starts watching again): it fires when the
/// count stays the same for its whole length.
struct Watch {
    deadline: Deadline,
    /// The count when the current wait began; `None` while not watching.
    seen: Option<u64>,
}

impl Watch {
    fn new(after: Duration) -> Watch {
        Watch {
            deadline: Deadline::new(after),
            seen: None,
        }
    }

    /// Watches `count` (`None`: the timeout does not run now).
    fn poll(&mut self, handle: &Handle, cx: &mut Context<'_>, count: Option<u64>) -> Poll<()> {
        let Some(count) = count else {
            self.seen = None;
            return Poll::Pending;
        };
        if self.seen != Some(count) {
            self.seen = Some(count);
            self.deadline.restart();
        }
        self.deadline.poll(handle, cx)
    }

    /// Starts the wait over at the next poll.
    fn restart(&mut self) {
        self.seen = None;
    }
}

/// The lingering close (docs/decisions/0013-http-wire.md): shut down the
/// write half, read and discard until the client closes, the linger
/// timeout, the hard deadline, (terminating) nothing is left to read, or
/// the client has sent nothing for [`LINGER_QUIET`] (or the idle timeout
/// if shorter).
///
/// The last of these is HTTP/2's: after its GOAWAY (hyper closes the
/// connection once the client has seen it, or after a protocol error) the
/// client has nothing more to send that the server takes; what it sent
/// before it saw the GOAWAY arrives within a round trip, and the linger
/// exists for those bytes (closing with them unread would reset the
/// connection and could destroy the GOAWAY). A client that keeps its
/// socket open and silent is not waited on for the whole linger timeout.
async fn linger<S: Transport>(
    io: &Io<S>,
    control: &Control,
    settings: &ServerSettings,
    handle: &Handle,
) {
    // As the hand-written layer's `close`: never waits (a TLS stream's
    // close_notify is written if the socket takes it now).
    let closed = {
        let mut cx = Context::from_waker(Waker::noop());
        match Pin::new(&mut *io.stream()).poll_close(&mut cx) {
            Poll::Ready(result) => result,
            Poll::Pending => Ok(()),
        }
    };
    match closed {
        Err(e) if proscenium::net::is_shut_down(&e) => return system_terminating().await,
        Err(e) if e.kind() != std::io::ErrorKind::NotConnected => {
            tracing::debug!(error = %e, "shutting down the write half failed");
            return;
        }
        _ => {}
    }
    // Tests wait on this event (as on the hand-written layer's).
    tracing::trace!("lingering after the last response");
    if settings.linger_timeout.is_zero() {
        return;
    }
    let mut deadline =
        (settings.linger_timeout != Duration::MAX).then(|| handle.sleep(settings.linger_timeout));
    let mut quiet = Deadline::new(settings.idle_timeout.min(LINGER_QUIET));
    let mut sink = vec![0u8; LINGER_CHUNK];
    let mut shutting_down = false;
    poll_fn(|cx| {
        let signals = control.poll_signals(cx);
        if signals.forced {
            return Poll::Ready(());
        }
        if let Some(deadline) = &mut deadline {
            if Pin::new(deadline).poll(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        for _ in 0..16 {
            match Pin::new(&mut *io.stream()).poll_read(cx, &mut sink) {
                Poll::Ready(Err(e)) if proscenium::net::is_shut_down(&e) => {
                    shutting_down = true;
                    return Poll::Ready(());
                }
                Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return Poll::Ready(()),
                // Bytes: the quiet starts over.
                Poll::Ready(Ok(_)) => quiet.restart(),
                Poll::Pending if signals.terminating => return Poll::Ready(()),
                Poll::Pending => {
                    if quiet.poll(handle, cx).is_ready() {
                        tracing::trace!("the client stayed quiet after the GOAWAY");
                        return Poll::Ready(());
                    }
                    return Poll::Pending;
                }
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
    if shutting_down {
        system_terminating().await;
    }
}

/// The system terminates under the connection (its reactor is shut
/// down): the connection keeps its place until its task is dropped with
/// the workers, so that a termination in progress fails with
/// `SystemTerminated` instead of completing as if the connection had
/// closed in order.
async fn system_terminating() {
    std::future::pending::<()>().await;
}

/// What the connection's requests share.
struct Shared {
    handler: Handler,
    settings: Arc<ServerSettings>,
    control: Arc<Control>,
    handle: Handle,
    broadcast: Broadcast,
    /// The streams in flight (the high half: from the service's call
    /// until hyper drops the response's body) and, of those, the ones
    /// whose response waits on the client (the low half; see
    /// [`Busy::wait_on_client`]), one word so that a reading of both is
    /// one state. Written by the requests' tasks; read by the connection
    /// task.
    streams: AtomicU64,
    /// The bytes of request bodies read whole that the connection's
    /// streams hold (`ServerSettings::max_body_bytes_per_connection`).
    bodies: BodyBudget,
    /// `proscenium_http_request_duration_seconds` of this server (the
    /// `metrics` feature): looked up once per connection.
    #[cfg(feature = "metrics")]
    durations: ::metrics::Histogram,
}

/// The bytes of request bodies read whole that one connection may hold at
/// once, and those it holds.
struct BodyBudget {
    limit: usize,
    /// Written by the streams' tasks as their bodies come and their
    /// handlers answer ([`Share`]).
    held: AtomicUsize,
}

/// One stream's share of the [`BodyBudget`], given back when dropped
/// (once its handler has answered, or its body was refused).
struct Share<'a> {
    budget: &'a BodyBudget,
    held: usize,
}

impl<'a> Share<'a> {
    fn new(budget: &'a BodyBudget) -> Share<'a> {
        Share { budget, held: 0 }
    }

    /// Grows the share to `bytes`; `false` (and unchanged) if the budget
    /// has not that much left.
    #[must_use]
    fn cover(&mut self, bytes: usize) -> bool {
        let Some(more) = bytes.checked_sub(self.held).filter(|&n| n > 0) else {
            return true;
        };
        let limit = self.budget.limit;
        // Relaxed: a count of bytes, which publishes nothing; the
        // read-modify-writes alone keep it exact.
        let taken = self
            .budget
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |held| {
                held.checked_add(more).filter(|&total| total <= limit)
            });
        if taken.is_ok() {
            self.held = bytes;
        }
        taken.is_ok()
    }
}

impl Drop for Share<'_> {
    fn drop(&mut self) {
        // Relaxed: see `cover`.
        self.budget.held.fetch_sub(self.held, Ordering::Relaxed);
    }
}

/// [`Shared::streams`]: one stream in flight.
const IN_FLIGHT: u64 = 1 << 32;
/// [`Shared::streams`]: one stream whose response waits on the client.
const WAITING: u64 = 1;

/// A reading of [`Shared::streams`].
#[derive(Debug, Clone, Copy)]
struct Streams {
    in_flight: u64,
    waiting: u64,
}

impl Shared {
    fn streams(&self) -> Streams {
        // Acquire: pairs with the Release updates in `Busy`, so that the
        // connection task sees a request counted before its effects
        // (what it wrote, what woke the task).
        Streams::of(self.streams.load(Ordering::Acquire))
    }

    /// Adds `delta` to the counts (subtracts it unless `add`); wakes the
    /// connection task if now every stream in flight waits on the client
    /// (the idle timeout starts: hyper may not wake the task for it, as a
    /// response waiting for a window writes nothing).
    fn count(&self, delta: u64, add: bool) {
        // Release: pairs with the Acquire load in `streams`.
        let word = if add {
            self.streams.fetch_add(delta, Ordering::Release) + delta
        } else {
            self.streams.fetch_sub(delta, Ordering::Release) - delta
        };
        let streams = Streams::of(word);
        if streams.waiting == streams.in_flight {
            self.broadcast.wake_connection();
        }
    }
}

impl Streams {
    fn of(word: u64) -> Streams {
        Streams {
            in_flight: word >> 32,
            waiting: word & (IN_FLIGHT - 1),
        }
    }
}

/// The connection's signals, passed on to its requests (an HTTP/2
/// connection's run as tasks of their own, each with its waker).
#[derive(Default)]
struct Broadcast {
    state: Mutex<BroadcastState>,
}

#[derive(Default)]
struct BroadcastState {
    terminating: bool,
    forced: bool,
    next_id: u64,
    wakers: HashMap<u64, Waker>,
    /// The connection task's.
    connection: Option<Waker>,
}

impl Broadcast {
    fn lock(&self) -> std::sync::MutexGuard<'_, BroadcastState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the connection's signals and its task's waker; wakes the
    /// requests on a change.
    fn publish(&self, terminating: bool, forced: bool, connection: &Waker) {
        let wakers: Vec<Waker> = {
            let mut state = self.lock();
            match &state.connection {
                Some(w) if w.will_wake(connection) => {}
                _ => state.connection = Some(connection.clone()),
            }
            if state.terminating == terminating && state.forced == forced {
                return;
            }
            state.terminating = terminating;
            state.forced = forced;
            state.wakers.values().cloned().collect()
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    fn register(&self) -> u64 {
        let mut state = self.lock();
        state.next_id += 1;
        state.next_id
    }

    /// (terminating, forced); `id`'s task is woken on a change.
    fn poll(&self, id: u64, cx: &mut Context<'_>) -> (bool, bool) {
        let mut state = self.lock();
        match state.wakers.get(&id) {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => {
                state.wakers.insert(id, cx.waker().clone());
            }
        }
        (state.terminating, state.forced)
    }

    fn signals(&self) -> (bool, bool) {
        let state = self.lock();
        (state.terminating, state.forced)
    }

    fn forget(&self, id: u64) {
        self.lock().wakers.remove(&id);
    }

    /// Wakes the connection task.
    fn wake_connection(&self) {
        let waker = self.lock().connection.clone();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The hyper service: each request is [`answer`]ed.
#[derive(Clone)]
struct RequestService(Arc<Shared>);

impl hyper::service::Service<Request<Incoming>> for RequestService {
    type Response = Response<Tracked>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Tracked>, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let shared = Arc::clone(&self.0);
        Box::pin(async move { Ok(answer(shared, request).await) })
    }
}

/// A response body that keeps its request counted in flight until it ends
/// or is dropped, and says whether it waits on the client.
struct Tracked {
    body: Body,
    busy: Busy,
}

impl Tracked {
    fn new(body: Body, mut busy: Busy) -> Tracked {
        // hyper has the response: it waits on the client's window (and
        // socket) until its body is polled and has nothing yet.
        busy.wait_on_client(true);
        Tracked { body, busy }
    }
}

impl http_body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, BoxError>>> {
        let body = &mut self.body;
        let polled = match catch_unwind(AssertUnwindSafe(|| Pin::new(body).poll_frame(cx))) {
            Ok(polled) => polled,
            Err(_) => Poll::Ready(Some(Err("a streamed response body panicked".into()))),
        };
        // Pending: the handler's stream has nothing yet (server-sent
        // events between two events), which is no fault of the client's;
        // what it yields waits for the client's window until hyper asks
        // for more.
        self.busy.wait_on_client(polled.is_ready());
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// One request counted in [`Shared::streams`] while alive (from the
/// service's call until hyper drops its response's body, written).
struct Busy {
    shared: Arc<Shared>,
    /// Counted as waiting on the client.
    waiting: bool,
    /// When its head was in, for a request handed to the handler: its
    /// duration is recorded when it ends (the `metrics` feature), as the
    /// hand-written layer records it.
    #[cfg(feature = "metrics")]
    handled: Option<std::time::Instant>,
}

impl Busy {
    fn new(shared: &Arc<Shared>) -> Busy {
        shared.count(IN_FLIGHT, true);
        Busy {
            shared: Arc::clone(shared),
            waiting: false,
            #[cfg(feature = "metrics")]
            handled: None,
        }
    }

    /// Whether the request now waits on the client: its response is
    /// hyper's to send and neither the handler nor its body has work to
    /// do (the body was not polled yet, or it yielded what hyper holds
    /// until the client's flow-control window, or the socket, takes it).
    /// While every request in flight waits so, the idle timeout runs.
    fn wait_on_client(&mut self, waiting: bool) {
        if self.waiting != waiting {
            self.waiting = waiting;
            self.shared.count(WAITING, waiting);
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        #[cfg(feature = "metrics")]
        if let Some(started) = self.handled {
            self.shared.durations.record(started.elapsed());
        }
        let waiting = if self.waiting { WAITING } else { 0 };
        self.shared.count(IN_FLIGHT + waiting, false);
    }
}

/// A response from the server itself, counted.
fn own(
    mut response: Response<Body>,
    busy: Busy,
    span: &tracing::Span,
    control: &Control,
) -> Response<Tracked> {
    // HTTP/2 has no connection-specific fields (RFC 9113 §8.2.2): the
    // termination responses' `Connection: close` is HTTP/1.1's; the
    // connection's end is its GOAWAY.
    for name in CONNECTION_SPECIFIC {
        response.headers_mut().remove(name);
    }
    span.record("status", response.status().as_u16());
    control.metrics().response(response.status());
    response.map(|body| Tracked::new(body, busy))
}

/// The server's rules around the handler, for one request.
async fn answer(shared: Arc<Shared>, request: Request<Incoming>) -> Response<Tracked> {
    #[cfg(feature = "metrics")]
    let started = std::time::Instant::now();
    #[cfg_attr(not(feature = "metrics"), allow(unused_mut))]
    let mut busy = Busy::new(&shared);
    let id = shared.broadcast.register();
    let _forget = Forget(&shared.broadcast, id);
    let control = &shared.control;
    let settings = &shared.settings;
    let (parts, incoming) = request.into_parts();
    let span = tracing::debug_span!(
        "http_request",
        method = %parts.method,
        path = parts.uri.path(),
        status = tracing::field::Empty,
    );
    let refuse =
        |status: StatusCode, busy: Busy| own(wire::empty_response(status), busy, &span, control);
    // The head's size as the hand-written layer bounded it (hyper's own
    // bound is its read buffer): 431.
    let head_len = parts.method.as_str().len()
        + parts.uri.to_string().len()
        + 12
        + parts
            .headers
            .iter()
            .map(|(n, v)| n.as_str().len() + v.len() + 4)
            .sum::<usize>()
        + 2;
    if head_len > settings.max_head_bytes {
        return refuse(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, busy);
    }
    // RFC 9110 §10.1.1: an expectation other than 100-continue may be
    // answered 417 (hyper passes it on).
    let unknown_expectation = parts
        .headers
        .get_all(http::header::EXPECT)
        .iter()
        .any(|v| !v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    if unknown_expectation {
        return refuse(StatusCode::EXPECTATION_FAILED, busy);
    }
    // RFC 9110 §9.3.6: no tunnels here.
    if parts.method == Method::CONNECT {
        return refuse(StatusCode::NOT_IMPLEMENTED, busy);
    }
    // Akka: "no new requests will be delivered to the user handler. All
    // such drained responses will be replied to with an termination
    // response".
    let terminating_response = |busy: Busy| {
        own(
            settings.termination.terminating.to_response(),
            busy,
            &span,
            control,
        )
    };
    if shared.broadcast.signals().0 || control.signals().terminating {
        return terminating_response(busy);
    }
    // The body, whole, within `max_body_bytes` and the body read timeout.
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > settings.max_body_bytes as u64) {
        return refuse(StatusCode::PAYLOAD_TOO_LARGE, busy);
    }
    // A body read whole holds its share of the connection's budget until
    // its handler has answered; a declared length takes it all at once.
    let mut share = Share::new(&shared.bodies);
    let body = if settings.stream_request_bodies && !incoming.is_end_stream() {
        // The handler reads the stream's DATA frames as they come (h2's
        // flow control is the backpressure), under the same limits.
        Body::from_stream(Streamed::new(incoming, settings, &shared.handle))
    } else {
        let declared = declared.and_then(|n| usize::try_from(n).ok());
        if !incoming.is_end_stream() {
            if !share.cover(declared.unwrap_or(0)) {
                return refuse(over_budget(), busy);
            }
            // Tests wait on this event (the declared length is counted).
            span.in_scope(|| tracing::trace!("reading the request body"));
        }
        match read_whole(&shared, id, incoming, &mut share).await {
            Ok(bytes) => Body::from(bytes),
            Err(Some(status)) => return refuse(status, busy),
            Err(None) => return terminating_response(busy),
        }
    };
    let request = Request::from_parts(parts, body);

    #[cfg(feature = "metrics")]
    {
        busy.handled = Some(started);
    }
    let in_flight: InFlight = control.metrics().request_started();
    let called = call(&shared, id, request, &span).await;
    drop(share);
    drop(in_flight);
    let response = match called {
        Some(response) => response,
        None => {
            // Akka: "if user code does not reply with a response within
            // the deadline we produce a special [...]
            // terminationDeadlineExceededResponse HTTP response (e.g. 503
            // Service Unavailable) with a Connection: close header and
            // close connection."
            let response = settings.termination.deadline_exceeded.to_response();
            return own(response, busy, &span, control);
        }
    };
    let mut response = final_response(response, &span);
    // A handler written for HTTP/1.1 may say `Connection: close` (or set
    // another connection-specific field): on HTTP/2 they mean nothing and
    // are not sent (RFC 9113 §8.2.2; hyper would drop them with a
    // warning). Akka's "Connection: close" on a response during a
    // termination is, on HTTP/2, the GOAWAY already sent.
    for name in CONNECTION_SPECIFIC {
        response.headers_mut().remove(name);
    }
    span.record("status", response.status().as_u16());
    control.metrics().response(response.status());
    response.map(|body| Tracked::new(body, busy))
}

/// The fields RFC 9113 §8.2.2 forbids on HTTP/2 (`TE` is allowed only in
/// requests).
const CONNECTION_SPECIFIC: [http::header::HeaderName; 5] = [
    CONNECTION,
    http::header::TRANSFER_ENCODING,
    http::header::UPGRADE,
    http::header::HeaderName::from_static("keep-alive"),
    http::header::HeaderName::from_static("proxy-connection"),
];

/// A stream's body, whole ([`Streamed`] collected), within `share` of the
/// connection's budget: `Err(Some(status))` if refused (413 over
/// `max_body_bytes`, 503 over the budget, 408 late, 400 reset),
/// `Err(None)` if the server terminates first.
async fn read_whole(
    shared: &Shared,
    id: u64,
    incoming: Incoming,
    share: &mut Share<'_>,
) -> Result<Vec<u8>, Option<StatusCode>> {
    let mut body = Streamed::new(incoming, &shared.settings, &shared.handle);
    let mut bytes = Vec::new();
    poll_fn(|cx| loop {
        let (terminating, forced) = shared.broadcast.poll(id, cx);
        if forced || terminating {
            return Poll::Ready(Err(None));
        }
        match Pin::new(&mut body).poll_next(cx) {
            Poll::Ready(Some(Ok(data))) => {
                if !share.cover(bytes.len() + data.len()) {
                    return Poll::Ready(Err(Some(over_budget())));
                }
                bytes.extend_from_slice(&data);
            }
            Poll::Ready(Some(Err(e))) => {
                return Poll::Ready(Err(Some(match e {
                    RequestBodyError::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
                    RequestBodyError::TimedOut => StatusCode::REQUEST_TIMEOUT,
                    _ => StatusCode::BAD_REQUEST,
                })))
            }
            Poll::Ready(None) => return Poll::Ready(Ok(())),
            Poll::Pending => return Poll::Pending,
        }
    })
    .await
    .map(|()| bytes)
}

/// The answer to a body past the connection's budget (logged).
fn over_budget() -> StatusCode {
    tracing::debug!(
        "the request bodies of the connection are over max_body_bytes_per_connection: 503"
    );
    StatusCode::SERVICE_UNAVAILABLE
}

/// A stream's body as it comes (its DATA frames): what a handler reads
/// when bodies stream (`ServerSettings::stream_request_bodies`), and what
/// [`read_whole`] collects. Ends with a [`RequestBodyError`] if it grows
/// past `max_body_bytes`, passes the body read timeout, stays silent for
/// the idle timeout, or its stream is reset.
struct Streamed {
    incoming: Incoming,
    total: usize,
    max: usize,
    whole: Deadline,
    idle: Deadline,
    handle: Handle,
    done: bool,
}

impl Streamed {
    fn new(incoming: Incoming, settings: &ServerSettings, handle: &Handle) -> Streamed {
        Streamed {
            incoming,
            total: 0,
            max: settings.max_body_bytes,
            whole: Deadline::new(settings.body_read_timeout),
            idle: Deadline::new(settings.idle_timeout),
            handle: handle.clone(),
            done: false,
        }
    }
}

impl Stream for Streamed {
    type Item = Result<bytes::Bytes, RequestBodyError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        let cut = |this: &mut Streamed, error: RequestBodyError| {
            this.done = true;
            Poll::Ready(Some(Err(error)))
        };
        loop {
            match Pin::new(&mut this.incoming).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    // Progress: the idle timeout starts over.
                    this.idle.restart();
                    if let Ok(data) = frame.into_data() {
                        this.total = this.total.saturating_add(data.len());
                        if this.total > this.max {
                            return cut(this, RequestBodyError::TooLarge);
                        }
                        return Poll::Ready(Some(Ok(data)));
                    }
                    // Trailers: dropped, as on HTTP/1.1.
                }
                Poll::Ready(Some(Err(e))) => {
                    tracing::debug!(error = %e, "reading a request body failed");
                    return cut(this, RequestBodyError::ClientLeft);
                }
                Poll::Ready(None) => {
                    this.done = true;
                    return Poll::Ready(None);
                }
                Poll::Pending => {
                    let whole = this.whole.poll(&this.handle, cx).is_ready();
                    let quiet = this.idle.poll(&this.handle, cx).is_ready();
                    if whole || quiet {
                        return cut(this, RequestBodyError::TimedOut);
                    }
                    return Poll::Pending;
                }
            }
        }
    }
}

/// Unregisters a request's waker from the broadcast when it ends.
struct Forget<'a>(&'a Broadcast, u64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.forget(self.1);
    }
}

/// Runs the handler in `span`: a panic answers 500, the request timeout
/// 503; `None` at the hard deadline.
async fn call(
    shared: &Shared,
    id: u64,
    request: Request<Body>,
    span: &tracing::Span,
) -> Option<Response<Body>> {
    let internal_error = || wire::empty_response(StatusCode::INTERNAL_SERVER_ERROR);
    let handler = &shared.handler;
    let called = span.in_scope(|| catch_unwind(AssertUnwindSafe(|| handler(request))));
    let mut future = match called {
        Ok(future) => future,
        Err(_) => return Some(internal_error()),
    };
    let mut timeout = Deadline::new(shared.settings.request_timeout);
    poll_fn(|cx| {
        if shared.broadcast.poll(id, cx).1 {
            return Poll::Ready(None);
        }
        let polled = {
            let _entered = span.enter();
            catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx)))
        };
        match polled {
            Ok(Poll::Ready(response)) => Poll::Ready(Some(response)),
            Ok(Poll::Pending) => match timeout.poll(&shared.handle, cx) {
                Poll::Ready(()) => Poll::Ready(Some(request_timeout_response())),
                Poll::Pending => Poll::Pending,
            },
            Err(_) => Poll::Ready(Some(internal_error())),
        }
    })
    .await
}

/// A handler's 1xx answer is not final: 500 (as the hand-written layer).
fn final_response(response: Response<Body>, span: &tracing::Span) -> Response<Body> {
    if !response.status().is_informational() {
        return response;
    }
    span.in_scope(|| {
        tracing::error!(
            status = %response.status(),
            "the handler answered with an informational status, which is not a final \
             response: answered 500 instead"
        );
    });
    wire::empty_response(StatusCode::INTERNAL_SERVER_ERROR)
}
