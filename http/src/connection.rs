//! What every protocol's connection shares: the stream it is served over
//! ([`Transport`]), its place in the server ([`ConnectionGuard`]), its
//! termination signals ([`Control`], [`Signals`]), and the timer of its
//! reads and writes ([`Deadline`]). The bottom of the crate's layers,
//! beside `settings.rs` and `handler.rs`: the server that registers
//! connections (`binding.rs`) is above it, seen here only as a
//! [`Registry`].

use crate::metrics::Metrics;
use futures_io::{AsyncRead, AsyncWrite};
use proscenium::{Handle, Sleep};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// What a connection is served over: a `proscenium::net::TcpStream`, or a
/// TLS stream over one (feature `tls`).
pub(crate) trait Transport: AsyncRead + AsyncWrite + Unpin + Send + 'static {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Transport for T {}

/// The server a connection is registered with, as the connection's
/// guard sees it: binding.rs's `Server`, which registers connections and
/// implements this (a trait so that this module, below the binding, does
/// not name it).
pub(crate) trait Registry: Send + Sync {
    /// Removes the connection `id`, whose socket is closed.
    fn remove(&self, id: u64);
}

/// Held by a connection's task; dropping it (after the socket closed)
/// removes the connection.
pub(crate) struct ConnectionGuard {
    server: Arc<dyn Registry>,
    /// The connection's id (in its tracing span).
    pub(crate) id: u64,
    control: Arc<Control>,
}

impl ConnectionGuard {
    /// The guard of `server`'s connection `id`, whose signals `control`
    /// carries.
    pub(crate) fn new(
        server: Arc<dyn Registry>,
        id: u64,
        control: Arc<Control>,
    ) -> ConnectionGuard {
        ConnectionGuard {
            server,
            id,
            control,
        }
    }

    pub(crate) fn control(&self) -> Arc<Control> {
        Arc::clone(&self.control)
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.server.remove(self.id);
    }
}

/// The termination signals of one connection, and the server's counters.
pub(crate) struct Control {
    state: Mutex<ControlState>,
    metrics: Arc<Metrics>,
}

#[derive(Default)]
struct ControlState {
    terminating: bool,
    forced: bool,
    waker: Option<Waker>,
}

/// The signals a connection has received.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Signals {
    /// The server terminates: close when idle, `Connection: close` on the
    /// in-flight response, 503 to new requests.
    pub(crate) terminating: bool,
    /// The hard deadline passed: close now.
    pub(crate) forced: bool,
}

impl Control {
    /// A connection's control, no signal yet, counting into `metrics`.
    pub(crate) fn new(metrics: Arc<Metrics>) -> Control {
        Control {
            state: Mutex::default(),
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, ControlState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The signals so far; the connection's task is woken on the next one.
    pub(crate) fn poll_signals(&self, cx: &mut Context<'_>) -> Signals {
        let mut state = self.lock();
        match &state.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => state.waker = Some(cx.waker().clone()),
        }
        Signals {
            terminating: state.terminating,
            forced: state.forced,
        }
    }

    /// The signals so far.
    pub(crate) fn signals(&self) -> Signals {
        let state = self.lock();
        Signals {
            terminating: state.terminating,
            forced: state.forced,
        }
    }

    /// The server's counters.
    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub(crate) fn signal(&self, forced: bool) {
        let waker = {
            let mut state = self.lock();
            state.terminating = true;
            state.forced |= forced;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// A read or write timeout, armed only when the operation would block (a
/// read that finds its bytes ready costs no timer), from that moment.
/// `Duration::MAX` never fires.
///
/// A `Deadline` can be reused for the next wait of the same length
/// ([`restart`](Self::restart)): the timer armed for an earlier wait stays
/// armed, and when it fires before this wait's end it is armed again for
/// the rest. The idle timeout between keep-alive requests is one such
/// deadline per connection: a connection serving requests back to back
/// arms about one timer per idle timeout instead of one per request (and
/// cancels none). A timer armed for an earlier wait fires no later than
/// this wait's end, give or take the wheel's rounding of one tick.
pub(crate) struct Deadline {
    after: Duration,
    /// When this wait ends (taken when it first would block).
    until: Option<Instant>,
    sleep: Option<Sleep>,
}

impl Deadline {
    pub(crate) fn new(after: Duration) -> Deadline {
        Deadline {
            after,
            until: None,
            sleep: None,
        }
    }

    /// Starts a new wait, keeping the timer armed for the last one.
    pub(crate) fn restart(&mut self) {
        self.until = None;
    }

    pub(crate) fn poll(&mut self, handle: &Handle, cx: &mut Context<'_>) -> Poll<()> {
        if self.after == Duration::MAX {
            return Poll::Pending;
        }
        let mut now = None;
        let until = match self.until {
            Some(until) => until,
            None => {
                let at = Instant::now();
                now = Some(at);
                match at.checked_add(self.after) {
                    Some(until) => *self.until.insert(until),
                    // Beyond the clock's range: never.
                    None => return Poll::Pending,
                }
            }
        };
        loop {
            let sleep = match &mut self.sleep {
                Some(sleep) => sleep,
                None => {
                    let now = now.take().unwrap_or_else(Instant::now);
                    if now >= until {
                        return Poll::Ready(());
                    }
                    self.sleep.insert(handle.sleep(until - now))
                }
            };
            if Pin::new(sleep).poll(cx).is_pending() {
                return Poll::Pending;
            }
            // Fired: at this wait's end, or early (armed for an earlier
            // wait): then armed again for the rest.
            self.sleep = None;
        }
    }
}
