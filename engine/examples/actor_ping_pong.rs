//! Two actors exchange N round trips on one worker, then the system
//! terminates: a fixed workload for instruction counts of the message path.
//!
//! ```text
//! cargo build --release -p proscenium --example actor_ping_pong
//! for n in 100000 200000; do
//!     valgrind --tool=callgrind --callgrind-out-file=cg.$n target/release/examples/actor_ping_pong $n
//! done
//! # instructions per round trip = (Ir(200000) - Ir(100000)) / 100000
//! ```

use std::sync::mpsc::{channel, Sender};

use proscenium::prelude::*;

enum Pp {
    Peer(ActorRef<Pp>),
    Serve(u64, Sender<()>),
    Hit,
}

struct Player {
    peer: Option<ActorRef<Pp>>,
    left: u64,
    done: Option<Sender<()>>,
}

impl Player {
    fn hit_back(&self) {
        if let Some(peer) = &self.peer {
            peer.tell(Pp::Hit);
        }
    }
}

impl Actor for Player {
    type Msg = Pp;

    fn receive(&mut self, _: &mut Context<Self>, msg: Pp) -> Outcome {
        match msg {
            Pp::Peer(peer) => self.peer = Some(peer),
            Pp::Serve(rounds, done) => {
                self.left = rounds;
                self.done = Some(done);
                self.hit_back();
            }
            Pp::Hit => {
                if let Some(done) = &self.done {
                    self.left -= 1;
                    if self.left == 0 {
                        let _ = done.send(());
                        return Ok(());
                    }
                }
                self.hit_back();
            }
        }
        Ok(())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rounds: u64 = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 100_000,
    };
    let system = ActorSystem::builder()
        .workers(1)
        .pin_workers(false)
        .build()?;
    let player = || Player {
        peer: None,
        left: 0,
        done: None,
    };
    let a = system.spawn(Props::new(player), "a")?;
    let b = system.spawn(Props::new(player), "b")?;
    a.tell(Pp::Peer(b.clone()));
    b.tell(Pp::Peer(a.clone()));
    let (tx, rx) = channel();
    a.tell(Pp::Serve(rounds, tx));
    rx.recv()?;
    drop((a, b));
    system.terminate().wait();
    Ok(())
}
