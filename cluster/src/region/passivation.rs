//! Passivation and remember-entities: which entities run. An entity idle
//! for `passivate-idle`, or the least recently used one when starting
//! another would pass `max-active-entities`, is sent a PoisonPill (after
//! what it was sent before, which it handles); what comes for it meanwhile
//! waits, and starts its next incarnation once it has stopped. With
//! remember-entities, an entity's id is kept in the bucket while it runs,
//! and the shard's next owner starts it without waiting for a message.

use std::collections::VecDeque;

use proscenium::{Actor, Context};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Entity, RegionActor};
use crate::view::Owner;

impl<A> RegionActor<A>
where
    A: Actor,
    A::Msg: Serialize + DeserializeOwned + Send + 'static,
{
    /// Entities running here and not passivating.
    pub(super) fn active(&self) -> usize {
        self.hosted
            .values()
            .map(|h| {
                h.entities
                    .values()
                    .filter(|e| e.passivating.is_none())
                    .count()
            })
            .sum()
    }

    pub(super) fn passivate(e: &mut Entity<A::Msg>) {
        if e.passivating.is_none() {
            e.passivating = Some(VecDeque::new());
            e.actor.poison_pill();
        }
    }

    pub(super) fn passivate_least_recent(&mut self) {
        let oldest = self
            .hosted
            .values_mut()
            .flat_map(|h| h.entities.values_mut())
            .filter(|e| e.passivating.is_none())
            .min_by_key(|e| e.last);
        if let Some(e) = oldest {
            Self::passivate(e);
        }
    }

    pub(super) fn passivate_idle(&mut self) {
        let Some(idle) = self.core.settings.passivate_idle else {
            return;
        };
        for e in self
            .hosted
            .values_mut()
            .flat_map(|h| h.entities.values_mut())
        {
            if e.passivating.is_none() && e.last.elapsed() >= idle {
                Self::passivate(e);
            }
        }
    }

    pub(super) fn remembering(&self) -> bool {
        self.core.settings.remember_entities && self.eager.is_none()
    }

    /// Remember-entities: the remembered entities of the shards allocated
    /// to this node, started if they do not run.
    pub(super) fn restart_remembered(&mut self, ctx: &mut Context<Self>) {
        if !self.remembering() || !self.core.lease.holds() || self.leaving {
            return;
        }
        let my_inc = self.core.lease.incarnation();
        let mut orphans = Vec::new();
        let due: Vec<(u32, u64, String)> = {
            let st = self.core.view.lock();
            let Some(shards) = st.remembered.get(&*self.entity_type) else {
                return;
            };
            let mut due = Vec::new();
            for (shard, ids) in shards {
                let owner = self.core.view.owner(&st, &self.entity_type, *shard);
                if !ids.is_empty() && matches!(owner, Owner::Free | Owner::Orphaned { .. }) {
                    // Its owner is gone: allocated again, without waiting
                    // for a message.
                    orphans.push(*shard);
                }
                if let Owner::Live { node, inc, token } = owner {
                    if node == self.core.node && inc == my_inc {
                        for id in ids {
                            let running = self.hosted.get(shard).is_some_and(|h| {
                                h.inc == inc && h.token == token && h.entities.contains_key(id)
                            });
                            if !running {
                                due.push((*shard, token, id.clone()));
                            }
                        }
                    }
                }
            }
            due
        };
        for shard in orphans {
            self.allocate(ctx, shard);
        }
        for (shard, token, id) in due {
            if self
                .hosted
                .get(&shard)
                .is_some_and(|h| h.inc != my_inc || h.token != token)
            {
                self.unhost(ctx, shard, false);
            }
            self.spawn_entity(ctx, shard, my_inc, token, &id);
        }
    }

    /// Remember-entities: `id` written to the bucket (or removed).
    pub(super) fn remember(&self, shard: u32, id: &str, on: bool) {
        if !self.remembering() {
            return;
        }
        let key = crate::store::remembered_key(&self.entity_type, shard, id);
        let store = self.core.store.clone();
        let value = bytes::Bytes::copy_from_slice(id.as_bytes());
        self.core.remote.runtime().spawn(async move {
            if on {
                let _ = store.create(&key, value).await;
            } else {
                let _ = store.delete(&key).await;
            }
        });
    }
}
