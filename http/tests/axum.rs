//! axum's `Router` served as it is (feature `tower`, issue 34, item 4):
//! `Http::bind_service` takes a real Router (axum with its `tokio` feature
//! off) and serves it on the scheduler's workers with no tokio runtime.
//! Its extractors (`Path`, `Query`, `Json`, `State`, `MatchedPath`), a
//! handler that asks an actor, axum's 404 and 405, a fallback, a route
//! that panics, a streamed body; the server's limits, timeouts and
//! counters around it; a termination with requests in flight, by
//! `terminate` and by the coordinated shutdown; over HTTP/1.1 (a raw
//! client), HTTP/2 and TLS (curl). No test sleeps: each wait ends on an
//! event (a handler's report, the connection's trace, a read).
#![cfg(feature = "tower")]
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod programs;
mod support;

use axum::extract::{MatchedPath, Path, Query, State};
use axum::response::{IntoResponse, Response};
use axum::{routing, Json, Router};
use http::{StatusCode, Uri};
use proscenium::{
    Actor, ActorRef, ActorSystem, Context, Outcome, Phase, PhaseConfig, Props, Reason, Reply,
    ShutdownConfig,
};
use proscenium_http::{HttpTerminated, HttpTermination, ServerBinding, ServerSettings};
use serde::{Deserialize, Serialize};
use std::future::Future;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::pin::Pin;
use std::sync::mpsc;
use std::task::Poll;
use std::thread;
use std::time::Duration;
use support::{
    assert_eof, capture, connect, entered, get, read_answer, system, Answer, Gate, PATIENCE,
};

const LONG: Duration = Duration::from_secs(3600);

// ---------------------------------------------------------------------------
// The application: a counter actor, and a Router whose handlers use it.

enum CounterMsg {
    Add(Reply<u64>),
    Get(Reply<u64>),
}

struct Counter(u64);

impl Actor for Counter {
    type Msg = CounterMsg;
    fn receive(&mut self, _: &mut Context<Self>, msg: CounterMsg) -> Outcome {
        match msg {
            CounterMsg::Add(reply) => {
                self.0 += 1;
                reply.send(self.0);
            }
            CounterMsg::Get(reply) => reply.send(self.0),
        }
        Ok(())
    }
}

/// The Router's state (`State<App>`).
#[derive(Clone)]
struct App {
    counter: ActorRef<CounterMsg>,
    /// `/slow` waits on it.
    gate: Gate,
    /// `/stream`'s second piece waits on it.
    stream_gate: Gate,
    /// `/slow` and `/hang` report their path here once entered.
    entered: mpsc::Sender<String>,
}

#[derive(Deserialize)]
struct Greeting {
    greeting: Option<String>,
}

#[derive(Deserialize)]
struct NewUser {
    name: String,
}

#[derive(Serialize)]
struct User {
    id: u32,
    name: String,
}

/// Where the handler runs: on a scheduler worker, no tokio runtime.
async fn runtime() -> String {
    format!(
        "worker {}, tokio runtime {}",
        proscenium_scheduler::current_worker().is_some(),
        tokio::runtime::Handle::try_current().is_ok()
    )
}

/// `Path`, `Query` and `MatchedPath`; user 0 is not found (a handler's
/// 404).
async fn user(
    Path(id): Path<u32>,
    Query(greeting): Query<Greeting>,
    matched: MatchedPath,
) -> Response {
    if id == 0 {
        return (StatusCode::NOT_FOUND, "no user 0").into_response();
    }
    let greeting = greeting.greeting.as_deref().unwrap_or("hello");
    format!("{greeting}, user {id} ({})", matched.as_str()).into_response()
}

/// `Json` in and out.
async fn create(Json(new): Json<NewUser>) -> (StatusCode, Json<User>) {
    let user = User {
        id: 7,
        name: new.name,
    };
    (StatusCode::CREATED, Json(user))
}

/// `State`, and an ask of the actor.
async fn add(State(app): State<App>) -> Result<String, StatusCode> {
    let count = app.counter.ask(CounterMsg::Add, PATIENCE).await;
    count
        .map(|n| n.to_string())
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)
}

async fn count(State(app): State<App>) -> Result<String, StatusCode> {
    let count = app.counter.ask(CounterMsg::Get, PATIENCE).await;
    count
        .map(|n| n.to_string())
        .map_err(|_| StatusCode::SERVICE_UNAVAILABLE)
}

async fn panics() -> &'static str {
    panic!("a route that panics (on purpose)")
}

async fn slow(State(app): State<App>) -> &'static str {
    let _ = app.entered.send("/slow".to_string());
    app.gate.clone().await;
    "slow done"
}

async fn hang(State(app): State<App>) -> &'static str {
    let _ = app.entered.send("/hang".to_string());
    std::future::pending().await
}

/// `first\n` at once, `second\n` once the stream gate opens: an axum body
/// that waits between its pieces.
async fn stream(State(app): State<App>) -> axum::body::Body {
    axum::body::Body::from_stream(Pieces {
        sent: 0,
        gate: app.stream_gate.clone(),
    })
}

struct Pieces {
    sent: usize,
    gate: Gate,
}

impl futures_core::Stream for Pieces {
    type Item = Result<&'static str, std::convert::Infallible>;
    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Self::Item>> {
        match self.sent {
            0 => {
                self.sent = 1;
                Poll::Ready(Some(Ok("first\n")))
            }
            1 => match Pin::new(&mut self.gate).poll(cx) {
                Poll::Ready(()) => {
                    self.sent = 2;
                    Poll::Ready(Some(Ok("second\n")))
                }
                Poll::Pending => Poll::Pending,
            },
            _ => Poll::Ready(None),
        }
    }
}

async fn fallback(uri: Uri) -> (StatusCode, String) {
    (StatusCode::NOT_FOUND, format!("nothing at {uri}"))
}

/// The Router, without a fallback (axum answers an unknown path 404).
fn router(app: App) -> Router {
    Router::new()
        .route("/runtime", routing::get(runtime))
        .route("/users", routing::post(create))
        .route("/users/{id}", routing::get(user))
        .route("/count", routing::get(count).post(add))
        .route("/panic", routing::get(panics))
        .route("/slow", routing::get(slow))
        .route("/hang", routing::get(hang))
        .route("/stream", routing::get(stream))
        .with_state(app)
}

/// The application's state on `system` (one per system: the counter's
/// name), and the receiver of what `/slow` and `/hang` report.
fn app(system: &ActorSystem) -> (App, mpsc::Receiver<String>) {
    let counter = system.spawn(Props::new(|| Counter(0)), "counter").unwrap();
    let (entered, entered_rx) = mpsc::channel();
    let app = App {
        counter,
        gate: Gate::default(),
        stream_gate: Gate::default(),
        entered,
    };
    (app, entered_rx)
}

fn serve(system: &ActorSystem, settings: ServerSettings, router: Router) -> ServerBinding {
    proscenium_http::Http::bind_service(system, "127.0.0.1:0".parse().unwrap(), settings, router)
        .unwrap()
}

// ---------------------------------------------------------------------------
// A raw HTTP/1.1 client.

/// Sends `method path` (with a JSON body if given) and reads the answer.
fn send(c: &mut TcpStream, method: &str, path: &str, json: Option<&str>) -> Answer {
    match json {
        None => write!(c, "{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap(),
        Some(json) => write!(
            c,
            "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{json}",
            json.len()
        )
        .unwrap(),
    }
    read_answer(c)
}

/// A response head, read to its empty line (its body, if any, left).
fn read_head(c: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        c.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap().to_ascii_lowercase()
}

fn read_exactly(c: &mut TcpStream, expected: &[u8]) {
    let mut got = vec![0u8; expected.len()];
    c.read_exact(&mut got).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected)
    );
}

/// Waits for a termination on a helper thread: fails the test after
/// [`PATIENCE`] instead of hanging it.
fn wait_within_patience(termination: HttpTermination) -> HttpTerminated {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(termination.wait());
    });
    rx.recv_timeout(PATIENCE)
        .expect("the termination completed in time")
        .expect("the termination succeeded")
}

// ---------------------------------------------------------------------------
// HTTP/1.1.

#[test]
fn a_router_is_served_with_its_extractors_on_the_schedulers_workers() {
    let system = system();
    let (app, _entered) = app(&system);
    let binding = serve(&system, ServerSettings::default(), router(app));
    let mut c = connect(&binding);

    let a = send(&mut c, "GET", "/runtime", None);
    assert_eq!(
        (a.status, a.body.as_str()),
        (200, "worker true, tokio runtime false")
    );
    // Path, Query, MatchedPath; a body in memory is sent with its length.
    let a = send(&mut c, "GET", "/users/7?greeting=hi", None);
    assert_eq!(
        (a.status, a.body.as_str()),
        (200, "hi, user 7 (/users/{id})")
    );
    assert_eq!(a.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(a.header("transfer-encoding"), None);
    let a = send(&mut c, "GET", "/users/0", None);
    assert_eq!((a.status, a.body.as_str()), (404, "no user 0"));
    // axum's own rejection of a path it cannot parse.
    assert_eq!(send(&mut c, "GET", "/users/x", None).status, 400);
    // Json in and out.
    let a = send(&mut c, "POST", "/users", Some(r#"{"name":"ada"}"#));
    assert_eq!(
        (a.status, a.body.as_str()),
        (201, r#"{"id":7,"name":"ada"}"#)
    );
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert_eq!(a.header("content-length"), Some("21"));
    assert_eq!(
        send(&mut c, "POST", "/users", Some(r#"{"nom":"ada"}"#)).status,
        422
    );
    // State: the handler asks the actor.
    assert_eq!(send(&mut c, "POST", "/count", None).body, "1");
    assert_eq!(send(&mut c, "POST", "/count", None).body, "2");
    assert_eq!(send(&mut c, "GET", "/count", None).body, "2");
    // HEAD on a GET route: axum's length of the GET body, no body (the
    // next answer on the connection reads right).
    write!(c, "HEAD /users/5 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let head = read_head(&mut c);
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    assert!(head.contains("\r\ncontent-length: 27\r\n"), "{head}");
    assert_eq!(send(&mut c, "GET", "/users/5", None).body.len(), 27);

    let metrics = binding.metrics();
    assert_eq!(metrics.responses_with(StatusCode::OK), 7);
    assert_eq!(metrics.responses_with(StatusCode::CREATED), 1);
    assert_eq!(metrics.responses_with(StatusCode::NOT_FOUND), 1);
    assert_eq!(metrics.responses_with(StatusCode::BAD_REQUEST), 1);
    assert_eq!(metrics.responses_with(StatusCode::UNPROCESSABLE_ENTITY), 1);
    assert_eq!(metrics.requests, 11);
    assert_eq!(
        wait_within_patience(binding.terminate(LONG)).forced_connections,
        0
    );
    system.terminate().wait();
}

#[test]
fn axum_answers_404_and_405_and_a_fallback_answers_what_no_route_matches() {
    let system = system();
    let (app, _entered) = app(&system);
    let plain = serve(&system, ServerSettings::default(), router(app.clone()));
    let mut c = connect(&plain);
    let a = send(&mut c, "GET", "/nowhere", None);
    assert_eq!((a.status, a.body.as_str()), (404, ""));
    let a = send(&mut c, "DELETE", "/users/1", None);
    assert_eq!((a.status, a.header("allow")), (405, Some("GET,HEAD")));
    assert_eq!(plain.metrics().responses_with(StatusCode::NOT_FOUND), 1);
    assert_eq!(
        plain
            .metrics()
            .responses_with(StatusCode::METHOD_NOT_ALLOWED),
        1
    );

    let with_fallback = serve(
        &system,
        ServerSettings::default(),
        router(app).fallback(fallback),
    );
    let mut c = connect(&with_fallback);
    let a = send(&mut c, "GET", "/nowhere?x=1", None);
    assert_eq!(
        (a.status, a.body.as_str()),
        (404, "nothing at /nowhere?x=1")
    );
    assert_eq!(send(&mut c, "GET", "/users/1", None).status, 200);
    system.terminate().wait();
}

#[test]
fn a_route_that_panics_is_answered_500_and_the_server_goes_on() {
    let system = system();
    let (app, _entered) = app(&system);
    let binding = serve(&system, ServerSettings::default(), router(app));
    let mut c = connect(&binding);
    let a = send(&mut c, "GET", "/panic", None);
    assert_eq!((a.status, a.body.as_str()), (500, ""));
    // The same connection, then another: both served.
    assert_eq!(send(&mut c, "GET", "/users/1", None).status, 200);
    let mut other = connect(&binding);
    assert_eq!(send(&mut other, "POST", "/count", None).body, "1");
    let metrics = binding.metrics();
    assert_eq!(metrics.responses_with(StatusCode::INTERNAL_SERVER_ERROR), 1);
    assert_eq!(metrics.responses_with(StatusCode::OK), 2);
    system.terminate().wait();
}

/// A body that waits between its pieces is sent as they come (chunked):
/// the first piece reaches the client while the second waits.
#[test]
fn an_axum_body_that_waits_is_streamed_as_it_comes() {
    let system = system();
    let (app, _entered) = app(&system);
    let stream_gate = app.stream_gate.clone();
    let binding = serve(&system, ServerSettings::default(), router(app));
    let mut c = connect(&binding);
    get(&mut c, "/stream");
    let head = read_head(&mut c);
    assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
    assert!(
        head.contains("\r\ntransfer-encoding: chunked\r\n"),
        "{head}"
    );
    read_exactly(&mut c, b"6\r\nfirst\n\r\n");
    stream_gate.open();
    read_exactly(&mut c, b"7\r\nsecond\n\r\n0\r\n\r\n");
    // The connection goes on after the chunked body.
    assert_eq!(send(&mut c, "GET", "/users/2", None).status, 200);
    system.terminate().wait();
}

/// The server's limits hold before the Router is called (413 over
/// `max_body_bytes`), and its request timeout around it (503).
#[test]
fn the_servers_limits_and_request_timeout_hold_around_a_router() {
    let system = system();
    let (app, entered_rx) = app(&system);
    let settings = ServerSettings::default()
        .max_body_bytes(16)
        .request_timeout(Duration::from_millis(100));
    let binding = serve(&system, settings, router(app));
    let mut c = connect(&binding);
    let a = send(&mut c, "POST", "/users", Some(r#"{"name":"a long name"}"#));
    assert_eq!((a.status, a.header("connection")), (413, Some("close")));
    assert_eof(&mut c);

    let mut c = connect(&binding);
    let a = send(&mut c, "GET", "/hang", None);
    assert_eq!(entered(&entered_rx), "/hang");
    assert_eq!(a.status, 503);
    assert!(a.body.starts_with("The server was not able"), "{}", a.body);
    assert_eq!(send(&mut c, "GET", "/users/3", None).status, 200);
    let metrics = binding.metrics();
    assert_eq!(metrics.responses_with(StatusCode::PAYLOAD_TOO_LARGE), 1);
    assert_eq!(metrics.responses_with(StatusCode::SERVICE_UNAVAILABLE), 1);
    system.terminate().wait();
}

/// Sends the head of a request but its last line, and waits until the
/// server has those bytes (the connection is then not idle).
fn half_a_request(binding: &ServerBinding, path: &str) -> TcpStream {
    let capture = capture();
    let mark = capture.mark();
    let mut c = connect(binding);
    write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n").unwrap();
    capture.wait_event_on(mark, c.local_addr().unwrap(), "receiving a request");
    c
}

/// Akka's graceful termination around a Router: the request in flight
/// finishes (with `Connection: close`), an idle connection is closed at
/// once, a request arriving meanwhile gets the termination response
/// without reaching the Router.
#[test]
fn a_termination_finishes_the_routers_requests_in_flight() {
    let system = system();
    let (app, entered_rx) = app(&system);
    let gate = app.gate.clone();
    let binding = serve(&system, ServerSettings::default(), router(app));
    let mut busy = connect(&binding);
    get(&mut busy, "/slow");
    assert_eq!(entered(&entered_rx), "/slow");
    let mut idle = connect(&binding);
    assert_eq!(send(&mut idle, "GET", "/users/1", None).status, 200);
    let mut late = half_a_request(&binding, "/users/2");

    let termination = binding.terminate(LONG);
    assert_eof(&mut idle);
    late.write_all(b"\r\n").unwrap();
    let a = read_answer(&mut late);
    assert_eq!((a.status, a.header("connection")), (503, Some("close")));
    assert_eof(&mut late);
    gate.open();
    let a = read_answer(&mut busy);
    assert_eq!((a.status, a.body.as_str()), (200, "slow done"));
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut busy);
    assert_eq!(wait_within_patience(termination).forced_connections, 0);
    // The late request never reached the Router.
    assert_eq!(binding.metrics().requests, 2);
    system.terminate().wait();
}

/// At the hard deadline a Router's handler still running is answered the
/// deadline-exceeded response, and its connection closed.
#[test]
fn a_routers_handler_past_the_hard_deadline_gets_the_deadline_response() {
    let system = system();
    let (app, entered_rx) = app(&system);
    let binding = serve(&system, ServerSettings::default(), router(app));
    let mut hung = connect(&binding);
    get(&mut hung, "/hang");
    assert_eq!(entered(&entered_rx), "/hang");
    let terminated = wait_within_patience(binding.terminate(Duration::from_millis(100)));
    assert_eq!(terminated.forced_connections, 1);
    let a = read_answer(&mut hung);
    assert_eq!((a.status, a.header("connection")), (503, Some("close")));
    assert_eof(&mut hung);
    system.terminate().wait();
}

/// Tied to the coordinated shutdown: its run terminates the server, and
/// the Router's request in flight finishes first.
#[test]
fn the_coordinated_shutdown_terminates_a_router_after_its_request_in_flight() {
    let config = ShutdownConfig::default().run_by_signals(false).phase(
        Phase::SERVICE_REQUESTS_DONE,
        PhaseConfig::new().timeout(LONG),
    );
    let system = ActorSystem::builder()
        .workers(2)
        .pin_workers(false)
        .coordinated_shutdown(config)
        .build()
        .unwrap();
    let (app, entered_rx) = app(&system);
    let gate = app.gate.clone();
    let binding = serve(&system, ServerSettings::default(), router(app));
    let shutdown = system.coordinated_shutdown();
    binding.add_to_coordinated_shutdown(shutdown, LONG).unwrap();
    let mut busy = connect(&binding);
    get(&mut busy, "/slow");
    assert_eq!(entered(&entered_rx), "/slow");

    let run = shutdown.run(Reason::User("test".into()));
    binding.when_termination_signal_issued().wait().unwrap();
    gate.open();
    let a = read_answer(&mut busy);
    assert_eq!((a.status, a.body.as_str()), (200, "slow done"));
    assert_eq!(a.header("connection"), Some("close"));
    assert_eof(&mut busy);
    run.wait().expect("the run completes");
    assert_eq!(
        binding.when_terminated().wait().unwrap().forced_connections,
        0
    );
    system.when_terminated().wait();
}

// ---------------------------------------------------------------------------
// HTTP/2 and TLS, with curl.

/// curl's answer: its body, then a line with the status and the HTTP
/// version.
#[cfg(any(feature = "http2", feature = "tls"))]
fn curl(args: &[&str], url: &str) -> String {
    let out = std::process::Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "30"])
        .args(["--write-out", "\n%{http_code} %{http_version}"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl runs");
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[cfg(any(feature = "http2", feature = "tls"))]
const JSON: [&str; 4] = [
    "--data-binary",
    r#"{"name":"ada"}"#,
    "--header",
    "content-type: application/json",
];

#[cfg(feature = "http2")]
#[test]
fn a_router_over_http_2() {
    if !programs::present("curl") {
        return;
    }
    let system = system();
    let (app, entered_rx) = app(&system);
    let (gate, stream_gate) = (app.gate.clone(), app.stream_gate.clone());
    let binding = serve(&system, ServerSettings::default(), router(app));
    let url = |path: &str| format!("http://{}{path}", binding.local_addr());
    let h2 = ["--http2-prior-knowledge"];
    assert_eq!(
        curl(&h2, &url("/runtime")),
        "worker true, tokio runtime false\n200 2"
    );
    assert_eq!(
        curl(&h2, &url("/users/7?greeting=hi")),
        "hi, user 7 (/users/{id})\n200 2"
    );
    let post: Vec<&str> = h2.iter().chain(JSON.iter()).copied().collect();
    assert_eq!(
        curl(&post, &url("/users")),
        "{\"id\":7,\"name\":\"ada\"}\n201 2"
    );
    assert_eq!(curl(&h2, &url("/nowhere")), "\n404 2");
    assert_eq!(curl(&h2, &url("/panic")), "\n500 2");
    assert_eq!(curl(&h2, &url("/count")), "0\n200 2");
    stream_gate.open();
    assert_eq!(curl(&h2, &url("/stream")), "first\nsecond\n\n200 2");

    // A termination with a stream in flight: it finishes.
    let slow = url("/slow");
    let client = thread::spawn(move || curl(&h2, &slow));
    assert_eq!(entered(&entered_rx), "/slow");
    let termination = binding.terminate(LONG);
    gate.open();
    assert_eq!(client.join().unwrap(), "slow done\n200 2");
    assert_eq!(wait_within_patience(termination).forced_connections, 0);
    let metrics = binding.metrics();
    assert_eq!(metrics.responses_with(StatusCode::INTERNAL_SERVER_ERROR), 1);
    assert_eq!(metrics.responses_with(StatusCode::OK), 5);
    system.terminate().wait();
}

#[cfg(feature = "tls")]
#[test]
fn a_router_over_tls_with_http_2_and_http_1_1() {
    use proscenium_http::Tls;
    use support::pki::{pki, TempDir};
    if !programs::present("curl") {
        return;
    }
    let pki = pki();
    let dir = TempDir::new();
    let ca = dir.write("ca.pem", &pki.ca);
    let system = system();
    let (app, _entered) = app(&system);
    let tls = Tls::from_pem(pki.cert.as_bytes(), pki.key.as_bytes()).unwrap();
    let binding = serve(&system, ServerSettings::default().tls(tls), router(app));
    let url = |path: &str| format!("https://localhost:{}{path}", binding.local_addr().port());
    let ca = ca.to_str().unwrap();
    let h2 = ["--cacert", ca, "--http2"];
    let h1 = ["--cacert", ca, "--http1.1"];
    assert_eq!(
        curl(&h2, &url("/runtime")),
        "worker true, tokio runtime false\n200 2"
    );
    assert_eq!(
        curl(&h1, &url("/users/3?greeting=hey")),
        "hey, user 3 (/users/{id})\n200 1.1"
    );
    let post: Vec<&str> = h1.iter().chain(JSON.iter()).copied().collect();
    assert_eq!(
        curl(&post, &url("/users")),
        "{\"id\":7,\"name\":\"ada\"}\n201 1.1"
    );
    assert_eq!(curl(&h1, &url("/panic")), "\n500 1.1");
    assert_eq!(curl(&h2, &url("/panic")), "\n500 2");
    assert_eq!(curl(&h2, &url("/count")), "0\n200 2");
    assert_eq!(
        wait_within_patience(binding.terminate(LONG)).forced_connections,
        0
    );
    system.terminate().wait();
}
