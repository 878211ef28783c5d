//! The `tokio` feature: `Context::pipe_to_self_on` runs a future of a
//! tokio-based client (here tokio's own `TcpStream`, talking to an echo
//! server on 127.0.0.1:0) on a tokio runtime and pipes its output into an
//! actor. The engine's dev-dependencies enable the feature, so
//! `cargo test --workspace` runs this file.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;

use proscenium::prelude::*;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A plain-thread echo server for one connection; returns its address.
fn echo_server() -> std::io::Result<(std::net::SocketAddr, std::thread::JoinHandle<()>)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().expect("one client");
        let mut buf = [0u8; 1024];
        loop {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => conn.write_all(&buf[..n]).expect("echo"),
            }
        }
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
fn a_tokio_tcp_client_future_is_piped_into_an_actor() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_io()
        .build()
        .expect("a tokio runtime");
    let (addr, server) = echo_server().expect("an echo server");
    let system = system();
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
    server.join().expect("the server ends with the connection");
    drop(client);
    shutdown(system);
    drop(runtime);
}
