//! The three guardians: `/` (root), `/user` and `/system`.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use crate::api::actor::{Actor, Props};
use crate::api::actor_ref::ActorId;
use crate::api::context::Context;
use crate::supervision::failure::Outcome;
use crate::supervision::strategy::SupervisorStrategy;

/// Guardians take no user messages.
pub(crate) enum Never {}

/// What the root reports once it has started its two children.
pub(crate) type Started = mpsc::Sender<(ActorId, ActorId)>;

/// `/`: supervises `/user` and `/system` with the stopping strategy, and
/// stops itself (so the system terminates) as soon as either has
/// terminated.
pub(crate) struct Root {
    started: Arc<Mutex<Option<Started>>>,
    user_strategy: SupervisorStrategy,
}

impl Root {
    pub(crate) fn props(started: Started, user_strategy: SupervisorStrategy) -> Props<Root> {
        let started = Arc::new(Mutex::new(Some(started)));
        Props::new(move || Root {
            started: Arc::clone(&started),
            user_strategy: user_strategy.clone(),
        })
    }
}

impl Actor for Root {
    type Msg = Never;

    fn receive(&mut self, _ctx: &mut Context<Self>, msg: Never) -> Outcome {
        match msg {}
    }

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        let strategy = self.user_strategy.clone();
        let user = ctx
            .spawn(
                Props::new(move || User {
                    strategy: strategy.clone(),
                }),
                "user",
            )?
            .id();
        let watched = user.clone();
        let system = ctx
            .spawn(
                Props::new(move || System {
                    user: watched.clone(),
                }),
                "system",
            )?
            .id();
        ctx.watch(&user);
        ctx.watch(&system);
        if let Some(tx) = self
            .started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            // The builder may have given up waiting; then nobody listens.
            let _ = tx.send((user, system));
        }
        Ok(())
    }

    fn on_terminated(&mut self, ctx: &mut Context<Self>, _who: ActorId) -> Outcome {
        ctx.stop_self();
        Ok(())
    }

    fn supervisor_strategy(&self) -> SupervisorStrategy {
        SupervisorStrategy::stopping()
    }
}

/// `/user`: the parent of every actor `ActorSystem::spawn` creates; its
/// strategy (configurable) supervises the top-level actors.
pub(crate) struct User {
    strategy: SupervisorStrategy,
}

impl Actor for User {
    type Msg = Never;

    fn receive(&mut self, _ctx: &mut Context<Self>, msg: Never) -> Outcome {
        match msg {}
    }

    fn supervisor_strategy(&self) -> SupervisorStrategy {
        self.strategy.clone()
    }
}

/// `/system`: the parent of the engine's own actors. It watches `/user` and
/// stops itself once `/user` has terminated, so system actors outlive every
/// user actor.
pub(crate) struct System {
    user: ActorId,
}

impl Actor for System {
    type Msg = Never;

    fn receive(&mut self, _ctx: &mut Context<Self>, msg: Never) -> Outcome {
        match msg {}
    }

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        let user = self.user.clone();
        ctx.watch(&user);
        Ok(())
    }

    fn on_terminated(&mut self, ctx: &mut Context<Self>, _who: ActorId) -> Outcome {
        ctx.stop_self();
        Ok(())
    }
}
