//! [`Body`]: the bytes of a request or a response, whole or streamed.
//! Vocabulary, at the bottom of the crate's layers (see `lib.rs`): it
//! imports no other module.

use futures_core::Stream;
use std::error::Error;
use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The error a streamed body ends with (see [`Body::from_stream`]).
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// Why a streamed request body ended before its end
/// ([`ServerSettings::stream_request_bodies`](crate::ServerSettings::stream_request_bodies)):
/// the error a handler reads from the body, as a [`BoxError`] it can
/// downcast.
///
/// ```
/// use proscenium_http::{BoxError, RequestBodyError};
///
/// let error: BoxError = RequestBodyError::TooLarge.into();
/// assert_eq!(error.downcast_ref(), Some(&RequestBodyError::TooLarge));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestBodyError {
    /// The body grew past `max_body_bytes` (413 had it been read whole).
    #[error("the request body is larger than max_body_bytes")]
    TooLarge,
    /// The body read timeout passed, or no byte came for the idle timeout.
    #[error("the request body did not arrive in time")]
    TimedOut,
    /// The body's framing was malformed (a bad chunk line or trailers).
    #[error("the request body is malformed")]
    Malformed,
    /// The client closed the connection (or it failed) before the body's
    /// end.
    #[error("the client left before the end of the request body")]
    ClientLeft,
    /// The handler answered before reading the body to its end.
    #[error("the response was sent before the request body was read")]
    NotRead,
}

/// The stream of a streamed body, type-erased.
type ByteStream = Pin<Box<dyn Stream<Item = Result<Vec<u8>, BoxError>> + Send + 'static>>;

/// The body of a request or a response.
///
/// A body is either **full** (owned bytes: what a request body is by
/// default, read whole before the handler runs; sent with
/// `Content-Length`) or **streamed** ([`Body::from_stream`]: a response
/// body is sent with `Transfer-Encoding: chunked` as the stream yields,
/// each piece written to the socket before the stream is polled for the
/// next, so a client that reads slowly slows the stream down instead of
/// filling the server's memory). A request body is streamed when the
/// binding says so
/// ([`ServerSettings::stream_request_bodies`](crate::ServerSettings::stream_request_bodies)):
/// the handler then reads it as it comes, with [`next_chunk`](Body::next_chunk),
/// [`read_all`](Body::read_all) or as an [`http_body::Body`].
#[derive(Default)]
pub struct Body {
    kind: Kind,
}

enum Kind {
    Full(Vec<u8>),
    Stream(ByteStream),
}

impl Default for Kind {
    fn default() -> Kind {
        Kind::Full(Vec::new())
    }
}

impl Body {
    /// An empty body.
    pub fn empty() -> Body {
        Body::default()
    }

    /// A streamed body: each `Ok` item is sent as one chunk
    /// (`Transfer-Encoding: chunked`; empty items are skipped), the end of
    /// the stream ends the body. An `Err` item ends the connection without
    /// the final chunk, so the client sees a truncated body, never a valid
    /// end; the error is logged at debug level.
    ///
    /// The stream is polled for its next item only once the previous one
    /// is written to the socket: a client that never reads holds the
    /// socket buffers and one item, no more. At the hard deadline of
    /// [`ServerBinding::terminate`](crate::ServerBinding::terminate) a
    /// stream still running is dropped and the connection closed.
    ///
    /// An HTTP/1.0 client gets the items unframed and the connection
    /// closes after the last (HTTP/1.0 has no chunked coding).
    ///
    /// ```
    /// use proscenium_http::Body;
    /// # struct Once(Option<Vec<u8>>);
    /// # impl futures_core::Stream for Once {
    /// #     type Item = Result<Vec<u8>, std::io::Error>;
    /// #     fn poll_next(mut self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>)
    /// #         -> std::task::Poll<Option<Self::Item>> {
    /// #         std::task::Poll::Ready(self.0.take().map(Ok))
    /// #     }
    /// # }
    /// // Any futures-core Stream of Result<impl Into<Vec<u8>>, impl Into<BoxError>>.
    /// let body = Body::from_stream(Once(Some(b"hello".to_vec())));
    /// assert!(body.is_stream());
    /// ```
    pub fn from_stream<S, D, E>(stream: S) -> Body
    where
        S: Stream<Item = Result<D, E>> + Send + 'static,
        D: Into<Vec<u8>>,
        E: Into<BoxError>,
    {
        Body {
            kind: Kind::Stream(Box::pin(MapStream {
                stream: Box::pin(stream),
            })),
        }
    }

    /// Whether this is a streamed body ([`Body::from_stream`]).
    pub fn is_stream(&self) -> bool {
        matches!(self.kind, Kind::Stream(_))
    }

    /// The bytes of a full body; empty for a streamed body, whose bytes are
    /// not in hand (see [`is_stream`](Self::is_stream)).
    pub fn as_bytes(&self) -> &[u8] {
        match &self.kind {
            Kind::Full(bytes) => bytes,
            Kind::Stream(_) => &[],
        }
    }

    /// The bytes of a full body, owned; empty for a streamed body.
    pub fn into_bytes(self) -> Vec<u8> {
        match self.kind {
            Kind::Full(bytes) => bytes,
            Kind::Stream(_) => Vec::new(),
        }
    }

    /// The length in bytes of a full body; 0 for a streamed body.
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Whether a full body has no bytes; false for a streamed body.
    pub fn is_empty(&self) -> bool {
        match &self.kind {
            Kind::Full(bytes) => bytes.is_empty(),
            Kind::Stream(_) => false,
        }
    }

    /// A copy of a full body; `None` for a streamed body (a stream is
    /// consumed once).
    pub fn try_clone(&self) -> Option<Body> {
        match &self.kind {
            Kind::Full(bytes) => Some(Body::from(bytes.clone())),
            Kind::Stream(_) => None,
        }
    }

    /// The next piece of the body: a full body's bytes (at once), a
    /// stream's next item; `None` at the end. A streamed request body ends
    /// with an error if it was cut: over `max_body_bytes`, past the body
    /// read timeout, malformed, or its client left.
    ///
    /// ```
    /// # futures_executor_stand_in::block_on(async {
    /// use proscenium_http::Body;
    ///
    /// let mut body = Body::from("hello");
    /// assert_eq!(body.next_chunk().await.unwrap().unwrap(), b"hello");
    /// assert!(body.next_chunk().await.is_none());
    /// # });
    /// # mod futures_executor_stand_in {
    /// #     pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #         let mut f = std::pin::pin!(f);
    /// #         let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    /// #         loop {
    /// #             if let std::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; }
    /// #         }
    /// #     }
    /// # }
    /// ```
    pub async fn next_chunk(&mut self) -> Option<Result<Vec<u8>, BoxError>> {
        std::future::poll_fn(|cx| match &mut self.kind {
            Kind::Full(bytes) if bytes.is_empty() => Poll::Ready(None),
            Kind::Full(bytes) => Poll::Ready(Some(Ok(std::mem::take(bytes)))),
            Kind::Stream(stream) => loop {
                match stream.as_mut().poll_next(cx) {
                    Poll::Ready(Some(Ok(piece))) if piece.is_empty() => continue,
                    other => return other,
                }
            },
        })
        .await
    }

    /// All of the body's bytes: a full body's at once, a stream's once it
    /// has ended (or the error it ended with).
    pub async fn read_all(mut self) -> Result<Vec<u8>, BoxError> {
        let mut all = Vec::new();
        while let Some(piece) = self.next_chunk().await {
            let piece = piece?;
            if all.is_empty() {
                all = piece;
            } else {
                all.extend_from_slice(&piece);
            }
        }
        Ok(all)
    }

    /// The stream of a streamed body, or the bytes of a full one.
    pub(crate) fn into_kind(self) -> Result<Vec<u8>, ByteStream> {
        match self.kind {
            Kind::Full(bytes) => Ok(bytes),
            Kind::Stream(stream) => Err(stream),
        }
    }
}

/// Maps the user's item and error types to ours (the user's stream boxed
/// again so that no pin projection, and no `unsafe`, is needed).
struct MapStream<S> {
    stream: Pin<Box<S>>,
}

impl<S, D, E> Stream for MapStream<S>
where
    S: Stream<Item = Result<D, E>>,
    D: Into<Vec<u8>>,
    E: Into<BoxError>,
{
    type Item = Result<Vec<u8>, BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.stream
            .as_mut()
            .poll_next(cx)
            .map(|item| item.map(|r| r.map(Into::into).map_err(Into::into)))
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Full(bytes) => f.debug_struct("Body").field("len", &bytes.len()).finish(),
            Kind::Stream(_) => f.debug_struct("Body").field("stream", &true).finish(),
        }
    }
}

impl From<Vec<u8>> for Body {
    fn from(bytes: Vec<u8>) -> Body {
        Body {
            kind: Kind::Full(bytes),
        }
    }
}

impl From<&[u8]> for Body {
    fn from(bytes: &[u8]) -> Body {
        Body::from(bytes.to_vec())
    }
}

impl From<String> for Body {
    fn from(text: String) -> Body {
        Body::from(text.into_bytes())
    }
}

impl From<&str> for Body {
    fn from(text: &str) -> Body {
        Body::from(text.as_bytes().to_vec())
    }
}

/// A `Body` is an [`http_body::Body`], the ecosystem's body trait (what
/// hyper and tower's middleware read): a full body is one data frame, a
/// stream one frame per item (empty items skipped); a stream's `Err` item
/// is the body's error.
///
/// ```
/// use http_body::Body as _;
/// use proscenium_http::Body;
///
/// let body = Body::from("hello");
/// assert_eq!(body.size_hint().exact(), Some(5));
/// assert!(!body.is_end_stream());
/// assert!(Body::empty().is_end_stream());
/// ```
impl http_body::Body for Body {
    type Data = bytes::Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, BoxError>>> {
        match &mut self.kind {
            Kind::Full(bytes) if bytes.is_empty() => Poll::Ready(None),
            Kind::Full(bytes) => {
                let data = bytes::Bytes::from(std::mem::take(bytes));
                Poll::Ready(Some(Ok(http_body::Frame::data(data))))
            }
            Kind::Stream(stream) => loop {
                match stream.as_mut().poll_next(cx) {
                    Poll::Ready(Some(Ok(data))) if data.is_empty() => continue,
                    Poll::Ready(Some(Ok(data))) => {
                        return Poll::Ready(Some(Ok(http_body::Frame::data(data.into()))))
                    }
                    Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                    Poll::Ready(None) => return Poll::Ready(None),
                    Poll::Pending => return Poll::Pending,
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(&self.kind, Kind::Full(bytes) if bytes.is_empty())
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match &self.kind {
            Kind::Full(bytes) => http_body::SizeHint::with_exact(bytes.len() as u64),
            Kind::Stream(_) => http_body::SizeHint::default(),
        }
    }
}
