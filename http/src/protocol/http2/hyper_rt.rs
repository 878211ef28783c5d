//! hyper's runtime traits on the engine's scheduler (feature `http2`):
//! [`Io`] is a `proscenium::net::TcpStream` as `hyper::rt::{Read, Write}`
//! (the bytes the hand-written layer read before it saw the HTTP/2 preface
//! come first), [`SchedulerExecutor`] spawns hyper's background futures
//! (HTTP/2 streams) on the scheduler's workers, and [`SchedulerTimer`] is
//! hyper's `Timer` on the scheduler's timers (`Handle::sleep`). No tokio
//! runtime runs. HTTP/2's own (a part of `protocol/http2.rs`): it imports
//! `connection.rs`'s `Transport` and `frames.rs`.

use crate::connection::Transport;
use crate::protocol::http2::frames::Frames;
use proscenium::Handle;
use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tracing::Instrument;

/// A connection's socket, shared with the connection task (which shuts it
/// down and lingers on it once hyper is done), and what the frames that
/// pass through it show ([`Seen`]).
///
/// The stream is behind a mutex so that the connection task can have it
/// back once hyper is done with it (hyper's HTTP/2 connection does not
/// hand its I/O back); only one of them uses it at a time, so the lock is
/// never contended.
#[derive(Debug)]
pub(crate) struct Io<S> {
    stream: Arc<Mutex<S>>,
    seen: Arc<Seen>,
}

/// What the frames read and written show the connection task: the
/// measure of the idle timeout and of the header read timeout.
///
/// Written by [`Prefixed`]'s reads and writes, which hyper makes while the
/// connection task polls its connection; read by the same task after
/// those polls. Every access is Relaxed: one task writes and reads them,
/// in program order (the scheduler's hand-over of the task from one
/// worker to the next orders its polls), and they order nothing else.
#[derive(Debug, Default)]
struct Seen {
    /// Writes that carried a DATA frame's payload: a response's content
    /// the client's flow control let through and the socket took.
    content_sent: AtomicU64,
    /// The header block the client has open (`frames::Frames::open_block`):
    /// its number shifted left once, with bit 0 set while it is open.
    open_block: AtomicU64,
}

impl<S> Clone for Io<S> {
    fn clone(&self) -> Io<S> {
        Io {
            stream: Arc::clone(&self.stream),
            seen: Arc::clone(&self.seen),
        }
    }
}

impl<S: Transport> Io<S> {
    pub(crate) fn new(stream: S) -> Io<S> {
        Io {
            stream: Arc::new(Mutex::new(stream)),
            seen: Arc::default(),
        }
    }

    /// The stream, for the connection task once hyper is done.
    pub(crate) fn stream(&self) -> MutexGuard<'_, S> {
        // A poisoned lock: a panic in a read or write, whose stream state
        // is still a stream's.
        self.stream.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many writes so far carried response content (DATA payload).
    pub(crate) fn content_sent(&self) -> u64 {
        // Relaxed: see `Seen`.
        self.seen.content_sent.load(Ordering::Relaxed)
    }

    /// The number of the request header block the client has half sent,
    /// if it has one open.
    pub(crate) fn open_block(&self) -> Option<u64> {
        // Relaxed: see `Seen`.
        let word = self.seen.open_block.load(Ordering::Relaxed);
        (word & 1 == 1).then_some(word >> 1)
    }
}

/// Follows `bytes`, just read from the client.
fn have_read(incoming: &mut Frames, seen: &Seen, bytes: &[u8]) {
    incoming.pass(bytes);
    let word = match incoming.open_block() {
        Some(block) => block << 1 | 1,
        None => 0,
    };
    // Relaxed: see `Seen`.
    seen.open_block.store(word, Ordering::Relaxed);
}

/// What hyper reads and writes: the connection's [`Io`], with the bytes
/// already read (the preface and what came with it) served first, and the
/// frames of both directions followed ([`Frames`]).
#[derive(Debug)]
pub(crate) struct Prefixed<S> {
    io: Io<S>,
    read: Vec<u8>,
    at: usize,
    incoming: Frames,
    outgoing: Frames,
}

impl<S: Transport> Prefixed<S> {
    pub(crate) fn new(io: Io<S>, read: Vec<u8>) -> Prefixed<S> {
        Prefixed {
            io,
            read,
            at: 0,
            incoming: Frames::from_client(),
            outgoing: Frames::from_server(),
        }
    }

    /// Follows `bytes`, just written.
    fn have_written<'a>(&mut self, bytes: impl IntoIterator<Item = &'a [u8]>) {
        let mut content = false;
        for piece in bytes {
            content |= self.outgoing.pass(piece);
        }
        if content {
            // Relaxed: see `Seen`.
            self.io.seen.content_sent.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<S: Transport> hyper::rt::Read for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.read.len() {
            let n = buf.remaining().min(this.read.len() - this.at);
            let piece = &this.read[this.at..this.at + n];
            buf.put_slice(piece);
            have_read(&mut this.incoming, &this.io.seen, piece);
            this.at += n;
            if this.at == this.read.len() {
                this.read = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        let n = {
            // SAFETY: the slice is only written to (zeroed below, then
            // filled by the read) before the bytes the read reports are
            // marked filled with `advance`; nothing uninitialized is read.
            let unfilled = unsafe { buf.as_mut() };
            unfilled.fill(MaybeUninit::new(0));
            // SAFETY: every element was initialized just above, and
            // `MaybeUninit<u8>` has the layout of `u8`.
            let init = unsafe { &mut *(unfilled as *mut [MaybeUninit<u8>] as *mut [u8]) };
            let n = match Pin::new(&mut *this.io.stream()).poll_read(cx, init) {
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            have_read(&mut this.incoming, &this.io.seen, &init[..n]);
            n
        };
        // SAFETY: the read initialized (and filled) the first `n` bytes.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<S: Transport> hyper::rt::Write for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut *self.io.stream()).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written {
            self.have_written([&buf[..n]]);
        }
        written
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut *self.io.stream()).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = written {
            // The first `n` octets, across the slices.
            let mut left = n;
            let pieces = bufs.iter().map_while(|buf| {
                let take = left.min(buf.len());
                left -= take;
                (take > 0).then(|| &buf[..take])
            });
            self.have_written(pieces);
        }
        written
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io.stream()).poll_flush(cx)
    }

    /// Not here: the connection task shuts the write half down once hyper
    /// is done (the lingering close, after it has counted hyper's own
    /// answers), so the client's EOF never comes before the server's
    /// bookkeeping of the response.
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// hyper's executor: its background futures (each HTTP/2 stream's
/// service future and response) run as detached tasks on the scheduler's
/// workers, in the span hyper spawns them from (the connection's, whose
/// task polls hyper's connection): a request's span is its connection's
/// child, as on HTTP/1.1.
#[derive(Debug, Clone)]
pub(crate) struct SchedulerExecutor(pub(crate) Handle);

impl<F> hyper::rt::Executor<F> for SchedulerExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        self.0.spawn_detached(future.in_current_span());
    }
}

/// hyper's timer: the scheduler's timer wheel.
#[derive(Debug, Clone)]
pub(crate) struct SchedulerTimer(pub(crate) Handle);

impl hyper::rt::Timer for SchedulerTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(SchedulerSleep(self.0.sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        self.sleep(deadline.saturating_duration_since(Instant::now()))
    }
}

/// [`proscenium::Sleep`] as `hyper::rt::Sleep`.
struct SchedulerSleep(proscenium::Sleep);

impl Future for SchedulerSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl hyper::rt::Sleep for SchedulerSleep {}
