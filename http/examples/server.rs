//! An HTTP server that shuts down in order on SIGTERM or SIGINT (Ctrl-C).
//!
//! * `GET /hello`: `hello, world` in plain text (the benchmark endpoint);
//! * `GET /slow?ms=N`: answers after N milliseconds (default 1000), awaiting
//!   the scheduler's sleep (no worker is held);
//! * `GET /stream?n=N`: N lines (default 10) in a chunked, streamed body;
//! * `POST /counter` adds one to a counter actor and answers the new count,
//!   `GET /counter` answers the count (the handler `ask`s the actor).
//!
//! Run it with `cargo run --release -p proscenium-http --example server`
//! (options: `--port N`, or the `PORT` environment variable, default 8080,
//! 0 for any free port; `--deadline-ms N`, the termination's hard
//! deadline, default 2000; `--exit-code N`, default 0; `--workers N`, the
//! scheduler's workers, default 2; `--pin`, pin them to cores;
//! `--tls-cert PATH --tls-key PATH`, PEM files, to serve HTTPS, with the
//! `tls` feature). HTTP/2 is served on the same port (`curl
//! --http2-prior-knowledge`, or ALPN `h2` over TLS). It prints
//! `listening on ADDR` once it serves. On Ctrl-C (or `kill -TERM <pid>`)
//! the coordinated shutdown runs: `service-unbind` stops accepting,
//! `service-requests-done` lets requests in flight finish (with
//! `Connection: close`) and answers new ones 503 until the deadline,
//! `service-stop` closes what is left; the program prints each phase as it
//! runs and how long the server's termination took, then exits with the
//! exit code. `http/tests/example_server.rs` and `http/tests/wrk.rs` run it
//! as a child process.

use http::{HeaderValue, Method, Request, Response, StatusCode};
use proscenium::prelude::*;
use proscenium_http::{Body, Http, ServerSettings};
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

/// Prints a line and flushes it at once (a test reads it as it comes).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The counter actor's messages.
enum CounterMsg {
    Add(Reply<u64>),
    Get(Reply<u64>),
}

struct Counter(u64);

impl Actor for Counter {
    type Msg = CounterMsg;
    fn receive(&mut self, _: &mut Context<Self>, msg: CounterMsg) -> Outcome {
        match msg {
            CounterMsg::Add(reply) => {
                self.0 += 1;
                reply.send(self.0);
            }
            CounterMsg::Get(reply) => reply.send(self.0),
        }
        Ok(())
    }
}

/// `count` lines of "line N\n".
struct Lines {
    next: u64,
    count: u64,
}

impl futures_core::Stream for Lines {
    type Item = Result<String, std::io::Error>;
    fn poll_next(mut self: Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<Option<Self::Item>> {
        if self.next == self.count {
            return Poll::Ready(None);
        }
        self.next += 1;
        Poll::Ready(Some(Ok(format!("line {}\n", self.next))))
    }
}

/// The value of `key` in the request's query, as a number.
fn query(request: &Request<Body>, key: &str) -> Option<u64> {
    request.uri().query()?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| v.parse().ok()).flatten()
    })
}

fn text(status: StatusCode, body: impl Into<String>) -> Response<Body> {
    let mut response = Response::new(Body::from(body.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain"),
    );
    response
}

/// `--name VALUE` on the command line.
fn option(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1).cloned()
}

/// `settings` serving HTTPS if `--tls-cert` and `--tls-key` are given.
fn tls(settings: ServerSettings) -> Result<ServerSettings, Box<dyn std::error::Error>> {
    let (Some(cert), Some(key)) = (option("--tls-cert"), option("--tls-key")) else {
        return Ok(settings);
    };
    #[cfg(feature = "tls")]
    {
        Ok(settings.tls(proscenium_http::Tls::from_pem_files(cert, key)?))
    }
    #[cfg(not(feature = "tls"))]
    {
        let _ = (cert, key);
        Err("--tls-cert and --tls-key need the `tls` feature (--features tls)".into())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port: u16 = match option("--port").or_else(|| std::env::var("PORT").ok()) {
        Some(port) => port.parse()?,
        None => 8080,
    };
    let deadline = Duration::from_millis(match option("--deadline-ms") {
        Some(ms) => ms.parse()?,
        None => 2000,
    });
    let workers: usize = match option("--workers") {
        Some(n) => n.parse()?,
        None => 2,
    };
    let pin = std::env::args().any(|a| a == "--pin");
    let exit_code: i32 = match option("--exit-code") {
        Some(code) => code.parse()?,
        None => 0,
    };

    // The drain's phase gets the hard deadline and a second more, so its
    // own timeout never cuts the drain short.
    let config = ShutdownConfig::from_toml_str(&format!(
        r#"
[coordinated-shutdown]
exit-process = "on"
exit-code = {exit_code}

[coordinated-shutdown.phases.service-requests-done]
timeout = "{} ms"
"#,
        deadline.as_millis() + 1000
    ))?;
    let system = ActorSystem::builder()
        .name("http-server")
        .workers(workers)
        .pin_workers(pin)
        .coordinated_shutdown(config)
        .build()?;
    let cs = system.coordinated_shutdown();
    let counter = system.spawn(Props::new(|| Counter(0)), "counter")?;
    let handle = system.scheduler_handle().clone();

    let settings = tls(ServerSettings::default())?;
    let binding = Http::bind_with(
        &system,
        ([127, 0, 0, 1], port).into(),
        settings,
        move |request: Request<Body>| {
            let counter = counter.clone();
            let handle = handle.clone();
            let path = request.uri().path().to_owned();
            let future: Pin<Box<dyn Future<Output = Response<Body>> + Send>> =
                match (request.method().clone(), path.as_str()) {
                    (Method::GET, "/hello") => {
                        Box::pin(async { text(StatusCode::OK, "hello, world") })
                    }
                    (Method::GET, "/slow") => {
                        let ms = query(&request, "ms").unwrap_or(1000).min(600_000);
                        // A test waits for this line to know the request
                        // is in flight.
                        say(&format!("slow request started ms={ms}"));
                        Box::pin(async move {
                            handle.sleep(Duration::from_millis(ms)).await;
                            text(StatusCode::OK, format!("slept {ms} ms"))
                        })
                    }
                    (Method::GET, "/stream") => {
                        let count = query(&request, "n").unwrap_or(10);
                        Box::pin(async move {
                            Response::new(Body::from_stream(Lines { next: 0, count }))
                        })
                    }
                    (method @ (Method::GET | Method::POST), "/counter") => Box::pin(async move {
                        let timeout = Duration::from_secs(5);
                        let answer = if method == Method::POST {
                            counter.ask(CounterMsg::Add, timeout).await
                        } else {
                            counter.ask(CounterMsg::Get, timeout).await
                        };
                        match answer {
                            Ok(count) => text(StatusCode::OK, count.to_string()),
                            Err(e) => text(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
                        }
                    }),
                    _ => Box::pin(async { text(StatusCode::NOT_FOUND, "not found") }),
                };
            future
        },
    )?;
    binding.add_to_coordinated_shutdown(cs, deadline)?;

    // A task in each phase around the server's: prints the phase as it
    // starts (the server's own tasks run in the same phases).
    let step = |phase: &'static str| {
        move || async move {
            say(&format!("phase {phase}"));
            Ok(())
        }
    };
    cs.add_task(
        Phase::BEFORE_SERVICE_UNBIND,
        "announce",
        step("before-service-unbind"),
    )?;
    cs.add_task(Phase::SERVICE_UNBIND, "say-unbind", step("service-unbind"))?;
    cs.add_task(Phase::SERVICE_STOP, "say-stop", step("service-stop"))?;
    cs.add_task(
        Phase::BEFORE_ACTOR_SYSTEM_TERMINATE,
        "say-terminate",
        step("before-actor-system-terminate"),
    )?;

    // In the drain's phase: how long the server's termination took, from
    // `terminate` (the deadline minus the hard deadline) to
    // `when_terminated` (at the latest at the hard deadline, when the
    // server closes what is left; the phase's timeout is longer).
    let observed = binding.clone();
    cs.add_task(
        Phase::SERVICE_REQUESTS_DONE,
        "say-requests-done",
        move || async move {
            say("phase service-requests-done");
            let signal = observed.when_termination_signal_issued().await;
            let started = signal.instant().and_then(|at| at.checked_sub(deadline));
            let terminated = observed.when_terminated().await;
            let elapsed = started.map_or(Duration::ZERO, |s| s.elapsed());
            match terminated {
                Ok(terminated) => say(&format!(
                    "http terminated in {} ms (hard deadline {} ms, idle connections closed {}, \
                     forced connections {})",
                    elapsed.as_millis(),
                    deadline.as_millis(),
                    observed.metrics().idle_closed_by_termination,
                    terminated.forced_connections
                )),
                Err(e) => say(&format!("http termination failed: {e}")),
            }
            Ok(())
        },
    )?;
    system.register_on_termination(|report| {
        say(&format!(
            "actor system terminated: clean={}",
            report.clean()
        ));
    });

    say(&format!("listening on {}", binding.local_addr()));
    // The main thread has nothing more to do: the shutdown's exit thread
    // ends the process with the exit code once the system has terminated.
    loop {
        std::thread::park();
    }
}
