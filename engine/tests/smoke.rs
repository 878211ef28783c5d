mod support;
use proscenium::prelude::*;
use std::time::Duration;
use support::*;

struct Counter(u64);
enum Msg {
    Add(u64),
    Get(Reply<u64>),
    Fail,
    Panic,
}
impl Actor for Counter {
    type Msg = Msg;
    fn receive(&mut self, _ctx: &mut Context<Self>, msg: Msg) -> Outcome {
        match msg {
            Msg::Add(k) => self.0 += k,
            Msg::Get(r) => r.send(self.0),
            Msg::Fail => return Err("fail".into()),
            Msg::Panic => panic!("boom"),
        }
        Ok(())
    }
}

#[test]
fn smoke() {
    let system = system();
    let c = system.spawn(Props::new(|| Counter(0)), "c").unwrap();
    c.tell(Msg::Add(2));
    assert_eq!(c.ask(Msg::Get, Duration::from_secs(5)).wait(), Ok(2));
    c.tell(Msg::Fail);
    assert_eq!(c.ask(Msg::Get, Duration::from_secs(5)).wait(), Ok(0));
    c.tell(Msg::Add(1));
    c.tell(Msg::Panic);
    assert_eq!(c.ask(Msg::Get, Duration::from_secs(5)).wait(), Ok(0));
    assert!(c.graceful_stop(Duration::from_secs(5)).wait());
    c.tell(Msg::Add(1));
    assert!(system.dead_letter_count() >= 1);
    drop(c);
    let sys2 = system.clone();
    shutdown(system);
    assert_eq!(sys2.live_cells(), 0);
}
