//! A NATS client written by hand over TCP: the attacker of the security
//! tests, who can publish any header block (a status line, one that does
//! not parse), which no client library lets one write.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use async_nats::rustls;

use super::GUARD;

/// A message as the server delivered it to [`RawNats`].
#[derive(Debug, Clone)]
pub struct RawMsg {
    pub subject: String,
    pub reply: Option<String>,
    pub headers: Option<String>,
    pub payload: Vec<u8>,
}

/// The connection: plain TCP, or TLS over it.
trait Stream: Read + Write + Send {
    fn set_timeout(&self, timeout: Duration);
}

impl Stream for TcpStream {
    fn set_timeout(&self, timeout: Duration) {
        self.set_read_timeout(Some(timeout)).expect("timeout");
    }
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

impl Stream for Tls {
    fn set_timeout(&self, timeout: Duration) {
        self.sock.set_read_timeout(Some(timeout)).expect("timeout");
    }
}

pub struct RawNats {
    io: BufReader<Box<dyn Stream>>,
    next_sid: u64,
    /// Messages read while waiting for something else.
    held: std::collections::VecDeque<RawMsg>,
    /// The server's `-ERR` lines (a permissions violation, say).
    pub errors: Vec<String>,
}

impl RawNats {
    /// Connects to `port` on loopback (with `connect` as the CONNECT
    /// options' extra fields, such as `"user":"u","pass":"p"`), and waits
    /// for the server's PONG.
    pub fn connect(port: u16, extra: &str) -> RawNats {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("raw connect");
        stream.set_read_timeout(Some(GUARD)).expect("timeout");
        let mut raw = RawNats::over(Box::new(stream));
        let info = raw.line();
        assert!(info.starts_with("INFO "), "{info}");
        raw.hello(extra);
        raw
    }

    /// Connects as a node of the example configuration would: TLS with a
    /// client certificate (trusting `ca`), then the nkey `seed` signing
    /// the server's nonce. A node's stolen credentials, in a client that
    /// writes any header block.
    pub fn connect_tls_nkey(
        port: u16,
        ca: &std::path::Path,
        cert: &std::path::Path,
        key: &std::path::Path,
        seed: &str,
    ) -> RawNats {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
        let tcp = TcpStream::connect(("127.0.0.1", port)).expect("raw connect");
        tcp.set_read_timeout(Some(GUARD)).expect("timeout");
        // INFO comes in the clear, before the handshake.
        let mut info = Vec::new();
        let mut byte = [0u8; 1];
        while !info.ends_with(b"\r\n") {
            (&tcp).read_exact(&mut byte).expect("INFO");
            info.push(byte[0]);
        }
        let info = String::from_utf8(info).expect("INFO is text");
        let nonce = info
            .split("\"nonce\":\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("a nonce in INFO");
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(ca).expect("CA") {
            roots.add(c.expect("a CA certificate")).expect("add CA");
        }
        let chain: Vec<_> = CertificateDer::pem_file_iter(cert)
            .expect("certificate")
            .map(|c| c.expect("a certificate"))
            .collect();
        let key = PrivateKeyDer::from_pem_file(key).expect("key");
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .expect("client certificate");
        let name = ServerName::try_from("127.0.0.1").expect("a server name");
        let conn =
            rustls::ClientConnection::new(std::sync::Arc::new(config), name).expect("TLS client");
        let tls: Tls = rustls::StreamOwned::new(conn, tcp);
        let mut raw = RawNats::over(Box::new(tls));
        let kp = nkeys::KeyPair::from_seed(seed).expect("an nkey seed");
        let sig = kp.sign(nonce.as_bytes()).expect("signed");
        use base64::Engine;
        let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sig);
        raw.hello(&format!(
            "\"nkey\":\"{}\",\"sig\":\"{sig}\",\"tls_required\":true",
            kp.public_key()
        ));
        raw
    }

    fn over(stream: Box<dyn Stream>) -> RawNats {
        RawNats {
            io: BufReader::new(stream),
            next_sid: 1,
            held: Default::default(),
            errors: Vec::new(),
        }
    }

    /// CONNECT (with `extra` fields) and a PING answered.
    fn hello(&mut self, extra: &str) {
        let raw = self;
        let sep = if extra.is_empty() { "" } else { "," };
        raw.send(
            format!(
                "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":true,\
                 \"no_responders\":true,\"protocol\":1,\"name\":\"attacker\"{sep}{extra}}}\r\n"
            )
            .as_bytes(),
        );
        raw.flush();
    }

    fn send(&mut self, bytes: &[u8]) {
        let io = self.io.get_mut();
        io.write_all(bytes).expect("raw write");
        io.flush().expect("raw flush");
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.io.read_line(&mut line).expect("raw read");
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
            self.errors.push(line);
            return Op::Other;
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
        self.io.read_exact(&mut body).expect("a message body");
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
        self.io.get_ref().set_timeout(within);
        let mut buf = [0u8; 4096];
        loop {
            match self.io.read(&mut buf) {
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
