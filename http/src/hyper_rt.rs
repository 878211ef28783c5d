//! hyper's runtime traits on the engine's scheduler (feature `http2`):
//! [`Io`] is a `proscenium::net::TcpStream` as `hyper::rt::{Read, Write}`
//! (the bytes the hand-written layer read before it saw the HTTP/2 preface
//! come first), [`SchedulerExecutor`] spawns hyper's background futures
//! (HTTP/2 streams) on the scheduler's workers, and [`SchedulerTimer`] is
//! hyper's `Timer` on the scheduler's timers (`Handle::sleep`). No tokio
//! runtime runs.

use crate::connection::Transport;
use proscenium::Handle;
use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// A connection's socket, shared with the connection task (which shuts it
/// down and lingers on it once hyper is done), counting the reads and
/// writes that moved bytes (the idle timeout's measure of progress).
///
/// The stream is behind a mutex so that the connection task can have it
/// back once hyper is done with it (hyper's HTTP/2 connection does not
/// hand its I/O back); only one of them uses it at a time, so the lock is
/// never contended.
#[derive(Debug)]
pub(crate) struct Io<S> {
    stream: Arc<Mutex<S>>,
    progress: Arc<AtomicU64>,
}

impl<S> Clone for Io<S> {
    fn clone(&self) -> Io<S> {
        Io {
            stream: Arc::clone(&self.stream),
            progress: Arc::clone(&self.progress),
        }
    }
}

impl<S: Transport> Io<S> {
    pub(crate) fn new(stream: S) -> Io<S> {
        Io {
            stream: Arc::new(Mutex::new(stream)),
            progress: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The stream, for the connection task once hyper is done.
    pub(crate) fn stream(&self) -> MutexGuard<'_, S> {
        // A poisoned lock: a panic in a read or write, whose stream state
        // is still a stream's.
        self.stream.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many reads and writes have moved bytes so far.
    pub(crate) fn progress(&self) -> u64 {
        // Relaxed: compared with an earlier reading by the same task (the
        // connection's); the count orders nothing else.
        self.progress.load(Ordering::Relaxed)
    }

    fn moved(&self) {
        // Relaxed: see `progress`.
        self.progress.fetch_add(1, Ordering::Relaxed);
    }
}

/// What hyper reads and writes: the connection's [`Io`], with the bytes
/// already read (the preface and what came with it) served first.
#[derive(Debug)]
pub(crate) struct Prefixed<S> {
    io: Io<S>,
    read: Vec<u8>,
    at: usize,
}

impl<S: Transport> Prefixed<S> {
    pub(crate) fn new(io: Io<S>, read: Vec<u8>) -> Prefixed<S> {
        Prefixed { io, read, at: 0 }
    }
}

impl<S: Transport> hyper::rt::Read for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < self.read.len() {
            let n = buf.remaining().min(self.read.len() - self.at);
            buf.put_slice(&self.read[self.at..self.at + n]);
            self.at += n;
            if self.at == self.read.len() {
                self.read = Vec::new();
                self.at = 0;
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
            match Pin::new(&mut *self.io.stream()).poll_read(cx, init) {
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        };
        if n > 0 {
            self.io.moved();
        }
        // SAFETY: the read initialized (and filled) the first `n` bytes.
        unsafe { buf.advance(n) };
        Poll::Ready(Ok(()))
    }
}

impl<S: Transport> hyper::rt::Write for Prefixed<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut *self.io.stream()).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written {
            if n > 0 {
                self.io.moved();
            }
        }
        written
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut *self.io.stream()).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = written {
            if n > 0 {
                self.io.moved();
            }
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
/// workers.
#[derive(Debug, Clone)]
pub(crate) struct SchedulerExecutor(pub(crate) Handle);

impl<F> hyper::rt::Executor<F> for SchedulerExecutor
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, future: F) {
        self.0.spawn_detached(future);
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
