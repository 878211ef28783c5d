//! Request-reply (`ask`): a blocking `wait()`, `.await` on the engine's own
//! scheduler and on a foreign executor (tokio), the typed timeout, late
//! replies to dead letters, and the no-reply cases.
//!
//! ARCHITECTURE.md: "`ask` ... work[s] with any executor and also offer[s] a
//! blocking `.wait()`"; the issue: "a late reply goes to dead letters; the
//! timeout is a typed error."

mod support;

use std::time::Duration;

use proscenium::prelude::*;
use support::*;

/// Answers `Get` at once, holds `Hold` replies until `Release`, drops the
/// reply of `Drop`.
struct Clerk {
    held: Vec<Reply<u64>>,
}

enum ClerkMsg {
    Get(Reply<u64>),
    Hold(Reply<u64>),
    Release(u64),
    Drop(Reply<u64>),
    Pending(Reply<usize>),
}

impl Actor for Clerk {
    type Msg = ClerkMsg;

    fn receive(&mut self, _ctx: &mut Context<Self>, msg: ClerkMsg) -> Outcome {
        match msg {
            ClerkMsg::Get(r) => r.send(7),
            ClerkMsg::Hold(r) => self.held.push(r),
            ClerkMsg::Release(v) => {
                for r in self.held.drain(..) {
                    r.send(v);
                }
            }
            ClerkMsg::Drop(r) => drop(r),
            ClerkMsg::Pending(r) => {
                let n = self.held.iter().filter(|h| h.is_pending()).count();
                r.send(n);
            }
        }
        Ok(())
    }
}

fn clerk(system: &ActorSystem) -> ActorRef<ClerkMsg> {
    system
        .spawn(Props::new(|| Clerk { held: Vec::new() }), "clerk")
        .expect("clerk")
}

/// A plain thread blocks on the answer.
#[test]
fn ask_and_wait() {
    let system = system();
    let c = clerk(&system);
    assert_eq!(c.ask(ClerkMsg::Get, PATIENCE).wait(), Ok(7));
    drop(c);
    shutdown(system);
}

/// The same future, awaited: on the engine's scheduler (a task spawned on
/// the system's handle, and `block_on`), and on tokio's runtime.
#[test]
fn ask_is_a_future_for_any_executor() {
    let system = system();
    let c = clerk(&system);

    let on_ours = {
        let c = c.clone();
        system
            .scheduler_handle()
            .spawn(async move { c.ask(ClerkMsg::Get, PATIENCE).await })
    };
    assert_eq!(on_ours.wait().expect("the task completes"), Ok(7));
    assert_eq!(
        proscenium_scheduler::block_on(c.ask(ClerkMsg::Get, PATIENCE)),
        Ok(7)
    );

    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .expect("tokio");
    let on_tokio = {
        let c = c.clone();
        tokio.block_on(async move {
            let a = c.ask(ClerkMsg::Get, PATIENCE).await;
            let b = c.ask(ClerkMsg::Get, PATIENCE).await;
            (a, b)
        })
    };
    assert_eq!(on_tokio, (Ok(7), Ok(7)));
    drop(tokio);
    drop(c);
    shutdown(system);
}

/// The timeout is a typed error carrying the timeout; the reply that comes
/// later goes to dead letters (with no recipient: nobody is waiting).
#[test]
fn a_timeout_is_typed_and_a_late_reply_is_a_dead_letter() {
    let system = system();
    let late = dead_letter_probe(&system, |d| {
        (d.recipient().is_none(), d.downcast_ref::<u64>().copied())
    });
    let c = clerk(&system);
    let timeout = Duration::from_millis(30);
    let answer = c.ask(ClerkMsg::Hold, timeout).wait();
    assert_eq!(answer, Err(AskError::Timeout(timeout)));
    assert_eq!(
        answer.expect_err("timed out").to_string(),
        "no reply within 30ms"
    );
    // The clerk can tell the asker has gone.
    assert_eq!(c.ask(ClerkMsg::Pending, PATIENCE).wait(), Ok(0));
    c.tell(ClerkMsg::Release(99));
    assert_eq!(late.next(), (true, Some(99)));
    drop(c);
    shutdown(system);
}

/// A reply in time is not affected by the timer that was armed for it (it
/// is cancelled), and a held reply is still pending until answered.
#[test]
fn a_reply_in_time_wins_over_the_timer() {
    let system = system();
    let c = clerk(&system);
    let waiting = c.ask(ClerkMsg::Hold, PATIENCE);
    assert_eq!(c.ask(ClerkMsg::Pending, PATIENCE).wait(), Ok(1));
    c.tell(ClerkMsg::Release(5));
    assert_eq!(waiting.wait(), Ok(5));
    drop(c);
    shutdown(system);
}

/// No reply at all: the actor dropped the `Reply`, or the actor had
/// terminated (then the request itself is a dead letter, addressed to it).
/// The reason tells the two apart; before, both were one `NoReply`
/// (stopping-an-actor.txt: messages "will be drained to DeadLetters, along
/// with any other messages sent to the now-dead actor instance").
#[test]
fn no_reply_when_the_reply_is_dropped_or_the_actor_is_gone() {
    let system = system();
    let requests = dead_letter_probe(&system, |d| {
        (
            d.recipient().map(|r| r.path()),
            d.downcast_ref::<ClerkMsg>()
                .is_some_and(|m| matches!(m, ClerkMsg::Get(_))),
        )
    });
    let c = clerk(&system);
    let dropped = c.ask(ClerkMsg::Drop, PATIENCE).wait();
    assert_eq!(dropped, Err(AskError::NoReply(NoReplyReason::Dropped)));
    // Said once (issue 35: it read "the request was dropped without a
    // reply: dropped").
    assert_eq!(
        dropped.expect_err("dropped").to_string(),
        "no reply: the reply was dropped unsent"
    );
    assert!(c.graceful_stop(PATIENCE).wait());
    let dead = c.ask(ClerkMsg::Get, PATIENCE).wait();
    assert_eq!(dead, Err(AskError::NoReply(NoReplyReason::DeadLetter)));
    assert_eq!(
        dead.expect_err("a dead letter").to_string(),
        "no reply: the request was never handled (a dead letter, its reply dropped with it)"
    );
    assert_eq!(
        AskError::NoReply(NoReplyReason::SystemTerminated).to_string(),
        "no reply: the system terminated while the reply was still held, unsent"
    );
    // The Reply inside the dead letter was dropped with it: the answer came
    // at once, not after the timeout. The dead letter names the clerk.
    assert_eq!(requests.next(), (Some("/user/clerk".to_owned()), true));
    drop(c);
    shutdown(system);
}

/// The reason is where the `Reply` was dropped, not whether the actor is
/// alive when the asker looks: a `Reply` handed out by the handler and
/// dropped after its actor terminated is `Dropped` (the case a caller
/// telling the two apart with `is_terminated()` got wrong), and requests
/// queued behind a PoisonPill are dead letters ("What Happens to Messages
/// That Queue Up Behind a PoisonPill? They will be drained to
/// DeadLetters").
#[test]
fn no_reply_says_where_the_reply_was_dropped() {
    let system = system();
    let c = clerk(&system);
    let stopped = c.when_terminated();
    let hold = c.ask(ClerkMsg::Hold, PATIENCE);
    let queued = c.ask(ClerkMsg::Get, PATIENCE);
    // Behind the Hold and the Get: what comes after the PoisonPill is
    // never handled.
    c.poison_pill();
    let behind = c.ask(ClerkMsg::Get, PATIENCE);
    assert_eq!(queued.wait(), Ok(7));
    assert_eq!(
        behind.wait(),
        Err(AskError::NoReply(NoReplyReason::DeadLetter))
    );
    // The held Reply went down with the clerk's state, at its stop: that
    // is a drop by code that had it, not a dead letter.
    assert!(stopped.wait_timeout(PATIENCE));
    assert_eq!(hold.wait(), Err(AskError::NoReply(NoReplyReason::Dropped)));

    // A Reply handed to a thread, which drops it once the actor is gone.
    struct Courier {
        out: std::sync::Mutex<std::sync::mpsc::Sender<Reply<u64>>>,
    }
    impl Actor for Courier {
        type Msg = Reply<u64>;
        fn receive(&mut self, ctx: &mut Context<Self>, reply: Reply<u64>) -> Outcome {
            self.out
                .lock()
                .expect("out")
                .send(reply)
                .map_err(|_| "no taker")?;
            ctx.stop_self();
            Ok(())
        }
    }
    let (out, replies) = std::sync::mpsc::channel();
    let out = std::sync::Mutex::new(out);
    let courier = system
        .spawn(
            Props::new(move || Courier {
                out: std::sync::Mutex::new(out.lock().expect("out").clone()),
            }),
            "courier",
        )
        .expect("courier");
    let ask = courier.ask(|r| r, PATIENCE);
    let reply = replies.recv_timeout(PATIENCE).expect("handed out");
    assert!(courier.when_terminated().wait_timeout(PATIENCE));
    assert!(courier.is_terminated());
    drop(reply);
    assert_eq!(ask.wait(), Err(AskError::NoReply(NoReplyReason::Dropped)));
    drop((c, courier));
    shutdown(system);
}

/// `is_ready` and `try_take` look at an ask without blocking: nothing
/// before the answer, the answer once, then nothing; a timeout and a
/// dropped reply come the same way.
#[test]
fn an_ask_can_be_checked_without_blocking() {
    let system = system();
    let c = clerk(&system);
    let mut held = c.ask(ClerkMsg::Hold, PATIENCE);
    // The clerk holds it: handled (a later ask is answered first), no answer.
    assert_eq!(c.ask(ClerkMsg::Get, PATIENCE).wait(), Ok(7));
    assert!(!held.is_ready());
    assert_eq!(held.try_take(), None);
    c.tell(ClerkMsg::Release(41));
    // No sleep: the answer's arrival is the event waited on (`wait` on a
    // second ask that the clerk handles after the release).
    assert_eq!(c.ask(ClerkMsg::Get, PATIENCE).wait(), Ok(7));
    assert!(held.is_ready());
    assert_eq!(held.try_take(), Some(Ok(41)));
    assert!(!held.is_ready(), "taken");
    assert_eq!(held.try_take(), None, "only once");

    let mut dropped = c.ask(ClerkMsg::Drop, PATIENCE);
    assert_eq!(c.ask(ClerkMsg::Get, PATIENCE).wait(), Ok(7));
    assert_eq!(
        dropped.try_take(),
        Some(Err(AskError::NoReply(NoReplyReason::Dropped)))
    );

    // A timeout: the timer completes it; `is_ready` turns true by itself.
    let mut late = c.ask(ClerkMsg::Hold, Duration::from_millis(1));
    let give_up = std::time::Instant::now() + PATIENCE;
    while !late.is_ready() {
        assert!(
            std::time::Instant::now() < give_up,
            "the timeout never fired"
        );
        std::thread::yield_now();
    }
    assert_eq!(
        late.try_take(),
        Some(Err(AskError::Timeout(Duration::from_millis(1))))
    );
    drop(c);
    shutdown(system);
}

/// `wait` after `try_take` took the answer is a misuse, and says so.
#[test]
#[should_panic(expected = "Ask::wait after try_take took the answer")]
fn wait_after_try_take_panics() {
    let system = system();
    let c = clerk(&system);
    let mut ask = c.ask(ClerkMsg::Get, PATIENCE);
    while ask.try_take().is_none() {
        std::thread::yield_now();
    }
    let _ = ask.wait();
}
