//! One accepted connection, from its first byte to its close: which
//! protocol serves it, and when it passes from one to another. Above the
//! protocols, which do not import one another, and below the binding,
//! whose accept loop spawns [`serve`] (or [`serve_tls`]) for each
//! connection.
//!
//! A connection starts on HTTP/1.1, which hands it back when its first
//! bytes are HTTP/2's preface (h2c with prior knowledge; it then goes to
//! HTTP/2 with the bytes read) or when a handler accepts a WebSocket
//! upgrade (feature `websocket`; the WebSocket writes the `101`). Over TLS
//! (feature `tls`) the handshake comes first, and ALPN `h2` goes to
//! HTTP/2 directly. The guard (the connection's entry in the server) is
//! dropped after the socket is closed, whichever protocol closed it.

use crate::connection::{ConnectionGuard, Transport};
use crate::handler::Handler;
use crate::protocol::http1::{self, Served};
#[cfg(feature = "http2")]
use crate::protocol::http2;
#[cfg(feature = "tls")]
use crate::protocol::tls;
#[cfg(feature = "websocket")]
use crate::protocol::websocket;
#[cfg(feature = "tls")]
use crate::settings::tls::Tls;
use crate::settings::ServerSettings;
use proscenium::Handle;
use std::sync::Arc;

/// The upgrades a handler's `101` may carry: a WebSocket's (feature
/// `websocket`), or none.
#[cfg(feature = "websocket")]
type Upgrade = websocket::Accepted;
#[cfg(not(feature = "websocket"))]
type Upgrade = std::convert::Infallible;

#[cfg(feature = "websocket")]
impl http1::Upgrade for websocket::Accepted {
    fn accept(
        response: &mut http::Response<crate::body::Body>,
        span: &tracing::Span,
        control: &crate::connection::Control,
    ) -> Option<Self> {
        websocket::accept(response, span, control)
    }
}

/// Serves `stream` until it closes: HTTP/1.1, then HTTP/2 or a WebSocket
/// if HTTP/1.1 hands it over.
pub(crate) async fn serve<S: Transport>(
    stream: S,
    guard: ConnectionGuard,
    handler: Handler,
    settings: Arc<ServerSettings>,
    handle: Handle,
) {
    let served = http1::serve::<S, Upgrade>(
        stream,
        &guard,
        &handler,
        Arc::clone(&settings),
        handle.clone(),
    )
    .await;
    match served {
        Served::Closed => drop(guard),
        #[cfg(feature = "http2")]
        Served::Http2 { stream, read } => {
            http2::serve(stream, read, guard, handler, settings, handle).await
        }
        #[cfg(feature = "websocket")]
        Served::Upgraded {
            stream,
            read,
            upgrade,
        } => websocket::serve(stream, read, guard, upgrade, handle).await,
        // No upgrade without the feature `websocket` (`Upgrade` is
        // `Infallible`): not reached.
        #[cfg(not(feature = "websocket"))]
        Served::Upgraded {
            stream,
            read,
            upgrade,
        } => {
            drop((stream, read));
            match upgrade {}
        }
    }
}

/// Serves the TLS connection `stream` (feature `tls`) until it closes:
/// the handshake, then HTTP/2 if ALPN chose `h2`, else as [`serve`] does
/// (whose first bytes may still be the HTTP/2 preface).
#[cfg(feature = "tls")]
pub(crate) async fn serve_tls(
    tls: Tls,
    stream: proscenium::net::TcpStream,
    guard: ConnectionGuard,
    handler: Handler,
    settings: Arc<ServerSettings>,
    handle: Handle,
) {
    let control = guard.control();
    match tls::handshake(&tls, stream, &control, &settings, &handle).await {
        None => {}
        #[cfg(feature = "http2")]
        Some((stream, true)) => {
            http2::serve(stream, Vec::new(), guard, handler, settings, handle).await
        }
        Some((stream, _)) => serve(stream, guard, handler, settings, handle).await,
    }
}
