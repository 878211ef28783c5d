//! Prometheus metrics, served by the server itself (the `metrics` feature,
//! docs/metrics.md): the scheduler's, the actors', the dead letters' and
//! this server's counters as Prometheus text on `GET /metrics`.
//!
//! * `GET /metrics`: publishes the system's metrics (`publish_metrics`:
//!   the system's counters, then every source, this server's included)
//!   and answers what the Prometheus recorder renders;
//! * `GET /hello`: `hello, world`;
//! * `GET /status/NNN`: an empty answer with that status;
//! * `POST /actors/N`: spawns N actors, stops them, and tells one more
//!   message to each of them (N dead letters), to move the actor counters.
//!
//! Run it with `cargo run -p proscenium-http --features metrics --example
//! metrics` (options: `--port N`, default 9100, 0 for any free port). It
//! prints `listening on ADDR`; then, for example:
//!
//! ```text
//! curl -s localhost:9100/hello; curl -s localhost:9100/status/404
//! curl -s -X POST localhost:9100/actors/3
//! curl -s localhost:9100/metrics | grep -v '^#'
//! ```
//!
//! With `--self-test` it makes that traffic itself, prints one scrape and
//! exits. Ctrl-C (SIGTERM, SIGINT) runs the coordinated shutdown.
//! `http/tests/metrics.rs` builds the same server and checks the values.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use proscenium::prelude::*;
use proscenium_http::{Body, Http, ServerBinding};

/// The buckets of the request-duration histogram, in seconds (without
/// them the recorder renders a summary of quantiles instead).
const DURATION_BUCKETS: [f64; 12] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// An actor that does nothing: `/actors/N` spawns and stops them.
struct Idle;

impl Actor for Idle {
    type Msg = ();
    fn receive(&mut self, _: &mut Context<Self>, (): ()) -> Outcome {
        Ok(())
    }
}

/// Installs the Prometheus recorder as the process's `metrics` recorder
/// (once per process) and returns the handle that renders it. (`pub(crate)`:
/// tests/metrics.rs includes this file as a module.)
pub(crate) fn install_recorder() -> PrometheusHandle {
    PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("proscenium_http_request_duration_seconds".to_owned()),
            &DURATION_BUCKETS,
        )
        .expect("the buckets are not empty")
        .install_recorder()
        .expect("the first recorder of this process")
}

/// Spawns `n` actors, stops them and sends each one message after its
/// stop: `n` spawned, `n` stopped, `n` dead letters.
async fn spawn_and_stop(system: &ActorSystem, n: usize) -> Result<(), String> {
    let mut actors = Vec::with_capacity(n);
    for _ in 0..n {
        actors.push(
            system
                .spawn_anonymous(Props::new(|| Idle))
                .map_err(|e| e.to_string())?,
        );
    }
    for actor in &actors {
        if !actor.graceful_stop(Duration::from_secs(10)).await {
            return Err("an actor did not stop".to_owned());
        }
    }
    for actor in &actors {
        actor.tell(());
    }
    Ok(())
}

/// Binds the example's server on `addr`; `system` is the system whose
/// metrics `/metrics` publishes. (`pub(crate)`: as `install_recorder`.)
pub(crate) fn serve(
    system: &ActorSystem,
    addr: SocketAddr,
    prometheus: PrometheusHandle,
) -> std::io::Result<ServerBinding> {
    let owner = system.clone();
    Http::bind(system, addr, move |request: Request<Body>| {
        let system = owner.clone();
        let prometheus = prometheus.clone();
        async move {
            let path = request.uri().path();
            let status = |s: StatusCode| {
                let mut r = Response::new(Body::empty());
                *r.status_mut() = s;
                r
            };
            match (request.method(), path) {
                (&Method::GET, "/metrics") => {
                    system.publish_metrics();
                    let mut response = Response::new(Body::from(prometheus.render()));
                    response.headers_mut().insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("text/plain; version=0.0.4"),
                    );
                    response
                }
                (&Method::GET, "/hello") => Response::new(Body::from("hello, world\n")),
                (&Method::GET, p) if p.starts_with("/status/") => p["/status/".len()..]
                    .parse()
                    .ok()
                    .and_then(|code| StatusCode::from_u16(code).ok())
                    .map_or_else(|| status(StatusCode::BAD_REQUEST), status),
                (&Method::POST, p) if p.starts_with("/actors/") => {
                    match p["/actors/".len()..].parse() {
                        Ok(n) => match spawn_and_stop(&system, n).await {
                            Ok(()) => status(StatusCode::NO_CONTENT),
                            Err(_) => status(StatusCode::INTERNAL_SERVER_ERROR),
                        },
                        Err(_) => status(StatusCode::BAD_REQUEST),
                    }
                }
                _ => status(StatusCode::NOT_FOUND),
            }
        }
    })
}

/// One request on a new connection; the whole response.
fn request(addr: SocketAddr, method: &str, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut port = 9100;
    let mut self_test = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--port" => port = args.next().ok_or("--port needs a value")?.parse()?,
            "--self-test" => self_test = true,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    // Before the system and the server: a histogram handle looked up before
    // a recorder is installed records nowhere.
    let prometheus = install_recorder();
    let system = ActorSystem::builder()
        .name("metrics-example")
        .pin_workers(false)
        .build()?;
    let binding = serve(
        &system,
        SocketAddr::from(([127, 0, 0, 1], port)),
        prometheus,
    )?;
    let addr = binding.local_addr();
    println!("listening on {addr}");
    if self_test {
        for path in ["/hello", "/hello", "/status/404", "/status/503"] {
            request(addr, "GET", path)?;
        }
        request(addr, "POST", "/actors/3")?;
        let scrape = request(addr, "GET", "/metrics")?;
        let body = scrape.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        print!("{body}");
        system.terminate().wait();
        return Ok(());
    }
    system.when_terminated().wait();
    Ok(())
}
