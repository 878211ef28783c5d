//! What a node knows of the bucket: every node's lease and every shard's
//! record, as a watch of the bucket delivers them, and when each lease was
//! last seen to change, on this node's monotonic clock. A lease unchanged
//! for the lease timeout is expired *as seen here*; nothing else says so
//! (a watcher gets no event when a key expires). The view may lag the
//! bucket: it is used to choose, never to decide; every decision is a
//! compare-and-set on the revision read here, which fails if the view was
//! stale.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use futures_util::StreamExt;

use crate::store::{decode, NodeLease, ShardRecord};

/// A lease as observed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Observed {
    pub(crate) lease: NodeLease,
    pub(crate) rev: u64,
    /// When this revision was first seen here.
    pub(crate) since: Instant,
}

#[derive(Default)]
pub(crate) struct ViewState {
    pub(crate) leases: HashMap<String, Observed>,
    /// Per entity type: shard -> (record, revision).
    pub(crate) shards: HashMap<String, HashMap<u32, (ShardRecord, u64)>>,
    /// Remembered entities (remember-entities): per entity type, per
    /// shard, the ids.
    pub(crate) remembered: HashMap<String, HashMap<u32, HashSet<String>>>,
    /// Reliable delivery: the dedup state a shard's last owner left on a
    /// hand-off, per (entity type, shard).
    pub(crate) dedup: HashMap<(String, u32), bytes::Bytes>,
}

/// Who runs a shard, as this node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// Allocated to a node whose lease (of that incarnation) is live here.
    Live {
        node: String,
        inc: u128,
        /// The allocation's revision: the fencing token.
        token: u64,
    },
    /// Allocated to a live node that is handing it off (rebalance):
    /// messages wait until it is free and allocated again.
    HandingOff { node: String, inc: u128, rev: u64 },
    /// No record: free.
    Free,
    /// Allocated to an incarnation that is gone: its lease expired here
    /// (`lease_rev`: the revision seen unchanged for the timeout), or
    /// deleted, or replaced by another incarnation (`None`).
    Orphaned {
        record_rev: u64,
        node: String,
        lease_rev: Option<u64>,
    },
}

/// The view, shared by the watch task and the regions; listeners are told
/// when it changes (a record, a lease, or a lease expiring here).
pub(crate) struct View {
    state: Mutex<ViewState>,
    timeout: Duration,
    listeners: Listeners,
    /// Bumped after every change of the state (an entry applied) and
    /// every lease expiring here: a region that looked at the same
    /// generation would see the same owners, without the lock.
    generation: AtomicU64,
}

/// Callbacks told of a change (a region's "look again").
#[derive(Default)]
pub(crate) struct Listeners(Mutex<Vec<Box<dyn Fn() + Send + Sync>>>);

impl Listeners {
    pub(crate) fn add(&self, f: impl Fn() + Send + Sync + 'static) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(f));
    }

    pub(crate) fn tell(&self) {
        for f in self.0.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            f();
        }
    }
}

impl View {
    pub(crate) fn new(timeout: Duration) -> Arc<View> {
        Arc::new(View {
            state: Mutex::new(ViewState::default()),
            timeout,
            listeners: Listeners::default(),
            generation: AtomicU64::new(0),
        })
    }

    /// The changes so far (see `generation`). Read before looking at the
    /// state: a change after the read bumps it.
    pub(crate) fn generation(&self) -> u64 {
        // Acquire: pairs with the Release increment in `changed`.
        self.generation.load(Ordering::Acquire)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, ViewState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn listen(&self, f: impl Fn() + Send + Sync + 'static) {
        self.listeners.add(f);
    }

    fn changed(&self) {
        // Release: after the change (applied under the lock, released
        // before this); pairs with the Acquire in `generation`.
        self.generation.fetch_add(1, Ordering::Release);
        self.listeners.tell();
    }

    /// The nodes whose lease is live here and that are not leaving.
    pub(crate) fn members(&self, state: &ViewState) -> Vec<(String, u128)> {
        let mut m: Vec<(String, u128)> = state
            .leases
            .iter()
            .filter(|(_, o)| !o.lease.leaving && o.since.elapsed() < self.timeout)
            .map(|(n, o)| (n.clone(), o.lease.inc))
            .collect();
        m.sort();
        m
    }

    /// When `node`'s lease, as seen here, expires unless renewed.
    pub(crate) fn live_until(&self, state: &ViewState, node: &str) -> Option<Instant> {
        state.leases.get(node).map(|o| o.since + self.timeout)
    }

    /// Who runs `shard` of `entity_type`.
    pub(crate) fn owner(&self, state: &ViewState, entity_type: &str, shard: u32) -> Owner {
        let Some((record, rev)) = state.shards.get(entity_type).and_then(|s| s.get(&shard)) else {
            return Owner::Free;
        };
        match state.leases.get(&record.node) {
            Some(o) if o.lease.inc == record.inc => {
                if o.since.elapsed() < self.timeout && record.handoff {
                    Owner::HandingOff {
                        node: record.node.clone(),
                        inc: record.inc,
                        rev: *rev,
                    }
                } else if o.since.elapsed() < self.timeout {
                    Owner::Live {
                        node: record.node.clone(),
                        inc: record.inc,
                        token: *rev,
                    }
                } else {
                    Owner::Orphaned {
                        record_rev: *rev,
                        node: record.node.clone(),
                        lease_rev: Some(o.rev),
                    }
                }
            }
            _ => Owner::Orphaned {
                record_rev: *rev,
                node: record.node.clone(),
                lease_rev: None,
            },
        }
    }

    /// How many shards of `entity_type` each member has (members with none
    /// included).
    pub(crate) fn load(&self, state: &ViewState, entity_type: &str) -> Vec<(String, u128, usize)> {
        let members = self.members(state);
        let records = state.shards.get(entity_type);
        members
            .into_iter()
            .map(|(node, inc)| {
                let n = records.map_or(0, |r| {
                    r.values()
                        .filter(|(rec, _)| rec.node == node && rec.inc == inc)
                        .count()
                });
                (node, inc, n)
            })
            .collect()
    }

    /// Applies one entry of the bucket's watch.
    fn apply(&self, entry: &kv::Entry) {
        let mut st = self.lock();
        let put = entry.operation == kv::Operation::Put;
        if let Some(node) = entry.key.strip_prefix("n.") {
            match put.then(|| decode::<NodeLease>(&entry.value)).flatten() {
                Some(lease) => {
                    // The same revision again (the watch made anew after a
                    // reconnect replays the current values): not a renewal.
                    if st.leases.get(node).is_none_or(|o| o.rev != entry.revision) {
                        st.leases.insert(
                            node.to_owned(),
                            Observed {
                                lease,
                                rev: entry.revision,
                                since: Instant::now(),
                            },
                        );
                    }
                }
                None => {
                    st.leases.remove(node);
                }
            }
        } else if let Some(rest) = entry.key.strip_prefix("e.") {
            let Some((ty, shard, id)) = crate::store::parse_remembered(rest, &entry.value) else {
                return;
            };
            let ids = st
                .remembered
                .entry(ty)
                .or_default()
                .entry(shard)
                .or_default();
            if put {
                ids.insert(id);
            } else {
                ids.remove(&id);
            }
        } else if let Some(rest) = entry.key.strip_prefix("d.") {
            let Some((ty, shard)) = rest.rsplit_once('.') else {
                return;
            };
            let Ok(shard) = shard.parse::<u32>() else {
                return;
            };
            if put {
                st.dedup.insert((ty.to_owned(), shard), entry.value.clone());
            } else {
                st.dedup.remove(&(ty.to_owned(), shard));
            }
        } else if let Some(rest) = entry.key.strip_prefix("s.") {
            let Some((ty, shard)) = rest.rsplit_once('.') else {
                return;
            };
            let Ok(shard) = shard.parse::<u32>() else {
                return;
            };
            let records = st.shards.entry(ty.to_owned()).or_default();
            match put.then(|| decode::<ShardRecord>(&entry.value)).flatten() {
                Some(record) => {
                    records.insert(shard, (record, entry.revision));
                }
                None => {
                    records.remove(&shard);
                }
            }
        }
    }
}

/// Follows the bucket into `view` for as long as the node runs (the watch
/// is made again if it ends: a server restart, say), and tells the
/// listeners when a lease expires here, which no event of the bucket says.
pub(crate) async fn follow(store: kv::Store, view: Arc<View>, tick: Duration) {
    let expiry = {
        let view = Arc::clone(&view);
        async move {
            let mut expired_before = 0;
            let mut every = tokio::time::interval(tick);
            loop {
                every.tick().await;
                let expired = {
                    let st = view.lock();
                    st.leases
                        .values()
                        .filter(|o| o.since.elapsed() >= view.timeout)
                        .count()
                };
                if expired != expired_before {
                    expired_before = expired;
                    view.changed();
                }
            }
        }
    };
    let watch = async move {
        loop {
            match store.watch_with_history(">").await {
                Ok(mut entries) => {
                    while let Some(entry) = entries.next().await {
                        match entry {
                            Ok(entry) => {
                                view.apply(&entry);
                                view.changed();
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, "cluster: the bucket's watch failed");
                                break;
                            }
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cluster: could not watch the bucket"),
            }
            tokio::time::sleep(tick).await;
        }
    };
    tokio::join!(expiry, watch);
}
