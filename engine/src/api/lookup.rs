//! Finding a live actor by its path ([`ActorSystem::lookup`]): a walk down
//! the children maps from the root guardian, one name at a time.

use crate::api::actor_ref::{ActorId, ActorRef};
use crate::runtime::system::ActorSystem;

impl ActorSystem {
    /// The live actor at `path` (such as `/user/parent/child`; `/` is the
    /// root guardian), or `None` if there is none: no such path, or the
    /// actor has terminated (or the system has). A hint, as any liveness
    /// answer: the actor may terminate right after this returns it.
    ///
    /// The path is absolute, its names separated by single `/`s; a trailing
    /// `/` is ignored. Each step locks one parent's children map briefly,
    /// so a lookup costs one map probe per path element.
    ///
    /// ```
    /// use proscenium::prelude::*;
    ///
    /// struct Idle;
    /// impl Actor for Idle {
    ///     type Msg = ();
    ///     fn receive(&mut self, _: &mut Context<Self>, _: ()) -> Outcome { Ok(()) }
    /// }
    ///
    /// let system = ActorSystem::builder().workers(1).pin_workers(false).build()?;
    /// let a = system.spawn(Props::new(|| Idle), "a")?;
    /// assert_eq!(system.lookup("/user/a"), Some(a.id()));
    /// assert_eq!(system.lookup("/user/b"), None);
    /// let typed: Option<ActorRef<()>> = system.lookup_ref("/user/a");
    /// assert_eq!(typed, Some(a));
    /// # system.terminate().wait();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn lookup(&self, path: &str) -> Option<ActorId> {
        let rest = path.strip_prefix('/')?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        let (root, _, _) = self.guardian_ids()?;
        let mut current = root;
        if !rest.is_empty() {
            for name in rest.split('/') {
                if name.is_empty() {
                    return None;
                }
                let next = current.core().children().by_name(name).cloned()?;
                current = next;
            }
        }
        (!current.is_terminated()).then_some(current)
    }

    /// The live actor at `path` as a typed reference, if its messages are
    /// `M` (`None` also when they are not); see [`lookup`](Self::lookup).
    pub fn lookup_ref<M: Send + 'static>(&self, path: &str) -> Option<ActorRef<M>> {
        self.lookup(path)?.downcast::<M>()
    }
}
