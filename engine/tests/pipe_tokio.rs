//! The `tokio` feature: `Context::pipe_to_self_on` runs a future of a
//! tokio-based client (here tokio's own `TcpStream`) on a tokio runtime and
//! pipes its output into an actor. The server is proscenium's own: an echo
//! server on `proscenium::net` (the scheduler's I/O reactor) running as a
//! task of the same actor system, so the two runtimes' sockets talk to each
//! other. The engine's dev-dependencies enable the feature, so
//! `cargo test --workspace` runs this file.

mod support;

use futures_util::io::{AsyncReadExt as _, AsyncWriteExt as _};
use proscenium::net::TcpListener;
use proscenium::prelude::*;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A proscenium echo server for `clients` connections, one after the
/// other, as a task on `system`'s workers; returns its address and the
/// task, which ends once the last client has closed.
fn echo_server(
    system: &ActorSystem,
    clients: usize,
) -> std::io::Result<(std::net::SocketAddr, JoinHandle<std::io::Result<()>>)> {
    let any_port = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let listener = TcpListener::bind(system.scheduler_handle(), any_port)?;
    let addr = listener.local_addr()?;
    let server = system.spawn_task(async move {
        for _ in 0..clients {
            let (mut conn, _peer) = listener.accept().await?;
            let mut buf = [0u8; 1024];
            loop {
                let n = conn.read(&mut buf).await?;
                if n == 0 {
                    break;
                }
                conn.write_all(&buf[..n]).await?;
            }
        }
        Ok(())
    });
    Ok((addr, server))
}

enum Msg {
    Call(String),
    Echoed(std::io::Result<String>),
}

struct Client {
    runtime: tokio::runtime::Handle,
    addr: std::net::SocketAddr,
    answers: std::sync::mpsc::Sender<std::io::Result<String>>,
}

impl Actor for Client {
    type Msg = Msg;

    fn receive(&mut self, ctx: &mut Context<Self>, msg: Msg) -> Outcome {
        match msg {
            Msg::Call(text) => {
                let addr = self.addr;
                let call = async move {
                    let mut stream = TcpStream::connect(addr).await?;
                    stream.write_all(text.as_bytes()).await?;
                    let mut buf = vec![0u8; text.len()];
                    stream.read_exact(&mut buf).await?;
                    String::from_utf8(buf).map_err(std::io::Error::other)
                };
                drop(ctx.pipe_to_self_on(&self.runtime, call, Msg::Echoed));
            }
            Msg::Echoed(answer) => {
                let _ = self.answers.send(answer);
            }
        }
        Ok(())
    }
}

#[test]
fn a_tokio_tcp_client_future_is_piped_into_an_actor_from_a_proscenium_echo_server() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_io()
        .build()
        .expect("a tokio runtime");
    let system = system();
    let (addr, server) = echo_server(&system, 2).expect("an echo server");
    let answers = Probe::new();
    let tx = answers.tx();
    let handle = runtime.handle().clone();
    let client = system
        .spawn(
            Props::new(move || Client {
                runtime: handle.clone(),
                addr,
                answers: tx.clone(),
            }),
            "client",
        )
        .expect("spawn");
    client.tell(Msg::Call("hello over tokio".into()));
    let answer = answers.next().expect("the echo came back");
    assert_eq!(answer, "hello over tokio");
    // A second call, a new connection: the server serves them in turn.
    client.tell(Msg::Call("and again".into()));
    assert_eq!(answers.next().expect("the second echo"), "and again");
    server
        .wait()
        .expect("the server task does not panic")
        .expect("the server ends with the last connection");
    drop(client);
    shutdown(system);
    drop(runtime);
}
