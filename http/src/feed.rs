//! A streamed request body's channel (`ServerSettings::stream_request_bodies`):
//! the connection reads the body off the socket and pushes its pieces into
//! a [`Feed`]; the handler reads them from the request's [`Body`], a stream
//! over the feed. At most [`FEED_CAPACITY`] bytes wait in between: past
//! that the connection stops reading the socket until the handler takes
//! some (backpressure reaches the client through TCP's window).
//!
//! A helper at the bottom of the crate's layers (see `lib.rs`), beside
//! `body.rs`; HTTP/1.1 (`protocol/http1.rs`) feeds it.

use crate::body::{Body, BoxError};
use futures_core::Stream;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// The most body bytes that wait for the handler.
pub(crate) const FEED_CAPACITY: usize = 64 * 1024;

/// The connection's end of a streamed request body.
#[derive(Debug)]
pub(crate) struct Feed {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    pieces: VecDeque<Vec<u8>>,
    buffered: usize,
    /// How the body ended, once it has: `Ok` at its last byte, an error if
    /// it was cut (refused, timed out, the client left). Taken by the
    /// reader after the last piece.
    end: Option<Result<(), BoxError>>,
    /// The reader dropped the body: nobody reads what comes.
    abandoned: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

/// A streamed request body and the feed its bytes are pushed into.
pub(crate) fn channel() -> (Body, Arc<Feed>) {
    let feed = Arc::new(Feed {
        state: Mutex::new(State::default()),
    });
    let body = Body::from_stream(Reader(Arc::clone(&feed)));
    (body, feed)
}

impl Feed {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock: a panic while the state was consistent (no
        // user code runs under it).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ready with `true` once there is room for more, `false` if the
    /// reader dropped the body.
    pub(crate) fn poll_room(&self, cx: &mut Context<'_>) -> Poll<bool> {
        let mut state = self.lock();
        if state.abandoned {
            return Poll::Ready(false);
        }
        if state.buffered < FEED_CAPACITY {
            return Poll::Ready(true);
        }
        state.writer = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Hands `piece` to the reader.
    pub(crate) fn push(&self, piece: Vec<u8>) {
        if piece.is_empty() {
            return;
        }
        let reader = {
            let mut state = self.lock();
            if state.abandoned {
                return;
            }
            state.buffered += piece.len();
            state.pieces.push_back(piece);
            state.reader.take()
        };
        if let Some(reader) = reader {
            reader.wake();
        }
    }

    /// Ends the body: `Ok` after its last byte, or the error the reader
    /// gets after the pieces already pushed. Only the first end counts.
    pub(crate) fn finish(&self, end: Result<(), BoxError>) {
        let reader = {
            let mut state = self.lock();
            if state.end.is_some() {
                return;
            }
            state.end = Some(end);
            state.reader.take()
        };
        if let Some(reader) = reader {
            reader.wake();
        }
    }
}

/// The handler's end: a stream of the body's pieces.
struct Reader(Arc<Feed>);

impl Stream for Reader {
    type Item = Result<Vec<u8>, BoxError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let (item, writer) = {
            let mut state = self.0.lock();
            if let Some(piece) = state.pieces.pop_front() {
                state.buffered -= piece.len();
                (Some(Ok(piece)), state.writer.take())
            } else {
                match state.end.take() {
                    Some(Ok(())) => {
                        // Ended: a later poll also says so.
                        state.end = Some(Ok(()));
                        return Poll::Ready(None);
                    }
                    Some(Err(e)) => {
                        // The error once, then the end.
                        state.end = Some(Ok(()));
                        return Poll::Ready(Some(Err(e)));
                    }
                    None => {
                        state.reader = Some(cx.waker().clone());
                        return Poll::Pending;
                    }
                }
            }
        };
        if let Some(writer) = writer {
            writer.wake();
        }
        Poll::Ready(item)
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let writer = {
            let mut state = self.0.lock();
            state.abandoned = true;
            state.pieces.clear();
            state.buffered = 0;
            state.writer.take()
        };
        if let Some(writer) = writer {
            writer.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            // SeqCst: a test's counter.
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn next(body: &mut Body, cx: &mut Context<'_>) -> Poll<Option<Result<Vec<u8>, BoxError>>> {
        use http_body::Body as _;
        Pin::new(body).poll_frame(cx).map(|frame| {
            frame.map(|f| f.map(|f| f.into_data().map(|d| d.to_vec()).unwrap_or_default()))
        })
    }

    #[test]
    fn pieces_come_in_order_then_the_end_and_a_full_feed_waits_for_the_reader() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        let mut cx = Context::from_waker(&waker);
        let (mut body, feed) = channel();
        assert!(next(&mut body, &mut cx).is_pending());
        feed.push(vec![1; FEED_CAPACITY]);
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "the reader is woken");
        assert!(feed.poll_room(&mut cx).is_pending(), "full");
        match next(&mut body, &mut cx) {
            Poll::Ready(Some(Ok(piece))) => assert_eq!(piece.len(), FEED_CAPACITY),
            other => panic!("{:?}", other.map(|o| o.map(|r| r.map(|p| p.len())))),
        }
        assert_eq!(count.0.load(Ordering::SeqCst), 2, "the writer is woken");
        assert_eq!(feed.poll_room(&mut cx), Poll::Ready(true));
        feed.push(b"end".to_vec());
        feed.finish(Ok(()));
        feed.finish(Err("ignored: only the first end counts".into()));
        assert!(matches!(next(&mut body, &mut cx), Poll::Ready(Some(Ok(p))) if p == b"end"));
        assert!(matches!(next(&mut body, &mut cx), Poll::Ready(None)));
        assert!(matches!(next(&mut body, &mut cx), Poll::Ready(None)));
    }

    #[test]
    fn an_error_comes_after_the_pieces_and_a_dropped_reader_abandons_the_feed() {
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        let (mut body, feed) = channel();
        feed.push(b"a".to_vec());
        feed.finish(Err("cut".into()));
        assert!(matches!(next(&mut body, &mut cx), Poll::Ready(Some(Ok(p))) if p == b"a"));
        match next(&mut body, &mut cx) {
            Poll::Ready(Some(Err(e))) => assert_eq!(e.to_string(), "cut"),
            _ => panic!("the error"),
        }
        assert!(matches!(next(&mut body, &mut cx), Poll::Ready(None)));
        let (body, feed) = channel();
        drop(body);
        assert_eq!(feed.poll_room(&mut cx), Poll::Ready(false));
    }
}
