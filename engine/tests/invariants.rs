//! The invariants of ARCHITECTURE.md, end to end: every message is handled
//! exactly once or dead-lettered exactly once (also across restarts, stops
//! and termination), per-pair order holds, and after termination no cell is
//! left.

mod support;

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use proscenium::prelude::*;
use support::*;

const SENDERS: usize = 4;
const PER_SENDER: usize = 40_000;
const ACTORS: usize = 8;

/// A message from `sender` with its sequence number.
enum Msg {
    Item { sender: usize, seq: usize },
    Fail,
}

/// Shared bookkeeping, kept outside the actors so it survives restarts.
struct Books {
    /// Per (sender, seq): times handled plus times dead-lettered.
    seen: Vec<AtomicU8>,
    handled: AtomicU64,
    dead: AtomicU64,
    /// Per (actor, sender): the last seq handled, to check send order.
    last: Vec<AtomicU32>,
    order_violations: AtomicU64,
}

impl Books {
    fn mark(&self, sender: usize, seq: usize) {
        self.seen[sender * PER_SENDER + seq].fetch_add(1, Ordering::Relaxed);
    }
}

struct Sink {
    index: usize,
    books: Arc<Books>,
}

impl Actor for Sink {
    type Msg = Msg;
    fn receive(&mut self, _ctx: &mut Context<Self>, msg: Msg) -> Outcome {
        match msg {
            Msg::Item { sender, seq } => {
                self.books.mark(sender, seq);
                self.books.handled.fetch_add(1, Ordering::Relaxed);
                let last = &self.books.last[self.index * SENDERS + sender];
                // seq + 1 so that 0 means "nothing yet".
                let prev = last.swap(seq as u32 + 1, Ordering::Relaxed);
                if prev > seq as u32 {
                    self.books.order_violations.fetch_add(1, Ordering::Relaxed);
                }
                Ok(())
            }
            Msg::Fail => Err("chaos".into()),
        }
    }
}

/// Invariant 1 ("No message is lost or handled twice. Every message sent is
/// either handled by its actor exactly once, or delivered to dead letters
/// exactly once, including messages that race with the actor's
/// termination.") and invariant 4 ("Per sender-receiver pair, user messages
/// arrive in send order."), under restarts, stops and system termination.
#[test]
fn every_message_is_handled_or_dead_lettered_exactly_once() {
    let system = system();
    let books = Arc::new(Books {
        seen: (0..SENDERS * PER_SENDER)
            .map(|_| AtomicU8::new(0))
            .collect(),
        handled: AtomicU64::new(0),
        dead: AtomicU64::new(0),
        last: (0..ACTORS * SENDERS).map(|_| AtomicU32::new(0)).collect(),
        order_violations: AtomicU64::new(0),
    });
    let dead_books = Arc::clone(&books);
    system.event_stream().subscribe(move |d: &DeadLetter| {
        if let Some(Msg::Item { sender, seq }) = d.downcast_ref::<Msg>() {
            dead_books.mark(*sender, *seq);
            dead_books.dead.fetch_add(1, Ordering::Relaxed);
        }
    });
    let actors: Vec<ActorRef<Msg>> = (0..ACTORS)
        .map(|index| {
            let books = Arc::clone(&books);
            system
                .spawn(
                    Props::new(move || Sink {
                        index,
                        books: Arc::clone(&books),
                    }),
                    &format!("sink-{index}"),
                )
                .expect("spawn")
        })
        .collect();

    std::thread::scope(|s| {
        for sender in 0..SENDERS {
            let actors = actors.clone();
            s.spawn(move || {
                for seq in 0..PER_SENDER {
                    actors[seq % ACTORS].tell(Msg::Item { sender, seq });
                    // Chaos from one sender: restarts everywhere, a stop
                    // and a poison pill midway.
                    if sender == 0 && seq % 997 == 0 {
                        actors[(seq / 997) % ACTORS].tell(Msg::Fail);
                    }
                    if sender == 1 && seq == PER_SENDER / 2 {
                        actors[1].stop();
                        actors[2].poison_pill();
                    }
                }
            });
        }
    });
    drop(actors);
    let report = system
        .terminate()
        .wait_timeout(PATIENCE)
        .expect("terminates");
    assert!(report.clean(), "{report:?}");

    let handled = books.handled.load(Ordering::Relaxed);
    let dead = books.dead.load(Ordering::Relaxed);
    eprintln!("handled {handled}, dead-lettered {dead}");
    assert_eq!(handled + dead, (SENDERS * PER_SENDER) as u64);
    let wrong: Vec<(usize, u8)> = books
        .seen
        .iter()
        .enumerate()
        .map(|(i, n)| (i, n.load(Ordering::Relaxed)))
        .filter(|&(_, n)| n != 1)
        .take(10)
        .collect();
    assert!(
        wrong.is_empty(),
        "messages not seen exactly once: {wrong:?}"
    );
    assert_eq!(books.order_violations.load(Ordering::Relaxed), 0);
    assert!(
        dead > 0,
        "the stopped actors' messages went to dead letters"
    );
    assert_eq!(system.live_cells(), 0, "invariant 5: no cell left");
}

/// Invariant 5: "`post_stop` runs exactly once per actor incarnation; a
/// stopped actor's children have all stopped before its own `post_stop`;
/// after the system terminates, no actor cell, node or task is left
/// allocated." (cells here; nodes and tasks in `no_leaks.rs`).
#[test]
fn a_tree_of_actors_terminates_leaving_no_cell() {
    struct Node {
        depth: u32,
        started: std::sync::mpsc::Sender<()>,
        stops: Arc<AtomicU64>,
        violations: Arc<AtomicU64>,
    }
    fn node(
        depth: u32,
        started: &std::sync::mpsc::Sender<()>,
        stops: &Arc<AtomicU64>,
        violations: &Arc<AtomicU64>,
    ) -> Props<Node> {
        let (started, stops, violations) = (started.clone(), stops.clone(), violations.clone());
        Props::new(move || Node {
            depth,
            started: started.clone(),
            stops: stops.clone(),
            violations: violations.clone(),
        })
    }
    impl Actor for Node {
        type Msg = ();
        fn receive(&mut self, _: &mut Context<Self>, _: ()) -> Outcome {
            Ok(())
        }
        fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
            if self.depth > 0 {
                for i in 0..3 {
                    ctx.spawn(
                        node(self.depth - 1, &self.started, &self.stops, &self.violations),
                        &format!("n{i}"),
                    )?;
                }
            }
            let _ = self.started.send(());
            Ok(())
        }
        fn post_stop(&mut self, ctx: &mut Context<Self>) {
            self.stops.fetch_add(1, Ordering::SeqCst);
            if !ctx.children().is_empty() {
                self.violations.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    let system = system();
    let stops = Arc::new(AtomicU64::new(0));
    let violations = Arc::new(AtomicU64::new(0));
    let started = Probe::new();
    let root = system
        .spawn(node(5, &started.tx(), &stops, &violations), "tree")
        .expect("tree");
    // 1 + 3 + 9 + 27 + 81 + 243 = 364 actors.
    let expected = 364;
    started.take(expected as usize);
    root.tell(());
    drop(root);
    let report = system
        .terminate()
        .wait_timeout(PATIENCE)
        .expect("terminates");
    assert!(report.clean());
    assert_eq!(
        stops.load(Ordering::SeqCst),
        expected,
        "post_stop exactly once each"
    );
    assert_eq!(
        violations.load(Ordering::SeqCst),
        0,
        "children stop before their parent's post_stop"
    );
    assert_eq!(system.live_cells(), 0);
}
