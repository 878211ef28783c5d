//! Test actors shared by the supervision and lifecycle suites: a `Worker`
//! that counts, fails on demand and logs its lifecycle, and a `Boss` that
//! supervises workers with a configurable strategy and logs its decisions.
#![allow(dead_code, unreachable_pub)]

use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proscenium::prelude::*;
use proscenium::{Directive, StrategyKind};

/// A lifecycle log line: `"<tag> <event>"`.
pub type Log = Sender<String>;

fn log(tx: &Log, tag: &str, event: &str) {
    let _ = tx.send(format!("{tag} {event}"));
}

#[derive(Debug, thiserror::Error)]
#[error("worker failure")]
pub struct WorkerFailure;

pub enum WorkerMsg {
    Inc,
    Get(Reply<u64>),
    /// Return `Err(WorkerFailure)`.
    Fail,
    /// Panic with this message.
    Panic(&'static str),
    /// Log `"<tag> handled <n>"`.
    Note(u32),
    /// Spawn a worker child with this tag (and the same log), reply with it.
    SpawnChild(String, Reply<ActorRef<WorkerMsg>>),
    /// Log `"<tag> blocked"`, then block the handler until the channel
    /// yields (a test-controlled gate; see [`block`]).
    Block(Gate),
    /// Stop itself through its context.
    StopSelf,
    /// Stop the given actor (a child) through its context.
    StopOther(ActorId),
    /// Watch the given actor.
    Watch(ActorId),
    /// Stop watching the given actor.
    Unwatch(ActorId),
}

/// The shared end a blocked handler waits on.
pub type Gate = Arc<Mutex<std::sync::mpsc::Receiver<()>>>;

/// A gate and the sender that opens it (one `send` per pass).
pub fn gate() -> (Sender<()>, Gate) {
    let (tx, rx) = std::sync::mpsc::channel();
    (tx, Arc::new(Mutex::new(rx)))
}

/// A `Block` message and the sender that opens its gate.
pub fn block() -> (Sender<()>, WorkerMsg) {
    let (tx, gate) = gate();
    (tx, WorkerMsg::Block(gate))
}

/// Counts, fails on demand, and logs `started`, `stopped`,
/// `pre_restart`, `post_restart` with its tag.
pub struct Worker {
    pub tag: String,
    pub log: Log,
    pub count: u64,
    /// Whether `pre_restart` keeps the children (not Akka's default).
    pub keep_children: bool,
}

impl Worker {
    pub fn props(tag: &str, log: &Log) -> Props<Worker> {
        let (tag, log) = (tag.to_owned(), log.clone());
        Props::new(move || {
            let _ = log.send(format!("{tag} created"));
            Worker {
                tag: tag.clone(),
                log: log.clone(),
                count: 0,
                keep_children: false,
            }
        })
    }

    pub fn props_keeping_children(tag: &str, log: &Log) -> Props<Worker> {
        let (tag, log) = (tag.to_owned(), log.clone());
        Props::new(move || {
            let _ = log.send(format!("{tag} created"));
            Worker {
                tag: tag.clone(),
                log: log.clone(),
                count: 0,
                keep_children: true,
            }
        })
    }
}

impl Actor for Worker {
    type Msg = WorkerMsg;

    fn receive(&mut self, ctx: &mut Context<Self>, msg: WorkerMsg) -> Outcome {
        match msg {
            WorkerMsg::Inc => self.count += 1,
            WorkerMsg::Get(r) => r.send(self.count),
            WorkerMsg::Fail => return Err(Box::new(WorkerFailure)),
            WorkerMsg::Panic(m) => panic!("{m}"),
            WorkerMsg::Note(n) => log(&self.log, &self.tag, &format!("handled {n}")),
            WorkerMsg::SpawnChild(tag, reply) => {
                let child = ctx.spawn(Worker::props(&tag, &self.log), &tag)?;
                reply.send(child);
            }
            WorkerMsg::Block(gate) => {
                log(&self.log, &self.tag, "blocked");
                let _ = gate.lock().expect("gate").recv();
            }
            WorkerMsg::StopSelf => ctx.stop_self(),
            WorkerMsg::StopOther(who) => ctx.stop(&who),
            WorkerMsg::Watch(who) => ctx.watch(&who),
            WorkerMsg::Unwatch(who) => ctx.unwatch(&who),
        }
        Ok(())
    }

    fn pre_start(&mut self, _ctx: &mut Context<Self>) -> Outcome {
        log(&self.log, &self.tag, "started");
        Ok(())
    }

    fn post_stop(&mut self, _ctx: &mut Context<Self>) {
        log(&self.log, &self.tag, "stopped");
    }

    fn on_terminated(&mut self, _ctx: &mut Context<Self>, who: ActorId) -> Outcome {
        log(
            &self.log,
            &self.tag,
            &format!("saw {} terminate", who.name()),
        );
        Ok(())
    }

    fn pre_restart(&mut self, ctx: &mut Context<Self>, _failure: &Failure) {
        log(&self.log, &self.tag, "pre_restart");
        if !self.keep_children {
            ctx.stop_all_children();
        }
        self.post_stop(ctx);
    }

    fn post_restart(&mut self, ctx: &mut Context<Self>, _failure: &Failure) -> Outcome {
        log(&self.log, &self.tag, "post_restart");
        self.pre_start(ctx)
    }
}

/// Asks a worker to spawn a child and returns it.
pub fn spawn_child(parent: &ActorRef<WorkerMsg>, tag: &str) -> ActorRef<WorkerMsg> {
    parent
        .ask(
            |r| WorkerMsg::SpawnChild(tag.to_owned(), r),
            Duration::from_secs(20),
        )
        .wait()
        .expect("the parent spawns the child")
}

/// The count of a worker (also proves it handled everything sent before).
pub fn count(worker: &ActorRef<WorkerMsg>) -> u64 {
    worker
        .ask(WorkerMsg::Get, Duration::from_secs(20))
        .wait()
        .expect("the worker answers")
}

pub enum BossMsg {
    /// Spawn a worker child; reply with it.
    Hire(Props<Worker>, String, Reply<ActorRef<WorkerMsg>>),
    Fail,
    /// Log `"boss blocked"`, then block until the gate opens.
    Block(Gate),
}

/// A supervisor with a fixed directive (or the default decider), which logs
/// `"boss decided <directive> for <child path>: <failure>"`.
pub struct Boss {
    pub log: Log,
    pub kind: StrategyKind,
    pub directive: Option<Directive>,
    pub max_retries: Option<u32>,
}

impl Boss {
    pub fn props(log: &Log, kind: StrategyKind, directive: Option<Directive>) -> Props<Boss> {
        Boss::props_with_retries(log, kind, directive, None)
    }

    pub fn props_with_retries(
        log: &Log,
        kind: StrategyKind,
        directive: Option<Directive>,
        max_retries: Option<u32>,
    ) -> Props<Boss> {
        let log = log.clone();
        Props::new(move || Boss {
            log: log.clone(),
            kind,
            directive,
            max_retries,
        })
    }
}

impl Actor for Boss {
    type Msg = BossMsg;

    fn receive(&mut self, ctx: &mut Context<Self>, msg: BossMsg) -> Outcome {
        match msg {
            BossMsg::Hire(props, name, reply) => reply.send(ctx.spawn(props, &name)?),
            BossMsg::Fail => return Err(Box::new(WorkerFailure)),
            BossMsg::Block(gate) => {
                let _ = self.log.send("boss blocked".to_owned());
                let _ = gate.lock().expect("gate").recv();
            }
        }
        Ok(())
    }

    fn supervisor_strategy(&self) -> SupervisorStrategy {
        let log = self.log.clone();
        let fixed = self.directive;
        let base = match self.kind {
            StrategyKind::OneForOne => SupervisorStrategy::one_for_one(),
            StrategyKind::AllForOne => SupervisorStrategy::all_for_one(),
        };
        let base = match self.max_retries {
            Some(n) => base.max_retries(n),
            None => base,
        };
        base.decider(move |f: &Failure| {
            let d = fixed.unwrap_or_else(|| proscenium::default_decider(f));
            let _ = log.send(format!("boss decided {d:?} for {}: {f}", f.actor_path()));
            d
        })
    }
}

/// Hires a worker under a boss.
pub fn hire(boss: &ActorRef<BossMsg>, props: Props<Worker>, name: &str) -> ActorRef<WorkerMsg> {
    boss.ask(
        |r| BossMsg::Hire(props, name.to_owned(), r),
        Duration::from_secs(20),
    )
    .wait()
    .expect("the boss hires")
}
