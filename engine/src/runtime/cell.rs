//! The actor cell: the parts of an actor every thread may read
//! ([`CellCore`]), a two-lane mailbox, and the run holder's part (the
//! driver, with the actor), in one allocation, run as a [`Runnable`] on the
//! scheduler.
//!
//! One address, three views. An [`ActorCell<A>`] is `#[repr(C)]`: first its
//! typed head, a [`Cell<M>`] (the mailbox, which holds the core between its
//! senders' words and its run holder's), then the driver. An `ActorRef<M>`
//! ([`CellRef<M>`]) holds the cell as the `Arc<dyn Runnable>` the scheduler
//! takes, so a send that wins the run submits it with no virtual call, and
//! reads the mailbox through the head. An `ActorId` holds a thin pointer to
//! the core, [`CORE_OFFSET`] bytes into the cell, whose [`CellVtable`] (one
//! per actor type) does what needs the actor's type.

use std::any::TypeId;
use std::borrow::Borrow;
use std::cell::{RefCell, UnsafeCell};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, DefaultHasher, Hash, Hasher, RandomState};
use std::marker::PhantomData;
use std::ops::Deref;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use proscenium_mailbox::{Enqueued, Mailbox, Release, SendError, TrySendError};
use proscenium_scheduler::{Budget, RunOutcome, Runnable};

use crate::api::actor::Actor;
use crate::api::actor_ref::{ActorId, ActorRef};
use crate::runtime::contain::{contain, report};
use crate::runtime::driver::Driver;
use crate::runtime::large;
use crate::runtime::signal::{AutoMsg, Envelope, SystemMsg, Watcher};
use crate::runtime::system::ActorSystem;
use crate::supervision::strategy::RestartStats;

/// How a driver's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunEnd {
    /// The budget is used and there may be more: keep the run.
    Yield,
    /// Nothing to take now: release the run.
    Release,
}

/// The typed head of every cell whose actor takes `M`: what an
/// `ActorRef<M>` reads, at offset 0 of the cell. It is the mailbox, which
/// holds the core between the senders' words and the run holder's (the
/// mailbox's "middle"): the core's 64 bytes, which no one writes per
/// message, keep the holder's words off the cache line every send writes,
/// at no cost in bytes (decision 0002). An `ActorId` points at the core,
/// [`CORE_OFFSET`] bytes into the cell.
#[repr(C)]
pub(crate) struct Cell<M: Send + 'static> {
    pub(crate) mailbox: Mailbox<SystemMsg, Envelope<M>, CellCore>,
}

/// Where the core is in every cell: the mailbox's middle, after the
/// senders' words, whatever the message type (checked by
/// `the_core_is_at_the_same_offset_for_every_message_type`).
pub(crate) const CORE_OFFSET: usize = Mailbox::<SystemMsg, Envelope<()>, CellCore>::MIDDLE_OFFSET;

impl<M: Send + 'static> Cell<M> {
    /// The parts of the actor every thread may read.
    #[inline(always)]
    pub(crate) fn core(&self) -> &CellCore {
        self.mailbox.middle()
    }
}

/// The core of the cell at `cell`, keeping the pointer's provenance.
///
/// # Safety
///
/// `cell` is the data pointer of a live `Arc<ActorCell<A>>` (sized or
/// unsized), whose provenance covers the cell.
#[inline(always)]
unsafe fn core_of<T: ?Sized>(cell: *const T) -> NonNull<CellCore> {
    let core = cell.cast::<u8>().cast_mut();
    // The core is inside the cell, CORE_OFFSET bytes in.
    // SAFETY: in bounds of the cell (caller's contract), and not null.
    unsafe { NonNull::new_unchecked(core.add(CORE_OFFSET)).cast::<CellCore>() }
}

/// The cell whose core `core` is (the inverse of [`core_of`]).
///
/// # Safety
///
/// `core` is the core of a live `ActorCell<A>`, with provenance over the
/// whole cell (the `CellVtable` contract).
#[inline(always)]
unsafe fn cell_of<A: Actor>(core: NonNull<CellCore>) -> NonNull<ActorCell<A>> {
    // The core is CORE_OFFSET bytes into its cell.
    // SAFETY: so the cell starts that much lower, in the same allocation.
    unsafe { core.byte_sub(CORE_OFFSET).cast::<ActorCell<A>>() }
}

/// A cell as built, with its actor's type: one allocation holds the core,
/// the mailbox, the driver and the actor. The head first (`#[repr(C)]`),
/// so the cell's address is its head's; its core is [`CORE_OFFSET`] in.
#[repr(C)]
pub(crate) struct ActorCell<A: Actor> {
    head: Cell<A::Msg>,
    /// Only the run holder touches this (see `run`); between runs it is
    /// handed from one holder to the next by the mailbox's run-state word
    /// (release's Release, claim's Acquire).
    driver: UnsafeCell<Driver<A>>,
}

impl<A: Actor> Deref for ActorCell<A> {
    type Target = Cell<A::Msg>;

    #[inline(always)]
    fn deref(&self) -> &Cell<A::Msg> {
        &self.head
    }
}

// SAFETY: `driver` is the only field that is not `Sync`; it is reached only
// from `Runnable::run`, which the mailbox protocol gives to one thread at a
// time (invariant 2, model-checked in loom-tests), with a happens-before edge
// from one holder to the next. Everything else is `Sync` on its own.
unsafe impl<A: Actor> Sync for ActorCell<A> {}

/// What an [`ActorId`] does with its cell that needs the actor's type: one
/// static table per actor type, pointed at by every cell's core.
///
/// Every function takes the core of a live [`ActorCell<A>`] of the `A`
/// whose table this is, as a pointer with provenance over the whole cell
/// (from `Arc::into_raw`), of which the caller holds a count: that is the
/// `# Safety` contract of each.
pub(crate) struct CellVtable {
    /// Takes another count of the cell.
    pub(crate) retain: unsafe fn(NonNull<CellCore>),
    /// Gives up the caller's count; the last one frees the cell.
    pub(crate) release: unsafe fn(NonNull<CellCore>),
    /// Another count of the cell, as the scheduler's runnable.
    pub(crate) runnable: unsafe fn(NonNull<CellCore>) -> Arc<dyn Runnable>,
    pub(crate) enqueue_system:
        unsafe fn(NonNull<CellCore>, SystemMsg) -> Result<Enqueued, SendError<SystemMsg>>,
    /// Enqueues PoisonPill or Kill in the user lane; hands it back when the
    /// mailbox is full or closed.
    pub(crate) enqueue_auto:
        unsafe fn(NonNull<CellCore>, AutoMsg) -> Result<Enqueued, TrySendError<AutoMsg>>,
    /// A hint: the mailbox is closed (the actor terminated).
    pub(crate) is_closed: unsafe fn(NonNull<CellCore>) -> bool,
    /// User messages queued, for a bounded mailbox.
    pub(crate) queued: unsafe fn(NonNull<CellCore>) -> Option<usize>,
    /// The actor's message type.
    pub(crate) msg_type: fn() -> TypeId,
}

impl<A: Actor> ActorCell<A> {
    /// This actor type's table (a promoted constant: one per type).
    fn vtable() -> &'static CellVtable {
        &CellVtable {
            retain: Self::vt_retain,
            release: Self::vt_release,
            runnable: Self::vt_runnable,
            enqueue_system: Self::vt_enqueue_system,
            enqueue_auto: Self::vt_enqueue_auto,
            is_closed: Self::vt_is_closed,
            queued: Self::vt_queued,
            msg_type: TypeId::of::<A::Msg>,
        }
    }

    /// The cell whose core `core` is.
    ///
    /// # Safety
    ///
    /// As every [`CellVtable`] function; the reference does not outlive the
    /// caller's count.
    unsafe fn from_core<'a>(core: NonNull<CellCore>) -> &'a ActorCell<A> {
        // SAFETY: `cell_of` finds the cell (the pointer's provenance covers
        // it), which lives while the caller's count does.
        unsafe { cell_of::<A>(core).as_ref() }
    }

    /// # Safety
    ///
    /// As every [`CellVtable`] function.
    unsafe fn vt_retain(core: NonNull<CellCore>) {
        // SAFETY: the pointer is an `Arc<ActorCell<A>>`'s data pointer (from
        // `Arc::into_raw`, directly or unsized), live while the caller's
        // count is.
        unsafe { Arc::increment_strong_count(cell_of::<A>(core).as_ptr()) }
    }

    /// # Safety
    ///
    /// As every [`CellVtable`] function; the caller's count is given up.
    unsafe fn vt_release(core: NonNull<CellCore>) {
        // SAFETY: as in `vt_retain`; the count released is the caller's.
        unsafe { Arc::decrement_strong_count(cell_of::<A>(core).as_ptr()) }
    }

    /// # Safety
    ///
    /// As every [`CellVtable`] function.
    unsafe fn vt_runnable(core: NonNull<CellCore>) -> Arc<dyn Runnable> {
        // SAFETY: as in `vt_retain`: one more count, which `from_raw` takes.
        unsafe {
            let cell = cell_of::<A>(core).as_ptr();
            Arc::increment_strong_count(cell);
            Arc::from_raw(cell)
        }
    }

    /// # Safety
    ///
    /// As every [`CellVtable`] function.
    unsafe fn vt_enqueue_system(
        core: NonNull<CellCore>,
        msg: SystemMsg,
    ) -> Result<Enqueued, SendError<SystemMsg>> {
        // SAFETY: the caller's contract.
        unsafe { Self::from_core(core) }.mailbox.enqueue_system(msg)
    }

    /// # Safety
    ///
    /// As every [`CellVtable`] function.
    unsafe fn vt_enqueue_auto(
        core: NonNull<CellCore>,
        msg: AutoMsg,
    ) -> Result<Enqueued, TrySendError<AutoMsg>> {
        // SAFETY: the caller's contract.
        let cell = unsafe { Self::from_core(core) };
        // The envelope is as large as the actor's messages.
        large::with_room_if_large::<A::Msg, _>(|| {
            cell.mailbox
                .enqueue_user(Envelope::from(msg))
                .map_err(|e| match e {
                    TrySendError::Full(_) => TrySendError::Full(msg),
                    TrySendError::Closed(_) => TrySendError::Closed(msg),
                })
        })
    }

    /// # Safety
    ///
    /// As every [`CellVtable`] function.
    unsafe fn vt_is_closed(core: NonNull<CellCore>) -> bool {
        // SAFETY: the caller's contract.
        unsafe { Self::from_core(core) }.mailbox.is_closed()
    }

    /// # Safety
    ///
    /// As every [`CellVtable`] function.
    unsafe fn vt_queued(core: NonNull<CellCore>) -> Option<usize> {
        // SAFETY: the caller's contract.
        unsafe { Self::from_core(core) }.mailbox.user_len()
    }
}

/// A counted reference to a cell whose actor takes `M` (what an
/// `ActorRef<M>` holds): the cell as the scheduler's runnable, read through
/// its typed head.
pub(crate) struct CellRef<M: Send + 'static> {
    /// Always an `Arc<ActorCell<A>>` with `A::Msg = M`, unsized.
    cell: Arc<dyn Runnable>,
    _msg: PhantomData<fn(M)>,
}

impl<M: Send + 'static> CellRef<M> {
    pub(crate) fn new<A: Actor<Msg = M>>(cell: Arc<ActorCell<A>>) -> CellRef<M> {
        CellRef {
            cell,
            _msg: PhantomData,
        }
    }

    /// # Safety
    ///
    /// `cell` is an `Arc<ActorCell<A>>` with `A::Msg = M`, unsized.
    pub(crate) unsafe fn from_runnable(cell: Arc<dyn Runnable>) -> CellRef<M> {
        CellRef {
            cell,
            _msg: PhantomData,
        }
    }

    /// Submits the cell after an enqueue won its run.
    #[inline]
    pub(crate) fn schedule(&self) {
        schedule_runnable(self.core(), Arc::clone(&self.cell));
    }

    /// Sends a user envelope: schedules the cell if this send won its run,
    /// and hands what cannot be delivered to dead letters.
    #[inline]
    pub(crate) fn send_user(&self, envelope: Envelope<M>) {
        match self.mailbox.enqueue_user(envelope) {
            Ok(Enqueued::AlreadyScheduled) => {}
            Ok(Enqueued::MustSchedule) => self.schedule(),
            Err(TrySendError::Closed(e) | TrySendError::Full(e)) => {
                self.core().system.dead_envelope(self.id(), e);
            }
        }
    }

    pub(crate) fn id(&self) -> ActorId {
        let cell = Arc::into_raw(Arc::clone(&self.cell));
        // SAFETY: the data pointer of an `Arc<ActorCell<A>>` (unsized) and
        // its core, with its provenance; the count is the clone's, handed over.
        unsafe { ActorId::from_raw(core_of(cell)) }
    }
}

impl<M: Send + 'static> Deref for CellRef<M> {
    type Target = Cell<M>;

    #[inline(always)]
    fn deref(&self) -> &Cell<M> {
        // SAFETY: the runnable is an `ActorCell<A>` with `A::Msg = M`, whose
        // head, a `Cell<M>`, is at offset 0 (`#[repr(C)]`), and lives as
        // long as this count.
        unsafe { &*Arc::as_ptr(&self.cell).cast::<Cell<M>>() }
    }
}

impl<M: Send + 'static> Clone for CellRef<M> {
    fn clone(&self) -> CellRef<M> {
        CellRef {
            cell: Arc::clone(&self.cell),
            _msg: PhantomData,
        }
    }
}

/// An actor's name. Up to [`INLINE_NAME`] bytes (every generated name up
/// to `$` and 13 letters, and most given ones) it is stored in the cell
/// itself, so naming an actor allocates nothing; a longer one is boxed.
/// 16 bytes, as the `Arc<str>` it replaces.
pub(crate) enum Name {
    Inline {
        len: u8,
        bytes: [u8; INLINE_NAME],
    },
    /// Boxed twice so that this variant is one word and the enum stays
    /// 16 bytes (a long name is rare).
    #[allow(clippy::box_collection)]
    Heap(Box<String>),
}

/// The longest name stored inline.
pub(crate) const INLINE_NAME: usize = 14;

impl Name {
    /// The generated name of an anonymous actor with this uid: `$` and the
    /// uid in base 26 with the digits `a` to `z` (`$b`, `$c`, … `$ba`, …).
    /// Unique among siblings because the uid is unique in the process, and
    /// never a given name (those may not start with `$`), so it needs
    /// neither the parent's lock nor a look at its children.
    pub(crate) fn anonymous(uid: u64) -> Name {
        let mut digits = [0u8; 16];
        let mut at = digits.len();
        let mut n = uid;
        loop {
            at -= 1;
            digits[at] = b'a' + (n % 26) as u8;
            n /= 26;
            if n == 0 {
                break;
            }
        }
        at -= 1;
        digits[at] = b'$';
        let name = &digits[at..];
        if name.len() <= INLINE_NAME {
            // The common case (every uid below 26^13), without `from`'s
            // UTF-8 check: `$` and the letters are ASCII.
            let mut bytes = [0; INLINE_NAME];
            bytes[..name.len()].copy_from_slice(name);
            return Name::Inline {
                len: name.len() as u8,
                bytes,
            };
        }
        Name::from(std::str::from_utf8(name).expect("ascii"))
    }
}

impl From<&str> for Name {
    fn from(name: &str) -> Name {
        if name.len() <= INLINE_NAME {
            let mut bytes = [0; INLINE_NAME];
            bytes[..name.len()].copy_from_slice(name.as_bytes());
            Name::Inline {
                len: name.len() as u8,
                bytes,
            }
        } else {
            Name::Heap(Box::new(name.to_owned()))
        }
    }
}

impl Deref for Name {
    type Target = str;

    #[inline]
    fn deref(&self) -> &str {
        match self {
            Name::Inline { len, bytes } => {
                let bytes = &bytes[..usize::from(*len)];
                // `from` copied these `len` bytes from a `&str` of exactly
                // that length, or `anonymous` wrote `$` and letters `a` to
                // `z` (ASCII); nothing writes them afterwards.
                // SAFETY: so they are valid UTF-8.
                unsafe { std::str::from_utf8_unchecked(bytes) }
            }
            Name::Heap(name) => name,
        }
    }
}

/// The parts of a cell that any thread may read.
pub(crate) struct CellCore {
    /// What needs the actor's type, for an `ActorId` (set by
    /// `ActorCell::new`).
    pub(crate) vtable: &'static CellVtable,
    /// Unique in the process (never reused), so a stale `Failed` from an
    /// earlier incarnation of a name is recognised.
    pub(crate) uid: u64,
    pub(crate) name: Name,
    /// `None` only for the root guardian.
    pub(crate) parent: Option<ActorId>,
    pub(crate) system: ActorSystem,
    /// Written by the parent's spawners (any thread) and the run holder.
    pub(crate) children: Mutex<Children>,
}

/// A parent's children, by name. One word in every cell: the table,
/// allocated by the first child (most actors have none), and the `closed`
/// flag in the pointer's bit 0.
pub(crate) struct Children {
    /// A `Box<ChildTable>` (null until the first child), tagged [`CLOSED`]
    /// once the parent starts terminating: then no more children.
    word: *mut ChildTable,
}

/// Bit 0 of `Children::word` (a `ChildTable` is word-aligned).
const CLOSED: usize = 1;

// SAFETY: `Children` owns its `Box<ChildTable>` (dropped in `Drop`), which
// is `Send`; the raw pointer is only its representation.
unsafe impl Send for Children {}

impl Default for Children {
    fn default() -> Children {
        Children {
            word: std::ptr::null_mut(),
        }
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        let table = self.table_ptr();
        if !table.is_null() {
            // SAFETY: a non-null table pointer came from `Box::into_raw`
            // (`table_or_insert`), and only this drop frees it.
            drop(unsafe { Box::from_raw(table) });
        }
    }
}

#[derive(Default)]
struct ChildTable {
    /// Every child, keyed by its uid: one multiply hashes it (uids come
    /// from the system's counter, never from outside input, so no hash
    /// flooding is possible) and the key is read without touching the
    /// child's cell. One 16-byte entry per child.
    by_uid: HashMap<ByUid, ChildState, UidHash>,
    /// The children with a given name, keyed by it (hashed with SipHash:
    /// names may come from outside input). Generated names (`$` and the
    /// uid) are not here: they are found through `by_uid`, so an anonymous
    /// child costs no SipHash and no second entry.
    by_name: HashSet<ByName, ProcessKeyed>,
}

/// A child's id as the key of [`ChildTable::by_uid`]: equal, and hashed,
/// as its uid (which never changes), so the table is looked up by `&u64`.
struct ByUid(ActorId);

impl PartialEq for ByUid {
    fn eq(&self, other: &ByUid) -> bool {
        self.0.uid() == other.0.uid()
    }
}

impl Eq for ByUid {}

impl Hash for ByUid {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `u64` hashes: `Borrow<u64>` requires the same hash.
        self.0.uid().hash(state);
    }
}

impl Borrow<u64> for ByUid {
    fn borrow(&self) -> &u64 {
        &self.0.core().uid
    }
}

/// A named child's id as the key of [`ChildTable::by_name`]: equal, and
/// hashed, as its name (which never changes), so the name is not stored a
/// second time and the set is looked up by `&str`.
struct ByName(ActorId);

impl PartialEq for ByName {
    fn eq(&self, other: &ByName) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for ByName {}

impl Hash for ByName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `str` hashes: `Borrow<str>` requires the same hash.
        self.0.name().hash(state);
    }
}

impl Borrow<str> for ByName {
    fn borrow(&self) -> &str {
        self.0.name()
    }
}

/// Hashes a uid with one multiply by 2^64 / φ (Fibonacci hashing): the
/// high bits, which hashbrown's control bytes use, are spread even for
/// consecutive uids, and the low bits, which pick the bucket, map
/// consecutive uids to distinct buckets. Only for keys the engine makes.
#[derive(Clone, Copy, Default)]
struct UidHash;

impl BuildHasher for UidHash {
    type Hasher = UidHasher;

    fn build_hasher(&self) -> UidHasher {
        UidHasher(0)
    }
}

#[derive(Default)]
struct UidHasher(u64);

/// 2^64 / φ, odd.
const FIBONACCI: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for UidHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Not reached: the table hashes `u64`s only (`write_u64`).
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(FIBONACCI);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The uid a generated name (`$` and the uid in base 26, see
/// [`Name::anonymous`]) stands for, or `None` for any other name. Several
/// strings decode to one uid (`$ab` and `$b`), so the caller compares the
/// name of the child it finds.
fn generated_uid(name: &str) -> Option<u64> {
    let digits = name.strip_prefix('$')?;
    if digits.is_empty() {
        return None;
    }
    digits.bytes().try_fold(0u64, |n, d| {
        let digit = d.checked_sub(b'a').filter(|&d| d < 26)?;
        n.checked_mul(26)?.checked_add(u64::from(digit))
    })
}

/// SipHash keyed once per process: as DoS-resistant as the standard
/// `RandomState` (names may come from outside input), but zero-sized, where
/// `RandomState` keeps 16 bytes of keys in every map, that is in every cell.
#[derive(Clone, Copy, Default)]
pub(crate) struct ProcessKeyed;

impl BuildHasher for ProcessKeyed {
    type Hasher = DefaultHasher;

    fn build_hasher(&self) -> DefaultHasher {
        static KEYS: OnceLock<RandomState> = OnceLock::new();
        KEYS.get_or_init(RandomState::new).build_hasher()
    }
}

/// One child, as its parent sees it (besides its id, the table's key): one
/// word, the restart statistics (allocated by the first restart decision:
/// most children never fail) with the `stopping` flag in bit 0.
pub(crate) struct ChildState {
    /// A `Box<RestartStats>` or null, tagged [`STOPPING`].
    word: *mut RestartStats,
}

/// Bit 0 of `ChildState::word`: the parent asked the child to stop; a
/// restart waits for these.
const STOPPING: usize = 1;

// SAFETY: `ChildState` owns its `Box<RestartStats>` (dropped in `Drop`),
// which is `Send`; the raw pointer is only its representation.
unsafe impl Send for ChildState {}

impl Default for ChildState {
    fn default() -> ChildState {
        ChildState {
            word: std::ptr::null_mut(),
        }
    }
}

impl Drop for ChildState {
    fn drop(&mut self) {
        let stats = self.stats_ptr();
        if !stats.is_null() {
            // SAFETY: a non-null stats pointer came from `Box::into_raw`
            // (`stats`), and only this drop frees it.
            drop(unsafe { Box::from_raw(stats) });
        }
    }
}

impl ChildState {
    fn stats_ptr(&self) -> *mut RestartStats {
        untag(self.word)
    }

    /// The parent asked the child to stop.
    pub(crate) fn stopping(&self) -> bool {
        self.word as usize & STOPPING != 0
    }

    pub(crate) fn set_stopping(&mut self) {
        if !self.stopping() {
            self.word = self.word.wrapping_byte_add(STOPPING);
        }
    }

    /// The child's restart statistics, allocated on first use.
    pub(crate) fn stats(&mut self) -> &mut RestartStats {
        if self.stats_ptr().is_null() {
            let stats = Box::into_raw(Box::<RestartStats>::default());
            debug_assert_eq!(stats as usize & STOPPING, 0, "word-aligned");
            let tag = self.word as usize & STOPPING;
            self.word = stats.wrapping_byte_add(tag);
        }
        // SAFETY: not null (allocated above if it was), from
        // `Box::into_raw`, owned by `self`, which we borrow mutably.
        unsafe { &mut *self.stats_ptr() }
    }
}

/// A tagged pointer without its bit 0 (keeping its provenance).
fn untag<T>(word: *mut T) -> *mut T {
    word.wrapping_byte_sub(word as usize & 1)
}

impl Children {
    fn table_ptr(&self) -> *mut ChildTable {
        untag(self.word)
    }

    fn table(&self) -> Option<&ChildTable> {
        // SAFETY: null or from `Box::into_raw`, owned by `self`.
        unsafe { self.table_ptr().as_ref() }
    }

    fn table_mut(&mut self) -> Option<&mut ChildTable> {
        // SAFETY: as in `table`; `self` is borrowed mutably.
        unsafe { self.table_ptr().as_mut() }
    }

    fn table_or_insert(&mut self) -> &mut ChildTable {
        if self.table_ptr().is_null() {
            let table = Box::into_raw(Box::<ChildTable>::default());
            debug_assert_eq!(table as usize & CLOSED, 0, "word-aligned");
            let tag = self.word as usize & CLOSED;
            self.word = table.wrapping_byte_add(tag);
        }
        // SAFETY: not null (allocated above if it was), from
        // `Box::into_raw`, owned by `self`, which we borrow mutably.
        unsafe { &mut *self.table_ptr() }
    }

    /// The parent is terminating: no more children.
    pub(crate) fn closed(&self) -> bool {
        self.word as usize & CLOSED != 0
    }

    pub(crate) fn close(&mut self) {
        if !self.closed() {
            self.word = self.word.wrapping_byte_add(CLOSED);
        }
    }

    /// The state of `id`, if it is (still) a child.
    pub(crate) fn get(&self, id: &ActorId) -> Option<&ChildState> {
        self.table()?.by_uid.get(&id.uid())
    }

    pub(crate) fn get_mut(&mut self, id: &ActorId) -> Option<&mut ChildState> {
        self.table_mut()?.by_uid.get_mut(&id.uid())
    }

    /// The child named `name` (possibly terminated, until its parent has
    /// handled the notice of its death).
    pub(crate) fn by_name(&self, name: &str) -> Option<&ActorId> {
        let table = self.table()?;
        match generated_uid(name) {
            Some(uid) => {
                let (key, _) = table.by_uid.get_key_value(&uid)?;
                (key.0.name() == name).then_some(&key.0)
            }
            None => Some(&table.by_name.get(name)?.0),
        }
    }

    /// Adds `id`, replacing a (terminated) child of the same name.
    pub(crate) fn insert(&mut self, id: ActorId) {
        let table = self.table_or_insert();
        if generated_uid(id.name()).is_none() {
            // A given name: the child that had it (terminated, its death
            // not yet handled) is replaced, so its late notice matches no
            // child.
            if let Some(old) = table.by_name.replace(ByName(id.clone())) {
                table.by_uid.remove(&old.0.uid());
            }
        }
        table.by_uid.insert(ByUid(id), ChildState::default());
    }

    /// Removes `id` if it is (still) a child; returns whether it was.
    pub(crate) fn remove(&mut self, id: &ActorId) -> bool {
        let Some(table) = self.table_mut() else {
            return false;
        };
        if table.by_uid.remove(&id.uid()).is_none() {
            return false;
        }
        if generated_uid(id.name()).is_none() {
            // Its name's entry is its own: a successor of the same name
            // would have removed this child from `by_uid` already.
            let removed = table.by_name.remove(id.name());
            debug_assert!(removed, "a named child is in both maps");
        }
        true
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.table().is_none_or(|t| t.by_uid.is_empty())
    }

    /// Every child with its state.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&ActorId, &ChildState)> {
        self.table()
            .into_iter()
            .flat_map(|t| t.by_uid.iter().map(|(k, s)| (&k.0, s)))
    }

    /// Every child with its state, mutably.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&ActorId, &mut ChildState)> {
        self.table_mut()
            .into_iter()
            .flat_map(|t| t.by_uid.iter_mut().map(|(k, s)| (&k.0, s)))
    }

    /// Every child's id.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &ActorId> {
        self.iter().map(|(id, _)| id)
    }
}

impl CellCore {
    pub(crate) fn children(&self) -> MutexGuard<'_, Children> {
        // A panic never happens while this lock is held (no user code runs
        // under it), so poisoning cannot leave it inconsistent.
        self.children.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<A: Actor> ActorCell<A> {
    /// A new cell (one allocation) with an open mailbox, counted in the
    /// system's live cells.
    pub(crate) fn new(
        uid: u64,
        name: Name,
        parent: Option<ActorId>,
        system: ActorSystem,
        capacity: Option<usize>,
        driver: Driver<A>,
    ) -> Result<Arc<ActorCell<A>>, proscenium_mailbox::ZeroCapacityError> {
        let core = CellCore {
            vtable: Self::vtable(),
            uid,
            name,
            parent,
            system,
            children: Mutex::new(Children::default()),
        };
        let mailbox = Mailbox::with_middle(capacity, core)?;
        mailbox.middle().system.cell_created();
        Ok(Arc::new(ActorCell {
            head: Cell { mailbox },
            driver: UnsafeCell::new(driver),
        }))
    }

    /// Submits this cell after an enqueue won its run.
    pub(crate) fn schedule(self: &Arc<Self>) {
        schedule_runnable(self.core(), Arc::clone(self) as Arc<dyn Runnable>);
    }

    pub(crate) fn id(self: &Arc<Self>) -> ActorId {
        let cell = Arc::into_raw(Arc::clone(self));
        // SAFETY: the data pointer of an `Arc<ActorCell<A>>` and its core,
        // with its provenance; the count is the clone's, handed over.
        unsafe { ActorId::from_raw(core_of(cell)) }
    }

    /// The typed reference.
    pub(crate) fn actor_ref(self: &Arc<Self>) -> ActorRef<A::Msg> {
        ActorRef {
            cell: CellRef::new(Arc::clone(self)),
        }
    }
}

/// Runs `runnable` on the system's scheduler. Once the scheduler is shut
/// down (after the root guardian terminated, so every cell is closed), the
/// run is done here instead: it can only drain a closed mailbox into dead
/// letters, and the message still reaches them exactly once.
pub(crate) fn schedule_runnable(core: &CellCore, runnable: Arc<dyn Runnable>) {
    if let Err(refused) = core.system.scheduler_handle().submit(runnable) {
        run_here(refused.into_inner());
    }
}

/// [`schedule_runnable`] for a cell that a system message woke: ahead of
/// everything queued on the scheduler, so a stop, a failure or a death
/// notice is not stuck behind a backlog of other actors' user work
/// (invariant 3 says the signal goes before the cell's own user messages;
/// this gets the cell itself run soon).
pub(crate) fn schedule_runnable_urgent(core: &CellCore, runnable: Arc<dyn Runnable>) {
    if let Err(refused) = core.system.scheduler_handle().submit_urgent(runnable) {
        run_here(refused.into_inner());
    }
}

/// Runs a cell on this thread (the scheduler refused it: shut down).
fn run_here(runnable: Arc<dyn Runnable>) {
    let mut budget = Budget::new(u32::MAX);
    while runnable.clone().run(&mut budget) == RunOutcome::Yield {
        budget = Budget::new(u32::MAX);
    }
}

impl<A: Actor> Runnable for ActorCell<A> {
    #[inline]
    fn run(self: Arc<Self>, budget: &mut Budget) -> RunOutcome {
        // A run moves the actor's messages by value, from the mailbox to
        // `receive`: with room for them, if they are large.
        if const { large::is_large::<A::Msg>() } {
            large::with_room_for::<A::Msg, _>(move || self.run_held(budget))
        } else {
            self.run_held(budget)
        }
    }
}

impl<A: Actor> ActorCell<A> {
    /// The run, on this stack. Inlined into `run` (the small messages'
    /// path is what it was); its frame holds no message.
    #[inline(always)]
    fn run_held(self: Arc<Self>, budget: &mut Budget) -> RunOutcome {
        let driver = self.driver.get();
        // The scheduler runs this cell only when it was submitted by the
        // winner of its run-state (`Enqueued::MustSchedule`), by a
        // `Release::Reschedule` below, or requeued after `Yield`: this
        // thread holds the run, so nothing else touches `driver` until the
        // release below.
        let run = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: we hold the run (above); the `&mut` ends with this call
            // (or its unwinding), before the release.
            unsafe { (*driver).run(&self, budget) }
        }));
        let end = match run {
            Ok(end) => end,
            Err(payload) => {
                // The backstop: the driver contains the user code it runs,
                // so this is a panic from elsewhere (an engine bug, a
                // panicking tracing layer). Never leave the cell held: run
                // it again (what it was doing when the panic came is lost).
                // SAFETY: we still hold the run, as above; the `&mut` of the
                // unwound call has ended.
                unsafe { (*driver).abandon_run() };
                self.core().system.run_panicked();
                let me = self.id();
                report(payload, |panic| {
                    tracing::error!(actor = %me, panic, "a panic escaped an actor's run; the actor is run again");
                });
                RunEnd::Yield
            }
        };
        match end {
            RunEnd::Yield => RunOutcome::Yield,
            // SAFETY: we hold the run (as above) and no longer borrow the
            // driver; after `Idle` nothing here touches the consumer side.
            RunEnd::Release => match unsafe { self.mailbox.release() } {
                Release::Idle => RunOutcome::Done,
                Release::Reschedule => RunOutcome::Yield,
            },
        }
    }
}

impl<A: Actor> Drop for ActorCell<A> {
    fn drop(&mut self) {
        self.core().system.cell_dropped();
        // The parent may go with this cell (this was the last reference to
        // it), and its parent with it, and so on: dropped here, that is a
        // recursion as deep as the hierarchy, which overflows the stack of
        // a deep one. The children need no such care: each holds this cell
        // (its parent), so none is left in the map once this cell goes.
        if let Some(parent) = self.head.mailbox.middle_mut().parent.take() {
            drop_link(parent);
        }
    }
}

thread_local! {
    /// The parents that cells dropped on this thread left behind, for the
    /// outermost of those drops to release one at a time; `None` while no
    /// cell drop is under way on this thread.
    static LINKS: RefCell<Option<Vec<ActorId>>> = const { RefCell::new(None) };
}

/// Drops a dropped cell's parent without recursing up the chain: if a cell
/// drop is under way on this thread (this one is nested in it), the parent
/// is queued for it; otherwise this is the outermost drop, which releases
/// the parent and then what the drops it causes queue, one at a time, so
/// the stack stays flat however deep the hierarchy. If this thread's queue
/// is gone (a drop from a thread-local's destructor at thread exit), the
/// parent is dropped here, recursively.
fn drop_link(parent: ActorId) {
    let mut parent = Some(parent);
    let outermost = LINKS.try_with(|links| match &mut *links.borrow_mut() {
        Some(queue) => {
            queue.extend(parent.take());
            false
        }
        none => {
            *none = Some(Vec::new());
            true
        }
    });
    match outermost {
        Ok(false) => {}
        Ok(true) => {
            let mut next = parent;
            while let Some(link) = next {
                // The last reference to a cell that never terminated (a
                // system whose quiesce timed out) also drops its actor and
                // its queued messages: user code.
                contain("dropping an actor cell", || drop(link));
                next = LINKS
                    .try_with(|links| links.borrow_mut().as_mut().and_then(Vec::pop))
                    .ok()
                    .flatten();
            }
            let _ = LINKS.try_with(|links| links.borrow_mut().take());
        }
        Err(_) => drop(parent),
    }
}

/// What happens to a system message that reaches a terminated actor: a
/// watch is answered at once (Terminated arrives even if the target was
/// already dead when watched); the rest no longer matters.
pub(crate) fn undeliverable_system(target: &ActorId, msg: SystemMsg) {
    match msg {
        SystemMsg::Watch(Watcher::Actor(watcher)) => {
            watcher.send_system(SystemMsg::DeathWatchNotification(target.clone()));
        }
        SystemMsg::Watch(Watcher::Callback(callback)) => run_callback(callback),
        _ => {}
    }
}

/// Runs a termination callback; a panic in it is logged, never propagated.
pub(crate) fn run_callback(callback: Box<dyn FnOnce() + Send>) {
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(callback)) {
        tracing::error!(
            panic = %crate::supervision::failure::panic_message(payload.as_ref()),
            "a termination callback panicked"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::mem::{align_of, size_of};

    /// An actor of 16 bytes, as compare's idle one (an `Arc` and a flag).
    struct Small {
        _shared: std::sync::Arc<()>,
        _flag: bool,
    }

    impl crate::api::actor::Actor for Small {
        type Msg = ();

        fn receive(
            &mut self,
            _: &mut crate::api::context::Context<Self>,
            _: (),
        ) -> crate::supervision::failure::Outcome {
            Ok(())
        }
    }

    /// Every actor is one allocation, its cell: the head (vtable 8, uid 8,
    /// name 16, parent 8, system 8, children 16, mailbox 48: 112 bytes),
    /// then the driver (40 bytes besides the actor: the props' factory 16,
    /// the context 16 (the cell during a run, and one pointer to what few
    /// actors use: the death watch, the watchers, timers, receive timeout
    /// and stash, a failure's pending business), the life state and the
    /// failed flag 8), and the actor. No alignment beyond a word is forced,
    /// so the `Arc` around it is not padded to a cache line (figures in
    /// BENCHMARKS.md, idle-actor RSS; the table in decision 0020).
    #[test]
    fn a_cell_stays_small_and_word_aligned() {
        use super::ActorCell;
        use crate::runtime::driver::Driver;
        let cell = size_of::<ActorCell<Small>>();
        let head = std::mem::offset_of!(ActorCell<Small>, driver);
        let driver = size_of::<Driver<Small>>() - size_of::<Small>();
        assert_eq!(size_of::<Small>(), 16);
        assert!(head <= 112, "head {head}");
        assert!(driver <= 40, "driver {driver}");
        assert!(cell <= 112 + 40 + 16, "cell {cell}");
        assert!(align_of::<ActorCell<Small>>() <= 8);
        // An id is one pointer (the parent's, each child's table key); a
        // typed reference is the `Arc<dyn Runnable>` the scheduler takes.
        assert_eq!(size_of::<crate::ActorId>(), 8);
        assert_eq!(size_of::<Option<crate::ActorId>>(), 8);
        assert_eq!(size_of::<crate::ActorRef<u64>>(), 16);
    }

    /// The core sits between the mailbox's senders' words (the first 16
    /// bytes) and its run holder's, at one offset whatever the message
    /// type, and is long enough that no 64-byte cache line can hold a word
    /// of each side, wherever the cell starts (decision 0002).
    #[test]
    fn the_core_is_at_the_same_offset_for_every_message_type_and_parts_the_lines() {
        use super::{CellCore, Mailbox, CORE_OFFSET};
        use crate::runtime::signal::{Envelope, SystemMsg};
        assert_eq!(CORE_OFFSET, 16);
        assert_eq!(
            Mailbox::<SystemMsg, Envelope<[u64; 9]>, CellCore>::MIDDLE_OFFSET,
            CORE_OFFSET
        );
        assert_eq!(
            Mailbox::<SystemMsg, Envelope<String>, CellCore>::MIDDLE_OFFSET,
            CORE_OFFSET
        );
        // The last senders' byte is at 15, the first holder's byte at
        // CORE_OFFSET + size_of::<CellCore>(): 64 or more apart.
        assert!(CORE_OFFSET + size_of::<CellCore>() - 15 >= 64);
    }

    /// A parent's children are one word behind the lock, the `closed` flag
    /// in the table pointer's bit 0, kept whether the table exists or not;
    /// a child's state is one word, its `stopping` flag in the statistics
    /// pointer's bit 0 (so `/user`'s table costs 16 bytes per child).
    #[test]
    fn children_and_child_states_keep_their_flags_beside_their_pointers() {
        use super::{ChildState, Children};
        assert_eq!(size_of::<std::sync::Mutex<Children>>(), 16);
        assert_eq!(size_of::<ChildState>(), 8);
        let mut children = Children::default();
        assert!(!children.closed() && children.is_empty());
        children.close();
        assert!(children.closed() && children.is_empty());
        children.table_or_insert();
        assert!(children.closed() && children.is_empty());
        let mut open = Children::default();
        open.table_or_insert();
        assert!(!open.closed());
        open.close();
        assert!(open.closed() && open.table().is_some());

        let mut state = ChildState::default();
        assert!(!state.stopping());
        state.set_stopping();
        assert!(state.stopping());
        let stats: *const _ = state.stats();
        assert!(state.stopping());
        assert!(std::ptr::eq(stats, state.stats()));
        let mut fresh = ChildState::default();
        let _ = fresh.stats();
        assert!(!fresh.stopping());
        fresh.set_stopping();
        assert!(fresh.stopping());
    }

    /// A name is stored in the cell up to 14 bytes and boxed beyond, and
    /// reads back the same either way (multi-byte characters included).
    #[test]
    fn names_read_back_inline_or_boxed() {
        use super::{Name, INLINE_NAME};
        assert_eq!(size_of::<Name>(), 16);
        let long = "x".repeat(INLINE_NAME + 1);
        let cases = ["", "$a", "$zzzzzzzzzzzzz", "élève-ü", "14-bytes-name!", &long];
        for case in cases {
            let name = Name::from(case);
            assert_eq!(&*name, case);
            let inline = matches!(name, Name::Inline { .. });
            assert_eq!(inline, case.len() <= INLINE_NAME, "{case:?}");
        }
        for (uid, name) in [(0, "$a"), (1, "$b"), (25, "$z"), (26, "$ba"), (27, "$bb")] {
            assert_eq!(&*Name::anonymous(uid), name);
        }
        assert_eq!(Name::anonymous(u64::MAX).len(), 15);
    }

    /// A generated name decodes to the uid it was made from, and nothing
    /// else decodes (given names may not start with `$`).
    #[test]
    fn generated_names_decode_to_their_uids() {
        use super::{generated_uid, Name};
        for uid in [0, 1, 25, 26, 27, 675, 676, 1 << 40, u64::MAX - 1, u64::MAX] {
            assert_eq!(generated_uid(&Name::anonymous(uid)), Some(uid), "{uid}");
        }
        for name in ["", "$", "a", "b", "$B", "$a$", "$é", "$zzzzzzzzzzzzzz"] {
            assert_eq!(generated_uid(name), None, "{name:?}");
        }
        // A leading zero digit decodes too; the table compares the name.
        assert_eq!(generated_uid("$ab"), Some(1));
    }
}
