//! HTTPS's handshake (feature `tls`): rustls over the engine's TCP
//! streams, within the header read timeout; ALPN chooses HTTP/2 (`h2`,
//! with the `http2` feature) or HTTP/1.1 (`http/1.1`) per connection, and
//! `dispatch.rs` serves the TLS stream with the protocol chosen, the
//! server's rules unchanged on both. The certificate is a setting
//! (`settings/tls.rs`).
//!
//! A protocol (see `lib.rs`): it imports the bottom layer, no other
//! protocol.

use crate::connection::Control;
use crate::settings::tls::Tls;
use crate::settings::ServerSettings;
use futures_rustls::server::TlsStream;
use futures_rustls::TlsAcceptor;
use proscenium::net::TcpStream;
use proscenium::Handle;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

/// The handshake of one accepted connection, within the header read
/// timeout (a termination closes a connection still in it, which has no
/// request in flight): the TLS stream, and whether ALPN chose HTTP/2
/// (`h2`); `None` if it failed or the connection is closed.
pub(crate) async fn handshake(
    tls: &Tls,
    stream: TcpStream,
    control: &Control,
    settings: &ServerSettings,
    handle: &Handle,
) -> Option<(TlsStream<TcpStream>, bool)> {
    let mut accept = pin!(TlsAcceptor::from(Arc::clone(tls.config())).accept(stream));
    let after = settings.header_read_timeout;
    let mut deadline = (after != Duration::MAX).then(|| handle.sleep(after));
    let accepted = poll_fn(|cx| {
        let signals = control.poll_signals(cx);
        if signals.terminating || signals.forced {
            // Akka: "if a connection has no “in-flight” request, it
            // is terminated immediately".
            control.metrics().idle_closed_on_termination();
            return Poll::Ready(None);
        }
        if let Some(deadline) = &mut deadline {
            if pin!(deadline).poll(cx).is_ready() {
                tracing::debug!(
                    "the TLS handshake did not complete within the header read timeout"
                );
                return Poll::Ready(None);
            }
        }
        accept.as_mut().poll(cx).map(Some)
    })
    .await;
    let stream = match accepted {
        Some(Ok(stream)) => stream,
        Some(Err(e)) => {
            tracing::debug!(error = %e, "the TLS handshake failed");
            return None;
        }
        None => return None,
    };
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
    tracing::trace!(h2, "TLS handshake complete");
    Some((stream, h2))
}
