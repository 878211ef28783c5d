//! Passivation and remember-entities: which entities run. An entity idle
//! for `passivate-idle`, or the least recently used one when starting
//! another would pass `max-active-entities`, is sent a PoisonPill (after
//! what it was sent before, which it handles); what comes for it meanwhile
//! waits, and starts its next incarnation once it has stopped. With
//! remember-entities, an entity's id is kept in the bucket while it runs
//! (written before it starts: its first messages wait for the write), and
//! the shard's next owner starts it without waiting for a message.

use std::collections::VecDeque;

use proscenium::{Actor, ActorRef, Context};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{Entity, Pending, RegionActor, RegionCmd};
use crate::reliable::Seq;
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

    pub(super) fn passivate_least_recent(&mut self, ctx: &mut Context<Self>) {
        // Receipts go ahead of the PoisonPill (behind it they never run).
        self.send_receipts(ctx);
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

    pub(super) fn passivate_idle(&mut self, ctx: &mut Context<Self>) {
        let Some(idle) = self.core.settings.passivate_idle else {
            return;
        };
        self.send_receipts(ctx);
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
                                h.inc == inc
                                    && h.token == token
                                    && (h.entities.contains_key(id) || h.starting.contains_key(id))
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

    /// Remember-entities: `id` removed from the bucket (it stopped
    /// itself).
    pub(super) fn forget(&mut self, shard: u32, id: &str) {
        if self.remembering() {
            self.write_remembered(shard, id, None);
        }
    }

    /// Remember-entities: entity `id` of `shard` (hosted at `token`),
    /// started by a message, starts only once its key is in the bucket
    /// (Akka's order): `first` waits with what else comes for it until the
    /// write is acknowledged (`RegionCmd::Remembered`). A node killed at
    /// any point then leaves every entity that ever ran remembered. The
    /// key is written even if the view shows it already (a message that
    /// came before `restart_remembered` started the entity): an idempotent
    /// put, where trusting the view would have to account for a delete of
    /// this region's that the view has not shown yet.
    pub(super) fn start_remembering(
        &mut self,
        ctx: &mut Context<Self>,
        shard: u32,
        id: String,
        first: (A::Msg, Option<Seq>),
    ) {
        let Some(h) = self.hosted.get_mut(&shard) else {
            return;
        };
        let token = h.token;
        h.starting.insert(
            id.clone(),
            Starting {
                waiting: VecDeque::from([first]),
                writing: true,
            },
        );
        let reply = Some(Ack {
            to: ctx.self_ref(),
            token,
        });
        self.write_remembered(shard, &id, reply);
    }

    /// Remember-entities: the key of an entity waiting to start written
    /// (`ok`) or not. Written: the entity starts (if its shard is still
    /// hosted here at `token`) and what waited for it is routed, in order.
    /// Not written: written again at the next look.
    pub(super) fn remembered(
        &mut self,
        ctx: &mut Context<Self>,
        shard: u32,
        id: String,
        token: u64,
        ok: bool,
    ) {
        let Some(h) = self.hosted.get_mut(&shard).filter(|h| h.token == token) else {
            // Unhosted meanwhile: what waited was routed again then.
            return;
        };
        if !ok {
            if let Some(s) = h.starting.get_mut(&id) {
                s.writing = false;
            }
            return;
        }
        let Some(starting) = h.starting.remove(&id) else {
            return;
        };
        let inc = h.inc;
        let running = h.entities.contains_key(&id);
        if !running
            && self.core.lease.holds()
            && !self.leaving
            && inc == self.core.lease.incarnation()
        {
            if let Some(max) = self.core.settings.max_active_entities {
                if self.active() >= max {
                    self.passivate_least_recent(ctx);
                }
            }
            self.spawn_entity(ctx, shard, inc, token, &id);
        }
        // To the entity now running (or, if it could not start, held and
        // its start tried again).
        for (msg, seq) in starting.waiting {
            self.route(ctx, Pending::fresh(id.clone(), msg, seq));
        }
    }

    /// Remember-entities: the writes of entities' keys that failed, tried
    /// again (the periodic look).
    pub(super) fn retry_remembering(&mut self, ctx: &mut Context<Self>) {
        let mut due = Vec::new();
        for (shard, h) in &mut self.hosted {
            for (id, s) in &mut h.starting {
                if !s.writing {
                    s.writing = true;
                    due.push((*shard, id.clone(), h.token));
                }
            }
        }
        for (shard, id, token) in due {
            let to = ctx.self_ref();
            self.write_remembered(shard, &id, Some(Ack { to, token }));
        }
    }

    /// Remember-entities: `id`'s key written (`reply`: who waits for the
    /// acknowledgement) or, without `reply`, deleted. The writes of a
    /// region go through one task, in order per key: a delete and the put
    /// of a next incarnation never land the wrong way round.
    fn write_remembered(&mut self, shard: u32, id: &str, reply: Option<Ack<A::Msg>>) {
        let key = crate::store::remembered_key(&self.entity_type, shard, id);
        let write = match reply {
            Some(Ack { to, token }) => {
                let id = id.to_owned();
                let value = bytes::Bytes::copy_from_slice(id.as_bytes());
                let done: Box<dyn FnOnce(bool) + Send> = Box::new(move |ok| {
                    to.tell(RegionCmd::Remembered {
                        shard,
                        id,
                        token,
                        ok,
                    });
                });
                Write {
                    key,
                    value: Some(value),
                    done: Some(done),
                }
            }
            None => Write {
                key,
                value: None,
                done: None,
            },
        };
        let writer = self.rememberer.get_or_insert_with(|| {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            self.core
                .remote
                .runtime()
                .spawn(write_in_order(self.core.store.clone(), rx));
            tx
        });
        // Fails only once the task has ended (the runtime shutting down):
        // the entity then never starts, as nothing does.
        let _ = writer.send(write);
    }
}

/// Who is told that a remembered entity's key was written: the region,
/// about the shard hosted at `token`.
pub(super) struct Ack<M: Send + 'static> {
    to: ActorRef<RegionCmd<M>>,
    token: u64,
}

/// An entity waiting for its key to be written before it starts
/// (remember-entities), and what came for it meanwhile.
pub(super) struct Starting<M> {
    pub(super) waiting: VecDeque<(M, Option<Seq>)>,
    /// The write is under way (else it failed: tried again at the next
    /// look).
    pub(super) writing: bool,
}

/// A write of a remembered entity's key: put (`value`) or delete, and who
/// is told it is done.
pub(super) struct Write {
    key: String,
    value: Option<bytes::Bytes>,
    done: Option<Box<dyn FnOnce(bool) + Send>>,
}

/// The region's writer of remembered keys: what has queued up is written
/// at once, each key's writes in order, the keys concurrently (a burst of
/// new entities is one round trip, not one each).
async fn write_in_order(
    store: async_nats::jetstream::kv::Store,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Write>,
) {
    while let Some(first) = rx.recv().await {
        // Each key's writes, in the order they came.
        let mut by_key: std::collections::HashMap<String, Vec<Write>> = Default::default();
        by_key.entry(first.key.clone()).or_default().push(first);
        while let Ok(w) = rx.try_recv() {
            by_key.entry(w.key.clone()).or_default().push(w);
        }
        let store = &store;
        futures_util::future::join_all(by_key.into_values().map(|writes| async move {
            for w in writes {
                let key = &w.key;
                let ok = match w.value {
                    Some(value) => store.put(key, value).await.map(|_| ()).map_err(|e| e.to_string()),
                    None => store.delete(key).await.map_err(|e| e.to_string()),
                };
                if let Err(e) = &ok {
                    tracing::debug!(key, error = %e, "cluster: a remembered entity's key was not written");
                }
                if let Some(done) = w.done {
                    done(ok.is_ok());
                }
            }
        }))
        .await;
    }
}
