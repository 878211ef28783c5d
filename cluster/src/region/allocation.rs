//! Allocation: a region that needs a shard (a message for it, a
//! remembered entity, the singleton) allocates it, every step a
//! compare-and-set on the revision it read: a free shard is created for
//! the least-loaded live node (ties by name, counting this node's
//! allocations in flight); a shard of an expired lease is taken only after
//! that lease has been deleted at the revision seen unchanged for the lease
//! timeout (so the node that held it, fenced by its own clock before then,
//! cannot renew and run it again); a shard of a deleted or replaced lease
//! is updated to the new owner at once.

use std::collections::HashMap;
use std::sync::Arc;

use async_nats::jetstream::kv;
use proscenium::{Actor, Context};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{RegionActor, RegionCmd};
use crate::store::{encode, lease_key, shard_key, ShardRecord};
use crate::view::{Owner, ViewState};
use crate::Core;

impl<A> RegionActor<A>
where
    A: Actor,
    A::Msg: Serialize + DeserializeOwned + Send + 'static,
{
    pub(super) fn allocate(&mut self, ctx: &mut Context<Self>, shard: u32) {
        if !self.allocating.insert(shard) {
            return;
        }
        let core = Arc::clone(&self.core);
        let entity_type = Arc::clone(&self.entity_type);
        let task = self
            .core
            .remote
            .runtime()
            .spawn(async move { allocate(&core, &entity_type, shard).await });
        ctx.pipe_to_self(task, move |_| RegionCmd::Allocated(shard));
    }
}

/// The least-loaded live node that is not leaving (ties by name), other
/// than `except`, counting the allocations this node has in flight.
pub(super) fn least_loaded(
    core: &Core,
    st: &ViewState,
    pending: &HashMap<String, usize>,
    entity_type: &str,
    except: Option<&str>,
) -> Option<ShardRecord> {
    core.view
        .load(st, entity_type)
        .into_iter()
        .filter(|(node, _, _)| Some(node.as_str()) != except)
        .map(|(node, inc, n)| {
            let p = pending.get(&node).copied().unwrap_or(0);
            (node, inc, n + p)
        })
        .min_by(|a, b| a.2.cmp(&b.2).then_with(|| a.0.cmp(&b.0)))
        .map(|(node, inc, _)| ShardRecord {
            node,
            inc,
            handoff: false,
        })
}

/// An allocation to `target` counted in flight has been written (or not).
pub(super) fn settle(core: &Core, target: &ShardRecord) {
    let mut pending = core.allocating.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = pending.get_mut(&target.node) {
        *p = p.saturating_sub(1);
    }
}

/// One allocation step for `shard`, by compare-and-set (see the module
/// docs); whatever the outcome, the region looks again when the view
/// changes.
async fn allocate(core: &Core, entity_type: &str, shard: u32) {
    let (owner, target) = {
        let st = core.view.lock();
        let owner = core.view.owner(&st, entity_type, shard);
        // Least loaded, counting the allocations this node has in flight
        // (the view learns of them a moment after they are written: a
        // burst of allocations would all go to one node otherwise).
        let mut pending = core.allocating.lock().unwrap_or_else(|e| e.into_inner());
        let target = least_loaded(core, &st, &pending, entity_type, None);
        if let (
            Some(t),
            Owner::Free
            | Owner::Orphaned {
                lease_rev: None, ..
            },
        ) = (&target, &owner)
        {
            *pending.entry(t.node.clone()).or_default() += 1;
        }
        (owner, target)
    };
    let settle = |target: &ShardRecord| settle(core, target);
    let key = shard_key(entity_type, shard);
    let store: &kv::Store = &core.store;
    match owner {
        Owner::Live { .. } | Owner::HandingOff { .. } => {}
        Owner::Free => {
            if let Some(target) = target {
                let _ = store.create(&key, encode(&target)).await;
                settle(&target);
            }
        }
        Owner::Orphaned {
            record_rev,
            node,
            lease_rev,
        } => {
            if let Some(lease_rev) = lease_rev {
                // Seen unchanged for the lease timeout here: deleted at that
                // revision (fails if it was renewed meanwhile), and only
                // then is its shard taken (at the next look).
                if let Err(e) = store
                    .delete_expect_revision(lease_key(&node), Some(lease_rev))
                    .await
                {
                    tracing::debug!(node, error = %e, "cluster: an expired lease was not deleted");
                } else {
                    tracing::info!(node, "cluster: a node's lease expired: deleted");
                }
                return;
            }
            if let Some(target) = target {
                let _ = store.update(&key, encode(&target), record_rev).await;
                settle(&target);
            }
        }
    }
}
