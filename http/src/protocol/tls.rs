//! HTTPS (feature `tls`): rustls over the engine's TCP streams, ALPN
//! choosing HTTP/2 (`h2`, with the `http2` feature) or HTTP/1.1
//! (`http/1.1`) per connection, with the server's rules unchanged on both.

use crate::connection::ConnectionGuard;
use crate::handler::Handler;
use crate::protocol::http1;
use crate::settings::tls::Tls;
use crate::settings::ServerSettings;
use futures_rustls::TlsAcceptor;
use proscenium::net::TcpStream;
use proscenium::Handle;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

impl Tls {
    /// Serves one accepted connection: the handshake (within the header
    /// read timeout; a termination closes a connection still in it, which
    /// has no request in flight), then HTTP/2 if ALPN chose `h2`, else
    /// HTTP/1.1 (whose first bytes may still be the HTTP/2 preface).
    pub(crate) async fn serve(
        self,
        stream: TcpStream,
        guard: ConnectionGuard,
        handler: Handler,
        settings: Arc<ServerSettings>,
        handle: Handle,
    ) {
        let control = guard.control();
        let mut accept = pin!(TlsAcceptor::from(Arc::clone(self.config())).accept(stream));
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
                return;
            }
            None => return,
        };
        let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2".as_slice());
        tracing::trace!(h2, "TLS handshake complete");
        #[cfg(feature = "http2")]
        if h2 {
            return crate::protocol::http2::serve(
                stream,
                Vec::new(),
                guard,
                handler,
                settings,
                handle,
            )
            .await;
        }
        http1::serve(stream, guard, handler, settings, handle).await
    }
}
