//! The I/O reactor: one mio `Poll` per worker (a shard), created for every
//! worker on the first registration (a scheduler that never does I/O pays
//! nothing: no file descriptor), each polled by its own worker. A worker
//! about to park blocks in its own shard's poll instead of on its condvar
//! ([`Reactor::park`]); a submit that must wake it does so through the
//! shard's [`mio::Waker`] ([`Reactor::unpark_driver`], called by `Idle`).
//! The events it finds it dispatches itself, so the tasks they wake land in
//! its own queue and it runs them next: no hop through another thread, no
//! futex wake. A running worker also polls its shard without blocking
//! every `INJECTOR_INTERVAL` runs and whenever its queues run dry
//! ([`Reactor::poll_now`]), so its I/O is not starved while it is busy;
//! and the timer thread's stall monitor polls the shard of a worker stuck
//! in one run ([`Reactor::rescue`]), so a handler that runs long delays
//! its worker's I/O by about a monitor tick, not the whole run.
//!
//! Why a poll per worker (docs/decisions/0024-per-core-scaling.md): with
//! one poll, held by one parked worker at a time (tokio's design, this
//! reactor's first), every readiness event of every socket went through
//! that worker, and the tasks it woke had to be stolen by the others: on
//! 16 cores the HTTP server ran at half actix-web's rate at 32
//! connections. Here a source belongs to one shard for its life: a
//! connection's events are seen by the worker that owns its shard, its
//! task is woken into that worker's queue and runs there (unless an idle
//! worker steals it), and the workers share no reactor state on the way.
//!
//! Placement ([`Placement`]): a source registered by code running on one
//! of this scheduler's workers joins that worker's shard (its task runs
//! there already); a source registered from another thread, and every
//! connection a listener accepts, goes to the next shard in turn, so the
//! connections of one acceptor are spread over the workers (actix-web's
//! accept thread does the same).
//!
//! Each shard has a slab of slots for its sources; a mio [`Token`] packs
//! the slot's index and generation. The slot holds a [`ScheduledIo`]
//! (scheduled_io.rs): the source's readiness bits and its wakers. The
//! polling thread turns each event into readiness bits and wakes the
//! wakers; an I/O future polls [`Registration::poll_io`], which tries the
//! operation while the readiness bit is set, clears it on `WouldBlock` and
//! re-arms its waker.
//!
//! Registering is a lock of the shard's slab and a syscall on the caller's
//! thread. Deregistering removes the source from mio's registry *before*
//! freeing its slot and bumps the slot's generation, so an event already
//! read for a freed (or reused) slot carries an old generation and is
//! ignored.
//!
//! [`Reactor::shutdown`] (called by the scheduler's quiesce and drop) stops
//! the polling (waking every worker in its poll through its
//! [`mio::Waker`]; no worker polls afterwards) and marks every source shut
//! down, waking its wakers: a pending I/O future then fails with an
//! [`io::ErrorKind::Other`] error "scheduler shut down" (whose inner error
//! is a [`SchedulerShutDown`], which [`crate::net::is_shut_down`] tells
//! apart from the reactor's other `Other` errors); a registration
//! afterwards fails the same way.

use crate::park::Parker;
pub(crate) use crate::scheduled_io::{shut_down_error, Direction};
use crate::scheduled_io::{
    ReadyEvent, ScheduledIo, READABLE, READ_CLOSED, SHUTDOWN, WRITABLE, WRITE_CLOSED,
};
use crate::sync::{lock, try_lock, Arc, AtomicBool, AtomicUsize, Mutex, OnceLock, Ordering};
use crossbeam_utils::CachePadded;
use mio::event::Source;
use mio::{Events, Interest, Token};
use std::fmt;
use std::io;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Bits of a token that hold the slot index.
const INDEX_BITS: u32 = 24;
/// Mask of the slot index in a token.
const INDEX_MASK: usize = (1 << INDEX_BITS) - 1;
/// Largest generation (wraps to 0).
const GENERATION_MAX: usize = usize::MAX >> INDEX_BITS;
/// Slots at most per shard: one index is kept free so that no slot's token
/// can equal [`WAKER_TOKEN`].
const MAX_SOURCES: usize = INDEX_MASK;
/// The token of each shard's [`mio::Waker`].
const WAKER_TOKEN: Token = Token(usize::MAX);
/// Events read per `poll` call.
const EVENTS_CAPACITY: usize = 1024;

/// Which shard a new source joins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// The shard of the worker `Some(index)` registering it (the caller
    /// runs on it), or the next shard in turn from any other thread.
    Current(Option<usize>),
    /// The next shard in turn (the connections a listener accepts).
    Spread,
}

/// A shard's registry and waker, shared with every registration of the
/// shard (which deregisters through `registry`).
struct Driver {
    /// A clone of the `Poll`'s registry (the `Poll` itself is in
    /// `Shard::poller`).
    registry: mio::Registry,
    /// Wakes the worker blocked in this shard's `poll` (for a submit, and
    /// for shutdown).
    waker: mio::Waker,
}

/// A shard's poll and what a turn of it needs; held (locked) by whoever
/// polls: its worker (blocking or not) or the stall monitor (never
/// blocking).
struct Poller {
    poll: mio::Poll,
    events: Events,
    /// Wakers taken from the slab under its lock, woken after it.
    wakers: Vec<Waker>,
}

struct Slot {
    generation: usize,
    io: Option<Arc<ScheduledIo>>,
}

/// A shard's sources.
#[derive(Default)]
struct Slab {
    slots: Vec<Slot>,
    /// Indices of free slots.
    free: Vec<usize>,
}

/// One worker's part of the reactor.
struct Shard {
    /// The shard's sources. Locked by registration and deregistration (on
    /// whatever thread), by shutdown, and by the polling thread once per
    /// batch of events. Also where a registration checks `stop`.
    slab: Mutex<Slab>,
    /// The poll: `None` after `close`. Its worker locks it to poll (and
    /// holds it while blocked in the poll); anyone else only `try_lock`s
    /// it, so no thread ever waits for a worker's poll.
    poller: Mutex<Option<Poller>>,
    /// The registry and waker: `None` after `close`.
    driver: Mutex<Option<Arc<Driver>>>,
}

enum Phase {
    /// No source was ever registered: no descriptor.
    NotStarted,
    Running,
    ShutDown,
}

struct ReactorInner {
    /// Start and shutdown, serialised.
    phase: Mutex<Phase>,
    /// One shard per worker, by worker index; set once, by the first
    /// registration (under `phase`'s lock). A running worker skips the
    /// poll with one load of this (a line nobody writes afterwards).
    shards: OnceLock<Box<[CachePadded<Shard>]>>,
    /// Set once, by `shutdown`; read before taking a poll, each time a
    /// poll returns, and by a registration under its shard's slab lock.
    stop: AtomicBool,
    /// The next shard for a source placed in turn.
    next: AtomicUsize,
    workers: usize,
}

/// The scheduler's reactor (a cheap handle; `Shared` holds one).
#[derive(Clone)]
pub(crate) struct Reactor {
    inner: Arc<ReactorInner>,
}

impl fmt::Debug for Reactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reactor")
            .field("workers", &self.inner.workers)
            .finish_non_exhaustive()
    }
}

impl Reactor {
    /// A reactor for `workers` workers (one shard each, once started).
    pub(crate) fn new(workers: usize) -> Reactor {
        Reactor {
            inner: Arc::new(ReactorInner {
                phase: Mutex::new(Phase::NotStarted),
                shards: OnceLock::new(),
                stop: AtomicBool::new(false),
                next: AtomicUsize::new(0),
                workers,
            }),
        }
    }

    /// Registers `source` for `interest` (edge-triggered) with the shard
    /// `placement` picks, creating every shard's poll if this is the first
    /// registration (then [`Registration::started_reactor`] says so: the
    /// caller must nudge the parked workers, which block in their polls
    /// once they park again).
    pub(crate) fn register(
        &self,
        source: &mut impl Source,
        interest: Interest,
        placement: Placement,
    ) -> io::Result<Registration> {
        let (shards, started_reactor) = match self.inner.shards.get() {
            Some(shards) => (&shards[..], false),
            None => self.start()?,
        };
        let shard_index = match placement {
            Placement::Current(Some(index)) if index < shards.len() => index,
            Placement::Current(_) | Placement::Spread => {
                // Relaxed: only spreads sources; any value is a valid shard.
                self.inner.next.fetch_add(1, Ordering::Relaxed) % shards.len()
            }
        };
        let shard = &shards[shard_index];
        let (token, io) = {
            let mut slab = lock(&shard.slab);
            // SeqCst: pairs with the store in `shutdown`, which then sweeps
            // this slab under its lock: a source allocated before the sweep
            // is failed by it; one after sees `stop` here.
            if self.inner.stop.load(Ordering::SeqCst) {
                return Err(shut_down_error());
            }
            slab.allocate()?
        };
        let driver = lock(&shard.driver).clone();
        let Some(driver) = driver else {
            shard.release(token);
            return Err(shut_down_error());
        };
        if let Err(e) = driver.registry.register(source, token, interest) {
            shard.release(token);
            return Err(e);
        }
        Ok(Registration {
            reactor: self.clone(),
            shard: shard_index,
            driver,
            token,
            io,
            started_reactor,
        })
    }

    /// Creates every shard's `Poll` and waker (the first registration).
    /// Returns the shards and whether this call created them.
    #[cold]
    fn start(&self) -> io::Result<(&[CachePadded<Shard>], bool)> {
        let mut phase = lock(&self.inner.phase);
        match *phase {
            Phase::ShutDown => return Err(shut_down_error()),
            Phase::Running => {
                let shards = self.inner.shards.get().expect("running: shards are set");
                return Ok((shards, false));
            }
            Phase::NotStarted => {}
        }
        let mut shards = Vec::with_capacity(self.inner.workers);
        for _ in 0..self.inner.workers {
            let poll = mio::Poll::new()?;
            let driver = Arc::new(Driver {
                registry: poll.registry().try_clone()?,
                waker: mio::Waker::new(poll.registry(), WAKER_TOKEN)?,
            });
            shards.push(CachePadded::new(Shard {
                slab: Mutex::new(Slab::default()),
                poller: Mutex::new(Some(Poller {
                    poll,
                    events: Events::with_capacity(EVENTS_CAPACITY),
                    wakers: Vec::new(),
                })),
                driver: Mutex::new(Some(driver)),
            }));
        }
        let shards = self.inner.shards.get_or_init(|| shards.into_boxed_slice());
        *phase = Phase::Running;
        Ok((shards, true))
    }

    /// The blocking step of parking worker `worker` (`Idle::park_with`,
    /// after the announcement, the fence and the re-check): once the
    /// reactor runs, block in this worker's poll until an I/O event or
    /// [`unpark_driver`](Self::unpark_driver), then dispatch the events;
    /// before that (and after shutdown), park on the condvar. Returns
    /// whether the events woke tasks (into this worker's queue).
    pub(crate) fn park(&self, parker: &Parker, worker: usize) -> bool {
        let Some(shard) = self.inner.shards.get().and_then(|s| s.get(worker)) else {
            parker.park();
            return false;
        };
        // A blocking lock: only this worker blocks while holding it; anyone
        // else holds it for one non-blocking poll at most. Taking it with
        // `try_lock` instead could park this worker on its condvar while
        // its sockets' events wait in the poll unseen.
        let mut guard = lock(&shard.poller);
        // SeqCst: pairs with the store in `shutdown`, which then wakes the
        // poll: a worker that read `false` here and blocks is woken by that
        // wake (an eventfd write: still seen by a poll that starts after
        // it); one that reads `true` parks on its condvar and never polls
        // again, so `close` can drop the poll once the workers exit.
        let stopped = self.inner.stop.load(Ordering::SeqCst);
        let Some(poller) = guard.as_mut().filter(|_| !stopped) else {
            drop(guard);
            parker.park();
            return false;
        };
        let Poller { poll, events, .. } = poller;
        match parker.park_driver(|| poll.poll(events, None)) {
            None => false,
            Some(result) => self.inner.dispatch(shard, &mut guard, result, || {}),
        }
    }

    /// Worker `worker`'s look at its shard while it runs (every
    /// `INJECTOR_INTERVAL` runs, and when its queues are empty before it
    /// searches): poll without blocking and dispatch. Returns whether the
    /// events woke tasks. One load when the reactor never started.
    #[inline]
    pub(crate) fn poll_now(&self, worker: usize) -> bool {
        match self.inner.shards.get() {
            None => false,
            Some(shards) => self.poll_shard_now(shards, worker, || {}),
        }
    }

    /// The stall monitor's look at the shard of worker `worker`, which has
    /// been in one run since the monitor's last look: its sockets' events
    /// would wait for that run to end. Polls without blocking, unless its
    /// worker (or anyone) holds the poll; the tasks woken go to the
    /// injector, for any worker. `counted` runs before they are woken, if
    /// any are (so whoever sees their effect sees what it counts).
    pub(crate) fn rescue(&self, worker: usize, counted: impl FnOnce()) -> bool {
        match self.inner.shards.get() {
            None => false,
            Some(shards) => self.poll_shard_now(shards, worker, counted),
        }
    }

    #[cold]
    fn poll_shard_now(
        &self,
        shards: &[CachePadded<Shard>],
        worker: usize,
        before_wake: impl FnOnce(),
    ) -> bool {
        let Some(shard) = shards.get(worker) else {
            return false;
        };
        let Some(mut guard) = try_lock(&shard.poller) else {
            return false;
        };
        // SeqCst: as in `park`.
        if self.inner.stop.load(Ordering::SeqCst) {
            return false;
        }
        let Some(Poller { poll, events, .. }) = guard.as_mut() else {
            return false;
        };
        let result = poll.poll(events, Some(Duration::ZERO));
        self.inner.dispatch(shard, &mut guard, result, before_wake)
    }

    /// Wakes worker `worker` blocked in its shard's poll (a parked worker
    /// that a submit unparks; see `Idle::with_driver_wake`).
    pub(crate) fn unpark_driver(&self, worker: usize) {
        let Some(shard) = self.inner.shards.get().and_then(|s| s.get(worker)) else {
            return;
        };
        let driver = lock(&shard.driver).clone();
        if let Some(driver) = driver {
            if let Err(e) = driver.waker.wake() {
                tracing::error!(error = %e, worker, "could not wake a worker polling for I/O");
            }
        }
    }

    /// Stops the polling, fails every registered source (waking its
    /// wakers) and refuses later registrations. Idempotent. The polls'
    /// descriptors close in [`close`](Self::close), once the workers exited.
    pub(crate) fn shutdown(&self) {
        {
            let mut phase = lock(&self.inner.phase);
            *phase = Phase::ShutDown;
            // SeqCst: pairs with the loads in `register`, `park` and
            // `poll_shard_now` (see there); rare.
            self.inner.stop.store(true, Ordering::SeqCst);
        }
        let Some(shards) = self.inner.shards.get() else {
            return;
        };
        for shard in shards.iter() {
            let mut wakers = Vec::new();
            {
                let slab = lock(&shard.slab);
                for io in slab.slots.iter().filter_map(|slot| slot.io.as_ref()) {
                    io.dispatch(SHUTDOWN, &mut wakers);
                }
            }
            let driver = lock(&shard.driver).clone();
            if let Some(driver) = driver {
                // Out of the poll: the worker there parks on its condvar
                // next.
                if let Err(e) = driver.waker.wake() {
                    tracing::error!(error = %e, "could not wake a worker polling for I/O");
                }
            }
            for waker in wakers {
                waker.wake();
            }
        }
    }

    /// Drops every shard's poll and driver (closing their descriptors,
    /// unless a registration still holds a driver). Called after the
    /// workers were joined, after `shutdown`.
    pub(crate) fn close(&self) {
        let Some(shards) = self.inner.shards.get() else {
            return;
        };
        for shard in shards.iter() {
            let poller = lock(&shard.poller).take();
            let driver = lock(&shard.driver).take();
            drop((poller, driver));
        }
    }
}

impl Slab {
    fn allocate(&mut self) -> io::Result<(Token, Arc<ScheduledIo>)> {
        let io = Arc::new(ScheduledIo::new());
        let index = match self.free.pop() {
            Some(index) => index,
            None if self.slots.len() < MAX_SOURCES => {
                self.slots.push(Slot {
                    generation: 0,
                    io: None,
                });
                self.slots.len() - 1
            }
            None => {
                return Err(io::Error::other(
                    "too many sources registered with the reactor",
                ))
            }
        };
        let slot = &mut self.slots[index];
        slot.io = Some(Arc::clone(&io));
        Ok((Token(index | (slot.generation << INDEX_BITS)), io))
    }

    /// Frees `token`'s slot (if it is still that token's) for reuse under
    /// the next generation.
    fn release(&mut self, token: Token) {
        let (index, generation) = split(token);
        if let Some(slot) = self.slots.get_mut(index) {
            if slot.generation == generation && slot.io.is_some() {
                slot.io = None;
                slot.generation = (generation + 1) & GENERATION_MAX;
                self.free.push(index);
            }
        }
    }
}

impl Shard {
    fn release(&self, token: Token) {
        lock(&self.slab).release(token);
    }
}

impl ReactorInner {
    /// Turns the events of a poll of `shard` into readiness and wakes their
    /// wakers (outside the slab's lock: a wake submits a task, and may
    /// unpark a worker). Returns whether it woke any. On a poll error other
    /// than `Interrupted`, fails every source of the shard and drops its
    /// poll (its worker parks on its condvar from then on). `before_wake`
    /// runs once before the wakers are woken, if there are any.
    fn dispatch(
        &self,
        shard: &Shard,
        guard: &mut Option<Poller>,
        result: io::Result<()>,
        before_wake: impl FnOnce(),
    ) -> bool {
        if let Err(e) = result {
            if e.kind() == io::ErrorKind::Interrupted {
                return false;
            }
            tracing::error!(error = %e, "an I/O reactor's poll failed; failing its sources");
            *guard = None;
            shard.fail_all();
            return false;
        }
        // SeqCst: pairs with the store in `Reactor::shutdown` (after it,
        // every source is failed already: nothing to dispatch).
        if self.stop.load(Ordering::SeqCst) {
            return false;
        }
        let Some(Poller { events, wakers, .. }) = guard.as_mut() else {
            return false;
        };
        {
            let slab = lock(&shard.slab);
            for event in events.iter() {
                if event.token() == WAKER_TOKEN {
                    continue;
                }
                let (index, generation) = split(event.token());
                let Some(slot) = slab.slots.get(index) else {
                    continue;
                };
                // An event for a freed or reused slot: its source was
                // deregistered after `poll` read the event.
                let (true, Some(io)) = (slot.generation == generation, &slot.io) else {
                    continue;
                };
                let mut bits = 0;
                if event.is_readable() {
                    bits |= READABLE;
                }
                if event.is_read_closed() || event.is_error() {
                    bits |= READ_CLOSED;
                }
                if event.is_writable() {
                    bits |= WRITABLE;
                }
                if event.is_write_closed() || event.is_error() {
                    bits |= WRITE_CLOSED;
                }
                if bits != 0 {
                    io.dispatch(bits, wakers);
                }
            }
        }
        let woke = !wakers.is_empty();
        if woke {
            before_wake();
        }
        for waker in wakers.drain(..) {
            waker.wake();
        }
        woke
    }
}

impl Shard {
    /// Marks every source of this shard as shut down and wakes its wakers
    /// (its poll failed).
    fn fail_all(&self) {
        let mut wakers = Vec::new();
        {
            let slab = lock(&self.slab);
            for io in slab.slots.iter().filter_map(|slot| slot.io.as_ref()) {
                io.dispatch(SHUTDOWN, &mut wakers);
            }
        }
        for waker in wakers {
            waker.wake();
        }
    }
}

fn split(token: Token) -> (usize, usize) {
    (token.0 & INDEX_MASK, token.0 >> INDEX_BITS)
}

/// One source's registration: its readiness, and its slot until
/// [`deregister`](Registration::deregister).
pub(crate) struct Registration {
    reactor: Reactor,
    /// The shard the source belongs to (its worker's index).
    shard: usize,
    driver: Arc<Driver>,
    token: Token,
    io: Arc<ScheduledIo>,
    /// Whether this registration created the polls (see
    /// [`Reactor::register`]).
    started_reactor: bool,
}

impl Registration {
    /// Whether this registration created the polls: the caller must then
    /// nudge the parked workers (`Idle::nudge_all`), which block in their
    /// polls once they park again (they may all be parked on their
    /// condvars).
    pub(crate) fn started_reactor(&self) -> bool {
        self.started_reactor
    }

    /// The reactor this source is registered with (to register sources it
    /// creates, such as accepted streams).
    pub(crate) fn reactor(&self) -> &Reactor {
        &self.reactor
    }

    /// Ready when `direction` may make progress (see
    /// [`ScheduledIo::poll_ready`]).
    pub(crate) fn poll_ready(
        &self,
        cx: &mut Context<'_>,
        direction: Direction,
    ) -> Poll<io::Result<ReadyEvent>> {
        self.io.poll_ready(cx, direction)
    }

    /// Clears a readiness that turned out stale (`WouldBlock`).
    pub(crate) fn clear_readiness(&self, event: ReadyEvent) {
        self.io.clear_readiness(event);
    }

    /// [`poll_io`](Self::poll_io) for a read or write of `len` bytes that
    /// returns how many it moved: a short one (`0 < n < len`) also clears
    /// the readiness, as a `WouldBlock` would. On a stream socket under an
    /// edge-triggered poller (epoll, kqueue: every `unix` target mio
    /// supports), a short read has emptied the socket's receive buffer and
    /// a short write filled its send buffer, so the next attempt would
    /// only fail with `WouldBlock`: this saves that system call (one
    /// `recv` per request on a keep-alive HTTP connection). No edge is
    /// lost: bytes (or space) that come after the operation make the
    /// kernel report a new edge, which bumps the tick, and a clear with an
    /// older tick does nothing; an EOF or error seen with the data is a
    /// final bit, which no clear removes. tokio's `PollEvented` does the
    /// same.
    pub(crate) fn poll_io_sized(
        &self,
        cx: &mut Context<'_>,
        direction: Direction,
        len: usize,
        op: impl FnMut() -> io::Result<usize>,
    ) -> Poll<io::Result<usize>> {
        self.poll_io_until(cx, direction, op, |&n| cfg!(unix) && 0 < n && n < len)
    }

    /// Runs the non-blocking `op` while `direction` is ready; on
    /// `WouldBlock` clears the readiness and waits for the next edge.
    pub(crate) fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        direction: Direction,
        op: impl FnMut() -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_io_until(cx, direction, op, |_| false)
    }

    /// `poll_io`, also clearing the readiness after a result that
    /// `drained` says left nothing to do.
    fn poll_io_until<R>(
        &self,
        cx: &mut Context<'_>,
        direction: Direction,
        mut op: impl FnMut() -> io::Result<R>,
        drained: impl Fn(&R) -> bool,
    ) -> Poll<io::Result<R>> {
        loop {
            let event = match self.io.poll_ready(cx, direction) {
                Poll::Ready(Ok(event)) => event,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            match op() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Cleared only if no edge came since `event`; then
                    // `poll_ready` stores the waker and re-checks.
                    self.io.clear_readiness(event);
                }
                Ok(r) => {
                    if drained(&r) {
                        self.io.clear_readiness(event);
                    }
                    return Poll::Ready(Ok(r));
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Removes `source` from mio's registry, then frees the slot (in that
    /// order: a slot is reused only once no new event can name it).
    pub(crate) fn deregister(&mut self, source: &mut impl Source) {
        if let Err(e) = self.driver.registry.deregister(source) {
            tracing::debug!(error = %e, "deregistering an I/O source failed");
        }
        if let Some(shard) = self
            .reactor
            .inner
            .shards
            .get()
            .and_then(|s| s.get(self.shard))
        {
            shard.release(self.token);
        }
    }

    /// The shard (worker index) this source belongs to.
    #[cfg(test)]
    pub(crate) fn shard(&self) -> usize {
        self.shard
    }
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("shard", &self.shard)
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_slot_gets_a_new_generation() {
        let mut slab = Slab::default();
        let (first, _io) = slab.allocate().expect("a slot");
        slab.release(first);
        // Releasing a stale token again frees nothing.
        slab.release(first);
        let (second, _io) = slab.allocate().expect("a slot");
        assert_eq!(split(first).0, split(second).0, "the slot is reused");
        assert_ne!(first, second, "under a new generation");
        assert_eq!(slab.free.len(), 0);
        let (third, _io) = slab.allocate().expect("a slot");
        assert_ne!(split(third).0, split(second).0);
    }

    #[test]
    // Miri's isolation has no sockets (CI runs this crate's unit tests
    // under Miri).
    #[cfg_attr(miri, ignore)]
    fn sources_from_other_threads_are_spread_over_the_shards() {
        let reactor = Reactor::new(3);
        let mut shards = Vec::new();
        let mut keep = Vec::new();
        for _ in 0..6 {
            let mut listener =
                mio::net::TcpListener::bind(([127, 0, 0, 1], 0).into()).expect("bind");
            let registration = reactor
                .register(&mut listener, Interest::READABLE, Placement::Current(None))
                .expect("register");
            shards.push(registration.shard());
            keep.push((listener, registration));
        }
        assert_eq!(shards, [0, 1, 2, 0, 1, 2]);
        let mut listener = mio::net::TcpListener::bind(([127, 0, 0, 1], 0).into()).expect("bind");
        let on_worker = reactor
            .register(
                &mut listener,
                Interest::READABLE,
                Placement::Current(Some(1)),
            )
            .expect("register");
        assert_eq!(on_worker.shard(), 1, "a worker's source joins its shard");
        keep.push((listener, on_worker));
        for (mut listener, mut registration) in keep {
            registration.deregister(&mut listener);
        }
        reactor.shutdown();
        reactor.close();
    }
}
