//! The two fixes of the vendored NATS client (third_party/async-nats,
//! PATCH.md there), tested on `async_nats` itself against a fake NATS server
//! written here over std's TCP on 127.0.0.1 (no nats-server needed), which
//! sends the frames a real server would relay from any publisher:
//!
//! - A: an HMSG whose header block does not parse is delivered as a marked
//!   message (no headers, no status, a description "malformed header block:
//!   <reason>", payload intact) instead of disconnecting the client;
//! - B: `ConnectOptions::subscription_capacity_bytes` bounds the bytes
//!   waiting in a subscription's buffer; what would pass it is dropped as a
//!   slow consumer's message is.
//!
//! Both fail on the published async-nats 0.51.0: A with a disconnection
//! (the marked message never arrives), B does not compile there (the option
//! does not exist) and, without the option, every message is queued.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use async_nats::{Client, ConnectOptions, Event, Message, Subscriber};
use futures_util::StreamExt;
use tokio::runtime::Runtime;

/// A guard against hangs, never a wait for correctness.
const GUARD: Duration = Duration::from_secs(10);

/// The description prefix that marks a message whose header block did not
/// parse (PATCH.md, A).
const MARK: &str = "malformed header block: ";

/// A NATS server for one client connection: it sends INFO, answers PING,
/// reports the SUB lines it reads and the PONGs that answer its own PINGs,
/// and writes whatever frames a test gives it.
struct FakeServer {
    url: String,
    accepted: mpsc::Receiver<Connection>,
}

/// The fake server's side of the client's connection.
struct Connection {
    /// Shared with the reader thread, which writes PONGs: one frame is
    /// written whole under the lock.
    writer: Arc<Mutex<TcpStream>>,
    /// (subject, sid) of each SUB line.
    subs: mpsc::Receiver<(String, u64)>,
    /// One per PONG the client sent (the answers to [`Self::barrier`]).
    pongs: mpsc::Receiver<()>,
}

impl FakeServer {
    fn start() -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let url = format!(
            "nats://{}",
            listener.local_addr().expect("the listener's address")
        );
        let (accepted_tx, accepted) = mpsc::channel();
        thread::spawn(move || {
            // One connection: a client that reconnects finds nobody (the
            // listener is dropped with this thread), and the test sees its
            // `Event::Disconnected`.
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let _ = accepted_tx.send(Connection::serve(stream));
        });
        FakeServer { url, accepted }
    }

    /// The client's connection, once it is made.
    fn accepted(&self) -> Connection {
        self.accepted
            .recv_timeout(GUARD)
            .expect("the client connects to the fake server")
    }
}

impl Connection {
    fn serve(stream: TcpStream) -> Connection {
        let writer = Arc::new(Mutex::new(stream.try_clone().expect("clone the stream")));
        // What async-nats reads of INFO: a server without TLS or auth that
        // speaks protocol 1 with headers, and a max_payload above the
        // tests' messages.
        let info = "INFO {\"server_id\":\"FAKE\",\"server_name\":\"fake\",\
                    \"version\":\"2.10.0\",\"proto\":1,\"go\":\"go1.22\",\
                    \"host\":\"127.0.0.1\",\"port\":4222,\"headers\":true,\
                    \"max_payload\":1048576,\"client_id\":1}\r\n";
        write_frame(&writer, info.as_bytes());
        let (subs_tx, subs) = mpsc::channel();
        let (pongs_tx, pongs) = mpsc::channel();
        let pong_writer = writer.clone();
        thread::spawn(move || {
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                let mut words = line.split_whitespace();
                match words.next() {
                    Some("PING") => write_frame(&pong_writer, b"PONG\r\n"),
                    Some("PONG") => {
                        let _ = pongs_tx.send(());
                    }
                    // SUB <subject> [queue group] <sid>
                    Some("SUB") => {
                        let args: Vec<&str> = words.collect();
                        if let (Some(subject), Some(sid)) = (args.first(), args.last()) {
                            let sid = sid.parse().expect("a numeric sid");
                            let _ = subs_tx.send((subject.to_string(), sid));
                        }
                    }
                    // CONNECT, UNSUB: nothing to answer (verbose is off).
                    // The tests' client publishes nothing.
                    _ => {}
                }
            }
        });
        Connection {
            writer,
            subs,
            pongs,
        }
    }

    /// The sid of the next SUB, which must be for `subject`.
    fn sid_of(&self, subject: &str) -> u64 {
        let (got, sid) = self.subs.recv_timeout(GUARD).expect("the client sends SUB");
        assert_eq!(got, subject, "the SUB's subject");
        sid
    }

    fn send(&self, frame: &[u8]) {
        write_frame(&self.writer, frame);
    }

    /// A PING, answered once the client has handled every frame sent
    /// before it (its connection handler reads and handles in order).
    fn barrier(&self) {
        self.send(b"PING\r\n");
        self.pongs
            .recv_timeout(GUARD)
            .expect("the client answers PING with PONG");
    }
}

fn write_frame(writer: &Mutex<TcpStream>, frame: &[u8]) {
    let mut writer = writer.lock().expect("the writer's lock");
    writer.write_all(frame).expect("write to the client");
}

/// `MSG <subject> <sid> <#bytes>` and its payload.
fn msg(subject: &str, sid: u64, payload: &[u8]) -> Vec<u8> {
    let mut frame = format!("MSG {subject} {sid} {}\r\n", payload.len()).into_bytes();
    frame.extend_from_slice(payload);
    frame.extend_from_slice(b"\r\n");
    frame
}

/// `HMSG <subject> <sid> [reply] <#header bytes> <#total bytes>`, the header
/// block as given, and the payload.
fn hmsg(subject: &str, sid: u64, reply: Option<&str>, header: &[u8], payload: &[u8]) -> Vec<u8> {
    let reply = reply.map(|r| format!(" {r}")).unwrap_or_default();
    let mut frame = format!(
        "HMSG {subject} {sid}{reply} {} {}\r\n",
        header.len(),
        header.len() + payload.len()
    )
    .into_bytes();
    frame.extend_from_slice(header);
    frame.extend_from_slice(payload);
    frame.extend_from_slice(b"\r\n");
    frame
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// The client, connected to `server` with `options`, and the events its
/// callback received.
fn connect(
    rt: &Runtime,
    server: &FakeServer,
    options: ConnectOptions,
) -> (Client, Arc<Mutex<Vec<Event>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let options = options.event_callback(move |event| {
        let seen = seen.clone();
        async move {
            seen.lock().expect("the events' lock").push(event);
        }
    });
    let client = rt
        .block_on(options.connect(server.url.as_str()))
        .expect("connect to the fake server");
    (client, events)
}

/// The subscriber's next message, which must come (else the panic shows
/// the client's events: a disconnection, say).
fn next(rt: &Runtime, subscriber: &mut Subscriber, events: &Mutex<Vec<Event>>) -> Message {
    match rt.block_on(async { tokio::time::timeout(GUARD, subscriber.next()).await }) {
        Ok(Some(message)) => message,
        Ok(None) => panic!(
            "the subscription ended; events: {:?}",
            events.lock().expect("the events' lock")
        ),
        Err(_) => panic!(
            "no message within {GUARD:?}; events: {:?}",
            events.lock().expect("the events' lock")
        ),
    }
}

/// Every message already in the subscriber's buffer (after a
/// [`Connection::barrier`], what the client took is there).
fn drain(rt: &Runtime, subscriber: &mut Subscriber) -> Vec<Message> {
    let mut messages = Vec::new();
    // The timer is made inside the runtime (`block_on`'s future).
    while let Ok(Some(message)) = rt.block_on(async {
        tokio::time::timeout(Duration::from_millis(200), subscriber.next()).await
    }) {
        messages.push(message);
    }
    messages
}

fn disconnections(events: &Mutex<Vec<Event>>) -> usize {
    events
        .lock()
        .expect("the events' lock")
        .iter()
        .filter(|e| **e == Event::Disconnected)
        .count()
}

/// Waits (up to the guard) until `n` slow-consumer events for `sid` have come
/// through the callback (delivered by a task of their own), and returns
/// their count.
fn slow_consumer_events(events: &Mutex<Vec<Event>>, sid: u64, n: usize) -> usize {
    let deadline = Instant::now() + GUARD;
    loop {
        let count = events
            .lock()
            .expect("the events' lock")
            .iter()
            .filter(|e| **e == Event::SlowConsumer(sid))
            .count();
        if count >= n || Instant::now() > deadline {
            return count;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Header blocks that do not parse, any publisher's to write (`HPUB` relays
/// them as they are), with the reason the marked message carries.
const MALFORMED: &[(&str, &[u8], &str)] = &[
    (
        "a status that does not parse",
        b"NATS/1.0 abc\r\n\r\n",
        "could not parse status parameter",
    ),
    (
        // `HPUB subj 12 12\r\nNATS/1.0 abc\r\n`: a 12-byte block, no CRLF.
        "a 12-byte block with a bad status and no line end",
        b"NATS/1.0 abc",
        "could not parse status parameter",
    ),
    (
        "a header line without a colon",
        b"NATS/1.0\r\nNo-Colon-Here\r\n\r\n",
        "header line without a colon",
    ),
    (
        "an invalid header name (a space in it)",
        b"NATS/1.0\r\nBad Name: value\r\n\r\n",
        "invalid header name",
    ),
    (
        "an invalid header name (not ASCII)",
        "NATS/1.0\r\nN\u{e4}me: value\r\n\r\n".as_bytes(),
        "invalid header name",
    ),
    (
        "a version line that is not NATS/1.0",
        b"NATS/2.0\r\nName: value\r\n\r\n",
        "header version line does not begin with `NATS/1.0`",
    ),
    (
        "an HTTP status line",
        b"HTTP/1.1 200 OK\r\n\r\n",
        "header version line does not begin with `NATS/1.0`",
    ),
    (
        "headers that are not UTF-8",
        b"NATS/1.0\r\nName: \xff\xfe\r\n\r\n",
        "header isn't valid utf-8",
    ),
    ("an empty header block", b"", "no header version line found"),
];

/// A: each malformed header block reaches the subscriber as a marked
/// message, payload, subject, reply and length intact; the good message sent
/// after it arrives too; the client never disconnects. A well-formed HMSG
/// still parses as before.
#[test]
fn malformed_header_block_is_delivered_marked_without_disconnecting() {
    let rt = runtime();
    let server = FakeServer::start();
    let (client, events) = connect(&rt, &server, ConnectOptions::new());
    let conn = server.accepted();
    let mut subscriber = rt.block_on(client.subscribe("subj")).expect("subscribe");
    let sid = conn.sid_of("subj");

    // Well-formed: headers and a status parse as upstream parses them.
    conn.send(&hmsg(
        "subj",
        sid,
        None,
        b"NATS/1.0 503\r\nName: value\r\n\r\n",
        b"fine",
    ));
    let good = next(&rt, &mut subscriber, &events);
    assert_eq!(good.status.map(|s| s.as_u16()), Some(503));
    assert_eq!(good.description, None);
    let headers = good.headers.expect("the well-formed block's headers");
    assert_eq!(headers.get("Name").map(|v| v.as_str()), Some("value"));
    assert_eq!(&good.payload[..], b"fine");

    for (i, (what, header, reason)) in MALFORMED.iter().enumerate() {
        let payload = format!("payload {i}");
        let reply = (i % 2 == 0).then_some("reply.to");
        conn.send(&hmsg("subj", sid, reply, header, payload.as_bytes()));
        let after = format!("good {i}");
        conn.send(&msg("subj", sid, after.as_bytes()));

        let marked = next(&rt, &mut subscriber, &events);
        assert_eq!(
            marked.description.as_deref(),
            Some(format!("{MARK}{reason}").as_str()),
            "{what}: the mark and its reason"
        );
        assert_eq!(marked.status, None, "{what}: no status");
        assert!(marked.headers.is_none(), "{what}: no headers");
        assert_eq!(&marked.payload[..], payload.as_bytes(), "{what}: payload");
        assert_eq!(marked.subject.as_str(), "subj", "{what}: subject");
        assert_eq!(
            marked.reply.as_ref().map(|r| r.as_str()),
            reply,
            "{what}: reply"
        );
        assert_eq!(
            marked.length,
            "subj".len() + reply.map_or(0, str::len) + header.len() + payload.len(),
            "{what}: length (subject, reply, headers and payload)"
        );

        let good = next(&rt, &mut subscriber, &events);
        assert_eq!(
            &good.payload[..],
            after.as_bytes(),
            "{what}: the next message"
        );
        assert_eq!(good.description, None);
    }

    // Every frame handled (the PONG answers a PING sent after them), the
    // events' task given time: no disconnection, still connected.
    conn.barrier();
    rt.block_on(client.flush()).expect("flush");
    thread::sleep(Duration::from_millis(100));
    assert_eq!(disconnections(&events), 0, "events: {:?}", events.lock());
    assert_eq!(
        client.connection_state(),
        async_nats::connection::State::Connected
    );
}

/// The bound of [`subscription_capacity_bytes`] in the test below.
const BOUND: usize = 64 * 1024;
/// The payload of each message of the flood.
const PAYLOAD: usize = 16 * 1024;
/// How many messages a flood sends.
const FLOOD: usize = 40;

/// One flood of `FLOOD` messages of `PAYLOAD` bytes at a subscriber that
/// does not read, then its buffer drained: fewer come than were sent, their
/// bytes within the bound, a slow-consumer event per dropped one.
fn flood(
    rt: &Runtime,
    conn: &Connection,
    events: &Mutex<Vec<Event>>,
    subscriber: &mut Subscriber,
    subject: &str,
    sid: u64,
    slow_before: usize,
) -> usize {
    let payload = vec![b'x'; PAYLOAD];
    for _ in 0..FLOOD {
        conn.send(&msg(subject, sid, &payload));
    }
    conn.barrier();
    let received = drain(rt, subscriber);
    let bytes: usize = received.iter().map(|m| m.length).sum();
    assert!(
        received.len() < FLOOD,
        "{subject}: {} of {FLOOD} messages of {PAYLOAD} bytes queued: the byte bound \
         ({BOUND}) did not hold",
        received.len()
    );
    assert!(
        !received.is_empty(),
        "{subject}: the first message is taken"
    );
    assert!(
        bytes <= BOUND,
        "{subject}: {bytes} bytes queued, above {BOUND}"
    );
    // Exactly as many as fit: each message counts its subject and payload.
    let one = subject.len() + PAYLOAD;
    assert_eq!(received.len(), BOUND / one, "{subject}: as many as fit");
    let dropped = FLOOD - received.len();
    assert_eq!(
        slow_consumer_events(events, sid, slow_before + dropped),
        slow_before + dropped,
        "{subject}: one slow-consumer event per dropped message"
    );
    received.len()
}

/// B: a subscriber that does not read holds at most the bound's bytes;
/// the rest is dropped with `Event::SlowConsumer`; once read, its buffer
/// takes new messages again. For `subscribe` and `queue_subscribe` both.
#[test]
fn subscription_capacity_bytes_bounds_queued_bytes() {
    let rt = runtime();
    let server = FakeServer::start();
    let (client, events) = connect(
        &rt,
        &server,
        ConnectOptions::new().subscription_capacity_bytes(BOUND),
    );
    let conn = server.accepted();
    let mut plain = rt.block_on(client.subscribe("big")).expect("subscribe");
    let plain_sid = conn.sid_of("big");
    let mut queue = rt
        .block_on(client.queue_subscribe("big.q", "workers".to_string()))
        .expect("queue_subscribe");
    let queue_sid = conn.sid_of("big.q");

    for (subscriber, subject, sid) in [
        (&mut plain, "big", plain_sid),
        (&mut queue, "big.q", queue_sid),
    ] {
        let first = flood(&rt, &conn, &events, subscriber, subject, sid, 0);
        // Read: the buffer is empty, and takes messages again, a small one
        // at a time and a flood's worth as before.
        conn.send(&msg(subject, sid, b"after"));
        conn.barrier();
        let after = next(&rt, subscriber, &events);
        assert_eq!(
            &after.payload[..],
            b"after",
            "{subject}: taken after reading"
        );
        let again = flood(&rt, &conn, &events, subscriber, subject, sid, FLOOD - first);
        assert_eq!(
            again, first,
            "{subject}: the whole bound again after reading"
        );
    }

    // A message larger than the bound still reaches an empty buffer.
    let huge = vec![b'y'; 2 * BOUND];
    conn.send(&msg("big", plain_sid, &huge));
    conn.barrier();
    let taken = next(&rt, &mut plain, &events);
    assert_eq!(
        taken.payload.len(),
        huge.len(),
        "one message into an empty buffer"
    );

    assert_eq!(disconnections(&events), 0, "events: {:?}", events.lock());
}
