//! The handshake by which a quiesce learns that every worker has parked:
//! a Dekker pair between the quiescing thread and the last worker to park.
//!
//! * **Quiesce**: under the gate's lock, store `quiescing`, a `SeqCst`
//!   fence, then read the idle state (and the queues); wait on the condvar
//!   while some worker is unparked.
//! * **Worker**: announce the park (a `SeqCst` read-modify-write of the
//!   idle state), a `SeqCst` fence (both in [`crate::idle::Idle::park_with`]),
//!   then, if it saw no worker left unparked, read `quiescing` and, if set,
//!   notify under the lock.
//!
//! The two fences are totally ordered: either the quiesce's read of the
//! idle state sees this worker parked, or the worker's read sees
//! `quiescing` and notifies, and since it notifies under the lock that the
//! quiesce holds from its store until it waits, the notify cannot fall
//! between the quiesce's check and its wait. The quiesce's fence is what
//! makes this checkable by loom, which treats `SeqCst` loads and stores as
//! Acquire/Release and models only `SeqCst` fences
//! (`loom-tests/tests/quiesce.rs`); it costs one fence per quiesce.

use crate::sync::{fence, lock, AtomicBool, Condvar, Mutex, MutexGuard, Ordering};

/// Where a quiesce waits for the workers to park (see the module docs).
#[derive(Debug, Default)]
pub struct QuiesceGate {
    /// Set (under `lock`) once a quiesce waits; read by the last worker to
    /// park.
    quiescing: AtomicBool,
    lock: Mutex<()>,
    condvar: Condvar,
}

impl QuiesceGate {
    /// A gate nobody waits at.
    pub fn new() -> QuiesceGate {
        QuiesceGate::default()
    }

    /// Called by a worker that announced its park (and fenced) and saw no
    /// worker left unparked.
    pub fn all_parked(&self) {
        // SeqCst: the worker's half of the Dekker pair (see the module
        // docs); its fence in `park_with` precedes this load.
        if self.quiescing.load(Ordering::SeqCst) {
            let _held = lock(&self.lock);
            self.condvar.notify_all();
        }
    }

    /// Marks the quiesce as started and waits until `drained` holds
    /// (`true`), or until `wait` gives up (returns `None`: `false`). `wait`
    /// blocks on the condvar with the lock's guard, as
    /// `Condvar::wait_timeout` does; `drained` runs under the lock.
    pub fn wait_until<'a>(
        &'a self,
        mut drained: impl FnMut() -> bool,
        mut wait: impl FnMut(&'a Condvar, MutexGuard<'a, ()>) -> Option<MutexGuard<'a, ()>>,
    ) -> bool {
        let mut held = lock(&self.lock);
        // SeqCst store, then a SeqCst fence before `drained` reads the idle
        // state: the quiesce's half of the Dekker pair.
        self.quiescing.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        loop {
            if drained() {
                return true;
            }
            match wait(&self.condvar, held) {
                Some(guard) => held = guard,
                None => return false,
            }
        }
    }
}
