//! Messages too large to move by value on an ordinary stack.
//!
//! A message goes by value from `tell` into a mailbox node and from the
//! node to `receive`, through a dozen frames on each side, and in a debug
//! build each of those frames keeps a copy of it (measured for a 600 KiB
//! message: about 23 copies on the sending thread, 27 to 40 on the worker;
//! decision 0022). A worker's stack is 2 MiB by default, so a message of a
//! few hundred KiB overflowed it and aborted the process.
//!
//! The message's type cannot be boxed for those frames: the user lane holds
//! `Envelope<M>`, which holds `M` itself, and choosing another lane type by
//! `size_of::<M>()` needs const generic expressions, which stable Rust does
//! not have. And `receive` takes the message by value, so the frame that
//! calls it holds one copy whatever the lane holds. So a message type over
//! [`LARGE_MESSAGE`] bytes takes this path instead, picked by a constant
//! (so a smaller one keeps its path, and its cost, unchanged): the send
//! leaves the message where the caller put it and runs on a stack with
//! room for [`COPIES`] copies of it, which takes it from there; the
//! runs of an actor that takes such messages, and every other place that
//! moves one by value outside a run (timers, adapters, pipes, event-stream
//! subscriptions, PoisonPill and Kill), do the same. "A stack with room" is
//! the current one if it has that much left, else a new one, mapped for the
//! call and unmapped after it (`stacker`, on `psm`'s stack switch): same
//! thread, so thread-locals (the worker's queues, the node cache) are the
//! same.

use std::mem::size_of;

/// The size in bytes above which a message type takes the large path.
/// Below it, the usual path's copies take at most `COPIES * LARGE_MESSAGE`
/// = 512 KiB of a stack in a debug build (a quarter of a 2 MiB worker's),
/// far less in a release build.
pub(crate) const LARGE_MESSAGE: usize = 8 * 1024;

/// How many copies of a large message the code that moves it by value may
/// hold on its stack at once: above the 40 measured in a debug build
/// (decision 0022), which a release build does not come near.
const COPIES: usize = 64;

/// Stack left beyond the copies, for the frames that do not grow with the
/// message: the handler's own, the engine's, a panic's unwinding.
const HEADROOM: usize = 1 << 20;

/// Whether values of `M` take the large path: a constant, so each call
/// site keeps one of its two branches.
#[inline(always)]
pub(crate) const fn is_large<M>() -> bool {
    size_of::<M>() > LARGE_MESSAGE
}

/// The stack that code moving `M`s by value is given: `COPIES` of them and
/// the headroom.
const fn room_for<M>() -> usize {
    size_of::<M>()
        .saturating_mul(COPIES)
        .saturating_add(HEADROOM)
}

/// Runs `f` with room on the stack for code that moves `M`s by value: here
/// if this stack has that much left, else on a new stack of that size (on
/// the same thread). `f` must capture no `M` by value (box it first): it is
/// moved a few times on this stack before the switch. A panic in `f`
/// unwinds to the caller as usual.
#[cold]
#[inline(never)]
pub(crate) fn with_room_for<M, R>(f: impl FnOnce() -> R) -> R {
    let room = room_for::<M>();
    stacker::maybe_grow(room, room, f)
}

/// Runs `f` as is for a message type that is not large, else as
/// [`with_room_for`] does.
#[inline(always)]
pub(crate) fn with_room_if_large<M, R>(f: impl FnOnce() -> R) -> R {
    if const { is_large::<M>() } {
        with_room_for::<M, R>(f)
    } else {
        f()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_threshold_and_the_room() {
        assert!(!is_large::<[u8; LARGE_MESSAGE]>());
        assert!(is_large::<[u8; LARGE_MESSAGE + 1]>());
        assert!(!is_large::<u64>());
        assert_eq!(room_for::<[u8; 1024]>(), 64 * 1024 + (1 << 20));
        assert_eq!(room_for::<[u8; 0]>(), 1 << 20);
    }

    /// On a small stack, a large value is handled on a grown one: 4 MiB
    /// moved by value three times in a debug build, on a 256 KiB thread.
    #[test]
    fn a_large_value_is_moved_on_a_grown_stack() {
        const N: usize = 4 << 20;
        #[inline(never)]
        fn sum(data: [u8; N]) -> u64 {
            data.iter().map(|&b| u64::from(b)).sum()
        }
        let on_small = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(|| {
                let boxed: Box<[u8; N]> = vec![1u8; N]
                    .into_boxed_slice()
                    .try_into()
                    .expect("N bytes");
                with_room_for::<[u8; N], _>(move || {
                    let data = *boxed;
                    let again = data;
                    sum(again)
                })
            })
            .expect("spawn");
        assert_eq!(on_small.join().expect("no overflow"), N as u64);
    }
}
