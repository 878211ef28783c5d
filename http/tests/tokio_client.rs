//! Calling a tokio-based client from a handler (issue 24). Handlers run on
//! the engine's scheduler, not in a tokio runtime, so tokio's I/O and
//! timers, which work only inside one, panic there ("there is no reactor
//! running"; the server answers the panic 500). The one way: spawn the
//! client's future on a tokio runtime and await its `JoinHandle`, which
//! any executor can await (the crate docs say so).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod support;

use http::{Request, Response, StatusCode};
use proscenium_http::{Body, Http};
use std::io::{Read, Write};
use std::net::TcpListener;
use support::{connect, get, read_answer, system};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the tokio client does: one line to an echo server, and its echo.
async fn ask_echo(addr: std::net::SocketAddr) -> std::io::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.write_all(b"ping").await?;
    let mut echo = [0u8; 4];
    stream.read_exact(&mut echo).await?;
    Ok(String::from_utf8_lossy(&echo).into_owned())
}

#[test]
fn a_tokio_client_runs_on_a_tokio_runtime_and_is_awaited_from_the_handler() {
    // The echo server the client talks to: a plain thread.
    let echo = TcpListener::bind("127.0.0.1:0").unwrap();
    let echo_addr = echo.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in echo.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buf = [0u8; 4];
            if stream.read_exact(&mut buf).is_ok() {
                let _ = stream.write_all(&buf);
            }
        }
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_io()
        .build()
        .unwrap();
    let tokio_handle = runtime.handle().clone();
    let system = system();
    let binding = Http::bind(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        move |request: Request<Body>| {
            let tokio_handle = tokio_handle.clone();
            async move {
                let echoed = if request.uri().path() == "/direct" {
                    // Not in a tokio runtime: tokio panics.
                    ask_echo(echo_addr).await
                } else {
                    // The way: on the runtime, awaited here.
                    match tokio_handle.spawn(ask_echo(echo_addr)).await {
                        Ok(echoed) => echoed,
                        Err(e) => Err(std::io::Error::other(e)),
                    }
                };
                echoed.map(|text| Response::new(Body::from(text)))
            }
        },
    )
    .unwrap();
    let mut c = connect(&binding);
    get(&mut c, "/spawned");
    let a = read_answer(&mut c);
    assert_eq!((a.status, a.body.as_str()), (200, "ping"));
    // The direct call panics in the handler: 500, and the server goes on.
    get(&mut c, "/direct");
    assert_eq!(read_answer(&mut c).status, 500);
    get(&mut c, "/spawned");
    assert_eq!(read_answer(&mut c).body, "ping");
    assert_eq!(
        binding
            .metrics()
            .responses_with(StatusCode::INTERNAL_SERVER_ERROR),
        1
    );
    system.terminate().wait();
    drop(runtime);
}
