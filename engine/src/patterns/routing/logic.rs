//! Routing logics: which routee gets the next message. Each runs inside the
//! router actor, one message at a time, so its state (a cursor, an RNG, a
//! hash ring) is plain data: choosing a routee takes no lock, no atomic
//! read-modify-write and no allocation.

use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use crate::api::actor_ref::ActorRef;

/// A key function, already hashed: `Fn(&M) -> K` composed with a fixed
/// hasher (see [`stable_hash`]).
pub(crate) type KeyHash<M> = Arc<dyn Fn(&M) -> u64 + Send + Sync>;

/// The recipe of a logic, kept by the router's configuration; every router
/// incarnation (a restart included) builds a fresh [`Logic`] from it.
pub(crate) enum LogicKind<M> {
    RoundRobin,
    Random {
        seed: Option<u64>,
    },
    SmallestMailbox,
    ConsistentHashing {
        key: KeyHash<M>,
        virtual_nodes: usize,
    },
    Broadcast {
        clone: fn(&M) -> M,
    },
}

impl<M> Clone for LogicKind<M> {
    fn clone(&self) -> LogicKind<M> {
        match self {
            LogicKind::RoundRobin => LogicKind::RoundRobin,
            LogicKind::Random { seed } => LogicKind::Random { seed: *seed },
            LogicKind::SmallestMailbox => LogicKind::SmallestMailbox,
            LogicKind::ConsistentHashing { key, virtual_nodes } => LogicKind::ConsistentHashing {
                key: Arc::clone(key),
                virtual_nodes: *virtual_nodes,
            },
            LogicKind::Broadcast { clone } => LogicKind::Broadcast { clone: *clone },
        }
    }
}

impl<M> fmt::Debug for LogicKind<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LogicKind::RoundRobin => "RoundRobin",
            LogicKind::Random { .. } => "Random",
            LogicKind::SmallestMailbox => "SmallestMailbox",
            LogicKind::ConsistentHashing { .. } => "ConsistentHashing",
            LogicKind::Broadcast { .. } => "Broadcast",
        })
    }
}

/// Where a message goes.
pub(crate) enum Selection<M> {
    /// To the routee at this index.
    One(usize),
    /// To every routee (a clone each, made with this function).
    All(fn(&M) -> M),
    /// Nowhere: there is no routee (dead letters).
    Nobody,
}

/// A logic's running state.
pub(crate) enum Logic<M> {
    RoundRobin {
        next: usize,
    },
    Random(XorShift),
    SmallestMailbox {
        next: usize,
    },
    ConsistentHashing {
        key: KeyHash<M>,
        virtual_nodes: usize,
        ring: Ring,
    },
    Broadcast {
        clone: fn(&M) -> M,
    },
}

impl<M: Send + 'static> Logic<M> {
    /// A fresh logic; `seed` feeds the random logic when no seed was set.
    pub(crate) fn new(kind: &LogicKind<M>, seed: u64) -> Logic<M> {
        match kind {
            LogicKind::RoundRobin => Logic::RoundRobin { next: 0 },
            LogicKind::Random { seed: fixed } => {
                Logic::Random(XorShift::new(fixed.unwrap_or(seed)))
            }
            LogicKind::SmallestMailbox => Logic::SmallestMailbox { next: 0 },
            LogicKind::ConsistentHashing { key, virtual_nodes } => Logic::ConsistentHashing {
                key: Arc::clone(key),
                virtual_nodes: *virtual_nodes,
                ring: Ring::default(),
            },
            LogicKind::Broadcast { clone } => Logic::Broadcast { clone: *clone },
        }
    }

    /// Chooses where `msg` goes among `routees`.
    #[inline]
    pub(crate) fn select(&mut self, msg: &M, routees: &[ActorRef<M>]) -> Selection<M> {
        let n = routees.len();
        if n == 0 {
            return Selection::Nobody;
        }
        match self {
            Logic::RoundRobin { next } => {
                if *next >= n {
                    *next = 0;
                }
                let i = *next;
                *next += 1;
                Selection::One(i)
            }
            Logic::Random(rng) => Selection::One(rng.below(n)),
            Logic::SmallestMailbox { next } => {
                if *next >= n {
                    *next = 0;
                }
                let start = *next;
                *next += 1;
                Selection::One(smallest_mailbox(start, routees))
            }
            Logic::ConsistentHashing { key, ring, .. } => match ring.lookup(key(msg)) {
                Some(i) => Selection::One(i),
                None => Selection::Nobody,
            },
            Logic::Broadcast { clone } => Selection::All(*clone),
        }
    }

    /// The routing table changed: rebuild what depends on it.
    pub(crate) fn routees_changed(&mut self, routees: &[ActorRef<M>]) {
        if let Logic::ConsistentHashing {
            virtual_nodes,
            ring,
            ..
        } = self
        {
            *ring = Ring::build(routees, *virtual_nodes);
        }
    }
}

impl<M> fmt::Debug for Logic<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Logic::RoundRobin { .. } => "RoundRobin",
            Logic::Random(_) => "Random",
            Logic::SmallestMailbox { .. } => "SmallestMailbox",
            Logic::ConsistentHashing { .. } => "ConsistentHashing",
            Logic::Broadcast { .. } => "Broadcast",
        })
    }
}

/// The load score of an unbounded routee that is busy: its queue length is
/// not kept (that would cost every send an atomic), so all busy unbounded
/// routees score the same, above any bounded routee with fewer than 2^32
/// messages.
const UNKNOWN_BUSY: u64 = 1 << 32;

/// A routee's load, read from its mailbox without touching the queue: 0 when
/// it is idle (not scheduled: nothing queued, nothing running), else 1 for
/// "scheduled or running" plus the queue length where the mailbox is bounded
/// (the only kind that counts). A terminated routee scores highest.
pub(crate) fn load<M: Send + 'static>(routee: &ActorRef<M>) -> u64 {
    let mailbox = &routee.cell.mailbox;
    let state = mailbox.snapshot();
    if state.is_closed() {
        return u64::MAX;
    }
    let busy = u64::from(state.is_scheduled());
    match mailbox.user_len() {
        Some(queued) => busy + queued as u64,
        None if busy == 1 => UNKNOWN_BUSY,
        None => 0,
    }
}

/// Akka's SmallestMailboxRoutingLogic: the first idle routee (looking from
/// a rotating start, so idle routees share the work), else the one with the
/// fewest queued messages.
fn smallest_mailbox<M: Send + 'static>(start: usize, routees: &[ActorRef<M>]) -> usize {
    let n = routees.len();
    let (mut best, mut best_load) = (start, u64::MAX);
    for k in 0..n {
        let i = if start + k >= n {
            start + k - n
        } else {
            start + k
        };
        let l = load(&routees[i]);
        if l == 0 {
            return i;
        }
        if l < best_load {
            (best, best_load) = (i, l);
        }
    }
    best
}

/// Hashes with SipHash under fixed keys: the same value hashes the same in
/// every router and every run of one build, so a key keeps its routee
/// across router restarts.
pub(crate) fn stable_hash<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// A consistent-hash ring: `virtual_nodes` points per routee, placed by
/// hashing the routee's path with the point's number. A key belongs to the
/// first point at or after its hash (wrapping), so adding a routee moves
/// only the keys that now fall on its points, and removing one moves only
/// its own keys.
#[derive(Debug, Default)]
pub(crate) struct Ring {
    /// (point, routee index), sorted by point.
    points: Vec<(u64, usize)>,
}

impl Ring {
    pub(crate) fn build<M: Send + 'static>(routees: &[ActorRef<M>], virtual_nodes: usize) -> Ring {
        let mut points = Vec::with_capacity(routees.len() * virtual_nodes);
        for (i, routee) in routees.iter().enumerate() {
            let path = routee.path();
            for v in 0..virtual_nodes {
                points.push((stable_hash(&(path.as_str(), v)), i));
            }
        }
        points.sort_unstable();
        Ring { points }
    }

    pub(crate) fn lookup(&self, hash: u64) -> Option<usize> {
        let at = self.points.partition_point(|&(p, _)| p < hash);
        let (_, i) = self.points.get(at).or_else(|| self.points.first())?;
        Some(*i)
    }
}

/// Marsaglia's xorshift64* generator: a few instructions per draw, plenty
/// for spreading messages (not for anything secret).
#[derive(Debug, Clone)]
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> XorShift {
        // splitmix64 of the seed: any seed, 0 included, gives a good state.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        XorShift(if z == 0 { 1 } else { z })
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (Lemire's multiply-shift; `n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_covers_the_range() {
        let mut rng = XorShift::new(0);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            seen[rng.below(7)] += 1;
        }
        assert!(seen.iter().all(|&c| c > 700), "{seen:?}");
    }

    #[test]
    fn an_empty_ring_has_no_owner() {
        assert_eq!(Ring::default().lookup(42), None);
    }

    #[test]
    fn a_ring_lookup_wraps_around() {
        let ring = Ring {
            points: vec![(10, 0), (20, 1)],
        };
        assert_eq!(ring.lookup(5), Some(0));
        assert_eq!(ring.lookup(10), Some(0));
        assert_eq!(ring.lookup(11), Some(1));
        assert_eq!(ring.lookup(21), Some(0));
    }
}
