//! The time from `terminate` to `when_terminated` with idle keep-alive
//! connections (perf/http-bench.sh runs it): binds a hello server, opens N
//! connections (default 1000), each sends one request and reads its
//! response (so each is a served, kept-alive connection), then calls
//! `terminate(10 s)` and prints how long `when_terminated` took, and checks
//! that every client saw its connection closed.
//!
//! `cargo run --release -p proscenium-http --example terminate_idle -- 1000`
//!
//! Needs twice N file descriptors (the clients are in the same process):
//! the soft limit is raised to the hard one on Unix.

use http::{Request, Response};
use proscenium::{ActorSystem, ShutdownConfig};
use proscenium_http::{Body, Http, ServerSettings};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

#[cfg(unix)]
fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct we
    // pass, which lives on this stack frame.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

#[cfg(not(unix))]
fn raise_fd_limit() {}

/// Reads one response with a Content-Length body off `reader`.
fn read_response(reader: &mut BufReader<TcpStream>) -> std::io::Result<()> {
    let mut length = 0;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    if !line.starts_with("HTTP/1.1 200") {
        return Err(std::io::Error::other(format!("status line {line:?}")));
    }
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().map_err(std::io::Error::other)?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let count: usize = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 1000,
    };
    raise_fd_limit();
    let system = ActorSystem::builder()
        .workers(2)
        .pin_workers(false)
        .coordinated_shutdown(ShutdownConfig::default().run_by_signals(false))
        .build()?;
    let settings = ServerSettings::default().max_connections(count + 16);
    let binding = Http::bind_with(
        &system,
        "127.0.0.1:0".parse()?,
        settings,
        |_: Request<Body>| async { Response::new(Body::from("hello, world")) },
    )?;

    let mut clients = Vec::with_capacity(count);
    for _ in 0..count {
        let stream = TcpStream::connect(binding.local_addr())?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        let mut reader = BufReader::new(stream);
        reader
            .get_mut()
            .write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")?;
        read_response(&mut reader)?;
        clients.push(reader);
    }
    let open = binding.open_connections();
    if open != count {
        return Err(format!("{open} connections open, expected {count}").into());
    }

    let started = Instant::now();
    let termination = binding.terminate(Duration::from_secs(10));
    let terminated = termination.wait()?;
    let elapsed = started.elapsed();
    println!(
        "terminate -> when_terminated with {count} idle keep-alive connections: {:.3} ms \
         (forced {}, closed as idle {})",
        elapsed.as_secs_f64() * 1e3,
        terminated.forced_connections,
        binding.metrics().idle_closed_by_termination
    );

    // Every client sees its connection closed (EOF, no more bytes).
    for mut client in clients {
        let mut rest = Vec::new();
        client.read_to_end(&mut rest)?;
        if !rest.is_empty() {
            return Err("bytes after the response on an idle connection".into());
        }
    }
    system.terminate().wait();
    Ok(())
}
