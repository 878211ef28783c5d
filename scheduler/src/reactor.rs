//! The I/O reactor: a mio `Poll` created on the first registration (a
//! scheduler that never does I/O pays nothing: no file descriptor) and
//! driven by the workers themselves, tokio's design: a worker about to park
//! takes the poll if no other worker holds it and blocks in it instead of
//! on its condvar ([`Reactor::park`]); the others park on their condvars as
//! before. A submit that must wake the worker in the poll does so through
//! the [`mio::Waker`] ([`Reactor::unpark_driver`], called by `Idle`). The
//! events it finds it dispatches itself, so the tasks they wake land in its
//! own queue and it runs them next: no hop through another thread, no
//! futex wake. A running worker also polls without blocking every
//! `INJECTOR_INTERVAL` runs if the poll is free ([`Reactor::poll_now`]), so
//! I/O is not starved while every worker is busy. (The first design, a
//! dedicated reactor thread, is measured against this one in
//! docs/decisions/0010-io-reactor.md.)
//!
//! Each registered source gets a slot in a slab; its mio [`Token`] packs
//! the slot's index and generation. The slot holds a [`ScheduledIo`]: the
//! source's readiness bits (one atomic word, with a tick counter) and a
//! read waker and a write waker (tokio's `ScheduledIo` is the model). The
//! polling worker turns each event into readiness bits and wakes the
//! wakers; an I/O future polls [`Registration::poll_io`], which tries the
//! operation while the readiness bit is set, clears it on `WouldBlock` and
//! re-arms its waker (see [`ScheduledIo::poll_ready`] for why no edge is
//! lost).
//!
//! Registering is a lock and a syscall on the caller's thread. Deregistering removes the source from mio's
//! registry *before* freeing its slot and bumps the slot's generation, so
//! an event already read for a freed (or reused) slot carries an old
//! generation and is ignored.
//!
//! [`Reactor::shutdown`] (called by the scheduler's quiesce and drop) stops
//! the polling (waking the worker in the poll through the [`mio::Waker`];
//! no worker takes the poll afterwards) and marks every source shut down,
//! waking its wakers: a pending I/O future then fails with an
//! [`io::ErrorKind::Other`] error "scheduler shut down" (whose inner error
//! is a [`SchedulerShutDown`], which [`crate::net::is_shut_down`] tells
//! apart from the reactor's other `Other` errors); a registration
//! afterwards fails the same way.

use crate::park::Parker;
use crate::sync::{lock, try_lock, Arc, AtomicBool, AtomicUsize, Mutex, Ordering};
use mio::event::Source;
use mio::{Events, Interest, Token};
use std::fmt;
use std::io;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Readiness bit: a read may make progress.
const READABLE: usize = 1;
/// Readiness bit: a write may make progress.
const WRITABLE: usize = 1 << 1;
/// The reactor shut down: every operation fails.
const SHUTDOWN: usize = 1 << 2;
/// The read half is closed by the peer (EOF) or an error is pending: a
/// read makes progress (it returns 0 or the error) for ever after. Never
/// cleared, so that a read that saw data and the EOF in one edge, and
/// cleared `READABLE` after a short read, still reaches the EOF.
const READ_CLOSED: usize = 1 << 3;
/// The write half is closed or an error is pending (as `READ_CLOSED`).
const WRITE_CLOSED: usize = 1 << 4;
/// The bits that stay set once set (`ScheduledIo::clear_readiness` keeps
/// them).
const FINAL: usize = READ_CLOSED | WRITE_CLOSED;
/// The readiness bits of [`ScheduledIo::readiness`]; the rest is the tick.
const READY_MASK: usize = READABLE | WRITABLE | SHUTDOWN | FINAL;
/// Shift of the tick (count of readiness updates, wrapping) in the word.
const TICK_SHIFT: u32 = 8;
/// Largest tick value.
const TICK_MAX: usize = usize::MAX >> TICK_SHIFT;

/// Bits of a token that hold the slot index.
const INDEX_BITS: u32 = 24;
/// Mask of the slot index in a token.
const INDEX_MASK: usize = (1 << INDEX_BITS) - 1;
/// Largest generation (wraps to 0).
const GENERATION_MAX: usize = usize::MAX >> INDEX_BITS;
/// Slots at most: one index is kept free so that no slot's token can equal
/// [`WAKER_TOKEN`].
const MAX_SOURCES: usize = INDEX_MASK;
/// The token of the reactor's [`mio::Waker`].
const WAKER_TOKEN: Token = Token(usize::MAX);
/// Events read per `poll` call.
const EVENTS_CAPACITY: usize = 1024;

/// The inner error of the [`io::Error`] every I/O operation fails with once
/// the scheduler shut down (see [`crate::net::is_shut_down`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerShutDown;

impl fmt::Display for SchedulerShutDown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("scheduler shut down")
    }
}

impl std::error::Error for SchedulerShutDown {}

/// The error every I/O operation fails with once the scheduler shut down:
/// kind `Other` (as before it had a type), message "scheduler shut down",
/// inner error [`SchedulerShutDown`].
pub(crate) fn shut_down_error() -> io::Error {
    io::Error::other(SchedulerShutDown)
}

/// Which half of a source an operation waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Read,
    Write,
}

impl Direction {
    fn mask(self) -> usize {
        match self {
            Direction::Read => READABLE | READ_CLOSED,
            Direction::Write => WRITABLE | WRITE_CLOSED,
        }
    }
}

/// A readiness observed by [`ScheduledIo::poll_ready`]: what to clear if
/// the operation then hits `WouldBlock`, and at which tick it was seen.
#[derive(Debug, Clone, Copy)]
#[must_use]
pub(crate) struct ReadyEvent {
    tick: usize,
    ready: usize,
}

/// The wakers of one source's two directions.
#[derive(Default)]
struct Waiters {
    reader: Option<Waker>,
    writer: Option<Waker>,
}

/// One registered source's readiness and wakers.
pub(crate) struct ScheduledIo {
    /// `READABLE | WRITABLE | SHUTDOWN | READ_CLOSED | WRITE_CLOSED` plus
    /// a tick (bits `TICK_SHIFT..`) that every readiness update
    /// increments. Set by the polling worker and by shutdown; cleared
    /// (only `READABLE` or `WRITABLE`, only if the tick is unchanged) by
    /// the I/O future that hit `WouldBlock` or made a short read or write.
    readiness: AtomicUsize,
    /// Locked by the future that registers its waker and by the polling
    /// worker that takes it: the lock is what orders "set bit, take waker"
    /// against "store waker, re-check bit" (see `poll_ready`).
    waiters: Mutex<Waiters>,
}

impl ScheduledIo {
    fn new() -> ScheduledIo {
        ScheduledIo {
            readiness: AtomicUsize::new(0),
            waiters: Mutex::new(Waiters::default()),
        }
    }

    /// Adds `bits` to the readiness and bumps the tick.
    fn set_readiness(&self, bits: usize) {
        let mut current = self.readiness.load(Ordering::Acquire);
        loop {
            let tick = ((current >> TICK_SHIFT) + 1) & TICK_MAX;
            let next = (tick << TICK_SHIFT) | (current & READY_MASK) | bits;
            // AcqRel: the Release pairs with the Acquire loads in
            // `poll_ready` and `clear_readiness`; the Acquire with the
            // clearing compare-and-swap. (No lost wake-up rests on this
            // ordering: see `poll_ready`.)
            match self.readiness.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// Moves the wakers interested in `bits` into `out`.
    fn take_wakers(&self, bits: usize, out: &mut Vec<Waker>) {
        let mut waiters = lock(&self.waiters);
        if bits & (READABLE | READ_CLOSED | SHUTDOWN) != 0 {
            out.extend(waiters.reader.take());
        }
        if bits & (WRITABLE | WRITE_CLOSED | SHUTDOWN) != 0 {
            out.extend(waiters.writer.take());
        }
    }

    /// What `readiness` says for `direction`, if anything.
    fn check(current: usize, direction: Direction) -> Option<io::Result<ReadyEvent>> {
        if current & SHUTDOWN != 0 {
            return Some(Err(shut_down_error()));
        }
        let ready = current & direction.mask();
        (ready != 0).then_some(Ok(ReadyEvent {
            tick: current >> TICK_SHIFT,
            ready,
        }))
    }

    /// Ready when `direction` may make progress (or the reactor shut down:
    /// then an error); otherwise stores the waker and is pending.
    ///
    /// No lost wake-up: the polling worker sets the bit, then locks
    /// `waiters` to take the waker; this stores the waker under that lock,
    /// then loads the bits again. If the reactor's lock comes first, the
    /// re-check sees the bit; if this lock comes first, the reactor finds
    /// the waker.
    pub(crate) fn poll_ready(
        &self,
        cx: &mut Context<'_>,
        direction: Direction,
    ) -> Poll<io::Result<ReadyEvent>> {
        // Acquire: pairs with the AcqRel update in `set_readiness`.
        if let Some(ready) = Self::check(self.readiness.load(Ordering::Acquire), direction) {
            return Poll::Ready(ready);
        }
        let mut waiters = lock(&self.waiters);
        let slot = match direction {
            Direction::Read => &mut waiters.reader,
            Direction::Write => &mut waiters.writer,
        };
        match slot {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => *slot = Some(cx.waker().clone()),
        }
        // Acquire: as above; under the lock (see the doc comment).
        match Self::check(self.readiness.load(Ordering::Acquire), direction) {
            Some(Err(e)) => {
                // Shut down since the first check: the sweep may have run
                // already, so take the waker back (a stored waker keeps its
                // task, and the task this source, alive).
                *slot = None;
                Poll::Ready(Err(e))
            }
            Some(ready) => Poll::Ready(ready),
            None => Poll::Pending,
        }
    }

    /// Clears what `event` saw, unless an update came since (its tick
    /// moved on): that update may be a new edge, which must not be lost.
    /// The final bits (`READ_CLOSED`, `WRITE_CLOSED`) stay.
    pub(crate) fn clear_readiness(&self, event: ReadyEvent) {
        // Acquire: pairs with the AcqRel update in `set_readiness`.
        let mut current = self.readiness.load(Ordering::Acquire);
        loop {
            if current >> TICK_SHIFT != event.tick {
                return;
            }
            let next = current & !(event.ready & !FINAL);
            // AcqRel: pairs with `set_readiness` (the tick check above is
            // what keeps a newer edge).
            match self.readiness.compare_exchange_weak(
                current,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }
}

/// What the polling worker needs besides the slab, shared with every
/// registration (which deregisters through `registry`).
struct Driver {
    /// A clone of the `Poll`'s registry (the `Poll` itself is in
    /// `ReactorInner::poller`).
    registry: mio::Registry,
    /// Wakes the worker blocked in `poll` (for a submit, and for shutdown).
    waker: mio::Waker,
}

/// The poll and what a turn of it needs; held (locked) by the one worker
/// that polls.
struct Poller {
    poll: mio::Poll,
    events: Events,
    /// Wakers taken from the slab under its lock, woken after it.
    wakers: Vec<Waker>,
}

enum Phase {
    /// No source was ever registered: no descriptor.
    NotStarted,
    Running {
        driver: Arc<Driver>,
    },
    ShutDown,
}

struct Slot {
    generation: usize,
    io: Option<Arc<ScheduledIo>>,
}

struct State {
    phase: Phase,
    /// The driver until [`Reactor::close`] (kept past `shutdown`, so that a
    /// worker still in the poll can be woken).
    waker_driver: Option<Arc<Driver>>,
    slab: Vec<Slot>,
    /// Indices of free slots.
    free: Vec<usize>,
}

struct ReactorInner {
    /// Phase, slab and free list. Locked by registration, deregistration,
    /// shutdown, and by the polling worker once per batch of events.
    state: Mutex<State>,
    /// The poll: `None` until the first registration and after `close`.
    /// A worker takes it with `try_lock` (never waits for it): whoever holds
    /// the lock is the one worker that polls.
    poller: Mutex<Option<Poller>>,
    /// Set once, by `start`: lets a running worker skip the poll with one
    /// load of a line nobody writes afterwards.
    started: AtomicBool,
    /// Set once, by `shutdown` (under `state`'s lock); read before taking
    /// the poll and each time `poll` returns.
    stop: AtomicBool,
}

/// The scheduler's reactor (a cheap handle; `Shared` holds one).
#[derive(Clone)]
pub(crate) struct Reactor {
    inner: Arc<ReactorInner>,
}

impl fmt::Debug for Reactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reactor").finish_non_exhaustive()
    }
}

impl Reactor {
    pub(crate) fn new() -> Reactor {
        Reactor {
            inner: Arc::new(ReactorInner::new()),
        }
    }

    /// Registers `source` for `interest` (edge-triggered), creating the
    /// poll if this is the first registration (then
    /// [`Registration::started_reactor`] says so: the caller must wake a
    /// parked worker, which takes the poll when it parks again).
    pub(crate) fn register(
        &self,
        source: &mut impl Source,
        interest: Interest,
    ) -> io::Result<Registration> {
        let (driver, token, io, started_reactor) = {
            let mut state = lock(&self.inner.state);
            let (driver, started) = match &state.phase {
                Phase::Running { driver, .. } => (Arc::clone(driver), false),
                Phase::ShutDown => return Err(shut_down_error()),
                Phase::NotStarted => (self.start(&mut state)?, true),
            };
            let (token, io) = state.allocate()?;
            (driver, token, io, started)
        };
        if let Err(e) = driver.registry.register(source, token, interest) {
            self.inner.release(token);
            return Err(e);
        }
        Ok(Registration {
            reactor: self.clone(),
            driver,
            token,
            io,
            started_reactor,
        })
    }

    /// Creates the `Poll` and its waker, and leaves the poll for a worker.
    fn start(&self, state: &mut State) -> io::Result<Arc<Driver>> {
        let poll = mio::Poll::new()?;
        let driver = Arc::new(Driver {
            registry: poll.registry().try_clone()?,
            waker: mio::Waker::new(poll.registry(), WAKER_TOKEN)?,
        });
        *lock(&self.inner.poller) = Some(Poller {
            poll,
            events: Events::with_capacity(EVENTS_CAPACITY),
            wakers: Vec::new(),
        });
        // Release: pairs with the Relaxed hint load in `poll_now` only as a
        // hint; the poll itself is published by `poller`'s lock.
        self.inner.started.store(true, Ordering::Release);
        state.phase = Phase::Running {
            driver: Arc::clone(&driver),
        };
        state.waker_driver = Some(Arc::clone(&driver));
        Ok(driver)
    }

    /// The blocking step of a parking worker (`Idle::park_with`, after the
    /// announcement, the fence and the re-check): if the poll is free,
    /// block in it until an I/O event or [`unpark_driver`](Self::unpark_driver),
    /// then dispatch the events; otherwise park on the condvar. Returns
    /// whether the events woke tasks (into this worker's queue).
    pub(crate) fn park(&self, parker: &Parker) -> bool {
        let Some(mut guard) = try_lock(&self.inner.poller) else {
            parker.park();
            return false;
        };
        // SeqCst: pairs with the store in `shutdown`, which then wakes the
        // poll: a worker that read `false` here and blocks is woken by that
        // wake (an eventfd write: still seen by a poll that starts after
        // it); one that reads `true` parks on its condvar and never takes
        // the poll again, so `close` can drop it once the workers exit.
        let stopped = self.inner.stop.load(Ordering::SeqCst);
        let Some(poller) = guard.as_mut().filter(|_| !stopped) else {
            drop(guard);
            parker.park();
            return false;
        };
        let Poller { poll, events, .. } = poller;
        match parker.park_driver(|| poll.poll(events, None)) {
            None => false,
            Some(result) => self.inner.dispatch(&mut guard, result),
        }
    }

    /// A running worker's check for I/O (every `INJECTOR_INTERVAL` runs):
    /// if the poll exists and no worker holds it, poll without blocking and
    /// dispatch. Keeps I/O going while every worker is busy.
    #[inline]
    pub(crate) fn poll_now(&self) {
        // Relaxed: a hint; the poll itself is taken under its lock.
        if !self.inner.started.load(Ordering::Relaxed) {
            return;
        }
        self.poll_now_slow();
    }

    #[cold]
    fn poll_now_slow(&self) {
        let Some(mut guard) = try_lock(&self.inner.poller) else {
            return;
        };
        // SeqCst: as in `park`.
        if self.inner.stop.load(Ordering::SeqCst) {
            return;
        }
        let Some(Poller { poll, events, .. }) = guard.as_mut() else {
            return;
        };
        let result = poll.poll(events, Some(Duration::ZERO));
        let _ = self.inner.dispatch(&mut guard, result);
    }

    /// Wakes the worker blocked in the poll (a parked worker that a submit
    /// unparks; see `Idle::with_driver_wake`).
    pub(crate) fn unpark_driver(&self) {
        let driver = lock(&self.inner.state).waker_driver.clone();
        if let Some(driver) = driver {
            if let Err(e) = driver.waker.wake() {
                tracing::error!(error = %e, "could not wake the worker polling for I/O");
            }
        }
    }

    /// Stops the polling, fails every registered source (waking its
    /// wakers) and refuses later registrations. Idempotent. The poll's
    /// descriptor closes in [`close`](Self::close), once the workers exited.
    pub(crate) fn shutdown(&self) {
        let mut wakers = Vec::new();
        let driver = {
            let mut state = lock(&self.inner.state);
            state.phase = Phase::ShutDown;
            // SeqCst: pairs with the loads in `park` and `poll_now` (see
            // `park`); rare.
            self.inner.stop.store(true, Ordering::SeqCst);
            for io in state.slab.iter().filter_map(|slot| slot.io.as_ref()) {
                io.set_readiness(SHUTDOWN);
                io.take_wakers(SHUTDOWN, &mut wakers);
            }
            state.waker_driver.clone()
        };
        if let Some(driver) = driver {
            // Out of the poll: the worker there parks on its condvar next.
            if let Err(e) = driver.waker.wake() {
                tracing::error!(error = %e, "could not wake the worker polling for I/O");
            }
        }
        for waker in wakers {
            waker.wake();
        }
    }

    /// Drops the poll and the driver (closing their descriptors, unless a
    /// registration still holds the driver). Called after the workers were
    /// joined, after `shutdown`.
    pub(crate) fn close(&self) {
        let poller = lock(&self.inner.poller).take();
        let driver = lock(&self.inner.state).waker_driver.take();
        drop((poller, driver));
    }
}

impl State {
    fn allocate(&mut self) -> io::Result<(Token, Arc<ScheduledIo>)> {
        let io = Arc::new(ScheduledIo::new());
        let index = match self.free.pop() {
            Some(index) => index,
            None if self.slab.len() < MAX_SOURCES => {
                self.slab.push(Slot {
                    generation: 0,
                    io: None,
                });
                self.slab.len() - 1
            }
            None => {
                return Err(io::Error::other(
                    "too many sources registered with the reactor",
                ))
            }
        };
        let slot = &mut self.slab[index];
        slot.io = Some(Arc::clone(&io));
        Ok((Token(index | (slot.generation << INDEX_BITS)), io))
    }
}

impl ReactorInner {
    fn new() -> ReactorInner {
        ReactorInner {
            state: Mutex::new(State {
                phase: Phase::NotStarted,
                waker_driver: None,
                slab: Vec::new(),
                free: Vec::new(),
            }),
            poller: Mutex::new(None),
            started: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        }
    }

    /// Turns the events of a poll into readiness and wakes their wakers
    /// (outside the slab's lock: a wake submits a task, and may unpark a
    /// worker). Returns whether it woke any. On a poll error other than
    /// `Interrupted`, fails every source and drops the poll (the workers
    /// park on their condvars from then on).
    fn dispatch(&self, guard: &mut Option<Poller>, result: io::Result<()>) -> bool {
        if let Err(e) = result {
            if e.kind() == io::ErrorKind::Interrupted {
                return false;
            }
            tracing::error!(error = %e, "the I/O reactor's poll failed; failing every source");
            *guard = None;
            self.fail_all();
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
            let state = lock(&self.state);
            for event in events.iter() {
                if event.token() == WAKER_TOKEN {
                    continue;
                }
                let (index, generation) = split(event.token());
                let Some(slot) = state.slab.get(index) else {
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
                    io.set_readiness(bits);
                    io.take_wakers(bits, wakers);
                }
            }
        }
        let woke = !wakers.is_empty();
        for waker in wakers.drain(..) {
            waker.wake();
        }
        woke
    }

    /// Frees `token`'s slot (if it is still that token's) for reuse under
    /// the next generation.
    fn release(&self, token: Token) {
        let (index, generation) = split(token);
        let mut state = lock(&self.state);
        if let Some(slot) = state.slab.get_mut(index) {
            if slot.generation == generation && slot.io.is_some() {
                slot.io = None;
                slot.generation = (generation + 1) & GENERATION_MAX;
                state.free.push(index);
            }
        }
    }

    /// Marks every source as shut down and wakes its wakers (the poll
    /// failed).
    fn fail_all(&self) {
        let mut wakers = Vec::new();
        {
            let state = lock(&self.state);
            for io in state.slab.iter().filter_map(|slot| slot.io.as_ref()) {
                io.set_readiness(SHUTDOWN);
                io.take_wakers(SHUTDOWN, &mut wakers);
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
    driver: Arc<Driver>,
    token: Token,
    io: Arc<ScheduledIo>,
    /// Whether this registration created the poll (see
    /// [`Reactor::register`]).
    started_reactor: bool,
}

impl Registration {
    /// Whether this registration created the poll: the caller must then
    /// wake a parked worker (`Idle::notify_one`), which takes the poll when
    /// it parks again (the workers may all be parked on their condvars).
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
        self.reactor.inner.release(self.token);
    }
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Wake;

    /// Counts its wakes.
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            // Relaxed: a test counter, read after the wake on this thread.
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn counting_waker() -> (Arc<CountingWaker>, Waker) {
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        (Arc::clone(&counter), Waker::from(counter))
    }

    fn ready(io: &ScheduledIo, waker: &Waker, direction: Direction) -> Option<ReadyEvent> {
        match io.poll_ready(&mut Context::from_waker(waker), direction) {
            Poll::Ready(Ok(event)) => Some(event),
            Poll::Ready(Err(e)) => panic!("unexpected error {e}"),
            Poll::Pending => None,
        }
    }

    #[test]
    fn a_pending_poll_is_woken_by_the_next_edge() {
        let io = ScheduledIo::new();
        let (count, waker) = counting_waker();
        assert!(ready(&io, &waker, Direction::Read).is_none());
        io.set_readiness(WRITABLE);
        let mut wakers = Vec::new();
        io.take_wakers(WRITABLE, &mut wakers);
        assert!(wakers.is_empty(), "a write edge does not wake the reader");
        io.set_readiness(READABLE);
        io.take_wakers(READABLE, &mut wakers);
        wakers.drain(..).for_each(Waker::wake);
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        assert!(ready(&io, &waker, Direction::Read).is_some());
    }

    #[test]
    fn clearing_keeps_the_final_bits() {
        let io = ScheduledIo::new();
        let (_count, waker) = counting_waker();
        // Data and the peer's FIN in one edge; a short read clears what
        // it saw: the EOF must still be readable.
        io.set_readiness(READABLE | READ_CLOSED);
        let seen = ready(&io, &waker, Direction::Read).expect("readable");
        io.clear_readiness(seen);
        let eof = ready(&io, &waker, Direction::Read).expect("the EOF is still to be read");
        io.clear_readiness(eof);
        assert!(
            ready(&io, &waker, Direction::Read).is_some(),
            "closed for good"
        );
        // The write half is untouched by the read side's bits.
        assert!(ready(&io, &waker, Direction::Write).is_none());
        io.set_readiness(WRITE_CLOSED);
        assert!(ready(&io, &waker, Direction::Write).is_some());
    }

    #[test]
    fn clearing_keeps_an_edge_that_came_after_the_observed_one() {
        let io = ScheduledIo::new();
        let (_count, waker) = counting_waker();
        io.set_readiness(READABLE);
        let seen = ready(&io, &waker, Direction::Read).expect("readable");
        // A new edge between the read that hit WouldBlock and the clear.
        io.set_readiness(READABLE);
        io.clear_readiness(seen);
        let again = ready(&io, &waker, Direction::Read).expect("still readable");
        // With no edge in between, the clear takes effect.
        io.clear_readiness(again);
        assert!(ready(&io, &waker, Direction::Read).is_none());
    }

    #[test]
    fn clearing_one_direction_leaves_the_other() {
        let io = ScheduledIo::new();
        let (_count, waker) = counting_waker();
        io.set_readiness(READABLE | WRITABLE);
        let read = ready(&io, &waker, Direction::Read).expect("readable");
        io.clear_readiness(read);
        assert!(ready(&io, &waker, Direction::Write).is_some());
    }

    #[test]
    fn shutdown_fails_polls_and_takes_both_wakers() {
        let io = ScheduledIo::new();
        let (count, waker) = counting_waker();
        assert!(ready(&io, &waker, Direction::Read).is_none());
        assert!(ready(&io, &waker, Direction::Write).is_none());
        io.set_readiness(SHUTDOWN);
        let mut wakers = Vec::new();
        io.take_wakers(SHUTDOWN, &mut wakers);
        wakers.drain(..).for_each(Waker::wake);
        assert_eq!(count.0.load(Ordering::Relaxed), 2);
        let polled = io.poll_ready(&mut Context::from_waker(&waker), Direction::Read);
        assert!(matches!(polled, Poll::Ready(Err(e)) if e.to_string() == "scheduler shut down"));
    }

    #[test]
    fn only_the_shutdown_error_is_told_as_one() {
        let shut_down = shut_down_error();
        assert_eq!(shut_down.kind(), io::ErrorKind::Other);
        assert!(crate::net::is_shut_down(&shut_down));
        // The reactor's other `Other` errors are not.
        let full = io::Error::other("too many sources registered with the reactor");
        assert!(!crate::net::is_shut_down(&full));
        assert!(!crate::net::is_shut_down(&io::Error::other(
            "scheduler shut down"
        )));
        assert!(!crate::net::is_shut_down(&io::ErrorKind::Other.into()));
    }

    #[test]
    fn a_reused_slot_gets_a_new_generation() {
        let inner = ReactorInner::new();
        let (first, _io) = lock(&inner.state).allocate().expect("a slot");
        inner.release(first);
        // Releasing a stale token again frees nothing.
        inner.release(first);
        let (second, _io) = lock(&inner.state).allocate().expect("a slot");
        assert_eq!(split(first).0, split(second).0, "the slot is reused");
        assert_ne!(first, second, "under a new generation");
        assert_eq!(lock(&inner.state).free.len(), 0);
        let (third, _io) = lock(&inner.state).allocate().expect("a slot");
        assert_ne!(split(third).0, split(second).0);
    }
}
