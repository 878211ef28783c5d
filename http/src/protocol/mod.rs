//! The protocols a connection is served with.

/// HTTP/1.1 on the crate's own protocol layer.
pub(crate) mod http1;
/// HTTP/2 on hyper (feature `http2`).
#[cfg(feature = "http2")]
pub(crate) mod http2;
/// HTTPS (feature `tls`).
#[cfg(feature = "tls")]
pub(crate) mod tls;
/// WebSockets on HTTP/1.1's Upgrade (feature `websocket`).
#[cfg(feature = "websocket")]
pub(crate) mod websocket;
