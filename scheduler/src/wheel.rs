//! A hierarchical hashed timing wheel (Varghese & Lauck; the layout of
//! tokio's `runtime/time/wheel`): 6 levels of 64 slots, 1 ms per slot at
//! level 0, 64 ms at level 1, and so on, about 2.2 years in all.
//!
//! Insert is O(1): the level is the highest 6-bit group in which the
//! deadline differs from the current time. Cancellation is O(1) and lazy
//! (the entry is marked, and dropped when its slot comes up). Advancing
//! visits only occupied slots (a 64-bit occupancy mask per level), and an
//! entry is touched at most once per level on its way down.
//!
//! Owned by the timer thread; not shared.

/// Slots per level (a power of two: 6 bits of the deadline per level).
const SLOTS: usize = 64;
/// Levels.
const LEVELS: usize = 6;
/// The longest delay the wheel can hold, in ticks; longer ones are clamped.
pub(crate) const MAX_TICKS: u64 = (1 << (6 * LEVELS)) - 1;

/// Something with a deadline, in ticks.
pub(crate) trait Deadline {
    fn when(&self) -> u64;

    /// Whether the entry no longer needs to fire (cancelled): it is then
    /// dropped when its slot comes up instead of being filed again on a
    /// lower level, so a wheel full of cancelled timeouts (one per ask)
    /// costs one visit each, not one per level.
    fn is_dead(&self) -> bool {
        false
    }
}

#[derive(Debug)]
pub(crate) struct Wheel<T> {
    /// The time up to which the wheel has been advanced, in ticks.
    elapsed: u64,
    levels: Vec<Level<T>>,
}

#[derive(Debug)]
struct Level<T> {
    /// Bit `i` set: `slots[i]` is non-empty.
    occupied: u64,
    slots: Vec<Vec<T>>,
}

/// The next slot to process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Expiration {
    level: usize,
    slot: usize,
    deadline: u64,
}

impl<T: Deadline> Wheel<T> {
    pub(crate) fn new() -> Wheel<T> {
        Wheel {
            elapsed: 0,
            levels: (0..LEVELS)
                .map(|_| Level {
                    occupied: 0,
                    slots: (0..SLOTS).map(|_| Vec::new()).collect(),
                })
                .collect(),
        }
    }

    /// Inserts `entry`, or hands it back if its deadline has already passed
    /// (the caller fires it).
    ///
    /// A deadline beyond the wheel's horizon (`elapsed + MAX_TICKS`) is
    /// filed at the horizon: when that slot comes up the entry is filed
    /// again, closer. The horizon is measured from `elapsed`, not from the
    /// clock: the wheel lags the clock while the timer thread sleeps, and a
    /// deadline filed more than `MAX_TICKS` past `elapsed` would wrap
    /// around the top level into the slot of `elapsed` itself, whose
    /// deadline is `elapsed`: `advance` would then re-file it there forever.
    pub(crate) fn insert(&mut self, entry: T) -> Result<(), T> {
        let when = entry.when();
        if when <= self.elapsed {
            return Err(entry);
        }
        let filed_at = when.min(self.elapsed.saturating_add(MAX_TICKS));
        let level = level_for(self.elapsed, filed_at);
        let slot = slot_for(filed_at, level);
        let lvl = &mut self.levels[level];
        lvl.slots[slot].push(entry);
        lvl.occupied |= 1 << slot;
        Ok(())
    }

    /// The deadline of the next slot to process, if any.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.next_expiration().map(|e| e.deadline)
    }

    /// Advances the wheel to `now`, calling `fire` for every entry whose
    /// deadline is at or before `now`, in deadline order (entries with the
    /// same deadline in insertion order). Entries found dead
    /// ([`Deadline::is_dead`]) on the way are dropped; one cancelled after
    /// that look is passed to `fire`, which decides.
    pub(crate) fn advance(&mut self, now: u64, mut fire: impl FnMut(T)) {
        while let Some(exp) = self.next_expiration() {
            if exp.deadline > now {
                break;
            }
            self.elapsed = exp.deadline;
            let lvl = &mut self.levels[exp.level];
            let entries = std::mem::take(&mut lvl.slots[exp.slot]);
            lvl.occupied &= !(1 << exp.slot);
            for entry in entries {
                if entry.is_dead() {
                    continue;
                }
                if let Err(due) = self.insert(entry) {
                    fire(due);
                }
            }
        }
        if now > self.elapsed {
            self.elapsed = now;
        }
    }

    /// Removes every entry (at shutdown).
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.levels.iter_mut().flat_map(|lvl| {
            lvl.occupied = 0;
            lvl.slots.iter_mut().flat_map(std::mem::take)
        })
    }

    fn next_expiration(&self) -> Option<Expiration> {
        // Lower levels hold earlier deadlines than higher ones (an entry sits
        // at the level of the highest bit group in which it differs from
        // `elapsed`), so the first level with anything is the one.
        self.levels
            .iter()
            .enumerate()
            .find_map(|(level, lvl)| lvl.next_expiration(level, self.elapsed))
    }
}

impl<T> Level<T> {
    fn next_expiration(&self, level: usize, now: u64) -> Option<Expiration> {
        if self.occupied == 0 {
            return None;
        }
        let slot_range = slot_range(level);
        let level_range = slot_range * SLOTS as u64;
        let now_slot = (now / slot_range) as u32;
        let rotated = self.occupied.rotate_right(now_slot % SLOTS as u32);
        let slot = (rotated.trailing_zeros() as usize + now_slot as usize) % SLOTS;
        let level_start = now & !(level_range - 1);
        let mut deadline = level_start + slot as u64 * slot_range;
        if deadline < now {
            // Only at the top level, whose slots act as a ring: a slot
            // "before" now is one rotation ahead.
            deadline += level_range;
        }
        Some(Expiration {
            level,
            slot,
            deadline,
        })
    }
}

fn slot_range(level: usize) -> u64 {
    (SLOTS as u64).pow(level as u32)
}

fn slot_for(when: u64, level: usize) -> usize {
    ((when >> (6 * level)) % SLOTS as u64) as usize
}

fn level_for(elapsed: u64, when: u64) -> usize {
    // The low 6 bits are or-ed in so that a deadline in the current 64-tick
    // window lands at level 0.
    let mut masked = (elapsed ^ when) | (SLOTS as u64 - 1);
    if masked > MAX_TICKS {
        masked = MAX_TICKS;
    }
    let significant = 63 - masked.leading_zeros() as usize;
    significant / 6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq, Clone, Copy)]
    struct E(u64, u32);
    impl Deadline for E {
        fn when(&self) -> u64 {
            self.0
        }
    }

    #[test]
    fn fires_in_deadline_order_across_levels() {
        let mut wheel = Wheel::new();
        let deadlines = [1u64, 5, 63, 64, 65, 100, 4095, 4096, 4097, 300_000, 7, 64];
        for (i, d) in deadlines.iter().enumerate() {
            wheel.insert(E(*d, i as u32)).expect("in the future");
        }
        let mut fired = Vec::new();
        let mut now = 0;
        while now < 400_000 {
            now += 37;
            wheel.advance(now, |e| {
                assert!(e.0 <= now, "fired early: {e:?} at {now}");
                assert!(now - e.0 < 37, "fired late: {e:?} at {now}");
                fired.push(e);
            });
        }
        let mut expected: Vec<E> = deadlines
            .iter()
            .enumerate()
            .map(|(i, d)| E(*d, i as u32))
            .collect();
        expected.sort_by_key(|e| (e.0, e.1));
        assert_eq!(fired, expected);
        assert_eq!(wheel.next_deadline(), None);
    }

    #[test]
    fn next_deadline_is_exact_at_level_zero_and_a_lower_bound_above() {
        let mut wheel = Wheel::new();
        wheel.insert(E(10, 0)).expect("future");
        assert_eq!(wheel.next_deadline(), Some(10));
        wheel.insert(E(1000, 1)).expect("future");
        assert_eq!(wheel.next_deadline(), Some(10));
        wheel.advance(10, |_| {});
        let next = wheel.next_deadline().expect("one left");
        assert!(next <= 1000);
        let mut fired = Vec::new();
        wheel.advance(999, |e| fired.push(e));
        assert!(fired.is_empty());
        wheel.advance(1000, |e| fired.push(e));
        assert_eq!(fired, vec![E(1000, 1)]);
    }

    /// Regression (issue 12, item 2): beyond the horizon from `elapsed`
    /// (the wheel lags the clock), an entry wrapped into the current
    /// top-level slot and `advance` spun on it forever.
    #[test]
    fn a_deadline_beyond_the_horizon_is_filed_at_the_horizon() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut wheel = Wheel::new();
            // The clock says 20 when a `Duration::MAX` timer is clamped to
            // `20 + MAX_TICKS`; the wheel was last advanced at 0.
            wheel.insert(E(20 + MAX_TICKS, 0)).expect("future");
            let mut fired = Vec::new();
            wheel.advance(20, |e| fired.push(e));
            wheel.insert(E(21, 1)).expect("future");
            wheel.advance(21, |e| fired.push(e));
            let next = wheel.next_deadline().expect("the far entry is left");
            assert!(next > 21 && next <= 20 + MAX_TICKS, "{next}");
            // Right up to its deadline, it fires exactly once, on time.
            let mut now = 21;
            while wheel.next_deadline().is_some() {
                now = wheel.next_deadline().expect("checked");
                wheel.advance(now, |e| fired.push(e));
            }
            tx.send((fired, now)).expect("receiver waits");
        });
        let (fired, now) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("advance returned (it spun before the fix)");
        assert_eq!(fired, vec![E(21, 1), E(20 + MAX_TICKS, 0)]);
        assert_eq!(now, 20 + MAX_TICKS);
    }

    /// An entry that says it is dead is dropped when its slot comes up,
    /// not filed again on a lower level (nor fired).
    #[test]
    fn dead_entries_are_dropped_when_their_slot_comes_up() {
        #[derive(Debug)]
        struct Maybe(u64, std::rc::Rc<std::cell::Cell<bool>>);
        impl Deadline for Maybe {
            fn when(&self) -> u64 {
                self.0
            }
            fn is_dead(&self) -> bool {
                self.1.get()
            }
        }
        let dead = std::rc::Rc::new(std::cell::Cell::new(false));
        let mut wheel = Wheel::new();
        wheel.insert(Maybe(5000, dead.clone())).expect("future");
        wheel
            .insert(Maybe(5001, std::rc::Rc::default()))
            .expect("future");
        dead.set(true);
        let mut fired = Vec::new();
        wheel.advance(6000, |e| fired.push(e.0));
        assert_eq!(fired, vec![5001]);
        assert_eq!(std::rc::Rc::strong_count(&dead), 1, "dropped");
    }

    #[test]
    fn past_deadline_is_handed_back() {
        let mut wheel = Wheel::new();
        wheel.advance(50, |_: E| {});
        assert_eq!(wheel.insert(E(50, 0)), Err(E(50, 0)));
        assert_eq!(wheel.insert(E(51, 0)), Ok(()));
    }
}
