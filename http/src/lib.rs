//! An embedded HTTP/1.1 and HTTP/2 server for proscenium, with Akka
//! HTTP's graceful termination.
//!
//! [`Http::bind`] listens on an address and serves each connection as a
//! task on the [`ActorSystem`](proscenium::ActorSystem)'s workers (over
//! `proscenium::net`, the scheduler's I/O reactor), calling an `async`
//! handler for each request ([`Http::bind_actor`]: or asking an actor,
//! which gets the request and a [`Reply`](proscenium::Reply)). Connections are kept alive and pipelined
//! requests are answered in order; request bodies are framed by
//! `Content-Length` or `Transfer-Encoding: chunked` (`Expect:
//! 100-continue` is answered before the body is read), responses by
//! `Content-Length` or, for a streamed body ([`Body::from_stream`]),
//! `Transfer-Encoding: chunked`; every response carries a `Date`. A
//! malformed request is answered 400 (an HTTP/1.1 request without exactly
//! one valid `Host` too; a chunk extension outside RFC 9112's grammar
//! too), a head too large 431, a body too large 413, a head or a body that
//! does not arrive in time 408, CONNECT 501 (no tunnels), and the
//! connection closes (a lingering close: the server reads and discards
//! what the client still sends, so no reset destroys the answer; see
//! [`ServerSettings::linger_timeout`]); a handler that panics, or answers
//! with an informational (1xx) status, is answered 500, one slower than
//! the [request timeout](ServerSettings::request_timeout) 503, and the
//! server goes on. A client that leaves while its handler runs, or while
//! its streamed response is silent, is noticed: the handler's future (or
//! the stream) is dropped and the connection's place freed.
//!
//! **HTTP/2** (default feature `http2`): a connection that opens with the
//! HTTP/2 preface (h2c with prior knowledge, or `h2` chosen by ALPN over
//! TLS) is served by hyper's HTTP/2 server on the same port, on the same
//! workers (hyper's runtime traits on the scheduler; no tokio runtime),
//! with the same handler, limits, timeouts, counters and termination
//! (GOAWAY, then the streams in flight finish or get the deadline
//! response). A client cannot hold an HTTP/2 connection with a window it
//! never opens (the idle timeout runs while every stream waits on it), a
//! head it trickles (the header read timeout), or many bodies at once
//! ([`ServerSettings::max_body_bytes_per_connection`]). HTTP/1.1 stays on
//! this crate's own protocol layer
//! (docs/decisions/0029-http-2-and-tls.md says why).
//!
//! **HTTPS** (feature `tls`): `ServerSettings::tls` with a `Tls`
//! (rustls; PEM files, DER, or an application's own rustls
//! configuration) makes every connection of the binding a TLS one, ALPN
//! choosing HTTP/2 or HTTP/1.1.
//!
//! **Streamed request bodies**: with
//! [`ServerSettings::stream_request_bodies`] the handler is called once
//! the head is in and reads the body as it comes ([`Body::next_chunk`],
//! [`Body::read_all`], or as an `http_body::Body`, which [`Body`]
//! implements), at most 64 KiB waiting in between; a body cut short ends
//! with a [`RequestBodyError`].
//!
//! The [`ServerBinding`] stops the server (Akka HTTP's graceful
//! termination, docs/decisions/0012-http-server.md):
//!
//! * [`ServerBinding::unbind`] stops accepting connections;
//! * [`ServerBinding::terminate`] also completes
//!   [`when_termination_signal_issued`](ServerBinding::when_termination_signal_issued)
//!   at once, closes idle connections, finishes the requests in flight
//!   (their responses carry `Connection: close`), answers requests that
//!   arrive meanwhile with the [termination
//!   response](ServerSettings::termination_response) (503), answers a
//!   handler that misses the hard deadline with the [deadline-exceeded
//!   response](ServerSettings::termination_deadline_exceeded_response),
//!   closes what is left at the deadline, and completes
//!   [`when_terminated`](ServerBinding::when_terminated) with an
//!   [`HttpTerminated`]; it is idempotent;
//! * [`ServerBinding::add_to_coordinated_shutdown`] puts these steps into a
//!   [`CoordinatedShutdown`](proscenium::CoordinatedShutdown)'s
//!   `service-unbind`, `service-requests-done` and `service-stop` phases.
//!   **A service calls it right after binding**: a binding not tied so is
//!   cut, not terminated, when the system shuts down on SIGTERM (see
//!   [`Http::bind`]).
//!
//! Observability: [`ServerBinding::metrics`] reads the server's counters
//! ([`ServerMetrics`]: connections, requests in the handler, responses by
//! status class and by exact status); each connection runs in a debug-level `http_connection`
//! span (`id`, `peer`) and each request in an `http_request` span
//! (`method`, `path`, `status`), in which the handler runs. With the
//! cargo feature `metrics`, each binding adds its counters to its system's
//! `ActorSystem::publish_metrics` (the `metrics` facade, label `address`:
//! `proscenium_http_requests_total{status}`,
//! `proscenium_http_open_connections`, ...) and records each request's
//! duration in the `proscenium_http_request_duration_seconds` histogram;
//! `examples/metrics.rs` serves them as Prometheus text on `/metrics`
//! (docs/metrics.md lists every metric).
//!
//! A handler returns a `Response`, or a `Result` of one whose error is
//! answered 500 and logged ([`HandlerOutput`]).
//!
//! **tower and axum** (feature `tower`): [`Http::bind_service`](Http#method.bind_service) serves a
//! tower `Service` whose response body is any `http_body::Body` of
//! `Bytes`, as a handler is served (the same workers, protocols, limits,
//! timeouts, counters and termination; a panic in it answered 500). An
//! [axum](https://docs.rs/axum) `Router` is one, served as it is, with
//! axum's `tokio` feature off (`default-features = false, features =
//! ["json", "query", ...]`): `examples/axum.rs`, tested in `tests/axum.rs`.
//! axum is runtime-neutral but for three parts. What works on the
//! scheduler: routing (`route`, `nest`, `merge`, `fallback`, 404, 405 with
//! `Allow`, HEAD on GET routes), the extractors that read the request
//! (`Path`, `Query`, `Json`, `Form`, `State`, `Extension`, `MatchedPath`,
//! `OriginalUri`, headers, the body; `Multipart` needs no tokio either,
//! not tested here), the responses (`Json`, `Html`, `Redirect`, streamed
//! bodies: sent chunked as they come), `middleware::from_fn`, and tower
//! layers that use neither tokio's timers nor its I/O. Its futures are
//! polled on the workers, so awaiting an actor's `ask` or the scheduler's
//! `sleep` in a handler works. What needs tokio, and why: `axum::serve`
//! (its own accept loop on a tokio `TcpListener`: `bind_service` is what
//! replaces it); axum's `WebSocketUpgrade` (feature `ws`: tokio-tungstenite
//! on tokio's I/O and hyper's upgrade; use this crate's
//! [WebSockets](#websockets) from a plain handler instead);
//! `Sse::keep_alive` and timeout layers (tower's and tower-http's
//! `TimeoutLayer` sleep on tokio's timer: use
//! [`ServerSettings::request_timeout`]); any tokio call in a handler (see
//! below). `ConnectInfo` is filled by axum's `serve` only: this server does
//! not give the peer's address to a service. Both body limits hold: the
//! server's `max_body_bytes` before the Router is called, axum's
//! `DefaultBodyLimit` (2 MB) in its extractors. Trailers are not sent.
//!
//! # WebSockets
//!
//! With the feature `websocket` (off by default), a handler accepts an
//! RFC 6455 upgrade of an HTTP/1.1 request:
//! `WebSocketUpgrade::from_request(&request)` checks it (its `Err` is the
//! answer: 400, or 426 for another protocol version) and
//! `WebSocketUpgrade::on_upgrade(callback)` is the `101 Switching
//! Protocols` response; once it is written, the connection's task runs the
//! callback's future with a `WebSocket`, a `Stream` and a `Sink` of
//! `Message`s (text, binary, fragmented ones arriving whole, the client's
//! `Close` last; pings are answered by the server), or hands the socket to
//! an actor, one per connection (`WebSocketUpgrade::on_upgrade_actor`: the
//! client's messages in its mailbox, the sending half in its state). The
//! framing is tungstenite's (async-tungstenite over this crate's futures-io
//! streams; decision 0033). Limits, each a builder method of
//! `WebSocketUpgrade`: the largest message and frame (1 MiB each by
//! default; beyond, Close 1009), a Ping after `ping_interval` (30 s)
//! without a frame and Close 1001 after `idle_timeout` (75 s), and the
//! messages buffered each way (16): a client that stops reading makes the
//! handler's `send` wait instead of the server buffer without bound, and a
//! handler that stops taking messages stops the socket's reading. A
//! termination sends every open WebSocket a Close with 1001 (going away),
//! waits for the client's Close until the hard deadline, then cuts;
//! `HttpTerminated::websockets` counts the sockets it found open,
//! `ServerMetrics::open_websockets` those open now. RFC 8441 (WebSockets
//! over HTTP/2) is not supported: an HTTP/2 request to a WebSocket route
//! is answered 400.
//!
//! **Calling tokio-based clients from a handler.** Handlers run on the
//! engine's scheduler, not in a tokio runtime, and tokio's I/O and timers
//! work only inside one: awaiting a tokio-based client directly panics
//! ("there is no reactor running"; the server answers the panic 500).
//! Spawn the client's future on a tokio runtime the application keeps and
//! await the `JoinHandle`, which any executor can await:
//! `tokio_handle.spawn(client.get(url)).await` (tested in
//! `tests/tokio_client.rs`; the engine's `Context::pipe_to_self_on` is the
//! same idea for actors).
//!
//! A [`Body`] is owned bytes, or a stream polled for its next piece only
//! once the previous one is written, so a client that reads slowly slows
//! the stream down instead of filling memory. [`ServerSettings`] bounds the
//! rest (Akka's names where it has them, and a TOML form,
//! [`ServerSettings::from_toml_str`]): head and body sizes, the bytes of
//! bodies one connection holds at once, the idle timeout, the time a head or a body may take (slowloris, a trickled
//! body), the time a handler may take, the connections served
//! at once (beyond, new ones wait in the listen backlog), and how long a
//! closing connection lingers. See
//! `docs/decisions/0013-http-wire.md`.
//!
//! ```
//! use http::{Request, Response};
//! use proscenium::ActorSystem;
//! use proscenium_http::{Body, Http};
//! use std::io::{Read, Write};
//! use std::time::Duration;
//!
//! let system = ActorSystem::builder().workers(2).pin_workers(false).build()?;
//! let binding = Http::bind(&system, "127.0.0.1:0".parse()?, |request: Request<Body>| async move {
//!     Response::new(Body::from(format!("hello {}", request.uri().path())))
//! })?;
//!
//! let mut client = std::net::TcpStream::connect(binding.local_addr())?;
//! client.write_all(b"GET /world HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
//! let mut response = String::new();
//! client.read_to_string(&mut response)?;
//! assert!(response.starts_with("HTTP/1.1 200 OK\r\n"));
//! assert!(response.ends_with("\r\n\r\nhello /world"));
//!
//! let terminated = binding.terminate(Duration::from_secs(5)).wait()?;
//! assert_eq!(terminated.forced_connections, 0);
//! system.terminate().wait();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![doc(test(attr(deny(warnings))))]

// The modules in layers: each imports only from the layers before it,
// and the protocols none of one another (decision 0029, "Layout").
//
// 1. Vocabulary and helpers: the body, the HTTP/1.1 wire format, the
//    counters, the tower adapter.
// 2. What the protocols stand on: the settings, the handler, the
//    connection's shared parts (its guard and signals), and what a
//    termination is.
// 3. The protocols (`protocol/`): HTTP/1.1, HTTP/2, WebSocket, TLS.
// 4. `dispatch`: which protocol serves a connection, and the hand-overs.
// 5. `binding` (the accept loop, the server's state), then `terminate`.

/// `Body`: the bytes of a request or a response, whole or streamed.
mod body;
/// The `Date` header, formatted once per second per thread.
mod date;
/// A streamed request body's channel, from the connection to the handler.
mod feed;
/// The server's counters (`ServerMetrics`).
mod metrics;
/// A tower `Service` as a handler (feature `tower`).
#[cfg(feature = "tower")]
mod service;
/// The HTTP/1.1 wire format: parsing a request head, writing a response.
mod wire;

/// `ServerSettings` from TOML (`ServerSettings::from_toml_str`).
mod config;
/// What every protocol's connection shares: `Transport`,
/// `ConnectionGuard`, `Control`, and `Deadline` (a read's or a write's
/// timeout).
mod connection;
/// `HandlerOutput` and the type-erased `Handler`.
mod handler;
/// `ServerSettings` (and `Tls`, feature `tls`).
mod settings;
/// What a termination is: `Deadline` (its hard deadline),
/// `HttpTerminated`, `TerminateError`, and its state.
mod termination;

/// HTTP/1.1, HTTP/2, WebSocket, TLS: siblings.
mod protocol;

/// One connection's protocols, from its first byte to its close.
mod dispatch;

/// `Http::bind`, `ServerBinding`, the accept loop.
mod binding;
/// Graceful termination: `ServerBinding::terminate` and its futures.
mod terminate;

pub use crate::binding::{Http, ServerBinding, Unbind};
pub use crate::body::{Body, BoxError, RequestBodyError};
pub use crate::handler::HandlerOutput;
pub use crate::metrics::{ResponsesByClass, ServerMetrics};
#[cfg(feature = "websocket")]
#[cfg_attr(docsrs, doc(cfg(feature = "websocket")))]
pub use crate::protocol::websocket::{
    CloseFrame, Message, WebSocket, WebSocketCloseCode, WebSocketClosed, WebSocketReceiver,
    WebSocketSender, WebSocketUpgrade,
};
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub use crate::settings::tls::{Tls, TlsError};
pub use crate::settings::{InvalidResponse, ServerSettings};
pub use crate::terminate::{HttpTermination, TerminationSignal};
pub use crate::termination::{Deadline, HttpTerminated, TerminateError};
/// The `http` crate, whose `Request` and `Response` handlers take and return.
pub use http;
/// The rustls version [`Tls::from_config`] takes (feature `tls`).
#[cfg(feature = "tls")]
#[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
pub use rustls;

/// The README's example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
