//! WebSockets (feature `websocket`) against real clients: Python's
//! `websockets` (tests/programs/ws_client.py: echo, fragmented messages, a
//! message over the limit, ping/pong, a termination with 100 open sockets)
//! and tungstenite's client (a client that stops reading, one that never
//! answers a ping, one that never answers the termination's Close, a
//! refused upgrade, an actor per connection, and with the feature `tls`
//! a `wss://` socket). The Python tests are skipped, saying so, when python3
//! cannot import `websockets`; a failure instead with
//! `PROSCENIUM_REQUIRE_PROGRAMS=1` (.ci/run installs it with pip). Every
//! wait ends on an event (a line from the client, a frame, a counter) but
//! one: the slow-reader test takes the handler's sends as stalled once
//! they have not advanced for 300 ms (a stall is the absence of an event);
//! what it asserts is a bound on the bytes taken, which a slower machine
//! does not break.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod programs;
mod support;

use http::Request;
use proscenium_http::{Body, Http, Message, ServerBinding, WebSocketCloseCode, WebSocketUpgrade};
use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{system, PATIENCE};

/// Messages `/flood` sends, 64 KiB each (64 MiB in all).
const FLOOD: usize = 1024;
const FLOOD_MESSAGE: usize = 64 * 1024;

/// `/echo` (limits by default), `/small` (64 KiB messages at most),
/// `/idle` (a ping every 100 ms of silence, closed after 300 ms),
/// `/flood` ([`FLOOD`] messages, counted in `sent` as each is taken),
/// anything else refused as the upgrade check answers.
fn serve(system: &proscenium::ActorSystem, sent: Arc<AtomicUsize>) -> ServerBinding {
    Http::bind(
        system,
        "127.0.0.1:0".parse().unwrap(),
        move |request: Request<Body>| {
            let sent = Arc::clone(&sent);
            async move {
                let upgrade = match WebSocketUpgrade::from_request(&request) {
                    Ok(upgrade) => upgrade,
                    Err(refusal) => return refusal,
                };
                match request.uri().path() {
                    "/flood" => upgrade.on_upgrade(move |mut socket| async move {
                        for _ in 0..FLOOD {
                            let message = Message::binary(vec![7u8; FLOOD_MESSAGE]);
                            if socket.send(message).await.is_err() {
                                return;
                            }
                            sent.fetch_add(1, Ordering::SeqCst);
                        }
                        // Wait for the client's Close.
                        while socket.recv().await.is_some() {}
                    }),
                    "/small" => upgrade.max_message_bytes(64 * 1024).on_upgrade(echo),
                    "/idle" => upgrade
                        .ping_interval(Duration::from_millis(100))
                        .idle_timeout(Duration::from_millis(300))
                        .on_upgrade(echo),
                    _ => upgrade.on_upgrade(echo),
                }
            }
        },
    )
    .unwrap()
}

async fn echo(mut socket: proscenium_http::WebSocket) {
    while let Some(message) = socket.recv().await {
        if (message.is_text() || message.is_binary()) && socket.send(message).await.is_err() {
            break;
        }
    }
}

/// Whether python3 can import `websockets`: if not, a failure under
/// `PROSCENIUM_REQUIRE_PROGRAMS=1`, else a SKIPPED line and `false`.
fn python_websockets() -> bool {
    let imported = Command::new("python3")
        .args(["-c", "import websockets.asyncio.client"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if imported {
        return true;
    }
    assert!(
        !programs::required(),
        "python3 with `websockets` is required ({}=1) but cannot be imported \
         (install it: .ci/run's \"programs the tests drive\" step does)",
        programs::REQUIRE_PROGRAMS
    );
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: python3 cannot import websockets (pip install websockets), or set {}=1 \
         to make this a failure",
        programs::REQUIRE_PROGRAMS
    );
    false
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/programs/ws_client.py")
}

fn url(binding: &ServerBinding, path: &str) -> String {
    format!("ws://{}{path}", binding.local_addr())
}

/// Runs a scenario of the Python client to its end: its lines.
fn python(scenario: &str, url: &str) -> Vec<String> {
    let out = Command::new("python3")
        .arg(script())
        .args([scenario, url])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "ws_client.py {scenario}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn python_echo_of_text_and_binary_then_a_normal_close() {
    if !python_websockets() {
        return;
    }
    let system = system();
    let binding = serve(&system, Arc::default());
    let lines = python("echo", &url(&binding, "/echo"));
    assert_eq!(lines, ["text hello", "binary 0001ff", "closed 1000"]);
    let terminated = binding.terminate(Duration::from_secs(5)).wait().unwrap();
    assert_eq!(terminated.forced_connections, 0);
    system.terminate().wait();
}

#[test]
fn python_fragmented_messages_arrive_whole() {
    if !python_websockets() {
        return;
    }
    let system = system();
    let binding = serve(&system, Arc::default());
    let lines = python("fragments", &url(&binding, "/echo"));
    assert_eq!(lines, ["text fragmented", "binary 140000 1 2"]);
    system.terminate().wait();
}

#[test]
fn python_a_message_over_the_limit_is_closed_with_1009() {
    if !python_websockets() {
        return;
    }
    let system = system();
    let binding = serve(&system, Arc::default());
    let lines = python("too_big", &url(&binding, "/small"));
    assert_eq!(lines, ["closed 1009"]);
    system.terminate().wait();
}

#[test]
fn python_ping_is_answered_with_pong() {
    if !python_websockets() {
        return;
    }
    let system = system();
    let binding = serve(&system, Arc::default());
    let lines = python("ping", &url(&binding, "/echo"));
    assert_eq!(lines, ["pong True", "text after"]);
    system.terminate().wait();
}

/// The termination: 100 open sockets each get Close 1001, answer
/// it, and the server is terminated well before the hard deadline.
#[test]
fn python_termination_with_100_open_sockets_sends_1001_to_each() {
    if !python_websockets() {
        return;
    }
    let system = system();
    let binding = serve(&system, Arc::default());
    let mut client = Command::new("python3")
        .arg(script())
        .args(["hold", &url(&binding, "/echo"), "100"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut lines = BufReader::new(client.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "open 100");
    // The client has its 100 answers; the server counts each socket once
    // its task took it over.
    let started = Instant::now();
    while binding.metrics().open_websockets < 100 {
        assert!(started.elapsed() < PATIENCE, "{:?}", binding.metrics());
        std::thread::yield_now();
    }
    let hard_deadline = Duration::from_secs(10);
    let started = Instant::now();
    let terminated = binding.terminate(hard_deadline).wait().unwrap();
    let took = started.elapsed();
    assert_eq!(terminated.websockets, 100);
    assert_eq!(terminated.forced_connections, 0);
    assert!(took < hard_deadline, "{took:?}");
    assert_eq!(lines.next().unwrap().unwrap(), "codes 1001 100");
    assert!(client.wait().unwrap().success());
    assert_eq!(binding.metrics().open_websockets, 0);
    system.terminate().wait();
}

/// A tungstenite client, connected to `path`.
fn tungstenite(
    binding: &ServerBinding,
    path: &str,
) -> tungstenite::WebSocket<tungstenite::stream::MaybeTlsStream<TcpStream>> {
    let stream = TcpStream::connect(binding.local_addr()).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let stream = tungstenite::stream::MaybeTlsStream::Plain(stream);
    let (socket, response) = tungstenite::client(url(binding, path), stream).unwrap();
    assert_eq!(response.status(), 101);
    socket
}

/// The next raw frame on `stream`: (first byte, payload); server frames
/// are not masked.
fn raw_frame(stream: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut head = [0; 2];
    stream.read_exact(&mut head).unwrap();
    let len = match head[1] & 0x7f {
        126 => {
            let mut len = [0; 2];
            stream.read_exact(&mut len).unwrap();
            usize::from(u16::from_be_bytes(len))
        }
        127 => {
            let mut len = [0; 8];
            stream.read_exact(&mut len).unwrap();
            usize::try_from(u64::from_be_bytes(len)).unwrap()
        }
        len => usize::from(len),
    };
    let mut payload = vec![0; len];
    stream.read_exact(&mut payload).unwrap();
    (head[0], payload)
}

#[test]
fn an_idle_client_is_pinged_then_closed_with_1001() {
    let system = system();
    let binding = serve(&system, Arc::default());
    let mut socket = tungstenite(&binding, "/idle");
    // Read raw: tungstenite would answer the ping.
    let stream = match socket.get_mut() {
        tungstenite::stream::MaybeTlsStream::Plain(stream) => stream,
        _ => unreachable!(),
    };
    // A Ping every 100 ms (FIN set: 0x89), unanswered, then a Close
    // (0x88) with 1001 at 300 ms.
    let mut pings = 0;
    let payload = loop {
        match raw_frame(stream) {
            (0x89, _) => pings += 1,
            (0x88, payload) => break payload,
            (first, _) => panic!("a frame {first:#x}"),
        }
    };
    assert!(pings >= 1);
    assert_eq!(u16::from_be_bytes([payload[0], payload[1]]), 1001);
    system.terminate().wait();
}

/// A client that stops reading: the server holds a bounded amount (the
/// handler's `send` waits), and everything arrives once it reads again.
#[test]
fn a_client_that_stops_reading_makes_the_handler_wait_not_the_server_buffer() {
    let system = system();
    let sent = Arc::new(AtomicUsize::new(0));
    let binding = serve(&system, Arc::clone(&sent));
    let mut socket = tungstenite(&binding, "/flood");
    // Wait until the handler's sends stop advancing (the socket's and the
    // kernel's buffers are full).
    let started = Instant::now();
    let stalled = loop {
        let before = sent.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(300));
        let after = sent.load(Ordering::SeqCst);
        if after == before && after > 0 {
            break after;
        }
        assert!(started.elapsed() < PATIENCE, "the sends never stalled");
    };
    // 64 MiB to send; what was taken while the client read nothing is the
    // kernel's buffers (a few MiB on loopback), the channel (16 messages)
    // and the socket's write buffer (one message).
    assert!(
        stalled * FLOOD_MESSAGE < 24 << 20,
        "{stalled} messages taken while the client read nothing"
    );
    assert!(stalled < FLOOD);
    let mut received = 0;
    while received < FLOOD {
        match socket.read().unwrap() {
            Message::Binary(bytes) => {
                assert_eq!(bytes.len(), FLOOD_MESSAGE);
                received += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(sent.load(Ordering::SeqCst), FLOOD);
    socket.close(None).unwrap();
    system.terminate().wait();
}

/// A client that never answers the termination's Close is cut at the hard
/// deadline, and counted as forced.
#[test]
fn a_client_that_does_not_answer_the_close_is_cut_at_the_hard_deadline() {
    let system = system();
    let binding = serve(&system, Arc::default());
    let mut socket = tungstenite(&binding, "/echo");
    let started = Instant::now();
    while binding.metrics().open_websockets < 1 {
        assert!(started.elapsed() < PATIENCE);
        std::thread::yield_now();
    }
    let hard_deadline = Duration::from_millis(500);
    let started = Instant::now();
    let terminated = binding.terminate(hard_deadline).wait().unwrap();
    assert!(started.elapsed() >= hard_deadline);
    assert_eq!(terminated.websockets, 1);
    assert_eq!(terminated.forced_connections, 1);
    // The Close came, then the end of the stream (no reply was awaited
    // any longer).
    let stream = match socket.get_mut() {
        tungstenite::stream::MaybeTlsStream::Plain(stream) => stream,
        _ => unreachable!(),
    };
    let (first, payload) = raw_frame(stream);
    assert_eq!(first, 0x88);
    assert_eq!(u16::from_be_bytes([payload[0], payload[1]]), 1001);
    assert_eq!(stream.read(&mut [0; 16]).unwrap(), 0);
    system.terminate().wait();
}

/// tungstenite's client sees the 1001 of a termination and answers it.
#[test]
fn a_termination_closes_a_tungstenite_client_with_going_away() {
    let system = system();
    let binding = serve(&system, Arc::default());
    let mut socket = tungstenite(&binding, "/echo");
    socket.send(Message::text("before")).unwrap();
    assert_eq!(socket.read().unwrap(), Message::text("before"));
    let termination = binding.terminate(Duration::from_secs(10));
    match socket.read().unwrap() {
        Message::Close(Some(frame)) => assert_eq!(frame.code, WebSocketCloseCode::Away),
        other => panic!("{other:?}"),
    }
    // tungstenite queued its reply: flushed by the next call.
    let _ = socket.flush();
    let terminated = termination.wait().unwrap();
    assert_eq!(terminated.forced_connections, 0);
    assert_eq!(terminated.websockets, 1);
    system.terminate().wait();
}

#[test]
fn a_request_that_is_no_upgrade_is_refused() {
    let system = system();
    let binding = serve(&system, Arc::default());
    let mut client = support::connect(&binding);
    support::get(&mut client, "/echo");
    let answer = support::read_answer(&mut client);
    assert_eq!(answer.status, 400);
    system.terminate().wait();
}

/// One actor per connection: it gets the client's messages in its mailbox
/// and answers through the sending half it keeps.
struct EchoActor {
    socket: proscenium_http::WebSocketSender,
    closed: std::sync::mpsc::Sender<Option<u16>>,
}

impl proscenium::Actor for EchoActor {
    type Msg = Message;

    fn receive(
        &mut self,
        cx: &mut proscenium::Context<Self>,
        message: Message,
    ) -> proscenium::Outcome {
        match message {
            Message::Close(frame) => {
                let _ = self.closed.send(frame.map(|f| u16::from(f.code)));
                cx.stop_self();
            }
            message => {
                // An echo, unless the client is so slow the buffer is full.
                let _ = self.socket.try_send(message);
            }
        }
        Ok(())
    }
}

#[test]
fn a_socket_handed_to_an_actor_is_served_from_its_mailbox() {
    let system = system();
    let (closed_tx, closed) = std::sync::mpsc::channel();
    let actors = system.clone();
    let binding = Http::bind(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        move |request: Request<Body>| {
            let actors = actors.clone();
            let closed = closed_tx.clone();
            async move {
                match WebSocketUpgrade::from_request(&request) {
                    Ok(upgrade) => upgrade.on_upgrade_actor(move |socket| {
                        let props = proscenium::Props::new(move || EchoActor {
                            socket: socket.clone(),
                            closed: closed.clone(),
                        });
                        actors.spawn_anonymous(props).ok()
                    }),
                    Err(refusal) => refusal,
                }
            }
        },
    )
    .unwrap();
    let mut socket = tungstenite(&binding, "/actor");
    for text in ["one", "two", "three"] {
        socket.send(Message::text(text)).unwrap();
        assert_eq!(socket.read().unwrap(), Message::text(text));
    }
    socket
        .close(Some(proscenium_http::CloseFrame {
            code: WebSocketCloseCode::Normal,
            reason: "bye".into(),
        }))
        .unwrap();
    // The close handshake completes: the server's reply, then the end.
    loop {
        match socket.read() {
            Ok(Message::Close(_)) => {}
            Err(tungstenite::Error::ConnectionClosed) => break,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(closed.recv_timeout(PATIENCE).unwrap(), Some(1000));
    system.terminate().wait();
}

/// `wss://`: an HTTPS binding's HTTP/1.1 connections upgrade as plain
/// ones do (`--features websocket,tls`; .ci/run runs it).
#[cfg(feature = "tls")]
#[test]
fn a_websocket_over_tls_echoes_and_is_terminated_with_1001() {
    use rustls::pki_types::{CertificateDer, ServerName};
    let pki = support::pki::pki();
    let system = system();
    let settings = proscenium_http::ServerSettings::default()
        .tls(proscenium_http::Tls::from_pem(pki.cert.as_bytes(), pki.key.as_bytes()).unwrap());
    let binding = Http::bind_with(
        &system,
        "127.0.0.1:0".parse().unwrap(),
        settings,
        |request: Request<Body>| async move {
            match WebSocketUpgrade::from_request(&request) {
                Ok(upgrade) => upgrade.on_upgrade(echo),
                Err(refusal) => refusal,
            }
        },
    )
    .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    let ca = rustls::pki_types::pem::PemObject::from_pem_slice(pki.ca.as_bytes()).unwrap();
    roots.add(CertificateDer::into_owned(ca)).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = ServerName::try_from("localhost").unwrap();
    let connection = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(binding.local_addr()).unwrap();
    tcp.set_read_timeout(Some(PATIENCE)).unwrap();
    let stream = rustls::StreamOwned::new(connection, tcp);
    let url = format!("wss://localhost:{}/echo", binding.local_addr().port());
    let (mut socket, response) = tungstenite::client(url, stream).unwrap();
    assert_eq!(response.status(), 101);
    socket.send(Message::text("over tls")).unwrap();
    assert_eq!(socket.read().unwrap(), Message::text("over tls"));
    let termination = binding.terminate(Duration::from_secs(10));
    match socket.read().unwrap() {
        Message::Close(Some(frame)) => assert_eq!(frame.code, WebSocketCloseCode::Away),
        other => panic!("{other:?}"),
    }
    let _ = socket.flush();
    let terminated = termination.wait().unwrap();
    assert_eq!(terminated.websockets, 1);
    assert_eq!(terminated.forced_connections, 0);
    system.terminate().wait();
}

/// Frames a client must not send: text that is not UTF-8 is closed with
/// 1007, an unmasked frame with 1002 (RFC 6455 §5.1).
#[test]
fn invalid_utf_8_is_closed_with_1007_and_an_unmasked_frame_with_1002() {
    use std::io::Write;
    let system = system();
    let binding = serve(&system, Arc::default());
    for (frame, code) in [
        // FIN + text, masked (a zero mask), 2 bytes that are not UTF-8.
        (&[0x81, 0x82, 0, 0, 0, 0, 0xff, 0xfe][..], 1007),
        // FIN + text, not masked.
        (&[0x81, 0x02, b'h', b'i'][..], 1002),
    ] {
        let mut socket = tungstenite(&binding, "/echo");
        let stream = match socket.get_mut() {
            tungstenite::stream::MaybeTlsStream::Plain(stream) => stream,
            _ => unreachable!(),
        };
        stream.write_all(frame).unwrap();
        let (first, payload) = raw_frame(stream);
        assert_eq!(first, 0x88, "a Close");
        assert_eq!(u16::from_be_bytes([payload[0], payload[1]]), code);
    }
    system.terminate().wait();
}
