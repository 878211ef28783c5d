//! Node memory for the queues: blocks carved in address order from small
//! slabs, and a slab recycled whole once every block in it was freed.
//!
//! Why: a queue node is allocated by the sending thread and freed by the
//! consuming thread. Allocating each node by itself (`malloc`, or a free
//! list of single blocks) scatters a lane's nodes over memory, and a cross-
//! thread flood then pays two cache misses per message: the consumer on
//! each node the producer wrote, and the producer on each recycled block
//! whose free-list link the consumer wrote (BENCHMARKS.md, "Mailbox").
//! When the producer runs ahead of the consumer, most nodes miss the cache
//! entirely and cost a `malloc` and a remote `free` each. crossbeam-channel
//! avoids all three with slots packed in 31-slot blocks. Here:
//!
//! - a thread carves the nodes it allocates one after the other from its
//!   current slab of the node's size class ([`SLAB`] bytes, 16-byte blocks
//!   for the smallest class: four nodes per cache line, in the order the
//!   consumer reads them, which the hardware prefetcher follows);
//! - a free writes nothing into the block: it counts the block against its
//!   slab, in a per-thread tally that is settled with the slab's atomic
//!   count once per run of frees in one slab (nearly once per slab in a
//!   flood, where a consumer frees in the order nodes were carved);
//! - the thread that settles a slab's count to zero owns the whole slab
//!   again, keeps a few for itself, and passes the rest through a global,
//!   mutex-protected stock: one lock per slab (63 nodes of 16 bytes), not
//!   per node. The producer's next slab comes from there, its memory not
//!   read before it is written. A free slab serves any class. (A queue's
//!   stub takes no block: it is the lane's tail word, and an idle lane
//!   gives its last node back, so an idle actor pins no slab.)
//!
//! A slab is aligned to its size, so a block's slab is its address with the
//! low bits cleared. Its first 16 bytes hold the count: the blocks not yet
//! freed, counting those not yet carved. A slab's blocks are reused only
//! when all of them are free; so one node kept alive (a queued message, or
//! an idle lane's last node) keeps its slab's memory, at most [`SLAB`]
//! bytes, from being reused: the price of contiguity (decision record
//! 0021).
//!
//! Blocks are type-erased: a node of size up to [`MAX_SIZE`] and alignment
//! up to [`ALIGN`] takes a block of its size class (sizes rounded up to 16
//! bytes); larger nodes go straight to the global allocator. What is cached
//! is memory only: no value lives in a free block.
//!
//! Bounds: a thread keeps at most [`LOCAL_SLABS`] free slabs, the global
//! stock at most [`GLOBAL_MAX_SLABS`]; past that, slabs go back to the
//! allocator. A thread's free slabs and tallies move on when it exits.
//! [`trim_node_cache`] settles the calling thread's tallies and frees its
//! free slabs and the global stock.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::UnsafeCell;
use std::ptr;
// Under loom the count is loom's, so that the models check its orderings
// (the hand-over of a slab between the threads that free its blocks), and
// a loom cell stands for the blocks' memory (see `Slab`). A slab's header
// is written when its carving starts, inside an execution, and no slab
// outlives the execution it was carved in (under loom, what would be
// reused later is retired instead: see `give_to_global`).
#[cfg(loom)]
use loom::sync::atomic::{AtomicUsize, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicUsize, Ordering};
#[cfg(not(loom))]
use std::sync::Mutex;

/// Bytes per slab, and its alignment.
pub(crate) const SLAB: usize = 1024;
/// Largest node size served by the cache.
pub(crate) const MAX_SIZE: usize = 128;
/// Alignment of every block (and the largest node alignment served).
pub(crate) const ALIGN: usize = 16;
const CLASSES: usize = MAX_SIZE / ALIGN;
/// Free slabs a thread keeps before passing them on (a free slab serves
/// any class).
pub(crate) const LOCAL_SLABS: usize = 8;
/// Free slabs kept in the global stock (128 KiB).
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const GLOBAL_MAX_SLABS: usize = 128;
/// Slabs whose frees a thread tallies before settling the oldest.
const TALLIES: usize = 4;

/// The head of a slab: its count, then (from offset [`HEADER`]) the blocks.
struct Slab {
    /// Blocks of this slab not yet freed, counting the ones not yet carved.
    /// Set by the thread that starts carving the slab (which owns it then),
    /// lowered by the threads that free its blocks; the one that brings it
    /// to zero owns the slab again.
    live: AtomicUsize,
    /// Under loom, the blocks' memory as one loom cell: a thread that
    /// settles its frees reads it (its uses of the blocks), and the thread
    /// that brings the count to zero writes it (its reuse of them). loom
    /// does not see raw memory, so without this a reuse not ordered after
    /// another thread's last use (the count's Release/Acquire pairing
    /// broken) would go unreported; with it, loom reports a causality
    /// violation.
    #[cfg(loom)]
    blocks: loom::cell::UnsafeCell<()>,
}

impl Slab {
    /// A slab of `cap` blocks, none freed.
    fn new(cap: usize) -> Slab {
        Slab {
            live: AtomicUsize::new(cap),
            #[cfg(loom)]
            blocks: loom::cell::UnsafeCell::new(()),
        }
    }
}

/// Offset of the first block in a slab: the header rounded up to [`ALIGN`]
/// (one `ALIGN` outside loom, where the header is the count; loom's count
/// and cell are larger).
const HEADER: usize = std::mem::size_of::<Slab>().div_ceil(ALIGN) * ALIGN;

fn slab_layout() -> Layout {
    Layout::from_size_align(SLAB, SLAB).expect("the slab layout is valid")
}

/// The slab a block was carved from.
fn slab_of(block: *mut u8) -> *mut Slab {
    // A pointer-to-integer cast reads the address only (no int-to-pointer
    // cast: the result keeps the block's provenance, the slab's allocation).
    block.wrapping_sub(block as usize & (SLAB - 1)).cast()
}

/// Blocks per slab of a class. Under loom one, so that a freed node's
/// address comes back on its freeing thread's next allocation, as soon as
/// it can (the harshest case for the mailbox's marks: decision records 0002
/// and 0015), and the models stay small; a model whose slab must be freed
/// on two threads asks for more ([`ModelSlabCapacity`]).
fn capacity(class: usize) -> usize {
    #[cfg(loom)]
    {
        let _ = class;
        MODEL_CAPACITY.with(std::cell::Cell::get)
    }
    #[cfg(not(loom))]
    {
        (SLAB - HEADER) / class_size(class)
    }
}

#[cfg(loom)]
std::thread_local! {
    /// Blocks per slab under loom: one, unless a model asks for more
    /// ([`ModelSlabCapacity`]). A std thread-local of the test's thread,
    /// which runs all of its model's threads.
    static MODEL_CAPACITY: std::cell::Cell<usize> = const { std::cell::Cell::new(1) };
}

/// Under loom, makes the slabs carved on this test's thread hold `blocks`
/// blocks instead of one, until dropped: for a model in which two threads
/// free blocks of one slab (so that two settle its count).
#[cfg(loom)]
#[derive(Debug)]
pub struct ModelSlabCapacity(());

#[cfg(loom)]
impl ModelSlabCapacity {
    /// Slabs of `blocks` blocks (at least one) from now on.
    pub fn set(blocks: usize) -> ModelSlabCapacity {
        MODEL_CAPACITY.with(|c| c.set(blocks.max(1)));
        ModelSlabCapacity(())
    }
}

#[cfg(loom)]
impl Drop for ModelSlabCapacity {
    fn drop(&mut self) {
        MODEL_CAPACITY.with(|c| c.set(1));
    }
}

fn class_of(layout: Layout) -> Option<usize> {
    (layout.size() <= MAX_SIZE && layout.align() <= ALIGN)
        .then(|| layout.size().max(1).div_ceil(ALIGN) - 1)
}

fn class_size(class: usize) -> usize {
    (class + 1) * ALIGN
}

/// A fresh slab from the global allocator (its count not yet set).
fn new_slab() -> *mut Slab {
    // SAFETY: the slab layout is not zero-sized.
    let p = unsafe { alloc(slab_layout()) };
    if p.is_null() {
        handle_alloc_error(slab_layout());
    }
    p.cast()
}

/// # Safety
///
/// `slab` came from [`new_slab`], is free (its count is zero or was never
/// set) and is not used again.
unsafe fn free_slab(slab: *mut Slab) {
    // SAFETY: allocated with this layout by `new_slab` (caller's contract).
    unsafe { dealloc(slab.cast(), slab_layout()) };
}

/// Lowers `slab`'s count by `n` (blocks freed by this thread); returns
/// whether that brought it to zero, in which case the caller owns the slab.
///
/// # Safety
///
/// `slab` is a live slab, and `n` of its blocks were freed and not counted
/// yet.
unsafe fn settle(slab: *mut Slab, n: usize) -> bool {
    // Release: this thread's uses of the blocks (the consumer's reads of
    // the nodes, and through the queue's Acquire loads the producers'
    // writes) happen-before the reuse of the slab by whoever brings the
    // count to zero: the pattern of `Arc`'s drop.
    // Under loom: this thread's uses of the blocks it counts (see `Slab`).
    // SAFETY: `slab` is live (caller's contract).
    #[cfg(loom)]
    unsafe {
        (*slab).blocks.with(|_| ())
    };
    // SAFETY: `slab` is live (caller's contract).
    if unsafe { (*slab).live.fetch_sub(n, Ordering::Release) } == n {
        // Acquire: reads the zero our own fetch_sub wrote, the last of a
        // release sequence of RMWs, so it pairs with the Release of every
        // earlier settlement: all uses of the slab's blocks happen-before
        // our reuse. A load, not `fence(Acquire)` as `Arc` has outside
        // sanitizers: ThreadSanitizer does not model stand-alone fences and
        // reported the reuse as a race (tests/node_slabs.rs); the load costs
        // one read of a line we just wrote, once per slab.
        // SAFETY: we brought the count to zero, so we own the live slab.
        unsafe { (*slab).live.load(Ordering::Acquire) };
        // Under loom: the reuse of the whole slab (see `Slab`).
        // SAFETY: as above.
        #[cfg(loom)]
        unsafe {
            (*slab).blocks.with_mut(|_| ())
        };
        true
    } else {
        false
    }
}

/// The slab a thread carves blocks from, for one class.
struct Carving {
    slab: *mut Slab,
    /// The next block to hand out; `end` when the slab is used up.
    next: *mut u8,
    end: *mut u8,
}

impl Carving {
    const NONE: Carving = Carving {
        slab: ptr::null_mut(),
        next: ptr::null_mut(),
        end: ptr::null_mut(),
    };

    /// Starts carving `slab` (free, owned by the caller) for `class`.
    fn start(slab: *mut Slab, class: usize) -> Carving {
        let cap = capacity(class);
        // SAFETY: the caller owns the free slab; nobody else touches it.
        unsafe { slab.write(Slab::new(cap)) };
        // SAFETY: the blocks start at offset HEADER, and `cap` of them fit
        // in the slab after it (`capacity`); `end` is one past the last.
        let (next, end) = unsafe {
            let next = slab.cast::<u8>().add(HEADER);
            (next, next.add(cap * class_size(class)))
        };
        Carving { slab, next, end }
    }

    /// Stops carving: the blocks not carved count as freed. Returns the
    /// slab if that freed it (the caller owns it then).
    fn retire(&mut self, class: usize) -> Option<*mut Slab> {
        let Carving { slab, next, end } = std::mem::replace(self, Carving::NONE);
        let uncarved = (end as usize - next as usize) / class_size(class);
        // SAFETY: while blocks are left to carve the count is above zero, so
        // the slab is live; those blocks were never handed out.
        (uncarved > 0 && unsafe { settle(slab, uncarved) }).then_some(slab)
    }
}

/// Blocks of one slab freed by this thread and not yet counted.
#[derive(Clone, Copy)]
struct Tally {
    slab: *mut Slab,
    freed: usize,
    /// The slab's capacity: a tally that reaches it is settled at once.
    cap: usize,
}

impl Tally {
    const NONE: Tally = Tally {
        slab: ptr::null_mut(),
        freed: 0,
        cap: 0,
    };
}

/// The calling thread's slabs. Only this thread touches them.
struct Local {
    inner: UnsafeCell<Inner>,
}

struct Inner {
    /// The slab being carved per class.
    carving: [Carving; CLASSES],
    /// The most recent first.
    tallies: [Tally; TALLIES],
    free: [*mut Slab; LOCAL_SLABS],
    free_len: usize,
}

impl Inner {
    const EMPTY: Inner = Inner {
        carving: [const { Carving::NONE }; CLASSES],
        tallies: [Tally::NONE; TALLIES],
        free: [ptr::null_mut(); LOCAL_SLABS],
        free_len: 0,
    };

    /// The next block of the current slab, if it has one left: the fast
    /// path of [`alloc_block`].
    #[inline(always)]
    fn carve(&mut self, class: usize) -> Option<*mut u8> {
        let carving = &mut self.carving[class];
        if carving.next == carving.end {
            return None;
        }
        let block = carving.next;
        // SAFETY: `block` is below `end`, so the next block is inside the
        // slab or `end`.
        carving.next = unsafe { block.add(class_size(class)) };
        Some(block)
    }

    #[inline(never)]
    fn alloc(&mut self, class: usize) -> *mut u8 {
        let carving = &mut self.carving[class];
        if carving.next == carving.end {
            // Used up (its blocks are counted already) or never started.
            let slab = self.take_free();
            self.carving[class] = Carving::start(slab, class);
        }
        let carving = &mut self.carving[class];
        let block = carving.next;
        // SAFETY: `block` is below `end`, so the next block is inside the
        // slab or `end`.
        carving.next = unsafe { block.add(class_size(class)) };
        block
    }

    fn take_free(&mut self) -> *mut Slab {
        if self.free_len > 0 {
            self.free_len -= 1;
            return self.free[self.free_len];
        }
        take_from_global().unwrap_or_else(new_slab)
    }

    fn put_free(&mut self, slab: *mut Slab) {
        if self.free_len < LOCAL_SLABS {
            self.free[self.free_len] = slab;
            self.free_len += 1;
        } else {
            give_to_global(slab);
        }
    }

    /// Counts a freed block in the most recent tally, if that does not
    /// complete it: the fast path of [`free_block`] (a consumer frees the
    /// nodes of one producer's slab in a row). One tally only: checking two
    /// cost the mailbox's `dequeue`, where this is inlined, a register
    /// saved and restored per call (callgrind, `actor_ping_pong`).
    #[inline(always)]
    fn tally(&mut self, slab: *mut Slab) -> bool {
        let t = &mut self.tallies[0];
        if t.slab == slab && t.freed + 1 < t.cap {
            t.freed += 1;
            return true;
        }
        false
    }

    /// Counts a freed block of `slab` (of `class`).
    #[inline(never)]
    fn free(&mut self, slab: *mut Slab, class: usize) {
        let t = &mut self.tallies;
        let at = if t[0].slab == slab {
            0
        } else if let Some(i) = (1..TALLIES).find(|&i| t[i].slab == slab) {
            t.swap(0, i);
            0
        } else {
            // A new tally, in the first empty place or the oldest one's.
            let i = (0..TALLIES)
                .find(|&i| t[i].slab.is_null())
                .unwrap_or(TALLIES - 1);
            let old = std::mem::replace(&mut t[i], Tally::NONE);
            self.settle_tally(old);
            let t = &mut self.tallies;
            t.copy_within(0..i, 1);
            t[0] = Tally {
                slab,
                freed: 0,
                cap: capacity(class),
            };
            0
        };
        let t = &mut self.tallies[at];
        t.freed += 1;
        if t.freed == t.cap {
            // This thread freed every block of the slab: it is free.
            let full = std::mem::replace(t, Tally::NONE);
            self.settle_tally(full);
        }
    }

    fn settle_tally(&mut self, t: Tally) {
        // SAFETY: a tally names a live slab (its count is at least `freed`
        // above zero until settled) and counts blocks this thread freed.
        if t.freed > 0 && unsafe { settle(t.slab, t.freed) } {
            self.put_free(t.slab);
        }
    }

    /// Stops carving, settles every tally: afterwards this thread holds no
    /// slab but its free ones.
    fn settle_all(&mut self) {
        for at in 0..CLASSES {
            if let Some(slab) = self.carving[at].retire(at % CLASSES) {
                self.put_free(slab);
            }
        }
        for i in 0..TALLIES {
            let t = std::mem::replace(&mut self.tallies[i], Tally::NONE);
            self.settle_tally(t);
        }
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        let inner = self.inner.get_mut();
        inner.settle_all();
        while inner.free_len > 0 {
            inner.free_len -= 1;
            give_to_global(inner.free[inner.free_len]);
        }
    }
}

#[cfg(not(loom))]
thread_local! {
    static LOCAL: Local = const { Local { inner: UnsafeCell::new(Inner::EMPTY) } };
}

// Under loom the per-thread state is a loom thread-local (one per modelled
// thread, dropped when that thread ends), so the models run this cache's
// real code, and a freed node's address comes back on the next allocation
// of the freeing thread (one block per slab under loom: `capacity`), as it
// does outside loom once a slab is free. What would go to the global stock
// is retired instead (see `give_to_global`).
#[cfg(loom)]
loom::thread_local! {
    static LOCAL: Local = Local { inner: UnsafeCell::new(Inner::EMPTY) };
}

/// A free slab in the global stock.
#[cfg(not(loom))]
struct FreeSlab(*mut Slab);

// SAFETY: a free slab is plain memory owned by whoever holds it.
#[cfg(not(loom))]
unsafe impl Send for FreeSlab {}

#[cfg(not(loom))]
static GLOBAL: Mutex<Vec<FreeSlab>> = Mutex::new(Vec::new());

fn give_to_global(slab: *mut Slab) {
    #[cfg(loom)]
    retire(slab);
    #[cfg(not(loom))]
    {
        // A poisoned lock only means a panic elsewhere while holding it; a
        // Vec of pointers is consistent after any push or pop.
        let mut global = GLOBAL.lock().unwrap_or_else(|e| e.into_inner());
        if global.len() < GLOBAL_MAX_SLABS {
            global.push(FreeSlab(slab));
        } else {
            drop(global);
            // SAFETY: the caller owns the free slab and gives it up.
            unsafe { free_slab(slab) };
        }
    }
}

#[cfg(not(loom))]
fn take_from_global() -> Option<*mut Slab> {
    GLOBAL
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .pop()
        .map(|s| s.0)
}

// Under loom a model's allocations may depend only on its schedule: loom
// replays a schedule's prefix and requires the same path. A process-wide
// stock breaks that twice over. Tests run on several OS threads at once,
// and a slab pushed by one test's model could be popped by another's (the
// terminate models failed with "Reached unexpected exploration state"
// when run in parallel); and a slab left by an earlier execution decides
// whether a later allocation takes it or one freed in this execution
// (which an address held as a mark may equal). So under loom nothing is
// taken from a global stock: what would go there (a thread's slabs when it
// exits, a slab past `LOCAL_SLABS`) is retired into a list of this OS
// thread's (the test's: loom runs a model's threads on the caller's thread
// as coroutines), never reused, and freed when that thread exits, after
// its last model. Nor does a retired slab go back to the allocator mid-
// test: `malloc` handing a freed address back at a mark some modelled
// thread still holds would depend on the allocator's state, not on the
// schedule.
#[cfg(loom)]
fn take_from_global() -> Option<*mut Slab> {
    None
}

#[cfg(loom)]
struct Retired(std::cell::RefCell<Vec<*mut Slab>>);

#[cfg(loom)]
impl Drop for Retired {
    fn drop(&mut self) {
        for slab in self.0.get_mut().drain(..) {
            // SAFETY: retired slabs are free and owned by this list.
            unsafe { free_slab(slab) };
        }
    }
}

#[cfg(loom)]
std::thread_local! {
    static RETIRED: Retired = const { Retired(std::cell::RefCell::new(Vec::new())) };
}

#[cfg(loom)]
fn retire(slab: *mut Slab) {
    if RETIRED.try_with(|r| r.0.borrow_mut().push(slab)).is_err() {
        // The test's thread is exiting: no model runs on it any more.
        // SAFETY: the caller owns the free slab and gives it up.
        unsafe { free_slab(slab) };
    }
}

/// Allocates memory for `layout` (a node's), from the cache when it can.
///
/// Never returns null: allocation failure aborts, as `Box::new` does.
#[inline]
pub(crate) fn alloc_block(layout: Layout) -> *mut u8 {
    let Some(class) = class_of(layout) else {
        // SAFETY: node layouts are never zero-sized (a node holds a pointer).
        let p = unsafe { alloc(layout) };
        if p.is_null() {
            handle_alloc_error(layout);
        }
        return p;
    };
    LOCAL
        .try_with(|local| {
            // SAFETY: only this thread touches its state, and no reference
            // into it outlives this closure.
            let inner = unsafe { &mut *local.inner.get() };
            match inner.carve(class) {
                Some(block) => block,
                None => inner.alloc(class),
            }
        })
        .unwrap_or_else(|_| {
            // The thread is exiting and its state is gone: a slab of one
            // block, which its free hands on like any other.
            let slab = new_slab();
            // SAFETY: the new slab is ours; a slab with its count at one
            // is carved no further.
            unsafe {
                slab.write(Slab::new(1));
                slab.cast::<u8>().add(HEADER)
            }
        })
}

/// Frees memory obtained from [`alloc_block`] with the same `layout`.
///
/// # Safety
///
/// `block` came from `alloc_block(layout)`, holds no live value, and is not
/// used again by the caller.
#[inline]
pub(crate) unsafe fn free_block(block: *mut u8, layout: Layout) {
    let Some(class) = class_of(layout) else {
        // SAFETY: allocated by `alloc(layout)` in `alloc_block` (caller's
        // contract).
        unsafe { dealloc(block, layout) };
        return;
    };
    let slab = slab_of(block);
    let counted = LOCAL.try_with(|local| {
        // SAFETY: only this thread touches its state (see alloc_block).
        let inner = unsafe { &mut *local.inner.get() };
        if !inner.tally(slab) {
            inner.free(slab, class);
        }
    });
    // SAFETY: the thread is exiting and its state is gone: the block is
    // counted at once; its slab is live until then (caller's contract: a
    // block carved from it and not freed).
    if counted.is_err() && unsafe { settle(slab, 1) } {
        give_to_global(slab);
    }
}

/// Frees the node memory cached by the calling thread and in the global
/// stock: settles the calling thread's counts, stops carving its current
/// slabs, and frees every slab that is free. Other threads hand theirs to
/// the global stock when they exit, so call this after joining them; memory
/// in use is not affected. Returns how many bytes were freed.
pub fn trim_node_cache() -> usize {
    let mut freed = 0;
    // `try_with`: during thread exit the cache is already gone.
    let _ = LOCAL.try_with(|local| {
        // SAFETY: only this thread touches its own state, and no
        // `alloc_block` or `free_block` of this thread is running (we are
        // not inside one).
        let inner = unsafe { &mut *local.inner.get() };
        inner.settle_all();
        while inner.free_len > 0 {
            inner.free_len -= 1;
            // SAFETY: a free slab of this thread's, given up.
            unsafe { free_slab(inner.free[inner.free_len]) };
            freed += SLAB;
        }
    });
    #[cfg(not(loom))]
    for slab in std::mem::take(&mut *GLOBAL.lock().unwrap_or_else(|e| e.into_inner())) {
        // SAFETY: slabs in the global stock are free and owned by it.
        unsafe { free_slab(slab.0) };
        freed += SLAB;
    }
    freed
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_node_layouts() {
        let _serial = crate::test_serial();
        assert_eq!(class_of(Layout::new::<[u64; 2]>()), Some(0));
        assert_eq!(class_of(Layout::new::<[u64; 3]>()), Some(1));
        assert_eq!(class_of(Layout::new::<[u8; 128]>()), Some(CLASSES - 1));
        assert_eq!(class_of(Layout::new::<[u8; 129]>()), None);
        #[repr(align(32))]
        struct Wide(#[allow(dead_code)] u8);
        assert_eq!(class_of(Layout::new::<Wide>()), None);
        for class in 0..CLASSES {
            assert_eq!(
                class_of(Layout::from_size_align(class_size(class), ALIGN).expect("valid")),
                Some(class)
            );
            assert!(capacity(class) >= 7, "a slab holds several blocks");
            assert!(HEADER + capacity(class) * class_size(class) <= SLAB);
        }
    }

    #[test]
    fn blocks_are_carved_in_address_order() {
        let _serial = crate::test_serial();
        let layout = Layout::new::<[u64; 2]>();
        trim_node_cache(); // start a fresh slab
        let blocks: Vec<*mut u8> = (0..capacity(0)).map(|_| alloc_block(layout)).collect();
        for pair in blocks.windows(2) {
            assert_eq!(
                pair[1] as usize - pair[0] as usize,
                16,
                "contiguous, ascending"
            );
        }
        assert_eq!(slab_of(blocks[0]), slab_of(blocks[capacity(0) - 1]));
        for b in blocks {
            // SAFETY: from alloc_block with this layout, unused.
            unsafe { free_block(b, layout) };
        }
    }

    #[test]
    fn a_slab_is_reused_once_every_block_is_freed() {
        let _serial = crate::test_serial();
        let layout = Layout::new::<[u64; 5]>();
        trim_node_cache();
        let cap = capacity(class_of(layout).expect("cached"));
        let first: Vec<*mut u8> = (0..cap).map(|_| alloc_block(layout)).collect();
        // One block still live keeps the slab.
        for &b in &first[1..] {
            // SAFETY: from alloc_block with this layout, unused.
            unsafe { free_block(b, layout) };
        }
        let next = alloc_block(layout);
        assert_ne!(
            slab_of(next),
            slab_of(first[0]),
            "a slab in use is not reused"
        );
        // SAFETY: as above.
        unsafe { free_block(first[0], layout) };
        // The rest of `next`'s slab, then the free one.
        let rest: Vec<*mut u8> = (1..cap).map(|_| alloc_block(layout)).collect();
        let again = alloc_block(layout);
        assert_eq!(
            again, first[0],
            "the free slab is carved again, from its start"
        );
        for b in rest.into_iter().chain([next, again]) {
            // SAFETY: as above.
            unsafe { free_block(b, layout) };
        }
    }

    /// A block handed to another thread in a test.
    struct Block(*mut u8);
    // SAFETY: the block is free memory owned by whoever holds it.
    unsafe impl Send for Block {}

    #[test]
    fn slabs_flow_from_a_consumer_thread_to_a_producer_thread() {
        let _serial = crate::test_serial();
        let layout = Layout::new::<[u64; 7]>();
        let n = 4 * capacity(class_of(layout).expect("cached"));
        trim_node_cache();
        // Allocate here, free on another thread: it settles the slabs, keeps
        // a few and hands the rest to the global stock when it exits; this
        // thread then carves them again.
        let blocks: Vec<Block> = (0..n).map(|_| Block(alloc_block(layout))).collect();
        let slabs: Vec<*mut Slab> = blocks.iter().map(|b| slab_of(b.0)).collect();
        // This thread stops carving its last slab, so it can be freed too.
        trim_node_cache();
        std::thread::spawn(move || {
            for b in blocks {
                // SAFETY: from alloc_block with this layout, unused; written
                // here so that a race with the reuse below would show (Miri).
                unsafe {
                    b.0.write(1);
                    free_block(b.0, layout)
                };
            }
        })
        .join()
        .expect("freeing thread panicked");
        let again: Vec<*mut u8> = (0..n).map(|_| alloc_block(layout)).collect();
        let reused = again
            .iter()
            .filter(|b| slabs.contains(&slab_of(**b)))
            .count();
        let cap = n / 4;
        assert!(
            reused >= cap,
            "at least one slab came back through the global stock: {reused}"
        );
        for b in again {
            // SAFETY: as above.
            unsafe {
                b.write(2);
                free_block(b, layout)
            };
        }
        assert!(trim_node_cache() >= SLAB);
    }

    /// A slab's address, handed to another thread in a test.
    #[derive(Clone, Copy)]
    struct FreeSlabAddr(*mut Slab);
    // SAFETY: only compared.
    unsafe impl Send for FreeSlabAddr {}

    /// Settles this thread's tallies and stops its carving, keeping the
    /// slabs that become free (where `trim_node_cache` would free them).
    fn settle_here() {
        // SAFETY: only this thread touches its state; no alloc or free of
        // this thread is running.
        LOCAL.with(|l| unsafe { (*l.inner.get()).settle_all() });
    }

    /// Two threads free the two halves of one slab; the one whose count
    /// brings it to zero carves it again at once. Its writes into the
    /// reused blocks must come after the other thread's last use of them:
    /// the count's Release/Acquire orders them, nothing else does (the
    /// other thread signals only with a Relaxed flag). Miri's data-race
    /// detector checks it (`cargo +nightly miri test -p proscenium-mailbox`).
    #[test]
    fn a_slab_freed_by_two_threads_is_reused_only_after_both() {
        let _serial = crate::test_serial();
        use std::sync::atomic::AtomicBool;
        let layout = Layout::new::<[u64; 2]>();
        let cap = capacity(0);
        trim_node_cache();
        let blocks: Vec<Block> = (0..cap).map(|_| Block(alloc_block(layout))).collect();
        let slab = FreeSlabAddr(slab_of(blocks[0].0));
        // This thread stops carving that slab (all of it is carved).
        settle_here();
        let mut blocks = blocks;
        let second: Vec<Block> = blocks.split_off(cap / 2);
        let first = blocks;
        let first_done = std::sync::Arc::new(AtomicBool::new(false));
        let signal = std::sync::Arc::clone(&first_done);
        let a = std::thread::spawn(move || {
            for b in first {
                // SAFETY: from alloc_block with this layout, unused.
                unsafe {
                    b.0.cast::<u64>().write(1);
                    free_block(b.0, layout);
                }
            }
            settle_here();
            // Relaxed: creates no happens-before on purpose.
            signal.store(true, Ordering::Relaxed);
        });
        let b = std::thread::spawn(move || {
            // Relaxed: see above.
            while !first_done.load(Ordering::Relaxed) {
                std::thread::yield_now();
            }
            for b in second {
                // SAFETY: as above.
                unsafe { free_block(b.0, layout) };
            }
            // This settlement brings the count to zero: the slab is ours.
            settle_here();
            let again: Vec<Block> = (0..cap).map(|_| Block(alloc_block(layout))).collect();
            assert_eq!(slab_of(again[0].0), { slab }.0, "the slab is carved again");
            for b in &again {
                // SAFETY: fresh blocks of ours.
                unsafe { b.0.cast::<u64>().write(2) };
            }
            again
        });
        a.join().expect("first thread panicked");
        let again = b.join().expect("second thread panicked");
        for b in again {
            // SAFETY: from alloc_block with this layout, unused.
            unsafe { free_block(b.0, layout) };
        }
    }

    #[test]
    fn large_or_overaligned_layouts_bypass_the_cache() {
        let _serial = crate::test_serial();
        let layout = Layout::from_size_align(512, 8).expect("valid");
        let p = alloc_block(layout);
        // SAFETY: from alloc_block with this layout, unused.
        unsafe { free_block(p, layout) };
    }
}
