//! A small per-thread cache of node memory, so that a message's node is
//! neither `malloc`ed by one thread nor `free`d into another thread's arena
//! per message.
//!
//! Why: a queue node is allocated by the sending thread and freed by the
//! consuming thread. With glibc malloc that remote free is the slow path, and
//! a cross-thread flood ran 6x slower than crossbeam-channel (which allocates
//! one block per 31 messages); see BENCHMARKS.md. The cache keeps freed node
//! memory on the freeing thread and moves it between threads in batches of
//! [`BATCH`] blocks through a global, mutex-protected stack: one lock per
//! `BATCH` nodes, not per message.
//!
//! Blocks are type-erased: a node of size up to [`MAX_SIZE`] and alignment up
//! to [`ALIGN`] takes a block of its size class (sizes rounded up to 16
//! bytes); larger nodes go straight to the global allocator. Every block is
//! allocated from and returned to the global allocator with its class's
//! layout, so blocks of one class are interchangeable. What is cached is
//! memory only: no value lives in a cached block.
//!
//! Bounds: a thread keeps at most `2 * BATCH` blocks per class, the global
//! stack at most [`GLOBAL_MAX_BATCHES`] batches per class; past that, blocks
//! go back to the allocator. A thread's blocks move to the global stack when
//! it exits. [`trim`] frees the global stack.

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::UnsafeCell;
use std::ptr;
#[cfg(not(loom))]
use std::sync::Mutex;

/// Blocks moved between a thread and the global stack at a time.
pub(crate) const BATCH: usize = 64;
/// Largest node size served by the cache.
pub(crate) const MAX_SIZE: usize = 128;
/// Alignment of every block (and the largest node alignment served).
pub(crate) const ALIGN: usize = 16;
const CLASSES: usize = MAX_SIZE / ALIGN;
/// Batches kept per class in the global stack (1 MiB of 128-byte blocks).
#[cfg_attr(loom, allow(dead_code))]
pub(crate) const GLOBAL_MAX_BATCHES: usize = 128;

/// A free block's first word links it to the next free block.
struct FreeBlock {
    next: *mut FreeBlock,
}

/// An intrusive list of free blocks of one class.
struct FreeList {
    head: *mut FreeBlock,
    len: usize,
}

// SAFETY: a list owns its blocks (free memory, no values); moving it to
// another thread moves that ownership.
unsafe impl Send for FreeList {}

impl FreeList {
    const EMPTY: FreeList = FreeList {
        head: ptr::null_mut(),
        len: 0,
    };

    fn pop(&mut self) -> Option<*mut u8> {
        if self.head.is_null() {
            return None;
        }
        let block = self.head;
        // SAFETY: `block` is a free block owned by this list; its first word
        // was written by `push`.
        self.head = unsafe { (*block).next };
        self.len -= 1;
        Some(block.cast())
    }

    /// # Safety
    ///
    /// `block` is a free block of this list's class, owned by the caller,
    /// which gives it to the list.
    unsafe fn push(&mut self, block: *mut u8) {
        let block = block.cast::<FreeBlock>();
        // SAFETY: the block is at least 16 bytes, 16-aligned and unused
        // (caller's contract), so it can hold the link.
        unsafe { block.write(FreeBlock { next: self.head }) };
        self.head = block;
        self.len += 1;
    }

    /// Splits off up to `n` blocks.
    fn take(&mut self, n: usize) -> FreeList {
        let mut out = FreeList::EMPTY;
        while out.len < n {
            match self.pop() {
                // SAFETY: popped from a list of the same class, now ours.
                Some(b) => unsafe { out.push(b) },
                None => break,
            }
        }
        out
    }

    /// Returns every block to the global allocator.
    fn release(&mut self, class: usize) {
        while let Some(b) = self.pop() {
            // SAFETY: every block of this class was allocated with
            // `class_layout(class)` by `alloc_block`.
            unsafe { dealloc(b, class_layout(class)) };
        }
    }
}

fn class_of(layout: Layout) -> Option<usize> {
    (layout.size() <= MAX_SIZE && layout.align() <= ALIGN)
        .then(|| layout.size().max(1).div_ceil(ALIGN) - 1)
}

fn class_layout(class: usize) -> Layout {
    Layout::from_size_align((class + 1) * ALIGN, ALIGN).expect("classes are valid layouts")
}

#[cfg(not(loom))]
static GLOBAL: [Mutex<Vec<FreeList>>; CLASSES] = [const { Mutex::new(Vec::new()) }; CLASSES];

/// The calling thread's free lists. Only this thread touches them.
struct Local {
    lists: UnsafeCell<[FreeList; CLASSES]>,
}

impl Drop for Local {
    fn drop(&mut self) {
        for (class, list) in self.lists.get_mut().iter_mut().enumerate() {
            give_to_global(class, std::mem::replace(list, FreeList::EMPTY));
        }
    }
}

#[cfg(not(loom))]
thread_local! {
    static LOCAL: Local = const {
        Local { lists: UnsafeCell::new([const { FreeList::EMPTY }; CLASSES]) }
    };
}

// Under loom the per-thread lists are loom's thread-locals (one set per
// modelled thread, dropped when that thread ends), so the models run this
// cache's real code and a freed node's address comes back on the next
// allocation of the freeing thread, as it does outside loom. What would go
// to the global stack is retired instead (see `give_to_global`).
#[cfg(loom)]
loom::thread_local! {
    static LOCAL: Local =
        Local { lists: UnsafeCell::new([const { FreeList::EMPTY }; CLASSES]) };
}

fn give_to_global(class: usize, list: FreeList) {
    if list.len == 0 {
        return;
    }
    #[cfg(loom)]
    retire(class, list);
    #[cfg(not(loom))]
    {
        let mut list = list;
        // A poisoned lock only means a panic elsewhere while holding it; the
        // Vec of lists is still consistent (pushes and pops are atomic from
        // the lists' point of view).
        let mut global = GLOBAL[class].lock().unwrap_or_else(|e| e.into_inner());
        if global.len() < GLOBAL_MAX_BATCHES {
            global.push(list);
        } else {
            drop(global);
            list.release(class);
        }
    }
}

#[cfg(not(loom))]
fn take_from_global(class: usize) -> Option<FreeList> {
    GLOBAL[class]
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .pop()
}

// Under loom a model's allocations may depend only on its schedule: loom
// replays a schedule's prefix and requires the same path. A process-wide
// stack breaks that twice over. Tests run on several OS threads at once,
// and a list pushed by one test's model could be popped by another's (the
// terminate models failed with "Reached unexpected exploration state"
// when run in parallel); and a list left by an earlier execution, of any
// length, decides whether a later allocation takes a block from it or one
// pushed in this execution (which an address held as a mark may equal).
// So under loom nothing is taken from a global stack: what would go there
// (a thread's lists when it exits, a list past `2 * BATCH`) is retired
// into a list of this OS thread's (the test's: loom runs a model's threads
// on the caller's thread as coroutines), never reused, and freed when that
// thread exits, after its last model. Nor does a retired block go back to
// the allocator mid-test: `malloc` handing a freed address back at a mark
// some modelled thread still holds would depend on the allocator's state,
// not on the schedule.
#[cfg(loom)]
fn take_from_global(_class: usize) -> Option<FreeList> {
    None
}

#[cfg(loom)]
struct Retired(std::cell::RefCell<Vec<(usize, FreeList)>>);

#[cfg(loom)]
impl Drop for Retired {
    fn drop(&mut self) {
        for (class, mut list) in self.0.get_mut().drain(..) {
            list.release(class);
        }
    }
}

#[cfg(loom)]
std::thread_local! {
    static RETIRED: Retired = const { Retired(std::cell::RefCell::new(Vec::new())) };
}

#[cfg(loom)]
fn retire(class: usize, list: FreeList) {
    let mut list = Some(list);
    let _ = RETIRED.try_with(|r| r.0.borrow_mut().extend(list.take().map(|l| (class, l))));
    if let Some(mut list) = list {
        // The test's thread is exiting: no model runs on it any more.
        list.release(class);
    }
}

/// Allocates memory for `layout` (a node's), from the cache when it can.
///
/// Never returns null: allocation failure aborts, as `Box::new` does.
#[inline]
pub(crate) fn alloc_block(layout: Layout) -> *mut u8 {
    let Some(class) = class_of(layout) else {
        // SAFETY: node layouts are never zero-sized (a node holds a pointer).
        return checked(unsafe { alloc(layout) }, layout);
    };
    let cached = LOCAL
        .try_with(|local| {
            // SAFETY: only this thread touches its lists, and no reference
            // into them outlives this closure.
            let list = unsafe { &mut (*local.lists.get())[class] };
            list.pop().or_else(|| {
                *list = take_from_global(class)?;
                list.pop()
            })
        })
        .ok()
        .flatten();
    match cached {
        Some(block) => block,
        // SAFETY: class layouts are non-zero-sized.
        None => checked(unsafe { alloc(class_layout(class)) }, class_layout(class)),
    }
}

fn checked(p: *mut u8, layout: Layout) -> *mut u8 {
    if p.is_null() {
        handle_alloc_error(layout);
    }
    p
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
    let cached = LOCAL.try_with(|local| {
        // SAFETY: only this thread touches its lists (see alloc_block).
        let list = unsafe { &mut (*local.lists.get())[class] };
        // SAFETY: the block is free and of this class (caller's contract).
        unsafe { list.push(block) };
        if list.len >= 2 * BATCH {
            give_to_global(class, list.take(BATCH));
        }
    });
    if cached.is_err() {
        // The thread is exiting and its cache is gone: back to the allocator
        // (under loom retired instead, see `take_from_global`).
        let mut list = FreeList::EMPTY;
        // SAFETY: the block is free and of this class (caller's contract).
        unsafe { list.push(block) };
        if cfg!(loom) {
            give_to_global(class, list);
        } else {
            list.release(class);
        }
    }
}

/// Frees the node memory cached by the calling thread and in the global
/// stack (other threads' caches are returned to the global stack when those
/// threads exit, so call this after joining them). Memory in use is not
/// affected. Returns how many blocks were freed.
pub fn trim_node_cache() -> usize {
    let mut freed = 0;
    // `try_with`: during thread exit the cache is already gone.
    let _ = LOCAL.try_with(|local| {
        // SAFETY: only this thread touches its own lists, and no `alloc_block`
        // or `free_block` of this thread is running (we are not inside one).
        let lists = unsafe { &mut *local.lists.get() };
        for (class, list) in lists.iter_mut().enumerate() {
            freed += list.len;
            list.release(class);
        }
    });
    #[cfg(not(loom))]
    for (class, global) in GLOBAL.iter().enumerate() {
        let lists = std::mem::take(&mut *global.lock().unwrap_or_else(|e| e.into_inner()));
        for mut list in lists {
            freed += list.len;
            list.release(class);
        }
    }
    freed
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_node_layouts() {
        assert_eq!(class_of(Layout::new::<[u64; 2]>()), Some(0));
        assert_eq!(class_of(Layout::new::<[u64; 3]>()), Some(1));
        assert_eq!(class_of(Layout::new::<[u8; 128]>()), Some(CLASSES - 1));
        assert_eq!(class_of(Layout::new::<[u8; 129]>()), None);
        #[repr(align(32))]
        struct Wide(#[allow(dead_code)] u8);
        assert_eq!(class_of(Layout::new::<Wide>()), None);
        for class in 0..CLASSES {
            assert_eq!(class_of(class_layout(class)), Some(class));
        }
    }

    #[test]
    fn blocks_are_reused_on_one_thread() {
        let layout = Layout::new::<[u64; 5]>();
        let a = alloc_block(layout);
        // SAFETY: from alloc_block with this layout, unused.
        unsafe { free_block(a, layout) };
        let b = alloc_block(layout);
        assert_eq!(a, b, "the freed block is handed out again");
        // SAFETY: as above.
        unsafe { free_block(b, layout) };
    }

    /// A block handed to another thread in a test.
    struct Block(*mut u8);
    // SAFETY: the block is free memory owned by whoever holds it.
    unsafe impl Send for Block {}

    #[test]
    fn blocks_flow_from_a_consumer_thread_to_a_producer_thread() {
        let layout = Layout::new::<[u64; 7]>();
        let n = 4 * BATCH;
        // Allocate here, free on another thread: its cache overflows into
        // the global stack, from which this thread then allocates again.
        let blocks: Vec<Block> = (0..n).map(|_| Block(alloc_block(layout))).collect();
        let addresses: Vec<*mut u8> = blocks.iter().map(|b| b.0).collect();
        std::thread::spawn(move || {
            for b in blocks {
                // SAFETY: from alloc_block with this layout, unused.
                unsafe { free_block(b.0, layout) };
            }
        })
        .join()
        .expect("freeing thread panicked");
        let again: Vec<*mut u8> = (0..n).map(|_| alloc_block(layout)).collect();
        let reused = again.iter().filter(|b| addresses.contains(b)).count();
        assert!(
            reused >= BATCH,
            "blocks came back through the global stack: {reused}"
        );
        for b in again {
            // SAFETY: as above.
            unsafe { free_block(b, layout) };
        }
        trim_node_cache();
    }

    #[test]
    fn large_or_overaligned_layouts_bypass_the_cache() {
        let layout = Layout::from_size_align(512, 8).expect("valid");
        let p = alloc_block(layout);
        // SAFETY: from alloc_block with this layout, unused.
        unsafe { free_block(p, layout) };
    }
}
