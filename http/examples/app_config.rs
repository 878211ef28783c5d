//! An application's own configuration file with proscenium's sections in
//! it: `[scheduler]`, `[coordinated-shutdown]` and `[http.server]` are
//! fields of the application's struct, beside its own `[greeter]` table,
//! read in one pass by serde (decision 0025). An unknown key or a bad
//! value anywhere, in proscenium's sections or the application's, is an
//! error naming its full key path and line.
//!
//! Run it with `cargo run -p proscenium-http --example app_config`
//! (optionally `-- path/to/app.toml`; without one it reads the file shown
//! in `EXAMPLE`). It builds the system from the file, serves `GET /` with
//! the greeting on an ephemeral port, prints `listening on ADDR` and
//! `GET / -> ...`, and shuts down through the coordinated shutdown.
//! `http/tests/app_config.rs` reads the same kind of struct.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use http::{Request, Response};
use proscenium::{de, ActorSystem, ConfigError, Reason, SchedulerSettings, ShutdownConfig};
use proscenium_http::{Body, Http, ServerSettings};
use serde::Deserialize;

/// The application's whole configuration file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppConfig {
    /// proscenium's `[scheduler]` (absent: the builder's defaults).
    #[serde(default)]
    scheduler: SchedulerSettings,
    /// proscenium's `[coordinated-shutdown]` (absent: Akka's defaults).
    #[serde(rename = "coordinated-shutdown", default)]
    shutdown: ShutdownConfig,
    /// `[http]`, holding proscenium-http's `[http.server]`.
    #[serde(default)]
    http: HttpConfig,
    /// The application's own table.
    greeter: Greeter,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpConfig {
    #[serde(default)]
    server: ServerSettings,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Greeter {
    greeting: String,
    /// Written as proscenium's durations are ("2 s", "500 ms").
    #[serde(deserialize_with = "de::duration")]
    hard_deadline: Duration,
}

const EXAMPLE: &str = r#"
[scheduler]
workers = 2
pin-workers = "off"

[coordinated-shutdown]
run-by-signals = "off"
[coordinated-shutdown.phases.service-unbind]
timeout = "3 s"

[http.server]
idle-timeout = "30 s"
[http.server.parsing]
max-content-length = "1 MiB"

[greeter]
greeting = "hello from app.toml"
hard-deadline = "2 s"
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let config: AppConfig = match std::env::args().nth(1) {
        Some(path) => de::from_toml_file(path)?,
        None => de::from_toml_str(EXAMPLE)?,
    };

    // A mistake in an embedded section names its full key and line.
    let typo = EXAMPLE.replace("idle-timeout", "idle-timeuot");
    match de::from_toml_str::<AppConfig>(&typo) {
        Err(err @ ConfigError::UnknownKey { .. }) => println!("refused: {err}"),
        other => return Err(format!("the typo was not refused: {other:?}").into()),
    }
    let bad = EXAMPLE.replace("\"3 s\"", "\"soon\"");
    if let Err(err) = de::from_toml_str::<AppConfig>(&bad) {
        println!("refused: {err}");
    }

    let system = ActorSystem::builder()
        .scheduler_settings(config.scheduler)
        .coordinated_shutdown(config.shutdown)
        .build()?;
    let greeting = config.greeter.greeting;
    let binding = Http::bind_with(
        &system,
        "127.0.0.1:0".parse()?,
        config.http.server,
        move |_: Request<Body>| {
            let body = greeting.clone();
            async move { Response::new(Body::from(body)) }
        },
    )?;
    binding
        .add_to_coordinated_shutdown(system.coordinated_shutdown(), config.greeter.hard_deadline)?;
    let addr = binding.local_addr();
    println!("listening on {addr}");

    let mut stream = TcpStream::connect(addr)?;
    stream.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let body = response.split("\r\n\r\n").nth(1).unwrap_or_default();
    println!("GET / -> {body}");

    system
        .coordinated_shutdown()
        .run(Reason::User("done".into()))
        .wait()?;
    binding.when_terminated().wait()?;
    Ok(())
}
