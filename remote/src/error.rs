//! The errors of connecting, sending and asking.

use std::time::Duration;

use proscenium_shutdown::ConfigError;

/// [`Remote::connect`](crate::Remote::connect) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// A setting is invalid (the error names the key).
    #[error(transparent)]
    Settings(#[from] ConfigError),
    /// No NATS server could be reached, or it refused the connection.
    #[error("could not connect to NATS ({servers}): {message}")]
    Nats {
        /// The servers tried (without the credentials of their URLs).
        servers: String,
        /// What the client said (any secret of the settings scrubbed).
        message: String,
    },
    /// The server refused this node's credentials (or wants some and got
    /// none): NATS's "authorization violation".
    #[error("NATS refused the credentials ({servers}): {message}")]
    Unauthorized {
        /// The servers tried (without the credentials of their URLs).
        servers: String,
        /// What the client said (any secret of the settings scrubbed).
        message: String,
    },
    /// TLS failed: a certificate or key could not be loaded, the server's
    /// certificate was not trusted, or TLS was required and not offered.
    #[error("TLS to NATS failed ({servers}): {message}")]
    Tls {
        /// The servers tried (without the credentials of their URLs).
        servers: String,
        /// What the client said.
        message: String,
    },
    /// The remote's tokio runtime or its system actor could not start.
    #[error("could not start the remote: {0}")]
    Start(String),
}

/// Sending (a tell, the request of an ask, a reply) or exposing failed on
/// this node; nothing was sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// A name must be one subject token: not empty, no `.`, `*`, `>`,
    /// whitespace or control characters.
    #[error(
        "`{0}` cannot be a name (not empty, no '.', '*', '>', whitespace or control characters)"
    )]
    BadName(String),
    /// A name is longer than [`MAX_NAME_LEN`](crate::MAX_NAME_LEN) bytes:
    /// refused before anything reaches the server (which closes a
    /// connection whose protocol line is over its `max_control_line`).
    #[error("a name of {len} bytes is over the limit of {max} bytes")]
    NameTooLong {
        /// The name's length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// This node already exposes an actor under that name.
    #[error("`{0}` is already exposed on this node")]
    AlreadyExposed(String),
    /// Another node exposes an actor under that name (with `expose`; a
    /// name shared on purpose is exposed with `expose_group`).
    #[error("`{name}` is already exposed by {}", node.as_deref().map_or_else(|| "a node that does not answer".to_owned(), |n| format!("node `{n}`")))]
    ExposedElsewhere {
        /// The name.
        name: String,
        /// The node that answered for it (`None`: one held the name and
        /// did not answer within the connect timeout).
        node: Option<String>,
    },
    /// The message could not be serialized.
    #[error("could not encode the message: {0}")]
    Encode(String),
    /// The encoded message is larger than the server's `max_payload`.
    #[error("the message is {size} bytes, over the server's max payload of {max} bytes")]
    PayloadTooLarge {
        /// The encoded size.
        size: usize,
        /// The server's limit.
        max: usize,
    },
    /// The node's outbound queue holds `outbound-capacity` bytes already:
    /// its connection is down, or slower than its senders. Nothing was
    /// queued; try later (or slower).
    #[error("the outbound queue is full ({capacity} bytes, outbound-capacity): the connection is down or slower than the senders")]
    OutboundFull {
        /// The capacity, in bytes.
        capacity: usize,
    },
    /// The remote has left the cluster (coordinated shutdown) or its
    /// connection is closed.
    #[error("the remote is closed")]
    Closed,
    /// The node is leaving the cluster: the coordinated shutdown's
    /// cluster-leave phase is draining its exposed names, and nothing new
    /// is exposed from then on.
    #[error("the node is leaving the cluster (its exposed names are draining)")]
    Leaving,
    /// The NATS client failed (subscribing).
    #[error("NATS: {0}")]
    Nats(String),
}

/// A remote ask failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteAskError {
    /// Nobody serves the name: no node exposes it (NATS no-responders).
    /// Reported at once, not after the timeout.
    #[error("no node serves `{0}`")]
    NoResponders(String),
    /// No reply within the timeout.
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    /// The request was not sent.
    #[error(transparent)]
    Send(RemoteError),
    /// The reply came but could not be decoded as the expected type.
    #[error("the reply could not be decoded: {0}")]
    Decode(String),
    /// The responding node could not deliver the request or send the reply
    /// (the request could not be decoded there, or the reply could not be
    /// encoded); the reason is the responder's.
    #[error("the responder failed: {0}")]
    Remote(String),
    /// The request reached the actor, which dropped the reply without
    /// sending it (or terminated before handling it), or this remote
    /// closed while waiting.
    #[error("the request was dropped without a reply")]
    NoReply,
}
