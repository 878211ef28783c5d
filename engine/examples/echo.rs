//! A TCP echo server built of actors, on the scheduler's own I/O reactor
//! (`proscenium::net`), that shuts down in order on SIGTERM or SIGINT
//! (Ctrl-C).
//!
//! One acceptor actor owns the listener: its accept is a future piped to
//! it (`Context::pipe_to_self`), and each accepted connection becomes a
//! child actor that echoes what it reads. The connection's reads and writes
//! are futures piped back to it too: no handler ever blocks. The
//! coordinated shutdown unbinds first (phase service-unbind: the acceptor
//! stops accepting and drops its listener), then closes the connections
//! (phase service-requests-done: every connection actor stops and shuts its
//! socket down, so each client reads EOF), then terminates the system and
//! exits the process with the configured code (0).
//!
//! Run it with `cargo run --release -p proscenium --example echo`, talk to
//! it (`nc 127.0.0.1 7878`), then press Ctrl-C (or `kill -TERM <pid>`); it
//! prints each step. With an address as argument it listens there
//! (`127.0.0.1:0`: any free port). `engine/tests/echo.rs` runs it as a
//! child process.

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures_util::io::{AsyncReadExt, AsyncWriteExt};
use proscenium::net::{TcpListener, TcpStream};
use proscenium::prelude::*;
use proscenium::TaskError;

const CONFIG: &str = r#"
[coordinated-shutdown]
exit-process = "on"
exit-code = 0
default-phase-timeout = "5 s"
"#;

/// How long a shutdown task waits for the acceptor's answer.
const ANSWER: Duration = Duration::from_secs(4);

/// The size of each connection's read buffer.
const BUFFER: usize = 4096;

/// Prints a line and flushes it at once (the test reads it as it comes).
fn say(line: &str) {
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// One connection: reads, writes back what it read, reads again.
struct Connection {
    stream: Arc<TcpStream>,
    peer: SocketAddr,
    /// The read or write in flight (one at a time: a read, then the write
    /// of what it read).
    io: Option<PipeHandle>,
}

enum ConnectionMsg {
    /// A read ended: its result and the buffer read into.
    Read(io::Result<usize>, Vec<u8>),
    /// A write ended: its result and the buffer, for the next read.
    Written(io::Result<()>, Vec<u8>),
}

impl Connection {
    fn read(&mut self, ctx: &mut Context<Self>, mut buf: Vec<u8>) {
        let stream = Arc::clone(&self.stream);
        buf.resize(BUFFER, 0);
        let read = async move {
            // `&TcpStream` reads and writes: the actor keeps its own
            // reference, to shut the socket down when it stops.
            let mut reader: &TcpStream = &stream;
            let n = reader.read(&mut buf).await;
            (n, buf)
        };
        self.io = Some(ctx.pipe_to_self(read, |(n, buf)| ConnectionMsg::Read(n, buf)));
    }

    fn write(&mut self, ctx: &mut Context<Self>, mut buf: Vec<u8>, n: usize) {
        let stream = Arc::clone(&self.stream);
        buf.truncate(n);
        let write = async move {
            let mut writer: &TcpStream = &stream;
            let written = writer.write_all(&buf).await;
            (written, buf)
        };
        self.io = Some(ctx.pipe_to_self(write, |(w, buf)| ConnectionMsg::Written(w, buf)));
    }
}

impl Actor for Connection {
    type Msg = ConnectionMsg;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        self.read(ctx, Vec::with_capacity(BUFFER));
        Ok(())
    }

    fn receive(&mut self, ctx: &mut Context<Self>, msg: ConnectionMsg) -> Outcome {
        self.io = None;
        match msg {
            ConnectionMsg::Read(Ok(0), _) => {
                say(&format!("connection {} closed by the client", self.peer));
                ctx.stop_self();
            }
            ConnectionMsg::Read(Ok(n), buf) => self.write(ctx, buf, n),
            ConnectionMsg::Written(Ok(()), buf) => self.read(ctx, buf),
            ConnectionMsg::Read(Err(e), _) | ConnectionMsg::Written(Err(e), _) => {
                say(&format!("connection {}: {e}", self.peer));
                ctx.stop_self();
            }
        }
        Ok(())
    }

    /// Closes the connection: the read or write in flight is cancelled and
    /// the socket shut down both ways, so the client reads EOF now (not
    /// only once the cancelled future has been dropped).
    fn post_stop(&mut self, _ctx: &mut Context<Self>) {
        if let Some(io) = self.io.take() {
            io.cancel();
        }
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

/// The acceptor: accepts connections and supervises one child actor per
/// connection.
#[derive(Default)]
struct Acceptor {
    /// Until the unbind (the accept in flight holds a clone).
    listener: Option<Arc<TcpListener>>,
    /// The accept in flight.
    accepting: Option<PipeHandle>,
    accepted: u64,
    /// Connections whose actor has not terminated.
    open: usize,
    /// Connections the shutdown closes.
    closing: usize,
    /// Who waits for the last connection to close.
    closed: Option<Reply<usize>>,
}

enum AcceptorMsg {
    /// Start accepting on this listener.
    Listen(TcpListener),
    /// An accept ended.
    Accepted(io::Result<(TcpStream, SocketAddr)>),
    /// Stop accepting and drop the listener; answers with its address.
    Unbind(Reply<Option<SocketAddr>>),
    /// Stop every connection; answers with their number once all have
    /// terminated.
    CloseAll(Reply<usize>),
}

impl Acceptor {
    fn accept(&mut self, ctx: &mut Context<Self>) {
        let Some(listener) = &self.listener else {
            return;
        };
        let listener = Arc::clone(listener);
        let accept = async move { listener.accept().await };
        self.accepting = Some(ctx.pipe_to_self(accept, AcceptorMsg::Accepted));
    }

    fn answer_if_closed(&mut self) {
        if self.open == 0 {
            if let Some(reply) = self.closed.take() {
                reply.send(self.closing);
            }
        }
    }
}

impl Actor for Acceptor {
    type Msg = AcceptorMsg;

    fn receive(&mut self, ctx: &mut Context<Self>, msg: AcceptorMsg) -> Outcome {
        match msg {
            AcceptorMsg::Listen(listener) => {
                self.listener = Some(Arc::new(listener));
                self.accept(ctx);
            }
            AcceptorMsg::Accepted(Ok((stream, peer))) => {
                self.accepting = None;
                if self.listener.is_none() {
                    // Accepted just before the unbind: not served.
                    return Ok(());
                }
                let stream = Arc::new(stream);
                self.accepted += 1;
                let connection = ctx.spawn(
                    Props::new(move || Connection {
                        stream: Arc::clone(&stream),
                        peer,
                        io: None,
                    }),
                    &format!("connection-{}", self.accepted),
                )?;
                ctx.watch(&connection.id());
                self.open += 1;
                say(&format!("accepted {peer}"));
                self.accept(ctx);
            }
            AcceptorMsg::Accepted(Err(e)) => {
                self.accepting = None;
                say(&format!("accept failed: {e}"));
                self.accept(ctx);
            }
            AcceptorMsg::Unbind(reply) => {
                // Cancelling the accept drops its future, and with it the
                // last reference to the listener: the socket closes.
                if let Some(accepting) = self.accepting.take() {
                    accepting.cancel();
                }
                let addr = self
                    .listener
                    .take()
                    .and_then(|listener| listener.local_addr().ok());
                reply.send(addr);
            }
            AcceptorMsg::CloseAll(reply) => {
                self.closing = self.open;
                self.closed = Some(reply);
                ctx.stop_all_children();
                self.answer_if_closed();
            }
        }
        Ok(())
    }

    /// A connection ended (its client left, or the shutdown closed it).
    fn on_terminated(&mut self, _ctx: &mut Context<Self>, _who: ActorId) -> Outcome {
        self.open -= 1;
        say(&format!("open connections: {}", self.open));
        self.answer_if_closed();
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7878".into())
        .parse()?;
    let config = ShutdownConfig::from_toml_str(CONFIG)?;
    let system = ActorSystem::builder()
        .name("echo")
        .workers(2)
        .pin_workers(false)
        .coordinated_shutdown(config)
        .build()?;
    let cs = system.coordinated_shutdown();

    let listener = TcpListener::bind(system.scheduler_handle(), addr)?;
    let local = listener.local_addr()?;
    let acceptor = system.spawn(Props::new(Acceptor::default), "acceptor")?;
    acceptor.tell(AcceptorMsg::Listen(listener));

    let to = acceptor.clone();
    cs.add_task(Phase::SERVICE_UNBIND, "unbind", move || async move {
        let addr = to
            .ask(AcceptorMsg::Unbind, ANSWER)
            .await
            .map_err(|e| TaskError::from_error(&e))?;
        let addr = addr.map_or_else(|| "nothing".to_owned(), |a| a.to_string());
        say(&format!(
            "phase service-unbind: stopped listening on {addr}"
        ));
        Ok(())
    })?;
    let to = acceptor.clone();
    cs.add_task(
        Phase::SERVICE_REQUESTS_DONE,
        "close-connections",
        move || async move {
            let closed = to
                .ask(AcceptorMsg::CloseAll, ANSWER)
                .await
                .map_err(|e| TaskError::from_error(&e))?;
            say(&format!(
                "phase service-requests-done: closed {closed} connections"
            ));
            Ok(())
        },
    )?;
    cs.add_task(
        Phase::BEFORE_ACTOR_SYSTEM_TERMINATE,
        "last-words",
        || async {
            say("phase before-actor-system-terminate");
            Ok(())
        },
    )?;
    drop(acceptor);

    system.register_on_termination(|report| {
        say(&format!("terminated: clean={}", report.clean()));
    });

    say(&format!("listening on {local}"));
    say(&format!("ready pid={}", std::process::id()));

    // The workers serve; with exit-process on, the shutdown's exit thread
    // ends the process with the configured code once the system has
    // terminated (after the callback above).
    loop {
        std::thread::park();
    }
}
