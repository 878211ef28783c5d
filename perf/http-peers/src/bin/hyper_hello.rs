//! hyper 1.x on a tokio runtime of WORKERS workers (default 2): `GET /hello` -> "hello, world".
//! Usage: hyper_hello PORT [WORKERS]
use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;

async fn hello(_: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"hello, world"))))
}

fn main() {
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).unwrap_or(8081);
    let workers: usize = std::env::args().nth(2).and_then(|w| w.parse().ok()).unwrap_or(2);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("bind");
        println!("hyper listening on {port}");
        loop {
            let (stream, _) = listener.accept().await.expect("accept");
            stream.set_nodelay(true).ok();
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(hello))
                    .await;
            });
        }
    });
}
