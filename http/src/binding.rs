//! [`Http::bind`], the [`ServerBinding`] it returns (its address, its
//! counters, [`unbind`](ServerBinding::unbind)), the accept loop, and the
//! server's state they share with the connections (each registered with a
//! `ConnectionGuard`, `connection.rs`) and the termination. On top of the
//! crate's layers: it spawns each accepted connection on `dispatch.rs`;
//! `terminate.rs`, above it, adds the termination's methods to
//! [`ServerBinding`].

use crate::body::Body;
use crate::connection::{ConnectionGuard, Control, Registry};
use crate::dispatch;
use crate::handler::{Handler, HandlerOutput};
use crate::metrics::{Metrics, ServerMetrics};
use crate::settings::ServerSettings;
use crate::termination::{TerminateError, TerminationState};
use http::{Request, Response};
use proscenium::net::TcpListener;
use proscenium::{ActorRef, ActorSystem, AskError, Handle, NoReplyReason, Reply};
use std::collections::HashMap;
use std::fmt;
use std::future::{poll_fn, Future};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tracing::Instrument;

/// The entry point: binds HTTP/1.1 and HTTP/2 servers on an [`ActorSystem`].
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
    ///
    /// **Tie it to the system's shutdown.** A binding is not part of the
    /// system's [coordinated shutdown](proscenium::CoordinatedShutdown)
    /// until [`ServerBinding::add_to_coordinated_shutdown`] puts it there.
    /// Without that, a SIGTERM (or `ActorSystem::terminate`) stops the
    /// system under the server instead of terminating the server first:
    /// keep-alive connections are cut instead of closed after their
    /// response, and requests that need an actor meanwhile get a 503. A
    /// service calls it right after binding (as the `server` example
    /// does):
    ///
    /// ```no_run
    /// # use http::{Request, Response};
    /// # use proscenium::ActorSystem;
    /// # use proscenium_http::{Body, Http};
    /// # use std::time::Duration;
    /// # let system = ActorSystem::builder().build()?;
    /// let binding = Http::bind(&system, "0.0.0.0:8080".parse()?, |_: Request<Body>| async {
    ///     Response::new(Body::from("hello"))
    /// })?;
    /// // SIGTERM: unbind, finish what is in flight (3 s at most), then stop.
    /// binding.add_to_coordinated_shutdown(system.coordinated_shutdown(), Duration::from_secs(3))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A test or a short-lived server may instead call
    /// [`ServerBinding::terminate`] itself, as the examples below do.
    pub fn bind<H, F>(
        system: &ActorSystem,
        addr: SocketAddr,
        handler: H,
    ) -> io::Result<ServerBinding>
    where
        H: Fn(Request<Body>) -> F + Send + Sync + 'static,
        F: Future + Send + 'static,
        F::Output: HandlerOutput,
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
        F: Future + Send + 'static,
        F::Output: HandlerOutput,
    {
        let handle = system.scheduler_handle().clone();
        let listener = TcpListener::bind(&handle, addr)?;
        let local_addr = listener.local_addr()?;
        let handler: Handler = Arc::new(move |request| {
            let answer = handler(request);
            Box::pin(async move { answer.await.into_response() })
        });
        let server = Arc::new(Server::new(handle.num_workers(), local_addr));
        #[cfg(feature = "metrics")]
        {
            // Weak: the system's list of sources must not keep the server's
            // counters alive; the source is dropped with them.
            let server = Arc::downgrade(&server);
            system.add_metrics_source(move || {
                server
                    .upgrade()
                    .map(|server| server.metrics.publish())
                    .is_some()
            });
        }
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
    /// Binds `addr` and answers each request with a tower `service`
    /// (feature `tower`): each request is handed to a clone of it once
    /// `poll_ready` says it is ready; an error from either is answered
    /// `500 Internal Server Error` and logged ([`HandlerOutput`]). The
    /// service runs as a handler does: on the system's workers, over
    /// HTTP/1.1, HTTP/2 and TLS, under the same limits, timeouts, counters
    /// and termination; a panic in it (in `call` or in its future) is
    /// answered 500 and the server goes on.
    ///
    /// The response body may be any [`http_body::Body`] of `Bytes`
    /// (axum's, hyper's, tower-http's, this crate's [`Body`]). What of it
    /// is ready at once is taken when the service's future completes: a
    /// body in memory (one frame and its end, as axum's `Json` or a
    /// `String`) is sent with `Content-Length`, as a handler's full
    /// [`Body`]; a body that has to wait for its next frame is sent as a
    /// stream ([`Body::from_stream`]: chunked on HTTP/1.1, polled only as
    /// the client reads), starting with what was ready (64 KiB at most are
    /// taken so before the head is written). A body that fails before it
    /// is sent is answered 500; one that fails later cuts the response, as
    /// a stream's error does. Trailers are not sent. A service answering
    /// with this crate's [`Body`] has it sent as it is.
    ///
    /// An [axum](https://docs.rs/axum) `Router` is such a service, with
    /// axum's `tokio` feature off (the crate docs, "tower and axum", say
    /// what of axum works without tokio, and `examples/axum.rs` serves
    /// one). A service of its own:
    ///
    /// ```
    /// use http::{Request, Response};
    /// use proscenium::ActorSystem;
    /// use proscenium_http::{Body, Http, ServerSettings};
    /// use std::convert::Infallible;
    /// use std::future::{ready, Ready};
    /// use std::task::{Context, Poll};
    ///
    /// #[derive(Clone)]
    /// struct Hello;
    /// impl tower_service::Service<Request<Body>> for Hello {
    ///     type Response = Response<Body>;
    ///     type Error = Infallible;
    ///     type Future = Ready<Result<Response<Body>, Infallible>>;
    ///     fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
    ///         Poll::Ready(Ok(()))
    ///     }
    ///     fn call(&mut self, _: Request<Body>) -> Self::Future {
    ///         ready(Ok(Response::new(Body::from("hello"))))
    ///     }
    /// }
    ///
    /// # let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// let binding =
    ///     Http::bind_service(&system, "127.0.0.1:0".parse()?, ServerSettings::default(), Hello)?;
    /// # binding.terminate(std::time::Duration::from_secs(1)).wait()?;
    /// # system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "tower")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
    pub fn bind_service<S, B>(
        system: &ActorSystem,
        addr: SocketAddr,
        settings: ServerSettings,
        service: S,
    ) -> io::Result<ServerBinding>
    where
        S: tower_service::Service<Request<Body>, Response = Response<B>>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Error: fmt::Display + Send + 'static,
        S::Future: Send + 'static,
        B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        B::Error: Into<crate::body::BoxError>,
    {
        Http::bind_with(system, addr, settings, move |request: Request<Body>| {
            crate::service::call(service.clone(), request)
        })
    }

    /// Binds `addr` and answers each request with `actor`: the request and
    /// a [`Reply`] go to it as one message (built with `M::from`; `M` can be
    /// the tuple itself), and the server awaits the reply, as
    /// [`ActorRef::ask`] does.
    ///
    /// A request the actor cannot answer gets a response all the same,
    /// never a hang: if the `Reply` is dropped unsent
    /// ([`NoReplyReason::Dropped`]: its handler failed, or forgot the
    /// reply, or gave it to code that dropped it) the answer is `500
    /// Internal Server Error`; if the message never reached a handler
    /// ([`NoReplyReason::DeadLetter`]: the actor has terminated, or its
    /// bounded mailbox is full) it is `503 Service Unavailable`. There is no timeout of its own beyond the server's:
    /// as for an `async` handler, a reply that never comes is cut by
    /// [`terminate`](ServerBinding::terminate)'s hard deadline (and a reply
    /// sent after that is dropped).
    ///
    /// ```
    /// use http::{Request, Response};
    /// use proscenium::prelude::*;
    /// use proscenium_http::{Body, Http};
    /// use std::io::{Read, Write};
    /// use std::time::Duration;
    ///
    /// struct Hello;
    /// impl Actor for Hello {
    ///     type Msg = (Request<Body>, Reply<Response<Body>>);
    ///     fn receive(&mut self, _: &mut Context<Self>, (request, reply): Self::Msg) -> Outcome {
    ///         reply.send(Response::new(Body::from(format!("hello {}", request.uri().path()))));
    ///         Ok(())
    ///     }
    /// }
    ///
    /// let system = ActorSystem::builder().workers(2).pin_workers(false).build()?;
    /// let hello = system.spawn(Props::new(|| Hello), "hello")?;
    /// let binding = Http::bind_actor(&system, "127.0.0.1:0".parse()?, hello)?;
    ///
    /// let mut client = std::net::TcpStream::connect(binding.local_addr())?;
    /// client.write_all(b"GET /actor HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
    /// let mut response = String::new();
    /// client.read_to_string(&mut response)?;
    /// assert!(response.ends_with("\r\n\r\nhello /actor"));
    /// binding.terminate(Duration::from_secs(5)).wait()?;
    /// system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn bind_actor<M>(
        system: &ActorSystem,
        addr: SocketAddr,
        actor: ActorRef<M>,
    ) -> io::Result<ServerBinding>
    where
        M: From<(Request<Body>, Reply<Response<Body>>)> + Send + 'static,
    {
        Http::bind_actor_with(system, addr, ServerSettings::default(), actor)
    }

    /// [`bind_actor`](Self::bind_actor) with `settings`.
    pub fn bind_actor_with<M>(
        system: &ActorSystem,
        addr: SocketAddr,
        settings: ServerSettings,
        actor: ActorRef<M>,
    ) -> io::Result<ServerBinding>
    where
        M: From<(Request<Body>, Reply<Response<Body>>)> + Send + 'static,
    {
        Http::bind_with(system, addr, settings, move |request: Request<Body>| {
            // No timeout of the ask's own (see above): the timer is armed
            // far away and cancelled when the answer is in or the
            // connection drops the future.
            let ask = actor.ask(|reply| M::from((request, reply)), Duration::MAX);
            async move {
                match ask.await {
                    Ok(response) => response,
                    // The handler (or whoever it gave the `Reply` to)
                    // dropped it unsent: the application's fault.
                    Err(AskError::NoReply(NoReplyReason::Dropped)) => {
                        crate::wire::empty_response(http::StatusCode::INTERNAL_SERVER_ERROR)
                    }
                    // Never handled (the actor is gone, or its bounded
                    // mailbox is full: a dead letter), or the system went
                    // down with the request.
                    Err(AskError::NoReply(_) | AskError::Timeout(_)) => {
                        crate::wire::empty_response(http::StatusCode::SERVICE_UNAVAILABLE)
                    }
                }
            }
        })
    }
}

/// How long the accept loop waits after an accept failed for want of
/// resources (descriptors, memory) before it tries again.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// What the accept loop does after an accept failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AcceptFailure {
    /// The scheduler shut down: stop.
    ShutDown,
    /// That one connection is lost: go on at once.
    Lost,
    /// Anything else (out of descriptors, memory, reactor slots): pause,
    /// then go on.
    Pause,
}

/// How the accept loop takes `error`. Only the scheduler's own shutdown
/// error ends it: the reactor fails with other errors of the same kind
/// (`Other`: "too many sources registered with the reactor"), which pass.
fn accept_failure(error: &io::Error) -> AcceptFailure {
    if proscenium::net::is_shut_down(error) {
        return AcceptFailure::ShutDown;
    }
    match error.kind() {
        io::ErrorKind::ConnectionAborted
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::Interrupted => AcceptFailure::Lost,
        _ => AcceptFailure::Pause,
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
            Some(Ok((stream, peer))) => {
                if let Some(guard) = server.register() {
                    if let Err(e) = stream.set_nodelay(true) {
                        tracing::debug!(error = %e, "setting TCP_NODELAY failed");
                    }
                    // The connection's span: every event of its requests
                    // (and of the handler) carries its id and peer.
                    let span = tracing::debug_span!("http_connection", id = guard.id, %peer);
                    let handler = Arc::clone(&handler);
                    let settings = Arc::clone(&settings);
                    #[cfg(feature = "tls")]
                    if let Some(tls) = settings.tls.clone() {
                        let serve = dispatch::serve_tls(
                            tls,
                            stream,
                            guard,
                            handler,
                            settings,
                            handle.clone(),
                        );
                        handle.spawn_detached(serve.instrument(span));
                        continue;
                    }
                    let serve = dispatch::serve(stream, guard, handler, settings, handle.clone());
                    handle.spawn_detached(serve.instrument(span));
                }
            }
            Some(Err(e)) => match accept_failure(&e) {
                // The scheduler shut down: nothing more will be accepted.
                AcceptFailure::ShutDown => break,
                // A connection reset before it was accepted: that
                // connection is lost, the server goes on.
                AcceptFailure::Lost => {
                    tracing::debug!(error = %e, "accepting a connection failed");
                }
                // Out of descriptors (EMFILE, ENFILE) or of kernel memory:
                // the connection stays in the backlog and the next accept
                // fails the same way at once, so retrying now would spin
                // this worker for as long as the shortage lasts. Wait a
                // little (hyper and actix-web do the same), or until
                // unbound. The same for any other failure (the reactor out
                // of slots for the accepted socket, ...): a server that
                // stopped accepting for good would be worse.
                AcceptFailure::Pause => {
                    tracing::warn!(error = %e, "accepting a connection failed; retrying in 100 ms");
                    let mut pause = handle.sleep(ACCEPT_ERROR_PAUSE);
                    poll_fn(|cx| {
                        {
                            let mut state = server.lock();
                            if state.unbind_requested {
                                return Poll::Ready(());
                            }
                            state.accept_waker = Some(cx.waker().clone());
                        }
                        Pin::new(&mut pause).poll(cx)
                    })
                    .await;
                }
            },
        }
    }
    drop(listener);
    drop(unbound);
}

/// What the binding, the accept loop and the connections share.
pub(crate) struct Server {
    state: Mutex<ServerState>,
    metrics: Arc<Metrics>,
}

#[derive(Default)]
pub(crate) struct ServerState {
    unbind_requested: bool,
    accept_waker: Option<Waker>,
    /// The accept loop waits for a connection to close (max_connections).
    at_capacity: bool,
    /// The listener is closed.
    unbound: bool,
    unbound_wakers: Vec<Waker>,
    /// A termination has started: new connections are refused.
    pub(crate) terminating: bool,
    pub(crate) termination: TerminationState,
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
    /// A server listening on `address` whose connections run on `workers`
    /// workers.
    fn new(workers: usize, address: SocketAddr) -> Server {
        Server {
            state: Mutex::default(),
            metrics: Arc::new(Metrics::new(workers, address)),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, ServerState> {
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
        let control = Arc::new(Control::new(Arc::clone(&self.metrics)));
        state.connections.insert(id, Arc::clone(&control));
        self.metrics.connection_opened();
        Some(ConnectionGuard::new(
            Arc::clone(self) as Arc<dyn Registry>,
            id,
            control,
        ))
    }

    pub(crate) fn request_unbind(&self) {
        let waker = {
            let mut state = self.lock();
            state.unbind_requested = true;
            state.accept_waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    pub(crate) fn poll_unbound(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.lock();
        if state.unbound {
            return Poll::Ready(());
        }
        add_waker(&mut state.unbound_wakers, cx.waker());
        Poll::Pending
    }

    pub(crate) fn poll_drained(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.lock();
        if state.connections.is_empty() {
            return Poll::Ready(());
        }
        add_waker(&mut state.drained_wakers, cx.waker());
        Poll::Pending
    }

    /// The server's counters.
    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    pub(crate) fn connections(&self) -> Vec<Arc<Control>> {
        self.lock().connections.values().cloned().collect()
    }
}

/// A connection's guard, dropped once its socket is closed, removes it.
impl Registry for Server {
    fn remove(&self, id: u64) {
        // Before the removal under the lock (see `connection_closed`).
        self.metrics.connection_closed();
        let (wakers, accept) = {
            let mut state = self.lock();
            state.connections.remove(&id);
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

/// A bound server: its address, its counters, [`unbind`](Self::unbind),
/// [`terminate`](Self::terminate) and the futures that observe a
/// termination. Cheap to clone (every clone is the same server); dropping
/// it leaves the server running.
#[derive(Clone)]
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

    /// A snapshot of the server's counters: connections, requests in the
    /// handler, responses by status class and by exact status (see
    /// [`ServerMetrics`]). Relaxed atomic loads (one per status code, 900);
    /// no lock.
    pub fn metrics(&self) -> ServerMetrics {
        self.server.metrics.snapshot()
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

    pub(crate) fn server(&self) -> &Arc<Server> {
        &self.server
    }

    pub(crate) fn handle(&self) -> &Handle {
        &self.handle
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

#[cfg(test)]
mod tests {
    use super::*;
    use proscenium::ShutdownConfig;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::Wake;

    struct Woken(AtomicBool);

    impl Wake for Woken {
        fn wake(self: Arc<Self>) {
            // SeqCst: a test flag.
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// The reactor fails with `Other` for more than its shutdown (no slot
    /// left for the accepted socket: "too many sources registered with the
    /// reactor", not reachable in a test, 2^24 sockets): the accept loop
    /// used to end for good on any `Other`, and now pauses and goes on; it
    /// stops on the scheduler's shutdown error alone.
    #[test]
    fn only_the_scheduler_shutting_down_ends_the_accept_loop() {
        let full = io::Error::other("too many sources registered with the reactor");
        assert_eq!(accept_failure(&full), AcceptFailure::Pause);
        assert_eq!(
            accept_failure(&io::Error::other("scheduler shut down")),
            AcceptFailure::Pause
        );
        assert_eq!(
            accept_failure(&io::ErrorKind::ConnectionAborted.into()),
            AcceptFailure::Lost
        );
        // EMFILE.
        assert_eq!(
            accept_failure(&io::Error::from_raw_os_error(24)),
            AcceptFailure::Pause
        );

        // The real one: an accept pending when the scheduler shuts down.
        let system = ActorSystem::builder()
            .workers(1)
            .pin_workers(false)
            .coordinated_shutdown(ShutdownConfig::default().run_by_signals(false))
            .build()
            .expect("system");
        let addr = "127.0.0.1:0".parse().expect("an address");
        let listener = TcpListener::bind(system.scheduler_handle(), addr).expect("bind");
        let woken = Arc::new(Woken(AtomicBool::new(false)));
        let waker = Waker::from(Arc::clone(&woken));
        let mut cx = Context::from_waker(&waker);
        assert!(listener.poll_accept(&mut cx).is_pending());
        system.terminate().wait();
        // SeqCst: a test flag.
        assert!(
            woken.0.load(Ordering::SeqCst),
            "the shutdown woke the accept"
        );
        match listener.poll_accept(&mut cx) {
            Poll::Ready(Err(e)) => assert_eq!(accept_failure(&e), AcceptFailure::ShutDown),
            other => panic!("{:?}", other.map(|r| r.map(|(_, peer)| peer))),
        }
    }
}
