//! The node cache's slabs under threads, for the sanitizers (`.ci/run` runs
//! this file under ThreadSanitizer and AddressSanitizer).
//!
//! One producer sends to two mailboxes in turn, so consecutive nodes of one
//! slab go to two consumers on two threads: each slab's count is lowered by
//! both, the one that brings it to zero takes the slab over, keeps it or
//! hands it to the global stock, and the producer carves its next nodes
//! from it. Every use of a node on one consumer thread must happen-before
//! the slab's reuse by whichever thread reuses it: a synchronisation the
//! sanitizer sees only through atomic accesses (it does not model a stand-
//! alone `fence`, which the last settlement once used: ThreadSanitizer
//! reported the producer's and the freeing thread's writes to the slab as
//! races with the other consumer's settlement).

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread;

use proscenium_mailbox::{Dequeued, Enqueued, Mailbox, Release};

/// Messages per mailbox: enough slabs (63 nodes each) to cycle through the
/// consumers' free lists and the global stock many times over.
fn per_mailbox() -> u64 {
    if cfg!(miri) {
        200
    } else {
        200_000
    }
}

/// Drains `mailbox` each time it is handed the run, checking FIFO order,
/// until it has seen every message.
fn consume(mailbox: &Mailbox<(), u64>, runs: &Receiver<()>) {
    let mut next = 0;
    while next < per_mailbox() {
        runs.recv().expect("the producer hands over the run");
        loop {
            // SAFETY: this thread holds the run: the producer won it
            // (MustSchedule) and sent it here, or `release` gave it back.
            match unsafe { mailbox.dequeue() } {
                Dequeued::User(seq) => {
                    assert_eq!(seq, next, "messages out of order");
                    next += 1;
                }
                Dequeued::System(()) => unreachable!("no system messages sent"),
                // A push half done: its sender is between its swap and its
                // link; the message is there in a moment.
                Dequeued::Retry => thread::yield_now(),
                Dequeued::Empty => {
                    // SAFETY: as above.
                    if unsafe { mailbox.release() } == Release::Idle {
                        break;
                    }
                }
            }
        }
    }
}

#[test]
fn slabs_freed_by_two_consumers_are_reused_by_the_producer() {
    let mailboxes: [Arc<Mailbox<(), u64>>; 2] =
        [Arc::new(Mailbox::new()), Arc::new(Mailbox::new())];
    let (senders, consumers): (Vec<Sender<()>>, Vec<_>) = mailboxes
        .iter()
        .map(|mailbox| {
            let (tx, rx) = channel();
            let mailbox = mailbox.clone();
            (tx, thread::spawn(move || consume(&mailbox, &rx)))
        })
        .unzip();
    for seq in 0..per_mailbox() {
        for (mailbox, runs) in mailboxes.iter().zip(&senders) {
            match mailbox.enqueue_user(seq) {
                Ok(Enqueued::MustSchedule) => runs.send(()).expect("the consumer waits for runs"),
                Ok(_) => {}
                Err(e) => panic!("an open unbounded mailbox refused a message: {e:?}"),
            }
        }
    }
    for consumer in consumers {
        consumer.join().expect("a consumer failed");
    }
}
