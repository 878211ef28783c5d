//! What the wire tests share: a system, and a raw HTTP/1.1 client that
//! reads responses byte-exactly (Content-Length, chunked, or to EOF).
#![allow(dead_code)] // each test file uses a part

use proscenium::ActorSystem;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub(crate) fn system() -> ActorSystem {
    ActorSystem::builder()
        .workers(2)
        .pin_workers(false)
        .build()
        .expect("system")
}

/// A response head: status and headers (names lowercase).
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
}

impl Head {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// How a chunked body ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Chunked {
    /// With the last chunk: the whole body.
    Complete(Vec<u8>),
    /// EOF (or a reset) before the last chunk: the bytes so far.
    Truncated(Vec<u8>),
}

pub(crate) struct Client {
    pub(crate) reader: BufReader<TcpStream>,
}

impl Client {
    pub(crate) fn connect(addr: SocketAddr) -> Client {
        Client::from(TcpStream::connect(addr).expect("connect"))
    }

    pub(crate) fn stream(&self) -> &TcpStream {
        self.reader.get_ref()
    }

    pub(crate) fn send(&mut self, bytes: &[u8]) {
        self.reader.get_mut().write_all(bytes).expect("write");
    }

    /// The next response head; `None` at EOF before any byte of it.
    pub(crate) fn head(&mut self) -> Option<Head> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        assert!(line.starts_with("HTTP/1.1 "), "status line: {line:?}");
        let status = line[9..12].parse().expect("status");
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line).expect("header line");
            assert!(line.ends_with("\r\n"), "header line: {line:?}");
            let line = line.trim_end_matches("\r\n");
            if line.is_empty() {
                break;
            }
            let (n, v) = line.split_once(':').expect("a colon");
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
        Some(Head { status, headers })
    }

    pub(crate) fn body_len(&mut self, len: usize) -> Vec<u8> {
        let mut body = vec![0u8; len];
        self.reader.read_exact(&mut body).expect("body");
        body
    }

    /// A chunked body, decoded.
    pub(crate) fn chunked(&mut self) -> Chunked {
        let mut body = Vec::new();
        loop {
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) | Err(_) => return Chunked::Truncated(body),
                Ok(_) => {}
            }
            if !line.ends_with("\r\n") {
                return Chunked::Truncated(body);
            }
            let size = usize::from_str_radix(line.trim_end(), 16).expect("chunk size");
            let mut data = vec![0u8; size + 2];
            if self.reader.read_exact(&mut data).is_err() {
                return Chunked::Truncated(body);
            }
            assert_eq!(&data[size..], b"\r\n", "chunk end");
            if size == 0 {
                return Chunked::Complete(body);
            }
            body.extend_from_slice(&data[..size]);
        }
    }

    /// A response: head and body (by its framing; HEAD responses must be
    /// read with `head`).
    pub(crate) fn response(&mut self) -> (Head, Vec<u8>) {
        let head = self.head().expect("a response");
        let body = if head.header("transfer-encoding") == Some("chunked") {
            match self.chunked() {
                Chunked::Complete(body) => body,
                Chunked::Truncated(body) => panic!("truncated chunked body: {} bytes", body.len()),
            }
        } else if let Some(len) = head.header("content-length") {
            self.body_len(len.parse().expect("length"))
        } else {
            Vec::new()
        };
        (head, body)
    }

    /// Everything until EOF (or a reset).
    /// What comes until the server closes the connection (EOF, or a
    /// reset); fails the test if it is still open after the read timeout
    /// (see [`From<TcpStream>`]).
    pub(crate) fn rest(&mut self) -> Vec<u8> {
        let mut rest = Vec::new();
        match self.reader.read_to_end(&mut rest) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
                ) => {}
            Err(e) => panic!(
                "the connection was not closed ({e}); got {:?}",
                String::from_utf8_lossy(&rest)
            ),
        }
        rest
    }
}

/// How long a read waits before the test fails (a safety net: a test
/// waiting for bytes that never come fails instead of hanging).
const READ_PATIENCE: Duration = Duration::from_secs(30);

/// Sets a read timeout ([`READ_PATIENCE`]) on a stream that has none.
impl From<TcpStream> for Client {
    fn from(stream: TcpStream) -> Client {
        if stream.read_timeout().expect("read timeout").is_none() {
            stream
                .set_read_timeout(Some(READ_PATIENCE))
                .expect("set a read timeout");
        }
        Client {
            reader: BufReader::new(stream),
        }
    }
}
