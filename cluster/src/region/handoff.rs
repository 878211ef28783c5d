//! Hand-off: a shard's entities stopped and the shard freed for its next
//! owner, on a rebalance (the coordinator marked its record `handoff`) or
//! a leave (the node's coordinated shutdown). Each entity gets its stop
//! message after what it was sent before, and is stopped at once past
//! `handoff-timeout`; the shard is freed (its record deleted by
//! compare-and-set) only once every entity of it has terminated here, after
//! the dedup state of reliable delivery is written for the next owner; a
//! rebalance's shard is then allocated at once to the least-loaded other
//! node. At a fence, or when an older allocation is found, the entities
//! are stopped at once instead (`unhost` without draining).

use std::sync::Arc;

use proscenium::{Actor, ActorId, Context};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::allocation::{least_loaded, settle};
use super::{Pending, RegionActor, RegionCmd, DEDUP_KEEP};
use crate::store::{dedup_key, encode, shard_key};

impl<A> RegionActor<A>
where
    A: Actor,
    A::Msg: Serialize + DeserializeOwned + Send + 'static,
{
    /// Stops the entities of `shard` and forgets it; what waited for an
    /// entity's next incarnation is routed again (to the shard's next
    /// owner). A hand-off (`drain`) sends each its stop message (after
    /// what it was sent before, which it handles) and stops what still
    /// runs after `handoff-timeout`, keeping the shard's dedup state for
    /// its next owner; otherwise (a fence, a lost allocation) they are
    /// stopped at once.
    pub(super) fn unhost(&mut self, ctx: &mut Context<Self>, shard: u32, drain: bool) {
        let Some(h) = self.hosted.remove(&shard) else {
            return;
        };
        // Reliable delivery: the receipts of what the entities were handed
        // go ahead of their stop (behind it they never run).
        self.send_receipts(ctx);
        let mut waiting = Vec::new();
        for (id, e) in h.entities {
            let actor = e.actor.id();
            self.by_actor.remove(&actor);
            if self.stopping.insert(actor.clone(), shard).is_none() {
                *self.stopping_in.entry(shard).or_default() += 1;
            }
            match (&e.passivating, drain) {
                // Passivating: its PoisonPill is on its way already.
                (Some(_), true) => {}
                (None, true) => match &self.stop_message {
                    Some(make) => e.actor.tell(make()),
                    None => e.actor.poison_pill(),
                },
                (_, false) => ctx.stop(&actor),
            }
            if let Some(w) = e.passivating {
                waiting.extend(w.into_iter().map(|(m, seq)| (id.clone(), m, seq)));
            }
        }
        // Not started (its key was being written): what waited for it goes
        // on with the shard.
        for (id, s) in h.starting {
            waiting.extend(s.waiting.into_iter().map(|(m, seq)| (id.clone(), m, seq)));
        }
        if drain {
            self.freeing_dedup.insert(shard, h.dedup);
            if self.stopping_in.contains_key(&shard) {
                // Not cancelled when the hand-off ends first: it then finds
                // nothing of the shard stopping.
                let _timeout = ctx.tell_after(
                    self.core.settings.handoff_timeout,
                    RegionCmd::HandOffTimeout(shard),
                );
            }
        }
        for (id, msg, seq) in waiting {
            self.route(ctx, Pending::fresh(id, msg, seq));
        }
    }

    /// A hand-off of `shard` ran out of time: its entities still running
    /// here are stopped at once.
    pub(super) fn hand_off_timed_out(&mut self, ctx: &mut Context<Self>, shard: u32) {
        let late: Vec<ActorId> = self
            .stopping
            .iter()
            .filter(|(_, s)| **s == shard)
            .map(|(a, _)| a.clone())
            .collect();
        if !late.is_empty() {
            tracing::warn!(
                entity_type = %self.entity_type,
                shard,
                entities = late.len(),
                "cluster: a hand-off ran past handoff-timeout: its entities are stopped"
            );
        }
        for a in late {
            ctx.stop(&a);
        }
    }

    /// Leaving: every hosted shard's entities stopped, its record deleted
    /// (compare-and-set on its revision): free for the others.
    ///
    /// A shard is freed only once every entity of it has terminated here
    /// (its post_stop run): a new owner never starts one while the old one
    /// still runs.
    pub(super) fn hand_off_all(
        &mut self,
        ctx: &mut Context<Self>,
        done: tokio::sync::oneshot::Sender<()>,
    ) {
        self.leaving = true;
        let shards: Vec<(u32, u64)> = self.hosted.iter().map(|(s, h)| (*s, h.token)).collect();
        self.hand_off_done = Some(done);
        for (shard, token) in shards {
            self.freeing.insert(shard, token);
            self.unhost(ctx, shard, true);
            self.free_if_stopped(shard);
        }
        self.free_ready();
    }

    /// `shard` is being freed and none of its entities runs here any more:
    /// its record deleted (compare-and-set at the revision it was handed
    /// off or allocated at).
    pub(super) fn free_if_stopped(&mut self, shard: u32) {
        if self.stopping_in.get(&shard).is_some_and(|n| *n > 0) {
            return;
        }
        if let Some(rev) = self.freeing.remove(&shard) {
            self.freed.insert(shard, rev);
            let store = self.core.store.clone();
            let key = shard_key(&self.entity_type, shard);
            // Reliable delivery's record of what the entities were handed,
            // for the next owner: written before the record is freed, so
            // the next owner (which gets the shard after the delete, in
            // the bucket's order) finds it.
            let dedup = self
                .freeing_dedup
                .remove(&shard)
                .and_then(|d| d.encode(DEDUP_KEEP))
                .map(|b| (dedup_key(&self.entity_type, shard), b));
            // A rebalance's hand-off: allocated at once to the least-loaded
            // other node (counted in flight, so that a hand-off of many
            // goes to many), not left for its next message: a rebalance
            // without traffic would otherwise free shards that no one
            // takes, round after round. A leave's shards are left free:
            // taken by their next message, by the least-loaded node then,
            // which in a rolling restart is the node just started again
            // (allocated at once, they went to the next node to restart,
            // and moved again).
            let target = if self.leaving {
                None
            } else {
                let st = self.core.view.lock();
                let mut pending = self
                    .core
                    .allocating
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                let t = least_loaded(
                    &self.core,
                    &st,
                    &pending,
                    &self.entity_type,
                    Some(&self.core.node),
                );
                if let Some(t) = &t {
                    *pending.entry(t.node.clone()).or_default() += 1;
                }
                t
            };
            let core = Arc::clone(&self.core);
            self.deleting
                .push(self.core.remote.runtime().spawn(async move {
                    if let Some((dkey, bytes)) = dedup {
                        if let Err(e) = store.put(dkey, bytes).await {
                            // At least once then: the next owner may hand
                            // over again what this one confirmed.
                            tracing::warn!(error = %e, "cluster: a shard's dedup state was not written");
                        }
                    }
                    let freed = store.delete_expect_revision(&key, Some(rev)).await;
                    if let Some(t) = target {
                        if freed.is_ok() {
                            // Fails if another region allocated it first.
                            let _ = store.create(&key, encode(&t)).await;
                        }
                        settle(&core, &t);
                    }
                }));
        }
    }

    /// Leaving: once every shard handed off is freed, the hand-off is done.
    pub(super) fn free_ready(&mut self) {
        self.deleting.retain(|d| !d.is_finished());
        if !self.freeing.is_empty() {
            return;
        }
        let Some(done) = self.hand_off_done.take() else {
            return;
        };
        let deleting = std::mem::take(&mut self.deleting);
        self.core.remote.runtime().spawn(async move {
            for d in deleting {
                let _ = d.await;
            }
            let _ = done.send(());
        });
    }

    /// Rebalance: the shards this node is asked to hand off are stopped
    /// here and freed once their entities have terminated.
    pub(super) fn hand_off_asked(&mut self, ctx: &mut Context<Self>) {
        let my_inc = self.core.lease.incarnation();
        let asked: Vec<(u32, u64)> = {
            let st = self.core.view.lock();
            let Some(records) = st.shards.get(&*self.entity_type) else {
                self.freed.clear();
                return;
            };
            // A mark whose record is being deleted here already: the view
            // shows it until the delete comes back through the watch, and
            // any other change looks again meanwhile. Taken up twice, the
            // second delete failed, but its target was counted in flight
            // until then, one allocation too many for that node: the next
            // shard freed went to another node, and the next round moved it
            // once more (seen in the rolling restart with rebalances).
            self.freed
                .retain(|s, rev| records.get(s).is_some_and(|(_, r)| *r == *rev));
            records
                .iter()
                .filter(|(_, (r, _))| r.handoff && r.node == self.core.node && r.inc == my_inc)
                .map(|(s, (_, rev))| (*s, *rev))
                .filter(|(s, _)| !self.freeing.contains_key(s) && !self.freed.contains_key(s))
                .collect()
        };
        for (shard, rev) in asked {
            self.freeing.insert(shard, rev);
            self.unhost(ctx, shard, true);
            self.free_if_stopped(shard);
        }
    }
}
