//! The protocols a connection is served with, siblings: each imports the
//! layers below (`settings.rs`, `handler.rs`, `connection.rs` and the
//! helpers) and no other protocol, so that one can be read without the
//! others. Where a connection passes from one to another (HTTP/1.1 to
//! HTTP/2 at the preface, to a WebSocket at an accepted upgrade; TLS to
//! either by ALPN), `dispatch.rs`, above them, hands it on.

/// HTTP/1.1 on the crate's own protocol layer.
pub(crate) mod http1;
/// HTTP/2 on hyper (feature `http2`).
#[cfg(feature = "http2")]
pub(crate) mod http2;
/// HTTPS's handshake (feature `tls`).
#[cfg(feature = "tls")]
pub(crate) mod tls;
/// WebSockets on HTTP/1.1's Upgrade (feature `websocket`).
#[cfg(feature = "websocket")]
pub(crate) mod websocket;
