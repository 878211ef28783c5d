//! What the termination, coordinated-shutdown, observability and client
//! tests share: a raw std client, handlers the test controls (a gate the
//! slow handler awaits), a waker that says whether it was woken, and a
//! tracing subscriber that records spans and events so a test can wait on
//! one.
#![allow(dead_code)] // each test file uses part of it
#![allow(unreachable_pub)] // a test module: `pub` is for the test files
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

pub mod pki;
pub mod raw_h2;

use http::{Request, Response, StatusCode};
use proscenium::{ActorSystem, ShutdownConfig};
use proscenium_http::{Body, Http, ServerBinding, ServerSettings};
use std::collections::HashMap;
use std::future::Future;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

/// How long a test waits for an event before it fails (not a sleep: the
/// wait ends as soon as the event happens).
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A system of two unpinned workers that no signal shuts down.
pub fn system() -> ActorSystem {
    ActorSystem::builder()
        .workers(2)
        .pin_workers(false)
        .coordinated_shutdown(ShutdownConfig::default().run_by_signals(false))
        .build()
        .expect("system")
}

pub fn connect(binding: &ServerBinding) -> TcpStream {
    let stream = TcpStream::connect(binding.local_addr()).expect("connect");
    // A safety net: a test that waits for bytes that never come fails
    // instead of hanging.
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream
}

/// One response read off a stream: status, headers (lowercase names), body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

pub fn read_answer(stream: &mut TcpStream) -> Answer {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = stream.read(&mut byte).expect("read");
        assert_eq!(
            n,
            1,
            "EOF in a response head: {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map(|(_, v)| v.parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).expect("body");
    Answer {
        status,
        headers,
        body: String::from_utf8(body).unwrap(),
    }
}

/// The server closed the connection: EOF (or a reset) and no more bytes.
/// Fails if the connection is still open after [`PATIENCE`] (the read
/// times out) or if a byte comes.
pub fn assert_eof(stream: &mut TcpStream) {
    if stream.read_timeout().unwrap().is_none() {
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
    }
    let mut rest = Vec::new();
    match stream.read_to_end(&mut rest) {
        Ok(_) => {}
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!(
                "the connection was not closed (no EOF within {PATIENCE:?}); got {:?}",
                String::from_utf8_lossy(&rest)
            )
        }
        Err(e) => assert!(
            matches!(
                e.kind(),
                ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
            ),
            "reading to EOF: {e}"
        ),
    }
    assert!(
        rest.is_empty(),
        "more bytes: {:?}",
        String::from_utf8_lossy(&rest)
    );
}

pub fn get(stream: &mut TcpStream, path: &str) {
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
}

/// A future the test completes: the slow handler waits on it.
#[derive(Clone, Default)]
pub struct Gate(Arc<Mutex<(bool, Vec<Waker>)>>);

impl Gate {
    pub fn open(&self) {
        let wakers = {
            let mut state = self.0.lock().unwrap();
            state.0 = true;
            std::mem::take(&mut state.1)
        };
        wakers.into_iter().for_each(Waker::wake);
    }
}

impl Future for Gate {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.0.lock().unwrap();
        if state.0 {
            Poll::Ready(())
        } else {
            state.1.push(cx.waker().clone());
            Poll::Pending
        }
    }
}

/// A server whose `/slow` handler reports on `entered` (with the path) and
/// then waits for `gate`; `/hang` reports and never answers; every other
/// path answers at once with `"<method> <path> <body length>"`.
pub fn slow_server_with(
    system: &ActorSystem,
    settings: ServerSettings,
    gate: Gate,
) -> (ServerBinding, mpsc::Receiver<String>) {
    let (entered_tx, entered) = mpsc::channel();
    let entered_tx = Mutex::new(entered_tx);
    let binding = Http::bind_with(
        system,
        "127.0.0.1:0".parse().unwrap(),
        settings,
        move |req: Request<Body>| {
            let gate = gate.clone();
            let path = req.uri().path().to_string();
            let (slow, hang) = (path.starts_with("/slow"), path.starts_with("/hang"));
            if slow || hang {
                // The receiver may be gone once the test has what it wanted.
                let _ = entered_tx.lock().unwrap().send(path.clone());
            }
            async move {
                if hang {
                    std::future::pending::<()>().await;
                }
                if slow {
                    gate.await;
                }
                let text = format!("{} {} {}", req.method(), path, req.body().len());
                let mut response = Response::new(Body::from(text));
                *response.status_mut() = StatusCode::OK;
                response
            }
        },
    )
    .expect("bind");
    (binding, entered)
}

pub fn slow_server(system: &ActorSystem, gate: Gate) -> (ServerBinding, mpsc::Receiver<String>) {
    slow_server_with(system, ServerSettings::default(), gate)
}

/// Receives what a handler reported, failing the test after [`PATIENCE`].
pub fn entered(rx: &mpsc::Receiver<String>) -> String {
    rx.recv_timeout(PATIENCE).expect("the handler was entered")
}

/// A waker that records whether it was woken.
#[derive(Default)]
pub struct Flag(AtomicBool);

impl Flag {
    pub fn woken(&self) -> bool {
        // SeqCst: a test-side flag, no hot path.
        self.0.load(Ordering::SeqCst)
    }
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        // SeqCst: a test-side flag, no hot path.
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Polls `future` once with a waker that records its wake.
pub fn poll_once<F: Future + Unpin>(future: &mut F, flag: &Arc<Flag>) -> Poll<F::Output> {
    let waker = Waker::from(Arc::clone(flag));
    Pin::new(future).poll(&mut Context::from_waker(&waker))
}

// ---------------------------------------------------------------------------
// A tracing subscriber that records the crate's spans and events.

/// A recorded span: its name, fields and parent, and whether it closed.
#[derive(Debug, Clone)]
pub struct SpanData {
    pub name: &'static str,
    metadata: &'static tracing::Metadata<'static>,
    pub fields: HashMap<String, String>,
    pub parent: Option<u64>,
    /// Handles to it still alive (it closed at zero).
    refs: usize,
}

impl SpanData {
    /// Every handle to the span was dropped (a connection's span closes
    /// once its task is over).
    pub fn closed(&self) -> bool {
        self.refs == 0
    }
}

/// A recorded event: its message, fields and the span it happened in.
#[derive(Debug, Clone)]
pub struct EventData {
    pub fields: HashMap<String, String>,
    pub span: Option<u64>,
}

#[derive(Default)]
struct Recorded {
    spans: HashMap<u64, SpanData>,
    events: Vec<EventData>,
}

/// Every span and event of `proscenium_http`, recorded since the first
/// [`capture`] of the test binary.
pub struct Capture {
    recorded: Mutex<Recorded>,
    changed: Condvar,
    next_id: AtomicU64,
}

thread_local! {
    static ENTERED: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The process's capture, installed as the global subscriber on first use.
pub fn capture() -> &'static Capture {
    static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
    CAPTURE.get_or_init(|| {
        let capture: &'static Capture = Box::leak(Box::new(Capture {
            recorded: Mutex::new(Recorded::default()),
            changed: Condvar::new(),
            next_id: AtomicU64::new(1),
        }));
        tracing::subscriber::set_global_default(Subscriber(capture))
            .expect("no other global subscriber in this test binary");
        capture
    })
}

/// Spans created after a [`Capture::mark`]: a connection from a client
/// port that an earlier connection of the test binary also had is told
/// apart.
#[derive(Debug, Clone, Copy)]
pub struct Mark(u64);

impl Capture {
    /// Spans created from now on are after this mark.
    pub fn mark(&self) -> Mark {
        // Relaxed: new ids are taken under no other ordering; a span
        // created concurrently may or may not be after the mark, and the
        // test takes the mark before it connects.
        Mark(self.next_id.load(Ordering::Relaxed))
    }

    /// The recording; one a panicking test left poisoned is whole (every
    /// change under the lock is one insert or push).
    fn recording(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.recorded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits until `found` finds something in the recording; fails the test
    /// after [`PATIENCE`].
    pub fn wait_for<T>(&self, mut found: impl FnMut(&Recording<'_>) -> Option<T>) -> T {
        let mut recorded = self.recording();
        loop {
            if let Some(t) = found(&Recording(&recorded)) {
                return t;
            }
            let (next, timeout) = self.changed.wait_timeout(recorded, PATIENCE).unwrap();
            if timeout.timed_out() {
                // Not under the lock: a failed test leaves the recording
                // usable by the tests that run on in this binary.
                drop(next);
                panic!("the awaited trace never came");
            }
            recorded = next;
        }
    }

    /// Waits for an event with `message` on the connection from `peer`.
    pub fn wait_event_on(&self, mark: Mark, peer: SocketAddr, message: &str) {
        self.wait_for(|r| {
            r.events_on(mark, peer)
                .into_iter()
                .find(|e| e.fields.get("message").map(String::as_str) == Some(message))
                .map(|_| ())
        })
    }
}

/// A view of what was recorded.
pub struct Recording<'a>(&'a Recorded);

impl Recording<'_> {
    /// Every event recorded, in order.
    pub fn events(&self) -> &[EventData] {
        &self.0.events
    }

    /// The connection span whose peer is `peer`, created after `mark`.
    pub fn connection(&self, mark: Mark, peer: SocketAddr) -> Option<(u64, &SpanData)> {
        let peer = peer.to_string();
        self.0
            .spans
            .iter()
            .filter(|(id, _)| **id >= mark.0)
            .find(|(_, s)| s.name == "http_connection" && s.fields.get("peer") == Some(&peer))
            .map(|(id, s)| (*id, s))
    }

    /// The span `id`.
    pub fn span(&self, id: u64) -> Option<&SpanData> {
        self.0.spans.get(&id)
    }

    /// Whether span `id` is `ancestor` or inside it.
    fn within(&self, mut id: u64, ancestor: u64) -> bool {
        loop {
            if id == ancestor {
                return true;
            }
            match self.0.spans.get(&id).and_then(|s| s.parent) {
                Some(parent) => id = parent,
                None => return false,
            }
        }
    }

    /// Events that happened inside the connection from `peer`.
    pub fn events_on(&self, mark: Mark, peer: SocketAddr) -> Vec<&EventData> {
        let Some((conn, _)) = self.connection(mark, peer) else {
            return Vec::new();
        };
        self.0
            .events
            .iter()
            .filter(|e| e.span.is_some_and(|s| self.within(s, conn)))
            .collect()
    }

    /// The request spans of the connection from `peer`, in creation order.
    pub fn requests_on(&self, mark: Mark, peer: SocketAddr) -> Vec<&SpanData> {
        let Some((conn, _)) = self.connection(mark, peer) else {
            return Vec::new();
        };
        let mut spans: Vec<(u64, &SpanData)> = self
            .0
            .spans
            .iter()
            .filter(|(_, s)| s.name == "http_request" && s.parent == Some(conn))
            .map(|(id, s)| (*id, s))
            .collect();
        spans.sort_by_key(|(id, _)| *id);
        spans.into_iter().map(|(_, s)| s).collect()
    }
}

struct Subscriber(&'static Capture);

struct Fields<'a>(&'a mut HashMap<String, String>);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

fn current_span() -> Option<u64> {
    ENTERED.with(|e| e.borrow().last().copied())
}

impl tracing::Subscriber for Subscriber {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.target().starts_with("proscenium_http")
    }

    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        // Relaxed: only uniqueness matters.
        let id = self.0.next_id.fetch_add(1, Ordering::Relaxed);
        let mut fields = HashMap::new();
        span.record(&mut Fields(&mut fields));
        let parent = if span.is_contextual() {
            current_span()
        } else {
            span.parent().map(tracing::span::Id::into_u64)
        };
        let data = SpanData {
            name: span.metadata().name(),
            metadata: span.metadata(),
            fields,
            parent,
            refs: 1,
        };
        self.0.recording().spans.insert(id, data);
        self.0.changed.notify_all();
        tracing::span::Id::from_u64(id)
    }

    fn record(&self, span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut recorded = self.0.recording();
        if let Some(data) = recorded.spans.get_mut(&span.into_u64()) {
            values.record(&mut Fields(&mut data.fields));
        }
        drop(recorded);
        self.0.changed.notify_all();
    }

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = HashMap::new();
        event.record(&mut Fields(&mut fields));
        let span = if event.is_contextual() {
            current_span()
        } else {
            event.parent().map(tracing::span::Id::into_u64)
        };
        self.0.recording().events.push(EventData { fields, span });
        self.0.changed.notify_all();
    }

    fn clone_span(&self, span: &tracing::span::Id) -> tracing::span::Id {
        if let Some(data) = self.0.recording().spans.get_mut(&span.into_u64()) {
            data.refs += 1;
        }
        span.clone()
    }

    fn try_close(&self, span: tracing::span::Id) -> bool {
        let mut recorded = self.0.recording();
        let closed = match recorded.spans.get_mut(&span.into_u64()) {
            Some(data) => {
                data.refs = data.refs.saturating_sub(1);
                data.refs == 0
            }
            None => false,
        };
        drop(recorded);
        self.0.changed.notify_all();
        closed
    }

    fn enter(&self, span: &tracing::span::Id) {
        ENTERED.with(|e| e.borrow_mut().push(span.into_u64()));
    }

    /// The innermost span entered on this thread (what `Span::current()`
    /// and `in_current_span` take).
    fn current_span(&self) -> tracing_core::span::Current {
        let recording = self.0.recording();
        let current = current_span().and_then(|id| Some((id, recording.spans.get(&id)?.metadata)));
        match current {
            Some((id, metadata)) => {
                tracing_core::span::Current::new(tracing::span::Id::from_u64(id), metadata)
            }
            None => tracing_core::span::Current::none(),
        }
    }

    fn exit(&self, span: &tracing::span::Id) {
        ENTERED.with(|e| {
            let mut entered = e.borrow_mut();
            if let Some(i) = entered.iter().rposition(|s| *s == span.into_u64()) {
                entered.remove(i);
            }
        });
    }
}
