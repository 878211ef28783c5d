//! A tower `Service` as a handler (feature `tower`, [`Http::bind_service`](crate::Http::bind_service)):
//! readiness awaited, the request to a clone, and the response's body,
//! whatever its type (any `http_body::Body` of `Bytes`: axum's, hyper's,
//! tower-http's), made a [`Body`].
//!
//! The body is taken as far as it is ready without waiting: a body in
//! memory (axum's `Json`, a `String`, `Full`: one frame, then its end)
//! becomes a full [`Body`], sent with `Content-Length` as a handler's
//! bytes are; a body that has to wait for its next frame (a stream) becomes
//! a streamed [`Body`] whose first item is what was ready, sent chunked and
//! polled only as the client reads, like [`Body::from_stream`]. So the
//! writers (HTTP/1.1's and HTTP/2's) stay as they are, and `Http::bind`'s
//! path does not change (decision 0032).
//!
//! A helper at the bottom of the crate's layers (see `lib.rs`): it knows
//! only [`Body`]; `Http::bind_service` (`binding.rs`) makes a handler of it.

use crate::body::{Body, BoxError};
use bytes::Bytes;
use futures_core::Stream;
use http::{Request, Response};
use std::any::Any;
use std::fmt;
use std::future::poll_fn;
use std::pin::Pin;
use std::task::{Context, Poll};

/// The most bytes of a response body taken whole before its head is
/// written: beyond, the rest streams (a body that is always ready, a
/// generator, is not read into memory whole). A single frame is taken
/// whatever its size (it is in memory already), so an axum `Json` of any
/// size is sent with its length. As much as a streamed request body may
/// hold waiting for its handler.
const READY_BYTES_MAX: usize = 64 * 1024;

/// Why a service's request was answered 500 (logged by `HandlerOutput`).
pub(crate) enum Failed<E> {
    /// The service's `poll_ready` or its future failed.
    Service(E),
    /// Its response body failed before any of it was sent.
    Body(BoxError),
}

impl<E: fmt::Display> fmt::Display for Failed<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failed::Service(e) => e.fmt(f),
            Failed::Body(e) => write!(f, "the response body failed before it was sent: {e}"),
        }
    }
}

/// Awaits `service`'s readiness, calls it with `request` and makes its
/// response's body a [`Body`].
pub(crate) async fn call<S, B>(
    mut service: S,
    request: Request<Body>,
) -> Result<Response<Body>, Failed<S::Error>>
where
    S: tower_service::Service<Request<Body>, Response = Response<B>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    poll_fn(|cx| service.poll_ready(cx))
        .await
        .map_err(Failed::Service)?;
    let response = service.call(request).await.map_err(Failed::Service)?;
    let (parts, body) = response.into_parts();
    let body = into_body(body).await.map_err(Failed::Body)?;
    Ok(Response::from_parts(parts, body))
}

/// `body` as a [`Body`]: itself if it is one; else full if it is all
/// ready now (within [`READY_BYTES_MAX`]), else streamed, starting with
/// what was ready. Never waits: a body that would is streamed. Fails if
/// the body fails before that.
async fn into_body<B>(body: B) -> Result<Body, BoxError>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    // A service of this crate's `Body` (a handler's own streamed body
    // keeps its pacing): as it is.
    let mut body = Some(body);
    if let Some(ours) = (&mut body as &mut dyn Any).downcast_mut::<Option<Body>>() {
        return Ok(ours.take().expect("the body was just put there"));
    }
    let mut body = Box::pin(body.expect("the body was just put there"));
    let mut ready = Vec::new();
    let whole = poll_fn(|cx| Poll::Ready(take_ready(body.as_mut(), &mut ready, cx))).await?;
    if whole {
        return Ok(Body::from(ready));
    }
    Ok(Body::from_stream(Rest {
        first: (!ready.is_empty()).then_some(ready),
        body,
    }))
}

/// Moves into `ready` the frames `body` has ready, until it ends (`true`),
/// waits (`false`; `cx` is registered, a spurious wake-up at most) or
/// `ready` holds [`READY_BYTES_MAX`] (`false`). Trailers are dropped (the
/// writers send none).
fn take_ready<B>(
    mut body: Pin<&mut B>,
    ready: &mut Vec<u8>,
    cx: &mut Context<'_>,
) -> Result<bool, BoxError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    loop {
        if body.is_end_stream() {
            return Ok(true);
        }
        if ready.len() >= READY_BYTES_MAX {
            return Ok(false);
        }
        match body.as_mut().poll_frame(cx) {
            Poll::Ready(None) => return Ok(true),
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                // The first frame's allocation is taken over when the
                // `Bytes` owns it alone (bytes' `From<Bytes> for Vec<u8>`).
                Ok(data) if ready.is_empty() => *ready = Vec::from(data),
                Ok(data) => ready.extend_from_slice(&data),
                Err(_) => tracing::debug!("response trailers are not sent: dropped"),
            },
            Poll::Ready(Some(Err(e))) => return Err(e.into()),
            Poll::Pending => return Ok(false),
        }
    }
}

/// A body that was not ready whole: what was (`first`), then its frames as
/// they come.
struct Rest<B> {
    first: Option<Vec<u8>>,
    body: Pin<Box<B>>,
}

impl<B> Stream for Rest<B>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Item = Result<Vec<u8>, BoxError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(first) = self.first.take() {
            return Poll::Ready(Some(Ok(first)));
        }
        loop {
            return match self.body.as_mut().poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => Poll::Ready(Some(Ok(Vec::from(data)))),
                    Err(_) => {
                        tracing::debug!("response trailers are not sent: dropped");
                        continue;
                    }
                },
                Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::task::Waker;

    /// A body of scripted polls: `Some(frame)` ready, `None` pending once
    /// (and waking at once); it says it has ended after `ends_after` polls
    /// (`is_end_stream`), or never.
    struct Scripted {
        polls: VecDeque<Option<Result<http_body::Frame<Bytes>, BoxError>>>,
        polled: usize,
        ends_after: Option<usize>,
    }

    impl Scripted {
        fn new(polls: Vec<Option<Result<http_body::Frame<Bytes>, BoxError>>>) -> Scripted {
            Scripted {
                polls: polls.into(),
                polled: 0,
                ends_after: None,
            }
        }
    }

    impl http_body::Body for Scripted {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
            self.polled += 1;
            match self.polls.pop_front() {
                Some(Some(frame)) => Poll::Ready(Some(frame)),
                Some(None) => {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                }
                None => Poll::Ready(None),
            }
        }

        fn is_end_stream(&self) -> bool {
            self.ends_after.is_some_and(|n| self.polled >= n)
        }
    }

    fn data(bytes: &'static [u8]) -> Option<Result<http_body::Frame<Bytes>, BoxError>> {
        Some(Ok(http_body::Frame::data(Bytes::from_static(bytes))))
    }

    /// Polls `future` to its end (every future here is ready, or wakes
    /// itself at once).
    fn block_on<F: std::future::Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let mut cx = Context::from_waker(Waker::noop());
        loop {
            if let Poll::Ready(v) = future.as_mut().poll(&mut cx) {
                return v;
            }
        }
    }

    fn collect(body: Body) -> Vec<Vec<u8>> {
        let mut body = body;
        let mut pieces = Vec::new();
        while let Some(piece) = block_on(body.next_chunk()) {
            pieces.push(piece.expect("no error"));
        }
        pieces
    }

    #[test]
    fn a_body_ready_to_its_end_is_a_full_body() {
        let body = Scripted::new(vec![data(b"hel"), data(b"lo")]);
        let body = block_on(into_body(body)).expect("a body");
        assert!(!body.is_stream());
        assert_eq!(body.as_bytes(), b"hello");
        // Trailers are dropped.
        let trailers = http_body::Frame::<Bytes>::trailers(http::HeaderMap::new());
        let body = Scripted::new(vec![data(b"a"), Some(Ok(trailers))]);
        assert_eq!(block_on(into_body(body)).expect("a body").as_bytes(), b"a");
        // The end known from `is_end_stream` (axum's `Full` says so once
        // its frame is taken): not polled again, where it would wait.
        let mut known = Scripted::new(vec![data(b"b"), None]);
        known.ends_after = Some(1);
        let body = block_on(into_body(known)).expect("a body");
        assert!(!body.is_stream());
        assert_eq!(body.as_bytes(), b"b");
    }

    #[test]
    fn a_body_that_waits_streams_from_what_was_ready() {
        let body = Scripted::new(vec![data(b"first"), None, data(b"second")]);
        let body = block_on(into_body(body)).expect("a body");
        assert!(body.is_stream());
        assert_eq!(collect(body), [b"first".to_vec(), b"second".to_vec()]);
        // Nothing ready: no empty first item.
        let body = Scripted::new(vec![None, data(b"late")]);
        let body = block_on(into_body(body)).expect("a body");
        assert_eq!(collect(body), [b"late".to_vec()]);
    }

    #[test]
    fn a_body_always_ready_is_taken_whole_up_to_the_bound_only() {
        static PIECE: [u8; 1024] = [7; 1024];
        let pieces = READY_BYTES_MAX / PIECE.len() + 10;
        let body = Scripted::new((0..pieces).map(|_| data(&PIECE)).collect());
        let body = block_on(into_body(body)).expect("a body");
        assert!(body.is_stream());
        let read = collect(body);
        assert_eq!(read[0].len(), READY_BYTES_MAX);
        assert_eq!(
            read.iter().map(Vec::len).sum::<usize>(),
            pieces * PIECE.len()
        );
    }

    #[test]
    fn a_body_failing_before_it_is_sent_fails_the_call_and_later_its_stream() {
        let failing = Scripted::new(vec![data(b"a"), Some(Err("broken".into()))]);
        let error = block_on(into_body(failing)).expect_err("failed");
        assert_eq!(error.to_string(), "broken");
        let later = Scripted::new(vec![None, Some(Err("broken".into()))]);
        let mut body = block_on(into_body(later)).expect("a body");
        let error = block_on(body.next_chunk())
            .expect("an item")
            .expect_err("failed");
        assert_eq!(error.to_string(), "broken");
    }

    /// A stream of ready items.
    struct Items(VecDeque<Vec<u8>>);

    impl Stream for Items {
        type Item = Result<Vec<u8>, std::io::Error>;
        fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            Poll::Ready(self.0.pop_front().map(Ok))
        }
    }

    /// A service answering with this crate's streamed `Body` keeps it
    /// streamed (sent chunked, as `Http::bind` would), though it is all
    /// ready.
    #[test]
    fn this_crates_body_is_kept_as_it_is() {
        let items = Items(vec![b"a".to_vec(), b"b".to_vec()].into());
        let body = block_on(into_body(Body::from_stream(items))).expect("a body");
        assert!(body.is_stream());
        assert_eq!(collect(body), [b"a".to_vec(), b"b".to_vec()]);
        let full = block_on(into_body(Body::from("x"))).expect("a body");
        assert_eq!(full.as_bytes(), b"x");
    }
}
