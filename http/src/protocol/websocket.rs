//! WebSockets (RFC 6455) on HTTP/1.1's Upgrade (feature `websocket`).
//!
//! A handler answers an upgrade request with
//! [`WebSocketUpgrade::on_upgrade`]'s `101 Switching Protocols`; once that
//! is written, the connection's task runs the callback's future and, beside
//! it, the socket: tungstenite frames and unframes messages, and two
//! bounded channels carry them between the socket and the [`WebSocket`]
//! the callback got. The connection keeps its place in the server, so a
//! termination reaches it as it reaches any connection: a Close frame with
//! 1001 (going away), the client's Close awaited until the hard deadline,
//! then the socket cut.
//!
//! A protocol (see `lib.rs`): it imports the bottom layer and no other
//! protocol. HTTP/1.1 (`http1.rs`) finds the upgrade in a handler's `101`
//! ([`accept`]) and hands the connection back to `dispatch.rs`, which
//! serves it here ([`serve`]).

use crate::body::Body;
use crate::connection::{ConnectionGuard, Control, Deadline, Transport};
use async_tungstenite::tungstenite::error::{CapacityError, ProtocolError};
use async_tungstenite::tungstenite::handshake::derive_accept_key;
use async_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use async_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use async_tungstenite::tungstenite::Error as WsError;
use async_tungstenite::WebSocketStream;
use futures_channel::mpsc;
use futures_core::Stream;
use futures_sink::Sink;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode, Version};
use proscenium::Handle;
use std::fmt;
use std::future::{poll_fn, Future};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

pub use async_tungstenite::tungstenite::protocol::frame::coding::CloseCode as WebSocketCloseCode;
pub use async_tungstenite::tungstenite::protocol::CloseFrame;
pub use async_tungstenite::tungstenite::Message;

type Callback = Box<dyn FnOnce(WebSocket) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;

/// An accepted upgrade, carried from the handler's response to the
/// connection in the response's extensions (which must be `Clone`).
#[derive(Clone)]
pub(crate) struct Upgrading(Arc<Mutex<Option<(Limits, Callback)>>>);

/// An upgrade the handler accepted: the `101`'s head, the limits and the
/// callback.
pub(crate) type Accepted = (Vec<u8>, Limits, Callback);

/// The accepted upgrade of a handler's `101` response (`None`: not one of
/// `on_upgrade`'s), counted as a response; kept out of line, off the
/// request path.
#[inline(never)]
pub(crate) fn accept(
    response: &mut Response<Body>,
    span: &tracing::Span,
    control: &Control,
) -> Option<Accepted> {
    let (limits, callback) = take_upgrade(response)?;
    span.record("status", 101);
    control.metrics().response(StatusCode::SWITCHING_PROTOCOLS);
    Some((switching_head(response), limits, callback))
}

/// The `101` response's head, as written (its body, empty, is not).
fn switching_head(response: &Response<Body>) -> Vec<u8> {
    let mut head = b"HTTP/1.1 101 Switching Protocols\r\n".to_vec();
    for (name, value) in response.headers() {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// Takes the accepted upgrade out of a handler's `101` response.
fn take_upgrade(response: &mut Response<Body>) -> Option<(Limits, Callback)> {
    let upgrading = response.extensions_mut().remove::<Upgrading>()?;
    let taken = upgrading
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    taken
}

/// The limits and timeouts of one WebSocket.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    max_message_bytes: usize,
    max_frame_bytes: usize,
    ping_interval: Duration,
    idle_timeout: Duration,
    buffered_messages: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_message_bytes: 1 << 20,
            max_frame_bytes: 1 << 20,
            ping_interval: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(75),
            buffered_messages: 16,
        }
    }
}

/// A request to upgrade to a WebSocket, checked; the handler accepts it
/// with [`on_upgrade`](Self::on_upgrade).
///
/// ```
/// use http::{Request, Response};
/// use proscenium_http::{Body, WebSocketUpgrade};
///
/// async fn handler(request: Request<Body>) -> Response<Body> {
///     match WebSocketUpgrade::from_request(&request) {
///         Ok(upgrade) => upgrade.on_upgrade(|mut socket| async move {
///             // Echo every text and binary message.
///             while let Some(message) = socket.recv().await {
///                 if message.is_text() || message.is_binary() {
///                     if socket.send(message).await.is_err() {
///                         break;
///                     }
///                 }
///             }
///         }),
///         Err(refusal) => refusal,
///     }
/// }
/// # let _ = handler;
/// ```
pub struct WebSocketUpgrade {
    accept: HeaderValue,
    limits: Limits,
}

impl fmt::Debug for WebSocketUpgrade {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebSocketUpgrade")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl WebSocketUpgrade {
    /// Checks `request` as RFC 6455 §4.2.1 asks (an HTTP/1.1 GET with
    /// `Upgrade: websocket`, `Connection: upgrade`, `Sec-WebSocket-Version:
    /// 13` and a `Sec-WebSocket-Key`); `Err` is the response to send
    /// instead: 426 (with `Sec-WebSocket-Version: 13`) for a version this
    /// server does not speak, 400 for the rest.
    #[allow(clippy::result_large_err)]
    pub fn from_request<B>(request: &Request<B>) -> Result<WebSocketUpgrade, Response<Body>> {
        let headers = request.headers();
        let has_token = |name: header::HeaderName, token: &str| {
            headers.get_all(name).iter().any(|v| {
                v.to_str()
                    .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
            })
        };
        if request.method() != Method::GET
            || request.version() != Version::HTTP_11
            || !has_token(header::UPGRADE, "websocket")
            || !has_token(header::CONNECTION, "upgrade")
        {
            return Err(refusal(StatusCode::BAD_REQUEST));
        }
        if headers
            .get(header::SEC_WEBSOCKET_VERSION)
            .map(|v| v.as_bytes())
            != Some(b"13")
        {
            let mut response = refusal(StatusCode::UPGRADE_REQUIRED);
            response.headers_mut().insert(
                header::SEC_WEBSOCKET_VERSION,
                HeaderValue::from_static("13"),
            );
            return Err(response);
        }
        let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY) else {
            return Err(refusal(StatusCode::BAD_REQUEST));
        };
        let accept = HeaderValue::from_str(&derive_accept_key(key.as_bytes()))
            .expect("base64 is a valid header value");
        Ok(WebSocketUpgrade {
            accept,
            limits: Limits::default(),
        })
    }

    /// The largest message accepted from the client, in bytes (default 1
    /// MiB): a larger one is answered with Close 1009 (message too big).
    pub fn max_message_bytes(mut self, bytes: usize) -> WebSocketUpgrade {
        self.limits.max_message_bytes = bytes;
        self
    }

    /// The largest frame accepted from the client, in bytes of payload
    /// (default 1 MiB): a larger one is answered with Close 1009.
    pub fn max_frame_bytes(mut self, bytes: usize) -> WebSocketUpgrade {
        self.limits.max_frame_bytes = bytes;
        self
    }

    /// After this long without a frame from the client the server sends a
    /// Ping (default 30 s).
    pub fn ping_interval(mut self, interval: Duration) -> WebSocketUpgrade {
        self.limits.ping_interval = interval;
        self
    }

    /// After this long without a frame from the client (a Pong answers
    /// the server's Ping) the server closes with 1001 (default 75 s); the
    /// client's Close is awaited as long again, then the socket is cut.
    pub fn idle_timeout(mut self, timeout: Duration) -> WebSocketUpgrade {
        self.limits.idle_timeout = timeout;
        self
    }

    /// How many messages wait between the socket and the handler, each
    /// way (default 16, at least 1). With the socket's write buffer this
    /// bounds what a slow client makes the server hold: once they are
    /// full, [`WebSocket`]'s `send` waits; and once the handler does not
    /// take messages, the socket is not read.
    pub fn buffered_messages(mut self, messages: usize) -> WebSocketUpgrade {
        self.limits.buffered_messages = messages.max(1);
        self
    }

    /// Accepts the upgrade and hands the socket to an actor (one actor per
    /// connection): `start` gets the sending half, to keep in the actor's
    /// state, and returns the actor (spawned by it; `None`: the socket is
    /// closed with 1000). Each message from the client is told to the
    /// actor (`M::from`), `Message::Close` last, always (`Close(None)` when
    /// the client left without one). The socket closes with 1000 once the
    /// client closed it, or once the actor dropped its sending halves (it
    /// stopped). A bounded mailbox that is full sends the message to dead
    /// letters, as [`ActorRef::tell`](proscenium::ActorRef::tell) does.
    pub fn on_upgrade_actor<M, F>(self, start: F) -> Response<Body>
    where
        M: From<Message> + Send + 'static,
        F: FnOnce(WebSocketSender) -> Option<proscenium::ActorRef<M>> + Send + 'static,
    {
        self.on_upgrade(move |socket| async move {
            let (sender, mut receiver) = socket.split();
            let Some(actor) = start(sender) else {
                return;
            };
            let mut closed = false;
            while let Some(message) = receiver.recv().await {
                closed = message.is_close();
                match actor.try_tell(M::from(message)) {
                    Ok(()) => {}
                    // Full: to dead letters, as `tell` sends it.
                    Err(proscenium::TrySendError::Full(message)) => actor.tell(message),
                    // The actor stopped: nobody reads the socket any more.
                    Err(proscenium::TrySendError::Closed(_)) => return,
                }
            }
            if !closed {
                actor.tell(M::from(Message::Close(None)));
            }
        })
    }

    /// The `101 Switching Protocols` response that accepts the upgrade:
    /// once it is written, `callback` gets the [`WebSocket`] and its
    /// future runs on the connection's task.
    pub fn on_upgrade<F, Fut>(self, callback: F) -> Response<Body>
    where
        F: FnOnce(WebSocket) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let callback: Callback = Box::new(move |socket| Box::pin(callback(socket)));
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let headers = response.headers_mut();
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, self.accept);
        response
            .extensions_mut()
            .insert(Upgrading(Arc::new(Mutex::new(Some((
                self.limits,
                callback,
            ))))));
        response
    }
}

fn refusal(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

/// The error of sending on a [`WebSocket`] whose socket is closed (or
/// closing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the WebSocket is closed")]
pub struct WebSocketClosed;

/// An open WebSocket, as the handler sees it: a `Stream` of the client's
/// messages (text, binary, and its `Close` last if it sent one; pings and
/// pongs are answered by the server) and a `Sink` of messages to it.
/// Sending `Message::Close` starts the close handshake; dropping the
/// `WebSocket` (or the callback's future ending) closes with 1000. Once
/// the socket is closed the callback's future still runs to its end (its
/// receiver ends once it took what was read, its sends fail): until then
/// the connection counts as open, and a termination's hard deadline drops
/// it.
///
/// [`split`](Self::split) gives the two halves, to hand to an actor: the
/// receiving half piped into its mailbox, the sending half (`Clone`) kept
/// in its state.
#[derive(Debug)]
pub struct WebSocket {
    incoming: WebSocketReceiver,
    outgoing: WebSocketSender,
}

/// The receiving half of a [`WebSocket`]: a `Stream` of the client's
/// messages.
#[derive(Debug)]
pub struct WebSocketReceiver(mpsc::Receiver<Message>);

/// The sending half of a [`WebSocket`]: a `Sink` of messages to the
/// client; clones send on the same socket.
#[derive(Debug, Clone)]
pub struct WebSocketSender(mpsc::Sender<Message>);

impl WebSocket {
    /// The two halves.
    pub fn split(self) -> (WebSocketSender, WebSocketReceiver) {
        (self.outgoing, self.incoming)
    }

    /// The client's next message; `None` once the socket is closed.
    pub async fn recv(&mut self) -> Option<Message> {
        self.incoming.recv().await
    }

    /// Sends `message`, waiting while the buffers toward the client are
    /// full.
    pub async fn send(&mut self, message: Message) -> Result<(), WebSocketClosed> {
        self.outgoing.send(message).await
    }
}

impl WebSocketReceiver {
    /// The client's next message; `None` once the socket is closed.
    pub async fn recv(&mut self) -> Option<Message> {
        poll_fn(|cx| Pin::new(&mut self.0).poll_next(cx)).await
    }
}

impl WebSocketSender {
    /// Sends `message`, waiting while the buffers toward the client are
    /// full.
    pub async fn send(&mut self, message: Message) -> Result<(), WebSocketClosed> {
        poll_fn(|cx| self.0.poll_ready(cx))
            .await
            .map_err(|_| WebSocketClosed)?;
        self.0.start_send(message).map_err(|_| WebSocketClosed)
    }
}

impl WebSocketSender {
    /// Sends `message` if the buffer toward the client has room: for an
    /// actor, which cannot wait. `Full` hands it back while a slow client
    /// holds the buffer; `Closed` once the socket is closed.
    pub fn try_send(&mut self, message: Message) -> Result<(), proscenium::TrySendError<Message>> {
        self.0.try_send(message).map_err(|e| {
            if e.is_full() {
                proscenium::TrySendError::Full(e.into_inner())
            } else {
                proscenium::TrySendError::Closed(e.into_inner())
            }
        })
    }
}

impl Stream for WebSocketReceiver {
    type Item = Message;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        Pin::new(&mut self.0).poll_next(cx)
    }
}

impl Stream for WebSocket {
    type Item = Message;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Message>> {
        Pin::new(&mut self.incoming).poll_next(cx)
    }
}

impl Sink<Message> for WebSocketSender {
    type Error = WebSocketClosed;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx).map_err(|_| WebSocketClosed)
    }

    fn start_send(mut self: Pin<&mut Self>, item: Message) -> Result<(), Self::Error> {
        self.0.start_send(item).map_err(|_| WebSocketClosed)
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // What is sent is in the channel; the socket's task writes it.
        Poll::Ready(Ok(()))
    }

    fn poll_close(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.close_channel();
        Poll::Ready(Ok(()))
    }
}

impl Sink<Message> for WebSocket {
    type Error = WebSocketClosed;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut self.outgoing).poll_ready(cx)
    }

    fn start_send(mut self: Pin<&mut Self>, item: Message) -> Result<(), Self::Error> {
        Pin::new(&mut self.outgoing).start_send(item)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut self.outgoing).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::new(&mut self.outgoing).poll_close(cx)
    }
}

/// Serves the WebSocket `stream` was upgraded to (`read` holds the bytes
/// already read past the request's head) until it closes, the callback's
/// future beside it.
pub(crate) async fn serve<S: Transport>(
    stream: S,
    read: Vec<u8>,
    guard: ConnectionGuard,
    (head, limits, callback): Accepted,
    handle: Handle,
) {
    let control = guard.control();
    let mut stream = stream;
    if let Err(e) = write_head(&mut stream, &head, &control).await {
        tracing::debug!(error = %e, "the WebSocket's 101 was not written");
        return;
    }
    let metrics = Arc::clone(control.metrics());
    metrics.websocket_opened();
    let config = WebSocketConfig::default()
        .read_buffer_size(16 * 1024)
        .write_buffer_size(0)
        .max_write_buffer_size(64 * 1024 + limits.max_message_bytes)
        .max_message_size(Some(limits.max_message_bytes))
        .max_frame_size(Some(limits.max_frame_bytes));
    let socket =
        WebSocketStream::from_partially_read(stream, read, Role::Server, Some(config)).await;
    let (in_tx, in_rx) = mpsc::channel(limits.buffered_messages - 1);
    let (out_tx, out_rx) = mpsc::channel(limits.buffered_messages - 1);
    let mut user = Some(callback(WebSocket {
        incoming: WebSocketReceiver(in_rx),
        outgoing: WebSocketSender(out_tx),
    }));
    let mut pump = Pump {
        socket,
        control,
        handle,
        to_handler: in_tx,
        from_handler: Some(out_rx),
        waiting: None,
        close_sent: false,
        ping: Deadline::new(limits.ping_interval),
        idle: Deadline::new(limits.idle_timeout),
    };
    poll_fn(|cx| {
        if let Some(future) = &mut user {
            match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
                Ok(Poll::Pending) => {}
                Ok(Poll::Ready(())) => user = None,
                Err(_) => {
                    tracing::error!("a WebSocket's handler panicked: closed with 1011");
                    user = None;
                    pump.close(CloseCode::Error, "internal error");
                }
            }
        }
        pump.poll(cx)
    })
    .await;
    // The socket is closed: the handler's receiver ends once it took what
    // was read, its sends fail. Its future runs to its end (it is still
    // delivering the last messages, an actor's Close among them), or until
    // a termination's hard deadline.
    let control = Arc::clone(&pump.control);
    drop(pump);
    if let Some(mut future) = user {
        poll_fn(|cx| {
            if control.poll_signals(cx).forced {
                return Poll::Ready(());
            }
            match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
                Ok(Poll::Pending) => Poll::Pending,
                Ok(Poll::Ready(())) => Poll::Ready(()),
                Err(_) => {
                    tracing::error!("a WebSocket's handler panicked after its socket closed");
                    Poll::Ready(())
                }
            }
        })
        .await;
    }
    metrics.websocket_closed();
    drop(guard);
}

/// Writes the `101`'s head (a few hundred bytes: the socket's buffer
/// takes it at once but for a client that reads nothing at all, which the
/// hard deadline cuts).
async fn write_head<S: Transport>(
    stream: &mut S,
    mut head: &[u8],
    control: &Control,
) -> std::io::Result<()> {
    while !head.is_empty() {
        let written = poll_fn(|cx| {
            if control.poll_signals(cx).forced {
                return Poll::Ready(Err(std::io::ErrorKind::TimedOut.into()));
            }
            Pin::new(&mut *stream).poll_write(cx, head)
        })
        .await?;
        if written == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        head = &head[written..];
    }
    poll_fn(|cx| Pin::new(&mut *stream).poll_flush(cx)).await
}

/// The socket's side: moves messages between the socket and the handler's
/// channels, answers the termination, pings an idle client.
struct Pump<S> {
    socket: WebSocketStream<S>,
    control: Arc<Control>,
    handle: Handle,
    to_handler: mpsc::Sender<Message>,
    /// `None` once the close handshake started (nothing more is sent).
    from_handler: Option<mpsc::Receiver<Message>>,
    /// A message read from the socket that the handler's channel had no
    /// room for: the socket is not read until it is taken.
    waiting: Option<Message>,
    close_sent: bool,
    ping: Deadline,
    idle: Deadline,
}

impl<S: Transport> Pump<S> {
    /// Starts the close handshake with `code`, unless it started.
    fn close(&mut self, code: CloseCode, reason: &'static str) {
        if self.close_sent {
            return;
        }
        self.close_sent = true;
        self.from_handler = None;
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        if let Err(e) = Pin::new(&mut self.socket).start_send(Message::Close(Some(frame))) {
            tracing::debug!(error = %e, "the WebSocket's Close frame was not queued");
        }
        // The client's Close is awaited for an idle timeout at most.
        self.idle.restart();
    }

    /// Ready when the socket is closed (or must be cut).
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let signals = self.control.poll_signals(cx);
        if signals.forced {
            // The hard deadline: cut.
            return Poll::Ready(());
        }
        if signals.terminating {
            self.close(CloseCode::Away, "going away");
        }
        // Toward the client: as long as the socket takes messages.
        while let Some(from_handler) = &mut self.from_handler {
            match Pin::new(&mut self.socket).poll_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(_)) => return Poll::Ready(()),
                Poll::Pending => break,
            }
            match Pin::new(from_handler).poll_next(cx) {
                Poll::Ready(Some(message)) => {
                    let closing = message.is_close();
                    if Pin::new(&mut self.socket).start_send(message).is_err() {
                        return Poll::Ready(());
                    }
                    if closing {
                        self.close_sent = true;
                        self.from_handler = None;
                        self.idle.restart();
                    }
                }
                // The handler is done sending: a normal close.
                Poll::Ready(None) => self.close(CloseCode::Normal, ""),
                Poll::Pending => break,
            }
        }
        // From the client: as long as the handler takes messages.
        loop {
            if let Some(message) = self.waiting.take() {
                match self.to_handler.poll_ready(cx) {
                    Poll::Ready(Ok(())) => {
                        let _ = self.to_handler.start_send(message);
                    }
                    // The handler no longer reads: dropped.
                    Poll::Ready(Err(_)) => {}
                    Poll::Pending => {
                        self.waiting = Some(message);
                        break;
                    }
                }
            }
            match Pin::new(&mut self.socket).poll_next(cx) {
                Poll::Ready(Some(Ok(message))) => {
                    self.ping.restart();
                    if !self.close_sent {
                        self.idle.restart();
                    }
                    match message {
                        Message::Text(_) | Message::Binary(_) | Message::Close(_) => {
                            self.waiting = Some(message);
                        }
                        // Pings are answered by tungstenite (flushed
                        // below); pongs only show the client is there.
                        Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    let code = match &e {
                        WsError::Capacity(CapacityError::MessageTooLong { .. }) => CloseCode::Size,
                        WsError::Capacity(_) => CloseCode::Size,
                        WsError::Utf8(_) => CloseCode::Invalid,
                        WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => {
                            return Poll::Ready(());
                        }
                        WsError::Protocol(_) => CloseCode::Protocol,
                        _ => return Poll::Ready(()),
                    };
                    tracing::debug!(error = %e, "the WebSocket's client broke the protocol");
                    self.close(code, "");
                    // The socket is not read again: the Close is flushed,
                    // then the connection closes.
                    return match Pin::new(&mut self.socket).poll_flush(cx) {
                        Poll::Pending => {
                            self.waiting = None;
                            self.from_handler = None;
                            Poll::Pending
                        }
                        Poll::Ready(_) => Poll::Ready(()),
                    };
                }
                // The close handshake is over (or the client left).
                Poll::Ready(None) => {
                    let _ = Pin::new(&mut self.socket).poll_flush(cx);
                    return Poll::Ready(());
                }
                Poll::Pending => break,
            }
        }
        // The timers last: every restart above is armed again here.
        while self.idle.poll(&self.handle, cx).is_ready() {
            if self.close_sent {
                // No Close came back in time.
                return Poll::Ready(());
            }
            self.close(CloseCode::Away, "idle timeout");
        }
        while !self.close_sent && self.ping.poll(&self.handle, cx).is_ready() {
            self.ping.restart();
            if Pin::new(&mut self.socket)
                .start_send(Message::Ping(Default::default()))
                .is_err()
            {
                return Poll::Ready(());
            }
        }
        match Pin::new(&mut self.socket).poll_flush(cx) {
            Poll::Ready(Err(_)) => Poll::Ready(()),
            _ => Poll::Pending,
        }
    }
}
