//! A NATS client written by hand over TCP: the attacker of the security
//! tests, who can publish any header block (a status line, one that does
//! not parse), which no client library lets one write.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use super::GUARD;

/// A message as the server delivered it to [`RawNats`].
#[derive(Debug, Clone)]
pub struct RawMsg {
    pub subject: String,
    pub reply: Option<String>,
    pub headers: Option<String>,
    pub payload: Vec<u8>,
}

pub struct RawNats {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    next_sid: u64,
    /// Messages read while waiting for something else.
    held: std::collections::VecDeque<RawMsg>,
}

impl RawNats {
    /// Connects to `port` on loopback (with `connect` as the CONNECT
    /// options' extra fields, such as `"user":"u","pass":"p"`), and waits
    /// for the server's PONG.
    pub fn connect(port: u16, extra: &str) -> RawNats {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("raw connect");
        stream.set_read_timeout(Some(GUARD)).expect("timeout");
        let mut raw = RawNats {
            writer: stream.try_clone().expect("clone"),
            reader: BufReader::new(stream),
            next_sid: 1,
            held: Default::default(),
        };
        let info = raw.line();
        assert!(info.starts_with("INFO "), "{info}");
        let sep = if extra.is_empty() { "" } else { "," };
        raw.send(
            format!(
                "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":true,\
                 \"no_responders\":true,\"protocol\":1,\"name\":\"attacker\"{sep}{extra}}}\r\n"
            )
            .as_bytes(),
        );
        raw.flush();
        raw
    }

    fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).expect("raw write");
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("raw read");
        assert!(!line.is_empty(), "the server closed the raw connection");
        line.trim_end().to_owned()
    }

    /// Publishes `payload` on `subject` with `header_block` as written
    /// (an HPUB: `NATS/1.0 200\r\n\r\n`, say, or one that does not parse).
    pub fn hpub(&mut self, subject: &str, reply: Option<&str>, header_block: &str, payload: &[u8]) {
        let reply = reply.map(|r| format!(" {r}")).unwrap_or_default();
        let h = header_block.len();
        let mut frame = format!(
            "HPUB {subject}{reply} {h} {}\r\n{header_block}",
            h + payload.len()
        )
        .into_bytes();
        frame.extend_from_slice(payload);
        frame.extend_from_slice(b"\r\n");
        self.send(&frame);
    }

    /// Publishes without headers.
    pub fn publish(&mut self, subject: &str, payload: &[u8]) {
        self.publish_with_reply(subject, None, payload);
    }

    /// Publishes without headers, with a reply subject.
    pub fn publish_with_reply(&mut self, subject: &str, reply: Option<&str>, payload: &[u8]) {
        let reply = reply.map(|r| format!(" {r}")).unwrap_or_default();
        let mut frame = format!("PUB {subject}{reply} {}\r\n", payload.len()).into_bytes();
        frame.extend_from_slice(payload);
        frame.extend_from_slice(b"\r\n");
        self.send(&frame);
    }

    /// Subscribes; live on the server once [`flush`](Self::flush) returns.
    pub fn subscribe(&mut self, subject: &str) {
        let sid = self.next_sid;
        self.next_sid += 1;
        self.send(format!("SUB {subject} {sid}\r\n").as_bytes());
        self.flush();
    }

    /// A PING, and its PONG read: the server has handled everything sent
    /// before (messages that come meanwhile are kept for `next`).
    pub fn flush(&mut self) {
        self.send(b"PING\r\n");
        loop {
            match self.op() {
                Op::Pong => return,
                Op::Msg(m) => self.held.push_back(m),
                Op::Other => {}
            }
        }
    }

    /// Every message delivered so far: after a [`flush`](Self::flush),
    /// all the server had for this client when it answered the PING.
    pub fn take_delivered(&mut self) -> Vec<RawMsg> {
        self.held.drain(..).collect()
    }

    /// The next message delivered to this client's subscriptions.
    pub fn next(&mut self) -> RawMsg {
        if let Some(m) = self.held.pop_front() {
            return m;
        }
        loop {
            if let Op::Msg(m) = self.op() {
                return m;
            }
        }
    }

    fn op(&mut self) -> Op {
        let line = self.line();
        if line == "PONG" {
            return Op::Pong;
        }
        if line == "PING" {
            self.send(b"PONG\r\n");
            return Op::Other;
        }
        if line.starts_with("-ERR") {
            panic!("the server refused the raw client: {line}");
        }
        let (headers, args) = if let Some(rest) = line.strip_prefix("HMSG ") {
            (true, rest)
        } else if let Some(rest) = line.strip_prefix("MSG ") {
            (false, rest)
        } else {
            return Op::Other;
        };
        let args: Vec<&str> = args.split_whitespace().collect();
        let n = |s: &str| s.parse::<usize>().expect("a length");
        let (subject, reply, hlen, total) = match (headers, args.len()) {
            (false, 3) => (args[0], None, 0, n(args[2])),
            (false, 4) => (args[0], Some(args[2]), 0, n(args[3])),
            (true, 4) => (args[0], None, n(args[2]), n(args[3])),
            (true, 5) => (args[0], Some(args[2]), n(args[3]), n(args[4])),
            _ => panic!("a message line the raw client does not know: {line}"),
        };
        let mut body = vec![0; total + 2];
        self.reader.read_exact(&mut body).expect("a message body");
        body.truncate(total);
        let payload = body.split_off(hlen);
        Op::Msg(RawMsg {
            subject: subject.to_owned(),
            reply: reply.map(str::to_owned),
            headers: headers.then(|| String::from_utf8_lossy(&body).into_owned()),
            payload,
        })
    }

    /// Waits up to `within` for the server to close this connection
    /// (`true`) — a permissions violation, say.
    pub fn closed_within(&mut self, within: Duration) -> bool {
        self.reader
            .get_ref()
            .set_read_timeout(Some(within))
            .expect("timeout");
        let mut buf = [0u8; 4096];
        loop {
            match self.reader.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    }
}

enum Op {
    Pong,
    Msg(RawMsg),
    Other,
}
