//! The cluster singleton's region: a region of one shard whose one entity
//! starts as soon as the shard is allocated to this node, without waiting
//! for a message, and is never passivated.

use proscenium::{Actor, Context};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::RegionActor;
use crate::view::Owner;

impl<A> RegionActor<A>
where
    A: Actor,
    A::Msg: Serialize + DeserializeOwned + Send + 'static,
{
    /// A singleton's region (see `eager`).
    pub(crate) fn singleton(mut self, id: String) -> Self {
        self.eager = Some(id);
        self
    }

    /// The singleton: allocated if its shard is free or orphaned, started
    /// here if it is ours.
    pub(super) fn keep_singleton(&mut self, ctx: &mut Context<Self>) {
        let Some(id) = self.eager.clone() else {
            return;
        };
        let owner = {
            let st = self.core.view.lock();
            self.core.view.owner(&st, &self.entity_type, 0)
        };
        match owner {
            Owner::Live { node, inc, token } => {
                let ours = node == self.core.node
                    && inc == self.core.lease.incarnation()
                    && self.core.lease.holds()
                    && !self.leaving;
                let running = self.hosted.get(&0).is_some_and(|h| {
                    h.inc == inc && h.token == token && h.entities.contains_key(&id)
                });
                if ours && !running {
                    if self
                        .hosted
                        .get(&0)
                        .is_some_and(|h| h.inc != inc || h.token != token)
                    {
                        self.unhost(ctx, 0, false);
                    }
                    self.spawn_entity(ctx, 0, inc, token, &id);
                }
            }
            Owner::Free | Owner::Orphaned { .. } if !self.leaving => self.allocate(ctx, 0),
            _ => {}
        }
    }
}
