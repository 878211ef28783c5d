//! A raw HTTP/2 client (RFC 9113): frames written and read by hand, for
//! the clients no real one plays (a window never opened, a header block
//! trickled, a protocol error, a socket held open after GOAWAY).

use super::{connect, PATIENCE};
use proscenium_http::ServerBinding;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;

/// Frame types (RFC 9113 §6).
pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

/// Flags.
pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// SETTINGS_INITIAL_WINDOW_SIZE (RFC 9113 §6.5.2).
pub const INITIAL_WINDOW_SIZE: u16 = 0x4;

/// One frame read.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
    pub payload: Vec<u8>,
}

impl Frame {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// A connection that opened with the preface and a SETTINGS frame.
pub struct RawH2 {
    pub stream: TcpStream,
}

impl RawH2 {
    /// Connects, and sends the preface with `settings` (identifier, value).
    pub fn open(binding: &ServerBinding, settings: &[(u16, u32)]) -> RawH2 {
        let stream = connect(binding);
        stream.set_nodelay(true).unwrap();
        let mut client = RawH2 { stream };
        client
            .stream
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .unwrap();
        let mut payload = Vec::new();
        for (id, value) in settings {
            payload.extend_from_slice(&id.to_be_bytes());
            payload.extend_from_slice(&value.to_be_bytes());
        }
        client.send(SETTINGS, 0, 0, &payload);
        client
    }

    /// Writes one frame; `false` if the server has closed the connection.
    pub fn try_send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) -> bool {
        let len = u32::try_from(payload.len()).unwrap();
        assert!(len < 1 << 24, "a frame's length has 24 bits");
        let mut frame = Vec::with_capacity(9 + payload.len());
        frame.extend_from_slice(&len.to_be_bytes()[1..]);
        frame.push(kind);
        frame.push(flags);
        frame.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
        frame.extend_from_slice(payload);
        self.stream.write_all(&frame).is_ok()
    }

    /// Writes one frame.
    pub fn send(&mut self, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        assert!(
            self.try_send(kind, flags, stream, payload),
            "the server closed the connection"
        );
    }

    /// The next frame; `None` at EOF (or a reset: the server closed).
    /// Fails the test if nothing comes within [`PATIENCE`].
    pub fn read(&mut self) -> Option<Frame> {
        let mut header = [0u8; 9];
        match self.stream.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("no frame and no close within {PATIENCE:?}")
            }
            Err(_) => return None,
        }
        let len =
            usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
        let mut payload = vec![0u8; len];
        match self.stream.read_exact(&mut payload) {
            Ok(()) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("a frame cut short for {PATIENCE:?}")
            }
            Err(_) => return None,
        }
        let stream = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
        Some(Frame {
            kind: header[3],
            flags: header[4],
            stream,
            payload,
        })
    }

    /// The next frame, as a live client would take it: the server's
    /// SETTINGS and PINGs are acknowledged on the way (and returned too).
    pub fn read_answering(&mut self) -> Option<Frame> {
        let frame = self.read()?;
        if frame.kind == SETTINGS && !frame.has(ACK) {
            let _ = self.try_send(SETTINGS, ACK, 0, &[]);
        }
        if frame.kind == PING && !frame.has(ACK) {
            let _ = self.try_send(PING, ACK, 0, &frame.payload);
        }
        Some(frame)
    }

    /// Frames until one that `wanted` takes (returned, with those read
    /// before it), answering as [`read_answering`](Self::read_answering)
    /// does; `None` (and what was read) if the connection closes first.
    pub fn until(&mut self, wanted: impl Fn(&Frame) -> bool) -> (Option<Frame>, Vec<Frame>) {
        let mut before = Vec::new();
        while let Some(frame) = self.read_answering() {
            if wanted(&frame) {
                return (Some(frame), before);
            }
            before.push(frame);
        }
        (None, before)
    }

    /// Every frame until the server closes the connection.
    pub fn until_closed(&mut self) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(frame) = self.read_answering() {
            frames.push(frame);
        }
        frames
    }
}

/// A request's header block (HPACK, RFC 7541: static-table names, literal
/// values without Huffman coding nor indexing): `:method`, `:scheme
/// http`, `:path`, `:authority x`, and `content-length` if given.
pub fn request_head(method: &str, path: &str, content_length: Option<usize>) -> Vec<u8> {
    let mut block = vec![match method {
        "GET" => 0x82,
        "POST" => 0x83,
        other => panic!("no static entry for {other}"),
    }];
    block.push(0x86); // :scheme http
    literal(&mut block, &[0x04], path.as_bytes()); // :path
    literal(&mut block, &[0x01], b"x"); // :authority
    if let Some(len) = content_length {
        literal(&mut block, &[0x0f, 0x0d], len.to_string().as_bytes()); // content-length (28)
    }
    block
}

/// A literal header field without indexing, its name a static-table
/// index (`name`, encoded), its value `value` (shorter than 127 octets).
fn literal(block: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    block.extend_from_slice(name);
    block.push(u8::try_from(value.len()).ok().filter(|&n| n < 127).unwrap());
    block.extend_from_slice(value);
}
