//! The coordinator of an entity type: a cluster singleton (its own
//! one-shard region, `coord-<type>`) that rebalances the type's shards.
//! It keeps no state of its own beyond what it last saw of the membership
//! (a new coordinator starts from the bucket, and waits for the
//! membership to be stable again), and changes the bucket only by
//! compare-and-set: a shard to move is marked for hand-off at the
//! revision seen; its owner stops the shard's entities and frees it; the
//! next message for it allocates it to the least-loaded node.
//!
//! A round runs every `rebalance-interval`, and does nothing unless the
//! membership (the live nodes, not leaving) has been the same for
//! `rebalance-stable-for`, no node is leaving or suspect (a lease not
//! renewed for two renewal intervals), at least `min-nodes` are up, and
//! fewer shards than the round's limit are in hand-off already. What moves
//! is the strategy's choice ([`ShardAllocationStrategy`], by default
//! [`LeastShardStrategy`] with Akka's per-round limits).

use std::sync::Arc;
use std::time::{Duration, Instant};

use proscenium::{Actor, Context, Outcome};
use serde::{Deserialize, Serialize};

use crate::settings::ClusterSettings;
use crate::store::{encode, shard_key, ShardRecord};
use crate::view::ViewState;
use crate::Core;

/// The shards of one node, as a rebalance sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeShards {
    /// The node.
    pub node: String,
    /// Its shards (allocated, not in hand-off), in the order they were
    /// allocated to it: by fencing token (the revision of the allocation),
    /// the oldest first.
    pub shards: Vec<u32>,
}

/// Which shards to move in a rebalance round (Akka's
/// `ShardAllocationStrategy.rebalance`); a free shard goes to the
/// least-loaded node when it is next needed.
pub trait ShardAllocationStrategy: Send + Sync + 'static {
    /// The shards to hand off now, given each live node's shards (nodes
    /// with none included) and how many are in hand-off already.
    fn rebalance(&self, nodes: &[NodeShards], in_progress: usize) -> Vec<u32>;
}

/// Akka's least-shard strategy: moves shards from the nodes that hold more
/// than their share (the total divided by the nodes, rounded up) until
/// none does, at most `min(absolute_limit, relative_limit * total)` in
/// hand-off at once (at least one). Of a node's shards it moves those
/// allocated to it most recently (Akka takes any): in a rolling restart
/// with rebalances between the steps, those are the shards a leaving node
/// left there, so each shard moves at most twice (off its restarting
/// node, then to the node started again); moving the lowest shard numbers
/// moved the same few shards in every step, up to four times in three
/// steps (decision 0030).
#[derive(Debug, Clone, PartialEq)]
pub struct LeastShardStrategy {
    /// The most shards in hand-off at once (Akka's
    /// `rebalance-absolute-limit`, default 20).
    pub absolute_limit: usize,
    /// The most shards in hand-off at once, as a fraction of all shards
    /// allocated (Akka's `rebalance-relative-limit`, default 0.1).
    pub relative_limit: f64,
}

impl Default for LeastShardStrategy {
    fn default() -> Self {
        LeastShardStrategy {
            absolute_limit: 20,
            relative_limit: 0.1,
        }
    }
}

impl ShardAllocationStrategy for LeastShardStrategy {
    fn rebalance(&self, nodes: &[NodeShards], in_progress: usize) -> Vec<u32> {
        if nodes.is_empty() {
            return Vec::new();
        }
        let total: usize = nodes.iter().map(|n| n.shards.len()).sum();
        let relative = (self.relative_limit * total as f64).floor() as usize;
        let limit = self.absolute_limit.min(relative).max(1);
        let Some(room) = limit.checked_sub(in_progress).filter(|r| *r > 0) else {
            return Vec::new();
        };
        let share = total.div_ceil(nodes.len());
        let least = nodes.iter().map(|n| n.shards.len()).min().unwrap_or(0);
        let mut by_load: Vec<&NodeShards> = nodes.iter().collect();
        by_load.sort_by(|a, b| {
            b.shards
                .len()
                .cmp(&a.shards.len())
                .then(a.node.cmp(&b.node))
        });
        let mut picks = Vec::new();
        for n in by_load {
            // Above its share, and not within one of the least loaded
            // (which would only move shards back and forth).
            if n.shards.len() <= share || n.shards.len() <= least + 1 {
                continue;
            }
            // The most recently allocated first (the list is oldest first).
            for &s in n.shards.iter().rev().take(n.shards.len() - share) {
                if picks.len() == room {
                    return picks;
                }
                picks.push(s);
            }
        }
        picks
    }
}

/// Why a rebalance round does nothing now (`None`: it may go on): the
/// membership changed within `rebalance-stable-for`, fewer than
/// `min-nodes` are up, a node is leaving, or a node is suspect (its lease
/// not renewed for two renewal intervals: it may be dying, or paused, and
/// a rebalance now would move shards twice: the akka-core#29549 storm).
pub(crate) fn held_back(
    s: &ClusterSettings,
    stable_for: Duration,
    members: usize,
    st: &ViewState,
) -> Option<&'static str> {
    let suspect_after = s.lease_renew_interval * 2 + Duration::from_millis(100);
    if stable_for < s.rebalance_stable_for {
        Some("the membership is not stable yet")
    } else if members < s.min_nodes.max(1) {
        Some("fewer than min-nodes are up")
    } else if st.leases.values().any(|o| o.lease.leaving) {
        Some("a node is leaving")
    } else if st
        .leases
        .values()
        .any(|o| o.since.elapsed() > suspect_after)
    {
        Some("a node is suspect")
    } else {
        None
    }
}

/// The coordinator's one message: look now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum CoordMsg {
    Round,
}

pub(crate) struct Coordinator {
    pub(crate) entity_type: Arc<str>,
    pub(crate) core: Arc<Core>,
    pub(crate) strategy: Arc<dyn ShardAllocationStrategy>,
    members: Vec<(String, u128)>,
    stable_since: Instant,
}

impl Coordinator {
    pub(crate) fn new(
        entity_type: Arc<str>,
        core: Arc<Core>,
        strategy: Arc<dyn ShardAllocationStrategy>,
    ) -> Coordinator {
        Coordinator {
            entity_type,
            core,
            strategy,
            members: Vec::new(),
            stable_since: Instant::now(),
        }
    }

    fn round(&mut self) {
        let view = &self.core.view;
        let moves: Vec<(u32, ShardRecord, u64)> = {
            let st = view.lock();
            let members = view.members(&st);
            if members != self.members {
                self.members = members;
                self.stable_since = Instant::now();
                return;
            }
            let stable_for = self.stable_since.elapsed();
            if let Some(why) = held_back(&self.core.settings, stable_for, self.members.len(), &st) {
                tracing::debug!(entity_type = %self.entity_type, why, "cluster: no rebalance now");
                return;
            }
            let records = st.shards.get(&*self.entity_type);
            let in_progress = records.map_or(0, |r| r.values().filter(|(r, _)| r.handoff).count());
            let nodes: Vec<NodeShards> = self
                .members
                .iter()
                .map(|(node, inc)| NodeShards {
                    node: node.clone(),
                    shards: records.map_or_else(Vec::new, |r| {
                        // Oldest allocation first (see `NodeShards`).
                        let mut mine: Vec<(u64, u32)> = r
                            .iter()
                            .filter(|(_, (rec, _))| {
                                !rec.handoff && rec.node == *node && rec.inc == *inc
                            })
                            .map(|(s, (_, rev))| (*rev, *s))
                            .collect();
                        mine.sort_unstable();
                        mine.into_iter().map(|(_, s)| s).collect()
                    }),
                })
                .collect();
            let picks = self.strategy.rebalance(&nodes, in_progress);
            picks
                .into_iter()
                .filter_map(|shard| {
                    let (rec, rev) = records?.get(&shard)?;
                    Some((shard, rec.clone(), *rev))
                })
                .collect()
        };
        if moves.is_empty() {
            return;
        }
        tracing::info!(
            entity_type = %self.entity_type,
            shards = moves.len(),
            "cluster: rebalance: handing off"
        );
        let store = self.core.store.clone();
        let ty = Arc::clone(&self.entity_type);
        self.core.remote.runtime().spawn(async move {
            for (shard, mut rec, rev) in moves {
                rec.handoff = true;
                let _ = store.update(shard_key(&ty, shard), encode(&rec), rev).await;
            }
        });
    }
}

impl Actor for Coordinator {
    type Msg = CoordMsg;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        let every = self.core.settings.rebalance_interval;
        let _rounds = ctx.tell_every_with(every, every, || CoordMsg::Round);
        Ok(())
    }

    fn receive(&mut self, _ctx: &mut Context<Self>, msg: CoordMsg) -> Outcome {
        match msg {
            CoordMsg::Round => self.round(),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(counts: &[(&str, std::ops::Range<u32>)]) -> Vec<NodeShards> {
        counts
            .iter()
            .map(|(n, r)| NodeShards {
                node: (*n).to_owned(),
                shards: r.clone().collect(),
            })
            .collect()
    }

    #[test]
    fn no_rebalance_while_a_node_is_suspect_leaving_or_just_joined() {
        use crate::store::NodeLease;
        use crate::view::Observed;
        let s = ClusterSettings::default()
            .lease(
                Duration::from_millis(2000),
                Duration::from_millis(250),
                Duration::from_millis(500),
            )
            .rebalance(Duration::from_secs(1), Duration::from_secs(3), 2);
        let seen = |ago_ms: u64, leaving: bool| Observed {
            lease: NodeLease { inc: 1, leaving },
            rev: 1,
            since: Instant::now()
                .checked_sub(Duration::from_millis(ago_ms))
                .expect("the clock is past that"),
        };
        let view = |leases: Vec<(&str, Observed)>| ViewState {
            leases: leases.into_iter().map(|(n, o)| (n.to_owned(), o)).collect(),
            ..ViewState::default()
        };
        let stable = Duration::from_secs(5);
        let fresh = view(vec![("a", seen(10, false)), ("b", seen(100, false))]);
        assert_eq!(held_back(&s, stable, 2, &fresh), None);
        // b not renewed for 0.7 s (renewal every 0.25 s): suspect, though
        // its lease (2 s) has not expired.
        let suspect = view(vec![("a", seen(10, false)), ("b", seen(700, false))]);
        assert_eq!(
            held_back(&s, stable, 2, &suspect),
            Some("a node is suspect")
        );
        let leaving = view(vec![("a", seen(10, false)), ("b", seen(10, true))]);
        assert_eq!(
            held_back(&s, stable, 2, &leaving),
            Some("a node is leaving")
        );
        assert_eq!(
            held_back(&s, Duration::from_secs(1), 2, &fresh),
            Some("the membership is not stable yet")
        );
        assert_eq!(
            held_back(&s, stable, 1, &fresh),
            Some("fewer than min-nodes are up")
        );
    }

    #[test]
    fn least_shard_moves_the_excess_within_the_limits() {
        let s = LeastShardStrategy {
            absolute_limit: 20,
            relative_limit: 0.1,
        };
        // 300 over three, a fourth joins: 75 each; 25 to move from each,
        // at most 20 (absolute) in a round.
        let four = nodes(&[("a", 0..100), ("b", 100..200), ("c", 200..300), ("d", 0..0)]);
        let picks = s.rebalance(&four, 0);
        assert_eq!(picks.len(), 20);
        assert!(picks.iter().all(|p| *p < 100), "from the most loaded first");
        // Those in hand-off count against the limit.
        assert_eq!(s.rebalance(&four, 15).len(), 5);
        assert!(s.rebalance(&four, 20).is_empty());
        // Balanced within one: nothing.
        let even = nodes(&[("a", 0..34), ("b", 34..67), ("c", 67..100)]);
        assert!(s.rebalance(&even, 0).is_empty());
        // The relative limit: 10 % of 50.
        let small = nodes(&[("a", 0..50), ("b", 0..0)]);
        assert_eq!(s.rebalance(&small, 0).len(), 5);
        // At least one shard moves, however few.
        let tiny = nodes(&[("a", 0..3), ("b", 0..0)]);
        assert_eq!(s.rebalance(&tiny, 0), vec![2]);
        assert!(s.rebalance(&[], 0).is_empty());
    }

    #[test]
    fn least_shard_moves_the_most_recently_allocated_shards() {
        let s = LeastShardStrategy::default();
        // b held 10 to 19 and was given 0 to 9 (oldest first) when a left;
        // a, started again, has none: what b was given goes back.
        let mut b = nodes(&[("b", 10..20)]);
        b[0].shards.extend(0..10);
        b.extend(nodes(&[("a", 0..0), ("c", 20..30)]));
        let mut picks = s.rebalance(&b, 0);
        picks.sort_unstable();
        assert_eq!(
            picks,
            vec![7, 8, 9],
            "the relative limit (10 % of 30), newest first"
        );
        let all = LeastShardStrategy {
            absolute_limit: 20,
            relative_limit: 1.0,
        };
        let mut picks = all.rebalance(&b, 0);
        picks.sort_unstable();
        assert_eq!(picks, (0..10).collect::<Vec<_>>());
    }
}
