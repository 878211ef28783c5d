//! Errors of the enqueue operations. Each one hands the message back.

use std::fmt;

/// The mailbox is closed; the message is handed back (typically for dead
/// letters).
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<M>(pub M);

impl<M> SendError<M> {
    /// Takes the message back.
    pub fn into_inner(self) -> M {
        self.0
    }
}

impl<M> fmt::Debug for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError { .. }")
    }
}

impl<M> fmt::Display for SendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a closed mailbox")
    }
}

impl<M> std::error::Error for SendError<M> {}

/// Why a user message was not enqueued; the message is handed back.
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<M> {
    /// A bounded user lane is at capacity.
    Full(M),
    /// The mailbox is closed.
    Closed(M),
}

impl<M> TrySendError<M> {
    /// Takes the message back.
    pub fn into_inner(self) -> M {
        match self {
            TrySendError::Full(m) | TrySendError::Closed(m) => m,
        }
    }

    /// Whether the lane was full (rather than closed).
    pub fn is_full(&self) -> bool {
        matches!(self, TrySendError::Full(_))
    }

    /// Whether the mailbox was closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, TrySendError::Closed(_))
    }
}

impl<M> From<SendError<M>> for TrySendError<M> {
    fn from(e: SendError<M>) -> Self {
        TrySendError::Closed(e.0)
    }
}

impl<M> fmt::Debug for TrySendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Closed(_) => f.write_str("Closed(..)"),
        }
    }
}

impl<M> fmt::Display for TrySendError<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("sending on a full mailbox"),
            TrySendError::Closed(_) => f.write_str("sending on a closed mailbox"),
        }
    }
}

impl<M> std::error::Error for TrySendError<M> {}

/// A mailbox capacity of zero was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZeroCapacityError;

impl fmt::Display for ZeroCapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("mailbox capacity must be at least 1")
    }
}

impl std::error::Error for ZeroCapacityError {}
