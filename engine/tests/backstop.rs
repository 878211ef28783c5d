//! The backstop around an actor's run: a panic that escapes it from outside
//! any user handler (here a tracing subscriber that panics on an event the
//! engine logs while it handles a child's failure) is caught there, and
//! the cell is run again instead of being left held, so the actor goes on
//! handling its messages.
//!
//! One test in this binary: it installs the process's global subscriber.

mod support;

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Mutex;

use support::actors::*;
use support::*;
use tracing::field::{Field, Visit};
use tracing::span;

/// A subscriber that panics once, on the first event whose message is
/// `message`, after telling the test.
struct Tripwire {
    message: &'static str,
    armed: AtomicBool,
    tripped: Mutex<Sender<()>>,
}

/// Finds an event's message.
struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Tripwire {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        let mut message = Message(String::new());
        event.record(&mut message);
        if message.0 == self.message && self.armed.swap(false, Ordering::SeqCst) {
            let _ = self.tripped.lock().expect("tripwire lock").send(());
            panic!("the tracing subscriber panicked on {:?}", self.message);
        }
    }

    fn enter(&self, _: &span::Id) {}

    fn exit(&self, _: &span::Id) {}
}

/// A parent handles its child's failure; logging the decision panics in
/// the subscriber, which unwinds out of the parent's run. The parent is
/// not wedged: it handles the messages sent to it afterwards, and the
/// system terminates.
#[test]
fn a_panic_escaping_a_run_leaves_the_actor_running() {
    let tripped = Probe::new();
    tracing::subscriber::set_global_default(Tripwire {
        message: "actor failed",
        armed: AtomicBool::new(true),
        tripped: Mutex::new(tripped.tx()),
    })
    .expect("the only global subscriber of this binary");
    let system = system();
    let log = Probe::new();
    let parent = system
        .spawn(Worker::props("parent", &log.tx()), "parent")
        .expect("parent");
    let child = spawn_child(&parent, "child");
    child.tell(WorkerMsg::Fail);
    tripped.next();
    parent.tell(WorkerMsg::Inc);
    assert_eq!(count(&parent), 1, "the parent handles messages again");
    assert_eq!(system.escaped_panics(), 1, "counted");
    drop((parent, child));
    shutdown(system.clone());
    assert_eq!(system.live_cells(), 0, "every cell freed");
}
