//! No runnable waits behind a running handler while a worker is idle
//! (issue 12, item 6).
#![allow(clippy::unwrap_used)] // tests may unwrap
mod support;

use std::sync::mpsc::{self, Sender};
use std::time::{Duration, Instant};

use proscenium::prelude::*;

struct B;

impl Actor for B {
    type Msg = (Instant, Sender<Duration>);
    fn receive(&mut self, _ctx: &mut Context<Self>, (sent, tx): Self::Msg) -> Outcome {
        tx.send(sent.elapsed()).unwrap();
        Ok(())
    }
}

struct A {
    b: ActorRef<(Instant, Sender<Duration>)>,
}

impl Actor for A {
    type Msg = Sender<Result<Duration, mpsc::RecvTimeoutError>>;
    fn receive(&mut self, _ctx: &mut Context<Self>, report: Self::Msg) -> Outcome {
        // Tell B, then work on: here, until B has handled the message (a
        // stand-in for 200 ms of work that makes the wait visible).
        let (tx, rx) = mpsc::channel();
        self.b.tell((Instant::now(), tx));
        report
            .send(rx.recv_timeout(Duration::from_secs(10)))
            .unwrap();
        Ok(())
    }
}

/// Regression (item 6): A's handler tells B and works on; B went to the
/// LIFO slot of A's worker, which no other worker could take, so B waited
/// for the whole handler even with the second worker idle. Here A waits for
/// B: it used to give up after 10 s. The delay B sees is printed; it is
/// bounded by the stall monitor's look and confirm interval (5 + 1 ms)
/// plus a wake-up, far below any
/// handler worth noticing.
#[test]
fn a_message_sent_by_a_long_handler_is_handled_by_the_idle_worker() {
    let system = support::system();
    let b = system.spawn(Props::new(|| B), "b").unwrap();
    let a = system
        .spawn(Props::new(move || A { b: b.clone() }), "a")
        .unwrap();
    let mut delays = Vec::new();
    for _ in 0..5 {
        let (tx, rx) = mpsc::channel();
        a.tell(tx);
        let delay = rx
            .recv_timeout(support::PATIENCE)
            .unwrap()
            .expect("B ran while A's handler was still running");
        delays.push(delay);
    }
    eprintln!("B's delay behind A's handler: {delays:?}");
    drop(a);
    support::shutdown(system);
}
