//! Invariant 5, memory side: "after the system terminates, no actor cell,
//! node or task is left allocated." A counting global allocator measures
//! the bytes live before a system is built and after it has terminated:
//! the second system's whole life must leave nothing behind (the first one
//! warms up process-wide lazies such as tracing's callsite registry).
//!
//! One test in this binary, so no other test allocates meanwhile.

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use proscenium::prelude::*;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged; the
// counter only observes sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` came from `alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

struct Echo;
enum EchoMsg {
    Ping(u64, Reply<u64>),
    Spawn(u32),
    Fail,
    Note,
}

impl Actor for Echo {
    type Msg = EchoMsg;
    fn receive(&mut self, ctx: &mut Context<Self>, msg: EchoMsg) -> Outcome {
        match msg {
            EchoMsg::Ping(n, r) => r.send(n),
            EchoMsg::Spawn(n) => {
                for _ in 0..n {
                    ctx.spawn_anonymous(Props::new(|| Echo))?
                        .tell(EchoMsg::Note);
                }
            }
            EchoMsg::Fail => return Err("fail".into()),
            EchoMsg::Note => {}
        }
        Ok(())
    }
}

/// One system's life: actors, children, messages, asks (with their
/// timers), restarts, stops, dead letters, then termination.
fn one_life() {
    let system = ActorSystem::builder()
        .workers(2)
        .pin_workers(false)
        .dead_letter_logging(0, Duration::from_secs(1))
        .build()
        .expect("system");
    let actors: Vec<ActorRef<EchoMsg>> = (0..100)
        .map(|i| {
            system
                .spawn(Props::new(|| Echo), &format!("e{i}"))
                .expect("spawn")
        })
        .collect();
    for (i, a) in actors.iter().enumerate() {
        a.tell(EchoMsg::Spawn(3));
        for _ in 0..100 {
            a.tell(EchoMsg::Note);
        }
        if i % 10 == 0 {
            a.tell(EchoMsg::Fail);
        }
        assert_eq!(
            a.ask(|r| EchoMsg::Ping(i as u64, r), Duration::from_secs(20))
                .wait(),
            Ok(i as u64)
        );
    }
    // An actor subscribed to an event nobody publishes: its subscription
    // used to keep its cell (and the system) allocated after termination.
    struct Rare;
    system
        .event_stream()
        .subscribe_actor(&actors[1], |_: &Rare| EchoMsg::Note);
    assert!(actors[0].graceful_stop(Duration::from_secs(20)).wait());
    actors[0].tell(EchoMsg::Note); // a dead letter
    for a in &actors[1..] {
        for _ in 0..50 {
            a.tell(EchoMsg::Note); // some will be dead-lettered at termination
        }
    }
    drop(actors);
    let report = system
        .terminate()
        .wait_timeout(support::PATIENCE)
        .expect("terminates");
    assert!(report.clean(), "{report:?}");
    assert_eq!(system.live_cells(), 0);
}

#[test]
fn a_terminated_system_leaves_nothing_allocated() {
    one_life();
    proscenium_mailbox_trim();
    let before = LIVE.load(Ordering::SeqCst);
    one_life();
    proscenium_mailbox_trim();
    let after = LIVE.load(Ordering::SeqCst);
    assert_eq!(
        after - before,
        0,
        "bytes left allocated by a terminated system"
    );
}

/// Frees the node cache of this thread (the system's reaper and workers
/// have exited, returning theirs), and collects crossbeam's deferred frees.
fn proscenium_mailbox_trim() {
    proscenium::trim_node_cache();
    // The workers' crossbeam-deque buffers are freed by crossbeam-epoch's
    // deferred garbage collection, which runs as epochs advance: advance it
    // until everything retired is collected.
    for _ in 0..8 {
        crossbeam_epoch::pin().flush();
    }
}
