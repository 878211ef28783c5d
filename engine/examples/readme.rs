//! The README's "An actor in twenty lines", as is (engine/src/lib.rs
//! checks that the two stay identical).

use proscenium::prelude::*;
use std::time::Duration;

struct Counter {
    n: u64,
}
enum CounterMsg {
    Add(u64),
    Get(Reply<u64>),
}

impl Actor for Counter {
    type Msg = CounterMsg;
    fn receive(&mut self, _ctx: &mut Context<Self>, msg: CounterMsg) -> Outcome {
        match msg {
            CounterMsg::Add(k) => self.n += k,
            CounterMsg::Get(reply) => reply.send(self.n),
        }
        Ok(()) // an Err (or a panic) fails the actor; its parent's strategy decides
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let system = ActorSystem::new("demo")?;
    let counter = system.spawn(Props::new(|| Counter { n: 0 }), "counter")?;
    counter.tell(CounterMsg::Add(1));
    assert_eq!(
        counter.ask(CounterMsg::Get, Duration::from_secs(1)).wait(),
        Ok(1)
    );
    assert!(counter.graceful_stop(Duration::from_secs(5)).wait());
    system.terminate().wait();
    Ok(())
}
