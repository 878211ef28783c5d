//! A scripted test actor for the timer, receive-timeout and stash suites:
//! it reports each `Tick` to a probe, and runs test-supplied closures on
//! its own context (`exec`), so a test drives the context API from inside
//! the actor and waits for the result.
#![allow(dead_code, unreachable_pub)]

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Mutex};

use proscenium::prelude::*;

use super::PATIENCE;

/// A closure run on the scripted actor's context.
pub type Script = Arc<dyn Fn(&mut Context<Scripted>) + Send + Sync>;

/// What the scripted actor handles.
#[derive(Clone)]
pub enum Cmd {
    /// Reported to the probe as-is.
    Tick(&'static str),
    /// A numbered tick, reported with its number.
    Num(u32),
    /// Run this on the actor's context.
    Run(Script),
    /// Fail (return an error).
    Fail,
}

impl std::fmt::Debug for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Cmd::Tick(t) => write!(f, "Tick({t})"),
            Cmd::Num(n) => write!(f, "Num({n})"),
            Cmd::Run(_) => f.write_str("Run"),
            Cmd::Fail => f.write_str("Fail"),
        }
    }
}

/// What the probe sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    Tick(&'static str),
    Num(u32),
    Started,
}

#[derive(Debug, thiserror::Error)]
#[error("scripted failure")]
pub struct ScriptedFailure;

pub struct Scripted {
    seen: Sender<Seen>,
    on_start: Option<Script>,
}

impl Scripted {
    pub fn props(seen: Sender<Seen>) -> Props<Scripted> {
        let seen = Mutex::new(seen);
        Props::new(move || Scripted {
            seen: seen.lock().expect("probe lock").clone(),
            on_start: None,
        })
    }

    /// Props whose every incarnation runs `f` in `pre_start`.
    pub fn props_with_start(
        seen: Sender<Seen>,
        f: impl Fn(&mut Context<Scripted>) + Send + Sync + 'static,
    ) -> Props<Scripted> {
        let seen = Mutex::new(seen);
        let f: Script = Arc::new(f);
        Props::new(move || Scripted {
            seen: seen.lock().expect("probe lock").clone(),
            on_start: Some(Arc::clone(&f)),
        })
    }
}

impl Actor for Scripted {
    type Msg = Cmd;

    fn pre_start(&mut self, ctx: &mut Context<Self>) -> Outcome {
        if let Some(f) = &self.on_start {
            f(ctx);
        }
        let _ = self.seen.send(Seen::Started);
        Ok(())
    }

    fn receive(&mut self, ctx: &mut Context<Self>, msg: Cmd) -> Outcome {
        match msg {
            Cmd::Tick(t) => {
                let _ = self.seen.send(Seen::Tick(t));
            }
            Cmd::Num(n) => {
                let _ = self.seen.send(Seen::Num(n));
            }
            Cmd::Run(f) => f(ctx),
            Cmd::Fail => return Err(Box::new(ScriptedFailure)),
        }
        Ok(())
    }
}

/// Runs `f` on the actor's context and returns its result.
#[track_caller]
pub fn exec<R: Send + 'static>(
    actor: &ActorRef<Cmd>,
    f: impl Fn(&mut Context<Scripted>) -> R + Send + Sync + 'static,
) -> R {
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    actor.tell(Cmd::Run(Arc::new(move |ctx| {
        let _ = tx.lock().expect("exec lock").send(f(ctx));
    })));
    rx.recv_timeout(PATIENCE)
        .expect("the actor ran the closure")
}

/// Polls `cond` until it holds; fails the test after [`PATIENCE`]. For
/// states with no event to wait on (a timer fired); never used to assert
/// that something did *not* happen.
#[track_caller]
pub fn eventually(mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "condition not met in {PATIENCE:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}
