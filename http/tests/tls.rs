//! HTTPS (feature `tls`): a certificate authority and a server certificate
//! made by the test (rcgen), rustls's client and curl against the server;
//! ALPN choosing HTTP/2 or HTTP/1.1, the termination over TLS, and what
//! a client that is not TLS, or says nothing, gets.
#![cfg(feature = "tls")]
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod programs;
mod server_process;
mod support;

use http::{Request, Response};
use proscenium_http::{Body, Http, ServerBinding, ServerSettings, Tls, TlsError};
use rustls::pki_types::{CertificateDer, ServerName};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use support::pki::{pki, Pki, TempDir};
use support::{connect, entered, slow_server_with, system, Gate, PATIENCE};

const LONG: Duration = Duration::from_secs(3600);

/// rustls's client, trusting the test's CA, offering `alpn`.
fn client(
    pki: &Pki,
    binding: &ServerBinding,
    alpn: &[&[u8]],
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    let ca = rustls::pki_types::pem::PemObject::from_pem_slice(pki.ca.as_bytes()).unwrap();
    roots.add(CertificateDer::into_owned(ca)).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let name = ServerName::try_from("localhost").unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    rustls::StreamOwned::new(connection, connect(binding))
}

/// Reads one HTTP/1.1 response whose body has a Content-Length: the
/// status line's code, the head, the body.
fn read_response(stream: &mut impl Read) -> (u16, String, String) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        stream.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let status = head[9..12].parse().unwrap();
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length: ")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).unwrap();
    (status, head, String::from_utf8(body).unwrap())
}

/// Sends `GET path` on `stream` and reads the answer: status and body.
fn get(stream: &mut (impl Read + Write), path: &str) -> (u16, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let (status, _, body) = read_response(stream);
    (status, body)
}

fn tls_settings(pki: &Pki) -> ServerSettings {
    ServerSettings::default().tls(Tls::from_pem(pki.cert.as_bytes(), pki.key.as_bytes()).unwrap())
}

/// HTTP/1.1 over TLS: keep-alive across requests, the body read, the
/// server's answer; ALPN chose `http/1.1`.
#[test]
fn http_1_1_over_tls() {
    let pki = pki();
    let system = system();
    let (binding, _entered) = slow_server_with(&system, tls_settings(&pki), Gate::default());
    let mut stream = client(&pki, &binding, &[b"http/1.1"]);
    stream
        .write_all(b"POST /a HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello")
        .unwrap();
    let (status, _, body) = read_response(&mut stream);
    assert_eq!((status, body.as_str()), (200, "POST /a 5"));
    assert_eq!(stream.conn.alpn_protocol(), Some(b"http/1.1".as_slice()));
    assert_eq!(get(&mut stream, "/b"), (200, "GET /b 0".to_string()));
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// Akka: "existing connections [...] are allowed to finish the in-flight
/// requests"; "if user code emits a response within the timeout, then
/// this response is sent to the client with a Connection: close header and
/// connection is closed", over TLS: the response, then the TLS close
/// (close_notify: the client reads a clean end).
#[test]
fn a_termination_over_tls_finishes_the_request_in_flight_and_closes_cleanly() {
    let pki = pki();
    let system = system();
    let gate = Gate::default();
    let (binding, entered_rx) = slow_server_with(&system, tls_settings(&pki), gate.clone());
    let mut stream = client(&pki, &binding, &[]);
    stream
        .write_all(b"GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    assert_eq!(entered(&entered_rx), "/slow");
    let termination = binding.terminate(LONG);
    gate.open();
    let (status, head, body) = read_response(&mut stream);
    assert_eq!((status, body.as_str()), (200, "GET /slow 0"));
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    let mut rest = Vec::new();
    // A clean end: rustls reports an end without close_notify as an error.
    stream.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    let terminated = termination.wait().unwrap();
    assert_eq!(terminated.forced_connections, 0);
    system.terminate().wait();
}

/// A client that is not TLS (plain HTTP to the HTTPS port) fails the
/// handshake: its connection is closed, and the server goes on. A client
/// that says nothing is closed at the header read timeout.
#[test]
fn plain_http_and_a_silent_client_are_closed_and_the_server_goes_on() {
    let pki = pki();
    let system = system();
    let settings = tls_settings(&pki).header_read_timeout(Duration::from_millis(200));
    let (binding, _entered) = slow_server_with(&system, settings, Gate::default());
    let mut plain = connect(&binding);
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    // rustls answers a record that is not TLS with an alert, then closes.
    let _ = plain.read_to_end(&mut answer);
    assert!(!answer.starts_with(b"HTTP/"), "{answer:?}");
    let mut silent = connect(&binding);
    let mut nothing = Vec::new();
    let read = silent.read_to_end(&mut nothing);
    assert!(matches!(read, Ok(0)) || read.is_err(), "{read:?}");
    let mut stream = client(&pki, &binding, &[b"http/1.1"]);
    assert_eq!(
        get(&mut stream, "/after"),
        (200, "GET /after 0".to_string())
    );
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// A certificate and key that cannot serve are refused with a typed
/// error, before any binding.
#[test]
fn bad_certificates_and_keys_are_typed_errors() {
    let pki = pki();
    let no_chain = Tls::from_pem(b"", pki.key.as_bytes()).unwrap_err();
    assert!(matches!(no_chain, TlsError::Certificate(_)), "{no_chain}");
    let no_key = Tls::from_pem(pki.cert.as_bytes(), b"not a key").unwrap_err();
    assert!(matches!(no_key, TlsError::PrivateKey(_)), "{no_key}");
    let other = support::pki::pki();
    let mismatch = Tls::from_pem(pki.cert.as_bytes(), other.key.as_bytes()).unwrap_err();
    assert!(matches!(mismatch, TlsError::Refused(_)), "{mismatch}");
    let missing = Tls::from_pem_files("/nonexistent/cert.pem", "/nonexistent/key.pem").unwrap_err();
    assert!(
        missing.to_string().contains("/nonexistent/cert.pem"),
        "{missing}"
    );
    // The key never shows in a Debug print.
    let tls = Tls::from_pem(pki.cert.as_bytes(), pki.key.as_bytes()).unwrap();
    let printed = format!("{tls:?}");
    assert!(!printed.contains("PRIVATE"), "{printed}");
}

/// curl over TLS: ALPN chooses HTTP/2 when the client offers it (`h2`),
/// HTTP/1.1 when it does not; both on the one port, from PEM files.
#[test]
fn alpn_chooses_http_2_or_http_1_1_with_curl() {
    if !programs::present("curl") {
        return;
    }
    let pki = pki();
    let dir = TempDir::new();
    let ca = dir.write("ca.pem", &pki.ca);
    let cert = dir.write("cert.pem", &pki.cert);
    let key = dir.write("key.pem", &pki.key);
    let system = system();
    let settings = ServerSettings::default().tls(Tls::from_pem_files(&cert, &key).unwrap());
    let binding = Http::bind_with(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        settings,
        |req: Request<Body>| async move {
            Response::new(Body::from(format!(
                "{:?} {}",
                req.version(),
                req.body().len()
            )))
        },
    )
    .unwrap();
    let port = binding.local_addr().port();
    let curl = |args: &[&str]| {
        let out = Command::new("curl")
            .args(["--silent", "--show-error", "--max-time", "30"])
            .arg("--cacert")
            .arg(&ca)
            .args(["--write-out", " %{http_code} %{http_version}"])
            .args(args)
            .arg(format!("https://localhost:{port}/"))
            .output()
            .expect("curl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(curl(&["--http2"]), "HTTP/2.0 0 200 2");
    assert_eq!(
        curl(&["--http1.1", "--data-binary", "abc"]),
        "HTTP/1.1 3 200 1.1"
    );
    binding.terminate(LONG).wait().unwrap();
    system.terminate().wait();
}

/// Many clients at once over TLS, each its own handshake and requests.
#[test]
fn parallel_tls_clients() {
    let pki = Arc::new(pki());
    let system = system();
    let (binding, _entered) = slow_server_with(&system, tls_settings(&pki), Gate::default());
    let binding = Arc::new(binding);
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let (pki, binding) = (Arc::clone(&pki), Arc::clone(&binding));
            thread::spawn(move || {
                let mut stream = client(&pki, &binding, &[b"http/1.1"]);
                for j in 0..10 {
                    let path = format!("/{i}/{j}");
                    assert_eq!(get(&mut stream, &path), (200, format!("GET {path} 0")));
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    let served: u64 = binding
        .metrics()
        .responses_by_status()
        .map(|(_, n)| n)
        .sum();
    assert_eq!(served, 80);
    let (tx, rx) = std::sync::mpsc::channel();
    let waiting = Arc::clone(&binding);
    thread::spawn(move || tx.send(waiting.terminate(LONG).wait().is_ok()));
    assert!(rx.recv_timeout(PATIENCE).unwrap());
    system.terminate().wait();
}

/// The `server` example over HTTPS (`--tls-cert`, `--tls-key`; built with
/// the feature): curl gets `/hello` over HTTP/2 and HTTP/1.1, then SIGTERM
/// ends it in order with exit status 0.
#[cfg(unix)]
#[test]
fn the_server_example_serves_https_and_ends_in_order_on_sigterm() {
    if !programs::present("curl") {
        return;
    }
    let pki = pki();
    let dir = TempDir::new();
    let ca = dir.write("ca.pem", &pki.ca);
    let cert = dir.write("cert.pem", &pki.cert);
    let key = dir.write("key.pem", &pki.key);
    let server = server_process::ServerProcess::start(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let get = |version: &str| {
        let out = Command::new("curl")
            .args(["--silent", "--show-error", "--max-time", "30"])
            .arg("--cacert")
            .arg(&ca)
            .args(["--write-out", " %{http_code} %{http_version}", version])
            .arg(format!("https://localhost:{}/hello", server.addr.port()))
            .output()
            .expect("curl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(get("--http2"), "hello, world 200 2");
    assert_eq!(get("--http1.1"), "hello, world 200 1.1");
    server_process::signal(&server.child, libc::SIGTERM);
    let (code, lines) = server.finish();
    assert_eq!(code, Some(0), "{lines:#?}");
    assert!(
        lines.iter().any(|l| l.starts_with("http terminated in ")),
        "{lines:#?}"
    );
}
