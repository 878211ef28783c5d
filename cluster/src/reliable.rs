//! Reliable delivery to entities ([`ReliableEntityRef`]): at least once
//! across moves, and exactly once and in order per sender across a
//! graceful move (a rebalance's hand-off, a node's leave).
//!
//! The sending region numbers its messages per entity (one producer per
//! region run, a random id), keeps each until the entity's owner confirms
//! it, and sends again what stays unconfirmed for
//! `reliable-resend-after` since the last progress: to wherever the shard
//! is then. The owner of the shard keeps, per entity and producer, the
//! last number it handed to the entity and the last one the entity has
//! handled (its *dedup* state), hands an entity only the next number,
//! drops duplicates and gaps, and confirms (cumulatively, batched per
//! turn of the region) what the entity has handled: a receipt
//! ([`ActorRef::tell_receipt`]) goes behind each turn's messages for an
//! entity, and tells the region when it runs.
//!
//! The dedup state moves with the shard on a hand-off: the old owner
//! writes it to the bucket (`d.<type>.<shard>`) before it frees the
//! shard's record, and the new owner, which can only get the shard after
//! that (the bucket's order), starts from it. So a message confirmed by
//! the old owner is never handed to the entity again by the new one, and
//! one the old owner never confirmed is sent again and handed over once.
//! After a crash the state is not written: the new owner starts from the
//! last one written (or none), and messages the old owner handed over but
//! had not confirmed yet are handed over again (at least once). Since a
//! message is confirmed only once the entity has handled it (as Akka's
//! `ShardingConsumerController` confirms after processing), what waited
//! in a crashed owner's mailbox is sent again, not lost; an entity that
//! terminates with messages in its mailbox (it stopped itself, or was
//! stopped) has them handed to its next incarnation.

use std::collections::{HashMap, HashSet, VecDeque};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use proscenium::ActorRef;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::ClusterError;
use crate::region::RegionCmd;

/// A reliable message's number, and whose it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Seq {
    /// The producer (random, one per sending region's run).
    pub(crate) producer: u64,
    /// The producer's node: where confirmations go.
    pub(crate) node: String,
    /// This message's number for its entity, from 1.
    pub(crate) seq: u64,
    /// The producer's first unconfirmed number for the entity when it sent
    /// this: everything before is confirmed (an owner with no state for
    /// the producer starts there).
    pub(crate) first: u64,
}

/// What is waiting for confirmation for one entity.
struct Outgoing<M> {
    /// The number of `buffer[0]`.
    first: u64,
    /// The next number to give.
    next: u64,
    buffer: VecDeque<M>,
    /// The last confirmation, or the first send after one.
    progress: Instant,
    clone: fn(&M) -> M,
}

/// A region's sending side of reliable delivery.
pub(crate) struct Producer<M> {
    pub(crate) id: u64,
    node: String,
    entities: HashMap<String, Outgoing<M>>,
    /// The entities with messages unconfirmed (what `due` looks at).
    waiting: HashSet<String>,
    /// Unconfirmed messages, all entities together (shared with the refs,
    /// which refuse past the limit).
    pub(crate) unconfirmed: Arc<AtomicUsize>,
}

impl<M> Producer<M> {
    pub(crate) fn new(node: String, unconfirmed: Arc<AtomicUsize>) -> Producer<M> {
        Producer {
            id: crate::lease::random_u64(),
            node,
            entities: HashMap::new(),
            waiting: HashSet::new(),
            unconfirmed,
        }
    }

    /// Numbers `msg` for entity `id` and keeps a copy: what to route.
    pub(crate) fn send(&mut self, id: &str, msg: M, clone: fn(&M) -> M) -> (M, Seq) {
        let out = self
            .entities
            .entry(id.to_owned())
            .or_insert_with(|| Outgoing {
                first: 1,
                next: 1,
                buffer: VecDeque::new(),
                progress: Instant::now(),
                clone,
            });
        if out.buffer.is_empty() {
            out.progress = Instant::now();
            self.waiting.insert(id.to_owned());
        }
        let seq = out.next;
        out.next += 1;
        out.buffer.push_back(clone(&msg));
        let seq = Seq {
            producer: self.id,
            node: self.node.clone(),
            seq,
            first: out.first,
        };
        (msg, seq)
    }

    /// Entity `id`'s owner confirmed everything up to `upto`.
    pub(crate) fn confirmed(&mut self, id: &str, upto: u64) {
        let Some(out) = self.entities.get_mut(id) else {
            return;
        };
        let mut done = 0;
        while out.first <= upto && out.buffer.pop_front().is_some() {
            out.first += 1;
            done += 1;
        }
        if done > 0 {
            out.progress = Instant::now();
            // Relaxed: a count for the refs' limit; no data is published
            // through it.
            self.unconfirmed.fetch_sub(done, Ordering::Relaxed);
        }
        // The entry stays when all is confirmed: its numbering goes on
        // (an owner would take a restart from 1 for duplicates).
        if out.buffer.is_empty() {
            self.waiting.remove(id);
        }
    }

    /// What has waited `after` since the last progress: sent again, at most
    /// `batch` messages per entity from its first unconfirmed one; not for
    /// the entities `skip` names (their messages wait in the region
    /// already).
    pub(crate) fn due(
        &mut self,
        after: Duration,
        batch: usize,
        skip: impl Fn(&str) -> bool,
    ) -> Vec<(String, M, Seq)> {
        let mut out = Vec::new();
        for id in &self.waiting {
            let Some(o) = self.entities.get_mut(id) else {
                continue;
            };
            if o.buffer.is_empty() || o.progress.elapsed() < after || skip(id) {
                continue;
            }
            o.progress = Instant::now();
            for (i, m) in o.buffer.iter().take(batch).enumerate() {
                out.push((
                    id.clone(),
                    (o.clone)(m),
                    Seq {
                        producer: self.id,
                        node: self.node.clone(),
                        seq: o.first + i as u64,
                        first: o.first,
                    },
                ));
            }
        }
        out
    }
}

/// What the owner does with a reliable message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The next one: hand it to the entity.
    Next,
    /// Handed over before: dropped (its confirmation sent again).
    Duplicate,
    /// One before it is missing: dropped (sent again from the gap).
    Gap,
}

/// One producer's progress at an entity: the last number handed to it
/// (in its mailbox, or handled), and the last it has handled (a receipt
/// behind it ran: confirmed).
#[derive(Debug, Clone)]
struct Seen {
    upto: u64,
    handled: u64,
    node: String,
    last: Instant,
}

/// A shard's dedup state: per entity and producer, the last number handed
/// to the entity and the last it has handled.
#[derive(Debug, Default)]
pub(crate) struct Dedup {
    entities: HashMap<String, HashMap<u64, Seen>>,
}

/// The dedup state as the bucket keeps it: (entity, producer, node, upto).
#[derive(Serialize, Deserialize)]
struct DedupRecord {
    entries: Vec<(String, u64, String, u64)>,
}

impl Dedup {
    /// What to do with `seq` for entity `id`.
    pub(crate) fn check(&self, id: &str, seq: &Seq) -> Verdict {
        let upto = self.upto(id, seq);
        if seq.seq <= upto {
            Verdict::Duplicate
        } else if seq.seq == upto + 1 {
            Verdict::Next
        } else {
            Verdict::Gap
        }
    }

    /// The last number of `seq`'s producer handed to entity `id` (with no
    /// state: the one before the producer's first unconfirmed).
    pub(crate) fn upto(&self, id: &str, seq: &Seq) -> u64 {
        self.entities
            .get(id)
            .and_then(|p| p.get(&seq.producer))
            .map_or(seq.first.saturating_sub(1), |s| {
                s.upto.max(seq.first.saturating_sub(1))
            })
    }

    /// The last number of `seq`'s producer that entity `id` has handled
    /// (with no state: the one before the producer's first unconfirmed).
    pub(crate) fn handled_upto(&self, id: &str, seq: &Seq) -> u64 {
        let before_first = seq.first.saturating_sub(1);
        self.entities
            .get(id)
            .and_then(|p| p.get(&seq.producer))
            .map_or(before_first, |s| s.handled.max(before_first))
    }

    /// `seq` was handed to entity `id`.
    pub(crate) fn accept(&mut self, id: &str, seq: &Seq) {
        let before_first = seq.first.saturating_sub(1);
        let seen = self
            .entities
            .entry(id.to_owned())
            .or_default()
            .entry(seq.producer)
            .or_insert_with(|| Seen {
                upto: 0,
                handled: before_first,
                node: seq.node.clone(),
                last: Instant::now(),
            });
        seen.upto = seq.seq;
        seen.handled = seen.handled.max(before_first).min(seq.seq);
        seen.last = Instant::now();
    }

    /// Entity `id` has handled `producer`'s messages up to `upto`.
    pub(crate) fn handled(&mut self, id: &str, producer: u64, upto: u64) {
        if let Some(s) = self.entities.get_mut(id).and_then(|p| p.get_mut(&producer)) {
            s.handled = s.handled.max(upto.min(s.upto));
        }
    }

    /// Entity `id` has terminated: what it was handed and had not handled
    /// is lost with its mailbox, and is handed over again when sent again.
    pub(crate) fn gone(&mut self, id: &str) {
        if let Some(p) = self.entities.get_mut(id) {
            for s in p.values_mut() {
                s.upto = s.handled;
            }
        }
    }

    /// Forgets the producers not heard from within `keep` (an owner with
    /// no state for a producer takes its first unconfirmed number as the
    /// next: nothing confirmed is sent again, so nothing is handed over
    /// twice unless a confirmation stayed lost for all of `keep`).
    pub(crate) fn prune(&mut self, keep: Duration) {
        self.entities.retain(|_, p| {
            p.retain(|_, s| s.last.elapsed() < keep);
            !p.is_empty()
        });
    }

    /// The state to hand to the shard's next owner: producers heard from
    /// within `keep`. `None` when there is nothing.
    pub(crate) fn encode(&self, keep: Duration) -> Option<Bytes> {
        let entries: Vec<_> = self
            .entities
            .iter()
            .flat_map(|(id, p)| {
                p.iter()
                    .filter(|(_, s)| s.last.elapsed() < keep)
                    .map(move |(producer, s)| (id.clone(), *producer, s.node.clone(), s.handled))
            })
            .collect();
        (!entries.is_empty()).then(|| crate::store::encode(&DedupRecord { entries }))
    }

    /// The state a shard's previous owner wrote (empty if it does not
    /// decode: at least once then, never lost).
    pub(crate) fn decode(bytes: &[u8]) -> Dedup {
        let mut d = Dedup::default();
        if let Some(r) = crate::store::decode::<DedupRecord>(bytes) {
            for (id, producer, node, upto) in r.entries {
                d.entities.entry(id).or_default().insert(
                    producer,
                    Seen {
                        upto,
                        handled: upto,
                        node,
                        last: Instant::now(),
                    },
                );
            }
        }
        d
    }
}

/// A reference to one entity that delivers each message at least once
/// across moves of its shard (its owner's crash included), and exactly
/// once and in order (per sending node) across a graceful move: a
/// rebalance's hand-off, or its node's leave. From
/// [`Region::reliable_entity_ref`](crate::Region::reliable_entity_ref).
///
/// The sending node's region keeps each message until the entity's owner
/// confirms that the entity has *handled* it (a receipt queued behind it
/// in the entity's mailbox ran: [`ActorRef::tell_receipt`]), and sends
/// again what is not confirmed after
/// [`reliable_resend_after`](crate::ClusterSettings::reliable_resend_after);
/// the owner hands the entity each number once and in order, and hands
/// its record of what was handled to the shard's next owner on a
/// hand-off. After a crash of the owner, or of the entity, messages it
/// had been handed but had not handled are handed over again (at least
/// once): nothing in a mailbox is lost with it. The entity's code needs
/// no change. See docs/decisions/0030-cluster-sharding.md, "Reliable
/// delivery".
///
/// The region keeps at most `buffer-size` unconfirmed messages, all its
/// reliable refs together: past that [`tell`](Self::tell) refuses,
/// nothing is dropped. It also keeps, for every entity it ever sent to
/// reliably, that entity's next number (a few dozen bytes and the id: a
/// numbering that started again would be taken for duplicates); an
/// owner forgets a producer not heard from for ten minutes. The sending node's own crash loses what it had not
/// had confirmed.
pub struct ReliableEntityRef<M: Send + 'static> {
    pub(crate) region: ActorRef<RegionCmd<M>>,
    pub(crate) id: Arc<str>,
    pub(crate) unconfirmed: Arc<AtomicUsize>,
    pub(crate) limit: usize,
    pub(crate) _m: PhantomData<fn(M)>,
}

impl<M: Send + 'static> Clone for ReliableEntityRef<M> {
    fn clone(&self) -> Self {
        ReliableEntityRef {
            region: self.region.clone(),
            id: Arc::clone(&self.id),
            unconfirmed: Arc::clone(&self.unconfirmed),
            limit: self.limit,
            _m: PhantomData,
        }
    }
}

impl<M: Send + 'static> std::fmt::Debug for ReliableEntityRef<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReliableEntityRef")
            .field("id", &self.id)
            .finish()
    }
}

impl<M: Serialize + DeserializeOwned + Clone + Send + 'static> ReliableEntityRef<M> {
    /// The entity's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Sends `msg` to the entity, to be confirmed and sent again until it
    /// is. [`ClusterError::ReliableFull`] (nothing sent) while the region
    /// has `buffer-size` messages unconfirmed.
    pub fn tell(&self, msg: M) -> Result<(), ClusterError> {
        // Relaxed: a count against a limit (a few over it in a race is
        // harmless); the message itself goes through the region's mailbox.
        let before = self.unconfirmed.fetch_add(1, Ordering::Relaxed);
        if before >= self.limit {
            self.unconfirmed.fetch_sub(1, Ordering::Relaxed);
            return Err(ClusterError::ReliableFull { limit: self.limit });
        }
        self.region.tell(RegionCmd::SendReliable {
            id: self.id.to_string(),
            msg,
            clone: <M as Clone>::clone,
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(producer: u64, seq: u64, first: u64) -> Seq {
        Seq {
            producer,
            node: "a".into(),
            seq,
            first,
        }
    }

    #[test]
    fn the_owner_hands_over_the_next_number_only() {
        let mut d = Dedup::default();
        assert_eq!(d.check("e", &seq(1, 2, 1)), Verdict::Gap);
        assert_eq!(d.check("e", &seq(1, 1, 1)), Verdict::Next);
        d.accept("e", &seq(1, 1, 1));
        assert_eq!(d.check("e", &seq(1, 1, 1)), Verdict::Duplicate);
        assert_eq!(d.check("e", &seq(1, 2, 1)), Verdict::Next);
        // Another producer, another entity: their own numbers.
        assert_eq!(d.check("e", &seq(2, 1, 1)), Verdict::Next);
        assert_eq!(d.check("f", &seq(1, 1, 1)), Verdict::Next);
        // No state, the producer's first unconfirmed is 7: 7 is next.
        assert_eq!(d.check("g", &seq(1, 7, 7)), Verdict::Next);
        assert_eq!(d.check("g", &seq(1, 6, 7)), Verdict::Duplicate);
    }

    /// Confirmed only once handled; an entity that terminates loses what
    /// it had not handled, and it is handed over again when sent again.
    #[test]
    fn what_an_entity_did_not_handle_is_handed_over_again_after_it_is_gone() {
        let mut d = Dedup::default();
        for n in 1..=3 {
            d.accept("e", &seq(1, n, 1));
        }
        assert_eq!(d.handled_upto("e", &seq(1, 3, 1)), 0);
        d.handled("e", 1, 2);
        assert_eq!(d.handled_upto("e", &seq(1, 3, 1)), 2);
        // 3 is in the running entity's mailbox: a duplicate.
        assert_eq!(d.check("e", &seq(1, 3, 1)), Verdict::Duplicate);
        // Never past what was handed.
        d.handled("e", 1, 9);
        assert_eq!(d.handled_upto("e", &seq(1, 3, 1)), 3);
        d.accept("e", &seq(1, 4, 1));
        d.gone("e");
        assert_eq!(d.check("e", &seq(1, 4, 1)), Verdict::Next);
        assert_eq!(d.check("e", &seq(1, 3, 1)), Verdict::Duplicate);
    }

    #[test]
    fn a_pruned_owner_takes_the_first_unconfirmed_number_as_the_next() {
        let mut d = Dedup::default();
        d.accept("e", &seq(1, 5, 1));
        d.prune(Duration::from_secs(60));
        assert_eq!(
            d.check("e", &seq(1, 6, 1)),
            Verdict::Next,
            "kept: heard from just now"
        );
        d.prune(Duration::ZERO);
        // Forgotten: 6 is next only if the producer says 1 to 5 are
        // confirmed (its first unconfirmed is 6), never 1 again.
        assert_eq!(d.check("e", &seq(1, 6, 6)), Verdict::Next);
        assert_eq!(d.check("e", &seq(1, 5, 6)), Verdict::Duplicate);
        assert_eq!(d.check("e", &seq(1, 7, 6)), Verdict::Gap);
    }

    #[test]
    fn the_dedup_state_survives_the_bucket() {
        let mut d = Dedup::default();
        d.accept("e", &seq(1, 5, 1));
        d.handled("e", 1, 5);
        d.accept("f", &seq(2, 9, 3));
        d.handled("f", 2, 9);
        // Handed up to 4, handled up to 2: what the next owner gets is
        // what was handled (3 and 4 went with the old owner's mailbox).
        for n in 1..=4 {
            d.accept("g", &seq(3, n, 1));
        }
        d.handled("g", 3, 2);
        let bytes = d.encode(Duration::from_secs(60)).expect("state");
        let back = Dedup::decode(&bytes);
        assert_eq!(back.check("e", &seq(1, 5, 1)), Verdict::Duplicate);
        assert_eq!(back.check("e", &seq(1, 6, 1)), Verdict::Next);
        assert_eq!(back.check("f", &seq(2, 10, 3)), Verdict::Next);
        assert_eq!(back.check("g", &seq(3, 2, 1)), Verdict::Duplicate);
        assert_eq!(back.check("g", &seq(3, 3, 1)), Verdict::Next);
        assert!(Dedup::default().encode(Duration::from_secs(60)).is_none());
        // Garbage: no state (at least once), never a panic.
        assert_eq!(
            Dedup::decode(b"\xff\xff\xff").check("e", &seq(1, 1, 1)),
            Verdict::Next
        );
    }

    #[test]
    fn the_producer_keeps_what_is_unconfirmed_and_sends_it_again() {
        let count = Arc::new(AtomicUsize::new(0));
        let mut p = Producer::<u32>::new("a".into(), Arc::clone(&count));
        for m in 0..5 {
            count.fetch_add(1, Ordering::Relaxed);
            let (_, s) = p.send("e", m, u32::clone);
            assert_eq!(s.seq, u64::from(m) + 1);
            assert_eq!(s.first, 1);
        }
        p.confirmed("e", 3);
        assert_eq!(count.load(Ordering::Relaxed), 2);
        let again = p.due(Duration::ZERO, 10, |_| false);
        let numbers: Vec<(u32, u64, u64)> =
            again.iter().map(|(_, m, s)| (*m, s.seq, s.first)).collect();
        assert_eq!(numbers, vec![(3, 4, 4), (4, 5, 4)]);
        p.confirmed("e", 5);
        assert_eq!(count.load(Ordering::Relaxed), 0);
        assert!(p.due(Duration::ZERO, 10, |_| false).is_empty());
        // A later message starts after the confirmed ones.
        let (_, s) = p.send("e", 9, u32::clone);
        assert_eq!((s.seq, s.first), (6, 6));
    }
}
