//! TCP on the scheduler's I/O reactor: [`TcpListener`] and [`TcpStream`],
//! for futures running on the workers ([`Handle::spawn`]).
//!
//! Sockets are non-blocking and registered with the scheduler's reactor
//! (polled by the workers when they park; see `reactor.rs`). Streams implement
//! [`futures_io::AsyncRead`] and [`futures_io::AsyncWrite`], so the
//! adapters of `futures-util` (`AsyncReadExt::read_exact`,
//! `AsyncWriteExt::write_all`, ...) work on them. Every failure is an
//! [`io::Error`]; once the scheduler quiesces or is dropped, pending and
//! later operations fail with an [`io::ErrorKind::Other`] error ("scheduler
//! shut down"), which [`is_shut_down`] tells apart from other errors of
//! that kind (such as a reactor with no slot left for a new socket).
//!
//! One reader and one writer at a time: each direction keeps one waker, so
//! two tasks reading the same stream at once would take turns being
//! forgotten (the same contract as tokio's `TcpStream::poll_read`).
//!
//! ```
//! use futures_io::{AsyncRead, AsyncWrite};
//! use proscenium_scheduler::net::{TcpListener, TcpStream};
//! use proscenium_scheduler::Scheduler;
//! use std::future::poll_fn;
//! use std::pin::Pin;
//!
//! let scheduler = Scheduler::builder().workers(2).pin_workers(false).build()?;
//! let handle = scheduler.handle().clone();
//! let listener = TcpListener::bind(&handle, "127.0.0.1:0".parse()?)?;
//! let addr = listener.local_addr()?;
//!
//! // A server that answers one byte with that byte plus one.
//! let server = handle.spawn(async move {
//!     let (mut stream, _peer) = listener.accept().await?;
//!     let mut byte = [0u8; 1];
//!     poll_fn(|cx| Pin::new(&mut stream).poll_read(cx, &mut byte)).await?;
//!     byte[0] += 1;
//!     poll_fn(|cx| Pin::new(&mut stream).poll_write(cx, &byte)).await?;
//!     std::io::Result::Ok(())
//! });
//!
//! let h = handle.clone();
//! let client = handle.spawn(async move {
//!     let mut stream = TcpStream::connect(&h, addr).await?;
//!     poll_fn(|cx| Pin::new(&mut stream).poll_write(cx, &[41])).await?;
//!     let mut byte = [0u8; 1];
//!     poll_fn(|cx| Pin::new(&mut stream).poll_read(cx, &mut byte)).await?;
//!     std::io::Result::Ok(byte[0])
//! });
//!
//! assert_eq!(client.wait().expect("no panic")?, 42);
//! server.wait().expect("no panic")?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::reactor::{Direction, Placement, Reactor, Registration};
pub use crate::scheduled_io::SchedulerShutDown;
use crate::scheduler::Handle;
use futures_io::{AsyncRead, AsyncWrite};
use mio::Interest;
use std::fmt;
use std::future::poll_fn;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Whether `error` is the one every operation fails with once the
/// scheduler shut down (its inner error is a [`SchedulerShutDown`]), as
/// opposed to another failure, even of the same kind `Other` (the reactor
/// has no slot left, ...). A loop that accepts connections stops on this
/// one and retries after the others.
///
/// ```
/// use proscenium_scheduler::net::is_shut_down;
///
/// assert!(!is_shut_down(&std::io::Error::other("scheduler shut down")));
/// ```
pub fn is_shut_down(error: &io::Error) -> bool {
    error
        .get_ref()
        .is_some_and(|inner| inner.is::<SchedulerShutDown>())
}

/// After the registration that created the reactor's polls: nudges every
/// parked worker, which blocks in its own shard's poll from then on.
/// (Every worker may be parked on its condvar; a searching or running one
/// blocks in its poll when it next parks.)
fn announce(handle: &Handle, registration: &Registration) {
    if registration.started_reactor() {
        handle.shared.idle.nudge_all();
    }
}

/// Where a source registered through `handle` by the calling thread goes:
/// the shard of the worker this thread is, if it is one of `handle`'s.
fn here(handle: &Handle) -> Placement {
    Placement::Current(handle.shared.current_index())
}

/// A TCP socket listening for connections, registered with a scheduler's
/// I/O reactor.
pub struct TcpListener {
    mio: mio::net::TcpListener,
    registration: Registration,
}

impl TcpListener {
    /// Binds to `addr` (port 0: any free port; see
    /// [`local_addr`](Self::local_addr)) and registers with `handle`'s
    /// reactor. Fails if the address cannot be bound or the scheduler shut
    /// down.
    pub fn bind(handle: &Handle, addr: SocketAddr) -> io::Result<TcpListener> {
        let mio = mio::net::TcpListener::bind(addr)?;
        let listener = TcpListener::register(&handle.shared.reactor, mio, here(handle))?;
        announce(handle, &listener.registration);
        Ok(listener)
    }

    /// Takes over a bound, listening std listener (set non-blocking here).
    pub fn from_std(handle: &Handle, listener: std::net::TcpListener) -> io::Result<TcpListener> {
        listener.set_nonblocking(true)?;
        let listener = TcpListener::register(
            &handle.shared.reactor,
            mio::net::TcpListener::from_std(listener),
            here(handle),
        )?;
        announce(handle, &listener.registration);
        Ok(listener)
    }

    fn register(
        reactor: &Reactor,
        mut mio: mio::net::TcpListener,
        placement: Placement,
    ) -> io::Result<TcpListener> {
        let registration = reactor.register(&mut mio, Interest::READABLE, placement)?;
        Ok(TcpListener { mio, registration })
    }

    /// Accepts a connection: the stream (registered with the same reactor)
    /// and the peer's address. The accepted connections go to the workers'
    /// shards of the reactor in turn, whichever worker accepts them: each
    /// worker then sees the I/O events of its share of the connections,
    /// and their tasks run where the events are seen
    /// (docs/decisions/0024-per-core-scaling.md).
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// Polls for a connection (see [`accept`](Self::accept)); when pending,
    /// the waker of `cx` is woken on the next connection.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let accepted = self
            .registration
            .poll_io(cx, Direction::Read, || self.mio.accept());
        match accepted {
            Poll::Ready(Ok((mio, peer))) => Poll::Ready(
                TcpStream::register(self.registration.reactor(), mio, Placement::Spread)
                    .map(|s| (s, peer)),
            ),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The address this listener is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.mio.local_addr()
    }
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener")
            .field("local_addr", &self.mio.local_addr().ok())
            .finish_non_exhaustive()
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        // Deregistered before the descriptor closes (when `mio` drops).
        self.registration.deregister(&mut self.mio);
    }
}

/// A TCP connection registered with a scheduler's I/O reactor; reads and
/// writes through [`AsyncRead`] and [`AsyncWrite`] (also on `&TcpStream`,
/// so one task can read while another writes).
pub struct TcpStream {
    mio: mio::net::TcpStream,
    registration: Registration,
}

impl TcpStream {
    /// Connects to `addr`. Fails with the connection's error (refused,
    /// unreachable, ...) or if the scheduler shut down.
    pub async fn connect(handle: &Handle, addr: SocketAddr) -> io::Result<TcpStream> {
        let mio = mio::net::TcpStream::connect(addr)?;
        let stream = TcpStream::register(&handle.shared.reactor, mio, here(handle))?;
        announce(handle, &stream.registration);
        poll_fn(|cx| stream.poll_connected(cx)).await?;
        Ok(stream)
    }

    /// Ready once the non-blocking connect has finished (mio's recipe:
    /// writable, then no pending error, then a peer address).
    fn poll_connected(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let event = match self.registration.poll_ready(cx, Direction::Write) {
                Poll::Ready(Ok(event)) => event,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            if let Some(e) = self.mio.take_error()? {
                return Poll::Ready(Err(e));
            }
            match self.mio.peer_addr() {
                Ok(_) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                    self.registration.clear_readiness(event);
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Takes over a connected std stream (set non-blocking here).
    pub fn from_std(handle: &Handle, stream: std::net::TcpStream) -> io::Result<TcpStream> {
        stream.set_nonblocking(true)?;
        let stream = TcpStream::register(
            &handle.shared.reactor,
            mio::net::TcpStream::from_std(stream),
            here(handle),
        )?;
        announce(handle, &stream.registration);
        Ok(stream)
    }

    fn register(
        reactor: &Reactor,
        mut mio: mio::net::TcpStream,
        placement: Placement,
    ) -> io::Result<TcpStream> {
        let registration =
            reactor.register(&mut mio, Interest::READABLE | Interest::WRITABLE, placement)?;
        Ok(TcpStream { mio, registration })
    }

    /// Shuts down the read half, the write half or both (the peer reads
    /// EOF once its buffered data is read, after a write shutdown).
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.mio.shutdown(how)
    }

    /// Sets `TCP_NODELAY` (disables Nagle's algorithm).
    pub fn set_nodelay(&self, nodelay: bool) -> io::Result<()> {
        self.mio.set_nodelay(nodelay)
    }

    /// Whether `TCP_NODELAY` is set.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.mio.nodelay()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.mio.peer_addr()
    }

    /// This end's address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.mio.local_addr()
    }

    // Reads and writes report how much they moved, so that a short one
    // clears the readiness without a `WouldBlock` round trip
    // (`Registration::poll_io_sized`).
    fn poll_read_inner(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let len = buf.len();
        self.registration
            .poll_io_sized(cx, Direction::Read, len, || (&self.mio).read(buf))
    }

    fn poll_write_inner(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.registration
            .poll_io_sized(cx, Direction::Write, buf.len(), || (&self.mio).write(buf))
    }

    fn poll_write_vectored_inner(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        self.registration
            .poll_io_sized(cx, Direction::Write, len, || {
                (&self.mio).write_vectored(bufs)
            })
    }
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("local_addr", &self.mio.local_addr().ok())
            .field("peer_addr", &self.mio.peer_addr().ok())
            .finish_non_exhaustive()
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        // Deregistered before the descriptor closes (when `mio` drops).
        self.registration.deregister(&mut self.mio);
    }
}

impl AsyncRead for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_read_inner(cx, buf)
    }
}

impl AsyncRead for &TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_read_inner(cx, buf)
    }
}

/// As for `&TcpStream`, to which it delegates.
impl AsyncWrite for TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut &*self).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut &*self).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self).poll_close(cx)
    }
}

impl AsyncWrite for &TcpStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_inner(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored_inner(cx, bufs)
    }

    /// Nothing to flush: writes go straight to the socket.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Shuts down the write half (the peer reads EOF); the read half stays
    /// open (see [`TcpStream::shutdown`]).
    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.shutdown(Shutdown::Write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scheduler;

    #[test]
    // Miri's isolation has no sockets (CI runs this crate's unit tests
    // under Miri).
    #[cfg_attr(miri, ignore)]
    fn accepted_connections_are_spread_over_the_workers_shards() {
        let s = Scheduler::builder()
            .workers(2)
            .pin_workers(false)
            .build()
            .expect("a scheduler");
        let handle = s.handle().clone();
        let listener = TcpListener::bind(&handle, ([127, 0, 0, 1], 0).into()).expect("bind");
        let addr = listener.local_addr().expect("an address");
        let peers: Vec<_> = (0..4)
            .map(|_| std::net::TcpStream::connect(addr).expect("connect"))
            .collect();
        // All four accepted by one task on one worker.
        let shards = handle
            .spawn(async move {
                let mut shards = Vec::new();
                for _ in 0..4 {
                    let (stream, _) = listener.accept().await.expect("accept");
                    shards.push(stream.registration.shard());
                }
                shards
            })
            .wait()
            .expect("the accepting task");
        drop(peers);
        assert!(
            shards.windows(2).all(|w| w[0] != w[1]),
            "in turn: {shards:?}"
        );
        assert_eq!(shards.iter().filter(|&&s| s == 0).count(), 2, "{shards:?}");
    }
}
