//! A hierarchy 100 000 levels deep: each actor the only child of the one
//! before. Nothing may recurse over the parent chain, which would overflow
//! a thread's stack and abort the process: not a leaf's path (its failure
//! carries it), not the drop of the last reference to the leaf (each cell
//! holds its parent).
//!
//! One test in this binary: it needs the machine to itself for a moment.

mod support;

use std::sync::mpsc::Sender;
use std::sync::Mutex;

use proscenium::prelude::*;
use proscenium::SupervisionEvent;
use support::*;

/// How deep the chain goes: well past the ~25 000 levels at which a
/// recursive drop overflowed a 2 MiB stack in the debug profile.
const DEPTH: usize = if cfg!(miri) { 200 } else { 100_000 };

/// One level of the chain: spawns the next in `pre_start` until the depth
/// is reached; the leaf reports itself instead (again at each restart).
struct Link {
    depth: usize,
    leaf: Sender<ActorRef<Fail>>,
}

/// The one message: fail.
struct Fail;

impl Link {
    fn props(depth: usize, leaf: Sender<ActorRef<Fail>>) -> Props<Link> {
        Props::new(move || Link {
            depth,
            leaf: leaf.clone(),
        })
    }
}

impl Actor for Link {
    type Msg = Fail;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        if self.depth < DEPTH {
            ctx.spawn(Link::props(self.depth + 1, self.leaf.clone()), "c")?;
        } else {
            let _ = self.leaf.send(ctx.self_ref());
        }
        Ok(())
    }

    fn receive(&mut self, _ctx: &mut Context<Self>, _msg: Fail) -> Outcome {
        Err("the leaf fails".into())
    }
}

/// Build the chain, fail its leaf (restarted: the default strategy), stop
/// everything, then drop the last reference, which held the whole chain.
#[test]
fn a_hierarchy_100_000_levels_deep() {
    let system = system();
    let leaves = Probe::new();
    let failures = Probe::new();
    let tx = Mutex::new(failures.tx());
    let sub = system
        .event_stream()
        .subscribe(move |e: &SupervisionEvent| {
            let report = (e.failure.actor_path().len(), e.directive);
            let _ = tx.lock().expect("probe lock").send(report);
        });
    let top = system
        .spawn(Link::props(1, leaves.tx()), "c")
        .expect("the top of the chain");
    let leaf = leaves.next();
    let expected = format!("/user{}", "/c".repeat(DEPTH));
    assert_eq!(leaf.path(), expected);

    leaf.tell(Fail);
    assert_eq!(
        failures.next(),
        (expected.len(), Directive::Restart),
        "the failure carries the leaf's whole path"
    );
    let again = leaves.next();
    assert_eq!(again, leaf, "restarted: the same actor");
    assert_eq!(again.path(), expected);

    system.event_stream().unsubscribe(&sub);
    drop((top, again));
    shutdown(system.clone());
    // The last reference to the leaf holds the chain up to the root.
    drop(leaf);
    assert_eq!(system.live_cells(), 0, "every cell freed");
}
