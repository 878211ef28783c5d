//! The references into a cell, through every unsafe view of it: typed
//! references (`ActorRef`, the cell as the scheduler's runnable read
//! through its head), ids (a thin pointer to the core, counted through the
//! core's table), the typed reference recovered from an id
//! (`lookup_ref`, right and wrong message type), a context's references to
//! its own cell, a child spawned from a handler, a graceful stop and the
//! system's termination, which drop them all (decision 0020).
//!
//! Small enough for Miri, which checks those casts and counts:
//! `MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-ignore-leaks" cargo +nightly miri
//! test -p proscenium --test cell_refs` (Tree Borrows and no leak check for
//! the scheduler's crossbeam-epoch, as in `.ci/run`; signal handling off:
//! Miri has no `sigaction`).

use std::time::Duration;

use proscenium::prelude::*;
use proscenium::ShutdownConfig;

struct Echo;

impl Actor for Echo {
    type Msg = (u32, Reply<u32>);

    fn receive(&mut self, ctx: &mut Context<Self>, (n, reply): Self::Msg) -> Outcome {
        if n == 1 {
            let me = ctx.self_ref();
            assert_eq!(me.id(), ctx.id());
            assert_eq!(me.id().clone(), ctx.id());
            ctx.spawn_anonymous(Props::new(|| Echo))?;
        }
        reply.send(n + 1);
        Ok(())
    }
}

#[test]
fn references_to_a_cell_agree_and_release_it() {
    let system = ActorSystem::builder()
        .workers(1)
        .pin_workers(false)
        .coordinated_shutdown(ShutdownConfig::default().run_by_signals(false))
        .build()
        .expect("system");
    let a = system.spawn(Props::new(|| Echo), "a").expect("spawn");
    assert_eq!(a.ask(|r| (1, r), Duration::from_secs(60)).wait(), Ok(2));
    let id = a.id();
    assert_eq!(id.path(), "/user/a");
    assert_eq!(id.name(), a.name());
    let typed: Option<ActorRef<(u32, Reply<u32>)>> = system.lookup_ref("/user/a");
    assert_eq!(typed.as_ref(), Some(&a));
    let wrong: Option<ActorRef<u64>> = system.lookup_ref("/user/a");
    assert!(wrong.is_none());
    let b = system.spawn_anonymous(Props::new(|| Echo)).expect("spawn");
    assert_eq!(b.ask(|r| (5, r), Duration::from_secs(60)).wait(), Ok(6));
    assert_ne!(b.id(), id);
    drop(typed);
    drop(id);
    assert!(a.graceful_stop(Duration::from_secs(60)).wait());
    assert!(a.is_terminated());
    system.terminate().wait();
}
