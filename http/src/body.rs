//! [`Body`]: the bytes of a request or a response.

use std::fmt;

/// The body of a request or a response: owned bytes, read whole before the
/// handler runs and written whole after it returns.
///
/// Streaming bodies (a body read while the handler runs, a response
/// produced piece by piece, chunked responses) come later in issue 15; the
/// accessors here stay.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Body {
    bytes: Vec<u8>,
}

impl Body {
    /// An empty body.
    pub fn empty() -> Body {
        Body::default()
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The bytes, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Body")
            .field("len", &self.bytes.len())
            .finish()
    }
}

impl From<Vec<u8>> for Body {
    fn from(bytes: Vec<u8>) -> Body {
        Body { bytes }
    }
}

impl From<&[u8]> for Body {
    fn from(bytes: &[u8]) -> Body {
        Body {
            bytes: bytes.to_vec(),
        }
    }
}

impl From<String> for Body {
    fn from(text: String) -> Body {
        Body {
            bytes: text.into_bytes(),
        }
    }
}

impl From<&str> for Body {
    fn from(text: &str) -> Body {
        Body {
            bytes: text.as_bytes().to_vec(),
        }
    }
}
