//! Timeouts and waits: an ask or a graceful stop times out on time however
//! busy the workers are, resolves even when the system terminates first,
//! and blocking on a worker fails at once with a message that says why
//! (issue 12, items 4, 5 and 7).
#![allow(clippy::unwrap_used)] // tests may unwrap
mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proscenium::prelude::*;
use proscenium_scheduler::block_on;
use support::{Probe, PATIENCE};

/// A 1-worker system: a blocked handler holds the only worker.
fn one_worker_system() -> ActorSystem {
    ActorSystem::builder()
        .name("timeouts")
        .workers(1)
        .pin_workers(false)
        .dead_letter_logging(0, Duration::from_secs(1))
        .build()
        .unwrap()
}

enum Msg {
    /// Block the worker until the gate opens (or `PATIENCE` passes), with
    /// the flag set meanwhile.
    Block(Arc<Mutex<Receiver<()>>>, Sender<()>, Arc<AtomicBool>),
    /// Answer.
    Ping(Reply<u32>),
    /// Hand the reply to someone who holds it and never answers in time.
    Hold(Reply<u32>, Sender<Reply<u32>>),
}

struct Server;

impl Actor for Server {
    type Msg = Msg;
    fn receive(&mut self, _ctx: &mut Context<Self>, msg: Msg) -> Outcome {
        match msg {
            Msg::Block(gate, entered, blocked) => {
                blocked.store(true, Ordering::SeqCst);
                entered.send(()).unwrap();
                let _ = gate.lock().unwrap().recv_timeout(PATIENCE);
                blocked.store(false, Ordering::SeqCst);
            }
            Msg::Ping(reply) => reply.send(7),
            Msg::Hold(reply, keeper) => keeper.send(reply).unwrap(),
        }
        Ok(())
    }
}

/// Blocks the system's only worker in `server`'s handler; returns the gate
/// that releases it and a flag that says it is still blocked.
fn block_the_worker(server: &ActorRef<Msg>) -> (Sender<()>, Arc<AtomicBool>) {
    let (open, gate) = mpsc::channel();
    let entered = Probe::new();
    let blocked = Arc::new(AtomicBool::new(false));
    server.tell(Msg::Block(
        Arc::new(Mutex::new(gate)),
        entered.tx(),
        Arc::clone(&blocked),
    ));
    entered.next();
    (open, blocked)
}

/// Regression (item 4): an ask's timeout ran on a worker, so with every
/// worker busy `ask(100 ms).wait()` returned only when a worker came free
/// (2.95 s behind a 3 s handler). The timer thread now completes it, and
/// `wait` keeps its own deadline: both the blocking wait and the future
/// time out while the worker is still blocked.
#[test]
fn an_ask_times_out_while_every_worker_is_busy() {
    let system = one_worker_system();
    let server = system.spawn(Props::new(|| Server), "server").unwrap();
    let other = system.spawn(Props::new(|| Server), "other").unwrap();
    let (open, blocked) = block_the_worker(&server);
    let timeout = Duration::from_millis(100);

    let waited = other.ask(Msg::Ping, timeout).wait();
    assert_eq!(waited, Err(AskError::Timeout(timeout)));
    assert!(
        blocked.load(Ordering::SeqCst),
        "timed out while the worker was blocked"
    );

    // The future, polled by an executor that is not the system's: only
    // the timer can wake it.
    let awaited = block_on(other.ask(Msg::Ping, timeout));
    assert_eq!(awaited, Err(AskError::Timeout(timeout)));

    // A graceful stop's timeout too: the blocked actor cannot stop in time.
    assert!(!block_on(server.graceful_stop(timeout)));
    assert!(blocked.load(Ordering::SeqCst));

    open.send(()).unwrap();
    drop((server, other));
    support::shutdown(system);
}

/// Regression (item 5): stopping the timer thread dropped pending timers
/// without firing them, so an ask whose reply was held outside the system
/// blocked `wait()` (and `.await`) forever once the system terminated.
/// Now it resolves, with `NoReply(SystemTerminated)`.
#[test]
fn a_pending_ask_resolves_when_the_system_terminates() {
    let system = support::system();
    let server = system.spawn(Props::new(|| Server), "server").unwrap();
    let held = Probe::new();
    let an_hour = Duration::from_secs(3600);

    let waiting = server.ask(|r| Msg::Hold(r, held.tx()), an_hour);
    let awaiting = server.ask(|r| Msg::Hold(r, held.tx()), an_hour);
    let replies = held.take(2);
    let results = Probe::new();
    let tx = results.tx();
    let waiter = std::thread::spawn(move || tx.send(waiting.wait()).unwrap());
    let tx = results.tx();
    let awaiter = std::thread::spawn(move || tx.send(block_on(awaiting)).unwrap());

    drop(server);
    let report = system
        .terminate()
        .wait_timeout(PATIENCE)
        .expect("terminates");
    assert_eq!(
        results.next(),
        Err(AskError::NoReply(NoReplyReason::SystemTerminated))
    );
    assert_eq!(
        results.next(),
        Err(AskError::NoReply(NoReplyReason::SystemTerminated))
    );
    waiter.join().unwrap();
    awaiter.join().unwrap();
    // The late answers have nowhere to go.
    for reply in replies {
        reply.send(1);
    }
    assert!(report.quiesce.is_some());
}

enum Blocker {
    /// Calls a blocking wait in the handler and reports what happened.
    Try(&'static str, ActorRef<Msg>, Sender<String>),
}

struct Waiter;

impl Actor for Waiter {
    type Msg = Blocker;
    fn receive(&mut self, ctx: &mut Context<Self>, msg: Blocker) -> Outcome {
        let Blocker::Try(what, target, report) = msg;
        let system = ctx.system().clone();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match what {
            "ask" => format!("{:?}", target.ask(Msg::Ping, Duration::from_secs(2)).wait()),
            "graceful_stop" => format!("{}", target.graceful_stop(Duration::from_secs(2)).wait()),
            "termination" => format!(
                "{:?}",
                system
                    .when_terminated()
                    .wait_timeout(Duration::from_secs(2))
            ),
            "block_on" => format!(
                "{:?}",
                block_on(target.ask(Msg::Ping, Duration::from_secs(2)))
            ),
            _ => unreachable!(),
        }));
        let text = match outcome {
            Ok(returned) => format!("returned {returned}"),
            Err(payload) => payload
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "a panic without a message".to_owned()),
        };
        report.send(text).unwrap();
        Ok(())
    }
}

/// Regression (item 7): blocking on a worker used to hold it until a
/// timeout (with one worker the ask's target cannot run: a 2 s stall, then
/// a timeout), or deadlock. Every blocking wait now panics at once on a
/// worker (the handler's failure goes to its supervisor like any other),
/// with a message that says what to do instead.
#[test]
fn blocking_on_a_worker_fails_at_once_with_a_clear_message() {
    let system = one_worker_system();
    let waiter = system.spawn(Props::new(|| Waiter), "waiter").unwrap();
    let target = system.spawn(Props::new(|| Server), "target").unwrap();
    let reports = Probe::new();
    for what in ["ask", "graceful_stop", "termination", "block_on"] {
        // A graceful stop sends its stop signal before it waits.
        let target = if what == "graceful_stop" {
            system.spawn(Props::new(|| Server), "victim").unwrap()
        } else {
            target.clone()
        };
        waiter.tell(Blocker::Try(what, target, reports.tx()));
        let text = reports.next();
        assert!(
            text.contains("called on scheduler worker") && text.contains("Await the future"),
            "{what}: {text}"
        );
    }
    // A task on a worker: `JoinHandle::wait` refuses too.
    let handle = system.scheduler_handle().clone();
    let inner = handle.clone();
    let task = handle.spawn(async move {
        let nested = inner.spawn(async { 1 });
        nested.wait()
    });
    match block_on(task) {
        Err(proscenium_scheduler::JoinError::Panicked(message)) => {
            assert!(
                message.contains("JoinHandle::wait called on scheduler worker"),
                "{message}"
            )
        }
        other => panic!("expected a panic, got {other:?}"),
    }
    // The target is untouched: it still answers.
    assert_eq!(target.ask(Msg::Ping, PATIENCE).wait(), Ok(7));
    drop((waiter, target));
    support::shutdown(system);
}
