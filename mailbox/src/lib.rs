//! The mailbox of the proscenium actor engine: wait-free MPSC queues, a
//! priority system lane, and one run-state word that decides who runs the
//! mailbox's owner.
//!
//! A [`Mailbox`] has two lanes, each a Vyukov node-based [`MpscQueue`]:
//! the *system* lane (lifecycle and supervision signals) is always served
//! first; the *user* lane can be suspended, and optionally bounded. An
//! enqueue is one allocation, one atomic swap, one store and one
//! `fetch_or`, and tells the sender whether it won the right to schedule the
//! owner ([`Enqueued::MustSchedule`]). The run holder drains with
//! [`Mailbox::dequeue`] and gives the run up with [`Mailbox::release`], which
//! re-checks the lanes so that no wake-up is lost. After
//! [`Mailbox::close`], senders get their message back, and everything still
//! queued or racing in is handed to the run holder exactly once, for dead
//! letters.
//!
//! Each lane's stub node is inline (it is the lane's tail word), and
//! [`Mailbox::release`] gives an empty lane its stub back and frees the last
//! message's node: an idle mailbox holds no heap memory.
//!
//! Queue nodes come from a small per-thread cache that moves memory between
//! threads in batches ([`trim_node_cache`] frees what it holds), so a
//! cross-thread flood does not pay the allocator's remote-free path per
//! message.
//!
//! The crate knows nothing of actors; the engine wires it to the scheduler.
//!
//! ```
//! use proscenium_mailbox::{Dequeued, Enqueued, Mailbox, Release, TrySendError};
//!
//! let mb: Mailbox<(), String> = Mailbox::bounded(1).unwrap();
//! assert_eq!(mb.enqueue_user("hello".into()), Ok(Enqueued::MustSchedule));
//! let full = mb.enqueue_user("world".into()).unwrap_err();
//! assert_eq!(full, TrySendError::Full("world".into()));
//!
//! // SAFETY: the first enqueue won the run; this thread runs it.
//! unsafe {
//!     assert_eq!(mb.dequeue(), Dequeued::User("hello".into()));
//!     assert_eq!(mb.dequeue(), Dequeued::Empty);
//!     assert_eq!(mb.release(), Release::Idle);
//! }
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![doc(test(attr(deny(warnings))))]

mod error;
mod mailbox;
mod node_cache;
mod queue;
mod state;
mod sync;

pub use crate::error::{SendError, TrySendError, ZeroCapacityError};
pub use crate::mailbox::{Dequeued, Enqueued, Mailbox, Release};
pub use crate::node_cache::trim_node_cache;
/// Under loom, slabs of more than one block for a model (loom builds only).
#[cfg(loom)]
#[doc(hidden)]
pub use crate::node_cache::ModelSlabCapacity;
pub use crate::queue::{Mark, MpscQueue, Pop};
pub use crate::state::Snapshot;

/// Serialises the unit tests that allocate queue nodes: the node cache's
/// global stock is one per process, and its tests look at what it hands
/// back (a LIFO stock that another test pushes to in between hands back
/// that test's slab first).
#[cfg(test)]
fn test_serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The README's example, compiled and run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
