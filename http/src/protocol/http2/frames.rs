//! Where HTTP/2 frames begin and end in the bytes a connection reads and
//! writes (RFC 9113 §4.1: a 9-octet header whose first three octets are
//! the payload's length, the fourth its type, the fifth its flags). hyper
//! says neither when the client accepts a response's bytes nor when a
//! request head is half in; the bytes that pass through its I/O
//! (`hyper_rt.rs`) do, and the connection task (`http2.rs`) times the
//! idle timeout and the header read timeout on what [`Frames`] finds in
//! them. Only the headers are read: a payload is skipped by its length.
//! HTTP/2's own (a part of `protocol/http2.rs`): it imports nothing.

/// DATA (RFC 9113 §6.1): the octets of a message's content, the only
/// frames flow control holds back.
const DATA: u8 = 0x0;
/// HEADERS (§6.2): opens a header block.
const HEADERS: u8 = 0x1;
/// PUSH_PROMISE (§6.6): opens a header block too (a client never sends
/// one; h2 refuses it, but its block is still a block until then).
const PUSH_PROMISE: u8 = 0x5;
/// CONTINUATION (§6.10): goes on with the open header block.
const CONTINUATION: u8 = 0x9;
/// END_HEADERS (§6.2, §6.10): the frame ends its header block.
const END_HEADERS: u8 = 0x4;

/// The octets of the client connection preface (§3.4) before its first
/// frame.
const CLIENT_PREFACE_LEN: usize = 24;

/// The frame boundaries of one direction of a connection, followed octet
/// by octet, in any split.
#[derive(Debug, Clone)]
pub(crate) struct Frames {
    /// Octets of the client preface still to pass (the client's direction
    /// only).
    skip: usize,
    /// The current frame's header, `have` octets of it so far.
    header: [u8; 9],
    have: usize,
    /// Payload octets of the current frame still to pass (its header is
    /// whole).
    left: usize,
    /// A header block is open: a HEADERS (or PUSH_PROMISE) frame's header
    /// has passed, and no frame with END_HEADERS has ended since.
    open_block: bool,
    /// Header blocks opened so far.
    blocks: u64,
}

impl Frames {
    /// The client's direction (what the server reads): the preface first.
    pub(crate) fn from_client() -> Frames {
        Frames {
            skip: CLIENT_PREFACE_LEN,
            ..Frames::from_server()
        }
    }

    /// The server's direction (what it writes): frames from the first
    /// octet.
    pub(crate) fn from_server() -> Frames {
        Frames {
            skip: 0,
            header: [0; 9],
            have: 0,
            left: 0,
            open_block: false,
            blocks: 0,
        }
    }

    /// Passes `bytes`, the next octets of this direction; returns whether
    /// any of them is a DATA frame's payload (content the peer's flow
    /// control let through).
    pub(crate) fn pass(&mut self, mut bytes: &[u8]) -> bool {
        let mut content = false;
        loop {
            if self.skip > 0 {
                let n = self.skip.min(bytes.len());
                self.skip -= n;
                bytes = &bytes[n..];
            }
            if self.have < self.header.len() {
                let n = (self.header.len() - self.have).min(bytes.len());
                self.header[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                bytes = &bytes[n..];
                if self.have < self.header.len() {
                    return content;
                }
                self.left = usize::from(self.header[0]) << 16
                    | usize::from(self.header[1]) << 8
                    | usize::from(self.header[2]);
                if matches!(self.header[3], HEADERS | PUSH_PROMISE) {
                    self.open_block = true;
                    self.blocks += 1;
                }
            }
            let n = self.left.min(bytes.len());
            self.left -= n;
            bytes = &bytes[n..];
            content |= n > 0 && self.header[3] == DATA;
            if self.left > 0 {
                return content;
            }
            // The frame ends.
            let ends_block = matches!(self.header[3], HEADERS | PUSH_PROMISE | CONTINUATION)
                && self.header[4] & END_HEADERS != 0;
            if ends_block {
                self.open_block = false;
            }
            self.have = 0;
            if bytes.is_empty() {
                return content;
            }
        }
    }

    /// The number of the header block open now (counting from 1), if one
    /// is: a request head is half in.
    pub(crate) fn open_block(&self) -> Option<u64> {
        self.open_block.then_some(self.blocks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn frame(kind: u8, flags: u8, payload: &[u8]) -> Vec<u8> {
        let len = u32::try_from(payload.len()).expect("small");
        let mut bytes = len.to_be_bytes()[1..].to_vec();
        bytes.extend_from_slice(&[kind, flags, 0, 0, 0, 1]);
        bytes.extend_from_slice(payload);
        bytes
    }

    /// The client's bytes: the preface, a SETTINGS frame, a header block
    /// in three frames, a DATA frame, an empty DATA frame, a header block
    /// in one.
    fn client_bytes() -> Vec<u8> {
        let mut bytes = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        bytes.extend(frame(0x4, 0, &[0, 4, 0, 0, 0, 0]));
        bytes.extend(frame(HEADERS, 0, b"ab"));
        bytes.extend(frame(CONTINUATION, 0, b""));
        bytes.extend(frame(CONTINUATION, END_HEADERS, b"c"));
        bytes.extend(frame(DATA, 0, b"body"));
        bytes.extend(frame(DATA, 1, b""));
        bytes.extend(frame(HEADERS, END_HEADERS | 1, b"d"));
        bytes
    }

    /// After each octet of `bytes` passed one at a time: the open block,
    /// and whether that octet was content.
    fn octet_by_octet(frames: &mut Frames, bytes: &[u8]) -> Vec<(Option<u64>, bool)> {
        bytes
            .iter()
            .map(|b| {
                let content = frames.pass(std::slice::from_ref(b));
                (frames.open_block(), content)
            })
            .collect()
    }

    #[test]
    fn header_blocks_and_content_are_found_octet_by_octet() {
        let bytes = client_bytes();
        let seen = octet_by_octet(&mut Frames::from_client(), &bytes);
        // The block opens with the HEADERS frame's ninth header octet and
        // closes with the last octet of the CONTINUATION with END_HEADERS.
        let headers_at = 24 + 15;
        assert_eq!(seen[headers_at + 7].0, None);
        assert_eq!(seen[headers_at + 8].0, Some(1));
        let end_at = headers_at + 11 + 9 + 9;
        assert_eq!(seen[end_at - 1].0, Some(1));
        assert_eq!(seen[end_at].0, None);
        // Content: the four octets of "body", nothing else.
        let content: Vec<usize> = (0..bytes.len()).filter(|&i| seen[i].1).collect();
        let data_at = end_at + 1 + 9;
        assert_eq!(content, (data_at..data_at + 4).collect::<Vec<_>>());
        // The last block opens and closes within its own frame.
        assert_eq!(seen.last().map(|s| s.0), Some(None));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Any split of the bytes finds what octet-by-octet passing finds
        /// at the end of each piece.
        #[test]
        fn any_split_finds_the_same(cuts in prop::collection::vec(0usize..100, 0..12)) {
            let bytes = client_bytes();
            let one_by_one = octet_by_octet(&mut Frames::from_client(), &bytes);
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % bytes.len()).collect();
            cuts.push(bytes.len());
            cuts.sort_unstable();
            let mut frames = Frames::from_client();
            let mut at = 0;
            for cut in cuts {
                let content = frames.pass(&bytes[at..cut]);
                if cut > at {
                    let expected = one_by_one[at..cut].iter().any(|s| s.1);
                    prop_assert_eq!(content, expected);
                    prop_assert_eq!(frames.open_block(), one_by_one[cut - 1].0);
                }
                at = cut;
            }
        }
    }
}
