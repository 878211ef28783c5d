//! [`Http::bind`], the [`ServerBinding`] it returns, and termination.

use crate::body::Body;
use crate::connection;
use http::{Request, Response};
use proscenium::net::TcpListener;
use proscenium::{ActorSystem, Handle, JoinError, JoinHandle};
use std::collections::HashMap;
use std::fmt;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// The type-erased handler.
pub(crate) type Handler = Arc<
    dyn Fn(Request<Body>) -> Pin<Box<dyn Future<Output = Response<Body>> + Send>> + Send + Sync,
>;

/// Limits of the server (the defaults suit most services).
#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub(crate) max_head_bytes: usize,
    pub(crate) max_body_bytes: usize,
    pub(crate) idle_timeout: Duration,
    pub(crate) header_read_timeout: Duration,
    pub(crate) max_connections: usize,
}

impl Default for ServerSettings {
    fn default() -> ServerSettings {
        ServerSettings {
            max_head_bytes: 16 * 1024,
            max_body_bytes: 8 * 1024 * 1024,
            idle_timeout: Duration::from_secs(60),
            header_read_timeout: Duration::from_secs(30),
            max_connections: 1024,
        }
    }
}

impl ServerSettings {
    /// The largest request head (request line and headers) accepted;
    /// beyond it the answer is 431 and the connection closes. Default
    /// 16 KiB.
    pub fn max_head_bytes(mut self, bytes: usize) -> ServerSettings {
        self.max_head_bytes = bytes;
        self
    }

    /// The largest request body accepted; beyond it the answer is 413 and
    /// the connection closes. Default 8 MiB.
    pub fn max_body_bytes(mut self, bytes: usize) -> ServerSettings {
        self.max_body_bytes = bytes;
        self
    }

    /// How long a connection may stay idle (Akka's
    /// `akka.http.server.idle-timeout`, same default: 60 s): a keep-alive
    /// connection with no byte of a next request for this long is closed;
    /// a read of a request body, or a write of a response the client does
    /// not read, that makes no progress for this long closes the
    /// connection too (a body cut short is answered 408 first).
    /// `Duration::MAX`: never.
    pub fn idle_timeout(mut self, timeout: Duration) -> ServerSettings {
        self.idle_timeout = timeout;
        self
    }

    /// How long a request head may take to arrive once its first byte is
    /// in (against slowloris: a client trickling header bytes to hold a
    /// connection); beyond it the answer is 408 and the connection closes.
    /// Akka has no such setting (its idle timeout is reset by each byte).
    /// Default 30 s; `Duration::MAX`: never.
    pub fn header_read_timeout(mut self, timeout: Duration) -> ServerSettings {
        self.header_read_timeout = timeout;
        self
    }

    /// The most connections served at once (Akka's
    /// `akka.http.server.max-connections`, same default: 1024). At the
    /// limit the server stops accepting: new connections wait in the
    /// listen backlog (or are refused by the kernel once it is full) and
    /// are accepted as open ones close. At least 1.
    pub fn max_connections(mut self, connections: usize) -> ServerSettings {
        self.max_connections = connections.max(1);
        self
    }
}

/// The entry point: binds HTTP/1.1 servers on an [`ActorSystem`].
#[derive(Debug, Clone, Copy)]
pub struct Http;

impl Http {
    /// Binds `addr` and serves each connection as a task on `system`'s
    /// workers, calling `handler` for each request.
    ///
    /// Synchronous, unlike Akka's `Future[ServerBinding]`: binding a socket
    /// does not wait on anything (no actor, no I/O readiness), so the error
    /// (address in use, permission denied) is returned at once and a plain
    /// thread needs no executor to start a server.
    pub fn bind<H, F>(
        system: &ActorSystem,
        addr: SocketAddr,
        handler: H,
    ) -> io::Result<ServerBinding>
    where
        H: Fn(Request<Body>) -> F + Send + Sync + 'static,
        F: Future<Output = Response<Body>> + Send + 'static,
    {
        Http::bind_with(system, addr, ServerSettings::default(), handler)
    }

    /// [`bind`](Self::bind) with `settings`.
    pub fn bind_with<H, F>(
        system: &ActorSystem,
        addr: SocketAddr,
        settings: ServerSettings,
        handler: H,
    ) -> io::Result<ServerBinding>
    where
        H: Fn(Request<Body>) -> F + Send + Sync + 'static,
        F: Future<Output = Response<Body>> + Send + 'static,
    {
        let handle = system.scheduler_handle().clone();
        let listener = TcpListener::bind(&handle, addr)?;
        let local_addr = listener.local_addr()?;
        let handler: Handler = Arc::new(move |request| Box::pin(handler(request)));
        let server = Arc::new(Server::default());
        let accept = accept_loop(
            listener,
            Arc::clone(&server),
            handler,
            Arc::new(settings),
            handle.clone(),
        );
        handle.spawn_detached(accept);
        Ok(ServerBinding {
            local_addr,
            server,
            handle,
        })
    }
}

async fn accept_loop(
    listener: TcpListener,
    server: Arc<Server>,
    handler: Handler,
    settings: Arc<ServerSettings>,
    handle: Handle,
) {
    // Marks the binding unbound however this ends (even if the task is
    // dropped because the system terminated), after the listener closed.
    struct Unbound(Arc<Server>);
    impl Drop for Unbound {
        fn drop(&mut self) {
            let wakers = {
                let mut state = self.0.lock();
                state.unbound = true;
                std::mem::take(&mut state.unbound_wakers)
            };
            wakers.into_iter().for_each(Waker::wake);
        }
    }
    let unbound = Unbound(Arc::clone(&server));
    loop {
        let next = poll_fn(|cx| {
            {
                let mut state = server.lock();
                if state.unbind_requested {
                    return Poll::Ready(None);
                }
                state.accept_waker = Some(cx.waker().clone());
                // At the limit: not accepting leaves new connections in the
                // backlog; a connection that closes wakes this loop.
                if state.connections.len() >= settings.max_connections {
                    state.at_capacity = true;
                    return Poll::Pending;
                }
            }
            listener.poll_accept(cx).map(Some)
        })
        .await;
        match next {
            None => break,
            Some(Ok((stream, _peer))) => {
                if let Some(guard) = server.register() {
                    let serve = connection::serve(
                        stream,
                        guard,
                        Arc::clone(&handler),
                        Arc::clone(&settings),
                        handle.clone(),
                    );
                    handle.spawn_detached(serve);
                }
            }
            // The scheduler shut down: nothing more will be accepted.
            Some(Err(e)) if e.kind() == io::ErrorKind::Other => break,
            // A connection reset before it was accepted, out of
            // descriptors, ...: that connection is lost, the server goes on.
            Some(Err(e)) => tracing::debug!(error = %e, "accepting a connection failed"),
        }
    }
    drop(listener);
    drop(unbound);
}

/// What the binding, the accept loop and the connections share.
#[derive(Default)]
pub(crate) struct Server {
    state: Mutex<ServerState>,
}

#[derive(Default)]
struct ServerState {
    unbind_requested: bool,
    accept_waker: Option<Waker>,
    /// The accept loop waits for a connection to close (max_connections).
    at_capacity: bool,
    /// The listener is closed.
    unbound: bool,
    unbound_wakers: Vec<Waker>,
    terminating: bool,
    next_id: u64,
    connections: HashMap<u64, Arc<Control>>,
    /// Woken when `connections` becomes empty.
    drained_wakers: Vec<Waker>,
}

fn add_waker(wakers: &mut Vec<Waker>, waker: &Waker) {
    if !wakers.iter().any(|w| w.will_wake(waker)) {
        wakers.push(waker.clone());
    }
}

impl Server {
    fn lock(&self) -> MutexGuard<'_, ServerState> {
        // A panic under this lock leaves the state consistent (every
        // critical section is a few assignments).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a new connection; `None` once terminating (the connection
    /// is then closed at once).
    fn register(self: &Arc<Self>) -> Option<ConnectionGuard> {
        let mut state = self.lock();
        if state.terminating {
            return None;
        }
        let id = state.next_id;
        state.next_id += 1;
        let control = Arc::new(Control::default());
        state.connections.insert(id, Arc::clone(&control));
        Some(ConnectionGuard {
            server: Arc::clone(self),
            id,
            control,
        })
    }

    fn request_unbind(&self) {
        let waker = {
            let mut state = self.lock();
            state.unbind_requested = true;
            state.accept_waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    fn poll_unbound(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.lock();
        if state.unbound {
            return Poll::Ready(());
        }
        add_waker(&mut state.unbound_wakers, cx.waker());
        Poll::Pending
    }

    fn poll_drained(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.lock();
        if state.connections.is_empty() {
            return Poll::Ready(());
        }
        add_waker(&mut state.drained_wakers, cx.waker());
        Poll::Pending
    }

    fn connections(&self) -> Vec<Arc<Control>> {
        self.lock().connections.values().cloned().collect()
    }
}

/// Held by a connection's task; dropping it (after the socket closed)
/// removes the connection.
pub(crate) struct ConnectionGuard {
    server: Arc<Server>,
    id: u64,
    control: Arc<Control>,
}

impl ConnectionGuard {
    pub(crate) fn control(&self) -> Arc<Control> {
        Arc::clone(&self.control)
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        let (wakers, accept) = {
            let mut state = self.server.lock();
            state.connections.remove(&self.id);
            let accept = if std::mem::take(&mut state.at_capacity) {
                state.accept_waker.clone()
            } else {
                None
            };
            let wakers = if state.connections.is_empty() {
                std::mem::take(&mut state.drained_wakers)
            } else {
                Vec::new()
            };
            (wakers, accept)
        };
        wakers.into_iter().for_each(Waker::wake);
        if let Some(waker) = accept {
            waker.wake();
        }
    }
}

/// The termination signals of one connection.
#[derive(Default)]
pub(crate) struct Control {
    state: Mutex<ControlState>,
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

    fn signal(&self, forced: bool) {
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

/// A bound server: its address, [`unbind`](Self::unbind) and
/// [`terminate`](Self::terminate). Dropping it leaves the server running.
pub struct ServerBinding {
    local_addr: SocketAddr,
    server: Arc<Server>,
    handle: Handle,
}

impl fmt::Debug for ServerBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerBinding")
            .field("local_addr", &self.local_addr)
            .finish_non_exhaustive()
    }
}

impl ServerBinding {
    /// The address the server listens on (the port chosen for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Connections open now.
    pub fn open_connections(&self) -> usize {
        self.server.lock().connections.len()
    }

    /// Stops accepting connections; open connections are untouched and
    /// keep being served until their clients close them. The returned
    /// future completes once the port is closed (new connections are
    /// refused); the unbinding happens whether it is awaited or not.
    pub fn unbind(&self) -> Unbind {
        self.server.request_unbind();
        Unbind {
            server: Arc::clone(&self.server),
            handle: self.handle.clone(),
        }
    }

    /// Terminates the server gracefully (Akka HTTP's
    /// `ServerBinding.terminate`): unbinds; closes connections with no
    /// request in flight at once; lets in-flight requests finish until
    /// `hard_deadline` and sends their responses with `Connection: close`;
    /// answers requests that arrive meanwhile with `503 Service
    /// Unavailable` (empty body, `Connection: close`); at the deadline
    /// closes every connection left. The returned future completes once no
    /// connection is left; the termination runs on the system's workers
    /// whether it is awaited or not.
    pub fn terminate(&self, hard_deadline: Duration) -> HttpTermination {
        {
            let mut state = self.server.lock();
            state.terminating = true;
        }
        self.server.request_unbind();
        for control in self.server.connections() {
            control.signal(false);
        }
        let server = Arc::clone(&self.server);
        let mut deadline = self.handle.sleep(hard_deadline);
        let join = self.handle.spawn(async move {
            let drained = poll_fn(|cx| {
                if server.poll_drained(cx).is_ready() {
                    return Poll::Ready(true);
                }
                Pin::new(&mut deadline).poll(cx).map(|()| false)
            })
            .await;
            let mut forced_connections = 0;
            if !drained {
                for control in server.connections() {
                    control.signal(true);
                    forced_connections += 1;
                }
                poll_fn(|cx| server.poll_drained(cx)).await;
            }
            poll_fn(|cx| server.poll_unbound(cx)).await;
            HttpTerminated { forced_connections }
        });
        HttpTermination { join }
    }
}

/// The future of [`ServerBinding::unbind`]: completes once the port is
/// closed.
#[must_use = "the unbinding happens anyway; await this to know the port is closed"]
pub struct Unbind {
    server: Arc<Server>,
    handle: Handle,
}

impl fmt::Debug for Unbind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unbind").finish_non_exhaustive()
    }
}

impl Unbind {
    /// Blocks the calling thread until the port is closed. Not on a worker
    /// (see proscenium's "Waiting without blocking"): `.await` there.
    pub fn wait(self) -> Result<(), TerminateError> {
        let handle = self.handle.clone();
        handle.spawn(self).wait().map_err(TerminateError::from)
    }
}

impl Future for Unbind {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.server.poll_unbound(cx)
    }
}

/// The outcome of [`ServerBinding::terminate`]: no connection is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpTerminated {
    /// Connections still open at the hard deadline, closed by force.
    pub forced_connections: usize,
}

/// Why a termination could not be awaited to its end.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TerminateError {
    /// The actor system terminated first (its workers dropped the
    /// termination's task, and with it every connection).
    #[error("the actor system terminated before the server")]
    SystemTerminated,
}

impl From<JoinError> for TerminateError {
    fn from(_: JoinError) -> TerminateError {
        // The termination's task does not panic; cancelled it was.
        TerminateError::SystemTerminated
    }
}

/// The future of [`ServerBinding::terminate`].
#[must_use = "the termination happens anyway; await this to know it is over"]
#[derive(Debug)]
pub struct HttpTermination {
    join: JoinHandle<HttpTerminated>,
}

impl HttpTermination {
    /// Blocks the calling thread until the termination is over. Not on a
    /// worker (see proscenium's "Waiting without blocking"): `.await` there.
    pub fn wait(self) -> Result<HttpTerminated, TerminateError> {
        self.join.wait().map_err(TerminateError::from)
    }
}

impl Future for HttpTermination {
    type Output = Result<HttpTerminated, TerminateError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.join)
            .poll(cx)
            .map(|r| r.map_err(TerminateError::from))
    }
}
