//! The errors of joining a cluster and starting a region.

/// Joining the cluster or starting a region failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// A setting is invalid (the message names it).
    #[error("invalid cluster settings: {0}")]
    Settings(String),
    /// An entity type's number of shards in the bucket differs from this
    /// node's: every entity would map to another shard here. Change the
    /// setting back, or start the whole cluster anew with an empty bucket.
    #[error(
        "entity type `{entity_type}` has {stored} shards in the cluster, this node is configured \
         with {configured}"
    )]
    ShardCountMismatch {
        /// The entity type.
        entity_type: String,
        /// This node's setting.
        configured: u32,
        /// The cluster's (the bucket's).
        stored: u32,
    },
    /// A name (an entity type, or the cluster's for the bucket) cannot be
    /// used: 1 to 64 bytes of letters, digits, `-` and `_`.
    #[error("`{0}` cannot be a name here (1 to 64 bytes of ASCII letters, digits, '-' and '_')")]
    BadName(String),
    /// This node already runs a region of that entity type.
    #[error("a region of `{0}` already runs on this node")]
    RegionExists(String),
    /// JetStream (the key-value bucket) failed or is not enabled on the
    /// server (`nats-server -js`, 2.11 or later).
    #[error("JetStream: {0}")]
    JetStream(String),
    /// The remote layer refused (exposing the region).
    #[error(transparent)]
    Remote(#[from] proscenium_remote::RemoteError),
    /// A region has this many reliable messages unconfirmed (its
    /// `buffer-size`): the message was not sent. Try again once some are
    /// confirmed.
    #[error("{limit} reliable messages are unconfirmed: not sent")]
    ReliableFull {
        /// The region's limit.
        limit: usize,
    },
    /// The node has left the cluster.
    #[error("the node has left the cluster")]
    Left,
}

/// Checks a name for the bucket's keys and the remote's subjects.
pub(crate) fn check_name(name: &str) -> Result<(), ClusterError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(ClusterError::BadName(name.to_owned()))
    }
}
