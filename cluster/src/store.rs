//! The bucket: a JetStream key-value store `<cluster>-shards`, where
//! ownership lives and nowhere else. Every change is a compare-and-set
//! (`create`: only if absent; `update` and `delete` with the revision last
//! read), so no decision rests on a read that may be stale: a stale read
//! only makes a write fail. Keys:
//!
//! | key | value |
//! |---|---|
//! | `n.<node>` | [`NodeLease`]: a node's lease (its incarnation), renewed by compare-and-set |
//! | `cfg.<type>` | [`TypeConfig`]: an entity type's number of shards |
//! | `s.<type>.<shard>` | [`ShardRecord`]: the node (and incarnation) a shard is allocated to; absent: free |
//! | `e.<type>.<shard>.<hex id>` | an entity remembered (remember-entities): its id |
//!
//! Values are postcard. The revision of a shard's allocation is its
//! fencing token (a store of an entity's state can refuse an older one).

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::ClusterError;

/// A node's lease: which run of the node holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NodeLease {
    /// The run (random, never reused).
    pub(crate) inc: u128,
    /// The node is leaving (its shards are being handed off).
    pub(crate) leaving: bool,
}

/// An entity type's fixed parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct TypeConfig {
    pub(crate) shards: u32,
}

/// Where a shard is allocated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ShardRecord {
    pub(crate) node: String,
    pub(crate) inc: u128,
    /// Being handed off (rebalance): its owner stops its entities and
    /// then deletes the record; meanwhile nobody delivers to it.
    pub(crate) handoff: bool,
}

pub(crate) fn lease_key(node: &str) -> String {
    format!("n.{node}")
}

pub(crate) fn config_key(entity_type: &str) -> String {
    format!("cfg.{entity_type}")
}

pub(crate) fn shard_key(entity_type: &str, shard: u32) -> String {
    format!("s.{entity_type}.{shard}")
}

/// The key of a remembered entity: its id in hex (an id may hold any
/// character, a key only a few), the id itself in the value.
/// Reliable delivery's dedup state of a shard, left by its last owner on a
/// hand-off.
pub(crate) fn dedup_key(entity_type: &str, shard: u32) -> String {
    format!("d.{entity_type}.{shard}")
}

pub(crate) fn remembered_key(entity_type: &str, shard: u32, id: &str) -> String {
    let hex: String = id.bytes().map(|b| format!("{b:02x}")).collect();
    format!("e.{entity_type}.{shard}.{hex}")
}

/// (type, shard, id) of a remembered entity's key (less its `e.`) and
/// value; a deleted one's value is empty, so the id is read from the key.
pub(crate) fn parse_remembered(rest: &str, _value: &[u8]) -> Option<(String, u32, String)> {
    let mut parts = rest.splitn(3, '.');
    let ty = parts.next()?.to_owned();
    let shard = parts.next()?.parse().ok()?;
    let hex = parts.next()?;
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    Some((ty, shard, String::from_utf8(bytes?).ok()?))
}

pub(crate) fn encode<T: Serialize>(value: &T) -> Bytes {
    Bytes::from(postcard::to_stdvec(value).expect("a record always encodes"))
}

pub(crate) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    postcard::from_bytes(bytes).ok()
}

fn js(e: impl std::fmt::Display) -> ClusterError {
    ClusterError::JetStream(e.to_string())
}

/// Opens the cluster's bucket, creating it (with `replicas`) if it does
/// not exist: history 1 (only the current value of a key matters), file
/// storage, no time to live (expiry is judged by the nodes, on their own
/// clocks: a watcher gets no event when a key expires).
pub(crate) async fn open_bucket(
    client: async_nats::Client,
    cluster: &str,
    replicas: usize,
    timeout: Duration,
) -> Result<kv::Store, ClusterError> {
    let context = jetstream::new(client);
    let bucket = format!("{cluster}-shards");
    let open = async {
        match context.get_key_value(bucket.clone()).await {
            Ok(store) => Ok(store),
            Err(_) => context
                .create_key_value(kv::Config {
                    bucket: bucket.clone(),
                    description: "proscenium cluster sharding: leases and shard ownership".into(),
                    history: 1,
                    num_replicas: replicas,
                    storage: jetstream::stream::StorageType::File,
                    ..Default::default()
                })
                .await
                .map_err(js),
        }
    };
    match tokio::time::timeout(timeout, open).await {
        Ok(result) => result,
        Err(_) => Err(ClusterError::JetStream(format!(
            "bucket `{bucket}` not opened within {timeout:?} (is JetStream enabled: nats-server -js?)"
        ))),
    }
}

/// The entity type's number of shards in the bucket, written by the first
/// node that starts the type: `Err` if it differs from `shards`.
pub(crate) async fn check_type(
    store: &kv::Store,
    entity_type: &str,
    shards: u32,
) -> Result<(), ClusterError> {
    let key = config_key(entity_type);
    for _ in 0..3 {
        if let Some(bytes) = store.get(&key).await.map_err(js)? {
            let stored: TypeConfig = decode(&bytes).ok_or_else(|| {
                ClusterError::JetStream(format!("`{key}` in the bucket does not decode"))
            })?;
            return if stored.shards == shards {
                Ok(())
            } else {
                Err(ClusterError::ShardCountMismatch {
                    entity_type: entity_type.to_owned(),
                    configured: shards,
                    stored: stored.shards,
                })
            };
        }
        match store.create(&key, encode(&TypeConfig { shards })).await {
            Ok(_) => return Ok(()),
            // Another node wrote it first: read it.
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => continue,
            Err(e) => return Err(js(e)),
        }
    }
    Err(ClusterError::JetStream(format!(
        "`{key}` could not be read or written"
    )))
}
